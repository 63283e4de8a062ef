"""What NASNet-A and PNASNet-5 share: the cell and its operations (TF-Slim's nasnet_utils).

A cell has two inputs: h0, its own input after an activation, a 1x1 convolution and batch
norm, and h1, the input of the cell before it brought to h0's size and depth (h0's input
itself for the first cell). Five combinations follow, each the sum of two operations on
earlier hidden states (h0, h1 or an earlier combination); the states no combination
consumes are concatenated along the channels into the cell's output. With stride 2 the
operations that read h0 or h1 halve the spatial size.

The functions taking `data_format` ('NHWC' or 'NCHW') and the slim layers get it from the
arg_scope the builders open (the functions refuse to run without one); cells rely on that
too. Variable names are TF-Slim's, e.g. 'cell_0/comb_iter_0/left/separable_5x5_1/
depthwise_weights', 'cell_0/prev_1x1/weights', 'cell_stem_1/path1_conv/weights'.
"""
import re

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)

arg_scope = slim.arg_scope
DATA_FORMAT_NCHW = 'NCHW'
DATA_FORMAT_NHWC = 'NHWC'
INVALID = 'null'  # data_format's default: none given, neither directly nor by arg_scope.
CLIP_BY_VALUE_CAP = 6  # Bounded activations clip operation outputs to [-6, 6].

# 'separable_5x5_2': 2 stacked separable convolutions (1 without the suffix); 'max_pool_3x3'.
_OPERATION = re.compile(r'(separable|avg_pool|max_pool)_(\d+)x(\d+)(?:_(\d+))?')
_POOLS = {'avg_pool': slim.avg_pool2d, 'max_pool': slim.max_pool2d}


def calc_reduction_layers(num_cells, num_reduction_layers):
    """Indices of the cells where the net reduces, evenly spread: (18, 2) -> [6, 12]."""
    return [int(k / (num_reduction_layers + 1) * num_cells)
            for k in range(1, num_reduction_layers + 1)]


@slim.add_arg_scope
def get_channel_index(data_format=INVALID):
    """The channels' axis in data_format: 3 for 'NHWC', 1 for 'NCHW'."""
    if data_format not in (DATA_FORMAT_NHWC, DATA_FORMAT_NCHW):
        raise ValueError(f'Not a valid data_format: {data_format!r}')
    return 3 if data_format == DATA_FORMAT_NHWC else 1


@slim.add_arg_scope
def get_channel_dim(shape, data_format=INVALID):
    """The number of channels of `shape`, 4-D in data_format."""
    if len(shape) != 4:
        raise ValueError(f'Expected a 4-D shape, got {shape}')
    return int(shape[get_channel_index(data_format=data_format)])


def _spatial_axes(data_format):
    return [1, 2] if get_channel_index(data_format=data_format) == 3 else [2, 3]


@slim.add_arg_scope
def global_avg_pool(x, data_format=INVALID):
    """Averages x, 4-D in data_format, over height and width: [batch, channels]."""
    if x.shape.ndims != 4:
        raise ValueError(f'Expected a 4-D tensor, got shape {x.shape}')
    return tf.reduce_mean(x, _spatial_axes(data_format))


def _conv_bn(net, filters, conv_scope, bn_scope, stride=1):
    """A 1x1 convolution and batch norm."""
    return slim.batch_norm(slim.conv2d(net, filters, 1, stride=stride, scope=conv_scope),
                           scope=bn_scope)


@slim.add_arg_scope
def factorized_reduction(net, output_filters, stride, data_format=INVALID):
    """Projects `net` to output_filters channels (1x1 convolution, batch norm).

    With stride > 1 it also subsamples without losing the odd pixels: int(output_filters / 2)
    filters see every stride-th pixel from the first, the others (one more if odd) the
    same grid shifted by one pixel down and right (zeros past the edge). The side becomes
    ceil(side / stride).
    """
    if stride == 1:
        return _conv_bn(net, output_filters, 'path_conv', 'path_bn')
    axes = _spatial_axes(data_format)

    def every_stride(x, start):
        index = [slice(None)] * 4
        for axis in axes:
            index[axis] = slice(start, None, stride)
        return x[tuple(index)]

    padding = [[0, 1] if axis in axes else [0, 0] for axis in range(4)]
    half = int(output_filters / 2)
    paths = [slim.conv2d(every_stride(net, 0), half, 1, scope='path1_conv'),
             slim.conv2d(every_stride(tf.pad(net, padding), 1), output_filters - half, 1,
                         scope='path2_conv')]
    return slim.batch_norm(tf.concat(paths, get_channel_index(data_format=data_format)),
                           scope='final_path_bn')


@slim.add_arg_scope
def drop_path(net, keep_prob, is_training=True):
    """In training, zeroes each example of `net` as a whole with probability 1 - keep_prob
    (a float or scalar tensor) and scales the kept ones by 1 / keep_prob; otherwise
    returns net."""
    if not is_training:
        return net
    noise = tf.random.uniform([tf.shape(net)[0], 1, 1, 1], dtype=tf.float32)
    kept = tf.cast(tf.floor(keep_prob + noise), net.dtype)
    return net * tf.cast(1.0 / keep_prob, net.dtype) * kept


