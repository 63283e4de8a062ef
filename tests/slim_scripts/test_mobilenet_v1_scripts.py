"""slim's mobile-path scripts, nets.mobilenet_v1_train, nets.mobilenet_v1_eval and
nets.post_training_quantization: their names and flags (the three import together, each
alone keeps slim's defaults), their functions in-process, and each run as a user runs it
(`python -m nets.X`) on the embedded digits at 32 pixels and width 0.25: float training,
quantization-aware fine-tuning from it (tf.contrib.quantize's rewrite, weights per tensor),
the evaluation of that checkpoint as the quantized model, the uint8 TensorFlow Lite model
slim's mobilenet_v1.md converts from it (export_inference_graph --quantize, freeze_graph,
tflite_convert) computing as it, and an int8 TensorFlow Lite model of the float checkpoint
that the interpreter runs."""
import importlib
import json
import logging
import os
import re
import sys

from absl import flags
from absl.testing import flagsaver
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy import aliases
from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import quantize
from slim_deploy.nets import nets_factory

from helpers import checkpoint_step, error_message, run, run_script

FLAGS = flags.FLAGS
TRAIN, EVAL, PTQ = ('nets.mobilenet_v1_train', 'nets.mobilenet_v1_eval',
                    'nets.post_training_quantization')
# Each module's public names, and its flags {name: (absl's type, slim's default)}.
MODULES = {
    TRAIN: (['flags', 'get_learning_rate', 'get_quant_delay', 'imagenet_input', 'build_model',
             'get_checkpoint_init_fn', 'train_model', 'main'], {
        'master': ('string', ''), 'task': ('int', 0), 'ps_tasks': ('int', 0),
        'batch_size': ('int', 64), 'num_classes': ('int', 1001),
        'number_of_steps': ('int', None), 'image_size': ('int', 224),
        'depth_multiplier': ('float', 1.0), 'quantize': ('bool', False),
        'fine_tune_checkpoint': ('string', ''), 'checkpoint_dir': ('string', ''),
        'dataset_dir': ('string', ''), 'dataset_name': ('string', 'imagenet'),
        'log_every_n_steps': ('int', 100), 'save_summaries_secs': ('int', 100),
        'save_interval_secs': ('int', 100)}),
    EVAL: (['flags', 'imagenet_input', 'metrics', 'build_model', 'eval_model', 'main'], {
        'master': ('string', ''), 'batch_size': ('int', 250), 'num_classes': ('int', 1001),
        'num_examples': ('int', 50000), 'image_size': ('int', 224),
        'depth_multiplier': ('float', 1.0), 'quantize': ('bool', False),
        'checkpoint_dir': ('string', ''), 'eval_dir': ('string', ''),
        'dataset_dir': ('string', ''), 'dataset_name': ('string', 'imagenet'),
        'dataset_split_name': ('string', 'validation')}),
    PTQ: (['flags', 'restore_model', 'main'], {
        'model_name': ('string', None), 'checkpoint_path': ('string', None),
        'dataset_name': ('string', 'imagenet2012'), 'dataset_dir': ('string', None),
        'dataset_split': ('string', 'train'), 'output_tflite': ('string', None),
        'use_model_specific_preprocessing': ('bool', False), 'enable_ema': ('bool', True),
        'num_steps': ('int', 1000), 'image_size': ('int', 224), 'num_classes': ('int', 1001)}),
}
SIZE, STEPS = 32, 10  # Digits upsampled to 32x32 (MobileNet's least), steps per training run.
# The model on the digits, as the flags of train and eval give it (and in-process).
TINY_MODEL = dict(depth_multiplier=0.25, num_classes=10, image_size=SIZE, dataset_name='digits')
NET_FLAGS = [f'--{name}={value}' for name, value in TINY_MODEL.items()]
# post_training_quantization's: its --model_name, mobilenet_v1_025, gives the width.
MODEL_FLAGS = [flag for flag in NET_FLAGS if not flag.startswith('--depth_multiplier')]


def run_module(module, *args):
    """Runs `python -m module args` as a user does; returns the CompletedProcess."""
    return run([sys.executable, '-m', module, *args])


def one_line_error(result):
    """The one line a run that failed on a user's mistake printed, asserted to be so."""
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def graph_ops(train_dir):
    """{op name: op type} of the graph of train_dir's latest checkpoint."""
    with tf.Graph().as_default() as graph:
        tf.train.import_meta_graph(tf.train.latest_checkpoint(str(train_dir)) + '.meta',
                                   clear_devices=True)
    return {op.name: op.type for op in graph.get_operations()}


