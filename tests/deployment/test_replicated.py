"""variable_update='replicated': copies on each clone's device, all-reduced gradients, the same
numbers as parameter-server mode, canonical checkpoints, and gradient packing."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import all_reduce
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy, placement_plan

from helpers import cpu_session, labelled_images

DEVICES = ['/device:CPU:0', '/device:CPU:1']
CLASSES = 5


def _batches(steps, batch_size=8, seed=0):
    """`steps` (images [batch_size, 8, 8, 3] in [0, 1), labels [batch_size]) numpy batches."""
    return labelled_images((steps, batch_size, 8, 8, 3), CLASSES, seed)


def conv_bn_model(images, labels):
    """A regularized conv layer with batch norm, then logits: covers trainable copies,
    shared moving statistics and one regularization loss."""
    net = slim.conv2d(images, 4, 3, weights_regularizer=slim.l2_regularizer(0.01),
                      weights_initializer=tf.truncated_normal_initializer(stddev=0.3, seed=1),
                      normalizer_fn=slim.batch_norm,
                      normalizer_params={'is_training': True, 'decay': 0.5}, scope='conv')
    logits = slim.fully_connected(
        slim.flatten(net), CLASSES, activation_fn=None, scope='logits',
        weights_initializer=tf.truncated_normal_initializer(stddev=0.3, seed=2))
    tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return logits


def _build(variable_update, optimizer=None, pack_bytes=1 << 20, var_list=None,
           summarize_gradients=False, num_clones=2):
    """Deploys conv_bn_model fed by placeholders, each clone its half of the batch; returns
    (model, images placeholder, labels placeholder)."""
    images = tf.placeholder(tf.float32, [8, 8, 8, 3])
    labels = tf.placeholder(tf.int64, [8])
    halves = iter(zip(tf.split(images, num_clones), tf.split(labels, num_clones)))
    config = DeploymentConfig(num_clones=num_clones, clone_devices=DEVICES[:num_clones],
                              variable_update=variable_update, all_reduce_pack_bytes=pack_bytes)
    model = deploy(config, lambda: conv_bn_model(*next(halves)),
                   optimizer=optimizer or tf.train.GradientDescentOptimizer(0.1),
                   var_list=var_list, summarize_gradients=summarize_gradients)
    return model, images, labels


def _values(session, variables):
    return {v.op.name: session.run(v) for v in variables}


def _train(variable_update, steps=20,
           make_optimizer=lambda: tf.train.GradientDescentOptimizer(0.1), **build_args):
    """Trains from the same seeded start on the same batches; returns (global variables,
    local variables) as {name: value}."""
    batches = _batches(steps)
    with tf.Graph().as_default():
        model, images, labels = _build(variable_update, make_optimizer(), **build_args)
        with cpu_session() as session:
            session.run([tf.global_variables_initializer()])
            session.run(tf.local_variables_initializer())
            for x, y in zip(*batches):
                session.run(model.train_op, {images: x, labels: y})
            return _values(session, tf.global_variables()), _values(session, tf.local_variables())


OPTIMIZERS = {
    'sgd': lambda: tf.train.GradientDescentOptimizer(0.1),
    'momentum': lambda: tf.train.MomentumOptimizer(0.05, 0.9),
    'rmsprop': lambda: tf.train.RMSPropOptimizer(0.01, momentum=0.9),
}


@pytest.mark.parametrize('optimizer', sorted(OPTIMIZERS))
def test_replicated_trains_as_parameter_server_with_identical_copies(optimizer):
    central, no_copies = _train('parameter_server', make_optimizer=OPTIMIZERS[optimizer])
    replicated, copies = _train('replicated', make_optimizer=OPTIMIZERS[optimizer])
    assert no_copies == {}
    assert sorted(replicated) == sorted(central)  # Canonical names, slots included.
    for name, value in central.items():
        np.testing.assert_allclose(replicated[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    assert central['global_step'] == 20
    trainable = {'conv/weights', 'conv/BatchNorm/beta', 'logits/weights', 'logits/biases'}
    # Clone 1 holds a copy of each trainable variable and of its slots, bit-identical to
    # clone 0's; the moving statistics are shared, not copied.
    assert {name.split('/', 1)[1] for name in copies} == {
        name for name in replicated if name.rsplit('/', 1)[0] in trainable or name in trainable}
    for name, value in copies.items():
        assert name.startswith('clone_1/')
        np.testing.assert_array_equal(value, replicated[name[len('clone_1/'):]], err_msg=name)


def test_packing_changes_the_number_of_all_reduces_not_the_values():
    packed, packed_copies = _train('replicated', steps=5, pack_bytes=1 << 20)
    alone, alone_copies = _train('replicated', steps=5, pack_bytes=0)
    for name in packed:
        np.testing.assert_array_equal(packed[name], alone[name], err_msg=name)
    for name in packed_copies:
        np.testing.assert_array_equal(packed_copies[name], alone_copies[name], err_msg=name)
    for pack_bytes, reduces in ((1 << 20, 1), (0, 4), (500, 3)):
        with tf.Graph().as_default() as graph:
            _build('replicated', pack_bytes=pack_bytes)
            ops = [op for op in graph.get_operations() if op.type == 'CollectiveReduce']
            assert sorted(op.device for op in ops) == sorted(DEVICES * reduces)
            assert placement_plan(DeploymentConfig(
                num_clones=2, clone_devices=DEVICES, variable_update='replicated',
                all_reduce_pack_bytes=pack_bytes), graph).splitlines()[-1].startswith(
                f'all-reduces  {reduces} per step on each member')


def test_pack_plan():
    def tensors(*specs):
        return [tf.zeros(shape, dtype) for shape, dtype in specs]
    with tf.Graph().as_default():
        f32 = tf.float32
        small = tensors(([10], f32), ([10], f32), ([10], f32), ([100], f32), ([10], f32))
        assert all_reduce.pack_plan(small, 80) == [[0, 1], [2], [3], [4]]
        assert all_reduce.pack_plan(small, 10 ** 6) == [[0, 1, 2, 3, 4]]
        assert all_reduce.pack_plan(small, 0) == [[0], [1], [2], [3], [4]]
        mixed = tensors(([2], f32), ([2], tf.int64), ([2], tf.int64), ([2], f32))
        assert all_reduce.pack_plan(mixed, 10 ** 6) == [[0], [1, 2], [3]]
        unknown = [tf.placeholder(f32, [None]), *tensors(([2], f32), ([2], f32))]
        assert all_reduce.pack_plan(unknown, 10 ** 6) == [[0], [1, 2]]


def _saved_names(session, path):
    tf.train.Saver().save(session, path)
    return sorted(name for name, _ in tf.train.list_variables(path))


def test_checkpoints_hold_one_copy_under_canonical_names_and_restore_across_modes(tmp_path):
    momentum = OPTIMIZERS['momentum']
    x, y = (batch[0] for batch in _batches(1))
    checkpoints = {}
    for mode in ('parameter_server', 'replicated'):
        with tf.Graph().as_default():
            model, images, labels = _build(mode, momentum())
            with cpu_session() as session:
                session.run(tf.global_variables_initializer())
                session.run(tf.local_variables_initializer())
                for _ in range(3):
                    session.run(model.train_op, {images: x, labels: y})
                path = str(tmp_path / mode / 'model.ckpt')
                checkpoints[mode] = (_saved_names(session, path), path,
                                     _values(session, tf.global_variables()))
    assert checkpoints['parameter_server'][0] == checkpoints['replicated'][0]
    assert not any(name.startswith('clone_') for name in checkpoints['replicated'][0])
    for source, target in (('parameter_server', 'replicated'), ('replicated', 'parameter_server')):
        _, path, saved = checkpoints[source]
        with tf.Graph().as_default():
            model, images, labels = _build(target, momentum())
            with cpu_session() as session:
                tf.train.Saver().restore(session, path)
                session.run(tf.local_variables_initializer())  # Copies from the restored.
                restored = _values(session, tf.global_variables())
                for name, value in saved.items():
                    np.testing.assert_array_equal(restored[name], value, err_msg=name)
                for name, value in _values(session, tf.local_variables()).items():
                    np.testing.assert_array_equal(value, restored[name[len('clone_1/'):]])
                session.run(model.train_op, {images: x, labels: y})  # And trains on.
                assert session.run(tf.train.get_global_step()) == 4


def test_var_list_and_summaries_concern_the_canonical_variables():
    with tf.Graph().as_default():
        model, images, labels = _build(
            'replicated', var_list=lambda: slim.get_variables('logits'),
            summarize_gradients=True)
        summaries = {op.name for op in tf.get_default_graph().get_operations()
                     if op.type in ('HistogramSummary', 'ScalarSummary')}
        assert {name for name in summaries if name.endswith('/gradient')} == {
            'logits/weights/gradient', 'logits/biases/gradient'}  # Clone 0's sums only.
        assert {v.op.name for v in slim.get_model_variables()} == {
            'conv/weights', 'conv/BatchNorm/beta', 'conv/BatchNorm/moving_mean',
            'conv/BatchNorm/moving_variance', 'logits/weights', 'logits/biases'}
        assert {v.op.name for v in tf.trainable_variables()} == {
            'conv/weights', 'conv/BatchNorm/beta', 'logits/weights', 'logits/biases'}
        x, y = (batch[0] for batch in _batches(1))
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            before = _values(session, tf.global_variables() + tf.local_variables())
            session.run(model.train_op, {images: x, labels: y})
            after = _values(session, tf.global_variables() + tf.local_variables())
    changed = {name for name in before if not np.array_equal(before[name], after[name])}
    assert changed == {'global_step', 'logits/weights', 'logits/biases',
                       'clone_1/logits/weights', 'clone_1/logits/biases',
                       'conv/BatchNorm/moving_mean', 'conv/BatchNorm/moving_variance'}


def test_batch_norm_statistics_come_from_clone_0_as_in_parameter_server_mode():
    with tf.Graph().as_default():
        _build('replicated')
        updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        moving = [v for v in tf.global_variables() if 'moving' in v.op.name]
        assert len(moving) == 2 and all(v.device == DEVICES[0] for v in moving)
        # Each clone made its update ops, on the shared statistics; deploy runs clone 0's.
        assert len(updates) == 4


def test_one_replicated_clone_needs_no_all_reduce():
    with tf.Graph().as_default() as graph:
        _build('replicated', num_clones=1)
        assert not tf.local_variables()
        assert [op.type for op in graph.get_operations()].count('CollectiveReduce') == 1


def test_gpu_placement_of_copies_and_all_reduces():
    with tf.Graph().as_default() as graph:
        images = tf.zeros([4, 8, 8, 3])
        labels = tf.zeros([4], tf.int64)
        deploy(DeploymentConfig(num_clones=2, variable_update='replicated'),
               lambda: conv_bn_model(images, labels),
               optimizer=tf.train.MomentumOptimizer(0.1, 0.9))
        devices = {v.op.name: v.device for v in tf.global_variables() + tf.local_variables()}
        assert devices['conv/weights'] == '/device:GPU:0'
        assert devices['conv/weights/Momentum'] == '/device:GPU:0'
        assert devices['clone_1/conv/weights'] == '/device:GPU:1'
        assert devices['clone_1/conv/weights/Momentum'] == '/device:GPU:1'
        assert devices['conv/BatchNorm/moving_mean'] == '/device:GPU:0'
        assert devices['global_step'] == '/device:CPU:0'
        reduces = [op.device for op in graph.get_operations() if op.type == 'CollectiveReduce']
        assert sorted(reduces) == ['/device:GPU:0', '/device:GPU:1']


def test_reference_variables_are_refused():
    def model_fn():
        weight = tf.get_variable('weight', [], use_resource=False)
        tf.losses.add_loss(tf.square(weight))
    with tf.Graph().as_default():
        with pytest.raises(UsageError, match=r"^clone 1 of model_fn reads 'weight', a reference "
                                             r'\(not resource\) variable.*use_resource=True$'):
            deploy(DeploymentConfig(num_clones=2, clone_devices=DEVICES,
                                    variable_update='replicated'),
                   model_fn, optimizer=tf.train.GradientDescentOptimizer(0.1))


@pytest.mark.parametrize('kwargs, message', [
    ({'variable_update': 'mirrored'},
     r"variable_update must be one of \('collective', 'parameter_server', 'replicated'\)"),
    ({'variable_update': 'replicated', 'num_ps_tasks': 1},
     r"variable_update='replicated' keeps the variables on the clones: it takes no ps "
     r'tasks, got num_ps_tasks=1'),
    ({'variable_update': 'collective', 'num_replicas': 2, 'num_ps_tasks': 1},
     r"variable_update='collective' keeps the variables on the clones"),
    ({'variable_update': 'replicated', 'num_replicas': 2},
     r"variable_update='replicated' runs on one worker, got num_replicas=2"),
    ({'variable_update': 'collective'},
     r"variable_update='collective' needs several workers, got num_replicas=1"),
    ({'variable_update': 'replicated', 'num_clones': 2, 'clone_on_cpu': True},
     r'clones, which must sit on distinct devices, but clone_on_cpu=True puts all 2 on '
     r'CPU:0'),
    ({'variable_update': 'replicated', 'num_clones': 2, 'clone_devices': ['/cpu:0'] * 2},
     r'must sit on distinct devices'),
    ({'all_reduce_pack_bytes': -1}, r'all_reduce_pack_bytes must be an integer >= 0, got -1'),
    ({'task_timeout_secs': -1}, r'task_timeout_secs must be a number >= 0'),
])
def test_bad_replication_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeploymentConfig(**kwargs)


def test_placement_plan_shows_the_mode_the_copies_and_the_group():
    plan = placement_plan(DeploymentConfig(
        num_clones=2, clone_devices=DEVICES, variable_update='collective', num_replicas=2,
        replica_id=1)).splitlines()
    assert plan[:2] == [
        'variables   collective: a copy of the trainable ones on every clone of 2 workers, '
        'here /job:worker/task:1/device:CPU:0, /job:worker/task:1/device:CPU:1; checkpoints '
        "hold clone 0's of the chief",
        'all-reduce  4 members: 2 clones on each of 2 workers; the chief broadcasts the start '
        'values']
    assert plan[4] == 'clone 0     /job:worker/task:1/device:CPU:0  (scope clone_0/)'
