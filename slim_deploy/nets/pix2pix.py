"""TF-Slim's pix2pix networks (Isola et al., 2017, "Image-to-Image Translation with
Conditional Adversarial Networks"): a U-Net generator and a PatchGAN discriminator.

Variables carry TF-Slim's names: the generator's 'encoder/Conv/weights', 'encoder/Conv_1/
...', 'decoder/Conv/...' (or 'decoder/Conv2d_transpose/...') and 'output/Conv/...'; the
discriminator's 'conv0/weights' to 'conv<n>/weights'. Neither opens a scope of its own:
wrap them in a tf.variable_scope.
"""
import collections

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

_UPSAMPLE_METHODS = ('nn_upsample_conv', 'conv2d_transpose')


def pix2pix_arg_scope():
    """The arg_scope of the pix2pix nets: slim.conv2d and slim.conv2d_transpose with
    instance normalization (centered, scaled, epsilon 1e-5) and weights drawn from
    N(0, 0.02)."""
    instance_norm_params = {'center': True, 'scale': True, 'epsilon': 0.00001}
    with slim.arg_scope([slim.conv2d, slim.conv2d_transpose],
                        normalizer_fn=slim.instance_norm,
                        normalizer_params=instance_norm_params,
                        weights_initializer=tf.random_normal_initializer(0, 0.02)) as scope:
        return scope


