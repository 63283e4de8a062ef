"""I3D and S3D-G (slim_deploy/nets/i3d.py, s3dg.py, i3d_utils.py) as TF-Slim's
research/slim has them: public names and signatures, the building blocks, end points and
op names, variable names and shapes, parameter counts, the documented parameters and the
errors; and the video preprocessing.

Graphs are built in a private tf.Graph, so eager mode stays on; the full-size nets build
their graphs only, the building blocks and a narrow (depth_multiplier) net on tiny clips
run.
"""
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets import i3d, i3d_utils, s3dg
from slim_deploy.preprocessing import video_preprocessing

from helpers import parameters, variable_shapes

KINETICS_CLASSES = 400
NETS = {'i3d': (i3d.i3d, i3d.i3d_arg_scope), 's3dg': (s3dg.s3dg, s3dg.s3dg_arg_scope)}
END_POINTS = ['Conv2d_1a_7x7', 'MaxPool_2a_3x3', 'Conv2d_2b_1x1', 'Conv2d_2c_3x3',
              'MaxPool_3a_3x3', 'Mixed_3b', 'Mixed_3c', 'MaxPool_4a_3x3', 'Mixed_4b',
              'Mixed_4c', 'Mixed_4d', 'Mixed_4e', 'Mixed_4f', 'MaxPool_5a_2x2', 'Mixed_5b',
              'Mixed_5c']
pytestmark = pytest.mark.usefixtures('fast_variable_creation')


def _build(name, shape=(2, 64, 224, 224, 3), num_classes=KINETICS_CLASSES,
           weight_decay=0.0, **kwargs):
    """Builds net `name` in its arg_scope in the current graph on zero videos of `shape`
    (TF-Slim's default: 64 frames of 224x224), in evaluation mode unless kwargs say
    otherwise, and returns (net, end_points)."""
    builder, arg_scope = NETS[name]
    kwargs.setdefault('is_training', False)
    with slim.arg_scope(arg_scope(weight_decay=weight_decay)):
        return builder(tf.zeros(shape), num_classes, **kwargs)


def _parameters(function):
    """{parameter: default (inspect.Parameter.empty if none)} of `function`, in order."""
    return {name: parameter.default
            for name, parameter in inspect.signature(function).parameters.items()}


EMPTY = inspect.Parameter.empty
S3DG_BACKBONE = {'first_temporal_kernel_size': 3, 'temporal_conv_startat': 'Conv2d_2c_3x3',
                 'gating_startat': 'Conv2d_2c_3x3', 'final_endpoint': 'Mixed_5c',
                 'min_depth': 16, 'depth_multiplier': 1.0}
SIGNATURES = {
    i3d.i3d: {'inputs': EMPTY, 'num_classes': 1000, 'dropout_keep_prob': 0.8,
              'is_training': True, 'prediction_fn': slim.softmax, 'spatial_squeeze': True,
              'reuse': None, 'scope': 'InceptionV1'},
    i3d.i3d_base: {'inputs': EMPTY, 'final_endpoint': 'Mixed_5c', 'scope': 'InceptionV1'},
    i3d.i3d_arg_scope: {'weight_decay': 1e-7, 'batch_norm_decay': 0.999,
                        'batch_norm_epsilon': 0.001, 'use_renorm': False,
                        'separable_conv3d': False},
    s3dg.s3dg: {'inputs': EMPTY, 'num_classes': 1000, **S3DG_BACKBONE,
                'dropout_keep_prob': 0.8, 'is_training': True, 'prediction_fn': slim.softmax,
                'spatial_squeeze': True, 'reuse': None, 'data_format': 'NDHWC',
                'scope': 'InceptionV1'},
    s3dg.s3dg_base: {'inputs': EMPTY, **S3DG_BACKBONE, 'data_format': 'NDHWC',
                     'scope': 'InceptionV1'},
    s3dg.s3dg_arg_scope: {'weight_decay': 1e-7, 'batch_norm_decay': 0.999,
                          'batch_norm_epsilon': 0.001},
    s3dg.self_gating: {'input_tensor': EMPTY, 'scope': EMPTY, 'data_format': 'NDHWC'},
    i3d_utils.center_initializer: {},
    i3d_utils.conv3d_spatiotemporal: {
        'inputs': EMPTY, 'num_outputs': EMPTY, 'kernel_size': EMPTY, 'stride': 1,
        'padding': 'SAME', 'activation_fn': None, 'normalizer_fn': None,
        'normalizer_params': None, 'weights_regularizer': None, 'separable': False,
        'data_format': 'NDHWC', 'scope': ''},
    i3d_utils.inception_block_v1_3d: {
        'inputs': EMPTY, **{f'num_outputs_{branch}': EMPTY for branch in
                            ('0_0a', '1_0a', '1_0b', '2_0a', '2_0b', '3_0b')},
        'temporal_kernel_size': 3, 'self_gating_fn': None, 'data_format': 'NDHWC', 'scope': ''},
    i3d_utils.reduced_kernel_size_3d: {'input_tensor': EMPTY, 'kernel_size': EMPTY},
}


