"""TF-Slim's ResNets v1 and v2 at slim's paths (nets.resnet_utils, nets.resnet_v1,
nets.resnet_v2): public names and signatures, the checkpoints' variable names and shapes
(derived here from the architecture), parameter totals, the classifier's options, dense
(atrous) features, reuse and forward passes.

Graphs are built in a private tf.Graph; 50-layer nets are built (a few run on 32x32 inputs),
the deeper ones only in slow tests. The semantics of the generators are checked on tiny
nets of resnet_v1_block / resnet_v2_block blocks, as TF-Slim's own tests do.
"""
import importlib
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets import resnet_utils, resnet_v1, resnet_v2

from helpers import parameters, regularized_variables, variable_shapes

pytestmark = pytest.mark.usefixtures('fast_variable_creation')

UNITS_PER_BLOCK = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3),
                   200: (3, 24, 36, 3)}
BOTTLENECK_DEPTHS = (64, 128, 256, 512)
BATCH_NORM = ('beta', 'gamma', 'moving_mean', 'moving_variance')
BUILDER_HEAD = ['inputs', 'num_classes', 'is_training', 'global_pool', 'output_stride']
SIGNATURES = {
    resnet_utils.subsample: ['inputs', 'factor', 'scope'],
    resnet_utils.conv2d_same: ['inputs', 'num_outputs', 'kernel_size', 'stride', 'rate',
                               'scope'],
    resnet_utils.stack_blocks_dense: ['net', 'blocks', 'output_stride',
                                      'store_non_strided_activations', 'outputs_collections'],
    resnet_utils.resnet_arg_scope: ['weight_decay', 'batch_norm_decay', 'batch_norm_epsilon',
                                    'batch_norm_scale', 'activation_fn', 'use_batch_norm',
                                    'batch_norm_updates_collections'],
    resnet_v1.bottleneck: ['inputs', 'depth', 'depth_bottleneck', 'stride', 'rate',
                           'outputs_collections', 'scope', 'use_bounded_activations'],
    resnet_v2.bottleneck: ['inputs', 'depth', 'depth_bottleneck', 'stride', 'rate',
                           'outputs_collections', 'scope'],
    resnet_v1.resnet_v1: ['inputs', 'blocks', 'num_classes', 'is_training', 'global_pool',
                          'output_stride', 'include_root_block', 'spatial_squeeze',
                          'store_non_strided_activations', 'reuse', 'scope'],
    resnet_v2.resnet_v2: ['inputs', 'blocks', 'num_classes', 'is_training', 'global_pool',
                          'output_stride', 'include_root_block', 'spatial_squeeze', 'reuse',
                          'scope'],
    resnet_v1.resnet_v1_block: ['scope', 'base_depth', 'num_units', 'stride'],
    resnet_v2.resnet_v2_block: ['scope', 'base_depth', 'num_units', 'stride'],
    **{getattr(resnet_v1, f'resnet_v1_{layers}'): BUILDER_HEAD + order + [
        'min_base_depth', 'depth_multiplier', 'reuse', 'scope']
       for layers, order in [
           (50, ['spatial_squeeze', 'store_non_strided_activations']),
           (101, ['spatial_squeeze', 'store_non_strided_activations']),
           (152, ['store_non_strided_activations', 'spatial_squeeze']),
           (200, ['store_non_strided_activations', 'spatial_squeeze'])]},
    **{getattr(resnet_v2, f'resnet_v2_{layers}'): BUILDER_HEAD + [
        'spatial_squeeze', 'reuse', 'scope'] for layers in UNITS_PER_BLOCK},
}


