"""The clone-equivalence check: deployed clones against one clone on the same global batch,
on small models in this process and on zoo nets through the check_equivalence command."""
import itertools
import re

import pytest
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.analysis import equivalence
from slim_deploy.common.errors import UsageError

from helpers import labelled_images, run_script

CLASSES = 5


def batch(size=8, seed=0):
    """(images [size, 8, 8, 3] in [-1, 1), labels [size]) numpy arrays."""
    return labelled_images((size, 8, 8, 3), CLASSES, seed, low=-1.0)


def small_model(batch_norm=False, dropout=False):
    """model_fn(images, labels): a regularized conv layer (with batch norm), logits and the
    mean cross-entropy."""
    def model_fn(images, labels):
        normalizer = ({'normalizer_fn': slim.batch_norm,
                       'normalizer_params': {'is_training': True, 'decay': 0.5}}
                      if batch_norm else {})
        net = slim.conv2d(images, 4, 3, weights_regularizer=slim.l2_regularizer(0.01),
                          scope='conv', **normalizer)
        net = slim.flatten(net)
        if dropout:
            net = slim.dropout(net, 0.5, is_training=True)
        logits = slim.fully_connected(net, CLASSES, activation_fn=None, scope='logits')
        tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return model_fn


def loss_twice_on_first_call():
    """A broken model_fn: its first call adds its loss twice. The single clone's loss is
    then twice the mean (a consistent model), but deployed, clone 0's examples weigh
    double."""
    calls = itertools.count()
    model_fn = small_model()

    def broken(images, labels):
        model_fn(images, labels)
        if next(calls) == 0:
            tf.losses.add_loss(tf.losses.get_losses()[-1])
    return broken


def summed_loss():
    """A broken model_fn: the loss sums over the examples instead of averaging, so N clones'
    mean of it is 1/N of the single clone's."""
    def model_fn(images, labels):
        logits = slim.fully_connected(slim.flatten(images), CLASSES, activation_fn=None,
                                      scope='logits')
        tf.losses.sparse_softmax_cross_entropy(labels, logits,
                                               reduction=tf.losses.Reduction.SUM)
    return model_fn


def names(check):
    return {d.name for d in check.differences}


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_clones_are_equivalent_to_one_clone(variable_update):
    result = equivalence.check(small_model(), batch(), 2, variable_update)
    assert result.equivalent and result.expected is None and result.global_batch == 8
    loss, gradients, variables = result.checks
    assert [c.name for c in result.checks] == ['loss', 'gradients', 'variables']
    assert names(gradients) == {'conv/weights', 'conv/biases', 'logits/weights',
                                'logits/biases'}
    expected = names(gradients) | {'global_step'}
    if variable_update == 'replicated':  # Clone 1's copies are compared too.
        expected |= {'clone_1/' + name for name in names(gradients)}
    assert names(variables) == expected
    assert loss.largest('abs').abs < 1e-5 and 0 < gradients.largest('rel').rel < 1e-5
    assert equivalence.format_result(result)[-1] == 'equivalent'


@pytest.mark.parametrize('make_model', [loss_twice_on_first_call, summed_loss])
def test_a_broken_loss_scaling_is_not_equivalent(make_model):
    result = equivalence.check(make_model(), batch(), 2)
    assert not result.equivalent and result.expected is None
    check_name, worst = result.worst
    assert worst.rel > 0.01 and not worst.passed
    last = equivalence.format_result(result)[-1]
    assert last.startswith(f'NOT equivalent: worst {worst.name} ({check_name}): abs ')


@pytest.mark.parametrize('variable_update', ['parameter_server', 'replicated'])
def test_batch_norm_without_sync_differs_as_expected_and_with_sync_agrees(variable_update):
    unsynced = equivalence.check(small_model(batch_norm=True), batch(), 2, variable_update)
    assert not unsynced.equivalent
    assert unsynced.expected == ("batch norm normalizes each clone's batch with its own "
                                 'statistics without sync_batch_norm')
    assert unsynced.checks[0].largest('rel').rel > 1e-3  # The size of the difference.
    verdict = equivalence.format_result(unsynced)[-1]
    assert verdict.startswith('NOT equivalent, as expected: batch norm normalizes each '
                              "clone's batch with its own statistics without sync_batch_norm; "
                              'worst ')
    synced = equivalence.check(small_model(batch_norm=True), batch(), 2, variable_update,
                               sync_batch_norm=True)
    assert synced.equivalent, equivalence.format_result(synced)
    # Moving statistics updated from the global batch's moments by the first clone.
    assert {'conv/BatchNorm/moving_mean', 'conv/BatchNorm/moving_variance'} <= names(
        synced.checks[2])
    one_clone = equivalence.check(small_model(batch_norm=True), batch(), 1)
    assert one_clone.equivalent and one_clone.expected is None


