"""evaluate(config) scores a checkpoint, or a TensorFlow Lite model, on every example of a
split, exactly once; evaluate_continuously(config) scores each new checkpoint of a training
run as it appears (slim's evaluation_loop)."""
import dataclasses
import errno
import json
import math
import os
import time

from absl import logging
import numpy as np
import tensorflow.compat.v1 as tf

from slim_deploy.common import fileio
from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory, pipeline
from slim_deploy.deployment import model_deploy, quantize, tflite
from slim_deploy.image_classifier import builders, run_record
from slim_deploy.image_classifier import config as run_config
from slim_deploy.training import checkpoints

METRICS_FILENAME = 'metrics.json'
HISTORY_FILENAME = 'metrics.jsonl'
# Seconds between the looks of a training cluster's evaluator task for a new checkpoint.
EVALUATOR_INTERVAL_SECS = 10.0


def evaluate(config):
    """Evaluates as `config` (an EvalConfig) says; returns the metrics.

    Returns {'accuracy', 'recall_5' (top-5, or top-k for fewer than 5 classes), 'num_examples',
    'global_step' (of the checkpoint)}, also written to eval_dir/metrics.json and, as
    eval/Accuracy and eval/Recall_5, to an event file in eval_dir. Several clones split
    each step's batches; the last step's are padded with zero-weight examples, so every
    example counts once and none is dropped. With config.quantize the network is the
    quantized graph (quantize.create_eval_graph, its weights per channel or per tensor as the
    checkpoint holds their ranges). Raises UsageError when the checkpoint or
    the dataset is missing or eval_dir cannot be written. config.eval_interval_secs and
    config.timeout play no part here (see evaluate_continuously).

    With config.tflite_file, that TensorFlow Lite model is scored instead, by TensorFlow's
    interpreter on the same examples with the same metrics ('global_step' None, no event
    file; see _evaluate_tflite).
    """
    if config.tflite_file:
        return _evaluate_tflite(config)
    checkpoint = checkpoints.resolve_checkpoint(config.checkpoint_path)
    return _evaluate_checkpoint(config, _prepare(config), checkpoint)


def _prepare(config, model=None):
    """The Classifier that `config` names (with ModelConfig `model` instead of config.model
    unless it is None), once eval_dir is known to be writable."""
    classifier = builders.classifier(config.data, model or config.model, is_training=False)
    fileio.check_writable_dir(config.eval_dir, '--eval_dir')
    return classifier


def _step_sums(logits, labels, weights, num_classes):
    """float32 [3]: the sums over a batch, weighted by `weights` (float32 [batch]), of the
    examples whose label (int64 [batch]) is the top class of `logits` (float32 [batch,
    num_classes]), of those among its top 5 (top num_classes when fewer), and of examples."""
    correct = tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32)
    in_top_k = tf.cast(tf.nn.in_top_k(logits, labels, min(5, num_classes)), tf.float32)
    return tf.stack([tf.reduce_sum(correct * weights), tf.reduce_sum(in_top_k * weights),
                     tf.reduce_sum(weights)])


def _sum_steps(sess, step_sums, max_steps):
    """The sum of `step_sums` (see _step_sums) over the steps run until the input ends, or
    max_steps (None: no limit)."""
    totals = np.zeros(3)
    step = 0
    while max_steps is None or step < max_steps:
        try:
            totals += sess.run(step_sums)
        except tf.errors.OutOfRangeError:
            break
        step += 1
    return totals


def _metrics(totals, global_step, guard):
    """evaluate()'s metrics of the sums of _sum_steps, the examples read under `guard` (a
    pipeline.RecordGuard), whose skipped records a warning line counts."""
    correct, in_top_k, num_examples = totals
    if guard.skipped:
        logging.warning('%d bad records skipped (--max_bad_records=%d): they are not counted',
                        len(guard.skipped), guard.max_bad_records)
    return {'accuracy': float(correct / max(num_examples, 1)),
            'recall_5': float(in_top_k / max(num_examples, 1)),
            'num_examples': int(round(num_examples)), 'global_step': global_step}


