"""LeNet preprocessing, as TF-Slim's: crop or pad to the output size and scale pixels to
[-1, 1]. Training and evaluation are the same (no augmentation).
"""
import tensorflow.compat.v1 as tf


def preprocess_image(image, output_height, output_width, is_training, use_grayscale=False):
    """Returns float32 [output_height, output_width, C'] with values (pixel - 128) / 128.

    image: [H, W, C] pixels on the [0, 255] scale (uint8 or float). Its center is cropped,
    or it is padded with zeros (which become -1) around, to the output size: a 28x28 MNIST
    image stays as it is and an 8x8 digit is centered in a 28x28 frame.
    is_training: unused (training and evaluation preprocess alike).
    use_grayscale: turn the (RGB) image into one channel of luma first, so C' is 1 (else C).
    """
    del is_training  # Training and evaluation preprocess alike.
    image = tf.cast(image, tf.float32)
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
    image = tf.image.resize_image_with_crop_or_pad(image, output_height, output_width)
    return tf.divide(tf.subtract(image, 128.0), 128.0, name='div')  # slim's op name.
