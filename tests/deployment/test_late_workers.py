"""Backup workers and a late worker (slim_deploy.deployment.late_workers): stale gradients stay
on their worker, a worker's steps pass over the tokens of past steps and give an update at
most one gradient, and a worker stale step after step sits out updates
(training.loop.SyncReplicasHook)."""
import threading
import time

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import late_workers, turns
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.training import loop

from clusters import servers_here

PS_CPU = '/job:ps/task:0/device:CPU:0'
WORKER_CPU = '/job:worker/task:0/device:CPU:0'


def _weights():
    """model_fn: loss 0.5 * |w|^2 of a 3-vector w starting at 1, and of a 2x2 v at 2."""
    w = tf.get_variable('w', [3], initializer=tf.ones_initializer(), use_resource=True)
    v = tf.get_variable('v', [2, 2], initializer=tf.constant_initializer(2.0),
                        use_resource=True)
    tf.losses.add_loss(0.5 * (tf.reduce_sum(tf.square(w)) + tf.reduce_sum(tf.square(v))))


def _deployed(replicas_to_aggregate, workers=2):
    """(train_op, the optimizer) of worker 0 of `workers` on 1 ps task, in the current
    graph."""
    config = DeploymentConfig(num_replicas=workers, num_ps_tasks=1, clone_on_cpu=True)
    optimizer = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                               replicas_to_aggregate, workers)
    model = deploy(config, _weights, optimizer=optimizer)
    optimizer.ready_for_local_init_op.mark_used()  # Else TF logs an error when it is freed.
    return model.train_op, optimizer


def _gates(graph):
    return sorted((op for op in graph.get_operations()
                   if op.type == 'Merge' and op.name.endswith('sent_when_fresh/arrived')),
                  key=lambda op: op.name)


def test_only_backup_workers_gate_their_gradients_where_the_accumulator_takes_them():
    with tf.Graph().as_default() as graph:
        _deployed(replicas_to_aggregate=1)
    gates = _gates(graph)
    applies = [op for op in graph.get_operations()
               if op.type == 'ResourceAccumulatorApplyGradient']
    assert len(applies) == 2 and {apply.inputs[2].op for apply in applies} == set(gates)
    for apply in applies:
        gate = apply.inputs[2].op
        assert gate.device == apply.device == PS_CPU
        sent, zeros = gate.inputs
        assert sent.op.type == 'Switch' and sent.op.device == WORKER_CPU
        assert zeros.op.device == PS_CPU
    with tf.Graph().as_default() as graph:
        _deployed(replicas_to_aggregate=2)  # No backup worker: nothing is gated.
    assert not _gates(graph)


def test_a_gradient_crosses_while_fresh_and_zeros_are_made_on_the_ps_task_once_stale():
    """1 ps task and worker 0 of 2, gRPC servers in this process. A step whose local step
    is the global step sends its gradients, which the accumulators take; once an update has
    passed (the global step and the accumulators' moved on, as the chief's update moves
    them), its gradients stay on the worker, the accumulators drop the zeros they get, and
    the step is counted late."""
    servers = servers_here()
    with tf.Graph().as_default() as graph:
        train_op, optimizer = _deployed(replicas_to_aggregate=1)
        gates = [gate.outputs[1] for gate in _gates(graph)]  # 0: the gradient; 1: zeros.
        accumulators = [accumulator for accumulator, _ in optimizer._accumulator_list]
        accumulated = [accumulator.num_accumulated() for accumulator in accumulators]
        late = late_workers.late_steps().read_value()
        global_step = tf.train.get_global_step()
        passed = [global_step.assign(5)]
        with tf.control_dependencies(passed):
            passed += [accumulator.set_global_step(5) for accumulator in accumulators]
        (check,) = tf.get_collection(turns.CHECKS)
        with tf.Session(servers[1].target) as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            session.run([optimizer.chief_init_op, check])
            session.run(optimizer._sync_token_queue.enqueue_many([[1, 5]]))
            _, arrived = session.run([train_op, gates])
            np.testing.assert_array_equal(arrived, [0, 0])
            assert session.run(accumulated) == [1, 1]
            assert session.run(late) == 0
            session.run(passed)
            _, arrived = session.run([train_op, gates])
            np.testing.assert_array_equal(arrived, [1, 1])
            assert session.run(accumulated) == [1, 1]
            assert session.run(late) == 1


