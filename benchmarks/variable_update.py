"""Measures training throughput of each variable_update mode against tf.distribute, in one run.

    python benchmarks/variable_update.py [--model_name cifarnet] [--batch_size 64]
        [--num_clones 2] [--steps 20] [--warmup_steps 5] [--rounds 3]
        [--all_reduce_pack_bytes 33554432] [--json]

Every setup trains the same network (10 classes, weight decay 4e-5) with momentum SGD on a
synthetic batch of --batch_size examples per clone, held on each clone's device (no input
pipeline, no per-step transfer), with the same intra-/inter-op thread settings:

  one process, --num_clones clones on as many devices:
    parameter_server             slim's default: variables on CPU:0, gradients summed there
    replicated                   a copy of the variables per clone, gradients all-reduced
    MirroredStrategy             tf.distribute's, over the same devices
  two worker processes on loopback, one clone each:
    collective                   variable_update='collective'
    MultiWorkerMirroredStrategy  tf.distribute's, TF_CONFIG naming both workers
    ps async                     parameter_server with 1 ps task, workers asynchronous
    unshared                     two independent processes, no communication: the bound

Devices: GPU:0..N-1 in one process and each worker its own GPU where there are GPUs, else
CPU devices (ConfigProto device_count). The benchmark runs every process itself (this
script with a hidden --role, ports picked free on 127.0.0.1); each starts once and runs
--warmup_steps untimed steps, then --steps timed steps per round. Rounds run the setups in
an order rotated each round, so machine noise hits all alike.

Prints, per setup, examples/sec (median over rounds; global: every worker's examples over
the span from the first worker's start to the last one's end) and the loss of its first
and last step, then the ratios of those medians; with --json, one JSON object instead. A
process that fails or stops answering (--timeout_secs) ends the run with a one-line error
and exit code 1; every process the benchmark started is ended on exit.
"""
from image_classifier import quiet

quiet.start()  # Before TensorFlow is imported.

import argparse  # noqa: E402
import collections  # noqa: E402
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
import time  # noqa: E402
import traceback  # noqa: E402

import tensorflow.compat.v1 as tf  # noqa: E402

# deployment first: importing it repairs tf-slim, which nets imports.
from deployment import launch, model_deploy, training  # noqa: E402
from nets import nets_factory  # noqa: E402

NUM_CLASSES = 10
WEIGHT_DECAY = 4e-5
LEARNING_RATE = 0.01
MOMENTUM = 0.9
GRACE_SECS = 5.0  # How long processes get to exit at the end before they are killed.
PR_SET_PDEATHSIG = 1  # Linux prctl option: a signal for the process when its parent dies.

Setup = collections.namedtuple('Setup', ['label', 'workers', 'ps_tasks', 'clustered',
                                         'shape'])
Setup.__doc__ = """One configuration measured: `workers` training processes (1: one process
with --num_clones clones; 2: one clone each), `ps_tasks` ps processes, whether they form a
cluster; label and shape: what the table calls it and its processes."""
SETUPS = {
    'parameter_server': Setup('parameter_server', 1, 0, False, '1 process x {clones} clones'),
    'replicated': Setup('replicated', 1, 0, False, '1 process x {clones} clones'),
    'mirrored': Setup('MirroredStrategy', 1, 0, False, '1 process x {clones} replicas'),
    'collective': Setup('collective', 2, 0, True, '2 workers'),
    'multi_worker_mirrored': Setup('MultiWorkerMirroredStrategy', 2, 0, True, '2 workers'),
    'ps_async': Setup('ps async', 2, 1, True, '1 ps + 2 workers'),
    'unshared': Setup('unshared', 2, 0, False, '2 processes'),
}
RATIOS = (('replicated', 'mirrored'), ('replicated', 'parameter_server'),
          ('collective', 'multi_worker_mirrored'), ('collective', 'ps_async'),
          ('collective', 'unshared'), ('multi_worker_mirrored', 'unshared'),
          ('ps_async', 'unshared'))

