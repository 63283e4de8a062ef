"""MobileNet v2, v3 and EdgeTPU (nets.mobilenet.mobilenet_v2 and mobilenet_v3, on the
framework nets.mobilenet.mobilenet and its blocks nets.mobilenet.conv_blocks) as TF-Slim's
research/slim has them: public names and signatures, the conv_defs tables, TF-Slim's
checkpoint names and shapes, parameter counts against the published figures, depth
rounding, end points, features without logits, training_scope, a custom conv_defs,
output_stride, group normalization, reuse and one forward pass (v3 small at 64x64).

Graphs are built in a private tf.Graph; the full nets only in the slow tier, but v3 small.
"""
import collections
import functools
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets.mobilenet import conv_blocks, mobilenet, mobilenet_v2, mobilenet_v3

from helpers import parameters, variable_shapes

NUM_CLASSES = 1001  # TF-Slim's ImageNet checkpoints have a background class.
pytestmark = pytest.mark.usefixtures('fast_variable_creation')

# The builders research/slim's nets_factory registers under these names.
BUILDERS = {
    'mobilenet_v2': mobilenet_v2.mobilenet,
    'mobilenet_v2_140': mobilenet_v2.mobilenet_v2_140,
    'mobilenet_v2_035': mobilenet_v2.mobilenet_v2_035,
    'mobilenet_v3_large': mobilenet_v3.large,
    'mobilenet_v3_small': mobilenet_v3.small,
    'mobilenet_v3_large_minimalistic': mobilenet_v3.large_minimalistic,
    'mobilenet_v3_small_minimalistic': mobilenet_v3.small_minimalistic,
    'mobilenet_edgetpu': mobilenet_v3.edge_tpu,
    'mobilenet_edgetpu_075': mobilenet_v3.edge_tpu_075,
}

# research/slim's public names and the parameters of its functions, in order ('**' marks
# a **kwargs parameter).
PUBLIC = {
    mobilenet: {
        'apply_activation': ['x', 'name', 'activation_fn'],
        'depth_multiplier': ['output_params', 'multiplier', 'divisible_by', 'min_depth',
                             '**unused_kwargs'],
        'op': ['opfunc', 'multiplier_func', '**params'],
        'NoOpScope': None,
        'safe_arg_scope': ['funcs', '**kwargs'],
        'mobilenet_base': ['inputs', 'conv_defs', 'multiplier', 'final_endpoint',
                           'output_stride', 'use_explicit_padding', 'scope', 'is_training'],
        'mobilenet': ['inputs', 'num_classes', 'prediction_fn', 'reuse', 'scope', 'base_only',
                      'use_reduce_mean_for_pooling', '**mobilenet_args'],
        'global_pool': ['input_tensor', 'use_reduce_mean_for_pooling', 'pool_op'],
        'training_scope': ['is_training', 'weight_decay', 'stddev', 'dropout_keep_prob',
                           'bn_decay'],
    },
    conv_blocks: {
        'split_separable_conv2d': ['input_tensor', 'num_outputs', 'scope', 'normalizer_fn',
                                   'stride', 'rate', 'endpoints', 'use_explicit_padding'],
        'expand_input_by_factor': ['n', 'divisible_by'],
        'split_conv': ['input_tensor', 'num_outputs', 'num_ways', 'scope', 'divisible_by',
                       '**kwargs'],
        'expanded_conv': [
            'input_tensor', 'num_outputs', 'expansion_size', 'stride', 'rate', 'kernel_size',
            'residual', 'normalizer_fn', 'split_projection', 'split_expansion',
            'split_divisible_by', 'expansion_transform', 'depthwise_location',
            'depthwise_channel_multiplier', 'endpoints', 'use_explicit_padding', 'padding',
            'inner_activation_fn', 'depthwise_activation_fn', 'project_activation_fn',
            'depthwise_fn', 'expansion_fn', 'projection_fn', 'scope'],
        'squeeze_excite': ['input_tensor', 'divisible_by', 'squeeze_factor',
                           'inner_activation_fn', 'gating_fn', 'squeeze_input_tensor', 'pool'],
    },
    mobilenet_v2: {
        'op': None, 'expand_input': None, 'V2_DEF': None, 'V2_DEF_GROUP_NORM': None,
        'mobilenet': ['input_tensor', 'num_classes', 'depth_multiplier', 'scope', 'conv_defs',
                      'finegrain_classification_mode', 'min_depth', 'divisible_by',
                      'activation_fn', '**kwargs'],
        'wrapped_partial': ['func', '*args', '**kwargs'],
        'mobilenet_v2_140': None, 'mobilenet_v2_050': None, 'mobilenet_v2_035': None,
        'mobilenet_base': ['input_tensor', 'depth_multiplier', '**kwargs'],
        'mobilenet_base_group_norm': ['input_tensor', 'depth_multiplier', '**kwargs'],
        'training_scope': ['**kwargs'],
    },
    mobilenet_v3: {
        'op': None, 'expand_input': None, 'squeeze_excite': None,
        'hard_swish': ['x'],
        'reduce_to_1x1': ['input_tensor', 'default_size', '**kwargs'],
        'mbv3_op': ['ef', 'n', 'k', 's', 'act', 'se', '**kwargs'],
        'mbv3_fused': ['ef', 'n', 'k', 's', '**kwargs'],
        'mbv3_op_se': None, 'DEFAULTS': None, 'DEFAULTS_GROUP_NORM': None, 'V3_LARGE': None,
        'V3_LARGE_MINIMALISTIC': None, 'V3_SMALL': None, 'V3_SMALL_MINIMALISTIC': None,
        'V3_EDGETPU': None,
        'mobilenet': ['input_tensor', 'num_classes', 'depth_multiplier', 'scope', 'conv_defs',
                      'finegrain_classification_mode', 'use_groupnorm', '**kwargs'],
        'training_scope': ['is_training', 'weight_decay', 'stddev', 'dropout_keep_prob',
                           'bn_decay'],
        'mobilenet_base': ['input_tensor', 'depth_multiplier', '**kwargs'],
        'wrapped_partial': ['func', 'new_defaults', '**kwargs'],
        'large': None, 'small': None, 'edge_tpu': None, 'edge_tpu_075': None,
        'large_minimalistic': None, 'small_minimalistic': None, 'V3_LARGE_DETECTION': None,
        'V3_SMALL_DETECTION': None,
    },
}


