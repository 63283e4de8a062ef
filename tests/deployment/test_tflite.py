"""TensorFlow Lite models: export_inference_graph --tflite_file writes float, float16,
dynamic-range and int8 models of lenet trained on the digits (post-training quantization
calibrated on the training split, or the ranges of quantization-aware training with
per-channel weights), TensorFlow's interpreter runs them, and eval_image_classifier
--tflite_file scores them on the test split within the issue's targets of the float
checkpoint; lenet trained with tf.contrib.quantize's rewrite by a TF 1 client, frozen and
converted to uint8 as slim's, DeepLab's and the Object Detection API's recipes do, scores
within a point of float; the flags' mistakes are one line."""
import os
import re

import numpy as np
import pytest
import tensorflow.compat.v1 as tf
from tensorflow.python.tools import freeze_graph
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory, pipeline
from slim_deploy.deployment import quantize, tflite
from slim_deploy.image_classifier import evaluate, export, run_record, train
from slim_deploy.image_classifier.config import EvalConfig, ExportConfig, TrainConfig
from slim_deploy.nets import nets_factory
from slim_deploy.preprocessing import preprocessing_factory

from helpers import error_message, run_script

# Accuracy points on the digits' test split (360 examples, one is 0.28 points) that
# post-training and quantization-aware int8 models may lose to the float checkpoint: 1.5
# each here, since the QAT fine-tune's unseeded shuffle moves its accuracy by an example or
# two; benchmarks/quantization.py measures QAT against its 0.5-point target. An int8 model
# and the quantized checkpoint it comes from compute the same: within one example.
PTQ_POINTS = QAT_POINTS = 1.5
SAME_POINTS = 100 / 360
STEPS = 300
UINT8_POINTS = 1.0  # What a uint8 model of contrib's rewrite may lose to the float checkpoint.
QAT_STEPS = 100  # Of the quantization-aware fine-tunes of the float run.


def train_run(train_dir, digits_dir, **flags):
    """Trains lenet on the digits for STEPS steps in-process; returns train_dir (a str)."""
    train.train(TrainConfig.from_flags({
        'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'max_number_of_steps': STEPS,
        'log_every_n_steps': STEPS, **flags}))
    return str(train_dir)


def export_tflite(train_dir, path, **flags):
    """export_inference_graph --checkpoint_path=train_dir --tflite_file=path, in-process;
    returns the model's bytes."""
    written = export.export(run_record.export_config(train_dir, tflite_file=str(path), **flags))
    assert written == {'tflite_file': str(path)}
    with open(path, 'rb') as f:
        return f.read()


def score(train_dir, eval_dir, **flags):
    """eval_image_classifier --checkpoint_path=train_dir, in-process: the metrics."""
    return evaluate.evaluate(run_record.eval_config(train_dir, eval_dir=str(eval_dir), **flags))


@pytest.fixture(scope='module')
def float_run(digits_dir, tmp_path_factory):
    """(train_dir, metrics of its checkpoint on the test split) of lenet trained in float."""
    # Seeded: 1 of 163 unseeded runs of a like setup (lenet, RMSProp at 0.01, 300 steps)
    # collapsed to predicting one class, where int8's rounding could cost more points.
    train_dir = train_run(tmp_path_factory.mktemp('float'), digits_dir, seed=1)
    return train_dir, score(train_dir, tmp_path_factory.mktemp('float_eval'))


# --- fast: the configs and the interpreter's wrapper -------------------------------------

