"""TF-Slim's OverFeat (Sermanet et al. 2014, arXiv:1312.6229, the fast model), for 231x231.

Five convolutions and three max poolings, then the fully connected layers fc6, fc7 and fc8
(the logits) as convolutions, so the net also runs fully convolutionally on larger inputs.
Variable names and shapes match TF-Slim's ('overfeat/conv1/weights' [11, 11, 3, 64],
'overfeat/fc6/weights' [6, 6, 1024, 3072]). Built by
`fully_convolutional.fully_convolutional_net`.
"""
import tensorflow.compat.v1 as tf

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.fully_convolutional import (
    Layer,
    alexnet_fc_initializers,
    fully_convolutional_arg_scope,
    fully_convolutional_net,
    trunc_normal,  # noqa: F401  (slim's has it)
)

# The poolings are 2x2 with slim's default stride, 2. A 231x231 input leaves pool5 a
# 6x6x1024 map: fc6 covers it.
TRUNK = (Layer('conv1', 64, 11, 4, 'VALID'), Layer('pool1', None, 2),
         Layer('conv2', 256, 5, padding='VALID'), Layer('pool2', None, 2),
         Layer('conv3', 512, 3), Layer('conv4', 1024, 3), Layer('conv5', 1024, 3),
         Layer('pool5', None, 2))
FC6 = Layer('fc6', 3072, 6, padding='VALID')


def overfeat(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
             spatial_squeeze=True, scope='overfeat', global_pool=False):
    """Builds OverFeat on `inputs`, float32 [batch, height, width, channels]; 231x231 gives
    1x1 logits (larger inputs need global_pool, or spatial_squeeze False for a map of them).

    num_classes: width of the logits layer 'fc8'; 0 or None omits it (and dropout7) and
      returns fc7's output [batch, h, w, 4096] (1x1 at 231, or with global_pool).
    is_training: whether dropout (before fc7 and fc8) acts; it keeps each activation with
      probability `dropout_keep_prob`.
    spatial_squeeze: return the logits as [batch, num_classes] rather than
      [batch, 1, 1, num_classes] (named 'overfeat/fc8/squeezed').
    global_pool: average fc7's output over its height and width before the logits, so that
      any input size gives 1x1 logits.
    Returns (net, end_points) as `fully_convolutional.fully_convolutional_net` does;
    end_points keys are full scope names ('overfeat/conv1' ... 'overfeat/pool5', 'overfeat/fc6',
    'overfeat/fc7', 'overfeat/fc8'), plus 'global_pool'.
    """
    return fully_convolutional_net(
        inputs, TRUNK, FC6, num_classes=num_classes, is_training=is_training,
        dropout_keep_prob=dropout_keep_prob, spatial_squeeze=spatial_squeeze, scope=scope,
        default_scope='overfeat', global_pool=global_pool,
        fc_initializers=alexnet_fc_initializers())


overfeat.default_image_size = 231


def overfeat_arg_scope(weight_decay=0.0005):
    """Returns the arg_scope OverFeat is built in: relu, zero biases and an L2 penalty of
    `weight_decay` on the conv/fc weights (0: none); convolutions padded 'SAME' and
    poolings 'VALID' where the net does not say. (fc6 to fc8 set their own initializers.)"""
    return fully_convolutional_arg_scope(weight_decay, tf.zeros_initializer(), 'VALID')
