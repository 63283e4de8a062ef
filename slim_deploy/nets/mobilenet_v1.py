"""TF-Slim's MobileNet v1 (Howard et al. 2017, arXiv:1704.04861), for 224x224 images.

A 3x3 convolution, then 13 depthwise separable convolutions (3x3 depthwise, 1x1
pointwise), each batch-normalized and activated by relu6 (`MOBILENETV1_CONV_DEFS`), average
pooling and a 1x1 convolution as the classifier. Variable names and shapes match TF-Slim's
ImageNet checkpoints (1001 classes), e.g. 'MobilenetV1/Conv2d_1_depthwise/depthwise_weights'
[3, 3, 32, 1]. The width multiplier (`depth_multiplier`) thins every layer;
mobilenet_v1_075/_050/_025 fix it at 0.75/0.5/0.25.
"""
import collections

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.mobilenet import conv_blocks, mobilenet

# A layer of conv_defs: a regular convolution, or a depthwise separable one (a depthwise
# convolution of `kernel` and `stride`, then a 1x1 one to `depth` channels).
Conv = collections.namedtuple('Conv', ['kernel', 'stride', 'depth'])
DepthSepConv = collections.namedtuple('DepthSepConv', ['kernel', 'stride', 'depth'])

# 'Conv2d_0', then 'Conv2d_1' ... 'Conv2d_13': a 224x224 input is 7x7x1024 after them.
MOBILENETV1_CONV_DEFS = [Conv(kernel=[3, 3], stride=2, depth=32)] + [
    DepthSepConv(kernel=[3, 3], stride=stride, depth=depth)
    for stride, depth in [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512),
                          *[(1, 512)] * 5, (2, 1024), (1, 1024)]]

wrapped_partial = mobilenet.wrapped_partial


def mobilenet_v1_base(inputs, final_endpoint='Conv2d_13_pointwise', min_depth=8,
                      depth_multiplier=1.0, conv_defs=None, output_stride=None,
                      use_explicit_padding=False, scope=None):
    """Builds MobileNet v1's convolutions on `inputs` [batch, height, width, channels] up
    to `final_endpoint`, in variable scope `scope` (None: 'MobilenetV1').

    final_endpoint: 'Conv2d_0', or 'Conv2d_<i>_depthwise' / 'Conv2d_<i>_pointwise' (i = 1
      to 13 with the default conv_defs).
    min_depth: the least depth of a layer (once thinned by depth_multiplier).
    depth_multiplier: factor (> 0) on every layer's depth: int(depth * depth_multiplier).
    conv_defs: a list of Conv and DepthSepConv (None: MOBILENETV1_CONV_DEFS); layer i is
      'Conv2d_<i>'.
    output_stride: the largest input / output size ratio (None, 8, 16 or 32); later
      depthwise convolutions dilate instead of striding.
    use_explicit_padding: pad explicitly and convolve with 'VALID' padding (same shapes).
    Returns (net, end_points): net is final_endpoint's output; end_points maps each
    layer's name to its output.
    Raises ValueError for depth_multiplier <= 0, another output_stride, a final_endpoint
    that is no layer's, or a layer of another type.
    """
    if depth_multiplier <= 0:
        raise ValueError(f'depth_multiplier must be greater than zero, got {depth_multiplier!r}')
    if output_stride not in (None, 8, 16, 32):
        raise ValueError(f'output_stride must be 8, 16 or 32, got {output_stride!r}')
    conv_defs = MOBILENETV1_CONV_DEFS if conv_defs is None else conv_defs
    padding = 'VALID' if use_explicit_padding else 'SAME'

    def depth(full_depth):
        return max(int(full_depth * depth_multiplier), min_depth)

    def pad(net, kernel, rate=1):
        return conv_blocks.fixed_padding(net, kernel, rate) if use_explicit_padding else net

    def layer_outputs(net):
        """Yields (end point, output) of each layer in turn."""
        stride_so_far, rate = 1, 1  # The output stride so far; the dilation once reached.
        for index, layer in enumerate(conv_defs):
            layer_stride, layer_rate = layer.stride, 1
            if output_stride is not None and stride_so_far == output_stride:
                layer_stride, layer_rate, rate = 1, rate, rate * layer.stride
            else:
                stride_so_far *= layer.stride
            name = f'Conv2d_{index}'
            if isinstance(layer, Conv):  # As TF-Slim's: never dilated, always strided.
                net = slim.conv2d(pad(net, layer.kernel), depth(layer.depth), layer.kernel,
                                  stride=layer.stride, scope=name)
                yield name, net
            elif isinstance(layer, DepthSepConv):
                net = slim.separable_conv2d(
                    pad(net, layer.kernel, layer_rate), None, layer.kernel, depth_multiplier=1,
                    stride=layer_stride, rate=layer_rate, scope=f'{name}_depthwise')
                yield f'{name}_depthwise', net
                net = slim.conv2d(net, depth(layer.depth), [1, 1], stride=1,
                                  scope=f'{name}_pointwise')
                yield f'{name}_pointwise', net
            else:
                raise ValueError(f'Unknown convolution type {type(layer).__name__} for layer '
                                 f'{index}')

    end_points = {}
    with tf.variable_scope(scope, 'MobilenetV1', [inputs]), \
            slim.arg_scope([slim.conv2d, slim.separable_conv2d], padding=padding):
        for end_point, net in layer_outputs(inputs):
            end_points[end_point] = net
            if end_point == final_endpoint:
                return net, end_points
    raise ValueError(f'Unknown final endpoint {final_endpoint}')


