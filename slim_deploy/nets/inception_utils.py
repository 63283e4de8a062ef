"""What TF-Slim's Inception nets share: their arg_scope, and the tables they are built from.

    with slim.arg_scope(inception_utils.inception_arg_scope()):
        logits, end_points = inception_v3.inception_v3(images, 1001, is_training=False)

A net is a sequence of stages, each an end point: single layers, and mixed blocks whose
parallel branches ('Branch_0', ...) are concatenated along the depth. Layers are `Layer`
records and a block is a tuple of branches, so a net's module holds its architecture as
tables and builds it with `build_stages`, up to any end point.
"""
import collections

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

VALID = 'VALID'

# One layer: a convolution to `depth` channels, or a pooling when depth is None (max or
# average as the name begins). The kernel is [height, width], by default the name's suffix
# ('Conv2d_0b_1x7' is 1x7); stddev, when set, draws the convolution's initial weights from
# a truncated normal distribution instead of the arg_scope's initializer.
Layer = collections.namedtuple('Layer', ['name', 'depth', 'stride', 'padding', 'kernel',
                                         'stddev'], defaults=[1, 'SAME', None, None])


def pool(name, stride=1, padding='SAME', kernel=None):
    """A pooling Layer."""
    return Layer(name, None, stride, padding, kernel)


def trunc_normal(stddev):
    """The initializer of weights drawn from a normal distribution of mean 0 and standard
    deviation `stddev`, truncated at 2 standard deviations."""
    return tf.truncated_normal_initializer(0.0, stddev)


def batch_norm_params(decay, epsilon, updates_collections, scale):
    """The Inception nets' normalizer_params for slim.batch_norm: moving averages decaying
    by `decay`, their update ops in `updates_collections` (None: run in place), a learned
    scale 'gamma' only if `scale`, the fused kernel where it applies."""
    return {'decay': decay, 'epsilon': epsilon, 'updates_collections': updates_collections,
            'fused': None, 'scale': scale}


def inception_arg_scope(weight_decay=0.00004, use_batch_norm=True, batch_norm_decay=0.9997,
                        batch_norm_epsilon=0.001, activation_fn=tf.nn.relu,
                        batch_norm_updates_collections=tf.GraphKeys.UPDATE_OPS,
                        batch_norm_scale=False):
    """Returns the arg_scope of Inception v1 to v4: an L2 penalty of `weight_decay` (0:
    none) on the weights of convolutions and fully connected layers; convolutions with
    He-style variance-scaling initial weights and `activation_fn`, after batch
    normalization (unless not `use_batch_norm`) with batch_norm_params(batch_norm_decay,
    batch_norm_epsilon, batch_norm_updates_collections, batch_norm_scale)."""
    with slim.arg_scope([slim.conv2d, slim.fully_connected],
                        weights_regularizer=slim.l2_regularizer(weight_decay)):
        with slim.arg_scope(
                [slim.conv2d],
                weights_initializer=slim.variance_scaling_initializer(),
                activation_fn=activation_fn,
                normalizer_fn=slim.batch_norm if use_batch_norm else None,
                normalizer_params=batch_norm_params(
                    batch_norm_decay, batch_norm_epsilon, batch_norm_updates_collections,
                    batch_norm_scale) if use_batch_norm else {}) as scope:
            return scope


def depth_function(depth_multiplier, min_depth):
    """Returns depth(d) = max(int(d * depth_multiplier), min_depth), a layer's thinned depth.
    Raises ValueError if depth_multiplier is not positive."""
    if depth_multiplier <= 0:
        raise ValueError(f'depth_multiplier must be positive, got {depth_multiplier!r}')
    return lambda depth: max(int(depth * depth_multiplier), min_depth)


def apply_layer(net, layer, depth=None):
    """Applies the Layer `layer` to `net`, in variable scope layer.name; `depth` (None:
    none) maps the layer's depth to the one built."""
    kernel = layer.kernel or [int(side) for side in layer.name.rsplit('_', 1)[1].split('x')]
    if layer.depth is None:
        pool_fn = slim.max_pool2d if layer.name.startswith('MaxPool') else slim.avg_pool2d
        return pool_fn(net, kernel, layer.stride, padding=layer.padding, scope=layer.name)
    options = {} if layer.stddev is None else {'weights_initializer': trunc_normal(layer.stddev)}
    return slim.conv2d(net, depth(layer.depth) if depth else layer.depth, kernel,
                       layer.stride, padding=layer.padding, scope=layer.name, **options)


def concat_branches(net, branches, depth=None, axis=3):
    """Runs each branch on `net` in variable scope 'Branch_<index>' and concatenates their
    outputs along `axis` (the depth's). A branch is a list of Layers applied in turn; a
    list of Layers inside it forks: each runs on the branch's output so far, concatenated.
    depth: as apply_layer's."""
    outputs = []
    for index, branch in enumerate(branches):
        with tf.variable_scope(f'Branch_{index}'):
            out = net
            for step in branch:
                if isinstance(step, Layer):
                    out = apply_layer(out, step, depth)
                else:
                    out = tf.concat([apply_layer(out, layer, depth) for layer in step], axis)
            outputs.append(out)
    return tf.concat(outputs, axis)


