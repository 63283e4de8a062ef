"""Variables partitioned over the ps tasks (DeploymentConfig's variable_partitioner): which
variables split and into which parts, where the parts go under each ps strategy, the
placement plan, the refusal without ps tasks, the planner's bytes for parts (split on paper
from a graph of whole variables, checked against the graph TensorFlow partitions, and worked
out by hand), and every ps feature training partitioned variables on in-process gRPC
servers."""
import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import config as tf_config
import tf_slim as slim

from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.deployment import network_traffic, placement, sizing
from slim_deploy.deployment.model_deploy import (
    DeploymentConfig,
    create_clones,
    deploy,
    placement_plan,
)
from slim_deploy.deployment.network_traffic import IN_THEN_OUT, Link, PsGroup, StepTraffic
from slim_deploy.deployment.sizing import Compute
from slim_deploy.training import loop

from graphs import built, lenet_model_fn

MB = 1_000_000
LENET_PARTS = placement.min_size_partitioner(MB, 4)  # LeNet/fc3/weights (12.8 MB) in 4.
# The small model: hidden/weights (a 1 x 1 x 64 x 64 kernel, 16 kB) in 2 parts of 4 kB or
# more, along its input channels; the others (256, 512 and 8 bytes) whole.
SMALL_PARTS = placement.min_size_partitioner(4096, 2)
INPUTS = np.random.RandomState(0).randn(8, 64).astype(np.float32)
LABELS = (INPUTS[:, 0] > 0).astype(np.int64)


def small_model_fn():
    """A 1 x 1 convolution of 64 channels and a fully connected layer on 8 fixed examples (1 x
    1 images of 64 channels), a softmax loss."""
    net = slim.conv2d(tf.constant(INPUTS[:, None, None, :]), 64, [1, 1], scope='hidden')
    logits = slim.fully_connected(slim.flatten(net), 2, activation_fn=None, scope='logits')
    tf.losses.sparse_softmax_cross_entropy(tf.constant(LABELS), logits)


def ps_task(variable):
    spec = tf.DeviceSpec.from_string(variable.op.device)
    assert spec.job == 'ps', variable.op.device
    return spec.task


@pytest.mark.parametrize('partitioner, shape, dtype, parts', [
    (tf.fixed_size_partitioner(3), [10, 4], tf.float32, [[4, 4], [3, 4], [3, 4]]),
    (tf.fixed_size_partitioner(2, axis=1), [3, 5], tf.float32, [[3, 3], [3, 2]]),
    # 4,000 bytes in parts of 1,000 or more: 4; 1,200 bytes: ceil(1.2) = 2.
    (placement.min_size_partitioner(1000, 4), [100, 10], tf.float32, [[25, 10]] * 4),
    (placement.min_size_partitioner(1000, 4), [100, 3], tf.float32, [[50, 3]] * 2),
    (placement.min_size_partitioner(1000, 4), [100, 3], tf.float16, None),  # 600 bytes.
    # Along the longest axis: a 1 x 1 kernel's input channels, not its first axis.
    (placement.min_size_partitioner(1000, 8), [1, 1, 40, 25], tf.float32, [[1, 1, 10, 25]] * 4),
    (placement.min_size_partitioner(1000, 8), [], tf.float32, None),
    (placement.min_size_partitioner(1000, 8), [None, 1000], tf.float32, None),
])
def test_the_parts_tf_get_variable_makes(partitioner, shape, dtype, parts):
    assert placement.parts(partitioner, shape, dtype) == parts
    if parts:  # As TensorFlow makes them.
        with tf.Graph().as_default():
            made = tf.get_variable('v', shape, dtype, partitioner=partitioner)
            assert [part.shape.as_list() for part in made] == parts


@pytest.mark.parametrize('ps_strategy', ['round_robin', 'bytes'])
def test_each_part_is_placed_as_a_variable(ps_strategy):
    config = DeploymentConfig(num_ps_tasks=4, ps_strategy=ps_strategy,
                              variable_partitioner=LENET_PARTS)
    with tf.Graph().as_default() as graph:
        create_clones(config, lenet_model_fn())
        variables = {v.op.name: v for v in tf.global_variables()}
    parts = [f'LeNet/fc3/weights/part_{i}' for i in range(4)]
    whole = ['LeNet/conv1/weights', 'LeNet/conv1/biases', 'LeNet/conv2/weights',
             'LeNet/conv2/biases', 'LeNet/fc3/biases', 'LeNet/fc4/weights', 'LeNet/fc4/biases']
    assert sorted(variables) == sorted(parts + whole)
    assert [variables[name].shape.as_list() for name in parts] == [[784, 1024]] * 4
    assert sorted(ps_task(variables[name]) for name in parts) == [0, 1, 2, 3]
    assert placement.partitioned_variables(graph) == {
        'LeNet/fc3/weights': [variables[name] for name in parts]}
    plan = placement_plan(config, graph).splitlines()
    assert plan[1] == 'partitions  1 variable in 4 parts: LeNet/fc3/weights 12.8 MB in 4'
    loads = [int(re.search(r'\(([\d,]+) bytes\)', line)[1].replace(',', ''))
             for line in plan if line.startswith('ps task')]
    # Parts of 3.2 MB: no task holds more than one, with some of the small variables.
    assert len(loads) == 4 and max(loads) < 3.5 * MB and sum(loads) == 13_098_536


