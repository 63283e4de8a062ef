"""Quantization-aware training (slim_deploy.deployment.quantize, tf.contrib.quantize's API):
batch norm folded and weights (per tensor as contrib's, or per channel) and activations
fake-quantized in each kind of layer, in training and eval mode; the 8-bit grids; quant_delay
and freeze_bn_delay; ranges learned from clone 0's batches, shared by the clones and placed
as the model's variables; the eval graph restoring a QAT checkpoint's ranges (and saying
which kind it holds) and converting to a uint8 (per tensor) or int8 (per channel) TFLite
model that computes as it does; deploy(quantize_delay=N) training lenet on the digits in
every variable update; and `from tensorflow.contrib import quantize`."""
import concurrent.futures
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf2
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.cluster import launch, tasks
from slim_deploy.datasets import dataset_factory, pipeline
from slim_deploy.deployment import model_deploy, placement, quantize
from slim_deploy.image_classifier import builders
from slim_deploy.nets import nets_factory
from slim_deploy.preprocessing import preprocessing_factory
from slim_deploy.training import loop

from helpers import ENV, cpu_session, error_message, labelled_images

DEVICES = ['/device:CPU:0', '/device:CPU:1']
PER_CHANNEL = 'FakeQuantWithMinMaxVarsPerChannel'
PER_TENSOR = 'FakeQuantWithMinMaxVars'


def _batch_norm(training, **params):
    return {'normalizer_fn': slim.batch_norm,
            'normalizer_params': {'is_training': training, 'scale': True, 'decay': 0.5,
                                  **params}}


# Each: ((images [4, 8, 8, 3], training) -> output, its layers' weight quantizations (op
# types), whether batch norm is folded).
LAYERS = {
    'conv_bn': (lambda x, t: slim.conv2d(x, 4, 3, scope='c', **_batch_norm(t)),
                [PER_CHANNEL], True),
    'conv_bn_unfused': (lambda x, t: slim.conv2d(
        x, 4, 3, scope='c', **_batch_norm(t, fused=False)), [PER_CHANNEL], True),
    'conv_bn_unfused_unscaled_uncentered': (lambda x, t: slim.conv2d(
        x, 4, 3, scope='c', **_batch_norm(t, fused=False, scale=False, center=False)),
        [PER_CHANNEL], True),
    'conv_bn_in_place_updates': (lambda x, t: slim.conv2d(
        x, 4, 3, scope='c', **_batch_norm(t, updates_collections=None)), [PER_CHANNEL], True),
    'fully_connected_bn': (lambda x, t: slim.fully_connected(
        slim.flatten(x), 5, scope='f', **_batch_norm(t)), [PER_TENSOR], True),
    'separable_bn_relu6': (lambda x, t: slim.separable_conv2d(
        x, 4, 3, depth_multiplier=2, activation_fn=tf.nn.relu6, scope='s', **_batch_norm(t)),
        [PER_CHANNEL, PER_CHANNEL], True),
    'depthwise_atrous_bn': (lambda x, t: slim.separable_conv2d(
        x, None, 3, depth_multiplier=1, rate=2, scope='d', **_batch_norm(t)),
        [PER_CHANNEL], True),
    'keras_conv_bn': (lambda x, t: tf2.keras.layers.BatchNormalization(momentum=0.5)(
        tf2.keras.layers.Conv2D(4, 3, use_bias=False)(x), training=t), [PER_CHANNEL], True),
    'conv_fully_connected_biases': (lambda x, t: slim.fully_connected(
        slim.flatten(slim.conv2d(x, 4, 3, scope='c')), 5, activation_fn=None, scope='f'),
        [PER_CHANNEL, PER_TENSOR], False),
}


def _images(seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, [4, 8, 8, 3]).astype(np.float32)


def _give_values(session, seed=1):
    """Sets each variable of the model (not the global step nor the ranges), in creation
    order, to values drawn with `seed`: gamma and moving variances in [0.5, 2), the others
    in [-0.5, 0.5)."""
    rng = np.random.RandomState(seed)
    for variable in tf.global_variables():
        shape, name = variable.shape.as_list(), variable.op.name
        if name == 'global_step' or '_quant/' in name:
            continue
        low, high = (0.5, 2.0) if name.endswith(('gamma', 'moving_variance')) else (-0.5, 0.5)
        variable.load(rng.uniform(low, high, shape).astype(np.float32), session)


# Weight ranges hold weights of a few steps of training: those of _give_values (folded with
# its gammas and moving variances) lie in it.
WEIGHTS_SPAN = (-2.0, 2.0)


def _ranges(weights=False):
    """{range name ('c/act_quant'): (min variable, max variable)} of the current graph's
    activations, or with `weights` of its weights ('c/weights_quant')."""
    variables = {v.op.name: v for v in tf.global_variables()}
    return {name[:-len('/min')]: (v, variables[name[:-len('min')] + 'max'])
            for name, v in variables.items() if re.search(r'_quant(_\d+)?/min$', name) and
            ('/weights_quant' in name) == weights}


