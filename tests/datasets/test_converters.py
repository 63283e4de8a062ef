"""The mnist, cifar10 and flowers converters and download_and_convert_data.py, on tiny
archives in the real formats (raw_datasets; no network)."""
import os
import tarfile

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import StorageError, UsageError
from slim_deploy.datasets import cifar10, conversion, dataset_factory, flowers, mnist

from helpers import error_message, fill, run_script, tmpfs
from raw_datasets import (
    CIFAR_NAMES,
    cifar_pickle,
    make_cifar,
    make_flowers,
    make_mnist,
    pack,
    write_idx,
)

_EXTRA_FEATURES = {'image/height': tf.io.FixedLenFeature([], tf.int64),
                   'image/width': tf.io.FixedLenFeature([], tf.int64),
                   'image/format': tf.io.FixedLenFeature([], tf.string),
                   'image/encoded': tf.io.FixedLenFeature([], tf.string)}


def read_split(name, split_name, dataset_dir):
    """[(image uint8 [h, w, c], label, extra features)] of a converted split, read through
    the factory and a tf.data pipeline in a graph."""
    split = dataset_factory.get_dataset_split(name, split_name, str(dataset_dir))
    with tf.Graph().as_default():
        def parse(serialized):
            image, label = split.parse(serialized)
            return image, label, tf.io.parse_single_example(serialized, _EXTRA_FEATURES)
        dataset = tf.data.TFRecordDataset(split.files()).map(parse)
        next_record = tf.data.make_one_shot_iterator(dataset).get_next()
        records = []
        with tf.Session() as sess:
            while True:
                try:
                    records.append(sess.run(next_record))
                except tf.errors.OutOfRangeError:
                    return records


def listing(directory):
    return sorted(os.listdir(directory))


def assert_one_line_error(excinfo, *names):
    message = error_message(excinfo)
    for name in names:
        assert str(name) in message


# MNIST.

def test_mnist_converts_the_idx_files(tmp_path):
    expected = make_mnist(tmp_path / 'source')
    before = {name: (tmp_path / 'source' / name).read_bytes()
              for name in listing(tmp_path / 'source')}
    out = tmp_path / 'out'
    assert mnist.convert(str(out), str(tmp_path / 'source')) == str(out)
    assert listing(out) == ['labels.txt', 'manifest.json', 'mnist_test.tfrecord',
                            'mnist_train.tfrecord']
    assert (out / 'labels.txt').read_text().splitlines() == [
        '0:zero', '1:one', '2:two', '3:three', '4:four', '5:five', '6:six', '7:seven',
        '8:eight', '9:nine']
    for split_name, (images, labels) in expected.items():
        records = read_split('mnist', split_name, out)
        assert len(records) == len(images)
        for (image, label, extra), want_image, want_label in zip(records, images, labels):
            np.testing.assert_array_equal(image, want_image[:, :, None])
            assert label == want_label
            assert (extra['image/height'], extra['image/width']) == (28, 28)
            assert extra['image/format'] == b'png'
    assert {name: (tmp_path / 'source' / name).read_bytes()
            for name in listing(tmp_path / 'source')} == before


def test_a_conversion_that_fills_the_disk_ends_in_one_line_and_keeps_whole_shards(tmp_path):
    make_mnist(tmp_path / 'source')
    with tmpfs(tmp_path / 'disk', '1m') as disk:
        out = disk / 'mnist'
        out.mkdir()
        fill(disk, 0)
        with pytest.raises(StorageError) as excinfo:
            dataset_factory.convert('mnist', str(out), str(tmp_path / 'source'))
        assert error_message(excinfo) == (
            f'Cannot convert mnist in {out}: no space left on the device (0.0 MB free); the '
            'shards written whole are kept: a rerun with room goes on from them')
        assert listing(out) == []  # Nothing partial.
        os.remove(disk / 'filler')
        dataset_factory.convert('mnist', str(out), str(tmp_path / 'source'))
        assert listing(out) == ['labels.txt', 'manifest.json', 'mnist_test.tfrecord',
                                'mnist_train.tfrecord']


