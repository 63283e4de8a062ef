"""TF-Slim's ResNet v2 (He et al. 2016, arXiv:1603.05027): full pre-activation bottleneck
units, batch normalization and relu before every convolution; ResNet-50, 101, 152 and 200
for 224x224 images.

The variable names and shapes match TF-Slim's checkpoints, e.g.
'resnet_v2_50/block1/unit_1/bottleneck_v2/preact/gamma' [64]. Classification:

    with slim.arg_scope(resnet_v2.resnet_arg_scope()):
        logits, end_points = resnet_v2.resnet_v2_101(images, 1001, is_training=False)

dense prediction (inputs of 32k + 1 pixels align the features' corners with the image's):

    with slim.arg_scope(resnet_v2.resnet_arg_scope()):
        net, end_points = resnet_v2.resnet_v2_101(images, 21, is_training=False,
                                                  global_pool=False, output_stride=16)
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import resnet_utils

resnet_arg_scope = resnet_utils.resnet_arg_scope


@slim.add_arg_scope
def bottleneck(inputs, depth, depth_bottleneck, stride, rate=1, outputs_collections=None,
               scope=None):
    """The full pre-activation residual unit in its bottleneck form, on `inputs` [batch,
    height, width, channels]: batch normalization and relu ('preact'), then 1x1, 3x3 and
    1x1 convolutions (the last with neither normalization nor activation), added to the
    shortcut (the input subsampled, or a 1x1 projection of 'preact' where the depth grows).

    depth: the output's channels; depth_bottleneck: the inner convolutions' channels.
    stride: the unit's subsampling (in its 3x3 convolution and shortcut); rate: the 3x3
      convolution's atrous rate.
    outputs_collections: where the unit's output is added, under the scope's name
      (default scope 'bottleneck_v2').
    Returns the unit's output [batch, height / stride, width / stride, depth].
    """
    with tf.variable_scope(scope, 'bottleneck_v2', [inputs]) as unit_scope:
        depth_in = slim.utils.last_dimension(inputs.get_shape(), min_rank=4)
        preact = slim.batch_norm(inputs, activation_fn=tf.nn.relu, scope='preact')
        if depth == depth_in:
            shortcut = resnet_utils.subsample(inputs, stride, 'shortcut')
        else:
            shortcut = slim.conv2d(preact, depth, [1, 1], stride=stride, normalizer_fn=None,
                                   activation_fn=None, scope='shortcut')
        residual = slim.conv2d(preact, depth_bottleneck, [1, 1], stride=1, scope='conv1')
        residual = resnet_utils.conv2d_same(residual, depth_bottleneck, 3, stride, rate=rate,
                                            scope='conv2')
        residual = slim.conv2d(residual, depth, [1, 1], stride=1, normalizer_fn=None,
                               activation_fn=None, scope='conv3')
        return slim.utils.collect_named_outputs(outputs_collections, unit_scope.name,
                                                shortcut + residual)


def resnet_v2(inputs, blocks, num_classes=None, is_training=True, global_pool=True,
              output_stride=None, include_root_block=True, spatial_squeeze=True, reuse=None,
              scope=None):
    """Builds a ResNet v2 of `blocks` (resnet_utils.Blocks) on `inputs`, float32 [batch,
    height, width, channels]: a 7x7 stride-2 convolution 'conv1' without normalization or
    activation (the first unit's 'preact' does both) and a 3x3 stride-2 max pooling
    'pool1' (the root block), the blocks, batch normalization and relu ('postnorm'), then
    the classifier.

    num_classes: width of the 1x1 convolution 'logits'; 0 or None builds none and returns
      the features (after the global pooling, if any).
    is_training: batch normalization's mode (unlike resnet_v1, None is passed on too).
    global_pool: average over the spatial dimensions ('pool5') before the classifier;
      False for dense prediction (fully convolutional).
    output_stride: None for the nominal 32 (or the blocks' product without the root);
      otherwise a multiple of 4 reachable by the strides (e.g. 8 or 16): the rest turn
      into atrous rates, so an output is (height - 1) / output_stride + 1 high.
    include_root_block: whether to build 'conv1' and 'pool1'; without them `inputs`
      should come from a convolution without activation.
    spatial_squeeze: logits [batch, num_classes] rather than [batch, 1, 1, num_classes]
      (needs a 1x1 map: global_pool, or small enough inputs).
    reuse: reuse the variables of the net built in `scope` (then `scope` must be given).
    scope: the variable scope (default 'resnet_v2').
    Returns (net, end_points): net is the logits (or features); end_points maps every
    unit, its convolutions and each block by scope name ('<scope>/block1'), then
    'global_pool', '<scope>/logits', '<scope>/spatial_squeeze' and 'predictions'.
    Raises ValueError for an output_stride it cannot reach.
    """
    with slim.arg_scope([slim.batch_norm], is_training=is_training):
        return resnet_utils.build_resnet(
            inputs, blocks, bottleneck, 'resnet_v2', num_classes, global_pool, output_stride,
            include_root_block, spatial_squeeze, False, reuse, scope, preactivation=True)


resnet_v2.default_image_size = 224


def resnet_v2_block(scope, base_depth, num_units, stride):
    """A Block 'scope' of `num_units` v2 bottlenecks of bottleneck depth `base_depth`
    (output depth 4 * `base_depth`); the last has stride `stride`, the others 1."""
    return resnet_utils.bottleneck_block(bottleneck, scope, base_depth, num_units, stride)


def _resnet_v2_of_depth(layers, inputs, num_classes, is_training, global_pool, output_stride,
                        spatial_squeeze, reuse, scope):
    """The `layers`-deep ImageNet ResNet v2."""
    return resnet_v2(inputs, resnet_utils.imagenet_blocks(resnet_v2_block, layers),
                     num_classes, is_training=is_training, global_pool=global_pool,
                     output_stride=output_stride, include_root_block=True,
                     spatial_squeeze=spatial_squeeze, reuse=reuse, scope=scope)


# The builders by depth take resnet_v2's arguments; see there.

def resnet_v2_50(inputs, num_classes=None, is_training=True, global_pool=True,
                 output_stride=None, spatial_squeeze=True, reuse=None, scope='resnet_v2_50'):
    """ResNet-50 v2: blocks of 3, 4, 6 and 3 units."""
    return _resnet_v2_of_depth(50, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, reuse, scope)


def resnet_v2_101(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, reuse=None, scope='resnet_v2_101'):
    """ResNet-101 v2: blocks of 3, 4, 23 and 3 units."""
    return _resnet_v2_of_depth(101, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, reuse, scope)


def resnet_v2_152(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, reuse=None, scope='resnet_v2_152'):
    """ResNet-152 v2: blocks of 3, 8, 36 and 3 units."""
    return _resnet_v2_of_depth(152, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, reuse, scope)


def resnet_v2_200(inputs, num_classes=None, is_training=True, global_pool=True,
                  output_stride=None, spatial_squeeze=True, reuse=None, scope='resnet_v2_200'):
    """ResNet-200 v2: blocks of 3, 24, 36 and 3 units."""
    return _resnet_v2_of_depth(200, inputs, num_classes, is_training, global_pool, output_stride,
                               spatial_squeeze, reuse, scope)


for _builder in (resnet_v2_50, resnet_v2_101, resnet_v2_152, resnet_v2_200):
    _builder.default_image_size = resnet_v2.default_image_size
