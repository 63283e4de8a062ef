"""What backup workers do about a late worker: it does not send the ps tasks gradients they
would drop, no worker spends a step on a token of a past step, and a worker late step after
step sits out updates instead of taking the others' links and cores for steps that count for
nothing.

A tf.train.SyncReplicasOptimizer's worker pushes each gradient into its variable's
accumulator on a ps task, tagged with its local step (the global step its step began at),
then takes a token off the token queue, whose value (the global step when it was queued)
becomes its next local step. An accumulator drops a gradient of a step older than its own,
one that an update has passed. Each update queues a token for every worker; with backup
workers (an update taking fewer gradients than there are workers) a late worker takes
fewer tokens than are queued for it.

- Stale gradients stay on the worker (keep_stale_gradients_on_workers). A late worker's
  gradients crossed its link and the ps task's to be dropped there, competing with the
  others'. Here each gradient, once backprop has made it, crosses only if the global step
  has not passed the worker's local step; otherwise the accumulator gets zeros made on its
  own device, which it drops as it would the gradient. A gradient found fresh can still be
  late when it arrives, and is dropped there as before. The gate is TensorFlow's dataflow
  switch: a Switch on the worker passes the gradient to the ps task's Merge only when fresh
  (a dead tensor, which crosses without its bytes, when stale), and a Switch on the ps task
  passes the zeros only when stale.
- Late steps are counted (count_late_steps): a step is late when, once its gradients have
  been pushed, the global step has passed its local step, whether the gates kept them or
  they crossed and arrived after the update (a gradient on a slow link). A local variable
  (late_steps) counts them.
- Only newer tokens (take_newer_tokens_only). The tokens a late worker leaves pile up in
  the queue's order. A worker taking one of a past step spent its step on a gradient
  dropped before it was made; one that had just pushed its gradient for the current step
  and took another of it spent its step on a second gradient for the same update, late
  behind the others' first. Here a step passes over those tokens, so an update takes at
  most one gradient from each worker, and counts them (tokens_passed_over). It takes a
  token newer than the global step (the chief's release, or one left by a run resumed from
  an older checkpoint while the ps tasks went on serving) as TensorFlow does. The tokens
  that end training, letting a waiting step go, are of the next step
  (tokens_of_the_next_step).
- Sitting out (lateness, sit_out_updates). A worker's lateness grows by one with each late
  step and falls by one with each step in time, within 0 and LATEST. A worker whose step is
  late at a lateness of SIT_OUT_AFTER or more (a straggler: a slower link or core) waits,
  before its next step, for 1 update, then 4, then 16 (at LATEST) as its steps stay
  late. Its steps would only take link and ps bandwidth (and, on a shared machine,
  cores) from the others; the one after the wait, its local step moved to the global step,
  finds out whether it has caught up. One step in time does not end the sitting out: the
  next late one resumes it at the length it had. training.loop.SyncReplicasHook waits; it
  also goes on when the global step stands still for twice the typical update (the update
  may need this worker) or training is stopping.
"""
import tensorflow.compat.v1 as tf

_APPLY_TYPES = ('ResourceAccumulatorApplyGradient', 'AccumulatorApplyGradient')
LATE_STEPS = 'slim_deploy_late_steps'  # Graph collection: late_steps()'.
SIT_OUT_AFTER = 2  # A late step at this lateness sits out 1 update, at each higher one 4
LATEST = 4  # times as many, up to this lateness (16 updates).


def keep_stale_gradients_on_workers(optimizer):
    """Gates, as the module docstring says, each dense gradient that this worker's step
    gives an accumulator of `optimizer` (a tf.train.SyncReplicasOptimizer whose
    apply_gradients has built the step, in the current graph). Sparse gradients
    (IndexedSlices), and those of variables whose shape is not fully known, cross as
    before; nothing is gated inside a cond branch (gradient accumulation's)."""
    accumulators = {accumulator.accumulator_ref.op
                    for accumulator, _ in optimizer._accumulator_list}
    applies = [op for op in tf.get_default_graph().get_operations()
               if op.type in _APPLY_TYPES and op.inputs[0].op in accumulators
               and op.inputs[2].shape.is_fully_defined()]
    for op in applies:
        op._update_input(2, _sent_when_fresh(op.inputs[2], op.device, optimizer._local_step,
                                             optimizer._global_step))


def _sent_when_fresh(gradient, device, local_step, global_step):
    """`gradient` on `device` (its accumulator's) when, once it is made, global_step has
    not passed local_step; else zeros of its shape and dtype made on `device`."""
    with tf.name_scope(f'{gradient.op.name}/sent_when_fresh'):
        with tf.colocate_with(global_step), tf.control_dependencies([gradient]):
            current = global_step.read_value()
        with tf.colocate_with(gradient.op):
            fresh = tf.greater_equal(local_step.read_value(), current)
            _, sent = tf.raw_ops.Switch(data=gradient, pred=fresh, name='fresh')
        with tf.device(device):
            stale_zero, _ = tf.raw_ops.Switch(data=tf.zeros([], gradient.dtype), pred=fresh,
                                              name='stale')
            zeros = tf.fill(gradient.shape, stale_zero)
            return tf.raw_ops.Merge(inputs=[sent, zeros], name='arrived').output


