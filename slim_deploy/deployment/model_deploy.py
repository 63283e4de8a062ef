"""Deploys a model function as N data-parallel clones, with TF-Slim's API and semantics.

    config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
    with tf.Graph().as_default():
        with tf.device(config.inputs_device()):
            images, labels = ...                # one batch per clone
        model = deploy(config, model_fn, args=[images, labels],
                       optimizer=tf.train.GradientDescentOptimizer(0.1))
        # sess.run(model.train_op) trains one step and returns the total loss.

`model_fn(*args, **kwargs)` builds one clone: it is called once per clone, under the
clone's name scope and device, with variables shared after the first call, and adds its
losses to `tf.GraphKeys.LOSSES` (tf.losses and slim.losses do). Each clone's loss is
divided by the number of clones and the clones' gradients are summed, so the update is
the gradient of the mean loss. Regularization losses count once; batch-norm update ops
come from the first clone. Variables live on `variables_device()`: the worker's CPU, or
the parameter-server tasks, round-robin or by bytes (`ps_strategy`), where each trainable
variable is read once per step onto the worker's CPU for all the clones; or, with
`variable_update` 'replicated' or 'collective', as a copy on each clone's device, the
gradients all-reduced between the clones of one worker or of all (see replicas).

Every public name of TF-Slim's model_deploy is here with its values and semantics, next to
our additions (clone_devices, ps_strategy, variable_update, precision, xla, quantize_delay,
gradient_compression, prefetch_reads, seed, variable_partitioner, placement_plan). Where
this differs from the original: it runs on TensorFlow 2.16+; every variable (resource or
not, made by slim, tf.get_variable or tf.Variable) goes on the variables device; worker
devices carry the replica's task, so `DeploymentConfig.worker_device` is
'/job:worker/task:<replica_id>' where slim's is '/job:worker' (whose multi-worker graphs
failed with 'Cannot assign a device'); caching_device()'s function places reads on the
worker's CPU, where create_clones reads the variables (slim's places them on each reading
op's device, and its create_clones does not use it); clones may run on any list of devices;
summaries made inside model_fn sit on the CPU; bad settings raise ValueError up front.
"""
import collections
import contextlib

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError, check_int
from slim_deploy.common.registry import Registry
from slim_deploy.deployment import (
    accumulation,
    all_reduce,
    compression,
    late_workers,
    ordered_sync,
    placement,
    quantize,
    replicas,
    sync_batch_norm,
    turns,
    variable_sharing,
)
from slim_deploy.deployment import precision as precision_lib
from slim_deploy.deployment.placement import PS_STRATEGIES, PsStrategy, placement_plan
from slim_deploy.deployment.setting_rules import (  # Also model_deploy's names, as before.
    distinct_devices_problem,
    gradient_compression_problem,
    prefetch_reads_problem,
    quantize_delay_problem,
    sync_replicas_problem,
    variable_partitioner_problem,
    variable_update_problem,
)

__all__ = [
    'Clone', 'DeployedModel', 'DeploymentConfig', 'create_clones', 'optimize_clones',
    'deploy', 'placement_plan', 'PS_STRATEGIES', 'PsStrategy', 'VARIABLE_UPDATES',
]

Clone = collections.namedtuple('Clone', ['outputs', 'scope', 'device'])
Clone.__doc__ = """One clone of the model.

outputs: whatever model_fn returned. scope: its name scope with a trailing slash
('clone_1/'), or '' when there is one clone. device: the device string it ran under.
"""

DeployedModel = collections.namedtuple(
    'DeployedModel', ['train_op', 'summary_op', 'total_loss', 'clones'])
DeployedModel.__doc__ = """What deploy() built.

train_op: runs one training step and returns the total loss (None without an optimizer).
summary_op: all summaries merged (None if there are none). total_loss: mean clone loss
plus regularization (None if model_fn added no loss). clones: the list of Clone.
"""

# How the clones share variables: variable_update -> what placement_plan says of it.
VARIABLE_UPDATES = Registry('variable_update', {
    'parameter_server': "one copy of the variables, on the worker's CPU or the ps tasks; "
                        "the clones' gradients are summed there (slim's)",
    'replicated': "a copy of the trainable variables on each clone's device; the clones' "
                  'gradients are all-reduced and every copy applies the same update',
    'collective': 'replicated across every clone of every worker (no ps tasks); '
                  'gradients are all-reduced over all of them each step',
})
# Default pack size of the gradient all-reduces (4 MiB): packs are all-reduced, last layers
# first, while backprop still computes the first layers' gradients (lenet's 13.1 MB go in 3).
ALL_REDUCE_PACK_BYTES = 4 << 20
# Worker jobs whose task is the chief when DeploymentConfig is not told (is_chief=None): the
# Object Detection API's and tf.estimator's 'master', TF_CONFIG's 'chief'.
CHIEF_JOBS = ('master', 'chief')
# Default task_timeout_secs: longer than a network blip, shorter than people wait.
TASK_TIMEOUT_SECS = 60.0
# The start-up broadcast waits at least this long, as the other workers may start slower.
START_TIMEOUT_SECS = 600.0


def local_clone_devices(num_clones, clone_on_cpu):
    """Devices for the clones and the CPU device count the session needs.

    With GPUs (or clone_on_cpu, slim's all-on-CPU:0 mode) returns (None, None): slim's default
    devices (DeploymentConfig.clone_device). On a machine without GPUs, clone i runs on its own
    CPU:i device so the clones run in parallel: returns (['/device:CPU:0', ...], num_clones).
    """
    if clone_on_cpu or tf.config.list_physical_devices('GPU'):
        return None, None
    return [f'/device:CPU:{i}' for i in range(num_clones)], num_clones


