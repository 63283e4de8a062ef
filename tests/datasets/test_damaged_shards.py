"""Shards read back as they were written: the manifest converters write, its check when a
pipeline starts, and the pipeline's end-of-shard and record checks while it reads (real
TFRecord files, torn, corrupted and holding undecodable images)."""
import hashlib
import logging
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import DataError, ProgramError
from slim_deploy.datasets import conversion, digits, manifest, pipeline
from slim_deploy.datasets.dataset_utils import DatasetSplit

from helpers import error_message
from raw_datasets import replace_image

SHARDS, RECORDS, SIZE = 2, 40, 4  # Records per shard; images are SIZE x SIZE grayscale.


def write_dataset(directory, with_manifest=True):
    """Writes split 'train' of SHARDS shards of RECORDS PNG records (label = index % 3) into
    `directory`, and their manifest unless told not to; returns the shard paths."""
    os.makedirs(directory, exist_ok=True)
    paths = conversion.shard_paths(str(directory), 'mini', 'train', SHARDS)
    count = SHARDS * RECORDS
    images = np.arange(count * SIZE * SIZE, dtype=np.uint8).reshape(count, SIZE, SIZE)
    conversion.write_png_shards(paths, images, np.arange(count) % 3, 'mini', num_workers=1)
    if with_manifest:
        manifest.write(str(directory), paths)
    return paths


def split_of(directory, num_samples=SHARDS * RECORDS, image_shape=(SIZE, SIZE, 1)):
    return DatasetSplit('mini', 'train', os.path.join(str(directory), 'mini_train_*'),
                        num_samples, 3, None, {}, 1, image_shape=image_shape)


def resize(image, height, width):
    return tf.image.resize(image, [height, width])


def read_all(split, guard, evaluation=True):
    """The labels of one pass of evaluation_batches (or an epoch of training_batches) over
    `split`, read under `guard` (errors raised through guard.raising())."""
    with tf.Graph().as_default():
        if evaluation:
            batches = pipeline.evaluation_batches(split, resize, SIZE, 10, guard=guard)
        else:
            batches = pipeline.training_batches(split, resize, SIZE, 10, guard=guard, seed=1)
        batch = tf.data.make_one_shot_iterator(batches).get_next()
        labels = []
        with tf.Session() as sess, guard.raising():
            while len(labels) < SHARDS * RECORDS // 10 or evaluation:
                try:
                    values = sess.run(batch)
                except tf.errors.OutOfRangeError:
                    break
                labels.append(values[1][values[2] > 0] if evaluation else values[1])
    return np.concatenate(labels)


# --- the manifest ------------------------------------------------------------------------

def test_the_manifest_holds_each_shards_records_size_and_checksum(tmp_path):
    paths = write_dataset(tmp_path)
    shards = manifest.read(str(tmp_path))
    for path in paths:
        with open(path, 'rb') as f:
            data = f.read()
        assert shards[os.path.basename(path)] == {
            'records': sum(1 for _ in tf.data.TFRecordDataset(path)), 'bytes': len(data),
            'sha256': hashlib.sha256(data).hexdigest()}
    assert sum(entry['records'] for entry in shards.values()) == SHARDS * RECORDS


def test_a_torn_shard_cannot_enter_a_manifest(tmp_path):
    path = write_dataset(tmp_path, with_manifest=False)[1]
    size = os.path.getsize(path)
    with open(path, 'r+b') as f:
        f.truncate(size - 5)
    with pytest.raises(DataError) as excinfo:
        manifest.write(str(tmp_path), [path])
    assert error_message(excinfo).startswith(f'shard {path} is torn: it ends inside record '
                                             f'{RECORDS - 1} ')


def test_an_old_conversion_gets_its_manifest_without_rewriting_a_shard(digits_dir, tmp_path):
    work = shutil.copytree(digits_dir, tmp_path / 'digits')
    os.remove(work / manifest.FILENAME)
    shard_times = {path: os.stat(path).st_mtime_ns for path in work.glob('*.tfrecord')}
    digits.prepare(str(work))
    assert {path: os.stat(path).st_mtime_ns for path in shard_times} == shard_times
    with open(os.path.join(digits_dir, manifest.FILENAME), 'rb') as converted:
        assert (work / manifest.FILENAME).read_bytes() == converted.read()