def test_the_models_own_partitioner_wins_and_other_variables_stay_whole():
    """A variable_scope of model_fn's splits its variables its way (3 parts, where the
    config's partitioner would keep them whole); tf.Variable's variables stay whole; a second
    clone uses the first one's parts."""
    def model_fn():
        with tf.variable_scope('own', partitioner=tf.fixed_size_partitioner(3)):
            own = tf.get_variable('w', [6, 2])
        plain = tf.Variable(tf.zeros([600, 1000]), name='plain')  # 2.4 MB.
        tf.losses.add_loss(tf.reduce_sum(own) + tf.reduce_sum(plain))

    config = DeploymentConfig(num_clones=2, num_ps_tasks=2, variable_partitioner=LENET_PARTS)
    with tf.Graph().as_default():
        create_clones(config, model_fn)
        names = [v.op.name for v in tf.global_variables()]
    assert names == ['own/w/part_0', 'own/w/part_1', 'own/w/part_2', 'plain']


def test_the_plan_says_so_before_the_graph_and_when_nothing_splits():
    config = DeploymentConfig(num_ps_tasks=2, variable_partitioner=LENET_PARTS)
    assert placement_plan(config).splitlines()[1] == (
        'partitions  variable_partitioner splits what model_fn makes with tf.get_variable, '
        'each part placed as a variable')
    with tf.Graph().as_default() as graph:
        create_clones(config, small_model_fn)  # 16 kB at most: nothing reaches 1 MB.
    assert placement_plan(config, graph).splitlines()[1] == (
        'partitions  none: variable_partitioner keeps every variable whole')


@pytest.mark.parametrize('settings, message', [
    ({}, 'variable_partitioner splits the variables over the ps tasks, and num_ps_tasks=0 has '
         'none: use it with ps tasks'),
    ({'variable_update': 'collective', 'num_replicas': 2},
     "variable_partitioner splits the variables over the ps tasks, and num_ps_tasks=0 has "
     "none (variable_update='collective' keeps them on the clones): use it with ps tasks"),
    ({'variable_update': 'replicated', 'num_clones': 2, 'clone_devices': ['/cpu:0', '/cpu:1']},
     "variable_partitioner splits the variables over the ps tasks, and num_ps_tasks=0 has "
     "none (variable_update='replicated' keeps them on the clones): use it with ps tasks"),
])
def test_partitioning_needs_ps_tasks(settings, message):
    with pytest.raises(ValueError) as raised:
        DeploymentConfig(variable_partitioner=LENET_PARTS, **settings)
    assert str(raised.value) == message


def test_a_partitioner_is_a_callable():
    with pytest.raises(ValueError, match=r"^variable_partitioner must be None or a callable of "
                                         r"a variable's shape and dtype .*, got 4$"):
        DeploymentConfig(num_ps_tasks=2, variable_partitioner=4)


def _groups(traffic):
    """The PsGroups of `traffic`, each as (name, its bytes received, its bytes sent, with the
    bytes each waits for), in name order."""
    return sorted((group.name, sorted((size, waits) for _, size, waits in group.received),
                   sorted((size, waits) for _, size, waits in group.sent))
                  for group in traffic.groups)


