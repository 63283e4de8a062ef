"""MobileNet v2 / v3 / EdgeTPU through the factory's contract: TF-Slim's checkpoint names
and shapes, parameter counts against the published figures, depth rounding, features
without logits, and one forward pass (MobileNet v3 small at 64x64) with clone-style reuse.

Graphs are built in a private tf.Graph; the 224x224 nets build their graphs only.
"""
import collections
import functools

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from helpers import parameters, variable_shapes
from slim_deploy.nets import nets_factory
from slim_deploy.nets.mobilenet import framework, mobilenet_v2, mobilenet_v3

NUM_CLASSES = 1001  # TF-Slim's ImageNet checkpoints have a background class.
pytestmark = pytest.mark.usefixtures('fast_variable_creation')


def _build(name, size=224, num_classes=NUM_CLASSES, **kwargs):
    """Builds `name` through the factory, with weight decay, on 2 zero images of side
    `size` in the current graph; returns (net, end_points)."""
    network_fn = nets_factory.get_network_fn(name, num_classes, weight_decay=4e-5)
    assert network_fn.default_image_size == 224
    return network_fn(tf.zeros([2, size, size, 3]), **kwargs)


Count = collections.namedtuple('Count', ['weights', 'trainable', 'published'])
# weights: trainable parameters outside batch normalization (convolution weights and
# biases), with 1001 classes: what TF-Slim's README counts. trainable adds batch-norm
# gamma and beta. published: millions, from research/slim/nets/mobilenet/README.md (v3
# small: the paper's 2.5; the README says 2.9). The figures are truncated, not rounded
# (v3 large: 5.46M is published as 5.4), so a count must lie within one unit of their
# last digit above them. The v2 and v3 counts equal those of tf_keras.applications'
# MobileNetV2/V3 (converted from these checkpoints) with 1001 classes.
COUNTS = {
    'mobilenet_v2': Count(3_472_041, 3_506_153, '3.47'),
    'mobilenet_v2_140': Count(6_062_633, 6_110_569, '6.06'),
    'mobilenet_v2_035': Count(1_664_329, 1_678_409, '1.66'),
    'mobilenet_v3_large': Count(5_459_913, 5_484_313, '5.4'),
    'mobilenet_v3_small': Count(2_531_769, 2_543_881, '2.5'),
    'mobilenet_v3_large_minimalistic': Count(3_901_169, 3_925_569, '3.9'),
    'mobilenet_v3_small_minimalistic': Count(2_033_649, 2_045_761, '2.0'),
    'mobilenet_edgetpu': Count(4_053_833, 4_092_713, '4.0'),
    'mobilenet_edgetpu_075': Count(2_959_313, 2_989_441, '2.9'),
}

Contract = collections.namedtuple(
    'Contract', ['variables', 'absent', 'layers', 'last_layer', 'residual', 'biased'])
