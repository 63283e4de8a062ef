"""What the role processes of a training benchmark train (throughput.py's; any benchmark that
measures deploy() or tf.distribute training in processes of its own): a trainer per kind of
role, on synthetic images or on a dataset's real tf.data pipeline.

A role (a JSON-able dict; harness.serve_role) says what to train: `kind`, a key of TRAINERS;
`precision`, a name of deployment.precision.PRECISIONS; `xla` (bool); `devices`, the devices
of the process's clones or replicas (['/device:CPU:0', ...]); `cpu_devices`, the CPU device
count of its session (None: TensorFlow's); and for a worker of a cluster, `index` and
`cluster` ({'worker': ['HOST:PORT', ...]}; MultiWorkerMirroredStrategy reads it from the
TF_CONFIG the benchmark sets). The kinds: 'parameter_server' and 'replicated', deploy() over
the devices of one process; 'collective', worker `index` of deploy()'s collective
all-reduce; 'mirrored', tf.distribute's MirroredStrategy over the devices; and
'multi_worker_mirrored', worker `index` of MultiWorkerMirroredStrategy.

Every trainer trains momentum SGD on --batch_size examples per clone or replica, with the
same session threads; OPTIONS are the command-line options (of an argparse namespace) it
reads. serve() is a role process's work: it builds the trainer, replies once the first step
ran, then runs the steps it is told to. It imports TensorFlow: import it after
image_classifier.quiet.start().
"""
import contextlib
import math
import time

import tensorflow.compat.v1 as tf

# deployment first: importing it repairs tf-slim, which nets imports.
from deployment import model_deploy, precision, training
from image_classifier import config, parts
from nets import nets_factory

NUM_CLASSES = 10  # Of the synthetic data.
WEIGHT_DECAY = 4e-5
LEARNING_RATE = 0.01
MOMENTUM = 0.9
VARIABLE_UPDATES = ('parameter_server', 'replicated', 'collective')  # deploy()'s kinds.
# The options of the command line that a trainer reads.
OPTIONS = ('model_name', 'batch_size', 'all_reduce_pack_bytes', 'dataset_name', 'dataset_dir',
           'intra_op_threads', 'inter_op_threads')


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


def serve(args, role, started, reply, commands):
    """The work of one role process (harness.serve_role's `serve`, given the command line
    `args`, the `role` and the time.time() the process `started` at): builds its trainer,
    runs the first step and replies {'ready': its loss, 'startup': {import_secs,
    build_secs, init_secs, first_step_secs, to_first_step_secs}}; then for each command,
    {'warmup': n} (n untimed steps, replies {}) or {'steps': n} (replies {'start', 'end'
    (time.time() s), 'images', 'loss' (the last)})."""
    tf.disable_eager_execution()
    begun = time.time()
    session, step, _server, built = TRAINERS[role['kind']](args, role)  # Server kept alive.
    initialized = time.time()
    first = train(session, step, 1)
    done = time.time()
    reply(ready=first, startup={
        'import_secs': begun - started, 'build_secs': built - begun,
        'init_secs': initialized - built, 'first_step_secs': done - initialized,
        'to_first_step_secs': done - begun})
    for command in commands:
        if 'warmup' in command:
            train(session, step, command['warmup'])
            reply()
            continue
        start = time.time()
        loss = train(session, step, command['steps'])
        reply(start=start, end=time.time(), loss=loss,
              images=command['steps'] * args.batch_size * len(role['devices']))
