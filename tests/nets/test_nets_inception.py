"""The Inception family (research/slim's nets.inception): Inception v1 to v4 and
Inception-ResNet v2. Public names and signatures; TF-Slim's checkpoint variable names and
shapes, variable counts and parameter totals against published figures; end points and
output op names; the *_base builders up to a final end point; features without logits,
global pooling, unsqueezed logits, depth multipliers, reuse (clone-style too); the blocks;
the arg_scopes' options.

Graphs are built in a private tf.Graph, so eager mode stays on, and not run (but for a
residual block's). The fast tier builds Inception v1, the other nets' first stages and some
blocks; the slow tests the other nets.
"""
import collections
import inspect

import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.nets import (
    inception,
    inception_resnet_v2,
    inception_utils,
    inception_v1,
    inception_v2,
    inception_v3,
    inception_v4,
)

from helpers import parameters, trainable_parameters, variable_shapes

CHECKPOINT_CLASSES = 1001  # TF-Slim's ImageNet checkpoints: class 0 is background.
pytestmark = pytest.mark.usefixtures('fast_variable_creation')

# research/slim's public builders: their parameters in order, and the defaults that matter.
BUILDER = ['inputs', 'num_classes', 'is_training', 'dropout_keep_prob']
SIGNATURES = {
    inception_v1: {
        'inception_v1': BUILDER + ['prediction_fn', 'spatial_squeeze', 'reuse', 'scope',
                                   'global_pool'],
        'inception_v1_base': ['inputs', 'final_endpoint', 'include_root_block', 'scope']},
    inception_v2: {
        'inception_v2': BUILDER + ['min_depth', 'depth_multiplier', 'prediction_fn',
                                   'spatial_squeeze', 'reuse', 'scope', 'global_pool'],
        'inception_v2_base': ['inputs', 'final_endpoint', 'min_depth', 'depth_multiplier',
                              'use_separable_conv', 'data_format', 'include_root_block',
                              'scope']},
    inception_v3: {
        'inception_v3': BUILDER + ['min_depth', 'depth_multiplier', 'prediction_fn',
                                   'spatial_squeeze', 'reuse', 'create_aux_logits', 'scope',
                                   'global_pool'],
        'inception_v3_base': ['inputs', 'final_endpoint', 'min_depth', 'depth_multiplier',
                              'scope']},
    inception_v4: {
        'inception_v4': BUILDER + ['reuse', 'scope', 'create_aux_logits'],
        'inception_v4_base': ['inputs', 'final_endpoint', 'scope'],
        **{f'block_{block}': ['inputs', 'scope', 'reuse'] for block in [
            'inception_a', 'reduction_a', 'inception_b', 'reduction_b', 'inception_c']}},
    inception_resnet_v2: {
        'inception_resnet_v2': BUILDER + ['reuse', 'scope', 'create_aux_logits',
                                          'activation_fn'],
        'inception_resnet_v2_base': ['inputs', 'final_endpoint', 'output_stride',
                                     'align_feature_maps', 'scope', 'activation_fn'],
        **{block: ['net', 'scale', 'activation_fn', 'scope', 'reuse']
           for block in ['block35', 'block17', 'block8']},
        'inception_resnet_v2_arg_scope': [
            'weight_decay', 'batch_norm_decay', 'batch_norm_epsilon', 'activation_fn',
            'batch_norm_updates_collections', 'batch_norm_scale']},
    inception_utils: {
        'inception_arg_scope': ['weight_decay', 'use_batch_norm', 'batch_norm_decay',
                                'batch_norm_epsilon', 'activation_fn',
                                'batch_norm_updates_collections', 'batch_norm_scale']},
}
# (scope, default image size, num_classes default, end points of the *_base builder).
Net = collections.namedtuple('Net', ['scope', 'image_size', 'num_classes', 'end_points'])
ROOT_BLOCK = ['Conv2d_1a_7x7', 'MaxPool_2a_3x3', 'Conv2d_2b_1x1', 'Conv2d_2c_3x3',
              'MaxPool_3a_3x3']
STEM_299 = ['Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'MaxPool_3a_3x3',
            'Conv2d_3b_1x1', 'Conv2d_4a_3x3', 'MaxPool_5a_3x3']
