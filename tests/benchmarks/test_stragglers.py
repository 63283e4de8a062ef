"""benchmarks/stragglers.py: a mode's runs without and with a straggler through the launcher
on emulated hosts, its arithmetic and its one-line mistakes."""
import json
import subprocess
import sys

import pytest

from benchmarks import stragglers

from helpers import REPO, benchmark_env


def test_the_rate_runs_from_the_first_line_at_the_warmup_step_to_the_last():
    progress = [(1, 10.0), (2, 10.5), (4, 11.0), (6, 12.0), (8, 13.0)]
    assert stragglers.steps_per_sec(progress, 3) == pytest.approx((8 - 4) / (13.0 - 11.0))


def test_a_chief_that_logged_nothing_after_the_warmup_is_an_error():
    for progress in ([(2, 1.0), (6, 2.0)], [(2, 1.0)], []):
        with pytest.raises(stragglers.harness.BenchmarkError,
                           match='no step after global step 5'):
            stragglers.steps_per_sec(progress, 5)


def test_the_straggler_is_the_last_worker_on_a_slower_link():
    args = stragglers.parse_args(['--workers=3', '--link_bandwidth=1gbit', '--slowdown=4'])
    assert args.slow_link == '250000kbit'
    assert stragglers.launcher_options(args, 'backup', 'straggler') == [
        '--num_ps_tasks=2', '--sync_replicas', '--worker_replicas=3', '--emulated_hosts',
        '--link_bandwidth=1gbit', '--slow_host=worker:2=250000kbit']
    assert stragglers.launcher_options(args, 'collective', 'alike') == [
        '--num_ps_tasks=0', '--worker_replicas=3', '--emulated_hosts', '--link_bandwidth=1gbit']
    flags = stragglers.training_flags(args, 'backup', '/t', '/d')
    assert '--replicas_to_aggregate=2' in flags and '--max_number_of_steps=65' in flags


def test_backup_workers_targets_are_against_sync_with_every_worker_alike():
    def rates(steps_alike, steps_straggler, images_per_update):
        return {case: {'steps_per_sec': steps, 'images_per_sec': steps * images_per_update}
                for case, steps in (('alike', steps_alike), ('straggler', steps_straggler))}
    modes = {'sync': rates(2.0, 1.0, 4 * 32), 'backup': rates(1.9, 1.5, 3 * 32)}
    assert stragglers.targets(modes) == [
        {'name': "backup alike's updates/s", 'ratio': pytest.approx(0.95), 'minimum': 0.95,
         'met': True},
        {'name': "backup's images/s with the straggler",
         'ratio': pytest.approx(1.5 * 3 / (2.0 * 4)), 'minimum': 0.85, 'met': False}]
    assert stragglers.targets({'backup': modes['backup']}) is None


@pytest.mark.parametrize('argv, message', [
    (['--workers=2', '--backup_workers=2'],
     '--backup_workers 2 leaves no gradient to aggregate with --workers 2'),
    (['--link_bandwidth=fast'], "--link_bandwidth 'fast' is not a rate such as 100mbit or 1gbit"),
    (['--modes=sync,async'], 'argument --modes: '),
])
def test_a_mistake_is_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        stragglers.parse_args(argv)
    assert exit_info.value.code == 2
    assert f'error: {message}' in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.cluster
def test_backup_workers_without_and_with_a_straggler():
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.stragglers', '--workers=3', '--num_ps_tasks=1',
         '--modes=backup', '--batch_size=8', '--warmup_steps=2', '--steps=4', '--json'],
        cwd=REPO, env=benchmark_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    backup = found['modes']['backup']
    assert backup['images_per_update'] == 2 * 8 and found['slow_link'] == '333333kbit'
    for case in ('alike', 'straggler'):
        assert backup[case]['steps_per_sec'] > 0
        assert backup[case]['images_per_sec'] == pytest.approx(16 * backup[case]['steps_per_sec'])
    assert backup['kept'] == pytest.approx(
        backup['straggler']['steps_per_sec'] / backup['alike']['steps_per_sec'])
    assert found['targets'] is None  # They are against sync, not run here.
