"""What a training step moves over the network (slim_deploy.deployment.network_traffic): the
bytes of each link read from graphs built by deploy() (ps tasks, collective, replicated) and by
MultiWorkerMirroredStrategy against their variables and all-reduce packs and against what
TensorFlow sends, the step-time bound and the order its bytes must pass in (each way, in then
out, out then in), the ps-count advice, and the plan that placement_plan and the trainer print
with --link_gbps."""
import collections
import contextlib
import json

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.ops import collective_ops
import tf_slim as slim

from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import all_reduce, late_workers, network_traffic
from slim_deploy.deployment.model_deploy import (
    ALL_REDUCE_PACK_BYTES,
    DeploymentConfig,
    deploy,
    placement_plan,
)
from slim_deploy.deployment.network_traffic import EACH_WAY, IN_THEN_OUT, OUT_THEN_IN, Link
from slim_deploy.image_classifier import builders, train
from slim_deploy.image_classifier.config import TrainConfig
from slim_deploy.nets import nets_factory

from graphs import CPUS, LENET, built, lenet_model_fn
from helpers import run_script


def sized_model_fn(sizes):
    """model_fn making float32 variables of {name: elements}, in order, each read once by a
    loss summing them."""
    def model_fn():
        made = [tf.get_variable(name, [size]) for name, size in sizes.items()]
        tf.losses.add_loss(tf.add_n([tf.reduce_sum(v) for v in made]))
    return model_fn


def _bytes(value):
    """Bytes of a variable or tensor of known shape."""
    return value.shape.num_elements() * value.dtype.base_dtype.size


@pytest.mark.parametrize('clones, workers, ps_tasks, replica_id, strategy', [
    (1, 2, 1, 0, 'round_robin'), (2, 3, 2, 1, 'round_robin'), (2, 2, 3, 0, 'bytes')])
def test_ps_links_carry_each_variable_once_each_way(clones, workers, ps_tasks, replica_id,
                                                    strategy):
    """Each worker reads every variable once, onto its CPU, for all its clones and clone 0's
    regularizer, and sends one gradient per variable (the clones' sum) back: per worker,
    and W times that per ps task for the variables it holds. Every gradient waits for every
    read (the loss uses every variable), so a worker's link passes them in then out; a ps
    task's asynchronous workers keep both its directions busy at once."""
    config = DeploymentConfig(num_clones=clones, num_replicas=workers, replica_id=replica_id,
                              num_ps_tasks=ps_tasks, ps_strategy=strategy)
    graph = built(config, lenet_model_fn())
    with graph.as_default():
        sizes = {v.op.name: _bytes(v) for v in tf.trainable_variables()}
        devices = {v.op.name: v.op.device for v in tf.trainable_variables()}
    assert sum(sizes.values()) == LENET
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.worker == Link('worker', LENET, LENET, 2 * LENET, IN_THEN_OUT)
    for task, link in enumerate(traffic.ps_tasks):
        held = sum(size for name, size in sizes.items()
                   if devices[name] == f'/job:ps/task:{task}/device:CPU:0')
        assert link == Link(f'ps task {task}', workers * held, workers * held, workers * held,
                            EACH_WAY)
    assert traffic.all_reduces is None and traffic.unknown == 0 and not traffic.functions
    assert not traffic.synchronous
    assert {group.name for group in traffic.groups} == set(sizes)


def _sends_by_tensorflow(graph, run_metadata):
    """[(sending task, receiving task, tensor of `graph`)] of the tensors one traced step
    sent between tasks, from the graphs TensorFlow partitioned it into."""
    def task(device):
        spec = tf.DeviceSpec.from_string(device)
        return spec.job, spec.task

    nodes = {node.name: node for partition in run_metadata.partition_graphs
             for node in partition.node}
    ours = {op.name: op for op in graph.get_operations()}
    sends = []
    for node in nodes.values():
        if node.op != '_Send':
            continue
        sender, receiver = (task(node.attr[device].s.decode())
                            for device in ('send_device', 'recv_device'))
        if sender == receiver:
            continue
        name, _, index = node.input[0].partition(':')
        if name in ours:
            sends.append((sender, receiver, ours[name].outputs[int(index or 0)]))
        elif nodes[name].op == 'Exit':
            sends.append((sender, receiver, _loop_output(ours, nodes[name])))
        else:  # The partitioning's stand-in for a control edge: no bytes.
            assert nodes[name].op == 'Const' and all(i[0] == '^' for i in nodes[name].input)
    return sends


