"""slim_deploy/datasets/: record helpers, the embedded digits conversion, the toolkit's
get_dataset_split and its errors (slim's get_dataset: test_slim_datasets.py).

Everything runs on real TFRecord files in tmp_path; no network.
"""
import hashlib
import inspect
import os
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory, dataset_utils, digits
from slim_deploy.datasets.dataset_utils import DatasetSplit

from helpers import error_message

DIGITS_FILES = [
    'digits_test_00000-of-00002.tfrecord', 'digits_test_00001-of-00002.tfrecord',
    'digits_train_00000-of-00004.tfrecord', 'digits_train_00001-of-00004.tfrecord',
    'digits_train_00002-of-00004.tfrecord', 'digits_train_00003-of-00004.tfrecord',
    'labels.txt', 'manifest.json',
]
DIGITS_LABELS = ('0:zero\n1:one\n2:two\n3:three\n4:four\n5:five\n6:six\n7:seven\n'
                 '8:eight\n9:nine\n')

# name: (split, num_samples, num_classes, channels, the split's file names, a file of
# another split that must not be picked up). Sizes are TF-Slim's.
FAKE_SPLITS = {
    'mnist': ('train', 60000, 10, 1, ['mnist_train.tfrecord'], 'mnist_test.tfrecord'),
    'cifar10': ('test', 10000, 10, 3, ['cifar10_test.tfrecord'], 'cifar10_train.tfrecord'),
    'flowers': ('validation', 350, 5, 3,
                ['flowers_validation_00000-of-00005.tfrecord',
                 'flowers_validation_00001-of-00005.tfrecord'],
                'flowers_train_00000-of-00005.tfrecord'),
    'imagenet': ('validation', 50000, 1001, 3,
                 ['validation-00000-of-00128', 'validation-00001-of-00128'],
                 'train-00000-of-01024'),
    'visualwakewords': ('train', 82783, 2, 3,
                        ['train.record-00000-of-00100', 'train.record-00001-of-00100'],
                        'val.record-00000-of-00010'),
}


# SHA-256 of digits.npz's pixels then labels (uint8 bytes), as scikit-learn 1.9's
# load_digits gave them when tools/embed_digits.py wrote the file.
EMBEDDED_SHA256 = '87ff0c9e40dc7e2c0e34e7257799c2e3f3aec1a016363bb11cad869ec428a826'


def embedded_digits():
    """digits.npz as scikit-learn gave it: (pixels uint8 [1797, 8, 8] in 0..16, labels uint8
    [1797])."""
    with np.load(digits.EMBEDDED) as data:
        pixels, labels = data['pixels'], data['labels']
    assert hashlib.sha256(pixels.tobytes() + labels.tobytes()).hexdigest() == EMBEDDED_SHA256
    return pixels, labels


def expected_digits():
    """The embedded digits scaled to uint8 as documented: (images [1797, 8, 8], labels
    [1797])."""
    pixels, labels = embedded_digits()
    return np.round(pixels.astype(np.float64) * 255 / 16).astype(np.uint8), labels


def test_the_embedded_digits_are_ucis_handwritten_digits():
    """1,797 images of 8x8 values 0..16 (pixels counted in 4x4 blocks of a 32x32 bitmap),
    each class 174 to 183 times, as the dataset's description says."""
    pixels, labels = embedded_digits()
    assert pixels.shape == (1797, 8, 8) and pixels.max() == 16
    assert np.bincount(labels).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]


def expected_order(split_name):
    """The documented record order: RandomState(0).permutation(1797), 1437 train first."""
    order = np.random.RandomState(0).permutation(1797)
    return order[:1437] if split_name == 'train' else order[1437:]


def decode_files(split, files=None):
    """Reads files (default: all of split's) through tf.data in a graph.

    Returns (images uint8 [N, H, W, channels], labels int64 [N]); all images must share H, W.
    """
    with tf.Graph().as_default():
        dataset = tf.data.TFRecordDataset(files or split.files()).map(split.parse)
        images, labels = tf.data.make_one_shot_iterator(dataset.batch(100000)).get_next()
        with tf.Session() as sess:
            return sess.run([images, labels])


