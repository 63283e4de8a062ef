"""Where a deployment puts its variables: spread over the ps tasks by a PsStrategy
(PS_STRATEGIES: slim's round-robin, or by bytes once model_fn has made them all), the ops of
create_clones' clones placed around them, and the placement plan, which says where each part
of a deployment is.

    with placing_clones(config) as place:     # create_clones builds its clones under it
        ...
    print(placement_plan(config, graph, link_gbps=10))

Devices are strings ('/job:ps/task:1/device:CPU:0'); sizes bytes, from each variable op's
shape and dtype attrs.
"""
import collections
import contextlib
import dataclasses
import itertools
from typing import Callable

import tensorflow.compat.v1 as tf

from slim_deploy.common.registry import Registry
from slim_deploy.deployment import network_traffic, sync_batch_norm

# Op types that create variables, resource or not: the ops placed on variables_device().
_VARIABLE_OP_TYPES = frozenset({'Variable', 'VariableV2', 'VarHandleOp', 'AutoReloadVariable'})
# Op types that produce summaries: placed on the worker's CPU, next to the summary writer.
_SUMMARY_OP_TYPES = frozenset({
    'ScalarSummary', 'HistogramSummary', 'ImageSummary', 'AudioSummary', 'AudioSummaryV2',
    'TensorSummary', 'TensorSummaryV2', 'MergeSummary',
})


def _op_type(op):
    """The type of an Operation, or of the NodeDef that device functions may also get."""
    return op.op if isinstance(op, tf.NodeDef) else op.type


# Job of the virtual devices holding create_clones' variables until it spreads them by
# bytes. Job names in a cluster start with a letter, so this one names no real job.
_PENDING_JOB = '_model_deploy_pending'


def _variable_bytes(op):
    """Size in bytes of a variable op's value: elements x dtype size, from its `shape` and
    `dtype` attrs. Unknown dimensions and strings count as 0 bytes."""
    elements = tf.TensorShape(op.get_attr('shape')).num_elements() or 0
    return elements * tf.as_dtype(op.get_attr('dtype')).size


def _device_loads(graph, devices):
    """(number of variable ops, their bytes) on each of `devices` in `graph`, in order."""
    loads = {device: (0, 0) for device in devices}
    for op in graph.get_operations():
        if op.type in _VARIABLE_OP_TYPES and op.device in loads:
            count, size = loads[op.device]
            loads[op.device] = (count + 1, size + _variable_bytes(op))
    return [loads[device] for device in devices]


def _least_loaded(loads):
    """Index of the smallest of `loads`; the lowest index among equals."""
    return loads.index(min(loads))


def _new_variables_device(choose):
    """Device function: a variable op with no device gets `choose(op)`; others stay put."""
    def place(op):
        if op.device or _op_type(op) not in _VARIABLE_OP_TYPES:
            return op.device
        return choose(op)
    return place


def _round_robin(devices):
    """Device function: new variable ops go to `devices` in turn, in creation order."""
    cycle = itertools.cycle(devices)
    return _new_variables_device(lambda op: next(cycle))


def _least_loaded_bytes(devices):
    """Device function: a new variable op goes to the device of `devices` holding the
    fewest bytes of variables in the op's graph (the lowest index among equals)."""
    def choose(op):
        graph = tf.get_default_graph() if isinstance(op, tf.NodeDef) else op.graph
        return devices[_least_loaded([size for _, size in _device_loads(graph, devices)])]
    return _new_variables_device(choose)


@dataclasses.dataclass(frozen=True)
class PsStrategy:
    """A way of spreading variables over the PS tasks.

    variables_device: (devices) -> device function putting each new variable op on one of
      `devices` (the PS tasks' CPUs): what DeploymentConfig.variables_device() returns.
    deferred: create_clones holds its variables on virtual devices and places them all at
      once, when model_fn has made them and their sizes are known.
    plan: placement_plan's words before the list of PS devices.
    """
    variables_device: Callable
    deferred: bool
    plan: str