def test_a_torn_or_missing_shard_is_refused_when_reading_starts(tmp_path):
    paths = write_dataset(tmp_path)
    size = os.path.getsize(paths[1])
    with open(paths[1], 'r+b') as f:  # Cut at a record's end: the reader would not notice.
        records = list(tf.data.TFRecordDataset(paths[1]).as_numpy_iterator())
        f.truncate(size - len(records[-1]) - 16)
    with pytest.raises(DataError) as excinfo:
        read_all(split_of(tmp_path), pipeline.RecordGuard())
    assert error_message(excinfo) == (
        f'shard {paths[1]} is {size - len(records[-1]) - 16} bytes where manifest.json says '
        f'{size}: torn or replaced; restore it or convert the dataset again')
    os.remove(paths[1])
    with pytest.raises(DataError) as excinfo:
        read_all(split_of(tmp_path), pipeline.RecordGuard())
    assert error_message(excinfo) == (
        f'shard {paths[1]} is missing (listed in manifest.json); restore it or convert the '
        'dataset again')


def test_a_split_short_of_its_size_is_reported(tmp_path, caplog):
    write_dataset(tmp_path)
    with caplog.at_level(logging.WARNING):
        labels = read_all(split_of(tmp_path, num_samples=100), pipeline.RecordGuard())
    assert len(labels) == SHARDS * RECORDS
    assert (f"split 'train' of {tmp_path} holds 80 records by its manifest.json, not the 100 "
            'its dataset registers') in caplog.text


# --- without a manifest: checked while reading --------------------------------------------

def test_without_a_manifest_it_says_the_shards_cannot_be_checked(tmp_path, caplog):
    write_dataset(tmp_path, with_manifest=False)
    with caplog.at_level(logging.WARNING):
        labels = read_all(split_of(tmp_path), pipeline.RecordGuard())
    assert sorted(labels) == sorted(np.arange(SHARDS * RECORDS) % 3)
    assert f'{tmp_path} has no manifest.json' in caplog.text


@pytest.mark.parametrize('damage', ['torn', 'corrupt'])
@pytest.mark.parametrize('evaluation', [True, False], ids=['evaluation', 'training'])
def test_a_damaged_shard_is_named_with_the_record_reading_stopped_at(tmp_path, damage,
                                                                    evaluation):
    paths = write_dataset(tmp_path, with_manifest=False)
    records = list(tf.data.TFRecordDataset(paths[1]).as_numpy_iterator())
    offset = sum(len(record) + 16 for record in records[:25])  # Record 25's start.
    size = os.path.getsize(paths[1])
    with open(paths[1], 'r+b') as f:
        if damage == 'torn':
            f.truncate(offset + 7)  # Inside record 25's header.
        else:
            f.seek(offset + 12 + 3)  # Inside record 25's data: its checksum fails.
            f.write(b'\xff\xff')
    with pytest.raises(DataError) as excinfo:
        read_all(split_of(tmp_path), pipeline.RecordGuard(), evaluation)
    assert error_message(excinfo) == (
        f'shard {paths[1]} is damaged: reading stopped at record 25, byte {offset} of '
        f'{offset + 7 if damage == "torn" else size} (a corrupt or truncated record, or the '
        'file changed); restore it or convert the dataset again')


def test_an_epoch_short_of_the_split_is_reported(tmp_path, caplog):
    paths = write_dataset(tmp_path, with_manifest=False)
    records = list(tf.data.TFRecordDataset(paths[0]).as_numpy_iterator())
    with open(paths[0], 'r+b') as f:  # Cut at a record's end: the shard reads as whole.
        f.truncate(sum(len(record) + 16 for record in records[:30]))
    with caplog.at_level(logging.WARNING):
        read_all(split_of(tmp_path), pipeline.RecordGuard(), evaluation=False)
    assert 'An epoch of 2 shards read 70 records, not the 80 their split registers' in (
        caplog.text)


# --- records that do not decode ----------------------------------------------------------