def encode(images, image_format):
    """Encodes uint8 [H, W, C] images to PNG or JPEG bytes in a throwaway graph."""
    encoder = tf.io.encode_png if image_format == b'png' else tf.io.encode_jpeg
    with tf.Graph().as_default():
        placeholder = tf.placeholder(tf.uint8, [None, None, None])
        encoded = encoder(placeholder)
        with tf.Session() as sess:
            return [sess.run(encoded, {placeholder: image}) for image in images]


def write_fake_file(path, channels, labels, image_format=b'png', size=(5, 7)):
    """Writes one record per label, of random images [size..., channels]; returns the images."""
    rng = np.random.RandomState(len(labels))
    images = rng.randint(0, 256, size=(len(labels),) + size + (channels,)).astype(np.uint8)
    dataset_utils.write_tfrecord(path, [
        dataset_utils.image_to_tfexample(data, image_format, size[0], size[1], label)
        .SerializeToString()
        for data, label in zip(encode(images, image_format), labels)])
    return images


@pytest.fixture
def mtimes():
    def snapshot(directory):
        return {name: os.stat(os.path.join(directory, name)).st_mtime_ns
                for name in os.listdir(directory)}
    return snapshot


# --- dataset_utils -----------------------------------------------------------------------

def test_feature_helpers_take_scalars_and_lists():
    assert dataset_utils.int64_feature(3).int64_list.value == [3]
    assert dataset_utils.int64_feature([1, 2]).int64_list.value == [1, 2]
    assert dataset_utils.bytes_feature(b'a').bytes_list.value == [b'a']
    assert dataset_utils.bytes_feature((b'a', b'b')).bytes_list.value == [b'a', b'b']
    assert dataset_utils.float_feature(0.5).float_list.value == [0.5]
    assert dataset_utils.float_feature([0.5, 2.0]).float_list.value == [0.5, 2.0]


def test_image_to_tfexample_uses_slims_keys():
    example = dataset_utils.image_to_tfexample(b'bytes', b'png', 8, 6, 4)
    feature = example.features.feature
    assert sorted(feature) == ['image/class/label', 'image/encoded', 'image/format',
                               'image/height', 'image/width']
    assert feature['image/encoded'].bytes_list.value == [b'bytes']
    assert feature['image/format'].bytes_list.value == [b'png']
    assert feature['image/class/label'].int64_list.value == [4]
    assert feature['image/height'].int64_list.value == [8]
    assert feature['image/width'].int64_list.value == [6]


def test_label_file_round_trip(tmp_path):
    labels = {10: 'ten', 0: 'background', 2: 'a:b'}
    assert not dataset_utils.has_labels(tmp_path)
    dataset_utils.write_label_file(labels, tmp_path)
    assert dataset_utils.has_labels(tmp_path)
    assert (tmp_path / 'labels.txt').read_text() == '0:background\n2:a:b\n10:ten\n'
    assert dataset_utils.read_label_file(tmp_path) == labels
    dataset_utils.write_label_file({1: 'x'}, tmp_path, filename='other.txt')
    assert dataset_utils.read_label_file(tmp_path, filename='other.txt') == {1: 'x'}
    assert sorted(os.listdir(tmp_path)) == ['labels.txt', 'other.txt']


def test_read_label_file_rejects_a_foreign_file(tmp_path):
    (tmp_path / 'labels.txt').write_text('0:zero\r\none\n')
    with pytest.raises(UsageError) as excinfo:
        dataset_utils.read_label_file(tmp_path)
    assert error_message(excinfo) == (
        f"{tmp_path / 'labels.txt'}:2: expected 'id:name' with an integer id, got 'one'")
    (tmp_path / 'labels.txt').write_bytes(b'\x89PNG\r\n\x1a\n\xff')
    with pytest.raises(UsageError) as excinfo:
        dataset_utils.read_label_file(tmp_path)
    assert error_message(excinfo) == (
        f"{tmp_path / 'labels.txt'}: not UTF-8 text; expected 'id:name' lines")


def test_shard_filename():
    assert dataset_utils.shard_filename('/d', 'flowers', 'train', 3, 5) == (
        '/d/flowers_train_00003-of-00005.tfrecord')


