"""VGG preprocessing, as TF-Slim's: scale the smaller side (at random between 256 and 512
for training, 256 for evaluation), crop (random or central), flip at random when training
and subtract the ImageNet mean pixel. Pixels are taken as they come (uint8, or float on
the [0, 255] scale) and stay on that scale; one-channel images have GRAY_MEAN subtracted.

Resizing is tf.image's v1 bilinear (no half-pixel centers), as slim's checkpoints saw.
"""
import tensorflow.compat.v1 as tf

RGB_MEANS = (123.68, 116.78, 103.94)
_R_MEAN, _G_MEAN, _B_MEAN = RGB_MEANS  # slim's names, which other code imports.
# The mean of grayscale images, with tf.image.rgb_to_grayscale's weights.
GRAY_MEAN = 0.2989 * _R_MEAN + 0.5870 * _G_MEAN + 0.1140 * _B_MEAN

_RESIZE_SIDE_MIN = 256
_RESIZE_SIDE_MAX = 512


def _mean_image_subtraction(image, means):
    """Returns `image` [H, W, C] (C static) minus means[c] in each channel c.

    Raises ValueError unless `image` has rank 3 and C equals len(means).
    """
    if image.shape.ndims != 3:
        raise ValueError('Input must be of size [height, width, C>0]')
    if len(means) != image.shape.as_list()[-1]:
        raise ValueError('len(means) must match the number of channels')
    channels = tf.split(image, len(means), axis=2)
    return tf.concat([channel - mean for channel, mean in zip(channels, means)], axis=2)


def _aspect_preserving_resize(image, smallest_side, min_size=(0, 0)):
    """Returns `image` [H, W, C] resized bilinearly to float32 [H', W', C], its aspect ratio
    kept and its smaller side `smallest_side` (an int or int32 scalar tensor) pixels; or,
    where that would be smaller than `min_size` (height, width), just large enough for it.
    """
    height_width = tf.cast(tf.shape(image)[:2], tf.float32)
    size = tf.round(height_width * tf.cast(smallest_side, tf.float32)
                    / tf.reduce_min(height_width))
    min_size = tf.constant(min_size, tf.float32)
    fitting_size = tf.round(height_width * tf.reduce_max(min_size / height_width))
    size = tf.where_v2(tf.reduce_all(size >= min_size), size, fitting_size)
    return tf.image.resize_images(tf.cast(image, tf.float32), tf.cast(size, tf.int32))


def _subtract_mean_pixel(image, use_grayscale):
    """`image` [H, W, C] (grayscale with use_grayscale) minus the mean pixel: RGB_MEANS for
    three channels, GRAY_MEAN for one."""
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
    means = RGB_MEANS if image.shape[-1] == 3 else (GRAY_MEAN,)
    return _mean_image_subtraction(image, means)


def preprocess_for_train(image, output_height, output_width, resize_side_min=_RESIZE_SIDE_MIN,
                         resize_side_max=_RESIZE_SIDE_MAX, use_grayscale=False):
    """Returns float32 [output_height, output_width, C'] minus the mean pixel.

    image: [H, W, C] pixels on the [0, 255] scale, C 1 or 3 known statically. Its smaller
    side is scaled to a random size in [resize_side_min, resize_side_max] (or more, where
    the crop would not fit: slim's fails there), then a random crop is flipped left-right at
    random. use_grayscale: turn the (RGB) crop into one channel of luma, so C' is 1 (else C).
    """
    side = tf.random.uniform([], minval=resize_side_min, maxval=resize_side_max + 1,
                             dtype=tf.int32)
    image = _aspect_preserving_resize(image, side, (output_height, output_width))
    image = tf.random_crop(image, [output_height, output_width, image.shape[-1]])
    return _subtract_mean_pixel(tf.image.random_flip_left_right(image), use_grayscale)


def preprocess_for_eval(image, output_height, output_width, resize_side, use_grayscale=False):
    """Returns float32 [output_height, output_width, C'] minus the mean pixel: the central
    crop of `image` [H, W, C] after scaling its smaller side to `resize_side` (or more,
    where the crop would not fit: slim's fails there).

    use_grayscale: turn the (RGB) crop into one channel of luma, so C' is 1 (else C).
    """
    image = _aspect_preserving_resize(image, resize_side, (output_height, output_width))
    offsets = (tf.shape(image)[:2] - [output_height, output_width]) // 2
    image = tf.image.crop_to_bounding_box(image, offsets[0], offsets[1], output_height,
                                          output_width)
    return _subtract_mean_pixel(image, use_grayscale)


def preprocess_image(image, output_height, output_width, is_training=False,
                     resize_side_min=_RESIZE_SIDE_MIN, resize_side_max=_RESIZE_SIDE_MAX,
                     use_grayscale=False):
    """Returns float32 [output_height, output_width, C']: preprocess_for_train's result when
    is_training, else preprocess_for_eval's with resize_side_min as its resize side
    (resize_side_max is then unused)."""
    if is_training:
        return preprocess_for_train(image, output_height, output_width, resize_side_min,
                                    resize_side_max, use_grayscale)
    return preprocess_for_eval(image, output_height, output_width, resize_side_min,
                               use_grayscale)
