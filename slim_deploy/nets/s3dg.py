"""TF-Slim's S3D-G (Xie et al., 2018, "Rethinking Spatiotemporal Feature Learning"):
Inception v1 inflated to 3-D with separable temporal convolutions and self-gating; also
the backbone of I3D (slim_deploy/nets/i3d.py).

Variables carry TF-Slim's names under 'InceptionV1', the scope of the 2-D net whose
weights these nets inflate ('InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/weights', a
separable convolution's temporal half '.../Conv2d_0b_3x3/temporal/weights', a gate
'.../Conv2d_0b_3x3/self_gating/transformer_W/weights'), so TF-Slim's checkpoints restore.
Conv2d_1a_7x7 strides 2 in time and space; MaxPool_4a_3x3 and MaxPool_5a_2x2 halve time
again: 64 frames of 224x224 give Mixed_5c [batch, 8, 7, 7, 1024].
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import i3d_utils

# TF-Slim's module-level aliases.
arg_scope = slim.arg_scope
conv3d_spatiotemporal = i3d_utils.conv3d_spatiotemporal
inception_block_v1_3d = i3d_utils.inception_block_v1_3d

# The backbone in order: (end point, kind, spec). 'stem' and 'conv' specs are depths,
# 'spatiotemporal' a depth of [t, 3, 3] kernels, 'pool' (kernel, stride), 'mixed' the
# depths of inception_block_v1_3d. Temporal convolutions and gating can start at the
# 'spatiotemporal' and 'mixed' layers.
_LAYERS = (
    ('Conv2d_1a_7x7', 'stem', 64),
    ('MaxPool_2a_3x3', 'pool', ([1, 3, 3], [1, 2, 2])),
    ('Conv2d_2b_1x1', 'conv', 64),
    ('Conv2d_2c_3x3', 'spatiotemporal', 192),
    ('MaxPool_3a_3x3', 'pool', ([1, 3, 3], [1, 2, 2])),
    ('Mixed_3b', 'mixed', (64, 96, 128, 16, 32, 32)),
    ('Mixed_3c', 'mixed', (128, 128, 192, 32, 96, 64)),
    ('MaxPool_4a_3x3', 'pool', ([3, 3, 3], [2, 2, 2])),
    ('Mixed_4b', 'mixed', (192, 96, 208, 16, 48, 64)),
    ('Mixed_4c', 'mixed', (160, 112, 224, 24, 64, 64)),
    ('Mixed_4d', 'mixed', (128, 128, 256, 24, 64, 64)),
    ('Mixed_4e', 'mixed', (112, 144, 288, 32, 64, 64)),
    ('Mixed_4f', 'mixed', (256, 160, 320, 32, 128, 128)),
    ('MaxPool_5a_2x2', 'pool', ([2, 2, 2], [2, 2, 2])),
    ('Mixed_5b', 'mixed', (256, 160, 320, 32, 128, 128)),
    ('Mixed_5c', 'mixed', (384, 192, 384, 48, 128, 128)),
)
_ENDPOINTS = [name for name, _, _ in _LAYERS]
_DATA_FORMATS = ('NDHWC', 'NCDHW')


def trunc_normal(stddev):
    """A truncated normal initializer of mean 0 and standard deviation `stddev`."""
    return tf.truncated_normal_initializer(0.0, stddev)


def s3dg_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999, batch_norm_epsilon=0.001):
    """The arg_scope S3D-G is built in: i3d_utils.video_inception_arg_scope with
    separable spatiotemporal convolutions."""
    return i3d_utils.video_inception_arg_scope(weight_decay, batch_norm_decay,
                                               batch_norm_epsilon, separable=True)


def self_gating(input_tensor, scope, data_format='NDHWC'):
    """Scales each channel of the 5-D `input_tensor` by a sigmoid gate: a c x c map
    (variable `scope`/self_gating/transformer_W/weights, no biases) of the channels'
    means over frames, height and width. Returns a tensor of the input's shape."""
    axes = [data_format.index(axis) for axis in 'DHW']
    sizes = [input_tensor.shape[axis] for axis in axes]
    if None in sizes:  # TF-Slim's pooling needs them; the mean differs in rounding only.
        means = tf.reduce_mean(input_tensor, axes, keepdims=True)
    else:
        means = slim.avg_pool3d(input_tensor, sizes, stride=1, data_format=data_format,
                                scope=scope + '/self_gating/avg_pool3d')
    gates = slim.conv3d(means, input_tensor.shape[data_format.index('C')], [1, 1, 1],
                        activation_fn=None, normalizer_fn=None, biases_initializer=None,
                        data_format=data_format, weights_initializer=trunc_normal(0.01),
                        scope=scope + '/self_gating/transformer_W')
    return tf.multiply(tf.sigmoid(gates), input_tensor)