NETS = {
    'inception_v1': Net('InceptionV1', 224, 1000, ROOT_BLOCK + [
        'Mixed_3b', 'Mixed_3c', 'MaxPool_4a_3x3', 'Mixed_4b', 'Mixed_4c', 'Mixed_4d',
        'Mixed_4e', 'Mixed_4f', 'MaxPool_5a_2x2', 'Mixed_5b', 'Mixed_5c']),
    'inception_v2': Net('InceptionV2', 224, 1000, ROOT_BLOCK + [
        'Mixed_3b', 'Mixed_3c', 'Mixed_4a', 'Mixed_4b', 'Mixed_4c', 'Mixed_4d', 'Mixed_4e',
        'Mixed_5a', 'Mixed_5b', 'Mixed_5c']),
    'inception_v3': Net('InceptionV3', 299, 1000, STEM_299 + [
        'Mixed_5b', 'Mixed_5c', 'Mixed_5d', 'Mixed_6a', 'Mixed_6b', 'Mixed_6c', 'Mixed_6d',
        'Mixed_6e', 'Mixed_7a', 'Mixed_7b', 'Mixed_7c']),
    'inception_v4': Net('InceptionV4', 299, 1001, [
        'Conv2d_1a_3x3', 'Conv2d_2a_3x3', 'Conv2d_2b_3x3', 'Mixed_3a', 'Mixed_4a',
        'Mixed_5a', 'Mixed_5b', 'Mixed_5c', 'Mixed_5d', 'Mixed_5e', 'Mixed_6a', 'Mixed_6b',
        'Mixed_6c', 'Mixed_6d', 'Mixed_6e', 'Mixed_6f', 'Mixed_6g', 'Mixed_6h', 'Mixed_7a',
        'Mixed_7b', 'Mixed_7c', 'Mixed_7d']),
    'inception_resnet_v2': Net('InceptionResnetV2', 299, 1001, STEM_299 + [
        'Mixed_5b', 'Mixed_6a', 'PreAuxLogits', 'Mixed_7a', 'Conv2d_7b_1x1']),
}
MODULES = {'inception_v1': inception_v1, 'inception_v2': inception_v2,
           'inception_v3': inception_v3, 'inception_v4': inception_v4,
           'inception_resnet_v2': inception_resnet_v2}


def images(size, batch=1, channels=3):
    """Zero images [batch, size, size, channels]."""
    return tf.zeros([batch, size, size, channels])


def shapes_of(end_points):
    """{end point: its shape as a list}."""
    return {name: tensor.shape.as_list() for name, tensor in end_points.items()}


def model_parameters(exclude_scopes=()):
    """Numbers in the model variables (moving averages included), less those under the
    scopes '*/<scope>/' of `exclude_scopes`."""
    return parameters(v for v in slim.get_model_variables()
                      if not any(f'/{scope}/' in v.op.name for scope in exclude_scopes))


def build(name, num_classes=CHECKPOINT_CLASSES, size=None, batch=2, weight_decay=0.0,
          **builder_kwargs):
    """Builds the net `name` in evaluation mode in its arg_scope, on zero RGB images of
    side `size` (default: the net's); returns (net, end_points)."""
    module = MODULES[name]
    with slim.arg_scope(getattr(module, f'{name}_arg_scope')(weight_decay=weight_decay)):
        return getattr(module, name)(images(size or NETS[name].image_size, batch),
                                     num_classes, is_training=False, **builder_kwargs)


def penalized_variables():
    """Names of the variables the regularization losses penalize (found through the graph:
    under a name scope, the losses' op names repeat the net's scope)."""
    names = set()
    for loss in tf.losses.get_regularization_losses():
        ops = [loss.op]
        while ops:
            op = ops.pop()
            if op.type in ('VarHandleOp', 'VariableV2'):
                names.add(op.name)
            else:
                ops.extend(tensor.op for tensor in op.inputs)
    return names


@pytest.mark.parametrize('module', SIGNATURES, ids=lambda module: module.__name__)
def test_modules_offer_slims_builders_with_slims_parameters(module):
    for name, expected in SIGNATURES[module].items():
        assert list(inspect.signature(getattr(module, name)).parameters) == expected, name
    if module.__name__.endswith('inception_utils'):
        return
    net = module.__name__.rsplit('.', 1)[1]
    builder = getattr(module, net)
    assert builder.default_image_size == NETS[net].image_size
    defaults = inspect.signature(builder).parameters
    assert defaults['num_classes'].default == NETS[net].num_classes
    assert defaults['is_training'].default is True
    assert defaults['dropout_keep_prob'].default == 0.8
    assert defaults['scope'].default == NETS[net].scope
    for suffix in ('', '_base', '_arg_scope'):  # nets.inception gathers the family.
        assert getattr(inception, net + suffix) is getattr(module, net + suffix)
    if net != 'inception_resnet_v2':
        assert getattr(module, f'{net}_arg_scope') is inception_utils.inception_arg_scope