def _loop_output(ours, exit_node):
    """The output of a While op of `ours` ({name: op}) that `exit_node`, a node of its
    lowered loop, gives: one of its outputs of the same dtype, all of which have the same
    size here."""
    loop = ours[exit_node.name.rpartition('/exit/')[0]]
    dtype = tf.as_dtype(exit_node.attr['T'].type)
    candidates = [output for output in loop.outputs if output.dtype == dtype]
    assert len({_bytes(output) for output in candidates}) == 1
    return candidates[0]


def _sent_by_tensorflow(graph, run_metadata):
    """{(sending task, receiving task): bytes} of the tensors one traced step sent between
    tasks."""
    sent = collections.Counter()
    for sender, receiver, tensor in _sends_by_tensorflow(graph, run_metadata):
        sent[sender, receiver] += _bytes(tensor)
    return sent


@contextlib.contextmanager
def _cluster_session():
    """A session of worker 0 of 2 on the default graph, with 2 ps tasks (in-process gRPC
    servers on loopback, 2 CPU devices each)."""
    addresses = [f'{LOCALHOST}:{port}' for port in free_ports(LOCALHOST, 3)]
    cluster = tf.train.ClusterSpec({'ps': addresses[:2], 'worker': addresses[2:]})
    servers = [tf.distribute.Server(cluster, job_name=job, task_index=index, start=True,
                                    config=tf.ConfigProto(device_count={'CPU': 2}))
               for job, index in [('ps', 0), ('ps', 1), ('worker', 0)]]
    session_config = tf.ConfigProto(device_filters=['/job:ps', '/job:worker/task:0'])
    # Else grappler's arithmetic optimizer renames the gradient sums it sends.
    session_config.graph_options.rewrite_options.arithmetic_optimization = (
        rewriter_config_pb2.RewriterConfig.OFF)
    with tf.Session(servers[2].target, config=session_config) as session:
        yield session


def _traced_run(session, fetches):
    """The RunMetadata, with the partitioned graphs, of session.run(fetches)."""
    run_metadata = tf.RunMetadata()
    session.run(fetches, run_metadata=run_metadata, options=tf.RunOptions(
        trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True))
    return run_metadata


def batch_norm_model_fn():
    """model_fn of a convolution with batch norm (moving statistics updated each step) and
    a regularized kernel, then logits, on a batch of 2 random images."""
    images = np.random.RandomState(0).uniform(size=[2, 8, 8, 3]).astype(np.float32)

    def model_fn():
        net = slim.conv2d(tf.constant(images), 8, 3, normalizer_fn=slim.batch_norm,
                          normalizer_params={'is_training': True},
                          weights_regularizer=slim.l2_regularizer(1e-4), scope='conv')
        logits = slim.fully_connected(slim.flatten(net), 10, activation_fn=None, scope='logits')
        tf.losses.sparse_softmax_cross_entropy(tf.zeros([2], tf.int64), logits)
    return model_fn


