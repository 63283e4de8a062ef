"""NASNet-A and PNASNet-5 (slim's nets/nasnet): public names and signatures, the configs and
their HParams, nasnet_utils' operations and drop path schedule, and the builders: end
points, final_endpoint, the auxiliary head, features without logits, NCHW, bounded
activations, the arg_scopes, clone-style reuse, and TF-Slim's checkpoint variable names,
shapes and parameter counts.

The full-size nets are built (not run) once each, in the slow tier; everything else uses
reduced configs (3 cells of 8 filters), which go through the same code.
"""
import collections
import copy
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets.nasnet import nasnet, nasnet_utils, pnasnet

from helpers import parameters, variable_shapes

pytestmark = pytest.mark.usefixtures('fast_variable_creation')

BUILDER = ['images', 'num_classes', 'is_training', 'final_endpoint', 'config',
           'current_step']
CELL = ['num_conv_filters', 'drop_path_keep_prob', 'total_num_cells', 'total_training_steps',
        'use_bounded_activation']
ARG_SCOPE = ['weight_decay', 'batch_norm_decay', 'batch_norm_epsilon']
SIGNATURES = {
    nasnet_utils: {
        'calc_reduction_layers': ['num_cells', 'num_reduction_layers'],
        'get_channel_index': ['data_format'], 'get_channel_dim': ['shape', 'data_format'],
        'global_avg_pool': ['x', 'data_format'],
        'factorized_reduction': ['net', 'output_filters', 'stride', 'data_format'],
        'drop_path': ['net', 'keep_prob', 'is_training'],
        'NasNetABaseCell': ['num_conv_filters', 'operations', 'used_hiddenstates',
                            'hiddenstate_indices'] + CELL[1:],
        'NasNetANormalCell': CELL, 'NasNetAReductionCell': CELL},
    nasnet: {
        'cifar_config': [], 'mobile_imagenet_config': [], 'large_imagenet_config': [],
        'nasnet_cifar_arg_scope': ARG_SCOPE, 'nasnet_mobile_arg_scope': ARG_SCOPE,
        'nasnet_large_arg_scope': ARG_SCOPE,
        # slim's CIFAR builder has no final_endpoint; this one takes it last.
        'build_nasnet_cifar': BUILDER[:3] + BUILDER[4:] + ['final_endpoint'],
        'build_nasnet_mobile': BUILDER, 'build_nasnet_large': BUILDER},
    pnasnet: {
        'mobile_imagenet_config': [], 'large_imagenet_config': [],
        'pnasnet_mobile_arg_scope': ARG_SCOPE, 'pnasnet_large_arg_scope': ARG_SCOPE,
        # slim's PNASNet builders have no current_step (they use the global step).
        'build_pnasnet_mobile': BUILDER, 'build_pnasnet_large': BUILDER,
        'PNasNetNormalCell': CELL},
}


def test_public_names_and_signatures():
    for module, signatures in SIGNATURES.items():
        for name, expected in signatures.items():
            assert list(inspect.signature(getattr(module, name)).parameters) == expected, name
        assert module.arg_scope is slim.arg_scope
    assert list(inspect.signature(nasnet_utils.NasNetABaseCell.__call__).parameters) == [
        'self', 'net', 'scope', 'filter_scaling', 'stride', 'prev_layer', 'cell_num',
        'current_step']
    assert issubclass(pnasnet.PNasNetNormalCell, nasnet_utils.NasNetABaseCell)
    assert (nasnet_utils.DATA_FORMAT_NHWC, nasnet_utils.DATA_FORMAT_NCHW,
            nasnet_utils.INVALID, nasnet_utils.CLIP_BY_VALUE_CAP) == ('NHWC', 'NCHW', 'null', 6)
    sizes = {nasnet.build_nasnet_cifar: 32, nasnet.build_nasnet_mobile: 224,
             nasnet.build_nasnet_large: 331, pnasnet.build_pnasnet_mobile: 224,
             pnasnet.build_pnasnet_large: 331}
    for builder, size in sizes.items():
        assert builder.default_image_size == size
        assert inspect.signature(builder).parameters['is_training'].default is True
    defaults = {nasnet.nasnet_cifar_arg_scope: (5e-4, 0.9, 1e-5),
                nasnet.nasnet_mobile_arg_scope: (4e-5, 0.9997, 1e-3),
                nasnet.nasnet_large_arg_scope: (5e-5, 0.9997, 1e-3),
                pnasnet.pnasnet_mobile_arg_scope: (4e-5, 0.9997, 1e-3),
                pnasnet.pnasnet_large_arg_scope: (4e-5, 0.9997, 1e-3)}
    for arg_scope, expected in defaults.items():
        assert tuple(p.default for p in inspect.signature(arg_scope).parameters.values()) \
            == expected


