"""Turns to read: the locks with which workers' steps take turns to read the variables.

A lock (caching_reads' turn_device and index) is either TensorFlow's mutex, which a step
holds until it lets go or ends, or a lease, which a checker can take back from a holder that
has kept it too long (a frozen or dead worker), so that the others go on: what backup workers
need.

A lease is a queue of tokens on the lock's device and a table of its state (the current
generation, when the token was last taken and the typical hold, a moving average in which
each hold counts a quarter, in microseconds; each worker's steps left out of turn and when
its last hold began), both under shared names, so that every worker's graph names the same
ones; neither is a variable, so checkpoints do not hold them. A step takes the token, reads,
and gives it back once the values have reached it, unless its generation has passed
meanwhile. The check (Lease.check) issues a token of the next generation when there is none
yet, or when the token is out and the hold has lasted more than OVERDUE_FACTOR times the
typical hold and OVERDUE_FLOOR_SECS: a token given back late, of an old generation, is
dropped. If that hold lasted more than OUT_OF_TURN_FACTOR typical holds (a worker slow to
receive, such as one on a slower link, rather than one whose reads shared the link with a
reader out of turn), the worker's next OUT_OF_TURN_STEPS steps read without a token, so that
it holds up the others' turns once in OUT_OF_TURN_STEPS + 1 of its steps rather than at each.
A check that races a give-back can leave two tokens for a while; the next give-back of the
older drops it.
"""
import contextlib
import threading

import tensorflow.compat.v1 as tf

OVERDUE_FACTOR = 2.0  # A hold longer than this many times the typical one may be taken back...
OVERDUE_FLOOR_SECS = 0.05  # ...if it has lasted this long too.
CHECK_EVERY_SECS = 0.02  # How often the chief's LeaseChecks runs the checks.
OUT_OF_TURN_FACTOR = 2.5  # A worker whose hold was taken back, and lasted this many times
OUT_OF_TURN_STEPS = 4  # the typical one, reads out of turn for this many steps.
NO_TOKEN = 0  # take()'s token for a step that reads out of turn (generations start at 1).
_GENERATION, _TAKEN_AT, _TYPICAL_HOLD = 0, 1, 2  # Keys of a lease's table...
_STEPS_OUT_OF_TURN, _HOLD_BEGAN = 0, 1  # ...and fields of each worker's (_key()).
_MISSING = -1  # What the table gives for a key it does not hold.
CHECKS = 'slim_deploy_reads_in_turn_lease_checks'  # Graph collection of Lease.check()s.


def mutex_take(device, index):
    """The op taking mutex lock `index` on `device`; a step holds it until the op that
    consumes it (mutex_release) runs or the step ends."""
    with _outside(device):
        mutex = tf.raw_ops.MutexV2(shared_name=f'slim_deploy_reads_in_turn_{index}',
                                   name='mutex')
        return tf.raw_ops.MutexLock(mutex=mutex, name='take')


def mutex_release(take, device, scope='reads_in_turn/'):
    """The op letting go of the lock `take` (mutex_take's) holds, in name scope `scope`
    (absolute, ending in '/')."""
    with _outside(device, scope):
        return tf.raw_ops.ConsumeMutexLock(mutex_lock=take, name='release')


