"""MobileNet v1 (nets.mobilenet_v1) as TF-Slim's research/slim has it: its public names and
signatures, the checkpoint variable names and shapes and the parameter counts, features
without logits, pooling (global_pool, spatial_squeeze), mobilenet_v1_base (final_endpoint,
output_stride, explicit padding, custom conv_defs), the arg_scope's options, a forward pass
and clone-style reuse.

Graphs are built in a private tf.Graph (eager mode stays on); only MobileNet 0.25 is run.
"""
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets import mobilenet_v1

from helpers import parameters, variable_shapes

pytestmark = pytest.mark.usefixtures('fast_variable_creation')

CHECKPOINT_CLASSES = 1001  # TF-Slim's ImageNet checkpoints: class 0 is background.
MOBILENET_DEPTHS = [32, 64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024]
BASE_END_POINTS = ['Conv2d_0'] + [f'Conv2d_{i}_{kind}' for i in range(1, 14)
                                  for kind in ('depthwise', 'pointwise')]
# research/slim's parameters, in order.
SIGNATURES = {
    'mobilenet_v1': ['inputs', 'num_classes', 'dropout_keep_prob', 'is_training', 'min_depth',
                     'depth_multiplier', 'conv_defs', 'prediction_fn', 'spatial_squeeze',
                     'reuse', 'scope', 'global_pool'],
    'mobilenet_v1_base': ['inputs', 'final_endpoint', 'min_depth', 'depth_multiplier',
                          'conv_defs', 'output_stride', 'use_explicit_padding', 'scope'],
    'mobilenet_v1_arg_scope': ['is_training', 'weight_decay', 'stddev', 'regularize_depthwise',
                               'batch_norm_decay', 'batch_norm_epsilon',
                               'batch_norm_updates_collections', 'normalizer_fn'],
    'wrapped_partial': ['func', 'args', 'kwargs'],
}
VARIANTS = {'mobilenet_v1': 1.0, 'mobilenet_v1_075': 0.75, 'mobilenet_v1_050': 0.5,
            'mobilenet_v1_025': 0.25}


def _build(name='mobilenet_v1', num_classes=CHECKPOINT_CLASSES, images=None,
           weight_decay=0.00004, **kwargs):
    """Builds `name` as slim code does, in its arg_scope, on `images` (None: 2 zero images
    of 64x64), in inference mode unless kwargs say otherwise; returns (net, end_points)."""
    kwargs.setdefault('is_training', False)
    images = tf.zeros([2, 64, 64, 3]) if images is None else images
    with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(weight_decay=weight_decay)):
        return getattr(mobilenet_v1, name)(images, num_classes, **kwargs)


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


def test_public_names_and_signatures():
    for name, expected in SIGNATURES.items():
        assert list(inspect.signature(getattr(mobilenet_v1, name)).parameters) == expected
    assert mobilenet_v1.Conv._fields == mobilenet_v1.DepthSepConv._fields == (
        'kernel', 'stride', 'depth')
    defs = mobilenet_v1.MOBILENETV1_CONV_DEFS
    assert [layer.depth for layer in defs] == MOBILENET_DEPTHS
    assert [layer.stride for layer in defs] == [2, 1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1]
    assert type(defs[0]) is mobilenet_v1.Conv
    assert all(type(layer) is mobilenet_v1.DepthSepConv for layer in defs[1:])
    for name, multiplier in VARIANTS.items():
        builder = getattr(mobilenet_v1, name)
        assert builder.default_image_size == 224
        assert getattr(builder, 'keywords', {}).get('depth_multiplier', 1.0) == multiplier
    assert mobilenet_v1.mobilenet_v1_075.__name__ == 'mobilenet_v1'  # wrapped_partial's.


# name: trainable parameters with 1000 classes. Published (TF-Slim's mobilenet_v1.md, in
# millions): 4.24, 2.59, 1.34, 0.47; these are 0.2%, 0.2%, 0.6% and 0.0% below, and equal
# tf_keras's MobileNet(alpha=...) trainable counts.
PARAMETERS = {'mobilenet_v1': 4_231_976, 'mobilenet_v1_075': 2_585_560,
              'mobilenet_v1_050': 1_331_592, 'mobilenet_v1_025': 470_072}