@pytest.mark.parametrize('config_class, values, message', [
    (TrainConfig, {'quantize_delay': -2}, '--quantize_delay must be an integer'
     ' in [-1, 9223372036854775807], got -2'),
    (TrainConfig, {'quantize_delay': 0, 'sync_batch_norm': True},
     '--quantize_delay=0 cannot go with --sync_batch_norm: the quantization rewrite folds '
     "each clone's batch norm into its weights with the statistics of its own batch"),
    (ExportConfig, {'tflite_file': 'm.tflite'},
     '--tflite_file needs --checkpoint_path (the values to export)'),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c',
                    'tflite_quantization': 'int4'},
     "unknown --tflite_quantization 'int4'; valid: dynamic, float, float16, int8"),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c',
                    'tflite_io_type': 'int16'},
     "unknown --tflite_io_type 'int16'; valid: float32, int8, uint8"),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c',
                    'tflite_quantization': 'dynamic', 'tflite_io_type': 'uint8'},
     '--tflite_io_type=uint8 needs --tflite_quantization=int8 (a dynamic model takes and '
     'gives float32)'),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c', 'tflite_io_type': 'int8'},
     '--tflite_io_type=int8 needs --tflite_quantization=int8 (a float model takes and gives '
     'float32)'),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c', 'quantize': True,
                    'tflite_quantization': 'float16'},
     '--tflite_quantization=float16 cannot convert the quantized graph of --quantize, whose '
     'ranges make an int8 model: pass --tflite_quantization=int8, or --noquantize'),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c', 'is_training': True},
     '--tflite_file converts the evaluation graph: drop --is_training'),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c',
                    'representative_steps': 0},
     '--representative_steps must be an integer in [1, 2147483647], got 0'),
    (ExportConfig, {'tflite_file': 'm.tflite', 'checkpoint_path': 'c',
                    'dataset_split_name': 'validation'},
     "unknown --dataset_split_name 'validation'; valid: train, test"),
    (EvalConfig, {'tflite_file': 'm.tflite', 'eval_interval_secs': 5.0},
     '--eval_interval_secs evaluates new checkpoints as they appear; --tflite_file scores one '
     'file: pass one of them'),
])
def test_bad_quantization_settings_name_their_flags(config_class, values, message):
    with pytest.raises(UsageError) as raised:
        config_class.from_flags(values)
    assert error_message(raised) == message


def test_a_quantization_aware_run_is_evaluated_and_exported_quantized(tmp_path):
    float_dir, qat_dir = tmp_path / 'float', tmp_path / 'qat'
    for train_dir, delay in ((float_dir, -1), (qat_dir, 0)):
        train_dir.mkdir()
        run_record.write(TrainConfig.from_flags({'train_dir': str(train_dir),
                                                 'quantize_delay': delay}), placement=[])
    assert run_record.eval_config(str(qat_dir), eval_dir='e').quantize
    assert not run_record.eval_config(str(float_dir), eval_dir='e').quantize
    assert not run_record.eval_config(str(qat_dir), eval_dir='e', quantize=False).quantize
    qat_export = run_record.export_config(str(qat_dir), tflite_file='m.tflite')
    assert qat_export.quantize and qat_export.tflite_model_quantization == 'int8'
    float_export = run_record.export_config(str(float_dir), tflite_file='m.tflite')
    assert not float_export.quantize and float_export.tflite_model_quantization == 'float'
    # Post-training quantization of a quantization-aware run's float graph.
    assert run_record.export_config(str(qat_dir), tflite_file='m.tflite', quantize=False,
                                    tflite_quantization='int8').tflite_model_quantization == 'int8'
    # A cluster's evaluator task evaluates the run as evaluation pointed at it does.
    evaluator = evaluate.evaluator_config(TrainConfig.from_flags({'train_dir': str(qat_dir),
                                                                  'quantize_delay': 0}))
    assert evaluator.quantize


def small_model(quantization='float', io_type='float32', batch_size=None):
    """A converted graph: x [batch_size, 4] -> 'y' = x @ W + b (3 units), with W and b; int8's
    calibration examples of x are uniform in [-1, 1]."""
    rng = np.random.RandomState(0)
    weights, bias = rng.normal(size=[4, 3]).astype(np.float32), np.float32([0.5, -0.5, 1.0])
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [batch_size, 4], name='x')
        y = tf.identity(tf.matmul(x, tf.Variable(weights)) + tf.Variable(bias), name='y')
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            model = tflite.convert(
                sess, [x], [y], quantization, io_type,
                (lambda: ([rng.uniform(-1, 1, [1, 4]).astype(np.float32)] for _ in range(50)))
                if quantization == 'int8' else None)
    return model, weights, bias


