"""Flowers: converts flower_photos.tgz into 5 train and 5 validation shards.

The archive's directory 'flower_photos' holds one folder of JPEGs per class (daisy,
dandelion, roses, sunflowers, tulips; label = index in that sorted order). Split as slim
does: the photos (listed in sorted class, then file-name order) are shuffled with
random.Random(0); the first num_validation (350) are 'validation', the rest 'train'.
Shards 'flowers_<split>_0000i-of-00005.tfrecord' hold the JPEG bytes as they are
(format b'jpeg'), with the height and width read from the JPEG header.
DATASET_INFO describes the dataset; get_split() gives a split as a tf_slim Dataset.
"""
import os
import random
import tarfile
import tempfile
import zlib

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils

ARCHIVE = 'flower_photos.tgz'
URL = 'https://storage.googleapis.com/download.tensorflow.org/example_images/' + ARCHIVE
ARCHIVE_DIR = 'flower_photos'
CLASS_NAMES = ('daisy', 'dandelion', 'roses', 'sunflowers', 'tulips')
NUM_CLASSES = len(CLASS_NAMES)
FILE_PREFIX = 'flowers'
FILE_PATTERN = FILE_PREFIX + '_%s_*.tfrecord'  # A split's shards, '%s' the split name.
NUM_SHARDS = 5
NUM_PHOTOS = 3670
NUM_VALIDATION = 350
SEED = 0
SPLITS_TO_SIZES = {'train': NUM_PHOTOS - NUM_VALIDATION, 'validation': NUM_VALIDATION}


def list_photos(photo_dir):
    """The photos of the class folders in photo_dir: [(path, label)], sorted by class, then
    file name. Hidden files are left out; the folders must be exactly CLASS_NAMES."""
    folders = sorted(name for name in os.listdir(photo_dir)
                     if os.path.isdir(os.path.join(photo_dir, name)))
    if folders != list(CLASS_NAMES):
        raise UsageError(
            f'{photo_dir}: class folders {", ".join(folders) or "(none)"}; expected '
            f'{", ".join(CLASS_NAMES)}')
    photos = []
    for label, folder in enumerate(folders):
        for name in sorted(os.listdir(os.path.join(photo_dir, folder))):
            path = os.path.join(photo_dir, folder, name)
            if not name.startswith('.') and os.path.isfile(path):
                photos.append((path, label))
    return photos


def split_photos(photos, num_validation=NUM_VALIDATION):
    """{split name: its photos}: `photos` shuffled with seed 0, the first num_validation
    for 'validation', the others for 'train'."""
    order = list(photos)
    random.Random(SEED).shuffle(order)
    return {'train': order[num_validation:], 'validation': order[:num_validation]}


def _convert_photos(paths, photo_dir, num_validation, describe):
    """Writes the missing shards ({split name: shard paths}) of the photos in photo_dir;
    describe(path) names a photo in errors."""
    photos = list_photos(photo_dir)
    if len(photos) <= num_validation:
        raise UsageError(
            f'{describe(photo_dir)}: {len(photos)} photos; expected more than the '
            f'{num_validation} of the validation split')

    def to_example(photo):
        path, label = photo
        data, height, width = conversion.read_jpeg(path, describe(path))
        return dataset_utils.image_to_tfexample(
            data, b'jpeg', height, width, label).SerializeToString()

    for split_name, split in split_photos(photos, num_validation).items():
        conversion.write_shards(paths[split_name], split, to_example,
                                f'{FILE_PREFIX} {split_name}')


def _extract(archive, directory):
    """Extracts the class folders' files of `archive` into `directory`, in one pass."""
    try:
        with tarfile.open(archive, 'r:*') as tar:
            for member in tar:
                parts = member.name.removeprefix('./').split('/')
                if member.isfile() and len(parts) == 3 and parts[0] == ARCHIVE_DIR:
                    tar.extract(member, directory, filter='data')
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise UsageError(
            f'{archive}: not a complete tar archive ({e}); expected {ARCHIVE}') from None


def convert(dataset_dir, source=None, num_validation=NUM_VALIDATION):
    """Converts the flowers into dataset_dir unless already there; returns dataset_dir.

    source: flower_photos.tgz or its extracted 'flower_photos' directory; None downloads
    the archive into dataset_dir (where it is kept). An archive is extracted into a
    temporary directory inside dataset_dir, removed afterwards. num_validation: photos in
    the validation split (slim: 350 of the 3,670). Existing shards are kept; labels.txt is
    written last.
    """
    if num_validation < 1:
        raise ValueError(f'num_validation must be at least 1, got {num_validation}')
    paths = {split_name: conversion.shard_paths(dataset_dir, FILE_PREFIX, split_name,
                                                NUM_SHARDS) for split_name in SPLITS_TO_SIZES}
    if conversion.is_complete(dataset_dir, sum(paths.values(), [])):
        return dataset_dir
    os.makedirs(dataset_dir, exist_ok=True)
    with conversion.marked_complete(dataset_dir, dict(enumerate(CLASS_NAMES)),
                                    sum(paths.values(), [])):
        if source is None:
            source = conversion.download(URL, dataset_dir)
        if os.path.isdir(source):
            _convert_photos(paths, source, num_validation, lambda path: path)
        else:
            conversion.require_source(source,
                                      f'{ARCHIVE} or its extracted {ARCHIVE_DIR} directory')
            with tempfile.TemporaryDirectory(prefix='.flowers-extract-',
                                             dir=dataset_dir) as temp:
                _extract(source, temp)
                photo_dir = os.path.join(temp, ARCHIVE_DIR)
                os.makedirs(photo_dir, exist_ok=True)  # An archive without it has no folders.
                _convert_photos(paths, photo_dir, num_validation, lambda path: (
                    f'{source}:{os.path.relpath(path, temp)}'))
    return dataset_dir


DATASET_INFO = dataset_utils.DatasetInfo(
    name='flowers',
    splits_to_sizes=SPLITS_TO_SIZES,
    num_classes=NUM_CLASSES,
    file_pattern=FILE_PATTERN,
    channels=3,
    items_to_descriptions={'image': 'A color image of varying size.',
                           'label': 'The flower type, an integer from 0 to 4.'},
    convert=convert)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_split: split `split_name` as a tf_slim Dataset (see
    DatasetInfo.get_split); UsageError (a ValueError) for an unknown split."""
    return DATASET_INFO.get_split(split_name, dataset_dir, file_pattern, reader)