def _parse(operation):
    """'separable_5x5_2' -> ('separable', 5, 2); 'avg_pool_3x3' -> ('avg_pool', 3, 1)."""
    match = _OPERATION.fullmatch(operation)
    if not match or match[2] != match[3]:
        raise ValueError(f'Unimplemented operation {operation!r}')
    return match[1], int(match[2]), int(match[4] or 1)


class NasNetABaseCell(object):
    """A cell of NASNet's family, called as a layer (see __call__).

    num_conv_filters: depth of each operation at filter_scaling 1.
    operations: one per input below, the left then the right one of each combination:
      'separable_KxK_L' (L stacked activation, separable convolution and batch norm; 1
      without _L), 'avg_pool_KxK', 'max_pool_KxK' (1x1-projected where the depth differs)
      or 'none' (identity, or activation, 1x1 convolution and batch norm where stride or
      depth must change).
    used_hiddenstates: a 0/1 flag per hidden state (h0, h1, then the combinations); the
      states flagged 0 are concatenated into the output, brought to the last one's shape.
    hiddenstate_indices: the hidden state each operation reads: 0 h0, 1 h1, 2 + i
      combination i.
    drop_path_keep_prob: keep probability of the last cell's operations once training has
      run total_training_steps; 1 disables drop path. A cell's keep probability at a step
      is 1 - min(1, step / total_training_steps) * (cell_num + 1) / total_num_cells
      * (1 - drop_path_keep_prob).
    use_bounded_activation: ReLU6 instead of ReLU, operation outputs clipped to
      [-CLIP_BY_VALUE_CAP, CLIP_BY_VALUE_CAP] and combinations through ReLU6 (for
      quantized inference).
    """

    def __init__(self, num_conv_filters, operations, used_hiddenstates, hiddenstate_indices,
                 drop_path_keep_prob, total_num_cells, total_training_steps,
                 use_bounded_activation=False):
        self._num_conv_filters = num_conv_filters
        self._operations = operations
        self._used_hiddenstates = used_hiddenstates
        self._hiddenstate_indices = hiddenstate_indices
        self._drop_path_keep_prob = drop_path_keep_prob
        self._total_num_cells = total_num_cells
        self._total_training_steps = total_training_steps
        self._use_bounded_activation = use_bounded_activation

    def __call__(self, net, scope=None, filter_scaling=1, stride=1, prev_layer=None,
                 cell_num=-1, current_step=None):
        """Builds the cell on `net` in variable scope `scope`; returns its output.

        filter_scaling: multiplies num_conv_filters into the depth of the operations.
        stride: of the operations reading h0 or h1.
        prev_layer: the previous cell's input, h1's source; None uses net.
        cell_num: the cell's position among all cells, for drop path.
        current_step: scalar tensor driving drop path; None uses the global step (created
          if missing).
        """
        filters = int(self._num_conv_filters * filter_scaling)
        with tf.variable_scope(scope):
            states = self._cell_base(net, prev_layer, filters)
            inputs = list(zip(self._operations, self._hiddenstate_indices))
            for i in range(len(inputs) // 2):
                with tf.variable_scope(f'comb_iter_{i}'):
                    branches = []
                    for side, (operation, index) in zip(('left', 'right'),
                                                        inputs[2 * i:2 * i + 2]):
                        with tf.variable_scope(side):
                            branches.append(self._apply_operation(
                                states[index], operation, stride if index < 2 else 1,
                                filters, cell_num, current_step))
                    with tf.variable_scope('combine'):
                        combined = branches[0] + branches[1]
                        states.append(tf.nn.relu6(combined) if self._use_bounded_activation
                                      else combined)
            with tf.variable_scope('cell_output'):
                return self._combine_unused_states(states)

    def _activation(self, net):
        return tf.nn.relu6(net) if self._use_bounded_activation else tf.nn.relu(net)

    def _clip(self, net):
        if not self._use_bounded_activation:
            return net
        return tf.clip_by_value(net, -CLIP_BY_VALUE_CAP, CLIP_BY_VALUE_CAP)

    def _cell_base(self, net, prev_layer, filters):
        """[h0, h1]: h1 is prev_layer brought to net's side and `filters` channels."""
        if prev_layer is None:
            prev_layer = net
        elif int(prev_layer.shape[2]) != int(net.shape[2]):
            prev_layer = factorized_reduction(self._activation(prev_layer), filters, stride=2)
        elif get_channel_dim(prev_layer.shape) != filters:
            prev_layer = _conv_bn(self._activation(prev_layer), filters, 'prev_1x1', 'prev_bn')
        return [_conv_bn(self._activation(net), filters, '1x1', 'beginning_bn'), prev_layer]

    def _apply_operation(self, net, operation, stride, filters, cell_num, current_step):
        """One operation of the table (see the class) on `net`, then drop path unless it is
        'none'."""
        projects = get_channel_dim(net.shape) != filters
        if operation == 'none':
            if self._use_bounded_activation:
                net = tf.nn.relu6(net)
            if stride > 1 or projects:
                if not self._use_bounded_activation:
                    net = tf.nn.relu(net)
                net = self._clip(_conv_bn(net, filters, '1x1', 'bn_1', stride))
            return net
        kind, kernel, layers = _parse(operation)
        if kind == 'separable':
            for layer in range(1, layers + 1):
                net = slim.separable_conv2d(self._activation(net), filters, kernel,
                                            depth_multiplier=1, stride=stride if layer == 1 else 1,
                                            scope=f'separable_{kernel}x{kernel}_{layer}')
                net = slim.batch_norm(net, scope=f'bn_sep_{kernel}x{kernel}_{layer}')
        else:
            if self._use_bounded_activation:
                net = tf.nn.relu6(net)
            net = _POOLS[kind](net, kernel, stride=stride, padding='SAME')
            if projects:
                net = _conv_bn(net, filters, '1x1', 'bn_1')
        return self._apply_drop_path(self._clip(net), cell_num, current_step)

    def _combine_unused_states(self, states):
        """Concatenates the unused states, reducing those of another side or depth than the
        last one's."""
        if len(states) != len(self._used_hiddenstates):
            raise ValueError(f'{len(states)} hidden states, {len(self._used_hiddenstates)} '
                             'used_hiddenstates flags')
        side, depth = int(states[-1].shape[2]), get_channel_dim(states[-1].shape)
        outputs = []
        for index, (state, used) in enumerate(zip(states, self._used_hiddenstates)):
            if used:
                continue
            state_side = int(state.shape[2])
            if state_side != side or get_channel_dim(state.shape) != depth:
                with tf.variable_scope(f'reduction_{index}'):
                    state = factorized_reduction(state, depth, 2 if state_side != side else 1)
            outputs.append(state)
        return tf.concat(outputs, get_channel_index())

    def _apply_drop_path(self, net, cell_num, current_step):
        """drop_path with this cell's keep probability at current_step (see the class)."""
        keep_prob = self._drop_path_keep_prob
        if keep_prob >= 1.0:
            return net
        if cell_num == -1:
            raise ValueError('Drop path needs the cell_num of the cell')
        keep_prob = 1 - (cell_num + 1) / self._total_num_cells * (1 - keep_prob)
        if current_step is None:
            current_step = tf.train.get_or_create_global_step()
        ratio = tf.minimum(
            1.0, tf.cast(current_step, tf.float32) / self._total_training_steps)
        return drop_path(net, 1 - ratio * (1 - keep_prob))


def cell_tables(combinations):
    """(operations, hiddenstate_indices) of NasNetABaseCell from one ((left_operation,
    left_input), (right_operation, right_input)) pair per combination."""
    flat = [branch for combination in combinations for branch in combination]
    return [operation for operation, _ in flat], [index for _, index in flat]


_NORMAL_OPERATIONS, _NORMAL_INPUTS = cell_tables((
    (('separable_5x5_2', 0), ('separable_3x3_2', 1)),
    (('separable_5x5_2', 1), ('separable_3x3_2', 1)),
    (('avg_pool_3x3', 0), ('none', 1)),
    (('avg_pool_3x3', 1), ('avg_pool_3x3', 1)),
    (('separable_3x3_2', 0), ('none', 0))))
_REDUCTION_OPERATIONS, _REDUCTION_INPUTS = cell_tables((
    (('separable_5x5_2', 0), ('separable_7x7_2', 1)),
    (('max_pool_3x3', 0), ('separable_7x7_2', 1)),
    (('avg_pool_3x3', 0), ('separable_5x5_2', 1)),
    (('none', 3), ('avg_pool_3x3', 2)),
    (('separable_3x3_2', 2), ('max_pool_3x3', 0))))


class NasNetANormalCell(NasNetABaseCell):
    """NASNet-A's normal cell: output depth 6 x its filters (h1 and the combinations)."""

    def __init__(self, num_conv_filters, drop_path_keep_prob, total_num_cells,
                 total_training_steps, use_bounded_activation=False):
        super().__init__(num_conv_filters, _NORMAL_OPERATIONS, [1, 0, 0, 0, 0, 0, 0],
                         _NORMAL_INPUTS, drop_path_keep_prob, total_num_cells,
                         total_training_steps, use_bounded_activation)


class NasNetAReductionCell(NasNetABaseCell):
    """NASNet-A's reduction cell, run with stride 2: output depth 4 x its filters (the last
    four combinations)."""

    def __init__(self, num_conv_filters, drop_path_keep_prob, total_num_cells,
                 total_training_steps, use_bounded_activation=False):
        super().__init__(num_conv_filters, _REDUCTION_OPERATIONS, [1, 1, 1, 0, 0, 0, 0],
                         _REDUCTION_INPUTS, drop_path_keep_prob, total_num_cells,
                         total_training_steps, use_bounded_activation)