def test_a_step_is_judged_late_once_its_gradients_are_pushed_before_it_takes_its_token():
    """The count's read of the global step waits for every push into an accumulator (a
    gradient crossing a slow link may arrive after the update), and the token's take waits
    for the count; only backup workers count."""
    with tf.Graph().as_default() as graph:
        _, optimizer = _deployed(replicas_to_aggregate=1)
    (take,) = [op for op in graph.get_operations() if op.type == 'QueueDequeueV2'
               and op.inputs[0] is optimizer._sync_token_queue.queue_ref]
    (count,) = [op for op in take.control_inputs if op.name.startswith('sync_late_steps/')]
    (read,) = [op for op in graph.get_operations()
               if op.name.startswith('sync_late_steps/') and op.type == 'ReadVariableOp'
               and op.inputs[0].op is optimizer._global_step.op]
    applies = {op for op in graph.get_operations()
               if op.type == 'ResourceAccumulatorApplyGradient'}
    assert len(applies) == 2 and applies <= set(read.control_inputs)
    assert read.device == PS_CPU and count.device == WORKER_CPU
    with tf.Graph().as_default():
        _deployed(replicas_to_aggregate=2)  # No backup worker.
        assert late_workers.late_steps() is None


def _newer_token_loops(graph):
    return [op for op in graph.get_operations()
            if op.type in ('While', 'StatelessWhile') and 'sync_newer_token' in op.name]


def test_only_fewer_gradients_than_workers_take_newer_tokens_only():
    for replicas_to_aggregate, workers, loops in ((1, 2, 1), (2, 2, 0), (3, 2, 0)):
        with tf.Graph().as_default() as graph:
            _deployed(replicas_to_aggregate, workers)
        assert len(_newer_token_loops(graph)) == loops, (replicas_to_aggregate, workers)


def test_a_step_passes_over_tokens_of_past_steps_and_of_the_step_it_gave_a_gradient():
    """1 ps task and worker 0 of 2, gRPC servers in this process. At local and global step 0,
    with tokens 0, 0, 3 and 5 queued (two of step 0, as the chief's start queues them), a
    step passes over the first two and goes on at local step 3 (a token newer than the
    global step, as a run resumed from an older checkpoint leaves); the next takes 5. With
    the global step at 8, and tokens 7 and 8: it passes over 7. A release token, the global
    step's next, lets a step at the global step go on. The passed-over tokens are counted
    under the worker's index."""
    servers = servers_here()
    with tf.Graph().as_default():
        train_op, optimizer = _deployed(replicas_to_aggregate=1)
        queue = optimizer._sync_token_queue
        tokens = tf.placeholder(tf.int64, [None])
        queue_tokens, tokens_left = queue.enqueue_many(tokens), queue.size()
        local_step = optimizer._local_step.read_value()
        global_step = tf.train.get_global_step()
        release = late_workers.tokens_of_the_next_step(optimizer, 1)
        passed_over = late_workers.tokens_passed_over(optimizer, 2)
        (check,) = tf.get_collection(turns.CHECKS)
        with tf.Session(servers[1].target) as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            session.run([optimizer.chief_init_op, check])
            session.run(queue_tokens, {tokens: [0, 0, 3, 5]})
            session.run(train_op)
            assert session.run([local_step, tokens_left, passed_over]) == [3, 1, 2]
            session.run(train_op)
            assert session.run([local_step, tokens_left]) == [5, 0]
            session.run([global_step.assign(8), queue_tokens], {tokens: [7, 8]})
            session.run(train_op)
            assert session.run([local_step, tokens_left, passed_over]) == [8, 0, 3]
            session.run(release)
            session.run(train_op, options=tf.RunOptions(timeout_in_ms=30000))
            assert session.run([local_step, tokens_left]) == [9, 0]


def test_late_steps_raise_the_lateness_steps_in_time_lower_it_and_it_sets_the_sit_out():
    lateness, seen = 0, []
    for late in [True] * 5 + [False] + [True] + [False] * 5:
        lateness = late_workers.lateness(lateness, late)
        seen.append(lateness)
    assert seen == [1, 2, 3, 4, 4, 3, 4, 3, 2, 1, 0, 0]
    assert [late_workers.sit_out_updates(n) for n in range(late_workers.LATEST + 1)] == [
        0, 0, 1, 4, 16]


