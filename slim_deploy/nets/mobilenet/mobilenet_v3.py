"""TF-Slim's MobileNet v3 (Howard et al. 2019, arXiv:1905.02244) and MobileNet EdgeTPU.

Large and small v3 nets use squeeze-excite gates, hard-swish and 5x5 depthwise kernels in
places; their 'minimalistic' variants replace these by no gate, relu and 3x3 kernels.
The v3 head pools to 1x1 before its last convolution, which has biases instead of batch
normalization. EdgeTPU expands its early blocks with full 3x3 convolutions ('fused', no
depthwise convolution). Variables are named as in TF-Slim's checkpoints, under
'MobilenetV3' or 'MobilenetEdgeTPU'. The builders take (images, num_classes=1001,
is_training=False, **options), with the options of `framework.mobilenet`; their arg_scope
is `framework.mobilenet_arg_scope`.
"""
import dataclasses
import functools

import tensorflow.compat.v1 as tf

from slim_deploy.nets.mobilenet import framework
from slim_deploy.nets.mobilenet.framework import Block, Conv, Pool, hard_swish

RELU, HSWISH = tf.nn.relu, hard_swish
SE = dict(squeeze_excite=True)

LARGE = (
    Conv(16, kernel=3, stride=2, activation=HSWISH),
    Block(1, 16),
    Block(4, 24, stride=2),
    Block(3, 24),
    Block(3, 40, kernel=5, stride=2, **SE),
    Block(3, 40, kernel=5, **SE),
    Block(3, 40, kernel=5, **SE),
    Block(6, 80, stride=2, activation=HSWISH),
    Block(2.5, 80, activation=HSWISH),
    Block(184 / 80, 80, activation=HSWISH),
    Block(184 / 80, 80, activation=HSWISH),
    Block(6, 112, activation=HSWISH, **SE),
    Block(6, 112, activation=HSWISH, **SE),
    Block(6, 160, kernel=5, stride=2, activation=HSWISH, **SE),
    Block(6, 160, kernel=5, activation=HSWISH, **SE),
    Block(6, 160, kernel=5, activation=HSWISH, **SE),
    Conv(960, activation=HSWISH),
    Pool(),
    Conv(1280, activation=HSWISH, batch_norm=False),
)

SMALL = (
    Conv(16, kernel=3, stride=2, activation=HSWISH),
    Block(1, 16, stride=2, **SE),
    Block(72 / 16, 24, stride=2),
    Block(88 / 24, 24),
    Block(4, 40, kernel=5, stride=2, activation=HSWISH, **SE),
    Block(6, 40, kernel=5, activation=HSWISH, **SE),
    Block(6, 40, kernel=5, activation=HSWISH, **SE),
    Block(3, 48, kernel=5, activation=HSWISH, **SE),
    Block(3, 48, kernel=5, activation=HSWISH, **SE),
    Block(6, 96, kernel=5, stride=2, activation=HSWISH, **SE),
    Block(6, 96, kernel=5, activation=HSWISH, **SE),
    Block(6, 96, kernel=5, activation=HSWISH, **SE),
    Conv(576, activation=HSWISH),
    Pool(),
    Conv(1024, activation=HSWISH, batch_norm=False),
)


def minimalistic(architecture):
    """`architecture` without squeeze-excite, hard-swish or kernels over 3x3."""
    def simplify(layer):
        if isinstance(layer, Pool):
            return layer
        changes = dict(kernel=min(layer.kernel, 3), activation=RELU)
        if isinstance(layer, Block):
            changes['squeeze_excite'] = False
        return dataclasses.replace(layer, **changes)
    return tuple(simplify(layer) for layer in architecture)


FUSED = dict(fused=True)
EDGETPU = (
    Conv(32, kernel=3, stride=2),
    Block(1, 16, **FUSED),  # Expansion 1 does not widen: a plain 1x1 projection.
    Block(8, 32, stride=2, **FUSED),
    *[Block(4, 32, **FUSED)] * 3,
    Block(8, 48, stride=2, **FUSED),
    *[Block(4, 48, **FUSED)] * 3,
    Block(8, 96, stride=2),
    *[Block(4, 96)] * 3,
    Block(8, 96, residual=False),
    *[Block(4, 96)] * 3,
    Block(8, 160, kernel=5, stride=2),
    *[Block(4, 160, kernel=5)] * 3,
    Block(8, 192),
    Conv(1280),
)

_v3 = functools.partial(framework.mobilenet, scope='MobilenetV3')
large = functools.partial(_v3, architecture=LARGE)
small = functools.partial(_v3, architecture=SMALL)
large_minimalistic = functools.partial(_v3, architecture=minimalistic(LARGE))
small_minimalistic = functools.partial(_v3, architecture=minimalistic(SMALL))
edgetpu = functools.partial(framework.mobilenet, architecture=EDGETPU,
                            scope='MobilenetEdgeTPU')
# The 0.75 variant keeps the 1280-channel last layer (TF-Slim's published checkpoint).
edgetpu_075 = functools.partial(edgetpu, depth_multiplier=0.75,
                                finegrain_classification_mode=True)
