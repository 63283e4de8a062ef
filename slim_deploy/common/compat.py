"""Repairs that let tf-slim 1.1.0 run on current TensorFlow (2.16 to 2.21).

tf-slim reaches into TensorFlow's private modules for names that have since moved, and
TensorFlow's legacy layers import a tf-keras module that has moved. `repair()` points each
missing name at its new home and leaves every name that still exists alone: on a TensorFlow
where nothing moved, it changes nothing. It also runs the threads of slim's training loop
(slim.learning.train's Supervisor) in the graph that started them, as TF 1 did, and makes a
Saver save one checkpoint at a time. On a TensorFlow newer than the newest tested
(setup.py's upper bound keeps pip from installing one), it first warns once.

The repairs run right before tf_slim is first imported, in any program of an environment
with slim-deploy installed: slim_deploy.aliases' import finder, which slim_deploy.pth
installs at start-up, calls repair() then (it imports no TensorFlow before). `import
slim_deploy.deployment` repairs at once a tf_slim imported before it, and calls
prefer_tf_keras(): TensorFlow 2.16+ makes tf.keras Keras 3, which has no TF1 layers.
"""
import functools
import importlib
import importlib.util
import os
import warnings

# The newest TensorFlow (major, minor) the repairs are tested on; setup.py pins below the next.
_NEWEST_TESTED = (2, 21)

# (module tf-slim imports, name it uses there, module that holds it now, name there).
_MOVED_NAMES = (
    # Breakage 1: tf_slim.layers and learning test `isinstance(x, ops.Tensor)`.
    ('tensorflow.python.framework.ops', 'Tensor',
     'tensorflow.python.framework.tensor', 'Tensor'),
    # The other names tf-slim's library code uses (decoders, layers, metrics,
    # optimize_loss, gradient clipping, local/global variables).
    ('tensorflow.python.framework.ops', 'IndexedSlices',
     'tensorflow.python.framework.indexed_slices', 'IndexedSlices'),
    ('tensorflow.python.ops.array_ops', 'stack',
     'tensorflow.python.ops.array_ops_stack', 'stack'),
    ('tensorflow.python.ops.array_ops', 'unstack',
     'tensorflow.python.ops.array_ops_stack', 'unstack'),
    ('tensorflow.python.ops.control_flow_ops', 'cond',
     'tensorflow.python.ops.cond', 'cond'),
    ('tensorflow.python.ops.control_flow_ops', 'case',
     'tensorflow.python.ops.control_flow_case', 'case'),
    ('tensorflow.python.ops.control_flow_ops', 'Assert',
     'tensorflow.python.ops.control_flow_assert', 'Assert'),
    ('tensorflow.python.ops.control_flow_ops', 'while_loop',
     'tensorflow.python.ops.while_loop', 'while_loop'),
    # tf-slim calls the removed function `variable_scope.variable(...)`, whose
    # signature the v1 variable class (tf.compat.v1.Variable) has kept.
    ('tensorflow.python.ops.variable_scope', 'variable',
     'tensorflow.python.ops.variable_v1', 'VariableV1'),
    # Names only tf-slim's bundled tests use (the yardstick in tools/slim_yardstick.sh).
    ('tensorflow.python.ops.variables', 'VariableV1',
     'tensorflow.python.ops.variable_v1', 'VariableV1'),
    ('tensorflow.python.ops.variable_scope', 'enable_resource_variables',
     'tensorflow.python.ops.resource_variables_toggle', 'enable_resource_variables'),
    ('tensorflow.python.ops.variable_scope', 'disable_resource_variables',
     'tensorflow.python.ops.resource_variables_toggle', 'disable_resource_variables'),
    ('tensorflow.python.ops.variable_scope', 'resource_variables_enabled',
     'tensorflow.python.ops.resource_variables_toggle', 'resource_variables_enabled'),
)

# Breakage 2: slim.batch_norm uses TensorFlow's legacy layer module
# `tensorflow.python.layers.normalization`, whose attribute `normalization` lazily imports
# `tf_keras.legacy_tf_layers.normalization`; tf-keras 2.16+ ships that module as
# `tf_keras.src.legacy_tf_layers.normalization`.
# (module, attribute holding the lazy import, name it imports, name that exists now).
_MOVED_LAZY_IMPORTS = (
    ('tensorflow.python.layers.normalization', 'normalization',
     'tf_keras.legacy_tf_layers.normalization', 'tf_keras.src.legacy_tf_layers.normalization'),
)


