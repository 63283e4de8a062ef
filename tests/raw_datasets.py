"""Datasets in the raw formats slim's converters read, written by the tests: MNIST's idx
files, CIFAR-10's pickles and archive, the flowers photos, a miniature ImageNet and COCO 2014
(Visual Wake Words' source) and its zips; the converted ImageNet and Visual Wake Words
files read back (their shards, their records); and a converted shard whose record's image
is replaced (replace_image)."""
import glob
import gzip
import io
import json
import os
import pathlib
import pickle
import shutil
import struct
import tarfile

import numpy as np
import tensorflow as tf

from slim_deploy.datasets import (
    cifar10,
    conversion,
    dataset_factory,
    flowers,
    imagenet,
    mnist,
    visualwakewords,
)

CIFAR_NAMES = [b'airplane', b'automobile', b'bird', b'cat', b'deer', b'dog', b'frog',
               b'horse', b'ship', b'truck']
SYNSETS = ['n00000003', 'n00000001', 'n00000002']  # Labels 1, 2, 3: file order, not sorted.
NAMES = {'n00000001': 'tench, Tinca tinca', 'n00000002': 'goldfish',
         'n00000003': 'great white shark', 'n00000009': 'not in the challenge'}
VALIDATION = ['n00000002', 'n00000003', 'n00000002', 'n00000001']  # Synsets of val 1..4.
BOXES = {'n00000001_1.JPEG': [[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0]],
         'ILSVRC2012_val_00000002.JPEG': [[0.25, 0.5, 0.75, 1.0]]}
PNG_FILE = 'n00000002_2.JPEG'
GRAY_FILE = 'n00000003_1.JPEG'
VWW_SHARDS = {'train': 2, 'val': 1}


def smooth_image(seed, height, width, channels=3):
    """A uint8 image of gentle gradients (JPEG keeps it within a few levels)."""
    rows, cols = np.mgrid[:height, :width]
    planes = [20 + 10 * (seed % 10) + 4 * c + rows * (2 + c) + cols * (3 - c)
              for c in range(channels)]
    return np.stack(planes, axis=-1).astype(np.uint8)


def jpeg(image):
    return tf.io.encode_jpeg(image, quality=95).numpy()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    mode = 'wb' if isinstance(data, bytes) else 'w'
    with open(path, mode) as f:
        f.write(data)


# MNIST.

def write_idx(path, magic, array, count=None):
    """A gzip-compressed idx file of uint8 `array`; count overrides the header's count."""
    header = struct.pack(f'>{1 + array.ndim}I', magic,
                         len(array) if count is None else count, *array.shape[1:])
    with gzip.open(path, 'wb') as f:
        f.write(header + array.astype(np.uint8).tobytes())


def make_mnist(directory, sizes=(('train', 7), ('test', 3))):
    """Writes the four idx .gz files into directory; returns {split: (images, labels)}."""
    rng = np.random.RandomState(1)
    directory.mkdir(exist_ok=True)
    splits = {}
    for split_name, size in sizes:
        images = rng.randint(0, 256, (size, 28, 28)).astype(np.uint8)
        labels = rng.randint(0, 10, size).astype(np.uint8)
        images_file, labels_file = mnist.SPLIT_FILES[split_name]
        write_idx(directory / images_file, 2051, images)
        write_idx(directory / labels_file, 2049, labels)
        splits[split_name] = images, labels
    return splits


# CIFAR-10.

def cifar_pickle(value):
    """Bytes as the CIFAR-10 pickles load: bytes keys, numpy arrays."""
    return pickle.dumps(value, protocol=3)


def make_cifar(directory, train_per_batch=2, test_size=3, archive=True, replace=None):
    """Writes cifar-10-python.tar.gz (or the extracted directory) into directory.

    replace: {member name: bytes} overriding members. Returns (path, {split: (images
    uint8 [N, 32, 32, 3], labels)}).
    """
    rng = np.random.RandomState(2)
    members, expected = {'batches.meta': cifar_pickle({b'label_names': CIFAR_NAMES})}, {}
    for split_name, names, size in (('train', cifar10.SPLIT_BATCHES['train'], train_per_batch),
                                    ('test', ['test_batch'], test_size)):
        all_data, all_labels = [], []
        for name in names:
            data = rng.randint(0, 256, (size, 3072)).astype(np.uint8)
            labels = [int(label) for label in rng.randint(0, 10, size)]
            members[name] = cifar_pickle({b'batch_label': name.encode(), b'data': data,
                                          b'labels': labels})
            all_data.append(data)
            all_labels += labels
        expected[split_name] = (
            np.concatenate(all_data).reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), all_labels)
    members.update(replace or {})
    directory.mkdir(exist_ok=True)
    if not archive:
        (directory / 'cifar-10-batches-py').mkdir()
        for name, data in members.items():
            (directory / 'cifar-10-batches-py' / name).write_bytes(data)
        return directory / 'cifar-10-batches-py', expected
    path = directory / 'cifar-10-python.tar.gz'
    with tarfile.open(path, 'w:gz') as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f'cifar-10-batches-py/{name}')
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path, expected


