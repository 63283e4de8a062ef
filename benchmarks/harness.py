"""What the benchmark scripts share: the processes they start and watch (on this machine or on
emulated hosts), rounds of measurements and their statistics, and the command line.
Standard library and TensorFlow-free project modules only. The scripts run as modules of the
benchmarks package (`python -m benchmarks.throughput`) and import it as
`from benchmarks import harness`.

Role processes: a benchmark whose measured work runs in processes of its own starts its own
module again as a role, and drives each such process by JSON lines, a command per line on
its stdin and a reply per line on its stdout:

    processes = Processes(directory, timeout_secs, hosts=None)
    worker = processes.start(name, role_command(__spec__.name, role, args, OPTIONS), env, host)
    (ready,) = processes.collect([worker], 'start')      # each one's next reply
    worker.send(steps=10)
    processes.close()                                    # in a finally: ends them all

  Processes(directory, timeout_secs, hosts): every process the benchmark starts, each
    one's stderr in a file of `directory`, which is its TMPDIR too (TensorFlow's autograph
    writes modules there that a process ending by os._exit, as role processes do, leaves
    behind); hosts: the slim_deploy.cluster.emulated_hosts.EmulatedHosts that
    start(host=...) runs on (None: this machine only).
  start(name, argv, env=None, host=None) -> Process: argv in the environment() plus `env`
    (a dict), with REPO first on its PYTHONPATH (the benchmarks package found from any
    directory), on emulated host `host` of `hosts` (None: this machine); `name` names it in
    errors. Process.send(**command) writes one command.
  collect(processes, waiting_for) -> [reply (a dict)]: the next reply of each, in their
    order. BenchmarkError when any process of the benchmark fails or ends (naming it, with
    its error reply or the last line of its stderr), or when they have not all replied
    within timeout_secs (`waiting_for` says what they did not do: 'run 10 steps').
  close(): closes every stdin; what still runs GRACE_SECS later is killed.
  role_command(module, role, args, options) -> argv: `python -m module --role JSON(role)`
    and, from the argparse namespace `args`, each of `options` that is not None; a script
    gives its own module as __spec__.name (its __name__ is '__main__').
  In the role process, serve_role(serve) runs serve(reply, commands): reply(**message)
    sends a reply, `commands` yields each command (a dict) until the benchmark closes its
    stdin. An exception is replied as {'error': its first line} and ends the process with
    exit code 1; anything else printed on stdout goes to stderr, the log; the process dies
    with the benchmark (Linux). Never returns.
  A cluster on emulated hosts (needs root): with EmulatedHosts(launch.emulated_host_names(P, W),
    bandwidth='1gbit') as hosts, Processes(directory, timeout_secs, hosts), the tasks'
    addresses launch.emulated_cluster_spec(hosts, P, W), and each task started with
    host=launch.emulated_host('worker:0'). What training role processes run (deploy() and
    tf.distribute trainers) is in trainers.py: serve_role(lambda reply, commands:
    trainers.serve(args, role, started, reply, commands)).

A training job through the launcher: LaunchedJob(launcher_options, training_flags, log,
echo) runs `python -m slim_deploy.cluster.launch OPTIONS -- python train_image_classifier.py
FLAGS`; pump(timeout) takes its output lines (into `log`, and onto stderr if `echo`) and records
what they tell: the global step, each task's incarnations, progress (each progress line's
global step and the time it was taken), restarts, resumes, stops and ends, and with
--emulated_hosts the hosts (to partition and heal). record_tasks() -> {task: pid}; kill()
ends the launcher and every process under it; leftovers() names (and kills) the task
processes that outlived it. prepare_digits(directory) converts the embedded digits for the
job to train on; final_checkpoint_step() and evaluate() tell where a training run ended and
how accurate it is.

Rounds and statistics:
  rounds(names, count, measure, done=None) -> {name: [measure(name) of each round]}, every
    name measured once a round, in an order rotated by one each round, so that machine noise
    hits all alike; done(round number, from 1) after each round.
  median_spread(values) -> (median, (max - min) / median).
  ratios(values, baselines, name=str) -> {'name(A) / name(B)': values[A] / values[B]} for
    each key A of `values` (in order) and each B of baselines(A) (a list of keys) that is
    another key of `values`.

Command line: at_least(minimum, kind) and names_in(valid) are argparse types;
environment(extra) is os.environ without TF_CONFIG, plus `extra`; python() is the command
that runs Python in the processes a benchmark starts (`python -m module` of a role,
`python SCRIPT` of a launched job's task or an evaluation): $BENCHMARKS_PYTHON, split as a
shell splits it, when set (a wrapper, such as the tests' script server), else this
interpreter (the benchmark's own process and its launcher always run on this one);
exit_on_sigterm() makes SIGTERM end the program as SystemExit(143) (finally blocks run);
print_result(result, lines, as_json) prints the result as one JSON object or as lines;
BenchmarkError is a failure of the run, its message one line.
"""
import argparse
import ctypes
import json
import os
import queue
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