@pytest.mark.parametrize('sync, settings', [
    (False, {}),
    (True, {'precision': 'bfloat16', 'gradient_compression': 'bfloat16'}),
], ids=['async', 'sync_bfloat16'])
def test_the_planner_splits_the_bytes_as_tensorflow_partitions_the_graph(sync, settings):
    """The planner's parts of a graph of whole variables (on 1 ps task) move what the parts of
    the graph TensorFlow partitions (on 2) move: each read and gradient, in any dtype, in
    shares, the rest alike. One model of the bytes."""
    def traffic(tasks, partitioner):
        optimizer = tf.train.MomentumOptimizer(0.1, 0.9)
        if sync:
            optimizer = tf.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=2)
        config = DeploymentConfig(num_ps_tasks=tasks, num_replicas=2, clone_on_cpu=True,
                                  variable_partitioner=partitioner, **settings)
        graph = built(config, small_model_fn, optimizer)
        if sync:
            optimizer.ready_for_local_init_op.mark_used()
        return network_traffic.step_traffic(graph, config)

    whole, partitioned = traffic(1, None), traffic(2, SMALL_PARTS)
    planned = sizing.asynchronous_ps(whole, Compute(0.03, 0.01), 2, link_gbps=1, ps_tasks=2,
                                     partition_min_bytes=4096)
    assert 'hidden/weights/part_1' in [group.name for group in planned.traffic.groups]
    assert _groups(planned.traffic) == _groups(partitioned)


def partitionable_step():
    """A ps step of 2 workers on 1 ps task: a (900 x 250 floats, 900 kB) and b (25,000 floats,
    100 kB), read before any gradient is sent (in then out, 2 MB per worker)."""
    groups = tuple(
        PsGroup(name, 0, received=((f'{name}_gradient', size, MB),),
                sent=((f'{name}_read', size, MB),), shape=shape, dtype='float32',
                whole=frozenset({f'{name}_gradient', f'{name}_read'}))
        for name, shape, size in (('a', (900, 250), 900_000), ('b', (25_000,), 100_000)))
    return StepTraffic(workers=2, worker=Link('worker', MB, MB, 2 * MB, IN_THEN_OUT),
                       ps_tasks=(Link('ps task 0', 2 * MB, 2 * MB, 2 * MB, IN_THEN_OUT),),
                       all_reduces=None, groups=groups)


def test_parts_spread_the_largest_variable_over_the_ps_tasks():
    """4 asynchronous workers at 0.5 Gbit/s (1 MB: 16 ms); a worker's cycle: reads 16 ms,
    forward 10 ms, backprop 20 ms hiding its gradients' 16 ms: 46 ms. On 3 ps tasks a alone
    carries 4 x 900 kB each way (57.6 ms), so the step is 57.6 ms. In parts of 300 kB or
    more, a is 3 parts of 300 kB, one per task, b (100 kB) whole with the first: that task
    carries 4 x 400 kB (25.6 ms) and the step is the workers' 46 ms."""
    compute = Compute(seconds=0.030, forward=0.010)
    whole = sizing.asynchronous_ps(partitionable_step(), compute, 4, 0.5, ps_tasks=3)
    assert whole.seconds == pytest.approx(0.0576)
    assert whole.traffic.busiest[0].bytes == 3_600_000
    parts = sizing.asynchronous_ps(partitionable_step(), compute, 4, 0.5, ps_tasks=3,
                                   partition_min_bytes=300_000)
    assert parts.seconds == pytest.approx(0.046)
    assert [link.bytes_in for link in parts.traffic.ps_tasks] == [1_600_000, 1_200_000,
                                                                  1_200_000]
    assert sorted(group.name for group in parts.traffic.groups) == [
        'a/part_0', 'a/part_1', 'a/part_2', 'b']
    assert parts.partition_min_bytes == 300_000 and whole.partition_min_bytes == 0


def test_choosing_the_ps_tasks_counts_the_parts():
    """Whole, 2 ps tasks: a alone (57.6 ms) is the least a ps link carries, 1 task 64 ms. In
    parts of 300 kB: 2 tasks hold a in 2 parts of 450 kB, b with the first: 4 x 550 kB
    (35.2 ms) within the workers' 46 ms, as good as 4 tasks; 1 task holds all (64 ms)."""
    compute = Compute(seconds=0.030, forward=0.010)
    whole = sizing.asynchronous_ps(partitionable_step(), compute, 4, 0.5)
    assert (whole.ps_tasks, whole.seconds) == (2, pytest.approx(0.0576))
    parts = sizing.asynchronous_ps(partitionable_step(), compute, 4, 0.5,
                                   partition_min_bytes=300_000)
    assert (parts.ps_tasks, parts.seconds) == (2, pytest.approx(0.046))
    assert parts.traffic.busiest[0].bytes == 2_200_000  # Task 0: 35.2 ms.
    rows = sizing.plan_rows([sizing.plan(partitionable_step(), None, compute, 4, 0.5,
                                         partition_sizes=(0, 300_000))], 32)
    assert [re.split(r'\s{2,}', row)[1] for row in rows[1:]] == [
        'ps, asynchronous', 'ps, synchronous', 'ps, asynchronous, parts of 300.0 kB',
        'ps, synchronous, parts of 300.0 kB']


