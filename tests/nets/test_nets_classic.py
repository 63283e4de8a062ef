"""TF-Slim's classic nets at slim's paths (nets.alexnet, nets.overfeat, nets.vgg, nets.cifarnet,
nets.lenet): public names and signatures, checkpoint variables, end points, output op names,
features without logits, global_pool, spatial_squeeze, fc_conv_padding, reuse, initializers,
prediction_fn. (VGG-16's variables, LeNet's and CifarNet's contracts are in test_nets.py.)

Only LeNet and CifarNet run forward; the big nets build their graphs, and at most run the
initializers of small variables.
"""
import inspect

from nets import alexnet, cifarnet, lenet, overfeat, vgg
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from helpers import parameters, regularized_variables, variable_shapes

pytestmark = pytest.mark.usefixtures('fast_variable_creation')

FC_ARGS = ['inputs', 'num_classes', 'is_training', 'dropout_keep_prob', 'spatial_squeeze']


@pytest.mark.parametrize('builder, parameter_names, defaults, size', [
    (alexnet.alexnet_v2, FC_ARGS + ['scope', 'global_pool'],
     (1000, True, 0.5, True, 'alexnet_v2', False), 224),
    (overfeat.overfeat, FC_ARGS + ['scope', 'global_pool'],
     (1000, True, 0.5, True, 'overfeat', False), 231),
    *[(getattr(vgg, name), FC_ARGS + ['reuse', 'scope', 'fc_conv_padding', 'global_pool'],
       (1000, True, 0.5, True, None, name, 'VALID', False), 224)
      for name in ('vgg_a', 'vgg_16', 'vgg_19')],
    *[(module, ['images', 'num_classes', 'is_training', 'dropout_keep_prob', 'prediction_fn',
                'scope'], (10, False, 0.5, slim.softmax, scope), size)
      for module, scope, size in ((cifarnet.cifarnet, 'CifarNet', 32),
                                  (lenet.lenet, 'LeNet', 28))],
])
def test_builders_have_slims_signatures_and_default_sizes(builder, parameter_names, defaults,
                                                          size):
    parameters_ = inspect.signature(builder).parameters
    assert list(parameters_)[:len(parameter_names)] == parameter_names
    assert tuple(parameters_[name].default for name in parameter_names[1:]) == defaults
    assert builder.default_image_size == size


def test_public_names():
    assert vgg.vgg_d is vgg.vgg_16 and vgg.vgg_e is vgg.vgg_19
    arg_scopes = {alexnet.alexnet_v2_arg_scope: 0.0005, overfeat.overfeat_arg_scope: 0.0005,
                  vgg.vgg_arg_scope: 0.0005, cifarnet.cifarnet_arg_scope: 0.004,
                  lenet.lenet_arg_scope: 0.0}
    for arg_scope, weight_decay in arg_scopes.items():
        assert list(inspect.signature(arg_scope).parameters) == ['weight_decay']
        assert inspect.signature(arg_scope).parameters['weight_decay'].default == weight_decay
    for module in (alexnet, overfeat, cifarnet):
        initializer = module.trunc_normal(0.02)
        assert isinstance(initializer, tf.truncated_normal_initializer)
        assert (initializer.mean, initializer.stddev) == (0.0, 0.02)


def _layers(scope, layers):
    """{variable name: shape} of the conv layers `layers` [(name, weights shape)]."""
    shapes = {}
    for name, shape in layers:
        shapes.update({f'{scope}/{name}/weights': shape, f'{scope}/{name}/biases': shape[-1:]})
    return shapes


ALEXNET_V2_VARIABLES = _layers('alexnet_v2', [
    ('conv1', [11, 11, 3, 64]), ('conv2', [5, 5, 64, 192]), ('conv3', [3, 3, 192, 384]),
    ('conv4', [3, 3, 384, 384]), ('conv5', [3, 3, 384, 256]),
    ('fc6', [5, 5, 256, 4096]), ('fc7', [1, 1, 4096, 4096]), ('fc8', [1, 1, 4096, 1000])])
OVERFEAT_VARIABLES = _layers('overfeat', [
    ('conv1', [11, 11, 3, 64]), ('conv2', [5, 5, 64, 256]), ('conv3', [3, 3, 256, 512]),
    ('conv4', [3, 3, 512, 1024]), ('conv5', [3, 3, 1024, 1024]),
    ('fc6', [6, 6, 1024, 3072]), ('fc7', [1, 1, 3072, 4096]), ('fc8', [1, 1, 4096, 1000])])


def _vgg_variables(scope, convs_per_block):
    """VGG's variables ('vgg_19/conv3/conv3_4/weights') for 1000 classes."""
    layers, depth_in = [], 3
    for block, (depth, convs) in enumerate(zip([64, 128, 256, 512, 512], convs_per_block), 1):
        for conv in range(1, convs + 1):
            layers.append((f'conv{block}/conv{block}_{conv}', [3, 3, depth_in, depth]))
            depth_in = depth
    return _layers(scope, layers + [('fc6', [7, 7, 512, 4096]), ('fc7', [1, 1, 4096, 4096]),
                                    ('fc8', [1, 1, 4096, 1000])])


