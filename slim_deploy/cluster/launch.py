"""Runs the tasks of a parameter-server/worker cluster as local processes.

    python -m slim_deploy.cluster.launch --num_ps_tasks P --worker_replicas W [--sync_replicas]
        [--evaluator] [--max_restarts N] [--bind ADDRESS | --emulated_hosts
        [--link_bandwidth RATE]] -- COMMAND [ARGS...]
    python -m slim_deploy.cluster.launch --jobset NAME --image IMAGE --num_ps_tasks P
        --worker_replicas W [--chief] [--sync_replicas] [--evaluator] [--max_restarts N]
        [--volume CLAIM:MOUNT_PATH ...] [--port PORT] [--no_network_policy] -- COMMAND [ARGS...]

(installed as the console command `launch_cluster` too). The second form starts nothing: it
prints a Kubernetes JobSet (YAML) that runs the same cluster, one pod per task, in container
image IMAGE (jobset.manifest says what it does), followed by a NetworkPolicy that admits
traffic to the tasks' port only from the JobSet's own pods (jobset.network_policy; not with
--no_network_policy); `kubectl apply -f -` submits them. There,
W counts every training replica: with --chief, replica 0 (the chief) gets a job of its own
and the 'worker' job the W-1 others; the task's flags name the cluster instead of TF_CONFIG
(jobset.cluster_flags); --max_restarts counts restarts of the whole JobSet.

Contract with COMMAND: each of the P ps and W worker tasks runs
`COMMAND ARGS... --worker_replicas=W --num_ps_tasks=P [--sync_replicas]` (the flags of
train_image_classifier.py) with TF_CONFIG set to the JSON of tf.distribute and Kubeflow's TFJob:
{"cluster": {"ps": ["HOST:PORT", ...], "worker": [...]}, "task": {"type": "ps", "index": 0}}
(with P = 0 there is no "ps" job: a cluster for --variable_update=collective), and
PYTHONUNBUFFERED=1. With --evaluator, one more task runs the same command as task
{"type": "evaluator", "index": 0} of the same cluster (which does not list it: it serves
nothing), evaluating the chief's checkpoints as they appear. Each task's stdout and stderr
reach the launcher's stdout line by line, prefixed with '[ps:0] ', '[worker:1] ', ... Once
every worker has exited 0, the ps tasks (which serve forever) get SIGTERM, and the launcher
waits for the evaluator to finish.

A task that fails (a worker or the evaluator exiting non-zero or killed, a ps task ending
while the workers run) is restarted with the same TF_CONFIG, up to --max_restarts times in
all, each restart announced in one line on stderr. When the task was a ps task (its
variables lived only in its memory), a worker of a cluster without ps tasks (the others'
collectives cannot go on without it), or a task that exited with code 75 (it lost a task it
needs: errors.ClusterError), the whole job restarts instead: every ps and worker task is
killed and started again, and the chief resumes from its last checkpoint. A task that exits
with one of errors.FINAL_EXIT_CODES, which a restart repeats (2: a user's mistake, 65: damaged
input data, 74: storage that refused a write), is not restarted. Once the restarts
are used up (at once with the default 0), every task gets SIGTERM. SIGINT and SIGTERM sent
to the launcher reach every task. Tasks still running GRACE_SECS after a signal (or at the
launcher's next one) get SIGKILL.

Exit code: 0 when every worker (and the evaluator) exits 0; 1 when a task failed with no
restart left; 128 + N after signal N; 2 for bad arguments.

--emulated_hosts runs each task on an emulated host of its own (emulated_hosts.EmulatedHosts:
a network namespace with its own address, named ps-0, worker-1, evaluator-0, ... in domain
HOSTS_DOMAIN; needs root), each serving on shape.PORT, with --link_bandwidth limiting each host's
link (a tc rate: 100mbit, 1gbit) and --slow_host TASK=RATE one host's link to RATE instead (a
straggler on the network: its steps wait on its link). The launcher prints the hosts' prefix,
with which `python -m slim_deploy.cluster.emulated_hosts partition PREFIX HOST` cuts a host off
(and `heal` reconnects it), and removes the hosts when it ends.

--bind sets the address in TF_CONFIG, through which the tasks reach each other, and where free
ports are looked for. Whatever it is, TensorFlow's gRPC servers listen on every interface of
the machine (0.0.0.0) and accept any client: on a machine others can reach, firewall the ports.
Ports are picked free, then released for the tasks to bind: another process may take one in
between. free_ports hands a port out to one caller in HOLD_SECS, machine wide
(PORTS_HANDED_OUT records them), so two jobs starting together never get the same port, nor
does a job get that of another's task restarting within those seconds. A task that cannot
bind its port exits with code 98 (errors.AddressInUse); the launcher then stops every task
and starts the cluster again on new ports, up to PORT_RETRIES times, saying so in one line on
stderr (these restarts leave --max_restarts alone).
"""
import argparse
import contextlib
import errno
import fcntl
import functools
import itertools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from slim_deploy.cluster import emulated_hosts, jobset, shape
from slim_deploy.common.errors import (
    FINAL_EXIT_CODES,
    AddressInUse,
    ClusterError,
    UsageError,
    check_int,
)