# A few names and shapes as in TF-Slim's mobilenet_v1_0.25_224 checkpoint (1001 classes).
CHECKPOINT_SAMPLE = {
    'MobilenetV1/Conv2d_0/weights': [3, 3, 3, 8],
    'MobilenetV1/Conv2d_1_depthwise/depthwise_weights': [3, 3, 8, 1],
    'MobilenetV1/Conv2d_12_depthwise/depthwise_weights': [3, 3, 128, 1],
    'MobilenetV1/Conv2d_13_pointwise/weights': [1, 1, 256, 256],
    'MobilenetV1/Conv2d_13_pointwise/BatchNorm/gamma': [256],
    'MobilenetV1/Logits/Conv2d_1c_1x1/weights': [1, 1, 256, CHECKPOINT_CLASSES]}


@pytest.mark.parametrize('name', [
    'mobilenet_v1_025', *(pytest.param(name, marks=pytest.mark.slow)
                          for name in ('mobilenet_v1', 'mobilenet_v1_075', 'mobilenet_v1_050'))])
def test_variables_and_parameters(name):
    with tf.Graph().as_default():
        logits, end_points = _build(name, 1000)
        shapes = variable_shapes()
        trainable = parameters(tf.trainable_variables())
        regularized = {loss.op.name.split('/kernel/Regularizer/')[0].rpartition('/')[2]
                       for loss in tf.losses.get_regularization_losses()}
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        model_variables = slim.get_model_variables()
    expected = _mobilenet_variables(VARIANTS[name], 1000)
    assert shapes == expected
    if name == 'mobilenet_v1_025':
        assert {key: shapes[key] for key in CHECKPOINT_SAMPLE} == {
            **CHECKPOINT_SAMPLE, 'MobilenetV1/Logits/Conv2d_1c_1x1/weights': [1, 1, 256, 1000]}
    assert len(model_variables) == len(expected)
    assert trainable == PARAMETERS[name] == sum(
        np.prod(shape) for variable, shape in expected.items() if 'moving_' not in variable)
    # Depthwise weights are not penalized, as in TF-Slim; inference updates no statistics.
    assert regularized == {v.split('/')[-2] for v in shapes if v.endswith('/weights')}
    assert not update_ops
    assert logits.shape.as_list() == [2, 1000]
    assert logits.op.name == 'MobilenetV1/Logits/SpatialSqueeze'
    assert list(end_points) == BASE_END_POINTS + ['AvgPool_1a', 'Logits', 'Predictions']
    assert end_points['Predictions'].op.name.startswith('MobilenetV1/Predictions/')


@pytest.mark.slow
def test_base_parameter_count():
    """research/slim's own figure: 3,217,920 model parameters in mobilenet_v1_base with
    batch normalization's defaults (beta, moving mean and variance, no gamma)."""
    with tf.Graph().as_default():
        with slim.arg_scope([slim.conv2d, slim.separable_conv2d],
                            normalizer_fn=slim.batch_norm):
            net, end_points = mobilenet_v1.mobilenet_v1_base(tf.zeros([2, 224, 224, 3]))
        assert parameters(slim.get_model_variables()) == 3_217_920
    assert net.shape.as_list() == [2, 7, 7, 1024] and list(end_points) == BASE_END_POINTS
    assert net.op.name.startswith('MobilenetV1/Conv2d_13_pointwise/')


def test_features_without_classes():
    """num_classes 0 (or None, see the pooling test): the pooled features."""
    with tf.Graph().as_default():
        features, end_points = _build('mobilenet_v1_050', 0, tf.zeros([2, 96, 96, 3]))
        variables = variable_shapes()
    assert features.shape.as_list() == [2, 1, 1, 512]
    assert features is end_points['AvgPool_1a']
    assert features.op.name == 'MobilenetV1/Logits/AvgPool_1a/AvgPool'
    assert 'Logits' not in end_points and 'Predictions' not in end_points
    assert not any(v.startswith('MobilenetV1/Logits/') for v in variables)


