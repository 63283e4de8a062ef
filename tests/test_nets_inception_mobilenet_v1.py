"""Inception v4, Inception-ResNet v2 and MobileNet v1 through the factory's contract:
TF-Slim's checkpoint variable names and shapes, parameter counts against the published
figures, features without logits, clone-style reuse, and a MobileNet forward pass.

Graphs are built in a private tf.Graph (eager mode stays
on); only MobileNet 0.25 is run, the others build their graphs only.
"""
import collections

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import parameters, variable_shapes
from slim_deploy.nets import inception_resnet_v2, inception_v4, mobilenet_v1, nets_factory

CHECKPOINT_CLASSES = 1001  # TF-Slim's ImageNet checkpoints: class 0 is background.
pytestmark = pytest.mark.usefixtures('fast_variable_creation')


def _build(name, num_classes=CHECKPOINT_CLASSES, size=None, weight_decay=0.0,
           is_training=False, **builder_kwargs):
    """Builds `name` through the factory on 2 zero RGB images of side `size` (default: the
    net's) in the current graph; returns (net, end_points)."""
    network_fn = nets_factory.get_network_fn(name, num_classes, weight_decay, is_training)
    size = size or network_fn.default_image_size
    return network_fn(tf.zeros([2, size, size, 3]), **builder_kwargs)


def _trainable_parameters(exclude_scope=None):
    """Trainable parameters in the current graph, less those under scope '*/exclude_scope/'."""
    return parameters(v for v in tf.trainable_variables()
                      if not exclude_scope or f'/{exclude_scope}/' not in v.op.name)


def _regularized_variables(name_scope=''):
    """Names of the variables with an L2 penalty, from the names of the penalty ops
    ('<name_scope><layer>/kernel/Regularizer/...')."""
    suffixes = {'kernel': 'weights', 'bias': 'biases'}
    names = set()
    for loss in tf.losses.get_regularization_losses():
        assert loss.op.name.startswith(name_scope)
        path = loss.op.name[len(name_scope):].split('/Regularizer/')[0]
        layer, variable = path.rsplit('/', 1)
        names.add(f'{layer}/{suffixes[variable]}')
    return names


INCEPTION_V4_VARIABLES = {
    'InceptionV4/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
    'InceptionV4/Conv2d_1a_3x3/BatchNorm/beta': [32],
    'InceptionV4/Conv2d_1a_3x3/BatchNorm/moving_mean': [32],
    'InceptionV4/Conv2d_1a_3x3/BatchNorm/moving_variance': [32],
    'InceptionV4/Mixed_3a/Branch_1/Conv2d_0a_3x3/weights': [3, 3, 64, 96],
    'InceptionV4/Mixed_4a/Branch_1/Conv2d_0b_1x7/weights': [1, 7, 64, 64],
    'InceptionV4/Mixed_5a/Branch_0/Conv2d_1a_3x3/weights': [3, 3, 192, 192],
    'InceptionV4/Mixed_5e/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 384, 96],
    'InceptionV4/Mixed_6a/Branch_0/Conv2d_1a_3x3/weights': [3, 3, 384, 384],
    'InceptionV4/Mixed_6h/Branch_2/Conv2d_0e_1x7/weights': [1, 7, 224, 256],
    'InceptionV4/Mixed_7a/Branch_1/Conv2d_1a_3x3/weights': [3, 3, 320, 320],
    'InceptionV4/Mixed_7d/Branch_1/Conv2d_0c_3x1/weights': [3, 1, 384, 256],
    'InceptionV4/Mixed_7d/Branch_2/Conv2d_0e_3x1/weights': [3, 1, 512, 256],
    'InceptionV4/Mixed_7d/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 1536, 256],
    'InceptionV4/AuxLogits/Conv2d_1b_1x1/weights': [1, 1, 1024, 128],
    'InceptionV4/AuxLogits/Conv2d_2a/weights': [5, 5, 128, 768],
    'InceptionV4/AuxLogits/Aux_logits/weights': [768, 1001],
    'InceptionV4/AuxLogits/Aux_logits/biases': [1001],
    'InceptionV4/Logits/Logits/weights': [1536, 1001],
    'InceptionV4/Logits/Logits/biases': [1001],
}
INCEPTION_RESNET_V2_VARIABLES = {
    'InceptionResnetV2/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
    'InceptionResnetV2/Conv2d_4a_3x3/weights': [3, 3, 80, 192],
    'InceptionResnetV2/Conv2d_4a_3x3/BatchNorm/beta': [192],
    'InceptionResnetV2/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights': [5, 5, 48, 64],
    'InceptionResnetV2/Repeat/block35_1/Branch_0/Conv2d_1x1/weights': [1, 1, 320, 32],
    # Each residual block projects its concatenated branches back to its input's depth.
    'InceptionResnetV2/Repeat/block35_10/Conv2d_1x1/weights': [1, 1, 32 + 32 + 64, 320],
    'InceptionResnetV2/Repeat/block35_10/Conv2d_1x1/biases': [320],
    'InceptionResnetV2/Mixed_6a/Branch_1/Conv2d_1a_3x3/weights': [3, 3, 256, 384],
    'InceptionResnetV2/Repeat_1/block17_20/Branch_1/Conv2d_0c_7x1/weights': [7, 1, 160, 192],
    'InceptionResnetV2/Repeat_1/block17_20/Conv2d_1x1/weights': [1, 1, 192 + 192, 1088],
    'InceptionResnetV2/Mixed_7a/Branch_2/Conv2d_1a_3x3/weights': [3, 3, 288, 320],
    'InceptionResnetV2/Repeat_2/block8_9/Branch_1/Conv2d_0b_1x3/weights': [1, 3, 192, 224],
    'InceptionResnetV2/Block8/Conv2d_1x1/weights': [1, 1, 192 + 256, 2080],
    'InceptionResnetV2/Block8/Conv2d_1x1/biases': [2080],
    'InceptionResnetV2/Conv2d_7b_1x1/weights': [1, 1, 2080, 1536],
    'InceptionResnetV2/Conv2d_7b_1x1/BatchNorm/moving_variance': [1536],
    'InceptionResnetV2/AuxLogits/Conv2d_1b_1x1/weights': [1, 1, 1088, 128],
    'InceptionResnetV2/AuxLogits/Conv2d_2a_5x5/weights': [5, 5, 128, 768],
    'InceptionResnetV2/AuxLogits/Logits/weights': [768, 1001],
    'InceptionResnetV2/Logits/Logits/weights': [1536, 1001],
    'InceptionResnetV2/Logits/Logits/biases': [1001],
}

