"""TF-Slim's MobileNet v2 (Sandler et al. 2018, arXiv:1801.04381) and its depth variants.

A 3x3 stride-2 convolution, 17 inverted residual blocks with relu6 and a 1x1 convolution
to 1280 channels, then the classification head; variables are named as in TF-Slim's
checkpoints ('MobilenetV2/expanded_conv_1/expand/weights'). The builders take
(images, num_classes=1001, is_training=False, **options), with the options of
`framework.mobilenet`; their arg_scope is `framework.mobilenet_arg_scope`.
"""
import functools

import tensorflow.compat.v1 as tf

from slim_deploy.nets.mobilenet import framework

# (expansion, depth, blocks, stride of the first block) per stage, as in the paper's Table 2.
STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1)]

ARCHITECTURE = (
    framework.Conv(32, kernel=3, stride=2, activation=tf.nn.relu6),
    *(framework.Block(expansion, depth, stride=stride if block == 0 else 1,
                      activation=tf.nn.relu6)
      for expansion, depth, blocks, stride in STAGES for block in range(blocks)),
    framework.Conv(1280, activation=tf.nn.relu6),
)

mobilenet_v2 = functools.partial(framework.mobilenet, architecture=ARCHITECTURE,
                                 scope='MobilenetV2')
mobilenet_v2_140 = functools.partial(mobilenet_v2, depth_multiplier=1.4)
# The small variants keep the 1280-channel last layer (TF-Slim's published checkpoints).
mobilenet_v2_035 = functools.partial(mobilenet_v2, depth_multiplier=0.35,
                                     finegrain_classification_mode=True)