@pytest.fixture(scope='module')
def servers():
    """2 ps tasks and a worker as in-process gRPC servers on loopback (they stop with the
    process): the worker's target."""
    addresses = [f'{LOCALHOST}:{port}' for port in free_ports(LOCALHOST, 3)]
    cluster = tf.train.ClusterSpec({'ps': addresses[:2], 'worker': addresses[2:]})
    made = [tf.distribute.Server(cluster, job_name=job, task_index=index, start=True)
            for job, index in (('ps', 0), ('ps', 1), ('worker', 0))]
    return made[-1].target


def train_parts(target, config, optimizer, steps=3, gradient_accumulation_steps=1):
    """Trains small_model_fn `steps` runs with `config` on the servers of `target`, the
    variables initialized afresh; returns (the losses, the parts of hidden/weights before and
    after, the graph)."""
    with tf.Graph().as_default() as graph:
        model = deploy(config, small_model_fn, optimizer=optimizer,
                       gradient_accumulation_steps=gradient_accumulation_steps)
        (parts,) = placement.partitioned_variables(graph).values()
        hooks = ([loop.SyncReplicasHook(optimizer, True, optimizer._total_num_replicas,
                                        optimizer._replicas_to_aggregate)]
                 if isinstance(optimizer, tf.train.SyncReplicasOptimizer) else [])
        with tf.train.MonitoredTrainingSession(target, is_chief=True, hooks=hooks,
                                               log_step_count_steps=None) as session:
            before = session.run(parts)
            losses = [session.run(model.train_op) for _ in range(steps)]
            after = session.run(parts)
    return losses, before, after, graph


def _momentum():
    return tf.train.MomentumOptimizer(0.05, 0.9)


# Each ps feature, as (its DeploymentConfig settings, its optimizer, micro-batches).
FEATURES = {
    'reads_in_turn': ({}, _momentum, 1),
    'prefetched_reads': ({'prefetch_reads': True}, _momentum, 1),
    'float16_gradients': ({'gradient_compression': 'float16'}, _momentum, 1),
    'bfloat16_math_and_gradients': ({'precision': 'bfloat16', 'gradient_compression':
                                     'bfloat16'}, _momentum, 1),
    'accumulated_gradients': ({}, _momentum, 2),
    'sync_replicas_with_backup_workers': (
        {}, lambda: tf.train.SyncReplicasOptimizer(_momentum(), replicas_to_aggregate=1,
                                                   total_num_replicas=2), 1),
    'bytes_strategy': ({'ps_strategy': 'bytes'}, _momentum, 1),
}


@pytest.mark.parametrize('feature', FEATURES)
def test_every_ps_feature_trains_partitioned_variables(servers, feature):
    settings, optimizer, micro_batches = FEATURES[feature]
    config = DeploymentConfig(num_ps_tasks=2, clone_on_cpu=True, variable_partitioner=SMALL_PARTS,
                              **settings)
    losses, before, after, graph = train_parts(servers, config, optimizer(),
                                               steps=3 * micro_batches,
                                               gradient_accumulation_steps=micro_batches)
    assert sorted(ps_task(part) for part in placement.partitioned_variables(graph)[
        'hidden/weights']) == [0, 1]
    assert [part.shape for part in before] == [(1, 1, 32, 64)] * 2
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert all((b != a).any() for b, a in zip(before, after))  # Each part was updated.
    if feature == 'reads_in_turn':  # Each part's read waits for the turn's lock.
        reads = [op for op in graph.get_operations() if op.name.startswith('hidden/weights/')
                 and op.name.endswith('/Read/in_turn')]
        assert len(reads) == 2


def test_seeded_training_of_partitioned_variables_is_bit_identical(servers):
    """Two runs with seed 5 train the same values, from the same initial values of the parts
    (their initializers draw from the graph's seed)."""
    def run():
        config = DeploymentConfig(num_ps_tasks=2, clone_on_cpu=True, seed=5,
                                  variable_partitioner=SMALL_PARTS)
        return train_parts(servers, config, _momentum())

    was_on = tf_config.is_op_determinism_enabled()
    try:
        first, second = run(), run()
    finally:
        if not was_on:
            tf_config.disable_op_determinism()
    assert first[0] == second[0]
    for a, b in zip(first[1] + first[2], second[1] + second[2]):
        np.testing.assert_array_equal(a, b)