Trainer = collections.namedtuple('Trainer', ['session', 'step', 'server'])
Trainer.__doc__ = """A worker process's initialized session, the fetch that trains one step
and returns the loss, and the process's tf.distribute.Server (None: none), kept alive."""


class BenchmarkError(Exception):
    """A process of the benchmark failed or stopped answering; the message is one line."""


# ---- The worker processes: one role each, given by --role. ----

def session_config(args, num_cpu_devices=None, **kwargs):
    """training.session_config(num_cpu_devices, **kwargs) with --intra_op_threads and
    --inter_op_threads: the same thread settings for every session and server."""
    config = training.session_config(num_cpu_devices, **kwargs)
    config.intra_op_parallelism_threads = args.intra_op_threads
    config.inter_op_parallelism_threads = args.inter_op_threads
    return config


def network(args):
    return nets_factory.get_network_fn(args.model_name, num_classes=NUM_CLASSES,
                                       weight_decay=WEIGHT_DECAY, is_training=True)


def optimizer():
    return tf.train.MomentumOptimizer(LEARNING_RATE, MOMENTUM)


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


def deployed_step(args, config):
    """deploy()'s train_op for `config`, each clone training on its own synthetic batch."""
    network_fn = network(args)
    devices = iter([config.clone_device(i) for i in range(config.num_clones)])

    def model_fn():
        with tf.device(next(devices)):
            images, labels = synthetic_batch(args.batch_size, network_fn.default_image_size)
        logits, end_points = network_fn(images)
        training.add_classification_losses(logits, end_points, labels, NUM_CLASSES)

    return model_deploy.deploy(config, model_fn, optimizer=optimizer()).train_op


def deploy_trainer(args, role):
    """One process, no cluster: 'parameter_server' or 'replicated' over role's devices
    (unshared: 'parameter_server' with one clone)."""
    variable_update = 'replicated' if role['setup'] == 'replicated' else 'parameter_server'
    config = model_deploy.DeploymentConfig(
        num_clones=len(role['devices']), clone_devices=role['devices'],
        variable_update=variable_update, all_reduce_pack_bytes=args.all_reduce_pack_bytes)
    step = deployed_step(args, config)
    session = tf.Session(config=session_config(args, role['cpu_devices']))
    session.run(tf.global_variables_initializer())
    session.run(tf.local_variables_initializer())  # Batches; replicated: clone 0's copies.
    return Trainer(session, step, None)


def cluster_trainer(args, role):
    """Worker role['index'] of a cluster: 'collective' (every worker initializes, then the
    chief's values are broadcast) or ps async (the chief initializes the ps's variables,
    the other worker waits for them)."""
    task, cluster = role['index'], role['cluster']
    collective = role['setup'] == 'collective'
    leader = '/job:worker/replica:0/task:0' if collective else None
    config = model_deploy.DeploymentConfig(
        num_clones=1, clone_devices=role['devices'],
        variable_update='collective' if collective else 'parameter_server',
        replica_id=task, num_replicas=len(cluster['worker']),
        num_ps_tasks=len(cluster.get('ps', ())), worker_job_name='worker',
        all_reduce_pack_bytes=args.all_reduce_pack_bytes)
    step = deployed_step(args, config)
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name='worker',
                                  task_index=task, config=session_config(
                                      args, role['cpu_devices'], collective_leader=leader))
    filters = [f'/job:worker/task:{task}'] + ([] if collective else ['/job:ps'])
    session = tf.Session(server.target, config=session_config(
        args, device_filters=filters, collective_leader=leader))
    if collective:
        session.run(tf.global_variables_initializer())
        session.run(tf.get_collection(tf.GraphKeys.LOCAL_INIT_OP))
        return Trainer(session, step, server)
    session.run(tf.local_variables_initializer())  # The synthetic batch, on this worker.
    if task == 0:
        session.run(tf.global_variables_initializer())
    uninitialized = tf.report_uninitialized_variables(tf.global_variables())
    while session.run(uninitialized).size:  # The benchmark's timeout bounds the wait.
        time.sleep(0.2)
    return Trainer(session, step, server)