def s3dg_base(inputs, first_temporal_kernel_size=3, temporal_conv_startat='Conv2d_2c_3x3',
              gating_startat='Conv2d_2c_3x3', final_endpoint='Mixed_5c', min_depth=16,
              depth_multiplier=1.0, data_format='NDHWC', scope='InceptionV1'):
    """Builds the I3D/S3D-G backbone on 5-D float `inputs` (see `data_format`) under
    variable scope `scope`, up to `final_endpoint`.

    first_temporal_kernel_size: frames spanned by Conv2d_1a_7x7: 1, 3, 5 or 7.
    temporal_conv_startat: the first of 'Conv2d_2c_3x3' and the 'Mixed_*' blocks whose
      3x3 convolutions span 3 frames (separably with the arg_scope's separable
      conv3d_spatiotemporal), it and all later ones; any other value: none.
    gating_startat: likewise the first whose outputs are self-gated (self_gating).
    final_endpoint: the last end point built, from 'Conv2d_1a_7x7' to 'Mixed_5c'.
    min_depth, depth_multiplier: every depth d becomes max(int(d * depth_multiplier),
      min_depth).
    data_format: 'NDHWC' (inputs [batch, frames, height, width, channels]) or 'NCDHW'.
    Returns (net, end_points): the final end point's tensor and a dict of the end points
    built so far.
    Raises ValueError for an unknown data_format or final_endpoint, a
    depth_multiplier <= 0 or a first_temporal_kernel_size not in 1, 3, 5, 7.
    """
    if data_format not in _DATA_FORMATS:
        raise ValueError(f'data_format must be one of {_DATA_FORMATS}, got {data_format!r}')
    if depth_multiplier <= 0:
        raise ValueError(f'depth_multiplier must be greater than zero, got {depth_multiplier!r}')
    if first_temporal_kernel_size not in (1, 3, 5, 7):
        raise ValueError('first_temporal_kernel_size can only be 1, 3, 5 or 7, got '
                         f'{first_temporal_kernel_size!r}')
    if final_endpoint not in _ENDPOINTS:
        raise ValueError(f'Unknown final endpoint {final_endpoint!r}; one of {_ENDPOINTS}')

    def depth(d):
        return max(int(d * depth_multiplier), min_depth)

    def gating_fn(net, scope):
        return self_gating(net, scope, data_format=data_format)

    end_points = {}
    net, temporal_size, gate = inputs, 1, None
    with tf.variable_scope(scope, 'InceptionV1', [inputs]), \
            arg_scope([slim.conv3d], weights_initializer=trunc_normal(0.01)), \
            arg_scope([slim.conv3d, slim.max_pool3d, conv3d_spatiotemporal], stride=1,
                      data_format=data_format, padding='SAME'):
        for name, kind, spec in _LAYERS:
            if kind in ('spatiotemporal', 'mixed'):
                temporal_size = 3 if name == temporal_conv_startat else temporal_size
                gate = gating_fn if name == gating_startat else gate
            if kind == 'stem':
                net = conv3d_spatiotemporal(net, depth(spec), [first_temporal_kernel_size, 7, 7],
                                            stride=2, separable=False, scope=name)
            elif kind == 'pool':
                net = slim.max_pool3d(net, spec[0], stride=spec[1], scope=name)
            elif kind == 'conv':
                net = slim.conv3d(net, depth(spec), [1, 1, 1], scope=name)
            elif kind == 'spatiotemporal':
                net = conv3d_spatiotemporal(net, depth(spec), [temporal_size, 3, 3], scope=name)
                net = gate(net, scope=name) if gate else net
            else:
                net = inception_block_v1_3d(net, *map(depth, spec),
                                            temporal_kernel_size=temporal_size,
                                            self_gating_fn=gate, data_format=data_format,
                                            scope=name)
            end_points[name] = net
            if name == final_endpoint:
                return net, end_points


