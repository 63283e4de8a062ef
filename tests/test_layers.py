"""The packages stack in layers, each importing only those below it: deployment/ (the core)
imports none of nets/, datasets/ and preprocessing/; nets/ and preprocessing/ do not import
datasets/. Read from every module's import statements, module level or not, under either
name (slim_deploy.nets or slim's nets)."""
import ast
import pathlib

import pytest

from helpers import REPO

PACKAGE = pathlib.Path(REPO) / 'slim_deploy'
FORBIDDEN = {'deployment': {'nets', 'datasets', 'preprocessing'},
             'nets': {'datasets'}, 'preprocessing': {'datasets'}}


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


@pytest.mark.parametrize('package', sorted(FORBIDDEN))
def test_no_import_runs_back_up_the_layers(package):
    upward = [f'{path.relative_to(PACKAGE)}:{line}: {imported}'
              for path in sorted((PACKAGE / package).rglob('*.py'))
              for line, imported in imported_packages(path) if imported in FORBIDDEN[package]]
    assert upward == []
