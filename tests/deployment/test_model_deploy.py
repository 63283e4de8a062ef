"""create_clones, optimize_clones and deploy: graph structure, placement and numerics."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.deployment.model_deploy import (
    DeploymentConfig,
    create_clones,
    deploy,
    optimize_clones,
)

from graphs import lenet_model_fn
from helpers import cpu_session

CLASSES = 3
LOGISTIC_VARIABLES = ['logistic/weights', 'logistic/biases']
BATCH_NORM_VARIABLES = ['hidden/weights', 'hidden/BatchNorm/beta', 'hidden/BatchNorm/moving_mean',
                        'hidden/BatchNorm/moving_variance', 'logits/weights', 'logits/biases']


def _data(batch_size=8, features=4, seed=0):
    rng = np.random.RandomState(seed)
    return (rng.randn(batch_size, features).astype(np.float32),
            rng.randint(CLASSES, size=batch_size).astype(np.int64))


def logistic_model(inputs, labels):
    """Softmax regression with an L2-regularized weight: logits [batch, CLASSES]."""
    logits = slim.fully_connected(
        inputs, CLASSES, activation_fn=None, scope='logistic',
        weights_initializer=tf.truncated_normal_initializer(stddev=0.5, seed=1),
        weights_regularizer=slim.l2_regularizer(0.01))
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return logits


def batch_norm_model(inputs, labels):
    """One batch-normalized hidden layer, an activation summary, then logits."""
    net = slim.fully_connected(
        inputs, 6, normalizer_fn=slim.batch_norm, scope='hidden',
        normalizer_params={'is_training': True, 'decay': 0.5},
        weights_initializer=tf.truncated_normal_initializer(stddev=0.5, seed=2))
    tf.summary.histogram('hidden_activations', net)
    logits = slim.fully_connected(
        net, CLASSES, activation_fn=None, scope='logits',
        weights_initializer=tf.truncated_normal_initializer(stddev=0.5, seed=3))
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return logits


def _fixed_batch_model(model, inputs, labels, num_slices):
    """A model_fn that gives each successive clone the next of `num_slices` equal slices."""
    slices = iter(zip(np.split(inputs, num_slices), np.split(labels, num_slices)))

    def model_fn():
        x, y = next(slices)
        return model(tf.constant(x), tf.constant(y))
    return model_fn


@pytest.mark.parametrize('model, names', [(logistic_model, LOGISTIC_VARIABLES),
                                          (batch_norm_model, BATCH_NORM_VARIABLES)])
@pytest.mark.parametrize('num_clones', [1, 3])
def test_variables_are_created_once_on_the_variables_device(model, names, num_clones):
    with tf.Graph().as_default():
        x, y = _data()
        create_clones(DeploymentConfig(num_clones=num_clones),
                      model, args=[tf.constant(x), tf.constant(y)])
        variables = tf.global_variables()
        assert [v.op.name for v in variables] == names
        assert {v.op.device for v in variables} == {'/device:CPU:0'}
        assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == (
            1 if model is logistic_model else 0)


@pytest.mark.parametrize('use_resource, variable_op', [(False, 'VariableV2'),
                                                       (True, 'VarHandleOp')])
def test_every_variable_goes_round_robin_to_the_ps(use_resource, variable_op):
    config = DeploymentConfig(num_clones=2, num_ps_tasks=2)

    def model_fn():
        x, y = _data()
        logits = batch_norm_model(tf.constant(x), tf.constant(y))
        scale = tf.Variable(1.0, name='scale')  # Neither slim nor tf.get_variable.
        return logits * scale

    with tf.Graph().as_default() as graph:
        with tf.variable_scope('', use_resource=use_resource):
            deploy(config, model_fn, optimizer=tf.train.MomentumOptimizer(0.1, 0.9))
    variable_ops = [op for op in graph.get_operations()
                    if op.type in ('VariableV2', 'VarHandleOp')]
    assert {op.type for op in variable_ops} == {variable_op}
    assert all(op.device.startswith('/job:ps/task:') for op in variable_ops)
    # Variables made by the clones alternate between the tasks, in creation order.
    cloned = [op for op in variable_ops if not op.name.endswith('Momentum')
              and op.name != 'global_step'][:6]
    assert [op.device for op in cloned] == [
        f'/job:ps/task:{i % 2}/device:CPU:0' for i in range(6)]
    # The clones' computation stays on the worker.
    compute = [op for op in graph.get_operations()
               if op.name.startswith('clone_') and op.type in ('MatMul', 'Relu', 'Mul')]
    assert compute and all(op.device.startswith('/job:worker/task:0/device:GPU:')
                           for op in compute)


def _slims_clones(config, model_fn):
    """The clones as research/slim's create_clones builds them: slim's variable functions
    under config.variables_device(), each clone under its name scope, its device and a
    variable scope reusing the first clone's variables."""
    with slim.arg_scope([slim.model_variable, slim.variable], device=config.variables_device()):
        for i in range(config.num_clones):
            with tf.name_scope(config.clone_scope(i)), tf.device(config.clone_device(i)), \
                    tf.variable_scope(tf.get_variable_scope(), reuse=True if i else None):
                model_fn()