def strategy_step(strategy, args):
    """The fetch that trains one step under `strategy` (a tf.compat.v1 Mirrored or
    MultiWorkerMirrored strategy) and returns the mean loss of this process's replicas.

    Each replica builds the network on its own synthetic batch and minimizes its loss /
    num_replicas_in_sync with its own v1 optimizer, which sums the gradients over every
    replica: as deploy(), the update is the gradient of the mean loss. The regularization
    losses exist once per process (made by the replica that made the variables) and are
    weighted by the process's replica count, so that they count once in all.
    """
    network_fn = network(args)
    local_replicas = len(strategy.extended.worker_devices)

    def replica_step():
        images, labels = synthetic_batch(args.batch_size, network_fn.default_image_size)
        made = len(tf.losses.get_regularization_losses())
        logits, end_points = network_fn(images)
        loss = training.add_classification_losses(logits, end_points, labels, NUM_CLASSES)
        regularization = tf.losses.get_regularization_losses()[made:]
        if regularization:
            loss += local_replicas * tf.add_n(regularization)
        num_replicas = tf.distribute.get_replica_context().num_replicas_in_sync
        with tf.control_dependencies([optimizer().minimize(loss / num_replicas)]):
            return tf.identity(loss)

    with strategy.scope():
        losses = strategy.experimental_local_results(
            strategy.extended.call_for_each_replica(replica_step))
    return tf.add_n(losses) / len(losses)


def strategy_trainer(args, role):
    """MirroredStrategy over role's devices in one process, or worker role['index'] of
    MultiWorkerMirroredStrategy (its cluster in TF_CONFIG, its server started here, graph
    mode as tf.compat.v1's documentation has it)."""
    if role['setup'] == 'mirrored':
        strategy = tf.distribute.MirroredStrategy(devices=role['devices'])
        step = strategy_step(strategy, args)
        session = tf.Session(config=strategy.update_config_proto(
            session_config(args, role['cpu_devices'])))
        server = None
    else:
        strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        step = strategy_step(strategy, args)
        server = tf.distribute.Server(
            tf.train.ClusterSpec(role['cluster']), job_name='worker', task_index=role['index'],
            config=strategy.update_config_proto(session_config(args, role['cpu_devices'])))
        session = tf.Session(server.target, config=strategy.update_config_proto(
            session_config(args)))
    # Both at once: MultiWorkerMirroredStrategy's initializers broadcast the chief's values.
    session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    return Trainer(session, step, server)


TRAINERS = {'parameter_server': deploy_trainer, 'replicated': deploy_trainer,
            'unshared': deploy_trainer, 'mirrored': strategy_trainer,
            'multi_worker_mirrored': strategy_trainer, 'collective': cluster_trainer,
            'ps_async': cluster_trainer}


def train(trainer, steps):
    """Runs `steps` training steps; returns the last loss (None for none).
    FloatingPointError if a loss is not finite."""
    loss = None
    for _ in range(steps):
        loss = float(trainer.session.run(trainer.step))
        if not math.isfinite(loss):
            raise FloatingPointError(f'the loss is {loss}')
    return loss


