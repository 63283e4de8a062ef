"""Checkpoint helpers: whole-scope matching, fine-tuning restores, checkpoint lookup."""
import os
import re
import time

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.python.checkpoint import checkpoint_management
import tf_slim as slim

from slim_deploy.common.errors import UsageError


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
    checkpoints (its latest); raises UsageError naming `flag` if there is none."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise UsageError(f'{flag} {path!r} is a directory with no checkpoint')
        return latest
    if not tf.io.gfile.glob(path + '.index') and not tf.io.gfile.exists(path):
        raise UsageError(f'{flag} {path!r} is neither a checkpoint nor a directory holding '
                         'one')
    return path


def mismatched_variables(checkpoint, variables):
    """{name: 'name (checkpoint: SHAPE or missing, model: SHAPE)'}, by name, of the entries
    of `variables` ({checkpoint name: variable}) that `checkpoint` (a prefix) lacks or holds
    in another shape."""
    shapes = dict(tf.train.list_variables(checkpoint))
    return {name: f'{name} (checkpoint: {shapes.get(name, "missing")}, model: '
                  f'{variable.shape.as_list()})'
            for name, variable in sorted(variables.items())
            if shapes.get(name) != variable.shape.as_list()}


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
    latest, it is rewritten (atomically) to name this one, listing only the checkpoints up
    to it; with no intact checkpoint it is renamed 'checkpoint.unreadable-TIME'. The
    unreadable checkpoint's files stay where they are, untracked, so the saver never
    deletes them.
    """
    newest = newest_intact(directory)
    state = tf.train.get_checkpoint_state(directory)
    if state is None or _global_step(state.model_checkpoint_path) == _global_step(newest or ''):
        return newest
    if newest is None:
        state_file = os.path.join(directory, 'checkpoint')
        aside = f'{state_file}.unreadable-{time.strftime("%Y%m%d-%H%M%S")}'
        tf.io.gfile.rename(state_file, aside)
        logging.warning('No checkpoint in %s reads back: training starts afresh (their list '
                        'is kept as %s)', directory, aside)
        return None
    kept = [path for path in state.all_model_checkpoint_paths
            if _global_step(path) <= _global_step(newest)]
    checkpoint_management.update_checkpoint_state_internal(
        directory, os.path.basename(newest), [os.path.basename(path) for path in kept],
        save_relative_paths=True)
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
    `exclude_scopes` from `checkpoint_path` (prefix or directory).

    Variables whose name is missing from the checkpoint, or whose shape differs (e.g. a
    logits layer for another number of classes), raise UsageError naming them unless
    `ignore_missing_vars`, which skips them with a warning.
    """
    checkpoint = resolve_checkpoint(checkpoint_path)
    variables = {var.op.name: var for var in slim.get_model_variables()
                 if not in_scopes(var.op.name, exclude_scopes)}
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
