"""What NASNet-A and PNASNet-5 share: cells described by tables, drop path, the network body.

A cell has two inputs: h0, its own input after a ReLU-1x1 convolution-batch norm, and h1,
the input of the cell before it, brought to h0's size and depth. It then builds five
combinations, each the sum of two operations on earlier states (h0, h1 or an earlier
combination), and concatenates the states its table lists along the channels. A stride of
2 applies to the operations that read h0 or h1, so the cell halves the spatial size.

Only NHWC is supported. Variable names match TF-Slim's checkpoints, for example
'cell_0/comb_iter_0/left/separable_5x5_1/depthwise_weights' or 'final_layer/FC/weights';
there is no enclosing model scope.
"""
import dataclasses
from typing import Optional, Tuple

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim

_POOLS = {'avg_pool': slim.avg_pool2d, 'max_pool': slim.max_pool2d}


@dataclasses.dataclass(frozen=True)
class CellSpec:
    """A cell's wiring.

    combinations: five ((left_op, left_input), (right_op, right_input)) pairs. Inputs index
      the states: 0 is h0, 1 is h1, 2 + i is combination i. Ops are 'separable_KxK' (two
      stacked ReLU-separable convolution-batch norms), 'avg_pool_KxK', 'max_pool_KxK' or
      'none' (identity, or a 1x1 projection where the stride or depth must change).
    concat: indices of the states concatenated into the output, in order.
    """
    combinations: Tuple[Tuple[Tuple[str, int], Tuple[str, int]], ...]
    concat: Tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """Hyperparameters of one network; the defaults are shared by all of TF-Slim's.

    normal_cell: the cell repeated num_cells times.
    reduction_cell: NASNet's extra stride-2 cell inserted before the normal cells at each
      reduction point (also used for the ImageNet stem); None (PNASNet) makes the normal
      cell at a reduction point run with stride 2 instead.
    num_cells: normal cells, excluding stem and reduction cells.
    num_conv_filters: depth of every operation in the first stage; each reduction
      multiplies it by filter_scaling_rate.
    stem_multiplier: scales the stem convolution's depth (32 for ImageNet,
      num_conv_filters for CIFAR).
    imagenet_stem: a stride-2 3x3 convolution and two stride-2 stem cells (input side
      divided by 8); otherwise CIFAR's single stride-1 3x3 convolution.
    skip_reduction_layer_input: whether the normal cell after a NASNet reduction cell takes
      as h1 the reduction cell's h1 rather than its input.
    drop_path_keep_prob: final keep probability of the last cell's operations in training
      (1 disables drop path); see `drop_path_schedule`.
    total_training_steps: steps over which drop path ramps up from nothing.
    dense_dropout_keep_prob: dropout keep probability before the logits, in training.
    use_aux_head: build the auxiliary classifier (in training, with logits only).
    """
    normal_cell: CellSpec
    reduction_cell: Optional[CellSpec]
    num_cells: int
    num_conv_filters: int
    stem_multiplier: float
    imagenet_stem: bool
    skip_reduction_layer_input: bool
    drop_path_keep_prob: float
    total_training_steps: int
    dense_dropout_keep_prob: float
    use_aux_head: bool = True
    filter_scaling_rate: float = 2.0
    num_reduction_layers: int = 2


def nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon):
    """Returns the arg_scope both families are built in: an L2 penalty of `weight_decay`
    (0: none) and fan-out variance scaling initialization on every weight, and batch norm
    with the given moving-average decay and epsilon."""
    with slim.arg_scope(
            [slim.conv2d, slim.separable_conv2d, slim.fully_connected],
            weights_regularizer=slim.l2_regularizer(weight_decay),
            weights_initializer=slim.variance_scaling_initializer(mode='FAN_OUT')):
        with slim.arg_scope([slim.batch_norm], decay=batch_norm_decay,
                            epsilon=batch_norm_epsilon, fused=True) as scope:
            return scope


def drop_path(net, keep_prob):
    """Zeroes each example of `net` [batch, ...] as a whole with probability 1 - keep_prob
    and scales the kept ones by 1 / keep_prob (a float or scalar tensor)."""
    kept = tf.floor(keep_prob + tf.random.uniform([tf.shape(net)[0], 1, 1, 1]))
    return net / keep_prob * kept


def _conv_1x1_bn(net, filters, conv_scope, bn_scope, stride=1):
    return slim.batch_norm(slim.conv2d(net, filters, 1, stride=stride, scope=conv_scope),
                           scope=bn_scope)


