"""sync_batch_norm: clones normalize with the moments of the global batch, forward and
backward, and update the moving statistics once from them; without it nothing changes."""
import itertools

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.layers import normalization as tf_layers
import tf_slim as slim

from slim_deploy.deployment.model_deploy import (
    DeploymentConfig,
    create_clones,
    optimize_clones,
    placement_plan,
)

from helpers import assert_values_close, cpu_session

DEVICES = ['/device:CPU:0', '/device:CPU:1']
BATCH = 8
DECAY = 0.5  # Large steps of the moving statistics, so that a wrong update shows.


def _slim(images, **params):
    return slim.batch_norm(images, decay=DECAY, is_training=True, scope='bn', **params)


def _tf_layers(images):
    """tf.layers.batch_normalization (tf-keras's legacy layer; tf.layers is gone with Keras
    3, and slim_deploy.common.compat points TensorFlow's module at tf-keras)."""
    return tf_layers.batch_normalization(images, momentum=DECAY, training=True, name='bn')


# Batch norms by the ways slim and tf-keras build them: slim's default runs tf-keras's
# legacy fused layer; zero_debias_moving_mean takes slim's own fused path; fused=False and
# rank-2 inputs the unfused (moments) paths.
BATCH_NORMS = {
    'slim': _slim,
    'slim_zero_debias': lambda images: _slim(images, zero_debias_moving_mean=True),
    'slim_unfused': lambda images: _slim(images, fused=False),
    'slim_rank_2': lambda images: _slim(tf.reshape(images, [-1, 5 * 5 * 3])),
    'tf_layers': _tf_layers,
}


def _data():
    rng = np.random.RandomState(0)
    return (rng.normal(1.0, 2.0, (BATCH, 5, 5, 3)).astype(np.float32),
            rng.normal(size=(BATCH, 3, 3, 4)).astype(np.float32))


def _model_fn(batch_norm, images, targets, num_clones):
    """model_fn whose clone i takes the i-th of num_clones slices of the batch: a conv layer,
    the batch norm, another conv layer and a squared-error loss (a mean over the clone's
    batch). Returns the batch norm's output."""
    slices = iter(zip(tf.split(images, num_clones), tf.split(targets, num_clones)))

    def model_fn():
        x, y = next(slices)
        net = slim.conv2d(x, 3, 1, activation_fn=None, scope='conv1',
                          weights_initializer=tf.truncated_normal_initializer(seed=1))
        normalized = batch_norm(net)
        net = tf.reshape(normalized, [-1, 5, 5, 3])
        net = slim.conv2d(net, 4, 3, padding='VALID', activation_fn=tf.nn.relu, scope='conv2',
                          weights_initializer=tf.truncated_normal_initializer(seed=2))
        tf.losses.mean_squared_error(y, net)
        return normalized
    return model_fn


def _clones(batch_norm, num_clones=2):
    """(config, clones) of the model with `batch_norm` as `num_clones` synchronized clones,
    built in the default graph on the constant data."""
    images, targets = _data()
    config = DeploymentConfig(num_clones=num_clones, clone_devices=DEVICES[:num_clones],
                              sync_batch_norm=True)
    return config, create_clones(config, _model_fn(batch_norm, tf.constant(images),
                                                   tf.constant(targets), num_clones))


def _reduces():
    """The CollectiveReduce ops of the default graph."""
    return [op for op in tf.get_default_graph().get_operations()
            if op.type == 'CollectiveReduce']


def _run(batch_norm, num_clones, sync_batch_norm, variable_update='parameter_server',
         clone_batches=None):
    """One SGD step of the model as `num_clones` clones on distinct CPU devices, fed
    `clone_batches` of the data (None: all) split between them. Returns the batch norm's
    outputs (the clones' concatenated), the gradients and the variables after the step, as
    {name: value}."""
    images, targets = _data()
    if clone_batches is not None:
        images, targets = images[:clone_batches], targets[:clone_batches]
    with tf.Graph().as_default():
        config = DeploymentConfig(num_clones=num_clones, clone_devices=DEVICES[:num_clones],
                                  variable_update=variable_update,
                                  sync_batch_norm=sync_batch_norm)
        clones = create_clones(config, _model_fn(batch_norm, tf.constant(images),
                                                 tf.constant(targets), num_clones))
        _, grads_and_vars = optimize_clones(clones, tf.train.GradientDescentOptimizer(0.1))
        update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
        step = tf.group(tf.train.GradientDescentOptimizer(0.1).apply_gradients(grads_and_vars),
                        *update_ops)
        outputs = tf.concat([clone.outputs for clone in clones], axis=0)
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())  # Copies read the variables.
            # One run of every gradient (the copies' too, when replicated): each all-reduce
            # needs every member's op in the same step.
            outputs, gradients = session.run((outputs, [g for g, _ in grads_and_vars]))
            result = {'outputs': outputs}
            result.update({f'gradient of {v.op.name}': gradient for gradient, (_, v)
                           in zip(gradients, grads_and_vars) if v in tf.global_variables()})
            session.run(step)
            result.update({v.op.name: session.run(v) for v in tf.global_variables()})
    return result


