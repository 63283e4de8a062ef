"""benchmarks.network end to end: every setup runs on tiny bandwidth-limited emulated
hosts and reports, as JSON, what its docstring documents; no measured step beats the plan's
bound, and each link passes the plan's bytes and little more; ParameterServerStrategy trains
on the same cluster (plus its coordinator); no host is left behind; bad arguments are one
line."""
import json
import subprocess

import pytest

from benchmarks import network as benchmark

from helpers import REPO, benchmark_command, benchmark_env

SETUPS = ['parameter_server', 'prefetch_reads', 'sync_replicas', 'collective',
          'multi_worker_mirrored', 'parameter_server_strategy']
LABELS = ['parameter_server async, 1 ps', 'parameter_server async, prefetched reads, 1 ps',
          'parameter_server sync, 1 ps', 'collective', 'MultiWorkerMirroredStrategy',
          'ParameterServerStrategy, 1 ps']
PROCESSES = [3, 3, 3, 2, 2, 4]  # ParameterServerStrategy's coordinator is a task of its own.
# The hosts of a setup of N processes: the first N of these, in some order.
HOSTS = ['worker-0', 'worker-1', 'ps-0', 'chief-0']
PLAN_HOSTS = {'worker': 'worker-0', 'ps task 0': 'ps-0'}  # The plan's links' hosts.