# variables: a sample of exact names and shapes; absent: scopes that must not exist;
# layers: number of 'layer_<i>' end points; last_layer: its shape for 2 images;
# residual: the expanded_conv blocks (by number) that add their input; biased: number of
# convolutions with biases instead of batch normalization.
CONTRACTS = {
    'mobilenet_v2': Contract(
        {'MobilenetV2/Conv/weights': [3, 3, 3, 32],
         'MobilenetV2/Conv/BatchNorm/gamma': [32],
         'MobilenetV2/expanded_conv/depthwise/depthwise_weights': [3, 3, 32, 1],
         'MobilenetV2/expanded_conv/depthwise/BatchNorm/beta': [32],
         'MobilenetV2/expanded_conv/project/weights': [1, 1, 32, 16],
         'MobilenetV2/expanded_conv_1/expand/weights': [1, 1, 16, 96],
         'MobilenetV2/expanded_conv_1/expand/BatchNorm/moving_mean': [96],
         'MobilenetV2/expanded_conv_1/expand/BatchNorm/moving_variance': [96],
         'MobilenetV2/expanded_conv_16/project/weights': [1, 1, 960, 320],
         'MobilenetV2/Conv_1/weights': [1, 1, 320, 1280],
         'MobilenetV2/Logits/Conv2d_1c_1x1/weights': [1, 1, 1280, NUM_CLASSES],
         'MobilenetV2/Logits/Conv2d_1c_1x1/biases': [NUM_CLASSES]},
        ['MobilenetV2/expanded_conv/expand', 'MobilenetV2/expanded_conv_17'],
        19, [2, 7, 7, 1280], [2, 4, 5, 7, 8, 9, 11, 12, 14, 15], 1),
    'mobilenet_v3_large': Contract(
        {'MobilenetV3/Conv/weights': [3, 3, 3, 16],
         'MobilenetV3/expanded_conv/depthwise/depthwise_weights': [3, 3, 16, 1],
         'MobilenetV3/expanded_conv_3/expand/weights': [1, 1, 24, 72],
         'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [5, 5, 72, 1],
         'MobilenetV3/expanded_conv_3/squeeze_excite/Conv/weights': [1, 1, 72, 24],
         'MobilenetV3/expanded_conv_3/squeeze_excite/Conv/biases': [24],
         'MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/weights': [1, 1, 24, 72],
         'MobilenetV3/expanded_conv_3/squeeze_excite/Conv_1/biases': [72],
         'MobilenetV3/expanded_conv_8/expand/weights': [1, 1, 80, 184],
         'MobilenetV3/expanded_conv_14/project/BatchNorm/gamma': [160],
         'MobilenetV3/Conv_1/weights': [1, 1, 160, 960],
         'MobilenetV3/Conv_2/weights': [1, 1, 960, 1280],
         'MobilenetV3/Conv_2/biases': [1280],
         'MobilenetV3/Logits/Conv2d_1c_1x1/weights': [1, 1, 1280, NUM_CLASSES]},
        ['MobilenetV3/expanded_conv/expand', 'MobilenetV3/expanded_conv_2/squeeze_excite',
         'MobilenetV3/Conv_2/BatchNorm'],
        19, [2, 1, 1, 1280], [0, 2, 4, 5, 7, 8, 9, 11, 13, 14], 2 * 8 + 2),
    'mobilenet_v3_small_minimalistic': Contract(
        {'MobilenetV3/Conv/weights': [3, 3, 3, 16],
         'MobilenetV3/expanded_conv/depthwise/depthwise_weights': [3, 3, 16, 1],
         'MobilenetV3/expanded_conv_1/expand/weights': [1, 1, 16, 72],
         'MobilenetV3/expanded_conv_2/expand/weights': [1, 1, 24, 88],
         'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [3, 3, 96, 1],
         'MobilenetV3/expanded_conv_10/project/weights': [1, 1, 576, 96],
         'MobilenetV3/Conv_1/weights': [1, 1, 96, 576],
         'MobilenetV3/Conv_2/weights': [1, 1, 576, 1024],
         'MobilenetV3/Conv_2/biases': [1024],
         'MobilenetV3/Logits/Conv2d_1c_1x1/weights': [1, 1, 1024, NUM_CLASSES]},
        ['MobilenetV3/expanded_conv/expand', 'MobilenetV3/expanded_conv/squeeze_excite'],
        15, [2, 1, 1, 1024], [2, 4, 5, 7, 9, 10], 2),
    'mobilenet_edgetpu': Contract(
        {'MobilenetEdgeTPU/Conv/weights': [3, 3, 3, 32],
         'MobilenetEdgeTPU/expanded_conv/project/weights': [1, 1, 32, 16],
         'MobilenetEdgeTPU/expanded_conv_1/expand/weights': [3, 3, 16, 128],
         'MobilenetEdgeTPU/expanded_conv_8/expand/weights': [3, 3, 48, 192],
         'MobilenetEdgeTPU/expanded_conv_9/expand/weights': [1, 1, 48, 384],
         'MobilenetEdgeTPU/expanded_conv_9/depthwise/depthwise_weights': [3, 3, 384, 1],
         'MobilenetEdgeTPU/expanded_conv_17/depthwise/depthwise_weights': [5, 5, 768, 1],
         'MobilenetEdgeTPU/expanded_conv_21/project/weights': [1, 1, 1280, 192],
         'MobilenetEdgeTPU/Conv_1/weights': [1, 1, 192, 1280],
         'MobilenetEdgeTPU/Conv_1/BatchNorm/gamma': [1280],
         'MobilenetEdgeTPU/Logits/Conv2d_1c_1x1/weights': [1, 1, 1280, NUM_CLASSES]},
        # The first block does not widen its input (expansion 1): only its projection.
        ['MobilenetEdgeTPU/expanded_conv/expand', 'MobilenetEdgeTPU/expanded_conv_1/depthwise',
         'MobilenetEdgeTPU/Conv_2'],
        24, [2, 7, 7, 1280], [2, 3, 4, 6, 7, 8, 10, 11, 12, 14, 15, 16, 18, 19, 20], 1),
}
# Depth multipliers: 0.35 and 0.75 keep the 1280-channel last layer; 1.4 widens it.
VARIANT_VARIABLES = {
    'mobilenet_v2_140': {'MobilenetV2/Conv/weights': [3, 3, 3, 48],
                         'MobilenetV2/Conv_1/weights': [1, 1, 448, 1792]},
    'mobilenet_v2_035': {'MobilenetV2/Conv/weights': [3, 3, 3, 16],
                         'MobilenetV2/expanded_conv/project/weights': [1, 1, 16, 8],
                         'MobilenetV2/Conv_1/weights': [1, 1, 112, 1280]},
    'mobilenet_v3_small': {'MobilenetV3/expanded_conv/squeeze_excite/Conv/weights':
                           [1, 1, 16, 8]},
    'mobilenet_v3_large_minimalistic': {
        'MobilenetV3/expanded_conv_3/depthwise/depthwise_weights': [3, 3, 72, 1]},
    'mobilenet_edgetpu_075': {'MobilenetEdgeTPU/Conv/weights': [3, 3, 3, 24],
                              'MobilenetEdgeTPU/Conv_1/weights': [1, 1, 144, 1280]},
}


