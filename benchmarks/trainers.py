"""What the role processes of a training benchmark train (throughput.py's, network.py's; any
benchmark that measures deploy() or tf.distribute training in processes of its own): a
trainer per kind of role, on synthetic images or on a dataset's real tf.data pipeline.

A role (a JSON-able dict; harness.serve_role) says what to train: `kind`, a key of TRAINERS
or 'ps'; `precision`, a name of slim_deploy.deployment.precision.PRECISIONS; `xla` (bool);
`devices`, the devices of the process's clones or replicas (['/device:CPU:0', ...]); `cpu_devices`,
the CPU device count of its session (None: TensorFlow's); and for a task of a cluster, `index` and
`cluster` ({'worker': ['HOST:PORT', ...], 'ps': [...]}; MultiWorkerMirroredStrategy reads it
from the TF_CONFIG its trainer sets). The kinds: 'parameter_server' and 'replicated',
deploy() over the devices of one process; 'ps', ps task `index`, serving the variables of a
cluster's workers; 'ps_worker', worker `index` of deploy() with the variables on the ps
tasks, asynchronous, or with `sync_replicas` (bool) under a SyncReplicasOptimizer that
aggregates every worker's gradient; 'collective', worker `index` of deploy()'s collective
all-reduce; 'mirrored', tf.distribute's MirroredStrategy over the devices; and
'multi_worker_mirrored', worker `index` of MultiWorkerMirroredStrategy. The kinds of
deploy() take `seed` and `gradient_compression` too (DeploymentConfig's, by role_settings();
absent: None and 'none'; compression only where gradients leave the process, 'ps_worker' and
'collective'), and 'ps_worker' `prefetch_reads` (absent: False). With `link_gbps` (Gbit/s), a
worker of a cluster also reports what its step moves over the network (network_bound).

Every trainer trains momentum SGD on --batch_size examples per clone or replica, with the
same session threads; OPTIONS are the command-line options (of an argparse namespace) it
reads. serve() is a role process's work: it builds the trainer, replies once the first step
ran, then runs the steps it is told to; run_steps() is the benchmark's side of it.
add_options() adds the command-line options every training benchmark takes, and main() is
such a script's main. It imports TensorFlow: import it after
slim_deploy.image_classifier.verbosity.start().
"""
import argparse
import collections
import contextlib
import dataclasses
import json
import math
import os
import signal
import statistics
import sys
import time

import tensorflow as tf2  # TensorFlow 2's API: ParameterServerStrategy runs eagerly.
import tensorflow.compat.v1 as tf
import tf_keras

from benchmarks import harness
from slim_deploy.cluster.tasks import ClusterTask
from slim_deploy.deployment import model_deploy, network_traffic, precision
from slim_deploy.image_classifier import builders, config
from slim_deploy.nets import nets_factory
from slim_deploy.training import loop

NUM_CLASSES = 10  # Of the synthetic data.
WEIGHT_DECAY = 4e-5
LEARNING_RATE = 0.01
MOMENTUM = 0.9
VARIABLE_UPDATES = ('parameter_server', 'replicated', 'collective')  # deploy()'s kinds.
# The kinds of role that only serve their task of the cluster: the job they serve.
SERVED_JOBS = ('ps', 'worker')
# The options of the command line that a trainer reads.
OPTIONS = ('model_name', 'batch_size', 'all_reduce_pack_bytes', 'dataset_name', 'dataset_dir',
           'intra_op_threads', 'inter_op_threads')


def session_config(args, role, num_cpu_devices=None, **kwargs):
    """loop.session_config(num_cpu_devices, **kwargs) with the role's precision and
    --intra_op_threads and --inter_op_threads: the same threads for every session."""
    session = loop.session_config(num_cpu_devices, precision=role['precision'], **kwargs)
    session.intra_op_parallelism_threads = args.intra_op_threads
    session.inter_op_parallelism_threads = args.inter_op_threads
    return session