class DeploymentConfig:
    """Where a deployment puts its variables, inputs, optimizer and clones.

    Args:
      num_clones: model clones per replica (>= 1), usually one per GPU.
      clone_on_cpu: put every clone on the worker's CPU:0 instead of GPU:i.
      replica_id: this worker's task index, in [0, num_replicas).
      num_replicas: worker tasks in the cluster; > 1 needs num_ps_tasks > 0, or
        variable_update='collective'.
      num_ps_tasks: parameter-server tasks holding the variables; 0 keeps them local.
      worker_job_name, ps_job_name: job names in the cluster spec (non-empty). The worker
        job's name may carry this worker's task, as the Object Detection API's trainer
        passes it ('master/task:0'): worker_device then keeps that task whatever replica_id
        is (slim's behaviour), and appends '/task:<replica_id>' to a name without one.
      clone_devices: None for the default devices, or one device string per clone
        (e.g. ['/device:CPU:0', '/device:CPU:1']); with PS tasks the worker job and
        task are prefixed.
      ps_strategy: how variables are spread over the PS tasks (no effect without them), a
        name in PS_STRATEGIES: 'round_robin', slim's: each to the next task, in creation
        order; or 'bytes': create_clones places its variables largest first onto the task
        holding the fewest bytes, and variables_device() each new variable onto that task.
      variable_update: how the clones share variables, a name in VARIABLE_UPDATES:
        'parameter_server' (slim's): one copy, on variables_device(), gradients summed on
        the worker's CPU; 'replicated': each clone's device holds a copy of the trainable
        variables, gradients are all-reduced between the clones (no ps tasks, one
        replica); 'collective': the same across every clone of num_replicas > 1 workers
        (no ps tasks; each worker needs the same num_clones). Both need the clones on
        distinct devices.
      all_reduce_pack_bytes: gradients are concatenated, last variable first (as backprop
        makes them), into packs of at most this many bytes, each all-reduced as one; a
        larger one goes alone; 0: one all-reduce per gradient.
      task_timeout_secs: how long an all-reduce waits for the other workers before
        failing (0: forever); the start-up broadcast waits at least START_TIMEOUT_SECS.
        Give it to cluster.tasks.watchdog too, which ends a task whose ps tasks, chief or
        fellow workers stop answering (as train_image_classifier.py does).
      is_chief: whether this worker is the chief, whose variables 'collective' mode
        broadcasts at start-up; None derives it as slim's callers do: True for a worker job
        named 'master' or 'chief' (CHIEF_JOBS); else replica 0 is the chief, unless the job
        name carries its task ('worker/task:0'), as the Object Detection API's trainer names
        the tasks of a cluster whose chief is its 'master' job. Pass it where the chief's
        job has another name (worker 0 of a cluster with a 'chief' job is not the chief).
      sync_batch_norm: every batch norm built by model_fn normalizes training batches
        with the mean and variance of the global batch, over all clones (and, with
        'collective', all workers), and its gradient flows through them (see
        slim_deploy.deployment.sync_batch_norm); the clones must sit on distinct devices.
      precision: the math of the training step, a name in precision.PRECISIONS: 'float32',
        'bfloat16' or 'float16' (mixed precision: variables, losses, batch-norm statistics,
        gradient sums and all-reduces stay float32). The sessions must turn on its graph
        rewrite (training.loop.session_config(precision=...)); with 'float16' deploy() also
        scales the loss dynamically (precision.DynamicLossScale).
      xla: compile each clone's forward and backward pass with XLA (its ops that XLA
        can compile, under tf.xla.experimental.jit_scope).
      quantize_delay: None, or train quantization-aware from this global step on (>= 0):
        deploy() rewrites the clones with quantize.create_training_graph before their
        gradients (batch norm folded, weights and activations fake-quantized to 8 bits,
        convolutions' weights per output channel (per_channel_wt, for int8 TensorFlow Lite
        models), the ranges shared by the clones and learned from clone 0's batches), or,
        without an optimizer, with quantize.create_eval_graph. Not with sync_batch_norm
        (each clone folds its batch norms with its own batch's statistics).
      gradient_compression: the dtype gradients cross between tasks in, a name in
        compression.COMPRESSIONS: 'none' (float32), 'bfloat16' or 'float16' (scaled by a
        power of two; see compression). With 'collective' the all-reduces run on 16-bit
        packs; with ps tasks each worker sends 16-bit gradients, which the variable's ps task
        widens before the update (or a SyncReplicasOptimizer's accumulator), and with a
        16-bit precision the trainable variables' reads cross from the ps tasks in 16 bits
        as well (the clones compute in 16 bits anyway). Updates stay float32. Only where
        gradients leave the machine: not with 'replicated' or without ps tasks.
      prefetch_reads: with ps tasks and asynchronous workers, each step computes with
        values of the trainable (resource) variables that crossed during the step before,
        and fetches the next ones while it computes and sends its gradients, so the reads
        no longer come before the step's compute on the wire; the values are one step
        older (the worker's own last update may be missing). Its refreshes are in the
        first clone's UPDATE_OPS, which the train op must run (deploy's does). Not with a
        SyncReplicasOptimizer, whose gradients must be of the values after the last update.
      seed: None, or an integer >= 0 that makes training bit-reproducible (see
        reproducibility in the manual): deploy() seeds the graph with graph_seed, unless
        it has a seed already, and turns on TensorFlow's op determinism for the process.
        Asynchronous workers with ps tasks apply their gradients in arrival order, which no
        seed fixes: deploy() logs a line saying so. Synchronous workers take
        ordered_sync.OrderedSyncReplicasOptimizer: deploy() raises ValueError for
        TensorFlow's own SyncReplicasOptimizer, whose updates sum in arrival order.
      variable_partitioner: None, or a partitioner in TensorFlow 1's form, a callable of a
        variable's shape (a TensorShape) and dtype returning its number of parts along each
        axis, as tf.compat.v1.min_max_variable_partitioner(...) and
        fixed_size_partitioner(...) return (placement.min_size_partitioner is
        --variable_partition_min_mb's). create_clones makes each variable model_fn makes
        with tf.get_variable (slim's layers, tf.compat.v1.layers) in the parts it gives,
        'name/part_0', ..., each placed on the ps tasks as a variable of its own (by
        ps_strategy), read and updated there; checkpoints hold the whole variable under its
        name, so they restore with or without partitioning. A variable it gives one part
        stays whole; a partitioner of a variable_scope around create_clones or inside
        model_fn wins; variables made otherwise (Keras layers, tf.Variable) stay whole.
        Needs ps tasks.

    Its properties and methods are slim's, with slim's values, except that worker devices
    carry the replica's task: worker_device is '/job:<worker_job_name>/task:<replica_id>'
    (slim's: '/job:<worker_job_name>', which is ours when the name carries its task).
    """

    def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0, num_replicas=1,
                 num_ps_tasks=0, worker_job_name='worker', ps_job_name='ps',
                 clone_devices=None, ps_strategy='round_robin',
                 variable_update='parameter_server',
                 all_reduce_pack_bytes=ALL_REDUCE_PACK_BYTES,
                 task_timeout_secs=TASK_TIMEOUT_SECS, is_chief=None,
                 sync_batch_norm=False, precision='float32', xla=False,
                 quantize_delay=None, gradient_compression='none', prefetch_reads=False,
                 seed=None, variable_partitioner=None):
        # Counts, ids and sizes.
        _check_numbers(num_clones=num_clones, num_replicas=num_replicas, replica_id=replica_id,
                       num_ps_tasks=num_ps_tasks, all_reduce_pack_bytes=all_reduce_pack_bytes,
                       task_timeout_secs=task_timeout_secs, quantize_delay=quantize_delay,
                       seed=seed)
        # Each choice one of its registry's names, or a bool.
        _check_choices(variable_update=variable_update, ps_strategy=ps_strategy,
                       precision=precision, gradient_compression=gradient_compression,
                       sync_batch_norm=sync_batch_norm, xla=xla, prefetch_reads=prefetch_reads)
        if variable_partitioner is not None and not callable(variable_partitioner):
            raise ValueError('variable_partitioner must be None or a callable of a variable\'s '
                             'shape and dtype (as tf.compat.v1.min_max_variable_partitioner(...) '
                             f'returns), got {variable_partitioner!r}')
        # Where the tasks and clones are.
        if num_replicas > 1 or num_ps_tasks > 0:
            for name, value in (('worker_job_name', worker_job_name),
                                ('ps_job_name', ps_job_name)):
                if not isinstance(value, str) or not value:
                    raise ValueError(f'{name} must be a non-empty string when replicas or '
                                     f'PS tasks are used, got {value!r}')
            worker_job, named_task = _job_and_task(worker_job_name)
        else:
            worker_job, named_task = worker_job_name, None
        if clone_devices is not None:
            clone_devices = tuple(clone_devices)
            if len(clone_devices) != num_clones:
                raise ValueError(f'clone_devices must list one device per clone '
                                 f'(num_clones={num_clones}), got {list(clone_devices)!r}')
        # The settings that cannot combine (the flags check the same functions).
        for problem in (
                variable_update_problem(variable_update, num_replicas, num_ps_tasks,
                                        _as_parameter),
                gradient_compression_problem(gradient_compression, variable_update,
                                             num_ps_tasks, _as_parameter),
                prefetch_reads_problem(prefetch_reads, variable_update, num_ps_tasks,
                                       _as_parameter),
                variable_partitioner_problem(variable_partitioner, variable_update,
                                             num_ps_tasks, _as_parameter),
                distinct_devices_problem(variable_update, sync_batch_norm, num_clones,
                                         clone_on_cpu, clone_devices, _as_parameter),
                quantize_delay_problem(quantize_delay, sync_batch_norm, _as_parameter)):
            if problem:
                raise ValueError(problem)
        self._num_clones = num_clones
        self._clone_on_cpu = clone_on_cpu
        self._replica_id = replica_id
        self._num_replicas = num_replicas
        self._num_ps_tasks = num_ps_tasks
        self._worker_job_name = worker_job_name
        self._ps_job_name = ps_job_name
        self._clone_devices = clone_devices
        self._ps_strategy = ps_strategy
        self._variable_update = variable_update
        self._all_reduce_pack_bytes = all_reduce_pack_bytes
        self._task_timeout_secs = float(task_timeout_secs)
        self._named_task = named_task
        if is_chief is None:
            is_chief = worker_job in CHIEF_JOBS or (named_task is None and replica_id == 0)
        self._is_chief = bool(is_chief)
        self._sync_batch_norm = sync_batch_norm
        self._precision = precision
        self._xla = xla
        self._quantize_delay = quantize_delay
        self._gradient_compression = gradient_compression
        self._prefetch_reads = prefetch_reads
        self._seed = seed
        self._variable_partitioner = variable_partitioner

    num_clones = property(lambda self: self._num_clones)
    clone_on_cpu = property(lambda self: self._clone_on_cpu)
    replica_id = property(lambda self: self._replica_id)
    num_replicas = property(lambda self: self._num_replicas)
    num_ps_tasks = property(lambda self: self._num_ps_tasks)
    worker_job_name = property(lambda self: self._worker_job_name)
    ps_job_name = property(lambda self: self._ps_job_name)
    clone_devices = property(lambda self: self._clone_devices)
    ps_strategy = property(lambda self: self._ps_strategy)
    variable_update = property(lambda self: self._variable_update)
    all_reduce_pack_bytes = property(lambda self: self._all_reduce_pack_bytes)
    task_timeout_secs = property(lambda self: self._task_timeout_secs)
    is_chief = property(lambda self: self._is_chief)
    sync_batch_norm = property(lambda self: self._sync_batch_norm)
    precision = property(lambda self: self._precision)
    xla = property(lambda self: self._xla)
    quantize_delay = property(lambda self: self._quantize_delay)
    gradient_compression = property(lambda self: self._gradient_compression)
    prefetch_reads = property(lambda self: self._prefetch_reads)
    seed = property(lambda self: self._seed)
    variable_partitioner = property(lambda self: self._variable_partitioner)

    @property
    def graph_seed(self):
        """None without a seed, else this worker's graph-level seed: seed + replica_id, so
        that the workers draw different dropout masks and augmentations."""
        return None if self._seed is None else self._seed + self._replica_id

    @property
    def replicated(self):
        """Whether each clone holds a copy of the variables ('replicated', 'collective')."""
        return self._variable_update != 'parameter_server'

    @property
    def ps_device(self):
        """'/job:<ps_job_name>' with PS tasks, else '' (slim's): the job of the PS devices."""
        return f'/job:{self._ps_job_name}' if self._num_ps_tasks > 0 else ''

    @property
    def worker_device(self):
        """'/job:<worker_job_name>/task:<replica_id>' with PS tasks or replicas, else '':
        the prefix of every worker device this config gives (slim's has no task). A
        worker_job_name carrying its task ('master/task:0') gives '/job:master/task:0', as
        slim's does, whatever replica_id is."""
        if self._num_ps_tasks == 0 and self._num_replicas == 1:
            return ''
        if self._named_task is not None:
            return f'/job:{self._worker_job_name}'
        return f'/job:{self._worker_job_name}/task:{self._replica_id}'

    def __repr__(self):
        return (f'DeploymentConfig(num_clones={self._num_clones}, '
                f'clone_on_cpu={self._clone_on_cpu}, replica_id={self._replica_id}, '
                f'num_replicas={self._num_replicas}, num_ps_tasks={self._num_ps_tasks}, '
                f'worker_job_name={self._worker_job_name!r}, '
                f'ps_job_name={self._ps_job_name!r}, clone_devices={self._clone_devices!r}, '
                f'ps_strategy={self._ps_strategy!r}, '
                f'variable_update={self._variable_update!r}, '
                f'all_reduce_pack_bytes={self._all_reduce_pack_bytes}, '
                f'task_timeout_secs={self._task_timeout_secs}, '
                f'is_chief={self._is_chief}, sync_batch_norm={self._sync_batch_norm}, '
                f'precision={self._precision!r}, xla={self._xla}, '
                f'quantize_delay={self._quantize_delay}, '
                f'gradient_compression={self._gradient_compression!r}, '
                f'prefetch_reads={self._prefetch_reads}, seed={self._seed}, '
                f'variable_partitioner={self._variable_partitioner!r})')

    def _check_clone_index(self, clone_index):
        if not isinstance(clone_index, int) or not 0 <= clone_index < self._num_clones:
            raise ValueError(f'clone_index must be in [0, num_clones={self._num_clones}), '
                             f'got {clone_index!r}')

    def clone_device(self, clone_index):
        """Device string of clone `clone_index`: GPU:i, CPU:0, or clone_devices[i]."""
        self._check_clone_index(clone_index)
        if self._clone_devices is not None:
            return self.worker_device + self._clone_devices[clone_index]
        if self._clone_on_cpu:
            return self.worker_device + '/device:CPU:0'
        return self.worker_device + f'/device:GPU:{clone_index}'

    def clone_scope(self, clone_index):
        """Name scope of clone `clone_index`: 'clone_i', or '' when there is one clone."""
        self._check_clone_index(clone_index)
        return '' if self._num_clones == 1 else f'clone_{clone_index}'

    def optimizer_device(self):
        """Device of the gradient sums, the update ops and the summaries: worker CPU."""
        return self.worker_device + '/device:CPU:0'

    def inputs_device(self):
        """Device of the input pipeline: the worker's CPU."""
        return self.worker_device + '/device:CPU:0'

    def variable_devices(self):
        """The devices holding variables, in task order: the PS tasks' CPUs, the clones'
        devices when replicated, or the local '/device:CPU:0'."""
        if self.replicated:
            return [self.clone_device(i) for i in range(self._num_clones)]
        if self._num_ps_tasks == 0:
            return [self.worker_device + '/device:CPU:0']
        return [f'{self.ps_device}/task:{t}/device:CPU:0' for t in range(self._num_ps_tasks)]

    def variables_device(self):
        """'/device:CPU:0', or with PS tasks a device function for `tf.compat.v1.device`.

        When replicated, the worker's CPU holds the variables made outside the clones
        (the global step); each clone's device holds its copy of the model's. The function
        places each new variable op on a PS task's CPU and leaves every other
        op where it was: with 'round_robin' on the next task in creation order, with
        'bytes' on the task whose variables in the op's graph have the fewest bytes.
        """
        if self._num_ps_tasks == 0:
            return self.worker_device + '/device:CPU:0'
        return PS_STRATEGIES[self._ps_strategy].variables_device(self.variable_devices())

    def caching_device(self):
        """None, or with PS tasks a device function, as slim's: op -> the worker's CPU
        ('/job:worker/task:<replica_id>/device:CPU:0', whatever the op), for
        `tf.variable_scope(..., caching_device=...)`. create_clones reads each trainable
        variable there once per step for every clone and regularizer, so that a variable
        crosses the network once per worker and step. Slim's function gives the reading op's
        own device: one network read per clone device."""
        if self._num_ps_tasks == 0:
            return None
        worker_cpu = self.worker_device + '/device:CPU:0'
        return lambda op: worker_cpu