# Parameters: AlexNet v2 50.3 M (fc6 26.2 M); OverFeat (fast) 145.7 M, as its paper says
# (fc6 113.2 M); VGG-11 and VGG-19 as published (133 M, 144 M).
@pytest.mark.parametrize('builder, size, variables, count, scope, end_points', [
    (alexnet.alexnet_v2, 224, ALEXNET_V2_VARIABLES, 50_303_912, 'alexnet_v2',
     'conv1 pool1 conv2 pool2 conv3 conv4 conv5 pool5 fc6 fc7 fc8'),
    pytest.param(overfeat.overfeat, 231, OVERFEAT_VARIABLES, 145_704_424, 'overfeat',
                 'conv1 pool1 conv2 pool2 conv3 conv4 conv5 pool5 fc6 fc7 fc8',
                 marks=pytest.mark.slow),
    (vgg.vgg_a, 224, _vgg_variables('vgg_a', [1, 1, 2, 2, 2]), 132_863_336, 'vgg_a',
     'conv1/conv1_1 pool1 conv2/conv2_1 pool2 conv3/conv3_1 conv3/conv3_2 pool3 conv4/conv4_1 '
     'conv4/conv4_2 pool4 conv5/conv5_1 conv5/conv5_2 pool5 fc6 fc7 fc8'),
    pytest.param(vgg.vgg_19, 224, _vgg_variables('vgg_19', [2, 2, 4, 4, 4]), 143_667_240,
                 'vgg_19', None, marks=pytest.mark.slow),
])
def test_checkpoint_variables_end_points_and_logits(builder, size, variables, count, scope,
                                                    end_points):
    assert sum(np.prod(shape) for shape in variables.values()) == count
    with tf.Graph().as_default():
        logits, points = builder(tf.zeros([2, size, size, 3]))
        assert variable_shapes() == variables
        assert {v.op.name for v in slim.get_model_variables()} == set(variables)
        assert parameters(tf.trainable_variables()) == count
    assert logits.shape.as_list() == [2, 1000]
    assert logits.op.name == f'{scope}/fc8/squeezed'
    assert points[f'{scope}/fc8'] is logits
    if end_points:
        assert list(points) == [f'{scope}/{name}' for name in end_points.split()]
    assert points[f'{scope}/fc7'].shape.as_list() == [2, 1, 1, 4096]


@pytest.mark.parametrize('builder, size, scope, num_classes', [
    (alexnet.alexnet_v2, 224, 'alexnet_v2', 0), (overfeat.overfeat, 231, 'overfeat', None),
    (vgg.vgg_16, 224, 'vgg_16', 0)])
def test_no_classes_returns_fc7_features(builder, size, scope, num_classes):
    with tf.Graph().as_default():
        net, end_points = builder(tf.zeros([2, size, size, 3]), num_classes)
        variables = variable_shapes()
    assert net.shape.as_list() == [2, 1, 1, 4096]
    assert net.op.name.startswith(f'{scope}/fc7/')
    assert end_points[f'{scope}/fc7'] is net
    assert f'{scope}/fc7/weights' in variables
    assert not any('fc8' in name for name in list(variables) + list(end_points))


def test_global_pool_makes_any_size_classifiable():
    with tf.Graph().as_default():
        logits, end_points = alexnet.alexnet_v2(tf.zeros([1, 300, 400, 3]), 7,
                                                global_pool=True)
        features, feature_points = vgg.vgg_a(tf.zeros([1, 256, 288, 3]), 0, global_pool=True)
    assert logits.shape.as_list() == [1, 7]
    assert logits.op.name == 'alexnet_v2/fc8/squeezed'
    assert end_points['alexnet_v2/fc7'].shape.as_list() == [1, 4, 7, 4096]
    assert end_points['global_pool'].shape.as_list() == [1, 1, 1, 4096]
    assert end_points['global_pool'].op.name == 'alexnet_v2/global_pool'
    assert features is feature_points['global_pool']
    assert features.shape.as_list() == [1, 1, 1, 4096]


def test_without_spatial_squeeze_the_nets_are_fully_convolutional():
    with tf.Graph().as_default():
        alexnet_map, _ = alexnet.alexnet_v2(tf.zeros([1, 300, 400, 3]), 7,
                                            spatial_squeeze=False)
        overfeat_map, _ = overfeat.overfeat(tf.zeros([1, 281, 281, 3]), 7,
                                            spatial_squeeze=False)
        # 'VALID' fc6 maps side / 32 - 6; 'SAME' side / 32.
        valid_map, _ = vgg.vgg_a(tf.zeros([1, 256, 288, 3]), 7, spatial_squeeze=False)
        same_map, _ = vgg.vgg_a(tf.zeros([1, 64, 96, 3]), 7, spatial_squeeze=False,
                                fc_conv_padding='SAME', scope='vgg_same')
    assert alexnet_map.shape.as_list() == [1, 4, 7, 7]
    assert alexnet_map.op.name == 'alexnet_v2/fc8/BiasAdd'
    assert overfeat_map.shape.as_list() == [1, 2, 2, 7]
    assert valid_map.shape.as_list() == [1, 2, 3, 7]
    assert same_map.shape.as_list() == [1, 2, 3, 7]


