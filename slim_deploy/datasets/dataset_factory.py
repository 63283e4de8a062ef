"""slim's dataset factory: datasets_map and get_dataset(), a tf_slim Dataset of any
dataset's split; and the toolkit's DATASETS, the registry of datasets by --dataset_name, with
get_dataset_split(), the split the toolkit's pipeline reads, and convert().

    dataset = get_dataset('mnist', 'train', '/data/mnist')   # slim's: nothing is checked
    provider = slim.dataset_data_provider.DatasetDataProvider(dataset)

    split = get_dataset_split('digits', 'train', None)      # converts the digits on first use
    records = tf.data.TFRecordDataset(split.files()).map(split.parse)

Every dataset but 'digits' must already be converted into dataset_dir as TFRecord files
of slim's records (download_and_convert_data.py does it), with an optional labels.txt.
Each dataset's module holds its one description, DATASET_INFO (a dataset_utils.DatasetInfo),
and slim's get_split built on it.
"""
import os

from slim_deploy.common import fileio
from slim_deploy.common.errors import UsageError
from slim_deploy.common.registry import Registry
from slim_deploy.datasets import (
    cifar10,
    conversion,
    digits,
    flowers,
    imagenet,
    mnist,
    visualwakewords,
)

# slim's map of dataset names to their modules, plus the toolkit's embedded 'digits'.
datasets_map = {module.DATASET_INFO.name: module
                for module in (cifar10, digits, flowers, imagenet, mnist, visualwakewords)}

DATASETS = Registry('dataset_name', {name: module.DATASET_INFO
                                     for name, module in datasets_map.items()})


def get_info(name):
    """The DatasetInfo of dataset `name` (no files needed); UsageError naming
    --dataset_name and listing the valid names."""
    return DATASETS[name]


def get_dataset(name, split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_dataset: datasets_map[name].get_split(split_name, dataset_dir,
    file_pattern, reader), a tf_slim Dataset for slim's DatasetDataProvider.

    Touches no file but dataset_dir's labels.txt (see DatasetInfo.get_split; ImageNet's
    and the digits' get_split say what they add). An unknown name or split raises
    UsageError (a ValueError, as slim raises) naming the flag and the valid names.
    """
    return datasets_map[DATASETS.check(name)].get_split(split_name, dataset_dir,
                                                        file_pattern, reader)


def get_dataset_split(name, split_name, dataset_dir, file_pattern=None, reader=None):
    """The toolkit's DatasetSplit of a registered dataset, whose files must exist (see
    DatasetInfo.split): dataset_dir None is the digits' default directory (converted there
    on first use) and an error for the others; errors are one-line UsageErrors naming the
    flag at fault."""
    return DATASETS[name].split(split_name, dataset_dir, file_pattern, reader)


def convert(name, dataset_dir, source=None, **options):
    """Converts dataset `name` into dataset_dir from `source` (a local archive or directory;
    None: download it); returns the directory holding the converted dataset ('~'
    expanded). options: the converter's own keyword options. An embedded dataset (no
    converter) is written into dataset_dir, or its default directory if that is None.
    A failed download's message says how to convert a local copy instead; a full disk ends
    it with a StorageError."""
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
    with conversion.offering_source(name), fileio.room_checked(
            dataset_dir, f'convert {name}',
            lambda: 'the shards written whole are kept: a rerun with room goes on from them'):
        entry.convert(dataset_dir, source=os.path.expanduser(source) if source else None,
                      **options)
    return dataset_dir


def run_converter(name, dataset_dir, source=None, downloads=(), **options):
    """slim's download_and_convert_<name>.run(dataset_dir): convert(), then, as slim's
    scripts do, removes the files `downloads` (names inside dataset_dir) that the conversion
    downloaded there (only when source is None). A UsageError (a bad source, a failed
    download) ends the program with its one-line message (SystemExit), as slim's script
    ends, but without a traceback."""
    with conversion.ending_scripts_in_one_line():
        dataset_dir = convert(name, dataset_dir, source, **options)
    if source is None:
        for filename in downloads:
            path = os.path.join(dataset_dir, filename)
            if os.path.isfile(path):
                os.remove(path)
