"""Runs the tasks of a parameter-server/worker cluster as local processes.

    python -m deployment.launch --num_ps_tasks P --worker_replicas W [--sync_replicas]
        [--bind ADDRESS] -- COMMAND [ARGS...]

(installed as the console command `launch_cluster` too).

Contract with COMMAND: each of the P ps and W worker tasks runs
`COMMAND ARGS... --worker_replicas=W --num_ps_tasks=P [--sync_replicas]` (the flags of
train_image_classifier.py) with TF_CONFIG set to the JSON of tf.distribute and Kubeflow's TFJob:
{"cluster": {"ps": ["HOST:PORT", ...], "worker": [...]}, "task": {"type": "ps", "index": 0}}
(with P = 0 there is no "ps" job: a cluster for --variable_update=collective), and
PYTHONUNBUFFERED=1. Each task's stdout and stderr reach the launcher's stdout line by line,
prefixed with '[ps:0] ', '[worker:1] ', ... Once every worker has exited 0, the ps tasks (which
serve forever) get SIGTERM; as soon as a worker fails, or a ps task ends, every task gets
SIGTERM (the others would wait for it forever). SIGINT and SIGTERM sent to the launcher
reach every task. Tasks still running GRACE_SECS after a signal (or at the launcher's next
one) get SIGKILL.

Exit code: 0 when every worker exits 0; 1 when a worker fails or a ps task ends before the
workers; 128 + N after signal N; 2 for bad arguments.

--bind sets the address in TF_CONFIG, through which the tasks reach each other, and where free
ports are looked for. Whatever it is, TensorFlow's gRPC servers listen on every interface of
the machine (0.0.0.0) and accept any client: on a machine others can reach, firewall the ports.
Ports are picked free, then released for the tasks to bind: another process may take one in
between, and that task then fails with a clear error.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

GRACE_SECS = 10.0
POLL_SECS = 0.05
LOCALHOST = '127.0.0.1'


class UsageError(Exception):
    """Bad command line; main() prints it as one line and returns 2."""


class _Parser(argparse.ArgumentParser):
    """Raises UsageError instead of printing the usage and exiting."""

    def error(self, message):
        raise UsageError(message)


def _parser():
    parser = _Parser(
        usage='%(prog)s --num_ps_tasks P --worker_replicas W [--sync_replicas] '
              '[--bind ADDRESS] -- COMMAND [ARGS...]',
        description='Runs P ps and W worker tasks of COMMAND on this machine, each as '
                    '`COMMAND ARGS... --worker_replicas=W --num_ps_tasks=P [--sync_replicas]` '
                    'with TF_CONFIG naming the cluster and the task.')
    parser.add_argument('--num_ps_tasks', type=int, required=True, metavar='P',
                        help='parameter-server tasks (0 or more)')
    parser.add_argument('--worker_replicas', type=int, required=True, metavar='W',
                        help='worker tasks (1 or more)')
    parser.add_argument('--sync_replicas', action='store_true',
                        help='also pass --sync_replicas to every task (needs W > 1)')
    parser.add_argument('--bind', default=LOCALHOST, metavar='ADDRESS',
                        help=f'address of the tasks in TF_CONFIG (default {LOCALHOST})')
    return parser


def parse_args(argv):
    """(options, COMMAND + ARGS) from the launcher's arguments; raises UsageError."""
    split = argv.index('--') if '--' in argv else len(argv)
    args = _parser().parse_args(argv[:split])
    command = argv[split + 1:]
    if args.num_ps_tasks < 0:
        raise UsageError(f'--num_ps_tasks must be >= 0, got {args.num_ps_tasks}')
    if args.worker_replicas < 1:
        raise UsageError(f'--worker_replicas must be >= 1, got {args.worker_replicas}')
    if args.sync_replicas and args.worker_replicas < 2:
        raise UsageError(f'--sync_replicas needs --worker_replicas > 1, '
                         f'got {args.worker_replicas}')
    if not command:
        raise UsageError('missing COMMAND: put it after "--"')
    return args, command


def free_ports(host, count):
    """`count` distinct ports that were free on `host`; another process may take them later."""
    family, kind, proto, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    sockets = []
    try:
        for _ in range(count):
            sockets.append(socket.socket(family, kind, proto))
            sockets[-1].bind(address)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_spec(host, num_ps_tasks, worker_replicas):
    """{'ps': ['HOST:PORT', ...], 'worker': [...]} on free ports of `host`; without ps tasks
    there is no 'ps' job (a cluster for --variable_update=collective)."""
    host_part = f'[{host}]' if ':' in host else host
    addresses = [f'{host_part}:{port}'
                 for port in free_ports(host, num_ps_tasks + worker_replicas)]
    cluster = {'ps': addresses[:num_ps_tasks], 'worker': addresses[num_ps_tasks:]}
    return {job: tasks for job, tasks in cluster.items() if tasks}


def exit_description(code):
    """'exit code 3' or 'signal SIGKILL' for a Popen return code."""
    return f'signal {signal.Signals(-code).name}' if code < 0 else f'exit code {code}'


