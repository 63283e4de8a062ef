"""TF-Slim's VGG nets (Simonyan and Zisserman 2015, arXiv:1409.1556), for 224x224 images.

Five blocks of 3x3 convolutions, each closed by a 2x2 max pooling, then the fully connected
layers fc6, fc7 and fc8 (the logits) as convolutions, so the nets also run fully
convolutionally on larger inputs. vgg_a (configuration A, 11 layers), vgg_16 (D, alias
vgg_d) and vgg_19 (E, alias vgg_e) differ only in how many convolutions each block has.
Variable names and shapes match TF-Slim's ImageNet checkpoints, e.g.
'vgg_16/conv1/conv1_1/weights' [3, 3, 3, 64], 'vgg_16/fc6/weights' [7, 7, 512, 4096].
Built by `fully_convolutional.fully_convolutional_net`.
"""
import tensorflow.compat.v1 as tf

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.fully_convolutional import (
    FC_DEPTH,
    Layer,
    fully_convolutional_arg_scope,
    fully_convolutional_net,
)

BLOCK_DEPTHS = (64, 128, 256, 512, 512)  # A 224x224 input leaves pool5 7x7x512.


def _vgg(name, convs_per_block, description):
    """The builder of the VGG net `name` (its default scope) whose blocks 'conv1' ...
    'conv5' have `convs_per_block` convolutions."""
    trunk = []
    for block, (depth, convs) in enumerate(zip(BLOCK_DEPTHS, convs_per_block), start=1):
        trunk += [Layer(f'conv{block}', depth, 3, repeat=convs), Layer(f'pool{block}', None, 2)]

    def builder(inputs, num_classes=1000, is_training=True, dropout_keep_prob=0.5,
                spatial_squeeze=True, reuse=None, scope=name, fc_conv_padding='VALID',
                global_pool=False):
        return fully_convolutional_net(
            inputs, trunk, Layer('fc6', FC_DEPTH, 7, padding=fc_conv_padding),
            num_classes=num_classes, is_training=is_training,
            dropout_keep_prob=dropout_keep_prob, spatial_squeeze=spatial_squeeze, scope=scope,
            default_scope=name, global_pool=global_pool, reuse=reuse)

    builder.__name__ = builder.__qualname__ = name
    builder.__doc__ = f"""Builds {description} on `inputs`, float32 [batch, height, width,
    channels]; 224x224 gives 1x1 logits.

    num_classes: width of the logits layer 'fc8'; 0 or None omits it (and dropout7) and
      returns fc7's output [batch, h, w, 4096] (1x1 at 224, or with global_pool).
    is_training: whether dropout (before fc7 and fc8) acts; it keeps each activation with
      probability `dropout_keep_prob`.
    spatial_squeeze: return the logits as [batch, num_classes] rather than
      [batch, 1, 1, num_classes] (named '{name}/fc8/squeezed'); the map must be 1x1.
    reuse: whether to reuse the variables of an earlier call in `scope` (None: inherit).
    fc_conv_padding: padding of fc6, a 7x7 convolution: 'VALID' makes the logits map
      (side / 32 - 6) square, 'SAME' (side / 32) square, for fully convolutional use.
    global_pool: average fc7's output over its height and width before the logits, so that
      any input size gives 1x1 logits.
    Returns (net, end_points) as `fully_convolutional.fully_convolutional_net` does;
    end_points keys are full scope names ('{name}/conv1/conv1_1', '{name}/pool1', ...,
    '{name}/fc6', '{name}/fc7', '{name}/fc8'), plus 'global_pool'.
    """
    builder.default_image_size = 224
    return builder


vgg_a = _vgg('vgg_a', (1, 1, 2, 2, 2), 'VGG-11 (configuration A)')
vgg_16 = vgg_d = _vgg('vgg_16', (2, 2, 3, 3, 3), 'VGG-16 (configuration D)')
vgg_19 = vgg_e = _vgg('vgg_19', (2, 2, 4, 4, 4), 'VGG-19 (configuration E)')


def vgg_arg_scope(weight_decay=0.0005):
    """Returns the arg_scope the VGG nets are built in: relu, zero biases and an L2 penalty
    of `weight_decay` on the conv/fc weights (0: none); convolutions padded 'SAME' where
    the net does not say."""
    return fully_convolutional_arg_scope(weight_decay, tf.zeros_initializer())
