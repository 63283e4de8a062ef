"""Atomic file writes: readers see the old file or the whole new one, never a part."""
import json
import os
import tempfile


def write_atomically(path, data):
    """Writes `data` (bytes or str) to `path` through a temporary file and a rename."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = 'wb' if isinstance(data, bytes) else 'w'
    with tempfile.NamedTemporaryFile(mode, dir=directory, delete=False, suffix='.tmp') as f:
        try:
            f.write(data)
        except BaseException:
            os.unlink(f.name)
            raise
    os.replace(f.name, path)


def write_json_atomically(path, data):
    """Writes `data` as indented, key-sorted JSON to `path`, atomically."""
    write_atomically(path, json.dumps(data, indent=2, sort_keys=True) + '\n')


def check_writable_dir(path, flag):
    """Creates directory `path` if needed; raises ValueError naming `flag` if it cannot be
    written."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise ValueError(f'{flag} {path!r} is not a writable directory: '
                         f'{e.strerror or e}') from None