def _needed_ops(fetches):
    """The ops running `fetches` (tensors or ops) needs: theirs and those of their inputs and
    control inputs, transitively."""
    needed, stack = set(), [getattr(fetch, 'op', fetch) for fetch in fetches]
    while stack:
        op = stack.pop()
        if op not in needed:
            needed.add(op)
            stack.extend([t.op for t in op.inputs] + list(op.control_inputs))
    return needed


def _run_layer(layer, training, rewrite=None, span=None):
    """Output of LAYERS[layer] on _images() (variables from _give_values),
    after rewrite(graph) (None: float), every activation range set to `span` (min, max)
    and every weight range to WEIGHTS_SPAN first (None: left alone). Returns (output, the
    ops a training step runs: the output's and the batch-norm updates')."""
    build = LAYERS[layer][0]
    with tf.Graph().as_default() as graph:
        tf.train.create_global_step()
        output = tf.identity(build(tf.constant(_images()), training))
        if rewrite:
            rewrite(graph)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            _give_values(session)
            for weights, bounds in ((False, span), (True, WEIGHTS_SPAN)) if span else ():
                for low, high in _ranges(weights).values():
                    low.load(np.full(low.shape, bounds[0]), session)
                    high.load(np.full(high.shape, bounds[1]), session)
            return session.run(output), _needed_ops(
                [output, *tf.get_collection(tf.GraphKeys.UPDATE_OPS)])


# (training, per_channel_wt): contrib's rewrite in both modes, per-channel weights in training
# (evaluation's per-channel ranges are read as per-tensor ones are, and converted to int8 below).
@pytest.mark.parametrize('training, per_channel_wt', [(True, False), (False, False),
                                                      (True, True)],
                         ids=['training', 'eval', 'training_per_channel'])
@pytest.mark.parametrize('layer', sorted(LAYERS))
def test_each_layer_is_folded_and_quantized_and_computes_as_the_float_layer(layer, training,
                                                                           per_channel_wt):
    expected, _ = _run_layer(layer, training)
    # 16 bits: quantization error aside, the rewritten graph is the float one.
    create = (quantize.experimental_create_training_graph if training
              else quantize.experimental_create_eval_graph)
    rewrite = lambda g: create(g, 16, 16, per_channel_wt=per_channel_wt)  # noqa: E731
    # In eval mode the ranges are training's: give each one wider than the output's.
    span = None if training else (-2 * np.abs(expected).max(), 2 * np.abs(expected).max())
    actual, operations = _run_layer(layer, training, rewrite, span)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-3 * np.abs(expected).max())

    weights = sorted(op.type for op in operations
                     if op.type.startswith('FakeQuant') and 'weights_quant' in op.name)
    kinds = LAYERS[layer][1]
    assert weights == sorted(kinds if per_channel_wt else [PER_TENSOR] * len(kinds))
    folded = LAYERS[layer][2]
    assert any(op.name.endswith('BatchNorm_Fold/mul_fold') for op in operations) == folded
    assert any('batch_add_fold' in op.name for op in operations) == (folded and training)
    assert not [op for op in operations if op.type.startswith('FusedBatchNorm')]  # Folded.
    counters = [op for op in operations if op.name.endswith('act_quant/update_count')]
    assert bool(counters) == training  # Only training updates (and counts) the ranges.


def _conv_net(images, training=True):
    """conv + batch norm + ReLU, max-pool, a fully connected layer with biases (no ReLU)."""
    net = slim.conv2d(images, 4, 3, scope='conv', **_batch_norm(training))
    net = slim.max_pool2d(net, 2)
    return slim.fully_connected(slim.flatten(net), 5, activation_fn=None, scope='logits')


def _on_grid(values, low, high, steps):
    """Whether `values` lie on the grid of `steps` equal steps that TensorFlow's fake
    quantization nudges [low, high] to (0 exactly on it)."""
    scale = (high - low) / steps
    zero = np.clip(np.round(-low / scale), 0, steps)
    levels = values / scale + zero
    return np.allclose(levels, np.round(levels), atol=1e-3) and levels.min() >= -1e-3 and (
        levels.max() <= steps + 1e-3)


