"""Machinery shared by the dataset converters: sharded, atomic, resumable, parallel writes.

A converter names its shard files (shard_paths(), slim_shard_paths() or split_files()),
returns at once if is_complete(), lists its examples (cheap descriptions: file paths,
array indices), then, inside marked_complete(), write_shards() turns them into TFRecord
shards: each shard is written by one worker thread to a temporary name and renamed when
whole, so a shard file that exists is complete and a rerun skips it; the shards' manifest
(manifest.json: records, size and checksum of each) and labels.txt come last, so they mark
a complete conversion. Bad input (a missing, corrupt or foreign file) raises UsageError
naming the file.
"""
import concurrent.futures
import contextlib
import os
import struct
import zlib

import numpy as np
import tensorflow as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_utils, manifest


def shard_paths(dataset_dir, prefix, split_name, num_shards):
    """The paths '<prefix>_<split_name>_00000-of-<num_shards:05d>.tfrecord' ... in order."""
    return [dataset_utils.shard_filename(dataset_dir, prefix, split_name, shard, num_shards)
            for shard in range(num_shards)]


def slim_shard_paths(dataset_dir, base, num_shards):
    """The paths '<dataset_dir>/<base>-00000-of-<num_shards:05d>' ..., in order."""
    return dataset_utils.sharded_paths(os.path.join(dataset_dir, base), num_shards)


def split_files(dataset_dir, file_pattern, split_names):
    """{split name: its one record file, dataset_dir/(file_pattern % split name)}."""
    return {split_name: os.path.join(dataset_dir, file_pattern % split_name)
            for split_name in split_names}


def is_complete(dataset_dir, paths):
    """Whether every path in `paths` exists and is in dataset_dir's manifest, and
    dataset_dir's labels.txt exists."""
    return (dataset_utils.has_labels(dataset_dir) and all(map(os.path.isfile, paths))
            and manifest.lists(dataset_dir, paths))


@contextlib.contextmanager
def marked_complete(dataset_dir, labels_to_names, paths):
    """Runs the block (writing the shards `paths`), then records them in dataset_dir's
    manifest (manifest.write) and writes labels.txt, each atomically.

    First raises UsageError naming dataset_dir's labels.txt if it exists with labels
    other than labels_to_names ({int label: class name}): a foreign file is never replaced.
    """
    path = os.path.join(dataset_dir, dataset_utils.LABELS_FILENAME)
    if os.path.lexists(path):
        try:
            existing = dataset_utils.read_label_file(dataset_dir)
        except (UsageError, OSError):
            existing = None
        if existing != labels_to_names:
            raise UsageError(
                f'{path}: exists but is not this dataset\'s labels file; move it away')
    yield
    manifest.write(dataset_dir, paths)
    dataset_utils.write_label_file(labels_to_names, dataset_dir)


def write_shards(paths, items, to_example, label, num_workers=None):
    """Writes `items` into the TFRecord shards `paths`; returns paths.

    items: a sequence; shard i holds np.array_split(items, len(paths))[i], in order.
    to_example(item) -> serialized tf.train.Example (bytes); it may raise UsageError.
    Shards whose file already exists are complete and are skipped. label: the progress
    bar's. num_workers: threads writing shards at once (None: the number of CPUs).
    """
    bounds = np.cumsum([0] + [len(part) for part in np.array_split(np.arange(len(items)),
                                                                   len(paths))])
    todo = [shard for shard, path in enumerate(paths) if not os.path.exists(path)]

    def write(shard, progress):
        def examples():
            for item in items[bounds[shard]:bounds[shard + 1]]:
                yield to_example(item)
                progress.advance()
        dataset_utils.write_tfrecord(paths[shard], examples())

    total = sum(int(bounds[s + 1] - bounds[s]) for s in todo)
    with dataset_utils.Progress(label, total) as progress, \
            concurrent.futures.ThreadPoolExecutor(num_workers or os.cpu_count()) as pool:
        for future in [pool.submit(write, shard, progress) for shard in todo]:
            future.result()  # Re-raises the first worker error.
    return paths


