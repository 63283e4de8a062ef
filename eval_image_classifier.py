"""Evaluates a trained classifier on every example of a split, exactly once.

    python eval_image_classifier.py --checkpoint_path=/tmp/tfmodel --eval_dir=/tmp/tfmodel/eval

Prints accuracy, recall@5 and the number of examples, and writes them with the checkpoint's
global step to eval_dir/metrics.json (keys accuracy, recall_5, num_examples, global_step)
and to a TensorBoard event file in eval_dir. Several clones split each step's batches.
"""
import math
import os

from absl import flags

import deployment  # noqa: F401  (repairs tf-slim; must precede tf_slim use)
import numpy as np
import tensorflow.compat.v1 as tf

from datasets import dataset_factory, pipeline
from deployment import checkpoints, cli, fileio, model_deploy, training
from nets import nets_factory
from preprocessing import preprocessing_factory

flags.DEFINE_string('master', '', 'Address of the TensorFlow master; empty for in-process.')
flags.DEFINE_string('checkpoint_path', '/tmp/tfmodel/', 'Checkpoint, or a directory whose '
                    'latest checkpoint is evaluated.')
flags.DEFINE_string('eval_dir', '/tmp/tfmodel/', 'Directory for metrics.json and events.')
flags.DEFINE_integer('batch_size', 100, 'Examples per clone per step.')
flags.DEFINE_integer('max_num_batches', None, 'Stop after this many batches (rounded up to a '
                     'whole step of num_clones batches); None evaluates the whole split.')
flags.DEFINE_integer('num_clones', 1, 'Clones sharing each step (without GPUs each gets its '
                     'own CPU device).')
flags.DEFINE_boolean('clone_on_cpu', False, 'Put every clone on CPU:0.')
flags.DEFINE_integer('num_preprocessing_threads', 4, 'Examples preprocessed in parallel.')
flags.DEFINE_string('dataset_name', 'digits', 'Dataset to evaluate on.')
flags.DEFINE_string('dataset_split_name', 'test', 'Split to evaluate.')
flags.DEFINE_string('dataset_dir', None, 'Directory of the converted dataset.')
flags.DEFINE_integer('labels_offset', 0, 'Subtracted from every label.')
flags.DEFINE_string('model_name', 'lenet', 'Network to evaluate.')
flags.DEFINE_string('preprocessing_name', None, 'Preprocessing; None means model_name\'s.')
flags.DEFINE_float('moving_average_decay', None, 'Evaluate the moving averages of the '
                   'variables saved with this decay; None evaluates the variables.')
flags.DEFINE_integer('eval_image_size', None, 'Image size; None means the network\'s default.')
flags.DEFINE_boolean('use_grayscale', False, 'Convert images to grayscale.')

FLAGS = flags.FLAGS


def evaluate(f):
    """Builds the evaluation graph from flags `f`, runs it; returns the metrics dict."""
    if f.batch_size < 1 or f.num_clones < 1:
        raise ValueError(f'--batch_size and --num_clones must be >= 1, got {f.batch_size} '
                         f'and {f.num_clones}')
    checkpoint = checkpoints.resolve_checkpoint(f.checkpoint_path)
    split = dataset_factory.get_dataset(f.dataset_name, f.dataset_split_name, f.dataset_dir)
    num_classes = split.num_classes - f.labels_offset
    network_fn = nets_factory.get_network_fn(f.model_name, num_classes, is_training=False)
    preprocessing_fn = preprocessing_factory.get_preprocessing(
        f.preprocessing_name or f.model_name, is_training=False, use_grayscale=f.use_grayscale)
    image_size = f.eval_image_size or network_fn.default_image_size
    fileio.check_writable_dir(f.eval_dir, '--eval_dir')
    devices, num_cpu_devices = training.clone_devices(f.num_clones, f.clone_on_cpu)
    config = model_deploy.DeploymentConfig(num_clones=f.num_clones, clone_on_cpu=f.clone_on_cpu,
                                           clone_devices=devices)

    with tf.Graph().as_default():
        global_step = tf.train.get_or_create_global_step()
        with tf.device(config.inputs_device()):
            iterator = tf.data.make_one_shot_iterator(pipeline.evaluation_batches(
                split, preprocessing_fn, image_size, f.batch_size, f.num_clones,
                num_preprocessing_threads=f.num_preprocessing_threads,
                labels_offset=f.labels_offset))

        def model_fn():
            with tf.device(config.inputs_device()):
                images, labels, weights = iterator.get_next()
            logits, _ = network_fn(images)
            top_k = min(5, num_classes)
            correct = tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32)
            in_top_k = tf.cast(tf.nn.in_top_k(logits, labels, top_k), tf.float32)
            return tf.stack([tf.reduce_sum(correct * weights),
                             tf.reduce_sum(in_top_k * weights), tf.reduce_sum(weights)])

        clones = model_deploy.create_clones(config, model_fn)
        with tf.device(config.optimizer_device()):
            step_sums = tf.add_n([clone.outputs for clone in clones])
        saver = tf.train.Saver(checkpoints.variables_to_restore(f.moving_average_decay))

        totals = np.zeros(3)
        max_steps = math.ceil(f.max_num_batches / f.num_clones) if f.max_num_batches else None
        with tf.Session(f.master, config=training.session_config(num_cpu_devices)) as sess:
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
        metrics = {'accuracy': correct / max(num_examples, 1),
                   'recall_5': in_top_k / max(num_examples, 1),
                   'num_examples': int(round(num_examples)), 'global_step': trained_steps}
        writer = tf.summary.FileWriterCache.get(f.eval_dir)
        writer.add_summary(tf.Summary(value=[
            tf.Summary.Value(tag='eval/Accuracy', simple_value=metrics['accuracy']),
            tf.Summary.Value(tag='eval/Recall_5', simple_value=metrics['recall_5'])]),
            trained_steps)
        writer.flush()
    fileio.write_json_atomically(os.path.join(f.eval_dir, 'metrics.json'), metrics)
    return metrics


def main(argv):
    del argv
    cli.setup_logging()
    try:
        metrics = evaluate(FLAGS)
    except ValueError as e:
        cli.fail(e)
    print(f'accuracy {metrics["accuracy"]:.4f}  recall@5 {metrics["recall_5"]:.4f}  '
          f'examples {metrics["num_examples"]}  global step {metrics["global_step"]}')


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
