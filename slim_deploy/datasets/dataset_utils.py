"""slim's dataset utilities (TFRecord features and examples, labels.txt files, downloads)
and the descriptions the toolkit builds on them: `DatasetInfo`, what a dataset is, and
`DatasetSplit`, one split of it.

Records use TF-Slim's keys: image/encoded (PNG or JPEG bytes), image/format (b'png' or
b'jpeg'), image/class/label (int64), image/height and image/width (int64, pixels).
Every file is written atomically: to '<name>.tmp-<pid>' first, then renamed, so a file
that exists under its final name is complete. A failed download raises DownloadError, one
line naming the URL.
"""
from collections.abc import Callable
import contextlib
import dataclasses
import glob
import http.client
import math
import os
import shutil
import sys
import tarfile
import threading
import time
import urllib.request
import zipfile
import zlib

from absl import logging
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim's decoder for this TensorFlow)
from slim_deploy.common import fileio
from slim_deploy.common.errors import UsageError

LABELS_FILENAME = 'labels.txt'
DOWNLOAD_TIMEOUT = 60  # Seconds a download may stall (connecting or between reads).

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


class DownloadError(UsageError):
    """A URL could not be downloaded (no network, a refused connection, an HTTP error); the
    message is one line naming the URL."""


class Progress:
    """Progress towards `total` steps, as a context manager around the work.

    On a terminal `stream` (None: sys.stderr) it draws 'label [#####.....] done/total' in
    place and ends the line on exit; elsewhere (a pipe, a log file) it logs one line,
    'label: done/total done', when the block completes without an error.
    """

    def __init__(self, label, total, stream=None, width=30):
        self._label, self._total, self._width = label, total, width
        self._stream = stream or sys.stderr
        self._in_place = self._stream.isatty()
        self._done = 0
        self._last_draw = 0.0
        self._lock = threading.Lock()

    def __enter__(self):
        if self._in_place:
            self._draw()
        return self

    def __exit__(self, error_type, error, traceback):
        if self._in_place:
            self._draw()
            self._stream.write('\n')
            self._stream.flush()
        elif error_type is None:
            logging.info('%s: %d/%d done', self._label, self._done, self._total)

    def advance(self, count=1):
        """Counts `count` more steps done; safe to call from several threads."""
        with self._lock:
            self._done += count
            if self._in_place and time.monotonic() - self._last_draw > 0.2:
                self._draw()

    def _draw(self):
        filled = min(self._width * self._done // max(self._total, 1), self._width)
        self._stream.write(f'\r{self._label} [{"#" * filled}{"." * (self._width - filled)}] '
                           f'{self._done}/{self._total}')
        self._stream.flush()
        self._last_draw = time.monotonic()


# --- features and examples ---------------------------------------------------------------

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


# slim's names for the list forms; the features above take lists and scalars alike.
bytes_list_feature = bytes_feature
float_list_feature = float_feature


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


# --- TFRecord files ----------------------------------------------------------------------

@contextlib.contextmanager
def _tfrecord_writer(path):
    """Yields a TFRecordWriter whose records appear at `path` when the block succeeds."""
    with fileio.atomic_path(path) as temp_path, tf.io.TFRecordWriter(temp_path) as writer:
        yield writer


def write_tfrecord(path, serialized_examples):
    """Writes serialized examples (an iterable of bytes) to the TFRecord file path, atomically."""
    with _tfrecord_writer(path) as writer:
        for serialized in serialized_examples:
            writer.write(serialized)


def sharded_paths(base_path, num_shards):
    """slim's shard names: ['<base_path>-00000-of-<num_shards:05d>', ...], in order."""
    if num_shards < 1:
        raise ValueError(f'num_shards must be at least 1, got {num_shards}')
    return [f'{base_path}-{shard:05d}-of-{num_shards:05d}' for shard in range(num_shards)]


def open_sharded_output_tfrecords(exit_stack, base_path, num_shards):
    """Opens one TFRecordWriter per shard of sharded_paths(base_path, num_shards), closed by
    `exit_stack` (a contextlib.ExitStack); returns them, shard k's at index k.

    Each shard is written to a temporary file and appears under its name when the stack
    closes without an error; on an error the temporary files are removed.
    """
    return [exit_stack.enter_context(_tfrecord_writer(path))
            for path in sharded_paths(base_path, num_shards)]


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


# --- labels.txt --------------------------------------------------------------------------

def write_label_file(labels_to_class_names, dataset_dir, filename=LABELS_FILENAME):
    """Writes {int label: class name} as 'label:name' lines, sorted by label, atomically."""
    lines = ''.join(f'{label}:{labels_to_class_names[label]}\n'
                    for label in sorted(labels_to_class_names))
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


# --- downloads ---------------------------------------------------------------------------

@contextlib.contextmanager
def _downloading(url):
    """Turns a failure of the block (fetching `url`) into a DownloadError naming the URL."""
    try:
        yield
    except DownloadError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as error:
        reason = ' '.join(str(getattr(error, 'reason', None) or error).split())
        raise DownloadError(f'cannot download {url}: {reason or type(error).__name__}') \
            from None


def download_url(url, dataset_dir):
    """Downloads `url` (http, https, ftp or file) into dataset_dir, created if missing, as
    the file named by the URL's last part (replacing one there); returns its path.

    The file appears under its name only once complete; a progress bar shows megabytes.
    Raises DownloadError, one line naming the URL, if it cannot be fetched.
    """
    path = os.path.join(dataset_dir, url.split('/')[-1])
    os.makedirs(dataset_dir or '.', exist_ok=True)
    with _downloading(url), urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT) as response, \
            fileio.atomic_path(path) as temp_path:
        megabytes = math.ceil(int(response.headers.get('Content-Length') or 0) / 2**20) or 1
        with Progress(f'download {os.path.basename(path)} (MB)', megabytes) as progress, \
                open(temp_path, 'wb') as f:
            while chunk := response.read(2**20):
                f.write(chunk)
                progress.advance()
    return path


