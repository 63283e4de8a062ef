"""TF-Slim's ResNet v1 (He et al. 2015, arXiv:1512.03385): bottleneck units with batch
normalization after every convolution and projection shortcuts where the depth grows, as in
MSRA's ImageNet models; ResNet-50, 101, 152 and 200 for 224x224 images.

The variable names and shapes match TF-Slim's checkpoints, e.g.
'resnet_v1_50/block1/unit_1/bottleneck_v1/conv1/weights' [1, 1, 64, 64]. Classification:

    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        logits, end_points = resnet_v1.resnet_v1_101(images, 1000, is_training=False)

dense prediction (inputs of 32k + 1 pixels align the features' corners with the image's):

    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        net, end_points = resnet_v1.resnet_v1_101(images, 21, is_training=False,
                                                  global_pool=False, output_stride=16)
"""
import contextlib

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import resnet_utils

resnet_arg_scope = resnet_utils.resnet_arg_scope
NoOpScope = contextlib.nullcontext  # TF-Slim's name for a context manager doing nothing


@slim.add_arg_scope
def bottleneck(inputs, depth, depth_bottleneck, stride, rate=1, outputs_collections=None,
               scope=None, use_bounded_activations=False):
    """The original residual unit, in its bottleneck form (1x1, 3x3, 1x1 convolutions,
    each followed by batch normalization), on `inputs` [batch, height, width, channels].

    depth: the output's channels; depth_bottleneck: the inner convolutions' channels.
    stride: the unit's subsampling (in its 3x3 convolution and shortcut); rate: the 3x3
      convolution's atrous rate.
    outputs_collections: where the unit's output is added, under the scope's name
      (default scope 'bottleneck_v1').
    use_bounded_activations: relu6 on the shortcut projection and the output, the residual
      clipped to [-6, 6] (friendlier to quantized inference); otherwise relu on the output.
    Returns the unit's output [batch, height / stride, width / stride, depth].
    """
    with tf.variable_scope(scope, 'bottleneck_v1', [inputs]) as unit_scope:
        depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
        if depth == depth_in:
            shortcut = resnet_utils.subsample(inputs, stride, 'shortcut')
        else:
            shortcut = slim.conv2d(inputs, depth, [1, 1], stride=stride,
                                   activation_fn=tf.nn.relu6 if use_bounded_activations else None,
                                   scope='shortcut')
        residual = slim.conv2d(inputs, depth_bottleneck, [1, 1], stride=1, scope='conv1')
        residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride, rate=rate,
                                            scope='conv2')
        residual = slim.conv2d(residual, depth, [1, 1], stride=1, activation_fn=None,
                               scope='conv3')
        if use_bounded_activations:
            output = tf.nn.relu6(shortcut + tf.clip_by_value(residual, -6.0, 6.0))
        else:
            output = tf.nn.relu(shortcut + residual)
        return slim.utils.collect_named_outputs(outputs_collections, unit_scope.name, output)


def resnet_v1(inputs, blocks, num_classes=None, is_training=True, global_pool=True,
              output_stride=None, include_root_block=True, spatial_squeeze=True,
              store_non_strided_activations=False, reuse=None, scope=None):
    """Builds a ResNet v1 of `blocks` (resnet_utils.Blocks) on `inputs`, float32 [batch,
    height, width, channels]: a 7x7 stride-2 convolution 'conv1' and a 3x3 stride-2 max
    pooling 'pool1' (the root block), the blocks, then the classifier.

    num_classes: width of the 1x1 convolution 'logits'; 0 or None builds none and returns
      the features (after the global pooling, if any).
    is_training: batch normalization's mode; None leaves it to an enclosing arg_scope.
    global_pool: average over the spatial dimensions ('pool5') before the classifier;
      False for dense prediction (fully convolutional).
    output_stride: None for the nominal 32 (or the blocks' product without the root);
      otherwise a multiple of 4 reachable by the strides (e.g. 8 or 16): the rest turn
      into atrous rates, so an output is (height - 1) / output_stride + 1 high.
    include_root_block: whether to build 'conv1' and 'pool1'.
    spatial_squeeze: logits [batch, num_classes] rather than [batch, 1, 1, num_classes]
      (needs a 1x1 map: global_pool, or small enough inputs).
    store_non_strided_activations: the blocks' end points undecimated (their last units
      run at stride 1, subsampled afterwards).
    reuse: reuse the variables of the net built in `scope` (then `scope` must be given).
    scope: the variable scope (default 'resnet_v1').
    Returns (net, end_points): net is the logits (or features); end_points maps every
    unit, its convolutions and each block by scope name ('<scope>/block1'), then
    'global_pool', '<scope>/logits', '<scope>/spatial_squeeze' and 'predictions'.
    Raises ValueError for an output_stride it cannot reach.
    """
    with (NoOpScope() if is_training is None else
          slim.arg_scope([slim.batch_norm], is_training=is_training)):
        return resnet_utils.build_resnet(
            inputs, blocks, bottleneck, 'resnet_v1', num_classes, global_pool, output_stride,
            include_root_block, spatial_squeeze, store_non_strided_activations, reuse, scope,
            preactivation=False)


