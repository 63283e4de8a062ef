"""What one training step moves over the network, read from the built graph, and the least
time the links need for it.

    traffic = step_traffic(graph, config)   # the graph deploy() built with config
    traffic.worker.bytes_in, traffic.ps_tasks[0].bytes_out, traffic.seconds(link_gbps=10)
    ps_advice(traffic).tasks                # ps tasks that keep each within a worker's link

Units: bytes (printed with decimal prefixes: 1 MB = 10^6 bytes) per step, a step being one
run of the train op on each of the W = config.num_replicas workers; link bandwidth in
Gbit/s (10^9 bit/s) each way; times in seconds.

The step is every op the op deploy() names 'train_op' needs (inputs and control inputs),
each where TensorFlow's placer puts it: with the ops its colocation attribute names and
with the op making each resource or reference it takes; otherwise on its requested
device, this worker's task filling what that leaves open. So a variable's reads
(ReadVariableOp), optimizer updates, batch-norm moving-average updates and sync replicas'
accumulators run on the variable's ps task. A tensor crosses the network where an op of
one task uses a tensor another task made, once per receiving task (as TensorFlow's graph
partitioning sends it, measured on TF 2.21); constants are copied, not sent. With ps
tasks, per step of one worker:

  - in: each trainable variable model_fn makes, once, whatever the number of clones:
    create_clones reads it on the worker's CPU (DeploymentConfig.caching_device()), one
    read on the ps task copied there, and every clone and regularizer uses that copy (see
    sharing.caching_reads); other variables (batch norm's moving statistics, a Keras
    model's built before deploy) once per clone reading them; the optimizer's scalars. A
    loss tf.get_variable(regularizer=...) makes runs next to its variable, and its
    gradient reads the variable once more;
  - out: each variable's gradient, summed over the clones on the worker's CPU, once; the
    batch moments batch norm moves its statistics towards; scalars (learning rate, global
    step, sync tokens).

Every worker runs the same step, so a ps task's link carries W x what one worker's step
moves through it, each worker's link its own. The sync replicas chief's update from the
accumulators runs on the ps tasks (scalars aside) and is not counted.

Collective all-reduces move no graph edges: the gradients (and synchronized batch norm's
moments) are summed by CollectiveReduce ops, one per pack on each clone, over a group of
N members (every clone of every worker). TensorFlow's ring passes 2 (N - 1) / N x S bytes
of a pack of S bytes from each member to the next, members ordered by task, so one hop
per worker leaves the machine: each worker's link carries 2 (N - 1) / N x S each way per
pack. When the group is one worker's clones ('replicated', or synchronized batch norm
without 'collective') nothing leaves the machine.

Links are full-duplex and all of the same bandwidth B: a step needs at least the most
bytes one direction of one link carries, over B. Computation, latency and protocol
overhead come on top. The ops inside function bodies (tf.cond, tf.while_loop of control
flow v2, tf.function calls: gradient accumulation's update, float16 loss scaling's) are not
counted; StepTraffic.functions names their calls.
"""
import collections
import dataclasses
import math

import tensorflow.compat.v1 as tf

# Op types running function bodies, whose ops TensorFlow places one by one.
_FUNCTION_CALLS = frozenset({'If', 'StatelessIf', 'While', 'StatelessWhile', 'Case',
                             'StatelessCase', 'PartitionedCall', 'StatefulPartitionedCall'})


@dataclasses.dataclass(frozen=True)
class Link:
    """One host's network link and the bytes it carries per step, in and out."""
    name: str
    bytes_in: int
    bytes_out: int

    @property
    def bytes(self):
        """The bytes of its busier direction."""
        return max(self.bytes_in, self.bytes_out)

    @property
    def direction(self):
        """Its busier direction: 'in' or 'out' ('out' among equals)."""
        return 'in' if self.bytes_in > self.bytes_out else 'out'


@dataclasses.dataclass(frozen=True)
class AllReduces:
    """The all-reduces of one step. count: all-reduces (packs) on each member; bytes: S,
    their summed size on one member; members: N, the group's size; local_members: the
    members on this worker (its clones)."""
    count: int
    bytes: int
    members: int
    local_members: int

    @property
    def member_bytes(self):
        """Bytes each member sends to the next member of the ring, and receives, per step:
        2 (N - 1) / N x S (rounded down)."""
        return 2 * (self.members - 1) * self.bytes // self.members

    @property
    def network_bytes(self):
        """Bytes each way through each worker's link per step: member_bytes when the group
        spans workers, else 0."""
        return self.member_bytes if self.members > self.local_members else 0