STEP_SECS = 0.6  # A step of _Steps; every update interval is at least this long, so the
# global step must stand still for at least 2 x STEP_SECS before a wait goes on.
NO_WAIT_SECS = 0.3  # after_run takes less without a wait, even on a loaded machine.
INTO_WAIT_SECS = 0.2  # When a thread acts during a wait, which then ends soon after (up to
# 0.5 s later seen on a loaded machine), well before 2 x STEP_SECS.


class _Steps:
    """Drives worker 0's SyncReplicasHook (of 2 workers, 1 gradient per update) of
    `optimizer` on `session` as a training loop would: each step(fresh, update) lasts
    STEP_SECS, makes an update (the global step + 1) if `update`, and, unless fresh, is late
    (it counts one in the late steps' variable); it returns the seconds after_run waited.
    A step's `in_the_wait` (None: nothing) is called by a thread INTO_WAIT_SECS into that
    wait."""

    def __init__(self, optimizer, session, last_step=None):
        self.hook = loop.SyncReplicasHook(optimizer, False, 2, 1, last_step)
        self.hook.begin()
        self._late = late_workers.late_steps().assign_add(1)
        self._update = tf.train.get_global_step().assign_add(1)
        self.hook.after_create_session(session, None)
        self._session = session

    def step(self, fresh, update=True, in_the_wait=None):
        time.sleep(STEP_SECS)
        self._session.run(([] if fresh else [self._late]) + ([self._update] if update else []))
        began = time.monotonic()
        if in_the_wait is not None:
            threading.Timer(INTO_WAIT_SECS, in_the_wait).start()
        self.hook.after_run(tf.train.SessionRunContext((), self._session), None)
        return time.monotonic() - began

    def make_update(self):
        """Makes an update, as another worker would."""
        self._session.run(self._update)


def _ended_by_the_thread(secs):
    """Whether a wait of `secs` ended when a thread acted INTO_WAIT_SECS into it, before the
    global step had stood still long enough to end it."""
    return INTO_WAIT_SECS <= secs < 2 * STEP_SECS


@pytest.mark.slow
def test_a_worker_sits_out_until_the_updates_pass_the_global_step_stands_still_or_a_stop():
    """Worker 0's hook on in-process servers, an update every STEP_SECS: after 2 late steps in
    a row it waits for 1 update (made by a thread during the wait), and its local step is
    moved to the global step (so its next step is not stale from its start); after 3, for 4
    updates, but it goes on once the global step has stood still for twice the typical
    update. A step in time goes on at once, and the next late one waits for 4 again; one
    more, until a stop (release) during the wait."""
    servers = servers_here()
    with tf.Graph().as_default():
        _, optimizer = _deployed(replicas_to_aggregate=1)
        global_step = tf.train.get_global_step()
        with tf.Session(servers[1].target) as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            steps = _Steps(optimizer, session)
            assert steps.step(False) < NO_WAIT_SECS  # Once.
            assert _ended_by_the_thread(steps.step(False, in_the_wait=steps.make_update))
            assert session.run([global_step, optimizer._local_step]) == [3, 3]
            # The global step stands still (the upper bound only shows that the wait ends).
            assert 1.9 * STEP_SECS < steps.step(False, update=False) < 8 * STEP_SECS
            assert steps.step(True) < NO_WAIT_SECS
            assert 1.9 * STEP_SECS < steps.step(False, update=False) < 8 * STEP_SECS
            assert _ended_by_the_thread(
                steps.step(False, update=False, in_the_wait=steps.hook.release))


@pytest.mark.slow
def test_a_worker_that_sat_out_to_the_last_step_keeps_its_local_step():
    """Worker 0's hook with last step 3 on in-process servers: a sit out from global step 2
    ends when an update (made by a thread during the wait) reaches the last step, and leaves
    the local step at 0, so that the step the worker still runs is stale (no update past the
    last, no wait for one); a late step at the last step does not wait for updates that will
    not come."""
    servers = servers_here()
    with tf.Graph().as_default():
        _, optimizer = _deployed(replicas_to_aggregate=1)
        with tf.Session(servers[1].target) as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            steps = _Steps(optimizer, session, last_step=3)
            steps.step(False)
            assert _ended_by_the_thread(steps.step(False, in_the_wait=steps.make_update))
            assert session.run([tf.train.get_global_step(), optimizer._local_step]) == [3, 0]
            assert steps.step(False, update=False) < NO_WAIT_SECS
