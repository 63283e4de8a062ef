"""Mixed precision (slim_deploy.deployment.precision): bfloat16 and float16 train float32 variables
into float32 checkpoints, on float32's track; bfloat16 keeps gradient sums, all-reduces and
updates float32; float16's dynamic loss scaling skips an update with a non-finite gradient;
the flags, their checks and the slowness warnings; XLA."""
import collections
import contextlib
import json
import logging

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import precision
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.image_classifier import config, evaluate, run_record, train
from slim_deploy.training import loop

from helpers import cpu_session

DEVICES = ['/device:CPU:0', '/device:CPU:1']
CLASSES = 5
BATCH = 8  # Per step, 4 per clone.
STEPS = 20
# bfloat16 keeps 8 significant bits (a relative rounding error up to 2**-8 = 3.9e-3). Over
# 20 steps the bfloat16 losses stayed within 0.6% of float32's (first loss: 5e-4 off);
# 3% leaves a margin of 5 for another CPU's or oneDNN's order of operations.
BFLOAT16_LOSS_RTOL = 3e-2
# Whether TensorFlow rewrites to bfloat16 on this machine's CPU (not without AVX512F).
BFLOAT16_REWRITTEN = precision.rewrites('bfloat16', precision.cpu_flags())


def _batches(seed=0):
    """STEPS batches (images [BATCH, 8, 8, 3], labels [BATCH]): noise around one pattern per
    class, which 20 steps learn without driving the loss near 0."""
    rng = np.random.RandomState(seed)
    patterns = rng.randn(CLASSES, 8, 8, 3)
    labels = rng.randint(CLASSES, size=(STEPS, BATCH))
    images = 0.5 * patterns[labels] + rng.randn(STEPS, BATCH, 8, 8, 3)
    return images.astype(np.float32), labels.astype(np.int64)


def _model(images, labels, gradient_factor):
    """A conv layer and logits, seeded; the gradient reaching the logits is multiplied by
    `gradient_factor` (a scalar tensor: Inf or NaN poisons every gradient)."""
    @tf.custom_gradient
    def scaled_gradient(logits):
        return tf.identity(logits), lambda upstream: upstream * gradient_factor

    net = slim.conv2d(images, 8, 3, scope='conv',
                      weights_initializer=tf.truncated_normal_initializer(stddev=0.1, seed=1))
    logits = slim.fully_connected(
        slim.flatten(net), CLASSES, activation_fn=None, scope='logits',
        weights_initializer=tf.truncated_normal_initializer(stddev=0.1, seed=2))
    tf.losses.sparse_softmax_cross_entropy(labels, scaled_gradient(logits))


def _build(precision_name, variable_update='parameter_server', xla=False):
    """Deploys _model with `precision_name` as 2 clones on 2 CPU devices, SGD with momentum,
    fed by placeholders; returns (train_op, feed): feed(images, labels, gradient_factor=1.0)
    is the feed dict of a step."""
    images = tf.placeholder(tf.float32, [BATCH, 8, 8, 3])
    labels = tf.placeholder(tf.int64, [BATCH])
    gradient_factor = tf.placeholder_with_default(1.0, [])
    halves = iter(zip(tf.split(images, 2), tf.split(labels, 2)))
    deployment = DeploymentConfig(num_clones=2, clone_devices=DEVICES,
                                  variable_update=variable_update, precision=precision_name,
                                  xla=xla)
    model = deploy(deployment, lambda: _model(*next(halves), gradient_factor),
                   optimizer=tf.train.MomentumOptimizer(0.01, 0.9))

    def feed(step_images, step_labels, factor=1.0):
        return {images: step_images, labels: step_labels, gradient_factor: factor}

    return model.train_op, feed


@contextlib.contextmanager
def _session(precision_name, variable_update='parameter_server', xla=False):
    """In a new graph, _build's (session, train_op, feed), the session with the precision's
    rewrite and the variables initialized."""
    with tf.Graph().as_default():
        train_op, feed = _build(precision_name, variable_update, xla)
        with tf.Session(config=loop.session_config(2, precision=precision_name)) as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            yield session, train_op, feed


def _global_values(session):
    return session.run({v.op.name: v for v in tf.global_variables()})


Node = collections.namedtuple('Node', 'name op dtype')  # dtype: its attr T, None if none.
Run = collections.namedtuple('Run', 'losses values first_step_nodes')


def _type_attr(node):
    """The dtype of a NodeDef's attr T; None if it has no such attr or a list of types."""
    if 'T' in node.attr and node.attr['T'].WhichOneof('value') == 'type':
        return tf.as_dtype(node.attr['T'].type)
    return None