def download_and_uncompress_tarball(tarball_url, dataset_dir):
    """download_url(tarball_url, dataset_dir), then extracts the tar archive (any
    compression) into dataset_dir; members that would land outside it are refused.
    UsageError naming the archive if it is not a readable tar archive."""
    path = download_url(tarball_url, dataset_dir)
    try:
        with tarfile.open(path, 'r:*') as tar:
            tar.extractall(dataset_dir, filter='data')
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise UsageError(f'{path}: not a readable tar archive ({error})') from None


def download_and_uncompress_zipfile(zip_url, dataset_dir):
    """Downloads `zip_url` into dataset_dir unless its file is already there, then extracts
    the members that do not exist yet, each atomically (an interrupted run is completed by
    the next). UsageError naming the archive if it is not a readable zip archive or a
    member would land outside dataset_dir."""
    path = os.path.join(dataset_dir, zip_url.split('/')[-1])
    if not os.path.exists(path):
        download_url(zip_url, dataset_dir)
    root = os.path.realpath(dataset_dir)
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                target = os.path.realpath(os.path.join(root, member.filename))
                if os.path.commonpath([root, target]) != root:
                    raise UsageError(f'{path}: member {member.filename!r} lies outside '
                                     f'{dataset_dir}; refusing to extract it')
                if member.is_dir():
                    os.makedirs(target, exist_ok=True)
                elif not os.path.exists(target):
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                    with archive.open(member) as source, fileio.atomic_path(target) as temp, \
                            open(temp, 'wb') as copy:
                        shutil.copyfileobj(source, copy, 2**20)
    except (zipfile.BadZipFile, EOFError, zlib.error) as error:
        raise UsageError(f'{path}: not a readable zip archive ({error}); delete it to '
                         'download it again') from None


# --- descriptions ------------------------------------------------------------------------

