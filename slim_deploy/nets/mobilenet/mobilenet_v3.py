"""TF-Slim's MobileNet v3 (Howard et al. 2019, arXiv:1905.02244) and MobileNet EdgeTPU, for
224x224 images: conv_defs tables for mobilenet.mobilenet.

Large and small nets use squeeze-excite gates, hard-swish and 5x5 depthwise kernels in
places; their minimalistic variants have no gates, relu and 3x3 kernels only. Their head
pools to 1x1 before its last convolution, which has biases instead of batch normalization.
EdgeTPU's early blocks expand with full 3x3 convolutions and have no depthwise one
(`mbv3_fused`). Variables are named as in TF-Slim's ImageNet checkpoints (1001 classes),
under 'MobilenetV3' ('MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights') or
'MobilenetEdgeTPU'. Built in inference mode; for training:

    with slim.arg_scope(mobilenet_v3.training_scope()):
        logits, end_points = mobilenet_v3.large(images)
"""
import copy
import functools

import numpy as np
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.mobilenet import conv_blocks as ops
from slim_deploy.nets.mobilenet import mobilenet as lib

__all__ = ['training_scope', 'mobilenet', 'V3_LARGE', 'V3_SMALL', 'large', 'small',
           'V3_LARGE_DETECTION', 'V3_SMALL_DETECTION']

op = lib.op
expand_input = ops.expand_input_by_factor


def _hard_sigmoid(x):
    """relu6(x + 3) / 6, with TF-Slim's 0.16667 for 1/6."""
    return tf.nn.relu6(x + 3) * 0.16667


squeeze_excite = functools.partial(ops.squeeze_excite, squeeze_factor=4,
                                   inner_activation_fn=tf.nn.relu, gating_fn=_hard_sigmoid)


def _squeeze_excite_expansion(expansion_tensor, input_tensor):
    """An expansion_transform of expanded_conv: squeeze_excite of the expansion."""
    del input_tensor  # The gate depends on the expansion only.
    return squeeze_excite(expansion_tensor)


def hard_swish(x):
    """x * relu6(x + 3) / 6, in name scope 'hard_swish'."""
    with tf.name_scope('hard_swish'):
        return x * tf.nn.relu6(x + np.float32(3)) * np.float32(1. / 6.)


def reduce_to_1x1(input_tensor, default_size=7, **kwargs):
    """Average pooling over the whole map of `input_tensor` when it is square and its side
    known, over `default_size` x `default_size` windows otherwise; kwargs go to
    slim.avg_pool2d."""
    height, width = input_tensor.shape.as_list()[1:3]
    side = height if height is not None and width == height else default_size
    return slim.avg_pool2d(input_tensor, kernel_size=[side, side], **kwargs)


def mbv3_op(ef, n, k, s=1, act=tf.nn.relu, se=None, **kwargs):
    """An expanded_conv layer for a conv_defs spec: expansion factor `ef`, `n` output
    channels, a k x k depthwise convolution of stride `s`, inner activation `act`,
    expansion_transform `se` (a squeeze-excite gate; None: none); kwargs go to
    expanded_conv."""
    return op(ops.expanded_conv, expansion_size=expand_input(ef), kernel_size=(k, k), stride=s,
              num_outputs=n, inner_activation_fn=act, expansion_transform=se, **kwargs)


def mbv3_fused(ef, n, k, s=1, **kwargs):
    """mbv3_op whose expansion is a k x k convolution of stride `s` and which has no
    depthwise convolution (EdgeTPU's fused block)."""
    expansion_fn = functools.partial(slim.conv2d, kernel_size=k, stride=s)
    return mbv3_op(ef, n, k=1, s=s, depthwise_location=None, expansion_fn=expansion_fn,
                   **kwargs)


mbv3_op_se = functools.partial(mbv3_op, se=_squeeze_excite_expansion)

DEFAULTS = {
    (ops.expanded_conv,): dict(normalizer_fn=slim.batch_norm, residual=True),
    (slim.conv2d, slim.fully_connected, slim.separable_conv2d): {
        'normalizer_fn': slim.batch_norm, 'activation_fn': tf.nn.relu},
    (slim.batch_norm,): {'center': True, 'scale': True},
}

DEFAULTS_GROUP_NORM = {
    (ops.expanded_conv,): dict(normalizer_fn=slim.group_norm, residual=True),
    (slim.conv2d, slim.fully_connected, slim.separable_conv2d): {
        'normalizer_fn': slim.group_norm, 'activation_fn': tf.nn.relu},
    (slim.group_norm,): {'groups': 8},
}