def test_public_names_and_signatures_are_slims():
    for function, signature in SIGNATURES.items():
        assert _parameters(function) == signature, function.__name__
    assert i3d.i3d.default_image_size == s3dg.s3dg.default_image_size == 224
    # Slim's module-level aliases.
    assert i3d.conv3d_spatiotemporal is s3dg.conv3d_spatiotemporal is \
        i3d_utils.conv3d_spatiotemporal
    assert s3dg.inception_block_v1_3d is i3d_utils.inception_block_v1_3d
    assert s3dg.arg_scope is slim.arg_scope and i3d_utils.layers is slim.layers
    assert i3d_utils.add_arg_scope is slim.add_arg_scope
    for module in (i3d, s3dg):
        initializer = module.trunc_normal(0.01)
        assert isinstance(initializer, tf.truncated_normal_initializer)
        assert (initializer.mean, initializer.stddev) == (0.0, 0.01)


def _evaluate(tensors):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(tensors)


def test_conv3d_spatiotemporal_builds_one_convolution_or_a_separable_pair():
    with tf.Graph().as_default():
        clip = tf.zeros([2, 6, 12, 12, 8])
        plain = i3d_utils.conv3d_spatiotemporal(clip, 4, [3, 3, 3], scope='Plain')
        separable = i3d_utils.conv3d_spatiotemporal(clip, 4, 3, stride=[2, 2, 1],
                                                    separable=True, scope='Separable')
        spatial = i3d_utils.conv3d_spatiotemporal(clip, 4, [1, 3, 3], separable=True,
                                                  scope='Spatial')
        with slim.arg_scope(s3dg.s3dg_arg_scope()):
            normalized = i3d_utils.conv3d_spatiotemporal(clip, 4, [3, 3, 3], scope='Normalized')
        variables = variable_shapes()
        temporal_kernel = _evaluate(tf.global_variables('Separable/temporal/weights')[0])
    assert variables == {
        # No activation or normalizer by default: biases, a linear output.
        'Plain/weights': [3, 3, 3, 8, 4], 'Plain/biases': [4],
        'Separable/weights': [1, 3, 3, 8, 4], 'Separable/biases': [4],
        'Separable/temporal/weights': [3, 1, 1, 4, 4], 'Separable/temporal/biases': [4],
        'Spatial/weights': [1, 3, 3, 8, 4], 'Spatial/biases': [4],
        # s3dg's arg_scope: separable, relu; batch norm (no scale) on the spatial half only.
        'Normalized/weights': [1, 3, 3, 8, 4], 'Normalized/BatchNorm/beta': [4],
        'Normalized/BatchNorm/moving_mean': [4], 'Normalized/BatchNorm/moving_variance': [4],
        'Normalized/temporal/weights': [3, 1, 1, 4, 4], 'Normalized/temporal/biases': [4],
    }
    assert plain.op.type == 'BiasAdd' and plain.shape.as_list() == [2, 6, 12, 12, 4]
    assert separable.shape.as_list() == [2, 3, 6, 12, 4]  # Stride [time, height, width].
    assert spatial.shape.as_list() == [2, 6, 12, 12, 4]
    assert normalized.op.name == 'Normalized/temporal/Relu'
    # The temporal half starts as the identity on the center frame.
    np.testing.assert_array_equal(temporal_kernel,
                                  np.eye(4)[None, None, None] * [[[[[0]]]], [[[[1]]]], [[[[0]]]]])