def serve_role(args, role, reply):
    """The work of one process: a ps task serves until its stdin closes; a worker builds its
    trainer, runs the warm-up, replies {'ready': first loss} and then, for each command
    {'steps': n} on stdin, trains n steps and replies {'start', 'end' (time.time() s),
    'examples', 'loss' (the last)}, until stdin closes."""
    tf.disable_eager_execution()
    if role['task'] == 'ps':
        server = tf.distribute.Server(tf.train.ClusterSpec(role['cluster']), job_name='ps',
                                      task_index=role['index'], config=session_config(args))
        print(f'ps serving at {server.target} until stdin closes', file=sys.stderr)
        reply(ready=None)
        sys.stdin.read()
        return
    trainer = TRAINERS[role['setup']](args, role)
    first = train(trainer, 1)
    train(trainer, args.warmup_steps - 1)
    reply(ready=first)
    for line in sys.stdin:
        steps = json.loads(line)['steps']
        start = time.time()
        loss = train(trainer, steps)
        reply(start=start, end=time.time(), loss=loss,
              examples=steps * args.batch_size * len(role['devices']))


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
        for option in ('model_name', 'batch_size', 'warmup_steps', 'all_reduce_pack_bytes',
                       'intra_op_threads', 'inter_op_threads'):
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
    if gpus < max(args.num_clones, 2):
        raise BenchmarkError(f'{gpus} GPU(s) found: --num_clones {args.num_clones} needs '
                             f'{args.num_clones} and the two workers need 2')
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    ids = visible.split(',') if visible else [str(i) for i in range(gpus)]
    return ([f'/device:GPU:{i}' for i in range(args.num_clones)], '/device:GPU:0', None,
            lambda index: {'CUDA_VISIBLE_DEVICES': '' if index is None else ids[index]})


def start_setup(processes, name, machine, ports):
    """Starts setup `name`'s processes, its cluster's tasks on `ports` (an iterator of free
    ports); returns (its training processes, its ps processes)."""
    setup = SETUPS[name]
    local_devices, worker_device, cpu_devices, worker_env = machine
    if setup.workers == 1:
        return [processes.start(setup.label, dict(
            setup=name, task='worker', index=0, devices=local_devices,
            cpu_devices=cpu_devices))], []
    cluster = {job: [f'{launch.LOCALHOST}:{next(ports)}' for _ in range(tasks)]
               for job, tasks in (('ps', setup.ps_tasks), ('worker', setup.workers))
               if tasks} if setup.clustered else None
    ps = [processes.start(f'{setup.label} ps {index}', dict(
        setup=name, task='ps', index=index, cluster=cluster), worker_env(None))
        for index in range(setup.ps_tasks)]
    workers = []
    for index in range(setup.workers):
        env = worker_env(index)
        if name == 'multi_worker_mirrored':
            env['TF_CONFIG'] = json.dumps(
                {'cluster': cluster, 'task': {'type': 'worker', 'index': index}})
        workers.append(processes.start(f'{setup.label} worker {index}', dict(
            setup=name, task='worker', index=index, cluster=cluster,
            devices=[worker_device], cpu_devices=None), env))
    return workers, ps


def measure(processes, workers, steps):
    """Global examples/sec of one round of `steps` steps on each of `workers`, and the last
    loss of the first."""
    for worker in workers:
        worker.send(steps=steps)
    replies = processes.collect(workers, f'run {steps} steps')
    span = max(r['end'] for r in replies) - min(r['start'] for r in replies)
    return sum(r['examples'] for r in replies) / span, replies[0]['loss']


def benchmark(args, log):
    """Runs every setup; returns the results as a JSON-able dict. `log`: progress lines."""
    started = time.monotonic()
    machine = machine_devices(args)
    rates = {name: [] for name in SETUPS}
    first_losses, last_losses = {}, {}
    with tempfile.TemporaryDirectory() as directory:
        processes = Processes(args, directory)
        try:
            ports = iter(launch.free_ports(launch.LOCALHOST, sum(
                s.workers + s.ps_tasks for s in SETUPS.values() if s.clustered)))
            workers, everyone = {}, []
            for name in SETUPS:  # All at once: the start-up is most of a short run.
                workers[name], ps = start_setup(processes, name, machine, ports)
                everyone += ps + workers[name]
            replies = dict(zip(everyone, processes.collect(everyone, 'start and warm up')))
            for name in SETUPS:
                first_losses[name] = replies[workers[name][0]]['ready']
            log(f'{len(everyone)} processes started and warm in '
                f'{time.monotonic() - started:.0f} s')
            names = list(SETUPS)
            for round_index in range(args.rounds):
                shift = round_index % len(names)
                for name in names[shift:] + names[:shift]:
                    rate, last_losses[name] = measure(processes, workers[name], args.steps)
                    rates[name].append(rate)
                log(f'round {round_index + 1}/{args.rounds} done, '
                    f'{time.monotonic() - started:.0f} s')
        finally:
            processes.close()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        'model_name': args.model_name, 'batch_size': args.batch_size,
        'num_clones': args.num_clones, 'devices': machine[0][0].split(':')[1],
        'steps': args.steps, 'warmup_steps': args.warmup_steps, 'rounds': args.rounds,
        'all_reduce_pack_bytes': args.all_reduce_pack_bytes,
        'intra_op_threads': args.intra_op_threads, 'inter_op_threads': args.inter_op_threads,
        'examples_per_sec': medians, 'examples_per_sec_rounds': rates,
        'loss': {name: [first_losses[name], last_losses[name]] for name in SETUPS},
        'ratios': {f'{a}/{b}': medians[a] / medians[b] for a, b in RATIOS},
        'seconds': time.monotonic() - started,
    }


