"""MobileNet v1 through the factory's contract: TF-Slim's checkpoint variable names and
shapes, parameter counts, features without logits, a forward pass and clone-style reuse.

Graphs are built in a private tf.Graph (eager mode stays on); only MobileNet 0.25 is run.
"""
import collections

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import build_net, regularized_variables, trainable_parameters, variable_shapes
from slim_deploy.nets import mobilenet_v1, nets_factory

CHECKPOINT_CLASSES = 1001  # TF-Slim's ImageNet checkpoints: class 0 is background.
pytestmark = pytest.mark.usefixtures('fast_variable_creation')

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
        logits, end_points = build_net(name, num_classes=1000, weight_decay=0.00004)
        shapes = variable_shapes()
        trainable = trainable_parameters()
        regularized = regularized_variables()
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
        build_net('mobilenet_v1_025', size=64)
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
        features, end_points = build_net('mobilenet_v1_050', num_classes, size=96)
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