def take_newer_tokens_only(optimizer, worker):
    """Makes the step of `optimizer` (a tf.train.SyncReplicasOptimizer whose apply_gradients
    has built it, in the current graph, aggregating fewer gradients than there are workers)
    pass over the tokens of past steps, and of the current one once it has given it a
    gradient, as the module docstring says, and count them under worker `worker` (its
    index) for tokens_passed_over. Nothing when the step's token is taken inside a cond
    branch (gradient accumulation's)."""
    take = _token_take(optimizer)
    if take is None:
        return
    queue, token = optimizer._sync_token_queue, take.outputs[0]
    consumers = token.consumers()
    global_step = optimizer._global_step
    with tf.name_scope('sync_newer_token'):
        with tf.colocate_with(optimizer._local_step):
            local = optimizer._local_step.read_value()
        with tf.device(take.device):  # The loop on the queue's device.
            local = tf.identity(local)

            def passed_over(value, _):
                """Whether token `value` is of a past step, or of the current one that this
                step has given its gradient already."""
                current = global_step.read_value()
                return tf.logical_or(value < current, tf.logical_and(
                    tf.equal(value, current), tf.equal(local, current)))

            newer, passed = tf.while_loop(
                passed_over, lambda _, passed: (queue.dequeue(), passed + 1),
                [token, tf.constant(0, tf.int64)], parallel_iterations=1)
            table, key = _passed_over_table(), tf.constant(worker, tf.int64)
            count = tf.raw_ops.LookupTableInsertV2(table_handle=table, keys=key,
                                                   values=_find(table, key) + passed)
            with tf.control_dependencies([count]):
                newer = tf.identity(newer)
    for op in consumers:
        op._update_input(next(i for i, t in enumerate(op.inputs) if t is token), newer)


def count_late_steps(optimizer):
    """Counts each late step of this worker, as the module docstring says, in a local
    variable (late_steps()) of `optimizer` (a tf.train.SyncReplicasOptimizer whose
    apply_gradients has built the step, in the current graph): once the step has pushed its
    gradients, before it takes its token, it compares the global step with its local step.
    Nothing when the token is taken inside a cond branch (gradient accumulation's)."""
    take = _token_take(optimizer)
    if take is None:
        return
    local_step, global_step = optimizer._local_step, optimizer._global_step
    with tf.name_scope(None), tf.name_scope('sync_late_steps'):
        with tf.colocate_with(local_step):
            counted = tf.Variable(0, dtype=tf.int64, trainable=False, use_resource=True,
                                  collections=[tf.GraphKeys.LOCAL_VARIABLES], name='count')
        with tf.colocate_with(global_step), tf.control_dependencies(take.control_inputs):
            current = global_step.read_value()
        with tf.colocate_with(local_step):
            late = tf.cast(local_step.read_value() < current, tf.int64)
            take._add_control_input(counted.assign_add(late, read_value=False))
    tf.add_to_collection(LATE_STEPS, counted)


def late_steps():
    """None without count_late_steps in the current graph, else the local variable counting
    this worker's late steps (an int64 scalar)."""
    (counted,) = tf.get_collection(LATE_STEPS) or (None,)
    return counted


def tokens_of_the_next_step(optimizer, count):
    """The op queuing `count` tokens of the global step + 1 for the workers of `optimizer` (a
    tf.train.SyncReplicasOptimizer whose apply_gradients has built its step): newer than any
    worker's local step, each lets a waiting step go."""
    global_step = optimizer._global_step
    with tf.device(global_step.device):
        return optimizer._sync_token_queue.enqueue_many(
            tf.fill([count], global_step.read_value() + 1))


def lateness(previous, late):
    """A worker's lateness after a step, `late` or in time, from lateness `previous` (0 at
    the start): one more, or one less, within 0 and LATEST."""
    return min(previous + 1, LATEST) if late else max(previous - 1, 0)


def sit_out_updates(lateness_now):
    """The updates a worker whose step was late, leaving its lateness at `lateness_now`,
    waits for before its next step: 0 below SIT_OUT_AFTER, then 1, 4, 16 (at LATEST)."""
    return 0 if lateness_now < SIT_OUT_AFTER else 4 ** (lateness_now - SIT_OUT_AFTER)


def tokens_passed_over(optimizer, workers):
    """A scalar int64 tensor: the tokens that the steps of workers range(`workers`) have
    passed over (take_newer_tokens_only), on the token queue's device of `optimizer`, since
    its ps task started."""
    with tf.device(optimizer._sync_token_queue.queue_ref.device):
        return tf.reduce_sum(_find(_passed_over_table(), tf.range(workers, dtype=tf.int64)))


def _token_take(optimizer):
    """The op of `optimizer`'s step (a tf.train.SyncReplicasOptimizer's, in the current
    graph) that takes its token once its gradients are pushed; None when it is inside a cond
    branch (gradient accumulation's)."""
    queue = optimizer._sync_token_queue
    takes = [op for op in tf.get_default_graph().get_operations()
             if op.type == 'QueueDequeueV2' and op.inputs[0] is queue.queue_ref]
    (take,) = takes or (None,)
    return take


def _passed_over_table():
    """The table {worker index: tokens its steps passed over} that every worker's graph names
    (not a variable: checkpoints do not hold it), on the current device."""
    return tf.raw_ops.MutableHashTableV2(key_dtype=tf.int64, value_dtype=tf.int64,
                                         shared_name='slim_deploy_sync_tokens_passed_over',
                                         name='tokens_passed_over')


def _find(table, keys):
    return tf.raw_ops.LookupTableFindV2(table_handle=table, keys=keys,
                                        default_value=tf.constant(0, tf.int64))
