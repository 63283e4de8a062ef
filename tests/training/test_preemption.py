"""Training stopped from outside: SIGTERM and SIGINT end the step in flight, the chief
checkpoints it and a rerun resumes from it; a second signal, or the grace period running
out, exits at once; a corrupt newest checkpoint is skipped; a cluster stops together."""
import logging
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from slim_deploy.cluster import launch
from slim_deploy.image_classifier import config, train
from slim_deploy.training import loop

from helpers import (
    ENV,
    REPO,
    TRAIN,
    checkpoint_step,
    run,
    start_logged,
    tf_config,
    train_args,
    wait_for,
)

STEP_LINE = re.compile(r'step (\d+): loss')
EVERY_STEP = 1  # --log_every_n_steps: a progress line per step.


class Task:
    """A train_image_classifier.py process whose output goes to a log file."""

    def __init__(self, log, args, task_config=None):
        self.log = log
        env = {**ENV, 'TF_CONFIG': task_config} if task_config else ENV
        self.process = start_logged([*TRAIN, *args], log, env)

    def text(self):
        return self.log.read_text()

    def last_step(self):
        """The last global step the progress lines reported; 0 before any."""
        steps = STEP_LINE.findall(self.text())
        return int(steps[-1]) if steps else 0

    def wait_for(self, predicate, timeout=120):
        wait_for(predicate, timeout, self.process, self.log)

    def signal_and_wait(self, signum, timeout=60):
        """Sends `signum`; returns (exit code, seconds it took to exit)."""
        sent = time.monotonic()
        self.process.send_signal(signum)
        code = self.process.wait(timeout=timeout)
        return code, time.monotonic() - sent

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def final_line(task):
    return task.text().rstrip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize('signum', [
    signal.SIGTERM, signal.SIGINT])
def test_a_signal_checkpoints_the_step_and_the_rerun_finishes_from_it(digits_dir, tmp_path,
                                                                      signum):
    train_dir, steps = tmp_path / 'train', 120
    at_least = random.randint(3, 40)
    args = train_args(train_dir, digits_dir, steps, log_every_n_steps=EVERY_STEP)
    task = Task(tmp_path / 'first.log', args)
    try:
        task.wait_for(lambda: task.last_step() >= at_least)
        seen = task.last_step()
        code, seconds = task.signal_and_wait(signum)
    finally:
        task.kill()
    assert code == 128 + signum, task.text()[-3000:]
    assert seconds < config.ScheduleConfig.grace_period_secs
    stopped = checkpoint_step(train_dir)
    assert stopped == task.last_step()  # The step in flight finished and was checkpointed.
    # Past the step last logged when the signal went: the step in flight, and at most one
    # more that began while the log line travelled (steps take 20-40 ms here).
    assert seen <= stopped <= seen + 2
    name = signal.Signals(signum).name
    assert final_line(task) == (f'train_image_classifier.py: stopped by {name} at global step '
                                f'{stopped}; checkpointed in {train_dir}: rerun to resume '
                                'from it')
    rerun = run([*TRAIN, *args])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f'Resuming from {train_dir}/model.ckpt-{stopped}' in rerun.stderr
    assert (f'Finished training at global step {steps} after {steps - stopped} steps here'
            in rerun.stderr)
    assert checkpoint_step(train_dir) == steps


def waiting_worker(tmp_path, digits_dir, *extra):
    """Worker 1 of a 2-worker collective cluster whose chief never starts: it waits for the
    chief's variables (there is no step in flight to end)."""
    task = Task(tmp_path / 'worker1.log',
                train_args(tmp_path / 'train', digits_dir, 10, '--variable_update=collective',
                           *extra, log_every_n_steps=EVERY_STEP),
                tf_config(launch.cluster_spec(launch.LOCALHOST, 0, 2), 'worker', 1))
    task.wait_for(lambda: 'Placement:' in task.text())
    time.sleep(1)  # Into the wait for the chief.
    return task


@pytest.mark.slow
def test_a_second_signal_exits_at_once(digits_dir, tmp_path):
    task = waiting_worker(tmp_path, digits_dir)
    try:
        task.process.send_signal(signal.SIGTERM)
        task.wait_for(lambda: 'Received SIGTERM: stopping after the step in flight' in task.text())
        code, seconds = task.signal_and_wait(signal.SIGINT, timeout=10)
    finally:
        task.kill()
    assert code == 143 and seconds < 5
    assert final_line(task) == ('train_image_classifier.py: second signal (SIGINT): exiting '
                                'now')


@pytest.mark.slow
def test_the_grace_period_running_out_exits(digits_dir, tmp_path):
    task = waiting_worker(tmp_path, digits_dir, '--grace_period_secs=2')
    try:
        code, seconds = task.signal_and_wait(signal.SIGTERM, timeout=20)
    finally:
        task.kill()
    assert code == 143 and 2 <= seconds < 8
    assert final_line(task) == ('train_image_classifier.py: did not stop within 2 s of SIGTERM '
                                '(--grace_period_secs); exiting now')