def write_png_shards(paths, images, labels, label, num_workers=None):
    """write_shards() of uint8 images [N, height, width(, 1 or 3)] as PNG records with the
    int labels [N]."""
    height, width = images.shape[1:3]

    def to_example(index):
        return dataset_utils.image_to_tfexample(
            encode_png(images[index]), b'png', height, width,
            int(labels[index])).SerializeToString()
    return write_shards(paths, range(len(images)), to_example, label, num_workers)


def read_jpeg(path, name=None):
    """(bytes, height, width) of the JPEG file `path`; name: what errors call it (the path
    if None)."""
    with open(path, 'rb') as f:
        data = f.read()
    try:
        height, width, _ = tf.io.extract_jpeg_shape(data).numpy()
    except tf.errors.InvalidArgumentError:
        raise UsageError(f'{name or path}: not a JPEG image') from None
    return data, int(height), int(width)


def add_boxes(example, boxes, label):
    """Adds boxes [[xmin, ymin, xmax, ymax] relative, ...] of class `label` (int) to the
    tf.train.Example `example`: the float lists image/object/bbox/{xmin,ymin,xmax,ymax} and
    the int list image/object/bbox/label (`label` once per box)."""
    columns = np.reshape(boxes, (-1, 4)).T.tolist()
    feature = example.features.feature
    for key, values in zip(('xmin', 'ymin', 'xmax', 'ymax'), columns):
        feature[f'image/object/bbox/{key}'].CopyFrom(dataset_utils.float_feature(values))
    feature['image/object/bbox/label'].CopyFrom(dataset_utils.int64_feature([label] * len(boxes)))


def encode_png(image):
    """PNG bytes of a uint8 image [height, width] or [height, width, 1 or 3] (pure Python)."""
    image = np.asarray(image, np.uint8)
    height, width = image.shape[:2]
    channels = image.shape[2] if image.ndim == 3 else 1
    color_type = {1: 0, 3: 2}[channels]  # PNG: 0 grayscale, 2 RGB.
    rows = image.reshape(height, width * channels)
    scanlines = b''.join(b'\x00' + row.tobytes() for row in rows)  # Filter 0: none.

    def chunk(kind, data):
        return (struct.pack('>I', len(data)) + kind + data
                + struct.pack('>I', zlib.crc32(kind + data)))

    header = struct.pack('>IIBBBBB', width, height, 8, color_type, 0, 0, 0)
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header)
            + chunk(b'IDAT', zlib.compress(scanlines, 6)) + chunk(b'IEND', b''))


def download(url, directory):
    """Downloads `url` into `directory` unless its file is already there; returns the file's
    path (see dataset_utils.download_url)."""
    path = os.path.join(directory, url.split('/')[-1])
    return path if os.path.exists(path) else dataset_utils.download_url(url, directory)


@contextlib.contextmanager
def offering_source(dataset_name):
    """Adds to a failed download's one-line message (a DownloadError in the block) how to
    convert a local copy of dataset `dataset_name` instead."""
    try:
        yield
    except dataset_utils.DownloadError as error:
        raise UsageError(
            f'{error}; without network, convert a local copy: download_and_convert_data '
            f'--dataset_name={dataset_name} --dataset_dir=DIR --source=PATH') from None


@contextlib.contextmanager
def ending_scripts_in_one_line():
    """For slim's script-level functions (download_and_convert_*.run, build_imagenet_data's
    main): a UsageError in the block ends the program with its one-line message, as
    SystemExit does, instead of a traceback; other errors keep theirs."""
    try:
        yield
    except UsageError as error:
        raise SystemExit(' '.join(str(error).split())) from None


def require_file(path, what):
    """Raises UsageError naming `path` unless it is an existing file."""
    if not os.path.isfile(path):
        raise UsageError(f'{path}: missing; expected {what}')
    return path


def require_source(source, what, directory=False):
    """Returns `source`, the --source path; UsageError naming the flag unless it exists
    (and, with `directory`, is a directory). what: what --source should be."""
    if not os.path.exists(source):
        raise UsageError(f'--source {source!r} does not exist; expected {what}')
    if directory and not os.path.isdir(source):
        raise UsageError(f'--source {source!r} is not a directory; expected {what}')
    return source