@pytest.mark.parametrize('shape, dtype, message', [
    ([2, 1, 1, 4, 4], tf.float32, r'temporal kernel \[odd, 1, 1, c, c\], got shape \[2, 1'),
    ([3, 3, 1, 4, 4], tf.float32, 'got shape'),
    ([3, 1, 1, 4, 5], tf.float32, 'got shape'),
    ([3, 1, 4, 4], tf.float32, 'got shape'),
    ([3, 1, 1, 4, 4], tf.float16, 'makes float32 or bfloat16 kernels'),
])
def test_center_initializer_rejects_other_kernels(shape, dtype, message):
    with pytest.raises(ValueError, match=message):
        i3d_utils.center_initializer()(shape, dtype)


def test_center_initializer_copies_the_center_frame():
    kernel = i3d_utils.center_initializer()([5, 1, 1, 3, 3], tf.bfloat16)
    assert kernel.dtype == tf.bfloat16
    expected = np.zeros([5, 1, 1, 3, 3])
    expected[2, 0, 0] = np.eye(3)
    np.testing.assert_array_equal(tf.cast(kernel, tf.float32).numpy(), expected)


def _block_variables(scope, depths, gated):
    """An inception_block_v1_3d's variables outside an arg_scope (weights and biases) for
    `depths` of 3 input channels and 3x3x3 kernels, and the gates with `gated`."""
    d00, d10, d11, d20, d21, d30 = depths
    convs = [('Branch_0/Conv2d_0a_1x1', [1, 1, 1, 3, d00]),
             ('Branch_1/Conv2d_0a_1x1', [1, 1, 1, 3, d10]),
             ('Branch_1/Conv2d_0b_3x3', [3, 3, 3, d10, d11]),
             ('Branch_2/Conv2d_0a_1x1', [1, 1, 1, 3, d20]),
             ('Branch_2/Conv2d_0b_3x3', [3, 3, 3, d20, d21]),
             ('Branch_3/Conv2d_0b_1x1', [1, 1, 1, 3, d30])]
    variables = {}
    for name, shape in convs:
        variables[f'{scope}/{name}/weights'] = shape
        variables[f'{scope}/{name}/biases'] = shape[-1:]
        if gated and 'Conv2d_0a' not in name or gated and name.startswith('Branch_0'):
            variables[f'{scope}/{name}/self_gating/transformer_W/weights'] = \
                [1, 1, 1, shape[-1], shape[-1]]
    return variables


def test_inception_block_concatenates_four_optionally_gated_branches():
    depths = (2, 3, 4, 5, 6, 7)
    with tf.Graph().as_default(), \
            slim.arg_scope([slim.max_pool3d], stride=1, padding='SAME'):
        clip = tf.zeros([2, 4, 6, 6, 3])
        plain = i3d_utils.inception_block_v1_3d(clip, *depths, scope='Plain')
        gated = i3d_utils.inception_block_v1_3d(clip, *depths, self_gating_fn=s3dg.self_gating,
                                                scope='Gated')
        variables = variable_shapes()
    assert plain.shape.as_list() == gated.shape.as_list() == [2, 4, 6, 6, 2 + 4 + 6 + 7]
    assert plain.op.name == 'Plain/concat'
    assert variables == {**_block_variables('Plain', depths, gated=False),
                         **_block_variables('Gated', depths, gated=True)}


def test_inception_block_in_channels_first_layout():
    """data_format names the concatenated axis; the layers take theirs from the arg_scope."""
    with tf.Graph().as_default(), \
            slim.arg_scope([slim.conv3d, slim.max_pool3d, i3d_utils.conv3d_spatiotemporal],
                           stride=1, padding='SAME', data_format='NCDHW'):
        block = i3d_utils.inception_block_v1_3d(tf.zeros([2, 3, 4, 6, 6]), 2, 3, 4, 5, 6, 7,
                                                data_format='NCDHW')
    assert block.shape.as_list() == [2, 19, 4, 6, 6]


def test_self_gating_scales_channels_by_sigmoid_of_their_means():
    clip = np.random.RandomState(0).uniform(-1, 1, [2, 3, 4, 5, 6]).astype(np.float32)
    with tf.Graph().as_default():
        gated = s3dg.self_gating(tf.constant(clip), 'Block')
        unknown_frames = tf.placeholder_with_default(clip, [2, None, 4, 5, 6])
        with tf.variable_scope(tf.get_variable_scope(), reuse=True):
            gated_unknown = s3dg.self_gating(unknown_frames, 'Block')
        (weights,) = tf.global_variables()
        assert weights.op.name == 'Block/self_gating/transformer_W/weights'
        assert gated.op.name == 'Mul'  # TF-Slim's end point op name.
        output, output_unknown, kernel = _evaluate([gated, gated_unknown, weights])
    expected = clip / (1 + np.exp(-clip.mean(axis=(1, 2, 3), keepdims=True) @ kernel[0, 0, 0]))
    np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(output_unknown, expected, rtol=1e-5, atol=1e-6)


