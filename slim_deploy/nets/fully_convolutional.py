"""The family of AlexNet v2, OverFeat and VGG: a trunk of convolutions and max poolings
(a table of `Layer`s), then the fully connected layers fc6, fc7 and fc8 (the logits) as
convolutions, so that the nets also run fully convolutionally on larger inputs.
"""
import collections

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

# A convolution of `depth` (None: a max pooling) with a square kernel of side `kernel`, in
# variable scope `scope`. stride and padding None: the arg_scope's (or slim's default).
# repeat n: n such convolutions, slim.repeat's 'scope/scope_1' ... 'scope/scope_<n>'.
Layer = collections.namedtuple('Layer', ['scope', 'depth', 'kernel', 'stride', 'padding',
                                         'repeat'], defaults=[None, None, None])

FC_DEPTH = 4096  # Of fc7, and of fc6 but in OverFeat.


def trunc_normal(stddev):
    """A truncated normal initializer of mean 0 and standard deviation `stddev`."""
    return tf.truncated_normal_initializer(0.0, stddev)


def apply_layer(net, layer):
    """Applies the Layer spec `layer` to `net` [batch, height, width, depth]."""
    options = {name: value for name, value in (('stride', layer.stride),
                                               ('padding', layer.padding))
               if value is not None}
    kernel = [layer.kernel, layer.kernel]
    if layer.depth is None:
        return slim.max_pool2d(net, kernel, scope=layer.scope, **options)
    if layer.repeat is None:
        return slim.conv2d(net, layer.depth, kernel, scope=layer.scope, **options)
    return slim.repeat(net, layer.repeat, slim.conv2d, layer.depth, kernel, scope=layer.scope,
                       **options)


def fully_convolutional_net(inputs, trunk, fc6, *, num_classes, is_training, dropout_keep_prob,
                            spatial_squeeze, scope, default_scope, global_pool, reuse=None,
                            fc_initializers=None):
    """Builds the Layers `trunk` on `inputs` [batch, height, width, channels], then the Layer
    `fc6`, dropout 'dropout6', 'fc7' (1x1, depth 4096), optionally 'global_pool', and the
    logits: dropout 'dropout7' and 'fc8' (1x1, linear); all in variable scope `scope` (None:
    `default_scope`, made unique), reused as `reuse` says (None: inherited).

    num_classes: depth of fc8; 0 or None omits dropout7 and fc8 and returns their input.
    is_training: whether dropout acts; it keeps each activation with probability
      `dropout_keep_prob`.
    spatial_squeeze: squeeze the logits' height and width (op 'fc8/squeezed'); they must be 1.
    global_pool: average fc7's output over height and width, to [batch, 1, 1, 4096], whatever
      the input size.
    fc_initializers: initializer arguments of fc6 and fc7 ({'weights_initializer': ...,
      'biases_initializer': ...}); fc8 takes their weights initializer and zero biases.
      None: the arg_scope's for all three.
    Returns (net, end_points): net is the logits [batch, num_classes] when squeezed (else
    [batch, h, w, num_classes]) or the features [batch, h, w, 4096]; end_points maps each
    convolution's and pooling's full variable scope name ('alexnet_v2/conv1') to its output,
    '<scope>/fc8' to the logits and 'global_pool' to the pooled features.
    """
    with tf.variable_scope(scope, default_scope, [inputs], reuse=reuse) as net_scope:
        collection = net_scope.original_name_scope + '_end_points'
        with slim.arg_scope([slim.conv2d, slim.fully_connected, slim.max_pool2d],
                            outputs_collections=collection):
            net = inputs
            for layer in trunk:
                net = apply_layer(net, layer)
            with slim.arg_scope([slim.conv2d], **(fc_initializers or {})):
                net = apply_layer(net, fc6)
                net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                                   scope='dropout6')
                net = slim.conv2d(net, FC_DEPTH, [1, 1], scope='fc7')
                end_points = slim.utils.convert_collection_to_dict(collection)
                if global_pool:
                    net = end_points['global_pool'] = tf.reduce_mean(
                        net, [1, 2], keepdims=True, name='global_pool')
                if num_classes:
                    net = slim.dropout(net, dropout_keep_prob, is_training=is_training,
                                       scope='dropout7')
                    logits_biases = ({'biases_initializer': tf.zeros_initializer()}
                                     if fc_initializers else {})
                    net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                                      normalizer_fn=None, scope='fc8', **logits_biases)
                    if spatial_squeeze:
                        net = tf.squeeze(net, [1, 2], name='fc8/squeezed')
                    end_points[net_scope.name + '/fc8'] = net
    return net, end_points


def alexnet_fc_initializers():
    """AlexNet's and OverFeat's initializers of fc6 and fc7: weights truncated normal of
    stddev 0.005, biases 0.1."""
    return {'weights_initializer': trunc_normal(0.005),
            'biases_initializer': tf.constant_initializer(0.1)}


def fully_convolutional_arg_scope(weight_decay, biases_initializer, pool_padding=None):
    """The arg_scope of this family: convolutions and fully connected layers with relu,
    biases from `biases_initializer` and an L2 penalty of `weight_decay` on the weights (0:
    none); convolutions padded 'SAME'; max poolings padded `pool_padding` (None: not set)."""
    with slim.arg_scope([slim.conv2d, slim.fully_connected], activation_fn=tf.nn.relu,
                        biases_initializer=biases_initializer,
                        weights_regularizer=slim.l2_regularizer(weight_decay)), \
            slim.arg_scope([slim.conv2d], padding='SAME') as scope:
        if pool_padding is None:
            return scope
        with slim.arg_scope([slim.max_pool2d], padding=pool_padding) as scope:
            return scope
