"""NASNet-A (Zoph et al. 2017, arXiv:1707.07012) as TF-Slim builds it: CIFAR, Mobile, Large.

A stem, then num_cells normal cells in three stages; before each of the two later stages a
stride-2 reduction cell halves the side and the depth doubles. The ImageNet stem is a
stride-2 3x3 convolution and two reduction cells ('cell_stem_0', 'cell_stem_1'), dividing
the side by 8; CIFAR's is one stride-1 3x3 convolution. A configuration is an `HParams`
(`cifar_config()`, `mobile_imagenet_config()`, `large_imagenet_config()`); the builders take
a copy of it as `config`. Variables have TF-Slim's names, without an enclosing scope
('cell_0/1x1/weights', 'final_layer/FC/weights'; checkpoints nasnet-a_mobile_04_10_2017 and
nasnet-a_large_04_10_2017, 1001 classes), when built in the arg_scope of this module, which
also makes convolutions linear and bias-free and names fully connected layers 'FC'.
"""
import copy
import numbers

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.nasnet import nasnet_utils

arg_scope = slim.arg_scope


class HParams(object):
    """Hyperparameters as attributes: the part of tf.contrib.training.HParams (gone from
    TensorFlow 2) that slim's configs use.

    HParams(num_cells=18, ...) defines them; set_hparam changes one, keeping its type
    (an int may become a float, nothing else converts); add_hparam and del_hparam add and
    remove one; values() is a {name: value} dict; copy.deepcopy copies.
    """

    def __init__(self, **hparams):
        for name, value in hparams.items():
            self.add_hparam(name, value)

    def add_hparam(self, name, value):
        if name in vars(self) or hasattr(type(self), name):
            raise ValueError(f'Hyperparameter name is taken or reserved: {name}')
        setattr(self, name, value)

    def set_hparam(self, name, value):
        if name not in vars(self):
            raise KeyError(f'Unknown hyperparameter: {name}')
        setattr(self, name, _cast(name, getattr(self, name), value))

    def del_hparam(self, name):
        vars(self).pop(name, None)

    def override_from_dict(self, values):
        """set_hparam for each item of `values`; returns self."""
        for name, value in values.items():
            self.set_hparam(name, value)
        return self

    def get(self, name, default=None):
        return vars(self).get(name, default)

    def values(self):
        return dict(vars(self))

    def __contains__(self, name):
        return name in vars(self)

    def __repr__(self):
        return 'HParams(%s)' % ', '.join(f'{k}={v!r}' for k, v in sorted(vars(self).items()))


def _cast(name, current, value):
    """`value` as the type of the hyperparameter's `current` value, refusing what HParams
    refused: strings and booleans from or to other types, floats to integers, non-numbers
    to numbers. Any value replaces None."""
    kind = type(current)
    if current is None or type(value) is kind:
        return value
    if (isinstance(current, (str, bool)) or isinstance(value, (str, bool))
            or not isinstance(value, numbers.Number)
            or (isinstance(current, numbers.Integral)
                and not isinstance(value, numbers.Integral))):
        raise ValueError(f'Could not cast hyperparameter {name!r} of type {kind.__name__} '
                         f'from value {value!r}')
    return kind(value)


def _config(**values):
    """HParams of slim's NASNet and PNASNet configurations: `values` over what they share.

    stem_multiplier: scales the stem convolution's depth (32, or num_conv_filters on CIFAR).
    num_conv_filters: depth of each cell operation in the first stage, doubled
      (filter_scaling_rate) at each of num_reduction_layers reductions.
    drop_path_keep_prob, total_training_steps: drop path's schedule (see
      nasnet_utils.NasNetABaseCell); evaluation builds set drop_path_keep_prob to 1.
    dense_dropout_keep_prob: of the dropout before the logits, in training.
    use_aux_head: 1 builds the auxiliary classifier (training, with logits).
    skip_reduction_layer_input: 1 gives the cell after a reduction cell as h1 the input the
      reduction cell itself had as h1; 0 the reduction cell's input.
    data_format: 'NHWC' or 'NCHW' (then images are transposed, and end points are NCHW).
    use_bounded_activation: ReLU6 and clipping throughout (see nasnet_utils).
    """
    shared = dict(dense_dropout_keep_prob=0.5, filter_scaling_rate=2.0, use_aux_head=1,
                  num_reduction_layers=2, data_format='NHWC', total_training_steps=250000,
                  use_bounded_activation=False)
    return HParams(**{**shared, **values})