def network(*args, timeout=60):
    """The CompletedProcess-like result of the benchmark with `args`."""
    process = subprocess.Popen(benchmark_command('network', *args), cwd=REPO,
                               env=benchmark_env(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()  # Its role processes die with it; conftest removes its hosts.
        process.communicate()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.slow
@pytest.mark.cluster
def test_every_setup_on_emulated_hosts_stays_above_the_plans_bound():
    result = network('--workers', '2', '--num_ps_tasks', '1', '--link_bandwidth', '1gbit',
                     '--batch_size', '4', '--steps', '3', '--warmup_steps', '1',
                     '--rounds', '2', '--json', timeout=240)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {key: report[key] for key in ('model_name', 'batch_size', 'workers', 'num_ps_tasks',
                                         'precision', 'data', 'steps', 'warmup_steps',
                                         'rounds')} == {
        'model_name': 'lenet', 'batch_size': 4, 'workers': 2, 'num_ps_tasks': 1,
        'precision': ['float32'], 'data': 'synthetic', 'steps': 3, 'warmup_steps': 1, 'rounds': 2}
    assert list(report['links']) == ['1gbit']
    link = report['links']['1gbit']
    assert link['link_gbps'] == 1.0 and list(link['setups']) == SETUPS
    for name, label, processes in zip(SETUPS, LABELS, PROCESSES):
        setup = link['setups'][name]
        assert setup['label'] == label and setup['processes'] == processes
        rates = setup['images_per_sec_rounds']
        assert len(rates) == 2 and min(rates) <= setup['images_per_sec'] <= max(rates)
        steps = setup['sec_per_step_rounds']
        assert len(steps) == 2 and min(steps) <= setup['sec_per_step'] <= max(steps)
        busiest = setup['busiest_link']
        host, direction = busiest['link'].split()
        assert set(setup['link_bytes']) == set(HOSTS[:processes])
        assert busiest['bytes'] == max(max(counts.values())
                                       for counts in setup['link_bytes'].values())
        assert busiest['bytes'] == setup['link_bytes'][host][direction]
        assert 0 < busiest['busy'] <= 1.05 and busiest['busy'] == pytest.approx(
            busiest['bytes'] * 8 / 1e9 / setup['sec_per_step'])
        traffic = setup['network']
        if name == 'parameter_server_strategy':  # Functions the plan does not read.
            assert traffic is None and setup['bound_secs'] is None
            continue
        if setup['bound_secs'] is None:  # Only when the plan says what it does not count.
            assert traffic['uncounted'] and setup['step_over_bound'] is None
            continue
        # What a worker moves: LeNet's gradients (one way) at least, over 1 Gbit/s.
        assert traffic['bytes'] > 3e6 * 4 and setup['bound_secs'] == pytest.approx(
            traffic['bytes'] * 8 / 1e9)
        assert all(step >= setup['bound_secs'] for step in steps), (name, steps)
        assert setup['step_over_bound'] == pytest.approx(
            setup['sec_per_step'] / setup['bound_secs'])
        # The plan's bytes crossed each link, and little else: frames add their headers, and
        # a synchronous worker may run a step more than the updates counted.
        for planned_link, planned in traffic['links'].items():
            for direction in ('in', 'out'):
                measured = setup['link_bytes'][PLAN_HOSTS[planned_link]][direction]
                if planned[direction] > 1e6:
                    assert 1 <= measured / planned[direction] <= 1.5, (
                        name, planned_link, direction, measured, planned)
    assert link['setups']['collective']['network']['busiest'] == ['worker out']
    assert link['setups']['parameter_server']['network']['ps_advice'] is not None
    baseline = link['setups']['multi_worker_mirrored']
    assert link['ratios'] == {
        f'{label} / MultiWorkerMirroredStrategy': pytest.approx(
            link['setups'][name]['images_per_sec'] / baseline['images_per_sec'])
        for name, label in zip(SETUPS, LABELS) if name != 'multi_worker_mirrored'}
    assert 'round 2/2 done' in result.stderr  # Progress on stderr, the JSON alone on stdout.


@pytest.mark.slow
@pytest.mark.cluster
def test_each_setup_runs_with_each_gradient_compression_and_precision():
    """collective with float32 and bfloat16 gradients, each in float32 and bfloat16 math, and
    MultiWorkerMirroredStrategy in float32 alone: the 16-bit gradients' bound is half the
    float32 ones', and no step beats it."""
    result = network('--setups', 'collective,multi_worker_mirrored', '--num_ps_tasks', '0',
                     '--gradient_compression', 'none,bfloat16', '--precision',
                     'float32,bfloat16', '--link_bandwidth', '1gbit', '--batch_size', '4',
                     '--steps', '3', '--warmup_steps', '1', '--rounds', '2', '--json',
                     timeout=180)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report['precision'] == ['float32', 'bfloat16']
    setups = report['links']['1gbit']['setups']
    assert {name: setup['label'] for name, setup in setups.items()} == {
        'collective': 'collective',
        'collective:bfloat16': 'collective, bfloat16 gradients',
        'collective@bfloat16': 'collective, bfloat16 math',
        'collective:bfloat16@bfloat16': 'collective, bfloat16 gradients, bfloat16 math',
        'multi_worker_mirrored': 'MultiWorkerMirroredStrategy'}
    for math in ('', '@bfloat16'):
        full, half = (setups[name + math]['network']['bytes']
                      for name in ('collective', 'collective:bfloat16'))
        assert half == pytest.approx(full / 2, rel=1e-3)
        assert all(step >= setups['collective:bfloat16' + math]['bound_secs']
                   for step in setups['collective:bfloat16' + math]['sec_per_step_rounds'])


def test_each_setup_with_ps_tasks_runs_with_each_part_size():
    args = benchmark.parse_args([
        '--setups', 'parameter_server,collective,parameter_server_strategy', '--num_ps_tasks',
        '2', '--variable_partition_min_mb', '0,1.5', '--gradient_compression', 'none,bfloat16'])
    assert args.setups == ['parameter_server', 'parameter_server/1.5mb',
                           'parameter_server:bfloat16', 'parameter_server:bfloat16/1.5mb',
                           'collective', 'collective:bfloat16',
                           'parameter_server_strategy', 'parameter_server_strategy/1.5mb']
    assert [benchmark.parse_run(name).partition_mb for name in args.setups] == [
        0, 1.5, 0, 1.5, 0, 0, 0, 1.5]
    assert benchmark.label(args, 'parameter_server:bfloat16/1.5mb') == (
        'parameter_server async, 2 ps, bfloat16 gradients, parts of 1.5 MB')
    assert benchmark.tasks_of(args, 'parameter_server_strategy/1.5mb') == [
        'ps:0', 'ps:1', 'worker:0', 'worker:1', 'chief:0']


@pytest.mark.slow
@pytest.mark.parametrize('args, message', [
    (['--setups', 'sync_replicas', '--num_ps_tasks', '0'],
     '--setups sync_replicas needs --num_ps_tasks >= 1'),
    (['--link_bandwidth', '1gbit,10gb'],
     "argument --link_bandwidth: '10gb' is not a rate such as 100mbit or 1gbit"),
    (['--workers', '1'], 'argument --workers: must be >= 2, got 1'),
    (['--gradient_compression', 'int8'],
     'argument --gradient_compression: int8 is not in bfloat16, float16, none'),
])
def test_bad_arguments_are_one_line(args, message):
    result = network(*args)
    assert result.returncode == 2
    assert message in result.stderr.strip().splitlines()[-1]
    assert 'Traceback' not in result.stderr
