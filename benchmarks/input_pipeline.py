"""Measures what the tf.data input pipeline costs training, in one run.

    python -m benchmarks.input_pipeline [--steps 150] [--rounds 3]

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
import tensorflow.compat.v1 as tf

from benchmarks import harness
from benchmarks.harness import at_least
from slim_deploy.datasets import dataset_factory, dataset_utils
from slim_deploy.deployment import model_deploy
from slim_deploy.image_classifier import builders, config
from slim_deploy.training import loop, optimization

PROG = f'python -m {__spec__.name}'  # Its usage's program name.

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


def training_rate(make_batches, model, steps):
    """Training examples/sec of `model` (a Classifier) with NUM_CLONES clones, default
    optimization, fed by make_batches()."""
    deployment_config, num_cpu_devices = builders.deployment(
        config.DevicesConfig(num_clones=NUM_CLONES))
    optimizing = config.OptimizationConfig()
    with tf.Graph().as_default():
        with tf.device(deployment_config.inputs_device()):
            iterator = tf.data.make_one_shot_iterator(make_batches())
        deployed = model_deploy.deploy(
            deployment_config, builders.classification_model_fn(
                model.network_fn, iterator, deployment_config.inputs_device(),
                model.num_classes, optimizing.label_smoothing),
            optimizer=optimization.optimizer(optimizing.optimizer, optimizing.learning_rate))
        with tf.Session(config=loop.session_config(num_cpu_devices)) as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(10):
                sess.run(deployed.train_op)
            start = time.perf_counter()
            for _ in range(steps):
                sess.run(deployed.train_op)
            return steps * BATCH_SIZE * NUM_CLONES / (time.perf_counter() - start)


def benchmark(name, split, model_name, steps, rounds):
    data = config.DataConfig(batch_size=BATCH_SIZE)
    model = builders.classifier(data, config.ModelConfig(model_name=model_name), is_training=True,
                                weight_decay=config.OptimizationConfig.weight_decay, split=split)

    def real():  # As train_image_classifier.py reads it.
        return model.training_batches(data)

    batch = first_batch(real)

    def memory():  # The same batch every step, held in memory: no input work at all.
        return tf.data.Dataset.from_tensors(batch).repeat()

    alone = pipeline_rate(real, steps)
    feeds = {'real': real, 'memory': memory}
    rates = harness.rounds(feeds, rounds, lambda feed: training_rate(feeds[feed], model, steps))
    real_rate, memory_rate = (statistics.median(rates[feed]) for feed in feeds)
    print(f'{name:<22} pipeline alone {alone:9.0f} ex/s | training: real pipeline '
          f'{real_rate:7.0f} ex/s, in memory {memory_rate:7.0f} ex/s, '
          f'ratio {real_rate / memory_rate:.3f}', flush=True)


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=at_least(1), default=150,
                        help='timed steps per measurement')
    parser.add_argument('--rounds', type=at_least(1), default=3,
                        help='alternating training rounds')
    args = parser.parse_args()
    print(f'{os.cpu_count()} cores, {NUM_CLONES} clones x batch {BATCH_SIZE}, '
          f'{args.steps} steps x {args.rounds} rounds')
    with tempfile.TemporaryDirectory() as directory:
        benchmark('lenet / digits', dataset_factory.get_dataset_split(
            'digits', 'train', os.path.join(directory, 'digits')), 'lenet', args.steps,
            args.rounds)
        benchmark('cifarnet / synthetic32', synthetic_split(directory), 'cifarnet',
                  args.steps, args.rounds)


if __name__ == '__main__':
    main()