def test_mnist_interrupted_conversion_is_completed(tmp_path, monkeypatch):
    expected = make_mnist(tmp_path / 'source')
    out = tmp_path / 'out'
    encode_png = conversion.encode_png
    calls = []

    def failing_encode_png(image):  # Fails on the 2nd image of the test split.
        calls.append(1)
        if len(calls) == len(expected['train'][0]) + 2:
            raise UsageError('interrupted')
        return encode_png(image)
    monkeypatch.setattr(conversion, 'encode_png', failing_encode_png)
    with pytest.raises(UsageError, match='interrupted'):
        mnist.convert(str(out), str(tmp_path / 'source'))
    assert listing(out) == ['mnist_train.tfrecord']  # No partial file, no labels.txt.
    train_mtime = os.stat(out / 'mnist_train.tfrecord').st_mtime_ns

    monkeypatch.setattr(conversion, 'encode_png', encode_png)
    mnist.convert(str(out), str(tmp_path / 'source'))
    assert listing(out) == ['labels.txt', 'manifest.json', 'mnist_test.tfrecord',
                            'mnist_train.tfrecord']
    assert os.stat(out / 'mnist_train.tfrecord').st_mtime_ns == train_mtime
    images, labels = expected['test']
    records = read_split('mnist', 'test', out)
    np.testing.assert_array_equal([image[:, :, 0] for image, _, _ in records], images)
    np.testing.assert_array_equal([label for _, label, _ in records], labels)

    monkeypatch.setattr(mnist, 'read_idx', None)  # A complete dataset reads nothing.
    assert mnist.convert(str(out), str(tmp_path / 'nonexistent')) == str(out)


def _truncate(path):
    path.write_bytes(path.read_bytes()[:-20])


def _wrong_magic(path):
    write_idx(path, 2049, np.zeros((7, 28, 28)))


def _wrong_dims(path):
    write_idx(path, 2051, np.zeros((7, 27, 28)))


def _wrong_count(path):
    write_idx(path, 2051, np.zeros((7, 28, 28)), count=8)


@pytest.mark.parametrize('damage, message', [
    (_truncate, 'not a complete gzip file'),
    (lambda path: path.write_bytes(b'plain text'), 'not a complete gzip file'),
    (_wrong_magic, 'magic number 2049, expected 2051'),
    (_wrong_dims, 'items of shape (27, 28), expected (28, 28)'),
    (_wrong_count, '5488 bytes of data, expected 6272 for the 8 items'),
    (os.remove, 'missing; expected a gzip-compressed MNIST idx file'),
])
def test_mnist_bad_images_file(tmp_path, damage, message):
    make_mnist(tmp_path / 'source')
    bad = tmp_path / 'source' / 'train-images-idx3-ubyte.gz'
    damage(bad)
    with pytest.raises(UsageError) as excinfo:
        mnist.convert(str(tmp_path / 'out'), str(tmp_path / 'source'))
    assert_one_line_error(excinfo, bad, message)
    assert listing(tmp_path / 'out') == []


@pytest.mark.parametrize('labels, message', [
    (np.zeros(6), '6 labels, expected 7'),
    (np.full(7, 10), 'label 10, expected digits 0 to 9'),
])
def test_mnist_bad_labels_file(tmp_path, labels, message):
    make_mnist(tmp_path / 'source')
    bad = tmp_path / 'source' / 'train-labels-idx1-ubyte.gz'
    write_idx(bad, 2049, labels)
    with pytest.raises(UsageError) as excinfo:
        mnist.convert(str(tmp_path / 'out'), str(tmp_path / 'source'))
    assert_one_line_error(excinfo, bad, message)


def test_mnist_source_must_be_a_directory(tmp_path):
    source = tmp_path / 'mnist.tar.gz'
    with pytest.raises(UsageError) as excinfo:
        mnist.convert(str(tmp_path / 'out'), str(source))
    assert str(excinfo.value) == (f"--source '{source}' does not exist; expected the "
                                  "directory holding MNIST's four idx .gz files")
    source.write_bytes(b'')
    with pytest.raises(UsageError) as excinfo:
        mnist.convert(str(tmp_path / 'out'), str(source))
    assert str(excinfo.value) == (f"--source '{source}' is not a directory; expected the "
                                  "directory holding MNIST's four idx .gz files")