_RELU, _HSWISH = tf.nn.relu, hard_swish
# (expansion factor, depth, depthwise kernel, stride, inner activation, squeeze-excite?)
# of the blocks between the 16-channel 3x3 stride-2 stem and the head.
_LARGE_BLOCKS = [
    (1, 16, 3, 1, _RELU, False), (4, 24, 3, 2, _RELU, False), (3, 24, 3, 1, _RELU, False),
    (3, 40, 5, 2, _RELU, True), (3, 40, 5, 1, _RELU, True), (3, 40, 5, 1, _RELU, True),
    (6, 80, 3, 2, _HSWISH, False), (2.5, 80, 3, 1, _HSWISH, False),
    (184 / 80, 80, 3, 1, _HSWISH, False), (184 / 80, 80, 3, 1, _HSWISH, False),
    (6, 112, 3, 1, _HSWISH, True), (6, 112, 3, 1, _HSWISH, True),
    (6, 160, 5, 2, _HSWISH, True), (6, 160, 5, 1, _HSWISH, True), (6, 160, 5, 1, _HSWISH, True),
]
_SMALL_BLOCKS = [
    (1, 16, 3, 2, _RELU, True), (72 / 16, 24, 3, 2, _RELU, False),
    (88 / 24, 24, 3, 1, _RELU, False), (4, 40, 5, 2, _HSWISH, True),
    (6, 40, 5, 1, _HSWISH, True), (6, 40, 5, 1, _HSWISH, True), (3, 48, 5, 1, _HSWISH, True),
    (3, 48, 5, 1, _HSWISH, True), (6, 96, 5, 2, _HSWISH, True), (6, 96, 5, 1, _HSWISH, True),
    (6, 96, 5, 1, _HSWISH, True),
]


def _v3_def(blocks, head_depth, last_depth, minimalistic=False):
    """The conv_defs of a v3 net: the stem, `blocks` (rows of _LARGE_BLOCKS' form), the
    head's 1x1 convolution to `head_depth`, pooling to 1x1 and a 1x1 convolution to
    `last_depth` with biases. Minimalistic: relu throughout, no gates, 3x3 kernels."""
    hard = {} if minimalistic else {'activation_fn': hard_swish}
    spec = [op(slim.conv2d, stride=2, num_outputs=16, kernel_size=(3, 3), **hard)]
    for ef, n, k, s, act, se in blocks:
        if minimalistic:
            spec.append(mbv3_op(ef=ef, n=n, k=3, s=s))
        else:
            spec.append((mbv3_op_se if se else mbv3_op)(ef=ef, n=n, k=k, s=s, act=act))
    spec += [
        op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=head_depth, **hard),
        op(reduce_to_1x1, default_size=7, stride=1, padding='VALID'),
        op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=last_depth,
           normalizer_fn=None, **hard),
    ]
    return dict(defaults=dict(DEFAULTS), spec=spec)


V3_LARGE = _v3_def(_LARGE_BLOCKS, 960, 1280)
V3_LARGE_MINIMALISTIC = _v3_def(_LARGE_BLOCKS, 960, 1280, minimalistic=True)
V3_SMALL = _v3_def(_SMALL_BLOCKS, 576, 1024)
V3_SMALL_MINIMALISTIC = _v3_def(_SMALL_BLOCKS, 576, 1024, minimalistic=True)

# (block, kernel, first block's stride and expansion factor, depth, blocks, first block's
# other params) per stage; the later blocks of a stage have stride 1 and expand 4 times.
_EDGETPU_STAGES = [
    (mbv3_fused, 3, 1, 1, 16, 1, {}),
    (mbv3_fused, 3, 2, 8, 32, 4, {}),
    (mbv3_fused, 3, 2, 8, 48, 4, {}),
    (mbv3_op, 3, 2, 8, 96, 4, {}),
    (mbv3_op, 3, 1, 8, 96, 4, {'residual': False}),
    (mbv3_op, 5, 2, 8, 160, 4, {}),
    (mbv3_op, 3, 1, 8, 192, 1, {}),
]
V3_EDGETPU = dict(defaults=dict(DEFAULTS), spec=[
    op(slim.conv2d, stride=2, num_outputs=32, kernel_size=(3, 3)),
    *(block(k=k, s=s, ef=ef, n=n, **first) if index == 0 else block(k=k, s=1, ef=4, n=n)
      for block, k, s, ef, n, blocks, first in _EDGETPU_STAGES for index in range(blocks)),
    op(slim.conv2d, stride=1, num_outputs=1280, kernel_size=(1, 1)),
])