@pytest.mark.parametrize('quantization, io_type, batch_size, tolerance', [
    ('float', 'float32', None, 1e-6), ('float16', 'float32', None, 1e-2),
    ('dynamic', 'float32', None, 5e-2), ('int8', 'float32', None, 5e-2),
    ('int8', 'int8', None, 5e-2), ('int8', 'uint8', 2, 5e-2)])
def test_a_model_runs_on_float_arrays_whatever_its_types(quantization, io_type, batch_size,
                                                         tolerance):
    model_bytes, weights, bias = small_model(quantization, io_type, batch_size)
    model = tflite.Model(model_bytes)
    assert model.input_shape == (batch_size, 4)
    assert model.output_shapes == {'y': (batch_size, 3)}
    assert model.input_type == {'float32': np.float32, 'int8': np.int8, 'uint8': np.uint8}[
        io_type]
    # Five rows: a model of a fixed batch of 2 runs them in three parts, the last padded.
    x = np.random.RandomState(1).uniform(-1, 1, [5, 4]).astype(np.float32)
    y = model(x)['y']
    assert y.dtype == np.float32 and y.shape == (5, 3)
    np.testing.assert_allclose(y, x @ weights + bias, atol=tolerance * np.abs(weights).sum())


def test_fake_quantization_ranges_are_the_models_and_the_input_range_the_datas():
    rng = np.random.RandomState(0)
    weights = rng.normal(size=[4, 3]).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 4], name='x')
        variable = tf.Variable(weights)
        limit = tf.reduce_max(tf.abs(variable))  # Computed, as the training rewrite's are.
        quantized_weights = tf.quantization.fake_quant_with_min_max_vars(
            variable, -limit, limit, narrow_range=True)
        y = tf.quantization.fake_quant_with_min_max_vars(tf.matmul(x, quantized_weights),
                                                         -4.0, 4.0, name='y')
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            model_bytes = tflite.convert(
                sess, [x], [y], 'int8', 'int8',
                lambda: ([rng.uniform(-2, 1, [1, 4]).astype(np.float32)] for _ in range(50)))
            inputs = rng.uniform(-2, 1, [6, 4]).astype(np.float32)
            expected = sess.run(y, {x: inputs})
    interpreter = tf.lite.Interpreter(model_content=model_bytes)
    (input_detail,), (output_detail,) = (interpreter.get_input_details(),
                                         interpreter.get_output_details())
    assert (input_detail['name'], output_detail['name']) == ('x', 'y')
    # The output's range is the fake quantization's [-4, 4]; the input's is the data's.
    assert output_detail['quantization'][0] == pytest.approx(8 / 255, rel=1e-3)
    input_scale, input_zero_point = input_detail['quantization']
    assert (-128 - input_zero_point) * input_scale == pytest.approx(-2, abs=2 * input_scale)
    assert (127 - input_zero_point) * input_scale == pytest.approx(1, abs=2 * input_scale)
    np.testing.assert_allclose(tflite.Model(model_bytes)(inputs)['y'], expected,
                               atol=3 * (8 / 255 + input_scale * np.abs(weights).sum()))


