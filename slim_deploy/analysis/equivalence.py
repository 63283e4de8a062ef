"""Checks that a deployment trains as one clone does: one SGD step of `model_fn` deployed as
clones (and micro-batches, and collective workers) against one step of `model_fn` called once
on the whole global batch, both from the same initial values.

    result = equivalence.check(model_fn, [images, labels], num_clones=2)
    print('\\n'.join(equivalence.format_result(result)))   # ... then 'equivalent' or not

model_fn(*tensors) builds one clone, as deploy()'s model_fn does, from its slice of `inputs`
(numpy arrays whose leading dimension is the global batch) and adds its losses to
tf.GraphKeys.LOSSES. The deployed model trains on `num_workers` x
`gradient_accumulation_steps` x `num_clones` equal slices of the batch, the single clone on
all of it. Compared after the step: the loss, the gradient applied to each trainable
variable, and the new value of every variable (batch norm's moving statistics, the global
step, each clone's copy when replicated; on every worker).

The deployed update is the gradient of the mean loss over the global batch, so the two
differ only by float32 round-off, unless the model normalizes with batch statistics (batch
norm) and the clones' batches are not the global batch (Result.expected says so). Round-off
grows with depth: in deep nets with batch norm and ReLU a 1e-7 change flips activations at
the kink and moves some gradients by 10% and more. So the single clone also takes its step
on the same batch in two other orders, mathematically the same step: how far those land
from it (the noise) is allowed too, NOISE_MARGIN times over.
"""
import concurrent.futures
import dataclasses
import itertools
import math
import re

import numpy as np
import tensorflow.compat.v1 as tf

from slim_deploy.cluster import launch, tasks
from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import compression, model_deploy, network_traffic, variable_sharing
from slim_deploy.training import loop

# Defaults of check()'s tolerances. Equivalent deployments measured: relative differences
# up to 1e-6 (lenet, cifarnet) and up to 2.5 times the noise (mobilenet_v1, sync batch
# norm); batch norm without sync, or a loss counted twice, thousands of times the noise.
RTOL = 1e-4
ATOL = 1e-6
NOISE_MARGIN = 10.0
LEARNING_RATE = 0.1
TIMEOUT_SECS = 120.0  # How long a collective op waits for the other workers.
# Stateful random ops: in the step they draw other numbers in the two models.
_RANDOM_OP = re.compile(r'Random\w*|\w*TruncatedNormal|Multinomial')
_BATCH_NORM_OPS = frozenset({'FusedBatchNorm', 'FusedBatchNormV2', 'FusedBatchNormV3'})
_COPY_PREFIX = re.compile(r'^clone_\d+/')


@dataclasses.dataclass(frozen=True)
class Difference:
    """How far one deployed tensor is from the single clone's.

    name: 'loss' or the variable's name, after 'worker W: ' on collective worker W > 0.
    abs: the largest absolute difference of an element; inf when the deployed model lacks it.
    scale: what relative differences are relative to: the largest |element| of the single
      clone's loss or gradient; for a variable, of its change in the step.
    noise: the largest absolute difference of the single clone's own steps on the batch
      reordered from its step on the batch in order.
    allowed: the largest `abs` that passes: atol + rtol x scale + noise_margin x noise, for
      a variable plus two float32 spacings of its largest value (each model's rounding).
    """
    name: str
    abs: float
    scale: float
    noise: float
    allowed: float

    @property
    def rel(self):
        return _relative(self.abs, self.scale)

    @property
    def noise_rel(self):
        return _relative(self.noise, self.scale)

    @property
    def passed(self):
        return self.abs <= self.allowed

    @property
    def badness(self):
        """abs / allowed: above 1 fails; the worst difference has the largest."""
        return _relative(self.abs, self.allowed)


def _relative(value, scale):
    """value / scale; 0 for a value of 0, inf for a scale of 0."""
    if value == 0:
        return 0.0
    return value / scale if scale else math.inf


@dataclasses.dataclass(frozen=True)
class Check:
    """One comparison, 'loss', 'gradients' or 'variables', and its Differences."""
    name: str
    differences: tuple

    def largest(self, attribute):
        """The Difference with the largest `attribute` ('abs', 'rel', 'noise_rel' or
        'badness')."""
        return max(self.differences, key=lambda d: getattr(d, attribute))

    @property
    def passed(self):
        return all(d.passed for d in self.differences)