class Inputs:
    """What the clones train on: network_fn(images) -> (logits, end_points) of num_classes,
    and batch(device) -> (images, labels), a new batch per call: a synthetic one held on
    `device`, or the next of --dataset_name's real pipeline, read on `device`'s CPU
    (device None: the current one, and CPU:0), in the order of `seed` (None: a random
    one)."""

    def __init__(self, args, seed=None):
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
        classifier = builders.classifier(data, config.ModelConfig(model_name=args.model_name),
                                         is_training=True, weight_decay=WEIGHT_DECAY)
        self.num_classes, self.network_fn = classifier.num_classes, classifier.network_fn
        self._batches = lambda: classifier.training_batches(data, seed=seed)
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
            return builders.add_classification_losses(logits, end_points, labels,
                                                      self.num_classes)


def learning_rate(role):
    """LEARNING_RATE, over the workers for asynchronous ones (ps workers without
    sync_replicas, ParameterServerStrategy's): their W updates of a gradient each move the
    variables as far as a synchronous update of W gradients' mean, and momentum on gradients
    up to W steps stale stays stable (8 asynchronous workers at LEARNING_RATE diverged)."""
    asynchronous = role['kind'] == 'parameter_server_strategy' or (
        role['kind'] == 'ps_worker' and not role['sync_replicas'])
    return LEARNING_RATE / len(role['cluster']['worker']) if asynchronous else LEARNING_RATE


def optimizer(role):
    """Momentum SGD at learning_rate(role); with float16, under TensorFlow's dynamic loss
    scaling (tf.distribute's setups: deploy() scales by itself)."""
    momentum = tf.train.MomentumOptimizer(learning_rate(role), MOMENTUM)
    loss_scaling = precision.PRECISIONS[role['precision']].loss_scaling
    if role['kind'] in VARIABLE_UPDATES or not loss_scaling:
        return momentum
    return tf.mixed_precision.MixedPrecisionLossScaleOptimizer(momentum, 'dynamic')


def synthetic_batch(batch_size, image_size):
    """(images [batch_size, image_size, image_size, 3] uniform in [-1, 1), labels
    [batch_size] int32 in [0, NUM_CLASSES)): local variables on the current device, set by
    the local-variable initializer and read in place at every step. Seeded: every clone,
    replica and worker of every setup trains on the same examples, so their losses compare."""
    images, labels = synthetic_values(batch_size, image_size)
    return (tf.Variable(images, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES],
                        name='synthetic_images'),
            tf.Variable(labels, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES],
                        name='synthetic_labels'))


def synthetic_values(batch_size, image_size):
    """The values of synthetic_batch's images and labels, as tensors of the current graph or
    eagerly."""
    return (tf.random.uniform([batch_size, image_size, image_size, 3], -1.0, 1.0, seed=1),
            tf.random.uniform([batch_size], maxval=NUM_CLASSES, dtype=tf.int32, seed=2))


Trainer = collections.namedtuple(
    'Trainer', ['session', 'step', 'server', 'built', 'deployment', 'global_step',
                'coordinator'],
    defaults=[None, None])
Trainer.__doc__ = """What a trainer built: the session (or MonitoredSession) and the fetch that
trains one step and returns the loss; the server kept alive with it (None: none); the
time.time() its graph was built; the DeploymentConfig of its placement (None: tf.distribute's
MirroredStrategy or ParameterServerStrategy), which network_traffic.step_traffic reads; for
synchronous replicas, a fetch reading the global step once a step is done (None: not
needed); and ParameterServerStrategy's ClusterCoordinator (None: none), whose trainer has no
session and whose `step` is a function scheduling one step of every worker, returning their
RemoteValues (the losses)."""


def role_settings(role):
    """The DeploymentConfig arguments that every deploy() trainer takes from `role`: precision,
    xla, seed and gradient_compression."""
    return dict(precision=role['precision'], xla=role['xla'], seed=role.get('seed'),
                gradient_compression=role.get('gradient_compression', 'none'))