@pytest.mark.parametrize('symmetric', [True, False])
def test_int8_conversion_refuses_asymmetric_weights_in_one_line(symmetric):
    """tf.contrib.quantize's weights ([min(w, 0), max(w, 0)]): TensorFlow Lite's int8
    FULLY_CONNECTED would misread them (its CONV_2D refuses them when it runs)."""
    weights = np.random.RandomState(0).uniform(-0.5, 1.0, [4, 3]).astype(np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 4], name='x')
        low, high = (-1.0, 1.0) if symmetric else (float(weights.min()), float(weights.max()))
        quantized = tf.quantization.fake_quant_with_min_max_vars(
            tf.Variable(weights), low, high, narrow_range=True)
        y = tf.quantization.fake_quant_with_min_max_vars(tf.matmul(x, quantized), -4.0, 4.0,
                                                         name='y')
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            convert = lambda: tflite.convert(  # noqa: E731
                sess, [x], [y], 'int8', 'float32',
                lambda: ([np.ones([1, 4], np.float32)] for _ in range(2)))
            if symmetric:
                assert tflite.Model(convert())(np.ones([1, 4], np.float32))['y'].shape == (1, 3)
                return
            with pytest.raises(UsageError) as raised:
                convert()
    assert error_message(raised).startswith(
        '--tflite_quantization=int8 needs weights quantized symmetric around 0, but the weights '
        "of 1 of its layers are asymmetric (the first: 'MatMul;FakeQuantWithMinMaxVars'), as "
        "tf.contrib.quantize's rewrite quantizes them")
    assert error_message(raised).endswith("or convert to uint8 as TF 1 did "
                                          '(inference_type=tf.uint8)')


def test_an_integer_model_quantizes_its_float_inputs_with_its_scale_and_zero_point():
    model = tflite.Model(small_model('int8', 'int8')[0])
    # The input's range is calibrated on [-1, 1]: far outside it, inputs saturate.
    inside = model(np.full([1, 4], 0.5, np.float32))['y']
    saturated = model(np.full([1, 4], 50.0, np.float32))['y']
    np.testing.assert_allclose(saturated, model(np.full([1, 4], 1.0, np.float32))['y'])
    assert not np.allclose(inside, saturated)


# --- slow: lenet on the digits ------------------------------------------------------------

@pytest.mark.slow
def test_float_and_post_training_quantized_models_score_within_the_targets(float_run,
                                                                           tmp_path):
    train_dir, float_metrics = float_run
    expected = {  # quantization, io type: (input type, size / float's, accuracy points)
        ('float', 'float32'): (np.float32, (0.99, 1.01), 0.3),
        ('float16', 'float32'): (np.float32, (0.45, 0.55), 0.3),
        ('dynamic', 'float32'): (np.float32, (0.2, 0.3), PTQ_POINTS),
        ('int8', 'float32'): (np.float32, (0.2, 0.3), PTQ_POINTS),
        ('int8', 'int8'): (np.int8, (0.2, 0.3), PTQ_POINTS),
        ('int8', 'uint8'): (np.uint8, (0.2, 0.3), PTQ_POINTS),
    }
    sizes = {}
    for (quantization, io_type), (input_type, size_ratio, points) in expected.items():
        path = tmp_path / f'{quantization}_{io_type}.tflite'
        model = tflite.Model(export_tflite(train_dir, path, tflite_quantization=quantization,
                                           tflite_io_type=io_type))
        assert model.input_type == input_type
        assert model.input_shape == (None, 28, 28, 1)
        assert model.output_shapes == {'logits': (None, 10), 'probabilities': (None, 10)}
        sizes[quantization] = os.path.getsize(path)
        assert size_ratio[0] <= sizes[quantization] / sizes['float'] <= size_ratio[1]
        metrics = score(train_dir, tmp_path / 'eval', tflite_file=str(path))
        assert metrics['num_examples'] == float_metrics['num_examples'] == 360
        assert metrics['global_step'] is None
        lost = (float_metrics['accuracy'] - metrics['accuracy']) * 100
        # Float weights and activations (float, float16) compute as the checkpoint does.
        assert (lost if quantization in ('dynamic', 'int8') else abs(lost)) <= points, (
            quantization, io_type, metrics, float_metrics)
    assert sizes['int8'] < sizes['float16'] < sizes['float']