# Longer than training's default grace period (training.loop.GRACE_SECS): a signalled task first
# finishes its step and checkpoints.
GRACE_SECS = 25.0
POLL_SECS = 0.05
LOCALHOST = '127.0.0.1'
HOSTS_DOMAIN = 'cluster'  # Of the emulated hosts: ps-0.cluster, worker-0.cluster, ...
PORT_RETRIES = 3  # New sets of ports tried when a task finds its port taken.
# The ports free_ports handed out, one 'PORT UNTIL' line each (UNTIL: time.time()'s seconds),
# and how long a port stays held: longer than any job's restarts on the same ports.
PORTS_HANDED_OUT = os.path.join(tempfile.gettempdir(), 'slim-deploy-ports')
HOLD_SECS = 600.0
JOBSET_ONLY = ('image', 'chief', 'volume', 'port', 'no_network_policy')  # Need --jobset.


class _Parser(argparse.ArgumentParser):
    """Raises UsageError instead of printing the usage and exiting."""

    def error(self, message):
        raise UsageError(message)


def _parser():
    parser = _Parser(
        usage='%(prog)s [--jobset NAME --image IMAGE [--chief] [--volume CLAIM:MOUNT_PATH] '
              '[--port PORT] [--no_network_policy]] --num_ps_tasks P --worker_replicas W '
              '[--sync_replicas] '
              '[--evaluator] [--max_restarts N] [--bind ADDRESS | --emulated_hosts '
              '[--link_bandwidth RATE] [--slow_host TASK=RATE]] -- COMMAND [ARGS...]',
        description='Runs P ps and W worker tasks of COMMAND on this machine, each as '
                    '`COMMAND ARGS... --worker_replicas=W --num_ps_tasks=P [--sync_replicas]` '
                    'with TF_CONFIG naming the cluster and the task; with --jobset, prints '
                    'a Kubernetes JobSet running them instead.')
    parser.add_argument('--num_ps_tasks', type=int, required=True, metavar='P',
                        help='parameter-server tasks (0 or more)')
    parser.add_argument('--worker_replicas', type=int, required=True, metavar='W',
                        help='worker tasks, the chief included (1 or more)')
    parser.add_argument('--sync_replicas', action='store_true',
                        help='also pass --sync_replicas to every task (needs W > 1)')
    parser.add_argument('--evaluator', action='store_true',
                        help='also run an evaluator task, which evaluates every checkpoint')
    parser.add_argument('--max_restarts', type=int, default=0, metavar='N',
                        help='restarts of failed tasks (or of the whole job, when a ps task '
                             'fails; with --jobset, always) allowed in all (default 0: the '
                             'first failure stops all)')
    parser.add_argument('--bind', default=LOCALHOST, metavar='ADDRESS',
                        help=f'address of the tasks in TF_CONFIG (default {LOCALHOST})')
    parser.add_argument('--emulated_hosts', action='store_true',
                        help='run each task on an emulated host of its own (needs root)')
    parser.add_argument('--link_bandwidth', metavar='RATE',
                        help="limit of each emulated host's link, as tc writes it: 100mbit, "
                             '1gbit (default: none)')
    parser.add_argument('--slow_host', action='append', default=[], metavar='TASK=RATE',
                        help="with --emulated_hosts: limit the link of TASK's host (worker:3, "
                             'ps:0) to RATE instead, a straggler (repeatable)')
    parser.add_argument('--jobset', metavar='NAME',
                        help='print a Kubernetes JobSet named NAME (YAML) that runs the tasks, '
                             'one pod each, instead of running them here')
    parser.add_argument('--image', metavar='IMAGE',
                        help='with --jobset: the container image that runs COMMAND')
    parser.add_argument('--chief', action='store_true',
                        help='with --jobset: a job of its own for the chief, which is one of '
                             'the W replicas')
    parser.add_argument('--volume', action='append', default=[], metavar='CLAIM:MOUNT_PATH',
                        help='with --jobset: mount PersistentVolumeClaim CLAIM at MOUNT_PATH in '
                             'the chief, worker and evaluator pods (repeatable); --train_dir '
                             'must be on one for restarts to resume')
    parser.add_argument('--port', type=int, metavar='PORT',
                        help=f'with --jobset: the port of every task (default {shape.PORT})')
    parser.add_argument('--no_network_policy', action='store_true',
                        help='with --jobset: leave out the NetworkPolicy that admits traffic to '
                             "the tasks' port only from the JobSet's own pods")
    return parser


