"""MNIST: converts the four idx files into 'mnist_train.tfrecord' and 'mnist_test.tfrecord'.

Records hold the 28 x 28 digits as single-channel PNGs, in the files' order; labels.txt
reads '0:zero' ... '9:nine'. An idx file (gzip-compressed) is big-endian: int32 magic
(2051 images, 2049 labels), int32 count, for images int32 rows and columns, then one
uint8 per pixel (row-major) or per label.
DATASET_INFO describes the dataset; get_split() gives a split as a tf_slim Dataset.
"""
import gzip
import os
import struct
import zlib

import numpy as np

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils, digits

URL = 'https://storage.googleapis.com/cvdf-datasets/mnist/'
SPLITS_TO_SIZES = {'train': 60000, 'test': 10000}
SPLIT_FILES = {'train': ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
               'test': ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz')}
FILE_PATTERN = 'mnist_%s.tfrecord'  # A split's one file, '%s' the split name.
IMAGES_MAGIC = 2051
LABELS_MAGIC = 2049
IMAGE_SIZE = 28
CLASS_NAMES = digits.CLASS_NAMES  # Slim's MNIST names, '0:zero' ... '9:nine'.
NUM_CLASSES = len(CLASS_NAMES)


def read_idx(path, magic, dims):
    """The items of the gzip-compressed idx file `path`: uint8 [count, *dims].

    magic: the expected magic number; dims: the expected item shape, () for labels.
    """
    conversion.require_file(path, 'a gzip-compressed MNIST idx file')
    try:
        with gzip.open(path, 'rb') as f:
            data = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise UsageError(
            f'{path}: not a complete gzip file ({e}); expected MNIST idx data') from None
    header_size = 4 * (2 + len(dims))
    if len(data) < header_size:
        raise UsageError(
            f'{path}: {len(data)} bytes, too short for the {header_size}-byte idx header')
    found_magic, count, *found_dims = struct.unpack(f'>{2 + len(dims)}I', data[:header_size])
    if found_magic != magic:
        raise UsageError(
            f'{path}: magic number {found_magic}, expected {magic} (MNIST '
            f'{"images" if dims else "labels"})')
    if tuple(found_dims) != tuple(dims):
        raise UsageError(
            f'{path}: items of shape {tuple(found_dims)}, expected {tuple(dims)}')
    expected = count * int(np.prod(dims, dtype=np.int64))
    if len(data) - header_size != expected:
        raise UsageError(
            f'{path}: {len(data) - header_size} bytes of data, expected {expected} for the '
            f'{count} items its header announces')
    return np.frombuffer(data, np.uint8, offset=header_size).reshape(count, *dims)


def _source_file(dataset_dir, source, filename):
    """The path of one idx file: downloaded into dataset_dir if source is None."""
    if source is None:
        return conversion.download(URL + filename, dataset_dir)
    conversion.require_source(source, 'the directory holding MNIST\'s four idx .gz files',
                              directory=True)
    return os.path.join(source, filename)


def _read_split(dataset_dir, source, split_name):
    """(uint8 images [count, 28, 28], uint8 labels [count]) of one split, validated."""
    images_file, labels_file = (_source_file(dataset_dir, source, filename)
                                for filename in SPLIT_FILES[split_name])
    images = read_idx(images_file, IMAGES_MAGIC, (IMAGE_SIZE, IMAGE_SIZE))
    labels = read_idx(labels_file, LABELS_MAGIC, ())
    if len(labels) != len(images):
        raise UsageError(
            f'{labels_file}: {len(labels)} labels, expected {len(images)} as in {images_file}')
    if len(labels) and labels.max() >= NUM_CLASSES:
        raise UsageError(
            f'{labels_file}: label {labels.max()}, expected digits 0 to 9')
    return images, labels


def convert(dataset_dir, source=None):
    """Converts MNIST into dataset_dir unless already there; returns dataset_dir.

    source: the directory holding the four idx .gz files; None downloads them into
    dataset_dir (where they are kept). A split whose file exists is not converted again;
    the manifest and labels.txt are written last.
    """
    paths = conversion.split_files(dataset_dir, FILE_PATTERN, SPLITS_TO_SIZES)
    if conversion.is_complete(dataset_dir, paths.values()):
        return dataset_dir
    os.makedirs(dataset_dir, exist_ok=True)
    with conversion.marked_complete(dataset_dir, dict(enumerate(CLASS_NAMES)),
                                    paths.values()):
        for split_name, path in paths.items():
            if not os.path.exists(path):
                images, labels = _read_split(dataset_dir, source, split_name)
                conversion.write_png_shards([path], images, labels, f'mnist {split_name}')
    return dataset_dir


DATASET_INFO = dataset_utils.DatasetInfo(
    name='mnist',
    splits_to_sizes=SPLITS_TO_SIZES,
    num_classes=NUM_CLASSES,
    file_pattern=FILE_PATTERN,
    channels=1,
    items_to_descriptions={'image': 'A 28 x 28 grayscale image of a handwritten digit.',
                           'label': 'The digit, an integer from 0 to 9.'},
    image_shape=(IMAGE_SIZE, IMAGE_SIZE, 1),
    convert=convert)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_split: split `split_name` as a tf_slim Dataset (see
    DatasetInfo.get_split); UsageError (a ValueError) for an unknown split."""
    return DATASET_INFO.get_split(split_name, dataset_dir, file_pattern, reader)
