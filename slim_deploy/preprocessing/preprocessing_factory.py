"""Every preprocessing function by name: a family's name, or a network's (its family).

    preprocessing_fn = get_preprocessing('inception_v3', is_training=True)
    image = preprocessing_fn(image, 299, 299)   # uint8 [H, W, 3] -> float32 [299, 299, 3]

`PREPROCESSING` is the registry of families; each network names its family in
nets_factory.NETWORKS, which this module reads (preprocessing sits above nets: nets never
import slim_deploy.preprocessing). The functions run in a tf.compat.v1 graph, eagerly or inside
tf.data's map.
"""
import tensorflow as tf

from slim_deploy.common.registry import Registry
from slim_deploy.nets.nets_factory import NETWORKS
from slim_deploy.preprocessing import (
    cifarnet_preprocessing,
    inception_preprocessing,
    keras_preprocessing,
    lenet_preprocessing,
    vgg_preprocessing,
    video_preprocessing,
)

# Family -> preprocess_image(image, output_height, output_width, is_training, use_grayscale,
# **kwargs).
PREPROCESSING = Registry('preprocessing_name', {
    'cifarnet': cifarnet_preprocessing.preprocess_image,
    'inception': inception_preprocessing.preprocess_image,
    'keras': keras_preprocessing.preprocess_image,
    'keras_caffe': keras_preprocessing.preprocess_image_caffe,
    'lenet': lenet_preprocessing.preprocess_image,
    'vgg': vgg_preprocessing.preprocess_image,
    'video': video_preprocessing.preprocess_image,
})

# Every name get_preprocessing takes -> its family: the families and the networks.
_FAMILY = Registry('preprocessing_name', {
    **{name: name for name in PREPROCESSING},
    **{name: network.preprocessing for name, network in NETWORKS.items()},
})


def family(name):
    """The family of preprocessing `name` (a family, or a network: its family); UsageError
    naming --preprocessing_name and every valid name for an unknown one."""
    return _FAMILY[name]


def get_preprocessing(name, is_training=False, use_grayscale=False):
    """Returns preprocessing_fn(image, output_height, output_width, **kwargs) for `name`.

    preprocessing_fn takes one image [H, W, C] (a video [T, H, W, C] for 'video') with
    C 1 or 3 known statically (decode with channels=1 or 3), uint8 in [0, 255] (or float
    as the family takes it), and returns float32 [output_height, output_width, C']
    ([T, ...] for videos): the family's preprocess_image with is_training, use_grayscale
    and kwargs (e.g. inception's bbox or add_image_summaries). C' is C, or 1 with
    use_grayscale, which turns RGB into luma (one-channel images stay as they are); the
    'keras' families always give 3 (grayscale becomes RGB), as the tf-keras applications
    need. The other families need no 3 channels, but a net restored from an RGB checkpoint
    does.

    name: a family in PREPROCESSING, or a network in NETWORKS (its family). Raises
    UsageError (a ValueError) naming --preprocessing_name and every valid name for an
    unknown one.
    """
    preprocess_image = PREPROCESSING[family(name)]
    rank, kind = (4, 'a video [frames, height, width, channels]') if (
        family(name) == 'video') else (3, 'an image [height, width, channels]')

    def preprocessing_fn(image, output_height, output_width, **kwargs):
        image = tf.convert_to_tensor(image)
        if image.shape.rank != rank or image.shape[-1] not in (1, 3):
            raise ValueError(f'expected {kind} with 1 or 3 channels known statically, '
                             f'got shape {image.shape}')
        return preprocess_image(image, output_height, output_width, is_training=is_training,
                                use_grayscale=use_grayscale and image.shape[-1] == 3,
                                **kwargs)

    preprocessing_fn.__name__ = preprocessing_fn.__qualname__ = f'{family(name)}_preprocessing'
    # Graph-mode code (as TF-Slim's): tf.data need not convert it with AutoGraph.
    return tf.autograph.experimental.do_not_convert(preprocessing_fn)


def output_channels(name, channels, use_grayscale=False):
    """Channels of the images that preprocessing `name` (as get_preprocessing's) gives from
    images of `channels`: 3 for the 'keras' families, else 1 with use_grayscale, else
    `channels`."""
    if family(name) in ('keras', 'keras_caffe'):
        return 3
    return 1 if use_grayscale else channels
