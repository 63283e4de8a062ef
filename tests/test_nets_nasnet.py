"""NASNet-A and PNASNet-5: TF-Slim's variable names, shapes and parameter counts, end points,
the auxiliary head and drop path in training, features without logits, clone-style reuse.

Each full-size net is built once, graph only: the Mobile nets in training mode with logits
(so with their auxiliary heads), the Large nets without logits and NASNet-CIFAR with logits,
both in evaluation mode. Forward passes run on a reduced NASNet-CIFAR (3 cells of 8
filters), which goes through the same code.
"""
import collections
import dataclasses

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from helpers import parameters, variable_shapes
from slim_deploy.nets.nasnet import cells, nasnet, pnasnet

pytestmark = pytest.mark.usefixtures('fast_variable_creation')


def _parameters(variables, aux):
    """Number of trainable parameters in the auxiliary head (aux) or outside it."""
    return parameters(v for v in variables if v.op.name.startswith('aux_') == aux)


Contract = collections.namedtuple(
    'Contract', ['builder', 'arg_scope', 'size', 'num_classes', 'is_training', 'end_points',
                 'variables', 'parameters', 'aux_parameters'])

# The Mobile nets are built with logits and in training mode (so with the auxiliary head),
# the Large ones without logits in evaluation mode. `parameters` counts the net without its
# auxiliary head and with a 1001-class logits layer, as TF-Slim's checkpoints (0 is
# background); `aux_parameters` the auxiliary head with 1001 classes.
CONTRACTS = {
    'nasnet_mobile': Contract(
        nasnet.nasnet_mobile, nasnet.nasnet_mobile_arg_scope, 224, 1001, True,
        {'Stem': [28, 28, 88], 'Reduction_Cell_0': [14, 14, 352], 'Cell_7': [14, 14, 528],
         'Reduction_Cell_1': [7, 7, 704], 'Cell_11': [7, 7, 1056], 'global_pool': [1056]},
        {'conv0/weights': [3, 3, 3, 32], 'conv0_bn/moving_variance': [32],
         'cell_stem_0/1x1/weights': [1, 1, 32, 11],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights': [5, 5, 11, 1],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/pointwise_weights': [1, 1, 11, 11],
         'cell_stem_0/comb_iter_0/right/separable_7x7_1/depthwise_weights': [7, 7, 32, 1],
         'cell_stem_0/comb_iter_0/right/bn_sep_7x7_2/gamma': [11],
         'cell_stem_1/path1_conv/weights': [1, 1, 32, 11],
         'cell_stem_1/path2_conv/weights': [1, 1, 32, 11],
         'cell_stem_1/final_path_bn/beta': [22], 'cell_stem_1/1x1/weights': [1, 1, 44, 22],
         'cell_0/path1_conv/weights': [1, 1, 44, 22], 'cell_0/1x1/weights': [1, 1, 88, 44],
         'cell_0/comb_iter_4/left/separable_3x3_2/pointwise_weights': [1, 1, 44, 44],
         'cell_1/prev_1x1/weights': [1, 1, 88, 44], 'cell_1/prev_bn/moving_mean': [44],
         'reduction_cell_0/1x1/weights': [1, 1, 264, 88],
         'reduction_cell_0/prev_1x1/weights': [1, 1, 264, 88],
         # skip_reduction_layer_input off: cell_4's h1 is reduction_cell_0's input.
         'cell_4/path1_conv/weights': [1, 1, 264, 44],
         'aux_7/aux_logits/proj/weights': [1, 1, 528, 128],
         'aux_7/aux_logits/aux_bn0/beta': [128],
         'aux_7/aux_logits/Conv/weights': [4, 4, 128, 768],
         'aux_7/aux_logits/FC/weights': [768, 1001], 'aux_7/aux_logits/FC/biases': [1001],
         'final_layer/FC/weights': [1056, 1001], 'final_layer/FC/biases': [1001]},
        5_291_035, 2_412_009),  # Published: 5.3M (NASNet-A 4 @ 1056).
    'nasnet_large': Contract(
        nasnet.nasnet_large, nasnet.nasnet_large_arg_scope, 331, None, False,
        {'Stem': [42, 42, 336], 'Cell_5': [42, 42, 1008], 'Reduction_Cell_0': [21, 21, 1344],
         'Cell_11': [21, 21, 2016], 'Reduction_Cell_1': [11, 11, 2688],
         'Cell_17': [11, 11, 4032], 'global_pool': [4032]},
        {'conv0/weights': [3, 3, 3, 96], 'cell_stem_0/1x1/weights': [1, 1, 96, 42],
         'cell_stem_0/comb_iter_0/right/separable_7x7_1/depthwise_weights': [7, 7, 96, 1],
         'cell_stem_1/path2_conv/weights': [1, 1, 96, 42],
         'cell_0/path1_conv/weights': [1, 1, 168, 84],
         'cell_1/prev_1x1/weights': [1, 1, 336, 168],
         'reduction_cell_0/prev_1x1/weights': [1, 1, 1008, 336],
         # skip_reduction_layer_input on: cell_6's h1 is reduction_cell_0's h1 (cell_4).
         'cell_6/path1_conv/weights': [1, 1, 1008, 168],
         'cell_17/comb_iter_1/left/separable_5x5_2/depthwise_weights': [5, 5, 672, 1]},
        88_757_183, 0),  # Published: 88.9M (NASNet-A 6 @ 4032).
    'pnasnet_mobile': Contract(
        pnasnet.pnasnet_mobile, pnasnet.pnasnet_mobile_arg_scope, 224, 1001, True,
        {'Stem': [28, 28, 135], 'Cell_2': [28, 28, 270], 'Cell_3': [14, 14, 540],
         'Cell_6': [7, 7, 1080], 'Cell_8': [7, 7, 1080], 'global_pool': [1080]},
        {'cell_stem_0/1x1/weights': [1, 1, 32, 13],
         'cell_stem_0/comb_iter_0/left/separable_5x5_1/depthwise_weights': [5, 5, 32, 1],
         # The max pool on the 32-deep stem convolution needs a projection to 13.
         'cell_stem_0/comb_iter_0/right/1x1/weights': [1, 1, 32, 13],
         # 27 filters, odd: the second path takes the extra one.
         'cell_stem_1/path1_conv/weights': [1, 1, 32, 13],
         'cell_stem_1/path2_conv/weights': [1, 1, 32, 14],
         'cell_stem_1/1x1/weights': [1, 1, 65, 27],
         'cell_0/path2_conv/weights': [1, 1, 65, 27], 'cell_0/1x1/weights': [1, 1, 135, 54],
         'cell_3/prev_1x1/weights': [1, 1, 270, 108],
         'cell_3/comb_iter_4/right/1x1/weights': [1, 1, 108, 108],
         'cell_4/path1_conv/weights': [1, 1, 270, 54],
         'aux_5/aux_logits/proj/weights': [1, 1, 540, 128],
         'aux_5/aux_logits/Conv/weights': [4, 4, 128, 768],
         'final_layer/FC/weights': [1080, 1001]},
        5_065_568, 2_413_545),  # Published: 5.1M (PNASNet-5, N = 3, F = 54).
    'pnasnet_large': Contract(
        pnasnet.pnasnet_large, pnasnet.pnasnet_large_arg_scope, 331, None, False,
        {'Stem': [42, 42, 540], 'Cell_3': [42, 42, 1080], 'Cell_4': [21, 21, 2160],
         'Cell_8': [11, 11, 4320], 'Cell_11': [11, 11, 4320], 'global_pool': [4320]},
        {'cell_stem_0/comb_iter_0/right/1x1/weights': [1, 1, 96, 54],
         'cell_stem_1/path2_conv/weights': [1, 1, 96, 54],
         'cell_0/path1_conv/weights': [1, 1, 270, 108], 'cell_0/1x1/weights': [1, 1, 540, 216],
         'cell_4/comb_iter_4/right/1x1/weights': [1, 1, 432, 432],
         'cell_11/comb_iter_1/left/separable_7x7_2/depthwise_weights': [7, 7, 864, 1]},
        86_061_989, 0),  # Published: 86.1M (PNASNet-5, N = 4, F = 216).
}