@pytest.mark.parametrize('shard_id, num_shards, match', [
    (4, 4, r'shard_id must be in \[0, 4\), got 4'),
    (-1, 4, r'shard_id must be in \[0, 4\), got -1'),
    (0, 0, 'num_shards must be at least 1, got 0'),
])
def test_shard_filename_rejects_bad_numbers(shard_id, num_shards, match):
    with pytest.raises(ValueError, match=match) as excinfo:
        dataset_utils.shard_filename('/d', 'p', 'train', shard_id, num_shards)
    error_message(excinfo)
    assert type(excinfo.value) is ValueError  # Our code's mistake, not the user's.


def test_write_tfrecord_leaves_nothing_when_interrupted(tmp_path):
    def examples():
        yield b'first'
        raise KeyboardInterrupt

    path = str(tmp_path / 'x.tfrecord')
    with pytest.raises(KeyboardInterrupt):
        dataset_utils.write_tfrecord(path, examples())
    assert os.listdir(tmp_path) == []
    dataset_utils.write_tfrecord(path, [b'a', b'b'])
    assert os.listdir(tmp_path) == ['x.tfrecord']
    assert [r.numpy() for r in tf.data.TFRecordDataset(path)] == [b'a', b'b']


def test_dataset_split_validates_channels_and_files(tmp_path):
    with pytest.raises(ValueError, match='channels must be 1 or 3, got 2') as excinfo:
        DatasetSplit('d', 'train', str(tmp_path / '*'), 1, 1, None, {}, channels=2)
    error_message(excinfo)
    assert type(excinfo.value) is ValueError
    split = DatasetSplit('d', 'train', str(tmp_path / 'd_train_*'), 1, 1, None, {}, 1)
    with pytest.raises(UsageError) as excinfo:
        split.files()
    assert error_message(excinfo) == (
        f"--dataset_dir '{tmp_path}' holds no files matching 'd_train_*' for dataset 'd' "
        "split 'train' (create them with download_and_convert_data.py)")


# --- digits ------------------------------------------------------------------------------

def test_prepare_writes_the_shards_and_labels(digits_dir):
    assert sorted(os.listdir(digits_dir)) == DIGITS_FILES
    assert open(os.path.join(digits_dir, 'labels.txt')).read() == DIGITS_LABELS
    assert digits.shard_paths(digits_dir, 'test') == [
        os.path.join(digits_dir, name) for name in DIGITS_FILES[:2]]


@pytest.mark.parametrize('split_name, shard_sizes', [
    ('train', [360, 359, 359, 359]), ('test', [180, 180])])
def test_digits_records_are_the_seeded_scaled_images(digits_dir, split_name, shard_sizes):
    split = dataset_factory.get_dataset_split('digits', split_name, digits_dir)
    assert [len(decode_files(split, [path])[1]) for path in split.files()] == shard_sizes
    images, labels = decode_files(split)
    assert len(labels) == split.num_samples == digits.SPLITS_TO_SIZES[split_name]
    all_images, all_labels = expected_digits()
    order = expected_order(split_name)
    np.testing.assert_array_equal(images[..., 0], all_images[order])
    np.testing.assert_array_equal(labels, all_labels[order])
    np.testing.assert_array_equal(digits.split_indices(split_name), order)


def test_train_and_test_together_are_exactly_the_1797_digits(digits_dir):
    def rows(split_name):
        images, labels = decode_files(
            dataset_factory.get_dataset_split('digits', split_name, digits_dir))
        return np.concatenate([images.reshape(len(labels), -1), labels[:, None]], axis=1)

    all_images, all_labels = expected_digits()
    everything = np.concatenate([all_images.reshape(1797, -1), all_labels[:, None]], axis=1)
    both = np.concatenate([rows('train'), rows('test')])
    for got, want in zip(np.unique(both, axis=0, return_counts=True),
                         np.unique(everything, axis=0, return_counts=True)):
        np.testing.assert_array_equal(got, want)
    train, test = digits.split_indices('train'), digits.split_indices('test')
    assert not set(train) & set(test)
    assert sorted(np.concatenate([train, test])) == list(range(1797))


def test_second_prepare_rewrites_nothing(digits_dir, mtimes, monkeypatch):
    before = mtimes(digits_dir)
    monkeypatch.setattr(digits, 'load_images', pytest.fail)  # converting again would fail
    assert digits.prepare(digits_dir) == digits_dir
    assert mtimes(digits_dir) == before