InceptionContract = collections.namedtuple('InceptionContract', [
    'variables', 'num_variables', 'parameters', 'biases', 'regularized', 'end_points'])
# Parameters: trainable ones with 1001 classes, without the auxiliary head (a training
# aid, left out of the published figures, which are for 1000 classes: 1,537 fewer here).
INCEPTION_CONTRACTS = {
    # 42,648,232 with 1000 classes; published 42.7M (-0.12%). No batch-norm scale, no
    # biases but the logits layers'; every weight penalized.
    'inception_v4': InceptionContract(
        INCEPTION_V4_VARIABLES, 608, 42_649_769, 2, ('/weights',),
        ['Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'Mixed_3a', 'Mixed_4a',
         'Mixed_5a', 'Mixed_5b', 'Mixed_5c', 'Mixed_5d', 'Mixed_5e', 'Mixed_6a', 'Mixed_6b',
         'Mixed_6c', 'Mixed_6d', 'Mixed_6e', 'Mixed_6f', 'Mixed_6g', 'Mixed_6h', 'Mixed_7a',
         'Mixed_7b', 'Mixed_7c', 'Mixed_7d', 'AuxLogits', 'global_pool', 'PreLogitsFlatten',
         'Logits', 'Predictions']),
    # 55,813,192 with 1000 classes (tf_keras's InceptionResNetV2 has exactly as many
    # trainable ones); published 55.8M (+0.02%). Biases in the 40 residual projections
    # (10 + 20 + 9 repeated blocks and Block8) and the logits layers; weights and biases
    # penalized.
    'inception_resnet_v2': InceptionContract(
        INCEPTION_RESNET_V2_VARIABLES, 908, 55_814_729, 40 + 2, ('/weights', '/biases'),
        ['Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'MaxPool_3a_3x3', 'Conv2d_3b_1x1',
         'Conv2d_4a_3x3', 'MaxPool_5a_3x3', 'Mixed_5b', 'Mixed_6a', 'PreAuxLogits',
         'Mixed_7a', 'Conv2d_7b_1x1', 'AuxLogits', 'global_pool', 'PreLogitsFlatten',
         'Logits', 'Predictions']),
}


