"""The preprocessing modules at slim's paths and preprocessing_factory.

Each module: slim's public names and signatures; its evaluation values on small known
images (inception's central crop and [-1, 1] scaling, vgg's aspect-preserving resize and
mean subtraction, cifarnet's crop or pad and standardization, lenet's crop or pad and
scaling), resized as tf.image's v1 (no half-pixel centers); its training outputs' shapes
and ranges; its image summaries, only with add_image_summaries; use_grayscale.
The factory: every name (family or network; slim's names map to slim's families), kwargs,
channel handling, decoded JPEGs, tf.data's map, unknown names.

Graphs are built in a private tf.Graph, so eager mode stays on.
"""
import collections
import inspect

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.nets.nets_factory import NETWORKS
from slim_deploy.preprocessing import (
    cifarnet_preprocessing,
    inception_preprocessing,
    lenet_preprocessing,
    preprocessing_factory,
    vgg_preprocessing,
)
from slim_deploy.preprocessing.preprocessing_factory import PREPROCESSING

# Not square and not the input's size, so swapped or skipped resizes show.
HEIGHT, WIDTH = 40, 48
# The image families (every family but 'video').
FAMILIES = ['cifarnet', 'inception', 'keras', 'keras_caffe', 'lenet', 'vgg']
SLIM_FAMILIES = ['cifarnet', 'inception', 'lenet', 'vgg']
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
# Slim's preprocessing_factory: its names -> their families.
SLIM_NAMES = {
    **{name: name for name in SLIM_FAMILIES},
    **{name: 'inception' for name in (
        'inception_v1', 'inception_v2', 'inception_v3', 'inception_v4', 'inception_resnet_v2',
        'mobilenet_v1', 'mobilenet_v2', 'mobilenet_v2_035', 'mobilenet_v2_140',
        'mobilenet_v3_small', 'mobilenet_v3_large', 'mobilenet_v3_small_minimalistic',
        'mobilenet_v3_large_minimalistic', 'mobilenet_edgetpu', 'mobilenet_edgetpu_075',
        'nasnet_mobile', 'nasnet_large', 'pnasnet_mobile', 'pnasnet_large')},
    **{name: 'vgg' for name in (
        'vgg_a', 'vgg_16', 'vgg_19', 'resnet_v1_50', 'resnet_v1_101', 'resnet_v1_152',
        'resnet_v1_200', 'resnet_v2_50', 'resnet_v2_101', 'resnet_v2_152', 'resnet_v2_200')},
}
# Where the toolkit's NETWORKS differ: slim's factory gives ResNet V2 vgg's preprocessing,
# though its checkpoints were trained with inception's (slim's README says to pass
# --preprocessing_name inception).
TOOLKIT_NAMES = {f'resnet_v2_{depth}': 'inception' for depth in (50, 101, 152, 200)}

# Slim's public functions and their parameters (ours may add keyword parameters after them).
SLIM_SIGNATURES = {
    cifarnet_preprocessing: {
        'preprocess_for_train': '(image, output_height, output_width, padding=4, '
                                'add_image_summaries=True, use_grayscale=False',
        'preprocess_for_eval': '(image, output_height, output_width, add_image_summaries=True, '
                               'use_grayscale=False',
        'preprocess_image': '(image, output_height, output_width, is_training=False, '
                            'add_image_summaries=True, use_grayscale=False',
    },
    inception_preprocessing: {
        'apply_with_random_selector': '(x, func, num_cases',
        'distort_color': '(image, color_ordering=0, fast_mode=True, scope=None',
        'distorted_bounding_box_crop': '(image, bbox, min_object_covered=0.1, '
                                       'aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0), '
                                       'max_attempts=100, scope=None',
        'preprocess_for_train': '(image, height, width, bbox, fast_mode=True, scope=None, '
                                'add_image_summaries=True, random_crop=True, use_grayscale=False',
        'preprocess_for_eval': '(image, height, width, central_fraction=0.875, scope=None, '
                               'central_crop=True, use_grayscale=False',
        'preprocess_image': '(image, height, width, is_training=False, bbox=None, fast_mode=True, '
                            'add_image_summaries=True, crop_image=True, use_grayscale=False',
    },
    lenet_preprocessing: {
        'preprocess_image': '(image, output_height, output_width, is_training, '
                            'use_grayscale=False',
    },
    vgg_preprocessing: {
        'preprocess_for_train': '(image, output_height, output_width, resize_side_min=256, '
                                'resize_side_max=512, use_grayscale=False',
        'preprocess_for_eval': '(image, output_height, output_width, resize_side, '
                               'use_grayscale=False',
        'preprocess_image': '(image, output_height, output_width, is_training=False, '
                            'resize_side_min=256, resize_side_max=512, use_grayscale=False',
    },
    preprocessing_factory: {
        'get_preprocessing': '(name, is_training=False, use_grayscale=False',
    },
}

