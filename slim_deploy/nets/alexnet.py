"""TF-Slim's AlexNet v2 (Krizhevsky 2014, "One weird trick", arXiv:1404.5997), for 224x224.

Five convolutions and three max poolings, then the fully connected layers fc6, fc7 and fc8
(the logits) as convolutions, so the net also runs fully convolutionally on larger inputs;
no local response normalization. Variable names and shapes match TF-Slim's
('alexnet_v2/conv1/weights' [11, 11, 3, 64], 'alexnet_v2/fc6/weights' [5, 5, 256, 4096]).
Built by `fully_convolutional.fully_convolutional_net`, as OverFeat and VGG are.
"""
import tensorflow.compat.v1 as tf

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.fully_convolutional import (
    FC_DEPTH,
    Layer,
    alexnet_fc_initializers,
    fully_convolutional_arg_scope,
    fully_convolutional_net,
    trunc_normal,  # noqa: F401  (slim's has it)
)

# A 224x224 input leaves pool5 a 5x5x256 map: fc6 covers it.
TRUNK = (Layer('conv1', 64, 11, 4, 'VALID'), Layer('pool1', None, 3, 2),
         Layer('conv2', 192, 5), Layer('pool2', None, 3, 2),
         Layer('conv3', 384, 3), Layer('conv4', 384, 3), Layer('conv5', 256, 3),
         Layer('pool5', None, 3, 2))
FC6 = Layer('fc6', FC_DEPTH, 5, padding='VALID')


def alexnet_v2(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
               spatial_squeeze=True, scope='alexnet_v2', global_pool=False):
    """Builds AlexNet v2 on `inputs`, float32 [batch, height, width, channels]; 224x224 gives
    1x1 logits (larger inputs need global_pool, or spatial_squeeze False for a map of them).

    num_classes: width of the logits layer 'fc8'; 0 or None omits it (and dropout7) and
      returns fc7's output [batch, h, w, 4096] (1x1 at 224, or with global_pool).
    is_training: whether dropout (before fc7 and fc8) acts; it keeps each activation with
      probability `dropout_keep_prob`.
    spatial_squeeze: return the logits as [batch, num_classes] rather than
      [batch, 1, 1, num_classes] (named 'alexnet_v2/fc8/squeezed').
    global_pool: average fc7's output over its height and width before the logits, so that
      any input size gives 1x1 logits.
    Returns (net, end_points) as `fully_convolutional_net` does; end_points keys are full
    scope names ('alexnet_v2/conv1' ... 'alexnet_v2/pool5', 'alexnet_v2/fc6',
    'alexnet_v2/fc7', 'alexnet_v2/fc8'), plus 'global_pool'.
    """
    return fully_convolutional_net(
        inputs, TRUNK, FC6, num_classes=num_classes, is_training=is_training,
        dropout_keep_prob=dropout_keep_prob, spatial_squeeze=spatial_squeeze, scope=scope,
        default_scope='alexnet_v2', global_pool=global_pool,
        fc_initializers=alexnet_fc_initializers())


alexnet_v2.default_image_size = 224


def alexnet_v2_arg_scope(weight_decay=0.0005):
    """Returns the arg_scope AlexNet v2 is built in: relu, biases 0.1 and an L2 penalty of
    `weight_decay` on the conv/fc weights (0: none); convolutions padded 'SAME' and
    poolings 'VALID' where the net does not say."""
    return fully_convolutional_arg_scope(weight_decay, tf.constant_initializer(0.1), 'VALID')
