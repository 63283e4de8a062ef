"""get_dataset(): a DatasetSplit for any registered dataset, by name.

    split = get_dataset('digits', 'train', None)      # converts the digits on first use
    dataset = tf.data.TFRecordDataset(split.files()).map(split.parse)

Every dataset but 'digits' must already be converted into dataset_dir as TFRecord files
of slim's records (download_and_convert_data.py does it), with an optional labels.txt.
"""
import dataclasses
import os
from collections.abc import Callable

from datasets import dataset_utils, digits


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A registered dataset.

    file_pattern: the split's file glob inside dataset_dir, '%s' standing for the split
    name. prepare: for an embedded dataset, prepare(dataset_dir or None) writes it if
    needed and returns its directory; None for datasets converted beforehand.
    has_bboxes, has_class_text: as in DatasetSplit.
    """
    splits_to_sizes: dict
    num_classes: int
    file_pattern: str
    channels: int
    items_to_descriptions: dict
    prepare: Callable[[str | None], str] | None = None
    has_bboxes: bool = False
    has_class_text: bool = False


_DATASETS = {
    'digits': DatasetInfo(
        splits_to_sizes=digits.SPLITS_TO_SIZES,
        num_classes=digits.NUM_CLASSES,
        file_pattern=digits.FILE_PREFIX + '_%s_*.tfrecord',
        channels=1,
        items_to_descriptions={'image': 'An 8 x 8 grayscale image of a handwritten digit.',
                               'label': 'The digit, an integer from 0 to 9.'},
        prepare=digits.prepare),
    'mnist': DatasetInfo(
        splits_to_sizes={'train': 60000, 'test': 10000},
        num_classes=10,
        file_pattern='mnist_%s.tfrecord',
        channels=1,
        items_to_descriptions={'image': 'A 28 x 28 grayscale image of a handwritten digit.',
                               'label': 'The digit, an integer from 0 to 9.'}),
    'cifar10': DatasetInfo(
        splits_to_sizes={'train': 50000, 'test': 10000},
        num_classes=10,
        file_pattern='cifar10_%s.tfrecord',
        channels=3,
        items_to_descriptions={'image': 'A 32 x 32 color image.',
                               'label': 'The class, an integer from 0 to 9.'}),
    'flowers': DatasetInfo(
        splits_to_sizes={'train': 3320, 'validation': 350},
        num_classes=5,
        file_pattern='flowers_%s_*.tfrecord',
        channels=3,
        items_to_descriptions={'image': 'A color image of varying size.',
                               'label': 'The flower type, an integer from 0 to 4.'}),
    'imagenet': DatasetInfo(
        splits_to_sizes={'train': 1281167, 'validation': 50000},
        num_classes=1001,
        file_pattern='%s-*',
        channels=3,
        items_to_descriptions={
            'image': 'A color image of varying size.',
            'label': 'The class, an integer from 1 to 1000; 0 is background.',
            'object/bbox': 'Boxes [ymin, xmin, ymax, xmax] around the objects, relative.',
            'object/label': 'The class of each box.',
            'synset': 'The class\'s WordNet synset id, e.g. n01440764.',
            'label_text': 'The class\'s human-readable name.'},
        has_bboxes=True, has_class_text=True),
    'visualwakewords': DatasetInfo(
        splits_to_sizes={'train': 82783, 'val': 40504},
        num_classes=2,
        file_pattern='%s.record-*',
        channels=3,
        items_to_descriptions={
            'image': 'A color image of varying size.',
            'label': '1 if the image shows a person, else 0.',
            'object/bbox': 'Boxes [ymin, xmin, ymax, xmax] around the persons, relative.',
            'object/label': 'The class of each box.'},
        has_bboxes=True),
}

DATASET_NAMES = tuple(sorted(_DATASETS))


def get_info(name):
    """The DatasetInfo of dataset `name` (no files needed); ValueError listing valid names."""
    if name not in _DATASETS:
        raise ValueError(f'unknown dataset name {name!r}; valid names: {", ".join(DATASET_NAMES)}')
    return _DATASETS[name]


def get_dataset(name, split_name, dataset_dir, file_pattern=None, reader=None):
    """Describes one split of a registered dataset; its files must exist.

    dataset_dir: the directory holding the split's files and labels.txt; None means the
    default directory for the embedded 'digits' (converted there on first use) and is an
    error for the others. file_pattern: replaces the registered glob ('%s' is replaced by
    split_name; relative to dataset_dir unless absolute). reader: the v1 reader class for
    as_slim_dataset(); None means tf.compat.v1.TFRecordReader.
    """
    entry = get_info(name)
    if split_name not in entry.splits_to_sizes:
        raise ValueError(f'unknown split_name {split_name!r} for dataset {name!r}; '
                         f'valid splits: {", ".join(entry.splits_to_sizes)}')
    if entry.prepare is not None:
        dataset_dir = entry.prepare(dataset_dir or None)
    elif not dataset_dir:
        raise ValueError(f'dataset_dir is required for dataset {name!r}: the directory '
                         'holding its TFRecord files (see download_and_convert_data.py)')
    dataset_dir = os.path.expanduser(dataset_dir)
    pattern = (file_pattern or entry.file_pattern).replace('%s', split_name)
    split = dataset_utils.DatasetSplit(
        name=name,
        split_name=split_name,
        file_pattern=os.path.abspath(os.path.join(dataset_dir, pattern)),
        num_samples=entry.splits_to_sizes[split_name],
        num_classes=entry.num_classes,
        labels_to_names=(dataset_utils.read_label_file(dataset_dir)
                         if dataset_utils.has_labels(dataset_dir) else None),
        items_to_descriptions=entry.items_to_descriptions,
        channels=entry.channels,
        reader=reader,
        has_bboxes=entry.has_bboxes,
        has_class_text=entry.has_class_text)
    split.files()  # Fails now, with the directory and pattern, if the split has no files.
    return split
