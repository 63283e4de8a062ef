"""The faults fault_injection.py makes to a training job run by the launcher
(harness.LaunchedJob), and how it follows each one until the job trains again.

A fault is a signal (SIGKILL or SIGTERM) to a task's process, or a PARTITION: the task's
emulated host cut off for a while, then healed. kill_plan() draws the faults of a run and
the global steps to make them at; the Injector makes them as the job reaches those steps,
one at a time, each once the previous one's task trains again. `--plan` items and
`--signals` are parsed here (plan_list, signal_list).
"""
import argparse
import os
import re
import signal
import time

from benchmarks.harness import BenchmarkError
from slim_deploy.cluster import launch

SIGNALS = {'SIGKILL': signal.SIGKILL, 'SIGTERM': signal.SIGTERM}
PARTITION = 'PARTITION'  # The fault that cuts a task's host off, in --plan and the summary.
FIND_TASK_SECS = 30.0  # How long a task to kill may be missing (restarting) before an error.


def signal_name(text):
    """'KILL', 'sigterm', 'SIGKILL' -> 'SIGKILL' or 'SIGTERM'; ValueError otherwise."""
    name = text.strip().upper()
    name = name if name.startswith('SIG') else 'SIG' + name
    if name not in SIGNALS:
        raise ValueError(f'signal must be SIGKILL or SIGTERM, got {text!r}')
    return name


def signal_list(text):
    try:
        return [signal_name(item) for item in text.split(',')]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def plan_list(text):
    """'worker:1,ps:0@SIGTERM,ps:0@PARTITION' -> [('worker:1', None), ('ps:0', 'SIGTERM'),
    ('ps:0', 'PARTITION')]."""
    plan = []
    for item in text.split(','):
        task, _, name = item.strip().partition('@')
        if not re.fullmatch(r'(ps|worker):\d+', task):
            raise argparse.ArgumentTypeError(f'{item.strip()!r} is not TASK[@FAULT] with TASK '
                                             'ps:I or worker:I')
        try:
            fault = PARTITION if name.strip().upper() == PARTITION else (
                signal_name(name) if name else None)
            plan.append((task, fault))
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return plan


