"""Converts ImageNet (ILSVRC2012) image folders into slim's TFRecord shards.

ImageNet needs an account to download, so convert() takes a local `source` directory:

    source/train/<synset>/*.JPEG     the training images, one folder per synset
    source/validation/*.JPEG         the 50,000 validation images
    source/imagenet_lsvrc_2015_synsets.txt            the 1000 synsets, one per line
    source/imagenet_metadata.txt                      '<synset>\\t<human name>' lines
    source/imagenet_2012_validation_synset_labels.txt the synset of each validation image,
                                                      in sorted file-name order

or, instead of train/ and validation/, the official archives ILSVRC2012_img_train.tar (a
tar of '<synset>.tar' tars) and ILSVRC2012_img_val.tar, read in place without extracting
(the synset list and validation labels ship with TF-Slim's research/slim/datasets,
imagenet_metadata.txt with research/inception; each may also be given by path).
Labels are 1..N in the synset file's order, 0 is 'background'. Records hold slim's keys
plus image/filename (the base name), image/class/synset, image/class/text and
image/object/bbox/{xmin,ymin,xmax,ymax} (relative floats) and image/object/bbox/label
from an optional bounding-box CSV ('file name,xmin,ymin,xmax,ymax' lines, as written
by slim's process_bounding_boxes.py). Images are stored as RGB JPEG: PNG, grayscale and
CMYK files are re-encoded (quality 100), RGB JPEGs are kept byte for byte.
Shards: 'train-00000-of-01024' ... and 'validation-00000-of-00128' ..., each split
shuffled with numpy RandomState(12345); the manifest and labels.txt are written last.
write_splits() also serves slim's build_imagenet_data, whose splits are folders of synset
folders.

For slim's code, get_split() describes a split as a tf_slim Dataset, with the class names
of labels.txt or, without one, downloaded by create_readable_names_for_imagenet_labels().
"""
import dataclasses
import os
import tarfile
import tempfile
import typing

import numpy as np
import tensorflow as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils

SYNSETS_FILENAME = 'imagenet_lsvrc_2015_synsets.txt'
METADATA_FILENAME = 'imagenet_metadata.txt'
VALIDATION_LABELS_FILENAME = 'imagenet_2012_validation_synset_labels.txt'
SPLITS_TO_SIZES = {'train': 1281167, 'validation': 50000}
SPLIT_DIRS = {'train': 'train', 'validation': 'validation'}
FILE_PATTERN = '%s-*'  # A split's shards, '%s' the split name.
NUM_CLASSES = 1001  # 1000 synsets and 'background'.
ARCHIVES = {'train': 'ILSVRC2012_img_train.tar', 'validation': 'ILSVRC2012_img_val.tar'}
SHUFFLE_SEED = 12345
# Whether get_split() downloads the class names when dataset_dir has no labels.txt.
LOAD_READABLE_NAMES = True
# Where create_readable_names_for_imagenet_labels() finds the synset list and metadata.
READABLE_NAMES_URL = ('https://raw.githubusercontent.com/tensorflow/models/master/research/'
                      'slim/datasets/')


def _read_lines(path, what):
    conversion.require_file(path, what)
    with open(path, encoding='utf-8') as f:
        return [line.strip() for line in f if line.strip()]


def read_synsets(path, name=None):
    """The synsets of `path` (one per line, no duplicates), in order; name: what errors
    call the file (None: path)."""
    name = name or path
    synsets = _read_lines(path, f'the list of synsets, one per line ({SYNSETS_FILENAME})')
    if not synsets:
        raise UsageError(f'{name}: empty; expected one synset per line')
    duplicates = sorted({s for s in synsets if synsets.count(s) > 1})
    if duplicates:
        raise UsageError(f'{name}: synset {duplicates[0]!r} listed twice')
    return synsets


def read_metadata(path, synsets, name=None):
    """{synset: human-readable name} for `synsets`, from '<synset>\\t<name>' lines; name:
    what errors call the file (None: path)."""
    name = name or path
    names = {}
    what = f"'<synset>\\t<human name>' lines ({METADATA_FILENAME})"
    for number, line in enumerate(_read_lines(path, what), start=1):
        synset, tab, human = line.partition('\t')
        if not tab:
            raise UsageError(f'{name}:{number}: expected {what}, got {line!r}')
        names[synset] = human.strip()
    missing = [s for s in synsets if s not in names]
    if missing:
        raise UsageError(
            f'{name}: no name for synset {missing[0]!r} ({len(missing)} synsets missing)')
    return {s: names[s] for s in synsets}