def test_micro_batches_are_equivalent_and_with_batch_norm_differ_as_expected():
    result = equivalence.check(small_model(), batch(), 2, 'replicated',
                               gradient_accumulation_steps=2)
    assert result.equivalent, equivalence.format_result(result)
    global_step = next(d for d in result.checks[2].differences if d.name == 'global_step')
    assert global_step.abs == 0 and global_step.scale == 1  # One update of the global step.
    with_batch_norm = equivalence.check(small_model(batch_norm=True), batch(), 2,
                                        sync_batch_norm=True, gradient_accumulation_steps=2)
    assert with_batch_norm.expected == ('batch norm normalizes each micro-batch with its own '
                                        'statistics')


def test_tolerances_decide_and_noise_is_measured():
    result = equivalence.check(small_model(), batch(), 2, rtol=0, atol=0, noise_margin=0)
    assert not result.equivalent  # Round-off differs from 0.
    difference = result.checks[1].largest('abs')
    assert difference.allowed == 0 and difference.abs > 0
    assert all(d.noise >= 0 and d.noise < 1e-5 for c in result.checks for d in c.differences)


def test_format_result_lines():
    difference = equivalence.Difference('net/w', abs=2e-3, scale=0.5, noise=1e-7,
                                        allowed=5e-5)
    same = equivalence.Difference('loss', abs=0.0, scale=2.0, noise=0.0, allowed=2e-4)
    result = equivalence.Result(
        (equivalence.Check('loss', (same,)), equivalence.Check('gradients', (difference,)),
         equivalence.Check('variables', (same,))), None, 8)
    assert difference.rel == 4e-3 and difference.noise_rel == 2e-7 and same.rel == 0
    assert equivalence.format_result(result) == [
        'check      largest abs diff  largest rel diff  largest rel noise',
        'loss       0                 0                 0',
        'gradients  2.00e-03 net/w    4.00e-03 net/w    2.00e-07 net/w',
        'variables  0                 0                 0',
        'NOT equivalent: worst net/w (gradients): abs 0.002, rel 0.004, allowed abs 5e-05']


@pytest.mark.parametrize('model_fn, inputs, message', [
    (small_model(), batch(5), r'a positive multiple of num_workers x '
                              r'gradient_accumulation_steps x num_clones = 2, got shapes'),
    (small_model(), (batch()[0], batch(4)[1]), 'must share a leading dimension'),
    (lambda images, labels: None, batch(), 'model_fn added no loss'),
    (small_model(dropout=True), batch(),
     r"model_fn draws random numbers in the step \('Dropout/.*RandomUniform'\)"),
])
def test_inputs_and_models_it_cannot_check(model_fn, inputs, message):
    with pytest.raises(UsageError, match=message):
        equivalence.check(model_fn, inputs, 2)


# ---- The command, as a user runs it. ----

def run_command(*args):
    return run_script('check_equivalence.py', *args)


@pytest.mark.slow
def test_the_command_says_lenet_with_2_clones_is_equivalent():
    result = run_command('--model_name=lenet', '--num_clones=2')
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[0] == ('lenet: 2 clones x 2 examples each (parameter_server) against one '
                        'clone on all 4 examples, one SGD step from the same values')
    assert lines[1].split() == ['check', 'largest', 'abs', 'diff', 'largest', 'rel', 'diff',
                                'largest', 'rel', 'noise']
    assert [line.split()[0] for line in lines[2:5]] == ['loss', 'gradients', 'variables']
    assert lines[3].split()[2].startswith('LeNet/')
    assert lines[5:] == ['equivalent']
    assert result.stderr == ''


