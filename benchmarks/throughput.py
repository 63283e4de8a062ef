"""Training throughput, the project's tf_cnn_benchmarks: deploy() against tf.distribute, per
precision, in one run.

    python benchmarks/throughput.py [--model_name resnet_v1_50] [--num_clones 2]
        [--batch_size 16] [--variable_update replicated[,parameter_server,collective]]
        [--precision float32[,bfloat16,float16]] [--xla off[,on]] [--compare_mirrored]
        [--dataset_name digits [--dataset_dir DIR]] [--steps 10] [--warmup_steps 3]
        [--rounds 3] [--json]

Every setup trains --model_name with momentum SGD on --batch_size examples per clone, on
--num_clones devices, with the same intra-/inter-op thread settings; one setup per
variable update, precision and XLA setting listed:

  parameter_server, replicated   one process, --num_clones clones (deploy())
  collective                     --num_clones worker processes of one clone, on loopback
  with --compare_mirrored, tf.distribute on the same model, batch and devices:
  MirroredStrategy               one process, --num_clones replicas (against the above two)
  MultiWorkerMirroredStrategy    --num_clones worker processes (against collective)

The images are a synthetic batch held on each clone's device (no input pipeline, no
per-step transfer; 10 classes), or with --dataset_name the real tf.data pipeline of that
dataset (the trainer's: sharded TFRecords, decode, preprocessing, shuffle, prefetch).
Devices: a GPU per clone and per worker where there are GPUs, else a CPU device each
(ConfigProto device_count). Each setup's processes start in turn, alone on the machine, and
report their time to first step (graph build, then session creation and initialization,
then the first step; the import of TensorFlow before it apart); then all stay warm, run
--warmup_steps untimed steps and, per round, --steps timed steps, the setups in an order
rotated each round so that machine noise hits all alike.

Prints, per setup, images/sec (global: every worker's images over the span from the first
worker's start to the last one's end; the median over rounds, and the spread: (max - min) /
median), seconds per step (median), the time to first step and the loss of the first and
last step; then the ratios of the medians: each deploy setup against its tf.distribute
counterpart, each precision against float32 and XLA on against off. --json prints one
object instead, with the fields `model_name`, `batch_size`, `num_clones`, `devices`,
`data`, `steps`, `warmup_steps`, `rounds`, `intra_op_threads`, `inter_op_threads`,
`tensorflow`, `seconds` (the whole run) and `setups`: {setup name ("replicated bfloat16",
"MirroredStrategy float32 xla"): {`variable_update` (or `mirrored`,
`multi_worker_mirrored`), `precision`, `xla`, `processes`, `images_per_sec` (median),
`images_per_sec_rounds`, `spread`, `sec_per_step`, `startup` {`import_secs`, `build_secs`,
`init_secs`, `first_step_secs`, `to_first_step_secs` (build + init + first step)},
`loss_first`, `loss_last`}}, and `ratios`: {"A / B": ratio of their median images/sec}.
A process that fails or stops answering (--timeout_secs) ends the run with a one-line error
and exit code 1; every process the benchmark started is ended on exit.
"""
import time

STARTED = time.time()  # Before anything is imported: the import's share of start-up.

from image_classifier import quiet  # noqa: E402

quiet.start()  # Before TensorFlow is imported.

import argparse  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

import tensorflow.compat.v1 as tf  # noqa: E402

# deployment first: importing it repairs tf-slim, which nets imports.
from deployment import launch, model_deploy, precision, training  # noqa: E402
from image_classifier import config, parts  # noqa: E402
from nets import nets_factory  # noqa: E402
from arguments import at_least, names_in  # noqa: E402  (benchmarks/arguments.py)

NUM_CLASSES = 10  # Of the synthetic data.
WEIGHT_DECAY = 4e-5
LEARNING_RATE = 0.01
MOMENTUM = 0.9
GRACE_SECS = 5.0  # How long processes get to exit at the end before they are killed.
PR_SET_PDEATHSIG = 1  # Linux prctl option: a signal for the process when its parent dies.