def _job_and_task(worker_job_name):
    """(job, task) of a worker job name: ('worker', None) for 'worker', ('master', 0) for
    'master/task:0'. ValueError naming worker_job_name unless it is a job, optionally with
    its replica and task."""
    try:
        spec = tf.DeviceSpec.from_string(f'/job:{worker_job_name}')
    except ValueError:
        spec = None
    if spec is None or spec.device_type is not None:
        raise ValueError("worker_job_name must be a job name, optionally with its task "
                         f"('worker', 'master/task:0'), got {worker_job_name!r}")
    return spec.job, spec.task


def _as_parameter(name, value):
    """A setting as DeploymentConfig and deploy() name it in messages: 'num_clones=2'."""
    if name == 'sync_replicas':
        return 'a SyncReplicasOptimizer'
    if name == 'variable_partitioner':
        return 'variable_partitioner'
    return f'{name}={value!r}'


def _check_numbers(num_clones, num_replicas, replica_id, num_ps_tasks, all_reduce_pack_bytes,
                   task_timeout_secs, quantize_delay, seed):
    """Raises ValueError unless each of DeploymentConfig's numbers is in its range."""
    check_int('num_clones', num_clones, 1)
    check_int('num_replicas', num_replicas, 1)
    check_int('replica_id', replica_id, 0)
    check_int('num_ps_tasks', num_ps_tasks, 0)
    if replica_id >= num_replicas:
        raise ValueError(f'replica_id must be less than num_replicas={num_replicas}, '
                         f'got {replica_id!r}')
    check_int('all_reduce_pack_bytes', all_reduce_pack_bytes, 0)
    if (isinstance(task_timeout_secs, bool) or
            not isinstance(task_timeout_secs, (int, float)) or not task_timeout_secs >= 0):
        raise ValueError(f'task_timeout_secs must be a number >= 0, got {task_timeout_secs!r}')
    if quantize_delay is not None and (isinstance(quantize_delay, bool) or
                                       not isinstance(quantize_delay, int) or quantize_delay < 0):
        raise ValueError('quantize_delay must be None (no quantization) or an integer >= 0, '
                         f'the global step it starts at, got {quantize_delay!r}')
    check_int('seed', seed, 0, none_ok=True)