def labels_to_names(synsets, synset_names):
    """{label: name}: 0 'background', then 1, 2, ... for `synsets` in order, named by
    synset_names ({synset: human-readable name})."""
    return {0: 'background', **{label: synset_names[synset]
                                for label, synset in enumerate(synsets, start=1)}}


def create_readable_names_for_imagenet_labels(base_url=None):
    """{label: human-readable name} of ImageNet's 1001 classes, 0 being 'background'.

    Downloads, at every call, the synset list and the synsets' names (imagenet_lsvrc_2015_
    synsets.txt and imagenet_metadata.txt) from base_url (None: READABLE_NAMES_URL; a
    file:// URL works). DownloadError naming a URL that cannot be fetched; UsageError
    naming it if it does not hold 1000 synsets, or a name for each.
    """
    base_url = (base_url or READABLE_NAMES_URL).rstrip('/') + '/'
    urls = [base_url + SYNSETS_FILENAME, base_url + METADATA_FILENAME]
    with tempfile.TemporaryDirectory() as directory:
        synsets_file, metadata_file = (dataset_utils.download_url(url, directory)
                                       for url in urls)
        synsets = read_synsets(synsets_file, urls[0])
        if len(synsets) != NUM_CLASSES - 1:
            raise UsageError(f'{urls[0]}: {len(synsets)} synsets; expected {NUM_CLASSES - 1}')
        return labels_to_names(synsets, read_metadata(metadata_file, synsets, urls[1]))


def read_bounding_boxes(path):
    """{image file name: [[xmin, ymin, xmax, ymax] relative floats, ...]} from slim's CSV."""
    boxes = {}
    what = "'file name,xmin,ymin,xmax,ymax' lines (relative coordinates)"
    for number, line in enumerate(_read_lines(path, f'bounding boxes as {what}'), start=1):
        parts = line.split(',')
        try:
            box = [float(part) for part in parts[1:]]
        except ValueError:
            box = []
        if len(parts) != 5 or len(box) != 4:
            raise UsageError(f'{path}:{number}: expected {what}, got {line!r}')
        boxes.setdefault(parts[0].strip(), []).append(box)
    return boxes


class ImageFile(typing.NamedTuple):
    """One source image: a file (offset None) or `size` bytes at `offset` of a tar archive.

    name: what error messages call it (its path, or '<archive>:<member path>').
    """
    name: str
    path: str
    offset: int | None = None
    size: int | None = None

    def read(self):
        """The image file's bytes."""
        with open(self.path, 'rb') as f:
            if self.offset is None:
                return f.read()
            f.seek(self.offset)
            return f.read(self.size)


def _folder_images(directory):
    return [ImageFile(path, path) for path in sorted(
        os.path.join(directory, name) for name in os.listdir(directory)
        if name.endswith('.JPEG'))]


def _tar_images(path, offset=0, fileobj=None, name=None):
    """{member name: ImageFile} of the regular files of the tar archive at `path`, or of
    `fileobj` (an archive member starting at `offset` of `path`, called `name`)."""
    name = name or path
    try:
        with tarfile.open(None if fileobj else path, 'r:', fileobj=fileobj) as tar:
            return {member.name: ImageFile(f'{name}/{member.name}', path,
                                           offset + member.offset_data, member.size)
                    for member in tar if member.isfile()}
    except (tarfile.TarError, EOFError, OSError) as error:
        raise UsageError(
            f'{name}: not a readable tar archive ({error})') from None


def _train_tar_images(path, synsets):
    """[(ImageFile, synset)] from ILSVRC2012_img_train.tar, a tar of '<synset>.tar' tars."""
    outer = _tar_images(path)
    files = []
    with tarfile.open(path, 'r:') as tar:
        for synset in synsets:
            inner = outer.get(f'{synset}.tar')
            if inner is None:
                raise UsageError(
                    f'{path}: holds no {synset}.tar; expected one tar of JPEG images per '
                    'synset')
            images = _tar_images(path, inner.offset, tar.extractfile(f'{synset}.tar'),
                                 f'{path}:{synset}.tar')
            files += [(images[member], synset) for member in sorted(images)
                      if member.endswith('.JPEG')]
    return files


