"""Replicated variables: each clone's device holds its own copy of every trainable variable,
the clones' gradients are all-reduced and every copy applies the same update.

create_clones builds every clone on clone 0's variables (see
slim_deploy.deployment.variable_sharing), the canonical ones, under the names parameter-server
mode gives them (and slim's checkpoints have). Then localize() gives clone i > 0 a copy of each
trainable variable its ops read, named 'clone_i/<name>', on its own device, and makes those ops
read the copy: whatever made the variable (tf.get_variable, Keras, tf.Variable, a model built
before the clones). Copies, and their optimizer slots, are local variables initialized from the
canonical values (after those are initialized or restored), so checkpoints,
tf.global_variables(), tf.trainable_variables(), slim.get_model_variables() and everything
built from them (savers, moving averages, summaries, fine-tuning) see the canonical variables
only. Non-trainable variables (batch norm's moving statistics) are not copied: the clones share
clone 0's, as in parameter-server mode.
"""
import contextlib
import weakref

import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import all_reduce

# graph -> {clone scopes: Replicas}, for optimize_clones to find those of its clones.
_REPLICAS = weakref.WeakKeyDictionary()


def of_clones(clones):
    """The Replicas that create_clones made for `clones`, or None (parameter-server mode)."""
    return _REPLICAS.get(tf.get_default_graph(), {}).get(tuple(c.scope for c in clones))


