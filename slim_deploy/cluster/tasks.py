"""Which task of a parameter-server/worker cluster this process is, from TF_CONFIG or flags.

TF_CONFIG is the JSON of tf.distribute and Kubeflow's TFJob:
    {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...], "ps": [...]},
     "task": {"type": "worker", "index": 1}}
The flags are slim's and TensorFlow's classic ones: --ps_hosts, --worker_hosts (comma-separated
host:port lists), --job_name and --task, plus --chief_host (the host:port of a 'chief' job).
Without --task, the index comes from JOB_COMPLETION_INDEX, which Kubernetes sets in each pod
of an Indexed Job (a JobSet's replicated job, see jobset.py): one command line, the same in
every pod of a job, then names every task. Workers (the chief first, if there is a 'chief'
job) are the replicas that train; ps tasks hold the variables. An 'evaluator' task (index 0,
as tf.distribute and TFJob define it) evaluates the chief's checkpoints; it is not part of
the training cluster, whether or not TF_CONFIG's cluster lists it.
"""
import dataclasses
import errno
import json
import re
import signal
import socket
import time

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.cluster import watchdog as watchdog_lib
from slim_deploy.common import native_stderr
from slim_deploy.common.errors import AddressInUse, ClusterError, Interrupted, UsageError

TASK_TYPES = ('chief', 'worker', 'ps')
EVALUATOR = 'evaluator'
# What a collective op raises when another member died, closed its connection or hung.
PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError,
               tf.errors.AbortedError, tf.errors.CancelledError)
POLL_SECS = 0.1  # How often a ps task looks for a signal, and then for the chief's report.
_TASK_NAME = re.compile(r'/job:(\w+)/replica:\d+/task:(\d+)')
# The lines gRPC logs when a server cannot listen on its port.
_SERVER_FAILED = re.compile(r'E\d{4} .*\] (Failed to add port to server: .*|'
                            r'UNKNOWN: Could not start gRPC server)')


@dataclasses.dataclass(frozen=True)
class ClusterTask:
    """This process's task in `cluster`, a validated {job: ['host:port', ...]} (from TASK_TYPES).

    replica_index: this worker's index among all training replicas (the chief is 0, workers
    follow); None for a ps task or the evaluator (task_type EVALUATOR, outside `cluster`).
    is_chief: the replica that initializes, checkpoints and
    writes summaries: the 'chief' task, or worker 0 when there is no 'chief' job.
    """
    cluster: dict
    task_type: str
    task_index: int

    @property
    def num_ps_tasks(self):
        return len(self.cluster.get('ps', ()))

    @property
    def num_replicas(self):
        return len(self.cluster.get('chief', ())) + len(self.cluster.get('worker', ()))

    @property
    def replica_index(self):
        if self.task_type not in ('chief', 'worker'):
            return None
        offset = len(self.cluster.get('chief', ())) if self.task_type == 'worker' else 0
        return offset + self.task_index

    @property
    def is_chief(self):
        return self.replica_index == 0

    @property
    def chief(self):
        """The name of the chief's task: 'chief:0', or 'worker:0' without a 'chief' job."""
        return 'chief:0' if 'chief' in self.cluster else 'worker:0'

    @property
    def collective_leader(self):
        """The device name of replica 0's task, which leads collective groups."""
        job, index = self.chief.split(':')
        return f'/job:{job}/replica:0/task:{index}'

    @property
    def name(self):
        """'worker:1': this task's job and index."""
        return f'{self.task_type}:{self.task_index}'

    def addresses(self, jobs=TASK_TYPES):
        """{'ps:0': 'host:port', ...} of the tasks of `jobs` but this one."""
        return {f'{job}:{index}': address for job in jobs
                for index, address in enumerate(self.cluster.get(job, ()))
                if f'{job}:{index}' != self.name}

    @property
    def address(self):
        return self.cluster[self.task_type][self.task_index]

    def device_filters(self):
        """The devices this task's sessions talk to: the ps tasks and itself, so a worker
        neither waits for nor depends on the other workers."""
        return ['/job:ps', f'/job:{self.task_type}/task:{self.task_index}']

    def start_server(self, config=None):
        """Starts and returns this task's tf.distribute.Server (gRPC; it listens on every
        interface at the address's port). config: a ConfigProto for its devices (e.g.
        device_count), None for the default. AddressInUse when another process holds the
        port; UsageError when the server cannot start for another reason."""
        port = int(self.address.rpartition(':')[2])
        error, taken = None, False

        def keep(text):  # What gRPC logs of a taken port, AddressInUse says in its line.
            return native_stderr.without_lines(_SERVER_FAILED, text) if taken else text

        with native_stderr.filtered(keep):
            try:
                return tf.distribute.Server(tf.train.ClusterSpec(self.cluster),
                                            job_name=self.task_type, task_index=self.task_index,
                                            config=config, start=True)
            except tf.errors.UnknownError as e:  # It does not say why.
                error, taken = e, port_in_use(port)
        if taken:
            raise AddressInUse(f'cannot start the gRPC server of {self.name} at {self.address}: '
                               f'address in use (another process holds port {port})') from error
        raise UsageError(f'cannot start the gRPC server of {self.name} at {self.address}: '
                         f'{error.message}') from error