@pytest.mark.parametrize('name, final_endpoint, size, shape', [
    ('inception_v1', 'Mixed_3b', 224, [1, 28, 28, 256]),
    ('inception_v2', 'Mixed_3b', 224, [1, 28, 28, 256]),
    ('inception_v3', 'Mixed_5b', 299, [1, 35, 35, 256]),
    ('inception_v4', 'Mixed_5a', 299, [1, 35, 35, 384]),
    ('inception_resnet_v2', 'Mixed_5b', 299, [1, 35, 35, 320]),
])
def test_base_builds_up_to_the_final_endpoint_only(name, final_endpoint, size, shape):
    net_info = NETS[name]
    with tf.Graph().as_default():
        net, end_points = getattr(inception, name + '_base')(images(size),
                                                            final_endpoint=final_endpoint)
        variables = variable_shapes()
    built = net_info.end_points[:net_info.end_points.index(final_endpoint) + 1]
    assert list(end_points) == built
    assert net is end_points[final_endpoint] and net.shape.as_list() == shape
    assert net.op.name.startswith(f'{net_info.scope}/{final_endpoint}/')
    # No variables past the final end point; each end point's layers have some.
    assert {v.split('/')[1] for v in variables} == {e for e in built if 'Pool' not in e}


@pytest.mark.parametrize('name', NETS)
def test_base_rejects_an_unknown_final_endpoint_before_building(name):
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="unknown final_endpoint 'Logits'"):
            getattr(inception, name + '_base')(images(299), final_endpoint='Logits')
        assert not tf.global_variables()


def test_inception_v1_and_v2_base_without_the_root_block_start_at_mixed_3b():
    with tf.Graph().as_default():
        v1, v1_end_points = inception_v1.inception_v1_base(
            images(28, channels=192), final_endpoint='Mixed_3c', include_root_block=False)
        v2, v2_end_points = inception_v2.inception_v2_base(
            images(28, channels=192), final_endpoint='Mixed_3b', include_root_block=False)
        with pytest.raises(ValueError, match="unknown final_endpoint 'Conv2d_2c_3x3'"):
            inception_v1.inception_v1_base(images(28, channels=192), 'Conv2d_2c_3x3',
                                           include_root_block=False)
        shapes = variable_shapes()
    assert list(v1_end_points) == ['Mixed_3b', 'Mixed_3c'] and v1.shape[3] == 480
    assert list(v2_end_points) == ['Mixed_3b'] and v2.shape[3] == 256
    assert shapes['InceptionV1/Mixed_3b/Branch_0/Conv2d_0a_1x1/weights'] == [1, 1, 192, 64]
    assert shapes['InceptionV2/Mixed_3b/Branch_3/Conv2d_0b_1x1/weights'] == [1, 1, 192, 32]


def test_inception_v2_first_convolution_separable_or_plain_and_nchw():
    with tf.Graph().as_default():
        separable, _ = inception_v2.inception_v2_base(images(224), 'Conv2d_1a_7x7')
        plain, _ = inception_v2.inception_v2_base(images(224), 'Conv2d_1a_7x7', scope='Plain',
                                                  use_separable_conv=False)
        thin, _ = inception_v2.inception_v2_base(images(224), 'Conv2d_1a_7x7', scope='Thin',
                                                 depth_multiplier=0.25)
        nchw, nchw_end_points = inception_v2.inception_v2_base(
            tf.zeros([1, 3, 224, 224]), 'Mixed_3b', use_separable_conv=False,
            data_format='NCHW', scope='NCHW')
        shapes = variable_shapes()
    # 8 depthwise 7x7 filters per input channel, then 1x1 to 64.
    assert shapes['InceptionV2/Conv2d_1a_7x7/depthwise_weights'] == [7, 7, 3, 8]
    assert shapes['InceptionV2/Conv2d_1a_7x7/pointwise_weights'] == [1, 1, 24, 64]
    assert shapes['Plain/Conv2d_1a_7x7/weights'] == [7, 7, 3, 64]
    # Depth 16: 16 // 3 = 5 depthwise filters per channel.
    assert shapes['Thin/Conv2d_1a_7x7/depthwise_weights'] == [7, 7, 3, 5]
    assert separable.shape.as_list() == plain.shape.as_list() == [1, 112, 112, 64]
    assert thin.shape.as_list() == [1, 112, 112, 16]
    assert nchw.shape.as_list() == [1, 256, 28, 28]
    assert nchw_end_points['MaxPool_3a_3x3'].shape.as_list() == [1, 192, 28, 28]


