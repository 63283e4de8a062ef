"""Measures what the tf.data input pipeline costs training, in one run.

    python benchmarks/input_pipeline.py [--steps 150] [--rounds 3]

For lenet on the embedded digits and cifarnet on synthetic 32x32 records it prints:
the pipeline's own examples/sec (decode + preprocess + batch, nothing else), and training
examples/sec with 2 clones fed by the real pipeline vs by a batch held in memory. The
ratio real / in-memory is the share of training speed the pipeline leaves (target >= 0.95).
Rounds alternate the two trainings so machine noise hits both alike; medians are printed.
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import deployment  # noqa: F401  (repairs tf-slim; must precede tf_slim use)
import tensorflow.compat.v1 as tf

from datasets import dataset_factory, dataset_utils, digits, pipeline
from deployment import model_deploy, optimization, training
from nets import nets_factory
from preprocessing import preprocessing_factory

BATCH_SIZE = 32
NUM_CLONES = 2


def synthetic_split(directory, num_examples=2048, num_shards=4, size=32, num_classes=10):
    """Writes random size x size RGB PNG records in slim's format; returns their split."""
    rng = np.random.RandomState(0)
    with tf.Graph().as_default(), tf.Session() as sess:
        image = tf.placeholder(tf.uint8, [size, size, 3])
        encoded = tf.io.encode_png(image)
        records = [dataset_utils.image_to_tfexample(
            sess.run(encoded, {image: rng.randint(256, size=(size, size, 3))}), b'png', size,
            size, rng.randint(num_classes)).SerializeToString() for _ in range(num_examples)]
    for shard, part in enumerate(np.array_split(records, num_shards)):
        dataset_utils.write_tfrecord(
            dataset_utils.shard_filename(directory, 'synthetic', 'train', shard, num_shards),
            list(part))
    return dataset_utils.DatasetSplit(
        name='synthetic', split_name='train',
        file_pattern=os.path.join(directory, 'synthetic_train_*.tfrecord'),
        num_samples=num_examples, num_classes=num_classes, labels_to_names=None,
        items_to_descriptions={}, channels=3)


def real_batches(split, model_name):
    """The training pipeline as train_image_classifier.py builds it (default flags)."""
    network_fn = nets_factory.get_network_fn(model_name, split.num_classes)
    return pipeline.training_batches(
        split, preprocessing_factory.get_preprocessing(model_name, is_training=True),
        network_fn.default_image_size, BATCH_SIZE)


def first_batch(make_batches):
    """The first (images, labels) batch of make_batches(), as numpy arrays."""
    with tf.Graph().as_default(), tf.Session() as sess:
        return sess.run(tf.data.make_one_shot_iterator(make_batches()).get_next())


def pipeline_rate(make_batches, steps):
    """Examples/sec of the pipeline alone."""
    with tf.Graph().as_default():
        next_batch = tf.data.make_one_shot_iterator(make_batches()).get_next()
        with tf.Session() as sess:
            for _ in range(10):
                sess.run(next_batch)
            start = time.perf_counter()
            for _ in range(steps):
                sess.run(next_batch)
            return steps * BATCH_SIZE / (time.perf_counter() - start)


def training_rate(make_batches, model_name, num_classes, steps):
    """Training examples/sec of model_name with NUM_CLONES clones fed by make_batches()."""
    devices, num_cpus = training.clone_devices(NUM_CLONES, clone_on_cpu=False)
    config = model_deploy.DeploymentConfig(num_clones=NUM_CLONES, clone_devices=devices)
    with tf.Graph().as_default():
        with tf.device(config.inputs_device()):
            iterator = tf.data.make_one_shot_iterator(make_batches())
        network_fn = nets_factory.get_network_fn(model_name, num_classes, 0.00004, True)
        model = model_deploy.deploy(
            config, training.classification_model_fn(network_fn, iterator,
                                                     config.inputs_device(), num_classes, 0.0),
            optimizer=optimization.optimizer('rmsprop', 0.01))
        with tf.Session(config=training.session_config(num_cpus)) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(10):
                sess.run(model.train_op)
            start = time.perf_counter()
            for _ in range(steps):
                sess.run(model.train_op)
            return steps * BATCH_SIZE * NUM_CLONES / (time.perf_counter() - start)


def benchmark(name, split, model_name, steps, rounds):
    def real():
        return real_batches(split, model_name)

    batch = first_batch(real)

    def memory():  # The same batch every step, held in memory: no input work at all.
        return tf.data.Dataset.from_tensors(batch).repeat()

    alone = pipeline_rate(real, steps)
    rates = {'real': [], 'memory': []}
    for _ in range(rounds):
        rates['real'].append(training_rate(real, model_name, split.num_classes, steps))
        rates['memory'].append(training_rate(memory, model_name, split.num_classes, steps))
    real_rate, memory_rate = (statistics.median(rates[k]) for k in ('real', 'memory'))
    print(f'{name:<22} pipeline alone {alone:9.0f} ex/s | training: real pipeline '
          f'{real_rate:7.0f} ex/s, in memory {memory_rate:7.0f} ex/s, '
          f'ratio {real_rate / memory_rate:.3f}', flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=150, help='timed steps per measurement')
    parser.add_argument('--rounds', type=int, default=3, help='alternating training rounds')
    args = parser.parse_args()
    print(f'{os.cpu_count()} cores, {NUM_CLONES} clones x batch {BATCH_SIZE}, '
          f'{args.steps} steps x {args.rounds} rounds')
    with tempfile.TemporaryDirectory() as directory:
        benchmark('lenet / digits', dataset_factory.get_dataset(
            'digits', 'train', os.path.join(directory, 'digits')), 'lenet', args.steps,
            args.rounds)
        benchmark('cifarnet / synthetic32', synthetic_split(directory), 'cifarnet',
                  args.steps, args.rounds)


if __name__ == '__main__':
    main()