def factorized_reduction(net, filters, stride):
    """Projects `net` to `filters` channels, and for stride 2 halves its side (rounding up)
    without discarding pixels: half the filters see the even pixels, the rest the odd ones."""
    if stride == 1:
        return _conv_1x1_bn(net, filters, 'path_conv', 'path_bn')
    shifted = tf.pad(net[:, 1:, 1:, :], [[0, 0], [0, 1], [0, 1], [0, 0]])
    paths = [slim.conv2d(net[:, ::stride, ::stride, :], filters // 2, 1, scope='path1_conv'),
             slim.conv2d(shifted[:, ::stride, ::stride, :], filters - filters // 2, 1,
                         scope='path2_conv')]
    return slim.batch_norm(tf.concat(paths, 3), scope='final_path_bn')


def _operation(net, op, filters, stride, keep_prob):
    """Applies one table operation (see CellSpec), then drop path unless op is 'none' or
    keep_prob is None."""
    if op == 'none':
        if stride > 1 or net.shape[-1] != filters:
            net = _conv_1x1_bn(tf.nn.relu(net), filters, '1x1', 'bn_1', stride)
        return net
    kind, size = op.rsplit('_', 1)
    kernel = int(size.split('x')[0])
    if kind == 'separable':
        for layer in (1, 2):
            net = slim.separable_conv2d(tf.nn.relu(net), filters, kernel, depth_multiplier=1,
                                        stride=stride if layer == 1 else 1,
                                        scope=f'separable_{size}_{layer}')
            net = slim.batch_norm(net, scope=f'bn_sep_{size}_{layer}')
    else:
        net = _POOLS[kind](net, kernel, stride=stride, padding='SAME')
        if net.shape[-1] != filters:
            net = _conv_1x1_bn(net, filters, '1x1', 'bn_1')
    return net if keep_prob is None else drop_path(net, keep_prob)


def _match_previous(prev, net, filters):
    """Brings h1 to net's side (factorized reduction) and to `filters` channels; the first
    cell after the stem has no previous cell and uses net itself."""
    if prev is None:
        return net
    if prev.shape[2] != net.shape[2]:
        return factorized_reduction(tf.nn.relu(prev), filters, 2)
    if prev.shape[-1] != filters:
        return _conv_1x1_bn(tf.nn.relu(prev), filters, 'prev_1x1', 'prev_bn')
    return prev


def _concat(states, indices):
    """Concatenates states[indices], reducing any whose size or depth differs from the
    last state's."""
    last = states[-1]
    outputs = []
    for index in indices:
        state = states[index]
        if state.shape[1:] != last.shape[1:]:
            with tf.variable_scope(f'reduction_{index}'):
                stride = 1 if state.shape[2] == last.shape[2] else 2
                state = factorized_reduction(state, last.shape[-1], stride)
        outputs.append(state)
    return tf.concat(outputs, 3)


def cell(net, prev, spec, filters, stride, keep_prob, scope):
    """Builds one cell in variable scope `scope`.

    net: the cell's input [batch, side, side, depth]; prev: the previous cell's input (or
    None). filters: depth of each operation; the output has len(spec.concat) * filters
    channels. keep_prob: drop path keep probability, None for no drop path.
    """
    with tf.variable_scope(scope):
        prev = _match_previous(prev, net, filters)
        states = [_conv_1x1_bn(tf.nn.relu(net), filters, '1x1', 'beginning_bn'), prev]
        for i, combination in enumerate(spec.combinations):
            with tf.variable_scope(f'comb_iter_{i}'):
                branches = []
                for side, (op, index) in zip(('left', 'right'), combination):
                    with tf.variable_scope(side):
                        branches.append(_operation(states[index], op, filters,
                                                   stride if index < 2 else 1, keep_prob))
                states.append(branches[0] + branches[1])
        with tf.variable_scope('cell_output'):
            return _concat(states, spec.concat)


def _aux_head(net, num_classes, scope):
    """TF-Slim's auxiliary classifier on a cell's output: returns logits [batch, classes]."""
    with tf.variable_scope(scope), tf.variable_scope('aux_logits'):
        net = slim.avg_pool2d(tf.nn.relu(net), 5, stride=3, padding='VALID')
        net = tf.nn.relu(slim.batch_norm(slim.conv2d(net, 128, 1, scope='proj'),
                                         scope='aux_bn0'))
        net = slim.conv2d(net, 768, net.shape[1:3].as_list(), padding='VALID', scope='Conv')
        net = tf.nn.relu(slim.batch_norm(net, scope='aux_bn1'))
        return slim.fully_connected(slim.flatten(net), num_classes, scope='FC')


def drop_path_schedule(config, current_step, total_cells):
    """Returns keep_prob(cell_index) -> scalar tensor, TF-Slim's drop path schedule:
    1 - min(1, current_step / total_training_steps) * (cell_index + 1) / total_cells * (1 - p),
    p being config.drop_path_keep_prob; so nothing is dropped at step 0, and from
    total_training_steps on the last cell keeps p. current_step: scalar tensor, or None for
    the global step (created if missing)."""
    if current_step is None:
        current_step = tf.train.get_or_create_global_step()
    step_ratio = tf.minimum(
        1.0, tf.cast(current_step, tf.float32) / config.total_training_steps)
    drop = 1.0 - config.drop_path_keep_prob

    def keep_prob(cell_index):
        return 1.0 - step_ratio * ((cell_index + 1) / total_cells * drop)
    return keep_prob


def build_network(images, num_classes, is_training, config, current_step=None):
    """Builds the network `config` describes on `images`, float32 [batch, side, side, 3].

    num_classes: width of the logits layer 'final_layer/FC'; 0 or None omits it (and the
      auxiliary head) and returns the pooled features [batch, depth] instead.
    is_training: batch norm in training mode, dropout, drop path and the auxiliary head.
    current_step: scalar tensor driving the drop path schedule in training; None uses the
      global step (created if missing, so create it first: it belongs outside the model).
    Returns (net, end_points): end_points maps 'Stem', 'Cell_i', 'Reduction_Cell_i' (NASNet),
    'AuxLogits' (training with logits), 'global_pool', 'Logits' and 'Predictions'.
    """
    reductions = [int(k / (config.num_reduction_layers + 1) * config.num_cells)
                  for k in range(1, config.num_reduction_layers + 1)]
    num_stem_cells = 2 if config.imagenet_stem else 0
    total_cells = (num_stem_cells + config.num_cells
                   + (len(reductions) if config.reduction_cell else 0))
    schedule = (drop_path_schedule(config, current_step, total_cells)
                if is_training and config.drop_path_keep_prob < 1.0 else None)
    end_points = {}
    with (slim.arg_scope([slim.conv2d, slim.separable_conv2d], activation_fn=None,
                         biases_initializer=None),
          slim.arg_scope([slim.fully_connected], activation_fn=None),
          slim.arg_scope([slim.batch_norm], scale=True),
          slim.arg_scope([slim.batch_norm, slim.dropout], is_training=is_training)):
        if config.imagenet_stem:
            net = slim.conv2d(images, int(32 * config.stem_multiplier), 3, stride=2,
                              padding='VALID', scope='conv0')
            net = slim.batch_norm(net, scope='conv0_bn')
        else:
            net = slim.conv2d(images, int(config.num_conv_filters * config.stem_multiplier),
                              3, scope='l1_stem_3x3')
            net = slim.batch_norm(net, scope='l1_stem_bn')
        # outputs[2:] are the cells built so far, so len(outputs) - 2 is a new cell's index.
        outputs = [None, net]

        def add_cell(spec, net, prev, filters, stride, scope):
            keep_prob = schedule(len(outputs) - 2) if schedule else None
            outputs.append(cell(net, prev, spec, filters, stride, keep_prob, scope))
            return outputs[-1]

        for i in range(num_stem_cells):
            filters = int(config.num_conv_filters
                          * config.filter_scaling_rate ** (i - num_stem_cells))
            net = add_cell(config.reduction_cell or config.normal_cell, net, outputs[-2],
                           filters, 2, f'cell_stem_{i}')
        end_points['Stem'] = net

        filter_scaling = 1.0
        aux_cell = reductions[1] - 1 if len(reductions) > 1 else None
        for cell_num in range(config.num_cells):
            reduce = cell_num in reductions
            filter_scaling *= config.filter_scaling_rate if reduce else 1.0
            filters = int(config.num_conv_filters * filter_scaling)
            stride, prev = 1, outputs[-2]
            if reduce and config.reduction_cell is None:
                stride = 2
            elif reduce:
                index = reductions.index(cell_num)
                net = end_points[f'Reduction_Cell_{index}'] = add_cell(
                    config.reduction_cell, net, prev, filters, 2, f'reduction_cell_{index}')
                if not config.skip_reduction_layer_input:
                    prev = outputs[-2]
            net = end_points[f'Cell_{cell_num}'] = add_cell(
                config.normal_cell, net, prev, filters, stride, f'cell_{cell_num}')
            if config.use_aux_head and num_classes and is_training and cell_num == aux_cell:
                end_points['AuxLogits'] = _aux_head(net, num_classes, f'aux_{cell_num}')

        with tf.variable_scope('final_layer'):
            net = end_points['global_pool'] = tf.reduce_mean(tf.nn.relu(net), [1, 2])
            if not num_classes:
                return net, end_points
            net = slim.dropout(net, config.dense_dropout_keep_prob, scope='dropout')
            logits = end_points['Logits'] = slim.fully_connected(net, num_classes, scope='FC')
            end_points['Predictions'] = tf.nn.softmax(logits, name='predictions')
    return logits, end_points