def test_reduced_kernel_size_3d_shrinks_to_the_input():
    with tf.Graph().as_default():
        assert i3d_utils.reduced_kernel_size_3d(tf.zeros([1, 1, 4, 9, 3]), [2, 7, 7]) == [1, 4, 7]
        unknown = tf.placeholder(tf.float32, [1, None, 4, 4, 3])
        assert i3d_utils.reduced_kernel_size_3d(unknown, [2, 7, 7]) == [2, 7, 7]


@pytest.mark.parametrize('builder, kwargs, message', [
    (s3dg.s3dg_base, {'first_temporal_kernel_size': 2},
     'first_temporal_kernel_size can only be 1, 3, 5 or 7, got 2'),
    (s3dg.s3dg, {'depth_multiplier': 0}, 'depth_multiplier must be greater than zero'),
    (s3dg.s3dg, {'final_endpoint': 'Mixed_6a'}, "Unknown final endpoint 'Mixed_6a'"),
    (i3d.i3d_base, {'final_endpoint': 'Logits'}, "Unknown final endpoint 'Logits'"),
    (s3dg.s3dg_base, {'data_format': 'NHWC'}, "data_format must be one of .*got 'NHWC'"),
])
def test_bad_arguments_are_rejected_before_building(builder, kwargs, message):
    with tf.Graph().as_default() as graph:
        clip = tf.zeros([2, 8, 32, 32, 3])
        operations = graph.get_operations()
        with pytest.raises(ValueError, match=message):
            builder(clip, **kwargs)
        assert graph.get_operations() == operations


def _kinds(variables, marker):
    """The layers (second path element) with a variable whose name holds `marker`."""
    return {name.split('/')[1] for name in variables if marker in name}


def test_temporal_convolutions_and_gating_start_at_the_named_blocks():
    with tf.Graph().as_default():
        clip = tf.zeros([1, 4, 32, 32, 3])
        with slim.arg_scope(s3dg.s3dg_arg_scope()):
            net, end_points = s3dg.s3dg_base(clip, temporal_conv_startat='Mixed_3b',
                                             gating_startat='Mixed_3c', final_endpoint='Mixed_3c')
            s3dg.s3dg_base(clip, temporal_conv_startat='MaxPool_4a_3x3', gating_startat=None,
                           final_endpoint='Mixed_3b', scope='Never')
        variables = variable_shapes()
    assert list(end_points) == END_POINTS[:7]
    assert net.op.name == 'InceptionV1/Mixed_3c/concat'
    assert _kinds(variables, '/temporal/') == {'Mixed_3b', 'Mixed_3c'}
    assert _kinds(variables, '/self_gating/') == {'Mixed_3c'}
    assert variables['InceptionV1/Conv2d_1a_7x7/weights'] == [3, 7, 7, 3, 64]
    assert variables['InceptionV1/Conv2d_2c_3x3/weights'] == [1, 3, 3, 64, 192]
    assert variables['InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/temporal/weights'] == \
        [3, 1, 1, 128, 128]
    # Like TF-Slim, a name that is not one of the blocks starts nothing.
    assert not any('/temporal/' in name or '/self_gating/' in name
                   for name in variables if name.startswith('Never/'))


def test_final_endpoint_ends_the_backbone():
    with tf.Graph().as_default():
        clip = tf.zeros([1, 4, 32, 32, 3])
        for index, final in enumerate(['Conv2d_1a_7x7', 'MaxPool_2a_3x3', 'Conv2d_2c_3x3']):
            with tf.variable_scope(f'I3D_{index}'):
                net, end_points = i3d.i3d_base(clip, final_endpoint=final)
            assert list(end_points) == END_POINTS[:END_POINTS.index(final) + 1]
            assert net is end_points[final]
            assert net.op.name.startswith(f'I3D_{index}/InceptionV1/{final}/')
        # A gated layer's output is TF-Slim's multiplication in the net's name scope.
        net, _ = s3dg.s3dg_base(clip, final_endpoint='Conv2d_2c_3x3')
        assert net.op.name == 'InceptionV1/Mul'