SHARED = dict(filter_scaling_rate=2.0, num_reduction_layers=2, use_aux_head=1,
              data_format='NHWC', use_bounded_activation=False)
CONFIGS = {
    nasnet.cifar_config: dict(
        stem_multiplier=3.0, drop_path_keep_prob=0.6, num_cells=18, num_conv_filters=32,
        dense_dropout_keep_prob=1.0, skip_reduction_layer_input=0,
        total_training_steps=937500),
    nasnet.mobile_imagenet_config: dict(
        stem_multiplier=1.0, dense_dropout_keep_prob=0.5, num_cells=12,
        drop_path_keep_prob=1.0, num_conv_filters=44, skip_reduction_layer_input=0,
        total_training_steps=250000),
    nasnet.large_imagenet_config: dict(
        stem_multiplier=3.0, dense_dropout_keep_prob=0.5, num_cells=18,
        num_conv_filters=168, drop_path_keep_prob=0.7, skip_reduction_layer_input=1,
        total_training_steps=250000),
    pnasnet.mobile_imagenet_config: dict(
        stem_multiplier=1.0, dense_dropout_keep_prob=0.5, num_cells=9, num_conv_filters=54,
        drop_path_keep_prob=1.0, skip_reduction_layer_input=1, total_training_steps=250000),
    pnasnet.large_imagenet_config: dict(
        stem_multiplier=3.0, dense_dropout_keep_prob=0.5, num_cells=12,
        num_conv_filters=216, drop_path_keep_prob=0.6, skip_reduction_layer_input=1,
        total_training_steps=250000),
}


def test_configs():
    for config_fn, values in CONFIGS.items():
        config = config_fn()
        assert config.values() == {**SHARED, **values}, config_fn.__qualname__
        assert all(type(getattr(config, k)) is type(v) for k, v in config.values().items())
        assert config_fn() is not config_fn()  # A fresh one each call, free to change.


def test_hparams():
    config = nasnet.cifar_config()
    config.set_hparam('drop_path_keep_prob', 1)  # An int becomes a float...
    assert config.drop_path_keep_prob == 1.0 and type(config.drop_path_keep_prob) is float
    for name, value in (('num_cells', 2.5), ('use_aux_head', True), ('data_format', 1),
                        ('use_bounded_activation', 1), ('num_conv_filters', '8')):
        with pytest.raises(ValueError, match=name):  # ...but nothing else converts.
            config.set_hparam(name, value)
    with pytest.raises(KeyError, match='num_cell'):
        config.set_hparam('num_cell', 3)
    config.add_hparam('extra', [1, 2])
    with pytest.raises(ValueError, match='extra'):
        config.add_hparam('extra', 3)
    with pytest.raises(ValueError, match='values'):
        config.add_hparam('values', 3)
    assert 'extra' in config and config.get('extra') == [1, 2] and config.get('no', 5) == 5
    copied = copy.deepcopy(config)
    copied.extra.append(3)
    copied.override_from_dict({'num_cells': 3, 'use_bounded_activation': True})
    assert (config.extra, config.num_cells, config.use_bounded_activation) == ([1, 2], 18,
                                                                               False)
    assert (copied.num_cells, copied.use_bounded_activation) == (3, True)
    config.del_hparam('extra')
    assert 'extra' not in config and 'extra=' not in repr(config)
    assert 'num_cells=18' in repr(config)


def test_channel_helpers_need_a_data_format():
    assert nasnet_utils.calc_reduction_layers(18, 2) == [6, 12]
    assert nasnet_utils.calc_reduction_layers(12, 2) == [4, 8]
    assert nasnet_utils.calc_reduction_layers(9, 2) == [3, 6]
    assert nasnet_utils.calc_reduction_layers(3, 2) == [1, 2]
    assert nasnet_utils.calc_reduction_layers(12, 3) == [3, 6, 9]
    shape = [10, 20, 30, 40]
    assert [nasnet_utils.get_channel_index(f) for f in ('NHWC', 'NCHW')] == [3, 1]
    assert [nasnet_utils.get_channel_dim(shape, f) for f in ('NHWC', 'NCHW')] == [40, 20]
    for function, args in ((nasnet_utils.get_channel_index, ()),
                           (nasnet_utils.get_channel_dim, (shape,))):
        with pytest.raises(ValueError, match='data_format'):
            function(*args)
        with slim.arg_scope([function], data_format='NCHW'):
            assert function(*args) == (1 if not args else 20)
    with tf.Graph().as_default():
        inputs = tf.zeros([5, 10, 20, 12])
        pooled = {f: nasnet_utils.global_avg_pool(inputs, f) for f in ('NHWC', 'NCHW')}
        assert pooled['NHWC'].shape.as_list() == [5, 12]
        assert pooled['NCHW'].shape.as_list() == [5, 10]
        assert pooled['NHWC'].op.name == 'Mean'