Kind = collections.namedtuple('Kind', ['label', 'workers', 'counterpart'])
Kind.__doc__ = """How a setup trains: its label in the table, whether it runs as one process
of --num_clones clones ('one') or as --num_clones worker processes of one clone ('each'),
and its tf.distribute counterpart (None: it is one)."""
KINDS = {
    'parameter_server': Kind('parameter_server', 'one', 'mirrored'),
    'replicated': Kind('replicated', 'one', 'mirrored'),
    'collective': Kind('collective', 'each', 'multi_worker_mirrored'),
    'mirrored': Kind('MirroredStrategy', 'one', None),
    'multi_worker_mirrored': Kind('MultiWorkerMirroredStrategy', 'each', None),
}
VARIABLE_UPDATES = ('parameter_server', 'replicated', 'collective')

Setup = collections.namedtuple('Setup', ['kind', 'precision', 'xla'])
Setup.__doc__ = """One configuration measured: a key of KINDS, a precision, XLA on or off."""


def setup_name(setup):
    """'replicated bfloat16', 'MirroredStrategy float32 xla': the setup's name."""
    return f'{KINDS[setup.kind].label} {setup.precision}' + (' xla' if setup.xla else '')


class BenchmarkError(Exception):
    """A process of the benchmark failed or stopped answering; the message is one line."""


# ---- The worker processes: one role each, given by --role. ----

def session_config(args, role, num_cpu_devices=None, **kwargs):
    """training.session_config(num_cpu_devices, **kwargs) with the role's precision and
    --intra_op_threads and --inter_op_threads: the same threads for every session."""
    session = training.session_config(num_cpu_devices, precision=role['precision'], **kwargs)
    session.intra_op_parallelism_threads = args.intra_op_threads
    session.inter_op_parallelism_threads = args.inter_op_threads
    return session


class Inputs:
    """What the clones train on: network_fn(images) -> (logits, end_points) of num_classes,
    and batch(device) -> (images, labels), a new batch per call: a synthetic one held on
    `device`, or the next of --dataset_name's real pipeline, read on `device`'s CPU
    (device None: the current one, and CPU:0)."""

    def __init__(self, args):
        self._batch_size = args.batch_size
        self._batches = None
        if not args.dataset_name:
            self.num_classes = NUM_CLASSES
            self.network_fn = nets_factory.get_network_fn(
                args.model_name, num_classes=NUM_CLASSES, weight_decay=WEIGHT_DECAY,
                is_training=True)
            return
        data = config.DataConfig(dataset_name=args.dataset_name, dataset_dir=args.dataset_dir,
                                 batch_size=args.batch_size)
        classifier = parts.classifier(data, config.ModelConfig(model_name=args.model_name),
                                      is_training=True, weight_decay=WEIGHT_DECAY)
        self.num_classes, self.network_fn = classifier.num_classes, classifier.network_fn
        self._batches = lambda: classifier.training_batches(data)
        self._iterator = None

    def batch(self, device=None):
        if self._batches is None:
            with tf.device(device):
                return synthetic_batch(self._batch_size, self.network_fn.default_image_size)
        cpu = tf.DeviceSpec.from_string(device or '').replace(device_type='CPU', device_index=0)
        with tf.device(cpu):
            if self._iterator is None:
                self._iterator = tf.data.make_one_shot_iterator(self._batches())
            return self._iterator.get_next()

    def loss(self, images, labels, xla=False):
        """Builds the network on the batch (compiled by XLA if `xla`); returns its loss."""
        with tf.xla.experimental.jit_scope() if xla else contextlib.nullcontext():
            logits, end_points = self.network_fn(images)
            return training.add_classification_losses(logits, end_points, labels,
                                                      self.num_classes)


def optimizer(role):
    """Momentum SGD; with float16, under TensorFlow's dynamic loss scaling (tf.distribute's
    setups: deploy() scales by itself)."""
    momentum = tf.train.MomentumOptimizer(LEARNING_RATE, MOMENTUM)
    if role['kind'] in VARIABLE_UPDATES or not precision.PRECISIONS[role['precision']].loss_scaling:
        return momentum
    return tf.mixed_precision.MixedPrecisionLossScaleOptimizer(momentum, 'dynamic')


def synthetic_batch(batch_size, image_size):
    """(images [batch_size, image_size, image_size, 3] uniform in [-1, 1), labels
    [batch_size] int32 in [0, NUM_CLASSES)): local variables on the current device, set by
    the local-variable initializer and read in place at every step. Seeded: every clone,
    replica and worker of every setup trains on the same examples, so their losses compare."""
    images = tf.Variable(
        tf.random.uniform([batch_size, image_size, image_size, 3], -1.0, 1.0, seed=1),
        trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES], name='synthetic_images')
    labels = tf.Variable(
        tf.random.uniform([batch_size], maxval=NUM_CLASSES, dtype=tf.int32, seed=2),
        trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES], name='synthetic_labels')
    return images, labels


