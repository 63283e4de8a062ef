"""preprocessing_factory: every name (family or network), training and evaluation, on
decoded JPEGs; each network's family; channel handling; each scheme's value range; tf.data's
map; unknown names.

Graphs are built in a private tf.Graph, so eager mode stays on.
"""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment.errors import UsageError
from slim_deploy.nets.nets_factory import NETWORKS
from slim_deploy.preprocessing import preprocessing_factory
from slim_deploy.preprocessing.preprocessing_factory import PREPROCESSING

# Not square and not the input's size, so swapped or skipped resizes show.
HEIGHT, WIDTH = 40, 48
# The image families (every family but 'video').
FAMILIES = ['cifarnet', 'inception', 'lenet', 'vgg']
# Every name get_preprocessing takes: the families and the networks.
NAMES = sorted(set(PREPROCESSING) | set(NETWORKS))
# Each network's family, 'inception' unless listed (trained checkpoints expect it).
FAMILY_EXCEPTIONS = {
    'cifarnet': 'cifarnet', 'nasnet_cifar': 'cifarnet', 'lenet': 'lenet',
    'i3d': 'video', 's3dg': 'video',
    'vgg_a': 'vgg', 'vgg_16': 'vgg', 'vgg_19': 'vgg',
    'resnet_v1_50': 'vgg', 'resnet_v1_101': 'vgg', 'resnet_v1_152': 'vgg', 'resnet_v1_200': 'vgg',
    'keras_convnext_tiny': 'keras', 'keras_efficientnet_b0': 'keras',
    'keras_mobilenet_v3_small': 'keras', 'keras_resnet50': 'keras_caffe',
}


def _family(name):
    return NETWORKS[name].preprocessing if name in NETWORKS else name


def _decoded_jpeg(height=60, width=80, channels=3):
    """A JPEG of random pixels, encoded and decoded in the current graph: uint8
    [height, width, channels], with height and width unknown statically."""
    pixels = np.random.RandomState(0).randint(0, 256, [height, width, channels], np.uint8)
    return tf.io.decode_jpeg(tf.io.encode_jpeg(pixels), channels=channels)


def _preprocess(name, image_fn, is_training, use_grayscale=False, size=(HEIGHT, WIDTH),
                **kwargs):
    """Preprocesses image_fn()'s image in a fresh graph; returns (static shape, value)."""
    with tf.Graph().as_default():
        preprocessing_fn = preprocessing_factory.get_preprocessing(
            name, is_training=is_training, use_grayscale=use_grayscale)
        output = preprocessing_fn(image_fn(), *size, **kwargs)
        assert output.dtype == tf.float32
        with tf.Session() as sess:
            return output.shape.as_list(), sess.run(output)


def _decoded_clip(frames=4):
    """A video of `frames` decoded JPEGs: uint8 [frames, height, width, 3]."""
    return tf.stack([_decoded_jpeg()] * frames)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', NAMES)
def test_every_preprocessing_gives_the_requested_size(name, is_training):
    frames = [4] if _family(name) == 'video' else []
    static_shape, image = _preprocess(name, _decoded_clip if frames else _decoded_jpeg,
                                      is_training)
    assert static_shape == [*frames, HEIGHT, WIDTH, 3]
    assert image.shape == (*frames, HEIGHT, WIDTH, 3) and image.dtype == np.float32
    assert np.isfinite(image).all()


def test_video_preprocessing_rejects_a_single_image():
    with tf.Graph().as_default():
        preprocessing_fn = preprocessing_factory.get_preprocessing('i3d')
        with pytest.raises(ValueError, match=r'expected a video \[frames, height, width, '
                                             r'channels\] with 1 or 3 channels'):
            preprocessing_fn(_decoded_jpeg(), HEIGHT, WIDTH)


def test_the_families_are_slims_plus_video_and_keras():
    assert PREPROCESSING.names == ('cifarnet', 'inception', 'keras', 'keras_caffe', 'lenet',
                                   'vgg', 'video')


def test_every_network_names_its_family():
    assert {name: network.preprocessing for name, network in NETWORKS.items()} == {
        name: FAMILY_EXCEPTIONS.get(name, 'inception') for name in NETWORKS}


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', FAMILIES)
def test_grayscale_option_gives_one_channel(name, is_training):
    static_shape, image = _preprocess(name, _decoded_jpeg, is_training, use_grayscale=True)
    assert static_shape == [HEIGHT, WIDTH, 1] and image.shape == (HEIGHT, WIDTH, 1)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', FAMILIES)
def test_single_channel_input_keeps_one_channel(name, is_training):
    static_shape, image = _preprocess(name, lambda: _decoded_jpeg(channels=1), is_training)
    assert static_shape == [HEIGHT, WIDTH, 1] and image.shape == (HEIGHT, WIDTH, 1)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', ['keras', 'keras_caffe'])
