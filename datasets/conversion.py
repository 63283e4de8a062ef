"""Machinery shared by the dataset converters: sharded, atomic, resumable, parallel writes.

A converter lists its examples (cheap descriptions: file paths, array indices), then
write_shards() turns them into TFRecord shards: each shard is written by one worker
thread to a temporary name and renamed when whole, so a shard file that exists is
complete and a rerun skips it. Progress goes to stderr.
"""
import concurrent.futures
import os
import shutil
import struct
import sys
import threading
import time
import urllib.request
import zlib

import numpy as np

from datasets import dataset_utils
from deployment import fileio


class ConversionError(ValueError):
    """Bad input to a converter (missing, corrupt or foreign file); one line, names the file."""


class Progress:
    """A one-line progress bar on stderr: 'label [#####.....] done/total'."""

    def __init__(self, label, total, stream=sys.stderr, width=30):
        self._label, self._total, self._stream, self._width = label, total, stream, width
        self._done = 0
        self._last_draw = 0.0
        self._lock = threading.Lock()
        self._draw()

    def advance(self, count=1):
        """Counts `count` more done; safe to call from several threads."""
        with self._lock:
            self._done += count
            if self._done >= self._total or time.monotonic() - self._last_draw > 0.2:
                self._draw()

    def _draw(self):
        filled = self._width * self._done // max(self._total, 1)
        end = '\n' if self._done >= self._total else ''
        self._stream.write(f'\r{self._label} [{"#" * filled}{"." * (self._width - filled)}] '
                           f'{self._done}/{self._total}{end}')
        self._stream.flush()
        self._last_draw = time.monotonic()


def write_shards(dataset_dir, prefix, split_name, items, num_shards, to_example,
                 num_workers=None):
    """Writes `items` into num_shards TFRecord shards; returns the shard paths.

    items: a sequence; shard i holds np.array_split(items, num_shards)[i], in order.
    to_example(item) -> serialized tf.train.Example (bytes); it may raise ConversionError.
    Shards whose file already exists are complete and are skipped. num_workers: threads
    writing shards at once (None: the number of CPUs).
    """
    paths = [dataset_utils.shard_filename(dataset_dir, prefix, split_name, shard, num_shards)
             for shard in range(num_shards)]
    bounds = np.cumsum([0] + [len(part) for part in np.array_split(np.arange(len(items)),
                                                                   num_shards)])
    todo = [shard for shard, path in enumerate(paths) if not os.path.exists(path)]
    progress = Progress(f'{prefix} {split_name}',
                        sum(int(bounds[s + 1] - bounds[s]) for s in todo))

    def write(shard):
        def examples():
            for item in items[bounds[shard]:bounds[shard + 1]]:
                yield to_example(item)
                progress.advance()
        dataset_utils.write_tfrecord(paths[shard], examples())

    with concurrent.futures.ThreadPoolExecutor(num_workers or os.cpu_count()) as pool:
        for future in [pool.submit(write, shard) for shard in todo]:
            future.result()  # Re-raises the first worker error.
    return paths


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
    """Downloads `url` into `directory` (skipped if the file is already there); returns
    the file's path. The file appears under its name only once complete."""
    path = os.path.join(directory, os.path.basename(url))
    if os.path.exists(path):
        return path
    os.makedirs(directory, exist_ok=True)
    with urllib.request.urlopen(url) as response, fileio.atomic_path(path) as temp_path:
        progress = Progress(f'download {os.path.basename(url)} (MB)',
                            int(response.headers.get('Content-Length', 0)) // 2**20 or 1)
        with open(temp_path, 'wb') as f:
            while chunk := response.read(2**20):
                f.write(chunk)
                progress.advance()
    return path


def require_file(path, what):
    """Raises ConversionError naming `path` unless it is an existing file."""
    if not os.path.isfile(path):
        raise ConversionError(f'{path}: missing; expected {what}')
    return path