Built = collections.namedtuple('Built', 'shape values summaries')


def _build(make, runs=1):
    """Builds make() in a fresh graph and runs it `runs` times; returns its static shape
    (list), its values (one array per run) and the op names of the image summaries made."""
    with tf.Graph().as_default():
        output = make()
        assert output.dtype == tf.float32
        summaries = [summary.op.name for summary in tf.get_collection(tf.GraphKeys.SUMMARIES)]
        with tf.Session() as sess:
            values = [sess.run(output) for _ in range(runs)]
    return Built(output.shape.as_list(), values, summaries)


def _value(make):
    return _build(make).values[0]


def _pixels(height, width, channels=3, seed=0):
    """Random uint8 pixels [height, width, channels]."""
    return np.random.RandomState(seed).randint(0, 256, [height, width, channels], np.uint8)


def _family(name):
    return NETWORKS[name].preprocessing if name in NETWORKS else name


def _decoded_jpeg(height=60, width=80, channels=3):
    """A JPEG of random pixels, encoded and decoded in the current graph: uint8
    [height, width, channels], with height and width unknown statically."""
    return tf.io.decode_jpeg(tf.io.encode_jpeg(_pixels(height, width, channels)),
                             channels=channels)


def _decoded_clip(frames=4):
    """A video of `frames` decoded JPEGs: uint8 [frames, height, width, 3]."""
    return tf.stack([_decoded_jpeg()] * frames)


def _preprocess(name, image_fn, is_training, use_grayscale=False, size=(HEIGHT, WIDTH),
                **kwargs):
    """Preprocesses image_fn()'s image with the factory's function for `name`."""
    preprocessing_fn = preprocessing_factory.get_preprocessing(
        name, is_training=is_training, use_grayscale=use_grayscale)
    return _build(lambda: preprocessing_fn(image_fn(), *size, **kwargs))


def _standardized(image):
    """tf.image.per_image_standardization's documented formula, in numpy."""
    image = image.astype(np.float64)
    return (image - image.mean()) / max(image.std(), 1 / np.sqrt(image.size))


# Slim's names and signatures.

@pytest.mark.parametrize('module', SLIM_SIGNATURES, ids=lambda module: module.__name__)
def test_slims_functions_with_slims_parameters_first(module):
    for name, slims in SLIM_SIGNATURES[module].items():
        ours = str(inspect.signature(getattr(module, name)))
        assert ours == slims + ')' or ours.startswith(slims + ', '), (name, ours)


def test_modules_are_served_at_slims_paths():
    from preprocessing import inception_preprocessing as at_slims_path
    assert at_slims_path is inception_preprocessing


# Inception.

def test_inception_evaluation_keeps_the_central_seven_eighths_in_minus_one_to_one():
    pixels = _pixels(16, 16)  # 87.5% of 16 is 14: rows and columns 1 to 14.
    built = _build(lambda: inception_preprocessing.preprocess_image(tf.constant(pixels), 14, 14))
    assert built.shape == [14, 14, 3] and built.summaries == []
    np.testing.assert_allclose(built.values[0], pixels[1:15, 1:15] / 255 * 2 - 1, atol=1e-6)