def test_a_foreign_labels_file_is_never_replaced(tmp_path):
    make_mnist(tmp_path / 'source')
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'labels.txt').write_text('0:cat\n1:dog\n')
    (out / 'notes.md').write_text('mine')
    with pytest.raises(UsageError) as excinfo:
        mnist.convert(str(out), str(tmp_path / 'source'))
    assert_one_line_error(excinfo, out / 'labels.txt',
                          "exists but is not this dataset's labels file")
    assert listing(out) == ['labels.txt', 'notes.md']
    assert (out / 'labels.txt').read_text() == '0:cat\n1:dog\n'


# CIFAR-10.

def check_cifar(out, expected):
    assert (out / 'labels.txt').read_text() == ''.join(
        f'{i}:{name.decode()}\n' for i, name in enumerate(CIFAR_NAMES))
    for split_name, (images, labels) in expected.items():
        records = read_split('cifar10', split_name, out)
        np.testing.assert_array_equal([image for image, _, _ in records], images)
        assert [label for _, label, _ in records] == labels
        assert {(extra['image/height'], extra['image/width'], extra['image/format'])
                for _, _, extra in records} == {(32, 32, b'png')}


@pytest.mark.parametrize('archive', [True, False])
def test_cifar10_converts_the_archive_or_directory(tmp_path, archive):
    source, expected = make_cifar(tmp_path / 'source', archive=archive)
    out = tmp_path / 'out'
    assert cifar10.convert(str(out), str(source)) == str(out)
    assert listing(out) == ['cifar10_test.tfrecord', 'cifar10_train.tfrecord', 'labels.txt',
                            'manifest.json']
    check_cifar(out, expected)


class _RunsCode:
    def __reduce__(self):
        return print, ('pwned',)


@pytest.mark.parametrize('replace, member, message', [
    ({'data_batch_3': b'garbage'}, 'data_batch_3', 'not a CIFAR-10 pickle'),
    ({'data_batch_3': cifar_pickle({b'data': [_RunsCode()]})}, 'data_batch_3',
     'refusing to load builtins.print'),
    ({'data_batch_3': cifar_pickle([1, 2])}, 'data_batch_3', 'holds a list, expected a dict'),
    ({'data_batch_3': cifar_pickle({b'data': np.zeros((2, 3071), np.uint8),
                                    b'labels': [0, 1]})},
     'data_batch_3', "expected b'data', a uint8 array [N, 3072]"),
    ({'data_batch_3': cifar_pickle({b'data': np.zeros((2, 3072), np.uint8),
                                    b'labels': [0, 10]})},
     'data_batch_3', "expected b'labels', a list of 2 ints (one per image) from 0 to 9"),
    ({'batches.meta': cifar_pickle({b'label_names': CIFAR_NAMES[:9]})}, 'batches.meta',
     "expected b'label_names', a list of 10 class names"),
])
def test_cifar10_bad_members(tmp_path, capsys, replace, member, message):
    source, _ = make_cifar(tmp_path / 'source', replace=replace)
    with pytest.raises(UsageError) as excinfo:
        cifar10.convert(str(tmp_path / 'out'), str(source))
    assert_one_line_error(excinfo, f'{source}:cifar-10-batches-py/{member}', message)
    assert 'pwned' not in capsys.readouterr().out
    assert listing(tmp_path / 'out') == []