def _check_choices(variable_update, ps_strategy, precision, gradient_compression, **flags):
    """Raises ValueError unless each choice of DeploymentConfig is a name of its registry and
    each of `flags` True or False."""
    for name, value, registry in (
            ('variable_update', variable_update, VARIABLE_UPDATES),
            ('ps_strategy', ps_strategy, PS_STRATEGIES),
            ('precision', precision, precision_lib.PRECISIONS),
            ('gradient_compression', gradient_compression, compression.COMPRESSIONS)):
        if value not in registry:
            raise ValueError(f'{name} must be one of {registry.names}, got {value!r}')
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise ValueError(f'{name} must be True or False, got {value!r}')


def _require_graph_mode(function_name):
    if tf.executing_eagerly():
        raise RuntimeError(
            f'{function_name}() builds a TF1 graph, but eager execution is on: call '
            'tf.compat.v1.disable_eager_execution() at start-up, or build inside '
            '`with tf.Graph().as_default():`.')


def create_clones(config, model_fn, args=None, kwargs=None, reads_in_turn=False):
    """Calls `model_fn(*args, **kwargs)` once per clone and returns the list of Clone.

    Clone i is built under name scope config.clone_scope(i) and device
    config.clone_device(i); clones after the first reuse the first one's variables.
    With PS tasks and ps_strategy 'bytes', the variables made here are placed once all
    exist: largest first onto the PS task holding the fewest bytes (variables already on
    the tasks count), with the ops colocated with them. With PS tasks, each trainable
    variable model_fn makes is read once per step where config.caching_device() places it,
    the worker's CPU, for every clone and regularizer (see variable_sharing.caching_reads),
    so it crosses the network once per step whatever the number of clones. With
    reads_in_turn (deploy's for training, unless config.prefetch_reads; 'lease' for leases
    a check can take back, see slim_deploy.deployment.turns), the workers' steps
    take these reads in turns, through locks on the first ps task that a step holds until
    the values reached it: workers then receive the values in turns instead of all at the
    end, and one's gradients cross while another reads; as many read at once as the ps
    tasks can serve at a worker's link rate (one when a variable on one task is most of the
    bytes, P for parts spread over P tasks); the lock's release joins clone 0's UPDATE_OPS,
    which the training step must run.
    When replicated, clone 0 makes the variables on its device and each other clone a copy
    of the trainable ones on its own (see slim_deploy.deployment.replicas). With
    sync_batch_norm, the batch norms of the clones normalize together (see
    slim_deploy.deployment.sync_batch_norm). With xla, each clone's ops (and later their
    gradients) are marked for XLA compilation.
    """
    _require_graph_mode('create_clones')
    args = args or []
    kwargs = kwargs or {}
    group = _clones_group(config)
    copies = _replicas(config, group) if config.replicated else None
    batch_norms = (sync_batch_norm.SyncBatchNorm(group)
                   if config.sync_batch_norm and group.size > 1 else None)
    variables = variable_sharing.CloneVariables(
        [config.clone_scope(i) for i in range(config.num_clones)], config.variable_partitioner)
    clones = []
    # With 16-bit math and gradients, the reads from the ps tasks cross in 16 bits too.
    read_dtype = (compression.wire_dtype(config.gradient_compression)
                  if config.precision != 'float32' else None)
    with placement.placing_clones(config) as place, variable_sharing.caching_reads(
            config.caching_device(), read_dtype, prefetch=config.prefetch_reads,
            turn_device=config.variable_devices()[0] if reads_in_turn else None,
            turn_worker=config.replica_id, turn_readers=config.num_ps_tasks,
            turn_lease=reads_in_turn == 'lease',
            update_scope=config.clone_scope(0)):
        for i in range(config.num_clones):
            with tf.name_scope(config.clone_scope(i)) as clone_scope:
                clone_device = config.clone_device(i)
                with tf.device(clone_device), tf.device(place):
                    with variables.building(i) as ops, (
                            batch_norms.building(i) if batch_norms
                            else contextlib.nullcontext()), (
                            tf.xla.experimental.jit_scope() if config.xla
                            else contextlib.nullcontext()):
                        outputs = model_fn(*args, **kwargs)
            if copies and i:
                copies.localize(i, ops)
            clones.append(Clone(outputs, clone_scope, clone_device))
    if copies:
        copies.register(clones)
    return clones