def _importable(name):
    """Whether module `name` can be imported (imports its parent packages to find out)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # A parent package is missing.
        return False


@functools.cache
def _warn_if_untested(version):
    """Warns, once per version, if TensorFlow `version` (e.g. '2.22.0') is newer than tested."""
    if tuple(int(part) for part in version.split('.')[:2]) <= _NEWEST_TESTED:
        return
    major, minor = _NEWEST_TESTED
    warnings.warn(
        f'TensorFlow {version} is newer than {major}.{minor}, the newest slim-deploy is tested '
        f'on. Its tf-slim repairs may still work; if tf_slim fails to import or to build a '
        f'model, install a tested version: pip install "tensorflow<{major}.{minor + 1}" '
        f'"tf-keras<{major}.{minor + 1}"', RuntimeWarning)


def repair():
    """Applies every repair that the installed TensorFlow needs; idempotent."""
    _warn_if_untested(importlib.import_module('tensorflow').__version__)
    for module_name, name, new_module_name, new_name in _MOVED_NAMES:
        module = importlib.import_module(module_name)
        if not hasattr(module, name):
            setattr(module, name, getattr(importlib.import_module(new_module_name), new_name))
    for module_name, name, old, new in _MOVED_LAZY_IMPORTS:
        if not _importable(old) and _importable(new):
            setattr(importlib.import_module(module_name), name, importlib.import_module(new))
    _run_looper_threads_in_their_graph()
    _save_one_at_a_time()
    # slim.learning.train stops its Supervisor, and managed_session stops it again, logging
    # the stop to the event file it closed the first time: TF 2 warns on every run.
    warnings.filterwarnings('ignore', 'Attempting to use a closed FileWriter', UserWarning,
                            'tensorflow.python.summary.writer.writer')


def _run_looper_threads_in_their_graph():
    """Makes each coordinator.LooperThread (the Supervisor's summary, step-counter and
    checkpoint threads in slim.learning.train) run in the graph that was the default where
    it was made. Under TF 2 a new thread executes eagerly, so the Supervisor's step counter
    read the graph's global step with .numpy() and failed; in TF 1 graph mode was global."""
    from tensorflow.python.eager import context
    from tensorflow.python.framework import ops
    from tensorflow.python.training import coordinator
    looper = coordinator.LooperThread
    if hasattr(looper, '_creator_graph'):
        return
    make, run = looper.__init__, looper.run

    @functools.wraps(make)
    def __init__(self, *args, **kwargs):
        make(self, *args, **kwargs)
        self._creator_graph = None if context.executing_eagerly() else ops.get_default_graph()

    @functools.wraps(run)
    def run_in_graph(self):
        if self._creator_graph is None:
            return run(self)
        with self._creator_graph.as_default():
            return run(self)

    looper._creator_graph = None
    looper.__init__, looper.run = __init__, run_in_graph


def _save_one_at_a_time():
    """Makes each tf.train.Saver save one checkpoint at a time. slim.learning.train's final
    save and its Supervisor's timer thread save with one Saver: a timer save that read the
    global step before the last update and finished after the final save named the older
    checkpoint the latest, so evaluation scored one step short. One at a time, each save
    reads the global step when its turn comes."""
    import threading

    from tensorflow.python.training import saver as saver_module
    saver = saver_module.Saver
    if hasattr(saver, '_save_lock'):
        return
    save = saver.save

    @functools.wraps(save)
    def save_in_turn(self, *args, **kwargs):
        with self.__dict__.setdefault('_save_lock', threading.Lock()):
            return save(self, *args, **kwargs)

    saver._save_lock = None
    saver.save = save_in_turn


def prefer_tf_keras():
    """Makes tf.keras and tf.compat.v1.layers resolve to tf-keras (Keras 2), which TF1 graphs
    need, unless the user chose with TF_USE_LEGACY_KERAS. TensorFlow reads the variable when
    each is first used, so this works for those not used yet."""
    os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
