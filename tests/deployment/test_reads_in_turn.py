"""Reads in turn (create_clones' reads_in_turn, which deploy() sets to train with ps tasks,
unless the reads are prefetched): each step's reads of the ps tasks' variables start once it
holds a lock on the first ps task, and it lets go once the values have reached the worker.
The lock and its release in deploy()'s graph, a real step through gRPC servers waiting for
the lock, and the lock freed when the worker holding it dies."""
import json
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.deployment import placement, turns
from slim_deploy.deployment.model_deploy import DeploymentConfig, create_clones, deploy

from clusters import servers_here
from graphs import built, lenet_model_fn

PS_CPU = '/job:ps/task:0/device:CPU:0'
WORKER_CPU = '/job:worker/task:0/device:CPU:0'


def _sync_built(config, replicas_to_aggregate=2):
    """The graph deploy() builds of lenet with `config` and a SyncReplicasOptimizer of
    config.num_replicas workers."""
    optimizer = tf.train.SyncReplicasOptimizer(
        tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate, config.num_replicas)
    graph = built(config, lenet_model_fn(), optimizer)
    optimizer.ready_for_local_init_op.mark_used()  # Else TF logs an error when it is freed.
    return graph


def _ops(graph, op_type):
    return [op for op in graph.get_operations() if op.type == op_type]


@pytest.mark.parametrize('synchronous', [True, False])
def test_workers_read_every_variable_under_the_lock_and_release_it(synchronous):
    config = DeploymentConfig(num_clones=2, num_replicas=2, num_ps_tasks=2)
    graph = _sync_built(config) if synchronous else built(config, lenet_model_fn())
    (lock,) = _ops(graph, 'MutexLock')
    (release,) = _ops(graph, 'ConsumeMutexLock')
    assert lock.device == release.device == PS_CPU
    assert release.inputs[0] is lock.outputs[0]
    with graph.as_default():
        variables = tf.trainable_variables()
    reads = [graph.get_operation_by_name(f'{v.op.name}/Read/in_turn') for v in variables]
    assert {v.device for v in variables} == {PS_CPU, '/job:ps/task:1/device:CPU:0'}
    for variable, read in zip(variables, reads):
        assert lock in read.control_inputs and read.device == variable.device
    # The release waits for each value to be on the worker, and the step runs it.
    arrived = {op.inputs[0].op for op in release.control_inputs}
    assert arrived == set(reads) and {op.device for op in release.control_inputs} == {WORKER_CPU}
    assert release in graph.get_operation_by_name('train_op').control_inputs
    # Every clone's layers take the values read under the lock.
    forward = [op for op in graph.get_operations()
               if op.name.startswith(('clone_0/LeNet', 'clone_1/LeNet'))]
    assert forward and {t.op for op in forward for t in op.inputs
                        if t.op.type == 'ReadVariableOp' and 'ps' in t.op.device} == set()


@pytest.mark.parametrize('num_ps_tasks, partition_min_mb, readers', [
    (4, None, 1),  # fc3/weights, 12.8 of lenet's 13.1 MB, on one task: one reader at a time.
    (4, 1, 4),  # In 4 parts, one per task: 4 workers read at once.
    (2, 1, 2),
])
def test_as_many_workers_read_at_once_as_the_ps_tasks_can_serve(num_ps_tasks, partition_min_mb,
                                                              readers):
    """Worker i takes lock i mod R, R the reads' bytes over the largest variable's, at most
    the ps tasks."""
    partitioner = partition_min_mb and placement.min_size_partitioner(partition_min_mb * 10**6,
                                                                      num_ps_tasks)
    locks = set()
    for replica_id in range(5):
        config = DeploymentConfig(num_replicas=5, replica_id=replica_id,
                                  num_ps_tasks=num_ps_tasks, variable_partitioner=partitioner)
        (mutex,) = _ops(built(config, lenet_model_fn()), 'MutexV2')
        name = mutex.get_attr('shared_name').decode()
        assert name == f'slim_deploy_reads_in_turn_{replica_id % readers}'
        locks.add(name)
    assert len(locks) == readers


@pytest.mark.parametrize('config', [
    DeploymentConfig(num_replicas=2, num_ps_tasks=1, prefetch_reads=True),
    DeploymentConfig(num_clones=2),  # No ps task: nothing crosses to read.
    DeploymentConfig(num_replicas=2, variable_update='collective'),
], ids=['prefetched', 'one_process', 'collective'])
def test_workers_without_reads_across_take_no_lock(config):
    assert not _ops(built(config, lenet_model_fn()), 'MutexLock')