def cifar_config():
    """NASNet-A 6 @ 768 for CIFAR-10: 18 cells of 32 filters; trained 600 epochs at batch
    size 32 (937,500 steps), learning rate 0.025 with cosine decay, auxiliary loss weight
    0.4, gradients clipped to a global norm of 5."""
    return _config(stem_multiplier=3.0, drop_path_keep_prob=0.6, num_cells=18,
                   num_conv_filters=32, dense_dropout_keep_prob=1.0,
                   skip_reduction_layer_input=0, total_training_steps=937500)


def large_imagenet_config():
    """NASNet-A 6 @ 4032: 18 cells of 168 filters; trained with synchronous SGD on 100
    replicas of batch 16, learning rate 1.5 decayed by 0.97 every 2.4 epochs, auxiliary loss
    weight 0.4, label smoothing 0.1, gradients clipped to a global norm of 10."""
    return _config(stem_multiplier=3.0, num_cells=18, num_conv_filters=168,
                   drop_path_keep_prob=0.7, skip_reduction_layer_input=1)


def mobile_imagenet_config():
    """NASNet-A 4 @ 1056: 12 cells of 44 filters, no drop path; trained with synchronous SGD
    on 50 replicas of batch 32, learning rate 2.0 decayed by 0.97 every 2.4 epochs,
    auxiliary loss weight 0.4, label smoothing 0.1, gradients clipped to a global norm of
    10."""
    return _config(stem_multiplier=1.0, num_cells=12, num_conv_filters=44,
                   drop_path_keep_prob=1.0, skip_reduction_layer_input=0)


def _arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon):
    """The arg_scope the nets are built in: weights with an L2 penalty of weight_decay
    (0: none) and fan-out variance scaling initialization; linear, bias-free convolutions;
    linear fully connected layers named 'FC'; scaled, fused batch norm with the given
    moving-average decay and epsilon."""
    with arg_scope([slim.fully_connected, slim.conv2d, slim.separable_conv2d],
                   weights_regularizer=slim.l2_regularizer(weight_decay),
                   weights_initializer=slim.variance_scaling_initializer(mode='FAN_OUT')):
        with arg_scope([slim.fully_connected], activation_fn=None, scope='FC'):
            with arg_scope([slim.conv2d, slim.separable_conv2d], activation_fn=None,
                           biases_initializer=None):
                with arg_scope([slim.batch_norm], decay=batch_norm_decay,
                               epsilon=batch_norm_epsilon, scale=True, fused=True) as scope:
                    return scope


def nasnet_cifar_arg_scope(weight_decay=5e-4, batch_norm_decay=0.9, batch_norm_epsilon=1e-5):
    """The arg_scope of build_nasnet_cifar (see the module)."""
    return _arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_mobile_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                            batch_norm_epsilon=1e-3):
    """The arg_scope of build_nasnet_mobile (see the module)."""
    return _arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_large_arg_scope(weight_decay=5e-5, batch_norm_decay=0.9997,
                           batch_norm_epsilon=1e-3):
    """The arg_scope of build_nasnet_large (see the module)."""
    return _arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def _build_aux_head(net, end_points, num_classes, hparams, scope):
    """Adds end_points['AuxLogits'] [batch, num_classes], the auxiliary classifier on `net`
    (a cell's activated output, at least 5x5)."""
    activation = tf.nn.relu6 if hparams.use_bounded_activation else tf.nn.relu
    with tf.variable_scope(scope), tf.variable_scope('aux_logits'):
        net = slim.avg_pool2d(net, [5, 5], stride=3, padding='VALID')
        net = activation(slim.batch_norm(slim.conv2d(net, 128, [1, 1], scope='proj'),
                                         scope='aux_bn0'))
        spatial = net.shape[1:3] if hparams.data_format == 'NHWC' else net.shape[2:4]
        net = slim.conv2d(net, 768, spatial.as_list(), padding='VALID')
        net = activation(slim.batch_norm(net, scope='aux_bn1'))
        end_points['AuxLogits'] = slim.fully_connected(slim.flatten(net), num_classes)