def test_pooling_global_pool_and_spatial_squeeze():
    """A 7x7 window of stride 2 pools a 10x8 map to 2x1 logits unless global_pool pools it
    whole (here without classes: the features)."""
    with tf.Graph().as_default():
        images = tf.zeros([2, 320, 256, 3])
        with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope()):
            windowed, windowed_points = mobilenet_v1.mobilenet_v1_025(
                images, 5, is_training=False, spatial_squeeze=False, prediction_fn=None)
            variables = tf.global_variables()
            pooled, pooled_points = mobilenet_v1.mobilenet_v1_025(
                images, None, is_training=False, global_pool=True, reuse=True)
            assert tf.global_variables() == variables
    assert windowed_points['AvgPool_1a'].shape.as_list() == [2, 2, 1, 256]
    assert windowed.shape.as_list() == [2, 2, 1, 5] and 'Predictions' not in windowed_points
    assert windowed.op.name == 'MobilenetV1/Logits/Conv2d_1c_1x1/BiasAdd'
    assert pooled is pooled_points['global_pool'] and pooled.shape.as_list() == [2, 1, 1, 256]
    assert pooled.op.name == 'MobilenetV1_1/Logits/global_pool'
    assert not {'AvgPool_1a', 'Logits', 'Predictions'} & set(pooled_points)


@pytest.mark.parametrize('output_stride, explicit', [(8, False), (16, True)])
def test_base_output_stride_and_explicit_padding(output_stride, explicit):
    """Once the output stride is reached, later layers keep the map's size."""
    with tf.Graph().as_default():
        net, end_points = mobilenet_v1.mobilenet_v1_base(
            tf.zeros([1, 64, 64, 3]), depth_multiplier=0.25, output_stride=output_stride,
            use_explicit_padding=explicit)
        pads = [op for op in tf.get_default_graph().get_operations() if op.type == 'Pad']
    side = 64 // output_stride
    assert net.shape.as_list() == [1, side, side, 256] and list(end_points) == BASE_END_POINTS
    assert end_points['Conv2d_0'].shape.as_list() == [1, 32, 32, 8]
    assert len(pads) == (14 if explicit else 0)  # One per 3x3 convolution.


def test_base_final_endpoint():
    for final_endpoint in ['Conv2d_0', 'Conv2d_5_depthwise', 'Conv2d_9_pointwise']:
        with tf.Graph().as_default():
            net, end_points = mobilenet_v1.mobilenet_v1_base(
                tf.zeros([1, 64, 64, 3]), final_endpoint=final_endpoint, min_depth=16,
                depth_multiplier=0.25, scope='Trunk')
            scopes = {v.op.name.split('/')[1] for v in tf.global_variables()}
        index = BASE_END_POINTS.index(final_endpoint)
        assert list(end_points) == BASE_END_POINTS[:index + 1]
        assert net is end_points[final_endpoint]
        assert net.op.name.startswith(f'Trunk/{final_endpoint}/')
        assert scopes == set(BASE_END_POINTS[:index + 1])
    assert net.shape.as_list() == [1, 4, 4, 128]
    assert end_points['Conv2d_0'].shape.as_list() == [1, 32, 32, 16]  # min_depth


