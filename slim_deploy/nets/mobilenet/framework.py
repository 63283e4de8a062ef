"""The machinery shared by TF-Slim's MobileNet v2, v3 and EdgeTPU nets.

An architecture is a tuple of layer specs (`Conv`, `Block`, `Pool`) that `mobilenet` builds
in order and tops with TF-Slim's classification head (global average pool, dropout, 1x1
convolution 'Logits/Conv2d_1c_1x1'). Scopes are named as TF-Slim names them ('Conv',
'Conv_1', 'expanded_conv', 'expanded_conv_1', ...), so its ImageNet checkpoints restore.
"""
import collections
import dataclasses
from typing import Callable

import numpy as np

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim

SQUEEZE_FACTOR = 4  # Squeeze-excite bottlenecks are a quarter of the block's inner width.


def make_divisible(value, divisor=8, min_value=None):
    """Rounds the channel count `value` to the nearest multiple of `divisor`, at least
    `min_value` (None: `divisor`), rounding up where rounding down would lose over 10%."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def hard_sigmoid(x):
    """relu6(x + 3) / 6, with TF-Slim's constant 0.16667 for 1/6."""
    return tf.nn.relu6(x + 3.0) * 0.16667


def hard_swish(x):
    """x * relu6(x + 3) / 6."""
    with tf.name_scope('hard_swish'):
        return x * tf.nn.relu6(x + np.float32(3.0)) * np.float32(1.0 / 6.0)


@dataclasses.dataclass(frozen=True)
class Conv:
    """A kernel x kernel convolution of `depth` channels (before the depth multiplier),
    batch-normalized, or with biases instead when `batch_norm` is False."""
    depth: int
    kernel: int = 1
    stride: int = 1
    activation: Callable = tf.nn.relu
    batch_norm: bool = True
    scope = 'Conv'

    def build(self, net, depth_multiplier, scope):
        net = slim.conv2d(
            net, scaled_depth(self.depth, depth_multiplier), self.kernel, stride=self.stride,
            activation_fn=self.activation,
            normalizer_fn=slim.batch_norm if self.batch_norm else None, scope=scope)
        return net, {}


@dataclasses.dataclass(frozen=True)
class Block:
    """An inverted residual bottleneck ('expanded_conv'): a 1x1 'expand' convolution to
    `expansion` times the input depth (skipped when that does not widen the input), a
    kernel x kernel 'depthwise' convolution, an optional 'squeeze_excite' gate, a linear 1x1
    'project' convolution to `depth` channels and, when shapes allow, the input added back.

    A `fused` block does the expansion with a kernel x kernel convolution and has no
    depthwise convolution (EdgeTPU). All but the projection use `activation`.
    """
    expansion: float
    depth: int
    kernel: int = 3
    stride: int = 1
    activation: Callable = tf.nn.relu
    squeeze_excite: bool = False
    fused: bool = False
    residual: bool = True
    scope = 'expanded_conv'

    def build(self, net, depth_multiplier, scope):
        """Returns the block's output and a dict of its 'expansion_output' and
        'depthwise_output' (where those convolutions exist) and 'output' tensors."""
        block_input, depth_in = net, net.shape[-1]
        depth = scaled_depth(self.depth, depth_multiplier)
        inner_depth = make_divisible(depth_in * self.expansion)
        conv = dict(activation_fn=self.activation, normalizer_fn=slim.batch_norm)
        inner = {}
        with tf.variable_scope(scope):
            if inner_depth > depth_in:
                kernel, stride = (self.kernel, self.stride) if self.fused else (1, 1)
                net = slim.conv2d(net, inner_depth, kernel, stride=stride, scope='expand',
                                  **conv)
                net = inner['expansion_output'] = tf.identity(net, 'expansion_output')
            if not self.fused:
                net = slim.separable_conv2d(net, None, self.kernel, depth_multiplier=1,
                                            stride=self.stride, scope='depthwise', **conv)
                net = inner['depthwise_output'] = tf.identity(net, 'depthwise_output')
            if self.squeeze_excite:
                net = _squeeze_excite(net)
            net = slim.conv2d(net, depth, 1, activation_fn=None,
                              normalizer_fn=slim.batch_norm, scope='project')
            if self.residual and self.stride == 1 and depth == depth_in:
                net += block_input
            net = inner['output'] = tf.identity(net, 'output')
        return net, inner


@dataclasses.dataclass(frozen=True)
class Pool:
    """Average pooling to 1x1 (MobileNet v3's head, before its last convolution). TF-Slim
    pools non-square maps with a fixed 7x7 window instead; square maps pool alike."""
    scope = 'AvgPool2D'

    def build(self, net, depth_multiplier, scope):
        del depth_multiplier  # Pooling keeps the depth.
        return tf.reduce_mean(net, [1, 2], keepdims=True, name=scope), {}