@pytest.mark.parametrize('per_channel_wt', [False, True], ids=['per_tensor', 'per_channel'])
def test_weights_and_activations_lie_on_their_8_bit_grids(per_channel_wt):
    with tf.Graph().as_default() as graph:
        logits = tf.identity(_conv_net(tf.constant(_images())))
        quantize.create_training_graph(per_channel_wt=per_channel_wt)
        fakes = [op for op in graph.get_operations() if op.type.startswith('FakeQuant')]
        weight_ranges = _ranges(weights=True)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            values = session.run([[op.inputs[0], op.outputs[0], op.inputs[1], op.inputs[2]]
                                  for op in fakes])
            recorded = session.run(weight_ranges)
            assert np.isfinite(session.run(logits)).all()
    assert sorted(op.type for op in fakes) == [PER_TENSOR] * (3 if per_channel_wt else 4) + (
        [PER_CHANNEL] if per_channel_wt else [])
    assert sorted(recorded) == ['conv/weights_quant', 'logits/weights_quant']
    for op, (weights, quantized, low, high) in zip(fakes, values):
        if 'weights_quant' in op.name:  # Narrow: 254 steps, on the weights' own range.
            scope = op.name.split('/')[0]
            np.testing.assert_array_equal([low, high], recorded[f'{scope}/weights_quant'])
            if per_channel_wt:  # Symmetric: k * max|w| / 127, |k| <= 127.
                axes = tuple(range(weights.ndim - 1)) if op.type == PER_CHANNEL else None
                np.testing.assert_allclose(high, np.abs(weights).max(axes), rtol=1e-6)
                np.testing.assert_array_equal(low, -high)
                step = high / 127
                assert np.allclose(quantized / step, np.round(quantized / step), atol=1e-3)
                assert np.all(np.abs(quantized) <= high * (1 + 1e-6)), op.name
            else:  # Asymmetric, as contrib's: [min(w, 0), max(w, 0)].
                np.testing.assert_allclose([low, high], [min(weights.min(), 0),
                                                         max(weights.max(), 0)], rtol=1e-6)
                assert low != -high and _on_grid(quantized, low, high, 254), op.name
            if op.type == PER_CHANNEL:
                assert high.shape == (4,) and len(set(high.tolist())) == 4
        else:  # Asymmetric on the activation's range, holding 0: 255 steps.
            assert low <= 0 <= high and _on_grid(quantized, low, high, 255), op.name
            assert len(np.unique(quantized)) > 10


def test_nothing_is_quantized_before_quant_delay_and_the_ranges_learn_meanwhile():
    images = _images()
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        tf.train.create_global_step()
        logits = tf.identity(_conv_net(tf.constant(images)))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            expected = session.run(logits)
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        step = tf.train.create_global_step()
        logits = tf.identity(_conv_net(tf.constant(images)))
        quantize.create_training_graph(quant_delay=3)
        low, high = _ranges()['logits/act_quant']
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            start = [float(value) for value in session.run([low, high])]
            # Step 0: the float values (to round-off: the fold reorders the arithmetic).
            np.testing.assert_allclose(session.run(logits), expected, rtol=1e-4, atol=1e-5)
            learned = session.run([low, high])
            step.load(3, session)
            quantized = session.run(logits)
            bounds = session.run([low, high])
    assert start == [0.0, 6.0]
    # The first batch set the range (a debiased moving average starts at its first value).
    np.testing.assert_allclose(learned, [min(expected.min(), 0), max(expected.max(), 0)],
                               rtol=1e-4)
    assert not np.array_equal(quantized, expected) and _on_grid(quantized, *bounds, 255)
    np.testing.assert_allclose(quantized, expected, atol=(bounds[1] - bounds[0]) / 255)


def test_freeze_bn_delay_switches_to_the_moving_statistics_and_stops_them():
    images = _images()
    eval_mode, _ = _run_layer('conv_bn', False)  # Batch norm with the moving statistics.
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        step = tf.train.create_global_step()
        output = tf.identity(LAYERS['conv_bn'][0](tf.constant(images), True))
        updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        quantize.experimental_create_training_graph(weight_bits=16, activation_bits=16,
                                                    freeze_bn_delay=2)
        moving = [v for v in tf.global_variables() if 'moving_' in v.op.name]
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            _give_values(session)
            frozen = session.run(moving)
            step.load(2, session)
            actual, _ = session.run([output, updates])
            after = session.run(moving)
            step.load(1, session)
            session.run([output, updates])
            before_the_delay = session.run(moving)
    for value, kept, moved in zip(after, frozen, before_the_delay):
        np.testing.assert_array_equal(value, kept)
        assert not np.allclose(moved, kept)
    np.testing.assert_allclose(actual, eval_mode, atol=1e-3 * np.abs(eval_mode).max())


def _two_clones(variable_update='parameter_server', **config):
    """conv_net deployed as 2 clones on 2 CPU devices with QAT from step 0, each on its half
    of the batch fed to the images placeholder; returns (model, placeholder)."""
    images = tf.placeholder(tf.float32, [8, 8, 8, 3])
    halves = iter(tf.split(images, 2))
    labels = tf.constant([0, 1, 2, 3])

    def model_fn():
        logits = _conv_net(next(halves))
        tf.losses.sparse_softmax_cross_entropy(labels, logits)

    deploy_config = model_deploy.DeploymentConfig(
        num_clones=2, clone_devices=DEVICES, variable_update=variable_update,
        quantize_delay=0, **config)
    return model_deploy.deploy(deploy_config, model_fn,
                               optimizer=tf.train.GradientDescentOptimizer(0.01)), images