def test_public_names_signatures_and_defaults():
    for module in (resnet_utils, resnet_v1, resnet_v2):
        assert importlib.import_module(module.__name__.replace('slim_deploy.', '')) is module
    for function, names in SIGNATURES.items():
        assert list(inspect.signature(function).parameters) == names, function.__name__
    assert resnet_v1.resnet_arg_scope is resnet_v2.resnet_arg_scope \
        is resnet_utils.resnet_arg_scope
    assert resnet_utils.Block._fields == ('scope', 'unit_fn', 'args')
    with resnet_v1.NoOpScope() as nothing:
        assert nothing is None
    for module, version in [(resnet_v1, 'v1'), (resnet_v2, 'v2')]:
        generator = getattr(module, f'resnet_{version}')
        assert generator.default_image_size == 224
        for layers in UNITS_PER_BLOCK:
            builder = getattr(module, f'resnet_{version}_{layers}')
            assert builder.default_image_size == 224
            defaults = {name: parameter.default for name, parameter
                        in inspect.signature(builder).parameters.items()}
            assert defaults['scope'] == f'resnet_{version}_{layers}'
            assert (defaults['num_classes'], defaults['is_training'], defaults['global_pool'],
                    defaults['output_stride'], defaults['spatial_squeeze'],
                    defaults['reuse']) == (None, True, True, None, True, None)
            if version == 'v1':
                assert (defaults['min_base_depth'], defaults['depth_multiplier'],
                        defaults['store_non_strided_activations']) == (8, 1, False)
    assert inspect.signature(resnet_utils.resnet_arg_scope).parameters[
        'batch_norm_updates_collections'].default == tf.GraphKeys.UPDATE_OPS


def test_blocks_of_bottleneck_units():
    block = resnet_v1.resnet_v1_block('block3', base_depth=256, num_units=3, stride=2)
    assert block.scope == 'block3' and block.unit_fn is resnet_v1.bottleneck
    assert block.args == [{'depth': 1024, 'depth_bottleneck': 256, 'stride': 1}] * 2 + [
        {'depth': 1024, 'depth_bottleneck': 256, 'stride': 2}]
    assert resnet_v2.resnet_v2_block('b', 2, 1, 1) == resnet_utils.Block(
        'b', resnet_v2.bottleneck, [{'depth': 8, 'depth_bottleneck': 2, 'stride': 1}])


def checkpoint_variables(version, layers, num_classes, scope=None, base_depth=lambda d: d):
    """{name: shape} of TF-Slim's resnet_<version>_<layers> checkpoint, from the architecture.

    v1: convolutions with batch normalization, a projection shortcut where the depth changes.
    v2: the first convolution, the projections and each unit's last convolution have biases
    instead ('preact' normalizes the unit's input, 'postnorm' the last block's output).
    num_classes 0: no logits layer. base_depth maps the standard bottleneck depths."""
    scope = scope or f'resnet_{version}_{layers}'
    variables = {}

    def batch_norm(name, depth):
        variables.update({f'{name}/{statistic}': [depth] for statistic in BATCH_NORM})

    def conv(name, kernel, depth_in, depth, normalized):
        variables[f'{name}/weights'] = [kernel, kernel, depth_in, depth]
        if normalized:
            batch_norm(f'{name}/BatchNorm', depth)
        else:
            variables[f'{name}/biases'] = [depth]

    v1 = version == 'v1'
    conv(f'{scope}/conv1', 7, 3, 64, normalized=v1)
    depth_in = 64
    for block, (units, depth) in enumerate(
            zip(UNITS_PER_BLOCK[layers], map(base_depth, BOTTLENECK_DEPTHS)), start=1):
        for unit in range(1, units + 1):
            name = f'{scope}/block{block}/unit_{unit}/bottleneck_{version}'
            if not v1:
                batch_norm(f'{name}/preact', depth_in)
            if depth_in != 4 * depth:
                conv(f'{name}/shortcut', 1, depth_in, 4 * depth, normalized=v1)
            conv(f'{name}/conv1', 1, depth_in, depth, normalized=True)
            conv(f'{name}/conv2', 3, depth, depth, normalized=True)
            conv(f'{name}/conv3', 1, depth, 4 * depth, normalized=v1)
            depth_in = 4 * depth
    if not v1:
        batch_norm(f'{scope}/postnorm', depth_in)
    if num_classes:
        conv(f'{scope}/logits', 1, depth_in, num_classes, normalized=False)
    return variables