def _parameter_names(func):
    kinds = {inspect.Parameter.VAR_POSITIONAL: '*', inspect.Parameter.VAR_KEYWORD: '**'}
    return [kinds.get(p.kind, '') + name for name, p in inspect.signature(func).parameters.items()]


def test_public_names_and_signatures():
    for module, names in PUBLIC.items():
        for name, expected in names.items():
            assert hasattr(module, name), f'{module.__name__}.{name}'
            if expected is not None:
                assert _parameter_names(getattr(module, name)) == expected, name
    assert mobilenet_v2.__all__ == ['training_scope', 'mobilenet_base', 'mobilenet', 'V2_DEF']
    assert set(mobilenet_v3.__all__) == {'training_scope', 'mobilenet', 'V3_LARGE', 'V3_SMALL',
                                         'large', 'small', 'V3_LARGE_DETECTION',
                                         'V3_SMALL_DETECTION'}
    builders = [*BUILDERS.values(), mobilenet_v3.mobilenet, mobilenet_v2.mobilenet_v2_050]
    assert all(builder.default_image_size == 224 for builder in builders)
    assert mobilenet_v3.edge_tpu.__name__ == mobilenet_v2.mobilenet_v2_140.__name__ == 'mobilenet'
    assert mobilenet_v2.mobilenet_v2_035.keywords == {
        'depth_multiplier': 0.35, 'finegrain_classification_mode': True}
    assert mobilenet_v3.edge_tpu_075.keywords == {
        'conv_defs': mobilenet_v3.V3_EDGETPU, 'depth_multiplier': 0.75,
        'finegrain_classification_mode': True}


@pytest.mark.parametrize('value, expected', [
    (32 * 1.0, 32), (32 * 0.35, 16),  # 8 would lose over 10% of 11.2.
    (16 * 0.35, 8), (24 * 1.4, 32), (1280 * 1.4, 1792), (80 * 184 / 80, 184),
    (16 * 72 / 16, 72), (24 * 88 / 24, 88), (3, 8), (36, 40), (28, 32),
])
def test_make_divisible(value, expected):
    assert conv_blocks.make_divisible(value, 8) == expected
    params = {'num_outputs': value}
    mobilenet.depth_multiplier(params, 1.0)
    assert params == {'num_outputs': expected}


