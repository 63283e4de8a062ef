"""benchmarks.throughput end to end: tiny configurations run in seconds and report, as
JSON, the fields its docstring documents; bad arguments are one line."""
import json

import pytest

from slim_deploy.deployment import precision

from helpers import REPO, benchmark_command, benchmark_env, run

TINY = ['--model_name', 'lenet', '--batch_size', '2', '--steps', '2', '--warmup_steps', '1',
        '--rounds', '2', '--json']
STARTUP_FIELDS = {'import_secs', 'build_secs', 'init_secs', 'first_step_secs',
                  'to_first_step_secs'}


def throughput(*args, timeout=240):
    """The benchmark run with `args`: the CompletedProcess."""
    return run(benchmark_command('throughput', *args), cwd=REPO, env=benchmark_env(),
               timeout=timeout)


def check_setup(setup, rounds):
    assert len(setup['images_per_sec_rounds']) == rounds
    assert all(rate > 0 for rate in setup['images_per_sec_rounds'])
    assert min(setup['images_per_sec_rounds']) <= setup['images_per_sec'] <= max(
        setup['images_per_sec_rounds'])
    assert setup['spread'] >= 0 and setup['sec_per_step'] > 0
    startup = setup['startup']
    assert set(startup) == STARTUP_FIELDS and all(value > 0 for value in startup.values())
    assert startup['to_first_step_secs'] == pytest.approx(
        startup['build_secs'] + startup['init_secs'] + startup['first_step_secs'])
    assert all(isinstance(setup[loss], float) for loss in ('loss_first', 'loss_last'))


@pytest.mark.slow
def test_two_precisions_of_one_variable_update():
    result = throughput(*TINY, '--variable_update', 'parameter_server',
                        '--precision', 'float32,bfloat16')
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {key: report[key] for key in ('model_name', 'batch_size', 'num_clones', 'data',
                                         'steps', 'warmup_steps', 'rounds')} == {
        'model_name': 'lenet', 'batch_size': 2, 'num_clones': 2, 'data': 'synthetic',
        'steps': 2, 'warmup_steps': 1, 'rounds': 2}
    assert report['devices'] == 'CPU' and report['seconds'] > 0
    assert report['bfloat16_cpu'] == precision.cpu_support('bfloat16', precision.cpu_flags())
    assert list(report['setups']) == ['parameter_server float32', 'parameter_server bfloat16']
    for name, setup in report['setups'].items():
        check_setup(setup, rounds=2)
        assert setup['variable_update'] == 'parameter_server' and setup['processes'] == 1
        assert setup['precision'] == name.split()[1] and setup['xla'] is False
    setups = report['setups']
    assert report['ratios'] == {'parameter_server bfloat16 / parameter_server float32': (
        pytest.approx(setups['parameter_server bfloat16']['images_per_sec'] /
                      setups['parameter_server float32']['images_per_sec']))}
    assert 'first step after' in result.stderr  # Progress goes to stderr, JSON alone to stdout.


@pytest.mark.slow
def test_seeded_and_not_against_mirrored_on_the_real_pipeline():
    result = throughput(*TINY, '--variable_update', 'replicated', '--compare_mirrored',
                        '--dataset_name', 'digits', '--seed', 'off,on', '--rounds', '1')
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report['data'] == 'digits'
    assert {name: setup['seed'] for name, setup in report['setups'].items()} == {
        'replicated float32': False, 'replicated float32 seed': True,
        'MirroredStrategy float32': False}
    for setup in report['setups'].values():
        check_setup(setup, rounds=1)
    assert list(report['ratios']) == ['replicated float32 / MirroredStrategy float32',
                                      'replicated float32 seed / MirroredStrategy float32',
                                      'replicated float32 seed / replicated float32']


@pytest.mark.slow
def test_collective_runs_a_worker_process_per_clone_with_xla():
    result = throughput(*TINY, '--variable_update', 'collective', '--xla', '--rounds', '1')
    assert result.returncode == 0, result.stderr
    setup = json.loads(result.stdout)['setups']['collective float32 xla']
    check_setup(setup, rounds=1)
    assert setup['processes'] == 2 and setup['xla'] is True


@pytest.mark.slow
@pytest.mark.parametrize('args, message', [
    (['--variable_update', 'mirrored'], "argument --variable_update: mirrored is not in "
                                        "parameter_server, replicated, collective"),
    (['--precision', 'float32,int8'], 'argument --precision: int8 is not in bfloat16, '
                                      'float16, float32'),
    (['--variable_update', 'collective', '--num_clones', '1'],
     '--variable_update=collective needs --num_clones >= 2'),
])
def test_bad_arguments_are_one_line(args, message):
    result = throughput(*args, timeout=60)
    assert result.returncode == 2
    assert message in result.stderr.strip().splitlines()[-1]
    assert 'Traceback' not in result.stderr
