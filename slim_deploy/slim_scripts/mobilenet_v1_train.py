r"""slim's mobilenet_v1_train: trains MobileNet v1 with slim.learning.train, in float or,
with --quantize, quantization-aware (tf.contrib.quantize's training rewrite, which
slim_deploy.deployment.quantize provides).

    python -m nets.mobilenet_v1_train --dataset_dir=IMAGENET --checkpoint_dir=FLOAT
    python -m nets.mobilenet_v1_train --dataset_dir=IMAGENET --checkpoint_dir=QUANTIZED \
        --quantize --fine_tune_checkpoint=FLOAT

As slim's: --batch_size images of the 'train' split of --dataset_dir's TFRecords come
through slim's DatasetDataProvider and a batching queue, with MobileNet v1's (Inception's)
training preprocessing to --image_size pixels (values in [-1, 1]); the loss is the softmax
cross-entropy over --num_classes one-hot labels plus the weight decay; plain gradient
descent, its learning rate 0.045 (1e-4 when fine-tuning) decayed by 0.94 every 2.5 epochs
(staircase); with --ps_tasks the variables go to the ps tasks. --quantize rewrites the
model for quantization-aware training before its gradients (tf.contrib.quantize's rewrite:
weights per tensor, the models slim's mobilenet_v1.md converts to uint8): the weights and
activations are quantized from global step 250000 when training from scratch (the ranges
learn from the first step), from the first step when fine-tuning. --fine_tune_checkpoint seeds a
--checkpoint_dir that holds no checkpoint: every variable it holds is restored (a float
checkpoint has no ranges: they start afresh) and the global step restarts at 0.

What differs from slim's:
- --dataset_name (default 'imagenet', slim's only choice) trains on any dataset of
  dataset_factory; an epoch is its train split's size (slim's 1271167 for ImageNet, whose
  train split holds 1281167 images).
- --fine_tune_checkpoint may name a directory (its latest checkpoint).
- A user's mistake (a bad flag, a dataset without files) ends in one line, exit code 2.
- Its sibling scripts (mobilenet_v1_train, mobilenet_v1_eval, post_training_quantization)
  import together in one process (slim's raised DuplicateFlagError): the flags train and
  eval share are defined once, in mobilenet_v1_input, and every flag is overridable, the
  module imported last setting the defaults.
"""
if __name__ == '__main__':  # Run as a script: quiet TensorFlow's start-up, before importing it.
    from slim_deploy.image_classifier import verbosity
    verbosity.start()

import tensorflow.compat.v1 as tf  # noqa: E402
import tf_slim as slim  # noqa: E402

from slim_deploy.datasets import dataset_factory  # noqa: E402
from slim_deploy.deployment import quantize  # noqa: E402
from slim_deploy.nets import mobilenet_v1  # noqa: E402
from slim_deploy.slim_scripts import mobilenet_v1_input  # noqa: E402
from slim_deploy.training import checkpoints  # noqa: E402

flags = tf.app.flags
FLAGS = flags.FLAGS

_LEARNING_RATE = 0.045
_FINE_TUNE_LEARNING_RATE = 1e-4
_LEARNING_RATE_DECAY_FACTOR = 0.94
_NUM_EPOCHS_PER_DECAY = 2.5
_QUANT_DELAY = 250000  # Steps of float training before quantizing, from scratch.


# slim's flags: those mobilenet_v1_eval shares, defined once (mobilenet_v1_input), then this
# script's own. All are overridable (allow_override), so that the sibling scripts
# (post_training_quantization defines some of the same names) import together in one
# process, the flag defined last setting the default.
mobilenet_v1_input.define_flags(batch_size=64)
flags.adopt_module_key_flags(mobilenet_v1_input)
flags.DEFINE_integer('task', 0, 'This worker\'s index; 0 is the chief.', allow_override=True)
flags.DEFINE_integer('ps_tasks', 0, 'How many parameter servers hold the variables.',
                     allow_override=True)
flags.DEFINE_integer('number_of_steps', None, 'Global step to stop at; None: never.',
                     allow_override=True)
flags.DEFINE_string('fine_tune_checkpoint', '', 'A checkpoint (or a directory: its latest) '
                    'to start from; empty: from scratch.', allow_override=True)
flags.DEFINE_integer('log_every_n_steps', 100, 'Steps between two loss lines.',
                     allow_override=True)
flags.DEFINE_integer('save_summaries_secs', 100, 'Seconds between two summaries.',
                     allow_override=True)
flags.DEFINE_integer('save_interval_secs', 100, 'Seconds between two checkpoints.',
                     allow_override=True)


def get_learning_rate():
    """The initial learning rate: 1e-4 with --fine_tune_checkpoint (the model is trained
    already), else 0.045."""
    return _FINE_TUNE_LEARNING_RATE if FLAGS.fine_tune_checkpoint else _LEARNING_RATE


