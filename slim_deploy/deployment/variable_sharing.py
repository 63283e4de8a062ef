"""One model, whatever made its variables: every clone of create_clones uses clone 0's.

Clone 0 makes the variables and each later clone gets clone 0's, however model_fn makes
them. tf.get_variable (slim, tf.compat.v1.layers) finds them by name, in the reusing
variable scope a later clone is built in. Every other way (tf-keras and Keras layers, a
Keras model first called inside model_fn, tf.Variable) goes through a variable creator,
which gives a later clone's k-th such variable clone 0's k-th, of the same shape and dtype,
instead of a new one. A Keras model built before create_clones holds its variables already:
every clone calls it with them. A clone that would make a variable of its own raises
UsageError, so N clones never silently train N models.

The variables clone 0 makes are named as one clone names them, without clone 0's name scope
('dense/kernel', not 'clone_0/dense/kernel'), so checkpoints do not depend on the number of
clones and the evaluation graph (one clone) restores them. Under a partitioner
(DeploymentConfig's variable_partitioner) tf.get_variable makes them in parts, which the
later clones get as they get whole ones.

With ps tasks, create_clones builds the clones under caching_reads(the worker's CPU): each
trainable variable they make is read over the network once per step, for all the clones and
the regularizers.

What model_fn adds once per clone is kept once, as with slim: regularization losses a later
clone adds (a layer made there regularizes clone 0's variables again) are dropped; and each
variable update that nothing runs (Keras layers keep their updates, e.g. BatchNormalization's
moving statistics, in layer.updates, not in tf.GraphKeys.UPDATE_OPS) joins UPDATE_OPS, where
deploy() takes clone 0's.
"""
import contextlib
import functools

import tensorflow.compat.v1 as tf
from tensorflow.python.ops import resource_variable_ops

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import compression, network_traffic, placement, turns

# Op types that write a variable: a Keras layer's update is one of them.
_ASSIGN_OP_TYPES = frozenset({
    'AssignVariableOp', 'AssignAddVariableOp', 'AssignSubVariableOp',
    'Assign', 'AssignAdd', 'AssignSub',
})
# Op types of a read of a variable's value.
_READ_OP_TYPES = frozenset({'ReadVariableOp', 'Identity'})
_KERAS_3_MESSAGE = 'not available with Keras 3'