def test_layers_outside_an_arg_scope_are_slims():
    """Without the arg_scope, conv3d_spatiotemporal layers (Conv2d_1a_7x7 and the 3x3
    ones) are linear with biases, as TF-Slim's; the 1x1 ones are slim.conv3d's relu; the
    temporal convolutions are full 3x3x3 ones (separable only in the arg_scope)."""
    with tf.Graph().as_default():
        clip = tf.zeros([1, 4, 32, 32, 3])
        _, i3d_points = i3d.i3d_base(clip, final_endpoint='Conv2d_2c_3x3', scope='I3D')
        _, s3dg_points = s3dg.s3dg_base(clip, final_endpoint='Conv2d_2c_3x3', scope='S3DG')
        with slim.arg_scope(i3d.i3d_arg_scope(separable_conv3d=True)):
            i3d.i3d_base(clip, final_endpoint='Conv2d_2c_3x3', scope='Separable')
        variables = variable_shapes()
    assert i3d_points['Conv2d_1a_7x7'].op.type == 'BiasAdd'
    assert i3d_points['Conv2d_2b_1x1'].op.type == 'Relu'
    assert i3d_points['Conv2d_2c_3x3'].op.type == 'BiasAdd'
    assert variables['I3D/Conv2d_1a_7x7/weights'] == [7, 7, 7, 3, 64]
    assert variables['I3D/Conv2d_2c_3x3/weights'] == [3, 3, 3, 64, 192]
    assert variables['S3DG/Conv2d_2c_3x3/weights'] == [3, 3, 3, 64, 192]
    assert 'S3DG/Conv2d_2c_3x3/self_gating/transformer_W/weights' in variables
    assert variables['Separable/Conv2d_2c_3x3/weights'] == [1, 3, 3, 64, 192]
    assert variables['Separable/Conv2d_2c_3x3/temporal/weights'] == [3, 1, 1, 192, 192]
    assert len([name for name in variables if name.startswith('I3D/')]) == 3 * 2


def test_narrow_s3dg_classifier_names():
    """depth_multiplier 1/8 (at least min_depth 16) on 8 frames of 32x32: TF-Slim's end
    points, shapes and op names (the backbone's ops in the name scope
    'InceptionV1/InceptionV1/', as TF-Slim's re-entered scope makes them)."""
    with tf.Graph().as_default():
        logits, end_points = _build('s3dg', shape=(2, 8, 32, 32, 3), num_classes=5,
                                    depth_multiplier=0.125)
        variables = variable_shapes()
    assert list(end_points) == END_POINTS + ['Logits', 'Predictions']
    assert logits is end_points['Logits'] and logits.shape.as_list() == [2, 5]
    assert logits.op.name == 'InceptionV1/Logits/SpatialSqueeze'
    assert end_points['Predictions'].op.name == 'InceptionV1/Logits/Predictions/Reshape_1'
    assert end_points['Mixed_5c'].op.name == 'InceptionV1/InceptionV1/Mixed_5c/concat'
    assert end_points['Mixed_5c'].shape.as_list() == [2, 1, 1, 1, 48 + 48 + 16 + 16]
    assert variables['InceptionV1/Mixed_4b/Branch_0/Conv2d_0a_1x1/weights'] == \
        [1, 1, 1, 72, 24]  # Mixed_3c's 16 + 24 + 16 + 16 channels; int(192 / 8).
    assert variables['InceptionV1/Mixed_4b/Branch_2/Conv2d_0a_1x1/weights'] == \
        [1, 1, 1, 72, 16]  # max(int(16 / 8), 16).
    assert variables['InceptionV1/Logits/Conv2d_0c_1x1/weights'] == [1, 1, 1, 128, 5]


