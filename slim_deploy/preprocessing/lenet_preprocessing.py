"""LeNet preprocessing: resize to the output size and scale pixels to [-1, 1].

Training and evaluation are the same (no augmentation), as in TF-Slim.
"""
import tensorflow as tf


def preprocess_image(image, output_height, output_width, is_training=False):
    """Returns float32 [output_height, output_width, C] with values (pixel - 128) / 128.

    image: [H, W, C], uint8 in [0, 255] or float in [0, 1]. It is resized bilinearly, so
    8x8 digits become 28x28 and a 28x28 MNIST image is unchanged. is_training: unused
    (the same function serves both).
    """
    del is_training  # Training and evaluation preprocess alike.
    pixels = tf.image.convert_image_dtype(image, tf.float32) * 255.0
    pixels = tf.image.resize(pixels, [output_height, output_width], method='bilinear')
    return (pixels - 128.0) / 128.0
