"""tf.data input pipelines: sharded TFRecords to preprocessed batches, one batch per clone.

Model functions take one batch per call (`iterator.get_next()`), so N clones consume N
batches per step. Build the iterator on DeploymentConfig.inputs_device().

Records are read back as they were written, or the reading ends with a DataError naming the
shard: a split's shards are checked against their manifest when the pipeline is built
(datasets.manifest); every shard must be read to its last byte (TensorFlow's reader stops
at a corrupt or truncated record as if the shard ended there); a record that does not
decode ends the reading unless its RecordGuard lets it be skipped. Only the data's faults
are the data's: preprocessing that fails on a record that decodes ends the reading with a
ProgramError naming the preprocessing function and the record. These errors arise inside a
session's run of the iterator: run it inside the guard's raising() to get the DataError or
ProgramError itself.

Summaries a preprocessing function makes (slim's image summaries) are left out: they are
made inside tf.data's functions, whose ops no summary writer runs.

AutoGraph converts the preprocessing function, as tf.data converts the functions it maps,
unless it is marked tf.autograph.experimental.do_not_convert (the toolkit's are). The
pipeline's own functions are written for graph mode (tf.cond, no Python conditions on
tensors): training_batches and evaluation_batches are marked do_not_convert, which the
functions they map inherit, so none is converted (that would add 0.3 s or more to each
process's start), even when a converted function builds the pipeline (a tf.function, a
tf.distribute strategy's input function).
"""
import contextlib
import re
import threading

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import DataError, ProgramError
from slim_deploy.datasets import manifest

AUTOTUNE = tf.data.experimental.AUTOTUNE
# Records are read and decoded in chunks of at most CHUNK_RECORDS, and of at most CHUNK_BYTES
# of preprocessed examples (but at least MIN_CHUNK_RECORDS): a chunk's shard and records
# are checked at once, and one that comes out short names the records it lost.
CHUNK_RECORDS = 128
CHUNK_BYTES = 16 * 2**20
MIN_CHUNK_RECORDS = 8
_FRAMING_BYTES = 16  # A TFRecord's bytes on disk beyond its data: length and two checksums.


