"""What one training step moves over the network, read from the built graph, and the least
time the links need for it.

    traffic = step_traffic(graph, config)   # the graph deploy() built with config
    traffic.worker.bytes_in, traffic.ps_tasks[0].bytes_out, traffic.seconds(link_gbps=10)
    traffic.worker.rule                     # 'in then out': its gradients wait for its reads
    ps_advice(traffic).tasks                # ps tasks that keep each within a worker's link
    plan_rows(traffic, link_gbps=10)        # placement_plan's lines on the network

Units: bytes (printed with decimal prefixes: 1 MB = 10^6 bytes) per step, a step being one
run of the train op on each of the W = config.num_replicas workers; link bandwidth in
Gbit/s (10^9 bit/s) each way; times in seconds.

The step is every op the op deploy() names 'train_op' needs (inputs and control inputs),
each where TensorFlow's placer puts it: with the ops its colocation attribute names and
with the op making each resource or reference it takes (unless it is an IdentityN or calls
a function, which TensorFlow exempts); otherwise on its requested device, this worker's
task filling what that leaves open. So a variable's reads
(ReadVariableOp), optimizer updates, batch-norm moving-average updates and sync replicas'
accumulators run on the variable's ps task. A tensor crosses the network where an op of
one task uses a tensor another task made, once per receiving task (as TensorFlow's graph
partitioning sends it, measured on TF 2.21); constants are copied, not sent. With ps
tasks, per step of one worker:

  - in: each trainable variable model_fn makes, once, whatever the number of clones:
    create_clones reads it on the worker's CPU (DeploymentConfig.caching_device()), one
    read on the ps task copied there, and every clone and regularizer uses that copy (see
    variable_sharing.caching_reads); other variables (batch norm's moving statistics, a Keras
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
moments) are summed by CollectiveReduce ops (deploy()'s) or CollectiveReduceV2 ops
(MultiWorkerMirroredStrategy's, whose group size and instance key are input tensors, read
when they are constants), one per pack on each clone, over a group of N members (every
clone of every worker). TensorFlow's ring passes 2 (N - 1) / N x S bytes of a pack of S
bytes from each member to the next, members ordered by task, so one hop per worker leaves
the machine: each worker's link carries 2 (N - 1) / N x S each way per pack. When the group
is one worker's clones ('replicated', or synchronized batch norm without 'collective')
nothing leaves the machine.

Links are full-duplex and all of the same bandwidth B. A step needs at least, on every
link, the bytes that must pass through it one after another, over B; the busiest link
bounds the step, computation, latency and protocol overhead coming on top. What must pass
one after another follows from the graph's data and control dependencies, by one of three
rules (Link.rule):

  - 'each way': the two directions carry at once and the busier one counts: max(in, out).
    A ring all-reduce sends and receives at once; a ps task's asynchronous workers step
    independently, so it sends one worker's reads while it receives another's gradients.
  - 'in then out', a worker's link: the worker sends a tensor only once it has received
    every tensor that tensor depends on (its gradients wait for its reads: the forward
    and backward passes lie between), and its next step starts after this one ended. With
    the tensors it sends taken in decreasing order of the bytes they wait for, a_1 >=
    a_2 >= ..., of s_1, s_2, ... bytes, the link needs max(in, a_k + s_1 + ... + s_k over
    every k) (the k first cannot start before a_k bytes came in): in + out when every
    gradient waits for every read (a loss that uses every variable), max(in, out) when none
    waits for anything.
  - 'out then in', a ps task's link with synchronous workers (a SyncReplicasOptimizer that
    aggregates W gradients per update, and a step is an update): a worker reads the
    variables after taking a token an update queued, and a gradient of reads older than
    the last update is dropped as stale, so between two updates the task sends W workers'
    reads and receives their gradients, each worker's gradients after its own reads. So the
    W workers' gradients pass after the bytes they wait for reached one worker (a_k + W x
    (s_1 + ... + s_k), as above), and after the last of the W workers' reads (W x (r_1 +
    ... + r_k), taken in decreasing order of the bytes d_k that wait for them) that worker
    still sends d_k bytes. Not in + out: one worker's gradients can pass while another
    still reads (deploy() has the workers read in turn for it, see
    variable_sharing.caching_reads); for lenet on one ps task and 2 workers, 3 x 13.1 MB,
    not 4 x 13.1 MB.
A link whose rule gives no more than max(in, out) is 'each way'. Bytes that pass only after
a reply to what the step sent (a sync token) are not ordered after it here, nor are the ins
of a ps task's link after another task's outs: the bound stays below what a step takes.

The ops inside function bodies (tf.cond, tf.while_loop of control flow v2, tf.function
calls: gradient accumulation's update, float16 loss scaling's) are not counted;
StepTraffic.functions names their calls.
"""
import collections
import dataclasses
import math