@dataclasses.dataclass(frozen=True)
class Result:
    """What check() found.

    checks: the Checks of the loss, the gradients and the variables, in that order.
    expected: why the models differ by design (the model normalizes with batch statistics
      and the clones' batches are not the global batch); None when they should agree.
    global_batch: examples in the step.
    """
    checks: tuple
    expected: str | None
    global_batch: int

    @property
    def equivalent(self):
        return all(c.passed for c in self.checks)

    @property
    def worst(self):
        """(check name, Difference) of the largest abs / allowed."""
        check = max(self.checks, key=lambda c: c.largest('badness').badness)
        return check.name, check.largest('badness')


def compression_rtol(gradient_compression, members):
    """The rtol that allows a sum of `members` gradients exchanged in `gradient_compression`
    (a name in compression.COMPRESSIONS) its round-off: each addend and the sum rounded once,
    relative to the sum's largest element, with room for addends larger than the sum; RTOL
    at least."""
    return max(RTOL, 2 * (members + 1) * compression.round_off(gradient_compression))


def check(model_fn, inputs, num_clones, variable_update='parameter_server', num_workers=1,
          sync_batch_norm=False, gradient_accumulation_steps=1, learning_rate=LEARNING_RATE,
          rtol=RTOL, atol=ATOL, noise_margin=NOISE_MARGIN, seed=0, timeout_secs=TIMEOUT_SECS,
          setup=None, gradient_compression='none'):
    """Trains one step of `model_fn` deployed and as a single clone; returns the Result.

    Args:
      inputs: numpy arrays (or one), leading dimension the global batch, a multiple of
        num_workers x gradient_accumulation_steps x num_clones; model_fn gets one slice of
        each per clone.
      num_clones: clones per worker, each on its own CPU device (CPU:0, CPU:1, ...).
      variable_update, sync_batch_norm: DeploymentConfig's; gradient_accumulation_steps:
        deploy()'s (each session run feeds one micro-batch).
      num_workers: workers; more than 1 needs variable_update 'collective' and runs each in a
        thread with its own gRPC server on a free port of 127.0.0.1 (TensorFlow's server
        listens on every interface of that port while the process lives).
      learning_rate: of the SGD step. rtol, atol, noise_margin: see Difference.allowed.
      seed: the graph seed of the single clone's initial values, which both models start
        from, and of the reordering.
      timeout_secs: how long a collective op waits for the other workers.
      setup: None, or a function called without arguments in each graph the check builds,
        before model_fn: it builds what model_fn only calls, made once for all clones, such
        as a Keras model (model_fn finds the graph's by tf.get_default_graph()).
      gradient_compression: DeploymentConfig's (with 'collective' workers): the deployed
        gradients are sums of 16-bit values, so `rtol` should allow their round-off
        (compression_rtol).

    Raises UsageError when the batch does not split so, or model_fn adds no loss or draws
    random numbers in the step (e.g. dropout: the two models would draw different ones).
    """
    inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
    slices = num_workers * gradient_accumulation_steps * num_clones
    global_batch = len(inputs[0]) if inputs else 0
    if not global_batch or global_batch % slices or any(len(x) != global_batch for x in inputs):
        raise UsageError(
            f'inputs must share a leading dimension (the global batch) that is a positive '
            f'multiple of num_workers x gradient_accumulation_steps x num_clones = {slices}, '
            f'got shapes {[x.shape for x in inputs]}')
    setup = setup or (lambda: None)
    reference = _Reference(model_fn, inputs, learning_rate, seed, setup)
    workers = _run_workers(model_fn, inputs, reference.initial, dict(
        num_clones=num_clones, variable_update=variable_update, num_replicas=num_workers,
        sync_batch_norm=sync_batch_norm, task_timeout_secs=timeout_secs,
        gradient_compression=gradient_compression),
        gradient_accumulation_steps, learning_rate, setup)
    single, *reordered = reference.steps

    def compare(name, deployed, key, initial=None):
        """The Difference of `deployed` (None: missing) from the single clone's `key`:
        'loss', ('gradients', name) or ('variables', name); `initial`: a variable's value
        before the step (None for the loss and gradients)."""
        value = np.asarray(single.get(key), np.float64)
        noise = max(np.max(np.abs(step.get(key) - value), initial=0.0) for step in reordered)
        rounding = 0.0
        if initial is None:
            scale = np.max(np.abs(value), initial=0.0)
        else:
            scale = np.max(np.abs(value - initial), initial=0.0)
            rounding = 2 * float(np.spacing(np.float32(np.max(np.abs(value), initial=0.0))))
        if deployed is None or np.shape(deployed) != value.shape:
            return Difference(name, math.inf, float(scale), float(noise), 0.0)
        difference = np.max(np.abs(np.asarray(deployed, np.float64) - value), initial=0.0)
        return Difference(name, float(difference), float(scale), float(noise),
                          atol + rtol * float(scale) + noise_margin * float(noise) + rounding)

    loss = compare('loss', np.mean([w.losses for w in workers]), 'loss')
    gradients, variables = [], []
    for index, worker in enumerate(workers):
        prefix = f'worker {index}: ' if index else ''
        for name in single.gradients:
            gradients.append(compare(prefix + name, worker.gradients.get(name),
                                     ('gradients', name)))
        for name in single.variables:
            variables.extend(compare(prefix + copy, worker.variables.get(copy),
                                     ('variables', name), reference.initial[name])
                             for copy in [name, *worker.copies.get(name, ())])
    expected = None
    if reference.batch_statistics and gradient_accumulation_steps > 1:
        expected = 'batch norm normalizes each micro-batch with its own statistics'
    elif reference.batch_statistics and num_clones * num_workers > 1 and not sync_batch_norm:
        expected = ("batch norm normalizes each clone's batch with its own statistics "
                    'without sync_batch_norm')
    return Result((Check('loss', (loss,)), Check('gradients', tuple(gradients)),
                   Check('variables', tuple(variables))), expected, global_batch)