@dataclasses.dataclass(frozen=True)
class PsGroup:
    """Ops that run together on a ps task (a variable, its reads, its updates), and what
    one worker's step moves between them and the worker.

    name: the op they are placed with (the variable). task: its ps task.
    received: ((tensor name, bytes), ...): the worker's tensors its ops use.
    sent: ((tensor name, bytes), ...): its tensors the worker's ops use.
    """
    name: str
    task: int
    received: tuple
    sent: tuple

    @property
    def bytes(self):
        """Its bytes per worker step, both ways."""
        return sum(size for _, size in self.received + self.sent)


@dataclasses.dataclass(frozen=True)
class StepTraffic:
    """What one step (of every worker) moves through each link, in bytes.

    workers: W. worker: each worker's link (all alike). ps_tasks: each ps task's link,
    carrying all W workers' steps (none without ps tasks). all_reduces: None when the step
    has none. groups: the PsGroups on the ps tasks, for ps_advice. unknown: tensors
    crossing the network whose size the graph does not give (not counted). functions: the
    names of the step's ops running function bodies (tf.cond and the like, e.g. of
    gradient accumulation or loss scaling), whose inside is not counted.
    """
    workers: int
    worker: Link
    ps_tasks: tuple
    all_reduces: AllReduces | None
    groups: tuple = dataclasses.field(repr=False)
    unknown: int = 0
    functions: tuple = ()

    @property
    def links(self):
        """Each worker's link, then each ps task's."""
        return (self.worker,) + self.ps_tasks

    @property
    def busiest(self):
        """The links whose busier direction carries the most bytes: the bottleneck."""
        most = max(link.bytes for link in self.links)
        return tuple(link for link in self.links if link.bytes == most)

    def seconds(self, link_gbps):
        """The least time a step needs on full-duplex links of `link_gbps` Gbit/s each
        way: the bytes of the busiest link's busier direction over the bandwidth."""
        return transfer_seconds(self.busiest[0].bytes, link_gbps)


@dataclasses.dataclass(frozen=True)
class PsAdvice:
    """How many ps tasks keep each ps task's link within a worker's (their busier
    directions compared), with the PsGroups spread largest first onto the least-loaded.

    tasks: the smallest such number; None if none does: the group placed with `variable`
    alone moves `variable_bytes` (all workers' steps, its busier direction), more than
    `worker_bytes`, a worker's link's busier direction, and a group is not split.
    """
    tasks: int | None
    variable: str
    variable_bytes: int
    worker_bytes: int


def transfer_seconds(size, link_gbps):
    """Seconds to move `size` bytes one way at `link_gbps` Gbit/s."""
    return size * 8 / (link_gbps * 1e9)


def human_bytes(size):
    """'400 B', '1.6 MB': `size` bytes in decimal units."""
    for unit in ('B', 'kB', 'MB', 'GB'):
        if size < 1000 or unit == 'GB':
            break
        size /= 1000
    return f'{size} {unit}' if unit == 'B' else f'{size:.1f} {unit}'


def human_seconds(seconds):
    """'4.19 s' from a second, '419.1 ms' from a millisecond, else '0.036 ms'."""
    if seconds >= 1:
        return f'{seconds:.2f} s'
    return f'{seconds * 1000:.1f} ms' if seconds >= 0.001 else f'{seconds * 1000:.3f} ms'


def check_link_gbps(link_gbps):
    """ValueError unless `link_gbps` is a finite number > 0."""
    if (isinstance(link_gbps, bool) or not isinstance(link_gbps, (int, float)) or
            not math.isfinite(link_gbps) or link_gbps <= 0):
        raise ValueError(f'link_gbps must be a number > 0 (Gbit/s), got {link_gbps!r}')


def train_ops(graph):
    """The ops of `graph` that deploy() names 'train_op' (in any name scope)."""
    return [op for op in graph.get_operations()
            if op.name == 'train_op' or op.name.endswith('/train_op')]