import tensorflow.compat.v1 as tf

# Op types running function bodies, whose ops TensorFlow places one by one.
_FUNCTION_CALLS = frozenset({'If', 'StatelessIf', 'While', 'StatelessWhile', 'Case',
                             'StatelessCase', 'PartitionedCall', 'StatefulPartitionedCall'})
# Op types that take a resource without going with its maker (TensorFlow's input colocation
# exemptions; function calls, which place their bodies' ops one by one, are exempt too).
_FORWARDS_STATE = frozenset({'IdentityN'})
# SyncReplicasOptimizer's protocol: gradients go into accumulators, an update takes them,
# then queues the tokens the workers wait for.
_ACCUMULATORS = frozenset({'ConditionalAccumulator', 'ResourceConditionalAccumulator',
                           'SparseConditionalAccumulator'})
_ACCUMULATOR_APPLIES = frozenset({'AccumulatorApplyGradient', 'ResourceAccumulatorApplyGradient',
                                  'SparseAccumulatorApplyGradient'})
_ACCUMULATOR_TAKES = frozenset({'AccumulatorTakeGradient', 'ResourceAccumulatorTakeGradient',
                                'SparseAccumulatorTakeGradient'})
# Op types of variables, resource or not, whose shape and dtype a PsGroup takes.
_VARIABLE_OPS = frozenset({'VariableV2', 'VarHandleOp'})
# The all-reduces step_traffic counts: deploy()'s, MultiWorkerMirroredStrategy's.
_ALL_REDUCES = frozenset({'CollectiveReduce', 'CollectiveReduceV2'})
_DEQUEUES = frozenset({'QueueDequeue', 'QueueDequeueV2'})
_DEQUEUE_MANYS = frozenset({'QueueDequeueMany', 'QueueDequeueManyV2'})
_ENQUEUES = frozenset({'QueueEnqueue', 'QueueEnqueueV2', 'QueueEnqueueMany',
                       'QueueEnqueueManyV2'})

EACH_WAY = 'each way'
IN_THEN_OUT = 'in then out'
OUT_THEN_IN = 'out then in'
# What each rule means, in a line.
RULES = {EACH_WAY: 'both directions at once',
         IN_THEN_OUT: 'what it sends waits for what it received',
         OUT_THEN_IN: "synchronous workers: each one's gradients wait for its reads, which "
                      'wait for the last update'}


@dataclasses.dataclass(frozen=True)
class Link:
    """One host's network link: the bytes it carries per step, in and out, and `bytes`, those
    that must pass through it one after another, by `rule` (EACH_WAY, IN_THEN_OUT or
    OUT_THEN_IN: see the module's docstring)."""
    name: str
    bytes_in: int
    bytes_out: int
    bytes: int
    rule: str

    @property
    def direction(self):
        """Its busier direction: 'in' or 'out' ('out' among equals)."""
        return 'in' if self.bytes_in > self.bytes_out else 'out'