def format_result(result):
    """The Result as printable lines: per check its largest absolute and relative
    differences, and the largest relative noise, each with the tensor; then the verdict:
    'equivalent', or 'NOT equivalent' naming the worst tensor (', as expected' and why,
    when Result.expected says so)."""
    rows = [('check', 'largest abs diff', 'largest rel diff', 'largest rel noise')]
    for c in result.checks:
        rows.append((c.name, *(_value_at(c.largest(attribute), attribute)
                               for attribute in ('abs', 'rel', 'noise_rel'))))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ['  '.join(f'{cell:<{width}}' for cell, width in zip(row, widths + [0])).rstrip()
             for row in rows]
    if result.equivalent:
        return lines + ['equivalent']
    check_name, worst = result.worst
    verdict = (f'worst {worst.name} ({check_name}): abs {worst.abs:.3g}, rel {worst.rel:.3g}, '
               f'allowed abs {worst.allowed:.3g}')
    if result.expected:
        return lines + [f'NOT equivalent, as expected: {result.expected}; {verdict}']
    return lines + [f'NOT equivalent: {verdict}']


def _value_at(difference, attribute):
    """'1.23e-05 name' for `difference`'s `attribute`, or '0'."""
    value = getattr(difference, attribute)
    return f'{value:.2e} {difference.name}' if value else '0'


@dataclasses.dataclass(frozen=True)
class _Step:
    """One SGD step's results: the loss, {name: gradient}, {name: new value}."""
    loss: float
    gradients: dict
    variables: dict

    def get(self, key):
        """'loss', or (gradients or variables, name): that value."""
        if key == 'loss':
            return self.loss
        kind, name = key
        return getattr(self, kind)[name]


