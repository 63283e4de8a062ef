"""benchmarks.fault_injection end to end: the launcher with restarts survives killed tasks
(a worker, a ps task, the chief stopped by SIGTERM) and training ends at its last step."""
import json
import os
import sys

import pytest

from helpers import REPO, benchmark_env, checkpoint_step, run

COMMAND = [sys.executable, '-m', 'benchmarks.fault_injection']
TIME_LIMIT_SECS = 200  # The script's own bound; the subprocess gets a little more.

pytestmark = pytest.mark.cluster


def fault_injection(*args):
    """Runs the benchmark with --json; returns (exit code, summary or None, stderr)."""
    result = run([*COMMAND, '--json', f'--time_limit_secs={TIME_LIMIT_SECS}', *args], cwd=REPO,
                 env=benchmark_env(), timeout=TIME_LIMIT_SECS + 30)
    summary = json.loads(result.stdout) if result.stdout.strip() else None
    return result.returncode, summary, result.stderr


def processes_mentioning(text):
    """Pids of live processes whose command line contains `text`."""
    found = []
    for entry in os.listdir('/proc'):
        try:
            with open(f'/proc/{entry}/cmdline', 'rb') as f:
                if text.encode() in f.read():
                    found.append(int(entry))
        except (OSError, ValueError):
            pass
    return found


@pytest.mark.slow
def test_launcher_survives_a_killed_ps_task_and_a_killed_worker(digits_dir, tmp_path):
    train_dir = tmp_path / 'train'
    # The ps task first: its whole-job restart costs no steps, while a restarting worker
    # takes long to start and the chief trains on alone meanwhile.
    code, summary, stderr = fault_injection(
        '--plan=ps:0@SIGKILL,worker:1@SIGKILL', '--max_restarts=2',
        '--max_number_of_steps=300', '--min_accuracy=0.8', f'--dataset_dir={digits_dir}',
        f'--train_dir={train_dir}')
    assert code == 0, stderr[-3000:]
    assert [(kill['task'], kill['signal']) for kill in summary['kills']] == [
        ('ps:0', 'SIGKILL'), ('worker:1', 'SIGKILL')]
    ps_kill = summary['kills'][0]
    assert ps_kill['recovery_secs'] is not None  # The restarted job trained again...
    assert ps_kill['resumed_from'] is not None  # ...from the chief's last checkpoint.
    assert summary['restarts'] == [
        'launch.py: ps:0 ended (signal SIGKILL); restarting the whole job (restart 1 of 2)',
        'launch.py: worker:1 ended (signal SIGKILL); restarting it (restart 2 of 2)']
    assert summary['survived'] and summary['launcher_exit_code'] == 0
    assert summary['final_checkpoint_step'] == 300 == checkpoint_step(train_dir)
    assert summary['evaluated_step'] == 300 and summary['accuracy'] >= 0.8
    assert summary['leftover_processes'] == [] and summary['failure'] is None
    assert processes_mentioning(str(train_dir)) == []


@pytest.mark.slow
def test_chief_stopped_by_sigterm_checkpoints_its_step_and_resumes_from_it(digits_dir,
                                                                           tmp_path):
    train_dir = tmp_path / 'train'
    # One worker: no other one moves the global step between the stop and the checkpoint.
    code, summary, stderr = fault_injection(
        '--worker_replicas=1', '--plan=worker:0@SIGTERM', '--max_restarts=1',
        '--max_number_of_steps=150', '--min_accuracy=0.5', f'--dataset_dir={digits_dir}',
        f'--train_dir={train_dir}')
    assert code == 0, stderr[-3000:]
    (kill,) = summary['kills']
    assert (kill['task'], kill['signal']) == ('worker:0', 'SIGTERM')
    assert kill['stopped_at'] is not None and kill['stopped_at'] >= kill['step']
    assert kill['resumed_from'] == kill['stopped_at']
    assert kill['recovery_secs'] is not None
    assert summary['restarts'] == [
        'launch.py: worker:0 ended (exit code 143); restarting it (restart 1 of 1)']
    assert summary['final_checkpoint_step'] == 150 == checkpoint_step(train_dir)
    assert processes_mentioning(str(train_dir)) == []


@pytest.mark.slow
def test_partitions_on_emulated_hosts_heal_or_restart_the_job(digits_dir, tmp_path):
    train_dir = tmp_path / 'train'
    timeout = 8
    # Seed 4 cuts ps-0 off for 3.2 s (shorter than the timeout), then worker-1 for 16.4 s.
    code, summary, stderr = fault_injection(
        '--emulated_hosts', '--plan=ps:0@PARTITION,worker:1@PARTITION', '--seed=4',
        f'--task_timeout_secs={timeout}', '--max_number_of_steps=300', '--min_accuracy=0.8',
        f'--dataset_dir={digits_dir}', f'--train_dir={train_dir}')
    assert code == 0, stderr[-3000:]
    short, long = summary['kills']
    assert (short['task'], short['signal'], short['partition_secs']) == ('ps:0', 'PARTITION', 3.2)
    assert (long['task'], long['signal'], long['partition_secs']) == (
        'worker:1', 'PARTITION', 16.4)
    # The short one healed with no restart; after the long one worker:1 found its ps silent
    # and the launcher restarted the job, whose chief resumed from its checkpoint. worker:1
    # trains again once its host is back, unless the chief (which needs no other worker)
    # has run the last steps by then: on a fast machine it does.
    assert short['restart'] is None and short['recovery_secs'] is not None
    assert long['restart'] == ('launch.py: worker:1 ended (exit code 75); restarting the whole '
                               'job (restart 1 of 4)')
    assert long['resumed_from'] is not None
    assert long['recovery_secs'] is None or long['recovery_secs'] > 16.4
    assert summary['final_checkpoint_step'] == 300 == checkpoint_step(train_dir)
    assert summary['accuracy'] >= 0.8 and summary['failure'] is None
    assert processes_mentioning(str(train_dir)) == []


@pytest.mark.parametrize('args, message', [
    (['--plan=worker:2'], '--plan names worker:2, but the cluster has 2 worker tasks'),
    (['--plan=ps:0@SIGHUP'], "signal must be SIGKILL or SIGTERM, got 'SIGHUP'"),
    (['--plan=chief:0'], "'chief:0' is not TASK[@FAULT] with TASK ps:I or worker:I"),
    (['--plan=ps:0,worker:1', '--kills=3'], '--kills 3 disagrees with the 2 kills of --plan'),
    (['--partitions=1'], 'partitions need --emulated_hosts'),
    (['--plan=ps:0@PARTITION'], 'partitions need --emulated_hosts'),
])
def test_bad_arguments_are_one_line(args, message):
    result = run([*COMMAND, *args], cwd=REPO, timeout=60)
    assert result.returncode == 2
    last = result.stderr.splitlines()[-1]
    assert last.startswith('python -m benchmarks.fault_injection: error: ')
    assert last.endswith(message)
    assert 'Traceback' not in result.stderr
