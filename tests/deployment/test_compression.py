"""16-bit gradient exchange (slim_deploy.deployment.compression, DeploymentConfig's
gradient_compression): the all-reduces' and the worker-to-ps tensors' dtypes in deploy()'s
graphs, the sums and updates they give against float32's, float16's power-of-two scaling
(small gradients kept, large sums not overflowing, non-finite ones kept non-finite), the
plan's bytes, and the settings refused."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import all_reduce, compression, network_traffic
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy, placement_plan
from slim_deploy.image_classifier.config import TrainConfig
from slim_deploy.nets import nets_factory
from slim_deploy.training import loop

from clusters import servers_here
from graphs import CPUS, LENET, built, lenet_model_fn

# Relative round-off of one rounding to each dtype: 2^-8 (bfloat16), 2^-11 (float16).
ROUND_OFF = {'bfloat16': 2.0 ** -8, 'float16': 2.0 ** -11}


def _group():
    return all_reduce.Group(size=2, local_devices=tuple(CPUS), has_source=True,
                            timeout_secs=30)


def _sums(member_values, wire_dtype, pack_bytes=1 << 20):
    """all_reduce_sums of `member_values` (per member, a list of arrays) between 2 CPU
    devices of this process: (the sums of member 0, the graph); both members' agree."""
    with tf.Graph().as_default() as graph:
        members = [[tf.constant(v, tf.float32) for v in values] for values in member_values]
        sums = all_reduce.all_reduce_sums(members, _group(), pack_bytes,
                                          wire_dtype=wire_dtype)
        with tf.Session(config=loop.session_config(num_cpu_devices=2)) as session:
            first, second = session.run(sums)
    for mine, theirs in zip(first, second):
        np.testing.assert_array_equal(mine, theirs)
    return first, graph


@pytest.mark.parametrize('name', ['bfloat16', 'float16'])
def test_all_reduces_run_in_16_bits_and_sum_to_float32_round_off(name):
    rng = np.random.RandomState(0)
    values = [[rng.normal(size=shape).astype(np.float32) for shape in ([3, 4], [5], [100])]
              for _ in range(2)]
    sums, graph = _sums(values, compression.wire_dtype(name))
    reduces = [op for op in graph.get_operations() if op.type == 'CollectiveReduce']
    packs = [op for op in reduces if op.inputs[0].shape.num_elements() > 1]
    assert {op.inputs[0].dtype for op in packs} == {compression.wire_dtype(name)}
    # float16 packs take one more all-reduce each: their largest magnitude, in float32.
    scales = [op for op in reduces if op not in packs]
    assert len(scales) == (len(packs) if name == 'float16' else 0)
    assert {op.inputs[0].dtype for op in scales} <= {tf.float32}
    for total, first, second in zip(sums, *values):
        assert total.dtype == np.float32
        # Each addend rounded once, and the sum once.
        np.testing.assert_allclose(total, first + second, rtol=0,
                                   atol=3 * ROUND_OFF[name] * np.abs(first + second).max())


def test_float16_all_reduces_keep_small_gradients_and_do_not_overflow():
    """Gradients of 1e-9 flush to zero in float16 (below 2^-24) and sums of 40000 overflow it
    (above 65504); scaled by a power of two, both come back within float16's round-off."""
    small = [[np.full([8], 1e-9, np.float32)], [np.full([8], 3e-9, np.float32)]]
    large = [[np.full([8], 40000.0, np.float32)], [np.full([8], 50000.0, np.float32)]]
    for values, expected in ((small, 4e-9), (large, 90000.0)):
        (total,), _ = _sums(values, tf.float16)
        np.testing.assert_allclose(total, expected, rtol=2 * ROUND_OFF['float16'])


@pytest.mark.parametrize('bad', [np.inf, np.nan])
def test_float16_all_reduces_keep_non_finite_gradients_non_finite(bad):
    """So that float16 loss scaling still skips the update."""
    values = [[np.array([1.0, bad, 2.0], np.float32)], [np.array([1.0, 1.0, 1.0], np.float32)]]
    (total,), _ = _sums(values, tf.float16)
    assert not np.isfinite(total).all()


def test_zero_gradients_stay_zero():
    (total,), _ = _sums([[np.zeros([4], np.float32)]] * 2, tf.float16)
    assert (total == 0).all()