@pytest.mark.parametrize('num_ps_tasks', [0, 2])
def test_gpu_clones_place_every_op_of_the_variables_as_slims(num_ps_tasks):
    config = DeploymentConfig(num_clones=2, num_ps_tasks=num_ps_tasks)
    devices = []
    for build in (_slims_clones, create_clones):
        with tf.Graph().as_default() as graph:
            build(config, lenet_model_fn())
        devices.append({op.name: op.device for op in graph.get_operations()})
    slims, ours = devices
    checks = {name: device for name, device in slims.items()
              if name.endswith('/IsInitialized/VarIsInitializedOp')}
    # Without ps tasks on the variables' CPU, with them where the clone's device puts them.
    assert set(checks.values()) == (
        {'/device:CPU:0'} if not num_ps_tasks else {'/job:worker/task:0/device:GPU:0'})
    assert len(checks) == 8  # LeNet's 4 weights and 4 biases.
    if num_ps_tasks:  # With ps tasks ours also reads each variable once on the worker's CPU.
        ours = {name: ours[name] for name in checks}
        slims = checks
    assert ours == slims


def test_clone_scopes_devices_and_outputs():
    x, y = _data()
    with tf.Graph().as_default():
        clones = create_clones(DeploymentConfig(num_clones=3), logistic_model,
                               args=[tf.constant(x), tf.constant(y)])
    assert [(c.scope, c.device) for c in clones] == [
        (f'clone_{i}/', f'/device:GPU:{i}') for i in range(3)]
    assert [c.outputs.op.name for c in clones] == [
        f'clone_{i}/logistic/BiasAdd' for i in range(3)]
    assert [c.outputs.device for c in clones] == [f'/device:GPU:{i}' for i in range(3)]
    with tf.Graph().as_default():
        [clone] = create_clones(DeploymentConfig(), logistic_model,
                                kwargs={'inputs': tf.constant(x), 'labels': tf.constant(y)})
    assert (clone.scope, clone.device, clone.outputs.op.name) == (
        '', '/device:GPU:0', 'logistic/BiasAdd')


def test_each_clone_has_update_ops_and_train_op_runs_the_first_clones():
    x, y = _data()
    with tf.Graph().as_default():
        model = deploy(DeploymentConfig(num_clones=2), batch_norm_model,
                       args=[tf.constant(x), tf.constant(y)],
                       optimizer=tf.train.GradientDescentOptimizer(0.1))
        first = tf.get_collection(tf.GraphKeys.UPDATE_OPS, 'clone_0/')
        second = tf.get_collection(tf.GraphKeys.UPDATE_OPS, 'clone_1/')
    assert len(first) == len(second) == 2  # moving mean and variance
    dependencies = set(model.train_op.op.control_inputs)
    # Update ops are Operations, Tensors or (for resource variables) Variables.
    assert {getattr(u, 'op', u) for u in first} <= dependencies
    assert not {getattr(u, 'op', u) for u in second} & dependencies
    assert model.train_op.op.name == 'train_op'
    assert model.total_loss.op.name == 'total_loss'


@pytest.mark.parametrize('optimizer', [tf.train.GradientDescentOptimizer(0.1), None],
                         ids=['training', 'evaluation'])
@pytest.mark.parametrize('num_ps_tasks, cpu', [(0, '/device:CPU:0'),
                                               (1, '/job:worker/task:0/device:CPU:0')])
def test_every_summary_input_is_on_the_cpu(optimizer, num_ps_tasks, cpu):
    x, y = _data()
    with tf.Graph().as_default():
        tf.summary.scalar('before_deploy', tf.constant(1.0))
        model = deploy(DeploymentConfig(num_clones=2, num_ps_tasks=num_ps_tasks),
                       logistic_model_with_summary, args=[tf.constant(x), tf.constant(y)],
                       optimizer=optimizer, summarize_gradients=optimizer is not None)
    inputs = model.summary_op.op.inputs
    names = {t.op.name for t in inputs}
    assert {'before_deploy', 'clone_0/logistic_activations',
            'clone_0/Losses/clone_0//clone_loss', 'clone_0/Losses/regularization_loss'} <= names
    assert 'clone_1/logistic_activations' not in names
    assert ('logistic/weights/gradient' in names) == (optimizer is not None)
    # deploy() placed every summary it or model_fn made; the caller's own is unplaced.
    assert {t.device for t in inputs if t.op.name != 'before_deploy'} == {cpu}
    assert (model.train_op is None) == (optimizer is None)