def table(results):
    """The results as printable lines."""
    r = results
    lines = [
        f"{r['model_name']}, batch {r['batch_size']} per clone, momentum SGD, "
        f"{r['num_clones']} clones on {r['devices']} devices in one process, one "
        f"{r['devices']} device per worker process; TensorFlow {tf.__version__}",
        f"{r['steps']} timed steps per round after {r['warmup_steps']} warm-up steps, "
        f"medians of {r['rounds']} round(s); all-reduce packs <= {r['all_reduce_pack_bytes']} "
        f"bytes; threads intra-op {r['intra_op_threads']}, inter-op "
        f"{r['inter_op_threads']} (0: TensorFlow's default)", '',
        f"{'setup':<29} {'processes':<22} {'examples/sec':>12}   {'rounds':<22} "
        'loss first -> last']
    for name, setup in SETUPS.items():
        rounds = ' '.join(f'{rate:.0f}' for rate in r['examples_per_sec_rounds'][name])
        first, last = r['loss'][name]
        lines.append(f"{setup.label:<29} {setup.shape.format(clones=r['num_clones']):<22} "
                     f"{r['examples_per_sec'][name]:>12.1f}   {rounds:<22} "
                     f'{first:.4f} -> {last:.4f}')
    lines += ['', f"{'ratio (of the medians)':<52} value"]
    for a, b in RATIOS:
        lines.append(f'{SETUPS[a].label + " / " + SETUPS[b].label:<52} '
                     f"{r['ratios'][f'{a}/{b}']:5.3f}")
    lines += ['', f"run took {r['seconds']:.0f} s"]
    return lines


def at_least(minimum):
    """argparse type: an integer >= minimum."""
    def integer(text):
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f'must be >= {minimum}, got {value}')
        return value
    return integer


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--model_name', default='cifarnet', choices=nets_factory.NETWORKS.names,
                        metavar='NAME', help='network of nets_factory (default cifarnet)')
    parser.add_argument('--batch_size', type=at_least(1), default=64,
                        help='examples per clone and step (default 64)')
    parser.add_argument('--num_clones', type=at_least(1), default=2,
                        help='clones (devices) of the one-process setups (default 2)')
    parser.add_argument('--steps', type=at_least(1), default=20,
                        help='timed steps per setup and round (default 20)')
    parser.add_argument('--warmup_steps', type=at_least(1), default=5,
                        help='untimed steps each process runs once after start-up (default 5)')
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
    parser.add_argument('--timeout_secs', type=at_least(1), default=300,
                        help='longest wait for processes to start and warm up, or to run a '
                             'round, seconds (default 300)')
    parser.add_argument('--json', action='store_true',
                        help='print one JSON object instead of the table')
    parser.add_argument('--role', help=argparse.SUPPRESS)  # Set in the processes it starts.
    return parser.parse_args(argv)


def main():
    args = parse_args()
    if args.role:
        run_role(args)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        results = benchmark(args, lambda line: print(line, file=sys.stderr, flush=True))
    except BenchmarkError as e:
        print(f'variable_update.py: error: {e}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    print(json.dumps(results) if args.json else '\n'.join(table(results)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