@pytest.mark.parametrize('call, message', [
    (lambda: inception_v2.inception_v2_base(images(64), data_format='NCWH'), 'data_format'),
    (lambda: inception_v2.inception_v2_base(images(64), data_format='NCHW'), 'separable'),
    (lambda: inception_v2.inception_v2(images(64), depth_multiplier=0), 'depth_multiplier'),
    (lambda: inception_v3.inception_v3_base(images(75), depth_multiplier=-1),
     'depth_multiplier'),
    (lambda: inception_v3.inception_v3(images(75), depth_multiplier=0), 'depth_multiplier'),
    (lambda: inception_resnet_v2.inception_resnet_v2_base(images(75), output_stride=32),
     'output_stride must be 8 or 16'),
    (lambda: inception_resnet_v2.inception_resnet_v2_base(images(75), output_stride=8),
     "up to PreAuxLogits only, not to 'Conv2d_7b_1x1'"),
])
def test_invalid_options_raise_before_building(call, message):
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=message):
            call()
        assert not tf.global_variables()


def test_inception_v4_blocks_keep_or_reduce_their_maps_in_their_own_scopes():
    with tf.Graph().as_default():
        block_a = inception_v4.block_inception_a(images(9, channels=384))
        reduction_a = inception_v4.block_reduction_a(images(9, channels=384), 'Mine')
        again = inception_v4.block_reduction_a(images(9, channels=384), 'Mine', reuse=True)
        shapes = variable_shapes()
    assert block_a.shape.as_list() == [1, 9, 9, 384]
    assert reduction_a.shape.as_list() == again.shape.as_list() == [1, 4, 4, 1024]
    assert shapes['BlockInceptionA/Branch_3/Conv2d_0b_1x1/weights'] == [1, 1, 384, 96]
    assert shapes['Mine/Branch_1/Conv2d_0b_3x3/weights'] == [3, 3, 192, 224]
    assert {v.split('/')[0] for v in shapes} == {'BlockInceptionA', 'Mine'}


def test_inception_v4_b_and_c_blocks():
    with tf.Graph().as_default():
        block_b = inception_v4.block_inception_b(images(5, channels=1024))
        reduction_b = inception_v4.block_reduction_b(images(5, channels=1024))
        block_c = inception_v4.block_inception_c(images(2, channels=1536))
        shapes = variable_shapes()
    assert block_b.shape.as_list() == [1, 5, 5, 1024]
    assert reduction_b.shape.as_list() == [1, 2, 2, 1536]
    assert block_c.shape.as_list() == [1, 2, 2, 1536]
    assert shapes['BlockInceptionB/Branch_2/Conv2d_0e_1x7/weights'] == [1, 7, 224, 256]
    assert shapes['BlockReductionB/Branch_1/Conv2d_1a_3x3/weights'] == [3, 3, 320, 320]
    assert shapes['BlockInceptionC/Branch_2/Conv2d_0e_3x1/weights'] == [3, 1, 512, 256]


def test_inception_resnet_v2_blocks_add_a_scaled_projection_to_their_input():
    with tf.Graph().as_default():
        net = tf.ones([1, 3, 3, 320])
        with slim.arg_scope(inception_resnet_v2.inception_resnet_v2_arg_scope()), \
                slim.arg_scope([slim.conv2d], weights_initializer=tf.zeros_initializer(),
                               biases_initializer=tf.ones_initializer()):
            # The projection, with biases 1 and no batch norm, is 1 everywhere: the
            # block adds `scale`.
            scaled = inception_resnet_v2.block35(net, scale=0.5, activation_fn=None)
            clipped = inception_resnet_v2.block35(net, scale=-9.0, activation_fn=tf.nn.relu6,
                                                  scope='Clipped')
            reused = inception_resnet_v2.block35(net, scope='Clipped', reuse=True)
        shapes = variable_shapes()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            scaled, clipped, reused = sess.run([scaled, clipped, reused])
    assert (scaled == 1.5).all()
    assert (clipped == 0.0).all()  # relu6(1 + clip(-9, -6, 6)).
    assert (reused == 2.0).all()  # relu(1 + 1).
    assert shapes['Block35/Conv2d_1x1/weights'] == [1, 1, 32 + 32 + 64, 320]
    assert shapes['Block35/Conv2d_1x1/biases'] == [320]
    assert shapes['Block35/Branch_2/Conv2d_0c_3x3/BatchNorm/beta'] == [64]
    assert not any(v.startswith('Block35/Conv2d_1x1/BatchNorm/') for v in shapes)
    assert {v.split('/')[0] for v in shapes} == {'Block35', 'Clipped'}