def deployed_step(args, role, deployment):
    """deploy()'s train_op for `deployment` (a DeploymentConfig), each clone training on a
    batch of its own."""
    inputs = Inputs(args)
    devices = iter([deployment.clone_device(i) for i in range(deployment.num_clones)])

    def model_fn():
        inputs.loss(*inputs.batch(next(devices)))

    return model_deploy.deploy(deployment, model_fn, optimizer=optimizer(role)).train_op


def deploy_trainer(args, role):
    """One process, no cluster: 'parameter_server' or 'replicated' over role's devices;
    returns (session, step, server, time the graph was built)."""
    deployment = model_deploy.DeploymentConfig(
        num_clones=len(role['devices']), clone_devices=role['devices'],
        variable_update=role['kind'], all_reduce_pack_bytes=args.all_reduce_pack_bytes,
        precision=role['precision'], xla=role['xla'])
    step = deployed_step(args, role, deployment)
    built = time.time()
    session = tf.Session(config=session_config(args, role, role['cpu_devices']))
    session.run(tf.global_variables_initializer())
    session.run(tf.local_variables_initializer())  # Batches; replicated: clone 0's copies.
    return session, step, None, built


def collective_trainer(args, role):
    """Worker role['index'] of a 'collective' cluster: every worker initializes, then the
    chief's values are broadcast."""
    task, cluster = role['index'], role['cluster']
    leader = '/job:worker/replica:0/task:0'
    deployment = model_deploy.DeploymentConfig(
        num_clones=1, clone_devices=role['devices'], variable_update='collective',
        replica_id=task, num_replicas=len(cluster['worker']), worker_job_name='worker',
        all_reduce_pack_bytes=args.all_reduce_pack_bytes, precision=role['precision'],
        xla=role['xla'])
    step = deployed_step(args, role, deployment)
    built = time.time()
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                  task_index=task, config=session_config(
                                      args, role, role['cpu_devices'],
                                      collective_leader=leader, remote=True))
    session = tf.Session(server.target, config=session_config(
        args, role, device_filters=[f'/job:worker/task:{task}'], collective_leader=leader,
        remote=True))
    session.run(tf.global_variables_initializer())
    session.run(tf.get_collection(tf.GraphKeys.LOCAL_INIT_OP))
    return session, step, server, built


def strategy_step(strategy, args, role):
    """The fetch that trains one step under `strategy` (a tf.compat.v1 Mirrored or
    MultiWorkerMirrored strategy) and returns the mean loss of this process's replicas.

    Each replica builds the network on its own batch and minimizes its loss /
    num_replicas_in_sync with its own v1 optimizer, which sums the gradients over every
    replica: as deploy(), the update is the gradient of the mean loss. The regularization
    losses exist once per process (made by the replica that made the variables) and are
    weighted by the process's replica count, so that they count once in all. The step also
    runs the batch norms' moving-average updates (deploy() runs clone 0's).
    """
    inputs = Inputs(args)
    local_replicas = len(strategy.extended.worker_devices)

    def replica_step():  # On the replica's device.
        context = tf.distribute.get_replica_context()
        images, labels = inputs.batch()
        made = len(tf.losses.get_regularization_losses())
        loss = inputs.loss(images, labels, role['xla'])
        regularization = tf.losses.get_regularization_losses()[made:]
        if regularization:
            loss += local_replicas * tf.add_n(regularization)
        with tf.control_dependencies([optimizer(role).minimize(
                loss / context.num_replicas_in_sync)]):
            return tf.identity(loss)

    with strategy.scope():
        losses = strategy.experimental_local_results(
            strategy.extended.call_for_each_replica(replica_step))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        return tf.add_n(losses) / len(losses)