def _clones_group(config):
    """The all-reduce group of the clones that train together: this worker's, and with
    'collective' every worker's."""
    workers = config.num_replicas if config.variable_update == 'collective' else 1
    return all_reduce.Group(
        size=config.num_clones * workers,
        local_devices=tuple(config.clone_device(i) for i in range(config.num_clones)),
        has_source=config.is_chief, timeout_secs=config.task_timeout_secs)


def _replicas(config, group):
    """The Replicas of a replicated config: its clones, all-reducing over `group`."""
    return replicas.Replicas([config.clone_scope(i) for i in range(config.num_clones)],
                             group.local_devices, group, config.all_reduce_pack_bytes,
                             config.num_replicas,
                             compression.wire_dtype(config.gradient_compression))


def _gather_clone_loss(clone, num_clones, regularization_losses):
    """Sum of the clone's losses / num_clones + `regularization_losses`; None if none.

    Adds scalar summaries for both parts outside the clone's device.
    """
    clone_loss = regularization_loss = None
    with tf.device(clone.device):
        parts = []
        clone_losses = tf.get_collection(tf.GraphKeys.LOSSES, clone.scope)
        if clone_losses:
            clone_loss = tf.add_n(clone_losses, name='clone_loss')
            if num_clones > 1:
                clone_loss = tf.math.divide(clone_loss, float(num_clones),
                                            name='scaled_clone_loss')
            parts.append(clone_loss)
        if regularization_losses:
            regularization_loss = tf.add_n(regularization_losses, name='regularization_loss')
            parts.append(regularization_loss)
        sum_loss = tf.add_n(parts) if parts else None
    if clone_loss is not None:  # Slim's tag: 'Losses/clone_loss', or with several clones
        # 'clone_i/Losses/clone_i//clone_loss' (the clone's scope inside its name scope).
        tf.summary.scalar(f'Losses/{clone.scope}/clone_loss' if clone.scope
                          else 'Losses/clone_loss', clone_loss)
    if regularization_loss is not None:
        tf.summary.scalar('Losses/regularization_loss', regularization_loss)
    return sum_loss