def test_inception_resnet_v2_block17_and_block8_keep_their_input_shape():
    with tf.Graph().as_default():
        block17 = inception_resnet_v2.block17(images(3, channels=1088))
        block8 = inception_resnet_v2.block8(images(3, channels=2080), activation_fn=None)
        shapes = variable_shapes()
    assert block17.shape.as_list() == [1, 3, 3, 1088]
    assert block8.shape.as_list() == [1, 3, 3, 2080]
    assert block8.op.type == 'AddV2'  # No activation.
    assert shapes['Block17/Branch_1/Conv2d_0c_7x1/weights'] == [7, 1, 160, 192]
    assert shapes['Block8/Conv2d_1x1/weights'] == [1, 1, 192 + 256, 2080]


@pytest.mark.parametrize('arg_scope, kwargs, variables, update_ops', [
    (inception_utils.inception_arg_scope, {}, {'weights', 'BatchNorm/beta',
                                               'BatchNorm/moving_mean',
                                               'BatchNorm/moving_variance'}, 2),
    (inception_utils.inception_arg_scope, {'batch_norm_scale': True,
                                           'batch_norm_updates_collections': None},
     {'weights', 'BatchNorm/beta', 'BatchNorm/gamma', 'BatchNorm/moving_mean',
      'BatchNorm/moving_variance'}, 0),
    (inception_utils.inception_arg_scope, {'use_batch_norm': False}, {'weights', 'biases'}, 0),
    (inception_resnet_v2.inception_resnet_v2_arg_scope, {'batch_norm_scale': True},
     {'weights', 'BatchNorm/beta', 'BatchNorm/gamma', 'BatchNorm/moving_mean',
      'BatchNorm/moving_variance'}, 2),
])
def test_arg_scopes_options(arg_scope, kwargs, variables, update_ops):
    with tf.Graph().as_default():
        with slim.arg_scope(arg_scope(weight_decay=0.5, activation_fn=tf.nn.relu6, **kwargs)):
            net = slim.conv2d(images(4), 2, [1, 1], scope='Conv')
            slim.fully_connected(slim.flatten(net), 3, scope='Fc')
        conv_variables = {v[len('Conv/'):] for v in variable_shapes() if v.startswith('Conv/')}
        activation = tf.get_default_graph().get_operation_by_name('Conv/Relu6')
        penalized = penalized_variables()
        collected = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert conv_variables == variables
    assert activation is not None
    assert len(collected) == update_ops
    # inception_resnet_v2's penalizes the biases too.
    biases = arg_scope is inception_resnet_v2.inception_resnet_v2_arg_scope
    assert penalized == ({'Conv/weights', 'Fc/weights'} | ({'Fc/biases'} if biases else set()))


@pytest.mark.slow
def test_inception_v1_checkpoint_contract_features_and_reuse():
    """Inception v1 at 224x224 with TF-Slim's variable names; then, reusing its variables,
    the pooled features (no classes) of a smaller input under global pooling."""
    with tf.Graph().as_default():
        with slim.arg_scope(inception_v1.inception_v1_arg_scope()):
            logits, end_points = inception_v1.inception_v1(images(224, 2), CHECKPOINT_CLASSES)
            shapes = variable_shapes()
            base_parameters = model_parameters(exclude_scopes=['Logits'])
            features, feature_end_points = inception_v1.inception_v1(
                images(64, 2), 0, reuse=True, global_pool=True)
            unsqueezed, _ = inception_v1.inception_v1(images(224), CHECKPOINT_CLASSES,
                                                      reuse=True, spatial_squeeze=False)
        assert variable_shapes() == shapes
        trainable = trainable_parameters()
    assert shapes['InceptionV1/Conv2d_1a_7x7/weights'] == [7, 7, 3, 64]
    assert shapes['InceptionV1/Mixed_4b/Branch_1/Conv2d_0b_3x3/weights'] == [3, 3, 96, 208]
    assert shapes['InceptionV1/Mixed_5b/Branch_2/Conv2d_0a_3x3/weights'] == [3, 3, 32, 128]
    assert shapes['InceptionV1/Mixed_5c/Branch_3/Conv2d_0b_1x1/BatchNorm/beta'] == [128]
    assert shapes['InceptionV1/Logits/Conv2d_0c_1x1/weights'] == [1, 1, 1024, 1001]
    assert shapes['InceptionV1/Logits/Conv2d_0c_1x1/biases'] == [1001]
    assert len(shapes) == 230 and trainable == 6_618_649
    assert base_parameters == 5_607_184  # research/slim's test of inception_v1_base.
    assert list(end_points) == NETS['inception_v1'].end_points + [
        'AvgPool_0a_7x7', 'Logits', 'Predictions']
    assert end_points['Mixed_5c'].shape.as_list() == [2, 7, 7, 1024]
    assert logits.shape.as_list() == [2, 1001] and logits is end_points['Logits']
    assert logits.op.name == 'InceptionV1/Logits/SpatialSqueeze'
    assert end_points['Predictions'].op.name == 'InceptionV1/Logits/Predictions/Reshape_1'
    assert features.shape.as_list() == [2, 1, 1, 1024]
    assert features is feature_end_points['global_pool']
    assert 'Logits' not in feature_end_points and 'AvgPool_0a_7x7' not in feature_end_points
    assert unsqueezed.shape.as_list() == [1, 1, 1, 1001]


