"""VGG preprocessing, as TF-Slim's: scale the smaller side (at random between 256 and 512
for training, 256 for evaluation), crop (random or central), flip when training and
subtract the ImageNet mean pixel. Pixels stay on the [0, 255] scale.
"""
import tensorflow as tf

RGB_MEANS = (123.68, 116.78, 103.94)
# The mean of grayscale images, with tf.image.rgb_to_grayscale's weights.
GRAY_MEAN = 0.2989 * RGB_MEANS[0] + 0.5870 * RGB_MEANS[1] + 0.1140 * RGB_MEANS[2]

RESIZE_SIDE_MIN = 256
RESIZE_SIDE_MAX = 512


def _resize_smaller_side(image, side):
    """Resizes `image` [H, W, C] bilinearly, keeping its aspect ratio, so that its smaller
    side is `side` (an int32 scalar) pixels."""
    height_width = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = tf.cast(side, tf.float32) / tf.reduce_min(height_width)
    return tf.image.resize(image, tf.cast(tf.round(height_width * scale), tf.int32))


def preprocess_image(image, output_height, output_width, is_training=False,
                     resize_side_min=RESIZE_SIDE_MIN, resize_side_max=RESIZE_SIDE_MAX):
    """Returns float32 [output_height, output_width, C]: pixels in [0, 255] minus the
    ImageNet mean (RGB_MEANS, or GRAY_MEAN when C is 1).

    image: [H, W, C], uint8 in [0, 255] or float in [0, 1], with C 1 or 3.
    The smaller side is scaled to a random size in [resize_side_min, resize_side_max] for
    training and to resize_side_min for evaluation, but never below the larger output
    side, so the crop always fits.
    """
    channels = image.shape[-1]
    means = RGB_MEANS if channels == 3 else (GRAY_MEAN,)
    pixels = tf.image.convert_image_dtype(image, tf.float32) * 255.0
    min_side = max(output_height, output_width)
    if is_training:
        side = tf.random.uniform([], resize_side_min, resize_side_max + 1, tf.int32)
        pixels = _resize_smaller_side(pixels, tf.maximum(side, min_side))
        pixels = tf.image.random_crop(pixels, [output_height, output_width, channels])
        pixels = tf.image.random_flip_left_right(pixels)
    else:
        pixels = _resize_smaller_side(pixels, max(resize_side_min, min_side))
        pixels = tf.image.resize_with_crop_or_pad(pixels, output_height, output_width)
    return pixels - tf.constant(means, tf.float32)