def test_the_clones_share_one_set_of_ranges_which_clone_0s_batches_update():
    batch = np.concatenate([_images(), _images(1)])
    with tf.Graph().as_default() as graph:
        model, images = _two_clones()
        ranges = _ranges()
        assert sorted(ranges) == ['conv/act_quant', 'logits/act_quant']
        (count,) = [v for v in tf.global_variables() if v.op.name == 'conv/act_quant/update_count']
        relus = [graph.get_tensor_by_name(f'clone_{i}/conv/Relu:0') for i in range(2)]
        for clone, device in zip(('clone_0/', 'clone_1/'), DEVICES):
            fakes = [op for op in graph.get_operations() if op.type.startswith('FakeQuant') and
                     op.name.startswith(clone) and 'gradients' not in op.name]
            assert len(fakes) == 4 and {op.device for op in fakes} == {device}
        # Clone 0 records the weights' ranges; clone 1 quantizes the same weights on its own.
        variables = [v for pair in _ranges(weights=True).values() for v in pair]
        writers = [op for op in graph.get_operations() if op.type == 'AssignVariableOp' and
                   op.inputs[0].op in {v.op for v in variables} and
                   op not in {v.initializer for v in variables}]
        assert len(writers) == 4 and all(op.name.startswith('clone_0/') for op in writers)
        with cpu_session() as session:
            session.run(tf.global_variables_initializer())
            _, activations = session.run([model.train_op, relus], {images: batch})
            first = session.run(ranges['conv/act_quant'])
            for _ in range(2):
                session.run(model.train_op, {images: batch})
            assert session.run(count) == 3  # Once per step: clone 0's only.
            moved = session.run(ranges['conv/act_quant'])
    # The first step set the range to clone 0's batch's, which differs from clone 1's; the
    # next steps' (the weights changed) moved it.
    assert first[0] == 0.0 and first[1] == activations[0].max() != activations[1].max()
    assert moved[1] != first[1]


@pytest.mark.parametrize('config, devices', [
    ({}, {'/device:CPU:0'}),
    ({'num_ps_tasks': 2}, None),  # Each range on the ps task holding its layer's weights.
    # Weights in 2 parts (conv's along its output channels) are read concatenated: each
    # range on the ps task holding the first part.
    ({'num_ps_tasks': 2, 'variable_partitioner': placement.min_size_partitioner(128, 2)}, None),
    ({'variable_update': 'replicated'}, {DEVICES[0]}),  # Clone 0's, with the statistics.
], ids=['local', 'ps_tasks', 'ps_tasks_in_parts', 'replicated'])
def test_the_ranges_are_placed_as_the_model_variables(config, devices):
    with tf.Graph().as_default():
        _two_clones(**config)
        variables = {v.op.name: v for v in tf.global_variables()}
        assert sorted(_ranges(weights=True)) == ['conv/weights_quant', 'logits/weights_quant']
        for name, (low, high) in {**_ranges(), **_ranges(weights=True)}.items():
            weights = name.split('/')[0] + '/weights'
            layer_device = variables.get(weights, variables.get(weights + '/part_0')).device
            assert low.device == high.device == layer_device
            assert low.device in (devices or {f'/job:ps/task:{t}/device:CPU:0' for t in (0, 1)})
        assert all(v.device.startswith('/job:ps/') for v in variables.values()) == bool(
            config.get('num_ps_tasks'))


def _all_ranges(session):
    """{range name: (min, max) values} of the current graph's activations and weights."""
    return {name: session.run(pair) for name, pair in {**_ranges(),
                                                       **_ranges(weights=True)}.items()}


@pytest.mark.parametrize('per_channel_wt', [False, True], ids=['per_tensor', 'per_channel'])
def test_the_eval_graph_restores_a_qat_checkpoint_and_quantizes_with_its_ranges(
        tmp_path, per_channel_wt):
    images = _images()
    with tf.Graph().as_default():
        loss = tf.reduce_sum(_conv_net(tf.constant(images)))
        quantize.create_training_graph(per_channel_wt=per_channel_wt)
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            for _ in range(3):
                session.run(train_op)
            trained = _all_ranges(session)
            checkpoint = tf.train.Saver().save(session, str(tmp_path / 'model'))
    with tf.Graph().as_default():
        logits = tf.identity(_conv_net(tf.constant(images), training=False))
        quantize.create_eval_graph(per_channel_wt=quantize.checkpoint_per_channel_wt(checkpoint))
        assert not [v for v in tf.global_variables() if 'update_count' in v.op.name]
        with tf.Session() as session:
            tf.train.Saver().restore(session, checkpoint)
            restored = _all_ranges(session)
            output, again = session.run(logits), session.run(logits)
            assert _all_ranges(session).keys() == restored.keys()
    assert sorted(trained) == ['conv/act_quant', 'conv/weights_quant', 'logits/act_quant',
                               'logits/weights_quant']
    for name, pair in trained.items():
        np.testing.assert_array_equal(restored[name], pair)
    assert np.shape(trained['conv/weights_quant'][0]) == ((4,) if per_channel_wt else ())
    np.testing.assert_array_equal(output, again)  # Evaluation reads the ranges, not moves them.
    assert _on_grid(output, *trained['logits/act_quant'], 255)
    assert quantize.checkpoint_per_channel_wt(checkpoint) is per_channel_wt
    with tf.Graph().as_default(), tf.Session() as session:  # A float model's checkpoint:
        _conv_net(tf.constant(images))
        session.run(tf.global_variables_initializer())
        float_checkpoint = tf.train.Saver().save(session, str(tmp_path / 'float'))
    assert quantize.checkpoint_per_channel_wt(float_checkpoint) is None
    with tf.Graph().as_default(), tf.Session() as session:  # ... lacks the ranges.
        _conv_net(tf.constant(images), training=False)
        quantize.create_eval_graph()
        with pytest.raises(tf.errors.NotFoundError, match='_quant'):
            tf.train.Saver().restore(session, float_checkpoint)