def _keep_depth(params, multiplier):
    """A multiplier_func that leaves the layer's params (and depth) as they are."""
    del params, multiplier


@slim.add_arg_scope
def mobilenet(input_tensor, num_classes=1001, depth_multiplier=1.0, scope='MobilenetV3',
              conv_defs=None, finegrain_classification_mode=False, use_groupnorm=False,
              **kwargs):
    """Builds MobileNet v3 (`conv_defs`; None: V3_LARGE) on `input_tensor`, float32
    [batch, height, width, 3], in variable scope `scope`.

    num_classes: the logits' width (1001 in TF-Slim's checkpoints: 0 is background); 0 or
      None builds no classifier and returns the pooled features [batch, 1, 1, depth].
    depth_multiplier: factor (> 0) on every layer's depth, rounded to a multiple of 8.
    finegrain_classification_mode: keep the last layer's depth whatever depth_multiplier.
    use_groupnorm: group normalization (kwargs' `groups` groups, default 8) instead of
      batch normalization.
    kwargs: go to mobilenet.mobilenet: is_training, prediction_fn, reuse, base_only,
      final_endpoint, output_stride, use_explicit_padding, use_reduce_mean_for_pooling.
    Returns (net, end_points) as mobilenet.mobilenet does.
    Raises ValueError given `multiplier` (use depth_multiplier) or depth_multiplier <= 0.
    """
    conv_defs = V3_LARGE if conv_defs is None else conv_defs
    if 'multiplier' in kwargs:
        raise ValueError('mobilenetv2 doesn\'t support generic multiplier parameter use '
                         '"depth_multiplier" instead.')
    if use_groupnorm:
        conv_defs = dict(conv_defs, defaults={
            **DEFAULTS_GROUP_NORM, (slim.group_norm,): {'groups': kwargs.pop('groups', 8)}})
    if finegrain_classification_mode:
        *layers, last = conv_defs['spec']
        conv_defs = dict(conv_defs, spec=[*layers, last._replace(multiplier_func=_keep_depth)])
    return lib.mobilenet(input_tensor, num_classes=num_classes, conv_defs=conv_defs,
                         scope=scope, multiplier=depth_multiplier, **kwargs)


mobilenet.default_image_size = 224
training_scope = lib.training_scope


@slim.add_arg_scope
def mobilenet_base(input_tensor, depth_multiplier=1.0, **kwargs):
    """The layers without pooling or classifier: mobilenet(..., base_only=True)."""
    return mobilenet(input_tensor, depth_multiplier=depth_multiplier, base_only=True, **kwargs)


def wrapped_partial(func, new_defaults=None, **kwargs):
    """functools.partial(func, **kwargs) keeping func's name, docstring and attributes,
    whose calls default to `new_defaults` ({argument: value}) where they give no value."""
    new_defaults = dict(new_defaults or {})

    @functools.wraps(func)
    def with_defaults(*args, **call_kwargs):
        return func(*args, **{**new_defaults, **call_kwargs})
    return lib.wrapped_partial(with_defaults, **kwargs)


large = wrapped_partial(mobilenet, conv_defs=V3_LARGE)
small = wrapped_partial(mobilenet, conv_defs=V3_SMALL)
edge_tpu = wrapped_partial(mobilenet, new_defaults={'scope': 'MobilenetEdgeTPU'},
                           conv_defs=V3_EDGETPU)
edge_tpu_075 = wrapped_partial(mobilenet, new_defaults={'scope': 'MobilenetEdgeTPU'},
                               conv_defs=V3_EDGETPU, depth_multiplier=0.75,
                               finegrain_classification_mode=True)
large_minimalistic = wrapped_partial(mobilenet, conv_defs=V3_LARGE_MINIMALISTIC)
small_minimalistic = wrapped_partial(mobilenet, conv_defs=V3_SMALL_MINIMALISTIC)


def _reduce_consecutive_layers(conv_defs, start_id, end_id, multiplier=0.5):
    """A copy of `conv_defs` whose layers start_id ... end_id (0-based, inclusive) have
    their num_outputs times `multiplier`, rounded (KeyError for a layer without one)."""
    conv_defs = copy.deepcopy(conv_defs)
    for layer in conv_defs['spec'][start_id:end_id + 1]:
        layer.params['num_outputs'] = int(np.round(layer.params['num_outputs'] * multiplier))
    return conv_defs


# For object detection: the last stage and the head at half their depth.
V3_LARGE_DETECTION = _reduce_consecutive_layers(V3_LARGE, 13, 16)
V3_SMALL_DETECTION = _reduce_consecutive_layers(V3_SMALL, 9, 12)
