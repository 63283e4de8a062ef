"""slim's import paths for slim_deploy: `from datasets import dataset_factory` imports
slim_deploy.datasets.dataset_factory, and so on for every name in NAMES.

slim-deploy installs one top-level package, slim_deploy, so that it writes into no folder
that another project owns (Hugging Face's `datasets`, say). The short names of TF-Slim's
code are aliases, served by a finder at the front of sys.meta_path (install(); the wheel's
slim_deploy.pth runs it at interpreter start, and importing slim_deploy does too):

- a name below one of slim_deploy's modules (`datasets.digits`, once `datasets` is
  slim_deploy.datasets) is slim_deploy's;
- any other name that starts with one of NAMES is slim_deploy's only when no other finder
  provides it: with Hugging Face's datasets installed, `import datasets` gives theirs, and
  `from datasets import dataset_factory` ours, which theirs lacks. A folder of that name
  without __init__.py (a namespace package) provides nothing: `import datasets` in a
  project with a datasets/ folder of data gives slim_deploy's.

A few of slim's modules live elsewhere in slim_deploy (SLIM_ELSEWHERE): slim keeps its
MobileNet v1 scripts in nets/, but they read datasets, which nets/ never imports here, so
`nets.mobilenet_v1_train` (and slim_deploy.nets.mobilenet_v1_train, which `from nets import
mobilenet_v1_train` asks for) is slim_deploy.slim_scripts.mobilenet_v1_train.

Modules that moved inside slim_deploy keep their former names the same way (MOVED):
`slim_deploy.deployment.launch` (and `deployment.launch`) is slim_deploy.cluster.launch.

Either name gives the same module object: sys.modules holds it under both, and its
__name__ and __spec__ are slim_deploy's.

One name of TensorFlow 1's contrib is served too, as slim's scripts import it:
`from tensorflow.contrib import quantize` (and `import tensorflow.contrib.quantize`) gives
slim_deploy.deployment.quantize, inside an empty stand-in package `tensorflow.contrib` made
only when no other finder provides that package (a real one, TensorFlow 1's, is never
shadowed). Nothing else is under the stand-in: `from tensorflow.contrib import slim` fails
with ImportError, as on TensorFlow 2.

The finder also repairs tf-slim for the installed TensorFlow right before tf_slim is first
imported (slim_deploy.common.compat), so slim's code runs in any program.
"""
import importlib
import sys

PACKAGE = 'slim_deploy'
# The top-level names slim-deploy's packages and entry-script modules had before they moved
# into PACKAGE (TF-Slim's, but image_classifier and check_equivalence).
NAMES = frozenset([
    'datasets', 'deployment', 'image_classifier', 'nets', 'preprocessing',
    'check_equivalence', 'download_and_convert_data', 'eval_image_classifier',
    'export_inference_graph', 'train_image_classifier'])
# slim's names of modules that slim_deploy keeps outside the package slim keeps them in,
# below PACKAGE: where they are.
SLIM_ELSEWHERE = {
    f'nets.{name}': f'slim_scripts.{name}'
    for name in ('mobilenet_v1_train', 'mobilenet_v1_eval', 'post_training_quantization')}
# Modules of slim-deploy that moved, below PACKAGE: their former name, where they are now.
MOVED = {
    **{f'deployment.{name}': f'common.{name}'
       for name in ('compat', 'errors', 'fileio', 'native_stderr', 'registry')},
    **{f'deployment.{name}': f'cluster.{name}'
       for name in ('emulated_hosts', 'jobset', 'launch', 'watchdog')},
    'deployment.cluster': 'cluster.tasks',
    'deployment.training': 'training.loop',
    'deployment.checkpoints': 'training.checkpoints',
    'deployment.optimization': 'training.optimization',
    'deployment.communication': 'deployment.network_traffic',
    'deployment.sharing': 'deployment.variable_sharing',
    'deployment.equivalence': 'analysis.equivalence',
    'image_classifier.parts': 'image_classifier.builders',
    'image_classifier.runs': 'image_classifier.run_record',
    'image_classifier.quiet': 'image_classifier.verbosity',
}
# Both, with and without PACKAGE: the module of each name.
ELSEWHERE = {f'{prefix}{name}': f'{PACKAGE}.{real}'
             for name, real in {**SLIM_ELSEWHERE, **MOVED}.items()
             for prefix in ('', PACKAGE + '.')}