def _tflite_model_graph(images, training):
    """conv + batch norm + ReLU6, separable conv + batch norm + ReLU6, average pool, fully
    connected logits: the layers of MobileNets."""
    net = slim.conv2d(images, 8, 3, stride=2, activation_fn=tf.nn.relu6, scope='conv',
                      **_batch_norm(training))
    net = slim.separable_conv2d(net, 8, 3, depth_multiplier=1, activation_fn=tf.nn.relu6,
                                scope='separable', **_batch_norm(training))
    net = slim.avg_pool2d(net, 8)
    return slim.fully_connected(slim.flatten(net), 5, activation_fn=None, scope='logits')


# (per_channel_wt, the converter's inference_type, quantized_input_stats): contrib's rewrite
# converted as TF 1 clients do (DeepLab's stats: real = (q - 127.5) / 127.5), and the
# per-channel one converted to int8 (real = q / 127).
CONVERSIONS = {'uint8_per_tensor': (False, tf.uint8, (127.5, 127.5)),
               'int8_per_channel': (True, tf.int8, (0.0, 127.0))}


@pytest.mark.parametrize('conversion', sorted(CONVERSIONS))
def test_the_eval_graph_converts_to_a_tflite_model_computing_as_it(tmp_path, conversion):
    per_channel_wt, inference_type, stats = CONVERSIONS[conversion]
    train_images, labels = labelled_images((64, 16, 16, 3), 5, seed=2, low=-1.0)
    with tf.Graph().as_default():
        batch = tf.data.make_one_shot_iterator(tf.data.Dataset.from_tensor_slices(
            (train_images, labels)).repeat().batch(16)).get_next()
        tf.losses.sparse_softmax_cross_entropy(batch[1], _tflite_model_graph(batch[0], True))
        quantize.create_training_graph(per_channel_wt=per_channel_wt)
        train_op = slim.learning.create_train_op(tf.losses.get_total_loss(),
                                                 tf.train.AdamOptimizer(0.01))
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            for _ in range(20):
                session.run(train_op)
            checkpoint = tf.train.Saver().save(session, str(tmp_path / 'model'))
    with tf.Graph().as_default():
        image = tf.placeholder(tf.float32, [1, 16, 16, 3], name='input')
        logits = tf.identity(_tflite_model_graph(image, False), name='logits')
        quantize.create_eval_graph(per_channel_wt=per_channel_wt)
        with tf.Session() as session:
            tf.train.Saver().restore(session, checkpoint)
            converter = tf.lite.TFLiteConverter.from_session(session, [image], [logits])
            converter.inference_type = inference_type
            converter.inference_input_type = converter.inference_output_type = inference_type
            converter.quantized_input_stats = {'input': stats}
            interpreter = tf2.lite.Interpreter(model_content=converter.convert())
            interpreter.allocate_tensors()
            source = interpreter.get_input_details()[0]
            in_scale, in_zero = source['quantization']
            levels = np.iinfo(inference_type.as_numpy_dtype)
            codes = np.clip(np.round(train_images[:8] / in_scale + in_zero), levels.min,
                            levels.max).astype(source['dtype'])
            inputs = (codes.astype(np.float32) - in_zero) * in_scale  # On the input's grid.
            expected = np.concatenate([session.run(logits, {image: x[None]}) for x in inputs])
    assert {d['dtype'] for d in interpreter.get_tensor_details()} <= {
        inference_type.as_numpy_dtype, np.int32}
    ops = {op['op_name'] for op in interpreter._get_ops_details()}
    assert {'CONV_2D', 'DEPTHWISE_CONV_2D', 'FULLY_CONNECTED'} <= ops
    per_axis = [d['quantization_parameters'] for d in interpreter.get_tensor_details()
                if len(d['quantization_parameters']['scales']) > 1]
    # Per channel: conv and depthwise weights (and their biases).
    assert len(per_axis) >= 3 if per_channel_wt else not per_axis
    target = interpreter.get_output_details()[0]
    scale, zero = target['quantization']
    actual = []
    for code in codes:
        interpreter.set_tensor(source['index'], code[None])
        interpreter.invoke()
        actual.append((interpreter.get_tensor(target['index']).astype(np.float32) - zero) *
                      scale)
    # The interpreter's integer arithmetic (int32 accumulators and biases, requantization)
    # rounds some values of each layer one step the other way, and the steps add up: over
    # runs (training is not deterministic) outputs were up to 3 steps off, 0.4 on average.
    error = np.abs(np.concatenate(actual) - expected) / scale
    assert error.max() < 4.01 and error.mean() < 0.75