def scalar_summaries(directory, tag):
    """The values summary `tag` took in the event files of `directory`, in order."""
    return [value.simple_value for path in sorted(directory.glob('events.out.tfevents.*'))
            for event in tf.train.summary_iterator(str(path))
            for value in event.summary.value if value.tag == tag]


@pytest.fixture
def parsed_flags():
    """FLAGS marked parsed for the test, which sets them with flagsaver (tf.app.flags would
    otherwise parse pytest's command line at the first read of a flag)."""
    was_parsed = FLAGS.is_parsed()
    FLAGS.mark_as_parsed()
    yield
    if not was_parsed:
        absl_logger = logging.getLogger('absl')
        level = absl_logger.level
        FLAGS.unparse_flags()  # Which sets absl's logger's level from --verbosity's default.
        absl_logger.setLevel(level)


def test_the_three_modules_import_together_with_slims_names_and_flags():
    for module, (names, module_flags) in MODULES.items():
        imported = importlib.import_module(module)
        assert imported.__name__ == aliases.ELSEWHERE.get(module, f'slim_deploy.{module}')
        assert [name for name in names if not hasattr(imported, name)] == []
        assert {name: FLAGS[name].flag_type() for name in module_flags} == {
            name: kind for name, (kind, _) in module_flags.items()}


def test_the_flags_train_and_eval_share_are_defined_once():
    for module in MODULES:
        importlib.import_module(module)
    shared = (MODULES[TRAIN][1].keys() & MODULES[EVAL][1].keys()) - MODULES[PTQ][1].keys()
    assert shared == {'master', 'batch_size', 'depth_multiplier', 'quantize', 'checkpoint_dir'}
    assert {name: FLAGS.find_module_defining_flag(name) for name in shared} == dict.fromkeys(
        shared, 'slim_deploy.slim_scripts.mobilenet_v1_input')


@pytest.mark.slow
@pytest.mark.parametrize('last', list(MODULES))
def test_the_module_imported_last_defines_its_flags_with_slims_defaults(last):
    """As when it runs as a script alone; imported after the others, it sets the flags they
    share."""
    code = ('import importlib, json, sys; from absl import flags\n'
            'for module in sys.argv[1:]: importlib.import_module(module)\n'
            'print(json.dumps({name: flags.FLAGS[name].default for name in flags.FLAGS}))')
    result = run([sys.executable, '-c', code, *(m for m in MODULES if m != last), last])
    assert result.returncode == 0, result.stderr[-3000:]
    defaults = json.loads(result.stdout)
    assert {name: defaults.get(name, 'missing') for name in MODULES[last][1]} == {
        name: default for name, (_, default) in MODULES[last][1].items()}


def test_learning_rate_and_quant_delay_follow_fine_tune_checkpoint(parsed_flags):
    from nets import mobilenet_v1_train
    with flagsaver.flagsaver(fine_tune_checkpoint=''):
        assert (mobilenet_v1_train.get_learning_rate(),
                mobilenet_v1_train.get_quant_delay()) == (0.045, 250000)
    with flagsaver.flagsaver(fine_tune_checkpoint='/a/float/checkpoint'):
        assert (mobilenet_v1_train.get_learning_rate(),
                mobilenet_v1_train.get_quant_delay()) == (1e-4, 0)


@pytest.mark.slow
def test_quantized_training_with_ps_tasks_puts_every_variable_on_the_ps(parsed_flags,
                                                                        digits_dir):
    from nets import mobilenet_v1_train
    with flagsaver.flagsaver(ps_tasks=1, quantize=True, dataset_dir=digits_dir,
                             fine_tune_checkpoint='', batch_size=4, **TINY_MODEL):
        graph, _ = mobilenet_v1_train.build_model()
    variables = graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
    assert {v.device for v in variables} == {'/job:ps/task:0'}
    names = {v.op.name for v in variables}
    assert 'global_step' in names
    assert 'MobilenetV1/MobilenetV1/Conv2d_0/act_quant/max' in names  # The rewrite's ranges.
    # From scratch the model trains in float until global step 250000.
    assert graph.get_operation_by_name('step_reached_250000').type == 'GreaterEqual'


