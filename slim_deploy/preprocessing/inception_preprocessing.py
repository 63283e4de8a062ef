"""Inception preprocessing, as TF-Slim's in its fast mode; outputs are scaled to [-1, 1].

Training takes a random crop that covers part of the object's bounding box, resizes it,
flips it and jitters its colors; evaluation keeps the central 87.5% of each side and
resizes it.
"""
import tensorflow as tf

_MAX_BRIGHTNESS_DELTA = 32 / 255
_SATURATION_RANGE = (0.5, 1.5)


def _random_crop_in_box(image, bbox):
    """A random crop of `image` [H, W, C] with aspect ratio (width / height) 0.75 to 1.33,
    5% to 100% of the image's area and at least 10% of one box of `bbox`.

    bbox: float [1, num_boxes, 4] boxes (ymin, xmin, ymax, xmax) in [0, 1]; None is the
    whole image.
    """
    if bbox is None:
        bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image), bounding_boxes=bbox, min_object_covered=0.1,
        aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0), max_attempts=100,
        use_image_if_no_bounding_boxes=True)
    crop = tf.slice(image, begin, size)
    crop.set_shape([None, None, image.shape[-1]])
    return crop


def _distort_colors(image):
    """Random brightness shift and, for RGB, saturation scaling, in a random order;
    `image` [H, W, C] and the result are float in [0, 1]."""
    def brightness(x):
        return tf.image.random_brightness(x, _MAX_BRIGHTNESS_DELTA)

    def saturation(x):
        return tf.image.random_saturation(x, *_SATURATION_RANGE)

    if image.shape[-1] == 3:
        image = tf.cond(tf.random.uniform([]) < 0.5,
                        lambda: saturation(brightness(image)),
                        lambda: brightness(saturation(image)))
    else:  # Saturation is undefined for grayscale.
        image = brightness(image)
    return tf.clip_by_value(image, 0.0, 1.0)


def preprocess_image(image, output_height, output_width, is_training=False, bbox=None,
                     central_fraction=0.875):
    """Returns float32 [output_height, output_width, C] with values in [-1, 1].

    image: [H, W, C], uint8 in [0, 255] or float in [0, 1], with C known.
    bbox (training): float [1, num_boxes, 4] object boxes (ymin, xmin, ymax, xmax) in
      [0, 1] the random crop must overlap; None means the whole image.
    central_fraction (evaluation): fraction of each side kept by the central crop.
    Resizing is bilinear.
    """
    image = tf.image.convert_image_dtype(image, tf.float32)
    size = [output_height, output_width]
    if is_training:
        image = tf.image.resize(_random_crop_in_box(image, bbox), size)
        image = tf.image.random_flip_left_right(image)
        image = _distort_colors(image)
    else:
        image = tf.image.resize(tf.image.central_crop(image, central_fraction), size)
    return (image - 0.5) * 2.0