def test_vgg_reuse_shares_the_variables():
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):
            first, _ = vgg.vgg_a(tf.zeros([1, 224, 224, 3]), 5, scope='net')
        variables = tf.global_variables()
        with tf.name_scope('clone_1'):
            second, end_points = vgg.vgg_a(tf.zeros([1, 224, 224, 3]), 5, scope='net',
                                           reuse=True)
        assert tf.global_variables() == variables
        with pytest.raises(ValueError, match='already exists'):
            vgg.vgg_a(tf.zeros([1, 224, 224, 3]), 5, scope='net')
    assert first.op.name == 'clone_0/net/fc8/squeezed'
    assert second.op.name == 'clone_1/net/fc8/squeezed'
    assert end_points['net/fc8'] is second


def _initial_values(names):
    """The initial values of the current graph's variables `names`, by name."""
    variables = {v.op.name: v for v in tf.global_variables() if v.op.name in names}
    with tf.Session() as sess:
        sess.run([v.initializer for v in variables.values()])
        return sess.run(variables)


@pytest.mark.parametrize('arg_scope, builder, size, conv_biases', [
    (alexnet.alexnet_v2_arg_scope, alexnet.alexnet_v2, 224, 0.1),
    (overfeat.overfeat_arg_scope, overfeat.overfeat, 231, 0.0)])
def test_alexnet_and_overfeat_initializers_and_penalties(arg_scope, builder, size,
                                                         conv_biases):
    """Their arg_scope's biases in the convolutions; fc6 and fc7 biases 0.1, fc8 biases 0;
    fc8 weights truncated normal of stddev 0.005; every weight penalized."""
    with tf.Graph().as_default():
        with slim.arg_scope(arg_scope(weight_decay=0.01)):
            builder(tf.zeros([1, size, size, 3]), 50)
        scope = builder.__name__
        values = _initial_values({f'{scope}/{layer}/biases' for layer in ('conv1', 'fc7', 'fc8')}
                                 | {f'{scope}/fc8/weights'})
        penalized = regularized_variables(f'{scope}/')
        scales = {tf.make_ndarray(loss.op.inputs[0].op.get_attr('value')).item()
                  for loss in tf.losses.get_regularization_losses()}
    assert penalized == {f'{layer}/weights' for layer in
                         'conv1 conv2 conv3 conv4 conv5 fc6 fc7 fc8'.split()}
    np.testing.assert_allclose(sorted(scales), [0.01])
    np.testing.assert_array_equal(values[f'{scope}/conv1/biases'], np.full(64, conv_biases,
                                                                          np.float32))
    np.testing.assert_array_equal(values[f'{scope}/fc7/biases'], np.full(4096, 0.1, np.float32))
    np.testing.assert_array_equal(values[f'{scope}/fc8/biases'], np.zeros(50))
    weights = values[f'{scope}/fc8/weights']
    assert np.abs(weights).max() <= 0.01  # Truncated at two standard deviations.
    assert 0.004 < weights.std() < 0.0047  # 0.88 * 0.005 for a 2-sigma truncation.


def test_vgg_arg_scope_and_no_weight_decay():
    with tf.Graph().as_default():
        with slim.arg_scope(vgg.vgg_arg_scope(weight_decay=0.0)):
            vgg.vgg_a(tf.zeros([1, 224, 224, 3]), 3)
        assert tf.losses.get_regularization_losses() == []
        values = _initial_values({'vgg_a/conv1/conv1_1/biases', 'vgg_a/fc6/biases'})
        with slim.arg_scope(vgg.vgg_arg_scope()):
            vgg.vgg_a(tf.zeros([1, 224, 224, 3]), 3, scope='decayed')
        assert len(regularized_variables('decayed/')) == 11
    assert not any(value.any() for value in values.values())


@pytest.mark.parametrize('builder, size, channels, scope, predictions_op', [
    (lenet.lenet, 28, 1, 'LeNet', 'Predictions/Reshape_1'),  # Outside LeNet's scope.
    (cifarnet.cifarnet, 32, 3, 'CifarNet', 'CifarNet/Predictions/Reshape_1')])
def test_prediction_fn(builder, size, channels, scope, predictions_op):
    calls = []

    def prediction_fn(logits, scope):
        calls.append(scope)
        return tf.nn.sigmoid(logits, name=scope)

    images = np.random.RandomState(0).rand(2, size, size, channels).astype(np.float32)
    with tf.Graph().as_default():
        logits, end_points = builder(images, 5)
        custom_logits, custom_points = builder(images, 5, prediction_fn=prediction_fn,
                                               scope='custom')
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            softmax, sigmoid, custom = sess.run([end_points['Predictions'],
                                                 custom_points['Predictions'], custom_logits])
    assert end_points['Predictions'].op.name == predictions_op
    assert logits.op.name.startswith(f'{scope}/')
    assert calls == ['Predictions']
    np.testing.assert_allclose(softmax.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(sigmoid, 1 / (1 + np.exp(-custom)), rtol=1e-5)