def _gather_clones_losses(clones, regularization_losses=None):
    """Each clone's loss (None where it has none), regularization added to the first.

    regularization_losses: None means the graph's REGULARIZATION_LOSSES collection.
    """
    if regularization_losses is None:
        regularization_losses = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
    losses = []
    for clone in clones:
        with tf.name_scope(clone.scope):
            losses.append(_gather_clone_loss(clone, len(clones), regularization_losses))
        regularization_losses = None
    return losses


def _total_loss(losses):
    """The sum of the clones' losses that are not None, named 'total_loss'; None if none."""
    losses = [loss for loss in losses if loss is not None]
    return tf.add_n(losses, name='total_loss') if losses else None


def _sum_clones_gradients(clone_grads):
    """Sums per variable the gradients of all clones; drops variables with no gradient.

    Args:
      clone_grads: one list of (gradient, variable) per clone, variables in the same order.
    Returns:
      A list of (summed gradient, variable).
    """
    sum_grads = []
    for grads_and_vars in zip(*clone_grads):
        var = grads_and_vars[0][1]
        grads = [g for g, _ in grads_and_vars if g is not None]
        if not grads:
            continue
        sum_grad = grads[0] if len(grads) == 1 else tf.add_n(
            grads, name=var.op.name + '/sum_grads')
        sum_grads.append((sum_grad, var))
    return sum_grads


def optimize_clones(clones, optimizer, regularization_losses=None, *,
                    gradient_accumulation_steps=1, loss_scale=None, **kwargs):
    """Computes the total loss and the gradients summed over clones.

    Args:
      clones: list of Clone from create_clones().
      optimizer: a tf.compat.v1.train.Optimizer.
      regularization_losses: added once, to the first clone; None means the graph's
        REGULARIZATION_LOSSES collection.
      gradient_accumulation_steps: K, the micro-batches (runs) per update: the gradients
        are those of total_loss / K, to be summed over K runs before they are applied
        (accumulation.apply_every; deploy() does it).
      loss_scale: a precision.DynamicLossScale: each clone's gradients are taken of its
        scaled loss and unscaled (None: none).
      **kwargs: passed to optimizer.compute_gradients.
    Returns:
      (total_loss, [(gradient, variable)]); total_loss is a scalar named 'total_loss'.
      When replicated, the gradients are the all-reduced sums, for clone 0's (canonical)
      variables first, then for each other clone's copies; `var_list` names canonical
      variables.
    """
    _require_graph_mode('optimize_clones')
    check_int('gradient_accumulation_steps', gradient_accumulation_steps, 1)
    losses = _gather_clones_losses(clones, regularization_losses)
    copies = replicas.of_clones(clones)
    var_lists = (copies.var_lists(kwargs.pop('var_list', None)) if copies
                 else [kwargs.pop('var_list', None)] * len(clones))
    clones_grads = []
    for clone, loss, var_list in zip(clones, losses, var_lists):
        if loss is None:
            clones_grads.append(None)
            continue
        with tf.name_scope(clone.scope), tf.device(clone.device):
            if gradient_accumulation_steps > 1:
                loss = tf.math.divide(loss, float(gradient_accumulation_steps),
                                      name='micro_batch_loss')
            grads = optimizer.compute_gradients(loss_scale.scaled(loss) if loss_scale else loss,
                                                var_list=var_list, **kwargs)
            clones_grads.append(loss_scale.unscaled(grads) if loss_scale else grads)
    if all(grads is None for grads in clones_grads):
        raise ValueError('model_fn added no loss to tf.GraphKeys.LOSSES and there are no '
                         'regularization losses: nothing to optimize')
    if copies:
        return _total_loss(losses), copies.all_reduce(var_lists[0], clones_grads,
                                                      [c.device for c in clones])
    return _total_loss(losses), _sum_clones_gradients([g for g in clones_grads if g])


