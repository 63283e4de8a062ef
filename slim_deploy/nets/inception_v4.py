"""TF-Slim's Inception v4 (Szegedy et al. 2016, arXiv:1602.07261), for 299x299 images.

A stem (up to Mixed_5a), then 4 Inception-A blocks, Reduction-A, 7 Inception-B blocks,
Reduction-B and 3 Inception-C blocks, an auxiliary classifier on Mixed_6h and the
classifier. Variable names and shapes match TF-Slim's ImageNet checkpoint (1001 classes),
e.g. 'InceptionV4/Mixed_6a/Branch_0/Conv2d_1a_3x3/weights' [3, 3, 384, 384].
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import inception_utils
from slim_deploy.nets.inception_utils import VALID, Layer, pool

STEM = [Layer('Conv2d_1a_3x3', 32, 2, VALID), Layer('Conv2d_2a_3x3', 32, 1, VALID),
        Layer('Conv2d_2b_3x3', 64),  # 147x147x64 from 299x299
        ('Mixed_3a', ([pool('MaxPool_0a_3x3', 2, VALID)],
                      [Layer('Conv2d_0a_3x3', 96, 2, VALID)])),
        ('Mixed_4a', ([Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_1a_3x3', 96, 1, VALID)],
                      [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_1x7', 64),
                       Layer('Conv2d_0c_7x1', 64), Layer('Conv2d_1a_3x3', 96, 1, VALID)])),
        ('Mixed_5a', ([Layer('Conv2d_1a_3x3', 192, 2, VALID)],
                      [pool('MaxPool_1a_3x3', 2, VALID)]))]  # 35x35x384
INCEPTION_A = (  # 35x35x384 -> 35x35x384
    [Layer('Conv2d_0a_1x1', 96)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96), Layer('Conv2d_0c_3x3', 96)],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 96)])
REDUCTION_A = (  # 35x35x384 -> 17x17x1024
    [Layer('Conv2d_1a_3x3', 384, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_3x3', 224),
     Layer('Conv2d_1a_3x3', 256, 2, VALID)],
    [pool('MaxPool_1a_3x3', 2, VALID)])
INCEPTION_B = (  # 17x17x1024 -> 17x17x1024
    [Layer('Conv2d_0a_1x1', 384)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_1x7', 224), Layer('Conv2d_0c_7x1', 256)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_7x1', 192), Layer('Conv2d_0c_1x7', 224),
     Layer('Conv2d_0d_7x1', 224), Layer('Conv2d_0e_1x7', 256)],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 128)])
REDUCTION_B = (  # 17x17x1024 -> 8x8x1536
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_1a_3x3', 192, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_0b_1x7', 256), Layer('Conv2d_0c_7x1', 320),
     Layer('Conv2d_1a_3x3', 320, 2, VALID)],
    [pool('MaxPool_1a_3x3', 2, VALID)])
INCEPTION_C = (  # 8x8x1536 -> 8x8x1536
    [Layer('Conv2d_0a_1x1', 256)],
    [Layer('Conv2d_0a_1x1', 384), [Layer('Conv2d_0b_1x3', 256), Layer('Conv2d_0c_3x1', 256)]],
    [Layer('Conv2d_0a_1x1', 384), Layer('Conv2d_0b_3x1', 448), Layer('Conv2d_0c_1x3', 512),
     [Layer('Conv2d_0d_1x3', 256), Layer('Conv2d_0e_3x1', 256)]],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 256)])
# The blocks after the stem, by end point.
BLOCKS = ([(f'Mixed_5{letter}', INCEPTION_A) for letter in 'bcde']
          + [('Mixed_6a', REDUCTION_A)]
          + [(f'Mixed_6{letter}', INCEPTION_B) for letter in 'bcdefgh']
          + [('Mixed_7a', REDUCTION_B)]
          + [(f'Mixed_7{letter}', INCEPTION_C) for letter in 'bcd'])


def _block(inputs, branches, scope, default_name, reuse):
    """The block of `branches` on `inputs`, in variable scope `scope` (None:
    `default_name`, made unique)."""
    with tf.variable_scope(scope, default_name, [inputs], reuse=reuse):
        return inception_utils.concat_branches(inputs, branches)


def block_inception_a(inputs, scope=None, reuse=None):
    """Inception-A, 35x35x384 -> 35x35x384, in variable scope `scope` (None:
    'BlockInceptionA'), reusing its variables if `reuse`."""
    return _block(inputs, INCEPTION_A, scope, 'BlockInceptionA', reuse)


def block_reduction_a(inputs, scope=None, reuse=None):
    """Reduction-A, 35x35x384 -> 17x17x1024; as block_inception_a ('BlockReductionA')."""
    return _block(inputs, REDUCTION_A, scope, 'BlockReductionA', reuse)


def block_inception_b(inputs, scope=None, reuse=None):
    """Inception-B, 17x17x1024 -> 17x17x1024; as block_inception_a ('BlockInceptionB')."""
    return _block(inputs, INCEPTION_B, scope, 'BlockInceptionB', reuse)


def block_reduction_b(inputs, scope=None, reuse=None):
    """Reduction-B, 17x17x1024 -> 8x8x1536; as block_inception_a ('BlockReductionB')."""
    return _block(inputs, REDUCTION_B, scope, 'BlockReductionB', reuse)


def block_inception_c(inputs, scope=None, reuse=None):
    """Inception-C, 8x8x1536 -> 8x8x1536; as block_inception_a ('BlockInceptionC')."""
    return _block(inputs, INCEPTION_C, scope, 'BlockInceptionC', reuse)


def inception_v4_base(inputs, final_endpoint='Mixed_7d', scope=None):
    """Builds Inception v4 on `inputs` [batch, height, width, 3] up to the end point
    `final_endpoint`: one of the stem's 'Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3',
    'Mixed_3a', 'Mixed_4a', 'Mixed_5a' (299x299 -> 35x35x384), then 'Mixed_5b' to
    'Mixed_5e', 'Mixed_6a' to 'Mixed_6h' (17x17x1024), 'Mixed_7a' to 'Mixed_7d' (8x8x1536).

    scope: variable scope (a name or a VariableScope; None: 'InceptionV4').
    Returns (net, end_points): the final end point's output and {end point: output}.
    Raises ValueError if final_endpoint is none of them.
    """
    with tf.variable_scope(scope, 'InceptionV4', [inputs]):
        return inception_utils.build_stages(inputs, STEM + BLOCKS, final_endpoint)


def inception_v4(inputs, num_classes=1001, is_training=True, dropout_keep_prob=0.8,
                 reuse=None, scope='InceptionV4', create_aux_logits=True):
    """Builds Inception v4 on `inputs`, float32 [batch, 299, 299, 3] (any size from 75x75
    up; from 107x107 up with the auxiliary classifier, whose kernel grows with the size).

    num_classes: width of the logits layers (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None omits them and the dropout, and returns the pooled features
      [batch, 1, 1, 1536].
    is_training: puts batch normalization and dropout in training mode.
    dropout_keep_prob: probability of keeping a feature before the logits layer.
    reuse: reuses the variables of the variable scope `scope` (a name or a VariableScope).
    create_aux_logits: builds the auxiliary classifier on Mixed_6h (with num_classes).
    Returns (net, end_points): the logits [batch, num_classes] (or the features), and the
    end points of inception_v4_base, 'AuxLogits', 'global_pool', 'PreLogitsFlatten',
    'Logits' and 'Predictions' (softmax).
    """
    with tf.variable_scope(scope, 'InceptionV4', [inputs], reuse=reuse) as scope, \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = inception_v4_base(inputs, scope=scope)
        if create_aux_logits and num_classes:
            end_points['AuxLogits'] = inception_utils.fc_aux_logits(
                end_points['Mixed_6h'], num_classes, 'AvgPool_1a_5x5', 'Conv2d_2a', 'Aux_logits')
        with tf.variable_scope('Logits'):
            net = end_points['global_pool'] = inception_utils.pool_all(net, 'AvgPool_1a')
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, dropout_keep_prob, scope='Dropout_1b')
            net = end_points['PreLogitsFlatten'] = slim.flatten(net, scope='PreLogitsFlatten')
            logits = end_points['Logits'] = slim.fully_connected(
                net, num_classes, activation_fn=None, scope='Logits')
            end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
    return logits, end_points


inception_v4.default_image_size = 299
inception_v4_arg_scope = inception_utils.inception_arg_scope
