"""TF-Slim's DCGAN generator and discriminator (Radford et al., 2015, "Unsupervised
Representation Learning with Deep Convolutional Generative Adversarial Networks").

Both work on square images whose side is a power of 2 and double or halve it with 4x4
stride-2 (transposed) convolutions, batch-normalized (moving mean zero-debiased, not
fused unless `fused_batch_norm`) except the first and last. Variables carry TF-Slim's
names: 'Discriminator/conv1/weights' ... 'Discriminator/Conv/weights' (the logits) and
'Generator/deconv1/weights' ... 'Generator/logits/weights'.
"""
import math

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)


def _is_power_of_2(size):
    return size >= 1 and math.log2(size).is_integer()


def _batch_norm_scope(is_training, fused_batch_norm):
    return slim.arg_scope([slim.batch_norm], is_training=is_training,
                          zero_debias_moving_mean=True, fused=fused_batch_norm)


def _validate_image_inputs(inputs):
    """Raises ValueError unless `inputs` is [batch, side, side, channels] with a known
    side that is a power of 2."""
    inputs.shape.assert_has_rank(4)
    height, width = inputs.shape.as_list()[1:3]
    if height is None or width is None:
        raise ValueError(f'Input tensor needs a known height and width, got shape {inputs.shape}')
    if height != width:
        raise ValueError(f'Input tensor does not have equal width and height: {height}x{width}')
    if not _is_power_of_2(width):
        raise ValueError(f'Input tensor `width` is not a power of 2: {width}')


def discriminator(inputs, depth=64, is_training=True, reuse=None, scope='Discriminator',
                  fused_batch_norm=False):
    """Builds the discriminator on float `inputs` [batch, side, side, channels], side a
    power of 2, under variable scope `scope` (with `reuse`).

    conv1 ... conv<log2(side)>: 4x4 stride-2 convolutions with leaky relu and depth *
    2 ** (i - 1) filters, batch-normalized from conv2 on (batch statistics when
    `is_training`), down to 1x1; a 1x1 convolution 'Conv' gives the logits.
    Returns (logits [batch, 1], end_points): 'conv<i>' and 'logits'.
    Raises ValueError for inputs not of that shape.
    """
    _validate_image_inputs(inputs)
    end_points = {}
    with tf.variable_scope(scope, values=[inputs], reuse=reuse), \
            _batch_norm_scope(is_training, fused_batch_norm), \
            slim.arg_scope([slim.conv2d], stride=2, kernel_size=4, activation_fn=tf.nn.leaky_relu):
        net = inputs
        for index in range(int(math.log2(inputs.shape.as_list()[1]))):
            name = f'conv{index + 1}'
            net = slim.conv2d(net, depth * 2 ** index, scope=name,
                              normalizer_fn=slim.batch_norm if index else None)
            end_points[name] = net
        logits = slim.conv2d(net, 1, kernel_size=1, stride=1, padding='VALID',
                             normalizer_fn=None, activation_fn=None)
        logits = tf.reshape(logits, [-1, 1])
        end_points['logits'] = logits
    return logits, end_points


def generator(inputs, depth=64, final_size=32, num_outputs=3, is_training=True, reuse=None,
              scope='Generator', fused_batch_norm=False):
    """Builds the generator on `inputs` [batch, n] (e.g. noise) under variable scope
    `scope` (with `reuse`).

    deconv1 turns the inputs into 4x4 (a 'VALID' 4x4 transposed convolution);
    deconv2 ... deconv<k-1> (k = log2(final_size) - 1) double the side with 4x4 stride-2
    transposed convolutions, relu and batch norm (batch statistics when `is_training`),
    halving the depth from depth * 2 ** (k - 1) to depth * 2; deconv<k> doubles it to
    final_size with `depth` filters, linear; a linear 1x1 convolution 'logits' maps to
    num_outputs channels.
    Returns (logits [batch, final_size, final_size, num_outputs], end_points):
    'deconv<i>' and 'logits'.
    Raises ValueError for inputs not of rank 2, or a final_size that is not a power of 2
    of at least 8.
    """
    inputs.shape.assert_has_rank(2)
    if not _is_power_of_2(final_size):
        raise ValueError(f'`final_size` ({final_size}) must be a power of 2.')
    if final_size < 8:
        raise ValueError(f'`final_size` ({final_size}) must be greater than 8.')
    num_layers = int(math.log2(final_size)) - 1
    end_points = {}
    with tf.variable_scope(scope, values=[inputs], reuse=reuse), \
            _batch_norm_scope(is_training, fused_batch_norm), \
            slim.arg_scope([slim.conv2d_transpose], normalizer_fn=slim.batch_norm, stride=2,
                           kernel_size=4):
        net = tf.expand_dims(tf.expand_dims(inputs, 1), 1)
        for index in range(1, num_layers + 1):
            name = f'deconv{index}'
            if index == 1:
                net = slim.conv2d_transpose(net, depth * 2 ** (num_layers - 1), stride=1,
                                            padding='VALID', scope=name)
            elif index < num_layers:
                net = slim.conv2d_transpose(net, depth * 2 ** (num_layers - index), scope=name)
            else:
                net = slim.conv2d_transpose(net, depth, normalizer_fn=None, activation_fn=None,
                                            scope=name)
            end_points[name] = net
        logits = slim.conv2d(net, num_outputs, normalizer_fn=None, activation_fn=None,
                             kernel_size=1, stride=1, padding='VALID', scope='logits')
        end_points['logits'] = logits
    logits.shape.assert_is_compatible_with([None, final_size, final_size, num_outputs])
    return logits, end_points