Built = collections.namedtuple(
    'Built', ['variables', 'weights', 'trainable', 'regularized', 'residual', 'end_points'])


@functools.lru_cache(maxsize=None)
def _built(name):
    """Builds net `name` once at 224x224 with 1001 classes and weight decay; returns its
    variable shapes, parameter counts (outside batch norm; trainable), the layers whose
    weights are penalized, the numbers of the blocks that add their input, and the shapes
    of its end points."""
    with tf.Graph().as_default():
        logits, end_points = _build(name)
        assert end_points['Logits'] is logits
        trainable = tf.trainable_variables()
        scope = logits.op.name.split('/')[0]
        residual = sorted(int(op.name.split('/')[1][len('expanded_conv_'):] or 0)
                          for op in tf.get_default_graph().get_operations()
                          if op.name.startswith(f'{scope}/expanded_conv')
                          and op.name.endswith('/add') and op.name.count('/') == 2)
        return Built(
            variable_shapes(),
            parameters(v for v in trainable if '/BatchNorm/' not in v.op.name),
            parameters(trainable),
            {loss.op.name.split('/kernel/Regularizer/')[0]
             for loss in tf.losses.get_regularization_losses()},
            residual,
            {key: tensor.shape.as_list() for key, tensor in end_points.items()})


@pytest.mark.slow
@pytest.mark.parametrize('name', COUNTS)
def test_parameter_counts_and_checkpoint_names(name):
    count, built = COUNTS[name], _built(name)
    assert (built.weights, built.trainable) == (count.weights, count.trainable)
    unit = 10 ** -(len(count.published) - 2)  # One unit of the published last digit.
    assert 0 <= built.weights / 1e6 - float(count.published) < unit
    assert built.end_points['Logits'] == built.end_points['Predictions'] == [2, NUM_CLASSES]
    expected = (CONTRACTS[name].variables if name in CONTRACTS
                else VARIANT_VARIABLES[name])
    assert {key: built.variables.get(key) for key in expected} == expected


@pytest.mark.slow
@pytest.mark.parametrize('name', CONTRACTS)
def test_contract(name):
    contract, built = CONTRACTS[name], _built(name)
    variables, end_points = built.variables, built.end_points
    assert not [s for s in contract.absent if any(v.startswith(s + '/') for v in variables)]
    # Batch normalization always has gamma, and replaces the biases of its convolution.
    layers = {var.rpartition('/')[0] for var in variables
              if var.endswith(('/weights', '/depthwise_weights'))}
    for layer in layers:
        has_norm = f'{layer}/BatchNorm/gamma' in variables
        assert has_norm != (f'{layer}/biases' in variables), layer
        if has_norm:
            assert {f'{layer}/BatchNorm/{v}' for v in ('beta', 'moving_mean',
                    'moving_variance')} <= set(variables), layer
    assert sum(var.endswith('/biases') for var in variables) == contract.biased
    assert len(variables) == (len(layers) + contract.biased
                              + 4 * sum(var.endswith('/gamma') for var in variables))
    # Every convolution's weights are penalized but the depthwise ones.
    assert built.regularized == {var.rpartition('/')[0] for var in variables
                                 if var.endswith('/weights')}
    assert built.residual == contract.residual
    layer_keys = [key for key in end_points if key.startswith('layer_') and '/' not in key]
    assert layer_keys == [f'layer_{i}' for i in range(1, contract.layers + 1)]
    assert end_points[layer_keys[-1]] == contract.last_layer
    assert end_points['global_pool'] == [2, 1, 1, contract.last_layer[-1]]
    # The second layer is a block; TF-Slim's end points name its inner tensors.
    assert 'layer_2/output' in end_points and 'layer_2/expansion_output' not in end_points