@pytest.mark.parametrize('replicas_to_aggregate', [2, 4])
def test_backup_workers_read_under_a_lease(replicas_to_aggregate):
    """Updates of 2 of 3 workers' gradients (or micro-batches of 2 of them): the turn is a
    lease, which the chief's checks take back from a late worker, not a lock it would keep;
    every session's start checks it too (a first token)."""
    graph = _sync_built(DeploymentConfig(num_replicas=3, num_ps_tasks=1), replicas_to_aggregate)
    assert _ops(graph, 'MutexLock') == []
    assert graph.get_operation_by_name('reads_in_turn/take').device == PS_CPU
    (check,) = graph.get_collection(turns.CHECKS)
    assert check.op in graph.get_collection(tf.GraphKeys.TABLE_INITIALIZERS)
    assert len(_ops(_sync_built(DeploymentConfig(num_replicas=3, num_ps_tasks=1), 3),
                    'MutexLock')) == 1


def test_evaluation_takes_no_lock():
    with tf.Graph().as_default() as graph:
        deploy(DeploymentConfig(num_replicas=2, num_ps_tasks=1), lenet_model_fn())
    assert not _ops(graph, 'MutexLock')


def test_with_xla_the_reads_stay_out_of_the_clusters():
    """A cluster would hold the lock until its computation ends."""
    graph = built(DeploymentConfig(num_replicas=2, num_ps_tasks=1, xla=True), lenet_model_fn())
    (release,) = _ops(graph, 'ConsumeMutexLock')
    received = release.control_inputs
    turn_ops = [*_ops(graph, 'MutexLock'), *received, *(op.inputs[0].op for op in received)]
    assert len(turn_ops) == 1 + 2 * 8
    assert not any(op.get_attr('_XlaCompile') for op in turn_ops)
    conv = graph.get_operation_by_name('LeNet/conv1/Conv2D')
    assert conv.get_attr('_XlaCompile')


def _turn_ops(graph):
    """The ops of the reads in turn: the mutex, its lock and release, the reads under it and
    their values on the worker."""
    (release,) = _ops(graph, 'ConsumeMutexLock')
    received = release.control_inputs
    return [*_ops(graph, 'MutexV2'), *_ops(graph, 'MutexLock'), release, *received,
            *(op.inputs[0].op for op in received)]


def test_the_turn_stays_out_of_a_callers_xla_clusters():
    """deploy() built inside the caller's jit_scope: no op of the turn joins a cluster."""
    with tf.Graph().as_default() as graph, tf.xla.experimental.jit_scope():
        deploy(DeploymentConfig(num_replicas=2, num_ps_tasks=1), lenet_model_fn(),
               optimizer=tf.train.GradientDescentOptimizer(0.1))
    turn_ops = _turn_ops(graph)
    assert len(turn_ops) == 3 + 2 * 8
    assert [op.name for op in turn_ops if op.get_attr('_XlaCompile')] == []


def test_the_lock_waits_for_nothing_model_fn_waits_for():
    """model_fn makes its variables under a control dependency on its input: the lock is
    taken at once all the same, the reads waiting for it alone."""
    def model_fn():
        images = tf.zeros([2, 28, 28, 1], name='images')
        with tf.control_dependencies([images]):
            lenet_model_fn()()

    graph = built(DeploymentConfig(num_replicas=2, num_ps_tasks=1), model_fn)
    (lock,) = _ops(graph, 'MutexLock')
    (mutex,) = _ops(graph, 'MutexV2')
    assert lock.control_inputs == mutex.control_inputs == []
    assert lock.inputs[0].op is mutex


def _quadratic():
    """model_fn: loss 0.5 * |w|^2 of a 3-vector w starting at 1."""
    w = tf.get_variable('w', [3], initializer=tf.ones_initializer(), use_resource=True)
    tf.losses.add_loss(0.5 * tf.reduce_sum(tf.square(w)))


def _holding(device, gate_device):
    """(taken, gate, hold): running `hold` takes the lock of reads in turn on `device`, as
    another worker's step, puts an element in queue `taken` and keeps the lock until queue
    `gate` (on `gate_device`) gets one."""
    with tf.device(device):
        taken = tf.FIFOQueue(1, tf.int32, [], shared_name='taken')
        held = turns.mutex_take(device, 0)
        with tf.control_dependencies([held]):
            said = taken.enqueue(0)
    with tf.device(gate_device), tf.control_dependencies([said]):
        gate = tf.FIFOQueue(1, tf.int32, [])
        opened = gate.dequeue()
    with tf.device(device), tf.control_dependencies([opened]):
        return taken, gate, tf.raw_ops.ConsumeMutexLock(mutex_lock=held)


