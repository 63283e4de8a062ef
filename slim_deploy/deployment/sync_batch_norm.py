"""Synchronized batch normalization: the clones normalize with the moments of the global batch.

While a clone is built, TensorFlow's batch-normalization primitives are replaced:
`fused_batch_norm` in training mode and `moments` over the batch axis (axis 0), wherever
they are reached from (tf.nn, tf.compat.v1.nn, and the modules slim and tf-keras call). Each
clone all-reduces the per-channel sum, sum of squares and count of its batch (in float32)
over every member of the group, so every clone gets the mean and variance of the whole
batch; the gradient of that all-reduce is an all-reduce of the gradients, so the backward
pass is that of one batch norm over the global batch. slim.batch_norm, tf.layers and tf-keras
batch normalization are thus synchronized without any change to the model; moments over
other axes (layer and instance norm) are left alone.

The k-th synchronized call of each clone all-reduces with the k-th of the others: every
clone must make the same calls in the same order, as calls of one model_fn do. Each call's
backward all-reduce has its key too, so each clone's gradients are built once (as
optimize_clones does); every member's all-reduces must run in the same session.run.
"""
import contextlib
import sys

import tensorflow.compat.v1 as tf
from tensorflow.python.ops import nn_impl

from slim_deploy.deployment import all_reduce

_ORIGINAL = {'fused_batch_norm': nn_impl.fused_batch_norm, 'moments': nn_impl.moments}
_MIN_EPSILON = 1.001e-5  # The fused kernel's smallest epsilon, which it enforces.
# Reduced axes of fused batch norm per data format: all but the channels'.
_SCOPE = 'sync_moments'  # Name scope of the forward all-reduce (and its inputs).
_FUSED_AXES = {'NHWC': [0, 1, 2], 'NCHW': [0, 2, 3], 'NDHWC': [0, 1, 2, 3],
               'NCDHW': [0, 2, 3, 4]}