def deployed_step(args, role, deployment, train_optimizer=None):
    """deploy()'s train_op for `deployment` (a DeploymentConfig), each clone training on a
    batch of its own, with `train_optimizer` (None: optimizer(role))."""
    inputs = Inputs(args, deployment.graph_seed)
    devices = iter([deployment.clone_device(i) for i in range(deployment.num_clones)])

    def model_fn():
        inputs.loss(*inputs.batch(next(devices)))

    return model_deploy.deploy(deployment, model_fn,
                               optimizer=train_optimizer or optimizer(role)).train_op


def deploy_trainer(args, role):
    """One process, no cluster: 'parameter_server' or 'replicated' over role's devices."""
    deployment = model_deploy.DeploymentConfig(
        num_clones=len(role['devices']), clone_devices=role['devices'],
        variable_update=role['kind'], all_reduce_pack_bytes=args.all_reduce_pack_bytes,
        **role_settings(role))
    step = deployed_step(args, role, deployment)
    built = time.time()
    session = tf.Session(config=session_config(args, role, role['cpu_devices']))
    session.run(tf.global_variables_initializer())
    session.run(tf.local_variables_initializer())  # Batches; replicated: clone 0's copies.
    return Trainer(session, step, None, built, deployment)


def ps_worker_trainer(args, role):
    """Worker role['index'] of a parameter-server cluster, as train_image_classifier.py runs
    one: the variables on the ps tasks, the session a MonitoredSession through the worker's
    server (worker 0, the chief, initializes the variables; the others wait for it). With
    role['sync_replicas'], a SyncReplicasOptimizer aggregates as many gradients as there
    are workers per update (--sync_replicas), run by loop.SyncReplicasHook; its workers
    then run until a global step (train()), not a number of steps each: the hook queues a
    token per worker at the start, with which a worker can run a step ahead and push a
    gradient that is then dropped as stale, and after a fixed number of steps each, the
    last to finish would wait forever for an update that needs another's gradient."""
    task = ClusterTask(role['cluster'], 'worker', role['index'])
    workers = task.num_replicas
    deployment = model_deploy.DeploymentConfig(
        num_clones=len(role['devices']), clone_devices=role['devices'],
        replica_id=task.task_index, num_replicas=workers, num_ps_tasks=task.num_ps_tasks,
        worker_job_name=task.task_type, prefetch_reads=role.get('prefetch_reads', False),
        variable_partitioner=builders.partitioner(role.get('variable_partition_min_mb', 0),
                                                  task.num_ps_tasks),
        **role_settings(role))
    train_optimizer, hooks, global_step = optimizer(role), [], None
    if role['sync_replicas']:
        train_optimizer = tf.train.SyncReplicasOptimizer(
            train_optimizer, replicas_to_aggregate=workers, total_num_replicas=workers)
        hooks.append(loop.SyncReplicasHook(train_optimizer, task.is_chief, workers,
                                           workers))
    step = deployed_step(args, role, deployment, train_optimizer)
    if role['sync_replicas']:
        with tf.control_dependencies([step]):
            global_step = tf.train.get_global_step().read_value()
    built = time.time()
    server = task.start_server(session_config(args, role, role['cpu_devices'], remote=True))
    settings = session_config(args, role, device_filters=task.device_filters(), remote=True)
    scaffold = tf.train.Scaffold()
    creator = (tf.train.ChiefSessionCreator(scaffold, server.target, settings)
               if task.is_chief else
               loop.WorkerSessionCreator(scaffold, server.target, settings))
    return Trainer(tf.train.MonitoredSession(creator, hooks=hooks), step, server, built,
                   deployment, global_step)


