"""slim_deploy.common.fileio: atomic writes of files and directories, write checks."""
import os

import pytest

from slim_deploy.common import fileio


def test_atomic_path_renames_a_filled_directory_and_cleans_up_a_failed_one(tmp_path):
    target = tmp_path / 'model'
    with pytest.raises(RuntimeError):
        with fileio.atomic_path(str(target)) as temp:
            os.makedirs(os.path.join(temp, 'variables'))
            assert fileio.is_temporary(temp)
            raise RuntimeError('export failed')
    assert os.listdir(tmp_path) == []
    with fileio.atomic_path(str(target)) as temp:
        os.makedirs(os.path.join(temp, 'variables'))
    assert os.listdir(target) == ['variables'] and not fileio.is_temporary(str(target))


def test_write_atomically_replaces_whole_files(tmp_path):
    path = tmp_path / 'metrics.json'
    fileio.write_json_atomically(str(path), {'b': 1, 'a': [2]})
    assert path.read_text() == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'
    fileio.write_atomically(str(path), b'bytes')
    assert path.read_bytes() == b'bytes' and os.listdir(tmp_path) == ['metrics.json']


def test_check_writable_dir_names_the_flag(tmp_path):
    fileio.check_writable_dir(str(tmp_path / 'new'), '--train_dir')
    assert (tmp_path / 'new').is_dir()
    (tmp_path / 'file').write_text('')
    with pytest.raises(ValueError, match=r"^--eval_dir '.*/file/x' is not a writable directory"):
        fileio.check_writable_dir(str(tmp_path / 'file' / 'x'), '--eval_dir')