from slim_deploy.cluster import emulated_hosts, launch
from slim_deploy.image_classifier import verbosity

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRACE_SECS = 5.0  # How long role processes get to exit at the end before they are killed.
SCAN_SECS = 1.0  # How often a launched job's task processes are recorded.
PR_SET_PDEATHSIG = 1  # Linux prctl option: a signal for the process when its parent dies.


class BenchmarkError(Exception):
    """The run failed: a process failed or stopped answering, or a limit was reached; the
    message is one line."""


# ---- Command line ----

def at_least(minimum, kind=int):
    """argparse type: a number of `kind` >= minimum."""
    def number(text):
        value = kind(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f'must be >= {minimum}, got {value}')
        return value
    return number


def names_in(valid):
    """argparse type: a comma-separated list of names from `valid`, each once, in the order
    given."""
    def names(text):
        listed = [name.strip() for name in text.split(',') if name.strip()]
        unknown = [name for name in listed if name not in valid]
        if unknown or not listed:
            raise argparse.ArgumentTypeError(
                f'{",".join(unknown) or "nothing"} is not in {", ".join(valid)}')
        return list(dict.fromkeys(listed))
    return names


def require_emulated_hosts(parser):
    """Ends argparse `parser`'s parsing with its one-line error, naming what is missing,
    unless this machine can make emulated hosts with bandwidth limits."""
    try:
        emulated_hosts.check(bandwidth=True)
    except emulated_hosts.EmulatedHostsError as e:
        parser.error(str(e))


def python():
    """The command that runs Python in the processes a benchmark starts to train or evaluate
    (its roles, a launched job's tasks, evaluations): $BENCHMARKS_PYTHON split as a shell
    splits it (a wrapper that runs Python: the tests' script server), else this
    interpreter."""
    return shlex.split(os.environ.get('BENCHMARKS_PYTHON', '')) or [sys.executable]


def environment(extra=None):
    """os.environ without TF_CONFIG (a process's cluster is the benchmark's to give), plus
    `extra` (a dict; None: nothing)."""
    env = {name: value for name, value in os.environ.items() if name != 'TF_CONFIG'}
    env.update(extra or {})
    return env


