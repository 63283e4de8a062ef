"""benchmarks.quantization end to end at its smallest: lenet trained a few steps in float
and quantization-aware (the toolkit's and a TF 1 client's with tf.contrib.quantize), exported
to every .tflite variant (uint8 as TF 1 clients convert), scored and timed; the JSON holds
the fields its docstring documents, consistent with each other, and the table the same
rows; a bad argument is one line."""
import json
import re

import pytest

from benchmarks import quantization as quantization_benchmark

from helpers import REPO, benchmark_command, benchmark_env, run

TINY = ['--models', 'lenet', '--train_steps', '20', '--fine_tune_steps', '5',
        '--representative_steps', '2', '--latency_rounds', '3']
CHECKPOINTS = ['float checkpoint', 'QAT checkpoint', 'QAT float graph', 'contrib checkpoint']
TFLITE = ['float', 'float16', 'dynamic', 'int8 PTQ', 'int8 QAT', 'uint8 contrib']
TARGETS = {  # target: (its limit, whether the value must be at least the limit)
    'QAT int8 loses <= 0.5 points': (-0.5, True), 'PTQ int8 loses <= 1.5 points': (-1.5, True),
    'uint8 loses <= 1 point': (-1.0, True),
    'QAT int8 size <= 0.3 x float': (0.3, False), 'PTQ int8 size <= 0.3 x float': (0.3, False),
    'QAT int8 latency <= float': (1.0, False), 'PTQ int8 latency <= float': (1.0, False)}


def quantization(*args, timeout=300):
    """The benchmark run as a user runs it, with `args`: the CompletedProcess."""
    return run(benchmark_command('quantization', *args), cwd=REPO, env=benchmark_env(),
               timeout=timeout)


def check_progress(stderr):
    """Progress alone goes to stderr: TensorFlow's start-up, the trainer, the converter and
    the interpreter stay quiet."""
    assert stderr.splitlines() == [
        'lenet: training in float, 20 steps', 'lenet: fine-tuning in float, 5 steps',
        'lenet: fine-tuning quantization-aware, 5 steps',
        "lenet: fine-tuning with tf.contrib.quantize's rewrite, 5 steps",
        'lenet: exporting and scoring',
        'lenet: timing the interpreter, 3 rounds']


@pytest.fixture(scope='module')
def report():
    """The JSON report of one tiny run, its progress checked."""
    result = quantization(*TINY, '--json')
    assert result.returncode == 0, result.stderr
    check_progress(result.stderr)
    return json.loads(result.stdout)


