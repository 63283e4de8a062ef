"""ps_strategy='bytes': variables spread largest first over the PS tasks, the ops that go
with them, the placement plan's bytes per task, and training on real gRPC servers."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.deployment.model_deploy import (
    DeploymentConfig,
    create_clones,
    deploy,
    placement_plan,
)

# (name, shape, dtype) in creation order: 100, 400, 200, 300, 200 and 0 bytes (unknown shape).
VARIABLES = [('a', [25], tf.float32), ('b', [10, 5], tf.float64), ('c', [5, 10], tf.float32),
             ('d', [75], tf.float32), ('e', [25], tf.float64), ('f', None, tf.float32)]
SIZES = {'a': 100, 'b': 400, 'c': 200, 'd': 300, 'e': 200, 'f': 0}
GLOBAL_STEP_BYTES = 8  # int64 scalar.


def sized_model(variables=VARIABLES):
    """A model_fn making `variables` (shape None: unknown) and a loss summing them."""
    def model_fn():
        made = []
        for name, shape, dtype in variables:
            if shape is None:
                initial = tf.placeholder_with_default(tf.zeros([2], dtype), [None])
                made.append(tf.Variable(initial, validate_shape=False, name=name))
            else:
                made.append(tf.get_variable(name, shape, dtype))
        tf.losses.add_loss(tf.add_n([tf.reduce_sum(tf.cast(v, tf.float32)) for v in made]))
    return model_fn


def _task(op):
    """The PS task index of an op's device."""
    spec = tf.DeviceSpec.from_string(op.device)
    assert spec.job == 'ps', op.device
    return spec.task


def _graph_devices(graph):
    """Every device named in `graph`: its ops' and its function bodies' nodes'."""
    library = graph.as_graph_def().library.function
    return ({op.device for op in graph.get_operations()}
            | {node.device for function in library for node in function.node_def})


# Largest first onto the least-loaded task; the global step (8 bytes) is already on task 0.
# 2 tasks, bytes before each of b d c e a f: 8/0, 8/400, 308/400, 508/400, 508/600, 608/600.
# 3 tasks: 8/0/0, 8/400/0, 8/400/300, 208/400/300, 408/400/300, 408/400/400.
# Round-robin would give a0 b1 c0 d1 e0 f1 and a0 b1 c2 d0 e1 f2.
@pytest.mark.parametrize('num_ps_tasks, tasks', [
    (2, {'a': 0, 'b': 1, 'c': 0, 'd': 0, 'e': 1, 'f': 1}),
    (3, {'a': 2, 'b': 1, 'c': 0, 'd': 2, 'e': 0, 'f': 1}),
])
@pytest.mark.parametrize('use_resource', [False, True])
def test_variables_go_largest_first_onto_the_least_loaded_task(num_ps_tasks, tasks,
                                                               use_resource):
    config = DeploymentConfig(num_ps_tasks=num_ps_tasks, ps_strategy='bytes')
    with tf.Graph().as_default() as graph:
        with tf.variable_scope('', use_resource=use_resource):
            with tf.device(config.variables_device()):
                global_step = tf.train.get_or_create_global_step()
            create_clones(config, sized_model())
        variables = tf.global_variables()
    assert _task(global_step.op) == 0
    assert {v.op.name: _task(v.op) for v in variables if v is not global_step} == tasks
    plan = placement_plan(config, graph).splitlines()
    for t in range(num_ps_tasks):
        names = [name for name, task in tasks.items() if task == t] + ['global_step'] * (t == 0)
        size = sum(SIZES.get(name, GLOBAL_STEP_BYTES) for name in names)
        assert (f'ps task {t}  /job:ps/task:{t}/device:CPU:0  {len(names)} variables, '
                f'{size} B ({size} bytes)') in plan