@pytest.mark.slow
@pytest.mark.parametrize('name', INCEPTION_CONTRACTS)
def test_inception_checkpoint_contract_and_clone_reuse(name):
    contract = INCEPTION_CONTRACTS[name]
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):  # Evaluation mode: the same variables, faster.
            logits, end_points = _build(name, weight_decay=0.00004)
        shapes = variable_shapes()
        parameters = _trainable_parameters(exclude_scope='AuxLogits')
        regularized = _regularized_variables('clone_0/')
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = _build(name)
        assert variable_shapes() == shapes
    assert {v: shapes[v] for v in contract.variables} == contract.variables
    assert len(shapes) == contract.num_variables
    assert not any(v.endswith('/gamma') for v in shapes)
    assert len([v for v in shapes if v.endswith('/biases')]) == contract.biases
    assert parameters == contract.parameters
    assert regularized == {v for v in shapes if v.endswith(contract.regularized)}
    assert list(end_points) == contract.end_points
    assert logits.shape.as_list() == [2, CHECKPOINT_CLASSES] == second.shape.as_list()
    assert end_points['AuxLogits'].shape.as_list() == [2, CHECKPOINT_CLASSES]
    assert second.op.name.startswith('clone_1/')


@pytest.mark.slow
@pytest.mark.parametrize('name, scope, num_classes, builder_kwargs', [
    ('inception_v4', 'InceptionV4', 0, {}),
    ('inception_resnet_v2', 'InceptionResnetV2', 5, {'create_aux_logits': False}),
])
def test_inception_without_classes_or_auxiliary_head_at_the_smallest_size(
        name, scope, num_classes, builder_kwargs):
    """No classes: the pooled features and no logits layers; classes without the
    auxiliary head: the logits only. Either builds from 75x75 up (the head needs 107)."""
    with tf.Graph().as_default():
        net, end_points = _build(name, num_classes, size=75, **builder_kwargs)
        variables = variable_shapes()
    assert net.shape.as_list() == [2, num_classes or 1536]
    assert 'AuxLogits' not in end_points
    assert not any(v.startswith(f'{scope}/AuxLogits/') for v in variables)
    assert ('Logits' in end_points) == bool(num_classes)
    assert any(v.startswith(f'{scope}/Logits/') for v in variables) == bool(num_classes)


MOBILENET_DEPTHS = [32, 64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024]


def _mobilenet_variables(multiplier, num_classes):
    """MobileNet v1's variables as TF-Slim names them: 'Conv2d_0', then a depthwise 3x3 and
    a pointwise 1x1 convolution per separable layer 'Conv2d_1' ... 'Conv2d_13', each with
    batch normalization; a 1x1 convolution with biases as the classifier."""
    def thin(depth):
        return max(int(depth * multiplier), 8)

    variables = {}

    def add(layer, weights, shape, depth):
        variables[f'MobilenetV1/{layer}/{weights}'] = shape
        for statistic in ('beta', 'gamma', 'moving_mean', 'moving_variance'):
            variables[f'MobilenetV1/{layer}/BatchNorm/{statistic}'] = [depth]

    depth_in = thin(MOBILENET_DEPTHS[0])
    add('Conv2d_0', 'weights', [3, 3, 3, depth_in], depth_in)
    for index, depth in enumerate(map(thin, MOBILENET_DEPTHS[1:]), start=1):
        add(f'Conv2d_{index}_depthwise', 'depthwise_weights', [3, 3, depth_in, 1], depth_in)
        add(f'Conv2d_{index}_pointwise', 'weights', [1, 1, depth_in, depth], depth)
        depth_in = depth
    variables['MobilenetV1/Logits/Conv2d_1c_1x1/weights'] = [1, 1, depth_in, num_classes]
    variables['MobilenetV1/Logits/Conv2d_1c_1x1/biases'] = [num_classes]
    return variables


# name: (width multiplier, trainable parameters with 1000 classes). Published (TF-Slim's
# mobilenet_v1.md, in millions): 4.24, 2.59, 1.34, 0.47; ours are 0.2%, 0.2%, 0.6% and
# 0.0% below, and equal tf_keras's MobileNet(alpha=...) trainable counts.
MOBILENETS = {
    'mobilenet_v1': (1.0, 4_231_976),
    'mobilenet_v1_075': (0.75, 2_585_560),
    'mobilenet_v1_050': (0.5, 1_331_592),
    'mobilenet_v1_025': (0.25, 470_072),
}


