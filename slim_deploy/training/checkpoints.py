"""Checkpoint helpers: whole-scope matching, fine-tuning restores, checkpoint lookup, and the
saving of a training run's checkpoints, which a run directory keeps by relative path (it
can move) and a full disk never leaves half-written."""
import os
import re
import shutil
import time

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.python.checkpoint import checkpoint_management
import tf_slim as slim

from slim_deploy.common import fileio
from slim_deploy.common.errors import StorageError, UsageError
from slim_deploy.deployment import placement

# Errors after which MonitoredSession makes a new session (a ps task restarted), or that a
# closing session raises: not failures of the save itself.
_SESSION_ERRORS = (tf.errors.AbortedError, tf.errors.UnavailableError,
                   tf.errors.CancelledError)


def parse_scopes(scopes):
    """'a,b/c, d' -> ['a', 'b/c', 'd']; None or '' -> []."""
    return [s.strip().strip('/') for s in (scopes or '').split(',') if s.strip().strip('/')]


def in_scopes(name, scopes):
    """Whether variable name `name` lies in one of `scopes`, matching whole scopes only:
    'InceptionV3/Logits' matches 'InceptionV3/Logits/weights' but not
    'InceptionV3/Logits2/weights' (slim matched plain string prefixes)."""
    return any(name == scope or name.startswith(scope + '/') for scope in scopes)


def variables_to_train(trainable_scopes):
    """The trainable variables inside `trainable_scopes` (a list); all of them if empty."""
    trainable = tf.trainable_variables()
    if not trainable_scopes:
        return trainable
    return [v for v in trainable if in_scopes(v.op.name, trainable_scopes)]


def resolve_checkpoint(path, flag='--checkpoint_path'):
    """The checkpoint prefix for `path`, a checkpoint prefix or a directory holding
    checkpoints (its latest); raises UsageError naming `flag` if there is none, or if a
    data file of the checkpoint is missing."""
    if tf.io.gfile.isdir(path):
        prefix = latest(path)
        if prefix is None:
            raise UsageError(f'{flag} {path!r} is a directory with no checkpoint')
    elif tf.io.gfile.exists(path + '.index'):
        prefix = path
    elif tf.io.gfile.exists(path):  # A TF1 (V1) checkpoint: one file.
        return path
    else:
        raise UsageError(f'{flag} {path!r} is neither a checkpoint nor a directory holding '
                         'one')
    data = tf.io.gfile.glob(prefix + '.data-*-of-*')
    shards = int(data[0].rsplit('-of-', 1)[1]) if data else 1
    for shard in range(shards):
        expected = f'{prefix}.data-{shard:05d}-of-{shards:05d}'
        if expected not in data:
            raise UsageError(f'{flag} {path!r}: the checkpoint\'s data file {expected} is '
                             'missing')
    return prefix


def latest(directory):
    """The prefix of the checkpoint that `directory`'s 'checkpoint' file names as the
    latest, in `directory` (a path recorded before the directory moved is taken by its
    base name); None when it names none, or its index file is missing."""
    state = tf.train.get_checkpoint_state(directory)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix = os.path.join(directory, os.path.basename(state.model_checkpoint_path))
    return prefix if tf.io.gfile.exists(prefix + '.index') else None


def saver(max_to_keep):
    """The Saver of a training run's checkpoints: sharded (each ps task writes its own
    variables), recorded by relative path in the directory's 'checkpoint' file, the newest
    `max_to_keep` kept (an older one goes once a newer one is complete)."""
    return tf.train.Saver(sharded=True, allow_empty=True, max_to_keep=max_to_keep,
                          save_relative_paths=True)


def kept(directory):
    """What a failed write in `directory` leaves to resume from, as a clause: 'the newest
    complete checkpoint is step 1100: ...' or 'no checkpoint is complete yet'."""
    newest = newest_intact(directory)
    if newest is None:
        return 'no checkpoint is complete yet'
    return (f'the newest complete checkpoint is step {_global_step(newest)}: a rerun with room '
            'resumes from it')