# TF-Slim's end points for 2 clips of 64 frames of 224x224: time halves at Conv2d_1a_7x7,
# MaxPool_4a_3x3 and MaxPool_5a_2x2, space at the first four stages.
END_POINT_SHAPES = {
    'Conv2d_1a_7x7': [2, 32, 112, 112, 64], 'MaxPool_2a_3x3': [2, 32, 56, 56, 64],
    'Conv2d_2b_1x1': [2, 32, 56, 56, 64], 'Conv2d_2c_3x3': [2, 32, 56, 56, 192],
    'MaxPool_3a_3x3': [2, 32, 28, 28, 192], 'Mixed_3b': [2, 32, 28, 28, 256],
    'Mixed_3c': [2, 32, 28, 28, 480], 'MaxPool_4a_3x3': [2, 16, 14, 14, 480],
    'Mixed_4b': [2, 16, 14, 14, 512], 'Mixed_4c': [2, 16, 14, 14, 512],
    'Mixed_4d': [2, 16, 14, 14, 512], 'Mixed_4e': [2, 16, 14, 14, 528],
    'Mixed_4f': [2, 16, 14, 14, 832], 'MaxPool_5a_2x2': [2, 8, 7, 7, 832],
    'Mixed_5b': [2, 8, 7, 7, 832], 'Mixed_5c': [2, 8, 7, 7, 1024],
}
LOGITS_VARIABLES = {
    'InceptionV1/Logits/Conv2d_0c_1x1/weights': [1, 1, 1, 1024, KINETICS_CLASSES],
    'InceptionV1/Logits/Conv2d_0c_1x1/biases': [KINETICS_CLASSES],
}
# A sample of TF-Slim's checkpoint names. Batch-normalized convolutions have no biases
# and no gamma (scale=False); S3D-G's temporal halves have biases and no batch norm.
VARIABLES = {
    'i3d': {
        'InceptionV1/Conv2d_1a_7x7/weights': [7, 7, 7, 3, 64],
        'InceptionV1/Conv2d_1a_7x7/BatchNorm/beta': [64],
        'InceptionV1/Conv2d_1a_7x7/BatchNorm/moving_mean': [64],
        'InceptionV1/Conv2d_1a_7x7/BatchNorm/moving_variance': [64],
        'InceptionV1/Conv2d_2b_1x1/weights': [1, 1, 1, 64, 64],
        'InceptionV1/Conv2d_2c_3x3/weights': [3, 3, 3, 64, 192],
        'InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/weights': [3, 3, 3, 96, 128],
        'InceptionV1/Mixed_3b/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 1, 192, 32],
        'InceptionV1/Mixed_4b/Branch_2/Conv2d_0b_3x3/weights': [3, 3, 3, 16, 48],
        'InceptionV1/Mixed_5c/Branch_0/Conv2d_0a_1x1/weights': [1, 1, 1, 832, 384],
        'InceptionV1/Mixed_5c/Branch_3/Conv2d_0b_1x1/BatchNorm/beta': [128],
        **LOGITS_VARIABLES,
    },
    's3dg': {
        'InceptionV1/Conv2d_1a_7x7/weights': [3, 7, 7, 3, 64],
        'InceptionV1/Conv2d_1a_7x7/BatchNorm/beta': [64],
        'InceptionV1/Conv2d_2c_3x3/weights': [1, 3, 3, 64, 192],
        'InceptionV1/Conv2d_2c_3x3/BatchNorm/beta': [192],
        'InceptionV1/Conv2d_2c_3x3/temporal/weights': [3, 1, 1, 192, 192],
        'InceptionV1/Conv2d_2c_3x3/temporal/biases': [192],
        'InceptionV1/Conv2d_2c_3x3/self_gating/transformer_W/weights': [1, 1, 1, 192, 192],
        'InceptionV1/Mixed_3b/Branch_0/Conv2d_0a_1x1/self_gating/transformer_W/weights':
            [1, 1, 1, 64, 64],
        'InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/weights': [1, 3, 3, 96, 128],
        'InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/temporal/weights': [3, 1, 1, 128, 128],
        'InceptionV1/Mixed_5c/Branch_2/Conv2d_0b_3x3/temporal/biases': [128],
        'InceptionV1/Mixed_5c/Branch_3/Conv2d_0b_1x1/self_gating/transformer_W/weights':
            [1, 1, 1, 128, 128],
        **LOGITS_VARIABLES,
    },
}
LOGITS_PARAMETERS = 1024 * KINETICS_CLASSES + KINETICS_CLASSES  # 410,000
# Trainable parameters for Kinetics' 400 classes: backbone + logits layer. The papers
# give no exact single-stream figures: I3D's (Carreira and Zisserman, 2017, Table 1)
# two-stream I3D has "25M", here 12,689,984 (RGB) + 12,668,032 (2-channel flow) =
# 25.36M. S3D-G's backbone is S3D's 7,889,520 plus 1,219,328 gate weights: the sum of
# c * c over the 37 gated outputs, from 192 * 192 at Conv2d_2c_3x3 to Mixed_5c's.
PARAMETERS = {'i3d': 12_279_984 + LOGITS_PARAMETERS,  # 12,689,984
              's3dg': 7_889_520 + 1_219_328 + LOGITS_PARAMETERS}  # 9,518,848
