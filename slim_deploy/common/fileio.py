"""Atomic file writes: readers see the old file or the whole new one, never a part."""
import contextlib
import json
import os
import shutil
import tempfile

from slim_deploy.common.errors import UsageError


_TEMPORARY_MARK = '.tmp-'


def is_temporary(path):
    """Whether `path` is an unfinished atomic_path() file or directory (e.g. left by a
    killed process): readers must never take it for data."""
    return _TEMPORARY_MARK in os.path.basename(path)


@contextlib.contextmanager
def atomic_path(path):
    """Yields '<path>.tmp-<pid>' to write (a file, or a directory to fill); renames it to
    `path` if the block succeeds and removes it if the block fails."""
    temp_path = f'{os.path.normpath(path)}{_TEMPORARY_MARK}{os.getpid()}'
    try:
        yield temp_path
        os.replace(temp_path, path)
    finally:
        if os.path.isdir(temp_path):
            shutil.rmtree(temp_path)
        elif os.path.lexists(temp_path):
            os.remove(temp_path)


def write_atomically(path, data):
    """Writes `data` (bytes or str) to `path` atomically."""
    binary = isinstance(data, bytes)
    with atomic_path(path) as temp_path:
        with open(temp_path, 'wb' if binary else 'w', encoding=None if binary else 'utf-8') as f:
            f.write(data)


def write_json_atomically(path, data):
    """Writes `data` as indented, key-sorted JSON to `path`, atomically."""
    write_atomically(path, json.dumps(data, indent=2, sort_keys=True) + '\n')


def check_writable_dir(path, flag):
    """Creates directory `path` if needed; raises UsageError naming `flag` if it cannot be
    written."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise UsageError(f'{flag} {path!r} is not a writable directory: '
                         f'{e.strerror or e}') from None