def port_in_use(port):
    """Whether another process holds TCP `port` where a gRPC server would listen (every
    interface)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # As gRPC's listeners.
        try:
            probe.bind(('0.0.0.0', port))
        except OSError as e:
            return e.errno == errno.EADDRINUSE
    return False


def serve(task, grace_secs):
    """Starts `task`'s server and serves (a ps task holds its variables) until SIGTERM or
    SIGINT. The chief, signalled at the same moment (a whole job stops at once), still needs
    the variables for its last checkpoint: the task serves on until the chief says it has
    written it (report_last_checkpoint), the chief's server no longer answers (its process
    ended), or `grace_secs` (seconds) have passed since the signal; then raises Interrupted
    saying which."""
    received = []
    handlers = {signum: signal.signal(signum, lambda number, _: received.append(number))
                for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        server = task.start_server()
        logging.info('%s serving at %s until SIGTERM or Ctrl-C', task.name, task.address)
        with _ChiefReports(server, task.task_index) as reports:
            while not received:  # Polled: TensorFlow's threads may be the ones signalled.
                time.sleep(POLL_SECS)
            reports.read()  # Those of chiefs that ended before the signal are old news.
            name = signal.Signals(received[0]).name
            logging.info('%s received %s: serving until the chief has written its last '
                         'checkpoint (within %g s)', task.name, name, grace_secs)
            why = _chief_done(task, reports, time.monotonic() + grace_secs)
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    raise Interrupted(f'{task.name} stopped by {name}: ' + (
        why or f'the chief did not report its last checkpoint within {grace_secs:g} s '
        '(--grace_period_secs)'), received[0])


def _chief_done(task, reports, deadline):
    """Why the chief of `task`'s cluster needs this ps task no more: 'the chief has written
    its last checkpoint' (a report came), 'the chief does not answer' (its process ended);
    None if neither happened by `deadline` (time.monotonic())."""
    chief = {task.chief: task.addresses()[task.chief]}
    while time.monotonic() < deadline:
        if reports.read():
            return 'the chief has written its last checkpoint'
        if not watchdog_lib.answering(chief, timeout_secs=1.0):
            return 'the chief does not answer'
        time.sleep(POLL_SECS)
    return None


def report_last_checkpoint(task, timeout_secs=5.0):
    """Tells each ps task of `task`'s cluster (the chief's) that the chief has written its
    last checkpoint, so that a ps task stopped by a signal stops serving (serve). A ps task
    that does not take the report within `timeout_secs` has ended: it is passed over."""
    for index, address in enumerate(task.cluster.get('ps', ())):
        # A graph per task: a session places its whole graph, and sees only its own task.
        with tf.Graph().as_default():
            report = tf.raw_ops.AssignAddVariableOp(resource=_chief_reports(index),
                                                    value=tf.constant(1, tf.int64))
            config = tf.ConfigProto(device_filters=[f'/job:ps/task:{index}'],
                                    operation_timeout_in_ms=int(timeout_secs * 1000))
            try:
                with tf.Session(f'grpc://{address}', config=config) as session:
                    session.run(report)
            except tf.errors.OpError as e:
                logging.warning('ps:%d (%s) did not take the report of the last checkpoint '
                                '(%s)', index, address, type(e).__name__)


def _chief_reports(ps_index):
    """The handle of the count, on ps task `ps_index`, of the chief's reports that it has
    written its last checkpoint: the same variable in every graph (by its shared name)."""
    with tf.device(f'/job:ps/task:{ps_index}/device:CPU:0'):
        return tf.raw_ops.VarHandleOp(dtype=tf.int64, shape=[],
                                      shared_name='slim_deploy_last_checkpoint_reports')


class _ChiefReports:
    """The count of the chief's reports on ps task `ps_index`, whose `server` (a
    tf.distribute.Server) serves it, read through a session of its own; entered, it starts
    at 0. read(): whether a report came since the previous read (or since entering)."""

    def __init__(self, server, ps_index):
        self._graph = tf.Graph()
        with self._graph.as_default():
            reports = _chief_reports(ps_index)
            self._reset = tf.raw_ops.AssignVariableOp(resource=reports,
                                                      value=tf.constant(0, tf.int64))
            self._count = tf.raw_ops.ReadVariableOp(resource=reports, dtype=tf.int64)
        self._session = tf.Session(server.target, graph=self._graph, config=tf.ConfigProto(
            device_filters=[f'/job:ps/task:{ps_index}']))
        self._seen = 0

    def __enter__(self):
        self._session.run(self._reset)
        return self

    def __exit__(self, *exc_info):
        self._session.close()

    def read(self):
        count = self._session.run(self._count)
        came, self._seen = count > self._seen, count
        return came


def from_tf_config(text):
    """The ClusterTask TF_CONFIG `text` describes; None when it names no cluster (empty
    text or cluster). UsageError naming TF_CONFIG and the field when it is malformed."""
    if not text or not text.strip():
        return None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f'TF_CONFIG is not valid JSON: {e}') from e
    if not isinstance(config, dict):
        raise UsageError(f'TF_CONFIG must be a JSON object, got {text!r}')
    cluster = config.get('cluster')
    if cluster is not None and not isinstance(cluster, dict):
        raise UsageError(f'TF_CONFIG cluster must be an object of job: [host:port, ...], '
                         f'got {cluster!r}')
    if not cluster:
        return None
    task = config.get('task')
    if not isinstance(task, dict) or 'type' not in task:
        raise UsageError(f'TF_CONFIG task must be an object {{"type": ..., "index": ...}}, '
                         f'got {task!r}')
    return _checked(cluster, task['type'], task.get('index', 0), {
        'cluster': 'TF_CONFIG cluster', 'type': 'TF_CONFIG task type',
        'index': 'TF_CONFIG task index'})


def from_flags(ps_hosts, worker_hosts, job_name, task, chief_host=None,
               completion_index=None):
    """The ClusterTask of flags --ps_hosts, --worker_hosts (comma-separated host:port lists),
    --chief_host (one host:port), --job_name and --task (None: the index that
    `completion_index`, the text of JOB_COMPLETION_INDEX, gives, or 0 when that is None or
    blank); a host flag None or '' names no task. None when no host or job is given.
    UsageError naming the flag, or JOB_COMPLETION_INDEX, when they are inconsistent."""
    if not ps_hosts and not worker_hosts and not chief_host and not job_name:
        return None
    if not (worker_hosts or chief_host) or not job_name:
        raise UsageError(f'--ps_hosts, --worker_hosts (or --chief_host) and --job_name go '
                         f'together: got --worker_hosts={worker_hosts!r} '
                         f'--chief_host={chief_host!r} --job_name={job_name!r}')
    hosts = {'chief': chief_host, 'worker': worker_hosts, 'ps': ps_hosts}
    cluster = {job: [host.strip() for host in text.split(',')]
               for job, text in hosts.items() if text}
    index_name = '--task'
    if task is None and completion_index and completion_index.strip():
        index_name, task = 'JOB_COMPLETION_INDEX', completion_index.strip()
        task = int(task) if re.fullmatch(r'-?[0-9]+', task) else task
    host_flags = ('--ps_hosts/--chief_host/--worker_hosts' if chief_host else
                  '--ps_hosts/--worker_hosts')
    return _checked(cluster, job_name, 0 if task is None else task, {
        'cluster': host_flags, 'type': '--job_name', 'index': index_name})


def _checked(cluster, task_type, task_index, names):
    """A ClusterTask after checking every field; `names` says how errors name each."""
    cluster = {job: addresses for job, addresses in cluster.items() if job != EVALUATOR}
    if task_type == EVALUATOR and task_index != 0:
        raise UsageError(f'{names["index"]} {task_index!r} is out of range: the {EVALUATOR} '
                         'task has index 0')
    for job, addresses in cluster.items():
        if job not in TASK_TYPES:
            raise UsageError(f'{names["cluster"]} has job {job!r}: this trainer runs '
                             f'{", ".join(TASK_TYPES)} tasks')
        if not isinstance(addresses, list) or not addresses:
            raise UsageError(f'{names["cluster"]} job {job!r} must be a non-empty list of '
                             f'host:port, got {addresses!r}')
        for address in addresses:
            host, _, port = str(address).rpartition(':')
            if not (host and port.isascii() and port.isdigit() and 0 < int(port) < 65536):
                raise UsageError(f'{names["cluster"]} job {job!r}: {address!r} is not '
                                 'host:port')
    if len(cluster.get('chief', ())) > 1:
        raise UsageError(f'{names["cluster"]} must have at most one chief, got '
                         f'{cluster["chief"]!r}')
    if task_type != EVALUATOR and (not isinstance(task_type, str) or task_type not in cluster):
        raise UsageError(f'{names["type"]} {task_type!r} is not a job of the cluster '
                         f'(jobs: {", ".join(sorted(cluster))})')
    tasks = len(cluster.get(task_type, [None]))
    if isinstance(task_index, bool) or not isinstance(task_index, int) or not (
            0 <= task_index < tasks):
        raise UsageError(f'{names["index"]} {task_index!r} is out of range: the cluster has '
                         f'{tasks} {task_type} task(s), indices 0 to {tasks - 1}')
    task = ClusterTask({job: list(cluster[job]) for job in cluster}, task_type, task_index)
    if task.num_replicas == 0:
        raise UsageError(f'{names["cluster"]} has no worker or chief task to train')
    return task


def watchdog(task, timeout_secs, variable_update='parameter_server', sync_replicas=False,
             replicas_to_aggregate=1):
    """The watchdog.Watchdog (not started) of the tasks that `task` (a ClusterTask) needs
    in a cluster training this way, with `timeout_secs` (0: none); None when it needs none.

    Every task needs the ps tasks, and a worker the chief while it waits for it to
    initialize (see watchdog.Watchdog.waiting). Synchronous workers also need the chief all
    along (it applies the updates), and every worker when each update waits for all of them
    (replicas_to_aggregate equal to the replicas), as in 'collective' mode. A ps task
    serves and the evaluator reads checkpoints: they need no task.
    """
    if not timeout_secs or task.replica_index is None:
        return None
    needs, while_waiting = task.addresses(('ps',)), {}
    replicas = task.addresses(('chief', 'worker'))
    if variable_update == 'collective' or (
            sync_replicas and replicas_to_aggregate == task.num_replicas):
        needs.update(replicas)
    elif not task.is_chief:
        chief = {task.chief: replicas[task.chief]}
        if sync_replicas:
            needs.update(chief)
        else:
            while_waiting = chief
    if not needs and not while_waiting:
        return None
    return watchdog_lib.Watchdog(task.name, timeout_secs, needs, while_waiting)


def lost_peer(task, error, timeout_secs):
    """The ClusterError for `error` (one of PEER_ERRORS), raised by a collective op in
    `task`'s session, naming the other tasks the error names or, if it names none, those
    that do not answer now (watchdog.answering), or else every other task as a suspect;
    timeout_secs: how long the op waited for them."""
    others = task.addresses()
    named = {f'{job}:{index}' for job, index in _TASK_NAME.findall(error.message or '')}
    lost = [name for name in others if name in named]
    if not lost:
        answered = watchdog_lib.answering(others, timeout_secs=1.0)
        lost = [name for name in others if name not in answered]
    if lost and isinstance(error, tf.errors.DeadlineExceededError):
        return ClusterError(watchdog_lib.silence(_names(task, lost), task.name, timeout_secs))
    if lost:
        return ClusterError(f'{_names(task, lost)} stopped answering {task.name} '
                            f'({type(error).__name__}); {watchdog_lib.RESTART}')
    return ClusterError(f'{_names(task, others)} did not answer {task.name} within '
                        f'{timeout_secs:g} s ({type(error).__name__}) but still accept '
                        'connections: stuck or too slow (see --task_timeout_secs)')


def _names(task, names):
    """'worker:1 (host:port), ...' for task names of `task`'s cluster."""
    return ', '.join(f'{name} ({task.addresses()[name]})' for name in names)
