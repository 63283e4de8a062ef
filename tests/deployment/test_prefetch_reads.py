"""Prefetched reads (DeploymentConfig's prefetch_reads, --prefetch_reads): each step computes
with local copies of the ps tasks' variables and refreshes them while it sends its
gradients. The copies and refreshes in deploy()'s graph, the gradients reaching the
variables, the plan's links, a real step through gRPC servers, and the settings refused."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import network_traffic
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.deployment.network_traffic import EACH_WAY, IN_THEN_OUT
from slim_deploy.image_classifier.config import TrainConfig

from clusters import servers_here
from graphs import LENET, built, lenet_model_fn

WORKER_CPU = '/job:worker/task:0/device:CPU:0'


def _ps_config(**options):
    return DeploymentConfig(num_clones=2, num_replicas=2, num_ps_tasks=1, **options)


def test_each_variable_is_read_from_a_local_copy_that_the_first_clone_refreshes():
    graph = built(_ps_config(prefetch_reads=True), lenet_model_fn())
    with graph.as_default():
        variables = tf.trainable_variables()
        copies = tf.local_variables()
        refreshes = tf.get_collection(tf.GraphKeys.UPDATE_OPS, 'clone_0')
        train_op = graph.get_operation_by_name('train_op')
        assert not set(copies) & set(tf.global_variables())  # Not in checkpoints.
    assert sorted(c.op.name for c in copies) == sorted(
        f'clone_0/{v.op.name}/prefetched/copy' for v in variables)
    assert all(c.device == WORKER_CPU for c in copies)
    assert sorted(r.name for r in refreshes) == sorted(
        f'clone_0/{v.op.name}/prefetched/refresh' for v in variables)
    assert set(refreshes) <= set(train_op.control_inputs)
    # Every clone's layers take the copy's value: no ReadVariableOp of a variable on the ps
    # task feeds the forward pass but the refreshes' (and the updates', which read on ps).
    forward = [op for op in graph.get_operations() if op.name.startswith(
        ('clone_0/LeNet', 'clone_1/LeNet')) and '/prefetched/' not in op.name]
    assert forward and not [t for op in forward for t in op.inputs
                            if t.op.type == 'ReadVariableOp' and 'ps' in t.op.device]


def test_the_gradients_reach_the_variables_in_full():
    graph = built(_ps_config(prefetch_reads=True), lenet_model_fn())
    with graph.as_default():
        variables = tf.trainable_variables()
        updates = [op for op in graph.get_operations()
                   if op.type == 'ResourceApplyGradientDescent']
    assert sorted(op.inputs[0].op.name for op in updates) == sorted(v.op.name for v in variables)
    for op in updates:
        assert op.inputs[-1].shape == op.inputs[0].op.get_attr('shape')


def test_the_plan_no_longer_orders_the_gradients_after_the_reads():
    """The same bytes cross; the worker's link carries them each way at once."""
    before = network_traffic.step_traffic(built(_ps_config(), lenet_model_fn()), _ps_config())
    config = _ps_config(prefetch_reads=True)
    after = network_traffic.step_traffic(built(config, lenet_model_fn()), config)
    assert before.worker.rule == IN_THEN_OUT and after.worker.rule == EACH_WAY
    assert after.worker.bytes_in == before.worker.bytes_in >= LENET
    assert after.worker.bytes_out == before.worker.bytes_out
    assert after.worker.bytes == after.worker.bytes_in < before.worker.bytes


def _quadratic():
    """model_fn: loss 0.5 * |w|^2 of a 3-vector w starting at 1, whose gradient is the value
    the step computed with."""
    w = tf.get_variable('w', [3], initializer=tf.ones_initializer(), use_resource=True)
    tf.losses.add_loss(0.5 * tf.reduce_sum(tf.square(w)))


def test_a_step_computes_with_the_values_of_this_or_the_last_step():
    """1 ps task and 1 worker, gRPC servers in this process: each gradient-descent step at
    rate 0.5 moves w by half the value the step computed with, which is w before this
    step's update or before the last one's (the refresh and the update of a step run at
    once); the copy follows w."""
    servers = servers_here()
    with tf.Graph().as_default():
        config = DeploymentConfig(num_ps_tasks=1, clone_on_cpu=True, prefetch_reads=True)
        model = deploy(config, _quadratic, optimizer=tf.train.GradientDescentOptimizer(0.5))
        (w,) = tf.trainable_variables()
        (copy,) = tf.local_variables()
        assert w.device.startswith('/job:ps/task:0') and copy.device == WORKER_CPU
        with tf.Session(servers[1].target) as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            history = [session.run(w)]
            for _ in range(6):
                loss = session.run(model.train_op)
                history.append(session.run(w))
                used = 2 * (history[-2] - history[-1])  # The value the step computed with.
                np.testing.assert_allclose(loss, 0.5 * np.sum(used ** 2), rtol=1e-6)
                assert any(np.allclose(used, old) for old in history[-3:-1])
            assert np.all(history[-1] < 0.1)
            np.testing.assert_allclose(session.run(copy), history[-1], rtol=0, atol=0.25)


@pytest.mark.parametrize('options, refusal', [
    (dict(prefetch_reads=True),
     "prefetch_reads=True prefetches the reads from ps tasks, and "
     "variable_update='parameter_server' with num_ps_tasks=0 reads none: use it with "
     "variable_update='parameter_server' and ps tasks"),
    (dict(prefetch_reads=True, variable_update='collective', num_replicas=2),
     "prefetch_reads=True prefetches the reads from ps tasks, and "
     "variable_update='collective' with num_ps_tasks=0 reads none"),
    (dict(prefetch_reads=1, num_ps_tasks=1), 'prefetch_reads must be True or False, got 1'),
])
def test_settings_without_reads_to_prefetch_are_refused(options, refusal):
    with pytest.raises(ValueError, match='^' + refusal.replace('(', r'\(').replace(')', r'\)')):
        DeploymentConfig(**options)


def test_deploy_refuses_synchronous_replicas():
    with tf.Graph().as_default():
        optimizer = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        with pytest.raises(ValueError, match=r'^prefetch_reads=True cannot go with a '
                           r'SyncReplicasOptimizer: synchronous workers read the variables '
                           r'after each update'):
            deploy(_ps_config(prefetch_reads=True), _quadratic, optimizer=optimizer)


@pytest.mark.parametrize('flags, refusal', [
    ({}, r'^--prefetch_reads prefetches the reads from ps tasks, and '
         r'--variable_update=parameter_server with --num_ps_tasks=0 reads none'),
    ({'worker_hosts': 'a:1,b:1', 'ps_hosts': 'c:1', 'job_name': 'worker', 'task': 0,
      'sync_replicas': True},
     r'^--prefetch_reads cannot go with --sync_replicas: synchronous workers read the '
     r'variables after each update'),
])
def test_the_flag_refuses_settings_it_cannot_serve(digits_dir, flags, refusal):
    with pytest.raises(UsageError, match=refusal):
        TrainConfig.from_flags({'train_dir': '/nonexistent', 'dataset_dir': digits_dir,
                                'prefetch_reads': True, **flags})