def _spec_summary(conv_defs):
    """(function, num_outputs, stride, kernel, squeeze-excite?, hard-swish?) per layer."""
    def summary(layer):
        params = layer.params
        hard = mobilenet_v3.hard_swish in (params.get('activation_fn'),
                                           params.get('inner_activation_fn'))
        return (layer.op.__name__, params.get('num_outputs'), params.get('stride', 1),
                tuple(params.get('kernel_size', (3, 3))),
                params.get('expansion_transform') is not None, hard)
    return [summary(layer) for layer in conv_defs['spec']]


def test_conv_defs_tables():
    v2 = _spec_summary(mobilenet_v2.V2_DEF)
    assert [layer[1] for layer in v2] == [32, 16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96,
                                          96, 160, 160, 160, 320, 1280]
    assert [i for i, layer in enumerate(v2) if layer[2] == 2] == [0, 2, 4, 7, 14]
    assert _spec_summary(mobilenet_v2.V2_DEF_GROUP_NORM) == v2
    assert mobilenet_v2.V2_DEF_GROUP_NORM['defaults'][(conv_blocks.expanded_conv,)][
        'normalizer_fn'] is slim.group_norm
    tables = {'V3_LARGE': (19, 1280, 960), 'V3_SMALL': (15, 1024, 576)}
    for name, (layers, last, head) in tables.items():
        full = _spec_summary(getattr(mobilenet_v3, name))
        simple = _spec_summary(getattr(mobilenet_v3, name + '_MINIMALISTIC'))
        detection = _spec_summary(getattr(mobilenet_v3, name + '_DETECTION'))
        assert len(full) == len(simple) == len(detection) == layers
        assert [layer[-3:-1] for layer in full].count(((5, 5), True)) > 0
        assert full[-1][1] == simple[-1][1] == last and full[-3][1] == head
        assert full[-2][0] == 'reduce_to_1x1' and full[0][-1] and full[-1][-1]
        # Minimalistic: same depths and strides, 3x3 kernels, no gates, no hard-swish.
        assert [layer[:3] for layer in simple] == [layer[:3] for layer in full]
        assert not any(layer[3] == (5, 5) or layer[4] or layer[5] for layer in simple)
        # Detection: the last stage and the head at half their depth.
        halved = [i for i, (a, b) in enumerate(zip(full, detection)) if a != b]
        assert halved == list(range(layers - 6, layers - 2))
        assert all(2 * detection[i][1] == full[i][1] for i in halved)
    edgetpu = _spec_summary(mobilenet_v3.V3_EDGETPU)
    assert len(edgetpu) == 24 and edgetpu[-1][1] == 1280
    fused = [i for i, layer in enumerate(mobilenet_v3.V3_EDGETPU['spec'])
             if layer.params.get('depthwise_location', 'expansion') is None]
    assert fused == list(range(1, 10))
    assert [layer.params.get('residual') for layer in mobilenet_v3.V3_EDGETPU['spec']].count(
        False) == 1


def _custom_defs():
    """A small net of every kind of layer: a convolution, blocks without expansion, with a
    squeeze-excite gate (and a residual), with a split expansion keeping its depth, and a
    v1-style separable convolution."""
    op = mobilenet.op
    gate = functools.partial(conv_blocks.squeeze_excite, squeeze_factor=4)
    return dict(
        defaults={(slim.batch_norm,): {'center': True, 'scale': True},
                  (slim.conv2d, slim.separable_conv2d): {'normalizer_fn': slim.batch_norm,
                                                         'activation_fn': tf.nn.relu6},
                  (conv_blocks.expanded_conv,): {'normalizer_fn': slim.batch_norm}},
        spec=[op(slim.conv2d, stride=2, num_outputs=32, kernel_size=[3, 3]),
              op(conv_blocks.expanded_conv, num_outputs=16,
                 expansion_size=conv_blocks.expand_input_by_factor(1, divisible_by=1)),
              op(conv_blocks.expanded_conv, stride=2, num_outputs=48),
              op(conv_blocks.expanded_conv, num_outputs=48,
                 expansion_transform=lambda expansion_tensor, input_tensor: gate(
                     expansion_tensor)),
              op(conv_blocks.expanded_conv, num_outputs=32, split_expansion=2,
                 multiplier_func=lambda params, multiplier: None),
              op(conv_blocks.split_separable_conv2d, num_outputs=64, stride=2, scope='Sep')])


