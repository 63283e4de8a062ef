"""Kills tasks of a training cluster at random steps and checks that the job survives.

    python benchmarks/fault_injection.py [--kills 5] [--seed 0] [--max_number_of_steps 1000]
        [--num_ps_tasks 1] [--worker_replicas 2] [--max_restarts N] [--signals SIGKILL,SIGTERM]
        [--emulated_hosts [--partitions N] [--task_timeout_secs 20]]
        [--plan TASK[@FAULT],...] [--train_dir DIR] [--dataset_dir DIR] [--min_accuracy 0.9]
        [--time_limit_secs 900] [--json] [--verbose] [--keep] [-- TRAINING FLAGS...]

It runs `python -m deployment.launch --num_ps_tasks P --worker_replicas W --max_restarts N`
on train_image_classifier.py (lenet on the embedded digits, converted into a temporary
directory unless --dataset_dir is given, one clone per worker, a checkpoint every
--save_interval_secs=2 so that a lost ps task costs little), reads the launcher's output as
it comes, and kills --kills tasks one after the other: each a random task (ps:I or
worker:I; worker:0 is the chief) sent SIGKILL or SIGTERM, picked at random from --signals
(--plan fixes the tasks and signals instead), at the first progress line at or past a
target global step drawn at random (seeded) in each of --kills equal spans of the first
half of the run. The task's pid is that of the launcher's child process whose TF_CONFIG
names it. Before the next kill it waits until the launcher has restarted the task (the
whole job, for a ps task) and the new incarnation has trained (a progress line from it;
from the chief, for a ps task), and for a few more steps; no kill is made in the last 5%
of the run. A restarted worker takes 10-30 s to start here, while the others train on
alone: hence the default of 1000 steps for 5 kills.

Once the launcher exits, eval_image_classifier.py evaluates the last checkpoint. Prints on
stdout a summary (with --json, one JSON object instead, the text going to stderr): each
kill (task, signal, global step, the step a SIGTERMed worker stopped at, the checkpoint the
chief resumed from, how long until the task trained again), the launcher's restart lines,
whether the job survived (launcher exit code 0), the final checkpoint's global step and the
test accuracy; a line per kill and recovery goes to stderr as it happens (--verbose adds
the launcher's output). Exit code 0 when every kill was made, the job survived, no task
process outlived the launcher, the final checkpoint is at --max_number_of_steps and the
accuracy is at least --min_accuracy; 1 otherwise, with one line on stderr saying why (the
work directory, with the launcher's output in launch.log, is then kept); 2 for bad
arguments.

With --emulated_hosts the launcher runs each task on an emulated host of its own
(deployment.emulated_hosts; needs root), and --partitions N adds N partitions to the kills
(with the same seeded choice of tasks and steps, the kinds in random order): the task's host
is cut off (no reset: its packets vanish) for a random time, either shorter (0.2-0.7 x) or
longer (1.5-2.5 x) than --task_timeout_secs, then healed. A short one must heal with no
restart; after a long one, the tasks that need the host exit (code 75) and the launcher
restarts the whole job, which resumes once the host is back. A partition has recovered when
the chief trains after the heal (and after the restart, if there was one).

Everything is bounded by --time_limit_secs: on expiry, or on SIGINT/SIGTERM, the launcher
and every task are killed. The default run (5 kills, 1000 steps, 1 ps + 2 workers) takes
3-4 minutes on a shared 2-core machine (seed 0: 235 s, seed 5: 178 s), about 130 s of
it training; each restart costs 10-40 s.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import queue
import time

from arguments import at_least  # benchmarks/arguments.py
from deployment import emulated_hosts, launch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = os.path.basename(__file__)
SIGNALS = {'SIGKILL': signal.SIGKILL, 'SIGTERM': signal.SIGTERM}
PARTITION = 'PARTITION'  # The fault that cuts a task's host off, in --plan and the summary.
ENV = {name: value for name, value in os.environ.items() if name != 'TF_CONFIG'}
FIND_TASK_SECS = 30.0  # How long a task to kill may be missing (restarting) before an error.
SCAN_SECS = 1.0  # How often the launcher's children are recorded, to find leftovers at the end.

# Lines of the launcher's output (task lines are prefixed '[worker:0] ').
TASK_LINE = re.compile(r'\[(\w+:\d+)\] (.*)')
RESTART = re.compile(r'launch\.py: (\w+:\d+) ended \((.*)\); restarting (it|the whole job) '
                     r'\(restart (\d+) of (\d+)\)')
STEP = re.compile(r'[IWE] \S+ step (\d+): loss = ')
PLACEMENT = re.compile(r'[IWE] \S+ Placement:$')  # A worker's first line: an incarnation starts.
SERVING = re.compile(r'[IWE] \S+ ps:\d+ serving at ')  # A ps task's first line.
HOSTS = re.compile(r'launch\.py: emulated hosts (\S+): ')
RESUMING = re.compile(r'[IWE] \S+ Resuming from \S*-(\d+)\b')
STOPPED = re.compile(r'\S+: stopped by SIGTERM at global step (\d+)')
FINISHED = re.compile(r'[IWE] \S+ Finished training at global step (\d+) after (\d+) steps')


class Failure(Exception):
    """The run failed; the message is one line."""


# ---- Processes ----

def _proc_stat(pid):
    """(state, ppid, start time) of process `pid` from /proc; None if it is gone."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return fields[0], int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def _all_stats():
    """{pid: (state, ppid, start time)} of every process."""
    stats = {}
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat:
                stats[int(entry)] = stat
    return stats


