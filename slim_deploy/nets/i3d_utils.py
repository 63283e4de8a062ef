"""Building blocks of TF-Slim's video nets, I3D (slim_deploy/nets/i3d.py) and S3D-G
(slim_deploy/nets/s3dg.py): spatiotemporal convolutions, 3-D Inception blocks and their
arg_scope.

Videos are 5-D: [batch, frames, height, width, channels] ('NDHWC') or [batch, channels,
frames, height, width] ('NCDHW'); kernels and strides are [time, height, width].
"""
import numpy as np
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

# TF-Slim's module-level aliases.
add_arg_scope = slim.add_arg_scope
layers = slim.layers


def center_initializer():
    """Returns an initializer of temporal kernels [k, 1, 1, c, c] (k odd) that copy the
    center frame, so a separable convolution starts as its spatial half alone.

    The initializer raises ValueError for a dtype other than float32 or bfloat16, or any
    other shape.
    """
    def initializer(shape, dtype=tf.float32, partition_info=None):
        del partition_info  # Part of the initializer signature.
        if dtype not in (tf.float32, tf.bfloat16):
            raise ValueError(f'center_initializer makes float32 or bfloat16 kernels, not {dtype}')
        shape = [int(size) for size in shape]
        if len(shape) != 5 or shape[1:3] != [1, 1] or shape[3] != shape[4] or shape[0] % 2 == 0:
            raise ValueError('center_initializer needs a temporal kernel [odd, 1, 1, c, c], '
                             f'got shape {shape}')
        kernel = np.zeros(shape, np.float32)
        kernel[shape[0] // 2, 0, 0] = np.eye(shape[3])
        return tf.constant(kernel, dtype=dtype)
    return initializer


def _triple(value):
    """[value] * 3 for a number, else `value` as a list of 3."""
    values = [value] * 3 if np.ndim(value) == 0 else list(value)
    if len(values) != 3:
        raise ValueError(f'expected a number or 3 values [time, height, width], got {value!r}')
    return values


@add_arg_scope
def conv3d_spatiotemporal(inputs, num_outputs, kernel_size, stride=1, padding='SAME',
                          activation_fn=None, normalizer_fn=None, normalizer_params=None,
                          weights_regularizer=None, separable=False, data_format='NDHWC',
                          scope=''):
    """A slim.conv3d of `kernel_size` [time, height, width] (or one number) and `stride`,
    variables under `scope`; with `separable` and a temporal extent over 1, two instead:
    a [1, height, width] convolution with the normalizer, then a [time, 1, 1] one under
    `scope`/temporal with biases, the same activation, no normalizer and weights from
    center_initializer().

    The activation and normalizer default to none (TF-Slim's video arg_scopes set them);
    weights' initializers come from slim.conv3d's arg_scope.
    Returns the output [batch, frames', height', width', num_outputs] (in `data_format`).
    """
    kernel_size, stride = _triple(kernel_size), _triple(stride)
    separate = separable and kernel_size[0] != 1
    conv = dict(padding=padding, activation_fn=activation_fn, data_format=data_format)
    net = layers.conv3d(inputs, num_outputs, [1] + kernel_size[1:] if separate else kernel_size,
                        stride=[1] + stride[1:] if separate else stride, scope=scope,
                        normalizer_fn=normalizer_fn, normalizer_params=normalizer_params,
                        weights_regularizer=weights_regularizer, **conv)
    if not separate:
        return net
    return layers.conv3d(net, num_outputs, [kernel_size[0], 1, 1], stride=[stride[0], 1, 1],
                         scope=scope + '/temporal', normalizer_fn=None,
                         weights_initializer=center_initializer(), **conv)


@add_arg_scope
def inception_block_v1_3d(inputs, num_outputs_0_0a, num_outputs_1_0a, num_outputs_1_0b,
                          num_outputs_2_0a, num_outputs_2_0b, num_outputs_3_0b,
                          temporal_kernel_size=3, self_gating_fn=None, data_format='NDHWC',
                          scope=''):
    """An Inception v1 block in 3-D under variable scope `scope`: four branches,
    concatenated along channels.

    Branch_0: Conv2d_0a_1x1 (num_outputs_0_0a); Branch_1 and Branch_2: Conv2d_0a_1x1
    then Conv2d_0b_3x3 [temporal_kernel_size, 3, 3] (a conv3d_spatiotemporal);
    Branch_3: MaxPool_0a_3x3 [3, 3, 3] then Conv2d_0b_1x1. Strides, padding and the
    layers' data_format come from the arg_scope; `data_format` only names the channel
    axis. self_gating_fn: (net, scope) -> net, applied to each branch's output (scope
    its last layer's), e.g. s3dg.self_gating; None: no gating.
    Returns [batch, frames, height, width, num_outputs_0_0a + num_outputs_1_0b +
    num_outputs_2_0b + num_outputs_3_0b] (in `data_format`).
    """
    spatiotemporal = [temporal_kernel_size, 3, 3]
    branches = (
        (None, [(layers.conv3d, num_outputs_0_0a, [1, 1, 1], 'Conv2d_0a_1x1')]),
        (None, [(layers.conv3d, num_outputs_1_0a, [1, 1, 1], 'Conv2d_0a_1x1'),
                (conv3d_spatiotemporal, num_outputs_1_0b, spatiotemporal, 'Conv2d_0b_3x3')]),
        (None, [(layers.conv3d, num_outputs_2_0a, [1, 1, 1], 'Conv2d_0a_1x1'),
                (conv3d_spatiotemporal, num_outputs_2_0b, spatiotemporal, 'Conv2d_0b_3x3')]),
        ('MaxPool_0a_3x3', [(layers.conv3d, num_outputs_3_0b, [1, 1, 1], 'Conv2d_0b_1x1')]),
    )
    outputs = []
    with tf.variable_scope(scope):
        for index, (pool, convs) in enumerate(branches):
            with tf.variable_scope(f'Branch_{index}'):
                net = layers.max_pool3d(inputs, [3, 3, 3], scope=pool) if pool else inputs
                for conv, depth, kernel_size, name in convs:
                    net = conv(net, depth, kernel_size, scope=name)
                if self_gating_fn is not None:
                    net = self_gating_fn(net, scope=name)
            outputs.append(net)
        return tf.concat(outputs, data_format.index('C'))


def reduced_kernel_size_3d(input_tensor, kernel_size):
    """Returns `kernel_size` [time, height, width], each shrunk to the size of
    `input_tensor` [batch, frames, height, width, channels] where that is smaller; as
    given if any of the three sizes is unknown."""
    if len(kernel_size) != 3 or input_tensor.shape.rank != 5:
        raise ValueError('expected a kernel [time, height, width] and a 5-D input, got '
                         f'{kernel_size!r} and shape {input_tensor.shape}')
    sizes = input_tensor.shape.as_list()[1:4]
    if None in sizes:
        return kernel_size
    return [min(size, kernel) for size, kernel in zip(sizes, kernel_size)]


def video_inception_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999,
                              batch_norm_epsilon=0.001, use_renorm=False, separable=False):
    """The arg_scope of TF-Slim's I3D and S3D-G: slim.conv3d and conv3d_spatiotemporal
    with relu, an L2 penalty of `weight_decay` on their weights (0: none) and batch
    normalization (decay `batch_norm_decay`, epsilon `batch_norm_epsilon`, batch
    renormalization if `use_renorm`, no scale, not fused; the moving statistics also in
    the collection 'moving_vars'); conv3d_spatiotemporal separable if `separable`."""
    batch_norm_params = {
        'decay': batch_norm_decay,
        'epsilon': batch_norm_epsilon,
        'fused': False,
        'renorm': use_renorm,
        'variables_collections': {'moving_mean': ['moving_vars'],
                                  'moving_variance': ['moving_vars']},
    }
    with slim.arg_scope([slim.conv3d, conv3d_spatiotemporal],
                        weights_regularizer=slim.l2_regularizer(weight_decay),
                        activation_fn=tf.nn.relu,
                        normalizer_fn=slim.batch_norm,
                        normalizer_params=batch_norm_params), \
            slim.arg_scope([conv3d_spatiotemporal], separable=separable) as scope:
        return scope