class Replicas:
    """The copies of one deployment's variables and the group that all-reduces gradients.

    clone_scopes: each local clone's name scope, without the trailing slash ('clone_1').
    clone_devices: each local clone's device, where its copies live.
    group: an all_reduce.Group of every clone of every worker, this worker's in order.
    pack_bytes: the pack size of the gradient all-reduces (see all_reduce.pack_plan).
    num_workers: workers summing their clones' gradients; the sums are divided by it, so
      the update is the gradient of the mean loss over every worker's batch.
    wire_dtype: the dtype the gradient all-reduces run in (see compression); None: float32.
    """

    def __init__(self, clone_scopes, clone_devices, group, pack_bytes, num_workers,
                 wire_dtype=None):
        self._scopes = list(clone_scopes)
        self._devices = list(clone_devices)
        self._group = group
        self._pack_bytes = pack_bytes
        self._num_workers = num_workers
        self._wire_dtype = wire_dtype
        self._copies = [{} for _ in clone_scopes]  # Per clone: canonical -> copy.
        self._slot_copies = []  # (canonical slot, slot of a copy).

    def register(self, clones):
        """Makes `clones` (create_clones' list) findable by of()."""
        _REPLICAS.setdefault(tf.get_default_graph(), {})[tuple(c.scope for c in clones)] = self

    def localize(self, clone_index, ops):
        """Makes `ops`, those clone `clone_index` > 0 built, use its copy of each trainable
        variable they read (made on first need) instead of the canonical variable."""
        variables = {}  # Ref of what an op reads a trainable resource variable through.
        for variable in tf.trainable_variables():
            if not is_resource(variable):
                continue
            variables[variable.handle.ref()] = variable
        reads = {}  # Canonical -> a read of its copy, for reads made outside the clone.
        built = set(ops)
        for op in ops:
            for index, tensor in enumerate(op.inputs):
                variable = variables.get(tensor.ref())
                if variable is not None:  # The handle: reads and writes in the clone.
                    op._update_input(index, self._copy(clone_index, variable).handle)
                    continue
                read = tensor.op
                if read.type != 'ReadVariableOp' or read in built:
                    continue
                variable = variables.get(read.inputs[0].ref())
                if variable is not None:  # A read made before the clone, e.g. at creation.
                    if variable not in reads:
                        with tf.device(self._devices[clone_index]), tf.name_scope(None):
                            reads[variable] = self._copy(clone_index, variable).read_value()
                    op._update_input(index, reads[variable])
        refs = sorted(v.op.name for v in tf.trainable_variables() if not is_resource(v) and
                      any(c in built for t in (v.op.outputs[0], v.value()) for c in t.consumers()))
        if refs:
            raise UsageError(f'clone {clone_index} of model_fn reads {refs[0]!r}, a reference '
                             '(not resource) variable, which replicated variable updates '
                             'cannot copy: make it with use_resource=True')

    def _copy(self, clone_index, canonical):
        """Clone `clone_index`'s copy of `canonical`, made at first call: a local resource
        variable on the clone's device, not trainable, initialized from `canonical`."""
        copies = self._copies[clone_index]
        if canonical not in copies:
            with tf.device(self._devices[clone_index]), tf.name_scope(None):
                copies[canonical] = _local_copy(
                    f'{self._scopes[clone_index]}/{canonical.op.name}', canonical)
        return copies[canonical]

    def copy_of(self, clone_index, variable):
        """Clone `clone_index`'s copy of canonical `variable` (itself if not copied)."""
        return self._copies[clone_index].get(variable, variable)

    def var_lists(self, var_list):
        """For each clone, the variables its gradients are taken for: the copies of
        `var_list` (canonical variables; None: every trainable one)."""
        if var_list is None:
            var_list = tf.trainable_variables()
        return [[self.copy_of(i, v) for v in var_list] for i in range(len(self._scopes))]

    def all_reduce(self, canonical_list, clones_grads_and_vars, devices):
        """The summed gradients each copy applies.

        canonical_list: the canonical variables trained (var_lists()'s first list).
        clones_grads_and_vars: per clone, its (gradient, variable) list over its list of
          var_lists(); None for a clone without loss (it contributes zeros).
        devices: each clone's device.
        Returns [(sum, variable)]: clone 0's (for the canonical variables) first, then each
        other clone's for its copies. A variable no clone has a gradient for is left out.
        """
        keep = [k for k in range(len(canonical_list))
                if any(g and g[k][0] is not None for g in clones_grads_and_vars)]
        member_grads = []
        for i, (grads, device) in enumerate(zip(clones_grads_and_vars, devices)):
            with tf.device(device):
                member_grads.append([self._dense(grads[k][0] if grads else None,
                                                 self.copy_of(i, canonical_list[k]))
                                     for k in keep])
        scale = None if self._num_workers == 1 else 1.0 / self._num_workers
        sums = all_reduce.all_reduce_sums(member_grads, self._group, self._pack_bytes, scale,
                                          self._wire_dtype)
        result = []
        for i, clone_sums in enumerate(sums):
            for k, total in zip(keep, clone_sums):
                variable = self.copy_of(i, canonical_list[k])
                if i == 0 or variable is not canonical_list[k]:  # Shared: applied once.
                    result.append((total, variable))
        return result

    @staticmethod
    def _dense(grad, variable):
        """`grad` as a dense tensor; zeros like `variable` for None."""
        if grad is None:
            return tf.zeros(variable.shape, variable.dtype.base_dtype)
        return tf.convert_to_tensor(grad)

    def is_canonical(self, variable):
        """Whether `variable` is no clone's copy."""
        return not any(variable is copy for copies in self._copies[1:]
                       for copy in copies.values())

    @contextlib.contextmanager
    def copying_slots(self):
        """A context for optimizer.apply_gradients(): the slots it makes for a copy (named
        after the copy, 'clone_i/<canonical slot name>') become local variables
        initialized from the canonical variable's slot, which must be made first."""
        prefixes = [scope + '/' for scope in self._scopes[1:]]
        by_name = {}  # Global variables by name, read again when one is missing.

        def slot(getter, name, **kwargs):
            prefix = next((p for p in prefixes if name.startswith(p)), None)
            if prefix is None:
                return getter(name, **kwargs)
            canonical_name = name[len(prefix):].rstrip('/')  # Slots are named 'scope/'.
            if canonical_name not in by_name:
                by_name.update((v.op.name, v) for v in tf.global_variables())
            canonical = by_name.get(canonical_name)
            if canonical is None:
                raise ValueError(f'the optimizer made slot {name!r} before the slot '
                                 f'{canonical_name!r} of the canonical variable')
            copy = _local_copy(name, canonical)
            self._slot_copies.append((canonical, copy))
            return copy

        with tf.variable_scope(tf.get_variable_scope(), custom_getter=slot,
                               auxiliary_name_scope=False):
            yield

    def sync_op(self, group):
        """The op run after the variables are initialized or restored, on every worker:
        TensorFlow's default local init op (local variables, tables), then the global
        variables of the source worker (the chief) broadcast over `group` (one member per
        worker), then every copy set to its canonical variable again. It becomes the
        graph's LOCAL_INIT_OP, which tf.train.MonitoredSession runs; local variables made
        after it are not in it.
        """
        with tf.control_dependencies([tf.train.Scaffold.default_local_init_op()]):
            received = all_reduce.broadcast([tf.global_variables()], group, self._pack_bytes)
        pairs = [(canonical, copy) for copies in self._copies[1:]
                 for canonical, copy in copies.items()] + self._slot_copies
        with tf.control_dependencies([received]):
            return tf.group(*[copy.assign(canonical.read_value()) for canonical, copy in pairs],
                            name='sync_replicas')


def is_resource(variable):
    """Whether `variable` is a resource variable (TensorFlow 2's kind), not a reference one."""
    return variable.op.type == 'VarHandleOp'


def _local_copy(name, canonical):
    """A local resource variable named `name` (from the root name scope), on the current
    device, not trainable, set to `canonical`'s value when initialized."""
    def initial_value():
        with tf.colocate_with(canonical, ignore_existing=True):  # Read where it lives.
            return canonical.read_value()

    with tf.name_scope(None):
        return tf.Variable(initial_value, trainable=False, name=name, use_resource=True,
                           collections=[tf.GraphKeys.LOCAL_VARIABLES],
                           dtype=canonical.dtype.base_dtype, shape=canonical.shape)