def collective_trainer(args, role):
    """Worker role['index'] of a 'collective' cluster: every worker initializes, then the
    chief's values are broadcast."""
    task = ClusterTask(role['cluster'], 'worker', role['index'])
    leader = task.collective_leader
    deployment = model_deploy.DeploymentConfig(
        num_clones=1, clone_devices=role['devices'], variable_update='collective',
        replica_id=task.task_index, num_replicas=task.num_replicas,
        worker_job_name=task.task_type, all_reduce_pack_bytes=args.all_reduce_pack_bytes,
        **role_settings(role))
    step = deployed_step(args, role, deployment)
    built = time.time()
    server = task.start_server(session_config(args, role, role['cpu_devices'],
                                              collective_leader=leader, remote=True))
    session = tf.Session(server.target, config=session_config(
        args, role, device_filters=task.device_filters(), collective_leader=leader,
        remote=True))
    session.run(tf.global_variables_initializer())
    session.run(tf.get_collection(tf.GraphKeys.LOCAL_INIT_OP))
    return Trainer(session, step, server, built, deployment)


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
    MultiWorkerMirroredStrategy (its cluster put in TF_CONFIG, its server started here, graph
    mode as tf.compat.v1's documentation has it). The deployment of a worker: a
    'collective' DeploymentConfig of its task, which places it as the strategy does."""
    if role['kind'] == 'mirrored':
        strategy = tf.distribute.MirroredStrategy(devices=role['devices'])
        step = strategy_step(strategy, args, role)
        built = time.time()
        session = tf.Session(config=strategy.update_config_proto(
            session_config(args, role, role['cpu_devices'])))
        server = deployment = None
    else:
        task = ClusterTask(role['cluster'], 'worker', role['index'])
        os.environ['TF_CONFIG'] = json.dumps({'cluster': task.cluster, 'task': {
            'type': task.task_type, 'index': task.task_index}})
        strategy = tf.distribute.experimental.MultiWorkerMirroredStrategy()
        step = strategy_step(strategy, args, role)
        built = time.time()
        server = task.start_server(strategy.update_config_proto(
            session_config(args, role, role['cpu_devices'], remote=True)))
        session = tf.Session(server.target, config=strategy.update_config_proto(
            session_config(args, role, remote=True)))
        deployment = model_deploy.DeploymentConfig(
            variable_update='collective', replica_id=task.task_index,
            num_replicas=task.num_replicas)
    # Both at once: MultiWorkerMirroredStrategy's initializers broadcast the chief's values.
    session.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    return Trainer(session, step, server, built, deployment)


class SlimLayer(tf_keras.layers.Layer):
    """A Keras layer computing `loss_fn(images, labels)`, a network built as slim's are
    (tf.compat.v1.get_variable under variable scopes), through TensorFlow's shim for such
    code in TensorFlow 2 (track_tf1_style_variables): its variables are made at the first
    call, by the strategy whose scope that call is in, and reused after; `losses` holds the
    penalties of the last call (the regularizers slim's arg_scope gives the weights)."""

    def __init__(self, loss_fn):
        super().__init__()
        self._loss_fn = loss_fn
        self._made = {}

    @tf2.compat.v1.keras.utils.track_tf1_style_variables
    def call(self, images, labels):
        with tf.variable_scope(tf.get_variable_scope(), custom_getter=self._variable):
            return self._loss_fn(images, labels)

    def _variable(self, getter, name, *args, **kwargs):
        """Variable `name`, made at its first request (in parts, a ShardedVariable, if the
        strategy's partitioner splits it) and the same after: the shim's own reuse fails on
        a ShardedVariable (it has no get_shape())."""
        if name not in self._made:
            self._made[name] = getter(name, *args, **kwargs)
        return self._made[name]


def coordinator_trainer(args, role):
    """The coordinator of ParameterServerStrategy, task 'chief:0' of role['cluster'] (its 'worker'
    and 'ps' tasks serve; serve_task), in TensorFlow 2 (eagerly; the workers run its step as a
    tf.function): momentum SGD of the network each worker builds on --batch_size synthetic
    images of its own (synthetic_values, the same as the other trainers'; no --dataset_name),
    the variables round-robin over the ps tasks, in parts when role['variable_partition_min_mb']
    says so: MinSizePartitioner, which is min_max_variable_partitioner's rule along the first
    axis only (ShardedVariable's): the same parts as deploy()'s where a large variable's first
    axis is its longest (lenet's and cifarnet's). The network is nets_factory's, slim's layers,
    through SlimLayer; the loss is the data loss plus the penalties, as deploy()'s; Keras's SGD
    with momentum is MomentumOptimizer's update (v = momentum x v - learning rate x gradient,
    variable += v, the same as accumulation = momentum x accumulation + gradient, variable -=
    learning rate x accumulation). Each step reads a penalized weight twice from its ps task,
    for the forward pass and for its penalty (TensorFlow 2 has no caching device, with which
    deploy() reads it once). Float32 only."""
    task = ClusterTask(role['cluster'], 'chief', 0)
    size = builders.partition_bytes(role.get('variable_partition_min_mb', 0))
    partitioner = (tf2.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=size, max_shards=task.num_ps_tasks) if size else None)
    strategy = tf2.distribute.experimental.ParameterServerStrategy(
        tf2.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(task.cluster), task_type=task.task_type,
            task_id=task.task_index, rpc_layer='grpc'),
        variable_partitioner=partitioner)
    coordinator = tf2.distribute.coordinator.ClusterCoordinator(strategy)
    inputs = Inputs(args)
    image_size = inputs.network_fn.default_image_size
    network = SlimLayer(inputs.loss)
    with strategy.scope():
        network(*synthetic_values(1, image_size))  # Makes the variables.
        train_optimizer = tf_keras.optimizers.SGD(learning_rate(role), momentum=MOMENTUM,
                                                  jit_compile=False)
        train_optimizer.build(network.trainable_weights)
    batches = iter(coordinator.create_per_worker_dataset(lambda: tf2.data.Dataset.from_tensors(
        synthetic_values(args.batch_size, image_size)).repeat()))

    @tf2.function
    def worker_step(batches):
        def replica_step(images, labels):
            with tf2.GradientTape() as tape:
                loss = tf2.add_n([network(images, labels)] + network.losses)
            variables = network.trainable_weights
            train_optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        return strategy.run(replica_step, args=next(batches))

    def step():
        return [coordinator.schedule(worker_step, args=(batches,))
                for _ in range(len(task.cluster['worker']))]

    return Trainer(None, step, None, time.time(), None, coordinator=coordinator)


