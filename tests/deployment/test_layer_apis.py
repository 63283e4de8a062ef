"""deploy() trains one model whatever layer API model_fn uses
(slim_deploy.deployment.variable_sharing): slim, tf.get_variable, tf.compat.v1.layers, tf-keras
layers made in model_fn, a tf-keras model (Sequential, functional, subclassed) built once and
called in it, and tf.Variable, in every variable update: one set of variables under one clone's
names, equivalence with one clone on the global batch, Keras batch-norm updates, checkpoints
across modes; and the refusals."""
import itertools
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest
import tensorflow as tf2
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.analysis import equivalence
from slim_deploy.common.errors import UsageError
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy

from helpers import cpu_session, labelled_images, variable_shapes

DEVICES = ['/device:CPU:0', '/device:CPU:1']
CLASSES = 3
MOMENTUM = 0.5  # Of every batch norm's moving statistics.
keras = tf2.keras  # tf-keras: importing slim_deploy.deployment (conftest) made tf.keras it.


def _loss(logits, labels):
    tf.losses.sparse_softmax_cross_entropy(labels, logits)


def _keras_regularization(layer):
    """Adds a Keras layer's (or model's) regularization losses to REGULARIZATION_LOSSES."""
    tf.losses.add_loss(tf.add_n(layer.losses), tf.GraphKeys.REGULARIZATION_LOSSES)


def slim_layers(images, labels):
    net = slim.conv2d(images, 4, 3, weights_regularizer=slim.l2_regularizer(0.01),
                      normalizer_fn=slim.batch_norm,
                      normalizer_params={'is_training': True, 'decay': MOMENTUM}, scope='conv')
    _loss(slim.fully_connected(slim.flatten(net), CLASSES, activation_fn=None, scope='logits'),
          labels)


def get_variable(images, labels):
    kernel = tf.get_variable('kernel', [3, 3, 2, 4],
                             regularizer=lambda w: 0.01 * tf.nn.l2_loss(w))
    weights = tf.get_variable('weights', [6 * 6 * 4, CLASSES])
    bias = tf.get_variable('bias', [CLASSES], initializer=tf.zeros_initializer())
    net = tf.nn.relu(tf.nn.conv2d(images, kernel, 1, 'SAME'))
    _loss(tf.matmul(tf.reshape(net, [-1, 6 * 6 * 4]), weights) + bias, labels)


def tf_layers(images, labels):
    layers = tf.layers
    net = layers.conv2d(images, 4, 3, padding='same',
                        kernel_regularizer=lambda w: 0.01 * tf.nn.l2_loss(w))
    net = tf.nn.relu(layers.batch_normalization(net, training=True, momentum=MOMENTUM))
    _loss(layers.dense(layers.flatten(net), CLASSES), labels)


def _keras_layers():
    return [keras.layers.Conv2D(4, 3, padding='same',
                                kernel_regularizer=keras.regularizers.l2(0.01)),
            keras.layers.BatchNormalization(momentum=MOMENTUM),
            keras.layers.ReLU(), keras.layers.Flatten(), keras.layers.Dense(CLASSES)]


def keras_layers(images, labels):
    """tf-keras layers made anew by each call."""
    net = images
    layers = _keras_layers()
    for layer in layers:
        net = layer(net, training=True) if isinstance(
            layer, keras.layers.BatchNormalization) else layer(net)
    for layer in layers:
        if layer.losses:
            _keras_regularization(layer)
    _loss(net, labels)


def _sequential():
    return keras.Sequential([keras.Input([6, 6, 2])] + _keras_layers())


def _functional():
    inputs = keras.Input([6, 6, 2])
    conv, batch_norm, relu, flatten, dense = _keras_layers()
    outputs = dense(flatten(relu(batch_norm(conv(inputs)))))
    return keras.Model(inputs, outputs)


class _Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv, self.batch_norm, self.relu, self.flatten, self.dense = _keras_layers()

    def call(self, images, training=None):
        net = self.batch_norm(self.conv(images), training=training)
        return self.dense(self.flatten(self.relu(net)))


def keras_model(build):
    """model_fn calling a tf-keras model that build() makes once per graph: in the graph
    before deploy() when model_fn.build_in(graph) is called, else at the first call."""
    models = weakref.WeakKeyDictionary()

    def build_in(graph):
        if graph not in models:
            models[graph] = build()

    def model_fn(images, labels):
        build_in(tf.get_default_graph())
        model = models[tf.get_default_graph()]
        logits = model(images, training=True)
        _keras_regularization(model)
        _loss(logits, labels)

    model_fn.build_in = build_in
    return model_fn


