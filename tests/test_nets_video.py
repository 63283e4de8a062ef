"""I3D and S3D-G (slim_deploy/nets/i3d.py, slim_deploy/nets/s3dg.py): TF-Slim's variable names and
shapes, parameter counts, end points, features without logits, clone reuse, a small forward
pass; and the video preprocessing.

Graphs are built in a private tf.Graph, so eager mode stays on; the full-size nets build
their graphs only, a narrow (depth_multiplier) net on tiny clips runs.
"""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from helpers import parameters, variable_shapes
from slim_deploy.nets import i3d, i3d_utils, s3dg
from slim_deploy.preprocessing import video_preprocessing

KINETICS_CLASSES = 400
NETS = {'i3d': (i3d.i3d, i3d.i3d_arg_scope), 's3dg': (s3dg.s3dg, s3dg.s3dg_arg_scope)}
pytestmark = pytest.mark.usefixtures('fast_variable_creation')


def _build(name, shape=(2, 64, 224, 224, 3), num_classes=KINETICS_CLASSES,
           weight_decay=0.0, **kwargs):
    """Builds net `name` in its arg_scope in the current graph on zero videos of `shape`
    (TF-Slim's default: 64 frames of 224x224) and returns (net, end_points)."""
    builder, arg_scope = NETS[name]
    with slim.arg_scope(arg_scope(weight_decay=weight_decay)):
        return builder(tf.zeros(shape), num_classes, **kwargs)


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


@pytest.mark.slow
@pytest.mark.parametrize('name', NETS)
def test_contract_at_slims_default_size(name):
    with tf.Graph().as_default():
        logits, end_points = _build(name, weight_decay=1e-7)
        variables = variable_shapes()
        assert parameters(tf.trainable_variables()) == PARAMETERS[name]
        assert len(variables) == GLOBAL_VARIABLES[name]
        penalized = {loss.op.name.split('/kernel/Regularizer')[0]
                     for loss in tf.losses.get_regularization_losses()}
        moving = tf.get_collection('moving_vars')
    assert logits.shape.as_list() == [2, KINETICS_CLASSES]
    assert logits.op.name.startswith('InceptionV1/Logits/')
    assert list(end_points) == list(END_POINT_SHAPES) + ['Logits', 'Predictions']
    assert {key: end_points[key].shape.as_list() for key in END_POINT_SHAPES} == \
        END_POINT_SHAPES
    assert end_points['Logits'] is logits
    assert end_points['Predictions'].shape.as_list() == [2, KINETICS_CLASSES]
    assert {k: variables[k] for k in VARIABLES[name]} == VARIABLES[name]
    weights = {k[:-len('/weights')] for k in variables if k.endswith('/weights')}
    assert len(weights) == CONVOLUTIONS[name] and penalized == weights
    assert len(moving) == 2 * 57 and all('/BatchNorm/moving_' in v.op.name for v in moving)


@pytest.mark.slow
def test_kernel_sizes_follow_the_start_blocks():
    """S3D-G's switches: temporal convolutions and gating only from the named block on;
    without gating it is S3D."""
    with tf.Graph().as_default():
        _build('s3dg', num_classes=None, first_temporal_kernel_size=7,
               temporal_conv_startat='Mixed_4b', gating_startat='Mixed_4c')
        variables = variable_shapes()
    temporal = {k.split('/')[1] for k in variables if '/temporal/' in k}
    gated = {k.split('/')[1] for k in variables if '/self_gating/' in k}
    assert temporal == {'Mixed_4b', 'Mixed_4c', 'Mixed_4d', 'Mixed_4e', 'Mixed_4f',
                        'Mixed_5b', 'Mixed_5c'}
    assert gated == temporal - {'Mixed_4b'}
    assert variables['InceptionV1/Conv2d_1a_7x7/weights'] == [7, 7, 7, 3, 64]
    assert variables['InceptionV1/Conv2d_2c_3x3/weights'] == [1, 3, 3, 64, 192]
    assert variables['InceptionV1/Mixed_3c/Branch_1/Conv2d_0b_3x3/weights'] == \
        [1, 3, 3, 128, 192]
    with tf.Graph().as_default():
        _build('s3dg', gating_startat=None)
        assert parameters(tf.trainable_variables()) == 7_889_520 + LOGITS_PARAMETERS
        assert not any('/self_gating/' in k for k in variable_shapes())


