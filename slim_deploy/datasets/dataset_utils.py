"""TFRecord writing helpers, labels.txt files and `DatasetSplit`, one split of a dataset.

Records use TF-Slim's keys: image/encoded (PNG or JPEG bytes), image/format (b'png' or
b'jpeg'), image/class/label (int64), image/height and image/width (int64, pixels).
Every file is written atomically: to '<name>.tmp-<pid>' first, then renamed, so a file
that exists under its final name is complete.
"""
import dataclasses
import glob
import os

import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim's decoder for this TensorFlow)
from slim_deploy.deployment import fileio
from slim_deploy.deployment.errors import UsageError

LABELS_FILENAME = 'labels.txt'

# The record features every split is read with. Slim's Image handler needs image/format
# (only 'raw' changes how it decodes), so it defaults to 'png'; PNG and JPEG are told
# apart by their bytes.
_KEYS_TO_FEATURES = {
    'image/encoded': tf.io.FixedLenFeature([], tf.string),
    'image/format': tf.io.FixedLenFeature([], tf.string, default_value='png'),
    'image/class/label': tf.io.FixedLenFeature([], tf.int64),
}
# Object boxes (imagenet, visualwakewords): relative coordinates, one entry per box.
_BBOX_FEATURES = {
    **{f'image/object/bbox/{side}': tf.io.VarLenFeature(tf.float32)
       for side in ('xmin', 'ymin', 'xmax', 'ymax')},
    'image/object/bbox/label': tf.io.VarLenFeature(tf.int64),
}
# The class's synset id and human-readable name (imagenet).
_CLASS_TEXT_FEATURES = {
    'image/class/synset': tf.io.FixedLenFeature([], tf.string, default_value=''),
    'image/class/text': tf.io.FixedLenFeature([], tf.string, default_value=''),
}


def _as_list(values):
    return list(values) if isinstance(values, (list, tuple)) else [values]


def int64_feature(values):
    """A Feature holding one int or a list/tuple of ints."""
    return tf.train.Feature(int64_list=tf.train.Int64List(value=_as_list(values)))


def bytes_feature(values):
    """A Feature holding one bytes value or a list/tuple of them."""
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=_as_list(values)))


def float_feature(values):
    """A Feature holding one float or a list/tuple of floats."""
    return tf.train.Feature(float_list=tf.train.FloatList(value=_as_list(values)))


def image_to_tfexample(image_data, image_format, height, width, class_id):
    """A tf.train.Example for one encoded image.

    image_data: the encoded image (bytes); image_format: b'png' or b'jpeg';
    height, width: its size in pixels; class_id: its integer label.
    """
    return tf.train.Example(features=tf.train.Features(feature={
        'image/encoded': bytes_feature(image_data),
        'image/format': bytes_feature(image_format),
        'image/class/label': int64_feature(class_id),
        'image/height': int64_feature(height),
        'image/width': int64_feature(width),
    }))


def write_tfrecord(path, serialized_examples):
    """Writes serialized examples (an iterable of bytes) to the TFRecord file path, atomically."""
    with fileio.atomic_path(path) as temp_path:
        with tf.io.TFRecordWriter(temp_path) as writer:
            for serialized in serialized_examples:
                writer.write(serialized)


def shard_filename(dataset_dir, prefix, split_name, shard_id, num_shards):
    """The path of one shard: '<dataset_dir>/<prefix>_<split>_<shard:05d>-of-<num:05d>.tfrecord'.

    shard_id: 0-based, below num_shards.
    """
    if num_shards < 1:
        raise ValueError(f'num_shards must be at least 1, got {num_shards}')
    if not 0 <= shard_id < num_shards:
        raise ValueError(f'shard_id must be in [0, {num_shards}), got {shard_id}')
    return os.path.join(
        dataset_dir, f'{prefix}_{split_name}_{shard_id:05d}-of-{num_shards:05d}.tfrecord')


def write_label_file(labels_to_names, dataset_dir, filename=LABELS_FILENAME):
    """Writes {int label: class name} as 'label:name' lines, sorted by label, atomically."""
    lines = ''.join(f'{label}:{labels_to_names[label]}\n' for label in sorted(labels_to_names))
    fileio.write_atomically(os.path.join(dataset_dir, filename), lines)


def has_labels(dataset_dir, filename=LABELS_FILENAME):
    """Whether dataset_dir holds a labels file."""
    return os.path.isfile(os.path.join(dataset_dir, filename))


