"""Replicated variables: each clone's device holds its own copy of every trainable variable,
the clones' gradients are all-reduced and every copy applies the same update.

Clone 0 makes the canonical variables, under the names parameter-server mode gives them
(and slim's checkpoints have); clone i > 0 gets a copy of each trainable one named
'clone_i/<name>' on its own device. Copies, and their optimizer slots, are local variables
initialized from the canonical values (after those are initialized or restored), so
checkpoints, tf.global_variables(), tf.trainable_variables(), slim.get_model_variables()
and everything built from them (savers, moving averages, summaries, fine-tuning) see the
canonical variables only. Non-trainable variables (batch norm's moving statistics) are
not copied: the clones share clone 0's, as in parameter-server mode.
"""
import contextlib
import weakref

import tensorflow.compat.v1 as tf

from deployment import all_reduce

# graph -> {clone scopes: Replicas}, for optimize_clones to find those of its clones.
_REPLICAS = weakref.WeakKeyDictionary()


def of(clones):
    """The Replicas that create_clones made for `clones`, or None (parameter-server mode)."""
    return _REPLICAS.get(tf.get_default_graph(), {}).get(tuple(c.scope for c in clones))


def _read(variable):
    """An initializer (for tf.get_variable) giving `variable`'s value when it runs, read on
    `variable`'s device (not colocated with the variable being initialized)."""
    def initializer(shape, dtype=None, partition_info=None):
        with tf.colocate_with(variable, ignore_existing=True):
            return variable.read_value()
    return initializer


class Replicas:
    """The copies of one deployment's variables and the group that all-reduces gradients.

    clone_scopes: each local clone's name scope, without the trailing slash ('clone_1').
    group: an all_reduce.Group of every clone of every worker, this worker's in order.
    pack_bytes: the pack size of the gradient all-reduces (see all_reduce.pack_plan).
    num_workers: workers summing their clones' gradients; the sums are divided by it, so
      the update is the gradient of the mean loss over every worker's batch.
    """

    def __init__(self, clone_scopes, group, pack_bytes, num_workers):
        self._scopes = list(clone_scopes)
        self._group = group
        self._pack_bytes = pack_bytes
        self._num_workers = num_workers
        self._canonical = {}  # Name -> the variable clone 0's model_fn got under it.
        self._copies = [{} for _ in clone_scopes]  # Per clone: canonical -> copy.
        self._slot_copies = []  # (canonical slot, slot of a copy).

    def register(self, clones):
        """Makes `clones` (create_clones' list) findable by of()."""
        _REPLICAS.setdefault(tf.get_default_graph(), {})[tuple(c.scope for c in clones)] = self

    @contextlib.contextmanager
    def building(self, clone_index):
        """The variable scope clone `clone_index` is built in. Clone 0's records the
        canonical variables; the others' give copies of the trainable ones, and the
        regularization losses made there (tf.layers adds one for each new variable) are
        dropped: they count once, from clone 0, as in parameter-server mode."""
        losses = tf.get_collection_ref(tf.GraphKeys.REGULARIZATION_LOSSES)
        count = len(losses)
        with tf.variable_scope(tf.get_variable_scope(), reuse=True if clone_index else None,
                               custom_getter=self._getter(clone_index)):
            yield
        if clone_index:
            del losses[count:]

    def _getter(self, clone_index):
        """Clone `clone_index`'s custom getter (see building)."""
        if clone_index == 0:
            def record(getter, name, **kwargs):
                self._canonical[name] = getter(name, **kwargs)
                return self._canonical[name]
            return record
        scope, copies = self._scopes[clone_index], self._copies[clone_index]

        def copy(getter, name, **kwargs):
            canonical = self._canonical.get(name)
            if canonical is None:
                raise ValueError(f'clone {clone_index} of model_fn asked for variable {name!r}, '
                                 'which clone 0 did not: every call must make the same '
                                 'variables')
            if not canonical.trainable:
                return canonical
            if canonical not in copies:
                copies[canonical] = self._local_copy(getter, f'{scope}/{name}', canonical,
                                                     kwargs)
            return copies[canonical]
        return copy

    @staticmethod
    def _local_copy(getter, name, canonical, kwargs):
        """A local resource variable `name` initialized from `canonical`, on the current
        device, not trainable and without regularizer (the loss counts clone 0's)."""
        kwargs.update(shape=canonical.shape, dtype=canonical.dtype.base_dtype,
                      initializer=_read(canonical), regularizer=None, trainable=False,
                      collections=[tf.GraphKeys.LOCAL_VARIABLES], reuse=False,
                      use_resource=True, partitioner=None, caching_device=None)
        return getter(name, **kwargs)

    def check_variables(self, trainable_before):
        """ValueError if model_fn made trainable variables without tf.get_variable (e.g. with
        tf.Variable), which cannot be copied; trainable_before: those that existed before."""
        made = set(tf.trainable_variables()) - set(trainable_before)
        strays = sorted(v.op.name for v in made - set(self._canonical.values()))
        if strays:
            raise ValueError(f'replicated variables need model_fn to make its variables with '
                             f'tf.get_variable (as slim and tf.layers do); {strays[:3]} were '
                             'made otherwise')

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
        sums = all_reduce.all_reduce_sums(member_grads, self._group, self._pack_bytes, scale)
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
            copy = self._local_copy(getter, name, canonical, kwargs)
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