@pytest.mark.parametrize('model_fn, strategy, resource, sync', [
    (lenet_model_fn(), 'bytes', True, False),
    (batch_norm_model_fn(), 'round_robin', False, True),
], ids=['lenet_rmsprop', 'batch_norm_sync_replicas_reference_variables'])
def test_the_bytes_are_those_tensorflow_sends_between_tasks(model_fn, strategy, resource, sync):
    """Worker 0 of 2, with 2 clones and 2 ps tasks, runs a traced step with RMSProp at a
    decaying learning rate: the tensors its partitioned graphs send between tasks add up to
    the links' bytes."""
    config = DeploymentConfig(num_clones=2, clone_devices=CPUS, num_replicas=2,
                              num_ps_tasks=2, ps_strategy=strategy)
    with tf.Graph().as_default() as graph, tf.variable_scope('', use_resource=resource):
        with tf.device(config.variables_device()):
            global_step = tf.train.get_or_create_global_step()
        with tf.device(config.optimizer_device()):
            optimizer = tf.train.RMSPropOptimizer(
                tf.train.exponential_decay(0.01, global_step, 10, 0.9), momentum=0.9)
            if sync:
                optimizer = tf.train.SyncReplicasOptimizer(optimizer, 1, total_num_replicas=2)
        model = deploy(config, model_fn, optimizer=optimizer)
        if sync:  # Else TF logs an error when it is freed.
            optimizer.ready_for_local_init_op.mark_used()
        traffic = network_traffic.step_traffic(graph, config)
        with _cluster_session() as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            if sync:
                session.run([optimizer.chief_init_op,
                             late_workers.tokens_of_the_next_step(optimizer, 1)])
            run_metadata = _traced_run(session, model.train_op)
    sent = _sent_by_tensorflow(graph, run_metadata)
    worker, ps_tasks = ('worker', 0), [('ps', 0), ('ps', 1)]
    assert traffic.worker.bytes_in == sum(sent[ps, worker] for ps in ps_tasks)
    assert traffic.worker.bytes_out == sum(sent[worker, ps] for ps in ps_tasks)
    for ps, link in zip(ps_tasks, traffic.ps_tasks):
        assert (link.bytes_in, link.bytes_out) == (2 * sent[worker, ps], 2 * sent[ps, worker])
    assert traffic.worker.bytes_in > 0 and traffic.worker.bytes_out > 0