resnet_v1.default_image_size = 224


def resnet_v1_block(scope, base_depth, num_units, stride):
    """A Block 'scope' of `num_units` v1 bottlenecks of bottleneck depth `base_depth`
    (output depth 4 * `base_depth`); the last has stride `stride`, the others 1."""
    return resnet_utils.bottleneck_block(bottleneck, scope, base_depth, num_units, stride)


def _resnet_v1_of_depth(layers, inputs, num_classes, is_training, global_pool, output_stride,
                        spatial_squeeze, store_non_strided_activations, min_base_depth,
                        depth_multiplier, reuse, scope):
    """The `layers`-deep ImageNet ResNet v1, its bottleneck depths scaled by
    `depth_multiplier` and no smaller than `min_base_depth`."""
    blocks = resnet_utils.imagenet_blocks(
        resnet_v1_block, layers,
        lambda depth: max(int(depth * depth_multiplier), min_base_depth))
    return resnet_v1(inputs, blocks, num_classes, is_training, global_pool=global_pool,
                     output_stride=output_stride, include_root_block=True,
                     spatial_squeeze=spatial_squeeze,
                     store_non_strided_activations=store_non_strided_activations,
                     reuse=reuse, scope=scope)


# The builders by depth take resnet_v1's arguments (see there) and two for thinner nets:
# depth_multiplier scales every bottleneck depth (64, 128, 256, 512; outputs 4 times
# deeper), min_base_depth is the smallest it may become. ResNet-152 and 200 take
# store_non_strided_activations before spatial_squeeze, as in TF-Slim.

def resnet_v1_50(inputs, num_classes=None, is_training=True, global_pool=True,
                 output_stride=None, spatial_squeeze=True, store_non_strided_activations=False,
                 min_base_depth=8, depth_multiplier=1, reuse=None, scope='resnet_v1_50'):
    """ResNet-50 v1: blocks of 3, 4, 6 and 3 units; 25.6M parameters at 1000 classes."""
    return _resnet_v1_of_depth(50, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, store_non_strided_activations, min_base_depth,
                               depth_multiplier, reuse, scope)


def resnet_v1_101(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, store_non_strided_activations=False,
                  min_base_depth=8, depth_multiplier=1, reuse=None, scope='resnet_v1_101'):
    """ResNet-101 v1: blocks of 3, 4, 23 and 3 units."""
    return _resnet_v1_of_depth(101, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, store_non_strided_activations, min_base_depth,
                               depth_multiplier, reuse, scope)


def resnet_v1_152(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, store_non_strided_activations=False, spatial_squeeze=True,
                  min_base_depth=8, depth_multiplier=1, reuse=None, scope='resnet_v1_152'):
    """ResNet-152 v1: blocks of 3, 8, 36 and 3 units."""
    return _resnet_v1_of_depth(152, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, store_non_strided_activations, min_base_depth,
                               depth_multiplier, reuse, scope)


def resnet_v1_200(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, store_non_strided_activations=False, spatial_squeeze=True,
                  min_base_depth=8, depth_multiplier=1, reuse=None, scope='resnet_v1_200'):
    """ResNet-200 v1 (the depth of He et al. 2016): blocks of 3, 24, 36 and 3 units."""
    return _resnet_v1_of_depth(200, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, store_non_strided_activations, min_base_depth,
                               depth_multiplier, reuse, scope)


for _builder in (resnet_v1_50, resnet_v1_101, resnet_v1_152, resnet_v1_200):
    _builder.default_image_size = resnet_v1.default_image_size