class CloneVariables:
    """The variables of create_clones' clones. clone_scopes: each clone's name scope without
    the trailing slash ('clone_0', ...; '' for one clone). partitioner: None, or the
    partitioner (as tf.compat.v1.variable_scope takes it) of the variables the clones make
    with tf.get_variable, unless a scope around the clones or inside model_fn has one of its
    own; a variable it would give a single part (or that is a scalar, or of a shape not
    fully known) stays whole, a variable and not a PartitionedVariable of one part."""

    def __init__(self, clone_scopes, partitioner=None):
        self._scopes = list(clone_scopes)
        self._partitioner = partitioner
        self._created = []  # Clone 0's variables made outside tf.get_variable, in order.
        self._initializers = set()  # Initializer ops of the variables the clones made.
        self._clone_index = None  # Of the clone being built.
        self._shared = 0  # Variables of self._created given to the clone being built.
        self._in_get_variable = 0  # Depth of tf.get_variable calls under way.

    @contextlib.contextmanager
    def building(self, clone_index):
        """The context clone `clone_index` is built in; yields a list that holds, once the
        context exits, the ops the clone made (in creation order)."""
        graph = tf.get_default_graph()
        first_op = len(graph.get_operations())
        regularization = tf.get_collection_ref(tf.GraphKeys.REGULARIZATION_LOSSES)
        regularization_count = len(regularization)
        trainable_before = set(tf.trainable_variables())
        self._clone_index, self._shared = clone_index, 0
        ops = []
        scope = tf.get_variable_scope()
        with tf.variable_scope(scope, reuse=True if clone_index else None,
                               custom_getter=self._getter,
                               partitioner=scope.partitioner or self._partitioner), \
                tf.variable_creator_scope(self._create if clone_index == 0 else self._share), \
                _keras_3_refused(clone_index):
            yield ops
        ops.extend(graph.get_operations()[first_op:])
        if clone_index:
            del regularization[regularization_count:]
            own = sorted(v.op.name for v in set(tf.trainable_variables()) - trainable_before)
            if own:
                raise UsageError(f'clone {clone_index} of model_fn made trainable variable '
                                 f'{own[0]!r} of its own, which no other clone shares; make '
                                 'variables with tf.get_variable, Keras layers or tf.Variable')
        _collect_updates(ops, self._initializers)

    def _getter(self, getter, name, *args, **kwargs):
        """Custom getter: marks the variables made meanwhile as tf.get_variable's; a later
        clone asking for one clone 0 did not make is a UsageError. Keeps whole a variable
        that the clones' partitioner would give a single part."""
        if (self._partitioner is not None and kwargs.get('partitioner') is self._partitioner
                and not placement.parts(self._partitioner, _shape(kwargs),
                                        kwargs.get('dtype') or tf.float32)):
            kwargs['partitioner'] = None
        self._in_get_variable += 1
        try:
            return getter(name, *args, **kwargs)
        except ValueError as e:
            if self._clone_index and 'does not exist' in str(e):
                raise self._not_made_by_clone_0(name) from e
            raise
        finally:
            self._in_get_variable -= 1

    def _not_made_by_clone_0(self, name):
        return UsageError(f'clone {self._clone_index} of model_fn asked tf.get_variable for '
                          f'{name!r}, which clone 0 did not make: every call of model_fn must '
                          'make the same variables (do not name them after the call)')

    def _create(self, next_creator, **kwargs):
        """Clone 0's variable creator: makes the variable outside clone 0's name scope and
        records those made outside tf.get_variable (which ignores name scopes)."""
        if self._in_get_variable:
            variable = next_creator(**kwargs)
        else:
            with tf.name_scope(_without_scope(tf.get_default_graph().get_name_scope(),
                                              self._scopes[0])):
                variable = next_creator(**kwargs)
            self._created.append(variable)
        self._initializers.add(variable.initializer)
        return variable

    def _share(self, next_creator, **kwargs):
        """A later clone's variable creator: clone 0's variable made at the same place in
        the order of creations; UsageError where there is none of that shape and dtype."""
        del next_creator
        name = '/'.join(filter(None, [tf.get_default_graph().get_name_scope(),
                                      kwargs.get('name') or 'Variable']))
        if self._in_get_variable:  # In a scope of model_fn's that does not reuse.
            raise self._not_made_by_clone_0(kwargs.get('name'))
        if self._shared == len(self._created):
            raise UsageError(f'clone {self._clone_index} of model_fn made variable {name!r}, '
                             f'one more than the {len(self._created)} clone 0 made outside '
                             'tf.get_variable: every call of model_fn must make the same '
                             'variables in the same order (or build the layers once, outside '
                             'model_fn)')
        shared = self._created[self._shared]
        self._shared += 1
        shape, dtype = _requested(kwargs)
        if (shape is not None and not shape.is_compatible_with(shared.shape)) or (
                dtype is not None and dtype != shared.dtype.base_dtype):
            raise UsageError(
                f'clone {self._clone_index} of model_fn made variable {name!r} '
                f'({_describe(shape, dtype)}) where clone 0 made {shared.op.name!r} '
                f'({_describe(shared.shape, shared.dtype.base_dtype)}), its variable number '
                f'{self._shared}: every call of model_fn must make the same variables in the '
                'same order')
        return shared