def list_synset_folders(directory, synsets):
    """[(ImageFile, synset)] of the images directory/<synset>/*.JPEG, synset by synset in
    the order of `synsets`, then by file name; UsageError naming a missing synset folder."""
    files = []
    for synset in synsets:
        synset_dir = os.path.join(directory, synset)
        if not os.path.isdir(synset_dir):
            raise UsageError(
                f'{synset_dir}: missing; expected the JPEG images of synset {synset}')
        files += [(image, synset) for image in _folder_images(synset_dir)]
    return files


def _list_split(source, split_name, synsets, validation_labels_file):
    """[(ImageFile, synset)] of a split, in file order (before shuffling)."""
    directory = os.path.join(source, SPLIT_DIRS[split_name])
    archive = os.path.join(source, ARCHIVES[split_name])
    if not os.path.isdir(directory) and not os.path.isfile(archive):
        raise UsageError(
            f'{directory}: missing, and so is {archive}; expected the ImageNet {split_name} '
            'images')
    if split_name == 'train':
        if not os.path.isdir(directory):
            return _train_tar_images(archive, synsets)
        return list_synset_folders(directory, synsets)
    if os.path.isdir(directory):
        images = _folder_images(directory)
    else:
        members = _tar_images(archive)
        images = [members[name] for name in sorted(members) if name.endswith('.JPEG')]
        directory = archive
    labels = _read_lines(validation_labels_file, 'the synset of each validation image, one '
                         f'per line in file-name order ({VALIDATION_LABELS_FILENAME})')
    if len(labels) != len(images):
        raise UsageError(
            f'{validation_labels_file}: {len(labels)} labels for {len(images)} images in '
            f'{directory}; expected one synset per image')
    unknown = [label for label in labels if label not in synsets]
    if unknown:
        raise UsageError(
            f'{validation_labels_file}: synset {unknown[0]!r} is not in the synset list')
    return list(zip(images, labels))


def encode_rgb_jpeg(image):
    """The RGB JPEG bytes, of quality 100, of a uint8 image [height, width, 3] (eager)."""
    return tf.io.encode_jpeg(image, format='rgb', quality=100).numpy()