def tf_variable(images, labels):
    kernel = tf.Variable(tf.random.truncated_normal([3, 3, 2, 4], stddev=0.3, seed=1),
                         name='kernel')
    weights = tf.Variable(tf.random.truncated_normal([6 * 6 * 4, CLASSES], stddev=0.1, seed=2),
                          name='weights')
    net = tf.nn.relu(tf.nn.conv2d(images, kernel, 1, 'SAME'))
    _loss(tf.matmul(tf.reshape(net, [-1, 6 * 6 * 4]), weights), labels)


STYLES = {
    'slim': lambda: slim_layers,
    'get_variable': lambda: get_variable,
    'tf.layers': lambda: tf_layers,
    'keras_layers': lambda: keras_layers,
    'keras_sequential': lambda: keras_model(_sequential),
    'keras_functional': lambda: keras_model(_functional),
    'keras_subclassed': lambda: keras_model(_Subclassed),
    'tf.Variable': lambda: tf_variable,
}
MODES = ['parameter_server', 'replicated', 'collective']


def batch(size=8, seed=0):
    """(images [size, 6, 6, 2] in [-1, 1), labels [size]) numpy arrays."""
    return labelled_images((size, 6, 6, 2), CLASSES, seed, low=-1.0)


def _config(variable_update, **kwargs):
    workers = {'num_replicas': 2} if variable_update == 'collective' else {}
    return DeploymentConfig(num_clones=2, clone_devices=DEVICES,
                            variable_update=variable_update, **workers, **kwargs)


def _deploy(model_fn, images, labels, variable_update='parameter_server', **kwargs):
    """Deploys model_fn as 2 clones, each on half of `images` and `labels` (tensors)."""
    halves = iter(zip(tf.split(images, 2), tf.split(labels, 2)))
    return deploy(_config(variable_update, **kwargs), lambda: model_fn(*next(halves)),
                  optimizer=tf.train.GradientDescentOptimizer(0.1))


def _single_clone_names(model_fn):
    """{global variable name: shape} and the trainable names of model_fn called once."""
    with tf.Graph().as_default():
        model_fn(*map(tf.constant, batch()))
        return (variable_shapes(),
                sorted(v.op.name for v in tf.trainable_variables()))


@pytest.mark.parametrize('variable_update', MODES)
@pytest.mark.parametrize('style', STYLES)
def test_the_clones_share_one_set_of_variables_named_as_one_clones(style, variable_update):
    model_fn = STYLES[style]()
    single, trainable = _single_clone_names(model_fn)
    with tf.Graph().as_default() as graph:
        if hasattr(model_fn, 'build_in'):  # The Keras model is built before deploy().
            model_fn.build_in(graph)
        _deploy(model_fn, *map(tf.constant, batch()), variable_update)
        assert sorted(v.op.name for v in tf.trainable_variables()) == trainable
        assert variable_shapes() == {**single, 'global_step': []}
        copies = sorted(v.op.name for v in tf.local_variables() if v.op.name.startswith('clone'))
        if variable_update == 'parameter_server':
            assert copies == []
        else:  # One copy of each trainable variable on clone 1's device.
            assert copies == sorted(f'clone_1/{name}' for name in trainable)
            devices = {v.op.name: v.device for v in tf.local_variables()}
            assert {devices[name].rsplit('/', 1)[-1] for name in copies} == {'device:CPU:1'}


@pytest.mark.parametrize('variable_update', [
    'parameter_server', 'replicated',
    pytest.param('collective', marks=pytest.mark.cluster)])
@pytest.mark.parametrize('style', STYLES)
def test_the_clones_train_as_one_clone_on_the_global_batch(style, variable_update):
    model_fn = STYLES[style]()
    workers = 2 if variable_update == 'collective' else 1
    setup = (lambda: model_fn.build_in(tf.get_default_graph())) if hasattr(
        model_fn, 'build_in') else None
    result = equivalence.check(model_fn, batch(), 2, variable_update, num_workers=workers,
                               sync_batch_norm=True, setup=setup)
    assert result.expected is None
    assert result.equivalent, '\n'.join(equivalence.format_result(result))
    _, gradients, _ = result.checks
    trainable = _single_clone_names(STYLES[style]())[1]
    assert sorted(d.name for d in gradients.differences[:len(trainable)]) == trainable
    assert len(gradients.differences) == workers * len(trainable)


KERAS_STYLES = ['keras_layers', 'keras_sequential', 'keras_functional', 'keras_subclassed']