def test_inception_evaluation_takes_float_images_in_zero_to_one_and_other_fractions():
    image = np.random.RandomState(1).uniform(size=[8, 8, 1]).astype(np.float32)
    output = _value(lambda: inception_preprocessing.preprocess_image(
        tf.constant(image), 4, 4, central_fraction=0.5))
    np.testing.assert_allclose(output, image[2:6, 2:6] * 2 - 1, atol=1e-6)
    uncropped = _value(lambda: inception_preprocessing.preprocess_for_eval(
        tf.constant(image), None, None, central_fraction=None))  # Neither crop nor resize.
    np.testing.assert_allclose(uncropped, image * 2 - 1, atol=1e-6)


def test_inception_resizes_bilinearly_without_half_pixel_centers():
    # Columns 0 and 1 -> 4 columns sampled at 0, 0.5, 1 and 1.5 (clamped to 1).
    image = np.broadcast_to(np.array([0.0, 1.0], np.float32)[None, :, None], [2, 2, 3])
    output = _value(lambda: inception_preprocessing.preprocess_image(
        tf.constant(image), 4, 4, crop_image=False))
    np.testing.assert_allclose(output, np.broadcast_to(
        np.array([-1.0, 0.0, 1.0, 1.0])[None, :, None], [4, 4, 3]), atol=1e-6)


def test_inception_evaluation_in_grayscale_is_the_luma():
    orange = np.broadcast_to(np.array([255, 128, 0], np.uint8), [16, 16, 3])
    built = _build(lambda: inception_preprocessing.preprocess_image(
        tf.constant(orange), 7, 9, use_grayscale=True))
    luma = (0.2989 * 255 + 0.5870 * 128) / 255
    assert built.shape == [7, 9, 1]
    np.testing.assert_allclose(built.values[0], luma * 2 - 1, atol=1e-5)


@pytest.mark.parametrize('kwargs', [{}, {'fast_mode': False}, {'crop_image': False},
                                    {'use_grayscale': True}], ids=str)
def test_inception_training_distorts_within_minus_one_to_one(kwargs):
    built = _build(lambda: inception_preprocessing.preprocess_image(
        tf.constant(_pixels(30, 20)), 12, 14, is_training=True, **kwargs), runs=3)
    assert built.shape == [12, 14, 1 if kwargs.get('use_grayscale') else 3]
    for image in built.values:
        assert image.min() >= -1.0 and image.max() <= 1.0 and image.std() > 0.05
    assert not np.array_equal(built.values[0], built.values[1])  # Random at each run.


def test_inception_training_crops_overlap_the_bounding_box():
    # A black image with a white box: at least 10% of the box shows in every crop.
    image = np.zeros([40, 40, 3], np.float32)
    image[20:40, 20:40] = 1.0
    bbox = np.array([[[0.5, 0.5, 1.0, 1.0]]], np.float32)
    built = _build(lambda: inception_preprocessing.preprocess_for_train(
        tf.constant(image), 20, 20, bbox, add_image_summaries=False), runs=10)
    for output in built.values:
        assert output.max() > 0.0  # Brightness changes shift by 32/255 at most.


def test_distorted_bounding_box_crop_returns_the_crop_and_its_box():
    with tf.Graph().as_default():
        image = tf.constant(_pixels(40, 50))
        crop, box = inception_preprocessing.distorted_bounding_box_crop(
            image, tf.constant([[[0.25, 0.2, 0.75, 0.8]]]), min_object_covered=1.0)
        assert box.shape.as_list() == [1, 1, 4] and crop.shape.rank == 3
        with tf.Session() as sess:
            for _ in range(5):
                crop_value, (ymin, xmin, ymax, xmax) = sess.run([crop, box[0, 0]])
                height, width = round((ymax - ymin) * 40), round((xmax - xmin) * 50)
                assert crop_value.shape == (height, width, 3)
                # The box's edges as the float32 tensor holds them (TensorFlow 2.16 crops at
                # them exactly).
                top, left, bottom, right = np.float32([0.25, 0.2, 0.75, 0.8])
                assert ymin <= top and xmin <= left and ymax >= bottom and xmax >= right