@pytest.mark.parametrize('per_channel_wt', [False, True], ids=['per_tensor', 'per_channel'])
def test_lenet_is_quantized_layer_by_layer(per_channel_wt):
    with tf.Graph().as_default() as graph:
        network_fn = nets_factory.get_network_fn('lenet', 10, is_training=False)
        logits = tf.identity(network_fn(tf.zeros([2, 28, 28, 1]))[0])
        quantize.create_eval_graph(per_channel_wt=per_channel_wt)
        needed = _needed_ops([logits])
        ranges, weight_ranges = sorted(_ranges()), _ranges(weights=True)
    weights = {op.name: op.type for op in needed if op.type.startswith('Fake') and
               'weights_quant' in op.name}
    conv = PER_CHANNEL if per_channel_wt else PER_TENSOR
    assert weights == {f'LeNet/{layer}/weights_quant/{kind}': kind for layer, kind in (
        ('conv1', conv), ('conv2', conv), ('fc3', PER_TENSOR), ('fc4', PER_TENSOR))}
    assert ranges == [f'LeNet/{layer}/act_quant' for layer in ('conv1', 'conv2', 'fc3', 'fc4')]
    assert {name: low.shape.as_list() for name, (low, _) in weight_ranges.items()} == {
        'LeNet/conv1/weights_quant': [32] if per_channel_wt else [],
        'LeNet/conv2/weights_quant': [64] if per_channel_wt else [],
        'LeNet/fc3/weights_quant': [], 'LeNet/fc4/weights_quant': []}
    assert logits.op.inputs[0].op.type == PER_TENSOR  # The logits, quantized.
    assert graph.get_operation_by_name('LeNet/conv1/Relu').outputs[0].consumers()[0].type == (
        PER_TENSOR)


def test_mobilenet_v1_is_folded_and_quantized_layer_by_layer():
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn('mobilenet_v1_025', 10, is_training=True)
        logits, _ = network_fn(tf.zeros([2, 64, 64, 3]))
        loss = tf.losses.sparse_softmax_cross_entropy([0, 1], logits)
        quantize.create_training_graph()
        needed = _needed_ops([loss, *tf.get_collection(tf.GraphKeys.UPDATE_OPS)])
        ranges = sorted(_ranges())
        weight_ranges = sorted(_ranges(weights=True))
    weights = [op for op in needed if 'weights_quant' in op.name and op.type.startswith('Fake')]
    # 27 convolutions (1 + 13 depthwise + 13 pointwise), each folded, and the logits' conv.
    assert [op.type for op in weights] == [PER_TENSOR] * 28  # As contrib's.
    assert len(weight_ranges) == 28 and (
        'MobilenetV1/MobilenetV1/Conv2d_1_depthwise/weights_quant' in weight_ranges)
    assert len([op for op in needed if op.name.endswith('BatchNorm_Fold/mul_fold')]) == 27
    assert not [op for op in needed if op.type.startswith('FusedBatchNorm')]
    # Each layer's output, and in training (as contrib's) the dropout's multiplication.
    assert [name for name in ranges if not name.endswith('/act_quant')] == [
        'MobilenetV1/Logits/Dropout_1b/dropout/mul_quant'] and len(ranges) == 29
    assert 'MobilenetV1/MobilenetV1/Conv2d_13_pointwise/act_quant' in ranges  # As contrib's.
    pools = [op for op in needed if op.type == 'AvgPool']
    assert [c.type for op in pools for c in op.outputs[0].consumers()] == [PER_TENSOR]


@pytest.mark.parametrize('kwargs, message', [
    ({'quantize_delay': -1}, 'quantize_delay must be None (no quantization) or an integer >= 0, '
                             'the global step it starts at, got -1'),
    ({'quantize_delay': True}, 'quantize_delay must be None (no quantization) or an integer '
                               '>= 0, the global step it starts at, got True'),
    ({'quantize_delay': 0, 'sync_batch_norm': True, 'num_clones': 2, 'clone_devices': DEVICES},
     "quantize_delay=0 cannot go with sync_batch_norm=True: the quantization rewrite folds "
     "each clone's batch norm into its weights with the statistics of its own batch"),
])
def test_bad_quantize_delays_fail_up_front(kwargs, message):
    with pytest.raises(ValueError) as excinfo:
        model_deploy.DeploymentConfig(**kwargs)
    assert error_message(excinfo) == message