def parse_args(argv):
    """(options, COMMAND + ARGS) from the launcher's arguments; raises UsageError."""
    split = argv.index('--') if '--' in argv else len(argv)
    parser = _parser()
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    for name, minimum in (('num_ps_tasks', 0), ('worker_replicas', 1), ('max_restarts', 0)):
        check_int(f'--{name}', getattr(args, name), minimum, UsageError)
    problem = shape.workers_problem(args.worker_replicas, args.sync_replicas)
    if problem:
        raise UsageError(problem)
    if args.jobset is None:
        given = [name for name in JOBSET_ONLY
                 if getattr(args, name) != parser.get_default(name)]
        if given:
            raise UsageError(f'--{given[0]} needs --jobset')
    elif args.emulated_hosts or args.bind != LOCALHOST or args.link_bandwidth or args.slow_host:
        raise UsageError('--jobset excludes --emulated_hosts, --bind, --link_bandwidth and '
                         '--slow_host: Kubernetes gives each pod a host of its own')
    elif args.image is None:
        raise UsageError('--jobset needs --image, the container image that runs COMMAND')
    if args.emulated_hosts and args.bind != LOCALHOST:
        raise UsageError('--bind and --emulated_hosts exclude each other: emulated hosts '
                         'have addresses of their own')
    for name in ('link_bandwidth', 'slow_host'):
        if getattr(args, name) and not args.emulated_hosts:
            raise UsageError(f'--{name} needs --emulated_hosts')
    link_bandwidths(args)  # Checks --slow_host.
    if not command:
        raise UsageError('missing COMMAND: put it after "--"')
    return args, command


def link_bandwidths(args):
    """{emulated host: tc rate} of the limited links of parsed `args`: --link_bandwidth's,
    or a --slow_host's; raises UsageError for a --slow_host that is not TASK=RATE of a task of
    the cluster."""
    names = emulated_host_names(args.num_ps_tasks, args.worker_replicas, args.evaluator)
    bandwidths = dict.fromkeys(names, args.link_bandwidth)
    for slow_host in args.slow_host:
        task, _, rate = slow_host.partition('=')
        if emulated_host(task) not in names or emulated_hosts.rate_bits(rate) is None:
            tasks = ', '.join(name.replace('-', ':') for name in names)
            raise UsageError(f'--slow_host takes TASK=RATE, TASK one of {tasks} and RATE a tc '
                             f'rate such as 100mbit; got {slow_host!r}')
        bandwidths[emulated_host(task)] = rate
    return {name: rate for name, rate in bandwidths.items() if rate}