def test_each_trainable_variable_crosses_the_network_once_per_worker_and_step():
    """2 clones and an L2-regularized kernel: TensorFlow sends each trainable variable's
    value (its read) to the worker once per step, copied on its CPU for both clones and
    the regularizer. A moving average built after deploy() under a control dependency on
    train_op, as the trainer's --moving_average_decay, reads the variables afresh, after
    the update (built on ps task 0 here, so that it adds nothing to the count)."""
    config = DeploymentConfig(num_clones=2, clone_devices=CPUS, num_replicas=2, num_ps_tasks=2)
    with tf.Graph().as_default() as graph:
        model = deploy(config, batch_norm_model_fn(),
                       optimizer=tf.train.GradientDescentOptimizer(0.1))
        variables = tf.trainable_variables()
        average = tf.train.ExponentialMovingAverage(0.5)
        with tf.device('/job:ps/task:0/device:CPU:0'), tf.control_dependencies([model.train_op]):
            update = average.apply(variables)
        with _cluster_session() as session:
            session.run(tf.global_variables_initializer())
            before = session.run(variables)
            run_metadata = _traced_run(session, update)
            after, averages = session.run([variables, [average.average(v) for v in variables]])
    received = collections.Counter(
        tensor.op.inputs[0].op.name for _, receiver, tensor
        in _sends_by_tensorflow(graph, run_metadata)
        if receiver == ('worker', 0) and tensor.op.type == 'ReadVariableOp')
    assert {v.op.name: received[v.op.name] for v in variables} == {
        v.op.name: 1 for v in variables}
    for old, new, mean in zip(before, after, averages):
        assert not np.allclose(old, new)
        # The average's own formula, old - 0.5 (old - new), rounds unlike (old + new) / 2
        # in float32: a few ulps apart (1.5e-8 at 0.006, once).
        np.testing.assert_allclose(mean, (old + new) / 2, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('pack_bytes', [ALL_REDUCE_PACK_BYTES, 0, 1 << 20])
def test_collective_links_carry_the_ring_all_reduce_of_the_gradients(pack_bytes):
    """2 workers of 2 clones: 4 members; each worker's link carries 2 x 3/4 of the packs'
    bytes each way, at once (the ring sends and receives together), the packs holding every
    gradient once, packed last layer first."""
    config = DeploymentConfig(num_clones=2, clone_devices=CPUS, variable_update='collective',
                              num_replicas=2, replica_id=1, all_reduce_pack_bytes=pack_bytes)
    graph = built(config, lenet_model_fn())
    with graph.as_default():
        gradients = [tf.zeros(v.shape) for v in tf.trainable_variables()]
    reduces = [op for op in graph.get_operations()
               if op.type == 'CollectiveReduce' and op.device == config.clone_device(0)]
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.all_reduces == network_traffic.AllReduces(
        count=len(all_reduce.pack_plan(gradients[::-1], pack_bytes)),
        bytes=LENET, members=4, local_members=2)
    assert traffic.all_reduces.count == len(reduces)
    if pack_bytes == ALL_REDUCE_PACK_BYTES:  # 4 MiB: in the order backprop makes them.
        assert [op.inputs[0].shape.num_elements() for op in reduces] == [
            10 + 1024 * 10 + 1024,  # The logits' bias and kernel, fc3's bias.
            7 * 7 * 64 * 1024,  # fc3's kernel, alone.
            64 + 5 * 5 * 32 * 64 + 32 + 5 * 5 * 1 * 32]  # The convolutions'.
    assert sum(op.inputs[0].shape.num_elements() * 4 for op in reduces) == (
        LENET)
    ring = 2 * 3 * LENET // 4
    assert traffic.worker == Link('worker', ring, ring, ring, EACH_WAY)
    assert traffic.ps_tasks == () and traffic.busiest == (traffic.worker,)


def test_multi_worker_mirrored_strategys_all_reduces_are_counted(monkeypatch):
    """MultiWorkerMirroredStrategy (tf.compat.v1, graph mode; worker 1 of 2, as
    benchmarks/network.py runs it) sums lenet's gradients with CollectiveReduceV2 ops, whose
    group size and instance key are constant input tensors: one pack, 2 members, 13.1 MB each
    way at once, as deploy()'s 'collective'. One whose group size is fed is not counted."""
    monkeypatch.setenv('TF_CONFIG', json.dumps({
        'cluster': {'worker': [f'{LOCALHOST}:1', f'{LOCALHOST}:2']},
        'task': {'type': 'worker', 'index': 1}}))
    network_fn = nets_factory.get_network_fn('lenet', 10, weight_decay=4e-5, is_training=True)

    def replica_step():
        logits, _ = network_fn(tf.zeros([2, 28, 28, 1]))
        loss = tf.losses.sparse_softmax_cross_entropy(tf.zeros([2], tf.int64), logits)
        return tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)

    with tf.Graph().as_default() as graph:
        strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        with strategy.scope():
            step = strategy.extended.call_for_each_replica(replica_step)
        fetches = strategy.experimental_local_results(step)
        with tf.device('/job:worker/task:1/device:CPU:0'):
            fed = tf.placeholder(tf.int32, [])
            unknown = collective_ops.all_reduce_v2(tf.ones([3]), fed, 7, 1)
    config = DeploymentConfig(variable_update='collective', replica_id=1, num_replicas=2)
    assert {op.type for op in network_traffic.needed_ops(fetches)
            if op.type.startswith('Collective')} == {'CollectiveReduceV2'}
    traffic = network_traffic.step_traffic(graph, config, fetches)
    assert traffic.all_reduces == network_traffic.AllReduces(
        count=1, bytes=LENET, members=2, local_members=1)
    assert traffic.worker == Link('worker', LENET, LENET, LENET, EACH_WAY)
    assert traffic.seconds(1) == pytest.approx(LENET * 8 / 1e9)  # 104.8 ms.
    traffic = network_traffic.step_traffic(graph, config, [*fetches, unknown])
    assert traffic.unknown == 1 and traffic.all_reduces.count == 1