@pytest.mark.parametrize('kind', sorted(BATCH_NORMS))
def test_two_synchronized_clones_equal_one_clone_fed_the_whole_batch(kind):
    whole = _run(BATCH_NORMS[kind], 1, sync_batch_norm=False)
    synchronized = _run(BATCH_NORMS[kind], 2, sync_batch_norm=True)
    assert any('moving_variance' in name for name in whole)
    assert_values_close(synchronized, whole, rtol=0, atol=1e-5)


def test_synchronized_replicated_clones_equal_one_clone_fed_the_whole_batch():
    whole = _run(_slim, 1, sync_batch_norm=False)
    assert_values_close(_run(_slim, 2, sync_batch_norm=True, variable_update='replicated'),
                        whole, rtol=0, atol=1e-5)


def test_without_sync_each_clone_normalizes_alone_and_clone_0_updates_the_statistics():
    first_half = _run(_slim, 1, sync_batch_norm=False, clone_batches=BATCH // 2)
    unsynchronized = _run(_slim, 2, sync_batch_norm=False)
    for name in ('bn/moving_mean', 'bn/moving_variance'):
        np.testing.assert_allclose(unsynchronized[name], first_half[name], atol=1e-6)
    whole = _run(_slim, 1, sync_batch_norm=False)
    assert not np.allclose(unsynchronized['bn/moving_mean'], whole['bn/moving_mean'],
                           atol=1e-3)


def test_moments_over_other_axes_are_left_alone():
    def layer_norm(images):
        return slim.layer_norm(images, scope='ln')
    whole = _run(layer_norm, 1, sync_batch_norm=False)
    per_example = _run(layer_norm, 2, sync_batch_norm=True)
    np.testing.assert_allclose(per_example['outputs'], whole['outputs'], atol=1e-5)
    with tf.Graph().as_default():
        _clones(layer_norm)
        assert not _reduces()


def test_each_batch_norm_all_reduces_once_forward_and_once_backward():
    with tf.Graph().as_default():
        _, clones = _clones(_slim)
        assert sorted(op.device for op in _reduces()) == DEVICES
        optimize_clones(clones, tf.train.GradientDescentOptimizer(0.1))
        assert sorted(op.device for op in _reduces()) == sorted(DEVICES * 2)
        assert all(op.get_attr('T') == tf.float32 for op in _reduces())


def test_clones_that_build_different_batch_norms_are_refused():
    calls = itertools.count()

    def model_fn():
        net = tf.ones([2, 3, 3, 2])
        for _ in range(next(calls) + 1):
            net = _slim(net, reuse=tf.AUTO_REUSE)
        return net

    with tf.Graph().as_default():
        config = DeploymentConfig(num_clones=2, clone_devices=DEVICES, sync_batch_norm=True)
        with pytest.raises(ValueError, match='clone 1 of model_fn normalizes more batches '
                                             r'than clone 0 \(1\)'):
            create_clones(config, model_fn)


def test_one_clone_needs_no_all_reduce():
    with tf.Graph().as_default():
        _clones(_slim, num_clones=1)
        assert not _reduces()


@pytest.mark.parametrize('kwargs, message', [
    ({'num_clones': 2, 'clone_on_cpu': True, 'sync_batch_norm': True},
     r"sync_batch_norm=True all-reduces between the clones, which must sit on distinct "
     r"devices, but clone_on_cpu=True puts all 2 on CPU:0"),
    ({'sync_batch_norm': 'yes'}, "sync_batch_norm must be True or False, got 'yes'"),
])
def test_bad_sync_batch_norm_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeploymentConfig(**kwargs)


def test_placement_plan_says_batch_norm_is_synchronized():
    config = DeploymentConfig(num_clones=2, clone_devices=DEVICES, sync_batch_norm=True)
    assert ('batch norm  synchronized: the moments of the global batch, all-reduced over '
            '2 members: the clones') in placement_plan(config)
    assert 'batch norm' not in placement_plan(DeploymentConfig(num_clones=2))


def test_placement_plan_counts_the_synchronized_batch_norms_of_a_graph():
    with tf.Graph().as_default():
        config, clones = _clones(_slim)
        optimize_clones(clones, tf.train.GradientDescentOptimizer(0.1))
        assert ('all-reduced over 2 members: the clones (1 batch norm)\n' in
                placement_plan(config, tf.get_default_graph()))