def _train(precision_name, variable_update='parameter_server', xla=False, checkpoint=None):
    """STEPS steps of _batches() from the seeded start; saves `checkpoint` (a prefix) if
    given. Returns a Run: the losses, {global variable: value} after the last step and
    the Nodes of the graphs the first step ran (its partition graphs)."""
    with _session(precision_name, variable_update, xla) as (session, train_op, feed):
        batches = list(zip(*_batches()))
        metadata = tf.RunMetadata()
        losses = [session.run(train_op, feed(*batches[0]), run_metadata=metadata,
                              options=tf.RunOptions(output_partition_graphs=True))]
        losses += [session.run(train_op, feed(*batch)) for batch in batches[1:]]
        if checkpoint:
            tf.train.Saver().save(session, checkpoint)
        nodes = [Node(node.name, node.op, _type_attr(node))
                 for graph in metadata.partition_graphs for node in graph.node]
        return Run(np.array(losses), _global_values(session), nodes)


@pytest.fixture(scope='module')
def float32_run():
    return _train('float32')


def _assert_float32(values):
    """Every variable but the global step holds float32 values."""
    assert {name: value.dtype for name, value in values.items() if name != 'global_step'} == {
        name: np.float32 for name in values if name != 'global_step'}


def _assert_restores_into_float32(checkpoint, saved):
    """`checkpoint` holds float32 variables (and the int64 global step), and a float32
    graph of the same model, in a session without rewrite, restores `saved` ({name:
    value}) from it."""
    dtypes = tf.train.load_checkpoint(checkpoint).get_variable_to_dtype_map()
    assert dtypes == {name: tf.int64 if name == 'global_step' else tf.float32 for name in saved}
    with tf.Graph().as_default():
        _build('float32')
        assert {v.op.name: v.dtype.base_dtype for v in tf.global_variables()} == dtypes
        with cpu_session() as session:
            tf.train.Saver().restore(session, checkpoint)
            restored = _global_values(session)
    assert sorted(restored) == sorted(saved)
    for name, value in saved.items():
        np.testing.assert_array_equal(restored[name], value, err_msg=name)


def test_bfloat16_trains_float32_variables_on_float32s_track(float32_run, tmp_path):
    checkpoint = str(tmp_path / 'model.ckpt')
    run = _train('bfloat16', checkpoint=checkpoint)
    if BFLOAT16_REWRITTEN:
        assert run.losses[0] != float32_run.losses[0]  # The forward pass ran in bfloat16.
        np.testing.assert_allclose(run.losses, float32_run.losses, rtol=BFLOAT16_LOSS_RTOL)
    else:  # Not rewritten on this CPU: float32's steps.
        np.testing.assert_array_equal(run.losses, float32_run.losses)
    assert run.losses[-1] < 0.5 * run.losses[0]
    _assert_float32(run.values)
    assert run.values['global_step'] == STEPS
    _assert_restores_into_float32(checkpoint, run.values)


def test_float16_on_a_cpu_trains_exactly_as_float32(float32_run, tmp_path):
    """The float16 rewrite converts GPU ops only, and scaling the loss by a power of two is
    exact in float32: the steps are float32's (measured: bit for bit)."""
    checkpoint = str(tmp_path / 'model.ckpt')
    run = _train('float16', checkpoint=checkpoint)
    np.testing.assert_allclose(run.losses, float32_run.losses, rtol=1e-6)
    assert sorted(run.values) == sorted(float32_run.values)  # No loss scale among them.
    for name, value in float32_run.values.items():
        np.testing.assert_allclose(run.values[name], value, rtol=1e-6, atol=1e-6, err_msg=name)
    _assert_float32(run.values)
    _assert_restores_into_float32(checkpoint, run.values)


@pytest.mark.parametrize('variable_update, gradient_sum, name_part', [
    ('parameter_server', 'AddN', '/sum_grads'),
    ('replicated', 'CollectiveReduce', ''),
])
def test_bfloat16_sums_all_reduces_and_applies_gradients_in_float32(
        float32_run, variable_update, gradient_sum, name_part):
    run = _train('bfloat16', variable_update)
    in_bfloat16 = {node.op for node in run.first_step_nodes if node.dtype == tf.bfloat16}
    if BFLOAT16_REWRITTEN:
        assert any('Conv2D' in op for op in in_bfloat16), in_bfloat16
        assert any('MatMul' in op for op in in_bfloat16), in_bfloat16
    else:
        assert in_bfloat16 == set()
    kept = [node for node in run.first_step_nodes
            if node.op.startswith(('AddN', 'CollectiveReduce', 'ResourceApply'))]
    assert {node.dtype for node in kept} == {tf.float32}, kept
    assert any(node.op.startswith(gradient_sum) and name_part in node.name for node in kept)
    assert any(node.op.startswith('ResourceApply') for node in kept)
    np.testing.assert_allclose(run.losses, float32_run.losses, rtol=BFLOAT16_LOSS_RTOL)