def _write_metrics(eval_dir, metrics, summary=False):
    """Writes `metrics` to eval_dir/metrics.json (atomically) and, with `summary`, their
    accuracy and recall to an event file there (with the default graph); StorageError when
    the disk is full."""
    with fileio.room_checked(eval_dir, 'write the metrics', lambda: 'nothing was written'):
        if summary:
            writer = tf.summary.FileWriterCache.get(eval_dir)
            writer.add_summary(tf.Summary(value=[
                tf.Summary.Value(tag='eval/Accuracy', simple_value=metrics['accuracy']),
                tf.Summary.Value(tag='eval/Recall_5', simple_value=metrics['recall_5'])]),
                metrics['global_step'])
            writer.flush()
        fileio.write_json_atomically(os.path.join(eval_dir, METRICS_FILENAME), metrics)


def _evaluate_tflite(config):
    """Scores the TensorFlow Lite model of config.tflite_file as evaluate() says.

    The model takes float32 images (or int8/uint8 ones, quantized from them with its input's
    scale and zero point) of the size the preprocessing gives, config.model.image_size
    (None: the model's); its output named 'logits' (else its first) is scored. Raises
    UsageError when the file is not such a model for the classes and images of config.
    """
    path = config.tflite_file
    network = _tflite_model(path)
    height, width, channels = network.input_shape[1:]
    model = config.model
    if model.image_size is None:
        model = dataclasses.replace(model, image_size=height)
    classifier = _prepare(config, model)
    size = classifier.image_size
    expected = (size, size, run_config.input_channels(config.data.dataset_name, model))
    if (height, width, channels) != expected:
        raise UsageError(f'--tflite_file {path!r} takes {height}x{width}x{channels} images, but '
                         f'--eval_image_size={size} and --dataset_name='
                         f'{config.data.dataset_name} give {"x".join(map(str, expected))}')
    output = 'logits' if 'logits' in network.output_shapes else next(iter(network.output_shapes))
    if network.output_shapes[output][1:] != (classifier.num_classes,):
        raise UsageError(f'--tflite_file {path!r} gives {output} of shape '
                         f'{list(network.output_shapes[output])}, not the '
                         f'{classifier.num_classes} classes of --dataset_name='
                         f'{config.data.dataset_name} (--labels_offset='
                         f'{config.data.labels_offset})')
    guard = pipeline.RecordGuard(config.data.max_bad_records)
    with tf.Graph().as_default():
        images, labels, weights = tf.data.make_one_shot_iterator(
            classifier.evaluation_batches(config.data, 1, guard)).get_next()
        logits = tf.numpy_function(lambda batch: network(batch)[output], [images], tf.float32)
        step_sums = _step_sums(tf.ensure_shape(logits, [None, classifier.num_classes]),
                               labels, weights, classifier.num_classes)
        with tf.Session() as sess, guard.raising():
            metrics = _metrics(_sum_steps(sess, step_sums, config.max_num_batches), None, guard)
    _write_metrics(config.eval_dir, metrics)
    return metrics


def _tflite_model(path):
    """The tflite.Model of the file at `path`; UsageError naming --tflite_file when it is
    not one."""
    try:
        with tf.io.gfile.GFile(path, 'rb') as f:
            return tflite.Model(f.read())
    except (OSError, tf.errors.OpError, ValueError) as e:
        message = getattr(e, 'message', None) or str(e)
        raise UsageError(f'--tflite_file {path!r} is not a readable TensorFlow Lite model of '
                         f'one input: {message}') from None


