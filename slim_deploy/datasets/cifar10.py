"""CIFAR-10: converts cifar-10-python.tar.gz into 'cifar10_train.tfrecord' and
'cifar10_test.tfrecord'.

The archive's directory 'cifar-10-batches-py' holds pickled batches: data_batch_1 ... 5
(train, in that order) and test_batch, each a dict with b'data' (uint8 [N, 3072]: the
1024 red, then green, then blue values of a 32 x 32 image, row-major) and b'labels'
(N ints); batches.meta holds b'label_names'. Records hold 32 x 32 RGB PNGs in batch order;
labels.txt lists label_names. Pickles are read with an unpickler that only builds numpy
arrays and plain values, so a foreign file cannot run code.
DATASET_INFO describes the dataset; get_split() gives a split as a tf_slim Dataset.
"""
import io
import os
import pickle
import tarfile
import zlib

import numpy as np

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils

ARCHIVE = 'cifar-10-python.tar.gz'
URL = 'https://www.cs.toronto.edu/~kriz/' + ARCHIVE
ARCHIVE_DIR = 'cifar-10-batches-py'
META = 'batches.meta'
SPLITS_TO_SIZES = {'train': 50000, 'test': 10000}
SPLIT_BATCHES = {'train': tuple(f'data_batch_{i}' for i in range(1, 6)),
                 'test': ('test_batch',)}
FILE_PATTERN = 'cifar10_%s.tfrecord'  # A split's one file, '%s' the split name.
NUM_CLASSES = 10
IMAGE_SIZE = 32
_PIXELS = 3 * IMAGE_SIZE * IMAGE_SIZE
_EXPECTED_SOURCE = f'{ARCHIVE} or its extracted {ARCHIVE_DIR} directory'

_RECONSTRUCT = np.zeros(0).__reduce__()[0]  # numpy's array-unpickling function.


class _BatchUnpickler(pickle.Unpickler):
    """Builds numpy arrays and plain Python values only; any other global is refused."""

    _GLOBALS = {('numpy', 'ndarray'): np.ndarray, ('numpy', 'dtype'): np.dtype,
                ('numpy.core.multiarray', '_reconstruct'): _RECONSTRUCT,
                ('numpy._core.multiarray', '_reconstruct'): _RECONSTRUCT}

    def find_class(self, module, name):
        if (module, name) not in self._GLOBALS:
            raise pickle.UnpicklingError(f'refusing to load {module}.{name}')
        return self._GLOBALS[module, name]


def _unpickle(data, where):
    """The dict pickled (by Python 2) in `data` (bytes); `where` names the file in errors."""
    try:
        value = _BatchUnpickler(io.BytesIO(data), encoding='bytes').load()
    except Exception as e:  # Corrupt pickles raise errors of many types.
        raise UsageError(
            f'{where}: not a CIFAR-10 pickle ({type(e).__name__}: {e})') from None
    if not isinstance(value, dict):
        raise UsageError(
            f'{where}: holds a {type(value).__name__}, expected a dict')
    return value


def _read_members(source, names):
    """The files `names` of cifar-10-batches-py: ({name: bytes}, {name: where}), `where`
    naming the file in errors.

    source: the .tar.gz archive (read in one pass, nothing extracted) or the extracted
    directory.
    """
    if os.path.isdir(source):
        contents, where = {}, {}
        for name in names:
            path = conversion.require_file(os.path.join(source, name),
                                           f'CIFAR-10\'s {name} (source: {_EXPECTED_SOURCE})')
            with open(path, 'rb') as f:
                contents[name] = f.read()
            where[name] = path
        return contents, where
    conversion.require_source(source, _EXPECTED_SOURCE)
    members = {f'{ARCHIVE_DIR}/{name}': name for name in names}
    contents = {}
    try:
        with tarfile.open(source, 'r:gz') as tar:
            for member in tar:
                name = members.get(member.name.removeprefix('./'))
                if name and member.isfile():
                    contents[name] = tar.extractfile(member).read()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise UsageError(
            f'{source}: not a complete tar.gz archive ({e}); expected {ARCHIVE}') from None
    for member, name in members.items():
        if name not in contents:
            raise UsageError(f'{source}: has no {member}; expected {ARCHIVE}')
    return contents, {name: f'{source}:{member}' for member, name in members.items()}