def exit_on_sigterm():
    """Makes SIGTERM end this program as SystemExit(128 + SIGTERM): finally blocks run and
    end the processes it started."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def print_result(result, lines, as_json):
    """Prints `result` (a JSON-able dict) as one JSON object if `as_json`, else `lines`."""
    print(json.dumps(result) if as_json else '\n'.join(lines))


# ---- Rounds and statistics ----

def rounds(names, count, measure, done=None):
    """{name: [measure(name) of each round]} over `count` rounds; see the module docstring."""
    names = list(names)
    results = {name: [] for name in names}
    for index in range(count):
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            results[name].append(measure(name))
        if done:
            done(index + 1)
    return results


def median_spread(values):
    """(median of `values`, (max - min) / median)."""
    median = statistics.median(values)
    return median, (max(values) - min(values)) / median


def ratios(values, baselines, name=str):
    """{'name(A) / name(B)': values[A] / values[B]}; see the module docstring."""
    pairs = [(key, baseline) for key in values for baseline in baselines(key)]
    return {f'{name(a)} / {name(b)}': values[a] / values[b]
            for a, b in pairs if b != a and b in values}


# ---- Processes and their output ----

def forward_lines(stream, lines, source):
    """Starts a thread that puts (source, line) on the queue `lines` for each line of the
    binary `stream` (decoded, without its newline), then (source, None) at its end."""
    def forward():
        with stream:
            for line in stream:
                lines.put((source, line.decode(errors='replace').rstrip('\n')))
        lines.put((source, None))
    threading.Thread(target=forward, daemon=True).start()


def proc_stat(pid):
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
            stat = proc_stat(int(entry))
            if stat:
                stats[int(entry)] = stat
    return stats


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


def kill_group_and_process(pid):
    """SIGKILLs process `pid` and the process group it leads, if any."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(popen):
    """SIGKILLs process `popen` (a Popen), its group and every descendant's group (children
    that run in sessions of their own too); it is stopped first, so that it starts no
    process meanwhile. Waits for it."""
    if popen.poll() is None:
        try:
            os.kill(popen.pid, signal.SIGSTOP)
        except ProcessLookupError:
            pass
        for pid in descendants(popen.pid):
            kill_group_and_process(pid)
        kill_group_and_process(popen.pid)
    popen.wait()


# ---- Role processes ----

def role_command(module, role, args, options):
    """[python, '-m', module, '--role', JSON of `role`, '--OPTION', value, ...] for each of
    `options` whose value in `args` (an argparse namespace) is not None."""
    argv = [*python(), '-m', module, '--role', json.dumps(role)]
    for option in options:
        if getattr(args, option) is not None:
            argv += [f'--{option}', str(getattr(args, option))]
    return argv


def serve_role(serve):
    """The entry of a role process; see the module docstring. Never returns."""
    if sys.platform.startswith('linux'):  # Killed if the benchmark dies without ending it.
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    replies = os.fdopen(os.dup(1), 'w', buffering=1)
    os.dup2(2, 1)

    def reply(**message):
        replies.write(json.dumps(message) + '\n')

    try:
        serve(reply, (json.loads(line) for line in sys.stdin))
    except BaseException as e:  # noqa: BLE001 (reported, then the process ends)
        traceback.print_exc()
        first_line = (str(e).strip().splitlines() or [''])[0]
        reply(error=f'{type(e).__name__}: {first_line}')
        sys.stderr.flush()
        os._exit(1)
    sys.stderr.flush()
    os._exit(0)  # Without TensorFlow's teardown, which can block on a server's threads.


class Process:
    """A role process: `name` in messages, `popen`, its stderr in the file `log`; its
    replies go to the shared queue (None at its end)."""

    def __init__(self, name, argv, env, log, replies):
        self.name = name
        self.log = log
        self.error = None  # The one line it replied with when it failed.
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=log, env=env, start_new_session=True)
        forward_lines(self.popen.stdout, replies, self)

    def send(self, **command):
        try:
            self.popen.stdin.write((json.dumps(command) + '\n').encode())
            self.popen.stdin.flush()
        except OSError:
            raise BenchmarkError(self.failure()) from None

    def failure(self):
        """One line: why this process ended."""
        if self.error:
            return f'{self.name} failed: {self.error}'
        try:
            code = self.popen.wait(timeout=GRACE_SECS)
        except subprocess.TimeoutExpired:
            return f'{self.name} closed its output but is still running'
        self.log.flush()
        self.log.seek(0)
        lines = verbosity.drop_startup_noise(self.log.read().decode(errors='replace')).split('\n')
        last = next((line.strip() for line in reversed(lines) if line.strip()), 'no output')
        return f'{self.name} ended ({launch.exit_description(code)}): {last}'