def _evaluate_checkpoint(config, model, checkpoint):
    """Scores checkpoint prefix `checkpoint` with `model` (a builders.Classifier) as evaluate()
    does, writing the same files; returns the metrics."""
    deployment, num_cpu_devices = builders.deployment(config.devices)
    num_clones = config.devices.num_clones

    guard = pipeline.RecordGuard(config.data.max_bad_records)
    with tf.Graph().as_default():
        global_step = tf.train.get_or_create_global_step()
        with tf.device(deployment.inputs_device()):
            iterator = tf.data.make_one_shot_iterator(
                model.evaluation_batches(config.data, num_clones, guard))

        def model_fn():
            with tf.device(deployment.inputs_device()):
                images, labels, weights = iterator.get_next()
            logits, _ = model.network_fn(images)
            return _step_sums(logits, labels, weights, model.num_classes)

        clones = model_deploy.create_clones(deployment, model_fn)
        if config.quantize:  # None (no ranges): restoring reports it.
            quantize.create_eval_graph(
                per_channel_wt=bool(quantize.checkpoint_per_channel_wt(checkpoint)))
        with tf.device(deployment.optimizer_device()):
            step_sums = tf.add_n([clone.outputs for clone in clones])

        max_steps = (math.ceil(config.max_num_batches / num_clones)
                     if config.max_num_batches else None)
        master, session_config = builders.session_target(config.devices, num_cpu_devices)
        with tf.Session(master, config=session_config) as sess, guard.raising():
            builders.restore(sess, checkpoint,
                             checkpoints.variables_to_restore(config.moving_average_decay),
                             quantized=config.quantize)
            metrics = _metrics(_sum_steps(sess, step_sums, max_steps),
                               int(sess.run(global_step)), guard)
        _write_metrics(config.eval_dir, metrics, summary=True)
    return metrics


def evaluate_continuously(config, last_step=None, on_evaluated=None):
    """Evaluates each new checkpoint of the training run in config.checkpoint_path (its
    train_dir) as it appears, as evaluate() does; returns their metrics, oldest first.

    Every config.eval_interval_secs seconds at most (counted from the start of the previous
    look or evaluation) it takes the newest checkpoint that reads back whole (a corrupt or
    half-written one is skipped with a warning) and evaluates it if its global step is past
    the last one evaluated. Each one's metrics, with 'checkpoint' (its prefix) and
    'wall_time' (seconds since the epoch, when its evaluation ended), go to one line of
    eval_dir/metrics.jsonl, to one info line and to on_evaluated(metrics) (None: nothing).

    The loop ends after the checkpoint of global step last_step (or a later one), or after
    config.timeout seconds without a new checkpoint (counted from the end of the last
    evaluation, or the start; None: no limit). last_step None: the run's
    max_number_of_steps, from run_config.json in the train_dir; 0, or no record: only the
    timeout ends the loop. The train_dir need not exist yet. Raises UsageError when
    config.checkpoint_path is a checkpoint rather than a directory, or as evaluate() does.
    """
    if config.eval_interval_secs is None:
        raise ValueError('evaluate_continuously needs config.eval_interval_secs')
    directory = config.checkpoint_path
    if tf.io.gfile.exists(directory + '.index') or (
            tf.io.gfile.exists(directory) and not tf.io.gfile.isdir(directory)):
        raise UsageError(f'--eval_interval_secs watches a directory, but --checkpoint_path '
                         f'{directory!r} is a checkpoint: pass its directory')
    if last_step is None:
        found = run_record.find(directory)
        last_step = found[1].get('flags', {}).get('max_number_of_steps') if found else None
    model = _prepare(config)
    ends = ([f'the checkpoint of global step {last_step}'] if last_step else []) + (
        [f'{config.timeout:g} s pass without a new one'] if config.timeout is not None else [])
    logging.info('Evaluating each new checkpoint in %s until %s', directory,
                 ' or '.join(ends) or 'stopped')

    evaluated, files, evaluated_step = [], None, -1
    idle_since = time.monotonic()
    while True:
        look_started = time.monotonic()
        checkpoint, files = _new_checkpoint(directory, files, evaluated_step)
        if checkpoint is not None:
            metrics = {**_evaluate_checkpoint(config, model, checkpoint),
                       'checkpoint': checkpoint, 'wall_time': time.time()}
            with fileio.room_checked(config.eval_dir, 'write the metrics',
                                     lambda: f'{HISTORY_FILENAME} holds those before'):
                _append_line(os.path.join(config.eval_dir, HISTORY_FILENAME), metrics)
            logging.info('Global step %d (%s): accuracy %.4f, recall@5 %.4f, %d examples',
                         metrics['global_step'], checkpoint, metrics['accuracy'],
                         metrics['recall_5'], metrics['num_examples'])
            evaluated.append(metrics)
            if on_evaluated is not None:
                on_evaluated(metrics)
            evaluated_step = metrics['global_step']
            idle_since = time.monotonic()
            if last_step and evaluated_step >= last_step:
                return evaluated
        elif config.timeout is not None and look_started - idle_since >= config.timeout:
            logging.info('No new checkpoint in %s for %g s; stopping %s', directory,
                         config.timeout, f'after global step {evaluated_step}' if evaluated
                         else 'with none evaluated')
            return evaluated
        next_look = look_started + config.eval_interval_secs
        if config.timeout is not None:
            next_look = min(next_look, idle_since + config.timeout)
        time.sleep(max(0.0, next_look - time.monotonic()))