def mobilenet_v1(inputs, num_classes=1000, dropout_keep_prob=0.999, is_training=True,
                 min_depth=8, depth_multiplier=1.0, conv_defs=None,
                 prediction_fn=slim.softmax, spatial_squeeze=True, reuse=None,
                 scope='MobilenetV1', global_pool=False):
    """Builds MobileNet v1 on `inputs`, float32 [batch, height, width, 3] (224x224 by
    design): mobilenet_v1_base (given min_depth, depth_multiplier, conv_defs), pooling, and
    under 'Logits' dropout and the 1x1 convolution 'Conv2d_1c_1x1'.

    num_classes: the logits' width (TF-Slim's checkpoints have 1001: 0 is background); 0
      or None builds no classifier and returns the pooled features [batch, 1, 1, depth]
      (before dropout; depth 1024 at width 1.0).
    dropout_keep_prob: probability of keeping a feature (training only).
    is_training: batch normalization's and dropout's mode.
    prediction_fn: (logits, scope=) -> end point 'Predictions' (None: none).
    spatial_squeeze: logits [batch, num_classes] rather than [batch, 1, 1, num_classes].
    reuse: reuse the variables of `scope`.
    global_pool: pool the whole map ('global_pool'); otherwise pool 7x7 windows
      ('AvgPool_1a', the map's size where smaller), so inputs over 224x224 give logits of
      more than 1x1.
    Returns (net, end_points): net is the logits (or the features); end_points has
    mobilenet_v1_base's, 'AvgPool_1a' or 'global_pool', 'Logits' and 'Predictions'.
    Raises ValueError for inputs of a rank other than 4, and as mobilenet_v1_base.
    """
    rank = len(inputs.shape.as_list())
    if rank != 4:
        raise ValueError(f'Invalid input tensor rank, expected 4, was: {rank}')
    with tf.variable_scope(scope, 'MobilenetV1', [inputs], reuse=reuse) as var_scope, \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = mobilenet_v1_base(inputs, scope=var_scope, min_depth=min_depth,
                                            depth_multiplier=depth_multiplier,
                                            conv_defs=conv_defs)
        with tf.variable_scope('Logits'):
            if global_pool:
                net = end_points['global_pool'] = tf.reduce_mean(
                    net, [1, 2], keepdims=True, name='global_pool')
            else:
                height, width = net.shape.as_list()[1:3]
                kernel = [7, 7] if height is None or width is None else [min(height, 7),
                                                                         min(width, 7)]
                net = end_points['AvgPool_1a'] = slim.avg_pool2d(net, kernel, padding='VALID',
                                                                 scope='AvgPool_1a')
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, keep_prob=dropout_keep_prob, scope='Dropout_1b')
            logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                                 normalizer_fn=None, scope='Conv2d_1c_1x1')
            if spatial_squeeze:
                logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
        end_points['Logits'] = logits
        if prediction_fn:
            end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
    return logits, end_points


mobilenet_v1.default_image_size = 224

mobilenet_v1_075 = wrapped_partial(mobilenet_v1, depth_multiplier=0.75)
mobilenet_v1_050 = wrapped_partial(mobilenet_v1, depth_multiplier=0.50)
mobilenet_v1_025 = wrapped_partial(mobilenet_v1, depth_multiplier=0.25)


def mobilenet_v1_arg_scope(is_training=True, weight_decay=0.00004, stddev=0.09,
                           regularize_depthwise=False, batch_norm_decay=0.9997,
                           batch_norm_epsilon=0.001,
                           batch_norm_updates_collections=tf.GraphKeys.UPDATE_OPS,
                           normalizer_fn=slim.batch_norm):
    """Returns the arg_scope MobileNet v1 is built in (TF-Slim's): convolutions with
    truncated normal weights (`stddev`), `normalizer_fn` (batch normalization with offset
    and scale, moving averages of decay `batch_norm_decay` updated by the ops put in
    `batch_norm_updates_collections`, `batch_norm_epsilon`; in training mode as
    `is_training` says, None: left alone) instead of biases, then relu6; an L2 penalty of
    `weight_decay` on the regular convolutions' weights, and on the depthwise ones if
    `regularize_depthwise`."""
    batch_norm_params = {'center': True, 'scale': True, 'decay': batch_norm_decay,
                         'epsilon': batch_norm_epsilon,
                         'updates_collections': batch_norm_updates_collections}
    if is_training is not None:
        batch_norm_params['is_training'] = is_training
    regularizer = slim.l2_regularizer(weight_decay)
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                        weights_initializer=tf.truncated_normal_initializer(stddev=stddev),
                        activation_fn=tf.nn.relu6, normalizer_fn=normalizer_fn), \
            slim.arg_scope([slim.batch_norm], **batch_norm_params), \
            slim.arg_scope([slim.conv2d], weights_regularizer=regularizer), \
            slim.arg_scope([slim.separable_conv2d],
                           weights_regularizer=regularizer if regularize_depthwise else None
                           ) as scope:
        return scope