class RecordGuard:
    """What the reading of one pipeline found wrong, and what it lets pass.

    max_bad_records: records that do not decode that are skipped, each logged with its
    shard, index and cause, before the next one ends the reading (a record skipped once is
    skipped again in later epochs, and counted once). skipped: [(shard path,
    record index, cause)] so far. error: the DataError (or ProgramError) that ended the
    reading, None while none has. preprocessing: the name of the preprocessing function the
    pipeline runs (set when it is built; None before). Its methods run inside TensorFlow's
    input threads (tf.py_function).
    """

    def __init__(self, max_bad_records=0):
        self.max_bad_records = max_bad_records
        self.skipped = []
        self.error = None
        self.preprocessing = None
        self._lock = threading.Lock()
        self._skipped_records = set()  # (shard path, record index) of `skipped`.
        self._epoch = None  # (the shards read, the records an epoch of them holds).
        self._counts = {}  # {shard: records read} until one epoch is counted.

    @contextlib.contextmanager
    def raising(self):
        """Raises the DataError or ProgramError that ended the reading in place of the
        TensorFlow error that carried it out of a session run in the block."""
        try:
            yield
        except tf.errors.OpError:
            if self.error is None:
                raise
            raise self.error from None

    def _fail(self, message, error=DataError):
        self.error = error(message)
        raise self.error

    def count_epoch(self, shards, num_samples):
        """Has the first epoch of reading `shards` (paths) warn unless it holds num_samples
        records."""
        self._epoch = (frozenset(shards), num_samples)

    def shard_end(self, path, records, bytes_read, size):
        """Checks that the reading of shard `path`, which stopped after `records` records
        and `bytes_read` bytes, reached its last byte (`size`)."""
        path, records, bytes_read = path.numpy().decode(), int(records), int(bytes_read)
        if bytes_read != int(size):
            self._fail(f'shard {path} is damaged: reading stopped at record {records}, byte '
                       f'{bytes_read} of {int(size)} (a corrupt or truncated record, or the '
                       'file changed); restore it or convert the dataset again')
        with self._lock:
            if self._epoch is None:
                return True
            self._counts[path] = records
            shards, num_samples = self._epoch
            if set(self._counts) >= shards:
                read = sum(self._counts[shard] for shard in shards)
                if read != num_samples:
                    logging.warning('An epoch of %d shards read %d records, not the %d their '
                                    'split registers', len(shards), read, num_samples)
                self._epoch = None
        return True

    def bad_records(self, paths, indices, serialized, parse, preprocess):
        """Skips the records (shard paths, indices in them, serialized bytes) that `parse`
        (a record's bytes -> its image and label) fails on, logging each the first time (a
        later epoch skips it again), or fails once more than max_bad_records records have. A
        record that parses failed `preprocess` (an image and label -> their example): that
        ends the reading with a ProgramError, whatever max_bad_records."""
        for path, index, record in zip(paths.numpy(), indices.numpy(), serialized.numpy()):
            path, index = path.decode(), int(index)
            if (path, index) in self._skipped_records:
                continue
            cause = _error(parse, record)
            if cause is None:
                cause = _error(lambda parsed: preprocess(*parse(parsed)), record, name_op=True)
                self._fail(f'preprocessing {self.preprocessing} fails on record {index} of '
                           f'shard {path}, which decodes ({cause or "only in the pipeline"}): '
                           'the preprocessing does not take these images, the data is not '
                           'damaged', ProgramError)
            with self._lock:
                if (path, index) in self._skipped_records:  # Another input thread's, meanwhile.
                    continue
                if len(self.skipped) >= self.max_bad_records:
                    limit = (f'{len(self.skipped) + 1} exceed --max_bad_records='
                             f'{self.max_bad_records}' if self.max_bad_records else
                             '--max_bad_records=N skips up to N')
                    self._fail(f'record {index} of shard {path} does not decode ({cause}); '
                               f'{limit}')
                self.skipped.append((path, index, cause))
                self._skipped_records.add((path, index))
                logging.warning('Skipped record %d of shard %s (%s): %d of --max_bad_records=%d',
                                index, path, cause, len(self.skipped), self.max_bad_records)
        return True


def _error(function, record, name_op=False):
    """Why `function` (a serialized record -> tensors) fails on serialized record `record`,
    run in a graph of its own as the pipeline runs it, in one line (ending with the failing
    op's name, 'at op random_crop/Assert/Assert', with name_op); None when it does not."""
    with tf.Graph().as_default():
        outputs = function(tf.constant(record))
        try:
            with tf.Session() as session:
                session.run(outputs)
        except tf.errors.OpError as e:
            # What the op said: past TensorFlow's traceback of where the op was made.
            message = re.sub(r"^.*\nNode: '[^']*'\n|^Graph execution error:|\[\[.*?\]\]", '',
                             e.message, flags=re.DOTALL)
            message = ' '.join(message.split())
            op = f' at op {e.op.name}' if name_op and e.op is not None else ''
            return message[:200] + op
    return None


