"""TF-Slim's CycleGAN generator (Zhu et al., 2017, "Unpaired Image-to-Image Translation
using Cycle-Consistent Adversarial Networks"): a ResNet encoder-decoder that keeps the
image's size, after Johnson et al.'s style-transfer net.

Variables carry TF-Slim's names, under no scope of the generator's own: 'input/Conv/
weights', 'encoder/Conv/...', 'encoder/Conv_1/...', 'residual_blocks/block_<i>/Conv/...'
and '.../Conv_1/...', 'decoder/decoder1/upconv/...', 'decoder/decoder2/upconv/...' and
'output/Conv/...'.
"""
import numpy as np
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

_UPSAMPLE_METHODS = ('nn_upsample_conv', 'bilinear_upsample_conv', 'conv2d_transpose')


def cyclegan_arg_scope(instance_norm_center=True, instance_norm_scale=True,
                       instance_norm_epsilon=0.001, weights_init_stddev=0.02, weight_decay=0.0):
    """The arg_scope of the CycleGAN nets: slim.conv2d with instance normalization
    (`instance_norm_center`, `instance_norm_scale`, `instance_norm_epsilon`), weights drawn
    from N(0, weights_init_stddev) and an L2 penalty of `weight_decay` (0: none)."""
    instance_norm_params = {'center': instance_norm_center, 'scale': instance_norm_scale,
                            'epsilon': instance_norm_epsilon}
    regularizer = slim.l2_regularizer(weight_decay) if weight_decay and weight_decay > 0 else None
    with slim.arg_scope([slim.conv2d],
                        normalizer_fn=slim.instance_norm,
                        normalizer_params=instance_norm_params,
                        weights_initializer=tf.random_normal_initializer(0, weights_init_stddev),
                        weights_regularizer=regularizer) as scope:
        return scope


def _pad(net, pads, mode='REFLECT'):
    """`net` [batch, height, width, channels] padded by `pads` [[top, bottom], [left,
    right]] in `mode` (tf.pad's: 'CONSTANT', 'REFLECT' or 'SYMMETRIC')."""
    return tf.pad(net, np.array([[0, 0], *pads, [0, 0]], dtype=np.int32), mode=mode)


