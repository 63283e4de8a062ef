"""nets_factory: every registered net builds to the factory's contract; slim's maps and
get_network_fn; exact variables for LeNet, CifarNet and VGG-16; features without a logits
layer; clone-style reuse.

Graphs are built in a private tf.Graph, so eager mode stays on; only LeNet and CifarNet
are run (the big nets build their graphs only).
"""
import collections

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.nets import nets_factory, resnet_utils, resnet_v1

from helpers import parameters, variable_shapes

NUM_CLASSES = 7
NETS_WITH_AUX_LOGITS = {'inception_v3', 'inception_v4', 'inception_resnet_v2'}
VIDEO_NETS = {'i3d', 's3dg'}  # Take [batch, frames, height, width, 3].
pytestmark = pytest.mark.usefixtures('fast_variable_creation')


def _build(name, num_classes=NUM_CLASSES, size=None, **factory_kwargs):
    """Builds `name` in the current graph on a batch of 2 zero RGB images (16-frame clips
    for video nets) of side `size` (None: its default) and returns (net, end_points)."""
    network_fn = nets_factory.get_network_fn(name, num_classes, **factory_kwargs)
    size = size or network_fn.default_image_size
    frames = [16] if name in VIDEO_NETS else []
    return network_fn(tf.zeros([2, *frames, size, size, 3]))


@pytest.mark.slow
@pytest.mark.parametrize('name', nets_factory.NETWORKS)
def test_every_network_builds_logits_at_the_ends_of_its_sizes_and_no_further(name):
    # Built for training, whose auxiliary heads (NASNet's) need the larger sizes. One network
    # of each builder trains through deploy() in tests/image_classifier/test_every_network.py.
    network = nets_factory.NETWORKS[name]
    low, high = network.min_image_size, network.max_image_size
    for size in (low, high) if high else (low,):
        with tf.Graph().as_default():
            logits, end_points = _build(name, size=size, is_training=True)
        assert logits.shape.as_list() == [2, NUM_CLASSES]
        assert 'AuxLogits' in end_points or name not in NETS_WITH_AUX_LOGITS
        if 'AuxLogits' in end_points:
            assert end_points['AuxLogits'].shape.as_list() == [2, NUM_CLASSES]
    for size in ([low - 1] if low > 1 else []) + ([high + 1] if high else []):
        with tf.Graph().as_default():
            try:
                logits, _ = _build(name, size=size, is_training=True)
            except ValueError:  # A negative or unsqueezable dimension.
                continue
        assert logits.shape.as_list() != [2, NUM_CLASSES], f'{name} takes size {size}'


@pytest.mark.slow
@pytest.mark.parametrize('name', ['resnet_v1_50', 'resnet_v2_50'])
def test_the_resnets_build_converted_by_autograph(name, monkeypatch):
    """As tf.distribute's strategies convert a model function (MirroredStrategy.run): the
    builders by depth once passed their locals(), which then held autograph's own. (Built
    with one unit per block: the builders, not the units, are what is checked.)"""
    monkeypatch.setitem(resnet_utils.UNITS_PER_BLOCK, 50, (1, 1, 1, 1))
    with tf.Graph().as_default():
        logits, _ = tf.autograph.to_graph(_build)(name)
    assert logits.shape.as_list() == [2, NUM_CLASSES]


LENET_VARIABLES = {
    'LeNet/conv1/weights': [5, 5, 1, 32], 'LeNet/conv1/biases': [32],
    'LeNet/conv2/weights': [5, 5, 32, 64], 'LeNet/conv2/biases': [64],
    # 28x28 -> 14x14 -> 7x7 after the two 2x2 poolings (the convolutions keep the size).
    'LeNet/fc3/weights': [7 * 7 * 64, 1024], 'LeNet/fc3/biases': [1024],
    'LeNet/fc4/weights': [1024, 10], 'LeNet/fc4/biases': [10],
}
# conv1 5*5*1*32 + 32 = 832; conv2 5*5*32*64 + 64 = 51,264;
# fc3 3136*1024 + 1024 = 3,212,288; fc4 1024*10 + 10 = 10,250.
LENET_PARAMETERS = 832 + 51_264 + 3_212_288 + 10_250  # 3,274,634

