"""The Inception-v1 video backbone shared by TF-Slim's I3D and S3D-G, and their head.

Both nets take videos [batch, frames, height, width, channels] and inflate Inception v1
to 3-D: Conv2d_1a_7x7 strides 2 in time and space, MaxPool_4a_3x3 and MaxPool_5a_2x2
halve time again, so Mixed_5c has ceil(frames / 8) frames (64 -> 8) and 1/32 of the
spatial side (224 -> 7). All convolutions and max-poolings pad 'SAME', so any number of
frames works. They differ in three switches: the first convolution's temporal size, the
block from which 3x3 convolutions also span 3 frames (as one 3x3x3 kernel, or separably
as 1x3x3 then 3x1x1), and the block from which outputs are self-gated.

Variables carry TF-Slim's names, under the scope 'InceptionV1' of the 2-D net whose
weights I3D inflates, e.g. 'InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/weights', a
separable convolution's temporal half 'InceptionV1/Conv2d_2c_3x3/temporal/weights'
(with biases: no batch norm) and a gate 'InceptionV1/Conv2d_2c_3x3/self_gating/
transformer_W/weights', so TF-Slim's checkpoints of these nets restore.
"""
import numpy as np

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim

# Mixed blocks' depths per branch: 1x1; 1x1 then 3x3; 1x1 then 3x3; max-pool then 1x1.
_MIXED_DEPTHS = {
    'Mixed_3b': (64, 96, 128, 16, 32, 32),
    'Mixed_3c': (128, 128, 192, 32, 96, 64),
    'Mixed_4b': (192, 96, 208, 16, 48, 64),
    'Mixed_4c': (160, 112, 224, 24, 64, 64),
    'Mixed_4d': (128, 128, 256, 24, 64, 64),
    'Mixed_4e': (112, 144, 288, 32, 64, 64),
    'Mixed_4f': (256, 160, 320, 32, 128, 128),
    'Mixed_5b': (256, 160, 320, 32, 128, 128),
    'Mixed_5c': (384, 192, 384, 48, 128, 128),
}
# The backbone in order: ('conv', depth, spatial kernel) or ('pool', kernel, stride) or
# ('mixed',); kernels and strides are [time, height, width].
_LAYERS = (
    ('MaxPool_2a_3x3', ('pool', [1, 3, 3], [1, 2, 2])),
    ('Conv2d_2b_1x1', ('conv', 64, 1)),
    ('Conv2d_2c_3x3', ('conv', 192, 3)),
    ('MaxPool_3a_3x3', ('pool', [1, 3, 3], [1, 2, 2])),
    ('Mixed_3b', ('mixed',)),
    ('Mixed_3c', ('mixed',)),
    ('MaxPool_4a_3x3', ('pool', [3, 3, 3], [2, 2, 2])),
    ('Mixed_4b', ('mixed',)),
    ('Mixed_4c', ('mixed',)),
    ('Mixed_4d', ('mixed',)),
    ('Mixed_4e', ('mixed',)),
    ('Mixed_4f', ('mixed',)),
    ('MaxPool_5a_2x2', ('pool', [2, 2, 2], [2, 2, 2])),
    ('Mixed_5b', ('mixed',)),
    ('Mixed_5c', ('mixed',)),
)
# Blocks that can start the temporal 3x3 convolutions or the self-gating.
TEMPORAL_BLOCKS = ('Conv2d_2c_3x3',) + tuple(_MIXED_DEPTHS)
ENDPOINTS = ('Conv2d_1a_7x7',) + tuple(name for name, _ in _LAYERS)
_TEMPORAL_SIZE = 3
_POOL_KERNEL = [2, 7, 7]  # The head's average pooling, shrunk to smaller inputs.