def test_cifar10_bad_archives(tmp_path):
    source, _ = make_cifar(tmp_path / 'source')
    source.write_bytes(source.read_bytes()[:-1000])
    with pytest.raises(UsageError) as excinfo:
        cifar10.convert(str(tmp_path / 'out'), str(source))
    assert_one_line_error(excinfo, source, 'not a complete tar.gz archive')

    with tarfile.open(source, 'w:gz'):
        pass
    with pytest.raises(UsageError) as excinfo:
        cifar10.convert(str(tmp_path / 'out'), str(source))
    assert_one_line_error(excinfo, source, 'has no cifar-10-batches-py/batches.meta')

    directory, _ = make_cifar(tmp_path / 'extracted', archive=False)
    os.remove(directory / 'test_batch')
    with pytest.raises(UsageError) as excinfo:
        cifar10.convert(str(tmp_path / 'out'), str(directory))
    assert_one_line_error(excinfo, directory / 'test_batch', 'missing')
    assert listing(tmp_path / 'out') == []

    with pytest.raises(UsageError) as excinfo:
        cifar10.convert(str(tmp_path / 'out'), str(tmp_path / 'nowhere.tar.gz'))
    assert str(excinfo.value) == (
        f"--source '{tmp_path}/nowhere.tar.gz' does not exist; expected "
        "cifar-10-python.tar.gz or its extracted cifar-10-batches-py directory")


def test_cifar10_interrupted_conversion_is_completed(tmp_path):
    source, _ = make_cifar(tmp_path / 'source', replace={'test_batch': b'garbage'})
    out = tmp_path / 'out'
    with pytest.raises(UsageError, match='test_batch'):
        cifar10.convert(str(out), str(source))
    assert listing(out) == ['cifar10_train.tfrecord']
    train_mtime = os.stat(out / 'cifar10_train.tfrecord').st_mtime_ns
    source, expected = make_cifar(tmp_path / 'fixed')
    cifar10.convert(str(out), str(source))
    assert os.stat(out / 'cifar10_train.tfrecord').st_mtime_ns == train_mtime
    check_cifar(out, expected)


# Flowers.

def check_flowers(out, photos, num_validation):
    """The shards hold each photo once, as is, in slim's seeded split."""
    splits = flowers.split_photos(sorted(photos), num_validation)
    for split_name, names in splits.items():
        assert sorted(glob_names(out, f'flowers_{split_name}_*')) == [
            f'flowers_{split_name}_{i:05d}-of-00005.tfrecord' for i in range(5)]
        records = read_split('flowers', split_name, out)
        assert len(records) == len(names)
        for (image, label, extra), name in zip(records, names):
            data, want_label = photos[name]
            assert extra['image/encoded'] == data
            assert extra['image/format'] == b'jpeg'
            assert label == want_label
            assert (extra['image/height'], extra['image/width']) == image.shape[:2]
    assert (out / 'labels.txt').read_text() == (
        '0:daisy\n1:dandelion\n2:roses\n3:sunflowers\n4:tulips\n')


def glob_names(directory, pattern):
    return [path.name for path in directory.glob(pattern)]


@pytest.mark.parametrize('archive', [False, True])
def test_flowers_converts_the_archive_or_directory(tmp_path, archive):
    source, photos = make_flowers(tmp_path / 'source', archive=archive)
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'notes.md').write_text('mine')
    assert flowers.convert(str(out), str(source), num_validation=4) == str(out)
    # 10 shards, labels.txt, manifest.json, notes.md: no temporary files.
    assert len(listing(out)) == 13
    assert (out / 'notes.md').read_text() == 'mine'
    check_flowers(out, photos, 4)


def test_flowers_split_follows_slims_seeded_shuffle():
    photos = [(f'p{i}', i % 5) for i in range(3670)]
    splits = flowers.split_photos(photos)
    assert (len(splits['train']), len(splits['validation'])) == (3320, 350)
    assert sorted(splits['train'] + splits['validation']) == sorted(photos)
    assert splits == flowers.split_photos(list(photos))


@pytest.mark.parametrize('archive', [False, True])
def test_flowers_interrupted_by_a_bad_photo_then_completed(tmp_path, archive):
    root, photos = make_flowers(tmp_path / 'source')
    bad = root / 'roses' / '1.jpg'
    good = bad.read_bytes()
    bad.write_bytes(conversion.encode_png(np.zeros((4, 4, 3))))
    source = pack(root, tmp_path / 'flower_photos.tgz') if archive else root
    out = tmp_path / 'out'
    with pytest.raises(UsageError) as excinfo:
        flowers.convert(str(out), str(source), num_validation=4)
    named = f'{source}:flower_photos/roses/1.jpg' if archive else bad
    assert_one_line_error(excinfo, named, 'not a JPEG image')
    written = listing(out)
    assert 0 < len(written) < 10 and all(name.endswith('.tfrecord') for name in written)
    mtimes = {name: os.stat(out / name).st_mtime_ns for name in written}

    bad.write_bytes(good)
    if archive:
        pack(root, source)
    flowers.convert(str(out), str(source), num_validation=4)
    assert {name: os.stat(out / name).st_mtime_ns for name in written} == mtimes
    check_flowers(out, photos, 4)