def _shard_chunks(path, size, guard):
    """Chunks of shard `path` (string tensor): (serialized records [n], their indices in the
    shard [n]), n <= CHUNK_RECORDS, in order; guard.shard_end checks that the reading ends
    at the shard's last byte, `size`."""
    ended = tf.data.Dataset.from_tensors(tf.constant([], tf.string))  # An empty chunk.
    chunks = (tf.data.TFRecordDataset(path).ignore_errors()  # Stops at a damaged record.
              .batch(CHUNK_RECORDS).concatenate(ended))

    def count(state, records):
        index, offset = state
        length = tf.size(records, out_type=tf.int64)
        read = tf.reduce_sum(tf.strings.length(records)) + _FRAMING_BYTES * tf.cast(
            length, tf.int32)
        return ((index + length, offset + tf.cast(read, tf.int64)),
                (records, index + tf.range(length), index, offset))

    def check(records, indices, index, offset):  # The records and bytes before the chunk.
        checked = tf.cond(tf.size(records) > 0, lambda: tf.constant(True),
                          lambda: tf.py_function(guard.shard_end, [path, index, offset, size],
                                                 tf.bool))
        with tf.control_dependencies([checked]):
            return tf.identity(records), indices

    zero = tf.constant(0, tf.int64)
    return (chunks.scan((zero, zero), count).map(check)
            .filter(lambda records, indices: tf.size(records) > 0))


def _records(split, num_readers, training, replica_id, num_replicas, seed, guard):
    """(serialized record, shard path, index in the shard) of each record of `split`, this
    replica's share of it when training (in a random order unless `seed`; in the files'
    order when not training). Checks the shards against their manifest first
    (manifest.check)."""
    files = split.files()
    checked = manifest.check(split, files) is not None
    by_record = num_replicas > 1 and len(files) < num_replicas
    if num_replicas > 1 and not by_record:
        files = files[replica_id::num_replicas]  # Each replica reads its own shards.
    elif not checked:  # This replica reads every shard: an epoch holds the whole split.
        guard.count_epoch(files, split.num_samples)
    sizes = [tf.io.gfile.stat(path).length for path in files]

    def read(path, size):
        chunks = _shard_chunks(path, size, guard)
        if by_record:  # Too few shards to split: each takes every n-th record of each.
            chunks = chunks.map(lambda records, indices: tuple(
                tf.boolean_mask(x, tf.equal(indices % num_replicas, replica_id))
                for x in (records, indices)))
        return chunks.map(lambda records, indices: (
            records, tf.fill(tf.shape(records), path), indices))

    shards = tf.data.Dataset.from_tensor_slices((files, tf.constant(sizes, tf.int64)))
    if training:
        shards = shards.shuffle(len(files), seed=seed).repeat()
    return shards.interleave(read, cycle_length=num_readers, num_parallel_calls=AUTOTUNE,
                             deterministic=not training or seed is not None).unbatch()


