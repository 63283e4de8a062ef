"""Checkpoints on storage that fails under a run: saves on a full disk (a real tmpfs) end in
one line and leave nothing partial, rotation never loses the last complete checkpoint, and a
run directory moved or copied elsewhere resumes from its own files."""
import contextlib
import os
import shutil

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common import fileio
from slim_deploy.common.errors import StorageError, UsageError
from slim_deploy.training import checkpoints

import helpers
from helpers import error_message, tmpfs

PAGE = 4096
VALUES = 256 * 1024  # float32 values of the test's variable: a 1 MB checkpoint.


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB tmpfs at tmp_path/disk."""
    with tmpfs(tmp_path / 'disk', '4m') as disk:
        yield disk


def fill(disk, leave):
    helpers.fill(disk, leave)
    assert fileio.free_bytes(str(disk)) == leave


class FillsTheDisk(tf.train.CheckpointSaverListener):
    """Another writer that takes the disk's last `leave` bytes between the hook's check of
    the free space and its save of global step `step`."""

    def __init__(self, disk, leave, step):
        self._disk, self._leave, self._step = disk, leave, step

    def before_save(self, session, global_step_value):
        if global_step_value == self._step:
            fill(self._disk, self._leave)


@contextlib.contextmanager
def training_session(train_dir, keep_checkpoint_max=5, listeners=None):
    """A chief's session of one VALUES-float variable, 'weights', and the global step, with
    the checkpoint hook (a save at its start); yields (session, an op adding 1 to the
    weights, save_now(step))."""
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        weights = tf.Variable(tf.range(VALUES, dtype=tf.float32), name='weights')
        add_one = weights.assign_add(tf.ones([VALUES]))
        scaffold = tf.train.Scaffold(saver=checkpoints.saver(keep_checkpoint_max))
        hook = checkpoints.CheckpointSaverHook(str(train_dir), 10**6, scaffold, listeners)
        with tf.train.MonitoredSession(tf.train.ChiefSessionCreator(
                scaffold, checkpoint_dir=str(train_dir)), hooks=[hook]) as session:
            raw = session._tf_sess()

            def save_now(global_step):
                step.load(global_step, raw)
                hook._save(raw, global_step)
            yield raw, add_one, save_now


def checkpoint_files(directory):
    return sorted(name for name in os.listdir(directory) if name.startswith('model.ckpt'))


def test_a_save_that_would_not_fit_ends_in_one_line_and_writes_nothing(small_disk):
    train_dir = small_disk / 'run'
    with pytest.raises(StorageError) as excinfo:
        with training_session(train_dir) as (_, _, save_now):
            save_now(100)
            before = checkpoint_files(train_dir)
            needed = sum(os.path.getsize(train_dir / name) for name in before
                         if name.startswith('model.ckpt-100.'))
            fill(small_disk, leave=VALUES * 4 // 2)
            save_now(200)
    assert error_message(excinfo) == (
        f'Cannot save the checkpoint of step 200 in {train_dir}: no space left on the device '
        f'(needs about {fileio.megabytes(needed)}, 0.5 MB free); the newest complete '
        'checkpoint is step 100: a rerun with room resumes from it')
    assert checkpoint_files(train_dir) == before
    assert checkpoints.resume_point(str(train_dir)).endswith('model.ckpt-100')


def test_a_save_that_fails_midway_removes_its_files_and_keeps_the_last_complete(small_disk):
    train_dir = small_disk / 'run'
    fills = FillsTheDisk(small_disk, leave=VALUES * 4 // 2, step=300)
    with pytest.raises(StorageError) as excinfo:
        with training_session(train_dir, 1, [fills]) as (session, add_one, save_now):
            before = checkpoint_files(train_dir)  # The start's save, of step 0.
            session.run(add_one)
            save_now(300)
    assert error_message(excinfo).startswith(
        f'Cannot save the checkpoint of step 300 in {train_dir}: no space left on the device '
        '(needs about 1.0 MB, ')
    assert error_message(excinfo).endswith('; the newest complete checkpoint is step 0: a '
                                           'rerun with room resumes from it')
    assert checkpoint_files(train_dir) == before  # Step 0 kept although only 1 is to be kept.
    assert not [name for name in os.listdir(train_dir) if 'temp' in name]
    reader = tf.train.load_checkpoint(checkpoints.resume_point(str(train_dir)))
    np.testing.assert_array_equal(reader.get_tensor('weights'), np.arange(VALUES))


def test_rotation_drops_the_oldest_only_once_the_newest_is_complete(tmp_path):
    with training_session(tmp_path, keep_checkpoint_max=2) as (_, _, save_now):
        for step in (1, 2):
            save_now(step)
    assert [name for name in checkpoint_files(tmp_path) if name.endswith('.index')] == [
        'model.ckpt-1.index', 'model.ckpt-2.index']
    with open(tmp_path / 'checkpoint') as state:  # Relative: the directory can move.
        assert state.read().splitlines()[0] == 'model_checkpoint_path: "model.ckpt-2"'


def save_with_absolute_paths(directory, steps):
    """Saves `steps` checkpoints as earlier versions did (the 'checkpoint' file records
    absolute paths)."""
    with tf.Graph().as_default():
        tf.train.get_or_create_global_step()
        tf.Variable(1.0, name='v')
        saver = tf.train.Saver(max_to_keep=2)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for step in steps:
                saver.save(sess, os.path.join(directory, 'model.ckpt'), global_step=step)
    with open(os.path.join(directory, 'checkpoint')) as state:
        assert f'"{directory}/model.ckpt-{steps[-1]}"' in state.read()


@pytest.mark.parametrize('original', ['kept', 'gone'])
def test_a_copied_run_directory_resumes_from_its_own_files(tmp_path, original):
    first, copy = str(tmp_path / 'first'), str(tmp_path / 'copy')
    os.mkdir(first)
    save_with_absolute_paths(first, [10, 20])
    shutil.copytree(first, copy)
    if original == 'gone':
        shutil.rmtree(first)
    kept = sorted(os.listdir(first)) if original == 'kept' else None
    assert checkpoints.resume_point(copy) == os.path.join(copy, 'model.ckpt-20')
    assert checkpoints.latest(copy) == os.path.join(copy, 'model.ckpt-20')
    assert tf.train.latest_checkpoint(copy) == os.path.join(copy, 'model.ckpt-20')
    with training_session_of_v(copy) as save_now:  # Resumes there and rotates 2 out.
        for step in (30, 40, 50):
            save_now(step)
    assert sorted(name for name in os.listdir(copy) if name.endswith('.index')) == [
        'model.ckpt-40.index', 'model.ckpt-50.index']
    if kept is not None:  # The copy's rotation never deletes the original's files.
        assert sorted(os.listdir(first)) == kept


@contextlib.contextmanager
def training_session_of_v(train_dir):
    """A chief's session of save_with_absolute_paths' variable restored from train_dir,
    keeping 2 checkpoints; yields save_now(step)."""
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        tf.Variable(0.0, name='v')
        scaffold = tf.train.Scaffold(saver=checkpoints.saver(2))
        hook = checkpoints.CheckpointSaverHook(train_dir, 10**6, scaffold)
        with tf.train.MonitoredSession(tf.train.ChiefSessionCreator(
                scaffold, checkpoint_dir=train_dir), hooks=[hook]) as session:
            raw = session._tf_sess()
            assert raw.run(tf.global_variables('v')[0]) == 1.0  # Restored.
            yield lambda global_step: (step.load(global_step, raw), hook._save(raw, global_step))


def test_a_checkpoint_missing_its_data_file_is_named(tmp_path):
    save_with_absolute_paths(str(tmp_path), [5])
    data = tmp_path / 'model.ckpt-5.data-00000-of-00001'
    os.remove(data)
    for path in (str(tmp_path), str(tmp_path / 'model.ckpt-5')):
        with pytest.raises(UsageError) as excinfo:
            checkpoints.resolve_checkpoint(path)
        assert error_message(excinfo) == (
            f"--checkpoint_path {path!r}: the checkpoint's data file {data} is missing")