TRAINERS = {'parameter_server': deploy_trainer, 'replicated': deploy_trainer,
            'ps_worker': ps_worker_trainer, 'collective': collective_trainer,
            'mirrored': strategy_trainer, 'multi_worker_mirrored': strategy_trainer,
            'parameter_server_strategy': coordinator_trainer}


def network_bound(trainer, link_gbps):
    """What one step of `trainer` moves over the network, read from this process's graph by
    network_traffic.step_traffic, as a JSON-able dict: 'bound_secs', the least time the step
    needs on links of `link_gbps` Gbit/s each way (None when the step runs collective ops
    that step_traffic does not count, their op types in 'uncounted'); 'busiest', the links
    with the most bytes to pass one after another, each with its rule or, passing bytes
    each way, its busier direction ('worker in then out', 'ps task 0 out'), and 'bytes',
    theirs per step; 'links', {name: {'in', 'out', 'bytes' (bytes per step), 'rule'}};
    'synchronous' (bool); 'all_reduces' (network_traffic.AllReduces as a dict; None: none
    counted); 'ps_advice' (network_traffic.PsAdvice as a dict; None without ps tasks) and
    'advice' (network_traffic.ps_advice_text: None unless more ps tasks would cut the bound)."""
    traffic = network_traffic.step_traffic(tf.get_default_graph(), trainer.deployment,
                                           [trainer.step])
    advice = network_traffic.ps_advice(traffic)
    return {'bound_secs': None if traffic.other_collectives else traffic.seconds(link_gbps),
            'uncounted': list(traffic.other_collectives),
            'busiest': [f'{link.name} '
                        f'{link.direction if link.rule == network_traffic.EACH_WAY else link.rule}'
                        for link in traffic.busiest],
            'bytes': traffic.busiest[0].bytes,
            'links': {link.name: {'in': link.bytes_in, 'out': link.bytes_out,
                                  'bytes': link.bytes, 'rule': link.rule}
                      for link in traffic.links},
            'synchronous': traffic.synchronous,
            'all_reduces': traffic.all_reduces and dataclasses.asdict(traffic.all_reduces),
            'ps_advice': advice and dataclasses.asdict(advice),
            'advice': network_traffic.ps_advice_text(traffic)}


