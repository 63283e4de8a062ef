"""Converts COCO 2014 into the Visual Wake Words dataset: slim's TFRecord shards.

An image is labelled 1 if it holds an object of the foreground class (default 'person')
whose annotated area (the COCO 'area' field, in pixels) is more than
small_object_area_threshold of the image's height x width, else 0 (slim's rule; crowd
annotations count like any other). Records hold slim's keys (the COCO JPEG byte for byte,
height and width from the annotation's image entry) plus image/object/bbox/{xmin,ymin,
xmax,ymax}: the relative boxes of the objects that made the label 1, and
image/object/bbox/label: 1 for each.
Shards: 'train.record-00000-of-00100' ... from train2014 and 'val.record-00000-of-00010'
... from val2014, each a contiguous run of the annotation file's image order (slim dealt
images round-robin); labels.txt holds '0:background' and '1:<foreground class>'.
visualwakewords_annotations() gives slim's intermediate annotations (which
download_and_convert_visualwakewords_lib writes as JSON) and write_records() the shards.
DATASET_INFO describes the dataset; get_split() gives a split as a tf_slim Dataset.
"""
import json
import os

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils

COCO_TRAIN_URL = 'http://images.cocodataset.org/zips/train2014.zip'
COCO_VALIDATION_URL = 'http://images.cocodataset.org/zips/val2014.zip'
COCO_ANNOTATIONS_URL = 'http://images.cocodataset.org/annotations/annotations_trainval2014.zip'
COCO_URLS = (COCO_TRAIN_URL, COCO_VALIDATION_URL, COCO_ANNOTATIONS_URL)
COCO_DIRNAME = 'coco_dataset'  # Where a download goes, inside dataset_dir.
SPLITS = {'train': 'train2014', 'val': 'val2014'}  # Split name: COCO's image folder.
SPLITS_TO_SIZES = {'train': 82783, 'val': 40504}
NUM_SHARDS = {'train': 100, 'val': 10}
FILE_PATTERN = '%s.record-*'  # A split's shards, '%s' the split name.
NUM_CLASSES = 2  # 0: background, 1: the foreground class.
LABELS_FILENAME = dataset_utils.LABELS_FILENAME


def annotations_path(coco_dir, split_name):
    """The path of a split's COCO instances file inside coco_dir."""
    return os.path.join(coco_dir, 'annotations', f'instances_{SPLITS[split_name]}.json')


def download_coco(coco_dir, urls=COCO_URLS):
    """Downloads the COCO 2014 zips `urls` (train images, val images, annotations) into
    coco_dir and extracts them there, skipping the zips and files already there; returns
    coco_dir."""
    for url in urls:
        dataset_utils.download_and_uncompress_zipfile(url, coco_dir)
    return coco_dir


def read_json(path, what):
    """The JSON value of file `path`; UsageError naming it if it is missing or not JSON.
    what: what the file should hold."""
    conversion.require_file(path, what)
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise UsageError(f'{path}: not valid JSON ({error}); expected {what}') from None