def _with_batch_norm(layer, weights, shape):
    depth = [shape[-2] if weights == 'depthwise_weights' else shape[-1]]
    return {f'Custom/{layer}/{weights}': shape,
            **{f'Custom/{layer}/BatchNorm/{v}': depth
               for v in ('beta', 'gamma', 'moving_mean', 'moving_variance')}}


CUSTOM_VARIABLES = {
    **_with_batch_norm('Conv', 'weights', [3, 3, 3, 16]),
    **_with_batch_norm('expanded_conv/depthwise', 'depthwise_weights', [3, 3, 16, 1]),
    **_with_batch_norm('expanded_conv/project', 'weights', [1, 1, 16, 8]),
    **_with_batch_norm('expanded_conv_1/expand', 'weights', [1, 1, 8, 48]),
    **_with_batch_norm('expanded_conv_1/depthwise', 'depthwise_weights', [3, 3, 48, 1]),
    **_with_batch_norm('expanded_conv_1/project', 'weights', [1, 1, 48, 24]),
    **_with_batch_norm('expanded_conv_2/expand', 'weights', [1, 1, 24, 144]),
    **_with_batch_norm('expanded_conv_2/depthwise', 'depthwise_weights', [3, 3, 144, 1]),
    'Custom/expanded_conv_2/squeeze_excite/Conv/weights': [1, 1, 144, 40],
    'Custom/expanded_conv_2/squeeze_excite/Conv/biases': [40],
    'Custom/expanded_conv_2/squeeze_excite/Conv_1/weights': [1, 1, 40, 144],
    'Custom/expanded_conv_2/squeeze_excite/Conv_1/biases': [144],
    **_with_batch_norm('expanded_conv_2/project', 'weights', [1, 1, 144, 24]),
    # 24 inputs split 16 + 8, 144 outputs 72 + 72; the block keeps its 32 outputs.
    **_with_batch_norm('expanded_conv_3/expand_part_0', 'weights', [1, 1, 16, 72]),
    **_with_batch_norm('expanded_conv_3/expand_part_1', 'weights', [1, 1, 8, 72]),
    **_with_batch_norm('expanded_conv_3/depthwise', 'depthwise_weights', [3, 3, 144, 1]),
    **_with_batch_norm('expanded_conv_3/project', 'weights', [1, 1, 144, 32]),
    # split_separable_conv2d's normalizer_fn defaults to None: biases instead.
    'Custom/Sep_depthwise/depthwise_weights': [3, 3, 32, 1],
    'Custom/Sep_depthwise/biases': [32],
    'Custom/Sep_pointwise/weights': [1, 1, 32, 32],
    'Custom/Sep_pointwise/biases': [32],
    'Custom/Logits/Conv2d_1c_1x1/weights': [1, 1, 32, 5],
    'Custom/Logits/Conv2d_1c_1x1/biases': [5],
}