@pytest.mark.parametrize('use_resource', [False, True])
def test_slots_accumulators_and_every_op_follow_their_variable(use_resource):
    config = DeploymentConfig(num_ps_tasks=2, ps_strategy='bytes')
    adam = tf.train.AdamOptimizer(0.1)
    sync = tf.train.SyncReplicasOptimizer(adam, replicas_to_aggregate=1)
    with tf.Graph().as_default() as graph:
        with tf.variable_scope('', use_resource=use_resource):
            deploy(config, sized_model(VARIABLES[:-1]), optimizer=sync)
        sync.ready_for_local_init_op.mark_used()  # Else TF logs an error when it is freed.
        variables = tf.trainable_variables()
    assert [v.op.name for v in variables] == ['a', 'b', 'c', 'd', 'e']
    assert {_task(v.op) for v in variables} == {0, 1}
    for v in variables:
        assert adam.get_slot(v, 'm').op.device == adam.get_slot(v, 'v').op.device == v.op.device
    # SyncReplicasOptimizer makes one accumulator per gradient, in the variables' order.
    accumulators = [op for op in graph.get_operations()
                    if op.type in ('ConditionalAccumulator', 'ResourceConditionalAccumulator')]
    assert [op.device for op in accumulators] == [v.op.device for v in variables]
    # No op, nor function body, kept a virtual device: only the real jobs remain.
    jobs = {tf.DeviceSpec.from_string(d).job for d in _graph_devices(graph)}
    assert jobs == {None, 'ps', 'worker'}


def test_clones_share_the_variables_and_keep_their_own_devices():
    config = DeploymentConfig(num_clones=2, num_ps_tasks=2, ps_strategy='bytes')

    def model_fn():
        inputs = tf.ones([4, 8])
        net = slim.fully_connected(inputs, 16, scope='hidden')  # 512 + 64 bytes.
        logits = slim.fully_connected(net, 3, scope='logits')  # 192 + 12 bytes.
        tf.losses.add_loss(tf.reduce_sum(logits))

    with tf.Graph().as_default() as graph:
        create_clones(config, model_fn)
        variables = tf.global_variables()
    assert {v.op.name: v.op.device for v in variables} == {
        'hidden/weights': '/job:ps/task:0/device:CPU:0',
        'logits/weights': '/job:ps/task:1/device:CPU:0',
        'hidden/biases': '/job:ps/task:1/device:CPU:0',
        'logits/biases': '/job:ps/task:1/device:CPU:0',
    }
    for i in range(2):
        compute = [op for op in graph.get_operations()
                   if op.name.startswith(f'clone_{i}/') and op.type in ('MatMul', 'Relu')]
        assert len(compute) == 4  # Two MatMul, two Relu.
        assert {op.device for op in compute} == {f'/job:worker/task:0/device:GPU:{i}'}


def test_variables_colocated_with_a_variable_follow_it_and_count_with_it():
    config = DeploymentConfig(num_ps_tasks=2, ps_strategy='bytes')

    def model_fn():
        a = tf.get_variable('a', [100])  # 400 bytes, 600 with its shadow.
        with tf.colocate_with(a):
            tf.get_variable('a_shadow', [50])
        tf.get_variable('b', [125])  # 500 bytes.

    with tf.Graph().as_default() as graph:
        create_clones(config, model_fn)
        variables = tf.global_variables()
    assert {v.op.name: _task(v.op) for v in variables} == {'a': 0, 'a_shadow': 0, 'b': 1}
    assert placement_plan(config, graph).splitlines()[-2:] == [
        'ps task 0  /job:ps/task:0/device:CPU:0  2 variables, 600 B (600 bytes)',
        'ps task 1  /job:ps/task:1/device:CPU:0  1 variable, 500 B (500 bytes)',
    ]


def test_a_function_built_on_a_pending_variable_device_raises():
    def model_fn():
        tf.train.ExponentialMovingAverage(0.9).apply([tf.get_variable('a', [3])])

    config = DeploymentConfig(num_ps_tasks=2, ps_strategy='bytes')
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"ps_strategy='bytes' .*cannot place the "
                                             r"variables of model_fn: functions \['cond_"):
            create_clones(config, model_fn)
    with tf.Graph().as_default():
        create_clones(DeploymentConfig(num_ps_tasks=2), model_fn)  # Round-robin can.