def test_replicated_moves_nothing_over_the_network():
    config = DeploymentConfig(num_clones=2, clone_devices=CPUS, variable_update='replicated')
    graph = built(config, lenet_model_fn())
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.worker == Link('worker', 0, 0, 0, EACH_WAY)
    assert traffic.all_reduces.members == traffic.all_reduces.local_members == 2
    assert traffic.all_reduces.network_bytes == 0
    assert traffic.all_reduces.member_bytes == LENET  # 2 x 1/2 x S.
    assert placement_plan(config, graph, link_gbps=1).splitlines()[-1] == (
        "network      nothing crosses it: the 2 clones all-reduce 13.1 MB per step among "
        "this machine's devices, each sending 13.1 MB to the next")
    local = DeploymentConfig(clone_on_cpu=True)
    assert placement_plan(local, built(local, lenet_model_fn()), link_gbps=1).splitlines()[
        -1] == 'network    nothing crosses it: the variables are on this machine'


@pytest.mark.parametrize('clones', [1, 2])
def test_lenet_on_one_ps_task_and_two_workers_at_1_and_10_gbits(clones):
    """Per step each worker receives lenet's 13.1 MB once, whatever its clones (read onto
    its CPU for the layers and the regularizer), and sends 13.1 MB of summed gradients,
    which wait for the reads: 26.2 MB in then out, 210 ms at 1 Gbit/s. Ps task 0 serves both
    asynchronous workers, 26.2 MB each way at once: as busy, so more ps tasks would not
    help."""
    config = DeploymentConfig(num_clones=clones, clone_devices=CPUS[:clones], num_replicas=2,
                              num_ps_tasks=1)
    graph = built(config, lenet_model_fn())
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.worker == Link('worker', LENET, LENET, 2 * LENET, IN_THEN_OUT)
    assert traffic.ps_tasks == (Link('ps task 0', 2 * LENET, 2 * LENET, 2 * LENET, EACH_WAY),)
    assert traffic.busiest == traffic.links and not traffic.synchronous
    assert traffic.seconds(1) == pytest.approx(2 * LENET * 8 / 1e9)  # 0.2096 s.
    assert traffic.seconds(10) == pytest.approx(0.0209576576)
    # fc3's kernel alone on a task: read once by each of 2 workers, 2 x 12.8 MB each way.
    assert network_traffic.ps_advice(traffic) == network_traffic.PsAdvice(
        1, 'LeNet/fc3/weights', 2 * 7 * 7 * 64 * 1024 * 4, 2 * LENET)
    assert placement_plan(config, graph, link_gbps=1).splitlines()[-4:] == [
        'network    per step of 2 workers, on full-duplex links of 1 Gbit/s (125 MB/s) '
        'each way',
        'worker     in 13.1 MB, out 13.1 MB (each worker): 209.6 ms, in then out  <- bottleneck',
        'ps 0       in 26.2 MB, out 26.2 MB (2 workers): 209.6 ms, each way  <- bottleneck',
        "step       >= 209.6 ms: the bytes of the busiest links over the bandwidth: each "
        "worker's, in then out (what it sends waits for what it received); ps task 0's, "
        'each way (both directions at once)']
    assert placement_plan(config, graph, link_gbps=10).splitlines()[-3:-1] == [
        'worker     in 13.1 MB, out 13.1 MB (each worker): 21.0 ms, in then out  <- bottleneck',
        'ps 0       in 26.2 MB, out 26.2 MB (2 workers): 21.0 ms, each way  <- bottleneck']
    # Without link_gbps the plan is as before.
    assert placement_plan(config, graph).splitlines()[-1].startswith('ps task 0  ')


def sync_replicas_graph(config, model_fn, replicas_to_aggregate):
    """A graph deploy() built with `config` and momentum SGD under a SyncReplicasOptimizer
    aggregating `replicas_to_aggregate` gradients per update (of config.num_replicas)."""
    with tf.Graph().as_default() as graph:
        with tf.device(config.optimizer_device()):
            optimizer = tf.train.SyncReplicasOptimizer(
                tf.train.MomentumOptimizer(0.01, 0.9), replicas_to_aggregate,
                total_num_replicas=config.num_replicas)
        deploy(config, model_fn, optimizer=optimizer)
        optimizer.ready_for_local_init_op.mark_used()  # Else TF logs an error when freed.
    return graph


