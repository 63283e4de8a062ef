"""benchmarks/scaling.py: each setup predicted by the planner's model of its mode, a point's
arithmetic, one run on emulated hosts, and its one-line mistakes.

The made-up steps move 1 MB each way per worker: at 1 Gbit/s, 8 ms."""
import dataclasses
import json
import subprocess

import pytest

from benchmarks import scaling
from slim_deploy.deployment import sizing
from slim_deploy.deployment.network_traffic import (
    EACH_WAY,
    IN_THEN_OUT,
    AllReduces,
    Link,
    PsGroup,
    StepTraffic,
)

from helpers import REPO, benchmark_command, benchmark_env

MB = 1_000_000
COMPUTE = sizing.Compute(seconds=0.030, forward=0.010)
PS_STEP = StepTraffic(
    workers=2, worker=Link('worker', MB, MB, 2 * MB, IN_THEN_OUT),
    ps_tasks=(Link('ps task 0', 2 * MB, 2 * MB, 2 * MB, EACH_WAY),), all_reduces=None,
    groups=(PsGroup('a', 0, received=(('a_gradient', MB, 2 * MB),),
                    sent=(('a_read', MB, 2 * MB),)),))
COLLECTIVE_STEP = StepTraffic(
    workers=2, worker=Link('worker', MB, MB, MB, EACH_WAY), ps_tasks=(),
    all_reduces=AllReduces(count=1, bytes=MB, members=2, local_members=1))
# ParameterServerStrategy's: 'a' read twice.
STRATEGY_STEP = dataclasses.replace(
    PS_STEP, worker=Link('worker', 2 * MB, MB, 3 * MB, IN_THEN_OUT),
    groups=(PsGroup('a', 0, received=(('a_gradient', MB, 2 * MB),),
                    sent=(('a_read', MB, 2 * MB), ('a_read_1', MB, 2 * MB))),))
TRAFFICS = (PS_STEP, COLLECTIVE_STEP, STRATEGY_STEP)