def test_factorized_reduction():
    """Stride 1 is a 1x1 convolution; stride 2 gives the floor half of the filters the even
    pixels and the others the odd ones, shifted in (zeros past the edge)."""
    pixels = np.arange(1, 26, dtype=np.float32).reshape([1, 5, 5, 1])
    with tf.Graph().as_default():
        with slim.arg_scope([slim.conv2d], weights_initializer=tf.ones_initializer(),
                            activation_fn=None, biases_initializer=None), \
                slim.arg_scope([slim.batch_norm], is_training=False, epsilon=1e-12), \
                slim.arg_scope([nasnet_utils.factorized_reduction], data_format='NHWC'):
            with tf.variable_scope('one'):
                same = nasnet_utils.factorized_reduction(tf.zeros([5, 10, 20, 10]), 16, 1)
            with tf.variable_scope('two'):
                reduced = nasnet_utils.factorized_reduction(tf.constant(pixels), 3, 2)
        with tf.variable_scope('nchw'), slim.arg_scope([slim.conv2d, slim.batch_norm],
                                                       data_format='NCHW'):
            nchw = nasnet_utils.factorized_reduction(tf.zeros([2, 6, 7, 7]), 5, 2, 'NCHW')
        variables = variable_shapes()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            values = sess.run(reduced)[0]
    assert same.shape.as_list() == [5, 10, 20, 16] and reduced.shape.as_list() == [1, 3, 3, 3]
    assert nchw.shape.as_list() == [2, 5, 4, 4]
    assert variables['one/path_conv/weights'] == [1, 1, 10, 16]
    assert variables['one/path_bn/moving_mean'] == [16]
    assert variables['two/path1_conv/weights'] == [1, 1, 1, 1]
    assert variables['two/path2_conv/weights'] == [1, 1, 1, 2]  # The odd filter.
    assert variables['two/final_path_bn/beta'] == [3]
    assert variables['nchw/path2_conv/weights'] == [1, 1, 6, 3]
    image = pixels[0, :, :, 0]
    np.testing.assert_allclose(values[:, :, 0], image[::2, ::2], rtol=1e-5)
    odd = np.zeros([3, 3])
    odd[:2, :2] = image[1::2, 1::2]
    np.testing.assert_allclose(values[:, :, 1], odd, rtol=1e-5)
    np.testing.assert_allclose(values[:, :, 2], odd, rtol=1e-5)


def test_drop_path():
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        inputs = tf.ones([4000, 2, 2, 1])
        assert nasnet_utils.drop_path(inputs, 0.25, is_training=False) is inputs
        with slim.arg_scope([nasnet_utils.drop_path], is_training=False):
            assert nasnet_utils.drop_path(inputs, 0.25) is inputs
        dropped = nasnet_utils.drop_path(inputs, tf.constant(0.25))
        with tf.Session() as sess:
            masks = sess.run(dropped)
    assert set(np.unique(masks)) == {0.0, 4.0}  # Whole examples dropped, kept ones scaled.
    assert (masks == masks[:, :1, :1]).all()
    assert abs((masks[:, 0, 0, 0] > 0).mean() - 0.25) < 0.03


def test_drop_path_schedule():
    """A cell's operations keep an example with probability 1 - min(1, step / steps) *
    (cell_num + 1) / total_num_cells * (1 - drop_path_keep_prob), scaling it by the inverse.

    In this cell every combination adds a dropped pooling of h1 (ones) to h1 itself
    ('none', no drop path), so the output less 1 is the drop path mask.
    """
    cell = nasnet_utils.NasNetABaseCell(
        1, ['avg_pool_3x3', 'none'] * 5, [1, 1, 0, 0, 0, 0, 0], [1, 1] * 5,
        drop_path_keep_prob=0.6, total_num_cells=5, total_training_steps=100)
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        step = tf.placeholder(tf.int64, [])
        ones = tf.ones([2000, 1, 1, 1])
        with slim.arg_scope([nasnet_utils.get_channel_dim, nasnet_utils.get_channel_index],
                            data_format='NHWC'):
            masks = {cell_num: cell(ones, f'cell_{cell_num}', prev_layer=ones,
                                    cell_num=cell_num, current_step=step) - 1
                     for cell_num in (0, 4)}
        assert tf.train.get_global_step() is None  # current_step given.
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            runs = {s: sess.run(masks, {step: s}) for s in (0, 50, 100, 200)}
    for s, values in runs.items():
        for cell_num, mask in values.items():
            assert mask.shape == (2000, 1, 1, 5)
            keep = 1 - min(1, s / 100) * (cell_num + 1) / 5 * 0.4
            kept = mask > 0.5
            np.testing.assert_allclose(mask[kept], 1 / keep, rtol=1e-5)
            np.testing.assert_array_equal(mask[~kept], 0)
            assert abs(kept.mean() - keep) < 0.02, (s, cell_num)
    assert runs[0][4].min() == 1 and runs[100][4].min() == 0


