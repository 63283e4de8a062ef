"""TF-Slim's MobileNet v2 (Sandler et al. 2018, arXiv:1801.04381), for 224x224 images.

A 3x3 stride-2 convolution, 17 inverted residual blocks (conv_blocks.expanded_conv) with
relu6 and a 1x1 convolution to 1280 channels (`V2_DEF`), then the classifier of
mobilenet.mobilenet. Variables are named as in TF-Slim's ImageNet checkpoints (1001
classes), e.g. 'MobilenetV2/expanded_conv_1/expand/weights' [1, 1, 16, 96]. Built in
inference mode; for training:

    with slim.arg_scope(mobilenet_v2.training_scope()):
        logits, end_points = mobilenet_v2.mobilenet(images)
"""
import copy

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.mobilenet import conv_blocks as ops
from slim_deploy.nets.mobilenet import mobilenet as lib

__all__ = ['training_scope', 'mobilenet_base', 'mobilenet', 'V2_DEF']

op = lib.op
expand_input = ops.expand_input_by_factor
wrapped_partial = lib.wrapped_partial

# (depth, blocks, stride of the first block) of the stages of blocks expanding their input
# 6 times, after the first block (16 channels, no expansion): the paper's Table 2.
_STAGES = [(24, 2, 2), (32, 3, 2), (64, 4, 2), (96, 3, 1), (160, 3, 2), (320, 1, 1)]

_SPEC = [
    op(slim.conv2d, stride=2, num_outputs=32, kernel_size=[3, 3]),
    op(ops.expanded_conv, expansion_size=expand_input(1, divisible_by=1), num_outputs=16),
    *(op(ops.expanded_conv, stride=stride if block == 0 else 1, num_outputs=depth)
      for depth, blocks, stride in _STAGES for block in range(blocks)),
    op(slim.conv2d, stride=1, kernel_size=[1, 1], num_outputs=1280),
]


def _defaults(normalizer_fn):
    """The arg_scopes of MobileNet v2's layers, normalized by `normalizer_fn`."""
    return {
        (slim.conv2d, slim.fully_connected, slim.separable_conv2d): {
            'normalizer_fn': normalizer_fn, 'activation_fn': tf.nn.relu6},
        (ops.expanded_conv,): {'expansion_size': expand_input(6), 'split_expansion': 1,
                               'normalizer_fn': normalizer_fn, 'residual': True},
        (slim.conv2d, slim.separable_conv2d): {'padding': 'SAME'},
    }


# Batch normalization's offset and scale are part of the architecture (the checkpoints').
V2_DEF = dict(defaults={(slim.batch_norm,): {'center': True, 'scale': True},
                        **_defaults(slim.batch_norm)},
              spec=_SPEC)
# Group normalization (slim.group_norm's 32 groups unless an arg_scope sets them; see
# mobilenet_base_group_norm) instead of batch normalization.
V2_DEF_GROUP_NORM = dict(defaults=_defaults(slim.group_norm), spec=copy.deepcopy(_SPEC))


@slim.add_arg_scope
def mobilenet(input_tensor, num_classes=1001, depth_multiplier=1.0, scope='MobilenetV2',
              conv_defs=None, finegrain_classification_mode=False, min_depth=None,
              divisible_by=None, activation_fn=None, **kwargs):
    """Builds MobileNet v2 (or `conv_defs`; None: V2_DEF) on `input_tensor`, float32
    [batch, height, width, 3], in variable scope `scope`.

    num_classes: the logits' width (1001 in TF-Slim's checkpoints: 0 is background); 0 or
      None builds no classifier and returns the pooled features [batch, 1, 1, 1280].
    depth_multiplier: factor (> 0) on every layer's depth, rounded to a multiple of
      `divisible_by` (None: 8 or the arg_scope's of lib.depth_multiplier), at least
      `min_depth` (None: likewise).
    finegrain_classification_mode: keep the last layer's depth when depth_multiplier < 1.
    activation_fn: the layers' activation (None: relu6).
    kwargs: go to mobilenet.mobilenet: is_training, prediction_fn, reuse, base_only,
      final_endpoint, output_stride, use_explicit_padding, use_reduce_mean_for_pooling.
    Returns (net, end_points) as mobilenet.mobilenet does: 'layer_1' ... 'layer_19', their
    'layer_<i>/output', '/expansion_output' and '/depthwise_output', 'global_pool',
    'Logits', 'Predictions'.
    Raises ValueError given `multiplier` (use depth_multiplier) or depth_multiplier <= 0.
    """
    conv_defs = V2_DEF if conv_defs is None else conv_defs
    if 'multiplier' in kwargs:
        raise ValueError('mobilenetv2 doesn\'t support generic multiplier parameter use '
                         '"depth_multiplier" instead.')
    if finegrain_classification_mode and depth_multiplier < 1:
        *layers, last = conv_defs['spec']
        last = last._replace(params=dict(
            last.params, num_outputs=last.params['num_outputs'] / depth_multiplier))
        conv_defs = dict(conv_defs, spec=[*layers, last])
    if activation_fn:
        defaults = dict(conv_defs['defaults'])
        key = (slim.conv2d, slim.fully_connected, slim.separable_conv2d)
        defaults[key] = dict(defaults[key], activation_fn=activation_fn)
        conv_defs = dict(conv_defs, defaults=defaults)
    # Unset, they leave lib.depth_multiplier's arg_scope alone.
    depth_args = {name: value for name, value in
                  (('min_depth', min_depth), ('divisible_by', divisible_by))
                  if value is not None}
    with slim.arg_scope([lib.depth_multiplier], **depth_args):
        return lib.mobilenet(input_tensor, num_classes=num_classes, conv_defs=conv_defs,
                             scope=scope, multiplier=depth_multiplier, **kwargs)


mobilenet.default_image_size = 224

mobilenet_v2_140 = wrapped_partial(mobilenet, depth_multiplier=1.4)
mobilenet_v2_050 = wrapped_partial(mobilenet, depth_multiplier=0.50,
                                   finegrain_classification_mode=True)
mobilenet_v2_035 = wrapped_partial(mobilenet, depth_multiplier=0.35,
                                   finegrain_classification_mode=True)


@slim.add_arg_scope
def mobilenet_base(input_tensor, depth_multiplier=1.0, **kwargs):
    """MobileNet v2's layers without pooling or classifier: mobilenet(..., base_only=True);
    returns (net, end_points), net [batch, height / 32, width / 32, 1280]."""
    return mobilenet(input_tensor, depth_multiplier=depth_multiplier, base_only=True, **kwargs)


@slim.add_arg_scope
def mobilenet_base_group_norm(input_tensor, depth_multiplier=1.0, **kwargs):
    """mobilenet_base with V2_DEF_GROUP_NORM, in kwargs' `groups` groups (default 8)."""
    defaults = dict(V2_DEF_GROUP_NORM['defaults'])
    defaults[(slim.group_norm,)] = {'groups': kwargs.pop('groups', 8)}
    kwargs['conv_defs'] = dict(V2_DEF_GROUP_NORM, defaults=defaults)
    return mobilenet(input_tensor, depth_multiplier=depth_multiplier, base_only=True, **kwargs)


def training_scope(**kwargs):
    """mobilenet.training_scope(**kwargs): is_training, weight_decay, stddev,
    dropout_keep_prob, bn_decay."""
    return lib.training_scope(**kwargs)