def kill_window(args):
    """(first, last) global steps at which kills may be made: after the first progress lines,
    and before the end, for the last kill to lead to a restart."""
    first = max(2 * args.log_every_n_steps, args.max_number_of_steps // 20)
    last = args.max_number_of_steps - max(3 * args.log_every_n_steps,
                                          args.max_number_of_steps // 20)
    return first, last


def kill_plan(args, rng):
    """[(target global step, task, signal name or PARTITION)] for the run, steps increasing:
    each fault is made at the first progress line at or past its target, once the previous
    one's task trains again (Injector)."""
    tasks = ([f'ps:{i}' for i in range(args.num_ps_tasks)] +
             [f'worker:{i}' for i in range(args.worker_replicas)])
    if args.plan:
        chosen = [(task, name or rng.choice(args.signals)) for task, name in args.plan]
    else:
        faults = [None] * args.kills + [PARTITION] * args.partitions
        rng.shuffle(faults)
        chosen = [(rng.choice(tasks), fault or rng.choice(args.signals)) for fault in faults]
    # One target in each of len(chosen) equal spans of the first half of the window: a
    # restarted worker takes many seconds to start, while the others train on, so kills
    # tend to come later than their targets.
    low, last = kill_window(args)
    width = max(1, (low + last) // 2 - low) / max(1, len(chosen))
    return [(int(low + width * (i + rng.random())), task, name)
            for i, (task, name) in enumerate(chosen)]


def partition_secs(timeout, rng):
    """How long a partition lasts: shorter or longer than `timeout` seconds, at random."""
    return round(timeout * rng.choice([rng.uniform(0.2, 0.7), rng.uniform(1.5, 2.5)]), 1)


class Injector:
    """Makes the planned kills and partitions as `job`'s global step reaches each target;
    a partition lasts partition_secs(partition_timeout, rng). say(text) reports each fault
    and recovery in a line."""

    def __init__(self, job, plan, started, deadline, recovery_timeout, last_kill_step, gap,
                 say, partition_timeout, rng):
        self.job = job
        self.say = say
        self.plan = list(plan)
        self.last_kill_step = last_kill_step  # No kill from this global step on.
        self.gap = gap  # Steps the job makes between a recovery and the next kill, at least.
        self._not_before = 0
        self.started = started
        self.deadline = deadline
        self.recovery_timeout = recovery_timeout
        self.kills = []  # One dict per kill made.
        self._pending = None  # The kill awaiting its task's restart and progress.
        self._missing_since = None
        self._partition_timeout = partition_timeout
        self._rng = rng
        self._heal = None  # (time.monotonic() to heal at, host) of the partition in force.

    def run(self):
        """Injects until the launcher exits; BenchmarkError when the time limit passes or a
        task does not recover in time."""
        job = self.job
        while not job.ended:
            now = time.monotonic()
            if now > self.deadline:
                raise BenchmarkError('time limit reached')
            job.pump(min(0.2, max(0.0, self.deadline - now)))
            running = job.process.poll() is None  # Else only output is left to take.
            if self._heal and time.monotonic() >= self._heal[0]:
                job.hosts.heal(self._heal[1])
                self._pending['healed_line'] = job.count
                self.say(f'kill {len(self.kills)}: healed {self._heal[1]} at global step '
                         f'{job.step}')
                self._heal = None
            if self._pending:
                self._follow(self._pending, running)
            elif (running and self.plan and job.step is not None
                  and self.last_kill_step > job.step >= max(self.plan[0][0], self._not_before)):
                self._kill(*self.plan[0])

    def _kill(self, target, task, name):
        if name == PARTITION:
            return self._partition(target, task)
        job = self.job
        pid = job.record_tasks().get(task)
        if pid is None:  # Between incarnations, or finished.
            self._missing_since = self._missing_since or time.monotonic()
            if time.monotonic() - self._missing_since > FIND_TASK_SECS:
                raise BenchmarkError(f'no process of {task} to kill found for '
                                     f'{FIND_TASK_SECS:g} s at global step {job.step}')
            return
        self._missing_since = None
        try:
            os.kill(pid, SIGNALS[name])
        except ProcessLookupError:
            return  # It ended just now: the next loop looks again.
        self._made(target, task, name, pid=pid)
        self.say(f'kill {len(self.kills)}: {name} to {task} (pid {pid}) at global step {job.step}')

    def _partition(self, target, task):
        host = launch.emulated_host(task)
        seconds = partition_secs(self._partition_timeout, self._rng)
        self.job.hosts.partition(host)
        self._heal = (time.monotonic() + seconds, host)
        self._made(target, task, PARTITION, partition_secs=seconds, healed_line=None)
        self.say(f'kill {len(self.kills)}: cut {host} off for {seconds:g} s at global step '
                 f'{self.job.step}')

    def _made(self, target, task, name, **facts):
        """Records the fault just made; it is pending until recovered (_follow)."""
        self.plan.pop(0)
        kill = {'task': task, 'signal': name, 'target_step': target, 'step': self.job.step,
                'seconds': round(time.monotonic() - self.started, 1),
                'restart': None, 'stopped_at': None, 'resumed_from': None,
                'recovery_secs': None, 'line': self.job.count, **facts}
        self.kills.append(kill)
        self._pending = kill

    def _recovered(self, kill, watched):
        job = self.job
        kill['recovery_secs'] = round(time.monotonic() - self.started - kill['seconds'], 1)
        self.say(f'kill {len(self.kills)}: {watched} trains again {kill["recovery_secs"]:g} s '
                 f'after the kill, at global step {job.step}')
        self._pending = None
        self._not_before = job.step + self.gap

    def _follow(self, kill, running):
        """Records what the kill led to; clears _pending once the task trained again.
        `running`: whether the launcher still runs (else no recovery is waited for)."""
        job = self.job
        task = kill['task']
        if kill['stopped_at'] is None:
            kill['stopped_at'] = next((step for number, stopper, step in job.stopped
                                       if number > kill['line'] and stopper == task), None)
        if kill['restart'] is None:
            restart = next((r for r in job.restarts if r[0] > kill['line']), None)
            if restart:
                kill['restart'] = restart[3]
                kill['restart_line'] = restart[0]
                if restart[1] != task:
                    self.say(f'warning: after the kill of {task} the launcher restarted '
                             f'{restart[1]}: {restart[3]}')
        watched = task if task.startswith('worker:') else 'worker:0'
        if kill['signal'] == PARTITION:  # The chief trains after the heal.
            watched = 'worker:0'
            if kill['healed_line'] is not None and kill['restart'] is None and (
                    job.stepped.get(watched, 0) > kill['healed_line']):
                return self._recovered(kill, watched)
        healed = kill.get('healed_line', 0)  # A kill needs no heal.
        if kill['restart'] is not None and healed is not None:
            if kill['resumed_from'] is None:
                kill['resumed_from'] = next(
                    (step for number, resumer, step in job.resumed
                     if number > kill['restart_line'] and resumer == 'worker:0'), None)
            if (job.trained_since(watched, kill['restart_line'])
                    and job.stepped.get(watched, 0) > healed):
                return self._recovered(kill, watched)
        waited = time.monotonic() - self.started - kill['seconds']
        if running and waited > self.recovery_timeout:
            what = 'was not restarted' if kill['restart'] is None else 'did not train again'
            raise BenchmarkError(f'{watched} {what} within {self.recovery_timeout:g} s of the '
                                 f'kill of {task} (see --recovery_timeout_secs)')