@pytest.mark.slow
@pytest.mark.parametrize('name, num_classes', [('i3d', None), ('s3dg', 0)])
def test_no_classes_returns_pooled_features_without_a_logits_layer(name, num_classes):
    with tf.Graph().as_default():
        net, end_points = _build(name, shape=(2, 16, 224, 224, 3), num_classes=num_classes)
        variables = variable_shapes()
    assert net.shape.as_list() == [2, 1024]
    assert list(end_points) == list(i3d_utils.ENDPOINTS)
    assert not any(k.startswith('InceptionV1/Logits') for k in variables)


@pytest.mark.slow
@pytest.mark.parametrize('frames, size, mixed_5c', [
    (1, 112, [2, 1, 4, 4, 1024]),  # Half size; one frame suffices (all 'SAME' padded).
    # ceil(10 / 8) frames; larger than 224, so the logits average 2x2 windows.
    (10, 256, [2, 2, 8, 8, 1024]),
])
def test_other_clip_sizes(frames, size, mixed_5c):
    with tf.Graph().as_default():
        logits, end_points = _build('i3d', shape=(2, frames, size, size, 3))
    assert end_points['Mixed_5c'].shape.as_list() == mixed_5c
    assert logits.shape.as_list() == [2, KINETICS_CLASSES]


@pytest.mark.slow
def test_second_clone_reuses_the_variables():
    """S3D-G (whose layers include all of I3D's kinds) built twice as model_deploy's
    clones are: no new variables."""
    with tf.Graph().as_default():
        with tf.name_scope('clone_0'):
            first, _ = _build('s3dg', shape=(2, 8, 64, 64, 3), is_training=True)
        variables = tf.global_variables()
        with tf.name_scope('clone_1'), tf.variable_scope(tf.get_variable_scope(), reuse=True):
            second, _ = _build('s3dg', shape=(2, 8, 64, 64, 3), is_training=True)
        assert tf.global_variables() == variables
    assert first.op.name.startswith('clone_0/') and second.op.name.startswith('clone_1/')


@pytest.mark.parametrize('kwargs, message', [
    ({'first_temporal_kernel_size': 2}, 'first_temporal_kernel_size must be 1, 3, 5 or 7'),
    ({'gating_startat': 'Mixed_6a'}, "start block must be None or one of .*got 'Mixed_6a'"),
    ({'depth_multiplier': 0}, 'depth_multiplier must be positive'),
])
def test_bad_arguments_are_rejected(kwargs, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        _build('s3dg', shape=(2, 8, 32, 32, 3), **kwargs)


def test_images_are_rejected():
    with tf.Graph().as_default(), pytest.raises(
            ValueError, match=r'expected videos \[batch, frames, height, width, channels\]'):
        _build('i3d', shape=(2, 224, 224, 3))


@pytest.mark.slow
def test_forward_pass():
    """A narrow S3D-G (depth_multiplier 1/8, at least 16 channels) on 2 random clips of
    8 frames of 32x32: evaluation is deterministic, dropout acts in training only, and
    the temporal halves start as identities in time."""
    clips = np.random.RandomState(0).uniform(-1, 1, (2, 8, 32, 32, 3)).astype(np.float32)
    kwargs = {'depth_multiplier': 0.125, 'dropout_keep_prob': 0.5}
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        with slim.arg_scope(s3dg.s3dg_arg_scope()):
            eval_logits, end_points = s3dg.s3dg(clips, 5, **kwargs)
            with tf.variable_scope(tf.get_variable_scope(), reuse=True):
                train_logits, _ = s3dg.s3dg(clips, 5, is_training=True, **kwargs)
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
