"""evaluate(config): scores a checkpoint on every example of a split, exactly once."""
import math
import os

import numpy as np
import tensorflow.compat.v1 as tf

from deployment import checkpoints, fileio, model_deploy
from image_classifier import parts

METRICS_FILENAME = 'metrics.json'


def evaluate(config):
    """Evaluates as `config` (an EvalConfig) says; returns the metrics.

    Returns {'accuracy', 'recall_5' (top-5, or top-k for fewer than 5 classes), 'num_examples',
    'global_step' (of the checkpoint)}, also written to eval_dir/metrics.json and, as
    eval/Accuracy and eval/Recall_5, to an event file in eval_dir. Several clones split
    each step's batches; the last step's are padded with zero-weight examples, so every
    example counts once and none is dropped. Raises UsageError when the checkpoint or the
    dataset is missing or eval_dir cannot be written.
    """
    checkpoint = checkpoints.resolve_checkpoint(config.checkpoint_path)
    model = parts.classifier(config.data, config.model, is_training=False)
    fileio.check_writable_dir(config.eval_dir, '--eval_dir')
    deployment, num_cpu_devices = parts.deployment(config.devices)
    num_clones = config.devices.num_clones

    with tf.Graph().as_default():
        global_step = tf.train.get_or_create_global_step()
        with tf.device(deployment.inputs_device()):
            iterator = tf.data.make_one_shot_iterator(
                model.evaluation_batches(config.data, num_clones))

        def model_fn():
            with tf.device(deployment.inputs_device()):
                images, labels, weights = iterator.get_next()
            logits, _ = model.network_fn(images)
            correct = tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32)
            in_top_k = tf.cast(tf.nn.in_top_k(logits, labels, min(5, model.num_classes)),
                               tf.float32)
            return tf.stack([tf.reduce_sum(correct * weights),
                             tf.reduce_sum(in_top_k * weights), tf.reduce_sum(weights)])

        clones = model_deploy.create_clones(deployment, model_fn)
        with tf.device(deployment.optimizer_device()):
            step_sums = tf.add_n([clone.outputs for clone in clones])
        saver = tf.train.Saver(checkpoints.variables_to_restore(config.moving_average_decay))

        totals = np.zeros(3)
        max_steps = (math.ceil(config.max_num_batches / num_clones)
                     if config.max_num_batches else None)
        master, session_config = parts.session_target(config.devices, num_cpu_devices)
        with tf.Session(master, config=session_config) as sess:
            saver.restore(sess, checkpoint)
            step = 0
            while max_steps is None or step < max_steps:
                try:
                    totals += sess.run(step_sums)
                except tf.errors.OutOfRangeError:
                    break
                step += 1
            trained_steps = int(sess.run(global_step))

        correct, in_top_k, num_examples = totals
        metrics = {'accuracy': float(correct / max(num_examples, 1)),
                   'recall_5': float(in_top_k / max(num_examples, 1)),
                   'num_examples': int(round(num_examples)), 'global_step': trained_steps}
        writer = tf.summary.FileWriterCache.get(config.eval_dir)  # Needs a graph.
        writer.add_summary(tf.Summary(value=[
            tf.Summary.Value(tag='eval/Accuracy', simple_value=metrics['accuracy']),
            tf.Summary.Value(tag='eval/Recall_5', simple_value=metrics['recall_5'])]),
            trained_steps)
        writer.flush()
    fileio.write_json_atomically(os.path.join(config.eval_dir, METRICS_FILENAME), metrics)
    return metrics