@pytest.mark.parametrize('setup, mode, worker_in', [
    ('parameter_server', sizing.ASYNC_PS, MB),
    ('prefetch_reads', sizing.ASYNC_PS, MB),
    ('sync_replicas', sizing.SYNC_PS, MB),
    ('collective', sizing.COLLECTIVE, 2 * 3 * MB // 4),  # The ring's 2 (N - 1) / N x 1 MB.
    ('multi_worker_mirrored', sizing.COLLECTIVE, 2 * 3 * MB // 4),
    ('parameter_server_strategy', sizing.ASYNC_PS, 2 * MB)])
def test_each_setup_is_predicted_by_the_model_of_its_mode_from_its_step(setup, mode, worker_in):
    prediction = scaling.predict(setup, TRAFFICS, COMPUTE, 4, 1.0, 1)
    assert prediction.mode == mode and prediction.workers == 4
    assert prediction.ps_tasks == (None if mode == sizing.COLLECTIVE else 1)
    assert prediction.traffic.worker.bytes_in == worker_in


def test_the_last_reader_of_a_synchronous_update_is_given_its_own_compute():
    alone = sizing.Compute(seconds=0.010, forward=0.003)
    sync = scaling.predict('sync_replicas', TRAFFICS, COMPUTE, 4, 1.0, 1, last_reader=alone)
    assert sync == sizing.synchronous_ps(PS_STEP, COMPUTE, 4, 1.0, 1, last_reader=alone)
    assert sync.seconds < scaling.predict('sync_replicas', TRAFFICS, COMPUTE, 4, 1.0, 1).seconds
    for setup in ('parameter_server', 'collective'):  # No worker computes while others wait.
        assert (scaling.predict(setup, TRAFFICS, COMPUTE, 4, 1.0, 1, last_reader=alone) ==
                scaling.predict(setup, TRAFFICS, COMPUTE, 4, 1.0, 1))


def test_prefetched_reads_are_predicted_beside_the_rest_of_the_step():
    prefetched = scaling.predict('prefetch_reads', TRAFFICS, COMPUTE, 4, 1.0, 1)
    assert prefetched == sizing.asynchronous_ps(PS_STEP, COMPUTE, 4, 1.0, 1, prefetch_reads=True)
    assert prefetched.seconds < scaling.predict('parameter_server', TRAFFICS, COMPUTE, 4, 1.0,
                                                1).seconds


def test_a_point_sets_the_measured_step_against_the_predicted():
    # Collective on 4 workers: the ring passes 2 x 3/4 x 1 MB, 12 ms, within backprop's 20.
    prediction = scaling.predict('collective', TRAFFICS, COMPUTE, 4, 1.0, 1)
    assert prediction.seconds == pytest.approx(0.030)
    point = scaling.point(4, 'collective', 'none', 0, 0, 'collective', 0.030, 0.031, '1gbit',
                          1.0, 0.034, prediction)
    assert point['ratio'] == pytest.approx(0.034 / 0.030) and point['within']
    assert point['scaling_measured'] == pytest.approx(0.030 / 0.034)
    assert point['scaling_predicted'] == pytest.approx(1.0)
    assert point['unlimited_secs'] == 0.031
    assert not scaling.point(4, 'collective', 'none', 0, 0, 'collective', 0.030, 0.031,
                             '1gbit', 1.0, 0.0346, prediction)['within']


def test_parts_are_predicted_for_the_ps_setups():
    # Variables of 1 and 2 MB, in parts of 0.5 MB over 2 ps tasks: 2 parts each (one per
    # task), so each task receives half of each gradient from each of 4 workers, 6 MB; whole,
    # one task receives b's 2 MB from each.
    step = dataclasses.replace(PS_STEP, groups=(
        PsGroup('a', 0, received=(('a_gradient', MB, 2 * MB),), sent=(('a_read', MB, 2 * MB),),
                shape=(250, 1000), dtype='float32', whole=frozenset({'a_gradient', 'a_read'})),
        PsGroup('b', 0, received=(('b_gradient', 2 * MB, 2 * MB),),
                sent=(('b_read', 2 * MB, 2 * MB),), shape=(500, 1000), dtype='float32',
                whole=frozenset({'b_gradient', 'b_read'}))))
    for setup in ('parameter_server', 'sync_replicas', 'parameter_server_strategy'):
        whole, parts = (scaling.predict(setup, (step, COLLECTIVE_STEP, step), COMPUTE, 4, 1.0, 2,
                                        size)
                        for size in (0, MB // 2))
        assert (whole.partition_min_bytes, parts.partition_min_bytes) == (0, MB // 2)
        assert [link.bytes_in for link in parts.traffic.ps_tasks] == [6 * MB] * 2
        assert max(link.bytes_in for link in whole.traffic.ps_tasks) == 8 * MB


def test_each_setup_but_tf_distributes_runs_with_each_compression_each_with_ps_in_parts():
    args = scaling.parse_args(['--setups=collective,multi_worker_mirrored,parameter_server,'
                               'parameter_server_strategy', '--gradient_compression=none,bfloat16',
                               '--variable_partition_min_mb=0,0.5'])
    assert args.runs == [('collective', 'none', 0, 0), ('collective', 'bfloat16', 0, 0),
                         ('multi_worker_mirrored', 'none', 0, 0),
                         ('parameter_server', 'none', 2, 0),
                         ('parameter_server', 'none', 2, 0.5),
                         ('parameter_server', 'bfloat16', 2, 0),
                         ('parameter_server', 'bfloat16', 2, 0.5),
                         ('parameter_server_strategy', 'none', 2, 0),
                         ('parameter_server_strategy', 'none', 2, 0.5)]


def test_each_setup_with_ps_tasks_runs_with_each_number_of_them():
    args = scaling.parse_args(['--setups=sync_replicas,collective', '--num_ps_tasks=4,8',
                               '--variable_partition_min_mb=0,1'])
    assert args.runs == [('sync_replicas', 'none', 4, 0), ('sync_replicas', 'none', 4, 1),
                         ('sync_replicas', 'none', 8, 0), ('sync_replicas', 'none', 8, 1),
                         ('collective', 'none', 0, 0)]


@pytest.mark.parametrize('argv, message', [
    (['--workers=1,4'], 'argument --workers: '),
    (['--workers=2,'], 'argument --workers: '),
    (['--num_ps_tasks=4,0'], 'argument --num_ps_tasks: must be >= 1, got 0'),
    (['--link_bandwidth=fast'], 'argument --link_bandwidth: '),
    (['--overlap=1.5'], "argument --overlap: '1.5' is not a share in [0, 1]"),
    (['--variable_partition_min_mb=1,-1'], 'argument --variable_partition_min_mb: must be >= 0'),
])
def test_a_mistake_is_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        scaling.parse_args(argv)
    assert exit_info.value.code == 2
    assert f'error: {message}' in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.cluster
def test_two_workers_measured_unlimited_and_on_a_link_against_the_prediction():
    process = subprocess.run(
        benchmark_command('scaling', '--workers=2', '--setups=collective',
                          '--gradient_compression=none,bfloat16', '--link_bandwidth=100mbit',
                          '--batch_size=8', '--steps=3', '--warmup_steps=1', '--json'),
        cwd=REPO, env=benchmark_env(), capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr[-3000:]
    report = json.loads(process.stdout)
    plain, compressed = report['points']
    assert [(p['workers'], p['setup'], p['gradient_compression'], p['link_bandwidth'])
            for p in (plain, compressed)] == [(2, 'collective', 'none', '100mbit'),
                                              (2, 'collective', 'bfloat16', '100mbit')]
    # lenet's ring moves its 13.1 MB of gradients each way, 1.05 s at 100 Mbit/s (0.52 s in
    # bfloat16): far more than the step's compute.
    for point in (plain, compressed):
        assert point['measured_secs'] > point['unlimited_secs']
        assert point['predicted_secs'] > point['compute_secs']
    assert plain['compute_secs'] == plain['unlimited_secs']
    # The compressed run is planned from the float32 step and the casts' cost per byte.
    assert report['compression_seconds_per_byte']['none'] == 0
    # Its casts: twice the 6.55 MB of bfloat16 it all-reduces, at the cost per float32 byte
    # times the sharing (the float32 step over one worker's alone).
    cost = compressed['compute_secs'] - plain['compute_secs']
    assert 0 <= cost == pytest.approx(
        13_104_936 * report['compression_seconds_per_byte']['bfloat16'] *
        plain['compute_secs'] / report['alone_secs'], rel=0.01)
    assert compressed['predicted_secs'] < plain['predicted_secs']
    assert report['within'] == plain['within'] + compressed['within']
