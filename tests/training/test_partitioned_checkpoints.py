"""Checkpoints of partitioned variables are checkpoints of whole variables: TensorFlow's Saver
writes the parts of 'w' under 'w' (with the slice each holds), so a checkpoint restores with
the variables whole or in any number of parts, slots and moving averages too; fine-tuning
(ours and slim's assign_from_checkpoint_fn) goes either way; a truncated newest checkpoint
of parts falls back to the one before; and a collective graph restores parts and writes
what parts restore."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.common.errors import UsageError
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.training import checkpoints

INPUTS = np.random.RandomState(1).randn(4, 12).astype(np.float32)


def net(partitioner, classes=3):
    """Net/hidden (12 x 10 weights) and Net/logits (10 x classes), slim's model variables,
    made under `partitioner` (None: whole) on INPUTS; returns the logits."""
    with tf.variable_scope('Net', partitioner=partitioner):
        hidden = slim.fully_connected(tf.constant(INPUTS), 10, scope='hidden')
        return slim.fully_connected(hidden, classes, activation_fn=None, scope='logits')


def train_and_save(directory, partitioner, steps=(1,)):
    """net(partitioner) trained by momentum with moving averages, saved (sharded, as training
    runs save) at each of `steps`; returns (the logits, {checkpoint name: value}) at the last."""
    with tf.Graph().as_default():
        logits = net(partitioner)
        global_step = tf.train.get_or_create_global_step()
        train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(tf.reduce_sum(logits ** 2),
                                                             global_step=global_step)
        with tf.control_dependencies([train]):
            averaged = tf.train.ExponentialMovingAverage(0.9).apply(slim.get_model_variables())
        saver = checkpoints.saver(max_to_keep=5)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            for step in steps:
                session.run(averaged)
                saver.save(session, str(directory / 'model.ckpt'), global_step=step)
            values = session.run(logits)
    reader = tf.train.load_checkpoint(str(directory))
    return values, {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def restored(directory, partitioner):
    """(The logits, {variable name: value}) of net(partitioner) with an optimizer's slots and
    moving averages as training makes them, restored from `directory`'s latest checkpoint."""
    with tf.Graph().as_default():
        logits = net(partitioner)
        tf.train.MomentumOptimizer(0.1, 0.9).minimize(
            tf.reduce_sum(logits), global_step=tf.train.get_or_create_global_step())
        tf.train.ExponentialMovingAverage(0.9).apply(slim.get_model_variables())
        with tf.Session() as session:
            tf.train.Saver().restore(session, tf.train.latest_checkpoint(str(directory)))
            return session.run(logits), session.run({v.op.name: v for v in
                                                     tf.global_variables()})


def whole_values(variables):
    """{checkpoint name: value} of a graph's {variable name: value}, parts joined."""
    joined = {}
    for name, value in sorted(variables.items()):
        whole, _, part = name.partition('/part_')
        if part:
            rest = part.partition('/')[2]
            key = f'{whole}/{rest}' if rest else whole
            joined[key] = np.concatenate([joined[key], value]) if key in joined else value
        else:
            joined[name] = value
    return joined


PARTITIONERS = {'whole': None, 'two_parts': tf.fixed_size_partitioner(2),
                'three_parts': tf.fixed_size_partitioner(3)}


@pytest.mark.parametrize('saved_as, restored_as', [
    ('three_parts', 'whole'), ('three_parts', 'two_parts'), ('whole', 'three_parts')])
def test_a_checkpoint_restores_whole_or_in_any_parts(tmp_path, saved_as, restored_as):
    logits, saved = train_and_save(tmp_path, PARTITIONERS[saved_as])
    assert {name for name in saved if 'part_' in name} == set()
    assert {'Net/hidden/weights', 'Net/hidden/weights/Momentum',
            'Net/hidden/weights/ExponentialMovingAverage'} <= set(saved)
    assert saved['Net/hidden/weights'].shape == (12, 10)
    again, variables = restored(tmp_path, PARTITIONERS[restored_as])
    np.testing.assert_array_equal(again, logits)
    joined = whole_values(variables)
    assert joined.keys() == saved.keys()
    for name, value in saved.items():
        np.testing.assert_array_equal(joined[name], value, err_msg=name)


@pytest.mark.parametrize('saved_as, tuned_as', [('whole', 'three_parts'),
                                                ('three_parts', 'whole')])