def strategy_trainer(args, role):
    """MirroredStrategy over role's devices in one process, or worker role['index'] of
    MultiWorkerMirroredStrategy (its cluster in TF_CONFIG, its server started here, graph
    mode as tf.compat.v1's documentation has it)."""
    if role['kind'] == 'mirrored':
        strategy = tf.distribute.MirroredStrategy(devices=role['devices'])
        step = strategy_step(strategy, args, role)
        built = time.time()
        session = tf.Session(config=strategy.update_config_proto(
            session_config(args, role, role['cpu_devices'])))
        server = None
    else:
        strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        step = strategy_step(strategy, args, role)
        built = time.time()
        server = tf.distribute.Server(
            tf.train.ClusterSpec(role['cluster']), job_name='worker', task_index=role['index'],
            config=strategy.update_config_proto(
                session_config(args, role, role['cpu_devices'], remote=True)))
        session = tf.Session(server.target, config=strategy.update_config_proto(
            session_config(args, role, remote=True)))
    # Both at once: MultiWorkerMirroredStrategy's initializers broadcast the chief's values.
    session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    return session, step, server, built


TRAINERS = {'parameter_server': deploy_trainer, 'replicated': deploy_trainer,
            'collective': collective_trainer, 'mirrored': strategy_trainer,
            'multi_worker_mirrored': strategy_trainer}


def train(session, step, steps):
    """Runs `steps` training steps; returns the last loss (None for none).
    FloatingPointError if a loss is not finite."""
    loss = None
    for _ in range(steps):
        loss = float(session.run(step))
        if not math.isfinite(loss):
            raise FloatingPointError(f'the loss is {loss}')
    return loss


def serve_role(args, role, reply):
    """The work of one worker process: builds its trainer, runs the first step and replies
    {'ready': its loss, 'startup': {import_secs, build_secs, init_secs, first_step_secs,
    to_first_step_secs}}; then for each command on stdin, {'warmup': n} (n untimed steps,
    replies {}) or {'steps': n} (replies {'start', 'end' (time.time() s), 'images', 'loss'
    (the last)}), until stdin closes."""
    tf.disable_eager_execution()
    begun = time.time()
    session, step, _server, built = TRAINERS[role['kind']](args, role)  # Server kept alive.
    initialized = time.time()
    first = train(session, step, 1)
    done = time.time()
    reply(ready=first, startup={
        'import_secs': begun - STARTED, 'build_secs': built - begun,
        'init_secs': initialized - built, 'first_step_secs': done - initialized,
        'to_first_step_secs': done - begun})
    for line in sys.stdin:
        command = json.loads(line)
        if 'warmup' in command:
            train(session, step, command['warmup'])
            reply()
            continue
        start = time.time()
        loss = train(session, step, command['steps'])
        reply(start=start, end=time.time(), loss=loss,
              images=command['steps'] * args.batch_size * len(role['devices']))


def run_role(args):
    """Entry of a process the benchmark started: replies go as JSON lines to the original
    stdout, everything else (TensorFlow's output included) to stderr; on failure it replies
    {'error': one line} and exits 1. Never returns."""
    if sys.platform.startswith('linux'):  # Killed if the benchmark dies without ending it.
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    replies = os.fdopen(os.dup(1), 'w', buffering=1)
    os.dup2(2, 1)

    def reply(**message):
        replies.write(json.dumps(message) + '\n')

    try:
        serve_role(args, json.loads(args.role), reply)
    except BaseException as e:  # noqa: BLE001 (reported, then the process ends)
        traceback.print_exc()
        first_line = (str(e).strip().splitlines() or [''])[0]
        reply(error=f'{type(e).__name__}: {first_line}')
        sys.stderr.flush()
        os._exit(1)
    sys.stderr.flush()
    os._exit(0)  # Without TensorFlow's teardown, which can block on a server's threads.


# ---- The benchmark: starts the processes, runs the rounds, prints the results. ----

class Process:
    """One process the benchmark started: `name` in messages, its stdin for commands, a
    thread passing its stdout replies (or None at its end) to the shared queue, its
    stderr in the file `log`."""

    def __init__(self, name, argv, env, log, replies):
        self.name = name
        self.log = log
        self.error = None  # The one line it replied with when it failed.
        self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=log, env=env, text=True, start_new_session=True)
        threading.Thread(target=self._forward, args=(replies,), daemon=True).start()

    def _forward(self, replies):
        for line in self.popen.stdout:
            replies.put((self, json.loads(line)))
        replies.put((self, None))

    def send(self, **command):
        try:
            self.popen.stdin.write(json.dumps(command) + '\n')
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
        lines = quiet.drop_startup_noise(self.log.read().decode(errors='replace')).split('\n')
        last = next((line.strip() for line in reversed(lines) if line.strip()), 'no output')
        return f'{self.name} ended ({launch.exit_description(code)}): {last}'