def free_ports(host, count):
    """`count` distinct ports free on `host` now, none of them handed out by this function on
    this machine in the last HOLD_SECS seconds. They come from below the kernel's ephemeral
    range where it leaves room (from 10000 up), so no outgoing connection of this machine takes
    one before its server binds it, nor another job's free_ports; a listener that picks its
    port otherwise still may."""
    family, kind, proto, _, address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0]
    sockets = []
    with _ports_handed_out() as held:
        candidates = [port for port in _ports_below_ephemeral_range() if port not in held]
        random.SystemRandom().shuffle(candidates)  # Not the global generator: runs seed it.
        try:
            while len(sockets) < count:
                sockets.append(socket.socket(family, kind, proto))
                try:
                    sockets[-1].bind((address[0], candidates.pop() if candidates else 0)
                                     + address[2:])
                except OSError as e:
                    if e.errno != errno.EADDRINUSE:
                        raise
                    sockets.pop().close()
            ports = [s.getsockname()[1] for s in sockets]
        finally:
            for s in sockets:
                s.close()
        held.update(ports)
    return ports


@contextlib.contextmanager
def _ports_handed_out():
    """Yields the set of ports PORTS_HANDED_OUT holds until later than now, locked against
    every other process's free_ports; the ports added to it are recorded as held for
    HOLD_SECS when it exits. Where the file cannot be opened (another user's), an empty set
    that nothing records."""
    try:
        record = open(PORTS_HANDED_OUT, 'a+')
    except OSError:
        yield set()
        return
    with record:
        fcntl.flock(record, fcntl.LOCK_EX)
        record.seek(0)
        now = time.time()
        until = {}
        for line in record:
            port, _, held_until = line.partition(' ')
            with contextlib.suppress(ValueError):
                if float(held_until) > now:
                    until[int(port)] = float(held_until)
        held = set(until)
        yield held
        until.update(dict.fromkeys(held - set(until), now + HOLD_SECS))
        record.seek(0)
        record.truncate()
        record.write(''.join(f'{port} {until[port]}\n' for port in until))


def _ports_below_ephemeral_range(lowest=10000):
    """The ports from `lowest` up to the first of the kernel's ephemeral range (Linux's
    ip_local_port_range; [] where it cannot be read or starts at or below `lowest`)."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            first_ephemeral = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return []
    return list(range(lowest, first_ephemeral))


def cluster_spec(host, num_ps_tasks, worker_replicas):
    """{'ps': ['HOST:PORT', ...], 'worker': [...]} on free ports of `host`; without ps tasks
    there is no 'ps' job (a cluster for --variable_update=collective)."""
    host_part = f'[{host}]' if ':' in host else host
    addresses = [f'{host_part}:{port}'
                 for port in free_ports(host, num_ps_tasks + worker_replicas)]
    cluster = {'ps': addresses[:num_ps_tasks], 'worker': addresses[num_ps_tasks:]}
    return {job: tasks for job, tasks in cluster.items() if tasks}


def emulated_host(task):
    """The emulated host of `task` ('ps:0'): 'ps-0'."""
    return task.replace(':', '-')


def emulated_host_names(num_ps_tasks, worker_replicas, evaluator=False):
    """The emulated hosts of a cluster's tasks (emulated_host): ['ps-0', ..., 'worker-0', ...]."""
    counts = {'ps': num_ps_tasks, 'worker': worker_replicas, 'evaluator': int(evaluator)}
    return [emulated_host(f'{job}:{index}') for job, count in counts.items()
            for index in range(count)]


def emulated_cluster_spec(hosts, num_ps_tasks, worker_replicas):
    """cluster_spec's cluster on emulated `hosts` (emulated_host_names' hosts):
    'ps-0.cluster:2222'."""
    cluster = {job: [f'{hosts[emulated_host(f"{job}:{index}")].fqdn}:{shape.PORT}'
                     for index in range(count)]
               for job, count in (('ps', num_ps_tasks), ('worker', worker_replicas))}
    return {job: tasks for job, tasks in cluster.items() if tasks}


def exit_description(code):
    """'exit code 3' or 'signal SIGKILL' for a Popen return code."""
    return f'signal {signal.Signals(-code).name}' if code < 0 else f'exit code {code}'


