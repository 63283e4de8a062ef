"""Whole-scope matching, trainable scopes, fine-tuning restores and checkpoint lookup."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.training import checkpoints


def small_net(num_classes):
    """Net/conv [3,3,1,4], Net/logits [4*4*4, num_classes]: model variables in two scopes."""
    images = tf.zeros([2, 4, 4, 1])
    with tf.variable_scope('Net'):
        net = slim.conv2d(images, 4, 3, scope='conv')
        return slim.fully_connected(slim.flatten(net), num_classes, scope='logits')


def save_checkpoint(directory, num_classes):
    """Trains nothing: saves freshly initialised small_net; returns (prefix, values)."""
    with tf.Graph().as_default():
        small_net(num_classes)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            values = {v.op.name: sess.run(v) for v in tf.global_variables()}
            prefix = tf.train.Saver().save(sess, str(directory / 'model.ckpt'), global_step=7)
    return prefix, values


def test_parse_scopes():
    assert checkpoints.parse_scopes(' Net/logits, Aux/ ,,') == ['Net/logits', 'Aux']
    assert checkpoints.parse_scopes(None) == [] == checkpoints.parse_scopes('')


@pytest.mark.parametrize('name, scopes, expected', [
    ('InceptionV3/Logits/weights', ['InceptionV3/Logits'], True),
    ('InceptionV3/Logits', ['InceptionV3/Logits'], True),
    ('InceptionV3/Logits2/weights', ['InceptionV3/Logits'], False),
    ('InceptionV3/Logits/weights', ['Incep'], False),  # slim's prefix match said True.
    ('InceptionV3/AuxLogits/weights', ['InceptionV3/Logits', 'InceptionV3/AuxLogits'], True),
    ('anything', [], False),
])
def test_in_scopes_matches_whole_scopes(name, scopes, expected):
    assert checkpoints.in_scopes(name, scopes) is expected


def test_variables_to_train():
    with tf.Graph().as_default():
        small_net(3)
        assert [v.op.name for v in checkpoints.variables_to_train(['Net/logits'])] == [
            'Net/logits/weights', 'Net/logits/biases']
        assert len(checkpoints.variables_to_train([])) == 4
        assert checkpoints.variables_to_train(['Net/log']) == []


def test_fine_tune_from_a_checkpoint_with_another_logits_size(tmp_path):
    prefix, saved = save_checkpoint(tmp_path, num_classes=10)
    with tf.Graph().as_default():
        small_net(5)
        init_fn = checkpoints.fine_tune_init_fn(str(tmp_path), ['Net/logits'])
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            init_fn(None, sess)
            restored = {v.op.name: sess.run(v) for v in tf.global_variables()}
    np.testing.assert_array_equal(restored['Net/conv/weights'], saved['Net/conv/weights'])
    assert restored['Net/logits/weights'].shape == (64, 5)


def test_fine_tune_names_mismatched_variables_unless_ignored(tmp_path):
    _, saved = save_checkpoint(tmp_path, num_classes=10)
    with tf.Graph().as_default():
        small_net(5)
        with pytest.raises(UsageError, match=r'does not match 2 variables; exclude .*'
                                             r'Net/logits/weights \(checkpoint: \[64, 10\], '
                                             r'model: \[64, 5\]\)'):
            checkpoints.fine_tune_init_fn(str(tmp_path), [])
        init_fn = checkpoints.fine_tune_init_fn(str(tmp_path), [], ignore_missing_vars=True)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            init_fn(None, sess)
            conv = sess.run(tf.global_variables('Net/conv/weights')[0])
    np.testing.assert_array_equal(conv, saved['Net/conv/weights'])


def test_resolve_checkpoint(tmp_path):
    prefix, _ = save_checkpoint(tmp_path, num_classes=3)
    assert checkpoints.resolve_checkpoint(str(tmp_path)) == prefix
    assert checkpoints.resolve_checkpoint(prefix) == prefix
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(UsageError,
                       match="^--checkpoint_path '.*' is a directory with no checkpoint"):
        checkpoints.resolve_checkpoint(str(empty))
    with pytest.raises(UsageError, match='is neither a checkpoint nor a directory'):
        checkpoints.resolve_checkpoint(str(tmp_path / 'model.ckpt-99'))