def _small(config_fn, **values):
    """config_fn()'s config with 3 cells of 8 filters (reductions before cells 1 and 2)."""
    return config_fn().override_from_dict({'num_cells': 3, 'num_conv_filters': 8, **values})


Small = collections.namedtuple('Small', ['builder', 'config', 'arg_scope', 'size',
                                         'end_points'])
# End point shapes of the reduced nets, without the batch; the auxiliary head sits on cell 1.
SMALL = {
    'nasnet_cifar': Small(
        nasnet.build_nasnet_cifar, nasnet.cifar_config, nasnet.nasnet_cifar_arg_scope, 32,
        {'Stem': [32, 32, 24], 'Cell_0': [32, 32, 48], 'Reduction_Cell_0': [16, 16, 64],
         'Cell_1': [16, 16, 96], 'Reduction_Cell_1': [8, 8, 128], 'Cell_2': [8, 8, 192],
         'global_pool': [192]}),
    'nasnet_mobile': Small(
        nasnet.build_nasnet_mobile, nasnet.mobile_imagenet_config,
        nasnet.nasnet_mobile_arg_scope, 96,
        {'Stem': [12, 12, 16], 'Cell_0': [12, 12, 48], 'Reduction_Cell_0': [6, 6, 64],
         'Cell_1': [6, 6, 96], 'Reduction_Cell_1': [3, 3, 128], 'Cell_2': [3, 3, 192],
         'global_pool': [192]}),
    'nasnet_large': Small(
        nasnet.build_nasnet_large, nasnet.large_imagenet_config,
        nasnet.nasnet_large_arg_scope, 96,
        {'Stem': [12, 12, 16], 'Cell_0': [12, 12, 48], 'Reduction_Cell_0': [6, 6, 64],
         'Cell_1': [6, 6, 96], 'Reduction_Cell_1': [3, 3, 128], 'Cell_2': [3, 3, 192],
         'global_pool': [192]}),
    'pnasnet_mobile': Small(
        pnasnet.build_pnasnet_mobile, pnasnet.mobile_imagenet_config,
        pnasnet.pnasnet_mobile_arg_scope, 96,
        {'Stem': [12, 12, 20], 'Cell_0': [12, 12, 40], 'Cell_1': [6, 6, 80],
         'Cell_2': [3, 3, 160], 'global_pool': [160]}),
    'pnasnet_large': Small(
        pnasnet.build_pnasnet_large, pnasnet.large_imagenet_config,
        pnasnet.pnasnet_large_arg_scope, 96,
        {'Stem': [12, 12, 20], 'Cell_0': [12, 12, 40], 'Cell_1': [6, 6, 80],
         'Cell_2': [3, 3, 160], 'global_pool': [160]}),
}


