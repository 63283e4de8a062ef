"""The training loop: tf.compat.v1.train.MonitoredTrainingSession with slim's behaviour.

Checkpoints and summaries go to train_dir (chief only); a restarted run resumes from the
latest checkpoint there; the loop stops at the last step or on a non-finite loss.
"""
import math
import time

import tensorflow.compat.v1 as tf

AUX_LOGITS_WEIGHT = 0.4  # Weight of the auxiliary head's loss (inception), as in slim.


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or Inf; training stopped before checkpointing that step."""


def session_config(num_cpu_devices=None, log_device_placement=False):
    """A ConfigProto with soft placement (ops without a kernel on the requested device,
    e.g. no GPU kernel, fall back to the CPU) and `num_cpu_devices` CPU devices (None:
    TensorFlow's default of one)."""
    config = tf.ConfigProto(allow_soft_placement=True,
                            log_device_placement=log_device_placement)
    if num_cpu_devices:
        config.device_count['CPU'] = num_cpu_devices
    return config


class MonitorHook(tf.train.SessionRunHook):
    """Checks the loss every step, logs progress every `every_n_steps` local steps and
    stops training at global step `last_step` (None: never).

    train_tensor: the tensor each step runs; it must return the loss (as deploy()'s
    train_op does). Logs global step, loss, learning rate, global examples/sec and
    sec/step; writes the throughput to `summary_dir` (None: no summaries). Raises
    NonFiniteLossError when the loss is NaN or Inf; it must run before the checkpoint hook
    so that step is never saved.

    examples_per_step: examples one global step stands for (batch_size x num_clones, x
    replicas_to_aggregate when sync), so examples/sec counts every worker's work.
    """

    def __init__(self, train_tensor, learning_rate, examples_per_step, every_n_steps,
                 summary_dir=None, last_step=None):
        self._train_tensor = train_tensor
        self._last_step = last_step
        self._learning_rate = learning_rate
        self._examples_per_step = examples_per_step
        self._every_n_steps = every_n_steps
        self._summary_dir = summary_dir

    def begin(self):
        self._global_step = tf.train.get_global_step()
        with tf.control_dependencies([self._train_tensor]):  # The step after the update.
            step_after_update = tf.identity(self._global_step)
        self._fetches = {'loss': self._train_tensor, 'learning_rate': self._learning_rate,
                         'global_step': step_after_update}
        self.global_step = None  # The last global step seen, None before the first run.
        self._local_steps = 0
        self._last_time = None
        self._last_global_step = None

    def after_create_session(self, session, coord):
        if self._last_step and session.run(self._global_step) >= self._last_step:
            coord.request_stop()  # Restored at the last step already: run none.

    def before_run(self, run_context):
        return tf.train.SessionRunArgs(self._fetches)

    def after_run(self, run_context, run_values):
        values = run_values.results
        step, loss = values['global_step'], values['loss']
        self.global_step = step
        if not math.isfinite(loss):
            raise NonFiniteLossError(
                f'loss is {loss} at global step {step}: training stopped; the checkpoints '
                'already in train_dir are kept (try a lower --learning_rate)')
        if self._last_step and step >= self._last_step:
            run_context.request_stop()
        self._local_steps += 1
        now = time.time()
        if self._last_time is None:  # The first step includes start-up: measure from it.
            self._last_time, self._last_global_step, self._last_local_steps = now, step, 1
            return
        if self._local_steps % self._every_n_steps:
            return
        elapsed = now - self._last_time
        examples_per_sec = (step - self._last_global_step) * self._examples_per_step / elapsed
        sec_per_step = elapsed / (self._local_steps - self._last_local_steps)
        tf.logging.info('step %d: loss = %.4f, learning rate = %.6g, %.1f examples/sec, '
                        '%.3f sec/step', step, loss, values['learning_rate'],
                        examples_per_sec, sec_per_step)
        if self._summary_dir:
            summary = tf.Summary(value=[
                tf.Summary.Value(tag='throughput/examples_per_sec', simple_value=examples_per_sec),
                tf.Summary.Value(tag='throughput/sec_per_step', simple_value=sec_per_step)])
            tf.summary.FileWriterCache.get(self._summary_dir).add_summary(summary, step)
        self._last_time, self._last_global_step = now, step
        self._last_local_steps = self._local_steps


def train(train_tensor, train_dir, monitor, master='', is_chief=True, scaffold=None, hooks=(),
          chief_only_hooks=(), save_summaries_secs=600, save_interval_secs=600, config=None):
    """Runs `train_tensor` until `monitor` (a MonitorHook) stops it at its last step.

    The monitor runs before the checkpoint hook and every other hook. scaffold: a
    tf.train.Scaffold (summary op, fine-tuning init_fn), None for the default. Returns the
    last global step run, or None if no step ran (the checkpoint was at the last step).
    """
    hooks = list(hooks)
    # MonitoredTrainingSession runs chief-only hooks before its checkpoint hook and the
    # other hooks after it: the monitor must see a non-finite loss before a save can.
    chief_only_hooks = [monitor, *chief_only_hooks] if is_chief else list(chief_only_hooks)
    if not is_chief:
        hooks.insert(0, monitor)
    with tf.train.MonitoredTrainingSession(
            master=master, is_chief=is_chief, checkpoint_dir=train_dir, scaffold=scaffold,
            hooks=hooks, chief_only_hooks=chief_only_hooks,
            save_checkpoint_secs=save_interval_secs, save_summaries_secs=save_summaries_secs,
            log_step_count_steps=0, config=config) as sess:
        while not sess.should_stop():
            sess.run(train_tensor)
    return monitor.global_step


def clone_devices(num_clones, clone_on_cpu):
    """Devices for the clones and the CPU device count the session needs.

    With GPUs (or clone_on_cpu, slim's all-on-CPU:0 mode) returns (None, None): slim's
    default devices. On a machine without GPUs, clone i runs on its own CPU:i device so the
    clones run in parallel: returns (['/device:CPU:0', ...], num_clones).
    """
    if clone_on_cpu or tf.config.list_physical_devices('GPU'):
        return None, None
    return [f'/device:CPU:{i}' for i in range(num_clones)], num_clones


def classification_model_fn(network_fn, iterator, inputs_device, num_classes, label_smoothing):
    """model_fn for deploy(): takes the next (images, labels) batch of `iterator` on
    `inputs_device`, adds the cross-entropy losses (the auxiliary head's weighted
    AUX_LOGITS_WEIGHT) and slim's activation summaries, and returns the end points."""
    def model_fn():
        with tf.device(inputs_device):
            images, labels = iterator.get_next()
        logits, end_points = network_fn(images)
        onehot_labels = tf.one_hot(labels, num_classes)
        if 'AuxLogits' in end_points:
            tf.losses.softmax_cross_entropy(onehot_labels, end_points['AuxLogits'],
                                            label_smoothing=label_smoothing,
                                            weights=AUX_LOGITS_WEIGHT, scope='aux_loss')
        tf.losses.softmax_cross_entropy(onehot_labels, logits, label_smoothing=label_smoothing)
        for name, tensor in end_points.items():
            tf.summary.histogram(f'activations/{name}', tensor)
            tf.summary.scalar(f'sparsity/{name}', tf.nn.zero_fraction(tensor))
        return end_points
    return model_fn
