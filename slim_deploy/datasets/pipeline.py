"""tf.data input pipelines: sharded TFRecords to preprocessed batches, one batch per clone.

Model functions take one batch per call (`iterator.get_next()`), so N clones consume N
batches per step. Build the iterator on DeploymentConfig.inputs_device().
"""
import tensorflow.compat.v1 as tf

AUTOTUNE = tf.data.experimental.AUTOTUNE


def _records(split, num_readers, training, replica_id, num_replicas, seed):
    """Serialized examples of `split`, this replica's share of them when training (in a
    random order unless `seed`; in the files' order when not training)."""
    files = split.files()
    read = tf.data.TFRecordDataset
    if num_replicas > 1 and len(files) >= num_replicas:
        files = files[replica_id::num_replicas]  # Each replica reads its own shards.
    elif num_replicas > 1:  # Too few shards to split: each takes every n-th record of each.
        def read(filename):
            return tf.data.TFRecordDataset(filename).shard(num_replicas, replica_id)
    records = tf.data.Dataset.from_tensor_slices(files)
    if training:
        records = records.shuffle(len(files), seed=seed).repeat()
    return records.interleave(read, cycle_length=num_readers, num_parallel_calls=AUTOTUNE,
                              deterministic=not training or seed is not None)


def _decode_fn(split, preprocessing_fn, image_size, labels_offset):
    def decode(serialized):
        image, label = split.parse(serialized)
        return preprocessing_fn(image, image_size, image_size), label - labels_offset
    return decode


def training_batches(split, preprocessing_fn, image_size, batch_size, num_readers=4,
                     num_preprocessing_threads=4, labels_offset=0, replica_id=0,
                     num_replicas=1, shuffle_buffer=4096, seed=None):
    """An endless, shuffled dataset of (images, labels) batches for one clone.

    images: float32 [batch_size, image_size, image_size, C] from `preprocessing_fn(image,
    height, width)`; labels: int64 [batch_size], dataset label minus labels_offset.
    Replica `replica_id` of `num_replicas` reads its own shards (or every num_replicas-th
    record when there are fewer shards than replicas). seed: None for a random order;
    with a seed the order and, with the graph seeded and op determinism on (as
    DeploymentConfig's seed does), the augmentation repeat from run to run.
    """
    records = _records(split, num_readers, True, replica_id, num_replicas, seed)
    return (records.shuffle(min(shuffle_buffer, split.num_samples), seed=seed)
            .map(_decode_fn(split, preprocessing_fn, image_size, labels_offset),
                 num_parallel_calls=num_preprocessing_threads,
                 deterministic=seed is not None)
            .batch(batch_size, drop_remainder=True)
            .prefetch(AUTOTUNE))


def evaluation_batches(split, preprocessing_fn, image_size, batch_size, num_clones=1,
                       num_readers=1, num_preprocessing_threads=4, labels_offset=0):
    """Every example of `split` exactly once, as (images, labels, weights) batches.

    Batches hold exactly batch_size examples and come in groups of num_clones (one per
    clone per step); the last group is filled up with zero images of weight 0, so metrics
    weighted by `weights` (float32 [batch_size], 1 for real examples) count each example
    once and drop none.
    """
    examples = (_records(split, num_readers, False, 0, 1, None)
                .map(_decode_fn(split, preprocessing_fn, image_size, labels_offset),
                     num_parallel_calls=num_preprocessing_threads)
                .map(lambda image, label: (image, label, tf.constant(1.0))))
    group = batch_size * num_clones
    padding = examples.take(1).map(
        lambda image, label, weight: (tf.zeros_like(image), label, tf.constant(0.0)))
    return (examples.concatenate(padding.repeat(group - 1))
            .batch(group, drop_remainder=True)
            .unbatch()
            .batch(batch_size)
            .prefetch(AUTOTUNE))