CIFARNET_VARIABLES = {
    'CifarNet/conv1/weights': [5, 5, 3, 64], 'CifarNet/conv1/biases': [64],
    'CifarNet/conv2/weights': [5, 5, 64, 64], 'CifarNet/conv2/biases': [64],
    # 32x32 -> 16x16 -> 8x8 after the two 2x2 poolings.
    'CifarNet/fc3/weights': [8 * 8 * 64, 384], 'CifarNet/fc3/biases': [384],
    'CifarNet/fc4/weights': [384, 192], 'CifarNet/fc4/biases': [192],
    'CifarNet/logits/weights': [192, 10], 'CifarNet/logits/biases': [10],
}
# conv1 5*5*3*64 + 64 = 4,864; conv2 5*5*64*64 + 64 = 102,464;
# fc3 4096*384 + 384 = 1,573,248; fc4 384*192 + 192 = 73,920; logits 192*10 + 10 = 1,930.
CIFARNET_PARAMETERS = 4_864 + 102_464 + 1_573_248 + 73_920 + 1_930  # 1,756,426

Contract = collections.namedtuple(
    'Contract', ['image_size', 'channels', 'variables', 'parameters', 'end_points',
                 'regularized'])
CONTRACTS = {
    'lenet': Contract(
        28, 1, LENET_VARIABLES, LENET_PARAMETERS,
        ['conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3', 'dropout3', 'Logits',
         'Predictions'],
        ['conv1', 'conv2', 'fc3', 'fc4']),
    'cifarnet': Contract(
        32, 3, CIFARNET_VARIABLES, CIFARNET_PARAMETERS,
        ['conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3', 'fc4', 'Logits',
         'Predictions'],
        ['fc3', 'fc4']),  # CifarNet penalizes only its hidden fully connected layers.
}


@pytest.mark.parametrize('name', CONTRACTS)
def test_small_net_contract(name):
    contract = CONTRACTS[name]
    assert sum(np.prod(shape) for shape in contract.variables.values()) == contract.parameters
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn(name, 10, weight_decay=0.004)
        assert network_fn.default_image_size == contract.image_size
        size = contract.image_size
        _, end_points = network_fn(tf.zeros([2, size, size, contract.channels]))
        assert variable_shapes() == contract.variables
        assert tf.trainable_variables() == tf.global_variables()
        penalized = sorted(loss.op.name.split('/')[1]
                           for loss in tf.losses.get_regularization_losses())
    assert penalized == contract.regularized
    assert list(end_points) == contract.end_points


def test_no_weight_decay_adds_no_regularization_loss():
    with tf.Graph().as_default():
        _build('lenet', weight_decay=0.0)
        assert tf.losses.get_regularization_losses() == []


VGG_16_BLOCKS = [(64, 2), (128, 2), (256, 3), (512, 3), (512, 3)]  # (depth, 3x3 convs)


def _vgg_16_variables(num_classes):
    """VGG-16's variables as tf_slim names them, with shapes from the architecture."""
    variables, depth_in = {}, 3
    for block, (depth, convs) in enumerate(VGG_16_BLOCKS, start=1):
        for conv in range(1, convs + 1):
            prefix = f'vgg_16/conv{block}/conv{block}_{conv}'
            variables.update({f'{prefix}/weights': [3, 3, depth_in, depth],
                              f'{prefix}/biases': [depth]})
            depth_in = depth
    # The fully connected layers are convolutions: fc6 sees the 7x7x512 map of a 224 input.
    for layer, shape in (('fc6', [7, 7, 512, 4096]), ('fc7', [1, 1, 4096, 4096]),
                         ('fc8', [1, 1, 4096, num_classes])):
        variables.update({f'vgg_16/{layer}/weights': shape,
                          f'vgg_16/{layer}/biases': shape[-1:]})
    return variables