def test_quantize_delay_is_read_only_and_in_repr():
    config = model_deploy.DeploymentConfig(quantize_delay=100)
    assert config.quantize_delay == 100 and ', quantize_delay=100,' in repr(config)
    assert model_deploy.DeploymentConfig().quantize_delay is None
    with pytest.raises(AttributeError):
        config.quantize_delay = 0


def test_deploy_without_an_optimizer_builds_the_eval_rewrite():
    with tf.Graph().as_default() as graph:
        config = model_deploy.DeploymentConfig(quantize_delay=0)
        model_deploy.deploy(config, lambda: tf.losses.sparse_softmax_cross_entropy(
            [0, 1, 2, 3], _conv_net(tf.constant(_images()), training=False)))
        assert [op for op in graph.get_operations() if op.type == PER_CHANNEL]  # int8's.
        assert sorted(v.op.name for v in tf.global_variables() if '_quant/' in v.op.name) == [
            f'{layer}/{kind}_quant/{end}' for layer in ('conv', 'logits')
            for kind in ('act', 'weights') for end in ('max', 'min')]  # Read: no counts.


def test_the_rewrites_refuse_a_graph_with_gradients_applied_or_quantized_already():
    with tf.Graph().as_default():
        loss = tf.reduce_sum(_conv_net(tf.constant(_images())))
        tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with pytest.raises(ValueError) as excinfo:
            quantize.create_training_graph()
    assert error_message(excinfo).startswith(
        'the training rewrite must come before the gradients, but the graph holds the '
        'optimizer update ')
    with tf.Graph().as_default():
        _conv_net(tf.constant(_images()))
        quantize.create_training_graph()
        with pytest.raises(ValueError) as excinfo:
            quantize.create_eval_graph()
    assert error_message(excinfo).startswith('the graph is quantized already (it holds ')
    with tf.Graph().as_default(), pytest.raises(ValueError) as excinfo:
        quantize.create_training_graph(quant_delay=-5)
    assert error_message(excinfo) == ('quant_delay must be None or an integer >= 0 (a global '
                                      'step), got -5')
    with tf.Graph().as_default(), pytest.raises(ValueError) as excinfo:
        quantize.experimental_create_eval_graph(weight_bits=1)
    assert error_message(excinfo) == 'weight_bits must be an integer in [2, 16], got 1'