InceptionContract = collections.namedtuple('InceptionContract', [
    'variables', 'num_variables', 'parameters', 'biases', 'regularized', 'end_points'])
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
INCEPTION_V2_VARIABLES = {
    'InceptionV2/Conv2d_1a_7x7/depthwise_weights': [7, 7, 3, 8],
    'InceptionV2/Conv2d_1a_7x7/pointwise_weights': [1, 1, 24, 64],
    # The arg_scope covers conv2d only: the separable convolution has biases, no batch
    # normalization and no L2 penalty.
    'InceptionV2/Conv2d_1a_7x7/biases': [64],
    'InceptionV2/Conv2d_2c_3x3/weights': [3, 3, 64, 192],
    'InceptionV2/Mixed_3b/Branch_2/Conv2d_0c_3x3/weights': [3, 3, 96, 96],
    'InceptionV2/Mixed_4a/Branch_0/Conv2d_1a_3x3/weights': [3, 3, 128, 160],
    'InceptionV2/Mixed_4e/Branch_3/Conv2d_0b_1x1/weights': [1, 1, 576, 96],
    'InceptionV2/Mixed_5a/Branch_1/Conv2d_1a_3x3/weights': [3, 3, 256, 256],
    'InceptionV2/Mixed_5c/Branch_0/Conv2d_0a_1x1/weights': [1, 1, 1024, 352],
    'InceptionV2/Mixed_5c/Branch_0/Conv2d_0a_1x1/BatchNorm/moving_mean': [352],
    'InceptionV2/Logits/Conv2d_1c_1x1/weights': [1, 1, 1024, 1001],
    'InceptionV2/Logits/Conv2d_1c_1x1/biases': [1001],
}
INCEPTION_V3_VARIABLES = {
    'InceptionV3/Conv2d_1a_3x3/weights': [3, 3, 3, 32],
    'InceptionV3/Conv2d_4a_3x3/BatchNorm/beta': [192],
    'InceptionV3/Mixed_5c/Branch_1/Conv2d_0b_1x1/weights': [1, 1, 256, 48],
    'InceptionV3/Mixed_5c/Branch_1/Conv_1_0c_5x5/weights': [5, 5, 48, 64],
    'InceptionV3/Mixed_6a/Branch_0/Conv2d_1a_1x1/weights': [3, 3, 288, 384],
    'InceptionV3/Mixed_6c/Branch_2/Conv2d_0d_7x1/weights': [7, 1, 160, 160],
    'InceptionV3/Mixed_7a/Branch_1/Conv2d_1a_3x3/weights': [3, 3, 192, 192],
    'InceptionV3/Mixed_7b/Branch_1/Conv2d_0b_3x1/weights': [3, 1, 384, 384],
    'InceptionV3/Mixed_7c/Branch_1/Conv2d_0c_3x1/weights': [3, 1, 384, 384],
    'InceptionV3/Mixed_7c/Branch_2/Conv2d_0d_3x1/weights': [3, 1, 384, 384],
    'InceptionV3/AuxLogits/Conv2d_1b_1x1/weights': [1, 1, 768, 128],
    'InceptionV3/AuxLogits/Conv2d_2a_5x5/weights': [5, 5, 128, 768],
    'InceptionV3/AuxLogits/Conv2d_2b_1x1/weights': [1, 1, 768, 1001],
    'InceptionV3/AuxLogits/Conv2d_2b_1x1/biases': [1001],
    'InceptionV3/Logits/Conv2d_1c_1x1/weights': [1, 1, 2048, 1001],
}
# Parameters: trainable ones with 1001 classes, without the auxiliary head (a training
# aid, left out of the published figures, which are for 1000 classes).
INCEPTION_CONTRACTS = {
    # 11,178,336 with 1000 classes.
    'inception_v2': InceptionContract(
        INCEPTION_V2_VARIABLES, 277, 11_179_361, 2, ('/weights',),
        NETS['inception_v2'].end_points + ['AvgPool_1a', 'PreLogits', 'Logits',
                                           'Predictions']),
    # 23,817,352 with 1000 classes, as many as tf_keras's InceptionV3 trains. The
    # auxiliary head's logits are a convolution with biases.
    'inception_v3': InceptionContract(
        INCEPTION_V3_VARIABLES, 388, 23_819_401, 2, ('/weights',),
        NETS['inception_v3'].end_points + ['AuxLogits', 'AvgPool_1a', 'PreLogits', 'Logits',
                                           'Predictions']),
    # 42,648,232 with 1000 classes; published 42.7M (-0.12%). No batch-norm scale, no
    # biases but the logits layers'; every weight penalized.
    'inception_v4': InceptionContract(
        INCEPTION_V4_VARIABLES, 608, 42_649_769, 2, ('/weights',),
        NETS['inception_v4'].end_points + ['AuxLogits', 'global_pool', 'PreLogitsFlatten',
                                           'Logits', 'Predictions']),
    # 55,813,192 with 1000 classes (tf_keras's InceptionResNetV2 has exactly as many
    # trainable ones); published 55.8M (+0.02%). Biases in the 40 residual projections
    # (10 + 20 + 9 repeated blocks and Block8) and the logits layers; weights and biases
    # penalized.
    'inception_resnet_v2': InceptionContract(
        INCEPTION_RESNET_V2_VARIABLES, 908, 55_814_729, 40 + 2, ('/weights', '/biases'),
        NETS['inception_resnet_v2'].end_points + ['AuxLogits', 'global_pool',
                                                  'PreLogitsFlatten', 'Logits',
                                                  'Predictions']),
}
# research/slim's totals of the model variables (moving averages included) of *_base.
BASE_MODEL_PARAMETERS = {'inception_v2': 10_173_112, 'inception_v3': 21_802_784}
OUTPUT_OPS = {  # (logits, predictions, auxiliary logits)
    'inception_v2': ('InceptionV2/Logits/SpatialSqueeze', 'InceptionV2/Predictions/Reshape_1',
                     None),
    'inception_v3': ('InceptionV3/Logits/SpatialSqueeze', 'InceptionV3/Predictions/Reshape_1',
                     'InceptionV3/AuxLogits/SpatialSqueeze'),
    'inception_v4': ('InceptionV4/Logits/Logits/BiasAdd', 'InceptionV4/Logits/Predictions',
                     'InceptionV4/AuxLogits/Aux_logits/BiasAdd'),
    'inception_resnet_v2': ('InceptionResnetV2/Logits/Logits/BiasAdd',
                            'InceptionResnetV2/Logits/Predictions',
                            'InceptionResnetV2/AuxLogits/Logits/BiasAdd'),
}


