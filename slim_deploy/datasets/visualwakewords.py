"""Converts COCO 2014 into the Visual Wake Words dataset: slim's TFRecord shards.

An image is labelled 1 if it holds an object of the foreground class (default 'person')
whose annotated area (the COCO 'area' field, in pixels) is more than
small_object_area_threshold of the image's height x width, else 0 (slim's rule; crowd
annotations count like any other). Records hold slim's keys (the COCO JPEG byte for byte,
height and width from the annotation's image entry) plus image/object/bbox/{xmin,ymin,
xmax,ymax}: the relative boxes of the objects that made the label 1.
Shards: 'train.record-00000-of-00100' ... from train2014 and 'val.record-00000-of-00010'
... from val2014, each a contiguous run of the annotation file's image order (slim dealt
images round-robin); labels.txt holds '0:background' and '1:<foreground class>'.
"""
import json
import os
import shutil
import zipfile

from slim_deploy.datasets import conversion, dataset_utils
from slim_deploy.deployment.errors import UsageError

COCO_URLS = ('http://images.cocodataset.org/zips/train2014.zip',
             'http://images.cocodataset.org/zips/val2014.zip',
             'http://images.cocodataset.org/annotations/annotations_trainval2014.zip')
COCO_DIRNAME = 'coco_dataset'
SPLITS = {'train': 'train2014', 'val': 'val2014'}  # Split name: COCO's image folder.
SPLITS_TO_SIZES = {'train': 82783, 'val': 40504}
NUM_SHARDS = {'train': 100, 'val': 10}
FILE_PATTERN = '%s.record-*'  # A split's shards, '%s' the split name.
NUM_CLASSES = 2  # 0: background, 1: the foreground class.


def annotations_path(coco_dir, split_name):
    """The path of a split's COCO instances file inside coco_dir."""
    return os.path.join(coco_dir, 'annotations', f'instances_{SPLITS[split_name]}.json')


def download_coco(dataset_dir):
    """Downloads and extracts COCO 2014 into <dataset_dir>/coco_dataset (skipping the parts
    already there); returns that directory."""
    coco_dir = os.path.join(dataset_dir, COCO_DIRNAME)
    for url, folder in zip(COCO_URLS, ('train2014', 'val2014', 'annotations')):
        if os.path.isdir(os.path.join(coco_dir, folder)):
            continue
        archive = conversion.download(url, coco_dir)
        temp_dir = os.path.join(coco_dir, f'{folder}.tmp-{os.getpid()}')
        try:
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(temp_dir)
        except (zipfile.BadZipFile, EOFError) as error:
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise UsageError(
                f'{archive}: not a readable zip archive ({error}); delete it to download '
                'it again') from None
        os.replace(os.path.join(temp_dir, folder), os.path.join(coco_dir, folder))
        shutil.rmtree(temp_dir)
    return coco_dir


def label_images(annotations_file, small_object_area_threshold, foreground_class_of_interest):
    """[(file name, height, width, label, boxes)] for the images of a COCO instances file,
    in its order; boxes: [[xmin, ymin, xmax, ymax]] relative, of the objects that count."""
    conversion.require_file(annotations_file, 'a COCO instances JSON file')
    try:
        with open(annotations_file, encoding='utf-8') as f:
            coco = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise UsageError(
            f'{annotations_file}: not valid JSON ({error}); expected COCO instances') from None
    try:
        category_ids = {category['id'] for category in coco['categories']
                        if category['name'] == foreground_class_of_interest}
        images = [(image['id'], image['file_name'], int(image['height']),
                   int(image['width'])) for image in coco['images']]
        annotations = [(a['image_id'], a['category_id'], float(a['area']),
                        [float(v) for v in a['bbox']]) for a in coco['annotations']]
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(
            f'{annotations_file}: missing or malformed field ({type(error).__name__}: '
            f'{error}); expected COCO instances with images, annotations and '
            'categories') from None
    if not category_ids:
        raise UsageError(
            f'{annotations_file}: no category named {foreground_class_of_interest!r}')
    sizes = {image_id: (height, width) for image_id, _, height, width in images}
    boxes = {image_id: [] for image_id in sizes}
    for image_id, category_id, area, box in annotations:
        if image_id not in sizes or len(box) != 4:
            raise UsageError(
                f'{annotations_file}: annotation of image id {image_id!r} has an unknown '
                f'image id or a bbox other than [x, y, width, height]: {box}')
        x, y, box_width, box_height = box
        height, width = sizes[image_id]
        if category_id in category_ids and area / (height * width) > small_object_area_threshold:
            boxes[image_id].append([x / width, y / height, (x + box_width) / width,
                                    (y + box_height) / height])
    return [(file_name, height, width, int(bool(boxes[image_id])), boxes[image_id])
            for image_id, file_name, height, width in images]


def convert(dataset_dir, source=None, small_object_area_threshold=0.005,
            foreground_class_of_interest='person', num_shards=None, num_workers=None):
    """Converts COCO 2014 into Visual Wake Words shards in dataset_dir; returns dataset_dir.

    source: a directory holding train2014/, val2014/ and annotations/instances_{train,val}
    2014.json; None downloads COCO 2014 (about 19 GB) into dataset_dir/coco_dataset.
    small_object_area_threshold: the fraction of the image area an object must exceed.
    num_shards: {split name: shard count}; None means slim's {'train': 100, 'val': 10}.
    num_workers: threads writing shards (None: the number of CPUs).
    Does nothing if every shard and labels.txt exist.
    """
    num_shards = num_shards or NUM_SHARDS
    paths = {split_name: conversion.slim_shard_paths(dataset_dir, f'{split_name}.record',
                                                     num_shards[split_name])
             for split_name in SPLITS}
    if conversion.is_complete(dataset_dir, sum(paths.values(), [])):
        return dataset_dir
    os.makedirs(dataset_dir, exist_ok=True)
    with conversion.labels_written_last(
            dataset_dir, {0: 'background', 1: foreground_class_of_interest}):
        if source is None:
            source = download_coco(dataset_dir)
        _write_splits(paths, source, small_object_area_threshold, foreground_class_of_interest,
                      num_workers)
    return dataset_dir


def _write_splits(paths, source, small_object_area_threshold, foreground_class_of_interest,
                  num_workers):
    """Writes the missing shards ({split name: shard paths}); the rest are convert()'s
    arguments."""
    conversion.require_source(source, 'a directory holding train2014/, val2014/ and '
                              'annotations/', directory=True)
    for split_name, folder in SPLITS.items():
        image_dir = os.path.join(source, folder)
        items = label_images(annotations_path(source, split_name),
                             small_object_area_threshold, foreground_class_of_interest)

        def to_example(item, image_dir=image_dir):
            file_name, height, width, label, boxes = item
            path = conversion.require_file(os.path.join(image_dir, file_name),
                                           'a COCO JPEG image')
            data, *shape = conversion.read_jpeg(path)
            if tuple(shape) != (height, width):
                raise UsageError(
                    f'{path}: {shape[0]}x{shape[1]} pixels; its annotation says '
                    f'{height}x{width}')
            example = dataset_utils.image_to_tfexample(data, b'jpeg', height, width, label)
            conversion.add_boxes(example, boxes)
            return example.SerializeToString()

        conversion.write_shards(paths[split_name], items, to_example,
                                f'visualwakewords {split_name}', num_workers)
