"""Inception v4 and Inception-ResNet v2 through the factory's contract: TF-Slim's checkpoint
variable names and shapes, parameter counts against the published figures, features
without logits and clone-style reuse.

Graphs are built (not run) in a private tf.Graph, so eager mode stays on.
"""
import collections

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from helpers import build_net, regularized_variables, trainable_parameters, variable_shapes
from slim_deploy.nets import inception_resnet_v2, inception_v4, nets_factory

CHECKPOINT_CLASSES = 1001  # TF-Slim's ImageNet checkpoints: class 0 is background.
pytestmark = pytest.mark.usefixtures('fast_variable_creation')


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
            logits, end_points = build_net(name, weight_decay=0.00004)
        shapes = variable_shapes()
        parameters = trainable_parameters(exclude_scope='AuxLogits')
        regularized = regularized_variables('clone_0/')
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = build_net(name)
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
        net, end_points = build_net(name, num_classes, size=75, **builder_kwargs)
        variables = variable_shapes()
    assert net.shape.as_list() == [2, num_classes or 1536]
    assert 'AuxLogits' not in end_points
    assert not any(v.startswith(f'{scope}/AuxLogits/') for v in variables)
    assert ('Logits' in end_points) == bool(num_classes)
    assert any(v.startswith(f'{scope}/Logits/') for v in variables) == bool(num_classes)