class _Reference:
    """model_fn once on the whole batch, in a graph of its own (after `setup()`), seeded by
    `seed`, built as create_clones builds one clone (so its Keras layers' updates run too).

    initial: {name: value} of the global variables before the step. steps: the _Step of
    one SGD step from them on the batch in order, then in reverse and in a permutation
    drawn with `seed`. loss is LOSSES plus REGULARIZATION_LOSSES; batch_statistics: whether
    the step normalizes with statistics of its batch (training-mode batch norm, moments).
    Each step takes three session runs, so that no read races a write: loss and gradients,
    then the update ops (batch norm's moving statistics), then SGD applying the gradients.
    """

    def __init__(self, model_fn, inputs, learning_rate, seed, setup):
        with tf.Graph().as_default() as graph:
            tf.set_random_seed(seed)
            feeds = [tf.placeholder(x.dtype, x.shape) for x in inputs]
            setup()
            # As deploy() builds one clone:
            with variable_sharing.CloneVariables(['']).building(0):
                model_fn(*feeds)
            losses = tf.losses.get_losses()
            if not losses:
                raise UsageError('model_fn added no loss to tf.GraphKeys.LOSSES')
            loss = tf.add_n(losses + tf.losses.get_regularization_losses())
            step = network_traffic.needed_ops([loss.op])
            random = sorted(op.name for op in step if _RANDOM_OP.fullmatch(op.type))
            if random:
                raise UsageError(
                    f'model_fn draws random numbers in the step ({random[0]!r}): the deployed '
                    'and the single clone would draw different ones; build it without '
                    'dropout or other randomness')
            self.batch_statistics = any(
                op.type in _BATCH_NORM_OPS and op.get_attr('is_training') or
                '/moments/' in f'/{op.name}' for op in step)
            optimizer = tf.train.GradientDescentOptimizer(learning_rate)
            grads_and_vars = [(tf.convert_to_tensor(g), v)
                              for g, v in optimizer.compute_gradients(loss) if g is not None]
            fed = [(tf.placeholder(v.dtype.base_dtype, v.shape), v) for _, v in grads_and_vars]
            apply = optimizer.apply_gradients(
                fed, global_step=tf.train.get_or_create_global_step())
            update_ops = tf.group(tf.get_collection(tf.GraphKeys.UPDATE_OPS))
            variables = {v.op.name: v for v in tf.global_variables()}
            start, start_feed = _assigner(variables)
            init = tf.global_variables_initializer()
            graph.finalize()
            names = [v.op.name for _, v in grads_and_vars]
            size = len(inputs[0])
            orders = [np.arange(size), np.arange(size)[::-1],
                      np.random.RandomState(seed).permutation(size)]
            self.steps = []
            with tf.Session(graph=graph) as session:
                session.run(init)
                self.initial = session.run(variables)
                for order in orders:
                    session.run(start, start_feed(self.initial))
                    feed = {f: x[order] for f, x in zip(feeds, inputs)}
                    loss_value, gradients = session.run(
                        [loss, [g for g, _ in grads_and_vars]], feed)
                    session.run(update_ops, feed)
                    session.run(apply, {p: g for (p, _), g in zip(fed, gradients)})
                    self.steps.append(_Step(float(loss_value), dict(zip(names, gradients)),
                                            session.run(variables)))


def _assigner(variables):
    """(op, feed): the op sets each of `variables` ({name: variable}) to the value fed for
    it; feed(values) is its feed dict for `values` ({name: value})."""
    placeholders = {name: tf.placeholder(v.dtype.base_dtype, v.shape)
                    for name, v in variables.items()}
    op = tf.group([variables[name].assign(p) for name, p in placeholders.items()])
    return op, lambda values: {p: values[name] for name, p in placeholders.items()}


class _RecordingSGD:
    """SGD at `learning_rate` for deploy(), keeping the gradients it applies to global
    variables (the canonical ones, not the replicated copies) in local variables.

    recorded: {variable name: local variable holding the gradient applied to it}.
    deploy() calls only compute_gradients and apply_gradients; the latter may be called
    inside a tf.cond branch (gradient accumulation), so the records are made outside it.
    """

    def __init__(self, learning_rate):
        self._sgd = tf.train.GradientDescentOptimizer(learning_rate)
        self.recorded = {}

    def compute_gradients(self, *args, **kwargs):
        return self._sgd.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        canonical = {v.op.name for v in tf.global_variables()}
        records = []
        for grad, variable in grads_and_vars:
            if grad is None or variable.op.name not in canonical:
                continue
            with tf.init_scope(), tf.device(variable.device), tf.name_scope(None):
                record = tf.Variable(
                    tf.zeros(variable.shape, variable.dtype.base_dtype), trainable=False,
                    use_resource=True, collections=[tf.GraphKeys.LOCAL_VARIABLES],
                    name=f'equivalence/{variable.op.name}/applied_gradient')
            self.recorded[variable.op.name] = record
            records.append(record.assign(tf.convert_to_tensor(grad), read_value=False))
        with tf.control_dependencies(records):
            return self._sgd.apply_gradients(grads_and_vars, global_step, name)


@dataclasses.dataclass(frozen=True)
class _Trained:
    """One deployed worker after the step. losses: train_op's, one per micro-batch;
    gradients: {canonical name: applied gradient}; variables: {name: value} of the
    canonical variables and the copies; copies: {canonical name: [its copies' names]}."""
    losses: list
    gradients: dict
    variables: dict
    copies: dict