def scaled_depth(depth, depth_multiplier):
    """`depth` channels times `depth_multiplier`, rounded to a multiple of 8 (at least 8)."""
    return make_divisible(depth * depth_multiplier)


def _squeeze_excite(net):
    """Gates each channel of `net` by hard_sigmoid of two 1x1 convolutions (relu, then
    biases only) on the spatial mean, as 'squeeze_excite/Conv' and 'squeeze_excite/Conv_1'."""
    channels = net.shape[-1]
    with tf.variable_scope('squeeze_excite'):
        gate = tf.reduce_mean(net, [1, 2], keepdims=True)
        gate = slim.conv2d(gate, make_divisible(channels / SQUEEZE_FACTOR), 1,
                           activation_fn=tf.nn.relu, normalizer_fn=None, scope='Conv')
        gate = slim.conv2d(gate, channels, 1, activation_fn=hard_sigmoid,
                           normalizer_fn=None, scope='Conv_1')
        return net * gate


def mobilenet(images, num_classes=1001, is_training=False, *, architecture, scope,
              depth_multiplier=1.0, finegrain_classification_mode=False,
              dropout_keep_prob=0.8):
    """Builds `architecture` on `images`, a float32 [batch, height, width, 3] tensor.

    num_classes: width of the logits layer; 0 or None omits it (and the dropout) and
      returns the pooled features [batch, 1, 1, depth] instead.
    is_training: whether batch normalization uses batch statistics and dropout acts.
    architecture: tuple of `Conv`, `Block` and `Pool` specs; scope: the variable scope.
    depth_multiplier: factor (> 0) on every layer's depth, rounded as `scaled_depth` does.
    finegrain_classification_mode: keep the last layer's depth when depth_multiplier < 1
      (TF-Slim's v3 also keeps it when depth_multiplier > 1; its v2 scales it then).
    dropout_keep_prob: probability of keeping a pooled feature (training only).
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points maps 'layer_1', ... (one per spec, 1-based), their 'layer_<i>/output',
    'layer_<i>/expansion_output' and 'layer_<i>/depthwise_output' for blocks,
    'global_pool', 'Logits' and 'Predictions' (softmax) to their tensors.
    Raises ValueError for depth_multiplier <= 0.
    """
    if depth_multiplier <= 0:
        raise ValueError(f'depth_multiplier must be positive, got {depth_multiplier!r}')
    end_points = {}
    scope_counts = collections.Counter()
    with tf.variable_scope(scope, values=[images]), \
            slim.arg_scope([slim.batch_norm], center=True, scale=True,
                           is_training=is_training):
        net = images
        for index, layer in enumerate(architecture, start=1):
            multiplier = depth_multiplier
            if (finegrain_classification_mode and index == len(architecture)
                    and depth_multiplier < 1):
                multiplier = 1.0
            count = scope_counts[layer.scope]
            scope_counts[layer.scope] += 1
            net, inner = layer.build(
                net, multiplier, f'{layer.scope}_{count}' if count else layer.scope)
            end_points[f'layer_{index}'] = net
            end_points.update((f'layer_{index}/{key}', tensor) for key, tensor in inner.items())
        with tf.variable_scope('Logits'):
            net = tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')
            end_points['global_pool'] = net
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                               scope='Dropout')
            net = slim.conv2d(net, num_classes, 1, activation_fn=None, normalizer_fn=None,
                              biases_initializer=tf.zeros_initializer(),
                              scope='Conv2d_1c_1x1')
            logits = tf.squeeze(net, [1, 2], name='output')
        end_points['Logits'] = logits
        end_points['Predictions'] = slim.softmax(logits, scope='Predictions')
    return logits, end_points


def mobilenet_arg_scope(weight_decay=0.00004, stddev=0.09, batch_norm_decay=0.997):
    """Returns the arg_scope TF-Slim trains MobileNets in: truncated normal weights
    (`stddev`), an L2 penalty of `weight_decay` on every convolution's weights but the
    depthwise ones (0: none) and batch-norm moving averages with `batch_norm_decay`."""
    initializer = tf.truncated_normal_initializer(stddev=stddev)
    with slim.arg_scope([slim.conv2d, slim.separable_conv2d], weights_initializer=initializer), \
            slim.arg_scope([slim.conv2d], weights_regularizer=slim.l2_regularizer(weight_decay)), \
            slim.arg_scope([slim.batch_norm], decay=batch_norm_decay) as scope:
        return scope