# Flowers.

def make_flowers(directory, per_class=3, archive=False):
    """Writes flower_photos (or flower_photos.tgz) with per_class JPEGs of varied sizes per
    class; returns (source path, {'flower_photos/<class>/<file>': (bytes, label)})."""
    rng = np.random.RandomState(3)
    photos = {}
    root = directory / 'flower_photos'
    root.mkdir(parents=True)
    (root / 'LICENSE.txt').write_text('license')
    for label, name in enumerate(flowers.CLASS_NAMES):
        (root / name).mkdir()
        (root / name / '.DS_Store').write_bytes(b'\0')
        for i in range(per_class):
            image = rng.randint(0, 256, (8 + i, 5 + label, 3)).astype(np.uint8)
            data = tf.io.encode_jpeg(image).numpy()
            (root / name / f'{i}.jpg').write_bytes(data)
            photos[f'flower_photos/{name}/{i}.jpg'] = data, label
    return (pack(root, directory / 'flower_photos.tgz') if archive else root), photos


def pack(root, path):
    """Writes the directory root as the tar.gz `path`, under 'flower_photos'."""
    with tarfile.open(path, 'w:gz') as tar:
        tar.add(root, 'flower_photos')
    return path


# ImageNet.

def make_imagenet(root):
    """A miniature ImageNet source; returns {file name: (synset, RGB pixels of the file)}."""
    expected = {}
    seed = 0
    for synset, count in zip(SYNSETS, (2, 3, 2)):
        for index in range(1, count + 1):
            name = f'{synset}_{index}.JPEG'
            seed += 1
            image = smooth_image(seed, 6 + index, 9 - index)
            if name == GRAY_FILE:
                data = jpeg(smooth_image(seed, 5, 7, channels=1))
            elif name == PNG_FILE:
                data = conversion.encode_png(image)
            else:
                data = jpeg(image)
            write(os.path.join(root, 'train', synset, name), data)
            expected[name] = (synset, tf.io.decode_image(data, channels=3).numpy())
    for index, synset in enumerate(VALIDATION, start=1):
        name = f'ILSVRC2012_val_{index:08d}.JPEG'
        data = jpeg(smooth_image(index, 8, 5))
        write(os.path.join(root, 'validation', name), data)
        expected[name] = (synset, tf.io.decode_jpeg(data).numpy())
    write(os.path.join(root, 'train', 'n00000009', 'n00000009_1.JPEG'), b'not listed')
    write(os.path.join(root, imagenet.SYNSETS_FILENAME), '\n'.join(SYNSETS) + '\n')
    write(os.path.join(root, imagenet.METADATA_FILENAME),
          ''.join(f'{synset}\t{name}\n' for synset, name in NAMES.items()))
    write(os.path.join(root, imagenet.VALIDATION_LABELS_FILENAME), '\n'.join(VALIDATION))
    write(os.path.join(root, 'boxes.csv'), ''.join(
        f'{name},{",".join(map(str, box))}\n' for name, boxes in BOXES.items()
        for box in boxes))
    return expected


# COCO 2014, Visual Wake Words' source.

