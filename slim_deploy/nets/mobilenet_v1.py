"""TF-Slim's MobileNet v1 (Howard et al. 2017, arXiv:1704.04861), for 224x224 images.

A 3x3 convolution, then 13 depthwise separable convolutions (3x3 depthwise, 1x1
pointwise), global average pooling and a 1x1 convolution as the classifier. Variable
names and shapes match TF-Slim's ImageNet checkpoints (1001 classes), e.g.
'MobilenetV1/Conv2d_1_depthwise/depthwise_weights' [3, 3, 32, 1]. The width multiplier
(`depth_multiplier`) thins every layer; mobilenet_v1_075/_050/_025 fix it at 0.75/0.5/0.25.
"""
import functools

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim

# (stride, depth at width 1.0) of 'Conv2d_0' and of the separable layers 'Conv2d_1' ...
# 'Conv2d_13' (the depthwise convolution strides, the pointwise one sets the depth); a
# 224x224 input is 7x7x1024 after them.
FIRST_CONV = (2, 32)
SEPARABLE = ([(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512)] + [(1, 512)] * 5
             + [(2, 1024), (1, 1024)])


def mobilenet_v1(images, num_classes=1001, is_training=False, depth_multiplier=1.0,
                 min_depth=8, dropout_keep_prob=0.999, scope='MobilenetV1'):
    """Builds MobileNet v1 on `images`, float32 [batch, height, width, 3] (224x224 by
    design; any size works, as the pooling before the classifier is global).

    num_classes: width of the logits layer (1001 in TF-Slim's checkpoints: 0 is
      background); 0 or None omits it and returns the pooled features
      [batch, 1, 1, depth] (depth 1024 at width 1.0).
    depth_multiplier: width multiplier (> 0) for every layer's depth, which is
      int(depth * depth_multiplier) but at least `min_depth`.
    dropout_keep_prob: probability of keeping a feature before the logits layer; dropout
      acts only when `is_training`, which also puts batch normalization in training mode.
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points maps 'Conv2d_0', 'Conv2d_<i>_depthwise' and 'Conv2d_<i>_pointwise' (i = 1 to
    13), 'AvgPool_1a', 'Logits' and 'Predictions'.
    Raises ValueError if depth_multiplier is not positive.
    """
    if depth_multiplier <= 0:
        raise ValueError(f'depth_multiplier must be positive, got {depth_multiplier!r}')

    def depth(full_depth):
        return max(int(full_depth * depth_multiplier), min_depth)

    end_points = {}
    with tf.variable_scope(scope, 'MobilenetV1', [images]), \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        stride, full_depth = FIRST_CONV
        net = end_points['Conv2d_0'] = slim.conv2d(images, depth(full_depth), [3, 3], stride,
                                                   scope='Conv2d_0')
        for index, (stride, full_depth) in enumerate(SEPARABLE, start=1):
            name = f'Conv2d_{index}'
            # No output depth: only the depthwise convolution, one 3x3 filter per channel.
            net = end_points[f'{name}_depthwise'] = slim.separable_conv2d(
                net, None, [3, 3], depth_multiplier=1, stride=stride,
                scope=f'{name}_depthwise')
            net = end_points[f'{name}_pointwise'] = slim.conv2d(
                net, depth(full_depth), [1, 1], scope=f'{name}_pointwise')
        with tf.variable_scope('Logits'):
            net = end_points['AvgPool_1a'] = tf.reduce_mean(net, [1, 2], keepdims=True,
                                                             name='AvgPool_1a')
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, dropout_keep_prob, scope='Dropout_1b')
            logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                                 normalizer_fn=None, scope='Conv2d_1c_1x1')
            logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
        end_points['Logits'] = logits
        end_points['Predictions'] = slim.softmax(logits, scope='Predictions')
    return logits, end_points


mobilenet_v1_075 = functools.partial(mobilenet_v1, depth_multiplier=0.75)
mobilenet_v1_050 = functools.partial(mobilenet_v1, depth_multiplier=0.50)
mobilenet_v1_025 = functools.partial(mobilenet_v1, depth_multiplier=0.25)


def mobilenet_v1_arg_scope(weight_decay=0.00004):
    """Returns the arg_scope MobileNet v1 is built in (TF-Slim's): convolutions with
    truncated normal weights (stddev 0.09), batch normalization (decay 0.9997, epsilon
    0.001, offset and scale) instead of biases, then relu6; an L2 penalty of
    `weight_decay` (0: none) on the regular convolutions' weights, none on the
    depthwise ones."""
    with slim.arg_scope(
            [slim.conv2d, slim.separable_conv2d],
            weights_initializer=tf.truncated_normal_initializer(stddev=0.09),
            activation_fn=tf.nn.relu6, normalizer_fn=slim.batch_norm,
            normalizer_params={'center': True, 'scale': True, 'decay': 0.9997,
                               'epsilon': 0.001}):
        with slim.arg_scope([slim.conv2d],
                            weights_regularizer=slim.l2_regularizer(weight_decay)) as scope:
            return scope
