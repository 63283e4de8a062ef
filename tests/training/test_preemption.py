"""Training stopped from outside: SIGTERM and SIGINT end the step in flight, the chief
checkpoints it and a rerun resumes from it; a second signal, or the grace period running
out, exits at once; a corrupt newest checkpoint is skipped; a cluster stops together, its
ps tasks serving until the chief has written its last checkpoint."""
import logging
import random
import re
import signal
import threading
import time

import pytest

from slim_deploy.cluster import launch
from slim_deploy.image_classifier import config, train
from slim_deploy.training import loop

from clusters import Cluster
from helpers import (
    ENV,
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

    def __init__(self, log, args, task_config=None, fresh=False):
        """fresh: start its own interpreter, not a served run (helpers.served), to be
        stopped (SIGSTOP) by stop_every_task."""
        self.log = log
        env = {**ENV, 'TF_CONFIG': task_config} if task_config else ENV
        self.process = start_logged([*TRAIN, *args], log, env, fresh)

    def text(self):
        return self.log.read_text()

    def last_step(self, before=None):
        """The last global step the progress lines reported (before the first line holding
        `before`, when given); 0 before any."""
        text = self.text()
        if before is not None:
            text = text[:text.index(before)]
        steps = STEP_LINE.findall(text)
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
    # Not before the step logged when the signal went, nor past the step in flight when the
    # process heard it: a step is logged before the stop is looked for, so every step but
    # that one was logged before the line saying the signal was heard.
    name = signal.Signals(signum).name
    heard = task.last_step(before=f'Received {name}: stopping after the step in flight')
    assert seen <= stopped <= heard + 1
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


# How long the whole-job tests hold the chief back (SIGSTOP) from finishing its step and
# writing its last checkpoint: longer than a ps task takes to end without waiting for it (2-4 s
# on these machines), as a large model's save can be.
CHIEF_FROZEN_SECS = 5


def stop_every_task(processes, chief='worker:0'):
    """SIGTERM to every one of `processes` ({task: Popen}) at once, as the launcher and the
    deletion of a JobSet do, the chief's step and last checkpoint held back
    CHIEF_FROZEN_SECS; returns {task: exit code}, once every task has ended."""
    processes[chief].send_signal(signal.SIGSTOP)
    for process in processes.values():
        process.send_signal(signal.SIGTERM)
    time.sleep(CHIEF_FROZEN_SECS)
    serving = {task for task, process in processes.items() if process.poll() is None}
    processes[chief].send_signal(signal.SIGCONT)
    assert {task for task in processes if task.startswith('ps')} <= serving
    return {task: process.wait(timeout=config.ScheduleConfig.grace_period_secs + 30)
            for task, process in processes.items()}


def assert_chief_checkpointed(log, train_dir, reported):
    """The chief's `log` (text) ends saying it checkpointed the step its checkpoint in
    train_dir holds, at or after step `reported`, the last it logged before the signal."""
    stopped = checkpoint_step(train_dir)
    assert stopped >= reported
    assert log.rstrip().splitlines()[-1] == (
        f'train_image_classifier.py: stopped by SIGTERM at global step {stopped}; '
        f'checkpointed in {train_dir}: rerun to resume from it')
    return stopped


@pytest.mark.cluster
def test_sigterm_to_the_chief_stops_collective_workers_together(digits_dir, tmp_path):
    """Then the rerun resumes from that step, and a SIGTERM to both workers at once keeps
    the chief's last step."""
    train_dir, steps = tmp_path / 'train', 150
    cluster = launch.cluster_spec(launch.LOCALHOST, 0, 2)
    args = train_args(train_dir, digits_dir, steps, '--variable_update=collective',
                      log_every_n_steps=EVERY_STEP)

    def start(index, incarnation):  # The second is stopped by stop_every_task.
        return Task(tmp_path / f'worker{index}.{incarnation}.log', args,
                    tf_config(cluster, 'worker', index), fresh=incarnation == 1)

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
        chief.wait_for(lambda: chief.last_step() > stopped, timeout=180)
        reported = chief.last_step()
        codes = stop_every_task({'worker:0': chief.process, 'worker:1': worker.process})
    finally:
        chief.kill()
        worker.kill()
    assert f'Resuming from {train_dir}/model.ckpt-{stopped}' in chief.text()
    assert codes == {'worker:0': 143, 'worker:1': 143}, worker.text()[-3000:]
    assert_chief_checkpointed(chief.text(), train_dir, reported)
    assert 'exiting now' not in chief.text() + worker.text()  # Nobody needed the grace period.


@pytest.mark.cluster
@pytest.mark.parametrize('sync', [True, False], ids=['sync', 'async'])
def test_sigterm_to_every_task_keeps_the_chiefs_last_step(digits_dir, tmp_path, sync):
    """The ps task, which holds the variables, serves until the chief has written its last
    checkpoint; with --sync_replicas the signalled chief releases every worker waiting in
    the token queue."""
    train_dir = tmp_path / 'train'
    extra = ['--sync_replicas', '--replicas_to_aggregate=2'] if sync else []
    with Cluster(tmp_path, train_args(train_dir, digits_dir, 2000, *extra,
                                      log_every_n_steps=EVERY_STEP), fresh=True) as job:
        job.wait_for(lambda: STEP_LINE.findall(job.log('worker:0')), timeout=180)
        time.sleep(random.uniform(0, 2))
        reported = int(STEP_LINE.findall(job.log('worker:0'))[-1])
        codes = stop_every_task(job.processes)
    logs = {task: job.log(task) for task in codes}
    assert codes == {'ps:0': 143, 'worker:0': 143, 'worker:1': 143}, logs['worker:0'][-3000:]
    assert_chief_checkpointed(logs['worker:0'], train_dir, reported)
    assert logs['ps:0'].rstrip().splitlines()[-1] == (
        'train_image_classifier.py: ps:0 stopped by SIGTERM: the chief has written its last '
        'checkpoint')
    # Worker 1 may still be starting (an asynchronous chief needs no other worker).
    assert re.fullmatch(r'train_image_classifier.py: stopped by SIGTERM (at global step \d+|'
                        r'before its first step); not checkpointed here',
                        logs['worker:1'].rstrip().splitlines()[-1]), logs['worker:1'][-3000:]
    assert 'exiting now' not in ''.join(logs.values())  # Nobody needed the grace period.