def _python(code, **env):
    """Runs `code` in a fresh interpreter of this environment (slim-deploy installed) from an
    empty directory; returns its stdout (the test fails, with stderr, if it exits non-zero)."""
    result = subprocess.run([sys.executable, '-c', textwrap.dedent(code)], cwd='/',
                            env={**ENV, 'TF_CPP_MIN_LOG_LEVEL': '3', **env},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_slims_contrib_import_gives_this_quantize_and_nothing_else_of_contrib():
    out = _python('''
        from tensorflow.contrib import quantize
        import tensorflow.contrib.quantize
        import slim_deploy.deployment.quantize as ours
        print(quantize is ours is tensorflow.contrib.quantize, callable(
              quantize.create_training_graph), callable(quantize.create_eval_graph))
        try:
            from tensorflow.contrib import training
        except ImportError as e:
            print(type(e).__name__)
        try:
            import tensorflow.contrib.slim
        except ImportError as e:
            print(type(e).__name__)
        ''')
    assert out.splitlines() == ['True True True', 'ImportError', 'ModuleNotFoundError']


def test_a_real_tensorflow_contrib_is_never_shadowed(tmp_path):
    """TensorFlow 1's contrib, stood in for by a package of that name first on the path."""
    contrib = tmp_path / 'tensorflow' / 'contrib'
    contrib.mkdir(parents=True)
    (tmp_path / 'tensorflow' / '__init__.py').write_text('')
    (contrib / '__init__.py').write_text('WHOSE = "tf1"\n')
    (contrib / 'quantize.py').write_text('WHOSE = "tf1"\n')
    out = _python('''
        import tensorflow.contrib
        from tensorflow.contrib import quantize
        print(tensorflow.contrib.WHOSE, quantize.WHOSE)
        ''', PYTHONPATH=str(tmp_path))
    assert out == 'tf1 tf1\n'


# deploy(quantize_delay=N) trains lenet on the embedded digits.

QUANTIZE_DELAY = 35
STEPS = 70


def _lenet_model_fn(digits_dir, config):
    """deploy()'s model_fn: lenet on batches of 16 of this worker's share of the digits'
    training split (shuffled with seed 0)."""
    split = dataset_factory.get_dataset_split('digits', 'train', digits_dir)
    with tf.device(config.inputs_device()):
        iterator = tf.data.make_one_shot_iterator(pipeline.training_batches(
            split, preprocessing_factory.get_preprocessing('lenet', is_training=True), 28, 16,
            replica_id=config.replica_id, num_replicas=config.num_replicas, seed=0))
    return builders.classification_model_fn(
        nets_factory.get_network_fn('lenet', 10, is_training=True), iterator,
        config.inputs_device(), 10, 0.0)


def _deploy_lenet(digits_dir, **config):
    """lenet deployed with QAT from step QUANTIZE_DELAY, its graph seeded; returns its
    train_op."""
    tf.set_random_seed(0)
    config = model_deploy.DeploymentConfig(quantize_delay=QUANTIZE_DELAY, **config)
    return model_deploy.deploy(config, _lenet_model_fn(digits_dir, config),
                               optimizer=tf.train.MomentumOptimizer(0.01, 0.9)).train_op


def _quantized_accuracy(digits_dir, checkpoint):
    """Accuracy on the digits' test split of lenet in eval mode, rewritten by
    create_eval_graph, restored from `checkpoint`."""
    split = dataset_factory.get_dataset_split('digits', 'test', digits_dir)
    with tf.Graph().as_default():
        images, labels, _ = tf.data.make_one_shot_iterator(pipeline.evaluation_batches(
            split, preprocessing_factory.get_preprocessing('lenet', is_training=False), 28,
            split.num_samples)).get_next()
        logits, _ = nets_factory.get_network_fn('lenet', 10, is_training=False)(images)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
        quantize.create_eval_graph(per_channel_wt=quantize.checkpoint_per_channel_wt(checkpoint))
        with tf.Session() as session:
            tf.train.Saver().restore(session, checkpoint)
            return session.run(accuracy)


def _assert_trained_quantized(session, digits_dir, checkpoint):
    """The ranges of lenet's 4 layers were learned (its weights' per channel, as deploy()
    quantizes them) and its quantized evaluation scores."""
    ranges = {name: session.run(pair) for name, pair in _ranges().items()}
    assert sorted(ranges) == [f'LeNet/{name}_quant' for name in (
        'conv1/act', 'conv2/act', 'dropout3/dropout/mul', 'fc3/act', 'fc4/act')]
    assert all(list(pair) != [0.0, 6.0] for pair in ranges.values())
    for low, high in session.run(list(_ranges(weights=True).values())):
        assert np.all(high > 0) and np.all(high < 6) and np.array_equal(low, -high)
    assert quantize.checkpoint_per_channel_wt(checkpoint) is True
    assert _quantized_accuracy(digits_dir, checkpoint) > 0.85  # Seeded: 0.93 to 0.96.


@pytest.mark.slow
@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_deploy_trains_lenet_quantization_aware(digits_dir, tmp_path, variable_update):
    with tf.Graph().as_default():
        train_op = _deploy_lenet(digits_dir, num_clones=2, clone_devices=DEVICES,
                                 variable_update=variable_update)
        with tf.Session(config=loop.session_config(num_cpu_devices=2)) as session:
            session.run(tf.global_variables_initializer())
            session.run(tf.local_variables_initializer())
            losses = [session.run(train_op) for _ in range(STEPS)]
            checkpoint = tf.train.Saver().save(session, str(tmp_path / 'model'))
            assert np.mean(losses[-10:]) < np.mean(losses[:10]) / 3
            _assert_trained_quantized(session, digits_dir, checkpoint)


@pytest.mark.cluster
def test_collective_workers_train_lenet_quantization_aware(digits_dir, tmp_path):
    """2 workers in threads of this process, each with a gRPC server on 127.0.0.1."""
    addresses = [f'{launch.LOCALHOST}:{port}' for port in launch.free_ports(launch.LOCALHOST, 2)]
    cluster = [tasks.ClusterTask({'worker': addresses}, 'worker', w) for w in range(2)]
    servers = [task.start_server(loop.session_config(
        num_cpu_devices=1, collective_leader=task.collective_leader)) for task in cluster]

    def train(worker):
        with tf.Graph().as_default():
            train_op = _deploy_lenet(digits_dir, variable_update='collective', num_replicas=2,
                                     replica_id=worker, task_timeout_secs=120)
            config = loop.session_config(device_filters=cluster[worker].device_filters(),
                                         collective_leader=cluster[worker].collective_leader)
            with tf.Session(servers[worker].target, config=config) as session:
                session.run(tf.global_variables_initializer())
                session.run(tf.get_collection(tf.GraphKeys.LOCAL_INIT_OP))  # The broadcast.
                for _ in range(STEPS):
                    session.run(train_op)
                checkpoint = tf.train.Saver().save(session, str(tmp_path / f'worker{worker}'))
                if worker == 0:
                    _assert_trained_quantized(session, digits_dir, checkpoint)
                return {v.op.name: session.run(v) for v in tf.trainable_variables()}

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        chief, other = pool.map(train, range(2))
    for name, value in chief.items():  # All-reduced updates: the workers train one model.
        np.testing.assert_allclose(other[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