def test_synchronous_workers_pass_their_reads_then_their_gradients_through_the_ps_link():
    """2 synchronous workers of lenet, 1 ps task: between two updates the task sends both
    workers' reads (26.2 MB) and receives both workers' gradients (26.2 MB), each worker's
    after its own reads. Both gradients pass after one worker's 13.1 MB of reads (13.1 +
    26.2 MB), and once the last read left, that worker still sends 13.1 MB (26.2 + 13.1 MB):
    39.3 MB, 314 ms at 1 Gbit/s, not 52.4 MB: one worker's gradients can pass while the other
    still reads. Besides lenet's bytes, each worker sends its local step (8 bytes) to each of
    the 8 accumulators and receives a token (8 bytes) after the update."""
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    graph = sync_replicas_graph(config, lenet_model_fn(), 2)
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.synchronous
    assert traffic.worker == Link('worker', LENET + 8, LENET + 8 * 8, 2 * LENET, IN_THEN_OUT)
    assert traffic.ps_tasks == (Link('ps task 0', 2 * (LENET + 8 * 8), 2 * (LENET + 8),
                                     3 * LENET, OUT_THEN_IN),)
    assert traffic.busiest == traffic.ps_tasks
    assert traffic.seconds(1) == pytest.approx(3 * LENET * 8 / 1e9)  # 0.3144 s.
    # Alone on a task, fc3's kernel and its accumulator pass 13.1 MB + 2 x 12.8 MB.
    assert network_traffic.ps_advice(traffic) == network_traffic.PsAdvice(
        None, 'LeNet/fc3/weights', LENET + 2 * 7 * 7 * 64 * 1024 * 4, 2 * LENET)
    assert placement_plan(config, graph, link_gbps=1).splitlines()[-3:] == [
        'ps 0       in 26.2 MB, out 26.2 MB (2 synchronous workers): 314.4 ms, out then in'
        '  <- bottleneck',
        "step       >= 314.4 ms: the bytes of the busiest link over the bandwidth: ps task 0's, "
        "out then in (synchronous workers: each one's gradients wait for its reads, which "
        'wait for the last update)',
        'advice     no number of ps tasks takes the bottleneck off the ps tasks: alone on a '
        'task, LeNet/fc3/weights and the ops placed with it pass 38.8 MB per step (2 '
        "workers), more than a worker's link (26.2 MB); a variable_partitioner "
        '(--variable_partition_min_mb) splits a variable over the ps tasks']
    # With backup workers (1 gradient of 2 per update) the workers do not step in lockstep.
    traffic = network_traffic.step_traffic(sync_replicas_graph(config, lenet_model_fn(), 1),
                                           config)
    assert not traffic.synchronous and traffic.ps_tasks[0].rule == EACH_WAY


def test_only_the_gradients_that_wait_for_reads_pass_after_them():
    """loss = sum(a) + sum(b * b): a's gradient (ones, 4 kB) waits for no read, b's (2 b,
    12 kB) for b's read (12 kB). A worker's link passes b's read then b's gradient (24 kB)
    while a's read and gradient pass at any time: 24 kB, not the 32 kB of in + out."""
    def model_fn():
        a, b = tf.get_variable('a', [1000]), tf.get_variable('b', [3000])
        tf.losses.add_loss(tf.reduce_sum(a) + tf.reduce_sum(b * b))

    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    traffic = network_traffic.step_traffic(built(config, model_fn), config)
    assert traffic.worker == Link('worker', 16_000, 16_000, 24_000, IN_THEN_OUT)
    # (bytes, bytes the worker received before sending it, or sends after receiving it).
    assert {group.name: ([sizes for _, *sizes in group.received],
                         [sizes for _, *sizes in group.sent]) for group in traffic.groups} == {
        'a': ([[4000, 0]], [[4000, 0]]), 'b': ([[12_000, 12_000]], [[12_000, 12_000]])}
    # The ps task's asynchronous workers: each way, 2 x 16 kB.
    assert traffic.ps_tasks == (Link('ps task 0', 32_000, 32_000, 32_000, EACH_WAY),)