def cyclegan_upsample(net, num_outputs, stride, method='conv2d_transpose', pad_mode='REFLECT',
                      align_corners=False):
    """Scales `net` [batch, height, width, channels] up by the factors `stride` [height
    factor, width factor] to num_outputs channels, under variable scope 'upconv'.

    method: 'nn_upsample_conv' or 'bilinear_upsample_conv' (nearest-neighbour or
      bilinear resizing, `align_corners` for the latter, then a 3x3 slim.conv2d on the
      input padded by 1 pixel in `pad_mode`), or 'conv2d_transpose' (a 3x3
      slim.conv2d_transpose of stride `stride`, cropped by its first row and column).
    Raises ValueError for another method.
    """
    if method not in _UPSAMPLE_METHODS:
        raise ValueError(f'Unknown method: [{method}]; one of {_UPSAMPLE_METHODS}')
    with tf.variable_scope('upconv'):
        size = tf.shape(net)
        new_size = [stride[0] * size[1], stride[1] * size[2]]
        if method == 'conv2d_transpose':
            # 'VALID' makes the output one pixel larger; dropping the first row and column
            # aligns it as a 'SAME' convolution would be for even sizes.
            net = slim.conv2d_transpose(net, num_outputs, kernel_size=[3, 3], stride=stride,
                                        padding='valid')
            return net[:, 1:, 1:, :]
        if method == 'nn_upsample_conv':
            net = tf.image.resize(net, new_size, method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
        else:
            net = tf.image.resize_bilinear(net, new_size, align_corners=align_corners)
        net = _pad(net, [[1, 1], [1, 1]], mode=pad_mode)
        return slim.conv2d(net, num_outputs, kernel_size=[3, 3], padding='valid')


def _static_or_dynamic_shape(tensor):
    """`tensor`'s shape as numbers if known when the graph is built, else as a tensor."""
    shape = tf.shape(tensor)
    static_shape = tf.get_static_value(shape)
    return shape if static_shape is None else static_shape


def cyclegan_generator_resnet(images, arg_scope_fn=cyclegan_arg_scope, num_resnet_blocks=6,
                              num_filters=64, upsample_fn=cyclegan_upsample, kernel_size=3,
                              tanh_linear_slope=0.0, is_training=False):
    """Builds the generator on `images` [batch, height, width, channels], height and
    width multiples of 4, in the arg_scope arg_scope_fn().

    Encoder: a 7x7 convolution of num_filters, two stride-2 convolutions of
    2 * num_filters and 4 * num_filters; then num_resnet_blocks residual blocks of two
    convolutions each; decoder: upsample_fn(net, num_outputs=..., stride=[2, 2]) to
    2 * num_filters then num_filters channels (cyclegan_upsample: a 3x3 transposed
    convolution); a 7x7 convolution to the images' channels gives the logits. Inner
    convolutions have kernel_size (an int or [height, width]) and relu, and pad by
    reflection; no dropout or batch norm, so is_training is unused.
    Returns (predictions, end_points): predictions = tanh(logits) + tanh_linear_slope *
    logits, of the images' shape; end_points 'encoder_0' ... 'encoder_2',
    'resnet_block_<i>', 'decoder1', 'decoder2', 'logits' and 'predictions'.
    Raises ValueError for a known height or width that is not a multiple of 4.
    """
    del is_training
    shape = images.shape.as_list()
    for name, size in (('height', shape[1]), ('width', shape[2])):
        if size and size % 4:
            raise ValueError(f'The input {name} must be a multiple of 4, got {size}.')
    num_outputs = shape[3]
    kernel_height, kernel_width = (
        kernel_size if isinstance(kernel_size, (list, tuple)) else [kernel_size] * 2)
    # Pads that keep the size through a 'VALID' convolution (more after than before).
    kernel_pads = [[(kernel_height - 1) // 2, kernel_height // 2],
                   [(kernel_width - 1) // 2, kernel_width // 2]]
    inner_convs = dict(kernel_size=kernel_size, activation_fn=tf.nn.relu)

    end_points = {}
    with slim.arg_scope(arg_scope_fn()):
        with tf.variable_scope('input'):
            net = slim.conv2d(_pad(images, [[3, 3], [3, 3]]), num_filters,
                              kernel_size=[7, 7], padding='VALID')
            end_points['encoder_0'] = net
        with tf.variable_scope('encoder'), \
                slim.arg_scope([slim.conv2d], stride=2, padding='VALID', **inner_convs):
            for index in (1, 2):
                net = slim.conv2d(_pad(net, kernel_pads), num_filters * 2 ** index)
                end_points[f'encoder_{index}'] = net
        with tf.variable_scope('residual_blocks'), \
                slim.arg_scope([slim.conv2d], stride=1, padding='VALID', **inner_convs):
            for index in range(num_resnet_blocks):
                with tf.variable_scope(f'block_{index}'):
                    residual = slim.conv2d(_pad(net, kernel_pads), num_filters * 4)
                    residual = slim.conv2d(_pad(residual, kernel_pads), num_filters * 4,
                                           activation_fn=None)
                    net = net + residual
                    end_points[f'resnet_block_{index}'] = net
        with tf.variable_scope('decoder'), \
                slim.arg_scope([slim.conv2d], stride=1, **inner_convs):
            for index, depth in ((1, num_filters * 2), (2, num_filters)):
                with tf.variable_scope(f'decoder{index}'):
                    net = upsample_fn(net, num_outputs=depth, stride=[2, 2])
                end_points[f'decoder{index}'] = net
        with tf.variable_scope('output'):
            logits = slim.conv2d(_pad(net, [[3, 3], [3, 3]]), num_outputs, [7, 7],
                                 activation_fn=None, normalizer_fn=None, padding='valid')
            logits = tf.reshape(logits, _static_or_dynamic_shape(images))
            end_points['logits'] = logits
            end_points['predictions'] = tf.tanh(logits) + logits * tanh_linear_slope
    return end_points['predictions'], end_points