def _add_gradients_summaries(grads_and_vars):
    """Histogram summaries of each gradient and of its norm; returns them."""
    summaries = []
    for grad, var in grads_and_vars:
        values = grad.values if isinstance(grad, tf.IndexedSlices) else grad
        summaries.append(tf.summary.histogram(var.op.name + '/gradient', values))
        summaries.append(tf.summary.scalar(var.op.name + '/gradient_norm',
                                           tf.global_norm([values])))
    return summaries


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False, var_list=None, gradient_accumulation_steps=1):
    """Builds the clones and, with an optimizer, the training step; returns DeployedModel.

    train_op runs the summed-gradient update (creating the global step on the variables
    device) and the first clone's UPDATE_OPS, and returns total_loss. Without an optimizer
    only the losses are gathered, for evaluation. summary_op merges the summaries that
    existed before the call with the first clone's and the loss summaries. With ps tasks
    the training step reads the variables in turn with the other workers' (create_clones'
    reads_in_turn), unless config.prefetch_reads. With backup workers (a
    SyncReplicasOptimizer aggregating fewer gradients than one per worker) the turns are
    leases that the chief takes back from a late worker, which would otherwise hold up the
    others that backup workers let go on: the chief's loop must run turns.LeaseChecks
    (train() does, and the optimizer's make_session_run_hook(is_chief=True) returns a hook
    that does); a worker does not send gradients that an update has passed by the time
    backprop makes them, which the ps tasks would drop, and with fewer gradients aggregated
    than workers, an update takes at most one gradient from each (see late_workers).

    var_list: the variables to train: None for all trainable ones, a list, or a function
    returning the list, called once the clones have created the variables.

    gradient_accumulation_steps: K, the micro-batches per update. With K > 1 each run of
    train_op takes one micro-batch (model_fn's inputs give the next) and returns its loss;
    every K-th run applies the mean gradient of the last K (see
    slim_deploy.deployment.accumulation), so the global step counts updates. The first clone's
    UPDATE_OPS (batch-norm moving averages) run every run, as they would over K steps. With a
    tf.train.SyncReplicasOptimizer, which aggregates gradients itself, ask it for K times
    more instead.

    With config.precision 'float16' the gradients are those of the loss scaled by a
    precision.DynamicLossScale (its variables are in the graph's precision.LOSS_SCALE
    collection): an update with an Inf or NaN gradient is skipped, leaving the variables
    and the global step as they were.

    Both apply the update inside a tf.cond, so the variables they train must be resource
    variables (what TensorFlow 2 makes; UsageError for a reference variable).

    With config.quantize_delay the clones are rewritten for quantization-aware training
    (quantize.create_training_graph) once the global step exists and before their
    gradients; without an optimizer, for quantized evaluation (quantize.create_eval_graph).

    When replicated, var_list, summarize_gradients and the batch-norm updates concern clone
    0's variables (the canonical ones; its update ops update the moving statistics all
    clones share) and its all-reduced gradients. With several workers ('collective'), the
    graph's LOCAL_INIT_OP, which tf.train.MonitoredSession runs after initializing or
    restoring the variables, then broadcasts the chief's global variables (those existing
    when deploy returns) to every worker and sets every copy from them.
    """
    _require_graph_mode('deploy')
    check_int('gradient_accumulation_steps', gradient_accumulation_steps, 1)
    sync_replicas = isinstance(optimizer, tf.train.SyncReplicasOptimizer)
    if gradient_accumulation_steps > 1 and sync_replicas:
        raise ValueError('gradient_accumulation_steps with a SyncReplicasOptimizer: it '
                         'aggregates gradients itself; give it replicas_to_aggregate x '
                         f'{gradient_accumulation_steps} instead')
    problem = sync_replicas and sync_replicas_problem(config.precision, config.prefetch_reads,
                                                      _as_parameter)
    if problem:
        raise ValueError(problem)
    if config.seed is not None:
        _make_reproducible(config, optimizer)

    # Gather the summaries that exist before the clones.
    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))

    # Create the clones.
    backup_workers = _has_backup_workers(optimizer)
    clones = create_clones(config, model_fn, args, kwargs, reads_in_turn=(
        optimizer is not None and not config.prefetch_reads
        and ('lease' if backup_workers else True)))
    if backup_workers and tf.get_collection(turns.CHECKS):
        turns.checked_by_sync_hook(optimizer)
    first_clone = clones[0]
    copies = replicas.of_clones(clones)  # None: the clones share one set of variables.

    train_op = total_loss = loss_scale = None
    with tf.device(config.optimizer_device()):
        if optimizer:
            # Compute, sum and apply the clones' gradients: the training step.
            train_op, total_loss, loss_scale = _training_step(
                config, clones, copies, optimizer, summaries, summarize_gradients, var_list,
                gradient_accumulation_steps)
            if backup_workers:
                late_workers.keep_stale_gradients_on_workers(optimizer)
                late_workers.count_late_steps(optimizer)
                if optimizer._replicas_to_aggregate < optimizer._total_num_replicas:
                    late_workers.take_newer_tokens_only(optimizer, config.replica_id)
        else:
            # Only the losses, for evaluation.
            if config.quantize_delay is not None:
                quantize.create_eval_graph(per_channel_wt=True)
            total_loss = _total_loss(_gather_clones_losses(clones))

        # Add the first clone's summaries and the losses', and merge them all.
        summaries.update(tf.get_collection(tf.GraphKeys.SUMMARIES, first_clone.scope))
        if total_loss is not None:
            summaries.add(tf.summary.scalar('Losses/total_loss', total_loss))
        if loss_scale:
            summaries.add(tf.summary.scalar('loss_scale', loss_scale.scale))
        summary_op = tf.summary.merge(sorted(summaries, key=lambda t: t.name),
                                      name='summary_op') if summaries else None

    # Replicas across workers start from the chief's values.
    if copies and config.num_replicas > 1:
        _set_local_init_op(copies.sync_op(all_reduce.Group(
            size=config.num_replicas, local_devices=(config.clone_device(0),),
            has_source=config.is_chief,
            timeout_secs=config.task_timeout_secs and max(
                config.task_timeout_secs, START_TIMEOUT_SECS))))
    return DeployedModel(train_op, summary_op, total_loss, clones)


