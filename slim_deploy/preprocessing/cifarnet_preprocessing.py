"""CifarNet preprocessing, as TF-Slim's: padded random crops, flips and brightness/contrast
jitter for training, a central crop (or pad) for evaluation; both standardize each image.
"""
import tensorflow as tf

_PADDING = 4


def preprocess_image(image, output_height, output_width, is_training=False, padding=_PADDING):
    """Returns float32 [output_height, output_width, C], standardized per image (mean 0,
    standard deviation 1 over its pixels and channels).

    image: [H, W, C], uint8 in [0, 255] or float in [0, 1], with C known.
    Training: pad `padding` zero pixels on every side, take a random output-sized crop
    (so H and W must be at least output size - 2 * padding), flip left-right at random,
    then shift brightness by up to 63/255 and scale contrast by 0.2 to 1.8 at random.
    Evaluation: crop the center, or pad with zeros, to the output size.
    """
    image = tf.image.convert_image_dtype(image, tf.float32)
    if is_training:
        image = tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])
        image = tf.image.random_crop(image, [output_height, output_width, image.shape[-1]])
        image = tf.image.random_flip_left_right(image)
        image = tf.image.random_brightness(image, max_delta=63 / 255)
        image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
    else:
        image = tf.image.resize_with_crop_or_pad(image, output_height, output_width)
    return tf.image.per_image_standardization(image)
