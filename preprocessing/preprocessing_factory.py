"""Every preprocessing function by name: each network's name, plus the family names.

    preprocessing_fn = get_preprocessing('inception_v3', is_training=True)
    image = preprocessing_fn(image, 299, 299)   # uint8 [H, W, 3] -> float32 [299, 299, 3]

The functions run in a tf.compat.v1 graph, eagerly or inside tf.data's map.
"""
import tensorflow as tf

from preprocessing import (cifarnet_preprocessing, inception_preprocessing,
                           lenet_preprocessing, vgg_preprocessing, video_preprocessing)

# Name -> module with preprocess_image(image, output_height, output_width, is_training,
# **kwargs). VGG's for VGG and ResNet v1 (their checkpoints come from Caffe), Inception's
# for the other ImageNet nets, CifarNet's for NASNet-CIFAR, a video scheme for I3D and
# S3D-G. TF-Slim's map gives ResNet v2 VGG's, although its published ResNet v2 checkpoints
# were trained with Inception's, and has no entry for AlexNet, OverFeat, NASNet-CIFAR, I3D
# and S3D-G.
PREPROCESSING = {
    'alexnet_v2': inception_preprocessing,
    'cifarnet': cifarnet_preprocessing,
    'i3d': video_preprocessing,
    'inception': inception_preprocessing,
    'inception_resnet_v2': inception_preprocessing,
    'inception_v1': inception_preprocessing,
    'inception_v2': inception_preprocessing,
    'inception_v3': inception_preprocessing,
    'inception_v4': inception_preprocessing,
    'lenet': lenet_preprocessing,
    'mobilenet_edgetpu': inception_preprocessing,
    'mobilenet_edgetpu_075': inception_preprocessing,
    'mobilenet_v1': inception_preprocessing,
    'mobilenet_v1_025': inception_preprocessing,
    'mobilenet_v1_050': inception_preprocessing,
    'mobilenet_v1_075': inception_preprocessing,
    'mobilenet_v2': inception_preprocessing,
    'mobilenet_v2_035': inception_preprocessing,
    'mobilenet_v2_140': inception_preprocessing,
    'mobilenet_v3_large': inception_preprocessing,
    'mobilenet_v3_large_minimalistic': inception_preprocessing,
    'mobilenet_v3_small': inception_preprocessing,
    'mobilenet_v3_small_minimalistic': inception_preprocessing,
    'nasnet_cifar': cifarnet_preprocessing,
    'nasnet_large': inception_preprocessing,
    'nasnet_mobile': inception_preprocessing,
    'overfeat': inception_preprocessing,
    'pnasnet_large': inception_preprocessing,
    'pnasnet_mobile': inception_preprocessing,
    'resnet_v1_50': vgg_preprocessing,
    'resnet_v1_101': vgg_preprocessing,
    'resnet_v1_152': vgg_preprocessing,
    'resnet_v1_200': vgg_preprocessing,
    'resnet_v2_50': inception_preprocessing,
    'resnet_v2_101': inception_preprocessing,
    'resnet_v2_152': inception_preprocessing,
    'resnet_v2_200': inception_preprocessing,
    's3dg': video_preprocessing,
    'vgg': vgg_preprocessing,
    'vgg_16': vgg_preprocessing,
    'vgg_19': vgg_preprocessing,
    'vgg_a': vgg_preprocessing,
}


def get_preprocessing(name, is_training=False, use_grayscale=False):
    """Returns preprocessing_fn(image, output_height, output_width, **kwargs) for `name`.

    preprocessing_fn takes one image [H, W, C] (a video [T, H, W, C] for i3d and s3dg) with
    C 1 or 3 known statically (decode with channels=1 or 3), uint8 in [0, 255] or float in
    [0, 1], and returns float32 [output_height, output_width, C'] ([T, ...] for videos),
    training (random augmentation) or evaluation preprocessing as `is_training` says. C'
    is C, or 1 with use_grayscale, which turns RGB into luma first. No preprocessing needs
    3 channels, but a net restored from an RGB checkpoint does. kwargs go to the module's
    preprocess_image (e.g. inception's bbox). Raises ValueError for an unknown name.
    """
    if name not in PREPROCESSING:
        raise ValueError(f'unknown preprocessing name {name!r}; '
                         f'valid names: {", ".join(sorted(PREPROCESSING))}')
    module = PREPROCESSING[name]

    rank, kind = (4, 'a video [frames, height, width, channels]') if (
        module is video_preprocessing) else (3, 'an image [height, width, channels]')

    def preprocessing_fn(image, output_height, output_width, **kwargs):
        image = tf.convert_to_tensor(image)
        if image.shape.rank != rank or image.shape[-1] not in (1, 3):
            raise ValueError(f'expected {kind} with 1 or 3 channels known statically, '
                             f'got shape {image.shape}')
        if use_grayscale and image.shape[-1] == 3:
            image = tf.image.rgb_to_grayscale(image)
        return module.preprocess_image(image, output_height, output_width,
                                       is_training=is_training, **kwargs)

    return preprocessing_fn
