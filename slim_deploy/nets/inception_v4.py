"""TF-Slim's Inception v4 (Szegedy et al. 2016, arXiv:1602.07261), for 299x299 images.

The variable names and shapes match TF-Slim's ImageNet checkpoint (1001 classes), e.g.
'InceptionV4/Mixed_6a/Branch_0/Conv2d_1a_3x3/weights' [3, 3, 384, 384], so it restores.
Each block is a table of branches (lists of layer specs), concatenated along the depth;
the tables, `mixed` and the two classifier heads also serve Inception-ResNet v2.
"""
import collections

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim

VALID = 'VALID'

# One convolution (depth > 0) or pooling (depth None) of a branch. Its kernel is the name's
# suffix ('Conv2d_0b_1x7' is 1x7); a pooling is a max or average one as the name begins.
Layer = collections.namedtuple('Layer', ['name', 'depth', 'stride', 'padding'],
                               defaults=[1, 'SAME'])


def pool(name, stride=1, padding='SAME'):
    """A pooling Layer spec."""
    return Layer(name, None, stride, padding)


def apply_layer(net, layer):
    """Applies the Layer spec `layer` to `net` [batch, height, width, depth]."""
    kernel = [int(side) for side in layer.name.rsplit('_', 1)[1].split('x')]
    if layer.depth is None:
        pool_fn = slim.max_pool2d if layer.name.startswith('MaxPool') else slim.avg_pool2d
        return pool_fn(net, kernel, layer.stride, padding=layer.padding, scope=layer.name)
    return slim.conv2d(net, layer.depth, kernel, layer.stride, padding=layer.padding,
                       scope=layer.name)


def concat_branches(net, branches):
    """Runs each branch on `net` in variable scope 'Branch_<index>' and concatenates
    their outputs along the depth. A branch is a list of Layers applied in turn; a list of
    Layers inside it forks: each runs on the branch's current output, concatenated."""
    outputs = []
    for index, branch in enumerate(branches):
        with tf.variable_scope(f'Branch_{index}'):
            out = net
            for step in branch:
                if isinstance(step, Layer):
                    out = apply_layer(out, step)
                else:
                    out = tf.concat([apply_layer(out, layer) for layer in step], 3)
            outputs.append(out)
    return tf.concat(outputs, 3)


def mixed(net, branches, scope):
    """concat_branches in variable scope `scope` ('Mixed_6a')."""
    with tf.variable_scope(scope):
        return concat_branches(net, branches)


def aux_logits_head(net, num_classes, conv_scope, logits_scope):
    """The auxiliary classifier, in scope 'AuxLogits', on `net` (17x17 for 299 inputs).

    Average pools 5x5 with stride 3, then convolves: 1x1 to 128 ('Conv2d_1b_1x1') and, to
    768, with a kernel the size of the pooled map (5x5 for 299 inputs; `conv_scope`), then
    a fully connected layer `logits_scope`. Returns logits [batch, num_classes].
    """
    with tf.variable_scope('AuxLogits'):
        net = slim.avg_pool2d(net, [5, 5], 3, padding=VALID, scope='AvgPool_1a_5x5')
        net = slim.conv2d(net, 128, [1, 1], scope='Conv2d_1b_1x1')
        net = slim.conv2d(net, 768, net.shape[1:3].as_list(), padding=VALID, scope=conv_scope)
        return slim.fully_connected(slim.flatten(net), num_classes, activation_fn=None,
                                    scope=logits_scope)


def logits_head(net, num_classes, dropout_keep_prob, end_points):
    """The classifier, in scope 'Logits': global average pooling, dropout, fully
    connected 'Logits'. Returns (logits [batch, num_classes], end_points) with
    'global_pool', 'PreLogitsFlatten', 'Logits' and 'Predictions' added; with num_classes
    None, returns the pooled features [batch, 1, 1, depth] after 'global_pool' instead."""
    with tf.variable_scope('Logits'):
        net = tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')
        end_points['global_pool'] = net
        if not num_classes:
            return net, end_points
        net = slim.dropout(slim.flatten(net), dropout_keep_prob, scope='Dropout')
        end_points['PreLogitsFlatten'] = net
        logits = slim.fully_connected(net, num_classes, activation_fn=None, scope='Logits')
    end_points['Logits'] = logits
    end_points['Predictions'] = tf.nn.softmax(logits, name='Predictions')
    return logits, end_points


STEM = [Layer('Conv2d_1a_3x3', 32, 2, VALID), Layer('Conv2d_2a_3x3', 32, 1, VALID),
        Layer('Conv2d_2b_3x3', 64)]
MIXED_3A = ([pool('MaxPool_0a_3x3', 2, VALID)], [Layer('Conv2d_0a_3x3', 96, 2, VALID)])
MIXED_4A = (
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_1a_3x3', 96, 1, VALID)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_1x7', 64), Layer('Conv2d_0c_7x1', 64),
     Layer('Conv2d_1a_3x3', 96, 1, VALID)])
