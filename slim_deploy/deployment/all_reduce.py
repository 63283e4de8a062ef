"""Sums and broadcasts between the clones of a deployment, on TensorFlow's collective ops
(CollectiveReduce and CollectiveBcastSend/Recv, the engine of MultiWorkerMirroredStrategy).

A Group is one member per device, in this process and others; every member builds the
same collectives in the same order, and keys taken from a per-graph counter make them
match. Small tensors are concatenated into packs so that a step runs a few large
collectives instead of one per tensor; summing in packs gives the same values as summing
tensor by tensor (each element is still the sum of the same values).
"""
import dataclasses
import itertools
import weakref

import tensorflow.compat.v1 as tf
from tensorflow.python.ops import collective_ops

from slim_deploy.deployment import compression

# graph -> counters of the group and instance keys taken in it.
_KEYS = weakref.WeakKeyDictionary()


def _next_key(kind):
    """The next `kind` ('group' or 'instance') key of the default graph, from 1."""
    counters = _KEYS.setdefault(tf.get_default_graph(),
                                {'group': itertools.count(1), 'instance': itertools.count(1)})
    return next(counters[kind])


def next_instance_key():
    """A new instance key of the default graph, for a collective of its own."""
    return _next_key('instance')


@dataclasses.dataclass(frozen=True)
class Group:
    """Members of a collective: `size` devices in all, of which this process builds
    `local_devices` (in order); the first local device is the broadcast source when
    `has_source`. timeout_secs: how long an op waits for the other members before failing
    (0: forever). key: the group's key in this graph, the same in every process that
    builds the same groups in the same order."""
    size: int
    local_devices: tuple
    has_source: bool
    timeout_secs: float
    key: int = dataclasses.field(default_factory=lambda: _next_key('group'))


def pack_plan(tensors, pack_bytes, wire_dtype=None):
    """Which of `tensors` are summed together: a list of packs, each a list of indices.

    Consecutive tensors of one dtype with fully defined shapes go into a pack while their
    bytes (in wire_dtype; None: their own) add up to at most pack_bytes; a larger tensor, or
    one of unknown shape, is a pack alone; pack_bytes 0 puts every tensor alone.
    """
    packs, pack_dtype, pack_size = [], None, None  # pack_size None: the last pack is closed.
    for index, tensor in enumerate(tensors):
        elements = tensor.shape.num_elements()
        size = None if elements is None else elements * (wire_dtype or tensor.dtype).size
        if (size is not None and pack_size is not None and tensor.dtype == pack_dtype and
                pack_size + size <= pack_bytes):
            packs[-1].append(index)
            pack_size += size
        else:
            packs.append([index])
            pack_dtype, pack_size = tensor.dtype, size
    return packs


def _concat(tensors):
    """Tensors flattened into one [total elements] tensor, or the tensor itself if alone."""
    if len(tensors) == 1:
        return tensors[0]
    return tf.concat([tf.reshape(t, [-1]) for t in tensors], axis=0)


def _split(packed, like):
    """The inverse of _concat: tensors of the shapes of `like` from `packed`."""
    if len(like) == 1:
        return [packed]
    parts = tf.split(packed, [t.shape.num_elements() for t in like])
    return [tf.reshape(part, t.shape) for part, t in zip(parts, like)]


def sum_on_member(tensor, group, instance_key):
    """The sum of `tensor` over every member of `group`, on the current device (a member's),
    matched to the other members' collectives by `instance_key`."""
    return _reduce_on_member(tensor, group, instance_key, 'Add')


def max_on_member(tensor, group, instance_key):
    """The element-wise maximum of `tensor` over every member of `group` (see
    sum_on_member)."""
    return _reduce_on_member(tensor, group, instance_key, 'Max')


def _reduce_on_member(tensor, group, instance_key, merge_op):
    return collective_ops.all_reduce(tensor, group.size, group.key, instance_key,
                                     merge_op=merge_op, final_op='Id',
                                     timeout=group.timeout_secs)


def all_reduce_sums(member_tensors, group, pack_bytes, scale=None, wire_dtype=None):
    """Sums tensors over every member of `group`.

    member_tensors: for each local member, in group.local_devices order, a list of float32
      tensors (any dtype without wire_dtype) with the same shapes as the other members'.
    scale: None, or a number every sum is multiplied by.
    wire_dtype: None, or the dtype the packs are summed in (see compression): each pack is
      narrowed before its CollectiveReduce and widened after it; a float16 pack is first
      multiplied by a power of two that one more all-reduce, of its largest magnitude over
      every member, chooses.
    Returns the same structure, each tensor replaced by its sum over the group's members
    (times scale), on its member's device. The tensors go in packs (pack_plan, taken in
    reverse order: a model's last gradients are ready first), one CollectiveReduce per
    pack and member, launched in pack order on every device (as NCCL requires).
    """
    first = member_tensors[0]
    packs = [[len(first) - 1 - i for i in pack]
             for pack in pack_plan(first[::-1], pack_bytes, wire_dtype)]
    instance_keys = [next_instance_key() for _ in packs]
    scale_keys = ([next_instance_key() for _ in packs] if compression.needs_scale(wire_dtype)
                  else [None] * len(packs))
    results = []
    for device, tensors in zip(group.local_devices, member_tensors):
        sums = [None] * len(tensors)
        previous = None
        with tf.device(device):
            for pack, instance_key, scale_key in zip(packs, instance_keys, scale_keys):
                with tf.control_dependencies([previous] if previous is not None else []):
                    packed = tf.identity(_concat([tensors[i] for i in pack]))
                if wire_dtype is None:
                    previous = summed = sum_on_member(packed, group, instance_key)
                else:
                    wire_scale = None if scale_key is None else compression.scale_for(
                        max_on_member(compression.max_abs(packed), group, scale_key),
                        group.size)
                    previous = sum_on_member(compression.narrowed(packed, wire_dtype, wire_scale),
                                             group, instance_key)
                    summed = compression.widened(previous, wire_scale)
                summed = summed if scale is None else summed * scale
                for i, value in zip(pack, _split(summed, [tensors[i] for i in pack])):
                    sums[i] = value
        results.append(sums)
    return results


def broadcast(member_variables, group, pack_bytes):
    """An op giving every member's variables the source member's values.

    member_variables: for each local member, a list of variables with the same shapes and
    dtypes as the other members'. The source (the first local member when
    group.has_source) sends its values; every other member receives and assigns them.
    """
    first = member_variables[0]
    packs = pack_plan(first, pack_bytes)
    instance_keys = [next_instance_key() for _ in packs]
    assigns = []
    for rank, (device, variables) in enumerate(zip(group.local_devices, member_variables)):
        with tf.device(device):
            for pack, instance_key in zip(packs, instance_keys):
                like = [variables[i] for i in pack]
                if group.has_source and rank == 0:
                    packed = _concat([v.read_value() for v in like])
                    assigns.append(collective_ops.broadcast_send(
                        packed, packed.shape, packed.dtype, group.size, group.key,
                        instance_key, timeout=group.timeout_secs))
                    continue
                elements = sum(v.shape.num_elements() for v in like)
                shape = like[0].shape if len(like) == 1 else tf.TensorShape([elements])
                received = collective_ops.broadcast_recv(
                    shape, like[0].dtype.base_dtype, group.size, group.key, instance_key,
                    timeout=group.timeout_secs)
                assigns += [v.assign(value) for v, value in zip(like, _split(received, like))]
    return tf.group(*assigns, name='broadcast_variables')
