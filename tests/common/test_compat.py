"""Guards the tf-slim repairs in `slim_deploy.common.compat`, through tf-slim's public API.

Each test exercises a tf-slim code path that fails on TensorFlow 2.21 without one
of the repairs. Graphs are built in a private `tf.Graph`, so eager mode stays on.
"""
import importlib
import importlib.machinery
import os
import subprocess
import sys
import threading
import types
import warnings

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim
from tf_slim.losses import metric_learning
from tf_slim.nets import resnet_v1

from slim_deploy.common import compat  # Importing `common` repairs tf_slim, imported below.

from helpers import REPO


@pytest.mark.parametrize('rank', [2, 4])
def test_batch_norm_fused_with_tensor_is_training(rank):
    """Rank 4 runs tf-keras's legacy layer (package alias); rank 2 runs tf-slim's
    own fused kernel (ops.Tensor, control_flow_ops.cond)."""
    x = np.array([1.0, 3.0], np.float32).reshape([2] + [1] * (rank - 1))
    with tf.Graph().as_default(), tf.Session() as sess:
        is_training = tf.placeholder_with_default(True, [])
        out = slim.batch_norm(x, decay=0.5, is_training=is_training, fused=True)
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            out = tf.identity(out)
        mean, = slim.get_variables_by_suffix('moving_mean')
        var, = slim.get_variables_by_suffix('moving_variance')
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(out).ravel(), [-1, 1], atol=1e-2)
        assert sess.run(mean) == pytest.approx([1.0])
        moving_var = sess.run(var)
        eval_out = sess.run(out, {is_training: False})  # 1e-3: batch_norm's epsilon.
        np.testing.assert_allclose(
            eval_out.ravel(), (x.ravel() - 1.0) / np.sqrt(moving_var + 1e-3), rtol=1e-5)
        assert sess.run(mean) == pytest.approx([1.0])


def test_layers_and_resnet_build():
    """conv2d, flatten, fully_connected, legacy_fully_connected and tf_slim's ResNet
    generator (one block of one unit: the 50-layer nets build in tests/nets)."""
    with tf.Graph().as_default(), tf.Session() as sess:
        images = tf.ones([2, 8, 8, 3])
        net = slim.conv2d(images, 4, [3, 3])
        net = slim.fully_connected(slim.flatten(net), 5)
        legacy = slim.legacy_fully_connected(tf.ones([2, 3, 4]), 6)
        sess.run(tf.global_variables_initializer())
        assert sess.run(net).shape == (2, 5)
        assert sess.run(legacy).shape == (2, 3, 6)

    with tf.Graph().as_default():
        with slim.arg_scope(resnet_v1.resnet_arg_scope()):
            logits, _ = resnet_v1.resnet_v1(
                tf.zeros([1, 64, 64, 3]), [resnet_v1.resnet_v1_block('block1', 2, 1, 2)],
                num_classes=10, is_training=True)
        assert logits.shape.as_list() == [1, 1, 1, 10]
        # The moving mean and variance of conv1's, the unit's 3 and its shortcut's batch norms.
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2 * 5


def test_tfexample_decoder_decodes_png_and_label():
    """The Image handler picks its decoder with control_flow_ops.case and cond."""
    image = np.arange(18, dtype=np.uint8).reshape([2, 3, 3])
    png = tf.image.encode_png(image).numpy()
    example = tf.train.Example(features=tf.train.Features(feature={
        'image/encoded': tf.train.Feature(bytes_list=tf.train.BytesList(value=[png])),
        'image/format': tf.train.Feature(bytes_list=tf.train.BytesList(value=[b'png'])),
        'label': tf.train.Feature(int64_list=tf.train.Int64List(value=[7])),
    }))
    decoder = slim.tfexample_decoder.TFExampleDecoder(
        {
            'image/encoded': tf.FixedLenFeature((), tf.string),
            'image/format': tf.FixedLenFeature((), tf.string),
            'label': tf.FixedLenFeature((), tf.int64),
        },
        {
            'image': slim.tfexample_decoder.Image(shape=[2, 3, 3], dtype=tf.uint8),
            'label': slim.tfexample_decoder.Tensor('label'),
        })
    with tf.Graph().as_default(), tf.Session() as sess:
        decoded, label = sess.run(
            decoder.decode(tf.constant(example.SerializeToString()), ['image', 'label']))
    np.testing.assert_array_equal(decoded, image)
    assert label == 7