def build_network(images, num_classes, is_training, config, final_endpoint, current_step,
                  normal_cell_class, reduction_cell_class=None, imagenet_stem=True):
    """Builds a net of NASNet's family on `images`, float32 [batch, height, width, 3].

    num_classes: width of the logits layer 'final_layer/FC'; 0 or None builds none (nor the
      auxiliary head) and returns the pooled features 'final_layer/Mean' [batch, depth].
    is_training: batch norm in training mode, dense dropout, drop path and the auxiliary
      head; evaluation builds no drop path (drop_path_keep_prob 1).
    config: HParams (see _config); copied, not changed.
    final_endpoint: the end point to stop at and return instead of the logits; at 'Logits'
      and 'Predictions' the features the logits are computed from are returned, as slim's.
    current_step: scalar tensor driving drop path in training; None uses the global step,
      created if missing (so create it first: it belongs outside the model).
    normal_cell_class: a nasnet_utils.NasNetABaseCell's class, taking
      (num_conv_filters, drop_path_keep_prob, total_num_cells, total_training_steps,
      use_bounded_activation).
    reduction_cell_class: the same, for the cell inserted at reductions and forming the
      ImageNet stem; None (PNASNet) runs the normal cell with stride 2 there instead.
    imagenet_stem: the ImageNet stem, else CIFAR's (see the module).
    Returns (net, end_points): end_points maps 'Stem', 'Cell_i', 'Reduction_Cell_i' (with a
    reduction cell), 'AuxLogits' (training with logits and use_aux_head), 'global_pool',
    'Logits' and 'Predictions' to their tensors, NCHW if config.data_format is 'NCHW'.
    """
    hparams = copy.deepcopy(config)
    if not is_training:
        hparams.set_hparam('drop_path_keep_prob', 1.0)
    # slim counts two stem and two reduction cells, whatever num_reduction_layers.
    total_num_cells = hparams.num_cells + 2 * imagenet_stem + 2 * bool(reduction_cell_class)
    normal_cell, reduction_cell = (
        cell_class and cell_class(hparams.num_conv_filters, hparams.drop_path_keep_prob,
                                  total_num_cells, hparams.total_training_steps,
                                  hparams.use_bounded_activation)
        for cell_class in (normal_cell_class, reduction_cell_class))
    if hparams.data_format == 'NCHW':
        images = tf.transpose(images, [0, 3, 1, 2])
    with arg_scope([slim.dropout, nasnet_utils.drop_path, slim.batch_norm],
                   is_training=is_training), \
            arg_scope([slim.avg_pool2d, slim.max_pool2d, slim.conv2d, slim.batch_norm,
                       slim.separable_conv2d, nasnet_utils.factorized_reduction,
                       nasnet_utils.global_avg_pool, nasnet_utils.get_channel_index,
                       nasnet_utils.get_channel_dim], data_format=hparams.data_format):
        return _build_base(images, num_classes, is_training, hparams, final_endpoint,
                           current_step, normal_cell, reduction_cell, imagenet_stem)