@pytest.mark.slow
@pytest.mark.parametrize('name', INCEPTION_CONTRACTS)
def test_inception_checkpoint_contract_and_clone_reuse(name):
    """Built as clones build it: TF-Slim's checkpoint variables, once."""
    contract = INCEPTION_CONTRACTS[name]
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):  # Evaluation mode: the same variables, faster.
            logits, end_points = build(name, weight_decay=0.00004)
        shapes = variable_shapes()
        parameters = trainable_parameters(exclude_scope='AuxLogits')
        base_parameters = model_parameters(exclude_scopes=['AuxLogits', 'Logits'])
        regularized = penalized_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = build(name)
        assert variable_shapes() == shapes
    assert {v: shapes[v] for v in contract.variables} == contract.variables
    assert len(shapes) == contract.num_variables
    assert not any(v.endswith('/gamma') for v in shapes)
    assert len([v for v in shapes if v.endswith('/biases')]) == contract.biases
    assert parameters == contract.parameters
    if name in BASE_MODEL_PARAMETERS:
        assert base_parameters == BASE_MODEL_PARAMETERS[name]
    assert regularized == {v for v in shapes if v.endswith(contract.regularized)}
    assert list(end_points) == contract.end_points
    assert logits.shape.as_list() == [2, CHECKPOINT_CLASSES] == second.shape.as_list()
    logits_op, predictions_op, aux_logits_op = OUTPUT_OPS[name]
    assert logits.op.name == f'clone_0/{logits_op}'
    assert end_points['Predictions'].op.name == f'clone_0/{predictions_op}'
    if aux_logits_op:
        assert end_points['AuxLogits'].op.name == f'clone_0/{aux_logits_op}'
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
        net, end_points = build(name, num_classes, size=75, **builder_kwargs)
        variables = variable_shapes()
    assert net.shape.as_list() == ([2, num_classes] if num_classes else [2, 1, 1, 1536])
    assert 'AuxLogits' not in end_points
    assert not any(v.startswith(f'{scope}/AuxLogits/') for v in variables)
    assert ('Logits' in end_points) == bool(num_classes)
    assert any(v.startswith(f'{scope}/Logits/') for v in variables) == bool(num_classes)


