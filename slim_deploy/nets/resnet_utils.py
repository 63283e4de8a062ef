"""What TF-Slim's ResNets v1 and v2 share (He et al. 2015, arXiv:1512.03385; 2016,
arXiv:1603.05027): blocks of bottleneck units, their dense (atrous) stacking, the arg_scope,
and the skeleton both versions are built on.

As in TF-Slim, a block subsamples at the output of its last unit, not at the input of its
first; the results are the same, with less memory. Nets are built in TF-Slim's variable
scopes ('<net>/block1/unit_1/bottleneck_v1/conv1/weights'), so its checkpoints restore.
"""
import collections

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

# Units per block of the ImageNet ResNets of each depth; every net has four blocks whose
# bottleneck depths are BASE_DEPTHS (outputs four times as deep) and whose last units
# have BLOCK_STRIDES: with the root's 4, the nominal output stride is 32.
UNITS_PER_BLOCK = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3),
                   200: (3, 24, 36, 3)}
BASE_DEPTHS = (64, 128, 256, 512)
BLOCK_STRIDES = (2, 2, 2, 1)


class Block(collections.namedtuple('Block', ['scope', 'unit_fn', 'args'])):
    """One block of a ResNet: its variable scope ('block1'), its unit function
    `unit_fn(net, rate=..., **arguments) -> net` and `args`, one dict of keyword arguments
    per unit (bottlenecks: depth, depth_bottleneck, stride)."""


def subsample(inputs, factor, scope=None):
    """Keeps every `factor`-th row and column of `inputs` [batch, height, width, channels]
    (a 1x1 max pooling with stride `factor`, named `scope`); factor 1 returns `inputs`."""
    if factor == 1:
        return inputs
    return slim.max_pool2d(inputs, [1, 1], stride=factor, scope=scope)


def conv2d_same(inputs, num_outputs, kernel_size, stride, rate=1, scope=None):
    """A square `kernel_size` convolution of `inputs` [batch, height, width, channels] to
    `num_outputs` channels with 'SAME'-like padding that does not depend on the input size:
    with stride > 1 it pads explicitly (half the dilated kernel's extent, the extra pixel
    at the end) and convolves 'VALID', so the result equals a stride-1 'SAME' convolution
    subsampled by `stride`, even and odd sizes alike. `rate`: atrous dilation rate."""
    if stride == 1:
        return slim.conv2d(inputs, num_outputs, kernel_size, stride=1, rate=rate,
                           padding='SAME', scope=scope)
    padding = (kernel_size - 1) * rate
    before = padding // 2
    inputs = tf.pad(inputs, [[0, 0], [before, padding - before],
                             [before, padding - before], [0, 0]])
    return slim.conv2d(inputs, num_outputs, kernel_size, stride=stride, rate=rate,
                       padding='VALID', scope=scope)


@slim.add_arg_scope
def stack_blocks_dense(net, blocks, output_stride=None, store_non_strided_activations=False,
                       outputs_collections=None):
    """Applies `blocks` (Blocks) to `net` [batch, height, width, channels], unit i of a
    block in variable scope '<block.scope>/unit_<i>', adding each block's output to
    `outputs_collections` under its scope's name.

    output_stride: None keeps every stride; otherwise the ratio of the input's size to the
      output's, which must be a product of the leading unit strides: once it is reached,
      later strides turn into atrous rates (dense features, same variables).
    store_non_strided_activations: run each block's last unit at stride 1 and subsample
      after collecting the block's output, so the collection holds it undecimated.
    Raises ValueError if `output_stride` cannot be reached.
    """
    current_stride, rate = 1, 1

    def stride_and_rate(stride):
        """(stride, atrous rate) of the next layer, meant to subsample by `stride`."""
        nonlocal current_stride, rate
        if output_stride is not None and current_stride == output_stride:
            layer_rate, rate = rate, rate * stride
            return 1, layer_rate
        current_stride *= stride
        return stride, 1

    def check_stride(final=False):
        """Raises ValueError once output_stride is exceeded (or, `final`ly, not reached)."""
        if output_stride is not None and (current_stride > output_stride or
                                          final and current_stride != output_stride):
            raise ValueError('The target output_stride cannot be reached.')

    for block in blocks:
        with tf.variable_scope(block.scope, 'block', [net]) as scope:
            units = list(block.args)
            block_stride = 1
            if store_non_strided_activations and units:
                block_stride = units[-1].get('stride', 1)
                units[-1] = dict(units[-1], stride=1)
            for index, unit in enumerate(units, start=1):
                with tf.variable_scope(f'unit_{index}', values=[net]):
                    stride, unit_rate = stride_and_rate(unit.get('stride', 1))
                    net = block.unit_fn(net, rate=unit_rate, **dict(unit, stride=stride))
                check_stride()
            net = slim.utils.collect_named_outputs(outputs_collections, scope.name, net)
            net = subsample(net, stride_and_rate(block_stride)[0])
            check_stride()
    check_stride(final=True)
    return net