@pytest.mark.parametrize('fast_mode', [True, False], ids=['fast', 'full'])
def test_distort_color_keeps_zero_to_one_in_each_ordering(fast_mode):
    image = np.random.RandomState(0).uniform(size=[8, 8, 3]).astype(np.float32)
    with tf.Graph().as_default():
        outputs = [inception_preprocessing.distort_color(tf.constant(image), ordering, fast_mode)
                   for ordering in range(4)]
        with tf.Session() as sess:
            for output in sess.run(outputs):
                assert output.min() >= 0.0 and output.max() <= 1.0
                assert not np.allclose(output, image)
    if not fast_mode:
        with pytest.raises(ValueError, match=r'color_ordering must be in \[0, 3\]'):
            inception_preprocessing.distort_color(image, 4, fast_mode=False)


def test_distort_color_of_one_channel_changes_brightness_only():
    with tf.Graph().as_default():
        output = inception_preprocessing.distort_color(tf.fill([4, 4, 1], 0.5))
        assert not [op for op in tf.get_default_graph().get_operations()
                    if op.type == 'AdjustSaturation']
        with tf.Session() as sess:
            value = sess.run(output)
    assert np.ptp(value) == 0 and abs(value[0, 0, 0] - 0.5) <= 32 / 255 + 1e-6


def test_apply_with_random_selector_builds_each_case_once_and_draws_them_all():
    cases = []

    def func(x, case):
        cases.append(case)
        return x * case

    with tf.Graph().as_default():
        output = inception_preprocessing.apply_with_random_selector(tf.constant(1.0), func, 3)
        with tf.Session() as sess:
            drawn = {float(sess.run(output)) for _ in range(60)}
    assert cases == [0, 1, 2] and drawn == {0.0, 1.0, 2.0}


# VGG.

def test_vgg_evaluation_crops_the_center_and_subtracts_the_mean_pixel():
    pixels = _pixels(4, 6)  # Its smaller side is already resize_side: no resizing.
    output = _value(lambda: vgg_preprocessing.preprocess_image(
        tf.constant(pixels), 2, 2, resize_side_min=4))
    np.testing.assert_allclose(output, pixels[1:3, 2:4] - np.array([123.68, 116.78, 103.94]),
                               atol=1e-4)


def test_vgg_evaluation_resizes_keeping_the_aspect_ratio():
    # 10x5 rows 0, 10, ..., 90 -> 8x4 rows sampled at 0, 1.25, ..., 8.75 (v1 bilinear),
    # whose central 4 rows are 25, 37.5, 50 and 62.5.
    rows = np.broadcast_to(np.arange(0, 100, 10, dtype=np.float32)[:, None, None], [10, 5, 3])
    output = _value(lambda: vgg_preprocessing.preprocess_for_eval(tf.constant(rows), 4, 4, 4))
    expected = np.array([25.0, 37.5, 50.0, 62.5])[:, None, None] - np.array(
        vgg_preprocessing.RGB_MEANS)
    np.testing.assert_allclose(output, np.broadcast_to(expected, [4, 4, 3]), atol=1e-4)


def test_vgg_evaluation_subtracts_the_imagenet_mean():
    gray_128 = np.full([300, 200, 3], 128, np.uint8)
    output = _value(lambda: vgg_preprocessing.preprocess_image(tf.constant(gray_128), 224, 224))
    np.testing.assert_allclose(output, np.broadcast_to(
        128.0 - np.array([123.68, 116.78, 103.94]), [224, 224, 3]), atol=1e-3)


def test_vgg_in_grayscale_subtracts_the_gray_mean():
    gray_128 = np.full([30, 20, 3], 128, np.uint8)
    built = _build(lambda: vgg_preprocessing.preprocess_image(tf.constant(gray_128), 16, 16,
                                                              use_grayscale=True))
    assert built.shape == [16, 16, 1]
    np.testing.assert_allclose(built.values[0], 128 - vgg_preprocessing.GRAY_MEAN, atol=0.5)


def test_vgg_training_crops_and_flips_at_random():
    # resize_side 4 keeps the 4x4 image, so the crop is the image, flipped or not. 40 fair
    # flips all come out alike once in 2**39 runs (12 failed CI once: 1 in 2**11).
    pixels = _pixels(4, 4)
    built = _build(lambda: vgg_preprocessing.preprocess_image(
        tf.constant(pixels), 4, 4, is_training=True, resize_side_min=4, resize_side_max=4),
        runs=40)
    centered = pixels - np.array(vgg_preprocessing.RGB_MEANS)
    flips = [np.allclose(output, centered[:, ::-1], atol=1e-4) for output in built.values]
    for output, flipped in zip(built.values, flips):
        assert flipped or np.allclose(output, centered, atol=1e-4)
    assert any(flips) and not all(flips)


