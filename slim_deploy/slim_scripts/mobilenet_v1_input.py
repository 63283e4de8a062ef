"""What slim's MobileNet v1 scripts (mobilenet_v1_train and mobilenet_v1_eval) share: their
common flags, and their input, as slim's: a split's TFRecords through slim's
DatasetDataProvider and a batching queue."""
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.datasets import dataset_factory
from slim_deploy.preprocessing import preprocessing_factory


def define_flags(batch_size):
    """Defines the flags mobilenet_v1_train and mobilenet_v1_eval share, with slim's names
    and defaults; batch_size: the calling script's default (slim's: 64 to train, 250 to
    evaluate). Overridable, as the scripts' own flags are, so that the sibling scripts
    import together in one process: the one imported last sets the defaults. A script
    adopts them as its key flags (tf.app.flags.adopt_module_key_flags) for --help."""
    flags = tf.app.flags
    flags.DEFINE_string('master', '', 'The TensorFlow server to run on; empty: in process.',
                        allow_override=True)
    flags.DEFINE_integer('batch_size', batch_size, 'Images per step.', allow_override=True)
    flags.DEFINE_integer('num_classes', 1001, 'Width of the logits layer.',
                         allow_override=True)
    flags.DEFINE_integer('image_size', 224, 'Side of the square input images, in pixels.',
                         allow_override=True)
    flags.DEFINE_float('depth_multiplier', 1.0, 'MobileNet v1\'s width multiplier.',
                       allow_override=True)
    flags.DEFINE_bool('quantize', False, 'The quantized model (int8 weights and activations): '
                      'train it quantization-aware, or score it on the ranges its '
                      'checkpoint learned.', allow_override=True)
    flags.DEFINE_string('checkpoint_dir', '', 'Where training writes its checkpoints and '
                        'event files; what evaluation scores: a checkpoint, or a directory '
                        '(its latest).', allow_override=True)
    flags.DEFINE_string('dataset_dir', '', 'The directory of the dataset\'s TFRecord files.',
                        allow_override=True)
    flags.DEFINE_string('dataset_name', 'imagenet', 'The dataset: '
                        f'{", ".join(dataset_factory.DATASETS)} (slim\'s is always '
                        'imagenet).', allow_override=True)


def batches(dataset_name, split_name, dataset_dir, image_size, batch_size, is_training):
    """Batches of `split_name` of `dataset_name` in `dataset_dir` (is_training: shuffled,
    randomly distorted; else in order), with MobileNet v1's (Inception's) preprocessing.

    Returns (images, labels): float32 [batch_size, image_size, image_size, channels] in
    [-1, 1], and int64 [batch_size] labels.
    """
    dataset = dataset_factory.get_dataset_split(
        dataset_name, split_name, dataset_dir).as_slim_dataset()
    provider = slim.dataset_data_provider.DatasetDataProvider(
        dataset, shuffle=is_training, common_queue_capacity=2 * batch_size,
        common_queue_min=batch_size)
    image, label = provider.get(['image', 'label'])
    preprocessing_fn = preprocessing_factory.get_preprocessing('mobilenet_v1',
                                                               is_training=is_training)
    image = preprocessing_fn(image, image_size, image_size)
    return tf.train.batch([image, label], batch_size=batch_size, num_threads=4,
                          capacity=5 * batch_size)