def build_stages(net, stages, final_endpoint, depth=None, axis=3):
    """Builds `stages` on `net` in turn, up to the one named `final_endpoint`.

    stages: Layers, each named as its end point, and pairs (end point, block): a block is
      a tuple of branches, built by concat_branches in variable scope <end point>, or a
      function net -> net.
    depth, axis: as concat_branches's.
    Returns (net, end_points): the final end point's output and {end point: output} of
    the stages built.
    Raises ValueError, building nothing, if no stage is named final_endpoint.
    """
    stages = [(stage.name, stage) if isinstance(stage, Layer) else stage for stage in stages]
    names = [name for name, _ in stages]
    if final_endpoint not in names:
        raise ValueError(f'unknown final_endpoint {final_endpoint!r}; valid: {names}')
    end_points = {}
    for name, stage in stages[:names.index(final_endpoint) + 1]:
        if isinstance(stage, Layer):
            net = apply_layer(net, stage, depth)
        elif callable(stage):
            net = stage(net)
        else:
            with tf.variable_scope(name):
                net = concat_branches(net, stage, depth, axis)
        end_points[name] = net
    return net, end_points


def reduced_kernel_size(net, kernel):
    """`kernel` [height, width], each side shrunk to net's [batch, height, width, depth]
    where that is known and smaller: the pooling of a small input covers all of it."""
    height, width = net.shape.as_list()[1:3]
    if height is None or width is None:
        return kernel
    return [min(height, kernel[0]), min(width, kernel[1])]


def stem_299(padding=VALID):
    """The stem of Inception v3 and Inception-ResNet v2, 299x299x3 -> 35x35x192: the
    layers Conv2d_1a_3x3 to MaxPool_5a_3x3, padding with `padding` all but Conv2d_2b_3x3."""
    return [Layer('Conv2d_1a_3x3', 32, 2, padding), Layer('Conv2d_2a_3x3', 32, 1, padding),
            Layer('Conv2d_2b_3x3', 64), pool('MaxPool_3a_3x3', 2, padding),
            Layer('Conv2d_3b_1x1', 80, 1, padding), Layer('Conv2d_4a_3x3', 192, 1, padding),
            pool('MaxPool_5a_3x3', 2, padding)]


def conv_logits(net, num_classes, end_points, dropout_keep_prob, spatial_squeeze,
                prediction_fn, global_pool, pool_kernel, global_pool_name='global_pool'):
    """Inception v2's and v3's classifier on their last block `net` [batch, h, w, depth].

    In variable scope 'Logits': average pooling, global (op `global_pool_name`, end point
    'global_pool') or over `pool_kernel` shrunk to small inputs ('AvgPool_1a_<kh>x<kw>',
    end point 'AvgPool_1a'), which leaves 1x1 from the default image size; dropout
    'Dropout_1b' (end point 'PreLogits'); a 1x1 convolution 'Conv2d_1c_1x1' to num_classes,
    squeezed to [batch, num_classes] if `spatial_squeeze` ('Logits'). Then
    prediction_fn(logits, scope='Predictions') ('Predictions').
    Returns (logits, end_points), or with num_classes 0 or None (pooled features,
    end_points).
    """
    with tf.variable_scope('Logits'):
        if global_pool:
            net = end_points['global_pool'] = tf.reduce_mean(net, [1, 2], keepdims=True,
                                                             name=global_pool_name)
        else:
            kernel = reduced_kernel_size(net, pool_kernel)
            net = end_points['AvgPool_1a'] = slim.avg_pool2d(
                net, kernel, padding=VALID, scope='AvgPool_1a_{}x{}'.format(*kernel))
        if not num_classes:
            return net, end_points
        net = end_points['PreLogits'] = slim.dropout(net, dropout_keep_prob,
                                                     scope='Dropout_1b')
        logits = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                             normalizer_fn=None, scope='Conv2d_1c_1x1')
        if spatial_squeeze:
            logits = tf.squeeze(logits, [1, 2], name='SpatialSqueeze')
    end_points['Logits'] = logits
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
    return logits, end_points


def pool_all(net, scope):
    """Averages `net` [batch, h, w, depth] over its whole map, to [batch, 1, 1, depth]: by
    an average pooling `scope` when h and w are known, else by the op 'global_pool'."""
    kernel = net.shape[1:3]
    if kernel.is_fully_defined():
        return slim.avg_pool2d(net, kernel, padding=VALID, scope=scope)
    return tf.reduce_mean(net, [1, 2], keepdims=True, name='global_pool')


def fc_aux_logits(net, num_classes, pool_scope, conv_scope, logits_scope):
    """Inception v4's and Inception-ResNet v2's auxiliary classifier, in variable scope
    'AuxLogits', on `net` (17x17 from 299x299 inputs; at least 5x5): average pooling 5x5
    with stride 3 (`pool_scope`); convolutions 1x1 to 128 ('Conv2d_1b_1x1') and, to 768,
    with a kernel the size of the pooled map (5x5 from 299x299; `conv_scope`); a fully
    connected layer `logits_scope`. Returns the logits [batch, num_classes]."""
    with tf.variable_scope('AuxLogits'):
        net = slim.avg_pool2d(net, [5, 5], 3, padding=VALID, scope=pool_scope)
        net = slim.conv2d(net, 128, [1, 1], scope='Conv2d_1b_1x1')
        net = slim.conv2d(net, 768, net.shape[1:3], padding=VALID, scope=conv_scope)
        return slim.fully_connected(slim.flatten(net), num_classes, activation_fn=None,
                                    scope=logits_scope)