# Created in this order: round-robin puts small ones on task 0 and large ones on task 1.
ALTERNATING = {'a': 100, 'b': 1000, 'c': 100, 'd': 1000}


@pytest.mark.parametrize('strategy, busiest_bytes', [
    ('round_robin', 2 * 4 * 2000),  # b and d on task 1, read and updated by 2 workers.
    ('bytes', 2 * 4 * 1100),  # b with a, d with c: each task as busy as a worker's link.
])
def test_round_robin_and_bytes_busiest_ps_task(strategy, busiest_bytes):
    """The gradients of a sum (ones) wait for no read: every link passes bytes each way."""
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=2, ps_strategy=strategy)
    traffic = network_traffic.step_traffic(built(config, sized_model_fn(ALTERNATING)), config)
    assert traffic.worker == Link('worker', 4 * 2200, 4 * 2200, 4 * 2200, EACH_WAY)
    assert {link.rule for link in traffic.links} == {EACH_WAY}
    assert max(link.bytes for link in traffic.ps_tasks) == busiest_bytes
    assert sum(link.bytes_in for link in traffic.ps_tasks) == 2 * traffic.worker.bytes_out
    assert (traffic.worker in traffic.busiest) == (strategy == 'bytes')


@pytest.mark.parametrize('workers, tasks', [(1, 1), (2, 2), (3, 4), (4, 4)])
def test_ps_advice_spreads_the_variables_over_enough_tasks(workers, tasks):
    """4 variables of 4 kB, each read and updated once by each worker: a task holding k of
    them carries workers x k x 4 kB each way, a worker 16 kB; 3 workers need a task each
    (3 tasks would hold 2 on one)."""
    config = DeploymentConfig(num_replicas=workers, num_ps_tasks=1)
    equal = {name: 1000 for name in 'abcd'}
    graph = built(config, sized_model_fn(equal))
    advice = network_traffic.ps_advice(network_traffic.step_traffic(graph, config))
    assert (advice.tasks, advice.worker_bytes) == (tasks, 16_000)
    assert advice.variable_bytes == workers * 4000
    plan = placement_plan(config, graph, link_gbps=1)
    if workers == 1:
        assert 'advice' not in plan
    else:
        assert plan.splitlines()[-1] == (
            f"advice     {tasks} ps tasks with ps_strategy 'bytes' would keep each ps task's "
            "link within a worker's (16.0 kB)")


def test_ps_advice_when_one_variable_is_too_large_for_any_number_of_tasks():
    """'big' alone moves 2 workers x 40 kB each way, more than a worker's 56 kB."""
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    sizes = {'big': 10_000, **{name: 1000 for name in 'abcd'}}
    traffic = network_traffic.step_traffic(built(config, sized_model_fn(sizes)), config)
    assert network_traffic.ps_advice(traffic) == network_traffic.PsAdvice(
        None, 'big', 80_000, 56_000)
    spread = DeploymentConfig(num_replicas=2, num_ps_tasks=5, ps_strategy='bytes')
    traffic = network_traffic.step_traffic(built(spread, sized_model_fn(sizes)), spread)
    assert traffic.busiest[0].bytes == 80_000  # big's task, even with a task each.
    assert network_traffic.ps_advice(traffic).tasks is None


def test_a_step_without_training_and_functions_are_said():
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    with tf.Graph().as_default() as graph:
        deploy(config, lenet_model_fn())  # No optimizer: no train_op.
    assert network_traffic.step_traffic(graph, config) is None
    assert placement_plan(config, graph, link_gbps=1).splitlines()[-1] == (
        "network    no estimate: the graph has no training step ('train_op')")
    with tf.Graph().as_default() as graph:
        deploy(config, lenet_model_fn(), optimizer=tf.train.GradientDescentOptimizer(0.1),
               gradient_accumulation_steps=2)  # The update is a tf.cond.
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.functions == ('apply_every',)
    assert traffic.worker.bytes_in == LENET  # Each variable's read.
    assert 'not counted: the ops inside apply_every' in placement_plan(config, graph,
                                                                       link_gbps=1)


