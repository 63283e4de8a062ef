"""TF-Slim's Inception v3 (Szegedy et al. 2015, arXiv:1512.00567), for 299x299 images.

A stem of convolutions and max-poolings, then mixed blocks at 35x35 (Mixed_5b to 5d),
17x17 (Mixed_6a reduces, 6b to 6e factorize 7x7 into 1x7 and 7x1) and 8x8 (Mixed_7a
reduces, 7b and 7c fork into 1x3 and 3x1), an auxiliary classifier on Mixed_6e and the
classifier. Variable names and shapes match TF-Slim's ImageNet checkpoint (1001 classes),
e.g. 'InceptionV3/Mixed_6b/Branch_1/Conv2d_0b_1x7/weights' [1, 7, 128, 128], including
its irregular names ('Mixed_6a/Branch_0/Conv2d_1a_1x1' is 3x3).
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import inception_utils
from slim_deploy.nets.inception_utils import VALID, Layer, pool, trunc_normal


def _mixed_35(pool_depth, branch_1_names=('Conv2d_0a_1x1', 'Conv2d_0b_5x5')):
    """A 35x35 block: 1x1; 1x1, 5x5; 1x1, 3x3, 3x3; 3x3 average pooling, 1x1."""
    first, second = branch_1_names
    return ([Layer('Conv2d_0a_1x1', 64)],
            [Layer(first, 48), Layer(second, 64)],
            [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96),
             Layer('Conv2d_0c_3x3', 96)],
            [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', pool_depth)])


def _mixed_17(inner_depth):
    """A 17x17 block: 1x1; 1x1, 1x7, 7x1; 1x1, 7x1, 1x7, 7x1, 1x7; average pooling, 1x1;
    `inner_depth` inside the factorized branches, 192 out of each branch."""
    return ([Layer('Conv2d_0a_1x1', 192)],
            [Layer('Conv2d_0a_1x1', inner_depth), Layer('Conv2d_0b_1x7', inner_depth),
             Layer('Conv2d_0c_7x1', 192)],
            [Layer('Conv2d_0a_1x1', inner_depth), Layer('Conv2d_0b_7x1', inner_depth),
             Layer('Conv2d_0c_1x7', inner_depth), Layer('Conv2d_0d_7x1', inner_depth),
             Layer('Conv2d_0e_1x7', 192)],
            [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 192)])


def _mixed_8(branch_1_fork_name):
    """An 8x8 block: 1x1; 1x1 forking into 1x3 and 3x1 (the latter `branch_1_fork_name`);
    1x1, 3x3 forking into 1x3 and 3x1; average pooling, 1x1. 2048 deep."""
    return ([Layer('Conv2d_0a_1x1', 320)],
            [Layer('Conv2d_0a_1x1', 384),
             [Layer('Conv2d_0b_1x3', 384), Layer(branch_1_fork_name, 384)]],
            [Layer('Conv2d_0a_1x1', 448), Layer('Conv2d_0b_3x3', 384),
             [Layer('Conv2d_0c_1x3', 384), Layer('Conv2d_0d_3x1', 384)]],
            [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 192)])


# After the stem (35x35x192 from 299x299), in order; the 3x3 convolutions of Mixed_6a are
# named '..._1x1' in TF-Slim's checkpoint.
BLOCKS = [('Mixed_5b', _mixed_35(32)),  # 35x35x256
          ('Mixed_5c', _mixed_35(64, ('Conv2d_0b_1x1', 'Conv_1_0c_5x5'))),  # 35x35x288
          ('Mixed_5d', _mixed_35(64)),
          ('Mixed_6a', ([Layer('Conv2d_1a_1x1', 384, 2, VALID, [3, 3])],  # 17x17x768
                        [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96),
                         Layer('Conv2d_1a_1x1', 96, 2, VALID, [3, 3])],
                        [pool('MaxPool_1a_3x3', 2, VALID)])),
          ('Mixed_6b', _mixed_17(128)),
          ('Mixed_6c', _mixed_17(160)),
          ('Mixed_6d', _mixed_17(160)),
          ('Mixed_6e', _mixed_17(192)),
          ('Mixed_7a', ([Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_1a_3x3', 320, 2, VALID)],
                        [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_1x7', 192),
                         Layer('Conv2d_0c_7x1', 192), Layer('Conv2d_1a_3x3', 192, 2, VALID)],
                        [pool('MaxPool_1a_3x3', 2, VALID)])),  # 8x8x1280
          ('Mixed_7b', _mixed_8('Conv2d_0b_3x1')),  # 8x8x2048
          ('Mixed_7c', _mixed_8('Conv2d_0c_3x1'))]


def inception_v3_base(inputs, final_endpoint='Mixed_7c', min_depth=16, depth_multiplier=1.0,
                      scope=None):
    """Builds Inception v3 on `inputs` [batch, height, width, channels] up to the end point
    `final_endpoint`: one of the stem's 'Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3',
    'MaxPool_3a_3x3', 'Conv2d_3b_1x1', 'Conv2d_4a_3x3', 'MaxPool_5a_3x3' (299x299 ->
    35x35x192), then 'Mixed_5b' to 'Mixed_5d', 'Mixed_6a' to 'Mixed_6e' (17x17x768),
    'Mixed_7a' to 'Mixed_7c' (8x8x2048).

    depth_multiplier: scales every convolution's depth d to max(int(d * depth_multiplier),
      min_depth); must be positive.
    scope: variable scope (a name or a VariableScope; None: 'InceptionV3').
    Returns (net, end_points): the final end point's output and {end point: output}.
    Raises ValueError for a non-positive depth_multiplier or a final_endpoint not built.
    """
    depth = inception_utils.depth_function(depth_multiplier, min_depth)
    with tf.variable_scope(scope, 'InceptionV3', [inputs]):
        return inception_utils.build_stages(inputs, inception_utils.stem_299() + BLOCKS,
                                            final_endpoint, depth)


def inception_v3(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.8,
                 min_depth=16, depth_multiplier=1.0, prediction_fn=slim.softmax,
                 spatial_squeeze=True, reuse=None, create_aux_logits=True,
                 scope='InceptionV3', global_pool=False):
    """Builds Inception v3 on `inputs` [batch, 299, 299, channels] (from 75x75 up).

    num_classes: width of the logits layers (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None omits them and the dropout, and returns the pooled features
      [batch, 1, 1, depth] (depth 2048 at depth_multiplier 1).
    is_training: puts batch normalization and dropout in training mode.
    dropout_keep_prob: probability of keeping a feature before the logits layer.
    min_depth, depth_multiplier: as inception_v3_base's.
    prediction_fn: (logits, scope) -> the predictions.
    spatial_squeeze: squeezes the logits (and auxiliary logits) from
      [batch, 1, 1, num_classes] to [batch, num_classes].
    reuse: reuses the variables of the variable scope `scope` (a name or a VariableScope).
    create_aux_logits: builds the auxiliary classifier on Mixed_6e (with num_classes):
      5x5 average pooling with stride 3, 1x1 to 128, a convolution to 768 with a kernel
      of 5x5 (less on smaller maps), 1x1 to num_classes.
    global_pool: averages Mixed_7c over its whole map; False pools 8x8 (less on smaller
      maps), which leaves more than 1x1 from inputs larger than 299x299.
    Returns (net, end_points): the logits (or the features), and the end points of
    inception_v3_base, 'AuxLogits', 'AvgPool_1a' (or 'global_pool'), 'PreLogits',
    'Logits' and 'Predictions'.
    Raises ValueError if depth_multiplier is not positive.
    """
    depth = inception_utils.depth_function(depth_multiplier, min_depth)
    with tf.variable_scope(scope, 'InceptionV3', [inputs], reuse=reuse) as scope, \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = inception_v3_base(inputs, scope=scope, min_depth=min_depth,
                                            depth_multiplier=depth_multiplier)
        if create_aux_logits and num_classes:
            with tf.variable_scope('AuxLogits'):
                aux = slim.avg_pool2d(end_points['Mixed_6e'], [5, 5], 3, padding=VALID,
                                      scope='AvgPool_1a_5x5')
                aux = slim.conv2d(aux, depth(128), [1, 1], scope='Conv2d_1b_1x1')
                kernel = inception_utils.reduced_kernel_size(aux, [5, 5])
                aux = slim.conv2d(
                    aux, depth(768), kernel, padding=VALID,
                    weights_initializer=trunc_normal(0.01),
                    scope='Conv2d_2a_{}x{}'.format(*kernel))
                aux = slim.conv2d(
                    aux, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                    weights_initializer=trunc_normal(0.001),
                    scope='Conv2d_2b_1x1')
                if spatial_squeeze:
                    aux = tf.squeeze(aux, [1, 2], name='SpatialSqueeze')
                end_points['AuxLogits'] = aux
        return inception_utils.conv_logits(net, num_classes, end_points, dropout_keep_prob,
                                           spatial_squeeze, prediction_fn, global_pool,
                                           [8, 8], global_pool_name='GlobalPool')


inception_v3.default_image_size = 299
inception_v3_arg_scope = inception_utils.inception_arg_scope