def test_interrupted_conversion_is_completed(digits_dir, tmp_path, mtimes):
    work = str(tmp_path / 'digits')
    shutil.copytree(digits_dir, work)
    stale = os.path.join(work, 'digits_train_00002-of-00004.tfrecord.tmp-99999')
    with open(stale, 'wb') as f:
        f.write(b'half a shard')
    os.remove(os.path.join(work, 'digits_train_00002-of-00004.tfrecord'))
    kept = mtimes(work)
    assert digits.prepare(work) == work
    assert sorted(os.listdir(work)) == sorted(DIGITS_FILES + [os.path.basename(stale)])
    for name in DIGITS_FILES:
        with open(os.path.join(work, name), 'rb') as got, \
                open(os.path.join(digits_dir, name), 'rb') as want:
            assert got.read() == want.read(), name
    untouched = [name for name in kept if name.endswith('.tfrecord')]
    assert {name: mtimes(work)[name] for name in untouched} == {
        name: kept[name] for name in untouched}
    split = dataset_factory.get_dataset_split('digits', 'train', work)
    assert stale not in split.files() and len(split.files()) == 4


def test_default_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv('SLIM_DEPLOY_DATA_DIR', raising=False)
    assert digits.default_dir() == os.path.expanduser('~/.cache/slim_deploy/digits')
    monkeypatch.setenv('SLIM_DEPLOY_DATA_DIR', str(tmp_path))
    assert digits.default_dir() == str(tmp_path / 'digits')
    split = dataset_factory.get_dataset_split('digits', 'test', None)
    assert split.file_pattern == str(tmp_path / 'digits' / 'digits_test_*.tfrecord')
    assert sorted(os.listdir(tmp_path / 'digits')) == DIGITS_FILES


def test_digits_errors(tmp_path):
    with pytest.raises(ValueError, match=r"split_name must be one of \['test', 'train'\], "
                                         "got 'validation'") as excinfo:
        digits.split_indices('validation')
    error_message(excinfo)
    assert type(excinfo.value) is ValueError  # get_dataset checks users' split names first.
    not_a_dir = tmp_path / 'file'
    not_a_dir.write_text('')
    with pytest.raises(UsageError) as excinfo:
        digits.prepare(str(not_a_dir))
    assert error_message(excinfo) == f"--dataset_dir '{not_a_dir}' is a file, not a directory"


# --- get_dataset_split -------------------------------------------------------------------

def test_the_registry_lists_all_six_datasets():
    assert list(dataset_factory.DATASETS) == sorted([*FAKE_SPLITS, 'digits'])
    assert len(dataset_factory.DATASETS) == 6
    assert dataset_factory.DATASETS.flag == 'dataset_name'


@pytest.mark.parametrize('name, splits_to_sizes, num_classes', [
    ('cifar10', {'train': 50000, 'test': 10000}, 10),
    ('digits', {'train': 1437, 'test': 360}, 10),
    ('flowers', {'train': 3320, 'validation': 350}, 5),
    ('imagenet', {'train': 1281167, 'validation': 50000}, 1001),
    ('mnist', {'train': 60000, 'test': 10000}, 10),
    ('visualwakewords', {'train': 82783, 'val': 40504}, 2),
])
def test_registered_sizes_are_slims(name, splits_to_sizes, num_classes):
    info = dataset_factory.get_info(name)
    assert (info.splits_to_sizes, info.num_classes) == (splits_to_sizes, num_classes)


@pytest.mark.parametrize('name', sorted([*FAKE_SPLITS, 'digits']))
def test_every_dataset_has_its_converter_or_is_embedded(name):
    """A converter is its own module's convert(dataset_dir, source=None, ...); only an
    embedded dataset has none, and then prepares itself."""
    entry = dataset_factory.DATASETS[name]
    assert dataset_factory.get_info(name) is entry
    if entry.convert is None:
        assert callable(entry.prepare)
        assert entry.prepare.__module__ == f'slim_deploy.datasets.{name}'
        return
    assert entry.prepare is None
    assert callable(entry.convert) and entry.convert.__module__ == f'slim_deploy.datasets.{name}'
    parameters = list(inspect.signature(entry.convert).parameters)
    assert parameters[:2] == ['dataset_dir', 'source']