class Task:
    """One task's process, started by start(); a thread copies its output to stdout, each
    line prefixed."""

    def __init__(self, task_type, index, argv, env, output_lock):
        self.name = f'{task_type}:{index}'
        self._argv = argv
        self._env = env
        self._output_lock = output_lock
        self.process = None

    def start(self):
        """Starts (or restarts) the task's process; OSError if it cannot run."""
        # Its own process group: signals reach the task's children, and a Ctrl-C in the
        # terminal reaches the task only once, through the launcher.
        self.process = subprocess.Popen(
            self._argv, env=self._env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        self._output = threading.Thread(target=self._copy_output, daemon=True)
        self._output.start()

    def _copy_output(self):
        prefix = f'[{self.name}] '
        with self.process.stdout as pipe:
            for line in pipe:
                text = line.decode(errors='replace')
                with self._output_lock:
                    sys.stdout.write(prefix + text + ('' if text.endswith('\n') else '\n'))
                    sys.stdout.flush()

    def running(self):
        return self.process is not None and self.process.poll() is None

    def failed(self):
        """Whether the process ended with a non-zero exit code or a signal."""
        return not self.running() and bool(self.process.returncode)

    def send(self, signum):
        """Sends `signum` to the task's process group if the task still runs."""
        if self.running():
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass

    def join(self):
        """Waits for the (killed) process and the end of its output."""
        if self.process is not None:
            self.process.wait()
            self._output.join(timeout=GRACE_SECS)


class PortTaken(Exception):
    """A task (its name, 'worker:0', is the message) exited as one whose port another
    process holds (errors.AddressInUse)."""


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


def supervise(ps, workers, evaluators, received, prog, max_restarts=0, new_ports=False):
    """Waits for the workers (restarting failed tasks), stops the ps tasks, waits for the
    evaluators and returns the exit code (module docstring). new_ports: a task whose port is
    taken stops every task and raises PortTaken, for a start on new ports."""
    job = ps + workers
    restarts = 0
    while not received:
        workers_done = not any(task.running() for task in workers)
        dead = next((task for task in ps if not task.running() and not workers_done), None)
        dead = dead or next((task for task in workers + evaluators if task.failed()), None)
        if dead:
            code = dead.process.returncode
            ended = exit_description(code)
            if new_ports and code == AddressInUse.exit_code:
                stop(job + evaluators, signal.SIGKILL, received)
                raise PortTaken(dead.name)
            final = FINAL_EXIT_CODES.get(code)  # What ended it, when a restart repeats it.
            if restarts == max_restarts or final:
                stop(job + evaluators, signal.SIGTERM, received)
                what = (f'{dead.name} ended ({ended}) before the workers' if dead in ps else
                        f'failed: {dead.name} ({ended})')
                after = (f', {final} that a restart repeats' if final else
                         ', address in use' if code == AddressInUse.exit_code else '')
                if restarts and not final:
                    after += f' after {restarts} restarts (--max_restarts)'
                print(f'{prog}: error: {what}{after}; stopped all tasks', file=sys.stderr)
                return 1
            restarts += 1
            whole_job = (dead in ps or (dead in workers and not ps)
                         or code == ClusterError.exit_code)
            print(f'{prog}: {dead.name} ended ({ended}); restarting '
                  f'{"the whole job" if whole_job else "it"} '
                  f'(restart {restarts} of {max_restarts})', file=sys.stderr, flush=True)
            restarting = job if whole_job else [dead]
            stop(restarting, signal.SIGKILL, received)
            for task in restarting:
                task.start()
            continue
        if workers_done:
            if any(task.running() for task in ps):
                stop(ps, signal.SIGTERM, received)
            if not any(task.running() for task in evaluators):
                return 0
        time.sleep(POLL_SECS)
    stop(job + evaluators, received[0], received)
    print(f'{prog}: received {signal.Signals(received[0]).name}; stopped all tasks',
          file=sys.stderr)
    return 128 + received[0]


def launch(cluster, argv, prog, evaluator=False, max_restarts=0, hosts=None, new_cluster=None):
    """Starts a task of `argv` for each address of `cluster` (and an evaluator task),
    supervises them and returns the exit code. hosts: the EmulatedHosts of emulated_host_names to
    run the tasks on (None: this machine's network). new_cluster: None, or a function giving
    the cluster on new ports, with which every task starts again when one finds its port
    taken (up to PORT_RETRIES times)."""
    received = []
    handlers = {signum: signal.signal(signum, lambda number, _: received.append(number))
                for signum in (signal.SIGINT, signal.SIGTERM)}
    output_lock = threading.Lock()
    try:
        for retry in itertools.count():
            tasks = {'ps': [], 'worker': [], 'evaluator': []}  # Without ps tasks, no 'ps' job.
            kinds = [(task_type, len(addresses)) for task_type, addresses in cluster.items()]
            try:
                for task_type, count in kinds + ([('evaluator', 1)] if evaluator else []):
                    for index in range(count):
                        config = {'cluster': cluster,
                                  'task': {'type': task_type, 'index': index}}
                        env = {**os.environ, 'TF_CONFIG': json.dumps(config),
                               'PYTHONUNBUFFERED': '1'}
                        command = (hosts.command(emulated_host(f'{task_type}:{index}'), argv)
                                   if hosts else argv)
                        tasks[task_type].append(Task(task_type, index, command, env,
                                                     output_lock))
                        tasks[task_type][-1].start()
            except OSError as e:
                stop([task for kind in tasks.values() for task in kind], signal.SIGTERM,
                     received)
                print(f'{prog}: error: cannot run {argv[0]}: {e.strerror}', file=sys.stderr)
                return 2
            try:
                return supervise(tasks['ps'], tasks['worker'], tasks['evaluator'], received,
                                 prog, max_restarts,
                                 new_ports=new_cluster is not None and retry < PORT_RETRIES)
            except PortTaken as taken:
                job, index = str(taken).split(':')
                print(f'{prog}: {taken} could not bind {cluster[job][int(index)]}: address in '
                      f'use; restarting every task on new ports (retry {retry + 1} of '
                      f'{PORT_RETRIES})', file=sys.stderr, flush=True)
                cluster = new_cluster()
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def main(argv):
    """Runs the launcher on `argv` (without the program name); returns the exit code."""
    prog = os.path.basename(sys.argv[0])
    try:
        args, command = parse_args(argv)
        argv = [*command, f'--worker_replicas={args.worker_replicas}',
                f'--num_ps_tasks={args.num_ps_tasks}']
        if args.sync_replicas:
            argv.append('--sync_replicas')
        if args.jobset is not None:
            port = shape.PORT if args.port is None else args.port
            spec = jobset.manifest(
                args.jobset, args.image, argv, args.num_ps_tasks, args.worker_replicas,
                args.chief, args.evaluator, args.max_restarts, args.volume, port)
        elif not args.emulated_hosts:
            pick = functools.partial(cluster_spec, args.bind, args.num_ps_tasks,
                                     args.worker_replicas)
            try:
                cluster = pick()
            except OSError as e:
                raise UsageError(f'--bind {args.bind}: {e.strerror}') from e
    except UsageError as e:
        print(f'{prog}: error: {e}', file=sys.stderr)
        return 2
    if args.jobset is not None:
        policy = [] if args.no_network_policy else [jobset.network_policy(args.jobset, port)]
        print(jobset.to_yaml(spec, *policy), end='')
        return 0
    if args.bind != LOCALHOST:
        print(f'{prog}: warning: --bind {args.bind}: TensorFlow\'s gRPC servers accept any '
              'client that can reach their ports (no authentication)', file=sys.stderr)
    if not args.emulated_hosts:
        return launch(cluster, argv, prog, args.evaluator, args.max_restarts,
                      new_cluster=pick)
    names = emulated_host_names(args.num_ps_tasks, args.worker_replicas, args.evaluator)
    try:
        hosts = emulated_hosts.EmulatedHosts(names, HOSTS_DOMAIN, link_bandwidths(args))
    except (emulated_hosts.EmulatedHostsError, ValueError) as e:
        print(f'{prog}: error: --emulated_hosts: {e}', file=sys.stderr)
        return 2
    with hosts:
        print(f'{prog}: emulated hosts {hosts.prefix}: ' + ' '.join(
            f'{host.fqdn}={host.address}' for host in hosts.hosts.values()),
            file=sys.stderr, flush=True)
        cluster = emulated_cluster_spec(hosts, args.num_ps_tasks, args.worker_replicas)
        return launch(cluster, argv, prog, args.evaluator, args.max_restarts, hosts)


def run():
    """Console-script entry point."""
    sys.exit(main(sys.argv[1:]))


if __name__ == '__main__':
    run()