def test_custom_conv_defs_with_training_scope_and_reuse():
    with tf.Graph().as_default():
        images = tf.zeros([2, 32, 32, 3])
        with slim.arg_scope(mobilenet.training_scope(is_training=False)):
            logits, end_points = mobilenet.mobilenet(images, 5, conv_defs=_custom_defs(),
                                                     multiplier=0.5, scope='Custom')
        variables = tf.global_variables()
        shapes = variable_shapes()
        regularized = len(tf.losses.get_regularization_losses())
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        again, _ = mobilenet.mobilenet(images, 5, conv_defs=_custom_defs(), multiplier=0.5,
                                       scope='Custom', reuse=True, is_training=True)
        features, features_points = mobilenet.mobilenet(
            images, None, conv_defs=_custom_defs(), multiplier=0.5, scope='Custom', reuse=True)
        assert tf.global_variables() == variables
        residual = [op.name for op in tf.get_default_graph().get_operations()
                    if op.name.startswith('Custom/') and op.name.endswith('/add')]
    assert shapes == CUSTOM_VARIABLES
    assert regularized == sum(name.endswith('/weights') for name in shapes) and not update_ops
    assert logits.op.name == 'Custom/Logits/output' and logits.shape.as_list() == [2, 5]
    assert again.op.name == 'Custom_1/Logits/output'
    assert end_points['global_pool'].shape.as_list() == [2, 1, 1, 32]
    assert features is features_points['global_pool'] and 'Logits' not in features_points
    assert residual == ['Custom/expanded_conv_2/add']
    assert {key: tensor.shape.as_list()[1:] for key, tensor in end_points.items()
            if key.startswith('layer_') and '/' not in key} == {
        'layer_1': [16, 16, 16], 'layer_2': [16, 16, 8], 'layer_3': [8, 8, 24],
        'layer_4': [8, 8, 24], 'layer_5': [8, 8, 32], 'layer_6': [4, 4, 32]}
    assert {key for key in end_points if '/' in key} == {
        'layer_2/output', 'layer_2/depthwise_output', 'layer_3/output',
        'layer_3/expansion_output', 'layer_3/depthwise_output', 'layer_4/output',
        'layer_4/expansion_output', 'layer_4/depthwise_output', 'layer_5/output',
        'layer_5/expansion_output', 'layer_5/depthwise_output',
        'layer_5/expand_part_0_output', 'layer_5/expand_part_1_output'}
    assert end_points['layer_4/output'].op.name == 'Custom/expanded_conv_2/output'


def test_training_scope():
    batch_norm = slim.arg_scope_func_key(slim.batch_norm)
    dropout = slim.arg_scope_func_key(slim.dropout)
    scope = mobilenet_v2.training_scope()
    assert scope[batch_norm] == {'decay': 0.997, 'is_training': True}
    assert scope[dropout] == {'is_training': True, 'keep_prob': 0.8}
    for builder in (mobilenet.mobilenet, mobilenet.mobilenet_base):
        assert scope[slim.arg_scope_func_key(builder)] == {'is_training': True}
    assert mobilenet_v3.training_scope(is_training=False)[batch_norm]['is_training'] is False
    unset = mobilenet.training_scope(is_training=None, bn_decay=None, dropout_keep_prob=None)
    assert batch_norm not in unset and dropout not in unset
    conv = slim.arg_scope_func_key(slim.conv2d)
    assert isinstance(scope[conv]['weights_initializer'], tf.truncated_normal_initializer)
    assert not isinstance(mobilenet.training_scope(stddev=-1)[conv]['weights_initializer'],
                          tf.truncated_normal_initializer)
    assert scope[slim.arg_scope_func_key(slim.separable_conv2d)]['weights_regularizer'] is None
    assert isinstance(mobilenet.safe_arg_scope([slim.conv2d], stride=None),
                      mobilenet.NoOpScope)