@pytest.mark.slow
@pytest.mark.parametrize('name', CONTRACTS)
def test_imagenet_net_contract(name):
    contract = CONTRACTS[name]
    size = contract.size
    with tf.Graph().as_default():
        tf.train.create_global_step()  # As the training loop does, before the model.
        with slim.arg_scope(contract.arg_scope()):
            net, end_points = contract.builder(tf.zeros([2, size, size, 3]),
                                               contract.num_classes,
                                               is_training=contract.is_training)
        variables = variable_shapes()
        trainable = tf.trainable_variables()
        weights = [name for name in variables if name.endswith('weights')]
        regularized = len(tf.losses.get_regularization_losses())
    for point, shape in contract.end_points.items():
        assert end_points[point].shape.as_list() == [2] + shape, point
    depth = contract.end_points['global_pool'][0]
    if contract.num_classes:
        assert net.shape.as_list() == [2, 1001] and end_points['Logits'] is net
        assert end_points['Predictions'].op.name == 'final_layer/predictions'
        assert variables['final_layer/FC/weights'] == [depth, 1001]
        logits_parameters = 0
    else:
        assert net is end_points['global_pool'] and net.op.name == 'final_layer/Mean'
        assert not {'Logits', 'Predictions'} & set(end_points)
        assert not any(name.startswith('final_layer/') for name in variables)
        logits_parameters = (depth + 1) * 1001  # The layer left out.
    assert ('AuxLogits' in end_points) == contract.is_training
    assert {name: variables.get(name) for name in contract.variables} == contract.variables
    assert _parameters(trainable, aux=False) + logits_parameters == contract.parameters
    assert _parameters(trainable, aux=True) == contract.aux_parameters
    assert regularized == len(weights)  # Every convolution and fully connected weight.
    # TF-Slim's own check: cell_stem_1's h1 already has the depth its max pool needs.
    assert 'cell_stem_1/comb_iter_0/right/1x1/weights' not in variables