class Processes:
    """Every role process of a benchmark; see the module docstring."""

    def __init__(self, directory, timeout_secs, hosts=None):
        self._directory = directory
        self._timeout = timeout_secs
        self._hosts = hosts
        self._replies = queue.Queue()
        self._all = []

    def start(self, name, argv, env=None, host=None):
        if host is not None:
            argv = self._hosts.command(host, argv)
        env = environment(env)
        env['PYTHONPATH'] = os.pathsep.join(filter(None, [REPO, env.get('PYTHONPATH')]))
        env['TMPDIR'] = self._directory
        log = tempfile.TemporaryFile(dir=self._directory)
        self._all.append(Process(name, argv, env, log, self._replies))
        return self._all[-1]

    def collect(self, processes, waiting_for):
        deadline = time.monotonic() + self._timeout
        replies = {}
        while len(replies) < len(processes):
            try:
                process, line = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                late = ', '.join(p.name for p in processes if p not in replies)
                raise BenchmarkError(f'{late} did not {waiting_for} within {self._timeout:g} s '
                                     '(see --timeout_secs)') from None
            reply = None if line is None else json.loads(line)
            if reply is not None and 'error' in reply:
                process.error = reply['error']
                continue  # Its end follows.
            if reply is None:
                raise BenchmarkError(process.failure())
            replies[process] = reply
        return [replies[process] for process in processes]

    def close(self):
        for process in self._all:
            try:
                process.popen.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + GRACE_SECS
        for process in self._all:
            try:
                process.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.popen.kill()
                process.popen.wait()
            process.log.close()


# ---- A training job through the launcher ----

# Lines of the launcher's output (task lines are prefixed '[worker:0] ').
TASK_LINE = re.compile(r'\[(\w+:\d+)\] (.*)')
RESTART = re.compile(r'launch\.py: (\w+:\d+) ended \((.*)\); restarting (it|the whole job) '
                     r'\(restart (\d+) of (\d+)\)')
HOSTS = re.compile(r'launch\.py: emulated hosts (\S+): ')
STEP = re.compile(r'[IWE] \S+ step (\d+): loss = ')
PLACEMENT = re.compile(r'[IWE] \S+ Placement:$')  # A worker's first line: an incarnation starts.
SERVING = re.compile(r'[IWE] \S+ ps:\d+ serving at ')  # A ps task's first line.
RESUMING = re.compile(r'[IWE] \S+ Resuming from \S*-(\d+)\b')
STOPPED = re.compile(r'\S+: stopped by SIGTERM at global step (\d+)')
FINISHED = re.compile(r'[IWE] \S+ Finished training at global step (\d+) after (\d+) steps')


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