def test_packs_hold_pack_bytes_of_16_bit_values():
    """A pack is sized by the bytes it sends: 2 per element."""
    values = [[np.ones([256], np.float32)] * 4] * 2
    for wire_dtype, packs in ((None, 4), (tf.bfloat16, 2)):
        _, graph = _sums(values, wire_dtype, pack_bytes=1024)
        assert len([op for op in graph.get_operations() if op.type == 'CollectiveReduce']) == (
            2 * packs)


def _ps_config(**options):
    return DeploymentConfig(num_clones=2, num_replicas=2, num_ps_tasks=1, **options)


@pytest.mark.parametrize('name', ['bfloat16', 'float16'])
def test_ps_workers_send_16_bit_gradients_that_the_ps_task_widens(name):
    graph = built(_ps_config(gradient_compression=name), lenet_model_fn())
    wire = compression.wire_dtype(name)
    with graph.as_default():
        variables = tf.trainable_variables()
    updates = [op for op in graph.get_operations() if op.type.startswith('ResourceApply')]
    assert len(updates) == len(variables)
    for update in updates:
        assert update.device.startswith('/job:ps/task:0')
        gradient = update.inputs[-1]  # ApplyGradientDescent(var, alpha, delta).
        assert gradient.dtype == tf.float32
        # The update reads a float32 value made on the ps task from a 16-bit one made on the
        # worker: the tensor that crosses.
        widened = [t for t in _inputs_upstream(gradient.op) if t.dtype == wire]
        assert widened and all(t.op.device.startswith('/job:worker/task:0') for t in widened)


def _inputs_upstream(op, depth=3):
    """The tensors `op` reads, and those its producers read, `depth` levels up."""
    tensors = list(op.inputs)
    if depth > 1:
        for tensor in op.inputs:
            tensors += _inputs_upstream(tensor.op, depth - 1)
    return tensors