def upsample(net, num_outputs, kernel_size, method='nn_upsample_conv'):
    """Scales `net` [batch, height, width, channels] up by the factors `kernel_size`
    [height factor, width factor] to num_outputs channels, without activation.

    method: 'nn_upsample_conv' (nearest-neighbour resizing, then a 4x4 slim.conv2d) or
      'conv2d_transpose' (a 4x4 slim.conv2d_transpose of stride `kernel_size`).
    Raises ValueError for another method.
    """
    if method not in _UPSAMPLE_METHODS:
        raise ValueError(f'Unknown method: [{method}]; one of {_UPSAMPLE_METHODS}')
    if method == 'conv2d_transpose':
        return slim.conv2d_transpose(net, num_outputs, [4, 4], stride=kernel_size,
                                     activation_fn=None)
    size = tf.shape(net)
    net = tf.image.resize(net, [kernel_size[0] * size[1], kernel_size[1] * size[2]],
                          method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
    return slim.conv2d(net, num_outputs, [4, 4], activation_fn=None)


class Block(collections.namedtuple('Block', ['num_filters', 'decoder_keep_prob'])):
    """One level of the U-Net: an encoder convolution of `num_filters` and its mirror in
    the decoder, whose upsampled output keeps each value with probability
    `decoder_keep_prob` (0: no dropout)."""


def _default_generator_blocks():
    """TF-Slim's generator blocks: 64, 128 and 256 filters with dropout 0.5, then four
    of 512 filters without."""
    return [Block(64, 0.5), Block(128, 0.5), Block(256, 0.5)] + [Block(512, 0)] * 4


def pix2pix_generator(net, num_outputs, blocks=None, upsample_method='nn_upsample_conv',
                      is_training=False):
    """Builds the U-Net generator on `net` [batch, height, width, channels], height and
    width known and multiples of 2 ** len(blocks) (128 for the default blocks).

    num_outputs: channels of the output.
    blocks: Block list, outermost first; None: _default_generator_blocks().
    upsample_method: upsample()'s method in the decoder.
    is_training: unused (the decoder's dropout acts in evaluation too, as in the paper).
    Encoder: 4x4 stride-2 convolutions with leaky relu (the first without normalizer,
    the last with neither activation nor normalizer); decoder: relu, upsample and
    dropout per block, each after the first also fed the mirrored encoder output;
    output: a 4x4 convolution to num_outputs.
    Returns (logits [batch, height, width, num_outputs], end_points): 'encoder<i>',
    'decoder<i>', 'logits' and 'predictions' (tanh of the logits).
    Raises ValueError for a height or width that is unknown or not such a multiple.
    """
    del is_training
    blocks = blocks or _default_generator_blocks()
    output_shape = net.shape.as_list()
    scale = 2 ** len(blocks)
    if any(size is None or size % scale for size in output_shape[1:3]):
        raise ValueError(f'pix2pix_generator needs a height and width that are multiples of '
                         f'{scale} (2 ** len(blocks)), got shape {output_shape}')
    output_shape[0] = -1 if output_shape[0] is None else output_shape[0]
    output_shape[3] = num_outputs
    end_points = {}
    encoder_outputs = []
    with tf.variable_scope('encoder'), \
            slim.arg_scope([slim.conv2d], kernel_size=[4, 4], stride=2,
                           activation_fn=tf.nn.leaky_relu):
        for index, block in enumerate(blocks):
            if index == 0:
                net = slim.conv2d(net, block.num_filters, normalizer_fn=None)
            elif index < len(blocks) - 1:
                net = slim.conv2d(net, block.num_filters)
            else:
                net = slim.conv2d(net, block.num_filters, activation_fn=None, normalizer_fn=None)
            encoder_outputs.append(net)
            end_points[f'encoder{index}'] = net
    with tf.variable_scope('decoder'), slim.arg_scope([slim.dropout], is_training=True):
        for index, block in enumerate(reversed(blocks)):
            if index > 0:
                net = tf.concat([net, encoder_outputs[-index - 1]], axis=3)
            net = upsample(tf.nn.relu(net), block.num_filters, [2, 2], method=upsample_method)
            if block.decoder_keep_prob > 0:
                net = slim.dropout(net, keep_prob=block.decoder_keep_prob)
            end_points[f'decoder{index}'] = net
    with tf.variable_scope('output'):
        logits = slim.conv2d(net, num_outputs, [4, 4], activation_fn=None, normalizer_fn=None)
        logits = tf.reshape(logits, output_shape)
        end_points['logits'] = logits
        end_points['predictions'] = tf.tanh(logits)
    return logits, end_points


def pix2pix_discriminator(net, num_filters, padding=2, pad_mode='REFLECT',
                          activation_fn=tf.nn.leaky_relu, is_training=False):
    """Builds the PatchGAN discriminator on `net` [batch, height, width, channels].

    num_filters: the filters of conv0 ... conv<n-1> (n >= 2 layers): 4x4 'VALID'
      convolutions with `activation_fn`, stride 2 but the last's 1, conv0 without the
      normalizer; a 4x4 stride-1 convolution conv<n> to 1 channel gives the logits.
    padding: pixels of `pad_mode` padding ('CONSTANT', 'REFLECT' or 'SYMMETRIC', as
      tf.pad) added on each side before every convolution; 0: none.
    is_training: unused (no dropout or batch norm).
    Returns (logits [batch, patches, patches, 1], end_points): 'conv0' ... 'conv<n-1>',
    'logits' and 'predictions' (sigmoid of the logits).
    Raises ValueError for fewer than 2 entries in num_filters.
    """
    del is_training
    if len(num_filters) < 2:
        raise ValueError(f'num_filters needs at least 2 entries, got {num_filters!r}')

    def padded(net, scope):
        if not padding:
            return net
        with tf.variable_scope(scope):
            paddings = tf.constant([[0, 0], [padding, padding], [padding, padding], [0, 0]],
                                   dtype=tf.int32)
            return tf.pad(net, paddings, mode=pad_mode)

    end_points = {}
    last = len(num_filters) - 1
    with slim.arg_scope([slim.conv2d], kernel_size=[4, 4], stride=2, padding='valid',
                        activation_fn=activation_fn):
        for index, filters in enumerate(num_filters):
            scope = f'conv{index}'
            options = {'stride': 1} if index == last else {}
            if index == 0:
                options['normalizer_fn'] = None  # None on the input layer.
            net = slim.conv2d(padded(net, scope), filters, scope=scope, **options)
            end_points[scope] = net
        scope = f'conv{last + 1}'
        logits = slim.conv2d(padded(net, scope), 1, stride=1, activation_fn=None,
                             normalizer_fn=None, scope=scope)
    end_points['logits'] = logits
    end_points['predictions'] = tf.sigmoid(logits)
    return logits, end_points