@pytest.mark.slow
def test_lenet_reports_accuracy_size_latency_ratios_and_targets_as_json(report):
    assert {key: report[key] for key in ('representative_steps', 'latency_rounds',
                                         'invokes_per_round')} == {
        'representative_steps': 2, 'latency_rounds': 3, 'invokes_per_round': 10}
    assert report['cores'] >= 1 and report['seconds'] > 0 and report['tensorflow']
    assert list(report['models']) == ['lenet']
    lenet = report['models']['lenet']
    assert {key: lenet[key] for key in ('image_shape', 'batch_size', 'train_steps',
                                        'fine_tune_steps', 'batch_norm_decay',
                                        'test_examples')} == {
        'image_shape': [28, 28, 1], 'batch_size': 32, 'train_steps': 20, 'fine_tune_steps': 5,
        'batch_norm_decay': None, 'test_examples': 360}
    assert lenet['fine_tune_learning_rate'] == pytest.approx(lenet['learning_rate'] / 10)
    assert list(lenet['seconds']) == ['train', 'float fine-tune', 'QAT fine-tune',
                                      'contrib QAT fine-tune']
    assert all(seconds > 0 for seconds in lenet['seconds'].values())

    variants = lenet['variants']
    assert list(variants) == CHECKPOINTS + TFLITE
    baseline = variants['float checkpoint']['accuracy']
    for name, variant in variants.items():
        assert 0 <= variant['accuracy'] <= 1
        # Accuracies are whole examples of the 360.
        assert variant['accuracy'] * 360 == pytest.approx(round(variant['accuracy'] * 360))
        assert variant['points'] == pytest.approx((variant['accuracy'] - baseline) * 100)
        if name in TFLITE:
            first, third = variant['latency_quartiles_ms']
            assert 0 < first <= variant['latency_ms'] <= third
            assert variant['size_bytes'] > 0
    # The float .tflite computes what the float checkpoint does (within an example).
    assert abs(variants['float']['points']) <= 100 / 360 + 1e-9
    assert lenet['qat_quantization_points'] == pytest.approx(
        variants['int8 QAT']['points'] - variants['QAT float graph']['points'])
    sizes = {name: variants[name]['size_bytes'] for name in TFLITE}
    assert sizes['int8 QAT'] < sizes['float16'] < sizes['float']
    assert sizes['uint8 contrib'] < sizes['int8 QAT']  # One scale per tensor.

    ratios = lenet['ratios']
    assert list(ratios) == [f'{name} {what} / float {what}' for what in ('size', 'latency')
                            for name in TFLITE[1:]]
    assert all(isinstance(value, float) and value > 0 for value in ratios.values())
    for name in TFLITE[1:]:
        assert ratios[f'{name} size / float size'] == pytest.approx(
            sizes[name] / sizes['float'])
        assert ratios[f'{name} latency / float latency'] == pytest.approx(
            variants[name]['latency_ms'] / variants['float']['latency_ms'])

    parts = lenet['int8_bytes']
    assert parts['weights'] + parts['quantization'] + parts['other'] == sizes['int8 QAT']
    # Per output channel: 32 and 64 convolution weights and their biases, at least; a float32
    # scale and an int64 zero point each.
    assert parts['scales'] >= 2 * (32 + 64) and parts['quantization'] >= 12 * parts['scales']
    assert all(parts[key] > 0 for key in ('weights', 'other'))

    assert list(lenet['targets']) == list(TARGETS)
    for target, (limit, at_least) in TARGETS.items():
        entry = lenet['targets'][target]
        assert entry['limit'] == limit
        assert entry['met'] == (entry['value'] >= limit if at_least else entry['value'] <= limit)
    assert lenet['targets']['QAT int8 loses <= 0.5 points']['value'] == pytest.approx(
        variants['int8 QAT']['points'])
    assert lenet['targets']['PTQ int8 size <= 0.3 x float']['value'] == pytest.approx(
        ratios['int8 PTQ size / float size'])


@pytest.mark.slow
def test_the_table_has_a_row_per_variant_ratio_and_target(report):
    """Without --json the run prints this table of its report (harness.print_result)."""
    text = '\n'.join(quantization_benchmark.table(report))
    lines = text.splitlines()
    assert lines[0].startswith('TensorFlow ') and lines[-1].startswith('run took ')
    assert re.search(r'^lenet 28x28x1, batch 32: 20 steps at 0.01 \(\d+ s\), then 5 at 0.001 in '
                     r'float \(\d+ s\), quantization-aware \(\d+ s\) and with '
                     r"tf.contrib.quantize's rewrite \(\d+ s\)$", text, re.M)
    for name in CHECKPOINTS + TFLITE:
        (row,) = [line for line in lines if line.startswith(name + '  ')]
        assert re.fullmatch(rf'{name} +\d+\.\d\d% +[+-]\d+\.\d\d' + (
            r' +[\d,]+ +\d+\.\d{3}  \d+\.\d{3}-\d+\.\d{3}' if name in TFLITE else ''), row)
    assert re.search(r'^int8 QAT against the QAT float graph: [+-]\d+\.\d\d points ',
                     text, re.M)
    assert len([line for line in lines if re.fullmatch(r'.* / .* +\d+\.\d{3}', line)]) == 10
    for target in TARGETS:
        (row,) = [line for line in lines if line.startswith(target)]
        assert row.endswith(('  yes', '  NO'))


@pytest.mark.slow
def test_a_bad_argument_is_one_line():
    result = quantization('--models', 'lenet,resnet_v1_50', timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith(
        'argument --models: resnet_v1_50 is not in lenet, mobilenet_v1_025')
    assert 'Traceback' not in result.stderr