@pytest.mark.parametrize('image_shape', [(SIZE, SIZE, 1), None], ids=['fixed', 'varying'])
def test_an_undecodable_record_ends_the_reading_naming_it(tmp_path, image_shape):
    paths = write_dataset(tmp_path)
    replace_image(paths[1], 17, b'not an image at all')
    manifest.write(str(tmp_path), paths)
    with pytest.raises(DataError) as excinfo:
        read_all(split_of(tmp_path, image_shape=image_shape), pipeline.RecordGuard())
    # TensorFlow's reason lists the formats its version decodes (2.16: JPEG, PNG, GIF, BMP).
    assert re.fullmatch(
        re.escape(f'record 17 of shard {paths[1]} does not decode (Unknown image file format. '
                  'One of ') + r'[\w ,]+' + re.escape(' required.); --max_bad_records=N skips '
                                                       'up to N'), error_message(excinfo))


@pytest.mark.parametrize('evaluation', [True, False], ids=['evaluation', 'training'])
def test_max_bad_records_skips_and_logs_that_many(tmp_path, caplog, evaluation):
    paths = write_dataset(tmp_path)
    replace_image(paths[0], 3, b'\x89PNG\r\n\x1a\n broken')
    manifest.write(str(tmp_path), paths)
    guard = pipeline.RecordGuard(max_bad_records=1)
    with caplog.at_level(logging.WARNING):
        labels = read_all(split_of(tmp_path), guard, evaluation)
    assert [(path, index) for path, index, _ in guard.skipped] == [(paths[0], 3)]
    assert f'Skipped record 3 of shard {paths[0]} (' in caplog.text
    assert '1 of --max_bad_records=1' in caplog.text
    if evaluation:  # Every other record, once.
        expected = np.delete(np.arange(SHARDS * RECORDS) % 3, 3)
        assert sorted(labels) == sorted(expected)
    replace_image(paths[1], 0, b'')  # A second one ends the reading.
    manifest.write(str(tmp_path), paths)
    with pytest.raises(DataError) as excinfo:
        read_all(split_of(tmp_path), pipeline.RecordGuard(max_bad_records=1), evaluation)
    assert error_message(excinfo).endswith('; 2 exceed --max_bad_records=1')


def test_a_chunk_of_nothing_but_bad_records_names_them(tmp_path):
    paths = write_dataset(tmp_path)
    for index in range(RECORDS):  # A whole shard: its chunks hold nothing else.
        replace_image(paths[0], index, b'bad')
    manifest.write(str(tmp_path), paths)
    guard = pipeline.RecordGuard(max_bad_records=RECORDS)
    labels = read_all(split_of(tmp_path), guard)
    assert [index for _, index, _ in guard.skipped] == list(range(RECORDS))
    assert len(labels) == (SHARDS - 1) * RECORDS


# --- preprocessing that fails is not the data's fault -------------------------------------

def too_small(image, height, width):
    """A preprocessing function that fails on every image of these shards."""
    checked = tf.debugging.assert_greater_equal(tf.shape(image)[0], 1000,
                                                message='wants images of 1000 rows')
    with tf.control_dependencies([checked]):
        return resize(image, height, width)


@pytest.mark.parametrize('evaluation', [True, False], ids=['evaluation', 'training'])
def test_preprocessing_that_fails_on_every_record_is_named_and_not_skipped(tmp_path, evaluation):
    paths = write_dataset(tmp_path)
    guard = pipeline.RecordGuard(max_bad_records=SHARDS * RECORDS)
    with tf.Graph().as_default():
        batches = (pipeline.evaluation_batches(split_of(tmp_path), too_small, SIZE, 10,
                                               guard=guard) if evaluation else
                   pipeline.training_batches(split_of(tmp_path), too_small, SIZE, 10,
                                             guard=guard, seed=1))
        batch = tf.data.make_one_shot_iterator(batches).get_next()
        with tf.Session() as sess, pytest.raises(ProgramError) as excinfo, guard.raising():
            sess.run(batch)
    shards = '|'.join(re.escape(path) for path in paths)
    assert re.fullmatch(
        rf'preprocessing too_small fails on record \d+ of shard ({shards}), which decodes '
        r'\(assertion failed: \[wants images of 1000 rows\].* at op assert_greater_equal/\S+\): '
        r'the preprocessing does not take these images, the data is not damaged',
        error_message(excinfo))
    assert guard.skipped == []
    assert excinfo.value.exit_code == 1