class Processes:
    """Every process the benchmark starts, in `directory` (their stderr logs); close() ends
    them all: their stdin closes, and those still running GRACE_SECS later are killed."""

    def __init__(self, args, directory):
        self._args = args
        self._directory = directory
        self._replies = queue.Queue()
        self._all = []

    def start(self, name, role, env=None):
        """Starts this script as `role` (a JSON-able dict) with `env` added to the
        environment; returns its Process."""
        argv = [sys.executable, os.path.abspath(__file__), '--role', json.dumps(role)]
        for option in ('model_name', 'batch_size', 'all_reduce_pack_bytes', 'dataset_name',
                       'dataset_dir', 'intra_op_threads', 'inter_op_threads'):
            if getattr(self._args, option) is not None:
                argv += [f'--{option}', str(getattr(self._args, option))]
        environment = {key: value for key, value in os.environ.items() if key != 'TF_CONFIG'}
        environment.update(env or {})
        log = tempfile.TemporaryFile(dir=self._directory)
        self._all.append(Process(name, argv, environment, log, self._replies))
        return self._all[-1]

    def collect(self, processes, waiting_for):
        """The next reply of each of `processes`, in their order. BenchmarkError when any
        process of the benchmark ends or fails, or when these have not all replied within
        --timeout_secs (`waiting_for` says for what)."""
        timeout = self._args.timeout_secs
        deadline = time.monotonic() + timeout
        replies = {}
        while len(replies) < len(processes):
            try:
                process, reply = self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                late = ', '.join(p.name for p in processes if p not in replies)
                raise BenchmarkError(f'{late} did not {waiting_for} within {timeout:g} s '
                                     '(see --timeout_secs)') from None
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


def machine_devices(args):
    """(one-process devices, each worker's device, CPU device count of a one-process session
    (None: TensorFlow's), environment of worker i (a function)) for this machine."""
    gpus = len(tf.config.list_physical_devices('GPU'))
    if not gpus:
        return ([f'/device:CPU:{i}' for i in range(args.num_clones)], '/device:CPU:0',
                args.num_clones, lambda index: {})
    if gpus < args.num_clones:
        raise BenchmarkError(f'{gpus} GPU(s) found: --num_clones {args.num_clones} needs '
                             f'{args.num_clones}')
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    ids = visible.split(',') if visible else [str(i) for i in range(gpus)]
    return ([f'/device:GPU:{i}' for i in range(args.num_clones)], '/device:GPU:0', None,
            lambda index: {'CUDA_VISIBLE_DEVICES': ids[index]})


def setups(args):
    """The setups of the run, in the order of the table: each variable update (then its
    tf.distribute counterpart, with --compare_mirrored) in each precision and XLA setting."""
    kinds = list(args.variable_update)
    if args.compare_mirrored:
        kinds += [kind for kind in ('mirrored', 'multi_worker_mirrored')
                  if any(KINDS[k].counterpart == kind for k in args.variable_update)]
    return [Setup(kind, p, xla) for kind in kinds for p in args.precision for xla in args.xla]


def start_setup(processes, setup, machine, ports):
    """Starts `setup`'s processes, a cluster's tasks on `ports` (an iterator of free ports);
    returns them."""
    local_devices, worker_device, cpu_devices, worker_env = machine
    name = setup_name(setup)
    role = dict(kind=setup.kind, precision=setup.precision, xla=setup.xla)
    if KINDS[setup.kind].workers == 'one':
        return [processes.start(name, dict(role, devices=local_devices,
                                           cpu_devices=cpu_devices))]
    workers = len(local_devices)
    cluster = {'worker': [f'{launch.LOCALHOST}:{next(ports)}' for _ in range(workers)]}
    started = []
    for index in range(workers):
        env = worker_env(index)
        if setup.kind == 'multi_worker_mirrored':
            env['TF_CONFIG'] = json.dumps(
                {'cluster': cluster, 'task': {'type': 'worker', 'index': index}})
        started.append(processes.start(f'{name} worker {index}', dict(
            role, index=index, cluster=cluster, devices=[worker_device], cpu_devices=None),
            env))
    return started