def _clones_step(num_replicas=1):
    """The fetches of a step of _quadratic's clones reading in turn from 1 ps task: the
    loss, and the lock's release."""
    config = DeploymentConfig(num_ps_tasks=1, num_replicas=num_replicas, clone_on_cpu=True)
    create_clones(config, _quadratic, reads_in_turn=True)
    return [tf.losses.get_total_loss(), tf.get_collection(tf.GraphKeys.UPDATE_OPS)]


def test_a_step_reads_once_another_lets_go_of_the_lock():
    """1 ps task and 1 worker, gRPC servers in this process: while another step holds the
    lock (until a queue gets an element) a step of the clones waits; once it is let go the
    step computes with the values read, and releases the lock for the next."""
    servers = servers_here()
    with tf.Graph().as_default():
        step = _clones_step()
        taken, gate, hold = _holding(PS_CPU, PS_CPU)
        with tf.Session(servers[1].target) as session:
            session.run(tf.global_variables_initializer())
            holder = threading.Thread(target=session.run, args=(hold,), daemon=True)
            holder.start()
            losses = []
            reader = threading.Thread(target=lambda: losses.append(session.run(step)[0]),
                                      daemon=True)
            # It holds the lock, waiting for the gate.
            session.run(taken.dequeue(), options=tf.RunOptions(timeout_in_ms=60000))
            reader.start()
            reader.join(timeout=1)  # A step alone takes milliseconds.
            assert reader.is_alive() and not losses
            session.run(gate.enqueue(0))
            for thread in (holder, reader):
                thread.join(timeout=60)
                assert not thread.is_alive()
            np.testing.assert_allclose(losses, [1.5])
            np.testing.assert_allclose(session.run(step)[0], 1.5)  # The step let go.
            for _ in range(2):  # A step that does not run the release lets go as it ends.
                np.testing.assert_allclose(
                    session.run(step[0], options=tf.RunOptions(timeout_in_ms=60000)), 1.5)


def test_a_lease_kept_too_long_is_taken_back_and_given_back_late_is_dropped(monkeypatch):
    """1 ps task and 1 worker, gRPC servers in this process: a holder takes the lease's
    token and keeps it (a frozen worker); a step of the clones waits for it until a check,
    once the hold has outlasted OVERDUE_FLOOR_SECS, issues a token of the next generation;
    the step then reads and gives that token back, and the frozen holder's token, given back
    late, is dropped: one token remains."""
    monkeypatch.setattr(turns, 'OVERDUE_FLOOR_SECS', 3.0)
    servers = servers_here()
    with tf.Graph().as_default():
        config = DeploymentConfig(num_ps_tasks=1, clone_on_cpu=True)
        create_clones(config, _quadratic, reads_in_turn='lease')
        step = [tf.losses.get_total_loss(), tf.get_collection(tf.GraphKeys.UPDATE_OPS)]
        (check,) = tf.get_collection(turns.CHECKS)
        lease = turns.Lease(PS_CPU, 0)  # The same, by its shared names.
        token, _ = lease.take(0)
        late_give_back = lease.give_back(tf.constant(1, tf.int64), 0)
        with tf.device(PS_CPU):
            tokens_left = tf.raw_ops.QueueSizeV2(handle=lease._tokens)
        with tf.Session(servers[1].target) as session:
            session.run(tf.global_variables_initializer())
            issued_at = time.monotonic()  # Before the ps task's clock starts the hold.
            assert session.run(check)  # The first token, as a session's start issues it.
            assert session.run(token) == 1  # Taken, never given back.
            assert not session.run(check)  # Not overdue yet.
            losses = []
            reader = threading.Thread(target=lambda: losses.append(session.run(step)[0]),
                                      daemon=True)
            reader.start()
            reader.join(timeout=0.5)  # A step alone takes milliseconds.
            assert reader.is_alive()
            while not session.run(check):
                time.sleep(0.05)
            assert time.monotonic() - issued_at > 3.0
            reader.join(timeout=60)
            assert not reader.is_alive()
            np.testing.assert_allclose(losses, [1.5])
            session.run(late_give_back)
            assert session.run(tokens_left) == 1  # Generation 2's, given back by the step.
            np.testing.assert_allclose(session.run(step)[0], 1.5)


