"""TF-Slim's Inception v1, GoogLeNet (Szegedy et al. 2014, arXiv:1409.4842), for 224x224 images.

A root block of convolutions and max-poolings, then nine mixed blocks (1x1; 1x1 then 3x3;
1x1 then 3x3; 3x3 max-pooling then 1x1, concatenated), every convolution batch-normalized
under inception_v1_arg_scope. Variable names and shapes match TF-Slim's ImageNet checkpoint
(1001 classes), e.g. 'InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/weights' [3, 3, 96, 208].
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import inception_utils
from slim_deploy.nets.inception_utils import Layer, pool, trunc_normal

ROOT_BLOCK = [Layer('Conv2d_1a_7x7', 64, 2), pool('MaxPool_2a_3x3', 2),  # 224 -> 56
              Layer('Conv2d_2b_1x1', 64), Layer('Conv2d_2c_3x3', 192),
              pool('MaxPool_3a_3x3', 2)]  # 56x56x192 -> 28x28x192


def _mixed(depths, branch_2_name='Conv2d_0b_3x3'):
    """A mixed block's branches from its depths (1x1; 1x1, 3x3; 1x1, 3x3; pooled 1x1)."""
    branch_0, branch_1a, branch_1b, branch_2a, branch_2b, branch_3 = depths
    return ([Layer('Conv2d_0a_1x1', branch_0)],
            [Layer('Conv2d_0a_1x1', branch_1a), Layer('Conv2d_0b_3x3', branch_1b)],
            [Layer('Conv2d_0a_1x1', branch_2a), Layer(branch_2_name, branch_2b)],
            [pool('MaxPool_0a_3x3'), Layer('Conv2d_0b_1x1', branch_3)])


BLOCKS = [('Mixed_3b', _mixed((64, 96, 128, 16, 32, 32))),  # 28x28x256
          ('Mixed_3c', _mixed((128, 128, 192, 32, 96, 64))),  # 28x28x480
          pool('MaxPool_4a_3x3', 2),
          ('Mixed_4b', _mixed((192, 96, 208, 16, 48, 64))),  # 14x14x512
          ('Mixed_4c', _mixed((160, 112, 224, 24, 64, 64))),
          ('Mixed_4d', _mixed((128, 128, 256, 24, 64, 64))),
          ('Mixed_4e', _mixed((112, 144, 288, 32, 64, 64))),  # 14x14x528
          ('Mixed_4f', _mixed((256, 160, 320, 32, 128, 128))),  # 14x14x832
          pool('MaxPool_5a_2x2', 2),
          # TF-Slim's checkpoint names this block's second 3x3 convolution 'Conv2d_0a_3x3'.
          ('Mixed_5b', _mixed((256, 160, 320, 32, 128, 128), 'Conv2d_0a_3x3')),
          ('Mixed_5c', _mixed((384, 192, 384, 48, 128, 128)))]  # 7x7x1024


def inception_v1_base(inputs, final_endpoint='Mixed_5c', include_root_block=True,
                      scope='InceptionV1'):
    """Builds Inception v1 on `inputs` [batch, height, width, channels] up to the end point
    `final_endpoint`: one of the root block's 'Conv2d_1a_7x7', 'MaxPool_2a_3x3',
    'Conv2d_2b_1x1', 'Conv2d_2c_3x3', 'MaxPool_3a_3x3' (224x224 -> 28x28x192), then
    'Mixed_3b', 'Mixed_3c', 'MaxPool_4a_3x3', 'Mixed_4b' to 'Mixed_4f', 'MaxPool_5a_2x2',
    'Mixed_5b', 'Mixed_5c' (7x7x1024). Every layer pads 'SAME'; convolution weights start
    truncated normal (stddev 0.01).

    include_root_block: False starts at Mixed_3b, on `inputs` in place of the root block.
    scope: variable scope (a name or a VariableScope).
    Returns (net, end_points): the final end point's output and {end point: output}.
    Raises ValueError if final_endpoint is not an end point built.
    """
    stages = (ROOT_BLOCK if include_root_block else []) + BLOCKS
    with tf.variable_scope(scope, 'InceptionV1', [inputs]), \
            slim.arg_scope([slim.conv2d, slim.fully_connected],
                           weights_initializer=trunc_normal(0.01)):
        return inception_utils.build_stages(inputs, stages, final_endpoint)


def inception_v1(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.8,
                 prediction_fn=slim.softmax, spatial_squeeze=True, reuse=None,
                 scope='InceptionV1', global_pool=False):
    """Builds Inception v1 on `inputs` [batch, 224, 224, channels] (from 193x193 up, or any
    size with `global_pool`).

    num_classes: width of the logits layer (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None omits it and the dropout, and returns the pooled features
      [batch, 1, 1, 1024].
    is_training: puts batch normalization and dropout in training mode.
    dropout_keep_prob: probability of keeping a feature before the logits layer.
    prediction_fn: (logits, scope) -> the predictions.
    spatial_squeeze: squeezes the logits from [batch, 1, 1, num_classes] to
      [batch, num_classes].
    reuse: reuses the variables of the variable scope `scope` (a name or a VariableScope).
    global_pool: averages Mixed_5c over its whole map; False pools 7x7 (stride 1, 'VALID'),
      which leaves more than 1x1 from inputs larger than 224x224.
    Returns (net, end_points): the logits (or the features), and the end points of
    inception_v1_base, then in scope 'Logits' 'AvgPool_0a_7x7' (or 'global_pool'),
    'Logits' and 'Predictions'.
    """
    with tf.variable_scope(scope, 'InceptionV1', [inputs], reuse=reuse) as scope, \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = inception_v1_base(inputs, scope=scope)
        with tf.variable_scope('Logits'):
            if global_pool:
                net = end_points['global_pool'] = tf.reduce_mean(
                    net, [1, 2], keepdims=True, name='global_pool')
            else:
                net = end_points['AvgPool_0a_7x7'] = slim.avg_pool2d(
                    net, [7, 7], stride=1, scope='AvgPool_0a_7x7')
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, dropout_keep_prob, scope='Dropout_0b')
            logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                                 normalizer_fn=None, scope='Conv2d_0c_1x1')
            if spatial_squeeze:
                logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
            end_points['Logits'] = logits
            end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
    return logits, end_points


inception_v1.default_image_size = 224
inception_v1_arg_scope = inception_utils.inception_arg_scope