class Lease:
    """Lease `index` on `device` (a ps task's), in the current graph."""

    def __init__(self, device, index):
        self._device = device
        with _outside(device):
            self._tokens = tf.raw_ops.FIFOQueueV2(
                component_types=[tf.int64], shapes=[[]],
                shared_name=f'slim_deploy_reads_in_turn_lease_{index}', name='tokens')
            self._state = tf.raw_ops.MutableHashTableV2(
                key_dtype=tf.int64, value_dtype=tf.int64,
                shared_name=f'slim_deploy_reads_in_turn_lease_state_{index}', name='state')

    def take(self, worker):
        """(the token taken, a scalar int64 tensor, NO_TOKEN when worker `worker` (its index)
        reads out of turn; the op after which the step may read, which the reads wait for)."""
        with _outside(self._device):
            steps_left = self._get(_key(worker, _STEPS_OUT_OF_TURN))

            def out_of_turn():
                with tf.control_dependencies([self._set(_key(worker, _STEPS_OUT_OF_TURN),
                                                        steps_left - 1)]):
                    return tf.constant(NO_TOKEN, tf.int64)

            def in_turn():
                token, = tf.raw_ops.QueueDequeueV2(handle=self._tokens,
                                                   component_types=[tf.int64])
                with tf.control_dependencies([token]):
                    now = _now()
                    taken = [self._set(_TAKEN_AT, now), self._set(_key(worker, _HOLD_BEGAN), now)]
                with tf.control_dependencies(taken):
                    return tf.identity(token)
            token = tf.cond(steps_left > 0, out_of_turn, in_turn, name='take')
        return token, token.op

    def give_back(self, token, worker, scope='reads_in_turn/'):
        """The op giving `token` (take()'s, of worker `worker`) back, in name scope `scope`
        (absolute, ending in '/'); if a check has issued a newer one since, the worker reads
        out of turn for its next OUT_OF_TURN_STEPS steps instead if its hold lasted more than
        OUT_OF_TURN_FACTOR times the typical one (a worker slow to receive, not one whose
        reads were slowed by another's beside them)."""
        with _outside(self._device, scope):
            def give_back():
                hold, typical = _now() - self._get(_TAKEN_AT), self._get(_TYPICAL_HOLD)
                typical = tf.where(tf.equal(typical, _MISSING), hold, (3 * typical + hold) // 4)
                with tf.control_dependencies([self._set(_TYPICAL_HOLD, typical)]):
                    return tf.raw_ops.QueueEnqueueV2(handle=self._tokens, components=[token])

            def taken_back():
                hold = _now() - self._get(_key(worker, _HOLD_BEGAN))
                slow = tf.cast(hold, tf.float64) > OUT_OF_TURN_FACTOR * tf.cast(
                    self._get(_TYPICAL_HOLD), tf.float64)
                return self._set(_key(worker, _STEPS_OUT_OF_TURN),
                                 tf.where(slow, tf.constant(OUT_OF_TURN_STEPS, tf.int64), 0))

            def held():
                return tf.cond(tf.equal(token, self._get(_GENERATION)), give_back, taken_back)
            return tf.cond(tf.equal(token, NO_TOKEN), tf.no_op, held, name='give_back')

    def check(self):
        """A scalar bool tensor: whether this run of it issued a token (none existed yet, or
        the holder was overdue)."""
        with _outside(self._device):
            now, generation = _now(), self._get(_GENERATION)
            held, typical = now - self._get(_TAKEN_AT), self._get(_TYPICAL_HOLD)
            overdue = tf.logical_and(
                tf.equal(tf.raw_ops.QueueSizeV2(handle=self._tokens), 0),
                held > tf.maximum(tf.cast(OVERDUE_FACTOR * tf.cast(typical, tf.float64), tf.int64),
                                 int(OVERDUE_FLOOR_SECS * 1e6)))
            issue = tf.logical_or(tf.equal(generation, _MISSING), overdue)

            def issue_token():
                token = tf.maximum(generation, 0) + 1
                with tf.control_dependencies([self._set(_GENERATION, token),
                                              self._set(_TAKEN_AT, now)]):
                    enqueue = tf.raw_ops.QueueEnqueueV2(handle=self._tokens,
                                                        components=[token])
                with tf.control_dependencies([enqueue]):
                    return tf.constant(True)
            return tf.cond(issue, issue_token, lambda: tf.constant(False), name='check')

    def _get(self, key):
        return tf.raw_ops.LookupTableFindV2(table_handle=self._state,
                                            keys=tf.constant(key, tf.int64),
                                            default_value=tf.constant(_MISSING, tf.int64))

    def _set(self, key, value):
        return tf.raw_ops.LookupTableInsertV2(table_handle=self._state,
                                              keys=tf.constant(key, tf.int64), values=value)


class LeaseChecks(tf.train.SessionRunHook):
    """On the chief, runs the graph's lease checks (CHECKS) every CHECK_EVERY_SECS in a
    thread, from the session's creation to its end; nothing without leases."""

    def begin(self):
        self._checks = tf.get_collection(CHECKS)
        self._stop = threading.Event()
        self._thread = None

    def after_create_session(self, session, coord):
        if self._checks:
            self._thread = threading.Thread(target=self._run, args=(session,),
                                            name='reads_in_turn_lease_checks')
            self._thread.start()

    def _run(self, session):
        while not self._stop.wait(CHECK_EVERY_SECS):
            try:
                session.run(self._checks)
            except (tf.errors.OpError, RuntimeError):  # The session is closing.
                return

    def end(self, session):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def checked_by_sync_hook(optimizer):
    """Makes `optimizer`'s (a SyncReplicasOptimizer's) make_session_run_hook(is_chief, ...)
    return, for the chief, a hook that also runs LeaseChecks: the hook TensorFlow-style
    loops pass to their session."""
    make_hook = optimizer.make_session_run_hook

    def make_session_run_hook(is_chief, num_tokens=-1):
        hook = make_hook(is_chief, num_tokens)
        return _Both(hook, LeaseChecks()) if is_chief else hook

    optimizer.make_session_run_hook = make_session_run_hook


class _Both(tf.train.SessionRunHook):
    """Two hooks as one (whose before_run asks for nothing)."""

    def __init__(self, first, second):
        self._hooks = (first, second)

    def begin(self):
        for hook in self._hooks:
            hook.begin()

    def after_create_session(self, session, coord):
        for hook in self._hooks:
            hook.after_create_session(session, coord)

    def before_run(self, run_context):
        return self._hooks[0].before_run(run_context)

    def after_run(self, run_context, run_values):
        self._hooks[0].after_run(run_context, run_values)

    def end(self, session):
        for hook in reversed(self._hooks):
            hook.end(session)


def _key(worker, field):
    """The key of worker `worker`'s (its index) `field` in a lease's table, after the lease's
    own three keys."""
    return 3 + 2 * worker + field


def _now():
    """Now, in microseconds since the epoch (a scalar int64 tensor)."""
    return tf.cast(tf.raw_ops.Timestamp() * 1e6, tf.int64)


@contextlib.contextmanager
def _outside(device, scope='reads_in_turn/'):
    """The context of a turn's ops: on `device`, in name scope `scope` (absolute, ending in
    '/'), outside any colocation and XLA cluster (whose computation would hold a lock)."""
    with tf.name_scope(scope), tf.colocate_with(None, ignore_existing=True), \
            tf.device(device), tf.xla.experimental.jit_scope(compile_ops=False):
        yield