def _moving_mean(variables):
    """The value of the one batch norm's moving mean among {name: value}."""
    (value,) = [value for name, value in variables.items() if name.endswith('moving_mean')]
    return value


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
@pytest.mark.parametrize('style', KERAS_STYLES)
def test_keras_batch_norm_updates_run_with_clone_0s_statistics(style, variable_update):
    """Without sync_batch_norm, as slim's: the moving mean moves toward clone 0's batch mean."""
    images, labels = batch()
    with tf.Graph().as_default():
        model = _deploy(STYLES[style](), tf.constant(images), tf.constant(labels),
                        variable_update)
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            kernel, bias = session.run([v for v in tf.trainable_variables()
                                        if v.op.name.endswith(('conv2d/kernel', 'conv2d/bias'))])
            session.run(model.train_op)
            moving_mean = _moving_mean(session.run({v.op.name: v for v in tf.global_variables()}))
    convolved = tf2.nn.conv2d(images[:4], kernel, 1, 'SAME') + bias  # Eagerly.
    clone_0_mean = tf2.reduce_mean(convolved, [0, 1, 2]).numpy()
    np.testing.assert_allclose(moving_mean, (1 - MOMENTUM) * clone_0_mean, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('style', KERAS_STYLES)
def test_evaluation_restores_and_uses_the_trained_moving_statistics(style, tmp_path):
    images, labels = batch()
    checkpoint = str(tmp_path / 'model.ckpt')
    with tf.Graph().as_default():
        model = _deploy(STYLES[style](), tf.constant(images), tf.constant(labels))
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            for _ in range(3):
                session.run(model.train_op)
            trained = session.run({v.op.name: v for v in tf.global_variables()})
            tf.train.Saver().save(session, checkpoint)
    with tf.Graph().as_default():  # One clone in inference mode, as evaluation builds it.
        net = _inference(style, images)
        names = {v.op.name for v in tf.global_variables()}
        assert names == set(trained) - {'global_step'}
        with tf.Session() as session:
            tf.train.Saver().restore(session, checkpoint)
            restored = session.run({v.op.name: v for v in tf.global_variables()})
            logits = session.run(net)
            (moving_mean,) = [v for v in tf.global_variables()
                              if v.op.name.endswith('moving_mean')]
            session.run(moving_mean.initializer)  # Back to zeros.
            assert not np.allclose(session.run(net), logits)
    for name, value in restored.items():
        np.testing.assert_array_equal(value, trained[name], err_msg=name)
    assert np.any(_moving_mean(restored) != 0)


def _inference(style, images):
    """Logits of the style's model, built as one clone in inference mode."""
    if style == 'keras_layers':
        net = tf.constant(images)
        for layer in _keras_layers():
            net = layer(net, training=False) if isinstance(
                layer, keras.layers.BatchNormalization) else layer(net)
        return net
    build = {'keras_sequential': _sequential, 'keras_functional': _functional,
             'keras_subclassed': _Subclassed}[style]
    return build()(tf.constant(images), training=False)


@pytest.mark.parametrize('style', STYLES)
@pytest.mark.parametrize('saved_by, restored_by', [('parameter_server', 'replicated'),
                                                   ('replicated', 'parameter_server')])
def test_checkpoints_restore_across_variable_updates(style, saved_by, restored_by, tmp_path):
    checkpoint = str(tmp_path / 'model.ckpt')
    model_fn = STYLES[style]()
    with tf.Graph().as_default():
        model = _deploy(model_fn, *map(tf.constant, batch()), saved_by)
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            session.run(model.train_op)
            saved = session.run({v.op.name: v for v in tf.global_variables()})
            tf.train.Saver().save(session, checkpoint)
    with tf.Graph().as_default():
        _deploy(model_fn, *map(tf.constant, batch()), restored_by)
        with cpu_session() as session:
            tf.train.Saver().restore(session, checkpoint)
            session.run(tf.local_variables_initializer())  # Copies from the restored values.
            restored = session.run({v.op.name: v for v in tf.global_variables()})
            copies = session.run({v.op.name[len('clone_1/'):]: v for v in tf.local_variables()
                                  if v.op.name.startswith('clone_1/')})
    assert sorted(restored) == sorted(saved)
    for name, value in restored.items():
        np.testing.assert_array_equal(value, saved[name], err_msg=name)
    for name, value in copies.items():
        np.testing.assert_array_equal(value, saved[name], err_msg=f'clone_1/{name}')


# ---- What cannot be one model is refused in one line. ----

def _counted(make):
    """model_fn(images, labels) calling make(call number, images, labels)."""
    calls = itertools.count()
    return lambda images, labels: make(next(calls), images, labels)


def _wider_on_later_calls(call, images, labels):
    weights = tf.Variable(tf.zeros([6 * 6 * 2, CLASSES + call]), name='weights')
    _loss(tf.matmul(tf.reshape(images, [-1, 72]), weights)[:, :CLASSES], labels)


def _one_more_layer_on_later_calls(call, images, labels):
    net = keras.layers.Flatten()(images)
    for _ in range(call + 1):
        net = keras.layers.Dense(CLASSES)(net)
    _loss(net, labels)


def _named_after_the_call(call, images, labels):
    weights = tf.get_variable(f'weights_{call}', [72, CLASSES])
    _loss(tf.matmul(tf.reshape(images, [-1, 72]), weights), labels)


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
@pytest.mark.parametrize('make, message', [
    (_wider_on_later_calls,
     r"^clone 1 of model_fn made variable 'clone_1/weights' \(shape \[72, 4\], float32\) where "
     r"clone 0 made 'weights' \(shape \[72, 3\], float32\), its variable number 1: every call "
     r'of model_fn must make the same variables in the same order$'),
    (_one_more_layer_on_later_calls,
     r"^clone 1 of model_fn made variable 'clone_1/dense_\d+/kernel', one more than the 2 clone "
     r'0 made outside tf.get_variable: every call of model_fn must make the same variables in '
     r'the same order \(or build the layers once, outside model_fn\)$'),
    (_named_after_the_call,
     r"^clone 1 of model_fn asked tf.get_variable for 'weights_1', which clone 0 did not make: "
     r'every call of model_fn must make the same variables \(do not name them after the '
     r'call\)$'),
])
def test_a_clone_that_cannot_share_is_refused_naming_the_variable(make, message,
                                                                  variable_update):
    with tf.Graph().as_default():
        with pytest.raises(UsageError, match=message):
            _deploy(_counted(make), *map(tf.constant, batch()), variable_update)


@pytest.mark.slow
def test_tf_layers_and_tf_keras_resolve_to_tf_keras_after_import_deployment():
    script = ('import slim_deploy.deployment\n'
              'import tensorflow as tf\n'
              'print(tf.keras.layers.Dense.__module__)\n'
              'with tf.Graph().as_default():\n'
              '    print(tf.compat.v1.layers.dense(tf.zeros([2, 3]), 4).shape)\n')
    result = _python(script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['tf_keras.src.layers.core.dense', '(2,', '4)']


@pytest.mark.slow
def test_tf_layers_under_keras_3_are_refused_in_one_line_saying_what_to_change():
    script = ('import slim_deploy.deployment\n'
              'import tensorflow as tf\n'
              'from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy\n'
              'from slim_deploy.common.errors import UsageError\n'
              'with tf.Graph().as_default():\n'
              '    try:\n'
              '        deploy(DeploymentConfig(num_clones=2, clone_on_cpu=True),\n'
              '               lambda: tf.compat.v1.layers.dense(tf.zeros([2, 3]), 4))\n'
              '    except UsageError as e:\n'
              '        print(e)\n')
    result = _python(script, TF_USE_LEGACY_KERAS='0')  # The user chose Keras 3.
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        'clone 0 of model_fn used a TF1 layer API that Keras 3 lacks (`dense` is not available '
        "with Keras 3.): deploy() builds TF1 graphs, which need tf-keras; import deployment "
        'before tensorflow, or set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported\n')


def test_keras_3_layers_share_one_set_of_variables():
    import keras  # Keras 3, whatever TF_USE_LEGACY_KERAS says.

    def model_fn(images, labels):
        net = keras.layers.Conv2D(4, 3)(images)
        net = keras.layers.BatchNormalization(momentum=MOMENTUM)(net, training=True)
        _loss(keras.layers.Dense(CLASSES)(keras.layers.Flatten()(net)), labels)

    images, labels = batch()
    with tf.Graph().as_default():
        model = _deploy(model_fn, tf.constant(images), tf.constant(labels))
        assert len(tf.trainable_variables()) == 6
        assert not [v for v in tf.global_variables() if v.op.name.startswith('clone_')]
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            session.run(model.train_op)
            moving_mean = _moving_mean(session.run({v.op.name: v
                                                    for v in tf.global_variables()}))
    assert np.all(moving_mean != 0)  # Its update ran.


def _python(script, **environment):
    """Runs `script` in a new Python with TF_USE_LEGACY_KERAS unset, or as `environment` says."""
    env = {name: value for name, value in os.environ.items() if name != 'TF_USE_LEGACY_KERAS'}
    return subprocess.run([sys.executable, '-c', script], capture_output=True, text=True,
                          timeout=120, env={**env, 'TF_CPP_MIN_LOG_LEVEL': '2', **environment})