def _task_of(pid):
    """'ps:0', 'worker:1', ... from the TF_CONFIG in process `pid`'s environment; None."""
    try:
        with open(f'/proc/{pid}/environ', 'rb') as f:
            variables = f.read().split(b'\0')
        for variable in variables:
            if variable.startswith(b'TF_CONFIG='):
                task = json.loads(variable[len(b'TF_CONFIG='):])['task']
                return f'{task["type"]}:{task["index"]}'
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def task_processes(launcher_pid):
    """{task: (pid, start time)} of the launcher's live (not zombie) child processes."""
    found = {}
    for pid, (state, ppid, started) in _all_stats().items():
        if ppid == launcher_pid and state != 'Z':
            task = _task_of(pid)
            if task:
                found[task] = (pid, started)
    return found


def descendants(pid):
    """The pids of every descendant of process `pid`, children first."""
    children = {}
    for child, (_, ppid, _) in _all_stats().items():
        children.setdefault(ppid, []).append(child)
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in children.get(parent, ())]
        found += frontier
    return found


def _kill_group_and_process(pid):
    for kill in (os.killpg, os.kill):  # A task leads its own process group (and session).
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_everything(launcher):
    """SIGKILLs the launcher's process group and every descendant's group (the tasks run in
    sessions of their own); the launcher is stopped first so it starts no task meanwhile."""
    if launcher.poll() is None:
        try:
            os.kill(launcher.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
        for pid in descendants(launcher.pid):
            _kill_group_and_process(pid)
        _kill_group_and_process(launcher.pid)
    launcher.wait()


# ---- The job and its output ----

class Job:
    """The launcher's process and what its output told so far. Threads queue its stdout and
    stderr lines; pump() takes them in the main thread, writes them to `log` and records
    progress, restarts, resumes and ends."""

    def __init__(self, argv, log, echo):
        self.log = log
        self.echo = echo
        self.process = subprocess.Popen(argv, cwd=REPO, env=ENV, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        start_new_session=True)
        self._lines = queue.Queue()
        self._open = 2
        for stream in (self.process.stdout, self.process.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()
        self.count = 0  # Lines taken so far: the number of the last one.
        self.step = None  # The global step of the last progress line of any task.
        self.started = {}  # {task: number of the line its latest incarnation started with}.
        self.stepped = {}  # {task: number of its last progress line}.
        self.restarts = []  # [(line number, task, 'it' or 'the whole job', line)].
        self.resumed = []  # [(line number, task, checkpoint step)].
        self.stopped = []  # [(line number, task, global step)]: stopped by SIGTERM.
        self.finished = {}  # {task: (final global step, steps its last incarnation ran)}.
        self.seen = {}  # {(pid, start time): task} of every task process seen.
        self.hosts = None  # The launcher's emulated_hosts.EmulatedHosts, once it said so.
        self._scanned = 0.0

    def _read(self, stream):
        with stream:
            for line in stream:
                self._lines.put(line.decode(errors='replace').rstrip('\n'))
        self._lines.put(None)

    @property
    def ended(self):
        """Whether the launcher exited and all its output was taken."""
        return self._open == 0 and self.process.poll() is not None

    def pump(self, timeout):
        """Takes the lines that come within `timeout` seconds (at least one wait)."""
        deadline = time.monotonic() + timeout
        while self._open:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                self._open -= 1
            else:
                self._take(line)
        if self._open == 0:
            try:
                self.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        if time.monotonic() - self._scanned > SCAN_SECS and self.process.poll() is None:
            self._scanned = time.monotonic()
            self.record_tasks()

    def record_tasks(self):
        """{task: pid} of the launcher's children now, remembered for leftovers()."""
        processes = task_processes(self.process.pid)
        self.seen.update({process: task for task, process in processes.items()})
        return {task: pid for task, (pid, _) in processes.items()}

    def leftovers(self, wait_secs=5.0):
        """Task processes seen during the run that still live, SIGKILLed here; waits up to
        `wait_secs` for them to be gone."""
        def alive(pid, started):
            stat = _proc_stat(pid)
            return stat is not None and stat[2] == started and stat[0] != 'Z'

        left = [(pid, started, task) for (pid, started), task in sorted(self.seen.items())
                if alive(pid, started)]
        for pid, _, _ in left:
            _kill_group_and_process(pid)
        deadline = time.monotonic() + wait_secs
        while any(alive(pid, started) for pid, started, _ in left) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        return [f'{task} (pid {pid})' for pid, _, task in left]

    def _take(self, line):
        self.count += 1
        self.log.write(line + '\n')
        if self.echo:
            print(line, file=sys.stderr, flush=True)
        hosts = HOSTS.match(line)
        if hosts:
            self.hosts = emulated_hosts.EmulatedHosts.attach(hosts[1])
            return
        restart = RESTART.fullmatch(line)
        if restart:
            self.restarts.append((self.count, restart[1], restart[3], line))
            return
        match = TASK_LINE.fullmatch(line)
        if not match:
            return
        task, text = match.groups()
        if PLACEMENT.match(text) or SERVING.match(text):
            self.started[task] = self.count
        elif STEP.match(text):
            self.step = int(STEP.match(text)[1])
            self.stepped[task] = self.count
        elif RESUMING.match(text):
            self.resumed.append((self.count, task, int(RESUMING.match(text)[1])))
        elif STOPPED.match(text):
            self.stopped.append((self.count, task, int(STOPPED.match(text)[1])))
        elif FINISHED.match(text):
            self.finished[task] = tuple(map(int, FINISHED.match(text).groups()))

    def trained_since(self, task, line_number):
        """Whether `task` started a new incarnation after line `line_number` and that
        incarnation logged progress."""
        started = self.started.get(task, 0)
        return started > line_number and self.stepped.get(task, 0) > started


# ---- The run ----

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


def launcher_argv(args, train_dir, dataset_dir):
    hosts = ['--emulated_hosts'] if args.emulated_hosts else []
    return [sys.executable, '-m', 'deployment.launch', f'--num_ps_tasks={args.num_ps_tasks}',
            f'--worker_replicas={args.worker_replicas}', f'--max_restarts={args.max_restarts}',
            *hosts, '--', sys.executable, os.path.join(REPO, 'train_image_classifier.py'),
            f'--task_timeout_secs={args.task_timeout_secs}',
            f'--train_dir={train_dir}', f'--dataset_dir={dataset_dir}', '--dataset_name=digits',
            '--model_name=lenet', '--num_clones=1', f'--batch_size={args.batch_size}',
            f'--log_every_n_steps={args.log_every_n_steps}',
            f'--max_number_of_steps={args.max_number_of_steps}',
            f'--save_interval_secs={args.save_interval_secs}', *args.training_flags]


def say(text):
    print(f'{PROG}: {text}', file=sys.stderr, flush=True)


class Injector:
    """Makes the planned kills and partitions as `job`'s global step reaches each target;
    a partition lasts partition_secs(partition_timeout, rng)."""

    def __init__(self, job, plan, started, deadline, recovery_timeout, last_kill_step, gap,
                 partition_timeout=None, rng=None):
        self.job = job
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
        """Injects until the launcher exits; Failure when the time limit passes or a task
        does not recover in time."""
        job = self.job
        while not job.ended:
            now = time.monotonic()
            if now > self.deadline:
                raise Failure('time limit reached')
            job.pump(min(0.2, max(0.0, self.deadline - now)))
            running = job.process.poll() is None  # Else only output is left to take.
            if self._heal and time.monotonic() >= self._heal[0]:
                job.hosts.heal(self._heal[1])
                self._pending['healed_line'] = job.count
                say(f'kill {len(self.kills)}: healed {self._heal[1]} at global step {job.step}')
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
                raise Failure(f'no process of {task} to kill found for {FIND_TASK_SECS:g} s '
                              f'at global step {job.step}')
            return
        self._missing_since = None
        try:
            os.kill(pid, SIGNALS[name])
        except ProcessLookupError:
            return  # It ended just now: the next loop looks again.
        self._made(target, task, name, pid=pid)
        say(f'kill {len(self.kills)}: {name} to {task} (pid {pid}) at global step {job.step}')

    def _partition(self, target, task):
        host = launch.host_name(task)
        seconds = partition_secs(self._partition_timeout, self._rng)
        self.job.hosts.partition(host)
        self._heal = (time.monotonic() + seconds, host)
        self._made(target, task, PARTITION, partition_secs=seconds, healed_line=None)
        say(f'kill {len(self.kills)}: cut {host} off for {seconds:g} s at global step '
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
        say(f'kill {len(self.kills)}: {watched} trains again {kill["recovery_secs"]:g} s after '
            f'the kill, at global step {job.step}')
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
                    say(f'warning: after the kill of {task} the launcher restarted '
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
            raise Failure(f'{watched} {what} within {self.recovery_timeout:g} s of the kill of '
                          f'{task} (see --recovery_timeout_secs)')


def final_checkpoint_step(train_dir):
    """The global step of the checkpoint train_dir's 'checkpoint' file names; None."""
    try:
        with open(os.path.join(train_dir, 'checkpoint')) as f:
            match = re.search(r'^model_checkpoint_path: "(?:.*/)?[^"/]*-(\d+)"', f.read(), re.M)
    except OSError:
        return None
    return int(match[1]) if match else None


def evaluate(train_dir, timeout):
    """(accuracy, global step evaluated) by eval_image_classifier.py; Failure if it fails."""
    eval_dir = os.path.join(train_dir, 'eval')
    try:
        result = subprocess.run(
            [sys.executable, os.path.join(REPO, 'eval_image_classifier.py'),
             f'--checkpoint_path={train_dir}', f'--eval_dir={eval_dir}'],
            cwd=REPO, env=ENV, capture_output=True, text=True, timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        raise Failure('time limit reached while evaluating') from None
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ['no output'])[-1]
        raise Failure(f'eval_image_classifier.py failed (exit code {result.returncode}): {last}')
    with open(os.path.join(eval_dir, 'metrics.json')) as f:
        metrics = json.load(f)
    return metrics['accuracy'], metrics['global_step']


def prepare_digits(directory):
    """Converts the embedded digits into `directory`; returns it."""
    from image_classifier import quiet
    quiet.start()  # Before TensorFlow is imported.
    from datasets import digits
    return digits.prepare(directory)


def fault_injection(args, work_dir):
    """Runs the job with its kills and evaluates it; returns the summary (a JSON-able dict),
    its 'failure' a one-line reason or None."""
    started = time.monotonic()
    deadline = started + args.time_limit_secs
    rng = random.Random(args.seed)
    plan = kill_plan(args, rng)
    train_dir = args.train_dir or os.path.join(work_dir, 'train')
    summary = {
        'num_ps_tasks': args.num_ps_tasks, 'worker_replicas': args.worker_replicas,
        'max_number_of_steps': args.max_number_of_steps, 'max_restarts': args.max_restarts,
        'seed': args.seed, 'kills_planned': [{'target_step': step, 'task': task, 'signal': name}
                                             for step, task, name in plan],
        'kills': [], 'restarts': [], 'finished': {}, 'launcher_exit_code': None,
        'survived': False,
        'final_checkpoint_step': None, 'accuracy': None, 'evaluated_step': None,
        'min_accuracy': args.min_accuracy, 'leftover_processes': [],
        'train_dir': train_dir, 'log': os.path.join(work_dir, 'launch.log'),
        'seconds': None, 'failure': None}
    job = None
    try:
        dataset_dir = args.dataset_dir or prepare_digits(os.path.join(work_dir, 'digits'))
        with open(summary['log'], 'w') as log:
            job = Job(launcher_argv(args, train_dir, dataset_dir), log, args.verbose)
            say(f'launcher pid {job.process.pid}: {args.num_ps_tasks} ps + '
                f'{args.worker_replicas} workers, {args.max_number_of_steps} steps, '
                f'{len(plan)} kills planned at global steps {[p[0] for p in plan]}')
            injector = Injector(job, plan, started, deadline, args.recovery_timeout_secs,
                                last_kill_step=kill_window(args)[1],
                                gap=2 * args.log_every_n_steps,
                                partition_timeout=args.task_timeout_secs, rng=rng)
            try:
                injector.run()
            finally:
                summary['kills'] = [{k: v for k, v in kill.items()
                                     if k not in ('line', 'restart_line')}
                                    for kill in injector.kills]
                summary['restarts'] = [r[3] for r in job.restarts]
                summary['finished'] = {task: {'global_step': step, 'steps_here': here}
                                       for task, (step, here) in sorted(job.finished.items())}
                exited = job.process.poll() is not None  # By itself, not killed here.
                kill_everything(job.process)
                left = job.leftovers()
                if exited:  # Otherwise they were being killed with the launcher.
                    summary['leftover_processes'] = left
                summary['final_checkpoint_step'] = final_checkpoint_step(train_dir)
        code = summary['launcher_exit_code'] = job.process.returncode
        summary['survived'] = code == 0
        if summary['final_checkpoint_step'] is not None:
            summary['accuracy'], summary['evaluated_step'] = evaluate(
                train_dir, deadline - time.monotonic())
        summary['failure'] = verdict(summary, len(plan))
    except Failure as e:
        made = len(summary['kills'])
        summary['failure'] = (f'{e} ({args.time_limit_secs:g} s, --time_limit_secs) after '
                              f'{made} of {len(plan)} kills' if str(e) == 'time limit reached'
                              else str(e))
    finally:
        if job is not None and job.process.poll() is None:
            kill_everything(job.process)
        summary['seconds'] = round(time.monotonic() - started, 1)
    return summary


def verdict(summary, planned):
    """Why the run failed, in one line; None when it passed."""
    if not summary['survived']:
        return (f'the job did not survive: the launcher exited with code '
                f'{summary["launcher_exit_code"]} after {len(summary["restarts"])} restarts')
    if len(summary['kills']) < planned:
        return (f'only {len(summary["kills"])} of the {planned} kills were made before '
                'training neared its end (a restarted worker takes long to start while the '
                'others train on: raise --max_number_of_steps)')
    if summary['leftover_processes']:
        return f'processes left running after the launcher exited: ' \
               f'{", ".join(summary["leftover_processes"])}'
    step, last = summary['final_checkpoint_step'], summary['max_number_of_steps']
    if step != last:
        return f'the final checkpoint is at global step {step}, not {last}'
    if summary['accuracy'] < summary['min_accuracy']:
        return (f'accuracy {summary["accuracy"]:.4f} is below --min_accuracy '
                f'{summary["min_accuracy"]:g}')
    return None


def report(summary):
    """The summary as printable lines."""
    s = summary
    lines = [f"{s['num_ps_tasks']} ps + {s['worker_replicas']} workers, "
             f"{s['max_number_of_steps']} steps, --max_restarts {s['max_restarts']}, "
             f"seed {s['seed']}: {len(s['kills'])} of {len(s['kills_planned'])} kills made"]
    for i, kill in enumerate(s['kills'], 1):
        facts = [f"kill {i}: {kill['task']:<9} {kill['signal']:<7} at global step "
                 f"{kill['step']} (target {kill['target_step']}, {kill['seconds']:g} s)"]
        if kill['signal'] == PARTITION:
            facts.append(f"cut off for {kill['partition_secs']:g} s")
        if kill['stopped_at'] is not None:
            facts.append(f"stopped at step {kill['stopped_at']}")
        if kill['resumed_from'] is not None:
            facts.append(f"chief resumed from checkpoint step {kill['resumed_from']}")
        if kill['recovery_secs'] is not None:
            watched = 'the chief' if kill['task'].startswith('ps:') else kill['task']
            facts.append(f"{watched} trained again after {kill['recovery_secs']:g} s")
        else:
            facts.append('no restarted incarnation trained before the end')
        lines.append('; '.join(facts))
    lines.append(f"launcher restarts: {len(s['restarts'])}")
    lines += [f'  {line}' for line in s['restarts']]
    code = s['launcher_exit_code']
    lines.append('launcher: ' + (f'killed by {PROG}' if code is None else
                                 f'exit code {code}' + (' (survived)' if code == 0 else '')))
    lines.append(f"final checkpoint: global step {s['final_checkpoint_step']} of "
                 f"{s['max_number_of_steps']}")
    if s['accuracy'] is not None:
        lines.append(f"accuracy: {s['accuracy']:.4f} at global step {s['evaluated_step']} "
                     f"(--min_accuracy {s['min_accuracy']:g})")
    if s['leftover_processes']:
        lines.append(f"leftover processes (killed): {', '.join(s['leftover_processes'])}")
    lines.append(f"took {s['seconds']:g} s; train_dir {s['train_dir']}")
    lines.append('result: ' + ('passed' if s['failure'] is None else f"FAILED: {s['failure']}"))
    return lines


# ---- Command line ----

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


def parse_args(argv):
    split = argv.index('--') if '--' in argv else len(argv)
    parser = argparse.ArgumentParser(
        usage='%(prog)s [options] [-- TRAINING FLAGS...]',
        description=__doc__.splitlines()[0] + ' Flags after "--" go to '
                    'train_image_classifier.py.')
    parser.add_argument('--num_ps_tasks', metavar='P', type=at_least(1), default=1,
                        help='ps tasks (default 1)')
    parser.add_argument('--worker_replicas', metavar='W', type=at_least(1), default=2,
                        help='worker tasks, worker:0 the chief (default 2)')
    parser.add_argument('--max_number_of_steps', metavar='STEPS', type=at_least(20),
                        default=1000,
                        help='global step training stops at (default 1000: a worker kill lets '
                             'the others train 100-250 steps alone while it restarts)')
    parser.add_argument('--kills', metavar='N', type=at_least(0), default=None,
                        help='kills to make (default 5, or the length of --plan)')
    parser.add_argument('--plan', type=plan_list, default=None, metavar='TASK[@FAULT],...',
                        help='the tasks to kill (or cut off), in order, e.g. '
                             'worker:1,ps:0@SIGTERM,ps:0@PARTITION (a signal left out is '
                             'picked from --signals); default: random tasks')
    parser.add_argument('--emulated_hosts', action='store_true',
                        help='run each task on an emulated host of its own (needs root)')
    parser.add_argument('--partitions', metavar='N', type=at_least(0), default=0,
                        help='partitions to make besides the kills (needs --emulated_hosts; '
                             'default 0)')
    parser.add_argument('--task_timeout_secs', metavar='SECS', type=at_least(1.0, float),
                        default=20.0,
                        help="the trainer's --task_timeout_secs (default 20)")
    parser.add_argument('--signals', type=signal_list, default=['SIGKILL', 'SIGTERM'],
                        metavar='SIGNAL,...',
                        help='signals a kill picks from at random (default SIGKILL,SIGTERM)')
    parser.add_argument('--max_restarts', metavar='N', type=at_least(0), default=None,
                        help="the launcher's --max_restarts (default: kills + partitions + 2)")
    parser.add_argument('--seed', metavar='N', type=int, default=0,
                        help='seed of the kill steps, tasks and signals (default 0)')
    parser.add_argument('--batch_size', metavar='N', type=at_least(1), default=32,
                        help='examples per worker and step (default 32)')
    parser.add_argument('--log_every_n_steps', metavar='N', type=at_least(1), default=5,
                        help='steps between progress lines of each worker (default 5)')
    parser.add_argument('--save_interval_secs', metavar='SECS', type=at_least(1), default=2,
                        help="seconds between the chief's checkpoints (default 2)")
    parser.add_argument('--train_dir', metavar='DIR', default=None,
                        help='where training writes (must be new or empty; default: in a '
                             'temporary work directory)')
    parser.add_argument('--dataset_dir', metavar='DIR', default=None,
                        help='converted digits (default: converted into the work directory)')
    parser.add_argument('--min_accuracy', metavar='A', type=float, default=0.9,
                        help='test accuracy the final checkpoint must reach (default 0.9)')
    parser.add_argument('--time_limit_secs', metavar='SECS', type=at_least(1.0, float),
                        default=900.0,
                        help='bound on the whole run, seconds (default 900)')
    parser.add_argument('--recovery_timeout_secs', metavar='SECS', type=at_least(1.0, float),
                        default=240.0,
                        help='longest wait, after a kill, for the task to train again '
                             '(default 240)')
    parser.add_argument('--json', action='store_true',
                        help='print the summary as one JSON object (the text goes to stderr)')
    parser.add_argument('--verbose', action='store_true',
                        help="echo the launcher's output to stderr")
    parser.add_argument('--keep', action='store_true',
                        help='keep the work directory (kept anyway when the run fails)')
    args = parser.parse_args(argv[:split])
    args.training_flags = argv[split + 1:]
    if not args.emulated_hosts and (args.partitions or (args.plan and any(
            fault == PARTITION for _, fault in args.plan))):
        parser.error('partitions need --emulated_hosts')
    if args.plan:
        if args.partitions:
            parser.error('--partitions and --plan exclude each other: name them in --plan')
        if args.kills is not None and args.kills != len(args.plan):
            parser.error(f'--kills {args.kills} disagrees with the {len(args.plan)} kills of '
                         '--plan')
        for task, _ in args.plan:
            job, index = task.split(':')
            count = args.num_ps_tasks if job == 'ps' else args.worker_replicas
            if int(index) >= count:
                parser.error(f'--plan names {task}, but the cluster has {count} {job} tasks')
        args.kills = len(args.plan)
    elif args.kills is None:
        args.kills = 5
    if args.max_restarts is None:
        args.max_restarts = args.kills + args.partitions + 2
    if args.train_dir and os.path.exists(args.train_dir) and (
            not os.path.isdir(args.train_dir) or os.listdir(args.train_dir)):
        parser.error(f'--train_dir {args.train_dir} is not an empty directory: give a new one')
    for name in ('train_dir', 'dataset_dir'):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work_dir = tempfile.mkdtemp(prefix='fault_injection-')
    try:
        summary = fault_injection(args, work_dir)
    except KeyboardInterrupt:
        print(f'{PROG}: interrupted; every process was killed (work directory {work_dir})',
              file=sys.stderr)
        return 128 + signal.SIGINT
    lines = report(summary)
    if args.json:
        print('\n'.join(lines), file=sys.stderr)
        print(json.dumps(summary))
    else:
        print('\n'.join(lines))
    sys.stdout.flush()
    if summary['failure']:
        print(f'{PROG}: error: {summary["failure"]} (launcher output: {summary["log"]})',
              file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
