"""CifarNet preprocessing, as TF-Slim's: padded random crops, flips and brightness/contrast
jitter for training, a central crop (or padding) for evaluation; both standardize each
image (mean 0, standard deviation 1 over its pixels and channels).

Pixels are taken as they come (uint8 stays on the [0, 255] scale, as slim's
tf.to_float leaves it); standardization makes the result independent of that scale.
"""
import tensorflow.compat.v1 as tf

_PADDING = 4


def _to_float(image, use_grayscale):
    """`image` [H, W, C] as float32 pixels, of one channel of luma with use_grayscale."""
    image = tf.cast(image, tf.float32)
    return tf.image.rgb_to_grayscale(image) if use_grayscale else image


def _summarize(name, image):
    tf.summary.image(name, tf.expand_dims(image, 0))


def preprocess_for_train(image, output_height, output_width, padding=_PADDING,
                         add_image_summaries=True, use_grayscale=False):
    """Returns float32 [output_height, output_width, C'] standardized, randomly distorted.

    image: [H, W, C] pixels on the [0, 255] scale, C known statically (1 or 3). Pads
    `padding` zero pixels on every side (and, where the image is smaller than the output
    size minus 2 * padding, as many more as make it that size, centring the image as
    evaluation does), takes a random output-sized crop, flips it left-right at random,
    shifts its brightness by up to 63 and scales its contrast by 0.2 to 1.8 at random.
    use_grayscale: turn the (RGB) image into one channel of luma first, so C' is 1 (else C).
    add_image_summaries: image summaries 'image' (the input) and 'distorted_image'.
    """
    if add_image_summaries:
        _summarize('image', image)
    image = _to_float(image, use_grayscale)
    shape = tf.shape(image)
    paddings = []
    for size, output_size in ((shape[0], output_height), (shape[1], output_width)):
        short = tf.maximum(output_size - 2 * padding - size, 0)  # Pixels the crop lacks.
        paddings.append([padding + short // 2, padding + short - short // 2])
    image = tf.pad(image, [*paddings, [0, 0]])
    channels = image.shape.as_list()[-1] or 3
    image = tf.random_crop(image, [output_height, output_width, channels])
    image = tf.image.random_flip_left_right(image)
    if add_image_summaries:
        _summarize('distorted_image', image)
    image = tf.image.random_brightness(image, max_delta=63)
    image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
    return tf.image.per_image_standardization(image)


def preprocess_for_eval(image, output_height, output_width, add_image_summaries=True,
                        use_grayscale=False):
    """Returns float32 [output_height, output_width, C'] standardized: the central crop of
    `image` [H, W, C], padded with zeros where it is smaller.

    use_grayscale: turn the (RGB) image into one channel of luma first, so C' is 1 (else C).
    add_image_summaries: image summaries 'image' (the input) and 'resized_image'.
    """
    if add_image_summaries:
        _summarize('image', image)
    image = _to_float(image, use_grayscale)
    image = tf.image.resize_image_with_crop_or_pad(image, output_height, output_width)
    if add_image_summaries:
        _summarize('resized_image', image)
    return tf.image.per_image_standardization(image)


def preprocess_image(image, output_height, output_width, is_training=False,
                     add_image_summaries=True, use_grayscale=False, padding=_PADDING):
    """Returns float32 [output_height, output_width, C']: preprocess_for_train's result (with
    `padding`) when is_training, else preprocess_for_eval's."""
    if is_training:
        return preprocess_for_train(image, output_height, output_width, padding,
                                    add_image_summaries, use_grayscale)
    return preprocess_for_eval(image, output_height, output_width, add_image_summaries,
                               use_grayscale)
