"""The figures slim_deploy.deployment.sizing plans a cluster with, for a network of nets_factory:
what its training step moves over the network, read from graphs deploy() builds of it, and
what one worker computes per step, and what 16-bit gradients cost it per byte, timed on this
machine.

The network trains on synthetic images of its default size ([batch_size, size, size, 3]) and
labels of `num_classes` classes, with the classification losses of training
(builders.add_classification_losses), L2 weight decay WEIGHT_DECAY and momentum SGD, as the
benchmarks train it. Video networks (5-D inputs) are refused.
"""
import statistics
import time

import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import compression, model_deploy, network_traffic, sizing
from slim_deploy.image_classifier import builders
from slim_deploy.nets import nets_factory
from slim_deploy.training import loop

WEIGHT_DECAY = 4e-5
LEARNING_RATE = 0.01
MOMENTUM = 0.9
# Classes of the datasets the networks are made for: MNIST's and CIFAR-10's for the
# preprocessing families of 28x28 and 32x32 inputs, ImageNet's (with background) otherwise.
SMALL_IMAGE_FAMILIES = frozenset({'lenet', 'cifarnet'})
SMALL_IMAGE_CLASSES = 10
IMAGENET_CLASSES = 1001
PROBE_BYTES = 16 << 20  # Of the float32 tensor compression_seconds_per_byte times.


def default_num_classes(model_name):
    """The classes of the dataset network `model_name` is made for: 10 (MNIST, CIFAR-10) for
    the lenet and cifarnet preprocessing families, 1001 (ImageNet) otherwise. UsageError
    naming --model_name for an unknown name."""
    family = nets_factory.NETWORKS[model_name].preprocessing
    return SMALL_IMAGE_CLASSES if family in SMALL_IMAGE_FAMILIES else IMAGENET_CLASSES


def step_traffics(model_name, batch_size, num_classes, gradient_compression='none'):
    """(StepTraffic of a ps step, StepTraffic of a collective step) of `model_name` with one
    clone of `batch_size` images per worker, read from the graphs of worker 0 that deploy()
    builds for 2 workers on 1 ps task (asynchronous) and for 2 collective workers, their
    gradients crossing in `gradient_compression` (a name of compression.COMPRESSIONS).
    sizing stands them for any number of workers and ps tasks."""
    return tuple(_traffic(model_name, batch_size, num_classes, model_deploy.DeploymentConfig(
        clone_on_cpu=True, num_replicas=2, gradient_compression=gradient_compression,
        **cluster)) for cluster in (dict(num_ps_tasks=1), dict(variable_update='collective')))


def strategy_ps_traffic(model_name, batch_size, num_classes):
    """StepTraffic of a step of tf.distribute's ParameterServerStrategy training `model_name`
    as step_traffics' ps step does, but reading a variable from its ps task at each use, as
    TensorFlow 2's workers do (it has no caching device): a penalized weight twice, for the
    forward pass and for its penalty."""
    return _traffic(model_name, batch_size, num_classes, _ReadingAtEachUse(
        clone_on_cpu=True, num_replicas=2, num_ps_tasks=1))


class _ReadingAtEachUse(model_deploy.DeploymentConfig):
    """A DeploymentConfig whose clones read the variables where each use of them runs."""

    def caching_device(self):
        return None


def _traffic(model_name, batch_size, num_classes, config):
    """The StepTraffic of worker 0's step under `config` (a DeploymentConfig) training
    `model_name` on `batch_size` zero images of `num_classes` classes."""
    model_fn = _model_fn(model_name, num_classes, lambda size: (
        tf.zeros([batch_size, size, size, 3]), tf.zeros([batch_size], tf.int64)))
    with tf.Graph().as_default() as graph:
        model_deploy.deploy(config, model_fn, optimizer=_optimizer())
    return network_traffic.step_traffic(graph, config)