def test_the_quantized_evaluation_scores_the_quantized_logits(parsed_flags, digits_dir):
    from nets import mobilenet_v1_eval
    with flagsaver.flagsaver(quantize=True, dataset_dir=digits_dir, dataset_split_name='test',
                             batch_size=4, **TINY_MODEL):
        graph, _ = mobilenet_v1_eval.build_model()
    predictions, = [op for op in graph.get_operations() if op.type == 'ArgMax']
    logits = predictions.inputs[0].op
    assert logits.type == 'Squeeze'
    assert logits.inputs[0].op.type == 'FakeQuantWithMinMaxVars'
    # Read from the checkpoint, not learned: evaluation has no update counts.
    assert not [v for v in graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)
                if v.op.name.endswith('update_count')]


def _checkpoint_with_averages(tmp_path):
    """A checkpoint of 'net/w' = 1 (trainable), its moving average 'net/w/
    ExponentialMovingAverage' = 2 and 'count' = 5 (not trainable); returns its prefix."""
    with tf.Graph().as_default(), tf.Session() as sess:
        weights = tf.Variable(1.0, name='net/w')
        averaged = tf.Variable(2.0, name='net/w/ExponentialMovingAverage', trainable=False)
        count = tf.Variable(5.0, name='count', trainable=False)
        sess.run(tf.global_variables_initializer())
        return tf.train.Saver([weights, averaged, count]).save(sess, str(tmp_path / 'ckpt'))


@pytest.mark.parametrize('enable_ema, expected', [(True, (2.0, 5.0)), (False, (1.0, 5.0))])
def test_restore_model_restores_the_moving_averages_with_enable_ema(tmp_path, enable_ema,
                                                                    expected):
    from nets import post_training_quantization
    checkpoint = _checkpoint_with_averages(tmp_path)
    with tf.Graph().as_default(), tf.Session() as sess:
        variables = [tf.Variable(0.0, name='net/w'),
                     tf.Variable(0.0, name='count', trainable=False)]
        post_training_quantization.restore_model(sess, checkpoint, enable_ema=enable_ema)
        assert tuple(sess.run(variables)) == expected


def test_restore_model_names_the_flag_when_the_checkpoint_has_no_averages(tmp_path):
    from nets import post_training_quantization
    checkpoint = _checkpoint_with_averages(tmp_path)
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.Variable(0.0, name='count')  # Trainable: restored from an average it lacks.
        with pytest.raises(UsageError) as excinfo:
            post_training_quantization.restore_model(sess, checkpoint)
    message = error_message(excinfo)
    assert '--checkpoint_path' in message and '--noenable_ema' in message
    assert 'count/ExponentialMovingAverage (checkpoint: missing, model: [])' in message