def test_collective_ops_other_than_all_reduces_are_said():
    """A broadcast in the step (as tf.distribute's make) moves bytes the plan does not count:
    it says so, naming the op type."""
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    with tf.Graph().as_default() as graph:
        model = deploy(config, sized_model_fn({'a': 1000}),
                       optimizer=tf.train.GradientDescentOptimizer(0.1))
        broadcast = tf.raw_ops.CollectiveBcastSend(
            input=model.total_loss, group_size=2, group_key=1, instance_key=1, shape=[])
    fetches = [model.train_op, broadcast]
    traffic = network_traffic.step_traffic(graph, config, fetches)
    assert traffic.other_collectives == ('CollectiveBcastSend',)
    assert network_traffic.step_traffic(graph, config).other_collectives == ()
    assert 'not counted: the CollectiveBcastSend ops' in placement_plan(
        config, graph, link_gbps=1, fetches=fetches)


@pytest.mark.parametrize('link_gbps', [0, -1.0, float('nan'), float('inf'), '1', True])
def test_a_bad_link_gbps_is_a_value_error(link_gbps):
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    with pytest.raises(ValueError, match=r'^link_gbps must be a number > 0 \(Gbit/s\), got '):
        placement_plan(config, built(config, lenet_model_fn()), link_gbps=link_gbps)


def test_link_gbps_needs_the_graph():
    with pytest.raises(ValueError, match='placement_plan needs the graph'):
        placement_plan(DeploymentConfig(), link_gbps=1)


@pytest.mark.parametrize('value', [0, -2.5])
def test_the_link_gbps_flag_must_be_positive(value):
    with pytest.raises(UsageError) as raised:
        TrainConfig.from_flags({'link_gbps': value})
    assert str(raised.value) == f'--link_gbps must be a number in (0, 3.4e+38], got {value!r}'


@pytest.mark.parametrize('flags', [{}, {'moving_average_decay': 0.99}])
def test_the_trainers_start_up_plan_states_the_network(digits_dir, tmp_path, flags):
    """The plan train() logs and records, for worker 0 of 2 with a ps task (servers started
    by hand, reached through --master; only the graph is built here). Moving averages are
    updated next to their variables, so they add no bytes to a worker's link."""
    config = TrainConfig.from_flags({
        'train_dir': str(tmp_path), 'dataset_dir': digits_dir, 'num_clones': 1,
        'master': 'grpc://127.0.0.1:1', 'worker_replicas': 2, 'num_ps_tasks': 1,
        'link_gbps': 1.0, **flags})
    model = builders.classifier(config.data, config.model, is_training=True,
                                weight_decay=config.optimization.weight_decay)
    deployment, _ = builders.deployment(config.devices, config.cluster)
    with tf.Graph().as_default():
        plan = train._build(config, model, deployment, warmup_steps=0).plan.splitlines()
    # RMSProp's decaying learning rate and the global step add a few bytes to lenet's: the ps
    # task passes 16 bytes more than a worker's link, too few to advise more ps tasks.
    assert plan[-3:] == [
        'worker     in 13.1 MB, out 13.1 MB (each worker): 209.6 ms, in then out',
        'ps 0       in 26.2 MB, out 26.2 MB (2 workers): 209.6 ms, each way  <- bottleneck',
        "step       >= 209.6 ms: the bytes of the busiest link over the bandwidth: ps task 0's, "
        'each way (both directions at once)']


@pytest.mark.slow
def test_a_bad_link_gbps_flag_is_one_line(tmp_path):
    result = run_script('train_image_classifier.py', f'--train_dir={tmp_path}',
                        '--link_gbps=0')
    assert result.returncode == 2
    assert result.stderr == ('train_image_classifier.py: error: --link_gbps must be a number '
                             'in (0, 3.4e+38], got 0.0\n')