MIXED_5A = ([Layer('Conv2d_1a_3x3', 192, 2, VALID)], [pool('MaxPool_1a_3x3', 2, VALID)])
INCEPTION_A = (  # 35x35x384 -> 35x35x384
    [Layer('Conv2d_0a_1x1', 96)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96)],
    [Layer('Conv2d_0a_1x1', 64), Layer('Conv2d_0b_3x3', 96), Layer('Conv2d_0c_3x3', 96)],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 96)])
REDUCTION_A = (  # 35x35x384 -> 17x17x1024
    [Layer('Conv2d_1a_3x3', 384, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_3x3', 224),
     Layer('Conv2d_1a_3x3', 256, 2, VALID)],
    [pool('MaxPool_1a_3x3', 2, VALID)])
INCEPTION_B = (  # 17x17x1024 -> 17x17x1024
    [Layer('Conv2d_0a_1x1', 384)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_1x7', 224), Layer('Conv2d_0c_7x1', 256)],
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_0b_7x1', 192), Layer('Conv2d_0c_1x7', 224),
     Layer('Conv2d_0d_7x1', 224), Layer('Conv2d_0e_1x7', 256)],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 128)])
REDUCTION_B = (  # 17x17x1024 -> 8x8x1536
    [Layer('Conv2d_0a_1x1', 192), Layer('Conv2d_1a_3x3', 192, 2, VALID)],
    [Layer('Conv2d_0a_1x1', 256), Layer('Conv2d_0b_1x7', 256), Layer('Conv2d_0c_7x1', 320),
     Layer('Conv2d_1a_3x3', 320, 2, VALID)],
    [pool('MaxPool_1a_3x3', 2, VALID)])
INCEPTION_C = (  # 8x8x1536 -> 8x8x1536
    [Layer('Conv2d_0a_1x1', 256)],
    [Layer('Conv2d_0a_1x1', 384), [Layer('Conv2d_0b_1x3', 256), Layer('Conv2d_0c_3x1', 256)]],
    [Layer('Conv2d_0a_1x1', 384), Layer('Conv2d_0b_3x1', 448), Layer('Conv2d_0c_1x3', 512),
     [Layer('Conv2d_0d_1x3', 256), Layer('Conv2d_0e_3x1', 256)]],
    [pool('AvgPool_0a_3x3'), Layer('Conv2d_0b_1x1', 256)])
# (scope, branches) after the stem: a 299x299 input is 147x147x64 before and 8x8x1536 after.
BLOCKS = ([('Mixed_3a', MIXED_3A), ('Mixed_4a', MIXED_4A), ('Mixed_5a', MIXED_5A)]
          + [(f'Mixed_5{letter}', INCEPTION_A) for letter in 'bcde']
          + [('Mixed_6a', REDUCTION_A)]
          + [(f'Mixed_6{letter}', INCEPTION_B) for letter in 'bcdefgh']
          + [('Mixed_7a', REDUCTION_B)]
          + [(f'Mixed_7{letter}', INCEPTION_C) for letter in 'bcd'])


def inception_v4(images, num_classes=1001, is_training=False, dropout_keep_prob=0.8,
                 create_aux_logits=True, scope='InceptionV4'):
    """Builds Inception v4 on `images`, float32 [batch, 299, 299, 3] (any size from
    75x75 up; from 107x107 up with the auxiliary head, whose kernel grows with the size).

    num_classes: width of the logits layers (1001 in TF-Slim's checkpoint: 0 is
      background); 0 or None builds neither and returns the pooled features
      [batch, 1, 1, 1536].
    dropout_keep_prob: probability of keeping a feature before the logits layer; dropout
      acts only when `is_training`, which also puts batch normalization in training mode.
    create_aux_logits: whether to build the auxiliary classifier on Mixed_6h.
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points maps the stem layers and blocks ('Conv2d_1a_3x3', ..., 'Mixed_7d'),
    'AuxLogits', 'global_pool', 'PreLogitsFlatten', 'Logits' and 'Predictions'.
    """
    end_points = {}
    with tf.variable_scope(scope, 'InceptionV4', [images]), \
            slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training):
        net = images
        for layer in STEM:
            net = end_points[layer.name] = apply_layer(net, layer)
        for block_scope, branches in BLOCKS:
            net = end_points[block_scope] = mixed(net, branches, block_scope)
        if create_aux_logits and num_classes:
            end_points['AuxLogits'] = aux_logits_head(end_points['Mixed_6h'], num_classes,
                                                      'Conv2d_2a', 'Aux_logits')
        return logits_head(net, num_classes, dropout_keep_prob, end_points)


def inception_v4_arg_scope(weight_decay=0.00004):
    """Returns the arg_scope Inception v4 is built in (TF-Slim's for its Inception nets):
    an L2 penalty of `weight_decay` (0: none) on convolution and fully connected weights;
    convolutions with He-style variance-scaling weights, batch normalization (decay
    0.9997, epsilon 0.001, offset only) instead of biases, then relu."""
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        weights_regularizer=slim.l2_regularizer(weight_decay)):
        with slim.arg_scope(
                [slim.conv2d],
                weights_initializer=slim.variance_scaling_initializer(),
                activation_fn=tf.nn.relu,
                normalizer_fn=slim.batch_norm,
                normalizer_params={'decay': 0.9997, 'epsilon': 0.001, 'fused': None}) as scope:
            return scope