def unit_end_points(scope, version, layers):
    """The end points of the blocks and units of resnet_<version>_<layers> in `scope`."""
    names = [f'{scope}/conv1']
    for block, units in enumerate(UNITS_PER_BLOCK[layers], start=1):
        names.append(f'{scope}/block{block}')
        names.append(f'{scope}/block{block}/unit_1/bottleneck_{version}/shortcut')
        for unit in range(1, units + 1):
            unit_name = f'{scope}/block{block}/unit_{unit}/bottleneck_{version}'
            names += [unit_name] + [f'{unit_name}/conv{index}' for index in (1, 2, 3)]
    return names


def build(builder, size=32, num_classes=10, arg_scope=None, batch=2, **kwargs):
    """`builder` on `batch` random images of side `size` in its arg_scope (default:
    resnet_arg_scope()); returns (images, net, end_points)."""
    images = tf.constant(np.random.RandomState(0).rand(batch, size, size, 3), tf.float32)
    with slim.arg_scope(arg_scope or resnet_utils.resnet_arg_scope()):
        return (images, *builder(images, num_classes, **kwargs))


# (builder, classes, trainable parameters, variables). resnet_v1_50 at 1000 classes is
# TF-Slim's published 25.6M; its ResNet v2 checkpoints have 1001 classes (0: background).
CHECKPOINTS = [(resnet_v1.resnet_v1_50, 'v1', 1000, 25_557_032, 267),
               (resnet_v2.resnet_v2_50, 'v2', 1001, 25_570_409, 272)]


@pytest.mark.parametrize('builder, version, num_classes, total, count', CHECKPOINTS)
def test_resnet_50_checkpoint_variables(builder, version, num_classes, total, count):
    with tf.Graph().as_default():
        _, logits, end_points = build(builder, 64, num_classes, is_training=False)
        shapes = variable_shapes()
        trainable = parameters(tf.trainable_variables())
        model_variables = {v.op.name for v in slim.get_model_variables()}
        regularized = regularized_variables()
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    expected = checkpoint_variables(version, 50, num_classes)
    assert shapes == expected and len(shapes) == count
    assert model_variables == set(expected)
    assert trainable == total == sum(int(np.prod(shape)) for name, shape in expected.items()
                                     if 'moving_' not in name)
    assert regularized == {name for name in expected if name.endswith('/weights')}
    assert not update_ops  # is_training=False
    scope = f'resnet_{version}_50'
    assert shapes[f'{scope}/block1/unit_1/bottleneck_{version}/conv1/weights'] == [1, 1, 64, 64]
    assert logits.shape.as_list() == [2, num_classes]
    assert logits.op.name == f'{scope}/SpatialSqueeze'
    assert end_points['predictions'].op.name == f'{scope}/predictions/Reshape_1'
    assert sorted(end_points) == sorted(unit_end_points(scope, version, 50) + [
        'global_pool', f'{scope}/logits', f'{scope}/spatial_squeeze', 'predictions'])
    assert end_points[f'{scope}/block4'].shape.as_list() == [2, 2, 2, 2048]
    assert end_points['global_pool'].shape.as_list() == [2, 1, 1, 2048]
    assert end_points[f'{scope}/logits'].shape.as_list() == [2, 1, 1, num_classes]


@pytest.mark.slow
@pytest.mark.parametrize('builder, num_classes', [(resnet_v1.resnet_v1_50, 0),
                                                  (resnet_v2.resnet_v2_50, None)])
def test_resnet_50_features_without_classes(builder, num_classes):
    with tf.Graph().as_default():
        _, features, end_points = build(builder, 32, num_classes)
        names = set(variable_shapes())
    assert features.shape.as_list() == [2, 1, 1, 2048]
    assert features is end_points['global_pool']
    assert not [name for name in names if '/logits/' in name]
    assert 'predictions' not in end_points and not [e for e in end_points if 'logits' in e]


@pytest.mark.slow
@pytest.mark.parametrize('version', ['v1', 'v2'])
@pytest.mark.parametrize('layers', [101, 152, 200])
def test_deep_resnets_checkpoint_variables(version, layers):
    """The blocks of the deeper nets (units per block): their variables and end points."""
    builder = getattr(globals()[f'resnet_{version}'], f'resnet_{version}_{layers}')
    with tf.Graph().as_default():
        _, features, end_points = build(builder, 32, 0, batch=1)
        shapes = variable_shapes()
    scope = f'resnet_{version}_{layers}'
    assert shapes == checkpoint_variables(version, layers, 0)
    assert sorted(end_points) == sorted(unit_end_points(scope, version, layers)
                                        + ['global_pool'])
    assert features.shape.as_list() == [1, 1, 1, 2048]