def get_quant_delay():
    """The global step from which --quantize quantizes: 0 with --fine_tune_checkpoint (the
    model is trained already), else 250000 (a model trained from scratch learns in float
    first)."""
    return 0 if FLAGS.fine_tune_checkpoint else _QUANT_DELAY


def imagenet_input(is_training):
    """Batches of --dataset_name's 'train' split (is_training: shuffled, randomly
    distorted) or 'validation' split, from --dataset_dir.

    Returns (images, labels): float32 [batch_size, image_size, image_size, channels] in
    [-1, 1], and float32 [batch_size, num_classes] one-hot labels.
    """
    images, labels = mobilenet_v1_input.batches(
        FLAGS.dataset_name, 'train' if is_training else 'validation', FLAGS.dataset_dir,
        FLAGS.image_size, FLAGS.batch_size, is_training)
    return images, slim.one_hot_encoding(labels, FLAGS.num_classes)


def build_model():
    """Builds the training graph: inputs, MobileNet v1, its loss, with --quantize the
    training rewrite (batch norm folded, fake quantization), the optimizer and summaries.

    Returns (g, train_tensor): the tf.Graph, and the tensor that runs a training step and
    gives the total loss.
    """
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(FLAGS.ps_tasks)):
        # Made here, where --ps_tasks places it, before the rewrite needs it.
        global_step = tf.train.get_or_create_global_step()
        inputs, labels = imagenet_input(is_training=True)
        with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(is_training=True)):
            logits, _ = mobilenet_v1.mobilenet_v1(
                inputs, is_training=True, depth_multiplier=FLAGS.depth_multiplier,
                num_classes=FLAGS.num_classes)
        tf.losses.softmax_cross_entropy(labels, logits)
        if FLAGS.quantize:  # Before the gradients, which must see the fake quantization.
            quantize.create_training_graph(quant_delay=get_quant_delay())
        total_loss = tf.losses.get_total_loss(name='total_loss')
        train_size = dataset_factory.get_info(FLAGS.dataset_name).num_samples('train')
        decay_steps = int(train_size / FLAGS.batch_size * _NUM_EPOCHS_PER_DECAY)
        learning_rate = tf.train.exponential_decay(
            get_learning_rate(), global_step, decay_steps, _LEARNING_RATE_DECAY_FACTOR,
            staircase=True)
        train_tensor = slim.learning.create_train_op(
            total_loss, optimizer=tf.train.GradientDescentOptimizer(learning_rate))
        slim.summaries.add_scalar_summary(total_loss, 'total_loss', 'losses')
        slim.summaries.add_scalar_summary(learning_rate, 'learning_rate', 'training')
    return g, train_tensor


def get_checkpoint_init_fn():
    """With --fine_tune_checkpoint, init_fn(session) for slim.learning.train, made in the
    training graph: restores every variable the checkpoint holds (those it lacks, such as
    a float checkpoint's quantization ranges, keep their initial values) and sets the global
    step to 0, for the learning rate's decay to start over. None without one."""
    if not FLAGS.fine_tune_checkpoint:
        return None
    checkpoint = checkpoints.resolve_checkpoint(FLAGS.fine_tune_checkpoint,
                                                '--fine_tune_checkpoint')
    held = dict(tf.train.list_variables(checkpoint))
    # Those it lacks left out here, as ignore_missing_vars would, without a warning each.
    restore = slim.assign_from_checkpoint_fn(
        checkpoint, [v for v in slim.get_variables_to_restore() if v.op.name in held])
    global_step_reset = tf.assign(tf.train.get_or_create_global_step(), 0)

    def init_fn(session):
        restore(session)
        session.run(global_step_reset)
    return init_fn


def train_model():
    """Trains MobileNet v1 as the flags say, with slim.learning.train, until global step
    --number_of_steps (None: without end), writing checkpoints and summaries into
    --checkpoint_dir when --task is 0 (the chief)."""
    g, train_tensor = build_model()
    with g.as_default():
        slim.learning.train(
            train_tensor, FLAGS.checkpoint_dir, is_chief=(FLAGS.task == 0),
            master=FLAGS.master, log_every_n_steps=FLAGS.log_every_n_steps, graph=g,
            number_of_steps=FLAGS.number_of_steps,
            save_summaries_secs=FLAGS.save_summaries_secs,
            save_interval_secs=FLAGS.save_interval_secs, init_fn=get_checkpoint_init_fn(),
            global_step=tf.train.get_global_step())


def main(unused_arg):
    del unused_arg
    train_model()


if __name__ == '__main__':
    from slim_deploy.image_classifier import cli
    cli.run(main, __name__)