def step_traffic(graph, config, fetches=None):
    """The StepTraffic of one step of `graph`, built by deploy() with DeploymentConfig
    `config` (this worker's); None if the step runs nothing.

    fetches: the ops or tensors a step runs; None: train_ops(graph).
    """
    step = needed_ops(train_ops(graph) if fetches is None else fetches)
    if not step:
        return None
    worker = _task(tf.DeviceSpec.from_string(config.worker_device or '/job:localhost'))
    placement = _Placement(graph, worker)
    transfers = {}  # (tensor name, receiving task) -> (sending task, bytes).
    unknown = set()
    groups = collections.defaultdict(lambda: ({}, {}))  # Name -> (received, sent).
    for op in sorted(step, key=lambda op: op._id):
        receiver = placement.task(op)
        for tensor in op.inputs:
            sender = placement.task(tensor.op)
            if sender == receiver or tensor.op.type == 'Const':
                continue
            size = _tensor_bytes(tensor)
            if size is None:
                unknown.add(tensor.name)
                continue
            transfers[tensor.name, receiver] = (sender, size)
            if receiver[0] == config.ps_job_name and sender == worker:
                groups[placement.group(op)][0][tensor.name] = size
            if sender[0] == config.ps_job_name and receiver == worker:
                groups[placement.group(tensor.op)][1][tensor.name] = size
    all_reduces = _all_reduces(step)
    ring = all_reduces.network_bytes if all_reduces else 0
    workers = config.num_replicas
    return StepTraffic(
        workers=workers,
        worker=_link('worker', transfers, worker, 1, ring),
        ps_tasks=tuple(_link(f'ps task {t}', transfers, (config.ps_job_name, t), workers)
                       for t in range(config.num_ps_tasks)),
        all_reduces=all_reduces,
        groups=tuple(PsGroup(name, placement.task(graph.get_operation_by_name(name))[1],
                             tuple(received.items()), tuple(sent.items()))
                     for name, (received, sent) in sorted(groups.items())),
        unknown=len(unknown),
        functions=tuple(sorted(op.name for op in step if _calls_function(op))))


def ps_advice(traffic):
    """The PsAdvice of a StepTraffic with ps tasks; None without.

    Each PsGroup stays whole and goes, largest (bytes per step) first, onto the ps task
    carrying the fewest bytes so far, as ps_strategy='bytes' spreads variables; a tensor
    several groups of one task use crosses once. Transfers between ps tasks are left out.
    """
    if not traffic.ps_tasks:
        return None
    groups = sorted(traffic.groups, key=lambda group: (-group.bytes, group.name))
    if not groups:
        return PsAdvice(1, '', 0, 0)
    workers = traffic.workers
    largest = max(groups, key=lambda group: _spread([group], 1, workers)[0])
    largest_bytes = _spread([largest], 1, workers)[0]
    busiest, worker = _spread(groups, len(groups), workers)
    if busiest > worker:  # Even alone on a task, the largest group is too much.
        return PsAdvice(None, largest.name, largest_bytes, worker)
    everything, least = _spread(groups, 1, workers)  # The fewest bytes there are.
    for tasks in range(max(1, math.ceil(everything / max(least, 1))), len(groups)):
        fewer_busiest, fewer_worker = _spread(groups, tasks, workers)
        if fewer_busiest <= fewer_worker:
            return PsAdvice(tasks, largest.name, largest_bytes, fewer_worker)
    return PsAdvice(len(groups), largest.name, largest_bytes, worker)


def _spread(groups, tasks, workers):
    """(bytes of the busiest ps task's busier direction, bytes of a worker's link's busier
    direction) when `groups` are spread, in order, over `tasks` ps tasks, each onto the
    task carrying the fewest bytes so far, and each of `workers` workers steps once."""
    loads = [0] * tasks
    received = [{} for _ in range(tasks)]
    sent = [{} for _ in range(tasks)]
    for group in groups:
        task = loads.index(min(loads))
        loads[task] += group.bytes
        received[task].update(group.received)
        sent[task].update(group.sent)
    bytes_in = [sum(sizes.values()) for sizes in received]
    bytes_out = [sum(sizes.values()) for sizes in sent]
    return workers * max(bytes_in + bytes_out), max(sum(bytes_in), sum(bytes_out))


def _link(name, transfers, task, workers, extra=0):
    """The Link of `task` ((job, index)): `workers` x its bytes in `transfers`, plus
    `extra` bytes each way."""
    bytes_in = sum(size for (_, receiver), (_, size) in transfers.items() if receiver == task)
    bytes_out = sum(size for (_, (sender, size)) in transfers.items() if sender == task)
    return Link(name, workers * bytes_in + extra, workers * bytes_out + extra)


