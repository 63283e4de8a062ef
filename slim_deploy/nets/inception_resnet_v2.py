"""TF-Slim's Inception-ResNet v2 (Szegedy et al. 2016, arXiv:1602.07261), for 299x299 images.

The variable names and shapes match TF-Slim's ImageNet checkpoint (1001 classes), e.g.
'InceptionResnetV2/Repeat/block35_1/Branch_0/Conv2d_1x1/weights' [1, 1, 320, 32], so it
restores. The blocks are branch tables as in Inception v4; a residual block projects its
concatenated branches back to its input's depth, scales and adds them to the input.
"""
import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets.inception_v4 import (VALID, Layer, apply_layer, aux_logits_head,
                                           concat_branches, inception_v4_arg_scope, logits_head,
                                           mixed, pool)

STEM = [Layer('Conv2d_1a_3x3', 32, 2, VALID), Layer('Conv2d_2a_3x3', 32, 1, VALID),
        Layer('Conv2d_2b_3x3', 64), pool('MaxPool_3a_3x3', 2, VALID),
        Layer('Conv2d_3b_1x1', 80, 1, VALID), Layer('Conv2d_4a_3x3', 192, 1, VALID),
        pool('MaxPool_5a_3x3', 2, VALID)]
MIXED_5B = (  # 35x35x192 -> 35x35x320
    [Layer('Conv2d_1x1', 96)],
    [Layer('Conv2d_0a_1x1', 48), Layer('Conv2d_0b_5x5', 64)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96), Layer('Conv2d_0c_3x3', 96)],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 64)])
BLOCK35 = (  # Residual branches at 35x35x320.
    [Layer('Conv2d_1x1', 32)],
    [Layer('Conv2d_0a_1x1', 32), Layer('Conv2d_0b_3x3', 32)],
    [Layer('Conv2d_0a_1x1', 32), Layer('Conv2d_0b_3x3', 48), Layer('Conv2d_0c_3x3', 64)])
MIXED_6A = (  # 35x35x320 -> 17x17x1088
    [Layer('Conv2d_1a_3x3', 384, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_0b_3x3', 256),
     Layer('Conv2d_1a_3x3', 384, 2, VALID)],
    [pool('MaxPool_1a_3x3', 2, VALID)])
BLOCK17 = (  # Residual branches at 17x17x1088.
    [Layer('Conv2d_1x1', 192)],
    [Layer('Conv2d_0a_1x1', 128), Layer('Conv2d_0b_1x7', 160), Layer('Conv2d_0c_7x1', 192)])
MIXED_7A = (  # 17x17x1088 -> 8x8x2080
    [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_1a_3x3', 384, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_1a_3x3', 288, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_0b_3x3', 288),
     Layer('Conv2d_1a_3x3', 320, 2, VALID)],
    [pool('MaxPool_1a_3x3', 2, VALID)])
BLOCK8 = (  # Residual branches at 8x8x2080.
    [Layer('Conv2d_1x1', 192)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_1x3', 224), Layer('Conv2d_0c_3x1', 256)])


def residual_block(net, branches, scale, scope, activate=True):
    """net + scale * (1x1 projection 'Conv2d_1x1', with biases and no batch normalization,
    of the concatenated `branches` back to net's depth), then relu if `activate`; in
    variable scope `scope`."""
    with tf.variable_scope(scope):
        residual = slim.conv2d(concat_branches(net, branches), net.shape[3], [1, 1],
                               normalizer_fn=None, activation_fn=None, scope='Conv2d_1x1')
        net += scale * residual
        return tf.nn.relu(net) if activate else net


def repeat(net, branches, repetitions, scale, scope, block_name):
    """`repetitions` residual blocks '<block_name>_1', ... in variable scope `scope`."""
    with tf.variable_scope(scope):
        for index in range(1, repetitions + 1):
            net = residual_block(net, branches, scale, f'{block_name}_{index}')
    return net


def inception_resnet_v2(images, num_classes=1001, is_training=False, dropout_keep_prob=0.8,
                        create_aux_logits=True, scope='InceptionResnetV2'):
    """Builds Inception-ResNet v2 on `images`, float32 [batch, 299, 299, 3] (any size from
    75x75 up; from 107x107 up with the auxiliary head, whose kernel grows with the size).

    num_classes: width of the logits layers (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None builds neither and returns the pooled features
      [batch, 1, 1, 1536].
    dropout_keep_prob: probability of keeping a feature before the logits layer; dropout
      acts only when `is_training`, which also puts batch normalization in training mode.
    create_aux_logits: whether to build the auxiliary classifier on 'PreAuxLogits'.
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points maps the stem layers ('Conv2d_1a_3x3', ..., 'MaxPool_5a_3x3'), 'Mixed_5b',
    'Mixed_6a', 'PreAuxLogits' (after the 17x17 blocks), 'Mixed_7a', 'Conv2d_7b_1x1',
    'AuxLogits', 'global_pool', 'PreLogitsFlatten', 'Logits' and 'Predictions'.
    """
    end_points = {}
    with tf.variable_scope(scope, 'InceptionResnetV2', [images]), \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net = images
        for layer in STEM:
            net = end_points[layer.name] = apply_layer(net, layer)
        net = end_points['Mixed_5b'] = mixed(net, MIXED_5B, 'Mixed_5b')
        net = repeat(net, BLOCK35, 10, 0.17, 'Repeat', 'block35')
        net = end_points['Mixed_6a'] = mixed(net, MIXED_6A, 'Mixed_6a')
        net = end_points['PreAuxLogits'] = repeat(net, BLOCK17, 20, 0.10, 'Repeat_1',
                                                  'block17')
        net = end_points['Mixed_7a'] = mixed(net, MIXED_7A, 'Mixed_7a')
        net = repeat(net, BLOCK8, 9, 0.20, 'Repeat_2', 'block8')
        net = residual_block(net, BLOCK8, 1.0, 'Block8', activate=False)
        net = end_points['Conv2d_7b_1x1'] = slim.conv2d(net, 1536, [1, 1],
                                                        scope='Conv2d_7b_1x1')
        if create_aux_logits and num_classes:
            end_points['AuxLogits'] = aux_logits_head(end_points['PreAuxLogits'],
                                                      num_classes, 'Conv2d_2a_5x5', 'Logits')
        return logits_head(net, num_classes, dropout_keep_prob, end_points)


def inception_resnet_v2_arg_scope(weight_decay=0.00004):
    """Returns the arg_scope Inception-ResNet v2 is built in: Inception v4's, except that
    convolution weights start Glorot-uniform (tf-slim's default) and the L2 penalty of
    `weight_decay` (0: none) covers the biases of the residual projections and of the
    logits layers too."""
    with slim.arg_scope(inception_v4_arg_scope(weight_decay)):
        with slim.arg_scope([slim.conv2d], weights_initializer=slim.xavier_initializer()):
            with slim.arg_scope([slim.conv2d, slim.fully_connected],
                                biases_regularizer=slim.l2_regularizer(weight_decay)) as scope:
                return scope