def _identity_in_time(shape, dtype=tf.float32, partition_info=None):
    """Initializer of a temporal [k, 1, 1, c, c] kernel (k odd) that copies the center
    frame: the separable convolution starts as its spatial half alone."""
    del partition_info  # Unused; part of the initializer signature.
    time, height, width, depth_in, depth_out = shape
    if height != 1 or width != 1 or depth_in != depth_out or time % 2 == 0:
        raise ValueError(f'expected a [odd, 1, 1, c, c] kernel, got shape {shape}')
    kernel = np.zeros(shape, np.float32)
    kernel[time // 2, 0, 0] = np.eye(depth_in)
    return tf.constant(kernel, dtype=dtype)


def _conv(net, depth, kernel, scope, separable=False, stride=1):
    """A conv3d with the arg_scope's batch norm and relu. Separable with a temporal extent
    kernel[0] > 1: a [1, kh, kw] conv named `scope`, then a [kernel[0], 1, 1] conv with
    biases and relu but no batch norm, named `scope`/temporal (stride must be 1)."""
    if not separable or kernel[0] == 1:
        return slim.conv3d(net, depth, kernel, stride=stride, scope=scope)
    net = slim.conv3d(net, depth, [1] + kernel[1:], scope=scope)
    return slim.conv3d(net, depth, [kernel[0], 1, 1], normalizer_fn=None,
                       weights_initializer=_identity_in_time, scope=f'{scope}/temporal')


def _self_gating(net, scope):
    """Scales each channel of `net` [batch, frames, height, width, c] by a sigmoid gate
    computed from the channels' means over frames and space by a c x c map."""
    means = tf.reduce_mean(net, axis=[1, 2, 3], keepdims=True)
    gates = slim.conv3d(means, net.shape[-1], [1, 1, 1], activation_fn=None,
                        normalizer_fn=None, biases_initializer=None,
                        scope=f'{scope}/self_gating/transformer_W')
    return tf.sigmoid(gates) * net


def _mixed(net, depths, temporal_size, separable, gated):
    """An Inception block: four branches concatenated along channels; each branch's
    last convolution is gated when `gated`."""
    d0, d1a, d1b, d2a, d2b, d3 = depths
    spatial = [temporal_size, 3, 3]
    branches = []
    for index, (pool, convs) in enumerate((
            (False, [('Conv2d_0a_1x1', d0, [1, 1, 1])]),
            (False, [('Conv2d_0a_1x1', d1a, [1, 1, 1]), ('Conv2d_0b_3x3', d1b, spatial)]),
            (False, [('Conv2d_0a_1x1', d2a, [1, 1, 1]), ('Conv2d_0b_3x3', d2b, spatial)]),
            (True, [('Conv2d_0b_1x1', d3, [1, 1, 1])]))):
        with tf.variable_scope(f'Branch_{index}'):
            branch = slim.max_pool3d(net, [3, 3, 3], scope='MaxPool_0a_3x3') if pool else net
            for scope, depth, kernel in convs:
                branch = _conv(branch, depth, kernel, scope, separable)
            branches.append(_self_gating(branch, scope) if gated else branch)
    return tf.concat(branches, axis=4)


def video_inception_base(videos, first_temporal_kernel_size, temporal_conv_startat,
                         gating_startat, separable, depth_multiplier=1.0, min_depth=16):
    """Builds the backbone on float32 `videos` [batch, frames, height, width, channels]
    in the current variable scope, up to Mixed_5c [batch, ceil(frames / 8), ceil(height
    / 32), ceil(width / 32), channels] (1024 channels at depth_multiplier 1).

    first_temporal_kernel_size: frames spanned by Conv2d_1a_7x7 (1, 3, 5 or 7).
    temporal_conv_startat, gating_startat: the first of TEMPORAL_BLOCKS whose 3x3
      convolutions span 3 frames, or whose outputs are self-gated, it and all later
      blocks; None: none.
    separable: temporal 3x3 convolutions as 1x3x3 then 3x1x1 instead of 3x3x3.
    depth_multiplier, min_depth: every depth d becomes max(int(d * depth_multiplier),
      min_depth).
    Returns (net, end_points), end_points mapping ENDPOINTS to their tensors.
    Raises ValueError for a bad first_temporal_kernel_size, start block or
    depth_multiplier.
    """
    if first_temporal_kernel_size not in (1, 3, 5, 7):
        raise ValueError('first_temporal_kernel_size must be 1, 3, 5 or 7, got '
                         f'{first_temporal_kernel_size!r}')
    for start in (temporal_conv_startat, gating_startat):
        if start is not None and start not in TEMPORAL_BLOCKS:
            raise ValueError(f'start block must be None or one of {TEMPORAL_BLOCKS}, '
                             f'got {start!r}')
    if depth_multiplier <= 0:
        raise ValueError(f'depth_multiplier must be positive, got {depth_multiplier!r}')

    def depth(d):
        return max(int(d * depth_multiplier), min_depth)

    initializer = tf.truncated_normal_initializer(stddev=0.01)
    with slim.arg_scope([slim.conv3d], weights_initializer=initializer), \
            slim.arg_scope([slim.conv3d, slim.max_pool3d], stride=1, padding='SAME'):
        net = _conv(videos, depth(64), [first_temporal_kernel_size, 7, 7], 'Conv2d_1a_7x7',
                    stride=2)
        end_points = {'Conv2d_1a_7x7': net}
        temporal_size, gated = 1, False
        for name, (kind, *spec) in _LAYERS:
            if name == temporal_conv_startat:
                temporal_size = _TEMPORAL_SIZE
            gated = gated or name == gating_startat
            if kind == 'pool':
                net = slim.max_pool3d(net, spec[0], stride=spec[1], scope=name)
            elif kind == 'conv':
                size = spec[1]
                net = _conv(net, depth(spec[0]), [temporal_size if size > 1 else 1, size, size],
                            name, separable)
                net = _self_gating(net, name) if gated else net
            else:
                with tf.variable_scope(name):
                    net = _mixed(net, [depth(d) for d in _MIXED_DEPTHS[name]],
                                 temporal_size, separable, gated)
            end_points[name] = net
    return net, end_points


def video_inception(videos, num_classes, is_training, dropout_keep_prob, scope,
                    **base_kwargs):
    """Builds the backbone (video_inception_base with `base_kwargs`) and TF-Slim's head
    under variable scope `scope`.

    The head averages Mixed_5c over windows of 2 frames x 7 x 7 (fewer if the input is
    smaller), then, with num_classes, applies dropout (keep probability
    `dropout_keep_prob`, when `is_training`) and a 1x1x1 convolution per window, and
    averages the windows' logits. TF-Slim squeezes the 1x1 spatial result of 224x224
    inputs; averaging over space too gives the same logits there and also handles larger
    inputs.
    Returns (net, end_points): net is the logits [batch, num_classes], or with
    num_classes 0 or None (no logits layer) the features [batch, channels of Mixed_5c]
    averaged the same way. end_points holds the backbone's ENDPOINTS and, with logits,
    'Logits' and 'Predictions' (softmax).
    """
    videos = tf.convert_to_tensor(videos)
    if videos.shape.rank != 5:
        raise ValueError('expected videos [batch, frames, height, width, channels], got '
                         f'shape {videos.shape}')
    with tf.variable_scope(scope, 'InceptionV1', [videos]), \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net, end_points = video_inception_base(videos, **base_kwargs)
        with tf.variable_scope('Logits'):
            kernel = [k if n is None else min(n, k)
                      for n, k in zip(net.shape[1:4], _POOL_KERNEL)]
            net = slim.avg_pool3d(net, kernel, stride=1, scope='AvgPool_0a_7x7')
            if not num_classes:
                return tf.reduce_mean(net, axis=[1, 2, 3], name='Features'), end_points
            net = slim.dropout(net, dropout_keep_prob, scope='Dropout_0b')
            net = slim.conv3d(net, num_classes, [1, 1, 1], activation_fn=None,
                              normalizer_fn=None, scope='Conv2d_0c_1x1')
            logits = tf.reduce_mean(net, axis=[1, 2, 3], name='SpatioTemporalMean')
        end_points['Logits'] = logits
        end_points['Predictions'] = slim.softmax(logits, scope='Predictions')
    return logits, end_points


def video_inception_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999,
                              batch_norm_epsilon=0.001):
    """Returns the arg_scope I3D and S3D-G are built in (TF-Slim's): every conv3d with
    relu, an L2 penalty of `weight_decay` on its weights (0: none) and, unless it
    overrides it, batch normalization (decay `batch_norm_decay`, epsilon
    `batch_norm_epsilon`, no scale, not fused; moving statistics also in the collection
    'moving_vars')."""
    batch_norm_params = {
        'decay': batch_norm_decay,
        'epsilon': batch_norm_epsilon,
        'fused': False,
        'variables_collections': {'moving_mean': ['moving_vars'],
                                  'moving_variance': ['moving_vars']},
    }
    with slim.arg_scope(
            [slim.conv3d],
            weights_regularizer=slim.l2_regularizer(weight_decay),
            activation_fn=tf.nn.relu,
            normalizer_fn=slim.batch_norm,
            normalizer_params=batch_norm_params) as scope:
        return scope