PS_STRATEGIES = Registry('ps_strategy', {
    'bytes': PsStrategy(_least_loaded_bytes, True, 'largest first onto the least-loaded of '),
    'round_robin': PsStrategy(_round_robin, False, 'round-robin over '),
})


def _pending_variables():
    """Device function: the k-th new variable op goes to task k of _PENDING_JOB."""
    counter = itertools.count()
    return _new_variables_device(
        lambda op: f'/job:{_PENDING_JOB}/task:{next(counter)}/device:CPU:0')


def _place_pending_variables(graph, config):
    """Moves the variables on _PENDING_JOB to the PS tasks, largest first (the earliest
    created among equals) onto the task holding the fewest bytes, counting the variables
    already there. Every other op on a variable's virtual task follows it: initializers,
    reads, variables colocated with it (e.g. moving averages), anything copying its device.
    Function bodies (of tf.cond, tf.while_loop, tf.function) are frozen when built: one
    built on a virtual device raises ValueError.
    """
    loads = [size for _, size in _device_loads(graph, config.variable_devices())]
    pending = [(op, tf.DeviceSpec.from_string(op.device)) for op in graph.get_operations()]
    pending = [(op, spec) for op, spec in pending if spec.job == _PENDING_JOB]
    sizes = collections.Counter()  # Virtual task -> bytes of the variable ops on it.
    for op, spec in pending:
        if op.type in _VARIABLE_OP_TYPES:
            sizes[spec.task] += _variable_bytes(op)
    ps_task = {}  # Virtual task -> PS task.
    for virtual_task in sorted(sizes, key=lambda task: (-sizes[task], task)):
        ps_task[virtual_task] = _least_loaded(loads)
        loads[ps_task[virtual_task]] += sizes[virtual_task]
    for op, spec in pending:
        op._set_device(spec.replace(job=config.ps_job_name, task=ps_task[spec.task]))
    frozen = sorted({function.signature.name
                     for function in graph.as_graph_def().library.function
                     for node in function.node_def if f'/job:{_PENDING_JOB}/' in node.device})
    if frozen:
        raise ValueError(
            f"ps_strategy='bytes' cannot place the variables of model_fn: functions {frozen} "
            "were built on a variable's device (e.g. a tf.cond under colocate_with(variable), "
            "or tf.train.ExponentialMovingAverage) before its PS task was chosen; build them "
            "outside model_fn or use ps_strategy='round_robin'")