def resnet_arg_scope(weight_decay=0.0001, batch_norm_decay=0.997, batch_norm_epsilon=1e-5,
                     batch_norm_scale=True, activation_fn=tf.nn.relu, use_batch_norm=True,
                     batch_norm_updates_collections=tf.GraphKeys.UPDATE_OPS):
    """Returns the arg_scope the ResNets are built in (its batch-norm defaults suit the
    MSRA reference models): convolutions with an L2 penalty of `weight_decay` (0: none),
    variance-scaling weights, `activation_fn`, and batch normalization (decay
    `batch_norm_decay`, `batch_norm_epsilon`, a gamma when `batch_norm_scale`, moving
    statistics updated by ops in `batch_norm_updates_collections`; None: in place) unless
    not `use_batch_norm`, in which case convolutions have biases; 'SAME' max pooling."""
    batch_norm_params = {
        'decay': batch_norm_decay,
        'epsilon': batch_norm_epsilon,
        'scale': batch_norm_scale,
        'updates_collections': batch_norm_updates_collections,
        'fused': None,
    }
    with slim.arg_scope([slim.conv2d],
                        weights_regularizer=slim.l2_regularizer(weight_decay),
                        weights_initializer=slim.variance_scaling_initializer(),
                        activation_fn=activation_fn,
                        normalizer_fn=slim.batch_norm if use_batch_norm else None,
                        normalizer_params=batch_norm_params), \
            slim.arg_scope([slim.batch_norm], **batch_norm_params), \
            slim.arg_scope([slim.max_pool2d], padding='SAME') as scope:
        return scope


def bottleneck_block(unit_fn, scope, base_depth, num_units, stride):
    """A Block of `num_units` bottleneck units `unit_fn` of depth 4 * `base_depth` with
    bottleneck depth `base_depth`; only the last unit has stride `stride`."""
    unit = {'depth': base_depth * 4, 'depth_bottleneck': base_depth, 'stride': 1}
    return Block(scope, unit_fn, [unit] * (num_units - 1) + [dict(unit, stride=stride)])


def imagenet_blocks(block_fn, layers, base_depth=lambda depth: depth):
    """The four Blocks of the `layers`-deep ImageNet ResNet (a key of UNITS_PER_BLOCK), made
    by `block_fn(scope, base_depth, num_units, stride)`; `base_depth` maps the standard
    bottleneck depths (BASE_DEPTHS) to the ones built."""
    return [block_fn(f'block{index}', base_depth(depth), units, stride)
            for index, (depth, units, stride) in enumerate(
                zip(BASE_DEPTHS, UNITS_PER_BLOCK[layers], BLOCK_STRIDES), start=1)]


def build_resnet(inputs, blocks, unit_fn, default_scope, num_classes, global_pool,
                 output_stride, include_root_block, spatial_squeeze,
                 store_non_strided_activations, reuse, scope, preactivation):
    """The ResNet skeleton of resnet_v1.resnet_v1 and resnet_v2.resnet_v2 (their arguments,
    batch normalization's mode set by the caller's arg_scope; `unit_fn` is the module's
    unit, whose outputs are end points). `preactivation` (v2): the root convolution has
    neither normalization nor activation, and the blocks' output is batch normalized and
    relu'd ('postnorm')."""
    with tf.variable_scope(scope, default_scope, [inputs], reuse=reuse) as net_scope:
        end_points_collection = net_scope.original_name_scope + '_end_points'
        with slim.arg_scope([slim.conv2d, unit_fn, stack_blocks_dense],
                            outputs_collections=end_points_collection):
            net = inputs
            if include_root_block:
                if output_stride is not None:
                    if output_stride % 4 != 0:
                        raise ValueError('The output_stride needs to be a multiple of 4.')
                    output_stride //= 4
                root_conv = {'activation_fn': None, 'normalizer_fn': None} if preactivation else {}
                with slim.arg_scope([slim.conv2d], **root_conv):
                    net = conv2d_same(net, 64, 7, stride=2, scope='conv1')
                net = slim.max_pool2d(net, [3, 3], stride=2, scope='pool1')
            net = stack_blocks_dense(net, blocks, output_stride, store_non_strided_activations)
            if preactivation:
                net = slim.batch_norm(net, activation_fn=tf.nn.relu, scope='postnorm')
            end_points = slim.utils.convert_collection_to_dict(end_points_collection)
            if global_pool:
                net = end_points['global_pool'] = tf.reduce_mean(
                    net, [1, 2], name='pool5', keepdims=True)
            if num_classes:
                net = end_points[net_scope.name + '/logits'] = slim.conv2d(
                    net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None,
                    scope='logits')
                if spatial_squeeze:
                    net = end_points[net_scope.name + '/spatial_squeeze'] = tf.squeeze(
                        net, [1, 2], name='SpatialSqueeze')
                end_points['predictions'] = slim.softmax(net, scope='predictions')
            return net, end_points