def visualwakewords_annotations(annotations_file, small_object_area_threshold,
                                foreground_class_of_interest):
    """slim's Visual Wake Words annotations of a COCO instances file: {'images': its image
    entries, in order; 'annotations': {image id: {'objects': [{'area', 'bbox'}] (COCO's
    absolute [x, y, width, height]) of the objects that count, 'label': 1 if any, else 0}};
    'categories': {id: category} of foreground_class_of_interest}."""
    coco = read_json(annotations_file, 'a COCO instances JSON file')
    try:
        categories = {category['id']: category for category in coco['categories']
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
    if not categories:
        raise UsageError(
            f'{annotations_file}: no category named {foreground_class_of_interest!r}')
    sizes = {image_id: height * width for image_id, _, height, width in images}
    objects = {image_id: [] for image_id in sizes}
    for image_id, category_id, area, box in annotations:
        if image_id not in sizes or len(box) != 4:
            raise UsageError(
                f'{annotations_file}: annotation of image id {image_id!r} has an unknown '
                f'image id or a bbox other than [x, y, width, height]: {box}')
        if category_id in categories and area / sizes[image_id] > small_object_area_threshold:
            objects[image_id].append({'area': area, 'bbox': box})
    return {'images': coco['images'],
            'annotations': {image_id: {'objects': found, 'label': int(bool(found))}
                            for image_id, found in objects.items()},
            'categories': categories}


def examples(annotations):
    """[(file name, height, width, label, boxes)] of visualwakewords_annotations()'s
    images, in order; boxes: [[xmin, ymin, xmax, ymax]] relative."""
    items = []
    for image in annotations['images']:
        height, width = int(image['height']), int(image['width'])
        found = annotations['annotations'][image['id']]
        boxes = [[x / width, y / height, (x + box_width) / width, (y + box_height) / height]
                 for x, y, box_width, box_height in (o['bbox'] for o in found['objects'])]
        items.append((image['file_name'], height, width, found['label'], boxes))
    return items


def label_images(annotations_file, small_object_area_threshold, foreground_class_of_interest):
    """examples() of the images of a COCO instances file (see
    visualwakewords_annotations)."""
    return examples(visualwakewords_annotations(
        annotations_file, small_object_area_threshold, foreground_class_of_interest))


def write_records(items, image_dir, paths, label, num_workers=None):
    """Writes examples() `items`, whose JPEGs are in image_dir, into the TFRecord shards
    `paths` (see conversion.write_shards; label: the progress bar's)."""
    def to_example(item):
        file_name, height, width, image_label, boxes = item
        path = conversion.require_file(os.path.join(image_dir, file_name), 'a COCO JPEG image')
        data, *shape = conversion.read_jpeg(path)
        if tuple(shape) != (height, width):
            raise UsageError(
                f'{path}: {shape[0]}x{shape[1]} pixels; its annotation says {height}x{width}')
        example = dataset_utils.image_to_tfexample(data, b'jpeg', height, width, image_label)
        conversion.add_boxes(example, boxes, 1)  # The foreground class's label.
        return example.SerializeToString()

    return conversion.write_shards(paths, items, to_example, label, num_workers)


def convert(dataset_dir, source=None, small_object_area_threshold=0.005,
            foreground_class_of_interest='person', num_shards=None, num_workers=None,
            coco_dirname=COCO_DIRNAME, coco_train_url=COCO_TRAIN_URL,
            coco_validation_url=COCO_VALIDATION_URL, coco_annotations_url=COCO_ANNOTATIONS_URL):
    """Converts COCO 2014 into Visual Wake Words shards in dataset_dir; returns dataset_dir.

    source: a directory holding train2014/, val2014/ and annotations/instances_{train,val}
    2014.json; None downloads COCO 2014 (about 19 GB) into dataset_dir/<coco_dirname> from
    the three zips' URLs coco_*_url (download_coco).
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
    with conversion.marked_complete(
            dataset_dir, {0: 'background', 1: foreground_class_of_interest},
            sum(paths.values(), [])):
        if source is None:
            source = download_coco(os.path.join(dataset_dir, coco_dirname), (
                coco_train_url, coco_validation_url, coco_annotations_url))
        conversion.require_source(source, 'a directory holding train2014/, val2014/ and '
                                  'annotations/', directory=True)
        for split_name, folder in SPLITS.items():
            items = label_images(annotations_path(source, split_name),
                                 small_object_area_threshold, foreground_class_of_interest)
            write_records(items, os.path.join(source, folder), paths[split_name],
                          f'visualwakewords {split_name}', num_workers)
    return dataset_dir


DATASET_INFO = dataset_utils.DatasetInfo(
    name='visualwakewords',
    splits_to_sizes=SPLITS_TO_SIZES,
    num_classes=NUM_CLASSES,
    file_pattern=FILE_PATTERN,
    channels=3,
    items_to_descriptions={
        'image': 'A color image of varying size.',
        'label': '1 if the image shows a person, else 0.',
        'object/bbox': 'Boxes [ymin, xmin, ymax, xmax] around the persons, relative.',
        'object/label': 'The class of each box.'},
    convert=convert,
    has_bboxes=True)


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
    """slim's get_split: split `split_name` as a tf_slim Dataset (see
    DatasetInfo.get_split); UsageError (a ValueError) for an unknown split."""
    return DATASET_INFO.get_split(split_name, dataset_dir, file_pattern, reader)