def check_readable(dataset_dir):
    """Raises UsageError naming --dataset_dir when it exists but cannot be read."""
    if os.path.isdir(dataset_dir) and not os.access(dataset_dir, os.R_OK | os.X_OK):
        raise UsageError(f'--dataset_dir {dataset_dir!r} cannot be read (permission denied)')


@dataclasses.dataclass(frozen=True)
class DatasetSplit:
    """One split of a dataset, stored as TFRecord files of slim's records.

    file_pattern: glob of the split's files (absolute when the toolkit checked them).
    num_samples: records in the split. labels_to_names: {int label: class name} from
    labels.txt, or None without one. items_to_descriptions: {'image': ..., 'label': ...}
    in words. channels: 1 or 3, the channels images decode to. reader: the v1 reader class
    for as_slim_dataset(); None means tf.compat.v1.TFRecordReader. has_bboxes: records
    carry object boxes; has_class_text: records carry the class's synset and human-readable
    name. image_shape: [height, width, channels] of every image, or None if sizes vary.
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
    image_shape: tuple | None = None

    def __post_init__(self):
        if self.channels not in (1, 3):
            raise ValueError(f'channels must be 1 or 3, got {self.channels!r}')

    def files(self):
        """The split's files, sorted; UsageError naming --dataset_dir if there are none or
        it cannot be read, or naming the first file that cannot be read."""
        dataset_dir = os.path.dirname(self.file_pattern)
        expected = (f'files matching {os.path.basename(self.file_pattern)!r} for dataset '
                    f'{self.name!r} split {self.split_name!r} '
                    '(create them with download_and_convert_data.py)')
        if not os.path.isdir(dataset_dir):
            raise UsageError(f'--dataset_dir {dataset_dir!r} does not exist; expected {expected}')
        check_readable(dataset_dir)
        files = sorted(f for f in glob.glob(self.file_pattern) if not fileio.is_temporary(f))
        if not files:
            raise UsageError(f'--dataset_dir {dataset_dir!r} holds no {expected}')
        for path in files:
            if not os.access(path, os.R_OK):
                raise UsageError(f'{path}: cannot be read (permission denied)')
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

    def as_slim_dataset(self, check_files=True):
        """This split as a tf_slim.data.dataset.Dataset with items 'image' (uint8, of
        image_shape if set) and 'label', plus 'object/bbox' (float32 [boxes, 4]: ymin, xmin,
        ymax, xmax) and 'object/label' with has_bboxes, and 'synset' and 'label_text' with
        has_class_text; it also carries num_classes and labels_to_names, as slim's do.

        check_files: data_sources is the list of the split's files, which must exist
        (files()); False: it is file_pattern, as slim's get_split gives, unchecked.
        """
        handlers = slim.tfexample_decoder
        items = {'image': handlers.Image(shape=self.image_shape, channels=self.channels),
                 'label': handlers.Tensor('image/class/label')}
        if self.has_bboxes:
            items['object/bbox'] = handlers.BoundingBox(['ymin', 'xmin', 'ymax', 'xmax'],
                                                        'image/object/bbox/')
            items['object/label'] = handlers.Tensor('image/object/bbox/label')
        if self.has_class_text:
            items['synset'] = handlers.Tensor('image/class/synset')
            items['label_text'] = handlers.Tensor('image/class/text')
        return slim.dataset.Dataset(
            data_sources=self.files() if check_files else self.file_pattern,
            reader=self.reader or tf.TFRecordReader,
            decoder=handlers.TFExampleDecoder(self.features, items),
            num_samples=self.num_samples,
            items_to_descriptions=self.items_to_descriptions,
            num_classes=self.num_classes,
            labels_to_names=self.labels_to_names)


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    """A dataset: how its records are read, and how it gets converted. Each dataset's
    module holds its one DatasetInfo, DATASET_INFO; dataset_factory registers them.

    name: its --dataset_name. splits_to_sizes: {split name: records}. file_pattern: the
    split's file glob inside dataset_dir, '%s' standing for the split name. channels,
    has_bboxes, has_class_text, image_shape: as in DatasetSplit. Exactly one of `convert`
    and `prepare` is set: convert(dataset_dir, source=None, **options) converts the dataset
    into dataset_dir beforehand (download_and_convert_data.py; options as in its
    CONVERTER_OPTIONS); prepare(dataset_dir or None), for an embedded dataset, writes it if
    needed and returns its directory, on first use.
    """
    name: str
    splits_to_sizes: dict
    num_classes: int
    file_pattern: str
    channels: int
    items_to_descriptions: dict
    image_shape: tuple | None = None
    convert: Callable[..., str] | None = None
    prepare: Callable[[str | None], str] | None = None
    has_bboxes: bool = False
    has_class_text: bool = False

    def num_samples(self, split_name):
        """Records in split `split_name`; UsageError (a ValueError) naming
        --dataset_split_name and the valid splits if there is no such split."""
        if split_name not in self.splits_to_sizes:
            raise UsageError(f'unknown --dataset_split_name {split_name!r}; valid: '
                             f'{", ".join(self.splits_to_sizes)}')
        return self.splits_to_sizes[split_name]

    def describe(self, split_name, dataset_dir, file_pattern=None, reader=None):
        """The DatasetSplit of split_name in dataset_dir ('~' expanded; '' or None: the
        working directory), reading nothing but its labels.txt, if there is one.

        file_pattern: replaces the registered glob ('%s' is replaced by split_name; relative
        to dataset_dir unless absolute). reader: as in DatasetSplit.
        """
        num_samples = self.num_samples(split_name)
        dataset_dir = os.path.expanduser(dataset_dir or '')
        pattern = (file_pattern or self.file_pattern).replace('%s', split_name)
        return DatasetSplit(
            name=self.name, split_name=split_name,
            file_pattern=os.path.join(dataset_dir, pattern),
            num_samples=num_samples, num_classes=self.num_classes,
            labels_to_names=read_label_file(dataset_dir) if has_labels(dataset_dir) else None,
            items_to_descriptions=self.items_to_descriptions, channels=self.channels,
            reader=reader, has_bboxes=self.has_bboxes, has_class_text=self.has_class_text,
            image_shape=self.image_shape)

    def prepared_dir(self, dataset_dir):
        """dataset_dir, for an embedded dataset once written there if missing ('' or None:
        its default directory); other datasets' directories are returned as they are."""
        return self.prepare(dataset_dir or None) if self.prepare else dataset_dir

    def get_split(self, split_name, dataset_dir, file_pattern=None, reader=None):
        """slim's get_split: the split as a tf_slim Dataset whose data_sources is the glob
        dataset_dir/file_pattern, unchecked (see describe()); an embedded dataset is first
        written if missing. UsageError (a ValueError) for an unknown split."""
        self.num_samples(split_name)
        return self.describe(split_name, self.prepared_dir(dataset_dir), file_pattern,
                             reader).as_slim_dataset(check_files=False)

    def split(self, split_name, dataset_dir, file_pattern=None, reader=None):
        """The toolkit's DatasetSplit of split_name in dataset_dir, whose files must exist.

        dataset_dir: None or '' is the default directory of an embedded dataset (written
        there on first use) and a UsageError naming --dataset_dir for the others; the
        file pattern is made absolute. UsageError naming the flag at fault for an unknown
        split, a missing directory or a split without files.
        """
        self.num_samples(split_name)
        if self.prepare is None and not dataset_dir:
            raise UsageError(f'--dataset_dir is required for dataset {self.name!r}: the '
                             'directory holding its TFRecord files (see '
                             'download_and_convert_data.py)')
        check_readable(os.path.expanduser(dataset_dir or ''))
        dataset_dir = os.path.abspath(os.path.expanduser(self.prepared_dir(dataset_dir)))
        split = self.describe(split_name, dataset_dir, file_pattern, reader)
        split.files()  # Fails now, with the directory and pattern, if the split has no files.
        return split