CONTRIB = 'tensorflow.contrib'
# The modules of TensorFlow 1's contrib served, by name: slim_deploy's module of each.
CONTRIB_MODULES = {CONTRIB + '.quantize': PACKAGE + '.deployment.quantize'}


def install():
    """Puts the finder of the aliases at the front of sys.meta_path, unless it is there."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder:
    """The meta path finder of the aliases, as the module's docstring says (not derived from
    importlib.abc, whose import takes 5 ms: slim_deploy.pth imports this module at every
    interpreter's start)."""

    def find_spec(self, name, path=None, target=None):
        if name == 'tf_slim':
            _repair_tf_slim()
            return None
        if name == CONTRIB or name in CONTRIB_MODULES:
            return self._contrib_spec(name, path, target)
        if name.partition('.')[0] not in NAMES and name not in ELSEWHERE:
            return None
        import importlib.util  # Here, not at every interpreter's start: it takes 2 ms.
        parent_name, _, child = name.rpartition('.')
        parent = sys.modules.get(parent_name)
        if name in ELSEWHERE:
            real_name = ELSEWHERE[name]
        elif parent is not None and parent.__name__.startswith(PACKAGE + '.'):
            real_name = f'{parent.__name__}.{child}'
        elif self._provided_elsewhere(name, path, target):
            return None  # Another project's: the import system goes on to its finder.
        else:
            real_name = f'{PACKAGE}.{name}'
        try:
            real = importlib.util.find_spec(real_name)
        except ModuleNotFoundError:  # A parent of real_name is missing.
            return None
        if real is None:
            return None
        return importlib.util.spec_from_loader(
            name, _Alias(real), origin=real.origin,
            is_package=real.submodule_search_locations is not None)

    def _provided_elsewhere(self, name, path, target):
        """Whether another finder provides module or package `name`; a namespace package (a
        folder without __init__.py, say a data folder named datasets) does not count, as the
        import system itself prefers any regular package to one."""
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, 'find_spec'):
                spec = finder.find_spec(name, path, target)
                if spec is not None and spec.loader is not None:
                    return True
        return False

    def _contrib_spec(self, name, path, target):
        """The spec of the stand-in package CONTRIB, or of one of CONTRIB_MODULES inside it;
        None when another finder provides CONTRIB (or has, for a module inside it)."""
        import importlib.util
        if name in CONTRIB_MODULES:
            if not isinstance(sys.modules.get(CONTRIB), _StandIn):
                return None
            real = importlib.util.find_spec(CONTRIB_MODULES[name])
            return importlib.util.spec_from_loader(name, _Alias(real), origin=real.origin)
        if self._provided_elsewhere(name, path, target):
            return None
        return importlib.util.spec_from_loader(name, _StandInLoader(), is_package=True)


def _repair_tf_slim():
    """Repairs tf-slim for the installed TensorFlow (slim_deploy.common.compat), right
    before tf_slim is first imported: in any program of an environment with slim-deploy."""
    importlib.import_module('slim_deploy.common.compat').repair()


class _Alias:
    """The loader of an alias: the module of spec `real`, imported under its own name."""

    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return importlib.import_module(self.real.name)

    def exec_module(self, module):
        module.__spec__ = self.real  # The import system set the alias's spec.

    def get_code(self, name):
        """The code of the module: `python -m ALIAS` (runpy) runs it."""
        return self.real.loader.get_code(self.real.name)


class _StandIn(type(sys)):
    """The empty package CONTRIB stands for: it holds the CONTRIB_MODULES imported."""


class _StandInLoader:
    """The loader of the stand-in package CONTRIB."""

    def create_module(self, spec):
        served = ', '.join(sorted(CONTRIB_MODULES))
        return _StandIn(spec.name, f"TensorFlow 1's {spec.name}, as far as slim-deploy serves "
                                   f'it: {served}.')

    def exec_module(self, module):
        pass