@pytest.mark.slow
def test_resnet_v1_50_thinner_and_atrous():
    """depth_multiplier and min_base_depth thin every block; output_stride 16 on a 33x33
    input gives 3x3 features, fully convolutional logits without global pooling."""
    with tf.Graph().as_default():
        _, logits, end_points = build(
            resnet_v1.resnet_v1_50, 33, 5, batch=1, depth_multiplier=0.25, min_base_depth=32,
            global_pool=False, output_stride=16, spatial_squeeze=False, scope='thin')
        shapes = variable_shapes()
    assert shapes == checkpoint_variables('v1', 50, 5, 'thin', lambda d: max(d // 4, 32))
    assert logits.shape.as_list() == [1, 3, 3, 5]
    assert [end_points[f'thin/block{b}'].shape.as_list() for b in (1, 2, 3, 4)] == [
        [1, 5, 5, 128], [1, 3, 3, 128], [1, 3, 3, 256], [1, 3, 3, 512]]


@pytest.mark.slow
def test_resnet_50_clone_reuse_and_forward_pass():
    """resnet_v1_50 on 32x32 images: an evaluation clone and a training clone that reuses
    every variable and alone updates batch statistics; both run, softmax-consistent."""
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):
            _, eval_logits, end_points = build(resnet_v1.resnet_v1_50, is_training=False)
        variables = tf.global_variables()
        with tf.name_scope('clone_1'):
            _, train_logits, _ = build(resnet_v1.resnet_v1_50, reuse=True)
        assert tf.global_variables() == variables
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        # Moving mean and variance of the 53 batch normalizations, training clone only.
        assert len(update_ops) == 2 * 53
        assert all(op.name.startswith('clone_1/') for op in update_ops)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            logits, predictions, train = sess.run(
                [eval_logits, end_points['predictions'], train_logits])
    assert logits.shape == train.shape == (2, 10) and np.isfinite([logits, train]).all()
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    np.testing.assert_allclose(predictions, exp / exp.sum(axis=1, keepdims=True), atol=1e-6)
    # Training normalizes with the batch's statistics, evaluation with the moving ones.
    assert not np.allclose(logits, train)


def tiny_blocks(version, output_depths=(4, 8, 16, 16)):
    """Four blocks of one unit, strides 2, 2, 2, 1 like the ImageNet nets' (nominal output
    stride 32 with the root block), outputs `output_depths` deep. (The ImageNet nets'
    blocks of several units, their stride on the last, are built in test_nets.)"""
    block_fn = resnet_v1.resnet_v1_block if version == 'v1' else resnet_v2.resnet_v2_block
    return [block_fn(f'block{index}', depth // 4, 1, stride) for index, (depth, stride)
            in enumerate(zip(output_depths, (2, 2, 2, 1)), start=1)]


def tiny_resnet(version, **kwargs):
    """resnet_v1 or resnet_v2 of tiny_blocks."""
    generator = resnet_v1.resnet_v1 if version == 'v1' else resnet_v2.resnet_v2
    return lambda images, num_classes, **more: generator(
        images, tiny_blocks(version), num_classes, **kwargs, **more)


@pytest.mark.parametrize('version, global_pool, spatial_squeeze, size, shape', [
    ('v1', True, True, 64, [2, 6]),
    ('v1', True, False, 64, [2, 1, 1, 6]),
    ('v1', False, False, 65, [2, 3, 3, 6]),
    ('v1', False, True, 32, [2, 6]),  # 32x32 gives a 1x1 map: it squeezes.
    ('v2', True, False, 64, [2, 1, 1, 6]),
    ('v2', False, False, 64, [2, 2, 2, 6])])
def test_global_pool_and_spatial_squeeze(version, global_pool, spatial_squeeze, size, shape):
    with tf.Graph().as_default():
        _, logits, end_points = build(tiny_resnet(version), size, 6, global_pool=global_pool,
                                      spatial_squeeze=spatial_squeeze, scope='tiny')
    assert logits.shape.as_list() == shape
    assert end_points['predictions'].shape.as_list() == shape
    assert ('global_pool' in end_points) == global_pool
    assert ('tiny/spatial_squeeze' in end_points) == spatial_squeeze
    assert end_points['tiny/logits'].op.name == 'tiny/logits/BiasAdd'


@pytest.mark.parametrize('version, output_stride, side', [
    ('v1', None, 2), ('v1', 16, 3), ('v1', 8, 5), ('v1', 4, 9), ('v2', 8, 5)])
def test_output_stride_spatial_size(version, output_stride, side):
    """A 33x33 input gives (33 - 1) / output_stride + 1 features a side."""
    with tf.Graph().as_default():
        _, features, end_points = build(tiny_resnet(version), 33, None, global_pool=False,
                                        output_stride=output_stride, scope='tiny')
    assert features.shape.as_list() == [2, side, side, 16]
    assert end_points['tiny/block4'].shape.as_list()[1:3] == [side, side]


@pytest.mark.parametrize('output_stride, message', [
    (6, 'The output_stride needs to be a multiple of 4.'),
    (12, 'The target output_stride cannot be reached.')])
def test_unreachable_output_stride(output_stride, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        build(tiny_resnet('v1'), 32, None, output_stride=output_stride)


@pytest.mark.parametrize('version', ['v1', 'v2'])
def test_atrous_features_are_the_nominal_ones_densely(version):
    """Features at output stride 8, subsampled by 4, equal those at the nominal stride 32
    (inputs of 32k + 1 pixels align them), with the same variables."""
    with tf.Graph().as_default():
        images, nominal, _ = build(tiny_resnet(version), 65, None,
                                   is_training=False, global_pool=False, scope='tiny')
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            dense, _ = tiny_resnet(version)(images, None, is_training=False,
                                            global_pool=False, output_stride=8,
                                            scope='tiny', reuse=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            nominal, dense = sess.run([nominal, dense])
    assert nominal.shape == (2, 3, 3, 16) and dense.shape == (2, 9, 9, 16)
    np.testing.assert_allclose(dense[:, ::4, ::4], nominal, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_store_non_strided_activations():
    """The blocks' end points keep their last unit's input resolution; the output is the
    same as without."""
    shapes = {}
    for store in (False, True):
        with tf.Graph().as_default():
            _, net, end_points = build(tiny_resnet('v1'), 64, None, global_pool=False,
                                       store_non_strided_activations=store, scope='tiny')
        shapes[store] = ([end_points[f'tiny/block{b}'].shape.as_list()[1] for b in (1, 2, 3, 4)],
                         net.shape.as_list())
    assert shapes[False] == ([8, 4, 2, 2], [2, 2, 2, 16])
    assert shapes[True] == ([16, 8, 4, 2], [2, 2, 2, 16])


def test_stack_blocks_dense_without_a_root():
    """stack_blocks_dense alone: scopes '<block>/unit_<i>', the blocks' outputs collected,
    and the rootless generator's stride is the blocks' product (8 here)."""
    blocks = tiny_blocks('v1')[:2]
    with tf.Graph().as_default():
        images = tf.zeros([2, 16, 16, 3])
        with slim.arg_scope(resnet_utils.resnet_arg_scope()), tf.variable_scope('plain'):
            net = resnet_utils.stack_blocks_dense(images, blocks, outputs_collections='outs')
        outputs = slim.utils.convert_collection_to_dict('outs')
        names = set(variable_shapes())
        _, rootless, _ = build(tiny_resnet('v1'), 32, None, include_root_block=False,
                               global_pool=False, scope='rootless')
    assert list(outputs) == ['plain/block1', 'plain/block2']
    assert net.shape.as_list() == [2, 4, 4, 8]
    assert 'plain/block2/unit_1/bottleneck_v1/conv3/weights' in names
    assert rootless.shape.as_list() == [2, 4, 4, 16]


def test_conv2d_same_is_a_subsampled_stride_1_convolution():
    """conv2d_same with stride 2 equals a stride-1 'SAME' convolution subsampled by 2, for
    even and odd sizes alike (a stride-2 'SAME' convolution differs on even sizes)."""
    with tf.Graph().as_default():
        images = tf.constant(np.random.RandomState(1).rand(1, 6, 7, 2), tf.float32)
        with slim.arg_scope([slim.conv2d], activation_fn=None,
                            weights_initializer=tf.random_normal_initializer(seed=2)):
            strided = resnet_utils.conv2d_same(images, 3, 3, 2, scope='conv')
            with tf.variable_scope(tf.get_variable_scope(), reuse=True):
                dense = resnet_utils.conv2d_same(images, 3, 3, 1, scope='conv')
                same = slim.conv2d(images, 3, 3, stride=2, padding='SAME', scope='conv')
        subsampled = resnet_utils.subsample(dense, 2)
        assert resnet_utils.subsample(images, 1) is images
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            strided, subsampled, same = sess.run([strided, subsampled, same])
    assert strided.shape == subsampled.shape == (1, 3, 4, 3)
    np.testing.assert_allclose(strided, subsampled, rtol=1e-5, atol=1e-5)
    assert not np.allclose(strided[:, :, :3], same[:, :, :3])


def test_is_training_none_leaves_batch_norm_to_the_arg_scope():
    with tf.Graph().as_default():
        with slim.arg_scope([slim.batch_norm], is_training=False):
            build(tiny_resnet('v1'), 32, 3, is_training=None)
        assert not tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.Graph().as_default():
        build(tiny_resnet('v1'), 32, 3)  # is_training=True by default
        # conv1, 3 convolutions per unit and the 3 projection shortcuts.
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2 * (1 + 3 * 4 + 3)


@pytest.mark.parametrize('version', ['v1', 'v2'])
def test_arg_scope_options(version):
    """Without batch normalization the convolutions have biases; without its scale, no
    gamma; every convolution's weights carry the L2 penalty, biases none; update ops go
    where batch_norm_updates_collections says."""
    arg_scope = resnet_utils.resnet_arg_scope(weight_decay=0.01, use_batch_norm=False,
                                              activation_fn=tf.nn.relu6)
    with tf.Graph().as_default():
        build(tiny_resnet(version), 32, 3, arg_scope=arg_scope, scope='plain')
        names = set(variable_shapes())
        regularized = regularized_variables()
        relu6 = [op for op in tf.get_default_graph().get_operations() if op.type == 'Relu6']
    assert not [name for name in names if 'BatchNorm' in name]
    assert regularized == {name for name in names if name.endswith('/weights')}
    assert 'plain/block1/unit_1/bottleneck_%s/conv2/biases' % version in names
    assert relu6  # the convolutions' activation
    if version == 'v2':  # preact and postnorm are batch normalizations still
        assert 'plain/postnorm/gamma' in names
    arg_scope = resnet_utils.resnet_arg_scope(batch_norm_scale=False,
                                              batch_norm_updates_collections='bn_updates')
    with tf.Graph().as_default():
        build(tiny_resnet(version), 32, 3, arg_scope=arg_scope, scope='plain')
        names = set(variable_shapes())
        assert not tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        assert tf.get_collection('bn_updates')
    assert not [name for name in names if name.endswith('/gamma')]
    assert 'plain/block1/unit_1/bottleneck_%s/conv2/BatchNorm/beta' % version in names


def test_bounded_activations():
    """use_bounded_activations: relu6 on the projection and the output, the residual
    clipped; the unit's output stays in [0, 6]."""
    block = resnet_utils.Block('block1', resnet_v1.bottleneck, [
        {'depth': 8, 'depth_bottleneck': 2, 'stride': 2, 'use_bounded_activations': True}])
    with tf.Graph().as_default():
        images = tf.constant(100 * np.random.RandomState(3).rand(2, 8, 8, 4), tf.float32)
        with slim.arg_scope(resnet_utils.resnet_arg_scope()):
            net = resnet_utils.stack_blocks_dense(images, [block])
        types = {op.type for op in tf.get_default_graph().get_operations()}
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            net = sess.run(net)
    assert 'Relu6' in types
    assert net.shape == (2, 4, 4, 8) and net.min() >= 0 and net.max() <= 6