def train(trainer, steps, until_global_step=None):
    """Runs `steps` training steps of `trainer` or, given until_global_step, steps (one at
    least) until the global step read after one (trainer.global_step) reaches it; returns
    (steps run, the last loss (None for none), the last global step read (None: none)).
    FloatingPointError if a loss is not finite. ParameterServerStrategy's trainer
    schedules every step of every worker at once, then waits for them all: its steps run
    are worker steps (`steps` x workers), its loss the last scheduled one's."""
    if trainer.coordinator is not None:
        scheduled = [loss for _ in range(steps) for loss in trainer.step()]
        trainer.coordinator.join()
        return len(scheduled), finite(scheduled[-1].fetch()), None
    fetches = [trainer.step] + ([] if trainer.global_step is None else [trainer.global_step])
    ran, loss, global_step = 0, None, None
    while (ran < steps if until_global_step is None else
           not ran or global_step < until_global_step):
        results = trainer.session.run(fetches)
        loss, ran = finite(results[0]), ran + 1
        if trainer.global_step is not None:
            global_step = int(results[1])
    return ran, loss, global_step


def finite(loss):
    """`loss` as a float; FloatingPointError if it is not finite."""
    loss = float(loss)
    if not math.isfinite(loss):
        raise FloatingPointError(f'the loss is {loss}')
    return loss


def serve(args, role, started, reply, commands):
    """The work of one role process (harness.serve_role's `serve`, given the command line
    `args`, the `role` and the time.time() the process `started` at): builds its trainer,
    runs the first step and replies {'ready': its loss, 'startup': {import_secs,
    build_secs, init_secs, first_step_secs, to_first_step_secs}} (with role['link_gbps'],
    also 'network': network_bound's dict); then for each command, {'warmup': n} (n untimed
    steps, replies {}) or {'steps': n} (replies {'start', 'end' (time.time() s), 'images',
    'loss' (the last)}); a command with 'until_global_step' runs until that global step
    instead (train()). Synchronous replicas' replies add the 'global_step' read last. A
    role of SERVED_JOBS replies nothing: serve_task()."""
    if role['kind'] in SERVED_JOBS:
        serve_task(args, role, commands)
        return
    if role['kind'] != 'parameter_server_strategy':  # Its coordinator runs eagerly.
        tf.disable_eager_execution()
    begun = time.time()
    trainer = TRAINERS[role['kind']](args, role)  # Its server is kept alive with it.
    initialized = time.time()
    _, first, global_step = train(trainer, 1)
    done = time.time()
    network = ({'network': network_bound(trainer, role['link_gbps'])} if 'link_gbps' in role
               else {})
    reply(ready=first, startup={
        'import_secs': begun - started, 'build_secs': trainer.built - begun,
        'init_secs': initialized - trainer.built, 'first_step_secs': done - initialized,
        'to_first_step_secs': done - begun}, **network, **progress(global_step))
    for command in commands:
        start = time.time()
        ran, loss, global_step = train(trainer, command.get('steps', command.get('warmup')),
                                       command.get('until_global_step'))
        if 'warmup' in command:
            reply(**progress(global_step))
            continue
        reply(start=start, end=time.time(), loss=loss,
              images=ran * args.batch_size * len(role['devices']), **progress(global_step))


