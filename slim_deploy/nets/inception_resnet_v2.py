"""TF-Slim's Inception-ResNet v2 (Szegedy et al. 2016, arXiv:1602.07261), for 299x299 images.

Inception v3's stem, then residual Inception blocks: 10 block35 at 35x35x320, 20 block17
at 17x17x1088 and 10 block8 at 8x8x2080 (the last without activation), with the reduction
blocks Mixed_6a and Mixed_7a between them, an auxiliary classifier on the 17x17 blocks and
the classifier. A residual block projects its concatenated branches back to its input's
depth (1x1 with biases, no batch normalization), scales them and adds them to its input.
Variable names and shapes match TF-Slim's ImageNet checkpoint (1001 classes), e.g.
'InceptionResnetV2/Repeat/block35_1/Branch_0/Conv2d_1x1/weights' [1, 1, 320, 32].
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import inception_utils
from slim_deploy.nets.inception_utils import VALID, Layer, pool

MIXED_5B = (  # 35x35x192 -> 35x35x320
    [Layer('Conv2d_1x1', 96)],
    [Layer('Conv2d_0a_1x1', 48), Layer('Conv2d_0b_5x5', 64)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96), Layer('Conv2d_0c_3x3', 96)],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 64)])
BLOCK35 = (  # The residual branches at 35x35x320.
    [Layer('Conv2d_1x1', 32)],
    [Layer('Conv2d_0a_1x1', 32), Layer('Conv2d_0b_3x3', 32)],
    [Layer('Conv2d_0a_1x1', 32), Layer('Conv2d_0b_3x3', 48), Layer('Conv2d_0c_3x3', 64)])
BLOCK17 = (  # The residual branches at 17x17x1088.
    [Layer('Conv2d_1x1', 192)],
    [Layer('Conv2d_0a_1x1', 128), Layer('Conv2d_0b_1x7', 160), Layer('Conv2d_0c_7x1', 192)])
BLOCK8 = (  # The residual branches at 8x8x2080.
    [Layer('Conv2d_1x1', 192)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_1x3', 224), Layer('Conv2d_0c_3x1', 256)])
END_POINTS = ('Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'MaxPool_3a_3x3',
              'Conv2d_3b_1x1', 'Conv2d_4a_3x3', 'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_6a',
              'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1')


def _mixed_6a(stride, padding):
    """The reduction 35x35x320 -> 17x17x1088 (with stride 2 and 'VALID' padding)."""
    return ([Layer('Conv2d_1a_3x3', 384, stride, padding)],
            [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_0b_3x3', 256),
             Layer('Conv2d_1a_3x3', 384, stride, padding)],
            [pool('MaxPool_1a_3x3', stride, padding)])


def _mixed_7a(padding):
    """The reduction 17x17x1088 -> 8x8x2080 (with 'VALID' padding)."""
    return ([Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_1a_3x3', 384, 2, padding)],
            [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_1a_3x3', 288, 2, padding)],
            [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_0b_3x3', 288),
             Layer('Conv2d_1a_3x3', 320, 2, padding)],
            [pool('MaxPool_1a_3x3', 2, padding)])


def _residual_block(net, branches, scale, activation_fn, scope, default_name, reuse):
    """net + scale * (the projection 'Conv2d_1x1' of the concatenated `branches` to net's
    depth), clipped to [-6, 6] first if activation_fn is relu6, then activation_fn (None:
    none); in variable scope `scope` (None: `default_name`, made unique)."""
    with tf.variable_scope(scope, default_name, [net], reuse=reuse):
        residual = slim.conv2d(inception_utils.concat_branches(net, branches), net.shape[3],
                               [1, 1], normalizer_fn=None, activation_fn=None,
                               scope='Conv2d_1x1')
        residual = residual * scale
        if activation_fn == tf.nn.relu6:
            residual = tf.clip_by_value(residual, -6.0, 6.0)
        net += residual
        return activation_fn(net) if activation_fn else net


def block35(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
    """The residual block at 35x35x320 (see _residual_block; default scope 'Block35')."""
    return _residual_block(net, BLOCK35, scale, activation_fn, scope, 'Block35', reuse)


def block17(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
    """The residual block at 17x17x1088 (see _residual_block; default scope 'Block17')."""
    return _residual_block(net, BLOCK17, scale, activation_fn, scope, 'Block17', reuse)


def block8(net, scale=1.0, activation_fn=tf.nn.relu, scope=None, reuse=None):
    """The residual block at 8x8x2080 (see _residual_block; default scope 'Block8')."""
    return _residual_block(net, BLOCK8, scale, activation_fn, scope, 'Block8', reuse)


def inception_resnet_v2_base(inputs, final_endpoint='Conv2d_7b_1x1', output_stride=16,
                             align_feature_maps=False, scope=None, activation_fn=tf.nn.relu):
    """Builds Inception-ResNet v2 on `inputs` [batch, height, width, channels] up to the
    end point `final_endpoint`, one of END_POINTS: the stem's (299x299 -> 35x35x192),
    'Mixed_5b' (35x35x320), 'Mixed_6a' (after the block35s; 17x17x1088), 'PreAuxLogits'
    (after the block17s), 'Mixed_7a' (8x8x2080) and 'Conv2d_7b_1x1' (after the block8s;
    8x8x1536). The block35s, block17s and block8s are in variable scopes 'Repeat',
    'Repeat_1' and 'Repeat_2' ('block35_1', ...), then 'Block8' (no activation).

    output_stride: 16, or 8 (only up to PreAuxLogits): Mixed_6a does not stride and the
      block17s' convolutions dilate by 2 instead.
    align_feature_maps: pads 'SAME' where the net pads 'VALID', so that every map is
      ceil(input side / its stride) wide (299x299 -> 38x38 at Mixed_5b, not 35x35).
    scope: variable scope (a name or a VariableScope; None: 'InceptionResnetV2').
    activation_fn: the residual blocks' activation.
    Returns (net, end_points): the final end point's output and {end point: output}.
    Raises ValueError, building nothing, if output_stride is not 8 or 16, or
    final_endpoint is none of END_POINTS or after PreAuxLogits with output_stride 8.
    """
    if output_stride not in (8, 16):
        raise ValueError(f'output_stride must be 8 or 16, got {output_stride!r}')
    if (output_stride == 8 and final_endpoint in END_POINTS
            and END_POINTS.index(final_endpoint) > END_POINTS.index('PreAuxLogits')):
        raise ValueError(f'output_stride 8 builds up to PreAuxLogits only, not to '
                         f'{final_endpoint!r}')
    padding = 'SAME' if align_feature_maps else VALID
    atrous = output_stride == 8

    def mixed_6a(net):
        net = slim.repeat(net, 10, block35, scale=0.17, activation_fn=activation_fn)
        with tf.variable_scope('Mixed_6a'):
            return inception_utils.concat_branches(net, _mixed_6a(1 if atrous else 2, padding))

    def pre_aux_logits(net):
        with slim.arg_scope([slim.conv2d], rate=2 if atrous else 1):
            return slim.repeat(net, 20, block17, scale=0.10, activation_fn=activation_fn)

    def conv2d_7b(net):
        net = slim.repeat(net, 9, block8, scale=0.20, activation_fn=activation_fn)
        net = block8(net, activation_fn=None)
        return slim.conv2d(net, 1536, [1, 1], scope='Conv2d_7b_1x1')

    stages = inception_utils.stem_299(padding) + [
        ('Mixed_5b', MIXED_5B), ('Mixed_6a', mixed_6a), ('PreAuxLogits', pre_aux_logits),
        ('Mixed_7a', _mixed_7a(padding)), ('Conv2d_7b_1x1', conv2d_7b)]
    with tf.variable_scope(scope, 'InceptionResnetV2', [inputs]):
        return inception_utils.build_stages(inputs, stages, final_endpoint)


def inception_resnet_v2(inputs, num_classes=1001, is_training=True, dropout_keep_prob=0.8,
                        reuse=None, scope='InceptionResnetV2', create_aux_logits=True,
                        activation_fn=tf.nn.relu):
    """Builds Inception-ResNet v2 on `inputs`, float32 [batch, 299, 299, 3] (any size from
    75x75 up; from 107x107 up with the auxiliary classifier, whose kernel grows with the
    size; height and width may be unknown without it).

    num_classes: width of the logits layers (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None omits them and the dropout, and returns the pooled features
      [batch, 1, 1, 1536].
    is_training: puts batch normalization and dropout in training mode.
    dropout_keep_prob: probability of keeping a feature before the logits layer.
    reuse: reuses the variables of the variable scope `scope` (a name or a VariableScope).
    create_aux_logits: builds the auxiliary classifier on PreAuxLogits (with num_classes).
    activation_fn: the residual blocks' activation.
    Returns (net, end_points): the logits [batch, num_classes] (or the features), and the
    end points of inception_resnet_v2_base, 'AuxLogits', 'global_pool',
    'PreLogitsFlatten', 'Logits' and 'Predictions' (softmax).
    """
    with tf.variable_scope(scope, 'InceptionResnetV2', [inputs], reuse=reuse) as scope, \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = inception_resnet_v2_base(inputs, scope=scope,
                                                   activation_fn=activation_fn)
        if create_aux_logits and num_classes:
            end_points['AuxLogits'] = inception_utils.fc_aux_logits(
                end_points['PreAuxLogits'], num_classes, 'Conv2d_1a_3x3', 'Conv2d_2a_5x5',
                'Logits')
        with tf.variable_scope('Logits'):
            net = end_points['global_pool'] = inception_utils.pool_all(net, 'AvgPool_1a_8x8')
            if not num_classes:
                return net, end_points
            net = end_points['PreLogitsFlatten'] = slim.dropout(
                slim.flatten(net), dropout_keep_prob, scope='Dropout')
            logits = end_points['Logits'] = slim.fully_connected(
                net, num_classes, activation_fn=None, scope='Logits')
            end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
    return logits, end_points


inception_resnet_v2.default_image_size = 299


def inception_resnet_v2_arg_scope(weight_decay=0.00004, batch_norm_decay=0.9997,
                                  batch_norm_epsilon=0.001, activation_fn=tf.nn.relu,
                                  batch_norm_updates_collections=tf.GraphKeys.UPDATE_OPS,
                                  batch_norm_scale=False):
    """Returns the arg_scope Inception-ResNet v2 is built in: inception_arg_scope's
    (inception_utils) with batch normalization, except that the convolutions keep
    tf-slim's initial weights (Glorot-uniform) and the L2 penalty of `weight_decay` also
    covers the biases of convolutions and fully connected layers (the residual
    projections' and the logits layers')."""
    regularizer = slim.l2_regularizer(weight_decay)
    with slim.arg_scope([slim.conv2d, slim.fully_connected], weights_regularizer=regularizer,
                        biases_regularizer=regularizer):
        with slim.arg_scope(
                [slim.conv2d], activation_fn=activation_fn, normalizer_fn=slim.batch_norm,
                normalizer_params=inception_utils.batch_norm_params(
                    batch_norm_decay, batch_norm_epsilon, batch_norm_updates_collections,
                    batch_norm_scale)) as scope:
            return scope