class SyncBatchNorm:
    """The synchronized batch norms of one deployment's clones.

    group: an all_reduce.Group of every clone that normalizes together (this process's
      clones, in order, and in 'collective' mode every other worker's).
    """

    def __init__(self, group):
        self._group = group
        self._keys = []  # Per call index: (forward, backward) instance keys.
        self._device = None  # Device of the clone being built.
        self._calls = 0  # Calls made by the clone being built.
        self._clone_index = None

    @contextlib.contextmanager
    def building(self, clone_index):
        """Synchronizes the batch norms built in this context, by clone `clone_index`."""
        self._clone_index, self._calls = clone_index, 0
        self._device = self._group.local_devices[clone_index]
        with _replaced({'fused_batch_norm': self._fused_batch_norm,
                        'moments': self._moments}):
            yield
        if clone_index and self._calls != len(self._keys):
            raise ValueError(f'clone {clone_index} of model_fn normalized {self._calls} '
                             f'batches, clone 0 {len(self._keys)}: with sync_batch_norm '
                             'every clone must build the same batch norms (build a Keras '
                             'model before deploy(), not at the first call of model_fn)')

    def _next_keys(self):
        """The instance keys of the clone's next synchronized call."""
        if self._clone_index == 0:
            self._keys.append((all_reduce.next_instance_key(), all_reduce.next_instance_key()))
        elif self._calls >= len(self._keys):
            raise ValueError(f'clone {self._clone_index} of model_fn normalizes more batches '
                             f'than clone 0 ({len(self._keys)}): with sync_batch_norm every '
                             'clone must build the same batch norms')
        keys = self._keys[self._calls]
        self._calls += 1
        return keys

    def _global_moments(self, x, axes):
        """(mean, variance, count) of `x` over `axes` and every member of the group: mean
        and variance (without Bessel's correction) in float32, of x's shape reduced over
        axes; count a float32 scalar, the number of values each is taken over."""
        forward_key, backward_key = self._next_keys()
        group, device = self._group, self._device

        @tf.custom_gradient
        def all_sum(local):
            def grad(upstream):
                with tf.device(device):
                    return all_reduce.sum_on_member(upstream, group, backward_key)
            return all_reduce.sum_on_member(local, group, forward_key), grad

        with tf.device(device), tf.name_scope(_SCOPE):
            x = tf.cast(x, tf.float32)
            sums = tf.reduce_sum(x, axes)
            channels = tf.size(sums)
            count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(x), axes)), tf.float32)
            total = all_sum(tf.concat([tf.reshape(sums, [-1]),
                                       tf.reshape(tf.reduce_sum(tf.square(x), axes), [-1]),
                                       [count]], axis=0))
            count = total[-1]
            mean = tf.reshape(total[:channels] / count, tf.shape(sums))
            mean_of_squares = tf.reshape(total[channels:-1] / count, tf.shape(sums))
            variance = tf.maximum(mean_of_squares - tf.square(mean), 0.0)
        return mean, variance, count

    def _moments(self, x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
        """tf.nn.moments, over the global batch when `axes` holds the batch axis."""
        x = tf.convert_to_tensor(x)
        axes = [axis % x.shape.rank for axis in axes]
        if 0 not in axes:
            return _ORIGINAL['moments'](x, axes, shift, name, keep_dims, keepdims)
        keep = bool(keepdims if keep_dims is None else keep_dims)
        with tf.name_scope(name or 'moments'):
            mean, variance, _ = self._global_moments(x, axes)
            for axis in sorted(axes) if keep else ():
                mean, variance = tf.expand_dims(mean, axis), tf.expand_dims(variance, axis)
            return tf.cast(mean, x.dtype), tf.cast(variance, x.dtype)

    def _fused_batch_norm(self, x, scale, offset, mean=None, variance=None, epsilon=0.001,
                          data_format='NHWC', is_training=True, name=None,
                          exponential_avg_factor=1.0):
        """tf.nn.fused_batch_norm; in training, over the global batch: returns (y, batch
        mean, batch variance with Bessel's correction for the global count), as the fused
        kernel does for one batch (blended into `mean` and `variance` by
        exponential_avg_factor when it is not 1)."""
        if not is_training:
            return _ORIGINAL['fused_batch_norm'](
                x, scale, offset, mean, variance, epsilon, data_format, is_training, name,
                exponential_avg_factor)
        x = tf.convert_to_tensor(x)
        with tf.name_scope(name or 'FusedBatchNorm'):
            batch_mean, batch_variance, count = self._global_moments(
                x, _FUSED_AXES[data_format])
            channels_last = data_format.endswith('C')
            shape = [-1] + [1] * (x.shape.rank - 2) if not channels_last else [-1]
            scale_by = tf.reshape(tf.cast(scale, tf.float32) * tf.math.rsqrt(
                batch_variance + max(epsilon, _MIN_EPSILON)), shape)
            shift_by = tf.reshape(tf.cast(offset, tf.float32), shape) - tf.reshape(
                batch_mean, shape) * scale_by
            y = tf.cast(tf.cast(x, tf.float32) * scale_by + shift_by, x.dtype)
            batch_variance *= count / tf.maximum(count - 1.0, 1.0)
            if exponential_avg_factor not in (None, 1.0):
                blend = exponential_avg_factor
                batch_mean = (1.0 - blend) * mean + blend * batch_mean
                batch_variance = (1.0 - blend) * variance + blend * batch_variance
            return y, batch_mean, batch_variance


def is_forward_reduce(op):
    """Whether `op` is the all-reduce of a synchronized batch norm's moments (not of their
    gradients): one per batch norm and clone."""
    return op.type == 'CollectiveReduce' and op.name.endswith(f'{_SCOPE}/CollectiveReduce')


@contextlib.contextmanager
def _replaced(functions):
    """Binds each of `functions` ({name: function}) instead of the original function of that
    name (_ORIGINAL) in every loaded module that holds it, until the context exits."""
    bound = [(module, name) for module in list(sys.modules.values())
             for name in functions
             if vars(module).get(name) is _ORIGINAL[name]]  # vars: no lazy loading.
    for module, name in bound:
        setattr(module, name, functions[name])
    try:
        yield
    finally:
        for module, name in bound:
            setattr(module, name, _ORIGINAL[name])