def test_vgg_training_gives_the_output_size_minus_the_mean_pixel():
    built = _build(lambda: vgg_preprocessing.preprocess_for_train(
        tf.constant(_pixels(30, 45)), 20, 24, resize_side_min=20, resize_side_max=40), runs=3)
    assert built.shape == [20, 24, 3]
    for output in built.values:
        means = np.array(vgg_preprocessing.RGB_MEANS)
        assert (output >= -means - 1e-3).all() and (output <= 255 - means + 1e-3).all()


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_vgg_crops_outputs_larger_than_its_resize_side(is_training):
    built = _build(lambda: vgg_preprocessing.preprocess_image(
        _decoded_jpeg(), 300, 320, is_training))
    assert built.shape == [300, 320, 3] and built.values[0].shape == (300, 320, 3)


# CifarNet.

def test_cifarnet_evaluation_crops_the_center_and_standardizes():
    pixels = _pixels(6, 6)
    built = _build(lambda: cifarnet_preprocessing.preprocess_image(
        tf.constant(pixels), 4, 4, add_image_summaries=False))
    assert built.summaries == []
    np.testing.assert_allclose(built.values[0], _standardized(pixels[1:5, 1:5]), atol=1e-5)


def test_cifarnet_evaluation_pads_small_images_with_zeros():
    pixels = _pixels(2, 3, channels=1)
    built = _build(lambda: cifarnet_preprocessing.preprocess_for_eval(tf.constant(pixels), 4, 5))
    padded = np.zeros([4, 5, 1])
    padded[1:3, 1:4] = pixels
    assert built.shape == [4, 5, 1]
    np.testing.assert_allclose(built.values[0], _standardized(padded), atol=1e-5)


@pytest.mark.parametrize('padding', [4, 0])
def test_cifarnet_training_gives_standardized_random_crops(padding):
    built = _build(lambda: cifarnet_preprocessing.preprocess_for_train(
        tf.constant(_pixels(32, 32)), 30, 28, padding), runs=2)
    assert built.shape == [30, 28, 3]
    for output in built.values:
        assert abs(output.mean()) < 1e-4 and output.std() == pytest.approx(1.0, abs=1e-3)
    assert not np.array_equal(*built.values)


def test_cifarnet_training_centres_small_images_as_evaluation_pads_them():
    # 8x8 ones padded to the 32x32 output: no room for a random crop to move, so the image
    # stays where evaluation puts it, whatever the flip, brightness and contrast draw.
    built = _build(lambda: cifarnet_preprocessing.preprocess_for_train(
        tf.ones([8, 8, 1], tf.uint8), 32, 32, padding=0))
    image = built.values[0][..., 0]
    inside = np.zeros([32, 32], bool)
    inside[12:20, 12:20] = True
    assert len(set(image[inside])) == 1 and len(set(image[~inside])) == 1
    assert image[inside][0] != image[~inside][0]


# LeNet.

@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_lenet_centers_small_digits_in_minus_one_to_one(is_training):
    digit = np.arange(64, dtype=np.uint8).reshape([8, 8, 1]) * 4
    built = _build(lambda: lenet_preprocessing.preprocess_image(
        tf.constant(digit), 28, 28, is_training))
    expected = np.full([28, 28, 1], -1.0)  # Padding is 0, which becomes -1.
    expected[10:18, 10:18] = (digit - 128.0) / 128.0
    assert built.shape == [28, 28, 1]
    np.testing.assert_allclose(built.values[0], expected, atol=1e-6)


def test_lenet_crops_the_center_of_large_images():
    pixels = _pixels(30, 29)
    built = _build(lambda: lenet_preprocessing.preprocess_image(
        tf.constant(pixels), 28, 27, False, use_grayscale=True))
    expected = pixels[1:29, 1:28] @ np.array([[0.2989], [0.5870], [0.1140]])
    assert built.shape == [28, 27, 1]
    np.testing.assert_allclose(built.values[0], (expected - 128.0) / 128.0, atol=1e-5)