@contextlib.contextmanager
def caching_reads(device, read_dtype=None, prefetch=False, turn_device=None, turn_worker=0,
                  turn_readers=1, turn_lease=False, update_scope=''):
    """Within it, each trainable variable made without a caching device of its own, by any
    API (slim, tf.get_variable, tf.compat.v1.layers, Keras layers, tf.Variable), is read once
    per step onto `device` (a device string or function): every use of its value built within (each
    clone's layers, regularizers) takes one copy there, an Identity of one read on the
    variable's device, and gradients flow through it to the variable. With `device` the
    worker's CPU, a variable crosses the network once per worker and step, whatever the
    number of clones. On exit the variables read as without: what is built later (an
    ExponentialMovingAverage under a control dependency on the update, a Saver) reads them
    afresh, on their device. Not cached: non-trainable variables (batch norm's moving
    statistics, whose update next to them would need the copy sent back) and variables made
    before. device: None changes nothing. read_dtype: None, or the dtype each float32
    resource variable's read crosses to `device` in (compression.read_across; gradients flow
    back in float32). prefetch: each resource variable's reads come from a copy on `device`
    that the step refreshes while it computes (see _prefetched): the next step's values
    cross as this step's gradients do, one step older. turn_device: None, or the device (a
    ps task's) of the locks that the workers' steps take in turn to read: a step's reads of
    resource variables start once it holds its lock, and it lets go once every value has
    reached `device` (or when the step ends), so that workers receive their reads in turns
    instead of sharing the links until all have them. There are R locks, worker
    `turn_worker` taking lock turn_worker mod R, so R workers read at once: as many as the
    ps tasks can send to at a worker's link rate, the reads' bytes over the largest
    variable's (which one ps task sends alone), at most `turn_readers` (the ps tasks). A
    variable whole on one ps task gives R = 1; parts spread over P ps tasks, R = P. The
    locks are made on exit, outside whatever context model_fn holds (control dependencies),
    and the turn's ops outside XLA's clusters. turn_lease: the locks are leases (see
    slim_deploy.deployment.turns), which a check takes back from a step that holds one too
    long, instead of mutexes, which a step holds until it lets go or ends; the checks join
    TABLE_INITIALIZERS (each session's start runs them) and turns.CHECKS (the chief's
    turns.LeaseChecks runs them). update_scope: the name scope ('' for the root) of the ops
    this adds to UPDATE_OPS (the refreshes of prefetch, the lock's release), which the
    training step runs."""
    if device is None:
        yield
        return
    cached, received, in_turn = [], [], []
    # The turn's ops stay outside XLA's clusters, whose computation would hold the lock.
    no_xla = functools.partial(tf.xla.experimental.jit_scope, compile_ops=False)

    def value_on_device(variable):
        """What the steps use as resource `variable`'s value on `device` (None: TensorFlow's
        own cached read)."""
        read = variable._graph_element
        if turn_device is not None:
            read = _read_in_turn(variable)
            in_turn.append(read)
        narrow = read_dtype if variable.dtype.base_dtype == tf.float32 else None
        value = (compression.read_across(read, narrow, device) if narrow is not None
                 else _sent(read, device) if turn_device is not None else None)
        return _prefetched(variable, value, device, update_scope) if prefetch else value

    def create(next_creator, **kwargs):
        if kwargs.get('caching_device') is not None or not _trainable(kwargs):
            return next_creator(**kwargs)
        variable = next_creator(**{**kwargs, 'caching_device': device})
        if resource_variable_ops.is_resource_variable(variable):
            with no_xla():
                value = value_on_device(variable)
            if value is not None:
                variable._cached_value = value  # TensorFlow's cached read.
                received.append(value)
        cached.append(variable)
        return variable

    try:
        with tf.variable_creator_scope(create):
            yield
    finally:
        for variable in cached:
            _uncache(variable)
    if turn_device is not None and received:
        index = turn_worker % _readers(in_turn, turn_readers)
        if turn_lease:  # Checked at every session's start, and by the chief's LeaseChecks.
            lease = turns.Lease(turn_device, index)
            token, holds = lease.take(turn_worker)
            check = lease.check()
            tf.add_to_collection(turns.CHECKS, check)
            tf.add_to_collection(tf.GraphKeys.TABLE_INITIALIZERS, check.op)
        else:
            lock = turns.mutex_take(turn_device, index)
            holds = lock.op
        for read in in_turn:
            read.op._add_control_input(holds)  # The reads were made first, by model_fn.
        with tf.control_dependencies(received):
            scope = _scope(update_scope, 'reads_in_turn')
            release = (lease.give_back(token, turn_worker, scope) if turn_lease
                       else turns.mutex_release(lock, turn_device, scope))
        tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, release)