def s3dg(inputs, num_classes=1000, first_temporal_kernel_size=3,
         temporal_conv_startat='Conv2d_2c_3x3', gating_startat='Conv2d_2c_3x3',
         final_endpoint='Mixed_5c', min_depth=16, depth_multiplier=1.0, dropout_keep_prob=0.8,
         is_training=True, prediction_fn=slim.softmax, spatial_squeeze=True, reuse=None,
         data_format='NDHWC', scope='InceptionV1'):
    """Builds S3D-G: s3dg_base (same parameters) and a classifier, under variable scope
    `scope` (with `reuse`). TF-Slim trains it on 64 frames of 224x224 in [-1, 1].

    The classifier averages the backbone's output over windows of 2 frames x 7 x 7
    ('VALID', shrunk to smaller inputs), applies dropout (keep probability
    `dropout_keep_prob`), a 1x1x1 convolution 'Logits/Conv2d_0c_1x1' and the mean over
    time. num_classes: its width; 0 or None (a toolkit addition) omits the dropout and
    the convolution, and net is the averaged features instead.
    is_training: batch norm's batch statistics and dropout on.
    spatial_squeeze: squeeze net from [batch, 1, 1, num_classes] to [batch,
      num_classes] (op 'Logits/SpatialSqueeze'); larger inputs than 224x224 need False.
    prediction_fn: (logits, scope) -> end_points['Predictions'].
    Returns (net, end_points): the logits (or features) and the backbone's end points,
    plus 'Logits' and 'Predictions' with logits.
    """
    with tf.variable_scope(scope, 'InceptionV1', [inputs, num_classes], reuse=reuse) as scope, \
            arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = s3dg_base(
            inputs, first_temporal_kernel_size=first_temporal_kernel_size,
            temporal_conv_startat=temporal_conv_startat, gating_startat=gating_startat,
            final_endpoint=final_endpoint, min_depth=min_depth,
            depth_multiplier=depth_multiplier, data_format=data_format, scope=scope)
        with tf.variable_scope('Logits'):
            if data_format == 'NCDHW':
                net = tf.transpose(net, [0, 2, 3, 4, 1])
            kernel_size = i3d_utils.reduced_kernel_size_3d(net, [2, 7, 7])
            net = slim.avg_pool3d(net, kernel_size, stride=1, data_format='NDHWC',
                                  scope='AvgPool_0a_7x7')
            if num_classes:
                net = slim.dropout(net, dropout_keep_prob, scope='Dropout_0b')
                net = slim.conv3d(net, num_classes, [1, 1, 1], activation_fn=None,
                                  normalizer_fn=None, data_format='NDHWC',
                                  scope='Conv2d_0c_1x1')
            net = tf.reduce_mean(net, axis=1)
            if spatial_squeeze:
                net = tf.squeeze(net, [1, 2], name='SpatialSqueeze')
            if num_classes:
                end_points['Logits'] = net
                end_points['Predictions'] = prediction_fn(net, scope='Predictions')
    return net, end_points


s3dg.default_image_size = 224