@pytest.mark.parametrize('num_clones, tags', [
    (1, {'Losses/clone_loss', 'Losses/regularization_loss', 'Losses/total_loss'}),
    (2, {'clone_0/Losses/clone_0//clone_loss', 'clone_0/Losses/regularization_loss',
         'Losses/total_loss'}),
])
def test_loss_summaries_keep_slims_tags_in_the_event_file(tmp_path, num_clones, tags):
    x, y = _data()
    with tf.Graph().as_default():
        model = deploy(DeploymentConfig(num_clones=num_clones, clone_on_cpu=True),
                       logistic_model, args=[tf.constant(x), tf.constant(y)],
                       optimizer=tf.train.GradientDescentOptimizer(0.1))
        with tf.Session() as sess, tf.summary.FileWriter(str(tmp_path)) as writer:
            sess.run(tf.global_variables_initializer())
            writer.add_summary(sess.run(model.summary_op), global_step=1)
    (events,) = tmp_path.glob('events.out.tfevents.*')
    written = {value.tag for event in tf.train.summary_iterator(str(events))
               for value in event.summary.value}
    assert written == tags


def logistic_model_with_summary(inputs, labels):
    logits = logistic_model(inputs, labels)
    tf.summary.histogram('logistic_activations', logits)
    return logits


@pytest.mark.parametrize('call', [
    lambda: create_clones(DeploymentConfig(), logistic_model),
    lambda: deploy(DeploymentConfig(), logistic_model),
    lambda: optimize_clones([], tf.train.GradientDescentOptimizer(0.1)),
], ids=['create_clones', 'deploy', 'optimize_clones'])
def test_eager_execution_gets_a_clear_error(call):
    assert tf.executing_eagerly()
    with pytest.raises(RuntimeError, match=r'builds a TF1 graph, but eager execution is on: '
                                           r'call tf\.compat\.v1\.disable_eager_execution'):
        call()


def test_optimize_clones_without_any_loss_raises():
    with tf.Graph().as_default():
        clones = create_clones(DeploymentConfig(), lambda: slim.variable('v', [1]))
        with pytest.raises(ValueError, match='model_fn added no loss'):
            optimize_clones(clones, tf.train.GradientDescentOptimizer(0.1))


@pytest.mark.parametrize('num_clones', [2, 4])
def test_clone_gradients_sum_to_the_single_clone_gradient(num_clones):
    """N clones fed one slice each give the gradient of one clone fed the whole batch."""
    x, y = _data(batch_size=8)

    def loss_and_gradients(config, num_slices):
        with tf.Graph().as_default():
            clones = create_clones(config, _fixed_batch_model(logistic_model, x, y, num_slices))
            total_loss, grads_and_vars = optimize_clones(
                clones, tf.train.GradientDescentOptimizer(1.0))
            with cpu_session(num_slices) as sess:
                sess.run(tf.global_variables_initializer())
                loss, grads = sess.run([total_loss, [g for g, _ in grads_and_vars]])
            return loss, {v.op.name: g for (_, v), g in zip(grads_and_vars, grads)}

    single_loss, single = loss_and_gradients(DeploymentConfig(clone_on_cpu=True), 1)
    devices = [f'/device:CPU:{i}' for i in range(num_clones)]
    split_loss, split = loss_and_gradients(
        DeploymentConfig(num_clones=num_clones, clone_devices=devices), num_clones)
    assert sorted(split) == sorted(single) == sorted(LOGISTIC_VARIABLES)
    np.testing.assert_allclose(split_loss, single_loss, rtol=1e-5)
    for name in single:
        assert np.abs(single[name]).max() > 1e-3  # A real, nonzero gradient.
        np.testing.assert_allclose(split[name], single[name], rtol=1e-5, atol=1e-6)


def test_two_clones_on_two_cpus_train_and_update_batch_norm():
    x, y = _data(batch_size=16)
    config = DeploymentConfig(num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1'])
    with tf.Graph().as_default():
        model = deploy(config, _fixed_batch_model(batch_norm_model, x, y, 2),
                       optimizer=tf.train.GradientDescentOptimizer(0.5))
        [moving_mean] = [v for v in tf.global_variables() if 'moving_mean' in v.name]
        with cpu_session(2) as sess:
            sess.run(tf.global_variables_initializer())
            loss_before_step = sess.run(model.total_loss)
            metadata = tf.RunMetadata()
            losses = [sess.run(model.train_op, run_metadata=metadata,
                               options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE))]
            losses += [sess.run(model.train_op) for _ in range(9)]
            mean, step = sess.run([moving_mean, tf.train.get_global_step()])
    assert losses[0] == pytest.approx(loss_before_step, rel=1e-6)  # train_op returns the loss.
    assert losses[-1] < 0.8 * losses[0]
    assert step == 10
    assert np.abs(mean).max() > 1e-3  # Moving statistics moved away from their zero start.
    ran_on = {d.device for d in metadata.step_stats.dev_stats if d.node_stats}
    assert any(d.endswith('device:CPU:1') for d in ran_on), ran_on