def test_global_pool():
    with tf.Graph().as_default():
        images = tf.placeholder(tf.float32, [None, None, None, 8])
        pooled = mobilenet.global_pool(images)
        mean = mobilenet.global_pool(images, use_reduce_mean_for_pooling=True)
        known = mobilenet.global_pool(tf.zeros([2, 5, 3, 8]))
        feed = np.random.RandomState(0).rand(2, 5, 3, 8)
        with tf.Session() as sess:
            pooled_run, mean_run = sess.run([pooled, mean], {images: feed})
    assert pooled.shape.as_list()[1:3] == [1, 1] and known.shape.as_list() == [2, 1, 1, 8]
    assert pooled.op.name == 'ReduceMean' and mean.op.name == 'ReduceMean_1'
    assert known.op.type == 'AvgPool'
    np.testing.assert_allclose(pooled_run, feed.mean(axis=(1, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(mean_run, pooled_run, rtol=1e-5)


def test_no_classes_returns_pooled_features():
    """num_classes 0 (or None, see the custom conv_defs' test): the pooled features."""
    with tf.Graph().as_default():
        net, end_points = mobilenet_v3.small_minimalistic(tf.zeros([2, 64, 64, 3]), 0)
        variables = variable_shapes()
    assert net is end_points['global_pool'] and net.shape.as_list() == [2, 1, 1, 1024]
    assert 'Logits' not in end_points and 'Predictions' not in end_points
    assert end_points['layer_15'].shape.as_list() == [2, 1, 1, 1024]
    assert not any(var.startswith('MobilenetV3/Logits') for var in variables)


def test_rejects_bad_arguments():
    with tf.Graph().as_default():
        images = tf.zeros([1, 32, 32, 3])
        with pytest.raises(ValueError, match='multiplier'):
            mobilenet_v3.small(images, depth_multiplier=0)
        with pytest.raises(ValueError, match='depth_multiplier'):
            mobilenet_v2.mobilenet(images, multiplier=0.5)
        with pytest.raises(ValueError, match='output_stride'):
            mobilenet_v2.mobilenet_base(images, output_stride=3)
        with pytest.raises(ValueError, match='rank 4'):
            mobilenet_v2.mobilenet(tf.zeros([32, 32, 3]))
        with pytest.raises(TypeError, match='depthwise_location'):
            conv_blocks.expanded_conv(images, 8, depthwise_location='middle')


@pytest.mark.slow
def test_forward_pass_with_a_second_clone_reusing_the_variables():
    """MobileNet v3 small (squeeze-excite, hard-swish, 5x5 kernels, the pooled head) on
    64x64 images: a training clone (batch-norm decay 0, so that one update replaces the
    initial moving statistics, under which the untrained net's activations fade to ~1e-10),
    then an evaluation clone reusing its variables."""
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        images = tf.constant(np.random.RandomState(0).rand(2, 64, 64, 3), tf.float32)
        with tf.name_scope('clone_0'), \
                slim.arg_scope(mobilenet_v3.training_scope(bn_decay=0.0)):
            train_logits, _ = mobilenet_v3.small(images, 10)
        variables = tf.global_variables()
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True), \
                slim.arg_scope(mobilenet_v3.training_scope(is_training=False)):
            eval_logits, end_points = mobilenet_v3.small(images, 10)
        assert tf.global_variables() == variables
        assert len(update_ops) == 2 * sum(v.op.name.endswith('/gamma') for v in variables)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            train_run, _ = sess.run([train_logits, update_ops])
            logits, predictions = sess.run([eval_logits, end_points['Predictions']])
            logits_again = sess.run(eval_logits)
    assert train_logits.op.name == 'clone_0/MobilenetV3/Logits/output'
    assert eval_logits.op.name == 'clone_1/MobilenetV3/Logits/output'
    assert logits.shape == (2, 10) and np.isfinite(logits).all()
    np.testing.assert_array_equal(logits, logits_again)
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(predictions, softmax, rtol=1e-5)
    # Batch statistics and dropout act in training only.
    assert np.abs(logits).mean() > 0.1 and not np.allclose(train_run, logits, rtol=1e-2)


def _build(name, size=224, num_classes=NUM_CLASSES, **kwargs):
    """Builds `name` as research/slim's nets_factory does (training_scope with weight decay,
    inference mode) on 2 zero images of side `size` in the current graph; returns
    (net, end_points)."""
    with slim.arg_scope(mobilenet_v2.training_scope(weight_decay=4e-5)):
        return BUILDERS[name](tf.zeros([2, size, size, 3]), num_classes, is_training=False,
                              **kwargs)


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
    'Built', ['variables', 'weights', 'trainable', 'regularized', 'residual', 'end_points',
              'logits'])


@functools.lru_cache(maxsize=None)
def _built(name):
    """Builds net `name` once at 224x224 with 1001 classes and weight decay; returns its
    variable shapes, parameter counts (outside batch norm; trainable), the layers whose
    weights are penalized, the numbers of the blocks that add their input, the shapes of
    its end points and the logits' op name."""
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
            {key: tensor.shape.as_list() for key, tensor in end_points.items()},
            logits.op.name)


@pytest.mark.slow
@pytest.mark.parametrize('name', COUNTS)
def test_parameter_counts_and_checkpoint_names(name):
    count, built = COUNTS[name], _built(name)
    assert (built.weights, built.trainable) == (count.weights, count.trainable)
    unit = 10 ** -(len(count.published) - 2)  # One unit of the published last digit.
    assert 0 <= built.weights / 1e6 - float(count.published) < unit
    assert built.end_points['Logits'] == built.end_points['Predictions'] == [2, NUM_CLASSES]
    assert built.logits.endswith('/Logits/output')
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