def test_metrics_compute_known_values():
    """streaming_concat (array_ops.stack, cond) and auc_using_histogram (Assert)."""
    with tf.Graph().as_default(), tf.Session() as sess:
        values = tf.placeholder(tf.int32, [None])
        concat, update = slim.metrics.streaming_concat(values)
        auc, auc_update = slim.metrics.auc_using_histogram(
            tf.constant([False, False, True, True]),
            tf.constant([0.1, 0.2, 0.8, 0.9]), [0.0, 1.0])
        sess.run(tf.local_variables_initializer())
        sess.run(update, {values: [1, 2]})
        sess.run(update, {values: [3, 4, 5]})
        sess.run(auc_update)
        np.testing.assert_array_equal(sess.run(concat), [1, 2, 3, 4, 5])
        assert sess.run(auc) == pytest.approx(1.0, abs=0.01)


def test_local_variable_is_local():
    """slim.local_variable calls the removed variable_scope.variable."""
    with tf.Graph().as_default(), tf.Session() as sess:
        counter = slim.local_variable(3, name='counter')
        assert tf.local_variables() == [counter]
        assert not tf.global_variables()
        sess.run(tf.local_variables_initializer())
        assert sess.run(counter) == 3


def test_gt_cluster_score_runs_while_loop():
    """metric_learning's cluster scores loop with control_flow_ops.while_loop."""
    distances = np.array([[0, 1, 5, 5], [1, 0, 5, 5], [5, 5, 0, 2], [5, 5, 2, 0]],
                         np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        score = metric_learning.compute_gt_cluster_score(
            tf.constant(distances), tf.constant([0, 0, 1, 1]))
        assert sess.run(score) == pytest.approx(-3.0)


def test_optimize_loss_with_clip_gradients_runs_a_step():
    """optimize_loss checks ops.Tensor and ops.IndexedSlices on its inputs."""
    with tf.Graph().as_default(), tf.Session() as sess:
        embeddings = tf.get_variable('embeddings', initializer=[[3.0], [4.0]])
        weight = tf.get_variable('weight', initializer=0.0)
        loss = tf.reduce_sum(tf.nn.embedding_lookup(embeddings, [1])) + 12.0 * weight
        train_op = slim.optimize_loss(
            loss, tf.train.create_global_step(), learning_rate=1.0,
            optimizer='SGD', clip_gradients=1.3, summaries=['gradients'])
        sess.run(tf.global_variables_initializer())
        sess.run(train_op)
        # Gradients (1 on row 1, 12 on weight) have norm 12.04, clipped to 1.3.
        scale = 1.3 / np.hypot(1.0, 12.0)
        np.testing.assert_allclose(sess.run(embeddings), [[3.0], [4.0 - scale]], rtol=1e-5)
        assert sess.run(weight) == pytest.approx(-12.0 * scale)


def test_looper_threads_run_in_the_graph_that_made_them():
    """The Supervisor's threads (slim.learning.train's step counter reads the global step
    with training_util.global_step) see the graph they were started from, not eager mode."""
    seen = []
    with tf.Graph().as_default() as graph, tf.Session() as sess:
        step = tf.train.get_or_create_global_step()
        sess.run(step.initializer)
        coord = tf.train.Coordinator()

        def read_step():
            seen.append((tf.get_default_graph(), tf.train.global_step(sess, step)))
            coord.request_stop()

        coord.join([tf.train.LooperThread.loop(coord, None, read_step)])
    assert seen == [(graph, 0)]


def test_a_savers_saves_take_turns_so_the_final_step_is_the_latest(tmp_path, monkeypatch):
    """slim.learning.train's final save and its Supervisor's timer thread share one Saver: a
    timer save that read the step before the final update must not finish after the final
    save and name its older checkpoint the latest."""
    from tensorflow.python.training import training_util
    timer_read_step, final_saved = threading.Event(), threading.Event()
    read = training_util.global_step

    def global_step(sess, tensor):
        value = read(sess, tensor)
        if threading.current_thread().name == 'timer':
            timer_read_step.set()
            final_saved.wait(timeout=1)  # Saves not in turn: the final save ends meanwhile.
        return value

    monkeypatch.setattr(training_util, 'global_step', global_step)
    path = str(tmp_path / 'model.ckpt')
    with tf.Graph().as_default() as graph, tf.Session() as sess:
        step = tf.train.get_or_create_global_step()
        sess.run(step.initializer)
        sess.run(step.assign(299))
        saver = tf.train.Saver()

        def timer_save():  # As the Supervisor's thread, in the graph that made it.
            with graph.as_default():
                saver.save(sess, path, global_step=step)

        timer = threading.Thread(target=timer_save, name='timer')
        timer.start()
        assert timer_read_step.wait(timeout=60)
        sess.run(step.assign(300))
        saver.save(sess, path, global_step=step)
        final_saved.set()
        timer.join()
    assert tf.train.latest_checkpoint(str(tmp_path)) == f'{path}-300'


def test_repair_sets_only_missing_names_and_is_idempotent(monkeypatch):
    """repair() fills in missing names and lazy imports, and leaves present ones alone."""
    old, new = types.ModuleType('fake_old'), types.ModuleType('fake_new')
    old.present, new.present, new.moved = object(), object(), object()
    layers = types.ModuleType('fake_layers')
    layers.lazy = layers.working = object()
    for module in (old, new, layers):
        module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(compat, '_MOVED_NAMES', (
        ('fake_old', 'present', 'fake_new', 'present'),
        ('fake_old', 'absent', 'fake_new', 'moved')))
    monkeypatch.setattr(compat, '_MOVED_LAZY_IMPORTS', (
        ('fake_layers', 'lazy', 'no_such_package.module', 'fake_new'),
        ('fake_layers', 'working', 'fake_old', 'fake_new')))
    kept = old.present
    compat.repair()
    compat.repair()
    assert old.present is kept
    assert old.absent is new.moved
    assert layers.lazy is new  # Its import target is gone: pointed at the new home.
    assert layers.working is not new  # Its import target exists: left alone.


def test_legacy_layers_use_the_moved_tf_keras_module():
    """TensorFlow's legacy normalization layer resolves to tf_keras.src's, loaded once."""
    from tensorflow.python.layers import normalization
    moved = importlib.import_module('tf_keras.src.legacy_tf_layers.normalization')
    assert normalization.BatchNormalization is moved.BatchNormalization


def test_warns_once_on_a_tensorflow_newer_than_tested():
    """A newer TensorFlow gets one warning naming both versions and the fix; tested ones none."""
    with pytest.warns(RuntimeWarning) as record:
        compat._warn_if_untested('2.22.0-rc1')
        compat._warn_if_untested('2.22.0-rc1')
    message, = (str(warning.message) for warning in record)
    assert '2.22.0-rc1' in message and '2.21' in message
    assert 'pip install "tensorflow<2.22"' in message
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        for version in ('2.16.1', '2.21.0', '2.21.1rc0', '1.15.5'):
            compat._warn_if_untested(version)
    with pytest.warns(RuntimeWarning, match='TensorFlow 3.0.0 is newer'):
        compat._warn_if_untested('3.0.0')


IMPORT_ORDER = r'''
import sys
import slim_deploy.deployment, slim_deploy.cluster.launch
print('tensorflow' in sys.modules)
import tf_slim
from tensorflow.python.framework import ops
print(hasattr(ops, 'Tensor'))
'''


@pytest.mark.slow
def test_importing_the_package_imports_no_tensorflow_and_tf_slim_comes_repaired():
    """The launcher (slim_deploy.cluster.launch) starts without TensorFlow; tf_slim, imported
    after `import slim_deploy.deployment`, finds the repairs in place."""
    result = subprocess.run([sys.executable, '-c', IMPORT_ORDER], capture_output=True,
                            text=True, timeout=120, cwd=REPO, env={**os.environ,
                                                                   'PYTHONPATH': REPO})
    assert result.stdout == 'False\nTrue\n', result.stderr[-2000:]