def test_placement_plan_counts_variables_per_ps_task():
    config = DeploymentConfig(num_ps_tasks=2)
    with tf.Graph().as_default() as graph:
        with tf.device(config.variables_device()):
            tf.get_variable('big', [1000, 400])  # 1.6 MB on task 0.
            tf.get_variable('small', [3], dtype=tf.float16)  # 6 bytes on task 1.
            tf.get_variable('tiny', [2], dtype=tf.int8)  # 2 bytes on task 0.
        tf.get_variable('local', [5])  # No device: not on a variable device.
    assert placement_plan(config, graph).splitlines() == [
        'variables  round-robin over /job:ps/task:0/device:CPU:0, /job:ps/task:1/device:CPU:0',
        'inputs     /job:worker/task:0/device:CPU:0',
        'optimizer  /job:worker/task:0/device:CPU:0',
        'clone 0    /job:worker/task:0/device:GPU:0',
        'ps task 0  /job:ps/task:0/device:CPU:0  2 variables, 1.6 MB (1,600,002 bytes)',
        'ps task 1  /job:ps/task:1/device:CPU:0  1 variable, 6 B (6 bytes)',
    ]


def test_placement_plan_counts_local_variables():
    config = DeploymentConfig(clone_on_cpu=True)
    with tf.Graph().as_default() as graph:
        create_clones(config, sized_model(VARIABLES[:2]))  # 500 bytes.
        with tf.device('/device:GPU:0'):
            tf.get_variable('elsewhere', [5])
    assert placement_plan(config, graph).splitlines()[-1] == (
        'local      /device:CPU:0  2 variables, 500 B (500 bytes)')
    assert placement_plan(config, tf.Graph()).splitlines()[-1] == (
        'local      /device:CPU:0  0 variables, 0 B (0 bytes)')


def test_training_on_grpc_servers_with_two_ps_tasks():
    """A worker and 2 PS tasks as in-process gRPC servers on loopback (they stop with the
    process): Adam trains, and both PS tasks hold variables."""
    ps0, ps1, worker = (f'127.0.0.1:{port}' for port in free_ports(LOCALHOST, 3))
    cluster = tf.train.ClusterSpec({'ps': [ps0, ps1], 'worker': [worker]})
    servers = {job_task: tf.distribute.Server(cluster, job_name=job_task[0],
                                              task_index=job_task[1], start=True)
               for job_task in [('ps', 0), ('ps', 1), ('worker', 0)]}
    config = DeploymentConfig(num_ps_tasks=2, clone_on_cpu=True, ps_strategy='bytes')
    rng = np.random.RandomState(0)
    inputs = rng.randn(16, 4).astype(np.float32)
    labels = (inputs[:, 0] > 0).astype(np.int64)

    def model_fn():
        net = slim.fully_connected(tf.constant(inputs), 8, scope='hidden')
        logits = slim.fully_connected(net, 2, activation_fn=None, scope='logits')
        tf.losses.sparse_softmax_cross_entropy(tf.constant(labels), logits)

    with tf.Graph().as_default() as graph:
        model = deploy(config, model_fn, optimizer=tf.train.AdamOptimizer(0.05))
        variables = tf.global_variables()
        with tf.Session(servers['worker', 0].target,
                        config=tf.ConfigProto(allow_soft_placement=False)) as sess:
            sess.run(tf.global_variables_initializer())
            losses = [sess.run(model.train_op) for _ in range(10)]
            values = sess.run(variables)
    assert losses[-1] < 0.9 * losses[0]
    assert all(np.isfinite(value).all() for value in values)
    variable_ops = [op for op in graph.get_operations()
                    if op.type in ('VariableV2', 'VarHandleOp')]
    assert {_task(op) for op in variable_ops} == {0, 1}