@pytest.mark.slow
def test_the_command_reports_batch_norm_without_sync_as_an_expected_difference():
    result = run_command('--model_name=mobilenet_v1')
    assert result.returncode == 3, result.stderr[-3000:]
    verdict = result.stdout.splitlines()[-1]
    assert verdict.startswith("NOT equivalent, as expected: batch norm normalizes each clone's "
                              'batch with its own statistics without sync_batch_norm; worst '
                              'MobilenetV1/')


@pytest.mark.slow
def test_the_command_exits_1_naming_the_worst_variable_when_not_equivalent():
    result = run_command('--model_name=lenet', '--rtol=1e-9', '--atol=0', '--noise_margin=0')
    assert result.returncode == 1, result.stderr[-3000:]
    assert re.fullmatch(r'NOT equivalent: worst LeNet/\S+ \((gradients|variables)\): abs \S+, '
                        r'rel \S+, allowed abs \S+', result.stdout.splitlines()[-1])


# Synchronized batch norm: mobilenet_v1's (at 32 pixels) in one process and across workers,
# a small net's in parameter_server mode too (test_batch_norm_without_sync_differs_...).
DONE = [(model, mode, extra) for model, extra in (('lenet', []), ('cifarnet', []))
        for mode in ('parameter_server', 'replicated', 'collective')] + [
    ('mobilenet_v1', mode, ['--sync_batch_norm', '--image_size=32'])
    for mode in ('replicated', 'collective')]


@pytest.mark.slow
@pytest.mark.parametrize('model_name, variable_update, extra', [
    pytest.param(*case, marks=[pytest.mark.cluster] if case[1] == 'collective' else [])
    for case in DONE + [('lenet', 'collective', ['--gradient_accumulation_steps=2'])]])
def test_the_command_passes_in_every_mode(model_name, variable_update, extra):
    result = run_command(f'--model_name={model_name}', f'--variable_update={variable_update}',
                         *extra)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == 'equivalent'


@pytest.mark.cluster
@pytest.mark.parametrize('compression, low, high', [('bfloat16', 2 ** -9, 2 ** -4),
                                                    ('float16', 2 ** -12, 2 ** -7)])
def test_16_bit_exchange_stays_at_its_round_off(compression, low, high):
    """2 collective workers of 2 clones exchanging 16-bit gradients: the largest relative
    difference from one clone is of the 16-bit round-off (2^-8 for bfloat16, 2^-11 for
    float16), far above float32's, and within the default allowance."""
    result = run_command('--variable_update=collective', f'--gradient_compression={compression}')
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    (gradients,) = [line for line in result.stdout.splitlines() if line.startswith('gradients')]
    relative = float(gradients.split()[3])
    assert low < relative < high
    assert result.stdout.splitlines()[-1] == 'equivalent'


@pytest.mark.slow
@pytest.mark.parametrize('args, message', [
    (['--model_name=lenet5'], "unknown --model_name 'lenet5'; valid: alexnet_v2, "),
    (['--variable_update=mirrored'], "unknown --variable_update 'mirrored'; valid: collective, "
                                     'parameter_server, replicated'),
    (['--num_workers=3'], '--num_workers applies to --variable_update=collective only, not to '
                          '--variable_update=parameter_server'),
    (['--variable_update=collective', '--num_workers=1'],
     '--variable_update=collective needs several workers, got --num_workers=1'),
    (['--num_clones=0'], 'flag --num_clones=0: 0 is not a positive integer'),
    (['--rtol=nan'], 'flag --rtol=nan: --rtol must be finite'),
    (['--gradient_compression=float16'],
     '--gradient_compression=float16 compresses the gradients sent between tasks, and '
     '--variable_update=parameter_server without ps tasks sends none: use it with '
     '--variable_update=collective'),
    (['--model_name=i3d'], "--model_name 'i3d' takes videos; this check feeds images"),
    (['--model_name=vgg_16', '--image_size=32'], '--image_size=32 is outside the sizes vgg_16 '
     'takes, 224 to 255 pixels: pass --image_size in that range (its default is 224)'),
])
def test_a_bad_flag_is_one_line_naming_it(args, message):
    result = run_command(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f'check_equivalence.py: error: {message}')
    assert result.stderr.count('\n') == 1 and result.stdout == ''