@dataclasses.dataclass(frozen=True)
class AllReduces:
    """The all-reduces of one step. count: all-reduces on each member (one per pack, and
    with float16 gradient compression one more per pack, of its scale); bytes: S, their
    summed size on one member; members: N, the group's size; local_members: the members on
    this worker (its clones)."""
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
    received: ((tensor name, bytes, bytes the worker received before it could send it), ...):
      the worker's tensors its ops use.
    sent: ((tensor name, bytes, bytes the worker sends only after receiving it), ...): its
      tensors the worker's ops use.
    shape: the variable's shape (a tuple of ints), or None when unknown or the group makes
      no variable. dtype: the variable's dtype's name (None without a variable).
    whole: the names of the tensors of `received` and `sent` that hold the whole variable
      (its reads, its gradients, in any dtype), which its parts would split.
    """
    name: str
    task: int
    received: tuple
    sent: tuple
    shape: tuple | None = None
    dtype: str | None = None
    whole: frozenset = frozenset()

    @property
    def bytes(self):
        """Its bytes per worker step, both ways."""
        return sum(size for _, size, _ in self.received + self.sent)

    def split(self, shapes):
        """The PsGroups of this group's variable made in parts of `shapes` (lists, along one
        axis, as placement.parts gives them), as tf.get_variable names them ('<name>/part_0',
        ...): each tensor of `whole` becomes its part's share (its bytes x the part's
        elements over the variable's), named '<tensor>/part_<i>'; the other tensors (scalars
        every part's ops take alike, such as the learning rate) stay as they are, so that a
        ps task holding several parts receives them once. What each part waits for and is
        waited for is the variable's (every part of a read is used where the whole was)."""
        elements = math.prod(self.shape)

        def share(entries, index, part_elements):
            return tuple((f'{name}/part_{index}', size * part_elements // elements, waits)
                         if name in self.whole else (name, size, waits)
                         for name, size, waits in entries)

        groups = []
        for index, shape in enumerate(shapes):
            part_elements = math.prod(shape)
            groups.append(PsGroup(
                f'{self.name}/part_{index}', self.task,
                share(self.received, index, part_elements), share(self.sent, index, part_elements),
                tuple(shape), self.dtype,
                frozenset(f'{name}/part_{index}' for name in self.whole)))
        return tuple(groups)


@dataclasses.dataclass(frozen=True)
class StepTraffic:
    """What one step (of every worker) moves through each link, in bytes.

    workers: W. worker: each worker's link (all alike). ps_tasks: each ps task's link,
    carrying all W workers' steps (none without ps tasks). all_reduces: None when the step
    has none. synchronous: whether the workers step in lockstep (a SyncReplicasOptimizer
    aggregating W gradients per update), which makes the ps tasks' links OUT_THEN_IN.
    groups: the PsGroups on the ps tasks, for ps_advice. unknown: tensors crossing the
    network whose size the graph does not give, and all-reduces whose group size or key
    is not a constant (not counted). functions: the names of the step's ops running
    function bodies (tf.cond and the like, e.g. of gradient accumulation or loss scaling),
    whose inside is not counted. other_collectives: the types of the step's collective ops
    other than all-reduces (broadcasts, gathers), whose bytes are not counted.
    """
    workers: int
    worker: Link
    ps_tasks: tuple
    all_reduces: AllReduces | None
    synchronous: bool = False
    groups: tuple = dataclasses.field(default=(), repr=False)
    unknown: int = 0
    functions: tuple = ()
    other_collectives: tuple = ()

    @property
    def links(self):
        """Each worker's link, then each ps task's."""
        return (self.worker,) + self.ps_tasks

    @property
    def busiest(self):
        """The links with the most bytes to pass one after another: the bottleneck."""
        most = max(link.bytes for link in self.links)
        return tuple(link for link in self.links if link.bytes == most)

    def seconds(self, link_gbps):
        """The least time a step needs on full-duplex links of `link_gbps` Gbit/s each
        way: the busiest link's bytes over the bandwidth."""
        return transfer_seconds(self.busiest[0].bytes, link_gbps)


@dataclasses.dataclass(frozen=True)
class PsAdvice:
    """How many ps tasks keep each ps task's link within a worker's (their Link.bytes
    compared), with the PsGroups spread largest first onto the least-loaded.

    tasks: the smallest such number; None if none does: the group placed with `variable`
    alone on a task makes its link's bytes `variable_bytes` (all workers' steps), more than
    `worker_bytes`, a worker's link's, and a group is not split (its variable's parts, when
    a partitioner made them, are groups of their own).
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
    tensors, unknown = {}, set()
    pushed, pulled = [], []  # (Group name, tensor name, ...) of what ps tasks get, give.
    for op in sorted(step, key=lambda op: op._id):
        receiver = placement.task(op)
        for tensor in op.inputs:
            sender = placement.task(tensor.op)
            if sender == receiver or tensor.op.type == 'Const':
                continue
            size = tensor_bytes(tensor)
            if size is None:
                unknown.add(tensor.name)
                continue
            transfers[tensor.name, receiver] = (sender, size)
            tensors[tensor.name] = tensor
            if receiver[0] == config.ps_job_name and sender == worker:
                pushed.append((placement.group(op), tensor.name, receiver))
            if sender[0] == config.ps_job_name and receiver == worker:
                pulled.append((placement.group(tensor.op), tensor.name))
    before, after = _waits(step, placement, worker, transfers, tensors)
    groups = collections.defaultdict(lambda: ({}, {}))  # Name -> (received, sent).
    for group, name, receiver in pushed:
        groups[group][0][name] = (transfers[name, receiver][1], before[name, receiver])
    for group, name in pulled:
        groups[group][1][name] = (transfers[name, worker][1], after[name])
    all_reduces, unknown_reduces = _all_reduces(step)
    ring = all_reduces.network_bytes if all_reduces else 0
    workers = config.num_replicas
    synchronous = _synchronous(graph, step, workers)
    worker_outs = [(size, before[key]) for key, (sender, size) in transfers.items()
                   if sender == worker]
    worker_ins = [size for (_, receiver), (_, size) in transfers.items() if receiver == worker]
    ps_links = []
    for task in range(config.num_ps_tasks):
        ps = (config.ps_job_name, task)
        ins = [(size, before.get(key, 0)) for key, (_, size) in transfers.items()
               if key[1] == ps]
        outs = [(size, after[name] if receiver == worker else 0)
                for (name, receiver), (sender, size) in transfers.items() if sender == ps]
        ps_links.append(_ps_link(f'ps task {task}', ins, outs, workers, synchronous))
    return StepTraffic(
        workers=workers,
        worker=_worker_link(worker_ins, worker_outs, ring),
        ps_tasks=tuple(ps_links),
        all_reduces=all_reduces,
        synchronous=synchronous,
        groups=tuple(_ps_group(graph.get_operation_by_name(name), placement, received, sent,
                               tensors) for name, (received, sent) in sorted(groups.items())),
        unknown=len(unknown) + unknown_reduces,
        functions=tuple(sorted(op.name for op in step if _calls_function(op))),
        other_collectives=tuple(sorted({op.type for op in step
                                        if op.type.startswith('Collective')} - _ALL_REDUCES)))


def _ps_group(op, placement, received, sent, tensors):
    """The PsGroup of the ops placed with `op` on its ps task (`placement`: the step's
    _Placement): what the worker sends them, `received` ({tensor name: (bytes, bytes it waits
    for)}), and takes from them, `sent` (alike); tensors: {name: tensor}. When `op` is a
    variable of known shape, its shape, dtype and the tensors of that shape."""
    shape = dtype = None
    if op.type in _VARIABLE_OPS:
        known = tf.TensorShape(op.get_attr('shape'))
        shape = tuple(known.as_list()) if known.is_fully_defined() else None
        dtype = tf.as_dtype(op.get_attr('dtype')).name
    whole = frozenset(name for name in [*received, *sent] if shape is not None
                      and tensors[name].shape.is_fully_defined()
                      and tuple(tensors[name].shape.as_list()) == shape)
    return PsGroup(op.name, placement.task(op)[1],
                   tuple((name, *sizes) for name, sizes in received.items()),
                   tuple((name, *sizes) for name, sizes in sent.items()), shape, dtype, whole)


def ps_advice(traffic):
    """The PsAdvice of a StepTraffic with ps tasks; None without.

    Each PsGroup stays whole and goes, largest (bytes per step) first, onto the ps task
    carrying the fewest bytes so far, as ps_strategy='bytes' spreads variables; a tensor
    several groups of one task use crosses once. Transfers between ps tasks are left out.
    """
    if not traffic.ps_tasks:
        return None
    groups = sorted(traffic.groups, key=lambda group: (-group.bytes, group.name))
    worker = traffic.worker.bytes
    if not groups:
        return PsAdvice(1, '', 0, worker)

    def busiest(spread, tasks):
        return _spread(spread, tasks, traffic.workers, traffic.synchronous)

    largest = max(groups, key=lambda group: busiest([group], 1))
    largest_bytes = busiest([largest], 1)
    if busiest(groups, len(groups)) > worker:  # Even alone on a task, a group is too much.
        return PsAdvice(None, largest.name, largest_bytes, worker)
    # A task carries at most `worker` bytes: fewer tasks than this cannot do.
    fewest = max(1, math.ceil(busiest(groups, 1) / max(worker, 1)))
    tasks = next(tasks for tasks in range(fewest, len(groups) + 1)
                 if busiest(groups, tasks) <= worker)
    return PsAdvice(tasks, largest.name, largest_bytes, worker)


def plan_rows(traffic, link_gbps):
    """The placement plan's rows on the network, as (role, text) pairs: what StepTraffic
    `traffic` (None: the graph has no training step) needs of links of `link_gbps` Gbit/s."""
    if traffic is None:
        return [('network', "no estimate: the graph has no training step ('train_op')")]
    uncounted = ([f'{traffic.unknown} tensors of unknown size'] if traffic.unknown else []) + (
        [f'the ops inside {", ".join(traffic.functions)}'] if traffic.functions else []) + (
        [f'the {", ".join(traffic.other_collectives)} ops'] if traffic.other_collectives
        else [])
    caveat = f'; not counted: {" and ".join(uncounted)}' if uncounted else ''
    reduces = traffic.all_reduces
    if not any(link.bytes for link in traffic.links):
        local = ('the variables are on this machine' if reduces is None else
                 f'the {reduces.members} clones all-reduce {human_bytes(reduces.bytes)} per '
                 f"step among this machine's devices, each sending "
                 f'{human_bytes(reduces.member_bytes)} to the next')
        return [('network', f'nothing crosses it: {local}{caveat}')]

    def seconds(size):
        return human_seconds(transfer_seconds(size, link_gbps))

    plural = '' if traffic.workers == 1 else 's'
    workers = f'{traffic.workers} worker{plural}'
    rows = [('network', f'per step of {workers}, on full-duplex links of {link_gbps:g} Gbit/s '
                        f'({link_gbps * 125:g} MB/s) each way{caveat}')]
    ps_whose = (f'{traffic.workers} synchronous worker{plural}' if traffic.synchronous
                else workers)
    carried = ['each worker'] + [ps_whose] * len(traffic.ps_tasks)
    if reduces and reduces.network_bytes:
        carried[0] += (f'; a ring all-reduce of {human_bytes(reduces.bytes)} in '
                       f'{reduces.count} all-reduce{"" if reduces.count == 1 else "s"} over '
                       f'{reduces.members} members: 2 x {reduces.members - 1}/'
                       f'{reduces.members} of it each way')
    busiest = traffic.busiest
    for index, (link, whose) in enumerate(zip(traffic.links, carried)):
        rows.append(('worker' if index == 0 else f'ps {index - 1}',
                     f'in {human_bytes(link.bytes_in)}, out {human_bytes(link.bytes_out)} '
                     f'({whose}): {seconds(link.bytes)}, {link.rule}'
                     + ('  <- bottleneck' if link in busiest else '')))
    names = '; '.join(f"{'each worker' if link is traffic.worker else link.name}'s, "
                      f'{link.rule} ({RULES[link.rule]})' for link in busiest)
    rows.append(('step', f'>= {seconds(busiest[0].bytes)}: the bytes of the busiest '
                         f"link{'s' * (len(busiest) > 1)} over the bandwidth: {names}"))
    advice = ps_advice_text(traffic)
    return rows + [('advice', advice)] if advice else rows


def ps_advice_text(traffic):
    """The plan's advice on the number of ps tasks, a sentence, when more ps tasks would cut
    the bound by 1% or more; else None."""
    advice = ps_advice(traffic)
    if advice is None or traffic.busiest[0].bytes < 1.01 * traffic.worker.bytes:
        return None
    if advice.tasks is None:
        workers = f"{traffic.workers} worker{'' if traffic.workers == 1 else 's'}"
        return ('no number of ps tasks takes the bottleneck off the ps tasks: alone on a task, '
                f'{advice.variable} and the ops placed with it pass '
                f"{human_bytes(advice.variable_bytes)} per step ({workers}), more than a "
                f"worker's link ({human_bytes(advice.worker_bytes)}); a variable_partitioner "
                '(--variable_partition_min_mb) splits a variable over the ps tasks')
    return (f"{advice.tasks} ps tasks with ps_strategy 'bytes' would keep each ps task's "
            f"link within a worker's ({human_bytes(advice.worker_bytes)})")


def spread_links(groups, tasks, workers, synchronous):
    """The Links of `tasks` ps tasks ('ps task 0', ...) when PsGroups `groups` are spread, in
    order, each onto the task carrying the fewest bytes so far (ps_strategy='bytes' when
    `groups` come largest first), and each of `workers` workers steps once (in lockstep if
    `synchronous`)."""
    loads = [0] * tasks
    received = [{} for _ in range(tasks)]
    sent = [{} for _ in range(tasks)]
    for group in groups:
        task = loads.index(min(loads))
        loads[task] += group.bytes
        received[task].update((name, rest) for name, *rest in group.received)
        sent[task].update((name, rest) for name, *rest in group.sent)
    return tuple(_ps_link(f'ps task {task}', ins.values(), outs.values(), workers, synchronous)
                 for task, (ins, outs) in enumerate(zip(received, sent)))


def _spread(groups, tasks, workers, synchronous):
    """The Link.bytes of the busiest of spread_links(groups, tasks, workers, synchronous)."""
    return max(link.bytes for link in spread_links(groups, tasks, workers, synchronous))


def _worker_link(ins, outs, ring):
    """A worker's Link: it receives tensors of `ins` bytes, sends `outs` ((bytes, bytes it
    received before it could send them)) and all-reduces `ring` bytes each way."""
    bytes_in, bytes_out = sum(ins) + ring, sum(size for size, _ in outs) + ring
    return _ordered('worker', bytes_in, bytes_out, _one_after_another(outs), IN_THEN_OUT)


def _ps_link(name, ins, outs, workers, synchronous):
    """A ps task's Link: per worker step, it receives `ins` ((bytes, bytes the worker
    received before it could send them)) and sends `outs` ((bytes, bytes the worker sends
    only after receiving them)), for each of `workers` workers, in lockstep if
    `synchronous`."""
    ins, outs = list(ins), list(outs)
    bytes_in = workers * sum(size for size, _ in ins)
    bytes_out = workers * sum(size for size, _ in outs)
    ordered = (max(_one_after_another(ins, workers), _one_after_another(outs, workers))
               if synchronous else 0)
    return _ordered(name, bytes_in, bytes_out, ordered, OUT_THEN_IN)


def _ordered(name, bytes_in, bytes_out, ordered, rule):
    """The Link whose bytes pass by `rule`, taking `ordered` bytes, unless each way takes as
    many."""
    each_way = max(bytes_in, bytes_out)
    if ordered > each_way:
        return Link(name, bytes_in, bytes_out, ordered, rule)
    return Link(name, bytes_in, bytes_out, each_way, EACH_WAY)


def _one_after_another(items, times=1):
    """The least bytes passing one after another when `times` copies of each of `items`
    ((bytes, other)) pass one way and each copy must follow, or be followed by, `other`
    bytes passing elsewhere (over a link of the same bandwidth): over every k, the k items
    of the most `other` bytes, the least of which is o_k, take o_k + times x their bytes."""
    most, passed = 0, 0
    for size, other in sorted(items, key=lambda item: -item[1]):
        passed += times * size
        most = max(most, other + passed)
    return most


def _waits(step, placement, worker, transfers, tensors):
    """({(tensor name, receiving task): bytes the worker received before it could send it}
    for the transfers the worker sends, {tensor name: bytes the worker sends only after
    receiving it} for those it receives), of `transfers` ({(tensor name, receiving task):
    (sending task, bytes)}) in the ops of `step`, through their data and control
    dependencies. tensors: {name: tensor} of the transfers."""
    received = [name for name, receiver in transfers if receiver == worker]
    bits = {name: 1 << index for index, name in enumerate(received)}
    masks = {}  # Op -> the bits of the received tensors it depends on.
    for op in _in_order(step):
        mask = 0
        on_worker = placement.task(op) == worker
        for tensor in op.inputs:
            mask |= masks[tensor.op] | (bits.get(tensor.name, 0) if on_worker else 0)
        for control in op.control_inputs:
            mask |= masks[control]
        masks[op] = mask
    sizes = [transfers[name, worker][1] for name in received]
    before, after = {}, dict.fromkeys(received, 0)
    for (name, receiver), (sender, size) in transfers.items():
        if sender != worker:
            continue
        mask = masks[tensors[name].op]
        waited = [index for index in range(len(received)) if mask >> index & 1]
        before[name, receiver] = sum(sizes[index] for index in waited)
        for index in waited:
            after[received[index]] += size
    return before, after


def _in_order(ops):
    """`ops` (a set holding the inputs and control inputs of each) in an order that puts
    every op after its inputs and control inputs."""
    order, seen = [], set()
    for root in sorted(ops, key=lambda op: op._id):
        pending = [(root, False)]
        while pending:
            op, expanded = pending.pop()
            if expanded:
                order.append(op)
                continue
            if op in seen:
                continue
            seen.add(op)
            pending.append((op, True))
            pending += [(other, False) for other in _dependencies(op) if other not in seen]
    return order


def _dependencies(op):
    """The ops of `op`'s inputs and its control inputs."""
    return [tensor.op for tensor in op.inputs] + list(op.control_inputs)