def test_xla_compiles_each_clones_passes_and_trains_as_without(float32_run):
    """Measured: losses within 2e-7 (relative) and variables within 4e-7 of float32's
    without XLA (other fusions, same math)."""
    run = _train('float32', xla=True)
    assert any(node.op == '_XlaRun' for node in run.first_step_nodes)
    np.testing.assert_allclose(run.losses, float32_run.losses, rtol=1e-5)
    for name, value in float32_run.values.items():
        np.testing.assert_allclose(run.values[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    with tf.Graph().as_default() as graph:
        _build('float32', xla=True)
        compiled = {op.name for op in graph.get_operations()
                    if '_XlaCompile' in op.node_def.attr and op.get_attr('_XlaCompile')}
    for clone in ('clone_0', 'clone_1'):
        assert any(name.startswith(f'{clone}/conv/') for name in compiled), clone
        assert any(name.startswith(f'{clone}/gradients/') for name in compiled), clone
    assert not any(name.startswith(('Momentum', 'train_op')) for name in compiled)


@pytest.mark.parametrize('variable_update, poison', [
    ('parameter_server', np.inf),
    ('replicated', np.nan),
])
def test_float16_skips_an_update_with_a_non_finite_gradient(variable_update, poison):
    """The skipped step leaves the variables, their optimizer slots, the replicated copies
    and the global step as they were and halves the loss scale; the next step updates."""
    batches = list(zip(*_batches()))
    with _session('float16', variable_update) as (session, train_op, feed):
        scale, skipped = precision.loss_scale_variables()
        variables = tf.global_variables() + [v for v in tf.local_variables()
                                             if v.op.name.startswith('clone_1/')]

        def values():
            return session.run({v.op.name: v for v in variables})

        session.run(train_op, feed(*batches[0]))  # The momentum slots are no longer zero.
        before, first_scale = values(), session.run(scale)
        assert before['global_step'] == 1
        assert np.isfinite(session.run(train_op, feed(*batches[1], poison)))
        skipped_step = values()
        for name, value in before.items():
            np.testing.assert_array_equal(skipped_step[name], value, err_msg=name)
        assert session.run([scale, skipped]) == [first_scale / 2, 1]
        session.run(train_op, feed(*batches[1]))
        after = values()
        assert after['global_step'] == 2
        unchanged = [name for name in before if np.array_equal(after[name], before[name])]
        assert unchanged == []
        assert session.run([scale, skipped]) == [first_scale / 2, 1]


def _loss_scale_trace(initial, period, gradients):
    """Updates a variable (SGD, rate 1) by each of `gradients` under DynamicLossScale(initial,
    period); returns ([(applied, scale, skipped updates)] after each, the variable)."""
    with tf.Graph().as_default():
        weight = tf.Variable(0.0)
        gradient = tf.placeholder(tf.float32, [])
        loss_scale = precision.DynamicLossScale(initial, period)
        applied = loss_scale.apply_if_finite(
            [(gradient, weight)], tf.train.GradientDescentOptimizer(1.0).apply_gradients)
        trace = []
        with tf.Session() as session:
            session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            for value in gradients:
                was_applied = session.run(applied, {gradient: value})
                trace.append((was_applied, *session.run([loss_scale.scale, loss_scale.skipped])))
            return trace, session.run(weight)


def test_the_loss_scale_doubles_after_period_finite_updates_and_halves_on_overflow():
    trace, weight = _loss_scale_trace(2.0, 3, [1, 1, np.inf, 1, 1, 1, np.nan, np.inf])
    assert trace == [
        (True, 2, 0), (True, 2, 0),
        (False, 1, 1),  # Halved; the count of finite updates in a row starts again.
        (True, 1, 1), (True, 1, 1), (True, 2, 1),
        (False, 1, 2), (False, 1, 3),  # Not below 1.
    ]
    assert weight == -5.0  # The five finite gradients, applied once each.


def test_the_loss_scale_stays_at_its_maximum():
    maximum = precision.DynamicLossScale.MAX_SCALE
    trace, _ = _loss_scale_trace(maximum, 1, [1, 1])
    assert trace == [(True, maximum, 0), (True, maximum, 0)]


def test_the_monitor_logs_and_counts_a_skipped_update(caplog):
    caplog.set_level(logging.WARNING, logger='absl')
    batches = list(zip(*_batches()))
    with tf.Graph().as_default():
        train_op, feed = _build('float16')
        scale, _ = precision.loss_scale_variables()
        monitor = loop.MonitorHook(train_op, tf.constant(0.01), BATCH, every_n_steps=100)
        session_creator = tf.train.ChiefSessionCreator(
            config=loop.session_config(2, precision='float16'))
        with tf.train.MonitoredSession(session_creator, hooks=[monitor]) as session:
            for batch, factor in zip(batches, (1.0, np.inf, 1.0)):
                session.run(train_op, feed(*batch, factor))
            lowered = session.run_step_fn(lambda step_context: step_context.session.run(scale))
    warnings = [record.getMessage() for record in caplog.records
                if record.name == 'absl' and record.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith('step 1: ') and 'update skipped' in warnings[0]
    assert f'loss scale now {lowered:g}' in warnings[0]
    assert (monitor.skipped_updates, monitor.global_step) == (1, 2)


CPU_WITHOUT_BF16 = {'avx2', 'avx512f'}


@pytest.mark.parametrize('precision_name, device, flags, fragments', [
    ('float32', '/device:CPU:0', CPU_WITHOUT_BF16, None),
    ('float32', '/device:GPU:0', None, None),
    ('bfloat16', '/device:CPU:0', CPU_WITHOUT_BF16,
     ['--precision=bfloat16', 'lacks the avx512_bf16 and amx_bf16 instructions',
      'slower than --precision=float32']),
    ('bfloat16', '/job:worker/task:1', CPU_WITHOUT_BF16, ['lacks the avx512_bf16']),
    ('bfloat16', '/device:CPU:0', {'avx2', 'avx512_bf16'},
     ['has none of the avx512f, avx_ne_convert instructions', 'the step stays float32']),
    ('bfloat16', '/device:CPU:0', {'avx2', 'avx_ne_convert'},
     ['lacks the avx512_bf16 and amx_bf16 instructions']),
    ('bfloat16', '/device:CPU:0', CPU_WITHOUT_BF16 | {'avx512_bf16'}, None),
    ('bfloat16', '/device:CPU:1', {'avx512f', 'amx_bf16'}, None),
    ('bfloat16', '/device:CPU:0', None, None),  # Unknown flags: taken to be fast.
    ('bfloat16', '/device:GPU:0', {'avx512_bf16'},
     ['--precision=bfloat16', 'the step stays float32', 'use --precision=float16 on GPUs']),
    ('float16', '/device:CPU:0', None,
     ['--precision=float16 converts the ops on GPUs', 'the step stays float32']),
    ('float16', '/device:GPU:0', CPU_WITHOUT_BF16, None),
])
def test_slowness_says_why_a_precision_runs_no_faster(precision_name, device, flags, fragments):
    line = precision.slowness(precision_name, device, flags)
    if fragments is None:
        assert line is None
    else:
        assert '\n' not in line
        assert [fragment for fragment in fragments if fragment not in line] == [], line


@pytest.mark.parametrize('precision_name, flags, support', [
    ('bfloat16', CPU_WITHOUT_BF16, 'emulated'),
    ('bfloat16', CPU_WITHOUT_BF16 | {'avx512_bf16'}, 'native'),
    ('bfloat16', {'avx512f', 'amx_bf16'}, 'native'),
    ('bfloat16', {'avx2'}, 'not rewritten'),
    ('bfloat16', None, 'unknown'),
    ('float32', CPU_WITHOUT_BF16, None),
    ('float16', CPU_WITHOUT_BF16, None),
])
def test_cpu_support_says_how_the_cpu_runs_a_precision(precision_name, flags, support):
    assert precision.cpu_support(precision_name, flags) == support


def test_configure_turns_on_each_precisions_rewrite():
    rewrites = {name: loop.session_config(precision=name).graph_options.rewrite_options
                for name in precision.PRECISIONS}
    on = tf.GraphOptions().rewrite_options.ON
    assert rewrites['float32'] == tf.GraphOptions().rewrite_options
    assert rewrites['bfloat16'].auto_mixed_precision_onednn_bfloat16 == on
    assert rewrites['bfloat16'].auto_mixed_precision != on
    assert rewrites['float16'].auto_mixed_precision == on
    assert rewrites['float16'].auto_mixed_precision_onednn_bfloat16 != on


@pytest.mark.parametrize('setting, value', [('precision', 'float64'), ('xla', 'yes')])
def test_bad_deployment_settings_name_their_parameter(setting, value):
    with pytest.raises(ValueError, match=f'^{setting} must be .*got {value!r}$'):
        DeploymentConfig(**{setting: value})


def test_precision_flags_are_checked():
    assert config.TrainConfig.from_flags({'precision': 'bfloat16', 'xla': True}).as_flags()[
        'precision'] == 'bfloat16'
    with pytest.raises(UsageError, match="^unknown --precision 'float64'; valid: bfloat16, "
                                         'float16, float32$'):
        config.TrainConfig.from_flags({'precision': 'float64'})
    synchronous = {'worker_replicas': 2, 'num_ps_tasks': 1, 'master': 'grpc://h:1',
                   'sync_replicas': True}
    config.TrainConfig.from_flags({'precision': 'bfloat16', **synchronous})
    with pytest.raises(UsageError, match='^--precision=float16 cannot go with '
                                         '--sync_replicas'):
        config.TrainConfig.from_flags({'precision': 'float16', **synchronous})


def test_float16_refuses_a_sync_replicas_optimizer():
    with tf.Graph().as_default():
        optimizer = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2, 2)
        images, labels = (tf.constant(steps[0]) for steps in _batches())
        with pytest.raises(ValueError, match="^precision='float16' cannot go with a "
                           "SyncReplicasOptimizer"):
            deploy(DeploymentConfig(precision='float16'),
                   lambda: _model(images[:2], labels[:2], tf.constant(1.0)), optimizer=optimizer)


def _train_config(train_dir, digits_dir, **flags):
    return config.TrainConfig.from_flags({
        'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'batch_size': 8,
        'num_clones': 2, 'log_every_n_steps': 10, 'save_summaries_secs': 1, **flags})


def _assert_float32_checkpoint(train_dir):
    dtypes = tf.train.load_checkpoint(str(train_dir)).get_variable_to_dtype_map()
    assert dtypes.pop('global_step') == tf.int64
    assert set(dtypes.values()) == {tf.float32}


@pytest.mark.slow  # Trains and evaluates 6 runs (13 s).
def test_checkpoints_of_each_precision_evaluate_and_resume_in_the_others(
        digits_dir, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger='absl')
    train_dir = tmp_path / 'train'
    # Seeded: slim's default RMSProp at 0.01 on batches of 8 leaves an unseeded run at chance
    # now and then.
    assert train.train(_train_config(train_dir, digits_dir, max_number_of_steps=120,
                                     precision='bfloat16', seed=1)) == 120
    _assert_float32_checkpoint(train_dir)
    assert json.loads((train_dir / run_record.FILENAME).read_text())['flags']['precision'] == (
        'bfloat16')
    # Evaluation builds a float32 graph, without rewrite.
    metrics = evaluate.evaluate(
        run_record.eval_config(str(train_dir), eval_dir=str(tmp_path / 'eval')))
    assert metrics['global_step'] == 120 and metrics['num_examples'] == 360
    # The bfloat16 steps learned.
    assert metrics['accuracy'] > 0.3
    for precision_name, resumed, last_step in (('float32', 120, 130), ('float16', 130, 140)):
        caplog.clear()
        assert train.train(_train_config(train_dir, digits_dir, max_number_of_steps=last_step,
                                         precision=precision_name)) == last_step
        messages = [record.getMessage() for record in caplog.records]
        assert f'Resuming from {train_dir}/model.ckpt-{resumed}' in messages
        _assert_float32_checkpoint(train_dir)
    assert any('--precision=float16 converts the ops on GPUs' in message
               for message in messages)


@pytest.mark.slow
def test_an_xla_run_trains_and_evaluates(digits_dir, tmp_path):
    """About 10 s: XLA compiles the clones' step."""
    train_dir = tmp_path / 'train'
    assert train.train(_train_config(train_dir, digits_dir, max_number_of_steps=3,
                                     xla=True)) == 3
    _assert_float32_checkpoint(train_dir)
    assert json.loads((train_dir / run_record.FILENAME).read_text())['flags']['xla'] is True
    metrics = evaluate.evaluate(
        run_record.eval_config(str(train_dir), eval_dir=str(tmp_path / 'eval')))
    assert metrics['global_step'] == 3