def test_custom_conv_defs():
    conv_defs = [mobilenet_v1.Conv(kernel=[3, 3], stride=2, depth=32),
                 mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=1, depth=64),
                 mobilenet_v1.DepthSepConv(kernel=[5, 5], stride=2, depth=128),
                 mobilenet_v1.DepthSepConv(kernel=[3, 3], stride=1, depth=512)]
    with tf.Graph().as_default():
        with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope()):
            net, end_points = mobilenet_v1.mobilenet_v1_base(
                tf.zeros([2, 32, 32, 3]), final_endpoint='Conv2d_3_pointwise',
                conv_defs=conv_defs)
        shapes = {name: shape for name, shape in variable_shapes().items()
                  if name.endswith('weights')}
        with pytest.raises(ValueError, match='Unknown final endpoint Conv2d_13_pointwise'):
            mobilenet_v1.mobilenet_v1(tf.zeros([2, 32, 32, 3]), 10, conv_defs=conv_defs,
                                      scope='Classifier')
    assert net.shape.as_list() == [2, 8, 8, 512]
    assert list(end_points) == BASE_END_POINTS[:7]
    assert shapes == {'MobilenetV1/Conv2d_0/weights': [3, 3, 3, 32],
                      'MobilenetV1/Conv2d_1_depthwise/depthwise_weights': [3, 3, 32, 1],
                      'MobilenetV1/Conv2d_1_pointwise/weights': [1, 1, 32, 64],
                      'MobilenetV1/Conv2d_2_depthwise/depthwise_weights': [5, 5, 64, 1],
                      'MobilenetV1/Conv2d_2_pointwise/weights': [1, 1, 64, 128],
                      'MobilenetV1/Conv2d_3_depthwise/depthwise_weights': [3, 3, 128, 1],
                      'MobilenetV1/Conv2d_3_pointwise/weights': [1, 1, 128, 512]}


@pytest.mark.parametrize('kwargs, message', [
    ({'depth_multiplier': 0}, 'depth_multiplier'), ({'output_stride': 4}, 'output_stride'),
    ({'final_endpoint': 'Conv2d_14_pointwise'}, 'Unknown final endpoint')])
def test_base_rejects(kwargs, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        mobilenet_v1.mobilenet_v1_base(tf.zeros([1, 32, 32, 3]),
                                       conv_defs=mobilenet_v1.MOBILENETV1_CONV_DEFS[:2],
                                       **kwargs)


def test_rejects_inputs_of_rank_3():
    with tf.Graph().as_default(), pytest.raises(ValueError, match='expected 4, was: 3'):
        mobilenet_v1.mobilenet_v1(tf.zeros([32, 32, 3]), 10)


def test_arg_scope_options():
    batch_norm = slim.arg_scope_func_key(slim.batch_norm)
    assert 'is_training' not in mobilenet_v1.mobilenet_v1_arg_scope(is_training=None)[batch_norm]
    assert mobilenet_v1.mobilenet_v1_arg_scope()[batch_norm]['is_training'] is True
    assert mobilenet_v1.mobilenet_v1_arg_scope(is_training=False)[batch_norm] == {
        'center': True, 'scale': True, 'decay': 0.9997, 'epsilon': 0.001,
        'updates_collections': tf.GraphKeys.UPDATE_OPS, 'is_training': False}
    with tf.Graph().as_default():
        with slim.arg_scope(mobilenet_v1.mobilenet_v1_arg_scope(
                regularize_depthwise=True, normalizer_fn=None)):
            mobilenet_v1.mobilenet_v1_base(tf.zeros([1, 32, 32, 3]), 'Conv2d_1_pointwise')
        names = sorted(variable_shapes())
        regularized = len(tf.losses.get_regularization_losses())
    # Without batch normalization, convolutions have biases; depthwise weights are penalized.
    assert names == sorted(f'MobilenetV1/{layer}/{kind}' for layer, weights in [
        ('Conv2d_0', 'weights'), ('Conv2d_1_depthwise', 'depthwise_weights'),
        ('Conv2d_1_pointwise', 'weights')] for kind in (weights, 'biases'))
    assert regularized == 3


def test_forward_pass_and_clone_reuse():
    """mobilenet_v1_025 on 64x64 images: evaluation is deterministic and softmax-consistent;
    a second, training-mode clone (dropout keeping all) reuses every variable and updates
    batch statistics."""
    with tf.Graph().as_default():
        images = tf.constant(np.random.RandomState(0).rand(2, 64, 64, 3), tf.float32)
        with tf.name_scope('clone_0'):
            eval_logits, end_points = _build('mobilenet_v1_025', 10, images)
        variables = tf.global_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            train_logits, _ = _build('mobilenet_v1_025', 10, images, is_training=True,
                                     dropout_keep_prob=1.0)
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