@pytest.mark.parametrize('slow', [True, False])
def test_a_worker_taken_back_reads_out_of_turn_for_a_while_if_its_hold_was_slow(
        monkeypatch, slow):
    """A lease's token, held by worker 1 until a check takes it back (OVERDUE_FLOOR_SECS 0,
    the typical hold one of worker 0's) and then as long again twice, then given back late:
    as that hold lasted more than OUT_OF_TURN_FACTOR typical holds, its next
    OUT_OF_TURN_STEPS takes give NO_TOKEN at once while another worker holds the token, and
    the one after waits for it; with a factor too large for that hold, its next take waits."""
    monkeypatch.setattr(turns, 'OVERDUE_FLOOR_SECS', 0.0)
    if not slow:
        monkeypatch.setattr(turns, 'OUT_OF_TURN_FACTOR', 1e9)
    servers = servers_here()
    with tf.Graph().as_default():
        lease = turns.Lease(PS_CPU, 0)
        check = lease.check()
        (take_0, _), (take_1, _) = lease.take(0), lease.take(1)
        token = tf.placeholder(tf.int64, [])
        give_back_0, give_back_1 = lease.give_back(token, 0), lease.give_back(token, 1)
        with tf.device(PS_CPU):
            another_takes = tf.raw_ops.QueueDequeueV2(handle=lease._tokens,
                                                      component_types=[tf.int64])
        waits = dict(options=tf.RunOptions(timeout_in_ms=300))
        with tf.Session(servers[1].target) as session:
            assert session.run(check)  # Token 1.
            session.run(give_back_0, {token: session.run(take_0)})  # A hold of milliseconds.
            assert session.run(take_1) == 1
            taken_at = time.monotonic()
            while not session.run(check):  # Token 2, once worker 1's hold is overdue...
                time.sleep(0.01)
            time.sleep(2 * (time.monotonic() - taken_at))  # ...and 3 times that long.
            session.run(give_back_1, {token: 1})  # Late: dropped.
            assert session.run(another_takes) == [2]
            for _ in range(turns.OUT_OF_TURN_STEPS if slow else 0):
                assert session.run(take_1, **waits) == turns.NO_TOKEN
            with pytest.raises(tf.errors.DeadlineExceededError):
                session.run(take_1, **waits)


# Another worker whose step holds the lock until its own queue, which nothing feeds, gets an
# element: the ps task's part of its step waits for that worker's part.
HOLDER = """
import json, sys
import tensorflow.compat.v1 as tf
sys.path[:0] = sys.argv[2:]  # This file's folder and the tests' (for graphs).
from test_reads_in_turn import _holding
tf.disable_eager_execution()
server = tf.distribute.Server(tf.train.ClusterSpec(json.loads(sys.argv[1])), 'worker', 1)
with tf.Graph().as_default(), tf.Session(server.target) as session:
    session.run(_holding('/job:ps/task:0/device:CPU:0', '/job:worker/task:1/device:CPU:0')[2])
"""


@pytest.mark.slow
def test_a_worker_that_dies_holding_the_lock_lets_go_of_it():
    """A ps task in this process, a worker process holding the lock: killed, its step on the
    ps task ends (its part there can no longer hear from it) and frees the lock at once."""
    ports = free_ports(LOCALHOST, 3)
    spec = {'ps': [f'{LOCALHOST}:{ports[0]}'],
            'worker': [f'{LOCALHOST}:{ports[1]}', f'{LOCALHOST}:{ports[2]}']}
    cluster = tf.train.ClusterSpec(spec)
    servers = [tf.distribute.Server(cluster, job, 0, start=True) for job in ('ps', 'worker')]
    here = pathlib.Path(__file__).parent
    holder = subprocess.Popen([sys.executable, '-c', HOLDER, json.dumps(spec), str(here),
                               str(here.parent)])
    try:
        with tf.Graph().as_default():
            step = _clones_step(num_replicas=2)
            with tf.device(PS_CPU):
                taken = tf.FIFOQueue(1, tf.int32, [], shared_name='taken')
            options = tf.ConfigProto(device_filters=['/job:ps', '/job:worker/task:0'])
            with tf.Session(servers[1].target, config=options) as session:
                session.run(tf.global_variables_initializer())
                # The holder holds the lock (or failed to start within a minute).
                session.run(taken.dequeue(), options=tf.RunOptions(timeout_in_ms=60000))
                losses = []
                reader = threading.Thread(target=lambda: losses.append(session.run(step)[0]),
                                          daemon=True)
                reader.start()
                reader.join(timeout=2)
                assert reader.is_alive() and not losses
                holder.kill()
                reader.join(timeout=60)
                assert not reader.is_alive()
                np.testing.assert_allclose(losses, [1.5])
    finally:
        holder.kill()
        holder.wait()
