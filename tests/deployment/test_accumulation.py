"""gradient_accumulation_steps: K micro-batches per update equal one batch K times larger, the
global step counts updates, batch-norm statistics move every micro-batch."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment.model_deploy import (
    DeploymentConfig,
    create_clones,
    deploy,
    optimize_clones,
)

from helpers import assert_values_close, cpu_session, labelled_images

DEVICES = ['/device:CPU:0', '/device:CPU:1']
CLASSES = 5
OPTIMIZERS = {
    'sgd': lambda: tf.train.GradientDescentOptimizer(0.1),
    'momentum': lambda: tf.train.MomentumOptimizer(0.05, 0.9),
    'rmsprop': lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.9),
}


def _data(examples, seed=0):
    """(images [examples, 6, 6, 3] in [0, 1), labels [examples]) numpy arrays."""
    return labelled_images((examples, 6, 6, 3), CLASSES, seed)


def _model(images, labels, batch_norm=False):
    """A regularized conv layer (with batch norm if asked) and logits, with their loss."""
    net = slim.conv2d(images, 4, 3, weights_regularizer=slim.l2_regularizer(0.01),
                      weights_initializer=tf.truncated_normal_initializer(stddev=0.3, seed=1),
                      normalizer_fn=slim.batch_norm if batch_norm else None,
                      normalizer_params={'is_training': True, 'decay': 0.5}, scope='conv')
    logits = slim.fully_connected(
        slim.flatten(net), CLASSES, activation_fn=None, scope='logits',
        weights_initializer=tf.truncated_normal_initializer(stddev=0.3, seed=2))
    tf.losses.sparse_softmax_cross_entropy(labels, logits)


def _train(data, updates, accumulation, num_clones=1, variable_update='parameter_server',
           optimizer='sgd', batch_norm=False):
    """Runs `updates` updates of `accumulation` micro-batches, the data split evenly between
    the runs (and each run's batch between the clones); returns (global variables as
    {name: value}, global step after each run)."""
    images, labels = data
    runs = updates * accumulation
    per_run = len(images) // runs
    with tf.Graph().as_default():
        batch = (tf.placeholder(tf.float32, [per_run, 6, 6, 3]),
                 tf.placeholder(tf.int64, [per_run]))
        halves = iter(zip(*(tf.split(t, num_clones) for t in batch)))
        config = DeploymentConfig(num_clones=num_clones, clone_devices=DEVICES[:num_clones],
                                  variable_update=variable_update)
        model = deploy(config, lambda: _model(*next(halves), batch_norm=batch_norm),
                       optimizer=OPTIMIZERS[optimizer](),
                       gradient_accumulation_steps=accumulation)
        steps = []
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            for run in range(runs):
                part = slice(run * per_run, (run + 1) * per_run)
                session.run(model.train_op, {batch[0]: images[part], batch[1]: labels[part]})
                steps.append(session.run(tf.train.get_global_step()))
            return {v.op.name: session.run(v) for v in tf.global_variables()}, steps


@pytest.mark.parametrize('optimizer', sorted(OPTIMIZERS))
def test_four_micro_batches_of_8_equal_one_batch_of_32(optimizer):
    data = _data(64)
    whole, whole_steps = _train(data, 2, 1, optimizer=optimizer)
    accumulated, steps = _train(data, 2, 4, optimizer=optimizer)
    assert_values_close(accumulated, whole, rtol=1e-5, atol=1e-6)
    assert whole_steps == [1, 2]
    assert steps == [0, 0, 0, 1, 1, 1, 1, 2]


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_accumulation_over_two_clones(variable_update):
    data = _data(32)
    whole, _ = _train(data, 1, 1, optimizer='momentum')
    accumulated, steps = _train(data, 1, 2, num_clones=2, variable_update=variable_update,
                                optimizer='momentum')
    assert_values_close(accumulated, whole, rtol=1e-5, atol=1e-6)
    assert steps == [0, 1]


def test_batch_norm_statistics_move_every_micro_batch():
    """With a zero learning rate, K runs of accumulation move the moving statistics as K
    steps without it do."""
    data = _data(16)
    OPTIMIZERS['zero'] = lambda: tf.train.GradientDescentOptimizer(0.0)
    try:
        steps, _ = _train(data, 2, 1, optimizer='zero', batch_norm=True)
        accumulated, _ = _train(data, 1, 2, optimizer='zero', batch_norm=True)
    finally:
        del OPTIMIZERS['zero']
    for name in ('conv/BatchNorm/moving_mean', 'conv/BatchNorm/moving_variance'):
        np.testing.assert_allclose(accumulated[name], steps[name], rtol=1e-6, err_msg=name)


def test_accumulators_are_local_and_next_to_their_gradients():
    with tf.Graph().as_default():
        images, labels = tf.zeros([4, 6, 6, 3]), tf.zeros([4], tf.int64)
        halves = iter(zip(tf.split(images, 2), tf.split(labels, 2)))
        config = DeploymentConfig(num_clones=2, clone_devices=DEVICES,
                                  variable_update='replicated')
        deploy(config, lambda: _model(*next(halves)), optimizer=OPTIMIZERS['sgd'](),
               gradient_accumulation_steps=3)
        accumulators = [v for v in tf.local_variables() if 'gradient_accumulator' in v.op.name]
        assert {v.device for v in accumulators} == set(DEVICES)
        assert len(accumulators) == 2 * len(tf.trainable_variables())
        assert not [v for v in tf.global_variables() if 'accumulat' in v.op.name]


def test_optimize_clones_divides_the_gradients_by_the_micro_batches():
    with tf.Graph().as_default():
        images, labels = _data(4)
        clones = create_clones(DeploymentConfig(clone_on_cpu=True),
                               lambda: _model(tf.constant(images), tf.constant(labels)))
        optimizer = tf.train.GradientDescentOptimizer(0.1)
        _, once = optimize_clones(clones, optimizer)
        _, quarter = optimize_clones(clones, optimizer, gradient_accumulation_steps=4)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            once, quarter = session.run(([g for g, _ in once], [g for g, _ in quarter]))
        for full, part in zip(once, quarter):
            np.testing.assert_allclose(part * 4, full, rtol=1e-6)


@pytest.mark.parametrize('steps, message', [
    (0, 'gradient_accumulation_steps must be an integer >= 1, got 0'),
    (2.0, 'gradient_accumulation_steps must be an integer >= 1, got 2.0'),
])
def test_bad_accumulation_steps(steps, message):
    with tf.Graph().as_default(), pytest.raises(ValueError, match=message):
        deploy(DeploymentConfig(), lambda: _model(*map(tf.constant, _data(2))),
               optimizer=OPTIMIZERS['sgd'](), gradient_accumulation_steps=steps)


def test_sync_replicas_optimizer_aggregates_instead():
    with tf.Graph().as_default():
        optimizer = tf.train.SyncReplicasOptimizer(OPTIMIZERS['sgd'](), 2, 2)
        with pytest.raises(ValueError, match='give it replicas_to_aggregate x 4 instead'):
            deploy(DeploymentConfig(), lambda: _model(*map(tf.constant, _data(2))),
                   optimizer=optimizer, gradient_accumulation_steps=4)


@pytest.mark.parametrize('precision, steps, setting', [
    ('float32', 2, 'gradient_accumulation_steps=2'),
    ('float16', 1, "precision='float16'"),
])
def test_conditional_updates_refuse_reference_variables(precision, steps, setting):
    """Both apply the update inside a tf.cond, where the optimizer fails on a reference
    variable with a TypeError deep in TensorFlow: the refusal names the variable."""
    def model_fn():
        with tf.variable_scope('conv', use_resource=False):
            _model(*map(tf.constant, _data(2)))

    with tf.Graph().as_default(), pytest.raises(UsageError) as refusal:
        deploy(DeploymentConfig(precision=precision), model_fn, optimizer=OPTIMIZERS['rmsprop'](),
               gradient_accumulation_steps=steps)
    assert str(refusal.value) == (
        f"{setting} updates the variables inside a tf.cond, where 'conv/conv/biases', a "
        'reference (not resource) variable, cannot be updated: make it with use_resource=True')