def test_vgg_16_contract():
    expected = _vgg_16_variables(1000)
    # 13 convolutions 14,714,688 + fc6 102,764,544 + fc7 16,781,312 + fc8 4,097,000.
    assert sum(np.prod(shape) for shape in expected.values()) == 138_357_544
    with tf.Graph().as_default():
        logits, end_points = _build('vgg_16', num_classes=1000)
        assert variable_shapes() == expected
    assert logits.shape.as_list() == [2, 1000]
    assert end_points['vgg_16/fc8'] is logits


def test_unknown_name_names_the_flag_and_lists_the_valid_names():
    with pytest.raises(UsageError) as error:
        nets_factory.get_network_fn('foo', 10)
    valid = ', '.join(sorted(nets_factory.NETWORKS))  # The set is pinned below.
    assert str(error.value) == f"unknown --model_name 'foo'; valid: {valid}"


def test_the_registry_holds_every_slim_network_and_the_keras_applications():
    keras = {'keras_resnet50', 'keras_mobilenet_v3_small', 'keras_efficientnet_b0',
             'keras_convnext_tiny'}
    assert keras <= set(nets_factory.NETWORKS)
    assert set(nets_factory.NETWORKS) - keras == set("""
        alexnet_v2 cifarnet overfeat vgg_a vgg_16 vgg_19 inception_v1 inception_v2
        inception_v3 inception_v4 inception_resnet_v2 i3d s3dg lenet resnet_v1_50
        resnet_v1_101 resnet_v1_152 resnet_v1_200 resnet_v2_50 resnet_v2_101 resnet_v2_152
        resnet_v2_200 mobilenet_v1 mobilenet_v1_075 mobilenet_v1_050 mobilenet_v1_025
        mobilenet_v2 mobilenet_v2_140 mobilenet_v2_035 mobilenet_v3_small mobilenet_v3_large
        mobilenet_v3_small_minimalistic mobilenet_v3_large_minimalistic mobilenet_edgetpu
        mobilenet_edgetpu_075 nasnet_cifar nasnet_mobile nasnet_large pnasnet_large
        pnasnet_mobile""".split())


def test_slims_maps_hold_every_network_and_get_network_fn_reads_them():
    assert list(nets_factory.networks_map) == list(nets_factory.arg_scopes_map) == list(
        nets_factory.NETWORKS)
    assert nets_factory.networks_map['resnet_v1_50'] is resnet_v1.resnet_v1_50
    assert nets_factory.arg_scopes_map['resnet_v1_50'] is resnet_v1.resnet_arg_scope
    network_fn = nets_factory.get_network_fn('resnet_v1_50', 10)
    assert network_fn.__name__ == 'resnet_v1_50'  # functools.wraps, as slim's.
    assert network_fn.default_image_size == resnet_v1.resnet_v1_50.default_image_size == 224


def test_a_network_added_to_slims_maps_builds_by_name(monkeypatch):
    """As in slim: code that puts its own net into both maps gets it from get_network_fn,
    in its arg_scope, with the factory's num_classes and is_training."""
    def tiny(images, num_classes=5, is_training=True, scope='Tiny'):
        with tf.variable_scope(scope):
            net = slim.fully_connected(slim.flatten(images), num_classes)
        return net, {'is_training': is_training}

    def tiny_arg_scope(weight_decay=0.0):
        with slim.arg_scope([slim.fully_connected], activation_fn=None,
                            weights_regularizer=slim.l2_regularizer(weight_decay)) as scope:
            return scope

    monkeypatch.setitem(nets_factory.networks_map, 'tiny', tiny)
    monkeypatch.setitem(nets_factory.arg_scopes_map, 'tiny', tiny_arg_scope)
    with tf.Graph().as_default():
        net, end_points = nets_factory.get_network_fn('tiny', 3, weight_decay=0.1)(
            tf.zeros([2, 4, 4, 1]))
        assert len(tf.losses.get_regularization_losses()) == 1
    assert net.shape.as_list() == [2, 3] and net.op.type == 'BiasAdd'
    assert end_points == {'is_training': False}