@pytest.mark.parametrize('value, expected', [
    (32 * 1.0, 32), (32 * 0.35, 16),  # 8 would lose over 10% of 11.2.
    (16 * 0.35, 8), (24 * 1.4, 32), (1280 * 1.4, 1792), (80 * 184 / 80, 184),
    (16 * 72 / 16, 72), (24 * 88 / 24, 88), (3, 8), (36, 40), (28, 32),
])
def test_make_divisible(value, expected):
    assert framework.make_divisible(value) == expected


def test_minimalistic_drops_squeeze_excite_hard_swish_and_5x5_kernels():
    for architecture in (mobilenet_v3.LARGE, mobilenet_v3.SMALL):
        simple = mobilenet_v3.minimalistic(architecture)
        layers = [layer for layer in simple if not isinstance(layer, framework.Pool)]
        assert len(simple) == len(architecture)
        assert all(layer.kernel <= 3 and layer.activation is tf.nn.relu for layer in layers)
        assert not any(getattr(layer, 'squeeze_excite', False) for layer in layers)


@pytest.mark.parametrize('num_classes', [None, 0])
def test_no_classes_returns_pooled_features(num_classes):
    with tf.Graph().as_default():
        net, end_points = _build('mobilenet_v3_small_minimalistic', 64, num_classes)
        variables = variable_shapes()
    assert net.shape.as_list() == [2, 1024]  # The factory squeezes the pooled [2, 1, 1, 1024].
    assert end_points['global_pool'].shape.as_list() == [2, 1, 1, 1024]
    assert 'Logits' not in end_points and 'Predictions' not in end_points
    assert not any(var.startswith('MobilenetV3/Logits') for var in variables)


def test_rejects_a_non_positive_depth_multiplier():
    with tf.Graph().as_default(), pytest.raises(ValueError, match='got 0'):
        _build('mobilenet_v3_small', 64, depth_multiplier=0)


def test_forward_pass_with_a_second_clone_reusing_the_variables():
    """MobileNet v3 small (squeeze-excite, hard-swish, 5x5 kernels, the pooled head) on
    64x64 images: a training clone, then an evaluation clone reusing its variables. Built
    without the factory to set batch-norm decay 0: one update then replaces the initial
    moving statistics (under which the untrained net's activations fade to ~1e-10) by the
    batch's."""
    images = np.random.RandomState(0).rand(2, 64, 64, 3).astype(np.float32)
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        with slim.arg_scope(framework.mobilenet_arg_scope(batch_norm_decay=0.0)):
            with tf.name_scope('clone_0'):
                train_logits, _ = mobilenet_v3.small(images, 10, is_training=True)
            variables = tf.global_variables()
            update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
            with tf.name_scope('clone_1'), \
                    tf.variable_scope(tf.get_variable_scope(), reuse=True):
                eval_logits, end_points = mobilenet_v3.small(images, 10)
        assert tf.global_variables() == variables
        assert len(update_ops) == 2 * sum(v.op.name.endswith('/gamma') for v in variables)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            train_run, _ = sess.run([train_logits, update_ops])
            logits, predictions = sess.run([eval_logits, end_points['Predictions']])
            logits_again = sess.run(eval_logits)
    assert train_logits.op.name.startswith('clone_0/MobilenetV3/')
    assert eval_logits.op.name.startswith('clone_1/MobilenetV3/')
    assert logits.shape == (2, 10) and np.isfinite(logits).all()
    np.testing.assert_array_equal(logits, logits_again)
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(predictions, softmax, rtol=1e-5)
    # Batch statistics and dropout act in training only.
    assert np.abs(logits).mean() > 0.1 and not np.allclose(train_run, logits, rtol=1e-2)
