"""The input of slim's MobileNet v1 scripts (mobilenet_v1_train and mobilenet_v1_eval), as
slim's: a split's TFRecords through slim's DatasetDataProvider and a batching queue."""
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.datasets import dataset_factory
from slim_deploy.preprocessing import preprocessing_factory


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