# Per net: convolutions (one 'weights' each, all L2-penalized) and global variables.
# I3D: 3 stem + 9 blocks x 6 + logits = 58 convolutions, 57 batch-normalized (4
# variables each) + logits (2) = 230. S3D-G adds 19 temporal halves (weights, biases)
# and 37 gates (weights).
CONVOLUTIONS = {'i3d': 58, 's3dg': 58 + 19 + 37}
GLOBAL_VARIABLES = {'i3d': 230, 's3dg': 230 + 19 * 2 + 37}


def _penalized_layers():
    """The layers with an L2 penalty, as variable paths: TF-Slim's re-entered scope puts
    the backbone's penalty ops under 'InceptionV1/InceptionV1/'."""
    return {loss.op.name.split('/kernel/Regularizer')[0].replace('InceptionV1/InceptionV1/',
                                                                 'InceptionV1/')
            for loss in tf.losses.get_regularization_losses()}


@pytest.mark.slow
@pytest.mark.parametrize('name', NETS)
def test_contract_at_slims_default_size(name):
    with tf.Graph().as_default():
        logits, end_points = _build(name, weight_decay=1e-7)
        variables = variable_shapes()
        assert parameters(tf.trainable_variables()) == PARAMETERS[name]
        assert len(variables) == GLOBAL_VARIABLES[name]
        penalized = _penalized_layers()
        moving = tf.get_collection('moving_vars')
    assert logits.shape.as_list() == [2, KINETICS_CLASSES]
    assert logits.op.name == 'InceptionV1/Logits/SpatialSqueeze'
    assert list(end_points) == END_POINTS + ['Logits', 'Predictions']
    assert {key: end_points[key].shape.as_list() for key in END_POINT_SHAPES} == \
        END_POINT_SHAPES
    assert end_points['Logits'] is logits
    assert end_points['Predictions'].shape.as_list() == [2, KINETICS_CLASSES]
    assert {k: variables[k] for k in VARIABLES[name]} == VARIABLES[name]
    weights = {k[:-len('/weights')] for k in variables if k.endswith('/weights')}
    assert len(weights) == CONVOLUTIONS[name] and penalized == weights
    assert len(moving) == 2 * 57 and all('/BatchNorm/moving_' in v.op.name for v in moving)


@pytest.mark.slow
def test_s3d_without_gating_and_a_wider_first_convolution():
    with tf.Graph().as_default():
        _build('s3dg', gating_startat=None, first_temporal_kernel_size=7)
        assert parameters(tf.trainable_variables()) == \
            7_889_520 + 4 * 7 * 7 * 3 * 64 + LOGITS_PARAMETERS
        variables = variable_shapes()
    assert not any('/self_gating/' in name for name in variables)
    assert variables['InceptionV1/Conv2d_1a_7x7/weights'] == [7, 7, 7, 3, 64]


@pytest.mark.slow
@pytest.mark.parametrize('name, frames, size, num_classes, kwargs, mixed_5c, net', [
    # Half size, one frame (all 'SAME' padded); no classes: the averaged features.
    ('i3d', 1, 112, None, {}, [2, 1, 4, 4, 1024], [2, 1024]),
    ('s3dg', 8, 224, 0, {'spatial_squeeze': False}, [2, 1, 7, 7, 1024], [2, 1, 1, 1024]),
    # ceil(10 / 8) frames; larger than 224, so the 7x7 pooling leaves 2x2 logits that
    # only spatial_squeeze=False allows, as in TF-Slim.
    ('i3d', 10, 256, KINETICS_CLASSES, {'spatial_squeeze': False}, [2, 2, 8, 8, 1024],
     [2, 2, 2, KINETICS_CLASSES]),
])
def test_other_clip_sizes_and_features(name, frames, size, num_classes, kwargs, mixed_5c, net):
    with tf.Graph().as_default():
        output, end_points = _build(name, shape=(2, frames, size, size, 3),
                                    num_classes=num_classes, **kwargs)
        variables = variable_shapes()
    assert end_points['Mixed_5c'].shape.as_list() == mixed_5c
    assert output.shape.as_list() == net
    assert list(end_points) == END_POINTS + (['Logits', 'Predictions'] if num_classes else [])
    assert any(k.startswith('InceptionV1/Logits/') for k in variables) == bool(num_classes)


