"""DATASETS, the registry of datasets by --dataset_name, and get_dataset(): a DatasetSplit
of any of them.

    split = get_dataset('digits', 'train', None)      # converts the digits on first use
    dataset = tf.data.TFRecordDataset(split.files()).map(split.parse)

Every dataset but 'digits' must already be converted into dataset_dir as TFRecord files
of slim's records (download_and_convert_data.py does it), with an optional labels.txt.
"""
import dataclasses
import os
from collections.abc import Callable

from slim_deploy.datasets import (cifar10, dataset_utils, digits, flowers, imagenet, mnist,
                                  visualwakewords)
from slim_deploy.deployment import fileio
from slim_deploy.deployment.errors import UsageError
from slim_deploy.deployment.registry import Registry


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A registered dataset: how its records are read, and how it gets converted.

    splits_to_sizes: {split name: records}. file_pattern: the split's file glob inside
    dataset_dir, '%s' standing for the split name. has_bboxes, has_class_text: as in
    DatasetSplit. Exactly one of `convert` and `prepare` is set:
    convert(dataset_dir, source=None, **options): converts the dataset into dataset_dir
    beforehand (download_and_convert_data.py; options as in its CONVERTER_OPTIONS);
    prepare(dataset_dir or None): for an embedded dataset, writes it if needed and returns
    its directory, on first use.
    """
    splits_to_sizes: dict
    num_classes: int
    file_pattern: str
    channels: int
    items_to_descriptions: dict
    convert: Callable[..., str] | None = None
    prepare: Callable[[str | None], str] | None = None
    has_bboxes: bool = False
    has_class_text: bool = False

    def num_samples(self, split_name):
        """Records in split `split_name`; UsageError naming --dataset_split_name and the
        valid splits if there is no such split."""
        if split_name not in self.splits_to_sizes:
            raise UsageError(f'unknown --dataset_split_name {split_name!r}; valid: '
                             f'{", ".join(self.splits_to_sizes)}')
        return self.splits_to_sizes[split_name]


# Each dataset's module owns what its converter writes (splits, sizes, classes, file
# names); this table adds how the records are read.
DATASETS = Registry('dataset_name', {
    'digits': DatasetInfo(
        splits_to_sizes=digits.SPLITS_TO_SIZES,
        num_classes=digits.NUM_CLASSES,
        file_pattern=digits.FILE_PATTERN,
        channels=1,
        items_to_descriptions={'image': 'An 8 x 8 grayscale image of a handwritten digit.',
                               'label': 'The digit, an integer from 0 to 9.'},
        prepare=digits.prepare),
    'mnist': DatasetInfo(
        splits_to_sizes=mnist.SPLITS_TO_SIZES,
        num_classes=mnist.NUM_CLASSES,
        file_pattern=mnist.FILE_PATTERN,
        channels=1,
        items_to_descriptions={'image': 'A 28 x 28 grayscale image of a handwritten digit.',
                               'label': 'The digit, an integer from 0 to 9.'},
        convert=mnist.convert),
    'cifar10': DatasetInfo(
        splits_to_sizes=cifar10.SPLITS_TO_SIZES,
        num_classes=cifar10.NUM_CLASSES,
        file_pattern=cifar10.FILE_PATTERN,
        channels=3,
        items_to_descriptions={'image': 'A 32 x 32 color image.',
                               'label': 'The class, an integer from 0 to 9.'},
        convert=cifar10.convert),
    'flowers': DatasetInfo(
        splits_to_sizes=flowers.SPLITS_TO_SIZES,
        num_classes=flowers.NUM_CLASSES,
        file_pattern=flowers.FILE_PATTERN,
        channels=3,
        items_to_descriptions={'image': 'A color image of varying size.',
                               'label': 'The flower type, an integer from 0 to 4.'},
        convert=flowers.convert),
    'imagenet': DatasetInfo(
        splits_to_sizes=imagenet.SPLITS_TO_SIZES,
        num_classes=imagenet.NUM_CLASSES,
        file_pattern=imagenet.FILE_PATTERN,
        channels=3,
        items_to_descriptions={
            'image': 'A color image of varying size.',
            'label': 'The class, an integer from 1 to 1000; 0 is background.',
            'object/bbox': 'Boxes [ymin, xmin, ymax, xmax] around the objects, relative.',
            'object/label': 'The class of each box.',
            'synset': 'The class\'s WordNet synset id, e.g. n01440764.',
            'label_text': 'The class\'s human-readable name.'},
        convert=imagenet.convert,
        has_bboxes=True, has_class_text=True),
    'visualwakewords': DatasetInfo(
        splits_to_sizes=visualwakewords.SPLITS_TO_SIZES,
        num_classes=visualwakewords.NUM_CLASSES,
        file_pattern=visualwakewords.FILE_PATTERN,
        channels=3,
        items_to_descriptions={
            'image': 'A color image of varying size.',
            'label': '1 if the image shows a person, else 0.',
            'object/bbox': 'Boxes [ymin, xmin, ymax, xmax] around the persons, relative.',
            'object/label': 'The class of each box.'},
        convert=visualwakewords.convert,
        has_bboxes=True),
})


def get_info(name):
    """The DatasetInfo of dataset `name` (no files needed); UsageError naming
    --dataset_name and listing the valid names."""
    return DATASETS[name]


def get_dataset(name, split_name, dataset_dir, file_pattern=None, reader=None):
    """Describes one split of a registered dataset; its files must exist.

    dataset_dir: the directory holding the split's files and labels.txt; None means the
    default directory for the embedded 'digits' (converted there on first use) and is an
    error for the others. file_pattern: replaces the registered glob ('%s' is replaced by
    split_name; relative to dataset_dir unless absolute). reader: the v1 reader class for
    as_slim_dataset(); None means tf.compat.v1.TFRecordReader.
    """
    entry = DATASETS[name]
    num_samples = entry.num_samples(split_name)
    if entry.prepare is not None:
        dataset_dir = entry.prepare(dataset_dir or None)
    elif not dataset_dir:
        raise UsageError(f'--dataset_dir is required for dataset {name!r}: the directory '
                         'holding its TFRecord files (see download_and_convert_data.py)')
    dataset_dir = os.path.expanduser(dataset_dir)
    pattern = (file_pattern or entry.file_pattern).replace('%s', split_name)
    split = dataset_utils.DatasetSplit(
        name=name,
        split_name=split_name,
        file_pattern=os.path.abspath(os.path.join(dataset_dir, pattern)),
        num_samples=num_samples,
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


def convert(name, dataset_dir, source=None, **options):
    """Converts dataset `name` into dataset_dir from `source` (a local archive or directory;
    None: download it); returns the directory holding the converted dataset ('~'
    expanded). options: the converter's own keyword options. An embedded dataset (no
    converter) is written into dataset_dir, or its default directory if that is None."""
    entry = DATASETS[name]
    if entry.convert is None:
        if source:
            raise UsageError(f'--source does not apply to {name}: it is embedded')
        return entry.prepare(dataset_dir or None)
    if not dataset_dir:
        raise UsageError(f'--dataset_dir is required for dataset {name!r}: the directory '
                         'to write its TFRecord files into')
    dataset_dir = os.path.expanduser(dataset_dir)
    fileio.check_writable_dir(dataset_dir, '--dataset_dir')
    entry.convert(dataset_dir, source=os.path.expanduser(source) if source else None,
                  **options)
    return dataset_dir