def make_coco(root):
    """A miniature COCO 2014; returns {split name: [(file name, label, boxes)]}."""
    categories = [{'id': 1, 'name': 'person', 'supercategory': 'person'},
                  {'id': 3, 'name': 'car', 'supercategory': 'vehicle'}]
    # (file name, height, width, [(category, area, bbox [x, y, w, h], iscrowd)]):
    # the image area is 600, so the threshold 0.005 means an area above 3.
    splits = {
        'train': [('a.jpg', 20, 30, [(1, 150.0, [3, 2, 10, 15], 0), (3, 2.0, [0, 0, 1, 2], 0)]),
                  ('b.jpg', 20, 30, [(1, 2.5, [1, 1, 2, 2], 0), (3, 300.0, [0, 0, 30, 10], 0)]),
                  ('c.jpg', 30, 20, []),
                  ('d.jpg', 20, 30, [(1, 3.0, [5, 5, 2, 2], 0), (1, 3.5, [6, 8, 2, 2], 0)])],
        'val': [('e.jpg', 20, 30, [(1, 90.0, [0, 10, 9, 10], 1)]),
                ('f.jpg', 24, 16, [(3, 100.0, [1, 1, 10, 10], 0)])]}
    expected = {}
    next_id = 1
    for split_name, images in splits.items():
        folder = visualwakewords.SPLITS[split_name]
        coco = {'images': [], 'annotations': [], 'categories': categories}
        expected[split_name] = []
        for index, (file_name, height, width, objects) in enumerate(images):
            image_id = 1000 * index + 7
            coco['images'].append({'id': image_id, 'file_name': file_name, 'height': height,
                                   'width': width, 'license': 1})
            write(os.path.join(root, folder, file_name),
                  jpeg(smooth_image(index, height, width)))
            boxes = []
            for category, area, (x, y, w, h), crowd in objects:
                coco['annotations'].append({'id': next_id, 'image_id': image_id,
                                            'category_id': category, 'area': area,
                                            'bbox': [x, y, w, h], 'iscrowd': crowd})
                next_id += 1
                if category == 1 and area / (height * width) > 0.005:
                    boxes.append([x / width, y / height, (x + w) / width, (y + h) / height])
            expected[split_name].append((file_name, int(bool(boxes)), boxes))
        write(visualwakewords.annotations_path(root, split_name), json.dumps(coco))
    return expected


def coco_zips(coco_source, directory):
    """The three COCO zips of coco_source, written into directory: {convert's URL option:
    its file:// URL}."""
    urls = {}
    for option, folder in (('coco_train_url', 'train2014'), ('coco_validation_url', 'val2014'),
                           ('coco_annotations_url', 'annotations')):
        urls[option] = pathlib.Path(shutil.make_archive(
            str(directory / folder), 'zip', coco_source[0], folder)).as_uri()
    return urls


# The converted files.

IMAGENET_KEYS = {
    'image/filename': tf.io.FixedLenFeature([], tf.string),
    'image/class/synset': tf.io.FixedLenFeature([], tf.string),
    'image/class/text': tf.io.FixedLenFeature([], tf.string),
    'image/format': tf.io.FixedLenFeature([], tf.string),
    'image/colorspace': tf.io.FixedLenFeature([], tf.string),
    'image/channels': tf.io.FixedLenFeature([], tf.int64),
    'image/encoded': tf.io.FixedLenFeature([], tf.string),
    'image/height': tf.io.FixedLenFeature([], tf.int64),
    'image/width': tf.io.FixedLenFeature([], tf.int64),
    **{f'image/object/bbox/{key}': tf.io.VarLenFeature(tf.float32)
       for key in ('xmin', 'ymin', 'xmax', 'ymax')},
    'image/object/bbox/label': tf.io.VarLenFeature(tf.int64),
}


def shard_names(directory):
    return sorted(os.path.basename(path) for path in glob.glob(os.path.join(directory, '*'))
                  if os.path.isfile(path))


def read_split(name, split_name, dataset_dir, keys):
    """[(image, label, {key: value})] of a split, read through the factory and tf.data."""
    split = dataset_factory.get_dataset_split(name, split_name, str(dataset_dir))
    records = []
    for serialized in tf.data.TFRecordDataset(split.files()):
        image, label = split.parse(serialized)
        features = tf.io.parse_single_example(serialized, keys)
        records.append((image.numpy(), int(label), {
            key: (tf.sparse.to_dense(value) if isinstance(value, tf.sparse.SparseTensor)
                  else value).numpy() for key, value in features.items()}))
    return split, records


def replace_image(path, index, encoded):
    """Rewrites the TFRecord shard `path` with record `index`'s image/encoded replaced by the
    bytes `encoded`."""
    records = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    example = tf.train.Example.FromString(records[index])
    example.features.feature['image/encoded'].bytes_list.value[0] = encoded
    records[index] = example.SerializeToString()
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
