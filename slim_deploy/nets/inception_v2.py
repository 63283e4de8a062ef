"""TF-Slim's Inception v2, BN-Inception (Ioffe and Szegedy 2015, arXiv:1502.03167), for 224x224
images.

Inception v1 with batch normalization, 5x5 convolutions replaced by two 3x3 ones, average
pooling in most blocks, two reduction blocks (Mixed_4a, Mixed_5a) striding 2 instead of
max-poolings, and a separable 7x7 first convolution. Variable names and shapes match
TF-Slim's ImageNet checkpoint (1001 classes), e.g.
'InceptionV2/Conv2d_1a_7x7/depthwise_weights' [7, 7, 3, 8] and
'InceptionV2/Mixed_4a/Branch_0/Conv2d_1a_3x3/weights' [3, 3, 128, 160].
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import inception_utils
from slim_deploy.nets.inception_utils import Layer, pool, trunc_normal

# The 1x1 convolutions before 3x3 ones, and those after a pooling, start with weights of
# these standard deviations (truncated normal); the others with the arg_scope's.
_REDUCE_STDDEV, _POOLED_STDDEV = 0.09, 0.1


def _mixed(depths, pool_name='AvgPool_0a_3x3'):
    """A mixed block's branches from its depths: 1x1; 1x1, 3x3; 1x1, 3x3, 3x3; 3x3
    pooling `pool_name`, 1x1."""
    branch_0, branch_1a, branch_1b, branch_2a, branch_2b, branch_3 = depths
    return ([Layer('Conv2d_0a_1x1', branch_0)],
            [Layer('Conv2d_0a_1x1', branch_1a, stddev=_REDUCE_STDDEV),
             Layer('Conv2d_0b_3x3', branch_1b)],
            [Layer('Conv2d_0a_1x1', branch_2a, stddev=_REDUCE_STDDEV),
             Layer('Conv2d_0b_3x3', branch_2b), Layer('Conv2d_0c_3x3', branch_2b)],
            [pool(pool_name), Layer('Conv2d_0b_1x1', branch_3, stddev=_POOLED_STDDEV)])


def _reduction(depths):
    """A reduction block's branches, each halving the size: 1x1, 3x3 stride 2; 1x1, 3x3,
    3x3 stride 2; 3x3 max-pooling stride 2."""
    branch_0a, branch_0b, branch_1a, branch_1b = depths
    return ([Layer('Conv2d_0a_1x1', branch_0a, stddev=_REDUCE_STDDEV),
             Layer('Conv2d_1a_3x3', branch_0b, 2)],
            [Layer('Conv2d_0a_1x1', branch_1a, stddev=_REDUCE_STDDEV),
             Layer('Conv2d_0b_3x3', branch_1b), Layer('Conv2d_1a_3x3', branch_1b, 2)],
            [pool('MaxPool_1a_3x3', 2)])


# The root block after Conv2d_1a_7x7 (112x112x64 from 224x224) up to 28x28x192.
ROOT_BLOCK = [pool('MaxPool_2a_3x3', 2), Layer('Conv2d_2b_1x1', 64, stddev=_POOLED_STDDEV),
              Layer('Conv2d_2c_3x3', 192), pool('MaxPool_3a_3x3', 2)]
BLOCKS = [('Mixed_3b', _mixed((64, 64, 64, 64, 96, 32))),  # 28x28x256
          ('Mixed_3c', _mixed((64, 64, 96, 64, 96, 64))),  # 28x28x320
          ('Mixed_4a', _reduction((128, 160, 64, 96))),  # 14x14x576
          ('Mixed_4b', _mixed((224, 64, 96, 96, 128, 128))),
          ('Mixed_4c', _mixed((192, 96, 128, 96, 128, 128))),
          ('Mixed_4d', _mixed((160, 128, 160, 128, 160, 96))),
          ('Mixed_4e', _mixed((96, 128, 192, 160, 192, 96))),
          ('Mixed_5a', _reduction((128, 192, 192, 256))),  # 7x7x1024
          ('Mixed_5b', _mixed((352, 192, 320, 160, 224, 128))),
          ('Mixed_5c', _mixed((352, 192, 320, 192, 224, 128), 'MaxPool_0a_3x3'))]


def inception_v2_base(inputs, final_endpoint='Mixed_5c', min_depth=16, depth_multiplier=1.0,
                      use_separable_conv=True, data_format='NHWC', include_root_block=True,
                      scope=None):
    """Builds Inception v2 on `inputs` [batch, height, width, channels] up to the end point
    `final_endpoint`: one of the root block's 'Conv2d_1a_7x7', 'MaxPool_2a_3x3',
    'Conv2d_2b_1x1', 'Conv2d_2c_3x3', 'MaxPool_3a_3x3' (224x224 -> 28x28x192), then
    'Mixed_3b', 'Mixed_3c', 'Mixed_4a' to 'Mixed_4e', 'Mixed_5a' to 'Mixed_5c' (7x7x1024).
    Every layer pads 'SAME'.

    depth_multiplier: scales every convolution's depth d to max(int(d * depth_multiplier),
      min_depth); must be positive.
    use_separable_conv: Conv2d_1a_7x7 is depthwise separable (8 filters per channel,
      fewer if that exceeds its depth / 3, then 1x1); False: a plain convolution.
    data_format: 'NHWC' or 'NCHW' (inputs and outputs [batch, channels, height, width];
      only with use_separable_conv False).
    include_root_block: False starts at Mixed_3b, on `inputs` in place of the root block.
    scope: variable scope (a name or a VariableScope; None: 'InceptionV2').
    Returns (net, end_points): the final end point's output and {end point: output}.
    Raises ValueError for a non-positive depth_multiplier, an unknown data_format or one
    the separable convolution does not support, or a final_endpoint not built.
    """
    depth = inception_utils.depth_function(depth_multiplier, min_depth)
    if data_format not in ('NHWC', 'NCHW'):
        raise ValueError(f"data_format must be 'NHWC' or 'NCHW', got {data_format!r}")
    if data_format == 'NCHW' and use_separable_conv:
        raise ValueError("data_format 'NCHW' needs use_separable_conv=False: separable "
                         "convolutions support 'NHWC' only")

    def first_conv(net):
        """Conv2d_1a_7x7: 7x7 stride 2, its weights truncated normal (stddev 1)."""
        options = dict(stride=2, padding='SAME', scope='Conv2d_1a_7x7',
                       weights_initializer=trunc_normal(1.0))
        if use_separable_conv:
            # No more depthwise filters than the pointwise convolution has outputs.
            return slim.separable_conv2d(net, depth(64), [7, 7],
                                         depth_multiplier=min(depth(64) // 3, 8), **options)
        return slim.conv2d(net, depth(64), [7, 7], **options)

    root_block = [('Conv2d_1a_7x7', first_conv)] + ROOT_BLOCK
    stages = (root_block if include_root_block else []) + BLOCKS
    with tf.variable_scope(scope, 'InceptionV2', [inputs]), \
            slim.arg_scope([slim.conv2d, slim.max_pool2d, slim.avg_pool2d],
                           data_format=data_format):
        return inception_utils.build_stages(inputs, stages, final_endpoint, depth,
                                            axis=3 if data_format == 'NHWC' else 1)


def inception_v2(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.8,
                 min_depth=16, depth_multiplier=1.0, prediction_fn=slim.softmax,
                 spatial_squeeze=True, reuse=None, scope='InceptionV2', global_pool=False):
    """Builds Inception v2 on `inputs` [batch, 224, 224, channels] (any size from 1x1 up).

    num_classes: width of the logits layer (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None omits it and the dropout, and returns the pooled features
      [batch, 1, 1, depth] (depth 1024 at depth_multiplier 1).
    is_training: puts batch normalization and dropout in training mode.
    dropout_keep_prob: probability of keeping a feature before the logits layer.
    min_depth, depth_multiplier: as inception_v2_base's.
    prediction_fn: (logits, scope) -> the predictions.
    spatial_squeeze: squeezes the logits from [batch, 1, 1, num_classes] to
      [batch, num_classes].
    reuse: reuses the variables of the variable scope `scope` (a name or a VariableScope).
    global_pool: averages Mixed_5c over its whole map; False pools 7x7 (less on smaller
      maps), which leaves more than 1x1 from inputs larger than 224x224.
    Returns (net, end_points): the logits (or the features), and the end points of
    inception_v2_base, 'AvgPool_1a' (or 'global_pool'), 'PreLogits', 'Logits' and
    'Predictions'.
    Raises ValueError if depth_multiplier is not positive.
    """
    inception_utils.depth_function(depth_multiplier, min_depth)  # Checks it before building.
    with tf.variable_scope(scope, 'InceptionV2', [inputs], reuse=reuse) as scope, \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = inception_v2_base(inputs, scope=scope, min_depth=min_depth,
                                            depth_multiplier=depth_multiplier)
        return inception_utils.conv_logits(net, num_classes, end_points, dropout_keep_prob,
                                           spatial_squeeze, prediction_fn, global_pool,
                                           [7, 7])


inception_v2.default_image_size = 224
inception_v2_arg_scope = inception_utils.inception_arg_scope