def measure_compute(model_name, batch_size, num_classes, steps=3):
    """sizing.Compute of one worker of one clone training `model_name` on `batch_size`
    images, timed here: the median seconds of `steps` runs of deploy()'s train_op after one
    run to warm up, and of its total loss alone (the forward pass), capped at the step's
    (the two are timed apart, and noise could invert them)."""
    devices, cpu_devices = model_deploy.local_clone_devices(1, clone_on_cpu=False)
    config = model_deploy.DeploymentConfig(clone_devices=devices)
    with tf.Graph().as_default():
        with tf.device(config.clone_device(0)):  # The batch is held where the clone runs.
            images, labels = _synthetic_batch(batch_size, image_size(model_name), num_classes)
        model = model_deploy.deploy(config, _model_fn(model_name, num_classes,
                                                      lambda size: (images, labels)),
                                    optimizer=_optimizer())
        with tf.Session(config=loop.session_config(cpu_devices)) as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            step = _median_seconds(session, model.train_op, steps)
            forward = _median_seconds(session, model.total_loss, steps)
    return sizing.Compute(step, min(forward, step))


def compression_seconds_per_byte(gradient_compression, steps=5):
    """Seconds that exchanging gradients in `gradient_compression` (a name of
    compression.COMPRESSIONS) costs this machine per float32 byte of gradient, beyond a float32
    exchange: a member's work on each tensor (narrowing its own, summing it with a received
    16-bit one, widening the sum; float16 also scales it) less a float32 sum, timed on
    PROBE_BYTES (medians of `steps` runs after one). 0 for 'none'."""
    dtype = compression.wire_dtype(gradient_compression)
    if dtype is None:
        return 0.0
    size = PROBE_BYTES // 4
    with tf.Graph().as_default():
        own = _local([size], tf.float32, 'own')
        received = _local([size], tf.float32, 'received')
        received_narrow = _local([size], dtype, 'received_narrow')
        result = _local([size], tf.float32, 'result')
        scale = (compression.scale_for(compression.max_abs(own), 2)
                 if compression.needs_scale(dtype) else None)
        narrow_sum = result.assign(compression.widened(
            compression.narrowed(own, dtype, scale) + received_narrow, scale))
        float32_sum = result.assign(own + received)
        with tf.Session() as session:
            session.run(tf.local_variables_initializer())
            extra = (_median_seconds(session, narrow_sum.op, steps) -
                     _median_seconds(session, float32_sum.op, steps))
    return max(0.0, extra) / PROBE_BYTES


def _local(shape, dtype, name):
    """A local variable of `shape` and `dtype` holding uniform values in [-1, 1)."""
    return tf.Variable(tf.cast(tf.random.uniform(shape, -1.0, 1.0), dtype), trainable=False,
                       collections=[tf.GraphKeys.LOCAL_VARIABLES], name=name)


def _model_fn(model_name, num_classes, batch):
    """model_fn for deploy(): `model_name` with `num_classes` logits on batch(image size) ->
    (images, labels), and its classification losses."""
    size = image_size(model_name)
    network_fn = nets_factory.get_network_fn(model_name, num_classes, WEIGHT_DECAY,
                                             is_training=True)

    def model_fn():
        images, labels = batch(size)
        logits, end_points = network_fn(images)
        builders.add_classification_losses(logits, end_points, labels, num_classes)
    return model_fn


def image_size(model_name):
    """The side in pixels of `model_name`'s images; UsageError naming --model_name for an
    unknown name (listing the valid ones) or a network of videos."""
    network = nets_factory.NETWORKS[model_name]
    if network.preprocessing == 'video':
        raise UsageError(f'--model_name {model_name!r} takes videos; the sizing planner builds '
                         'networks on images')
    return network.default_image_size


def _synthetic_batch(batch_size, image_size, num_classes):
    """(images [batch_size, image_size, image_size, 3] uniform in [-1, 1), labels [batch_size]
    int64 in [0, num_classes)): local variables, set once and read in place every step."""
    images = _local([batch_size, image_size, image_size, 3], tf.float32, 'synthetic_images')
    labels = tf.Variable(tf.random.uniform([batch_size], maxval=num_classes, dtype=tf.int64),
                         trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES],
                         name='synthetic_labels')
    return images, labels


def _optimizer():
    """Momentum SGD at a constant rate."""
    return tf.train.MomentumOptimizer(LEARNING_RATE, MOMENTUM)


def _median_seconds(session, fetch, steps):
    """The median wall-clock seconds of `steps` runs of `fetch`, after one unmeasured run."""
    session.run(fetch)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        session.run(fetch)
        times.append(time.perf_counter() - start)
    return statistics.median(times)