def serve_task(args, role, commands):
    """The work of task role['index'] of job role['kind'] (of SERVED_JOBS): serves what the
    cluster runs there (on a ps task the variables, on a worker of ParameterServerStrategy
    what its coordinator schedules) until `commands` end (the benchmark closes its stdin),
    replying nothing."""
    server = ClusterTask(role['cluster'], role['kind'], role['index']).start_server(
        session_config(args, role, remote=True))
    for _ in commands:
        pass
    del server  # Held until then.


def progress(global_step):
    """A reply's {'global_step': global_step}; {} for None."""
    return {} if global_step is None else {'global_step': global_step}


def run_steps(processes, workers, steps, until_global_step=None):
    """(global images/sec, seconds per step, the first worker's last loss) of `steps` steps
    run by each of `workers` (role processes serve() drives, of harness.Processes
    `processes`) at once: every worker's images over the span from the first one's start to
    the last one's end. Synchronous replicas run until global step `until_global_step`,
    `steps` updates after the last one (None: a fixed number of steps each)."""
    until = {} if until_global_step is None else {'until_global_step': until_global_step}
    for worker in workers:
        worker.send(steps=steps, **until)
    replies = processes.collect(workers, f'run {steps} steps')
    span = max(r['end'] for r in replies) - min(r['start'] for r in replies)
    return sum(r['images'] for r in replies) / span, span / steps, replies[0]['loss']


def summary(rounds):
    """What run_steps' `rounds` (one (images/sec, sec/step, loss) per round) come to:
    {'images_per_sec' (median), 'spread' (harness.median_spread's), 'images_per_sec_rounds',
    'sec_per_step' (median), 'sec_per_step_rounds', 'loss_last' (the last round's)}."""
    rates, sec_per_step, losses = zip(*rounds)
    images_per_sec, spread = harness.median_spread(rates)
    return {'images_per_sec': images_per_sec, 'spread': spread,
            'images_per_sec_rounds': list(rates), 'sec_per_step': statistics.median(sec_per_step),
            'sec_per_step_rounds': list(sec_per_step), 'loss_last': losses[-1]}


def add_options(parser, steps, warmup_steps, rounds):
    """Adds to argparse `parser` the options of a training benchmark's rounds (--steps,
    --warmup_steps, --rounds; their defaults given), of its trainers (OPTIONS' threads and
    pack size), --timeout_secs, --json and the hidden --role of its role processes."""
    at_least = harness.at_least
    parser.add_argument('--steps', type=at_least(1), default=steps,
                        help=f'timed steps per setup and round (default {steps})')
    parser.add_argument('--warmup_steps', type=at_least(0), default=warmup_steps,
                        help=f'untimed steps after the first (default {warmup_steps})')
    parser.add_argument('--rounds', type=at_least(1), default=rounds,
                        help=f'rounds over every setup; medians are reported (default {rounds})')
    parser.add_argument('--all_reduce_pack_bytes', type=at_least(0),
                        default=model_deploy.ALL_REDUCE_PACK_BYTES,
                        help='pack size of the replicated and collective gradient all-reduces, '
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


def main(prog, args, started, benchmark, table, failures=()):
    """The main of training benchmark `prog` (its program name, 'python -m
    benchmarks.throughput'), given its parsed `args` and the time.time() it `started` at: with
    args.role, serves that role (never returns); else returns the exit code of running
    benchmark(args, log) (log: progress lines, onto stderr) and printing its result
    (table(result): its lines). A harness.BenchmarkError or one of `failures` (exception
    types) is one line on stderr and exit code 1."""
    if args.role:
        harness.serve_role(lambda reply, commands: serve(
            args, json.loads(args.role), started, reply, commands))
    harness.exit_on_sigterm()
    try:
        result = benchmark(args, lambda line: print(line, file=sys.stderr, flush=True))
    except (harness.BenchmarkError, *failures) as e:
        print(f'{prog}: error: {e}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    harness.print_result(result, table(result), args.json)
    return 0