# Image summaries.

INCEPTION_TRAINING_SUMMARIES = ['distort_image/image_with_bounding_boxes',
                                'distort_image/images_with_distorted_bounding_box',
                                'distort_image/cropped_resized_image',
                                'distort_image/final_distorted_image']


@pytest.mark.parametrize('module, kwargs, summaries', [
    (cifarnet_preprocessing, {'is_training': True}, ['image', 'distorted_image']),
    (cifarnet_preprocessing, {}, ['image', 'resized_image']),
    (inception_preprocessing, {'is_training': True}, INCEPTION_TRAINING_SUMMARIES),
    (inception_preprocessing, {'is_training': True, 'crop_image': False},
     ['distort_image/image_with_bounding_boxes', 'distort_image/resized_image',
      'distort_image/final_distorted_image']),
    (inception_preprocessing, {}, []),
], ids=['cifarnet-train', 'cifarnet-eval', 'inception-train', 'inception-uncropped',
        'inception-eval'])
def test_image_summaries_only_with_add_image_summaries(module, kwargs, summaries):
    def make(**more):
        return lambda: module.preprocess_image(tf.constant(_pixels(20, 20)), 16, 16,
                                               **kwargs, **more)

    assert _build(make()).summaries == summaries
    assert _build(make(add_image_summaries=False)).summaries == []


# The factory.

@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('family', FAMILIES + ['video'])
def test_every_family_gives_the_requested_size(family, is_training):
    frames = [4] if family == 'video' else []
    built = _preprocess(family, _decoded_clip if frames else _decoded_jpeg, is_training)
    assert built.shape == [*frames, HEIGHT, WIDTH, 3]
    assert built.values[0].shape == (*frames, HEIGHT, WIDTH, 3)
    assert np.isfinite(built.values[0]).all()


def test_every_name_gives_a_preprocessing_function():
    for name in NAMES:
        preprocessing_fn = preprocessing_factory.get_preprocessing(name, is_training=True)
        frames = [2] if _family(name) == 'video' else []
        with tf.Graph().as_default():
            output = preprocessing_fn(tf.zeros([*frames, 9, 9, 3], tf.uint8), 7, 8)
            assert output.shape.as_list() == [*frames, 7, 8, 3], name


def test_slims_names_give_slims_families():
    assert {name: _family(name) for name in SLIM_NAMES} == {**SLIM_NAMES, **TOOLKIT_NAMES}


def test_every_network_names_its_family():
    assert {name: network.preprocessing for name, network in NETWORKS.items()} == {
        name: FAMILY_EXCEPTIONS.get(name, 'inception') for name in NETWORKS}


def test_the_families_are_slims_plus_video_and_keras():
    assert PREPROCESSING.names == ('cifarnet', 'inception', 'keras', 'keras_caffe', 'lenet',
                                   'vgg', 'video')


def test_factory_passes_kwargs_and_use_grayscale_to_the_module():
    pixels = _pixels(10, 12)
    factory = preprocessing_factory.get_preprocessing
    np.testing.assert_array_equal(
        _value(lambda: factory('vgg_16')(pixels, 4, 4, resize_side_min=6)),
        _value(lambda: vgg_preprocessing.preprocess_image(pixels, 4, 4, resize_side_min=6)))
    np.testing.assert_array_equal(
        _value(lambda: factory('inception_v3', use_grayscale=True)(
            pixels, 5, 5, central_fraction=0.5)),
        _value(lambda: inception_preprocessing.preprocess_image(
            pixels, 5, 5, use_grayscale=True, central_fraction=0.5)))
    training = factory('inception', is_training=True)
    assert _build(lambda: training(pixels, 5, 5)).summaries == INCEPTION_TRAINING_SUMMARIES
    assert _build(lambda: training(pixels, 5, 5, add_image_summaries=False)).summaries == []


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', SLIM_FAMILIES + ['video'])
def test_grayscale_option_gives_one_channel(name, is_training):
    frames = [4] if name == 'video' else []
    built = _preprocess(name, _decoded_clip if frames else _decoded_jpeg, is_training,
                        use_grayscale=True)
    assert built.shape == [*frames, HEIGHT, WIDTH, 1]
    assert built.values[0].shape == (*frames, HEIGHT, WIDTH, 1)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', SLIM_FAMILIES)
