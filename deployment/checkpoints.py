"""Checkpoint helpers: whole-scope matching, fine-tuning restores, checkpoint lookup."""
from absl import logging
import tensorflow.compat.v1 as tf
import tf_slim as slim

from deployment.errors import UsageError


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


def resolve_checkpoint(path):
    """The checkpoint prefix for `path`, a checkpoint prefix or a directory holding
    checkpoints (its latest); raises UsageError if there is none."""
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise UsageError(f'--checkpoint_path {path!r} is a directory with no checkpoint')
        return latest
    if not tf.io.gfile.glob(path + '.index') and not tf.io.gfile.exists(path):
        raise UsageError(f'--checkpoint_path {path!r} is neither a checkpoint nor a directory '
                         'holding one')
    return path


def fine_tune_init_fn(checkpoint_path, exclude_scopes, ignore_missing_vars=False):
    """A Scaffold init_fn(scaffold, session) restoring the model variables outside
    `exclude_scopes` from `checkpoint_path` (prefix or directory).

    Variables whose name is missing from the checkpoint, or whose shape differs (e.g. a
    logits layer for another number of classes), raise UsageError naming them unless
    `ignore_missing_vars`, which skips them with a warning.
    """
    checkpoint = resolve_checkpoint(checkpoint_path)
    shapes = dict(tf.train.list_variables(checkpoint))
    to_restore, skipped = {}, []
    for var in slim.get_model_variables():
        name = var.op.name
        if in_scopes(name, exclude_scopes):
            continue
        if shapes.get(name) == var.shape.as_list():
            to_restore[name] = var
        else:
            skipped.append(f'{name} (checkpoint: {shapes.get(name, "missing")}, '
                           f'model: {var.shape.as_list()})')
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