def _readers(reads, most):
    """How many workers read at once (caching_reads' R): the bytes of `reads` (tensors) over
    the largest one's, rounded, from 1 to `most`."""
    sizes = [network_traffic.tensor_bytes(read) for read in reads]
    return max(1, min(most, round(sum(sizes) / max(sizes))))


def _read_in_turn(variable):
    """A read of resource `variable`, next to it, which caching_reads makes wait for the
    turn's lock."""
    with tf.colocate_with(variable.handle), tf.name_scope(_scope(variable.op.name, 'Read')):
        return tf.raw_ops.ReadVariableOp(resource=variable.handle,
                                         dtype=variable.dtype.base_dtype, name='in_turn')


def _sent(read, device):
    """`read` (a tensor) as received on `device`."""
    with tf.colocate_with(None, ignore_existing=True), tf.device(device):
        return tf.identity(read)


def _scope(*names):
    """The absolute name scope of `names` joined ('' ones left out)."""
    return '/'.join(filter(None, names)) + '/'


def _prefetched(variable, fresh, device, update_scope):
    """The value a step reads of resource `variable` (held on another task): the value of a
    copy on `device` (a local variable, initialized from the variable), which an op of
    UPDATE_OPS under name scope `update_scope` refreshes once the step has read the copy,
    from `fresh` (the variable's value on `device`; None: a read of it sent there). The
    refresh does not wait for the step's update: in an asynchronous step the next values
    cross while the gradients do. Gradients flow to the variable itself."""
    graph = tf.get_default_graph()
    with tf.name_scope(_scope(update_scope, variable.op.name, 'prefetched')), \
            tf.colocate_with(None, ignore_existing=True), tf.device(device):
        if fresh is None:
            fresh = tf.identity(variable._graph_element, name='fresh')
        copy = resource_variable_ops.ResourceVariable(  # Made by no variable creator.
            fresh, trainable=False, collections=[tf.GraphKeys.LOCAL_VARIABLES], name='copy')
        value = copy.value()
        with tf.control_dependencies([value]):
            tf.add_to_collection(tf.GraphKeys.UPDATE_OPS,
                                 copy.assign(fresh, read_value=False, name='refresh'))
        with graph.gradient_override_map({'IdentityN': 'SlimDeployPrefetched'}):
            return tf.identity_n([value, variable.handle], name='value')[0]


@tf.RegisterGradient('SlimDeployPrefetched')
def _prefetched_gradient(unused_op, grad, unused_handle_grad):
    """The gradient of a prefetched value (_prefetched), which goes to the variable's handle,
    as a read's would."""
    return None, grad


def _trainable(kwargs):
    """Whether a variable creator's kwargs make a trainable variable: `trainable` if given,
    else unless its synchronization is ON_READ (as TensorFlow decides)."""
    trainable = kwargs.get('trainable')
    if trainable is None:
        return kwargs.get('synchronization') != tf.VariableSynchronization.ON_READ
    return trainable


def _uncache(variable):
    """Makes `variable`, made with a caching device, read from now on as one made without:
    a resource variable's value() becomes a fresh read, placed with it; a reference
    variable's, one snapshot next to it (TensorFlow's private attributes: the public API has
    no way back)."""
    if resource_variable_ops.is_resource_variable(variable):
        variable._cached_value = None
        variable._caching_device = None
    else:
        with tf.colocate_with(variable.op), tf.name_scope(variable.op.name + '/'):
            variable._snapshot = tf.identity(variable._ref(), name='read')


def _without_scope(name_scope, clone_scope):
    """`name_scope` without its leading `clone_scope`, as an absolute name scope ('' for
    the root); `name_scope` itself when it is not within `clone_scope`."""
    if clone_scope and (name_scope == clone_scope or name_scope.startswith(clone_scope + '/')):
        name_scope = name_scope[len(clone_scope) + 1:]
    return name_scope + '/' if name_scope else ''