def _new_checkpoint(directory, files, evaluated_step):
    """(the newest intact checkpoint in `directory` if its global step is past
    evaluated_step, else None; the _checkpoint_files of this look). `files`: those of the
    previous look (None: none); when nothing changed since, no checkpoint is read again."""
    now = _checkpoint_files(directory)
    if now == files:
        return None, files
    checkpoint = checkpoints.newest_intact(directory)
    if checkpoint is None or _checkpoint_step(checkpoint) <= evaluated_step:
        return None, now
    return checkpoint, now


def _checkpoint_files(directory):
    """{(path, (size, modification time) or None if it just went)} of the checkpoint files
    in `directory`: it changes whenever a checkpoint is added, removed or rewritten."""
    paths = [path for pattern in ('*.index', '*.data-*', 'checkpoint')
             for path in tf.io.gfile.glob(os.path.join(directory, pattern))]
    return frozenset((path, _size_and_time(path)) for path in paths)


def _size_and_time(path):
    try:
        stat = tf.io.gfile.stat(path)
    except tf.errors.NotFoundError:
        return None
    return stat.length, stat.mtime_nsec


def _checkpoint_step(checkpoint):
    """The global step saved in checkpoint prefix `checkpoint`."""
    return int(tf.train.load_checkpoint(checkpoint).get_tensor(tf.GraphKeys.GLOBAL_STEP))


def _append_line(path, record):
    """Appends `record` as one JSON line to `path` in a single write, synced to disk, so a
    reader never sees part of a line; a write that fails (a full disk) is cut off again."""
    line = (json.dumps(record, sort_keys=True) + '\n').encode('utf-8')
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            if os.write(fd, line) < len(line):  # A short write: the disk is full.
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def evaluator_config(train_config):
    """The EvalConfig of a training cluster's evaluator task for `train_config` (a
    TrainConfig): each new checkpoint in train_dir, every EVALUATOR_INTERVAL_SECS, into
    train_dir/eval, on the dataset's evaluation split (evaluation_split), with one clone and
    the run's dataset, model and moving averages (run_record.EVAL_DEFAULTS); no timeout."""
    trained = train_config.as_flags()
    return run_config.EvalConfig.from_flags({
        **run_record.run_defaults(trained, run_record.EVAL_DEFAULTS),
        'checkpoint_path': train_config.train_dir,
        'eval_dir': os.path.join(train_config.train_dir, 'eval'),
        'dataset_split_name': evaluation_split(train_config.data.dataset_name),
        'eval_interval_secs': EVALUATOR_INTERVAL_SECS, 'num_clones': 1})


def evaluation_split(dataset_name):
    """The split to evaluate a model of dataset `dataset_name` on: 'test' if it has one, else
    'validation', else its first split other than 'train'."""
    splits = [name for name in dataset_factory.get_info(dataset_name).splits_to_sizes
              if name != 'train']
    if not splits:
        raise UsageError(f'dataset {dataset_name!r} has no split to evaluate on but train')
    for preferred in ('test', 'validation'):
        if preferred in splits:
            return preferred
    return splits[0]
