"""Repairs that let tf-slim 1.1.0 run on current TensorFlow (2.16 to 2.21).

tf-slim reaches into TensorFlow's private modules for names that have since moved.
`repair()` puts each missing name back where tf-slim looks for it, pointing at its
new home, and leaves every name that still exists alone: on a TensorFlow where
nothing moved, it changes nothing. `import deployment` calls it once.
"""
import importlib
import importlib.abc
import importlib.util
import sys

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
)

# Breakage 2: TensorFlow's legacy `tensorflow.python.layers.normalization`, which
# slim.batch_norm uses, lazily imports `tf_keras.legacy_tf_layers.*`; tf-keras 2.16+
# ships those modules as `tf_keras.src.legacy_tf_layers.*`.
_MOVED_PACKAGES = (('tf_keras.legacy_tf_layers', 'tf_keras.src.legacy_tf_layers'),)


class _PackageAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves `old` (and its submodules) as the already-importable `new`.

    It sits at the end of `sys.meta_path`, so it is only asked about `old` when no
    real module of that name exists.
    """

    def __init__(self, old, new):
        self.old, self.new = old, new

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.old and not fullname.startswith(self.old + '.'):
            return None
        new_name = self.new + fullname[len(self.old):]
        if importlib.util.find_spec(new_name) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module(self.new + spec.name[len(self.old):])

    def exec_module(self, module):
        """The module was executed when `create_module` imported it."""


def repair():
    """Applies every repair that the installed TensorFlow needs; idempotent."""
    for module_name, name, new_module_name, new_name in _MOVED_NAMES:
        module = importlib.import_module(module_name)
        if not hasattr(module, name):
            setattr(module, name, getattr(importlib.import_module(new_module_name), new_name))
    for old, new in _MOVED_PACKAGES:
        if not any(isinstance(f, _PackageAlias) and f.old == old for f in sys.meta_path):
            sys.meta_path.append(_PackageAlias(old, new))