@pytest.mark.parametrize('name, num_classes, features, logits_scope', [
    ('lenet', None, [2, 1024], 'LeNet/fc4'),
    ('lenet', 0, [2, 1024], 'LeNet/fc4'),
    ('cifarnet', None, [2, 192], 'CifarNet/logits'),
    pytest.param('vgg_16', 0, [2, 1, 1, 4096], 'vgg_16/fc8', marks=pytest.mark.slow),
    pytest.param('resnet_v1_50', 0, [2, 1, 1, 2048], 'resnet_v1_50/logits',
                 marks=pytest.mark.slow),
    pytest.param('keras_mobilenet_v3_small', 0, [2, 576], 'logits', marks=pytest.mark.slow),
])
def test_no_classes_returns_features_without_a_logits_layer(name, num_classes, features,
                                                            logits_scope):
    """As the net returns them: slim's convolutional nets keep their 1x1 spatial axes."""
    with tf.Graph().as_default():
        net, end_points = _build(name, num_classes)
        variables = variable_shapes()
    assert net.shape.as_list() == features
    assert 'Logits' not in end_points and 'Predictions' not in end_points
    assert variables and not any(v.startswith(logits_scope) for v in variables)


@pytest.mark.parametrize('name', CONTRACTS)
def test_forward_pass(name):
    size, channels = CONTRACTS[name].image_size, CONTRACTS[name].channels
    images = np.random.RandomState(0).rand(2, size, size, channels).astype(np.float32)
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        eval_logits, end_points = nets_factory.get_network_fn(name, 10)(images)
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            train_logits, _ = nets_factory.get_network_fn(name, 10, is_training=True)(images)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            logits, predictions = sess.run([eval_logits, end_points['Predictions']])
            logits_again = sess.run(eval_logits)
            train_runs = [sess.run(train_logits) for _ in range(2)]
    assert logits.shape == (2, 10) and np.isfinite(logits).all()
    np.testing.assert_array_equal(logits, logits_again)  # Evaluation is deterministic.
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(predictions, softmax, rtol=1e-5)
    assert not np.allclose(*train_runs)  # Dropout acts in training only.


@pytest.mark.parametrize('name', ['lenet', 'cifarnet',
                                  pytest.param('resnet_v1_50', marks=pytest.mark.slow)])
def test_second_clone_reuses_the_variables(name):
    """Two calls as model_deploy makes them: own name scopes, variables reused after the
    first (batch-norm moving statistics included)."""
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):
            first, _ = _build(name, is_training=True)
        variables = tf.global_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = _build(name, is_training=True)
        assert tf.global_variables() == variables
    assert first.op.name.startswith('clone_0/') and second.op.name.startswith('clone_1/')
    assert second.shape.as_list() == [2, NUM_CLASSES]


# Published parameter counts (1000 classes) and names from TF-Slim's ImageNet checkpoints.
@pytest.mark.slow
@pytest.mark.parametrize('name, count, published, variables', [
    ('resnet_v1_50', 25_557_032, 25.6e6, {
        'resnet_v1_50/conv1/weights': [7, 7, 3, 64],
        'resnet_v1_50/block1/unit_1/bottleneck_v1/conv1/weights': [1, 1, 64, 64],
        'resnet_v1_50/block4/unit_3/bottleneck_v1/conv3/BatchNorm/gamma': [2048],
        'resnet_v1_50/logits/weights': [1, 1, 2048, 1000]}),
    # Without the auxiliary head, as published.
    ('inception_v3', 23_817_352, 23.8e6, {
        'InceptionV3/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
        'InceptionV3/Conv2d_1a_3x3/BatchNorm/beta': [32],
        'InceptionV3/Mixed_7c/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 2048, 192],
        'InceptionV3/Logits/Conv2d_1c_1x1/weights': [1, 1, 2048, 1000]}),
])
def test_checkpoint_names_and_published_parameter_counts(name, count, published, variables):
    with tf.Graph().as_default():
        _build(name, num_classes=1000)
        shapes = variable_shapes()
        trainable = [v for v in tf.trainable_variables() if 'AuxLogits' not in v.op.name]
        measured = parameters(trainable)
    assert {k: shapes.get(k) for k in variables} == variables
    assert measured == count
    assert abs(measured - published) / published < 0.01