@pytest.mark.parametrize('name', MOBILENETS)
def test_mobilenet_variables_and_parameters(name):
    multiplier, parameters = MOBILENETS[name]
    with tf.Graph().as_default():
        logits, end_points = _build(name, num_classes=1000, weight_decay=0.00004)
        shapes = variable_shapes()
        trainable = _trainable_parameters()
        regularized = _regularized_variables()
    expected = _mobilenet_variables(multiplier, 1000)
    assert shapes == expected
    assert trainable == parameters == sum(
        np.prod(shape) for variable, shape in expected.items() if 'moving_' not in variable)
    # Depthwise weights are not penalized, as in TF-Slim.
    assert regularized == {v for v in shapes if v.endswith('/weights')}
    assert logits.shape.as_list() == [2, 1000]
    assert list(end_points) == (['Conv2d_0'] + [f'Conv2d_{i}_{kind}' for i in range(1, 14)
                                                for kind in ('depthwise', 'pointwise')]
                                + ['AvgPool_1a', 'Logits', 'Predictions'])


def test_mobilenet_checkpoint_names():
    """A few names and shapes as in TF-Slim's mobilenet_v1_0.25_224 checkpoint."""
    with tf.Graph().as_default():
        _build('mobilenet_v1_025', size=64)
        shapes = variable_shapes()
    assert {name: shapes[name] for name in [
        'MobilenetV1/Conv2d_0/weights', 'MobilenetV1/Conv2d_1_depthwise/depthwise_weights',
        'MobilenetV1/Conv2d_12_depthwise/depthwise_weights',
        'MobilenetV1/Conv2d_13_pointwise/weights',
        'MobilenetV1/Conv2d_13_pointwise/BatchNorm/gamma',
        'MobilenetV1/Logits/Conv2d_1c_1x1/weights']} == {
        'MobilenetV1/Conv2d_0/weights': [3, 3, 3, 8],
        'MobilenetV1/Conv2d_1_depthwise/depthwise_weights': [3, 3, 8, 1],
        'MobilenetV1/Conv2d_12_depthwise/depthwise_weights': [3, 3, 128, 1],
        'MobilenetV1/Conv2d_13_pointwise/weights': [1, 1, 256, 256],
        'MobilenetV1/Conv2d_13_pointwise/BatchNorm/gamma': [256],
        'MobilenetV1/Logits/Conv2d_1c_1x1/weights': [1, 1, 256, CHECKPOINT_CLASSES]}


@pytest.mark.parametrize('num_classes', [0, None])
def test_mobilenet_features_without_classes(num_classes):
    with tf.Graph().as_default():
        features, end_points = _build('mobilenet_v1_050', num_classes, size=96)
        variables = variable_shapes()
    assert features.shape.as_list() == [2, 512]
    assert 'Logits' not in end_points and 'Predictions' not in end_points
    assert not any(v.startswith('MobilenetV1/Logits/') for v in variables)


def test_mobilenet_rejects_a_non_positive_width():
    with tf.Graph().as_default(), pytest.raises(
            ValueError, match='depth_multiplier must be positive, got 0'):
        mobilenet_v1.mobilenet_v1(tf.zeros([1, 32, 32, 3]), 10, depth_multiplier=0)


def test_mobilenet_forward_pass_and_clone_reuse():
    """mobilenet_v1_025 on 64x64 images: evaluation is deterministic and softmax-consistent;
    a second, training-mode clone reuses every variable and updates batch statistics."""
    images = np.random.RandomState(0).rand(2, 64, 64, 3).astype(np.float32)
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):
            eval_logits, end_points = nets_factory.get_network_fn('mobilenet_v1_025', 10)(images)
        variables = tf.global_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            train_logits, _ = nets_factory.get_network_fn(
                'mobilenet_v1_025', 10, is_training=True)(images)
        assert tf.global_variables() == variables
        # Moving mean and variance of the 27 batch normalizations, training clone only.
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        assert len(update_ops) == 2 * 27
        assert all(op.name.startswith('clone_1/') for op in update_ops)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            logits, predictions = sess.run([eval_logits, end_points['Predictions']])
            logits_again = sess.run(eval_logits)
            train = sess.run(train_logits)
    assert logits.shape == train.shape == (2, 10) and np.isfinite([logits, train]).all()
    np.testing.assert_array_equal(logits, logits_again)
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(predictions, softmax, rtol=1e-5)
    # Training normalizes with the batch's statistics, evaluation with the moving ones.
    assert not np.allclose(logits, train)
