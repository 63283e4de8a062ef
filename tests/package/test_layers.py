"""The packages stack in layers, each importing only those below it (ALLOWED): common/ at the
bottom; nets/, datasets/ and preprocessing/ (which reads nets' registry for each network's
family) on it; the slim core, deployment/, on common/ alone, so that it holds nothing of the
cluster operations, the training loop or the analysis; the image classifier and slim's
scripts on top. Read from every module's import statements, module level or not, under
either name (slim_deploy.nets or slim's nets)."""
import ast
import pathlib

import pytest

from helpers import REPO

PACKAGE = pathlib.Path(REPO) / 'slim_deploy'
LIBRARIES = {'common', 'nets', 'datasets', 'preprocessing'}
# Each package: the other packages it may import.
ALLOWED = {
    'common': set(),
    'nets': {'common'},
    'datasets': {'common'},
    'preprocessing': {'common', 'nets'},
    'deployment': {'common'},
    'cluster': {'common'},
    'training': {'common', 'deployment'},
    'analysis': {'common', 'deployment', 'training', 'cluster'},
    'image_classifier': LIBRARIES | {'deployment', 'training', 'cluster'},
    'slim_scripts': LIBRARIES | {'deployment', 'training', 'image_classifier'},
}


def imported_packages(path):
    """(line, package) of each slim_deploy package a module imports: 'nets' for
    `from slim_deploy.nets import x`, `import nets.resnet_v1`, `from nets import x`."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split('.')
            if parts[0] == 'slim_deploy':
                parts = parts[1:]
            if parts:
                yield node.lineno, parts[0]


def test_every_package_has_its_layer():
    assert {path.parent.name for path in PACKAGE.glob('*/__init__.py')} == set(ALLOWED)


@pytest.mark.parametrize('package', sorted(ALLOWED))
def test_no_import_runs_back_up_the_layers(package):
    upward = [f'{path.relative_to(PACKAGE)}:{line}: {imported}'
              for path in sorted((PACKAGE / package).rglob('*.py'))
              for line, imported in imported_packages(path)
              if imported in ALLOWED and imported != package
              and imported not in ALLOWED[package]]
    assert upward == []