def test_keras_families_give_rgb_even_from_grayscale(name, is_training):
    static_shape, image = _preprocess(name, lambda: _decoded_jpeg(channels=1), is_training)
    assert static_shape == [HEIGHT, WIDTH, 3]
    if name == 'keras':  # Gray stays gray: three equal channels.
        np.testing.assert_array_equal(image[..., 0], image[..., 2])


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_keras_gives_rgb_in_0_to_255(is_training):
    _, image = _preprocess('keras', _decoded_jpeg, is_training)
    assert image.min() >= 0.0 and image.max() <= 255.0 and image.max() > 100.0


def test_keras_caffe_gives_bgr_minus_the_imagenet_mean():
    def red():  # Pure red: R 255, G 0, B 0.
        return tf.constant(np.broadcast_to(np.array([255, 0, 0], np.uint8), [64, 64, 3]))

    _, image = _preprocess('keras_caffe', red, False)
    np.testing.assert_allclose(image, np.broadcast_to(
        np.array([0.0, 0.0, 255.0]) - np.array([103.939, 116.779, 123.68]), image.shape),
        atol=1e-3)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_lenet_resizes_small_digits_to_28x28_in_minus_one_to_one(is_training):
    def digit():
        return tf.constant(np.arange(64, dtype=np.uint8).reshape([8, 8, 1]) * 4)

    _, image = _preprocess('lenet', digit, is_training, size=(28, 28))
    assert image.shape == (28, 28, 1)
    assert image.min() >= -1.0 and image.max() <= 1.0
    assert image.max() - image.min() > 1.5  # The digit's contrast survives.


def test_lenet_leaves_a_28x28_image_unresized():
    pixels = np.random.RandomState(1).randint(0, 256, [28, 28, 1], np.uint8)
    _, image = _preprocess('lenet', lambda: tf.constant(pixels), False, size=(28, 28))
    np.testing.assert_allclose(image, (pixels - 128.0) / 128.0, atol=1e-5)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_inception_scales_to_minus_one_to_one(is_training):
    _, image = _preprocess('inception', _decoded_jpeg, is_training)
    assert image.min() >= -1.0 and image.max() <= 1.0


def test_inception_training_crop_accepts_a_bounding_box():
    bbox = np.array([[[0.1, 0.2, 0.6, 0.9]]], np.float32)  # [1, boxes, (ymin, xmin, ymax, xmax)]
    static_shape, _ = _preprocess('inception', _decoded_jpeg, True, bbox=bbox)
    assert static_shape == [HEIGHT, WIDTH, 3]


def test_vgg_evaluation_subtracts_the_imagenet_mean():
    def gray_128():
        return tf.fill([300, 200, 3], tf.constant(128, tf.uint8))

    _, image = _preprocess('vgg', gray_128, False)
    np.testing.assert_allclose(image, np.broadcast_to(
        128.0 - np.array([123.68, 116.78, 103.94]), image.shape), atol=1e-3)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_vgg_crops_outputs_larger_than_its_resize_side(is_training):
    static_shape, image = _preprocess('vgg', _decoded_jpeg, is_training, size=(300, 320))
    assert static_shape == [300, 320, 3] and image.shape == (300, 320, 3)


def test_cifarnet_evaluation_standardizes_each_image():
    _, image = _preprocess('cifarnet', _decoded_jpeg, False)
    assert abs(image.mean()) < 1e-4 and image.std() == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize('name', FAMILIES)
def test_training_preprocessing_runs_inside_tf_data_map(name):
    preprocessing_fn = preprocessing_factory.get_preprocessing(name, is_training=True)
    with tf.Graph().as_default():
        images = tf.data.Dataset.from_tensors(_decoded_jpeg()).repeat(2).map(
            lambda image: preprocessing_fn(image, HEIGHT, WIDTH)).batch(2)
        batch = tf.data.make_one_shot_iterator(images).get_next()
        with tf.Session() as sess:
            assert sess.run(batch).shape == (2, HEIGHT, WIDTH, 3)


def test_unknown_name_names_the_flag_and_lists_families_and_networks():
    with pytest.raises(UsageError) as error:
        preprocessing_factory.get_preprocessing('foo')
    assert str(error.value) == f"unknown --preprocessing_name 'foo'; valid: {', '.join(NAMES)}"


@pytest.mark.parametrize('shape', [[60, 80, 4], [60, 80, None], [60, 80]])
def test_rejects_images_without_one_or_three_static_channels(shape):
    preprocessing_fn = preprocessing_factory.get_preprocessing('inception')
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match='1 or 3 channels known statically'):
            preprocessing_fn(tf.placeholder(tf.uint8, shape), HEIGHT, WIDTH)
