"""The manifest a converter writes beside its shards, and the check of a split against it.

manifest.json in the dataset directory lists every shard the converters wrote there:
{"format": 1, "shards": {file name: {"records": count, "bytes": file size, "sha256": hex
digest of the file}}}. Converters write it (atomically) after the shards and before
labels.txt; the input pipeline checks a split's files against it when it starts (a stat per
shard), so a torn, missing or replaced shard is refused before training reads it.
"""
import fnmatch
import hashlib
import json
import os
import struct

from absl import logging

from slim_deploy.common import fileio
from slim_deploy.common.errors import DataError

FILENAME = 'manifest.json'
FORMAT = 1
_HEADER = struct.Struct('<QI')  # A TFRecord's length and the length's masked CRC-32C.
_FOOTER_BYTES = 4  # The data's masked CRC-32C.
_unchecked_dirs = set()  # Directories without a manifest that a warning has named.


def describe_shard(path):
    """{'records', 'bytes', 'sha256'} of the TFRecord file `path`, read once. Raises
    DataError naming it when it ends inside a record (torn)."""
    digest, records, offset = hashlib.sha256(), 0, 0
    with open(path, 'rb') as f:
        while header := f.read(_HEADER.size):
            length = _HEADER.unpack(header)[0] if len(header) == _HEADER.size else -1
            body = f.read(length + _FOOTER_BYTES) if length >= 0 else b''
            if length < 0 or len(body) < length + _FOOTER_BYTES:
                raise DataError(f'shard {path} is torn: it ends inside record {records} '
                                f'(at byte {offset}); convert it again')
            digest.update(header)
            digest.update(body)
            records, offset = records + 1, offset + len(header) + len(body)
    return {'records': records, 'bytes': offset, 'sha256': digest.hexdigest()}


def read(dataset_dir):
    """{shard file name: entry} of dataset_dir's manifest; None when it has none. DataError
    naming the file when it is not a manifest of this format."""
    path = os.path.join(dataset_dir, FILENAME)
    try:
        with open(path, encoding='utf-8') as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DataError(f'{path}: not a readable shard manifest ({e})') from None
    if not isinstance(manifest, dict) or manifest.get('format') != FORMAT:
        raise DataError(f'{path}: not a shard manifest of format {FORMAT}')
    return manifest['shards']


def write(dataset_dir, paths):
    """Records the shards `paths` (files in dataset_dir) in its manifest, atomically, keeping
    the entries of other shards. A shard already listed with its present size keeps its
    entry; the others are read (describe_shard)."""
    shards = read(dataset_dir) or {}
    for path in paths:
        name = os.path.basename(path)
        if shards.get(name, {}).get('bytes') != os.path.getsize(path):
            shards[name] = describe_shard(path)
    fileio.write_json_atomically(os.path.join(dataset_dir, FILENAME),
                                 {'format': FORMAT, 'shards': shards})


def lists(dataset_dir, paths):
    """Whether dataset_dir's manifest lists every one of `paths`."""
    shards = read(dataset_dir)
    return shards is not None and all(os.path.basename(path) in shards for path in paths)


def check(split, files):
    """Checks the files of `split` (a DatasetSplit; `files` its paths) against its directory's
    manifest; returns {path: records} of the files, or None when the directory has no
    manifest (said once per directory in a warning line: such shards, converted by slim's
    own scripts, cannot be checked).

    Raises DataError naming the first shard the manifest lists for the split that is missing,
    or whose size differs from the manifest's (torn, or replaced). A file the manifest does
    not list is read unchecked, with a warning; a split whose listed records differ from
    its registered size (split.num_samples) gets a warning line.
    """
    dataset_dir = os.path.dirname(split.file_pattern)
    shards = read(dataset_dir)
    if shards is None:
        if dataset_dir not in _unchecked_dirs:
            _unchecked_dirs.add(dataset_dir)
            logging.warning('%s has no %s (converted by other means than this toolkit): '
                            'torn or missing shards cannot be found before they are read',
                            dataset_dir, FILENAME)
        return None
    pattern = os.path.basename(split.file_pattern)
    present = {os.path.basename(path) for path in files}
    for name in sorted(shards):
        if fnmatch.fnmatchcase(name, pattern) and name not in present:
            raise DataError(f'shard {os.path.join(dataset_dir, name)} is missing (listed in '
                            f'{FILENAME}); restore it or convert the dataset again')
    records, unlisted = {}, []
    for path in files:
        entry = shards.get(os.path.basename(path))
        if entry is None:
            unlisted.append(path)
            continue
        size = os.path.getsize(path)
        if size != entry['bytes']:
            raise DataError(f'shard {path} is {size} bytes where {FILENAME} says '
                            f'{entry["bytes"]}: torn or replaced; restore it or convert the '
                            'dataset again')
        records[path] = entry['records']
    if unlisted:
        logging.warning('%d files of split %r are not in %s and are read unchecked: %s',
                        len(unlisted), split.split_name, FILENAME, ', '.join(unlisted[:3]))
    elif sum(records.values()) != split.num_samples:
        logging.warning('split %r of %s holds %d records by its %s, not the %d its dataset '
                        'registers: epochs and learning-rate decay count %d', split.split_name,
                        dataset_dir, sum(records.values()), FILENAME, split.num_samples,
                        split.num_samples)
    return records