class _Worker:
    """One worker's deployed model, in a graph of its own, fed `micro_batch` examples per
    run (one slice of each of `inputs` per clone), starting from the values `initial`."""

    def __init__(self, model_fn, inputs, micro_batch, initial, config,
                 gradient_accumulation_steps, learning_rate, setup):
        self.graph = tf.Graph()
        with self.graph.as_default():
            setup()
            with tf.device(config.inputs_device()):
                self._feeds = [tf.placeholder(x.dtype, (micro_batch,) + x.shape[1:])
                               for x in inputs]
            clone_batch = micro_batch // config.num_clones
            calls = itertools.count()

            def clone_fn():
                start = next(calls) * clone_batch
                return model_fn(*[feed[start:start + clone_batch] for feed in self._feeds])

            optimizer = _RecordingSGD(learning_rate)
            self._train_op = model_deploy.deploy(
                config, clone_fn, optimizer=optimizer,
                gradient_accumulation_steps=gradient_accumulation_steps).train_op
            variables = {v.op.name: v for v in tf.global_variables() if v.op.name in initial}
            self._start, start_feed = _assigner(variables)
            self._start_feed = start_feed(initial)
            self._copies = {}
            for v in tf.local_variables():
                canonical = _COPY_PREFIX.sub('', v.op.name, count=1)
                if canonical != v.op.name and canonical in initial:
                    self._copies.setdefault(canonical, []).append(v.op.name)
                    variables[v.op.name] = v
            self._init = tf.global_variables_initializer()
            # 'collective': the chief's variables broadcast, then the copies set from them.
            self._local_init = tf.group(tf.get_collection(tf.GraphKeys.LOCAL_INIT_OP) or
                                        tf.local_variables_initializer())
            self._results = {'gradients': optimizer.recorded, 'variables': variables}
            self.graph.finalize()

    def train(self, session, micro_batches):
        """Sets the initial values, trains on `micro_batches` (one list of arrays per run)
        and returns the _Trained."""
        session.run(self._init)
        session.run(self._start, self._start_feed)
        session.run(self._local_init)
        losses = [session.run(self._train_op, dict(zip(self._feeds, batch)))
                  for batch in micro_batches]
        results = session.run(self._results)
        return _Trained(losses, results['gradients'], results['variables'], self._copies)


def _run_workers(model_fn, inputs, initial, config_args, gradient_accumulation_steps,
                 learning_rate, setup):
    """Builds and trains each worker's deployed model; returns their _Trained, in order.
    config_args: DeploymentConfig's (num_replicas: the workers). Worker w takes the w-th
    of equal parts of the batch, in micro-batches. Several workers run in threads, each
    with its gRPC server on 127.0.0.1."""
    num_clones, num_workers = config_args['num_clones'], config_args['num_replicas']
    micro_batch = len(inputs[0]) // (num_workers * gradient_accumulation_steps)
    batches = [[[x[i * micro_batch:(i + 1) * micro_batch] for x in inputs]
                for i in range(w * gradient_accumulation_steps,
                               (w + 1) * gradient_accumulation_steps)]
               for w in range(num_workers)]
    devices = [f'/device:CPU:{i}' for i in range(num_clones)]
    workers = [_Worker(model_fn, inputs, micro_batch, initial, model_deploy.DeploymentConfig(
        clone_devices=devices, replica_id=w, **config_args), gradient_accumulation_steps,
        learning_rate, setup) for w in range(num_workers)]
    if num_workers == 1:
        config = loop.session_config(num_cpu_devices=num_clones)
        with tf.Session(graph=workers[0].graph, config=config) as session:
            return [workers[0].train(session, batches[0])]
    addresses = [f'{launch.LOCALHOST}:{port}'
                 for port in launch.free_ports(launch.LOCALHOST, num_workers)]
    cluster = [tasks.ClusterTask({'worker': addresses}, 'worker', w) for w in range(num_workers)]
    servers = [task.start_server(loop.session_config(
        num_cpu_devices=num_clones, collective_leader=task.collective_leader))
        for task in cluster]

    def train(w):
        config = loop.session_config(device_filters=cluster[w].device_filters(),
                                     collective_leader=cluster[w].collective_leader)
        with tf.Session(servers[w].target, graph=workers[w].graph, config=config) as session:
            return workers[w].train(session, batches[w])

    with concurrent.futures.ThreadPoolExecutor(num_workers) as pool:
        futures = [pool.submit(train, w) for w in range(num_workers)]
        concurrent.futures.wait(futures)
    errors = [f.exception() for f in futures if f.exception()]
    if errors:  # The first that is not a peer's failure seen from another worker.
        raise next((e for e in errors if not isinstance(e, tasks.PEER_ERRORS)), errors[0])
    return [f.result() for f in futures]