@pytest.fixture(scope='module')
def float_run(tmp_path_factory, digits_dir):
    """mobilenet_v1_train's directory after STEPS float steps on the digits."""
    train_dir = tmp_path_factory.mktemp('float')
    result = run_module(TRAIN, f'--dataset_dir={digits_dir}', f'--checkpoint_dir={train_dir}',
                        '--batch_size=16', f'--number_of_steps={STEPS}', *NET_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    return train_dir


@pytest.fixture(scope='module')
def quantized_run(tmp_path_factory, digits_dir, float_run):
    """mobilenet_v1_train's directory after STEPS quantization-aware steps fine-tuning
    float_run's checkpoint, slim's recipe."""
    train_dir = tmp_path_factory.mktemp('quantized')
    result = run_module(TRAIN, f'--dataset_dir={digits_dir}', f'--checkpoint_dir={train_dir}',
                        '--batch_size=16', f'--number_of_steps={STEPS}', '--quantize',
                        f'--fine_tune_checkpoint={float_run}', *NET_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    return train_dir


@pytest.mark.slow
def test_quantize_fine_tunes_the_float_checkpoint_with_fake_quantization(float_run,
                                                                         quantized_run):
    float_types = set(graph_ops(float_run).values())
    quantized_ops = graph_ops(quantized_run)
    assert not {t for t in float_types if t.startswith('FakeQuant')}
    quantized_types = set(quantized_ops.values())
    # tf.contrib.quantize's rewrite: weights per tensor, as activations.
    assert 'FakeQuantWithMinMaxVars' in quantized_types
    assert 'FakeQuantWithMinMaxVarsPerChannel' not in quantized_types
    # Fine-tuning quantizes from the first step: no delay.
    assert not [name for name in quantized_ops if 'step_reached' in name]
    assert checkpoint_step(float_run) == STEPS
    assert checkpoint_step(quantized_run) == STEPS  # The global step restarted at 0.

    float_values = tf.train.load_checkpoint(str(float_run))
    quantized_values = tf.train.load_checkpoint(str(quantized_run))
    weights = 'MobilenetV1/Conv2d_0/weights'
    # Restored, then moved by 10 steps of learning rate 1e-4 (up to 1.2e-3 seen: RMSProp's
    # first steps move a weight by up to about 3 x the rate); a fresh one's std is 0.09.
    np.testing.assert_allclose(quantized_values.get_tensor(weights),
                               float_values.get_tensor(weights), atol=1e-2)
    ranges = {name: quantized_values.get_tensor(name)
              for name in quantized_values.get_variable_to_shape_map()
              if re.search(r'/act_quant/(min|max)$', name)}
    assert 'MobilenetV1/MobilenetV1/Conv2d_13_pointwise/act_quant/max' in ranges
    assert quantize.checkpoint_per_channel_wt(str(quantized_run)) is False
    assert not any(re.search('quant', name) for name in
                   float_values.get_variable_to_shape_map())
    # They learned from the batches: relu6 outputs' ranges are [0, up to 6], started at
    # [0, 6] (contrib's), now the data's.
    maxima = [value for name, value in ranges.items() if name.endswith('max')]
    assert all(0 < value <= 6 for value in maxima) and min(maxima) < 6
    assert scalar_summaries(float_run, 'training/learning_rate')[-1] == pytest.approx(0.045)
    assert scalar_summaries(quantized_run, 'training/learning_rate')[-1] == pytest.approx(1e-4)


@pytest.mark.slow
def test_eval_scores_the_quantized_checkpoint_on_its_ranges(quantized_run, digits_dir):
    eval_dir = quantized_run / 'eval'
    result = run_module(EVAL, f'--dataset_dir={digits_dir}', f'--checkpoint_dir={quantized_run}',
                        f'--eval_dir={eval_dir}', '--dataset_split_name=test', '--quantize',
                        '--batch_size=60', '--num_examples=360', *NET_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = dict(re.findall(r'^eval/(\w+)\[([^\]]+)\]$', result.stderr, re.MULTILINE))
    accuracy, recall_5 = float(printed['Accuracy']), float(printed['Recall_5'])
    assert 0 <= accuracy <= recall_5 <= 1  # The true class in the top 5 as often as first.
    assert scalar_summaries(eval_dir, 'eval/Accuracy') == [pytest.approx(accuracy, abs=1e-6)]


@pytest.mark.slow
def test_the_quantized_checkpoint_converts_to_uint8_as_slims_mobilenet_recipe(quantized_run,
                                                                             tmp_path):
    """slim's nets/mobilenet_v1.md: export_inference_graph --quantize, TensorFlow's
    freeze_graph with the checkpoint, the converter with QUANTIZED_UINT8, mean 128 and std
    127 (tflite_convert, toco's flags)."""
    checkpoint = tf.train.latest_checkpoint(str(quantized_run))
    graph, frozen, model = (tmp_path / name for name in ('graph.pb', 'frozen.pb', 'm.tflite'))
    steps = [
        run_script('export_inference_graph.py', '--model_name=mobilenet_v1_025',
                   '--dataset_name=digits', f'--image_size={SIZE}', '--batch_size=1',
                   '--quantize', f'--output_file={graph}'),
        run([sys.executable, '-m', 'tensorflow.python.tools.freeze_graph',
             f'--input_graph={graph}', '--input_binary=true',
             f'--input_checkpoint={checkpoint}', '--output_node_names=probabilities',
             f'--output_graph={frozen}']),
        run([os.path.join(os.path.dirname(sys.executable), 'tflite_convert'),
             '--enable_v1_converter', f'--graph_def_file={frozen}', f'--output_file={model}',
             '--inference_type=QUANTIZED_UINT8', '--input_arrays=input',
             '--output_arrays=probabilities', '--mean_values=128', '--std_dev_values=127'])]
    for step in steps:
        assert step.returncode == 0, step.stderr[-3000:]
    interpreter = tf.lite.Interpreter(model_path=str(model))
    interpreter.allocate_tensors()
    (image_input,), (output_detail,) = (interpreter.get_input_details(),
                                        interpreter.get_output_details())
    assert (image_input['dtype'], output_detail['dtype']) == (np.uint8, np.uint8)
    assert {detail['dtype'] for detail in interpreter.get_tensor_details()} == {
        np.uint8, np.int32}
    scale, zero_point = image_input['quantization']
    assert (scale, zero_point) == (pytest.approx(1 / 127), 128)
    codes = np.random.RandomState(0).randint(0, 256, [4, 1, SIZE, SIZE, 1]).astype(np.uint8)
    with tf.Graph().as_default():  # What the quantized checkpoint computes on those images.
        images = tf.placeholder(tf.float32, [1, SIZE, SIZE, 1])
        logits, _ = nets_factory.get_network_fn('mobilenet_v1_025', 10)(images)
        probabilities = tf.nn.softmax(logits)
        quantize.create_eval_graph()
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, checkpoint)
            expected = [sess.run(probabilities,
                                 {images: (code.astype(np.float32) - zero_point) * scale})
                        for code in codes]
    output_scale, output_zero_point = output_detail['quantization']
    for code, want in zip(codes, expected):
        interpreter.set_tensor(image_input['index'], code)
        interpreter.invoke()
        got = (interpreter.get_tensor(output_detail['index']).astype(np.float32) -
               output_zero_point) * output_scale
        np.testing.assert_allclose(got, want, atol=2 * output_scale)


def test_quantized_evaluation_of_per_channel_weights_is_one_line_naming_the_flag(
        parsed_flags, digits_dir, tmp_path):
    """A checkpoint of train_image_classifier --quantize_delay holds per-channel weight
    ranges, which tf.contrib.quantize's evaluation rewrite does not read."""
    from nets import mobilenet_v1_eval
    with tf.Graph().as_default(), tf.Session() as sess:
        ranges = tf.Variable(np.ones([8], np.float32),
                             name='MobilenetV1/Conv2d_0/weights_quant/min')
        sess.run(ranges.initializer)
        checkpoint = tf.train.Saver([ranges]).save(sess, str(tmp_path / 'model.ckpt'))
    with flagsaver.flagsaver(quantize=True, dataset_dir=digits_dir, checkpoint_dir=checkpoint,
                             dataset_split_name='test', batch_size=4, **TINY_MODEL):
        with pytest.raises(UsageError) as excinfo:
            mobilenet_v1_eval.eval_model()
    assert error_message(excinfo) == (
        "--quantize evaluates tf.contrib.quantize's rewrite, weights per tensor, but "
        f"--checkpoint_dir {checkpoint!r} holds weight ranges per channel "
        '(train_image_classifier --quantize_delay trains them, for int8 models): evaluate it '
        'with eval_image_classifier --quantize')


@pytest.mark.slow
def test_post_training_quantization_writes_an_int8_model_the_interpreter_runs(
        float_run, digits_dir, tmp_path):
    output = tmp_path / 'mobilenet.tflite'
    result = run_module(PTQ, '--model_name=mobilenet_v1_025', f'--checkpoint_path={float_run}',
                        f'--dataset_dir={digits_dir}', '--num_steps=20', '--noenable_ema',
                        f'--output_tflite={output}', *MODEL_FLAGS)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == f'tflite model written to {output}\n'
    interpreter = tf.lite.Interpreter(model_path=str(output))
    interpreter.allocate_tensors()
    (image_input,), (output_detail,) = (interpreter.get_input_details(),
                                        interpreter.get_output_details())
    assert (image_input['dtype'], output_detail['dtype']) == (np.int8, np.int8)
    assert list(image_input['shape']) == [1, SIZE, SIZE, 1]  # The digits' one channel.
    # Calibrated on images scaled to [-1, 1] (bicubic resizing of 4x4 crops overshoots).
    scale, zero_point = image_input['quantization']
    assert 2 / 255 <= scale <= 3 / 255 and abs(zero_point) <= 10
    image = np.random.RandomState(0).randint(-128, 128, image_input['shape']).astype(np.int8)
    interpreter.set_tensor(image_input['index'], image)
    interpreter.invoke()
    output_scale, output_zero_point = output_detail['quantization']
    probabilities = (interpreter.get_tensor(output_detail['index']).astype(np.float32) -
                     output_zero_point) * output_scale
    assert probabilities.shape == (1, 10)
    assert probabilities.sum() == pytest.approx(1.0, abs=0.05)


@pytest.mark.slow
def test_a_users_mistake_ends_in_one_line_naming_the_flag(digits_dir):
    line = one_line_error(run_module(PTQ, '--model_name=mobilenet_v1_025',
                                     '--checkpoint_path=/nowhere'))
    assert '--dataset_dir' in line and '--output_tflite' in line
    line = one_line_error(run_module(TRAIN, '--dataset_name=digit'))
    assert line.endswith("unknown --dataset_name 'digit'; valid: cifar10, digits, flowers, "
                         "imagenet, mnist, visualwakewords")
