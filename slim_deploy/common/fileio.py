"""Atomic file writes (readers see the old file or the whole new one, never a part), and
the failures of writes for lack of space."""
import contextlib
import errno
import json
import os
import shutil
import tempfile

from slim_deploy.common.errors import StorageError, UsageError

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


# The causes of a write failing for lack of room, by errno and by the words of TensorFlow's
# errors, which carry the system's message (strerror) but no errno.
_NO_ROOM = {errno.ENOSPC: 'no space left on the device',
            errno.EDQUOT: 'the disk quota is exceeded',
            errno.EROFS: 'the file system is read-only'}
_NO_ROOM_WORDS = {os.strerror(number): cause for number, cause in _NO_ROOM.items()}


def no_room(error):
    """The cause, in a few words, when `error` (an OSError, or a TensorFlow error) is a write
    failing for lack of space, a quota or a read-only file system; None otherwise."""
    if isinstance(error, OSError) and error.errno in _NO_ROOM:
        return _NO_ROOM[error.errno]
    text = str(error)
    return next((cause for words, cause in _NO_ROOM_WORDS.items() if words in text), None)


def free_bytes(path):
    """Bytes that can still be written on the file system holding `path` (or its nearest
    existing parent): those free to root, or available to other users; None for a path
    that is not local (gs://...)."""
    if '://' in path:
        return None
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    stat = os.statvfs(path)
    return (stat.f_bfree if os.geteuid() == 0 else stat.f_bavail) * stat.f_frsize


def megabytes(count):
    """'39 MB', '0.4 MB': a byte count in megabytes (2**20 bytes) for messages."""
    return f'{count / 2**20:.{0 if count >= 10 * 2**20 else 1}f} MB'


@contextlib.contextmanager
def room_checked(directory, doing, kept=None):
    """Raises a StorageError for an error of the block that no_room() explains, one line:
    'Cannot DOING in DIRECTORY: CAUSE (N MB free); KEPT', KEPT being what kept() (None:
    nothing) says was kept. Other errors pass."""
    try:
        yield
    except StorageError:
        raise
    except Exception as error:
        cause = no_room(error)
        if cause is None:
            raise
        free = free_bytes(directory)
        raise StorageError(f'Cannot {doing} in {directory}: {cause}'
                           + (f' ({megabytes(free)} free)' if free is not None else '')
                           + (f'; {kept()}' if kept else '')) from None