def read_label_file(dataset_dir, filename=LABELS_FILENAME):
    """Reads a labels file written by write_label_file: {int label: class name}.

    A file that is not ours (not UTF-8 text, or a line other than 'id:name') raises
    UsageError naming it.
    """
    path = os.path.join(dataset_dir, filename)
    try:
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')  # Universal newlines: '\r\n' and '\r' too.
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; expected 'id:name' lines") from None
    labels_to_names = {}
    for line_number, line in enumerate(lines, start=1):
        if not line:
            continue
        label, colon, name = line.partition(':')
        if not colon or not label.strip().isdigit():
            raise UsageError(
                f"{path}:{line_number}: expected 'id:name' with an integer id, got {line!r}")
        labels_to_names[int(label)] = name
    return labels_to_names


@dataclasses.dataclass(frozen=True)
class DatasetSplit:
    """One split of a dataset, stored as TFRecord files of slim's records.

    file_pattern: absolute glob of the split's files. num_samples: records in the split.
    labels_to_names: {int label: class name} from labels.txt, or None without one.
    items_to_descriptions: {'image': ..., 'label': ...} in words. channels: 1 or 3, the
    channels images decode to. reader: the v1 reader class for as_slim_dataset(); None
    means tf.compat.v1.TFRecordReader. has_bboxes: records carry object boxes;
    has_class_text: records carry the class's synset and human-readable name.
    """
    name: str
    split_name: str
    file_pattern: str
    num_samples: int
    num_classes: int
    labels_to_names: dict | None
    items_to_descriptions: dict
    channels: int
    reader: type | None = None
    has_bboxes: bool = False
    has_class_text: bool = False

    def __post_init__(self):
        if self.channels not in (1, 3):
            raise ValueError(f'channels must be 1 or 3, got {self.channels!r}')

    def files(self):
        """The split's files, sorted; UsageError naming --dataset_dir if there are none."""
        dataset_dir = os.path.dirname(self.file_pattern)
        expected = (f'files matching {os.path.basename(self.file_pattern)!r} for dataset '
                    f'{self.name!r} split {self.split_name!r} '
                    '(create them with download_and_convert_data.py)')
        if not os.path.isdir(dataset_dir):
            raise UsageError(f'--dataset_dir {dataset_dir!r} does not exist; expected {expected}')
        files = sorted(f for f in glob.glob(self.file_pattern) if not fileio.is_temporary(f))
        if not files:
            raise UsageError(f'--dataset_dir {dataset_dir!r} holds no {expected}')
        return files

    @property
    def features(self):
        """The tf.io feature spec of the split's records (for tf.io.parse_example)."""
        return {**_KEYS_TO_FEATURES, **(_BBOX_FEATURES if self.has_bboxes else {}),
                **(_CLASS_TEXT_FEATURES if self.has_class_text else {})}

    def parse(self, serialized):
        """Parses one serialized tf.Example (a string tensor), in a graph or eagerly.

        Returns (image uint8 [height, width, channels], label int64 scalar).
        """
        features = tf.io.parse_single_example(serialized, _KEYS_TO_FEATURES)
        image = tf.io.decode_image(
            features['image/encoded'], channels=self.channels, expand_animations=False)
        return image, features['image/class/label']

    def as_slim_dataset(self):
        """This split as a tf_slim.data.dataset.Dataset with items 'image' and 'label', plus
        'object/bbox' (float32 [boxes, 4]: ymin, xmin, ymax, xmax) and 'object/label' with
        has_bboxes, and 'synset' and 'label_text' with has_class_text.

        Also carries num_classes and labels_to_names, as slim's dataset modules do.
        """
        handlers = slim.tfexample_decoder
        items = {'image': handlers.Image(channels=self.channels),
                 'label': handlers.Tensor('image/class/label')}
        if self.has_bboxes:
            items['object/bbox'] = handlers.BoundingBox(['ymin', 'xmin', 'ymax', 'xmax'],
                                                        'image/object/bbox/')
            items['object/label'] = handlers.Tensor('image/object/bbox/label')
        if self.has_class_text:
            items['synset'] = handlers.Tensor('image/class/synset')
            items['label_text'] = handlers.Tensor('image/class/text')
        decoder = handlers.TFExampleDecoder(self.features, items)
        return slim.dataset.Dataset(
            data_sources=self.files(),
            reader=self.reader or tf.TFRecordReader,
            decoder=decoder,
            num_samples=self.num_samples,
            items_to_descriptions=self.items_to_descriptions,
            num_classes=self.num_classes,
            labels_to_names=self.labels_to_names)
