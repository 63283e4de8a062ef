"""Preprocessing of the tf-keras applications (slim_deploy/nets/keras_applications): inception's
crops, flips and color jitter, then the pixels each application expects, always 3 channels
(grayscale becomes RGB): RGB in [0, 255] for those that rescale inside the model
(MobileNetV3, EfficientNet, ConvNeXt); for ResNet50, Caffe's convention as
tf_keras.applications.resnet50.preprocess_input applies it: BGR in [0, 255] minus the
ImageNet mean pixel.
"""
import tensorflow as tf

from slim_deploy.preprocessing import inception_preprocessing

BGR_MEANS = (103.939, 116.779, 123.68)


def preprocess_image(image, output_height, output_width, is_training=False,
                     use_grayscale=False):
    """Returns float32 [output_height, output_width, 3], RGB in [0, 255].

    image: [H, W, C], uint8 in [0, 255] or float in [0, 1], with C 1 or 3.
    use_grayscale: turn the (RGB) image into gray first (still three equal channels).
    """
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
    if image.shape[-1] == 1:
        image = tf.image.grayscale_to_rgb(image)
    scaled = inception_preprocessing.preprocess_image(image, output_height, output_width,
                                                      is_training)  # In [-1, 1].
    return (scaled + 1.0) * 127.5


def preprocess_image_caffe(image, output_height, output_width, is_training=False,
                           use_grayscale=False):
    """Returns float32 [output_height, output_width, 3]: BGR in [0, 255] minus BGR_MEANS.

    image: [H, W, C], uint8 in [0, 255] or float in [0, 1], with C 1 or 3.
    use_grayscale: turn the (RGB) image into gray first (still three equal channels).
    """
    rgb = preprocess_image(image, output_height, output_width, is_training, use_grayscale)
    return tf.reverse(rgb, axis=[-1]) - tf.constant(BGR_MEANS, tf.float32)
