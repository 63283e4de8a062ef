"""Registered nets train under deploy() with 2 clones on 2 CPU devices: one set of
variables, reused by both clones, updated by one step."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import model_deploy
from slim_deploy.image_classifier import builders
from slim_deploy.nets import nets_factory

from helpers import cpu_session


@pytest.mark.parametrize('name, image_size', [
    ('cifarnet', 32), pytest.param('mobilenet_v1_025', 96, marks=pytest.mark.slow)])
def test_one_training_step_with_two_clones(name, image_size):
    config = model_deploy.DeploymentConfig(
        num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1'])
    rng = np.random.RandomState(0)
    images = rng.uniform(-1, 1, [8, image_size, image_size, 3]).astype(np.float32)
    labels = rng.randint(10, size=8).astype(np.int64)
    network_fn = nets_factory.get_network_fn(name, 10, weight_decay=0.0004, is_training=True)
    with tf.Graph().as_default():
        batches = tf.data.Dataset.from_tensor_slices((images, labels)).batch(4)
        iterator = tf.data.make_one_shot_iterator(batches)
        model = model_deploy.deploy(
            config, builders.classification_model_fn(network_fn, iterator,
                                                     config.inputs_device(), 10, 0.0),
            optimizer=tf.train.GradientDescentOptimizer(0.01))
        clone_scopes = [c.scope for c in model.clones]
        variables = tf.global_variables()
        # Each clone ran its own copy of the net on its own device, on shared variables.
        for scope, device in zip(clone_scopes, ['/device:CPU:0', '/device:CPU:1']):
            ops = [op for op in tf.get_default_graph().get_operations()
                   if op.name.startswith(scope) and op.type == 'Conv2D']
            assert ops and {op.device for op in ops} == {device}
        assert not [v for v in variables if v.op.name.startswith('clone_')]
        trainable = tf.trainable_variables()
        with cpu_session() as sess:
            sess.run(tf.global_variables_initializer())
            before = sess.run(trainable)
            loss = sess.run(model.train_op)
            after = sess.run(trainable)
    assert np.isfinite(loss)
    assert all(np.isfinite(a).all() for a in after)
    unchanged = [v.op.name for v, b, a in zip(trainable, before, after) if np.array_equal(b, a)]
    assert not unchanged  # The summed gradients reached every trainable variable.