class LaunchedJob:
    """The launcher's process (`process`) and what its output told so far; line numbers
    count the lines taken, from 1. Threads queue its stdout and stderr lines; pump() takes
    them in the calling thread."""

    def __init__(self, launcher_options, training_flags, log, echo=False):
        self.log = log
        self.echo = echo
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'slim_deploy.cluster.launch', *launcher_options, '--',
             *python(), os.path.join(REPO, 'train_image_classifier.py'), *training_flags],
            cwd=REPO, env=environment(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True)
        self._lines = queue.Queue()
        self._open = 2
        for stream in (self.process.stdout, self.process.stderr):
            forward_lines(stream, self._lines, None)
        self.count = 0  # Lines taken so far: the number of the last one.
        self.step = None  # The global step of the last progress line of any task.
        self.started = {}  # {task: number of the line its latest incarnation started with}.
        self.stepped = {}  # {task: number of its last progress line}.
        self.progress = {}  # {task: [(global step, time.monotonic() its line was taken)]}.
        self.restarts = []  # [(line number, task, 'it' or 'the whole job', line)].
        self.resumed = []  # [(line number, task, checkpoint step)].
        self.stopped = []  # [(line number, task, global step)]: stopped by SIGTERM.
        self.finished = {}  # {task: (final global step, steps its last incarnation ran)}.
        self.seen = {}  # {(pid, start time): task} of every task process seen.
        self.hosts = None  # The launcher's emulated_hosts.EmulatedHosts, once it said so.
        self._scanned = 0.0

    @property
    def ended(self):
        """Whether the launcher exited and all its output was taken."""
        return self._open == 0 and self.process.poll() is not None

    def pump(self, timeout):
        """Takes the lines that come within `timeout` seconds (at least one wait)."""
        deadline = time.monotonic() + timeout
        while self._open:
            try:
                _, line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
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

    def kill(self):
        """SIGKILLs the launcher and every process under it; waits for the launcher."""
        kill_tree(self.process)

    def leftovers(self, wait_secs=5.0):
        """['task (pid N)'] of the task processes seen during the run that still live,
        SIGKILLed here; waits up to `wait_secs` for them to be gone."""
        def alive(pid, started):
            stat = proc_stat(pid)
            return stat is not None and stat[2] == started and stat[0] != 'Z'

        left = [(pid, started, task) for (pid, started), task in sorted(self.seen.items())
                if alive(pid, started)]
        for pid, _, _ in left:
            kill_group_and_process(pid)
        deadline = time.monotonic() + wait_secs
        while any(alive(pid, started) for pid, started, _ in left) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        return [f'{task} (pid {pid})' for pid, _, task in left]

    def trained_since(self, task, line_number):
        """Whether `task` started a new incarnation after line `line_number` and that
        incarnation logged progress."""
        started = self.started.get(task, 0)
        return started > line_number and self.stepped.get(task, 0) > started

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
        elif step := STEP.match(text):
            self.step = int(step[1])
            self.stepped[task] = self.count
            self.progress.setdefault(task, []).append((self.step, time.monotonic()))
        elif resuming := RESUMING.match(text):
            self.resumed.append((self.count, task, int(resuming[1])))
        elif stopped := STOPPED.match(text):
            self.stopped.append((self.count, task, int(stopped[1])))
        elif finished := FINISHED.match(text):
            self.finished[task] = tuple(map(int, finished.groups()))


def prepare_digits(directory):
    """Converts the embedded digits into `directory`; returns it. (Imports TensorFlow.)"""
    from slim_deploy.image_classifier import verbosity
    verbosity.start()  # Before TensorFlow is imported.
    from slim_deploy.datasets import digits
    return digits.prepare(directory)


def final_checkpoint_step(train_dir):
    """The global step of the checkpoint train_dir's 'checkpoint' file names; None."""
    try:
        with open(os.path.join(train_dir, 'checkpoint')) as f:
            match = re.search(r'^model_checkpoint_path: "(?:.*/)?[^"/]*-(\d+)"', f.read(), re.M)
    except OSError:
        return None
    return int(match[1]) if match else None


def evaluate(train_dir, timeout):
    """(accuracy, global step evaluated) of train_dir's last checkpoint by
    eval_image_classifier.py, within `timeout` seconds; BenchmarkError if it fails."""
    eval_dir = os.path.join(train_dir, 'eval')
    try:
        result = subprocess.run(
            [*python(), os.path.join(REPO, 'eval_image_classifier.py'),
             f'--checkpoint_path={train_dir}', f'--eval_dir={eval_dir}'],
            cwd=REPO, env=environment(), capture_output=True, text=True,
            timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        raise BenchmarkError('time limit reached while evaluating') from None
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ['no output'])[-1]
        raise BenchmarkError(f'eval_image_classifier.py failed (exit code {result.returncode}): '
                             f'{last}')
    with open(os.path.join(eval_dir, 'metrics.json')) as f:
        metrics = json.load(f)
    return metrics['accuracy'], metrics['global_step']