class Task:
    """One task's process; a thread copies its output to stdout, each line prefixed."""

    def __init__(self, task_type, index, argv, env, output_lock):
        self.name = f'{task_type}:{index}'
        # Its own process group: signals reach the task's children, and a Ctrl-C in the
        # terminal reaches the task only once, through the launcher.
        self.process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        self._output = threading.Thread(target=self._copy_output, args=(output_lock,),
                                        daemon=True)
        self._output.start()

    def _copy_output(self, lock):
        prefix = f'[{self.name}] '
        with self.process.stdout as pipe:
            for line in pipe:
                text = line.decode(errors='replace')
                with lock:
                    sys.stdout.write(prefix + text + ('' if text.endswith('\n') else '\n'))
                    sys.stdout.flush()

    def running(self):
        return self.process.poll() is None

    def send(self, signum):
        """Sends `signum` to the task's process group if the task still runs."""
        if self.running():
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass

    def join(self):
        """Waits for the (killed) process and the end of its output."""
        self.process.wait()
        self._output.join(timeout=GRACE_SECS)


def stop(tasks, signum, received):
    """Sends `signum` to `tasks`, SIGKILLs those still running after GRACE_SECS or once the
    launcher receives another signal, and waits for the end of every task's output."""
    for task in tasks:
        task.send(signum)
    deadline = time.monotonic() + GRACE_SECS
    signals_seen = len(received)
    while (any(task.running() for task in tasks) and time.monotonic() < deadline
           and len(received) == signals_seen):
        time.sleep(POLL_SECS)
    for task in tasks:
        task.send(signal.SIGKILL)
    for task in tasks:
        task.join()


def supervise(ps, workers, received, prog):
    """Waits for the workers, stops the ps tasks and returns the exit code (module docstring)."""
    tasks = ps + workers
    while not received:
        failed = [f'{task.name} ({exit_description(task.process.returncode)})'
                  for task in workers if not task.running() and task.process.returncode]
        if failed:
            stop(tasks, signal.SIGTERM, received)
            print(f'{prog}: error: failed: {", ".join(failed)}; stopped all tasks',
                  file=sys.stderr)
            return 1
        if not any(task.running() for task in workers):
            stop(tasks, signal.SIGTERM, received)
            return 0
        dead = next((task for task in ps if not task.running()), None)
        if dead:
            stop(tasks, signal.SIGTERM, received)
            print(f'{prog}: error: {dead.name} ended ({exit_description(dead.process.returncode)})'
                  ' before the workers; stopped all tasks', file=sys.stderr)
            return 1
        time.sleep(POLL_SECS)
    stop(tasks, received[0], received)
    print(f'{prog}: received {signal.Signals(received[0]).name}; stopped all tasks',
          file=sys.stderr)
    return 128 + received[0]


def launch(cluster, argv, prog):
    """Starts a task of `argv` for each address of `cluster`, supervises them and returns the
    exit code."""
    received = []
    handlers = {signum: signal.signal(signum, lambda number, _: received.append(number))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    output_lock = threading.Lock()
    tasks = {'ps': [], 'worker': []}  # Without ps tasks, cluster has no 'ps' job.
    try:
        try:
            for task_type, addresses in cluster.items():
                for index in range(len(addresses)):
                    config = {'cluster': cluster, 'task': {'type': task_type, 'index': index}}
                    env = {**os.environ, 'TF_CONFIG': json.dumps(config),
                           'PYTHONUNBUFFERED': '1'}
                    tasks[task_type].append(Task(task_type, index, argv, env, output_lock))
        except OSError as e:
            stop(tasks['ps'] + tasks['worker'], signal.SIGTERM, received)
            print(f'{prog}: error: cannot run {argv[0]}: {e.strerror}', file=sys.stderr)
            return 2
        return supervise(tasks['ps'], tasks['worker'], received, prog)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def main(argv):
    """Runs the launcher on `argv` (without the program name); returns the exit code."""
    prog = os.path.basename(sys.argv[0])
    try:
        args, command = parse_args(argv)
        try:
            cluster = cluster_spec(args.bind, args.num_ps_tasks, args.worker_replicas)
        except OSError as e:
            raise UsageError(f'--bind {args.bind}: {e.strerror}') from e
    except UsageError as e:
        print(f'{prog}: error: {e}', file=sys.stderr)
        return 2
    if args.bind != LOCALHOST:
        print(f'{prog}: warning: --bind {args.bind}: TensorFlow\'s gRPC servers accept any '
              'client that can reach their ports (no authentication)', file=sys.stderr)
    argv = [*command, f'--worker_replicas={args.worker_replicas}',
            f'--num_ps_tasks={args.num_ps_tasks}']
    if args.sync_replicas:
        argv.append('--sync_replicas')
    return launch(cluster, argv, prog)


def run():
    """Console-script entry point."""
    sys.exit(main(sys.argv[1:]))


if __name__ == '__main__':
    run()