# Published: 3.3M (NASNet-A 6 @ 768, 10 classes). That figure has two significant digits;
# without batch norm's 37,248 scales and offsets the count is 3,309,290.
NASNET_CIFAR_PARAMETERS = 3_346_538


@pytest.mark.slow
def test_nasnet_cifar_contract():
    with tf.Graph().as_default():
        with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
            logits, end_points = nasnet.nasnet_cifar(tf.zeros([2, 32, 32, 3]), 10)
        variables = variable_shapes()
        parameters = _parameters(tf.trainable_variables(), aux=False)
        op_types = {op.type for op in tf.get_default_graph().get_operations()}
        global_step = tf.train.get_global_step()
    assert logits.shape.as_list() == [2, 10]
    expected = {'Stem': [32, 32, 96], 'Reduction_Cell_0': [16, 16, 256],
                'Reduction_Cell_1': [8, 8, 512], 'global_pool': [768], 'Logits': [10],
                'Predictions': [10]}
    expected.update({f'Cell_{i}': [32 // 2 ** (i // 6)] * 2 + [192 * 2 ** (i // 6)]
                     for i in range(18)})
    assert {k: v.shape.as_list()[1:] for k, v in end_points.items()} == expected
    assert parameters == NASNET_CIFAR_PARAMETERS
    for name, shape in {
            'l1_stem_3x3/weights': [3, 3, 3, 96], 'l1_stem_bn/beta': [96],
            # cell_0 has no previous cell: its h1 is the 96-deep stem, projected for output.
            'cell_0/cell_output/reduction_1/path_conv/weights': [1, 1, 96, 32],
            'cell_0/comb_iter_0/right/separable_3x3_1/depthwise_weights': [3, 3, 96, 1],
            'cell_0/comb_iter_2/right/1x1/weights': [1, 1, 96, 32],
            'cell_1/prev_1x1/weights': [1, 1, 96, 32],
            'reduction_cell_1/comb_iter_0/right/separable_7x7_2/pointwise_weights':
                [1, 1, 128, 128],
            'final_layer/FC/weights': [768, 10]}.items():
        assert variables[name] == shape, name
    # Evaluation: no drop path (so no global step needed), no auxiliary head.
    assert 'RandomUniform' not in op_types and global_step is None
    assert not any(name.startswith('aux_') for name in variables)


SMALL_CIFAR = dataclasses.replace(nasnet.CIFAR, num_cells=3, num_conv_filters=8,
                                  total_training_steps=10)


def _build_small(images, num_classes=10):
    """Builds the reduced NASNet-CIFAR in training mode."""
    with slim.arg_scope(nasnet.nasnet_cifar_arg_scope()):
        return nasnet.nasnet_cifar(images, num_classes, is_training=True, config=SMALL_CIFAR)


@pytest.mark.slow
def test_training_clones_share_variables_and_drop_path_follows_the_global_step():
    """Two training clones as model_deploy builds them (own name scopes, variables reused
    after the first); drop path drops nothing at step 0 and acts once the step has grown."""
    images = np.random.RandomState(0).rand(2, 32, 32, 3).astype(np.float32)
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        global_step = tf.train.create_global_step()
        with tf.name_scope('clone_0'):
            logits, end_points = _build_small(images)
        variables = tf.global_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = _build_small(images)
        assert tf.global_variables() == variables
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            at_start = [sess.run(logits) for _ in range(2)]
            sess.run(global_step.assign(SMALL_CIFAR.total_training_steps))
            ramped_up = [sess.run(logits) for _ in range(2)]
    assert logits.op.name.startswith('clone_0/') and second.op.name.startswith('clone_1/')
    # Reductions before cells 1 and 2, so the auxiliary head sits on cell 1 (16x16 -> 4x4).
    assert end_points['AuxLogits'].shape.as_list() == [2, 10]
    assert {'aux_1/aux_logits/Conv/weights', 'aux_1/aux_logits/FC/weights'} <= {
        v.op.name for v in variables}
    np.testing.assert_array_equal(*at_start)
    assert not np.allclose(*ramped_up)
    assert np.isfinite(ramped_up).all()


def test_drop_path_schedule_and_masks():
    assert SMALL_CIFAR.drop_path_keep_prob == 0.6 and SMALL_CIFAR.total_training_steps == 10
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        step = tf.placeholder(tf.int64, [])
        keep_prob = cells.drop_path_schedule(SMALL_CIFAR, step, total_cells=5)
        probs = [keep_prob(0), keep_prob(4)]
        dropped = cells.drop_path(tf.ones([4000, 2, 2, 1]), 0.25)
        with tf.Session() as sess:
            at = {s: sess.run(probs, {step: s}) for s in (0, 5, 10, 20)}
            masks = sess.run(dropped)
    np.testing.assert_allclose(at[0], [1.0, 1.0])
    np.testing.assert_allclose(at[5], [1 - 0.5 * 0.2 * 0.4, 1 - 0.5 * 0.4], rtol=1e-6)
    np.testing.assert_allclose(at[10], [1 - 0.2 * 0.4, 0.6], rtol=1e-6)
    np.testing.assert_allclose(at[20], at[10])
    assert set(np.unique(masks)) == {0.0, 4.0}  # Whole examples dropped, kept ones scaled.
    assert (masks == masks[:, :1, :1]).all()
    assert abs((masks[:, 0, 0, 0] > 0).mean() - 0.25) < 0.03