def _label_names(data, where):
    """The class names in batches.meta's bytes `data`."""
    names = _unpickle(data, where).get(b'label_names')
    if (not isinstance(names, list) or not all(isinstance(n, bytes) for n in names)
            or len(names) != NUM_CLASSES):
        raise UsageError(
            f'{where}: expected b\'label_names\', a list of {NUM_CLASSES} class names (bytes)')
    return [name.decode('utf-8') for name in names]


def _batch(data, where, num_classes):
    """(uint8 images [N, 32, 32, 3], int64 labels [N]) of one batch's bytes `data`."""
    batch = _unpickle(data, where)
    images, labels = batch.get(b'data'), batch.get(b'labels')
    if (not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 2
            or images.shape[1] != _PIXELS):
        raise UsageError(
            f'{where}: expected b\'data\', a uint8 array [N, {_PIXELS}]')
    if not isinstance(labels, list) or len(labels) != len(images) or not all(
            isinstance(label, int) and 0 <= label < num_classes for label in labels):
        raise UsageError(
            f'{where}: expected b\'labels\', a list of {len(images)} ints (one per image) '
            f'from 0 to {num_classes - 1}')
    images = images.reshape(-1, 3, IMAGE_SIZE, IMAGE_SIZE).transpose(0, 2, 3, 1)
    return images, np.array(labels, np.int64)


def convert(dataset_dir, source=None):
    """Converts CIFAR-10 into dataset_dir unless already there; returns dataset_dir.

    source: cifar-10-python.tar.gz or its extracted 'cifar-10-batches-py' directory; None
    downloads the archive into dataset_dir (where it is kept). A split whose file exists
    is not converted again; the manifest and labels.txt are written last.
    """
    paths = conversion.split_files(dataset_dir, FILE_PATTERN, SPLITS_TO_SIZES)
    if conversion.is_complete(dataset_dir, paths.values()):
        return dataset_dir
    os.makedirs(dataset_dir, exist_ok=True)
    todo = [split_name for split_name, path in paths.items() if not os.path.exists(path)]
    if todo or not dataset_utils.has_labels(dataset_dir):
        if source is None:
            source = conversion.download(URL, dataset_dir)
        contents, where = _read_members(
            source, [META] + [name for split_name in todo for name in SPLIT_BATCHES[split_name]])
        labels_to_names = dict(enumerate(_label_names(contents.pop(META), where[META])))
    else:  # Converted by an earlier version: only the manifest is missing.
        labels_to_names = dataset_utils.read_label_file(dataset_dir)
    with conversion.marked_complete(dataset_dir, labels_to_names, paths.values()):
        for split_name in todo:
            batches = [_batch(contents.pop(name), where[name], len(labels_to_names))
                       for name in SPLIT_BATCHES[split_name]]
            images, labels = (np.concatenate(parts) for parts in zip(*batches))
            conversion.write_png_shards([paths[split_name]], images, labels,
                                        f'cifar10 {split_name}')
    return dataset_dir


DATASET_INFO = dataset_utils.DatasetInfo(
    name='cifar10',
    splits_to_sizes=SPLITS_TO_SIZES,
    num_classes=NUM_CLASSES,
    file_pattern=FILE_PATTERN,
    channels=3,
    items_to_descriptions={'image': 'A 32 x 32 color image.',
                           'label': 'The class, an integer from 0 to 9.'},
    image_shape=(IMAGE_SIZE, IMAGE_SIZE, 3),
    convert=convert)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_split: split `split_name` as a tf_slim Dataset (see
    DatasetInfo.get_split); UsageError (a ValueError) for an unknown split."""
    return DATASET_INFO.get_split(split_name, dataset_dir, file_pattern, reader)