class CheckpointSaverHook(tf.train.CheckpointSaverHook):
    """TensorFlow's CheckpointSaverHook (a save at the start, every `save_secs` seconds and at
    the end, with `scaffold`'s saver; `listeners`: its CheckpointSaverListeners), whose
    saves complete or leave nothing of themselves, and which saves no step that the
    directory's latest checkpoint holds already (as after a restart: it needs no room for
    a second copy).

    Before a save it compares the free space of a local checkpoint_dir with the size of the
    newest checkpoint there (or of the variables, for the first). A save that would not fit,
    or fails (the disk fills, an I/O error), removes what it wrote of its step and raises
    StorageError: one line naming the step, the directory, the cause, the space needed and
    free, and the newest complete checkpoint (see kept()).
    """

    def __init__(self, checkpoint_dir, save_secs, scaffold, listeners=None):
        super().__init__(checkpoint_dir, save_secs=save_secs, scaffold=scaffold,
                         listeners=listeners)
        self._directory = checkpoint_dir

    def begin(self):
        super().begin()
        self._variable_bytes = sum(variable.shape.num_elements() *
                                   variable.dtype.base_dtype.size
                                   for variable in tf.global_variables())

    def _save(self, session, step):
        newest = latest(self._directory)
        if newest == self._step_prefix(step):  # Restored from it, or saved already.
            return False
        needed = (sum(tf.io.gfile.stat(path).length for path in _files_of(newest))
                  if newest else self._variable_bytes)
        free = fileio.free_bytes(self._directory)
        if free is not None and needed > free:
            raise self._failed(step, 'no space left on the device', needed)
        before = set(_files_of(self._step_prefix(step)))
        try:
            return super()._save(session, step)
        except _SESSION_ERRORS:
            raise
        except (tf.errors.OpError, OSError) as error:
            self._remove_partial(step, before)
            message = getattr(error, 'message', None) or str(error)
            raise self._failed(step, fileio.no_room(error) or ' '.join(message.split())[:200],
                               needed) from None

    def _step_prefix(self, step):
        return f'{self._save_path}-{step}'

    def _remove_partial(self, step, before):
        """Removes the files of step's checkpoint that the failed save wrote (`before`: those
        there before it), keeping a checkpoint that reads back whole but for its temporary
        files."""
        prefix = self._step_prefix(step)
        whole = _unreadable(prefix) is None if tf.io.gfile.exists(prefix + '.index') else False
        for path in set(_files_of(prefix)) - before:
            if whole and not _is_temporary(prefix, path):
                continue
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                tf.io.gfile.remove(path)

    def _failed(self, step, cause, needed):
        free = fileio.free_bytes(self._directory)
        room = f'needs about {fileio.megabytes(needed)}' + (
            f', {fileio.megabytes(free)} free' if free is not None else '')
        return StorageError(f'Cannot save the checkpoint of step {step} in {self._directory}: '
                            f'{cause} ({room}); {kept(self._directory)}')


def _files_of(prefix):
    """The files and directories of checkpoint `prefix`: '<prefix>.index', '.data-*',
    '.meta', and TensorFlow's temporary '<prefix>_temp*' and '<prefix>.*tempstate*'."""
    return [path for pattern in (prefix + '.*', prefix + '_temp*')
            for path in tf.io.gfile.glob(pattern)]


def _is_temporary(prefix, path):
    """Whether `path`, one of _files_of(prefix), is a temporary file of a save."""
    return path.startswith(prefix + '_temp') or 'tempstate' in os.path.basename(path)


def checkpoint_names(variables):
    """{checkpoint name: variable} of `variables`, named as tf.train.Saver names them: a
    variable by its name; the parts a partitioner made of one ('w/part_0', 'w/part_1', ...)
    together, as a list, under the whole variable's name ('w'), which a Saver given the
    dict restores from a checkpoint of the whole variable or of parts of any sizes."""
    variables = list(variables)
    return {**{variable.op.name: variable for variable in variables
               if variable._get_save_slice_info() is None},
            **placement.parts_by_variable(variables)}


def mismatched_variables(checkpoint, variables):
    """{name: 'name (checkpoint: SHAPE or missing, model: SHAPE)'}, by name, of the entries
    of `variables` ({checkpoint name: variable, or the list of its parts}) that `checkpoint`
    (a prefix) lacks or holds in another shape."""
    shapes = dict(tf.train.list_variables(checkpoint))
    model = {name: (variable[0]._get_save_slice_info().full_shape if isinstance(variable, list)
                    else variable.shape.as_list())
             for name, variable in variables.items()}
    return {name: f'{name} (checkpoint: {shapes.get(name, "missing")}, model: {model[name]})'
            for name in sorted(variables) if shapes.get(name) != model[name]}