def test_fine_tuning_restores_across_partitioning(tmp_path, saved_as, tuned_as):
    """Ours (with an excluded scope: logits of 5 classes where the checkpoint has 3) and
    slim's assign_from_checkpoint_fn (every model variable)."""
    _, saved = train_and_save(tmp_path, PARTITIONERS[saved_as])
    for classes, tune in ((5, lambda: checkpoints.fine_tune_init_fn(str(tmp_path),
                                                                       ['Net/logits'])),
                          (3, lambda: lambda _, session: slim.assign_from_checkpoint_fn(
                              tf.train.latest_checkpoint(str(tmp_path)),
                              slim.get_model_variables())(session))):
        with tf.Graph().as_default():
            net(PARTITIONERS[tuned_as], classes)
            init_fn = tune()
            with tf.Session() as session:
                session.run(tf.global_variables_initializer())
                init_fn(None, session)
                tuned = whole_values(session.run({v.op.name: v for v in
                                                  tf.global_variables()}))
        np.testing.assert_array_equal(tuned['Net/hidden/weights'], saved['Net/hidden/weights'])
        assert tuned['Net/logits/weights'].shape == (10, classes)
        assert (classes == 3) == np.array_equal(tuned['Net/logits/weights'],
                                                saved['Net/logits/weights'])


def test_fine_tuning_names_a_mismatched_partitioned_variable_by_its_whole_shape(tmp_path):
    train_and_save(tmp_path, None)
    with tf.Graph().as_default():
        net(tf.fixed_size_partitioner(2), classes=5)
        with pytest.raises(UsageError, match=r'does not match 2 variables; .*Net/logits/biases '
                                             r'\(checkpoint: \[3\], model: \[5\]\); '
                                             r'Net/logits/weights \(checkpoint: \[10, 3\], '
                                             r'model: \[10, 5\]\)'):
            checkpoints.fine_tune_init_fn(str(tmp_path), [])


def test_a_truncated_newest_checkpoint_of_parts_falls_back_to_the_one_before(tmp_path):
    train_and_save(tmp_path, PARTITIONERS['three_parts'], steps=(1, 2))
    assert checkpoints.newest_intact(str(tmp_path)) == str(tmp_path / 'model.ckpt-2')
    (data,) = tmp_path.glob('model.ckpt-2.data-*')
    data.write_bytes(data.read_bytes()[:-100])
    assert checkpoints.resume_point(str(tmp_path)) == str(tmp_path / 'model.ckpt-1')
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / 'model.ckpt-1')


def test_a_collective_graph_restores_parts_and_its_checkpoint_restores_into_parts(tmp_path):
    """Worker 0 of 2 collective workers (in-process servers: only the restore and the save
    run) holds the variables whole, as each copy does."""
    for directory in ('parts', 'collective'):
        (tmp_path / directory).mkdir()
    logits, saved = train_and_save(tmp_path / 'parts', PARTITIONERS['three_parts'])
    addresses = [f'{LOCALHOST}:{port}' for port in free_ports(LOCALHOST, 2)]
    cluster = tf.train.ClusterSpec({'worker': addresses})
    servers = [tf.distribute.Server(cluster, 'worker', index, start=True) for index in (0, 1)]
    config = DeploymentConfig(num_replicas=2, variable_update='collective', clone_on_cpu=True)
    with tf.Graph().as_default():
        deploy(config, lambda: tf.losses.add_loss(tf.reduce_sum(net(None) ** 2)),
               optimizer=tf.train.MomentumOptimizer(0.1, 0.9))
        tf.train.ExponentialMovingAverage(0.9).apply(slim.get_model_variables())
        saver = checkpoints.saver(max_to_keep=1)
        with tf.Session(servers[0].target) as session:
            saver.restore(session, tf.train.latest_checkpoint(str(tmp_path / 'parts')))
            held = session.run({v.op.name: v for v in tf.global_variables()})
            saver.save(session, str(tmp_path / 'collective' / 'model.ckpt'), global_step=1)
    assert all('part_' not in name for name in held)
    for name, value in saved.items():
        np.testing.assert_array_equal(held[name], value, err_msg=name)
    again, _ = restored(tmp_path / 'collective', PARTITIONERS['two_parts'])
    np.testing.assert_array_equal(again, logits)