def parts(partitioner, shape, dtype):
    """The shapes (lists) of the parts that tf.get_variable makes, in order, of a variable of
    `shape` (a TensorShape or a sequence of ints) and `dtype` under `partitioner` (a callable
    of shape and dtype returning the number of parts along each axis, as
    tf.compat.v1.fixed_size_partitioner's and min_max_variable_partitioner's do): the
    variable split along the axis given more than one part, the first parts one longer where
    the axis does not divide evenly. None when it stays whole: a scalar, a shape not fully
    known, or a single part."""
    shape = tf.TensorShape(shape)
    if not shape.is_fully_defined() or shape.rank == 0:
        return None
    counts = list(partitioner(shape=shape, dtype=tf.as_dtype(dtype)))
    axis = next((axis for axis, count in enumerate(counts) if count > 1), None)
    if axis is None:
        return None
    dims, count = shape.as_list(), counts[axis]
    return [dims[:axis] + [dims[axis] // count + (part < dims[axis] % count)] + dims[axis + 1:]
            for part in range(count)]


def min_size_partitioner(min_bytes, max_parts):
    """A partitioner splitting a variable of B bytes along its longest axis (the first of
    equals) into ceil(B / min_bytes) parts (min_bytes > 0), at most `max_parts` and that
    axis's length, by tf.compat.v1.min_max_variable_partitioner's rule: parts of about
    `min_bytes` each. Along the longest axis rather than the first, a convolution's kernel
    (height x width x in x out) splits along its channels, where its first axis (1 for a
    1 x 1 kernel) would keep it whole. What train_image_classifier's
    --variable_partition_min_mb gives, at most --num_ps_tasks parts."""
    def partitioner(shape, dtype):
        dims = tf.TensorShape(shape).as_list()
        axis = dims.index(max(dims)) if dims and None not in dims else 0
        return tf.min_max_variable_partitioner(max_partitions=max_parts, axis=axis,
                                               min_slice_size=min_bytes)(shape, dtype)

    return partitioner


def partitioned_variables(graph):
    """{name: [its parts, in order]} of the variables of `graph` that tf.get_variable made in
    parts ('name/part_0', ...): those a partitioner split, not their optimizer slots (whose
    parts are named 'name/part_0/Momentum', ...)."""
    found = parts_by_variable(graph.get_collection(tf.GraphKeys.GLOBAL_VARIABLES))
    return {name: parts for name, parts in found.items()
            if parts[0].op.name.startswith(name + '/part_')}


def parts_by_variable(variables):
    """{whole variable's name: [its parts among `variables`, in order]} of the `variables`
    that are parts of one split into parts (those with a save slice: a partitioner's parts
    and their slots); the others are left out."""
    found = collections.defaultdict(list)
    for variable in variables:
        whole = variable._get_save_slice_info()
        if whole:
            found[whole.full_name].append(variable)
    return {name: sorted(parts, key=lambda part: part._get_save_slice_info().var_offset)
            for name, parts in found.items()}


def placement_plan(config, graph=None, link_gbps=None, fetches=None):
    """Returns, as printable lines, which device holds each part of a deployment.

    graph: None, or a tf.Graph whose variable ops are then counted, with their bytes, on
    each variable device (each PS task, each clone's device when replicated, or the local
    CPU), its variables made in parts listed (the largest first), and, when replicated, its
    all-reduces per step.

    link_gbps: None, or the bandwidth of every host's network link in Gbit/s each way
    (full duplex): the plan then ends with what a step of the graph's 'train_op' moves
    through each worker's link and each ps task's, in and out, the least time that takes,
    the bottleneck and, when a ps task is, how many ps tasks would not be (see
    slim_deploy.deployment.network_traffic). Needs the graph. fetches: what a step runs, when more
    than the graph's 'train_op' (None: just that).
    """
    devices = config.variable_devices()
    strategy = PS_STRATEGIES[config.ps_strategy].plan if config.num_ps_tasks else ''
    rows = [('variables', strategy + ', '.join(devices))]
    collective = config.variable_update == 'collective'
    members = (f'{config.num_clones * config.num_replicas} members: {config.num_clones} '
               f'clones on each of {config.num_replicas} workers' if collective
               else f'{config.num_clones} members: the clones')
    if config.replicated:
        workers = (f"every clone of {config.num_replicas} workers, here" if collective
                   else 'the clones')
        rows = [('variables', f'{config.variable_update}: a copy of the trainable ones on '
                              f'{workers} {", ".join(devices)}; checkpoints hold clone 0\'s'
                              + (' of the chief' if collective else '')),
                ('all-reduce', members + ('; the chief broadcasts the start values'
                                          if collective else ''))]
    parted = partitioned_variables(graph) if graph is not None else {}
    if parted:
        rows.append(('partitions', _partitioned_text(parted)))
    elif config.variable_partitioner is not None:
        rows.append(('partitions', 'none: variable_partitioner keeps every variable whole'
                     if graph is not None else 'variable_partitioner splits what model_fn '
                     'makes with tf.get_variable, each part placed as a variable'))
    if config.gradient_compression != 'none':
        rows.append(('gradients', f'cross between tasks in {config.gradient_compression}'
                     + (' (scaled by a power of two)' if config.gradient_compression == 'float16'
                        else '') + ', applied in float32'))
    if config.prefetch_reads:
        rows.append(('reads', 'prefetched: each step computes with copies on '
                              f'{config.worker_device}/device:CPU:0 and fetches the next '
                              'values while it runs'))
    if config.sync_batch_norm:
        counted = ''
        if graph is not None:
            count = sum(op.device == devices[0] and sync_batch_norm.is_forward_reduce(op)
                        for op in graph.get_operations())
            counted = f' ({count} batch norm{"" if count == 1 else "s"})'
        rows.append(('batch norm', 'synchronized: the moments of the global batch, '
                                   f'all-reduced over {members}{counted}'))
    rows += [('inputs', config.inputs_device()),
             ('optimizer', config.optimizer_device())]
    for i in range(config.num_clones):
        scope = config.clone_scope(i)
        scope_note = f'  (scope {scope}/)' if scope else ''
        rows.append((f'clone {i}', config.clone_device(i) + scope_note))
    if graph is not None:
        for task, (device, (count, size)) in enumerate(
                zip(devices, _device_loads(graph, devices))):
            role = (f'ps task {task}' if config.num_ps_tasks else
                    f'copy {task}' if config.replicated else 'local')
            plural = '' if count == 1 else 's'
            rows.append((role, f'{device}  {count} variable{plural}, '
                               f'{network_traffic.human_bytes(size)} ({size:,} bytes)'))
        if config.replicated:
            reduces = sum(op.type == 'CollectiveReduce' and op.device == devices[0]
                          for op in graph.get_operations())
            pack = network_traffic.human_bytes(config.all_reduce_pack_bytes)
            rows.append(('all-reduces', f'{reduces} per step on each member (gradients packed '
                                        f'up to {pack})'))
    if link_gbps is not None:
        network_traffic.check_link_gbps(link_gbps)
        if graph is None:
            raise ValueError('placement_plan needs the graph to estimate the network time of '
                             'a step (link_gbps)')
        rows += network_traffic.plan_rows(network_traffic.step_traffic(graph, config, fetches),
                                          link_gbps)
    width = max(len(role) for role, _ in rows)
    return '\n'.join(f'{role:<{width}}  {device}' for role, device in rows)


def _partitioned_text(variables, listed=3):
    """'2 variables in 6 parts: LeNet/fc3/weights 12.8 MB in 4, ...': the variables made in
    parts (partitioned_variables' {name: parts}), the `listed` largest named."""
    sizes = {name: sum(_variable_bytes(part.op) for part in variable_parts)
             for name, variable_parts in variables.items()}
    largest = sorted(variables, key=lambda name: (-sizes[name], name))
    named = ', '.join(f'{name} {network_traffic.human_bytes(sizes[name])} in '
                      f'{len(variables[name])}' for name in largest[:listed])
    more = f', and {len(largest) - listed} more' if len(largest) > listed else ''
    count = len(variables)
    return (f'{count} variable{"s" * (count != 1)} in '
            f'{sum(len(p) for p in variables.values())} parts: {named}{more}')


@contextlib.contextmanager
def placing_clones(config):
    """The context create_clones builds its clones in, DeploymentConfig `config`'s; yields the
    device function the clones' ops go under (inside each clone's device scope).

    It places variable ops where `config` holds them: each on its clone's device when
    replicated; with ps tasks by config.ps_strategy, which for 'bytes' holds them on virtual
    devices until the context exits, then places them all at once (largest first onto the
    least-loaded task); else on the worker's CPU. Summary ops go to the worker's CPU; every
    other op is left to the clone's device scope. Without ps tasks a resource variable's
    IsInitialized op (which nothing runs) goes to its variable's device, as under slim's, whose
    variable functions make every op of a variable under the variables device when that is a
    device string (with ps tasks, a function placing only the variable op).
    """
    strategy = PS_STRATEGIES[config.ps_strategy]
    deferred = config.num_ps_tasks > 0 and strategy.deferred
    if config.replicated:
        variables = lambda op: op.device  # noqa: E731 (each clone's own device)
    elif deferred:
        variables = _pending_variables()
    else:
        variables = strategy.variables_device(config.variable_devices())
    summaries_device = config.inputs_device()

    def place(op):
        if op.device:
            return op.device
        if _op_type(op) in _SUMMARY_OP_TYPES:
            return summaries_device
        if (not config.num_ps_tasks and isinstance(op, tf.Operation) and
                op.type == 'VarIsInitializedOp'):
            return op.inputs[0].device
        return variables(op)

    yield place
    if deferred:
        _place_pending_variables(tf.get_default_graph(), config)
