"""The embedded default dataset: 1,797 8x8 handwritten digits, no download (digits.npz: UCI's
Optical Recognition of Handwritten Digits, E. Alpaydin and C. Kaynak, CC BY 4.0, as
scikit-learn's load_digits gives it; tools/embed_digits.py wrote it).

prepare() converts them once into TFRecord shards of slim's records:
- pixels: the 0..16 values of digits.npz become uint8 round(v * 255 / 16)
  (numpy rounding: 8 -> 127.5 -> 128), stored as 8x8 single-channel PNG;
- split: numpy RandomState(0).permutation(1797); its first 1437 indices are 'train', the
  other 360 'test', in that order across the shards (split_indices() returns them);
- files: the shards 'digits_train_0000i-of-00004.tfrecord' (i = 0..3) and
  'digits_test_0000i-of-00002.tfrecord' (i = 0..1), each a contiguous run of its split's
  order, their manifest.json (see datasets.manifest), and labels.txt with slim's MNIST
  class names, '0:zero' ... '9:nine' (slim's 'size' for 6 spelled 'six').
get_split() gives a split as a tf_slim Dataset, as slim's dataset modules do, converting
the digits first if needed.
"""
import os

import numpy as np

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils

SPLITS_TO_SIZES = {'train': 1437, 'test': 360}
NUM_CLASSES = 10
NUM_SHARDS = {'train': 4, 'test': 2}
FILE_PREFIX = 'digits'
FILE_PATTERN = FILE_PREFIX + '_%s_*.tfrecord'  # A split's shards, '%s' the split name.
CLASS_NAMES = ('zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine')
IMAGE_SIZE = 8
SEED = 0
EMBEDDED = os.path.join(os.path.dirname(__file__), 'digits.npz')


def default_dir():
    """$SLIM_DEPLOY_DATA_DIR/digits, or ~/.cache/slim_deploy/digits without that variable."""
    return os.path.join(
        os.path.expanduser(os.environ.get('SLIM_DEPLOY_DATA_DIR', '~/.cache/slim_deploy')),
        'digits')


def split_indices(split_name):
    """The digits.npz indices of a split's records, in record order (int array)."""
    if split_name not in SPLITS_TO_SIZES:
        raise ValueError(
            f'split_name must be one of {sorted(SPLITS_TO_SIZES)}, got {split_name!r}')
    order = np.random.RandomState(SEED).permutation(sum(SPLITS_TO_SIZES.values()))
    train_size = SPLITS_TO_SIZES['train']
    return order[:train_size] if split_name == 'train' else order[train_size:]


def shard_paths(dataset_dir, split_name):
    """The paths of a split's shards, in order."""
    return conversion.shard_paths(dataset_dir, FILE_PREFIX, split_name, NUM_SHARDS[split_name])


def load_images():
    """All 1,797 digits as (uint8 images [1797, 8, 8] in 0..255, int labels [1797])."""
    with np.load(EMBEDDED) as digits:
        pixels, labels = digits['pixels'].astype(np.float64), digits['labels'].astype(np.int64)
    return np.round(pixels * 255 / 16).astype(np.uint8), labels


def prepare(dataset_dir=None):
    """Converts the digits into dataset_dir unless already there; returns dataset_dir.

    dataset_dir: None means default_dir(); '~' is expanded; it is created if missing. The
    dataset is complete when every shard, the manifest listing them and labels.txt exist;
    otherwise the missing shards are written, then the manifest and labels.txt last (a
    labels.txt with other labels is an error, never replaced). Files are written
    atomically, so an interrupted run leaves at most '*.tmp-<pid>' files, which readers
    ignore, and the next call resumes.
    """
    dataset_dir = default_dir() if dataset_dir is None else os.path.expanduser(dataset_dir)
    if os.path.exists(dataset_dir) and not os.path.isdir(dataset_dir):
        raise UsageError(f'--dataset_dir {dataset_dir!r} is a file, not a directory')
    paths = {split_name: shard_paths(dataset_dir, split_name) for split_name in SPLITS_TO_SIZES}
    if conversion.is_complete(dataset_dir, sum(paths.values(), [])):
        return dataset_dir
    os.makedirs(dataset_dir, exist_ok=True)
    images, labels = load_images()
    with conversion.marked_complete(dataset_dir, dict(enumerate(CLASS_NAMES)),
                                    sum(paths.values(), [])):
        for split_name, split_paths in paths.items():
            indices = split_indices(split_name)
            conversion.write_png_shards(split_paths, images[indices], labels[indices],
                                        f'{FILE_PREFIX} {split_name}')
    return dataset_dir


DATASET_INFO = dataset_utils.DatasetInfo(
    name='digits',
    splits_to_sizes=SPLITS_TO_SIZES,
    num_classes=NUM_CLASSES,
    file_pattern=FILE_PATTERN,
    channels=1,
    items_to_descriptions={'image': 'An 8 x 8 grayscale image of a handwritten digit.',
                           'label': 'The digit, an integer from 0 to 9.'},
    image_shape=(IMAGE_SIZE, IMAGE_SIZE, 1),
    prepare=prepare)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_split: split `split_name` as a tf_slim Dataset (see
    DatasetInfo.get_split), the digits first written into dataset_dir ('' or None:
    default_dir()) if missing; UsageError (a ValueError) for an unknown split."""
    return DATASET_INFO.get_split(split_name, dataset_dir, file_pattern, reader)