def _build_small(name, num_classes=10, is_training=True, images=None, hparams=(),
                 **kwargs):
    """Builds the reduced net `name` (its config updated by the `hparams` dict) in its
    arg_scope, on 2 zero images unless `images` are given, passing kwargs on to the
    builder; returns (net, end_points)."""
    small = SMALL[name]
    if images is None:
        images = tf.zeros([2, small.size, small.size, 3])
    with slim.arg_scope(small.arg_scope()):
        return small.builder(images, num_classes, is_training=is_training,
                             config=_small(small.config, **dict(hparams)), **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize('name', [
    'nasnet_mobile', 'pnasnet_mobile', 'nasnet_cifar', 'nasnet_large', 'pnasnet_large'])
def test_end_points_in_training(name):
    with tf.Graph().as_default():
        tf.train.create_global_step()  # As the training loop does, before the model.
        net, end_points = _build_small(name)
        variables = variable_shapes()
        regularized = len(tf.losses.get_regularization_losses())
        random = [op.name for op in tf.get_default_graph().get_operations()
                  if op.type == 'RandomUniform']
    expected = {**SMALL[name].end_points, 'AuxLogits': [10], 'Logits': [10],
                'Predictions': [10]}
    assert {k: v.shape.as_list()[1:] for k, v in end_points.items()} == expected
    assert net is end_points['Logits'] and net.op.name == 'final_layer/FC/BiasAdd'
    assert end_points['Predictions'].op.name == 'final_layer/predictions'
    assert end_points['AuxLogits'].op.name == 'aux_1/aux_logits/FC/BiasAdd'
    assert end_points['Stem'].op.name == (
        'l1_stem_bn/FusedBatchNormV3' if name == 'nasnet_cifar'
        else 'cell_stem_1/cell_output/concat')
    assert end_points['Cell_2'].op.name == 'cell_2/cell_output/concat'
    assert variables['final_layer/FC/weights'] == [end_points['global_pool'].shape[1], 10]
    assert variables['aux_1/aux_logits/Conv/weights'][:2] == [
        (end_points['Cell_1'].shape[1] - 5) // 3 + 1] * 2
    # The arg_scope: bias-free convolutions, every weight regularized.
    assert [v for v in variables if v.endswith('biases')] == [
        'aux_1/aux_logits/FC/biases', 'final_layer/FC/biases']
    assert regularized == sum(v.endswith('weights') for v in variables)
    # Drop path where the config has it (its keep probability below 1), dense dropout where
    # its keep probability is 0.5.
    drop_path = _small(SMALL[name].config).drop_path_keep_prob < 1
    assert any('/comb_iter_' in op for op in random) == drop_path
    assert any(op.startswith('final_layer/dropout/') for op in random) == (
        name != 'nasnet_cifar')


@pytest.mark.parametrize('name, num_classes', [
    ('nasnet_cifar', 0), pytest.param('pnasnet_mobile', None, marks=pytest.mark.slow)])
def test_features_without_logits_in_evaluation(name, num_classes):
    config = _small(SMALL[name].config)
    with tf.Graph().as_default():
        with slim.arg_scope(SMALL[name].arg_scope()):
            net, end_points = SMALL[name].builder(
                tf.zeros([2, SMALL[name].size, SMALL[name].size, 3]), num_classes,
                is_training=False, config=config)
        variables = variable_shapes()
        op_types = {op.type for op in tf.get_default_graph().get_operations()}
        global_step = tf.train.get_global_step()
    assert net is end_points['global_pool'] and net.op.name == 'final_layer/Mean'
    assert net.shape.as_list() == [2] + SMALL[name].end_points['global_pool']
    assert set(end_points) == set(SMALL[name].end_points)
    assert not any(v.startswith(('final_layer/', 'aux_')) for v in variables)
    # Evaluation: no drop path (so no global step needed), no dropout.
    assert 'RandomUniform' not in op_types and global_step is None
    # The builder set drop_path_keep_prob to 1 on its own copy of the config.
    assert config.drop_path_keep_prob == SMALL[name].config().drop_path_keep_prob


@pytest.mark.slow
def test_final_endpoint():
    with tf.Graph().as_default():
        results = {}
        for point in ('Stem', 'Reduction_Cell_0', 'Cell_1', 'Logits'):
            with tf.variable_scope(point):
                results[point] = _build_small('nasnet_mobile', final_endpoint=point)
        variables = variable_shapes()
        _, pnasnet_end_points = _build_small('pnasnet_large', final_endpoint='Cell_0')
    following = {'Stem': 'cell_0', 'Reduction_Cell_0': 'cell_1', 'Cell_1': 'aux_1'}
    for point, later in following.items():
        net, end_points = results[point]
        assert net is end_points[point] and list(end_points)[-1] == point
        built = {v.split('/')[1] for v in variables if v.startswith(point + '/')}
        assert later not in built and (point == 'Stem' or point.lower() in built), point
    # slim returns the features the logits are computed from at 'Logits' (and
    # 'Predictions'), and builds no softmax.
    net, end_points = results['Logits']
    assert net.op.name.startswith('Logits/final_layer/dropout/')
    assert net.shape.as_list() == [2, 192] and 'AuxLogits' in end_points
    assert list(end_points)[-2:] == ['global_pool', 'Logits']
    assert list(pnasnet_end_points) == ['Stem', 'Cell_0']


@pytest.mark.slow
def test_current_step_bounded_activation_and_no_aux_head():
    with tf.Graph().as_default():
        step = tf.placeholder(tf.int64, [])
        _, end_points = _build_small(
            'nasnet_cifar', current_step=step,
            hparams={'use_aux_head': 0, 'use_bounded_activation': True})
        variables = variable_shapes()
        ops = tf.get_default_graph().get_operations()
        assert tf.train.get_global_step() is None  # Drop path follows current_step...
        _build_small('nasnet_large', current_step=step, final_endpoint='Stem')
        assert tf.train.get_global_step() is None  # ...in the ImageNet stem's cells too.
    assert 'AuxLogits' not in end_points and 'Logits' in end_points
    assert not any(v.startswith('aux_') for v in variables)
    assert {op.type for op in ops if op.type.startswith('Relu')} == {'Relu6'}
    assert 'cell_2/comb_iter_4/left/clip_by_value' in {op.name for op in ops}


@pytest.mark.slow
def test_nchw_data_format():
    """NCHW: the same variables, end points channels first (graph only: the CPU kernels
    need NHWC)."""
    with tf.Graph().as_default():
        _, end_points = _build_small('nasnet_mobile', hparams={'data_format': 'NCHW'})
        variables = variable_shapes()
    expected = {point: shape if len(shape) == 1 else [shape[2]] + shape[:2]
                for point, shape in SMALL['nasnet_mobile'].end_points.items()}
    expected.update({'AuxLogits': [10], 'Logits': [10], 'Predictions': [10]})
    assert {k: v.shape.as_list()[1:] for k, v in end_points.items()} == expected
    for name, shape in {'cell_stem_1/path2_conv/weights': [1, 1, 32, 2],
                        'reduction_cell_1/prev_1x1/weights': [1, 1, 64, 32],
                        'aux_1/aux_logits/Conv/weights': [1, 1, 128, 768],
                        'cell_2/path1_conv/weights': [1, 1, 96, 16]}.items():
        assert variables[name] == shape, name


def test_arg_scopes():
    config = _small(nasnet.cifar_config)
    with tf.Graph().as_default():
        with slim.arg_scope(nasnet.nasnet_cifar_arg_scope(weight_decay=0.0,
                                                          batch_norm_epsilon=0.01)):
            nasnet.build_nasnet_cifar(tf.zeros([1, 32, 32, 3]), 10, config=config,
                                      final_endpoint='Cell_0')
        assert not tf.losses.get_regularization_losses()
        epsilons = {op.get_attr('epsilon') for op in tf.get_default_graph().get_operations()
                    if op.type == 'FusedBatchNormV3'}
    np.testing.assert_allclose(list(epsilons), [0.01])
    # Without the arg_scope slim's layers keep their own defaults, as in slim's NASNet:
    # biased convolutions with a ReLU.
    with tf.Graph().as_default():
        stem, _ = nasnet.build_nasnet_cifar(tf.zeros([1, 32, 32, 3]), 10,
                                            final_endpoint='Stem')
        assert 'l1_stem_3x3/biases' in variable_shapes()
        assert stem.op.inputs[0].op.name == 'l1_stem_3x3/Relu'


Contract = collections.namedtuple(
    'Contract', ['builder', 'arg_scope', 'size', 'num_classes', 'is_training', 'end_points',
                 'variables', 'parameters', 'aux_parameters'])

# The Mobile nets are built with logits and in training mode (so with the auxiliary head),
# the Large ones without logits in evaluation mode. `parameters` counts the net without its
# auxiliary head and with a 1001-class logits layer, as TF-Slim's checkpoints (0 is
# background); `aux_parameters` the auxiliary head with 1001 classes.
CONTRACTS = {
    'nasnet_mobile': Contract(
        nasnet.build_nasnet_mobile, nasnet.nasnet_mobile_arg_scope, 224, 1001, True,
        {'Stem': [28, 28, 88], 'Reduction_Cell_0': [14, 14, 352], 'Cell_7': [14, 14, 528],
         'Reduction_Cell_1': [7, 7, 704], 'Cell_11': [7, 7, 1056], 'global_pool': [1056]},
        {'conv0/weights': [3, 3, 3, 32], 'conv0_bn/moving_variance': [32],
         'cell_stem_0/1x1/weights': [1, 1, 32, 11],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights': [5, 5, 11, 1],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/pointwise_weights': [1, 1, 11, 11],
         'cell_stem_0/comb_iter_0/right/separable_7x7_1/depthwise_weights': [7, 7, 32, 1],
         'cell_stem_0/comb_iter_0/right/bn_sep_7x7_2/gamma': [11],
         'cell_stem_1/path1_conv/weights': [1, 1, 32, 11],
         'cell_stem_1/path2_conv/weights': [1, 1, 32, 11],
         'cell_stem_1/final_path_bn/beta': [22], 'cell_stem_1/1x1/weights': [1, 1, 44, 22],
         'cell_0/path1_conv/weights': [1, 1, 44, 22], 'cell_0/1x1/weights': [1, 1, 88, 44],
         'cell_0/comb_iter_4/left/separable_3x3_2/pointwise_weights': [1, 1, 44, 44],
         'cell_1/prev_1x1/weights': [1, 1, 88, 44], 'cell_1/prev_bn/moving_mean': [44],
         'reduction_cell_0/1x1/weights': [1, 1, 264, 88],
         'reduction_cell_0/prev_1x1/weights': [1, 1, 264, 88],
         # skip_reduction_layer_input off: cell_4's h1 is reduction_cell_0's input.
         'cell_4/path1_conv/weights': [1, 1, 264, 44],
         'aux_7/aux_logits/proj/weights': [1, 1, 528, 128],
         'aux_7/aux_logits/aux_bn0/beta': [128],
         'aux_7/aux_logits/Conv/weights': [4, 4, 128, 768],
         'aux_7/aux_logits/FC/weights': [768, 1001], 'aux_7/aux_logits/FC/biases': [1001],
         'final_layer/FC/weights': [1056, 1001], 'final_layer/FC/biases': [1001]},
        5_291_035, 2_412_009),  # Published: 5.3M (NASNet-A 4 @ 1056).
    'nasnet_large': Contract(
        nasnet.build_nasnet_large, nasnet.nasnet_large_arg_scope, 331, None, False,
        {'Stem': [42, 42, 336], 'Cell_5': [42, 42, 1008], 'Reduction_Cell_0': [21, 21, 1344],
         'Cell_11': [21, 21, 2016], 'Reduction_Cell_1': [11, 11, 2688],
         'Cell_17': [11, 11, 4032], 'global_pool': [4032]},
        {'conv0/weights': [3, 3, 3, 96], 'cell_stem_0/1x1/weights': [1, 1, 96, 42],
         'cell_stem_0/comb_iter_0/right/separable_7x7_1/depthwise_weights': [7, 7, 96, 1],
         'cell_stem_1/path2_conv/weights': [1, 1, 96, 42],
         'cell_0/path1_conv/weights': [1, 1, 168, 84],
         'cell_1/prev_1x1/weights': [1, 1, 336, 168],
         'reduction_cell_0/prev_1x1/weights': [1, 1, 1008, 336],
         # skip_reduction_layer_input on: cell_6's h1 is reduction_cell_0's h1 (cell_4).
         'cell_6/path1_conv/weights': [1, 1, 1008, 168],
         'cell_17/comb_iter_1/left/separable_5x5_2/depthwise_weights': [5, 5, 672, 1]},
        88_757_183, 0),  # Published: 88.9M (NASNet-A 6 @ 4032).
    'pnasnet_mobile': Contract(
        pnasnet.build_pnasnet_mobile, pnasnet.pnasnet_mobile_arg_scope, 224, 1001, True,
        {'Stem': [28, 28, 135], 'Cell_2': [28, 28, 270], 'Cell_3': [14, 14, 540],
         'Cell_6': [7, 7, 1080], 'Cell_8': [7, 7, 1080], 'global_pool': [1080]},
        {'cell_stem_0/1x1/weights': [1, 1, 32, 13],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights': [5, 5, 32, 1],
         # The max pool on the 32-deep stem convolution needs a projection to 13.
         'cell_stem_0/comb_iter_0/right/1x1/weights': [1, 1, 32, 13],
         # 27 filters, odd: the second path takes the extra one.
         'cell_stem_1/path1_conv/weights': [1, 1, 32, 13],
         'cell_stem_1/path2_conv/weights': [1, 1, 32, 14],
         'cell_stem_1/1x1/weights': [1, 1, 65, 27],
         'cell_0/path2_conv/weights': [1, 1, 65, 27], 'cell_0/1x1/weights': [1, 1, 135, 54],
         'cell_3/prev_1x1/weights': [1, 1, 270, 108],
         'cell_3/comb_iter_4/right/1x1/weights': [1, 1, 108, 108],
         'cell_4/path1_conv/weights': [1, 1, 270, 54],
         'aux_5/aux_logits/proj/weights': [1, 1, 540, 128],
         'aux_5/aux_logits/Conv/weights': [4, 4, 128, 768],
         'final_layer/FC/weights': [1080, 1001]},
        5_065_568, 2_413_545),  # Published: 5.1M (PNASNet-5, N = 3, F = 54).
    'pnasnet_large': Contract(
        pnasnet.build_pnasnet_large, pnasnet.pnasnet_large_arg_scope, 331, None, False,
        {'Stem': [42, 42, 540], 'Cell_3': [42, 42, 1080], 'Cell_4': [21, 21, 2160],
         'Cell_8': [11, 11, 4320], 'Cell_11': [11, 11, 4320], 'global_pool': [4320]},
        {'cell_stem_0/comb_iter_0/right/1x1/weights': [1, 1, 96, 54],
         'cell_stem_1/path2_conv/weights': [1, 1, 96, 54],
         'cell_0/path1_conv/weights': [1, 1, 270, 108], 'cell_0/1x1/weights': [1, 1, 540, 216],
         'cell_4/comb_iter_4/right/1x1/weights': [1, 1, 432, 432],
         'cell_11/comb_iter_1/left/separable_7x7_2/depthwise_weights': [7, 7, 864, 1]},
        86_061_989, 0),  # Published: 86.1M (PNASNet-5, N = 4, F = 216).
}
# Global variables (batch norm's moving statistics included; no global step).
VARIABLE_COUNTS = {'nasnet_mobile': 1138, 'nasnet_large': 1544, 'pnasnet_mobile': 945,
                   'pnasnet_large': 1177}


def _parameters(variables, aux):
    """Number of trainable parameters in the auxiliary head (aux) or outside it."""
    return parameters(v for v in variables if v.op.name.startswith('aux_') == aux)


@pytest.mark.slow
@pytest.mark.parametrize('name', CONTRACTS)
def test_imagenet_net_contract(name):
    contract = CONTRACTS[name]
    size = contract.size
    with tf.Graph().as_default():
        with slim.arg_scope(contract.arg_scope()):
            net, end_points = contract.builder(tf.zeros([2, size, size, 3]),
                                               contract.num_classes,
                                               is_training=contract.is_training)
        variables = variable_shapes()
        trainable = tf.trainable_variables()
        weights = [name for name in variables if name.endswith('weights')]
        regularized = len(tf.losses.get_regularization_losses())
    for point, shape in contract.end_points.items():
        assert end_points[point].shape.as_list() == [2] + shape, point
    depth = contract.end_points['global_pool'][0]
    if contract.num_classes:
        assert net.shape.as_list() == [2, 1001] and end_points['Logits'] is net
        assert end_points['Predictions'].op.name == 'final_layer/predictions'
        assert variables['final_layer/FC/weights'] == [depth, 1001]
        logits_parameters = 0
    else:
        assert net is end_points['global_pool'] and net.op.name == 'final_layer/Mean'
        assert not {'Logits', 'Predictions'} & set(end_points)
        assert not any(name.startswith('final_layer/') for name in variables)
        logits_parameters = (depth + 1) * 1001  # The layer left out.
    assert ('AuxLogits' in end_points) == contract.is_training
    assert {name: variables.get(name) for name in contract.variables} == contract.variables
    assert len(variables) == VARIABLE_COUNTS[name]
    assert _parameters(trainable, aux=False) + logits_parameters == contract.parameters
    assert _parameters(trainable, aux=True) == contract.aux_parameters
    assert regularized == len(weights)  # Every convolution and fully connected weight.
    # TF-Slim's own check: cell_stem_1's h1 already has the depth its max pool needs.
    assert 'cell_stem_1/comb_iter_0/right/1x1/weights' not in variables


# Published: 3.3M (NASNet-A 6 @ 768, 10 classes). That figure has two significant digits;
# without batch norm's 37,248 scales and offsets the count is 3,309,290.
NASNET_CIFAR_PARAMETERS = 3_346_538


@pytest.mark.slow
def test_nasnet_cifar_contract():
    with tf.Graph().as_default():
        with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
            logits, end_points = nasnet.build_nasnet_cifar(tf.zeros([2, 32, 32, 3]), 10,
                                                           is_training=False)
        variables = variable_shapes()
        parameters = _parameters(tf.trainable_variables(), aux=False)
    assert logits.shape.as_list() == [2, 10]
    expected = {'Stem': [32, 32, 96], 'Reduction_Cell_0': [16, 16, 256],
                'Reduction_Cell_1': [8, 8, 512], 'global_pool': [768], 'Logits': [10],
                'Predictions': [10]}
    expected.update({f'Cell_{i}': [32 // 2 ** (i // 6)] * 2 + [192 * 2 ** (i // 6)]
                     for i in range(18)})
    assert {k: v.shape.as_list()[1:] for k, v in end_points.items()} == expected
    assert parameters == NASNET_CIFAR_PARAMETERS
    for name, shape in {
            'l1_stem_3x3/weights': [3, 3, 3, 96], 'l1_stem_bn/beta': [96],
            # cell_0 has no previous cell: its h1 is the 96-deep stem, projected for output.
            'cell_0/cell_output/reduction_1/path_conv/weights': [1, 1, 96, 32],
            'cell_0/comb_iter_0/right/separable_3x3_1/depthwise_weights': [3, 3, 96, 1],
            'cell_0/comb_iter_2/right/1x1/weights': [1, 1, 96, 32],
            'cell_1/prev_1x1/weights': [1, 1, 96, 32],
            'reduction_cell_1/comb_iter_0/right/separable_7x7_2/pointwise_weights':
                [1, 1, 128, 128],
            'final_layer/FC/weights': [768, 10]}.items():
        assert variables[name] == shape, name
    assert not any(name.startswith('aux_') for name in variables)


@pytest.mark.slow
def test_training_clones_share_variables_and_drop_path_follows_the_global_step():
    """Two training clones as model_deploy builds them (own name scopes, variables reused
    after the first); drop path drops nothing at step 0 and acts once the step has grown."""
    images = np.random.RandomState(0).rand(2, 32, 32, 3).astype(np.float32)
    steps = 10
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        global_step = tf.train.create_global_step()
        with tf.name_scope('clone_0'):
            logits, end_points = _build_small('nasnet_cifar', images=images,
                                              hparams={'total_training_steps': steps})
        variables = tf.global_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = _build_small('nasnet_cifar', images=images,
                                     hparams={'total_training_steps': steps})
        assert tf.global_variables() == variables
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            at_start = [sess.run(logits) for _ in range(2)]
            sess.run(global_step.assign(steps))
            ramped_up = [sess.run(logits) for _ in range(2)]
    assert logits.op.name.startswith('clone_0/') and second.op.name.startswith('clone_1/')
    assert end_points['AuxLogits'].shape.as_list() == [2, 10]
    np.testing.assert_array_equal(*at_start)
    assert not np.allclose(*ramped_up)
    assert np.isfinite(ramped_up).all()