def _all_reduces(step):
    """The AllReduces of the CollectiveReduce ops among `step`'s ops; None if none."""
    instances = collections.defaultdict(list)  # Instance key -> its ops here.
    for op in step:
        if op.type == 'CollectiveReduce':
            instances[op.get_attr('instance_key')].append(op)
    if not instances:
        return None
    return AllReduces(
        count=len(instances),
        bytes=sum(_tensor_bytes(ops[0].inputs[0]) or 0 for ops in instances.values()),
        members=max(ops[0].get_attr('group_size') for ops in instances.values()),
        local_members=max(len(ops) for ops in instances.values()))


def needed_ops(fetches):
    """The set of ops running `fetches` (ops or tensors) needs: them, and the ops of their
    inputs and their control inputs, transitively."""
    pending = [getattr(fetch, 'op', fetch) for fetch in fetches]
    needed = set(pending)
    while pending:
        op = pending.pop()
        for other in [tensor.op for tensor in op.inputs] + list(op.control_inputs):
            if other not in needed:
                needed.add(other)
                pending.append(other)
    return needed


def _tensor_bytes(tensor):
    """Bytes of `tensor` from its static shape and dtype; None if its shape is unknown."""
    elements = tensor.shape.num_elements()
    return None if elements is None else elements * tensor.dtype.base_dtype.size


def _task(spec):
    """(job, task index) of a DeviceSpec."""
    return spec.job, spec.task or 0


def _takes_state(dtype):
    """Whether an input or output of type `dtype` is a resource or reference."""
    return dtype == tf.resource or dtype._is_ref_dtype


class _Placement:
    """The task each op of a graph runs on, as TensorFlow's placer chooses: an op goes with
    the ops its colocation attribute names and with the op making each resource or
    reference it takes (a variable, for its reads and updates), unless it runs a function
    body, whose ops TensorFlow places one by one. Such a group runs on the task its first
    op making a resource or reference (and taking none) requests, the job or index that
    leaves open taken from its other ops in creation order, else from this worker's task
    (index 0 of another job)."""

    def __init__(self, graph, worker):
        self._parent = {}
        names = {op.name for op in graph.get_operations()}
        for op in graph.get_operations():
            for group in op.colocation_groups():
                name = group.decode()[len('loc:@'):]
                if name in names:
                    self._union(op.name, name)
            if _calls_function(op):  # TensorFlow places its body's ops one by one.
                continue
            for tensor, dtype in zip(op.inputs, op._input_types):
                if _takes_state(dtype):
                    self._union(op.name, tensor.op.name)
        members = collections.defaultdict(list)
        for op in graph.get_operations():
            members[self._root(op.name)].append(op)
        self._tasks, self._names = {}, {}
        for root, ops in members.items():
            ops.sort(key=lambda op: (not _makes_state(op), op._id))
            specs = [tf.DeviceSpec.from_string(op.device) for op in ops]
            job = next((spec.job for spec in specs if spec.job), None)
            task = next((spec.task for spec in specs if spec.task is not None), None)
            if task is None:
                task = worker[1] if job in (None, worker[0]) else 0
            self._tasks[root] = (job or worker[0], task)
            self._names[root] = ops[0].name

    def task(self, op):
        """(job, task index) of the task `op` runs on."""
        return self._tasks[self._root(op.name)]

    def group(self, op):
        """The name of the op `op` is placed with (a variable, for its reads and updates)."""
        return self._names[self._root(op.name)]

    def _root(self, name):
        root = name
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while name != root:  # Path compression.
            self._parent[name], name = root, self._parent[name]
        return root

    def _union(self, a, b):
        root_a, root_b = self._root(a), self._root(b)
        if root_a != root_b:
            self._parent[root_a] = root_b


def _calls_function(op):
    """Whether `op` runs a function body: tf.cond, tf.while_loop, tf.switch_case (control
    flow v2) or a tf.function call."""
    return op.type in _FUNCTION_CALLS


def _makes_state(op):
    """Whether `op` makes a resource or reference (a variable, queue, accumulator) and takes
    none."""
    return (any(_takes_state(tensor.dtype) for tensor in op.outputs) and
            not any(_takes_state(dtype) for dtype in op._input_types))