def _synchronous(graph, step, workers):
    """Whether `step` pushes its gradients into accumulators that an update takes `workers`
    gradients from (tf.train.SyncReplicasOptimizer's protocol), or into queues of its own
    that an update takes from (ordered_sync's), then waits for a token queued after that
    update: its workers step in lockstep."""
    accumulators = {op.inputs[0].op for op in step if op.type in _ACCUMULATOR_APPLIES}
    queues = {op.inputs[0].op for op in step if op.type in _DEQUEUES}
    if not queues:
        return False
    if not accumulators:
        pushed = {op.inputs[0].op for op in step if op.type in _ENQUEUES}
        takes = {op for op in graph.get_operations()
                 if op.type in _DEQUEUE_MANYS and op.inputs[0].op in pushed}
        return bool(takes) and any(takes <= needed_ops([op]) for op in graph.get_operations()
                                   if op.type in _ENQUEUES and op.inputs[0].op in queues)
    takes = [op for op in graph.get_operations()
             if op.type in _ACCUMULATOR_TAKES and op.inputs[0].op in accumulators]
    if ({op.inputs[0].op for op in takes} != accumulators or
            any(tf.get_static_value(op.inputs[1]) != workers for op in takes)):
        return False
    return any(set(takes) <= needed_ops([op]) for op in graph.get_operations()
               if op.type in _ENQUEUES and op.inputs[0].op in queues)