def measure(processes, workers, steps):
    """Global images/sec and seconds per step of one round of `steps` steps on each of
    `workers`, and the last loss of the first."""
    for worker in workers:
        worker.send(steps=steps)
    replies = processes.collect(workers, f'run {steps} steps')
    span = max(r['end'] for r in replies) - min(r['start'] for r in replies)
    return sum(r['images'] for r in replies) / span, span / steps, replies[0]['loss']


def ratios(names):
    """[(numerator, denominator)] of the setup names worth comparing, among {Setup: name}:
    each deploy setup against its tf.distribute counterpart, each precision against
    float32, XLA on against off."""
    pairs = []
    for setup, name in names.items():
        others = [setup._replace(kind=KINDS[setup.kind].counterpart),
                  setup._replace(precision='float32'), setup._replace(xla=False)]
        pairs += [(name, names[other]) for other in others if other != setup and other in names]
    return pairs


def benchmark(args, log):
    """Runs every setup; returns the results as a JSON-able dict. `log`: progress lines."""
    started = time.monotonic()
    machine = machine_devices(args)
    for name in args.precision:
        slow = precision.slowness(name, machine[0][0], precision.cpu_flags())
        if slow:
            log(f'warning: {slow}')
    names = {setup: setup_name(setup) for setup in setups(args)}
    results = {name: {'variable_update': setup.kind, 'precision': setup.precision,
                      'xla': setup.xla, 'images_per_sec_rounds': [], 'sec_per_step_rounds': []}
               for setup, name in names.items()}
    with tempfile.TemporaryDirectory() as directory:
        processes = Processes(args, directory)
        try:
            ports = iter(launch.free_ports(launch.LOCALHOST, len(machine[0]) * sum(
                KINDS[setup.kind].workers == 'each' for setup in names)))
            workers = {}
            for setup, name in names.items():  # In turn: each start-up alone on the machine.
                workers[name] = start_setup(processes, setup, machine, ports)
                first = processes.collect(workers[name], 'start')
                results[name].update(processes=len(workers[name]), loss_first=first[0]['ready'],
                                     startup=first[0]['startup'])
                log(f'{name}: first step after '
                    f"{first[0]['startup']['to_first_step_secs']:.1f} s")
            everyone = [worker for started in workers.values() for worker in started]
            for worker in everyone:
                worker.send(warmup=args.warmup_steps)
            processes.collect(everyone, f'run {args.warmup_steps} warm-up steps')
            order = list(names.values())
            for round_index in range(args.rounds):
                shift = round_index % len(order)
                for name in order[shift:] + order[:shift]:
                    rate, sec_per_step, results[name]['loss_last'] = measure(
                        processes, workers[name], args.steps)
                    results[name]['images_per_sec_rounds'].append(rate)
                    results[name]['sec_per_step_rounds'].append(sec_per_step)
                log(f'round {round_index + 1}/{args.rounds} done, '
                    f'{time.monotonic() - started:.0f} s')
        finally:
            processes.close()
    for result in results.values():
        rates = result['images_per_sec_rounds']
        result['images_per_sec'] = statistics.median(rates)
        result['spread'] = (max(rates) - min(rates)) / result['images_per_sec']
        result['sec_per_step'] = statistics.median(result.pop('sec_per_step_rounds'))
    return {
        'model_name': args.model_name, 'batch_size': args.batch_size,
        'num_clones': args.num_clones, 'devices': machine[0][0].split(':')[1],
        'data': args.dataset_name or 'synthetic', 'steps': args.steps,
        'warmup_steps': args.warmup_steps, 'rounds': args.rounds,
        'intra_op_threads': args.intra_op_threads, 'inter_op_threads': args.inter_op_threads,
        'tensorflow': tf.__version__, 'setups': results,
        'ratios': {f'{a} / {b}': results[a]['images_per_sec'] / results[b]['images_per_sec']
                   for a, b in ratios(names)},
        'seconds': time.monotonic() - started,
    }