def newest_intact(directory):
    """The prefix of the newest checkpoint in `directory` that reads back whole (its index and
    every tensor, checksums checked); None when there is none.

    Candidates are the checkpoints the directory's 'checkpoint' file lists and those whose
    .index file is there, newest (highest global step) first. Each newer one that does not
    read back (a truncated data file, a missing index: a full disk or a death mid-write) is
    reported in one warning line; no file is deleted or changed.
    """
    candidates = set(tf.io.gfile.glob(os.path.join(directory, '*.index')))
    candidates = {path[:-len('.index')] for path in candidates}
    state = tf.train.get_checkpoint_state(directory)
    if state:
        candidates.update(os.path.join(directory, os.path.basename(path))
                          for path in [*state.all_model_checkpoint_paths,
                                       state.model_checkpoint_path] if path)
    for path in sorted(candidates, key=_global_step, reverse=True):
        problem = _unreadable(path)
        if problem is None:
            return path
        logging.warning('Checkpoint %s is unreadable (%s); trying an older one', path, problem)
    return None


def resume_point(directory):
    """The newest intact checkpoint in `directory` (newest_intact), made the one TensorFlow
    resumes from; None when there is none.

    When the directory's 'checkpoint' file names a newer, unreadable checkpoint as the
    latest, or names paths elsewhere (the directory was moved or copied), it is rewritten
    (atomically) to name this one by relative path, listing only the checkpoints up to it
    that are in `directory`; with no intact checkpoint it is renamed
    'checkpoint.unreadable-TIME'. Files it no longer lists stay where they are, untracked,
    so the saver never deletes them (nor those of the directory a copy was made from).
    """
    newest = newest_intact(directory)
    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return newest
    if newest is None:
        state_file = os.path.join(directory, 'checkpoint')
        aside = f'{state_file}.unreadable-{time.strftime("%Y%m%d-%H%M%S")}'
        tf.io.gfile.rename(state_file, aside)
        logging.warning('No checkpoint in %s reads back: training starts afresh (their list '
                        'is kept as %s)', directory, aside)
        return None
    names = [os.path.basename(path) for path in state.all_model_checkpoint_paths]
    listed = [name for name in names if _global_step(name) <= _global_step(newest)
              and tf.io.gfile.exists(os.path.join(directory, name) + '.index')]
    here = [os.path.join(directory, name) for name in listed]
    if (state.model_checkpoint_path, list(state.all_model_checkpoint_paths)) != (newest, here):
        checkpoint_management.update_checkpoint_state_internal(
            directory, os.path.basename(newest), listed, save_relative_paths=True)
    return newest


def _global_step(prefix):
    """The global step in a checkpoint prefix such as 'model.ckpt-400'; -1 if it has none."""
    match = re.search(r'-(\d+)$', prefix)
    return int(match.group(1)) if match else -1


def _unreadable(prefix):
    """Why checkpoint `prefix` does not read back whole, in a few words; None if it does."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError) as e:  # IndexError: short read.
        message = e.message if isinstance(e, tf.errors.OpError) else str(e)
        return ' '.join(message.split())[:200]
    return None


def fine_tune_init_fn(checkpoint_path, exclude_scopes, ignore_missing_vars=False):
    """A Scaffold init_fn(scaffold, session) restoring the model variables outside
    `exclude_scopes` from `checkpoint_path` (prefix or directory), each whole or in parts,
    whichever way the checkpoint's run held it (checkpoint_names).

    Variables whose name is missing from the checkpoint, or whose shape differs (e.g. a
    logits layer for another number of classes), raise UsageError naming them unless
    `ignore_missing_vars`, which skips them with a warning.
    """
    checkpoint = resolve_checkpoint(checkpoint_path)
    variables = checkpoint_names(var for var in slim.get_model_variables()
                                 if not in_scopes(var.op.name, exclude_scopes))
    mismatched = mismatched_variables(checkpoint, variables)
    to_restore = {name: var for name, var in variables.items() if name not in mismatched}
    skipped = list(mismatched.values())
    if skipped and not ignore_missing_vars:
        raise UsageError(f'checkpoint {checkpoint} does not match {len(skipped)} variables; '
                         'exclude their scopes with --checkpoint_exclude_scopes or pass '
                         f'--ignore_missing_vars: {"; ".join(skipped[:5])}')
    for entry in skipped:
        logging.warning('Not restoring %s', entry)
    saver = tf.train.Saver(to_restore)
    logging.info('Fine-tuning from %s: restoring %d variables', checkpoint, len(to_restore))
    return lambda scaffold, session: saver.restore(session, checkpoint)


def variables_to_restore(moving_average_decay=None):
    """Checkpoint name -> variable of the current graph, for evaluation: every variable,
    or with a decay, the model variables from their exponential moving averages."""
    if not moving_average_decay:
        return slim.get_variables_to_restore()
    global_step = tf.train.get_or_create_global_step()
    averages = tf.train.ExponentialMovingAverage(moving_average_decay, global_step)
    restore = averages.variables_to_restore(slim.get_model_variables())
    restore[global_step.op.name] = global_step
    return restore