def test_flowers_bad_sources(tmp_path):
    source, _ = make_flowers(tmp_path / 'source', per_class=1)
    with pytest.raises(UsageError) as excinfo:
        flowers.convert(str(tmp_path / 'out'), str(source), num_validation=5)
    assert_one_line_error(excinfo, source, '5 photos; expected more than the 5')

    os.rename(source / 'roses', source / 'rose')
    with pytest.raises(UsageError) as excinfo:
        flowers.convert(str(tmp_path / 'out'), str(source), num_validation=1)
    assert_one_line_error(excinfo, source, 'class folders daisy, dandelion, rose, sunflowers')

    archive, _ = make_flowers(tmp_path / 'packed', per_class=1, archive=True)
    archive.write_bytes(archive.read_bytes()[:-500])
    with pytest.raises(UsageError) as excinfo:
        flowers.convert(str(tmp_path / 'out'), str(archive), num_validation=1)
    assert_one_line_error(excinfo, archive, 'not a complete tar archive')
    assert listing(tmp_path / 'out') == []

    with pytest.raises(UsageError) as excinfo:
        flowers.convert(str(tmp_path / 'out'), str(tmp_path / 'flower_photos.tgz'))
    assert str(excinfo.value) == (
        f"--source '{tmp_path}/flower_photos.tgz' does not exist; expected "
        "flower_photos.tgz or its extracted flower_photos directory")


# download_and_convert_data.py.

@pytest.mark.slow
def test_script_converts_a_local_archive(tmp_path):
    source, expected = make_cifar(tmp_path / 'source')
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'notes.md').write_text('mine')
    result = run_script('download_and_convert_data.py', '--dataset_name=cifar10',
                        f'--dataset_dir={out}', f'--source={source}')
    assert result.returncode == 0, result.stderr[-3000:]
    assert f'cifar10: converted into {out}' in result.stdout
    assert listing(out) == ['cifar10_test.tfrecord', 'cifar10_train.tfrecord', 'labels.txt',
                            'manifest.json', 'notes.md']
    check_cifar(out, expected)


@pytest.mark.slow
@pytest.mark.parametrize('problem', ['truncated', 'no_dataset_dir', 'unknown_dataset',
                                     'embedded_source'])
def test_script_errors_are_one_line(tmp_path, problem):
    source, _ = make_cifar(tmp_path / 'source')
    source.write_bytes(source.read_bytes()[:-1000])
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'notes.md').write_text('mine')
    args, message = {
        'truncated': (['--dataset_name=cifar10', f'--dataset_dir={out}', f'--source={source}'],
                      f'{source}: not a complete tar.gz archive ('),
        'no_dataset_dir': (['--dataset_name=cifar10', f'--source={source}'],
                           "--dataset_dir is required for dataset 'cifar10': the directory "
                           "to write its TFRecord files into"),
        'unknown_dataset': (['--dataset_name=bogus', f'--dataset_dir={out}'],
                            "unknown --dataset_name 'bogus'; valid: cifar10, digits, flowers, "
                            "imagenet, mnist, visualwakewords"),
        'embedded_source': (['--dataset_name=digits', f'--dataset_dir={out}',
                             f'--source={source}'],
                            '--source does not apply to digits: it is embedded'),
    }[problem]
    result = run_script('download_and_convert_data.py', *args)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines()  # Not TensorFlow's C++ logs.
              if line.startswith('download_and_convert_data.py: error: ')]
    assert len(errors) == 1 and 'Traceback' not in result.stderr
    error = errors[0].removeprefix('download_and_convert_data.py: error: ')
    assert error.startswith(message) if problem == 'truncated' else error == message
    assert listing(out) == ['notes.md']