def _all_reduces(step):
    """(The AllReduces of the CollectiveReduce and CollectiveReduceV2 ops among `step`'s
    ops, None if none; the number of those whose size, group size or key the graph does
    not give as a constant, not counted)."""
    instances = collections.defaultdict(list)  # (Group key, instance key) -> its ops here.
    sizes, unknown = {}, 0
    for op in step:
        if op.type not in _ALL_REDUCES:
            continue
        if op.type == 'CollectiveReduce':
            keys = op.get_attr('group_key'), op.get_attr('instance_key')
            members = op.get_attr('group_size')
        else:  # CollectiveReduceV2: input, group size, group key, instance key, ...
            members, *keys = (tf.get_static_value(tensor) for tensor in op.inputs[1:4])
        size = tensor_bytes(op.inputs[0])
        if size is None or members is None or None in keys:
            unknown += 1
            continue
        keys = tuple(int(key) for key in keys)
        instances[keys].append(op)
        sizes[keys] = (size, int(members))
    if not instances:
        return None, unknown
    return AllReduces(
        count=len(instances),
        bytes=sum(size for size, _ in sizes.values()),
        members=max(members for _, members in sizes.values()),
        local_members=max(len(ops) for ops in instances.values())), unknown


def needed_ops(fetches):
    """The set of ops running `fetches` (ops or tensors) needs: them, and the ops of their
    inputs and their control inputs, transitively."""
    pending = [getattr(fetch, 'op', fetch) for fetch in fetches]
    needed = set(pending)
    while pending:
        op = pending.pop()
        for other in _dependencies(op):
            if other not in needed:
                needed.add(other)
                pending.append(other)
    return needed