def _examples(records, split, preprocessing_fn, image_size, labels_offset, guard, num_threads,
              deterministic):
    """(preprocessing_fn's image of side image_size, label - labels_offset) of each record of
    `records` (serialized, shard path, index in the shard) that `split` can parse and
    preprocessing_fn take, in order, num_threads chunks at a time; the other records go to
    guard.bad_records, which tells the records that do not parse from those preprocessing_fn
    fails on.

    A chunk's errors are dropped (ignore_errors): the records missing from its output are the
    bad ones. Its examples (float32 images) take at most about CHUNK_BYTES."""
    example_bytes = image_size * image_size * split.channels * 4
    chunk = max(MIN_CHUNK_RECORDS, min(CHUNK_RECORDS, CHUNK_BYTES // example_bytes))
    guard.preprocessing = getattr(preprocessing_fn, '__name__', repr(preprocessing_fn))

    @tf.autograph.to_graph  # Converts preprocessing_fn as it calls it (module docstring).
    def preprocess(image, label):
        image = preprocessing_fn(image, image_size, image_size)
        if not image.shape.is_fully_defined():
            raise ValueError(f'preprocessing_fn must give images of a static shape, got '
                             f'{image.shape}')
        return image, label - labels_offset

    def example(record, position):
        return (*preprocess(*split.parse(record)), position)

    def chunk_examples(serialized, paths, indices):
        count = tf.size(serialized, out_type=tf.int64)
        examples = (tf.data.Dataset.from_tensor_slices((serialized, tf.range(count)))
                    .map(example).ignore_errors())
        image, label, _ = examples.element_spec
        end = tf.data.Dataset.from_tensors(  # Position `count` marks the chunk's end.
            (tf.zeros(image.shape, image.dtype), tf.zeros([], label.dtype), count))

        def check(images, labels, positions):
            decoded_positions = positions[:-1, tf.newaxis]
            present = tf.scatter_nd(decoded_positions, tf.ones_like(positions[:-1]), [count])
            bad = tf.where(tf.equal(present, 0))[:, 0]
            reported = tf.cond(
                tf.size(bad) > 0,
                lambda: tf.py_function(
                    lambda *bad_records: guard.bad_records(*bad_records, split.parse, preprocess),
                    [tf.gather(paths, bad), tf.gather(indices, bad), tf.gather(serialized, bad)],
                    tf.bool),
                lambda: tf.constant(True))
            with tf.control_dependencies([reported]):
                return tf.identity(images[:-1]), labels[:-1]

        return examples.concatenate(end).batch(chunk + 1).map(check).unbatch()

    return records.batch(chunk).interleave(chunk_examples, cycle_length=num_threads,
                                           block_length=chunk, num_parallel_calls=num_threads,
                                           deterministic=deterministic)


@tf.autograph.experimental.do_not_convert
def training_batches(split, preprocessing_fn, image_size, batch_size, num_readers=4,
                     num_preprocessing_threads=4, labels_offset=0, replica_id=0,
                     num_replicas=1, shuffle_buffer=4096, seed=None, guard=None):
    """An endless, shuffled dataset of (images, labels) batches for one clone.

    images: float32 [batch_size, image_size, image_size, C] from `preprocessing_fn(image,
    height, width)`; labels: int64 [batch_size], dataset label minus labels_offset.
    Replica `replica_id` of `num_replicas` reads its own shards (or every num_replicas-th
    record when there are fewer shards than replicas). seed: None for a random order;
    with a seed the order and, with the graph seeded and op determinism on (as
    DeploymentConfig's seed does), the augmentation repeat from run to run. guard: the
    RecordGuard of the reading (None: one that lets no bad record pass).
    """
    guard = guard or RecordGuard()
    records = _records(split, num_readers, True, replica_id, num_replicas, seed, guard)
    deterministic = seed is not None
    shuffled = records.shuffle(min(shuffle_buffer, split.num_samples), seed=seed)
    return (_examples(shuffled, split, preprocessing_fn, image_size, labels_offset, guard,
                      num_preprocessing_threads, deterministic)
            .batch(batch_size, drop_remainder=True)
            .prefetch(AUTOTUNE))


@tf.autograph.experimental.do_not_convert
def evaluation_batches(split, preprocessing_fn, image_size, batch_size, num_clones=1,
                       num_readers=1, num_preprocessing_threads=4, labels_offset=0,
                       guard=None):
    """Every example of `split` exactly once, as (images, labels, weights) batches.

    Batches hold exactly batch_size examples and come in groups of num_clones (one per
    clone per step); the last group is filled up with zero images of weight 0, so metrics
    weighted by `weights` (float32 [batch_size], 1 for real examples) count each example
    once and drop none. guard: as in training_batches.
    """
    guard = guard or RecordGuard()
    examples = (_examples(_records(split, num_readers, False, 0, 1, None, guard), split,
                          preprocessing_fn, image_size, labels_offset, guard,
                          num_preprocessing_threads, True)
                .map(lambda image, label: (image, label, tf.constant(1.0))))
    group = batch_size * num_clones
    image_spec = examples.element_spec[0]
    padding = tf.data.Dataset.from_tensors(
        (tf.zeros(image_spec.shape, image_spec.dtype), tf.constant(0, tf.int64),
         tf.constant(0.0))).repeat(group - 1)
    return (examples.concatenate(padding)
            .batch(group, drop_remainder=True)
            .unbatch()
            .batch(batch_size)
            .prefetch(AUTOTUNE))