@pytest.mark.slow
def test_inception_v3_features_global_pool_thin_and_unsqueezed():
    """From 75x75, Inception v3's smallest input, the pooled features without classes;
    reusing them, global pooling of a larger input; thinned by depth_multiplier 0.5, with
    logits (and auxiliary logits) not squeezed."""
    with tf.Graph().as_default():
        features, end_points = inception_v3.inception_v3(images(75), 0)
        variables = variable_shapes()
        pooled, pooled_end_points = inception_v3.inception_v3(images(400), None, reuse=True,
                                                              global_pool=True)
        thin, thin_end_points = inception_v3.inception_v3(
            images(299), 10, scope='Thin', depth_multiplier=0.5, spatial_squeeze=False)
    assert not any('/AuxLogits/' in v or '/Logits/' in v for v in variables)
    assert features.shape.as_list() == [1, 1, 1, 2048] and features is end_points['AvgPool_1a']
    assert features.op.name == 'InceptionV3/Logits/AvgPool_1a_1x1/AvgPool'  # 1x1 from 75.
    assert pooled.shape.as_list() == [1, 1, 1, 2048]
    assert pooled is pooled_end_points['global_pool']
    assert pooled.op.name == 'InceptionV3_1/Logits/GlobalPool'  # The reuse's name scope.
    assert 'AuxLogits' not in pooled_end_points and 'AvgPool_1a' not in pooled_end_points
    assert thin.shape.as_list() == [1, 1, 1, 10]
    assert thin_end_points['Mixed_7c'].shape.as_list() == [1, 8, 8, 1024]
    assert thin_end_points['AuxLogits'].shape.as_list() == [1, 1, 1, 10]


@pytest.mark.slow
def test_inception_v2_features_without_classes_and_thinner_depths():
    with tf.Graph().as_default():
        features, end_points = inception_v2.inception_v2(images(224), None)
        _, thin = inception_v2.inception_v2_base(images(224), depth_multiplier=0.5,
                                                 scope='Thin')
        _, wide = inception_v2.inception_v2_base(images(224), 'Mixed_3c',
                                                 depth_multiplier=2.0, scope='Wide')
    assert features.shape.as_list() == [1, 1, 1, 1024]
    assert features.op.name == 'InceptionV2/Logits/AvgPool_1a_7x7/AvgPool'
    assert 'Logits' not in end_points and 'PreLogits' not in end_points
    full = shapes_of(end_points)
    for name, shape in shapes_of(thin).items():
        assert shape == full[name][:3] + [full[name][3] // 2], name
    assert wide['Mixed_3c'].shape.as_list() == [1, 28, 28, 640]


@pytest.mark.slow
def test_inception_resnet_v2_base_with_output_stride_8_or_aligned_feature_maps():
    """research/slim's shapes at 299x299: output stride 8 keeps 33x33 after Mixed_6a
    (dilated block17s); aligned maps pad 'SAME': 150, 75, 38, 19."""
    with tf.Graph().as_default():
        dense, dense_end_points = inception_resnet_v2.inception_resnet_v2_base(
            images(299), 'PreAuxLogits', output_stride=8)
        aligned, aligned_end_points = inception_resnet_v2.inception_resnet_v2_base(
            images(299), 'Mixed_6a', align_feature_maps=True, scope='Aligned')
        # A dilated convolution runs on the map rearranged into 2x2 interleaved ones.
        dilated = {op.name.split('/')[0] for op in tf.get_default_graph().get_operations()
                   if op.type == 'SpaceToBatchND'}
    assert dense.shape.as_list() == [1, 33, 33, 1088]
    assert dense_end_points['Mixed_6a'].shape.as_list() == [1, 33, 33, 1088]
    assert dilated == {'InceptionResnetV2'}
    assert {name: shape[1] for name, shape in shapes_of(aligned_end_points).items()} == {
        'Conv2d_1a_3x3': 150, 'Conv2d_2a_3x3': 150, 'Conv2d_2b_3x3': 150,
        'MaxPool_3a_3x3': 75, 'Conv2d_3b_1x1': 75, 'Conv2d_4a_3x3': 75,
        'MaxPool_5a_3x3': 38, 'Mixed_5b': 38, 'Mixed_6a': 19}
    assert aligned.shape.as_list() == [1, 19, 19, 1088]