@pytest.mark.parametrize('name', sorted(FAKE_SPLITS))
def test_get_dataset_split_describes_a_converted_split(name, tmp_path):
    split_name, num_samples, num_classes, channels, names, other = FAKE_SPLITS[name]
    image_format = b'jpeg' if channels == 3 else b'png'
    written = [write_fake_file(str(tmp_path / file_name), channels, [0, num_classes - 1],
                               image_format)
               for file_name in names]
    write_fake_file(str(tmp_path / other), channels, [0])
    dataset_utils.write_label_file({0: 'first', num_classes - 1: 'last'}, tmp_path)

    split = dataset_factory.get_dataset_split(name, split_name, str(tmp_path))
    assert (split.name, split.split_name) == (name, split_name)
    assert (split.num_samples, split.num_classes, split.channels) == (
        num_samples, num_classes, channels)
    assert split.files() == [str(tmp_path / file_name) for file_name in names]
    assert split.labels_to_names == {0: 'first', num_classes - 1: 'last'}
    # Every item the slim decoder yields is described, and nothing else.
    assert set(split.items_to_descriptions) == set(split.as_slim_dataset().decoder.list_items())
    images, labels = decode_files(split)
    assert images.dtype == np.uint8 and images.shape == (2 * len(names), 5, 7, channels)
    assert labels.tolist() == [0, num_classes - 1] * len(names)
    if image_format == b'png':
        np.testing.assert_array_equal(images, np.concatenate(written))


def test_get_dataset_split_without_labels_file(tmp_path):
    write_fake_file(str(tmp_path / 'mnist_test.tfrecord'), 1, [3])
    split = dataset_factory.get_dataset_split('mnist', 'test', str(tmp_path))
    assert split.labels_to_names is None


def test_file_pattern_overrides_the_registered_one(tmp_path):
    write_fake_file(str(tmp_path / 'custom-test.rec'), 1, [1])
    split = dataset_factory.get_dataset_split('mnist', 'test', str(tmp_path),
                                              file_pattern='custom-%s.*')
    assert split.file_pattern == str(tmp_path / 'custom-test.*')
    assert split.files() == [str(tmp_path / 'custom-test.rec')]
    absolute = str(tmp_path / 'custom-*.rec')
    assert dataset_factory.get_dataset_split('mnist', 'train', str(tmp_path),
                                             file_pattern=absolute).file_pattern == absolute


def test_parse_in_a_graph_gives_uint8_images_and_int64_labels(digits_dir):
    split = dataset_factory.get_dataset_split('digits', 'test', digits_dir)
    with tf.Graph().as_default():
        dataset = tf.data.TFRecordDataset(split.files()).map(split.parse)
        image, label = tf.data.make_one_shot_iterator(dataset).get_next()
        assert image.dtype == tf.uint8 and image.shape.as_list() == [None, None, 1]
        assert label.dtype == tf.int64 and label.shape.as_list() == []
        with tf.Session() as sess:
            image_value, label_value = sess.run([image, label])
    all_images, all_labels = expected_digits()
    first = expected_order('test')[0]
    np.testing.assert_array_equal(image_value[..., 0], all_images[first])
    assert label_value == all_labels[first]


def test_as_slim_dataset_decodes_with_slims_decoder(digits_dir):
    split = dataset_factory.get_dataset_split('digits', 'train', digits_dir)
    dataset = split.as_slim_dataset()
    assert dataset.data_sources == split.files()
    assert dataset.reader is tf.TFRecordReader
    assert (dataset.num_samples, dataset.num_classes) == (1437, 10)
    assert dataset.labels_to_names == split.labels_to_names
    assert sorted(dataset.decoder.list_items()) == ['image', 'label']
    serialized = next(iter(tf.data.TFRecordDataset(split.files()[0]))).numpy()
    with tf.Graph().as_default():
        record = tf.placeholder(tf.string, [])
        image, label = dataset.decoder.decode(record, ['image', 'label'])
        with tf.Session() as sess:
            image_value, label_value = sess.run([image, label], {record: serialized})
    all_images, all_labels = expected_digits()
    first = expected_order('train')[0]
    assert image_value.dtype == np.uint8 and image_value.shape == (8, 8, 1)
    np.testing.assert_array_equal(image_value[..., 0], all_images[first])
    assert label_value == all_labels[first]