def test_single_channel_input_keeps_one_channel(name, is_training):
    built = _preprocess(name, lambda: _decoded_jpeg(channels=1), is_training,
                        use_grayscale=True)
    assert built.shape == [HEIGHT, WIDTH, 1] and built.values[0].shape == (HEIGHT, WIDTH, 1)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('name', ['keras', 'keras_caffe'])
def test_keras_families_give_rgb_even_from_grayscale(name, is_training):
    built = _preprocess(name, lambda: _decoded_jpeg(channels=1), is_training)
    assert built.shape == [HEIGHT, WIDTH, 3]
    if name == 'keras':  # Gray stays gray: three equal channels.
        np.testing.assert_array_equal(built.values[0][..., 0], built.values[0][..., 2])


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
def test_keras_gives_rgb_in_0_to_255(is_training):
    image = _preprocess('keras', _decoded_jpeg, is_training).values[0]
    assert image.min() >= 0.0 and image.max() <= 255.0 and image.max() > 100.0


def test_keras_caffe_gives_bgr_minus_the_imagenet_mean():
    def red():  # Pure red: R 255, G 0, B 0.
        return tf.constant(np.broadcast_to(np.array([255, 0, 0], np.uint8), [64, 64, 3]))

    image = _preprocess('keras_caffe', red, False).values[0]
    np.testing.assert_allclose(image, np.broadcast_to(
        np.array([0.0, 0.0, 255.0]) - np.array([103.939, 116.779, 123.68]), image.shape),
        atol=1e-3)


@pytest.mark.parametrize('is_training', [True, False], ids=['train', 'eval'])
@pytest.mark.parametrize('channels, side', [(1, 8), (3, 20)], ids=['digits', 'rgb'])
@pytest.mark.parametrize('name', FAMILIES)
def test_every_family_runs_inside_tf_data_map_on_images_smaller_than_its_output(
        name, channels, side, is_training):
    # The embedded digits are 8x8 grayscale; the outputs are larger, as networks' sizes are.
    preprocessing_fn = preprocessing_factory.get_preprocessing(name, is_training=is_training)
    with tf.Graph().as_default():
        images = tf.data.Dataset.from_tensors(_decoded_jpeg(side, side, channels)).repeat(2).map(
            lambda image: preprocessing_fn(image, HEIGHT, WIDTH)).batch(2)
        batch = tf.data.make_one_shot_iterator(images).get_next()
        with tf.Session() as sess:
            values = sess.run(batch)
    output_channels = preprocessing_factory.output_channels(name, channels)
    assert values.shape == (2, HEIGHT, WIDTH, output_channels)
    assert np.isfinite(values).all()


def test_video_preprocessing_rejects_a_single_image():
    with tf.Graph().as_default():
        preprocessing_fn = preprocessing_factory.get_preprocessing('i3d')
        with pytest.raises(ValueError, match=r'expected a video \[frames, height, width, '
                                             r'channels\] with 1 or 3 channels'):
            preprocessing_fn(_decoded_jpeg(), HEIGHT, WIDTH)


def test_unknown_name_names_the_flag_and_lists_families_and_networks():
    with pytest.raises(UsageError) as error:
        preprocessing_factory.get_preprocessing('foo')
    assert isinstance(error.value, ValueError)  # What slim's factory raises.
    assert str(error.value) == f"unknown --preprocessing_name 'foo'; valid: {', '.join(NAMES)}"


@pytest.mark.parametrize('shape', [[60, 80, 4], [60, 80, None], [60, 80]])
def test_rejects_images_without_one_or_three_static_channels(shape):
    preprocessing_fn = preprocessing_factory.get_preprocessing('inception')
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match='1 or 3 channels known statically'):
            preprocessing_fn(tf.placeholder(tf.uint8, shape), HEIGHT, WIDTH)