def test_a_signal_stop_ends_its_thread_with_its_block():
    """Not while the interpreter finalizes, where a thread that drops the last reference to a
    TensorFlow session (a callback holds one) aborts the process."""
    with loop.SignalStop():
        assert 'signal_stop' in [thread.name for thread in threading.enumerate()]
    assert 'signal_stop' not in [thread.name for thread in threading.enumerate()]


@pytest.mark.slow
def test_a_truncated_newest_checkpoint_is_skipped_with_a_warning(digits_dir, tmp_path, caplog):
    train_dir = tmp_path / 'train'

    def run(steps):
        return train.train(config.TrainConfig.from_flags({
            'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'num_clones': 1,
            'batch_size': 8, 'max_number_of_steps': steps}))

    assert run(3) == 3 and run(5) == 5
    (data,) = train_dir.glob('model.ckpt-5.data-*')
    data.write_bytes(data.read_bytes()[:100])
    caplog.clear()
    caplog.set_level(logging.INFO, logger='absl')
    assert run(7) == 7
    warnings = [r.getMessage() for r in caplog.records if r.levelname == 'WARNING']
    assert [w for w in warnings if 'model.ckpt-5' in w] == [
        f'Checkpoint {train_dir}/model.ckpt-5 is unreadable (Read less bytes than '
        'requested); trying an older one']
    assert f'Resuming from {train_dir}/model.ckpt-3' in caplog.text
    assert 'Finished training at global step 7 after 4 steps here' in caplog.text
    assert data.stat().st_size == 100  # Kept, not deleted or rewritten.
    assert checkpoint_step(train_dir) == 7


@pytest.mark.cluster
def test_sigterm_to_the_chief_stops_collective_workers_together(digits_dir, tmp_path):
    train_dir, steps = tmp_path / 'train', 150
    cluster = launch.cluster_spec(launch.LOCALHOST, 0, 2)
    args = train_args(train_dir, digits_dir, steps, '--variable_update=collective',
                      log_every_n_steps=EVERY_STEP)

    def start(index, incarnation):
        return Task(tmp_path / f'worker{index}.{incarnation}.log', args,
                    tf_config(cluster, 'worker', index))

    chief, worker = start(0, 0), start(1, 0)
    try:
        at_least = random.randint(3, 60)
        chief.wait_for(lambda: chief.last_step() >= at_least, timeout=180)
        code, seconds = chief.signal_and_wait(signal.SIGTERM)
        assert code == 143 and seconds < config.ScheduleConfig.grace_period_secs
        assert worker.process.wait(timeout=30) == 143
    finally:
        chief.kill()
        worker.kill()
    stopped = checkpoint_step(train_dir)
    assert stopped >= at_least
    assert final_line(chief).startswith(
        f'train_image_classifier.py: stopped by SIGTERM at global step {stopped}; checkpointed')
    assert final_line(worker) == (f'train_image_classifier.py: stopped at global step {stopped}'
                                  ' with the other workers, one of which received SIGTERM')
    chief, worker = start(0, 1), start(1, 1)
    try:
        assert chief.process.wait(timeout=240) == 0, chief.text()[-3000:]
        assert worker.process.wait(timeout=60) == 0, worker.text()[-3000:]
    finally:
        chief.kill()
        worker.kill()
    assert f'Resuming from {train_dir}/model.ckpt-{stopped}' in chief.text()
    assert checkpoint_step(train_dir) == steps


@pytest.mark.cluster
def test_sigterm_to_a_sync_replicas_job_releases_every_worker(digits_dir, tmp_path):
    train_dir = tmp_path / 'train'
    launcher = subprocess.Popen(
        [sys.executable, '-m', 'slim_deploy.cluster.launch', '--num_ps_tasks=1',
         '--worker_replicas=2', '--sync_replicas', '--', *TRAIN,
         *train_args(train_dir, digits_dir, 2000, '--replicas_to_aggregate=2',
                     log_every_n_steps=EVERY_STEP)],
        cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in launcher.stdout:
            lines.append(line)
            if line.startswith('[worker:0]') and STEP_LINE.search(line):
                if int(STEP_LINE.search(line)[1]) >= random.randint(3, 30):
                    break
        launcher.send_signal(signal.SIGTERM)
        output, _ = launcher.communicate(timeout=config.ScheduleConfig.grace_period_secs + 10)
    finally:
        launcher.kill()
    output = ''.join(lines) + output
    assert launcher.returncode == 143, output[-3000:]
    stopped = checkpoint_step(train_dir)
    assert (f'[worker:0] train_image_classifier.py: stopped by SIGTERM at global step '
            f'{stopped}; checkpointed') in output
    # Worker 1 may still be starting (the chief's steps need no other worker's gradients).
    assert re.search(r'^\[worker:1\] train_image_classifier.py: stopped by SIGTERM (at global '
                     r'step \d+|before its first step)', output, re.MULTILINE), output[-3000:]
    assert 'exiting now' not in output  # Nobody needed the grace period's end.