@pytest.mark.slow
def test_forward_pass():
    """A narrow S3D-G (depth_multiplier 1/8, at least 16 channels) on 2 random clips of
    8 frames of 32x32, built twice as model_deploy's clones are (the second with
    reuse=True: no new variables), for evaluation and training: evaluation is
    deterministic, dropout acts in training only, and the temporal halves start as
    identities in time."""
    clips = np.random.RandomState(0).uniform(-1, 1, (2, 8, 32, 32, 3)).astype(np.float32)
    kwargs = {'depth_multiplier': 0.125, 'dropout_keep_prob': 0.5}
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        with slim.arg_scope(s3dg.s3dg_arg_scope()):
            with tf.name_scope('clone_0'):
                eval_logits, end_points = s3dg.s3dg(clips, 5, is_training=False, **kwargs)
            variables = tf.global_variables()
            with tf.name_scope('clone_1'):
                train_logits, _ = s3dg.s3dg(clips, 5, reuse=True, **kwargs)
        assert tf.global_variables() == variables
        assert eval_logits.op.name.startswith('clone_0/InceptionV1/')
        assert train_logits.op.name.startswith('clone_1/InceptionV1/')
        temporal = tf.global_variables('InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/temporal/')
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            logits, predictions = sess.run([eval_logits, end_points['Predictions']])
            logits_again = sess.run(eval_logits)
            train_runs = [sess.run(train_logits) for _ in range(2)]
            kernel, biases = sess.run(temporal)
    assert logits.shape == (2, 5) and np.isfinite(logits).all()
    np.testing.assert_array_equal(logits, logits_again)
    softmax = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(predictions, softmax, rtol=1e-5)
    assert not np.allclose(*train_runs)
    assert kernel.shape == (3, 1, 1, 26, 26)  # int(208 / 8) channels.
    np.testing.assert_array_equal(kernel[1, 0, 0], np.eye(26))
    assert not kernel[[0, 2]].any() and not biases.any()


# Video preprocessing.
FRAMES, HEIGHT, WIDTH = 4, 40, 48


def _run(video, is_training, size=(HEIGHT, WIDTH), runs=1, **kwargs):
    """Preprocesses `video` (numpy) in a fresh graph; returns (static shape, values of
    `runs` runs)."""
    with tf.Graph().as_default():
        output = video_preprocessing.preprocess_image(tf.constant(video), *size,
                                                      is_training=is_training, **kwargs)
        assert output.dtype == tf.float32
        with tf.Session() as sess:
            return output.shape.as_list(), [sess.run(output) for _ in range(runs)]


def _random_video(frames=FRAMES, height=60, width=80, dtype=np.uint8):
    pixels = np.random.RandomState(0).randint(0, 256, [frames, height, width, 3])
    return pixels.astype(dtype) if dtype == np.uint8 else (pixels / 255).astype(dtype)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('dtype', [np.uint8, np.float32])
def test_video_preprocessing_gives_the_requested_size_in_range(is_training, dtype):
    shape, (video,) = _run(_random_video(dtype=dtype), is_training)
    assert shape == [FRAMES, HEIGHT, WIDTH, 3] and video.shape == (FRAMES, HEIGHT, WIDTH, 3)
    assert video.min() >= -1.0 and video.max() <= 1.0 and video.std() > 0.1


def test_training_crops_and_flips_all_frames_alike():
    """Identical frames stay identical, while the crops and flips vary between runs."""
    video = np.repeat(_random_video(frames=1), 3, axis=0)
    _, runs = _run(video, is_training=True, runs=8)
    for clip in runs:
        np.testing.assert_array_equal(clip[1:], clip[:-1])
    assert len({clip.tobytes() for clip in runs}) > 1


def test_evaluation_takes_the_central_crop():
    """With the smaller side already resize_side, no resizing: the central 4x6 of 8x10."""
    video = np.random.RandomState(1).uniform(size=(2, 8, 10, 3)).astype(np.float32)
    _, (output,) = _run(video, is_training=False, size=(4, 6), resize_side=8)
    np.testing.assert_allclose(output, (video[:, 2:6, 2:8] - 0.5) * 2.0, atol=1e-6)