@pytest.mark.slow
def test_the_float_model_computes_the_checkpoints_logits(float_run, tmp_path):
    train_dir, _ = float_run
    model = tflite.Model(export_tflite(train_dir, tmp_path / 'float.tflite'))
    images = np.random.RandomState(0).uniform(-1, 1, [3, 28, 28, 1]).astype(np.float32)
    with tf.Graph().as_default():
        logits, _ = nets_factory.get_network_fn('lenet', 10)(tf.constant(images))
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, tf.train.latest_checkpoint(train_dir))
            expected = sess.run(logits)
    outputs = model(images)
    np.testing.assert_allclose(outputs['logits'], expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(outputs['probabilities'].sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.slow
def test_post_training_quantization_without_its_split_is_one_line_naming_the_flag(
        float_run, tmp_path):
    train_dir, _ = float_run
    path = tmp_path / 'int8.tflite'
    # MNIST has lenet's shape (10 gray classes), but no files here.
    result = run_script('export_inference_graph.py', f'--checkpoint_path={train_dir}',
                        f'--tflite_file={path}', '--tflite_quantization=int8',
                        '--dataset_name=mnist', f'--dataset_dir={tmp_path}')
    assert (result.returncode, result.stdout) == (2, '')
    assert result.stderr == (
        "export_inference_graph.py: error: --tflite_quantization=int8 calibrates its ranges "
        "(post-training quantization) on examples of split 'train': --dataset_dir "
        f"'{tmp_path}' holds no files matching 'mnist_train.tfrecord' for dataset 'mnist' "
        "split 'train' (create them with download_and_convert_data.py)\n")
    with pytest.raises(UsageError) as raised:
        export.export(ExportConfig.from_flags({
            'checkpoint_path': train_dir, 'tflite_file': str(path), 'dataset_name': 'mnist',
            'tflite_quantization': 'int8'}))
    assert error_message(raised).startswith(
        "--tflite_quantization=int8 calibrates its ranges (post-training quantization) on "
        "examples of split 'train': --dataset_dir is required for dataset 'mnist'")
    assert not os.listdir(tmp_path)


@pytest.mark.slow
def test_a_file_that_is_no_model_for_the_split_is_one_line_naming_the_flag(
        float_run, digits_dir, tmp_path):
    train_dir, _ = float_run
    path = tmp_path / 'float.tflite'
    export_tflite(train_dir, path)
    not_a_model = tmp_path / 'notes.tflite'
    not_a_model.write_text('not a model')

    def mistake(**flags):
        with pytest.raises(UsageError) as raised:
            evaluate.evaluate(EvalConfig.from_flags({'eval_dir': str(tmp_path / 'eval'),
                                                     'dataset_dir': digits_dir, **flags}))
        return error_message(raised)

    assert mistake(tflite_file=str(not_a_model)).startswith(
        f"--tflite_file '{not_a_model}' is not a readable TensorFlow Lite model of one input")
    assert mistake(tflite_file=str(path), eval_image_size=32) == (
        f"--tflite_file '{path}' takes 28x28x1 images, but --eval_image_size=32 and "
        '--dataset_name=digits give 32x32x1')
    assert mistake(tflite_file=str(path), labels_offset=1) == (
        f"--tflite_file '{path}' gives logits of shape [None, 10], not the 9 classes of "
        '--dataset_name=digits (--labels_offset=1)')


@pytest.mark.slow
def test_quantized_evaluation_of_a_float_checkpoint_is_one_line_naming_the_flag(float_run,
                                                                                tmp_path):
    train_dir, _ = float_run
    with pytest.raises(UsageError) as raised:
        score(train_dir, tmp_path, quantize=True)
    assert error_message(raised) == (
        '--quantize needs the ranges of quantization-aware training, which checkpoint '
        f'{train_dir}/model.ckpt-{STEPS} lacks: train with --quantize_delay, or pass '
        '--noquantize')


@pytest.fixture(scope='module')
def qat_run(float_run, digits_dir, tmp_path_factory):
    """train_dir of lenet fine-tuned quantization-aware from float_run's checkpoint for
    QAT_STEPS steps (--quantize_delay=0: slim's MobileNet recipe for a trained float model;
    weights per channel, for int8)."""
    return train_run(tmp_path_factory.mktemp('qat'), digits_dir, checkpoint_path=float_run[0],
                     quantize_delay=0, max_number_of_steps=QAT_STEPS, learning_rate=0.001)


@pytest.mark.slow
def test_a_quantization_aware_run_exports_an_int8_model_with_its_ranges(float_run, qat_run,
                                                                        tmp_path):
    _, float_metrics = float_run
    quantized = score(qat_run, tmp_path / 'checkpoint')  # --quantize: the run's default.
    path = tmp_path / 'qat.tflite'
    model_bytes = export_tflite(qat_run, path, tflite_io_type='int8')
    interpreter = tf.lite.Interpreter(model_content=model_bytes)
    tensors = {detail['name']: detail for detail in interpreter.get_tensor_details()}
    assert {detail['dtype'] for detail in tensors.values()} == {np.int8, np.int32}
    assert [detail['name'] for detail in interpreter.get_input_details()] == ['input']
    # The activations' ranges are those training learned (the fake quantization's).
    ranges = tf.train.load_checkpoint(qat_run)
    (conv1,) = [detail for name, detail in tensors.items()
                if name.startswith('LeNet/conv1/Relu') and detail['dtype'] == np.int8]
    low, high = (ranges.get_tensor(f'LeNet/conv1/act_quant/{end}') for end in ('min', 'max'))
    assert conv1['quantization'][0] == pytest.approx((high - low) / 255, rel=1e-4)
    # The convolutions' weights are quantized per output channel, symmetric.
    conv_weights = [detail for detail in tensors.values()
                    if len(detail['quantization_parameters']['scales']) > 1]
    assert sorted(len(detail['quantization_parameters']['scales'])
                  for detail in conv_weights) == [32, 32, 64, 64]  # weights and their biases
    assert all(not detail['quantization_parameters']['zero_points'].any()
               for detail in conv_weights)
    metrics = score(qat_run, tmp_path / 'tflite', tflite_file=str(path))
    assert metrics['num_examples'] == 360
    assert (float_metrics['accuracy'] - metrics['accuracy']) * 100 <= QAT_POINTS, (
        metrics, float_metrics)
    # TensorFlow Lite's integer kernels compute what the quantized checkpoint does.
    assert abs(metrics['accuracy'] - quantized['accuracy']) * 100 <= SAME_POINTS + 1e-9, (
        metrics, quantized)


@pytest.mark.slow
def test_the_mobile_route_through_the_entry_scripts(qat_run, tmp_path):
    path = tmp_path / 'lenet_int8.tflite'
    exported = run_script('export_inference_graph.py', f'--checkpoint_path={qat_run}',
                          f'--tflite_file={path}', '--tflite_io_type=uint8')
    assert exported.returncode == 0, exported.stderr[-3000:]
    (line,) = exported.stderr.splitlines()
    assert line.endswith(
        f'Wrote a TensorFlow Lite model of {qat_run}/model.ckpt-100 (int8 with the ranges of '
        "quantization-aware training, the input's calibrated on 100 examples, uint8 input and "
        f'output, {os.path.getsize(path)} bytes) to {path}')
    evaluated = run_script('eval_image_classifier.py', f'--checkpoint_path={qat_run}',
                           f'--tflite_file={path}', f'--eval_dir={tmp_path / "eval"}')
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert (evaluated.stderr, evaluated.stdout.split()[::2]) == (
        '', ['accuracy', 'recall@5', 'examples'])
    assert evaluated.stdout.split()[5] == '360'


# --- slow: tf.contrib.quantize's rewrite, converted to uint8 as TF 1 clients convert ---------

@pytest.fixture(scope='module')
def contrib_run(float_run, digits_dir, tmp_path_factory):
    """The checkpoint of lenet fine-tuned from float_run's for QAT_STEPS steps as slim's
    train_image_classifier.py trained it under TF 1 with --quantize_delay=0: one
    model_deploy clone, `tensorflow.contrib.quantize`'s training rewrite between
    create_clones and optimize_clones, RMSProp (slim's, at learning rate 0.001), the model's
    variables restored from the float checkpoint (the ranges start afresh)."""
    from deployment import model_deploy
    from tensorflow.contrib import quantize as contrib_quantize
    train_dir = tmp_path_factory.mktemp('contrib')
    split = dataset_factory.get_dataset_split('digits', 'train', digits_dir)
    with tf.Graph().as_default():
        config = model_deploy.DeploymentConfig(clone_on_cpu=True)
        with tf.device(config.variables_device()):
            global_step = tf.train.create_global_step()
        with tf.device(config.inputs_device()):
            images, labels = tf.data.make_one_shot_iterator(pipeline.training_batches(
                split, preprocessing_factory.get_preprocessing('lenet', is_training=True), 28,
                32, seed=0)).get_next()
        network_fn = nets_factory.get_network_fn('lenet', 10, weight_decay=4e-5,
                                                 is_training=True)

        def clone_fn():
            logits, _ = network_fn(images)
            tf.losses.softmax_cross_entropy(tf.one_hot(labels, 10), logits)

        clones = model_deploy.create_clones(config, clone_fn)
        contrib_quantize.create_training_graph(quant_delay=0)
        optimizer = tf.train.RMSPropOptimizer(0.001, decay=0.9, momentum=0.9, epsilon=1.0)
        total_loss, gradients = model_deploy.optimize_clones(clones, optimizer)
        with tf.control_dependencies([optimizer.apply_gradients(gradients, global_step)]):
            train_op = tf.identity(total_loss)
        restore = slim.assign_from_checkpoint_fn(tf.train.latest_checkpoint(float_run[0]),
                                                 slim.get_model_variables())
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            restore(sess)
            for _ in range(QAT_STEPS):
                sess.run(train_op)
            return tf.train.Saver().save(sess, str(train_dir / 'model.ckpt'), global_step)


def _lenet_eval_graph():
    """lenet behind a float32 [1, 28, 28, 1] placeholder 'input', its logits named 'logits',
    rewritten by `tensorflow.contrib.quantize`'s create_eval_graph; returns (input, logits)."""
    from tensorflow.contrib import quantize as contrib_quantize
    image = tf.placeholder(tf.float32, [1, 28, 28, 1], name='input')
    logits = tf.identity(nets_factory.get_network_fn('lenet', 10)(image)[0], name='logits')
    contrib_quantize.create_eval_graph()
    return image, logits


def _to_uint8(converter):
    """The model TF 1's `converter` makes as contrib-era clients set it for lenet's input,
    (pixel - 128) / 128: uint8 inference, quantized_input_stats (128, 128)."""
    converter.inference_type = tf.uint8
    converter.quantized_input_stats = {'input': (128.0, 128.0)}
    return converter.convert()


def _uint8_as_slim(checkpoint, directory):
    """slim's recipe: export_inference_graph --quantize --output_file (no checkpoint:
    tf.contrib.quantize's rewrite), freeze_graph with the checkpoint, the converter on the
    frozen GraphDef."""
    graph, frozen = str(directory / 'lenet_graph.pb'), str(directory / 'slim_frozen.pb')
    export.export(ExportConfig.from_flags({'quantize': True, 'output_file': graph,
                                           'batch_size': 1}))
    freeze_graph.freeze_graph(
        input_graph=graph, input_saver='', input_binary=True, input_checkpoint=checkpoint,
        output_node_names='logits', restore_op_name='', filename_tensor_name='',
        output_graph=frozen, clear_devices=True, initializer_nodes='')
    return _to_uint8(tf.lite.TFLiteConverter.from_frozen_graph(frozen, ['input'], ['logits']))


def _uint8_as_deeplab(checkpoint, directory):
    """DeepLab's recipe: export_model.py's eval graph frozen with freeze_graph_with_def_protos
    and a Saver of its variables, convert_to_tflite.py's converter on the frozen GraphDef."""
    frozen = str(directory / 'deeplab_frozen.pb')
    with tf.Graph().as_default() as graph:
        _lenet_eval_graph()
        saver = tf.train.Saver(tf.global_variables())
        freeze_graph.freeze_graph_with_def_protos(
            graph.as_graph_def(add_shapes=True), saver.as_saver_def(), checkpoint, 'logits',
            restore_op_name=None, filename_tensor_name=None, output_graph=frozen,
            clear_devices=True, initializer_nodes=None)
    return _to_uint8(tf.lite.TFLiteConverter.from_frozen_graph(frozen, ['input'], ['logits']))


def _uint8_from_session(checkpoint, directory):
    """The converter on a session holding the eval graph and the checkpoint's values."""
    del directory
    with tf.Graph().as_default():
        image, logits = _lenet_eval_graph()
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, checkpoint)
            return _to_uint8(tf.lite.TFLiteConverter.from_session(sess, [image], [logits]))


@pytest.mark.slow
def test_contribs_rewrite_converts_to_uint8_models_as_tf1_clients_convert(
        float_run, contrib_run, digits_dir, tmp_path):
    float_dir, float_metrics = float_run
    assert quantize.checkpoint_per_channel_wt(contrib_run) is False
    # Evaluation builds the rewrite the checkpoint holds, per tensor.
    quantized = score(contrib_run, tmp_path / 'checkpoint', quantize=True,
                      dataset_dir=digits_dir)
    for convert in (_uint8_as_slim, _uint8_as_deeplab, _uint8_from_session):
        path = tmp_path / f'{convert.__name__}.tflite'
        path.write_bytes(convert(contrib_run, tmp_path))
        interpreter = tf.lite.Interpreter(model_path=str(path))
        interpreter.allocate_tensors()  # Per-channel weights would fail here.
        details = interpreter.get_tensor_details()
        assert {detail['dtype'] for detail in details} == {np.uint8, np.int32}
        assert all(len(detail['quantization_parameters']['scales']) <= 1
                   for detail in details)
        metrics = score(float_dir, tmp_path / 'eval', tflite_file=str(path))
        assert metrics['num_examples'] == 360
        assert (float_metrics['accuracy'] - metrics['accuracy']) * 100 <= UINT8_POINTS, (
            convert.__name__, metrics, float_metrics)
        assert abs(metrics['accuracy'] - quantized['accuracy']) * 100 <= SAME_POINTS + 1e-9, (
            convert.__name__, metrics, quantized)


@pytest.mark.slow
def test_an_int8_model_of_contribs_rewrite_is_one_line_naming_the_flag(contrib_run,
                                                                       digits_dir, tmp_path):
    path = tmp_path / 'int8.tflite'
    with pytest.raises(UsageError) as raised:
        export.export(ExportConfig.from_flags({
            'checkpoint_path': contrib_run, 'quantize': True, 'tflite_file': str(path),
            'dataset_dir': digits_dir}))
    # How many of lenet's 4 layers: those whose trained weights' range does not happen to
    # quantize with a zero point of 0.
    assert re.match(r'--tflite_quantization=int8 needs weights quantized symmetric around 0, '
                    r'but the weights of [1-4] of its layers are asymmetric',
                    error_message(raised))
    assert not path.exists()