@pytest.mark.parametrize('name, gradient_bytes', [('none', LENET), ('bfloat16', LENET // 2),
                                                  ('float16', LENET // 2)])
def test_the_plan_counts_the_bytes_sent(name, gradient_bytes):
    """A worker receives lenet's variables in float32 and sends its gradients in the
    compressed dtype (float16 adds a 4-byte scale per gradient); a collective pack moves
    half its float32 bytes."""
    ps = network_traffic.step_traffic(built(_ps_config(gradient_compression=name),
                                            lenet_model_fn()), _ps_config())
    scales = 8 * 4 if name == 'float16' else 0  # lenet's 8 variables.
    assert ps.worker.bytes_in >= LENET
    assert gradient_bytes + scales <= ps.worker.bytes_out < gradient_bytes + scales + 1000
    config = DeploymentConfig(num_clones=2, clone_devices=CPUS, variable_update='collective',
                              num_replicas=2, gradient_compression=name)
    collective = network_traffic.step_traffic(built(config, lenet_model_fn()), config)
    assert gradient_bytes <= collective.all_reduces.bytes < gradient_bytes + 100


def test_gradient_compression_is_read_only_and_in_repr():
    config = _ps_config(gradient_compression='bfloat16')
    assert config.gradient_compression == 'bfloat16'
    assert ", gradient_compression='bfloat16', " in repr(config)
    assert DeploymentConfig().gradient_compression == 'none'
    with pytest.raises(AttributeError):
        config.gradient_compression = 'none'


def test_the_placement_plan_says_how_gradients_cross():
    plan = placement_plan(_ps_config(gradient_compression='float16'))
    assert ('gradients  cross between tasks in float16 (scaled by a power of two), applied in '
            'float32') in plan
    assert not [line for line in placement_plan(_ps_config()) if line.startswith('gradients')]


def test_the_flag_refuses_settings_that_send_nothing(digits_dir):
    with pytest.raises(UsageError, match=r"^--gradient_compression=bfloat16 compresses the "
                       r"gradients sent between tasks, and --variable_update=parameter_server "
                       r"without ps tasks sends none: use it with ps tasks or "
                       r"--variable_update=collective$"):
        TrainConfig.from_flags({'train_dir': '/nonexistent', 'dataset_dir': digits_dir,
                                'gradient_compression': 'bfloat16'})


@pytest.mark.parametrize('options, refusal', [
    (dict(gradient_compression='bfloat16'),
     "gradient_compression='bfloat16' compresses the gradients sent between tasks, and "
     "variable_update='parameter_server' without ps tasks sends none: use it with ps tasks or "
     "variable_update='collective'"),
    (dict(gradient_compression='float16', variable_update='replicated', num_clones=2,
          clone_devices=CPUS),
     "gradient_compression='float16' compresses the gradients sent between tasks, and "
     "variable_update='replicated' sends none"),
    (dict(gradient_compression='int8', num_ps_tasks=1),
     "gradient_compression must be one of ('bfloat16', 'float16', 'none'), got 'int8'"),
])
def test_settings_that_send_nothing_are_refused(options, refusal):
    with pytest.raises(ValueError, match='^' + refusal.replace('(', r'\(').replace(')', r'\)')):
        DeploymentConfig(**options)


@pytest.mark.parametrize('name', ['bfloat16', 'float16'])
def test_with_16_bit_math_the_reads_cross_in_16_bits_too(name):
    """The worker reads each trainable variable once, from a 16-bit cast on the ps task; the
    gradients flowing back through the casts stay float32."""
    config = _ps_config(gradient_compression=name, precision='bfloat16')
    graph = built(config, lenet_model_fn())
    wire = compression.wire_dtype(name)
    with graph.as_default():
        variables = tf.trainable_variables()
    widened = [op for op in graph.get_operations() if op.type == 'Cast'
               and op.inputs[0].dtype == wire and op.inputs[0].op.inputs[0].op.type ==
               'ReadVariableOp']
    assert len(widened) == len(variables)
    for op in widened:
        assert op.device == '/job:worker/task:0/device:CPU:0'
        assert op.inputs[0].op.device.startswith('/job:ps/task:0')
    traffic = network_traffic.step_traffic(graph, config)
    assert LENET // 2 <= traffic.worker.bytes_in < LENET // 2 + 1000
    float32_reads = network_traffic.step_traffic(
        built(_ps_config(gradient_compression=name), lenet_model_fn()), config)
    assert float32_reads.worker.bytes_in >= LENET


@pytest.mark.parametrize('name, precision', [('bfloat16', 'float32'), ('float16', 'float32'),
                                             ('bfloat16', 'bfloat16')])
def test_a_ps_step_applies_the_float32_update_to_round_off(name, precision):
    """1 ps task and 1 worker, each a gRPC server in this process: a gradient-descent step of
    lenet with 16-bit gradients (and with 16-bit math, reads) moves each variable as
    float32's step does, to the 16-bit round-off of the gradient. The weights start
    bfloat16-exact, so that 16-bit reads give the net the values float32's read gives it."""
    servers = servers_here()
    steps = {}
    for compressed in ('none', name):
        with tf.Graph().as_default():
            tf.set_random_seed(0)
            config = DeploymentConfig(num_ps_tasks=1, clone_on_cpu=True,
                                      gradient_compression=compressed,
                                      precision='float32' if compressed == 'none' else precision)
            model = deploy(config, _lenet_on_noise,
                           optimizer=tf.train.GradientDescentOptimizer(1.0))
            rounded = [v.assign(tf.cast(tf.cast(v, tf.bfloat16), tf.float32))
                       for v in tf.trainable_variables()]
            with tf.Session(servers[1].target) as session:
                session.run(tf.global_variables_initializer())
                before = session.run(rounded)
                session.run(model.train_op)
                steps[compressed] = [a - b for a, b in
                                     zip(session.run(tf.trainable_variables()), before)]
    for reference, step in zip(steps['none'], steps[name]):
        assert np.abs(reference).max() > 0
        np.testing.assert_allclose(step, reference, rtol=0,
                                   atol=2 * ROUND_OFF[name] * np.abs(reference).max())


def _lenet_on_noise():
    """model_fn: lenet's loss on 4 images of noise and their labels, made with seed 0."""
    rng = np.random.RandomState(0)
    logits, _ = nets_factory.get_network_fn('lenet', 10, is_training=False)(
        tf.constant(rng.uniform(-1, 1, [4, 28, 28, 1]), tf.float32))
    tf.losses.sparse_softmax_cross_entropy(tf.constant(rng.randint(0, 10, [4])), logits)