def table(results):
    """The results as printable lines."""
    r = results
    lines = [
        f"{r['model_name']}, batch {r['batch_size']} per clone, momentum SGD, "
        f"{r['num_clones']} {r['devices']} devices, {r['data']} images; TensorFlow "
        f"{r['tensorflow']}",
        f"{r['steps']} timed steps per round after {r['warmup_steps']} warm-up steps, "
        f"medians of {r['rounds']} round(s); threads intra-op {r['intra_op_threads']}, "
        f"inter-op {r['inter_op_threads']} (0: TensorFlow's default)", '',
        f"{'setup':<40} {'images/sec':>10} {'spread':>7} {'sec/step':>9} "
        f"{'first step':>11}  loss first -> last"]
    for name, setup in r['setups'].items():
        lines.append(f"{name:<40} {setup['images_per_sec']:>10.1f} {setup['spread']:>7.1%} "
                     f"{setup['sec_per_step']:>9.3f} "
                     f"{setup['startup']['to_first_step_secs']:>10.1f}s  "
                     f"{setup['loss_first']:.4f} -> {setup['loss_last']:.4f}")
    if r['ratios']:
        lines += ['', f"{'ratio of images/sec (medians)':<72} value"]
        lines += [f'{pair:<72} {value:5.3f}' for pair, value in r['ratios'].items()]
    lines += ['', "first step: graph build + session creation and initialization + the "
                  "first step, s (TensorFlow's import apart)", f"run took {r['seconds']:.0f} s"]
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model_name', default='resnet_v1_50',
                        choices=nets_factory.NETWORKS.names, metavar='NAME',
                        help='network of nets_factory (default resnet_v1_50)')
    parser.add_argument('--batch_size', type=at_least(1), default=16,
                        help='images per clone and step (default 16)')
    parser.add_argument('--num_clones', type=at_least(1), default=2,
                        help='clones (devices); collective: worker processes (default 2)')
    parser.add_argument('--variable_update', type=names_in(VARIABLE_UPDATES),
                        default=['replicated'],
                        help='comma-separated: ' + ', '.join(VARIABLE_UPDATES) +
                             ' (default replicated)')
    parser.add_argument('--precision', type=names_in(precision.PRECISIONS.names),
                        default=['float32'],
                        help='comma-separated: ' + ', '.join(precision.PRECISIONS) +
                             ' (default float32)')
    parser.add_argument('--xla', type=names_in(('off', 'on')), nargs='?', const=['on'],
                        default=['off'], help='XLA compilation: off, on or off,on (default '
                                              'off; --xla alone: on)')
    parser.add_argument('--compare_mirrored', action='store_true',
                        help="also run tf.distribute's MirroredStrategy (and, for collective, "
                             'MultiWorkerMirroredStrategy) in each precision')
    parser.add_argument('--dataset_name', help='train on the real tf.data pipeline of this '
                                               'dataset (default: synthetic images)')
    parser.add_argument('--dataset_dir', help="the dataset's directory (digits: none needed)")
    parser.add_argument('--steps', type=at_least(1), default=10,
                        help='timed steps per setup and round (default 10)')
    parser.add_argument('--warmup_steps', type=at_least(0), default=3,
                        help='untimed steps after the first (default 3)')
    parser.add_argument('--rounds', type=at_least(1), default=3,
                        help='rounds over every setup; medians are reported (default 3)')
    parser.add_argument('--all_reduce_pack_bytes', type=at_least(0),
                        default=model_deploy.ALL_REDUCE_PACK_BYTES,
                        help='pack size of replicated and collective gradient all-reduces, '
                             'bytes (default %(default)s; 0: one all-reduce per gradient)')
    parser.add_argument('--intra_op_threads', type=at_least(0), default=0,
                        help="intra-op threads of every session (default 0: TensorFlow's)")
    parser.add_argument('--inter_op_threads', type=at_least(0), default=0,
                        help="inter-op threads of every session (default 0: TensorFlow's)")
    parser.add_argument('--timeout_secs', type=at_least(1), default=600,
                        help='longest wait for a setup to start, or a round to run, seconds '
                             '(default 600)')
    parser.add_argument('--json', action='store_true',
                        help='print one JSON object instead of the table')
    parser.add_argument('--role', help=argparse.SUPPRESS)  # Set in the processes it starts.
    args = parser.parse_args(argv)
    if 'collective' in args.variable_update and args.num_clones < 2:
        parser.error('--variable_update=collective needs --num_clones >= 2 (its workers)')
    args.xla = [value == 'on' for value in args.xla]
    return args


def main():
    args = parse_args()
    if args.role:
        run_role(args)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        results = benchmark(args, lambda line: print(line, file=sys.stderr, flush=True))
    except BenchmarkError as e:
        print(f'throughput.py: error: {e}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    print(json.dumps(results) if args.json else '\n'.join(table(results)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