def tensor_bytes(tensor):
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
    reference it takes (a variable, for its reads and updates), unless it is an IdentityN or
    runs a function body, whose ops TensorFlow places one by one; a SyncReplicasOptimizer's
    accumulator goes with the variable it accumulates gradients for (made on its device).
    Such a group runs on the task its first op making a resource or reference (and taking
    none) requests, the job or index that leaves open taken from its other ops in creation
    order, else from this worker's task (index 0 of another job)."""

    def __init__(self, graph, worker):
        self._parent = {}
        names = {op.name for op in graph.get_operations()}
        for op in graph.get_operations():
            for group in op.colocation_groups():
                name = group.decode()[len('loc:@'):]
                if name in names:
                    self._union(op.name, name)
            accumulated = _accumulated_variable(op)
            if accumulated in names:
                self._union(op.name, accumulated)
            if _calls_function(op) or op.type in _FORWARDS_STATE:
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


def _accumulated_variable(op):
    """The name of the variable whose gradients `op` accumulates, if it is the accumulator a
    SyncReplicasOptimizer made for it (shared_name '<variable>:0/grad_accum'); else None."""
    if op.type not in _ACCUMULATORS:
        return None
    variable, _, suffix = op.get_attr('shared_name').decode().rpartition(':0/')
    return variable if suffix == 'grad_accum' else None


def _makes_state(op):
    """Whether `op` makes a resource or reference (a variable, queue, accumulator) and takes
    none."""
    return (any(_takes_state(tensor.dtype) for tensor in op.outputs) and
            not any(_takes_state(dtype) for dtype in op._input_types))
