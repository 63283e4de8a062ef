"""Gradient accumulation: one update from the gradients of K micro-batches, one per run.

Each run of the op apply_every() builds adds the run's gradients to accumulators; every
K-th run applies their sum and zeros them. The accumulators are local variables, next to
their gradients (on each clone's device when replicated), so checkpoints hold none of
them: a run restarted from a checkpoint starts a new update.
"""
import tensorflow.compat.v1 as tf


def apply_every(steps, grads_and_vars, apply):
    """The op of one run of `steps` per update; returns a bool tensor, whether it updated.

    grads_and_vars: [(gradient, variable)], this run's gradients (IndexedSlices are
      accumulated dense); each update applies the sum of `steps` runs' gradients, so they
      should be those of the loss divided by `steps` (optimize_clones does that).
    apply: apply(summed grads_and_vars) builds the update (e.g. optimizer.apply_gradients);
      it is called once, inside a tf.cond branch that runs on every `steps`-th run.
    """
    accumulators, adds = [], []
    for grad, variable in grads_and_vars:
        grad = tf.convert_to_tensor(grad)
        with tf.device(grad.device), tf.name_scope(None):
            accumulator = tf.Variable(
                tf.zeros(variable.shape, grad.dtype), trainable=False, use_resource=True,
                collections=[tf.GraphKeys.LOCAL_VARIABLES],
                name=f'{variable.op.name}/gradient_accumulator')
        accumulators.append(accumulator)
        adds.append(accumulator.assign_add(grad, read_value=False))
    with tf.name_scope(None):
        runs = tf.Variable(0, dtype=tf.int64, trainable=False, use_resource=True,
                           collections=[tf.GraphKeys.LOCAL_VARIABLES],
                           name='gradient_accumulation_runs')
    with tf.control_dependencies(adds):
        count = runs.assign_add(1)

    def update():
        applied = apply([(accumulator.read_value(), variable) for accumulator, (_, variable)
                         in zip(accumulators, grads_and_vars)])
        with tf.control_dependencies([applied]):
            zeroed = [accumulator.assign(tf.zeros_like(accumulator), read_value=False)
                      for accumulator in accumulators]
        with tf.control_dependencies(zeroed):
            return tf.constant(True)

    return tf.cond(tf.equal(count % steps, 0), update, lambda: tf.constant(False),
                   name='apply_every')