def _build_base(images, num_classes, is_training, hparams, final_endpoint, current_step,
                normal_cell, reduction_cell, imagenet_stem):
    end_points = {}

    def reached(name, net):
        end_points[name] = net
        return bool(final_endpoint) and name == final_endpoint

    outputs = []  # [None, the stem convolution, then every cell's output]

    def add_cell(cell, scope, filter_scaling, stride, prev_layer):
        outputs.append(cell(outputs[-1], scope=scope, filter_scaling=filter_scaling,
                            stride=stride, prev_layer=prev_layer, cell_num=len(outputs) - 2,
                            current_step=current_step))
        return outputs[-1]

    if imagenet_stem:
        net = slim.conv2d(images, int(32 * hparams.stem_multiplier), [3, 3], stride=2,
                          padding='VALID', scope='conv0')
        outputs += [None, slim.batch_norm(net, scope='conv0_bn')]
        filter_scaling = 1.0 / hparams.filter_scaling_rate ** 2
        for i in range(2):
            net = add_cell(reduction_cell or normal_cell, f'cell_stem_{i}', filter_scaling, 2,
                           outputs[-2])
            filter_scaling *= hparams.filter_scaling_rate
    else:
        net = slim.conv2d(images, int(hparams.num_conv_filters * hparams.stem_multiplier), 3,
                          scope='l1_stem_3x3')
        net = slim.batch_norm(net, scope='l1_stem_bn')
        outputs += [None, net]
    if reached('Stem', net):
        return net, end_points

    reductions = nasnet_utils.calc_reduction_layers(hparams.num_cells,
                                                    hparams.num_reduction_layers)
    aux_cell = reductions[1] - 1 if len(reductions) >= 2 else None
    activation = tf.nn.relu6 if hparams.use_bounded_activation else tf.nn.relu
    filter_scaling, prev_layer = 1.0, None
    for cell_num in range(hparams.num_cells):
        reduces, stride = cell_num in reductions, 1
        if reduces:
            filter_scaling *= hparams.filter_scaling_rate
        # A PNASNet reduction without skip_reduction_layer_input keeps the last h1 (as slim).
        if hparams.skip_reduction_layer_input or not reduces:
            prev_layer = outputs[-2]
        if reduces and reduction_cell:
            index = reductions.index(cell_num)
            net = add_cell(reduction_cell, f'reduction_cell_{index}', filter_scaling, 2,
                           outputs[-2])
            if reached(f'Reduction_Cell_{index}', net):
                return net, end_points
            if not hparams.skip_reduction_layer_input:
                prev_layer = outputs[-2]
        elif reduces:
            stride = 2
        net = add_cell(normal_cell, f'cell_{cell_num}', filter_scaling, stride, prev_layer)
        if reached(f'Cell_{cell_num}', net):
            return net, end_points
        if hparams.use_aux_head and cell_num == aux_cell and num_classes and is_training:
            _build_aux_head(activation(net), end_points, num_classes, hparams,
                            f'aux_{cell_num}')

    with tf.variable_scope('final_layer'):
        net = nasnet_utils.global_avg_pool(activation(net))
        if reached('global_pool', net) or not num_classes:
            return net, end_points
        net = slim.dropout(net, hparams.dense_dropout_keep_prob, scope='dropout')
        logits = slim.fully_connected(net, num_classes)
        if (reached('Logits', logits)
                or reached('Predictions', tf.nn.softmax(logits, name='predictions'))):
            return net, end_points  # As slim: the features the logits are computed from.
    return logits, end_points


def build_nasnet_cifar(images, num_classes, is_training=True, config=None, current_step=None,
                       final_endpoint=None):
    """NASNet-A 6 @ 768 on `images` [batch, 32, 32, 3], by default in cifar_config(); see
    build_network."""
    return build_network(images, num_classes, is_training,
                         cifar_config() if config is None else config, final_endpoint,
                         current_step, nasnet_utils.NasNetANormalCell,
                         nasnet_utils.NasNetAReductionCell, imagenet_stem=False)
build_nasnet_cifar.default_image_size = 32


def build_nasnet_mobile(images, num_classes, is_training=True, final_endpoint=None,
                        config=None, current_step=None):
    """NASNet-A 4 @ 1056 on `images` [batch, 224, 224, 3], by default in
    mobile_imagenet_config(); see build_network."""
    return build_network(images, num_classes, is_training,
                         mobile_imagenet_config() if config is None else config,
                         final_endpoint, current_step, nasnet_utils.NasNetANormalCell,
                         nasnet_utils.NasNetAReductionCell)
build_nasnet_mobile.default_image_size = 224


def build_nasnet_large(images, num_classes, is_training=True, final_endpoint=None,
                       config=None, current_step=None):
    """NASNet-A 6 @ 4032 on `images` [batch, 331, 331, 3], by default in
    large_imagenet_config(); see build_network."""
    return build_network(images, num_classes, is_training,
                         large_imagenet_config() if config is None else config,
                         final_endpoint, current_step, nasnet_utils.NasNetANormalCell,
                         nasnet_utils.NasNetAReductionCell)
build_nasnet_large.default_image_size = 331