def _has_backup_workers(optimizer):
    """Whether `optimizer` is a SyncReplicasOptimizer whose updates take fewer gradients than
    one (or one micro-batch's) from every worker: the late workers' are dropped."""
    if not isinstance(optimizer, tf.train.SyncReplicasOptimizer):
        return False
    aggregated, workers = optimizer._replicas_to_aggregate, optimizer._total_num_replicas
    return aggregated < workers or aggregated % workers != 0


def _training_step(config, clones, copies, optimizer, summaries, summarize_gradients,
                   var_list, gradient_accumulation_steps):
    """deploy()'s training step: (train_op, total_loss, the DynamicLossScale or None).
    copies: the clones' Replicas (None: one set of variables). Adds the gradient summaries
    to `summaries` when summarize_gradients."""
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
    with tf.device(config.variables_device()):
        global_step = tf.train.get_or_create_global_step()
    if config.quantize_delay is not None:
        quantize.create_training_graph(quant_delay=config.quantize_delay, per_channel_wt=True)
    if callable(var_list):
        var_list = var_list()
    loss_scaling = precision_lib.PRECISIONS[config.precision].loss_scaling
    loss_scale = precision_lib.DynamicLossScale() if loss_scaling else None
    total_loss, clones_gradients = optimize_clones(
        clones, optimizer, var_list=var_list,
        gradient_accumulation_steps=gradient_accumulation_steps, loss_scale=loss_scale)
    if summarize_gradients:
        summaries.update(_add_gradients_summaries(
            [(g, v) for g, v in clones_gradients if not copies or copies.is_canonical(v)]))
    if gradient_accumulation_steps > 1 or loss_scale:
        _require_resource_variables(
            clones_gradients, f'gradient_accumulation_steps={gradient_accumulation_steps}'
            if gradient_accumulation_steps > 1 else f'precision={config.precision!r}')

    def update(grads_and_vars):  # Replicas compress in their all-reduce.
        return optimizer.apply_gradients(
            grads_and_vars if copies else compression.across_tasks(
                grads_and_vars, compression.wire_dtype(config.gradient_compression),
                config.optimizer_device()),
            global_step=global_step)

    def apply(grads_and_vars):  # Loss scaling skips it if a gradient is not finite.
        return (loss_scale.apply_if_finite(grads_and_vars, update) if loss_scale
                else update(grads_and_vars))

    # Around apply_every's tf.cond: optimizers make their slots outside the branch
    # (under tf.init_scope), where this variable scope applies.
    with copies.copying_slots() if copies else contextlib.nullcontext():
        grad_updates = (apply(clones_gradients) if gradient_accumulation_steps == 1
                        else accumulation.apply_every(gradient_accumulation_steps,
                                                      clones_gradients, apply))
    with tf.control_dependencies([grad_updates, *update_ops]):
        train_op = tf.identity(total_loss, name='train_op')
    return train_op, total_loss, loss_scale


def _make_reproducible(config, optimizer):
    """Seeds the default graph with config.graph_seed unless it has a seed, turns on op
    determinism, and logs a line when asynchronous workers make the run irreproducible
    anyway. ValueError for TensorFlow's own SyncReplicasOptimizer, whose updates depend on
    the order gradients arrive in (ordered_sync's does not)."""
    if (isinstance(optimizer, tf.train.SyncReplicasOptimizer) and
            not isinstance(optimizer, ordered_sync.OrderedSyncReplicasOptimizer)):
        raise ValueError(f'seed={config.seed} cannot make a tf.train.SyncReplicasOptimizer '
                         'reproducible (it sums the gradients in the order they arrive): use '
                         'slim_deploy.deployment.ordered_sync.OrderedSyncReplicasOptimizer')
    if tf.get_default_graph().seed is None:
        tf.set_random_seed(config.graph_seed)
    tf.compat.v2.config.experimental.enable_op_determinism()
    if (optimizer and config.num_ps_tasks and config.num_replicas > 1 and
            not isinstance(optimizer, tf.train.SyncReplicasOptimizer)):
        logging.warning('seed %d: asynchronous workers apply their gradients to the ps tasks '
                        'in the order they arrive, so this run is not bit-reproducible',
                        config.seed)


def _require_resource_variables(grads_and_vars, setting):
    """UsageError naming the first reference (not resource) variable: under `setting`
    (e.g. 'gradient_accumulation_steps=4') the update runs inside a tf.cond, where the
    optimizer cannot update a reference variable."""
    refs = sorted(v.op.name for _, v in grads_and_vars if not replicas.is_resource(v))
    if refs:
        raise UsageError(f'{setting} updates the variables inside a tf.cond, where {refs[0]!r}, '
                         'a reference (not resource) variable, cannot be updated: make it '
                         'with use_resource=True')


def _set_local_init_op(op):
    """Makes `op` the graph's LOCAL_INIT_OP; ValueError if it has one already."""
    if tf.get_collection(tf.GraphKeys.LOCAL_INIT_OP):
        raise ValueError("variable_update='collective' sets the graph's LOCAL_INIT_OP to "
                         'the start-up broadcast, but it holds an op already')
    tf.add_to_collection(tf.GraphKeys.LOCAL_INIT_OP, op)