def _requested(kwargs):
    """(TensorShape or None, DType or None) of the variable a creator's kwargs ask for;
    None where they do not say without building ops (an initial value given as a function
    and no shape)."""
    dtype = kwargs.get('dtype')
    dtype = tf.as_dtype(dtype).base_dtype if dtype is not None else None
    if kwargs.get('shape') is not None:
        return tf.TensorShape(kwargs['shape']), dtype
    initial_value = kwargs.get('initial_value')
    if initial_value is None or callable(initial_value):
        return None, dtype
    initial_value = tf.convert_to_tensor(initial_value, dtype=dtype)
    return initial_value.shape, dtype or initial_value.dtype.base_dtype


def _shape(kwargs):
    """The TensorShape of the variable tf.get_variable's kwargs (a custom getter's) ask for:
    their shape, or their initializer's when that is a tensor."""
    shape = tf.TensorShape(kwargs.get('shape'))
    initializer = kwargs.get('initializer')
    return shape.merge_with(initializer.shape) if isinstance(initializer, tf.Tensor) else shape


def _describe(shape, dtype):
    """'shape [3, 4], float32' with what is known."""
    parts = [f'shape {shape.as_list() if shape.rank is not None else "unknown"}'
             if shape is not None else None, dtype.name if dtype is not None else None]
    return ', '.join(part for part in parts if part) or 'shape unknown'


def _collect_updates(ops, initializers):
    """Adds to tf.GraphKeys.UPDATE_OPS each op of `ops` (a clone's) that writes a variable,
    that nothing runs or collects already (not one of `initializers`, nor a local
    variable's initializer) and that needs no value fed but those the clone's losses need
    (not, e.g., an update a Keras model made when built on its Input placeholders)."""
    initializers = initializers | {v.initializer for v in tf.local_variables()}
    collected = {getattr(item, 'op', item) for item in tf.get_collection(tf.GraphKeys.UPDATE_OPS)}
    updates = [op for op in ops if op.type in _ASSIGN_OP_TYPES and op not in initializers
               and op not in collected and _unused(op)]
    if not updates:
        return
    feeds = _placeholders(tf.get_default_graph())
    built = set(ops)
    losses_need = set().union(*[feeds[loss.op] for loss in tf.get_collection(tf.GraphKeys.LOSSES)
                                if loss.op in built])
    for op in updates:
        if feeds[op] <= losses_need:
            tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, op)


def _placeholders(graph):
    """{op: frozenset of the Placeholder ops it depends on} for every op of `graph`."""
    needs = {}
    for op in graph.get_operations():  # In creation order: inputs come first.
        parents = [t.op for t in op.inputs] + list(op.control_inputs)
        needs[op] = (frozenset([op]) if op.type == 'Placeholder' else
                     frozenset().union(*[needs.get(parent, ()) for parent in parents]))
    return needs


def _unused(op):
    """Whether nothing depends on `op` but reads of the value it wrote that nothing uses
    (as variable.assign_sub(...) makes: a read after the write, returned for convenience)."""
    seen, stack = {op}, [op]
    while stack:
        current = stack.pop()
        for user in [c for t in current.outputs for c in t.consumers()] + list(
                current._control_outputs):
            if user not in seen:
                if user.type not in _READ_OP_TYPES:
                    return False
                seen.add(user)
                stack.append(user)
    return True


@contextlib.contextmanager
def _keras_3_refused(clone_index):
    """Turns Keras 3's refusal of a TF1 API (tf.compat.v1.layers) into a UsageError line."""
    try:
        yield
    except AttributeError as e:
        if _KERAS_3_MESSAGE not in str(e):
            raise
        raise UsageError(f'clone {clone_index} of model_fn used a TF1 layer API that Keras 3 '
                         f'lacks ({e}): deploy() builds TF1 graphs, which need tf-keras; import '
                         'deployment before tensorflow, or set TF_USE_LEGACY_KERAS=1 before '
                         'TensorFlow is imported') from e