def rgb_jpeg(data, name):
    """(RGB JPEG bytes, height, width) of the image file bytes `data` (`name` for errors).

    RGB JPEGs are returned as they are; PNG, GIF, BMP, grayscale and CMYK JPEGs are
    re-encoded as RGB JPEG of quality 100.
    """
    try:
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
        is_jpeg = data[:2] == b'\xff\xd8'  # JPEG's start-of-image marker.
        if not is_jpeg or tf.image.extract_jpeg_shape(data)[2] != 3:
            data = encode_rgb_jpeg(image)
    except (tf.errors.InvalidArgumentError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UsageError(
            f'{name}: not a readable image ({reason}); expected a JPEG') from None
    return data, int(image.shape[0]), int(image.shape[1])


def convert(dataset_dir, source, bounding_boxes=None, synsets_file=None, metadata_file=None,
            validation_labels_file=None, train_shards=1024, validation_shards=128,
            num_workers=None):
    """Converts the ImageNet images under `source` into dataset_dir; returns dataset_dir.

    source: the directory described in the module docstring, holding image folders or
    the official tars (required: ImageNet has no anonymous download). bounding_boxes:
    path of slim's bounding-box CSV, or None for no boxes. synsets_file, metadata_file,
    validation_labels_file: paths of those files; None means the file of slim's name
    inside `source`. train_shards, validation_shards: shard counts. num_workers: threads
    writing shards (None: the number of CPUs). Does nothing if every shard and labels.txt exist.
    """
    expected = (f'a directory holding train/<synset>/*.JPEG and validation/*.JPEG, or '
                f'{ARCHIVES["train"]} and {ARCHIVES["validation"]}, and the synset files')
    if source is None:
        raise UsageError(f'ImageNet cannot be downloaded without an account: --source is '
                         f'required, {expected}')
    conversion.require_source(source, expected, directory=True)
    validation_labels_file = (validation_labels_file
                              or os.path.join(source, VALIDATION_LABELS_FILENAME))
    return write_splits(
        dataset_dir,
        lambda split_name, synsets: _list_split(source, split_name, synsets,
                                                validation_labels_file),
        {'validation': validation_shards, 'train': train_shards},
        synsets_file or os.path.join(source, SYNSETS_FILENAME),
        metadata_file or os.path.join(source, METADATA_FILENAME),
        bounding_boxes, num_workers)


def write_splits(dataset_dir, list_split, shard_counts, synsets_file, metadata_file,
                 bounding_boxes=None, num_workers=None):
    """Writes ImageNet splits into dataset_dir as slim's shards, then labels.txt; returns
    dataset_dir. Does nothing if every shard and labels.txt exist.

    list_split(split_name, synsets) -> [(ImageFile, synset)], the split's images in file
    order (they are shuffled with SHUFFLE_SEED). shard_counts: {split name: shards}, in the
    order the splits are written. synsets_file, metadata_file, bounding_boxes: paths of the
    synset list, the synsets' names and slim's bounding-box CSV (None: no boxes).
    num_workers: threads writing shards (None: the number of CPUs).
    """
    paths = {split_name: conversion.slim_shard_paths(dataset_dir, split_name, count)
             for split_name, count in shard_counts.items()}
    if conversion.is_complete(dataset_dir, sum(paths.values(), [])):
        return dataset_dir
    synsets = read_synsets(synsets_file)
    names = read_metadata(metadata_file, synsets)
    labels = {synset: label for label, synset in enumerate(synsets, start=1)}
    os.makedirs(dataset_dir, exist_ok=True)
    with conversion.marked_complete(dataset_dir, labels_to_names(synsets, names),
                                    sum(paths.values(), [])):
        boxes = read_bounding_boxes(bounding_boxes) if bounding_boxes else {}

        def to_example(item):
            image, synset = item
            data, height, width = rgb_jpeg(image.read(), image.name)
            label = labels[synset]
            filename = os.path.basename(image.name)
            example = dataset_utils.image_to_tfexample(data, b'jpeg', height, width, label)
            conversion.add_boxes(example, boxes.get(filename, []), label)
            for key, value in {
                    'image/colorspace': dataset_utils.bytes_feature(b'RGB'),
                    'image/channels': dataset_utils.int64_feature(3),
                    'image/filename': dataset_utils.bytes_feature(filename.encode('utf-8')),
                    'image/class/synset': dataset_utils.bytes_feature(synset.encode()),
                    'image/class/text': dataset_utils.bytes_feature(
                        names[synset].encode('utf-8'))}.items():
                example.features.feature[key].CopyFrom(value)
            return example.SerializeToString()

        for split_name, split_paths in paths.items():
            items = list_split(split_name, synsets)
            order = np.random.RandomState(SHUFFLE_SEED).permutation(len(items))
            conversion.write_shards(split_paths, [items[i] for i in order], to_example,
                                    f'imagenet {split_name}', num_workers)
    return dataset_dir


DATASET_INFO = dataset_utils.DatasetInfo(
    name='imagenet',
    splits_to_sizes=SPLITS_TO_SIZES,
    num_classes=NUM_CLASSES,
    file_pattern=FILE_PATTERN,
    channels=3,
    items_to_descriptions={
        'image': 'A color image of varying size.',
        'label': 'The class, an integer from 1 to 1000; 0 is background.',
        'object/bbox': 'Boxes [ymin, xmin, ymax, xmax] around the objects, relative.',
        'object/label': 'The class of each box.',
        'synset': 'The class\'s WordNet synset id, e.g. n01440764.',
        'label_text': 'The class\'s human-readable name.'},
    convert=convert,
    has_bboxes=True,
    has_class_text=True)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_split: split `split_name` as a tf_slim Dataset (see
    DatasetInfo.get_split); UsageError (a ValueError) for an unknown split.

    Its labels_to_names come from dataset_dir's labels.txt; without one, and with
    LOAD_READABLE_NAMES, they are downloaded (create_readable_names_for_imagenet_labels)
    and, when dataset_dir is an existing directory, written there as labels.txt.
    """
    split = DATASET_INFO.describe(split_name, dataset_dir, file_pattern, reader)
    if LOAD_READABLE_NAMES and split.labels_to_names is None:
        names = create_readable_names_for_imagenet_labels()
        directory = os.path.expanduser(dataset_dir or '')
        if directory and os.path.isdir(directory):
            dataset_utils.write_label_file(names, directory)
        split = dataclasses.replace(split, labels_to_names=names)
    return split.as_slim_dataset(check_files=False)