def _conv_depths(scope):
    """The output depths of the regular convolutions under `scope` in the current graph."""
    return {op.outputs[0].shape.as_list()[-1] for op in tf.get_default_graph().get_operations()
            if op.type == 'Conv2D' and op.name.startswith(scope + '/')}


@pytest.mark.slow
def test_v2_depth_options_and_training_idiom():
    """research/slim's own figures for divisible_by/min_depth and the fine-grained mode,
    and its training idiom: `with slim.arg_scope(mobilenet_v2.training_scope()):
    mobilenet_v2.mobilenet(images)` builds in training mode."""
    with tf.Graph().as_default():
        images = tf.zeros([2, 32, 32, 3])
        with slim.arg_scope((mobilenet.depth_multiplier,), min_depth=32):
            mobilenet_v2.mobilenet(images, conv_defs=mobilenet_v2.V2_DEF, divisible_by=16,
                                   scope='Divisible')
        mobilenet_v2.mobilenet(images, depth_multiplier=0.01, scope='Fine',
                               finegrain_classification_mode=True)
        assert _conv_depths('Divisible') == {32, 64, 96, 160, 192, 320, 384, 576, 960, 1280,
                                             1001}
        assert _conv_depths('Fine') == {8, 48, 1001, 1280}
        assert not tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        with slim.arg_scope(mobilenet_v2.training_scope()):
            logits, end_points = mobilenet_v2.mobilenet(images)
        batch_norms = sum(v.op.name.endswith('/gamma') for v in tf.global_variables()
                          if v.op.name.startswith('MobilenetV2/'))
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2 * batch_norms == 2 * 52
        assert len(tf.losses.get_regularization_losses()) == 36  # Conv weights, logits too.
        dropout = [op for op in tf.get_default_graph().get_operations()
                   if op.name.startswith('MobilenetV2/Logits/Dropout/')]
    assert dropout and logits.shape.as_list() == [2, 1001]
    assert len([key for key in end_points if key.endswith('/depthwise_output')]) == 17


@pytest.mark.slow
def test_output_stride_group_norm_and_v3_options():
    """The first layers of nets with output_stride (the third stride-2 layer, 'layer_8',
    dilates instead), group normalization, EdgeTPU's scope changed, and the detection
    tables' halved depths."""
    with tf.Graph().as_default():
        images = tf.zeros([1, 64, 64, 3])
        strided, _ = mobilenet.mobilenet_base(images, conv_defs=mobilenet_v2.V2_DEF,
                                              output_stride=8, use_explicit_padding=True,
                                              final_endpoint='layer_9', scope='MobilenetV2')
        grouped, _ = mobilenet_v2.mobilenet_base_group_norm(images, groups=4, scope='Grouped',
                                                            final_endpoint='layer_4')
        small, small_points = mobilenet_v3.mobilenet(
            images, conv_defs=mobilenet_v3.V3_SMALL, base_only=True, final_endpoint='layer_4',
            use_groupnorm=True, scope='Small')
        _, edge_points = mobilenet_v3.edge_tpu(images, scope='Edge', base_only=True,
                                               final_endpoint='layer_2')
        detection, _ = mobilenet_v3.mobilenet_base(
            images, conv_defs=mobilenet_v3.V3_SMALL_DETECTION, final_endpoint='layer_10',
            scope='Detection')
        variables = variable_shapes()
    assert strided.shape.as_list() == [1, 8, 8, 64]
    assert grouped.shape.as_list() == [1, 16, 16, 24]
    for scope in ('Grouped', 'Small'):
        names = [v for v in variables if v.startswith(scope + '/')]
        assert any('/GroupNorm/' in v for v in names) and not any('BatchNorm' in v for v in names)
    assert small is small_points['layer_4'] and small.shape.as_list() == [1, 8, 8, 24]
    assert 'global_pool' not in small_points
    assert edge_points['layer_2'].op.name == 'Edge/expanded_conv/output'
    assert detection.shape.as_list() == [1, 2, 2, 48]