def test_as_slim_dataset_feeds_a_dataset_data_provider(digits_dir):
    dataset = dataset_factory.get_dataset_split('digits', 'test', digits_dir).as_slim_dataset()
    with tf.Graph().as_default():
        provider = slim.dataset_data_provider.DatasetDataProvider(
            dataset, shuffle=False, num_epochs=1, common_queue_capacity=4, common_queue_min=1)
        image, label = provider.get(['image', 'label'])
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coordinator = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coordinator)
            image_value, label_value = sess.run([image, label])
            coordinator.request_stop()
            coordinator.join(threads)
    assert image_value.shape == (8, 8, 1) and image_value.dtype == np.uint8
    assert 0 <= label_value < 10


def test_get_dataset_split_passes_the_reader_on(digits_dir):
    split = dataset_factory.get_dataset_split('digits', 'test', digits_dir,
                                              reader=tf.WholeFileReader)
    assert split.as_slim_dataset().reader is tf.WholeFileReader


@pytest.mark.parametrize('args, message', [
    (('nope', 'train', '/tmp'),
     "unknown --dataset_name 'nope'; valid: cifar10, digits, flowers, imagenet, mnist, "
     "visualwakewords"),
    (('mnist', 'validation', '/tmp'),
     "unknown --dataset_split_name 'validation'; valid: train, test"),
    (('imagenet', 'test', '/tmp'),
     "unknown --dataset_split_name 'test'; valid: train, validation"),
    (('mnist', 'train', None),
     "--dataset_dir is required for dataset 'mnist': the directory holding its TFRecord "
     "files (see download_and_convert_data.py)"),
    (('flowers', 'train', ''),
     "--dataset_dir is required for dataset 'flowers': the directory holding its TFRecord "
     "files (see download_and_convert_data.py)"),
])
def test_get_dataset_split_errors(args, message):
    with pytest.raises(UsageError) as excinfo:
        dataset_factory.get_dataset_split(*args)
    assert error_message(excinfo) == message


def test_get_info_names_the_flag():
    assert dataset_factory.get_info('flowers').num_classes == 5
    with pytest.raises(UsageError) as excinfo:
        dataset_factory.get_info('bogus')
    assert error_message(excinfo) == (
        "unknown --dataset_name 'bogus'; valid: cifar10, digits, flowers, imagenet, mnist, "
        "visualwakewords")


def test_get_dataset_split_names_a_foreign_labels_file(tmp_path):
    write_fake_file(str(tmp_path / 'mnist_test.tfrecord'), 1, [3])
    (tmp_path / 'labels.txt').write_text('cat\n')
    with pytest.raises(UsageError) as excinfo:
        dataset_factory.get_dataset_split('mnist', 'test', str(tmp_path))
    assert error_message(excinfo) == (
        f"{tmp_path / 'labels.txt'}:1: expected 'id:name' with an integer id, got 'cat'")


def test_get_dataset_split_names_a_missing_directory(tmp_path):
    missing = str(tmp_path / 'missing')
    with pytest.raises(UsageError) as excinfo:
        dataset_factory.get_dataset_split('mnist', 'train', missing)
    assert error_message(excinfo) == (
        f"--dataset_dir '{missing}' does not exist; expected files matching "
        "'mnist_train.tfrecord' for dataset 'mnist' split 'train' "
        "(create them with download_and_convert_data.py)")


def test_get_dataset_split_names_a_directory_without_the_split(tmp_path):
    write_fake_file(str(tmp_path / 'flowers_train_00000-of-00005.tfrecord'), 3, [0])
    with pytest.raises(UsageError) as excinfo:
        dataset_factory.get_dataset_split('flowers', 'validation', str(tmp_path))
    assert error_message(excinfo) == (
        f"--dataset_dir '{tmp_path}' holds no files matching 'flowers_validation_*.tfrecord' "
        "for dataset 'flowers' split 'validation' "
        "(create them with download_and_convert_data.py)")
