"""slim-deploy installs one top-level package, slim_deploy (and slim_deploy.pth), and TF-Slim's
import paths reach its modules through slim_deploy.aliases: in this installation (an editable
one, as the README makes), with a stand-in package that claims the same top-level name
first on the path, and as real wheels next to a stand-in distribution that claims
`datasets` as Hugging Face's does, installed in either order and uninstalled one by one."""
import base64
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile

import pytest

from slim_deploy import aliases

import helpers
from helpers import run

REPO = pathlib.Path(helpers.REPO)
ENV = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}


def python(code, *, executable=sys.executable, **env):
    """Runs `code` in a fresh interpreter from an empty directory; returns its stdout (the
    test fails, with stderr, if it exits non-zero)."""
    result = run([str(executable), '-c', textwrap.dedent(code)], env={**ENV, **env},
                 timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_every_name_is_a_module_of_slim_deploy():
    modules = {path.stem for path in (REPO / 'slim_deploy').iterdir()
               if (path / '__init__.py').exists() or path.suffix == '.py'}
    assert aliases.NAMES <= modules - {'__init__', 'aliases'}


def test_slims_import_paths_give_slim_deploys_modules_once():
    out = python('''
        import collections, sys
        import deployment.errors
        from deployment.registry import Registry
        import slim_deploy.common.errors as canonical
        print(deployment.errors is canonical, sys.modules['deployment.errors'] is canonical,
              deployment is sys.modules['slim_deploy.deployment'])
        print(canonical.__name__, canonical.__spec__.name, Registry.__module__)
        by_file = collections.Counter(module.__file__ for module in set(sys.modules.values())
                                      if getattr(module, '__file__', None))
        print(sorted(file for file, count in by_file.items() if count > 1))
        ''')
    assert out.splitlines() == [
        'True True True',
        'slim_deploy.common.errors slim_deploy.common.errors '
        'slim_deploy.common.registry',
        '[]']  # No file ran twice, as two modules.


def test_a_folder_without_init_py_does_not_take_the_name(tmp_path):
    # A project's data folder named datasets/ is a namespace package on sys.path ('' first).
    for name in ('datasets', 'deployment'):
        (tmp_path / name).mkdir()
    result = run([sys.executable, '-c', 'import datasets, deployment; '
                  'print(datasets.__name__, deployment.__name__)'], cwd=str(tmp_path), env=ENV,
                 timeout=120)
    assert result.stdout.split() == ['slim_deploy.datasets', 'slim_deploy.deployment'], (
        result.stderr[-2000:])


def test_a_package_that_claims_the_same_name_keeps_it(tmp_path):
    standin = tmp_path / 'deployment'
    standin.mkdir()
    (standin / '__init__.py').write_text('WHOSE = "stand-in"\n')
    (standin / 'own.py').write_text('WHOSE = "stand-in"\n')
    out = python('''
        import deployment, deployment.own
        from deployment import errors
        import slim_deploy.common.errors as canonical
        print(deployment.WHOSE, deployment.own.WHOSE, errors is canonical)
        ''', PYTHONPATH=str(tmp_path))
    assert out == 'stand-in stand-in True\n'


# Real wheels in fresh virtualenvs.

def standin_wheel(directory):
    """Writes the wheel of distribution standin-datasets, which claims the top-level package
    `datasets` as Hugging Face's does, with a module slim's lacks (standin_only); returns
    its path."""
    info = 'standin_datasets-1.0.dist-info'
    files = {'datasets/__init__.py': 'WHOSE = "stand-in"\n',
             'datasets/standin_only.py': 'WHOSE = "stand-in"\n',
             f'{info}/METADATA': 'Metadata-Version: 2.1\nName: standin-datasets\nVersion: 1.0\n',
             f'{info}/WHEEL': 'Wheel-Version: 1.0\nGenerator: test_install_layout\n'
                              'Root-Is-Purelib: true\nTag: py3-none-any\n'}

    def record_line(name, text):
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=')
        return f'{name},sha256={digest.decode()},{len(text.encode())}'

    record = [record_line(name, text) for name, text in files.items()] + [f'{info}/RECORD,,']
    path = directory / 'standin_datasets-1.0-py3-none-any.whl'
    with zipfile.ZipFile(path, 'w') as wheel:
        for name, text in {**files, f'{info}/RECORD': '\n'.join(record) + '\n'}.items():
            wheel.writestr(name, text)
    return path


@pytest.fixture(scope='module')
def wheels(tmp_path_factory):
    """{'slim': slim-deploy's wheel, built as `pip wheel .` builds it, from a copy of the
    checkout (a stale build/ would ship), 'standin': standin_wheel's}."""
    directory = tmp_path_factory.mktemp('wheels')
    source = directory / 'source'
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        '.git', '.venv*', 'build', 'dist', '*.egg-info', '__pycache__'))
    subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '-w',
                    str(directory), str(source)], check=True, capture_output=True, timeout=300)
    (slim,) = directory.glob('slim_deploy-*.whl')
    return {'slim': slim, 'standin': standin_wheel(directory)}


class Venv:
    """A fresh virtualenv (no pip of its own) that imports this one's other packages
    (TensorFlow, ...) from a folder of links appended to its path, but nothing of
    slim-deploy's own installation."""

    def __init__(self, root):
        venv.create(root / 'venv', with_pip=False)
        self.python = root / 'venv' / 'bin' / 'python'
        self.site = pathlib.Path(python(
            'import sysconfig; print(sysconfig.get_paths()["purelib"])',
            executable=self.python).strip())
        links = root / 'dependencies'
        links.mkdir()
        for entry in pathlib.Path(sysconfig.get_paths()['purelib']).iterdir():
            if not entry.name.startswith(('slim_deploy', '__editable__')) and (
                    entry.suffix != '.pth'):
                (links / entry.name).symlink_to(entry)
        (self.site / 'dependencies.pth').write_text(f'{links}\n')

    def pip(self, *args):
        subprocess.run([sys.executable, '-m', 'pip', '--python', str(self.python), '-q',
                        '--disable-pip-version-check', *args], check=True, timeout=300)

    def run(self, code):
        return python(code, executable=self.python)


BOTH = '''
    import datasets, datasets.standin_only
    from datasets import dataset_factory
    import slim_deploy.datasets.dataset_factory as canonical
    print(datasets.WHOSE, datasets.standin_only.WHOSE, dataset_factory is canonical)
    '''
SLIM_ALONE = '''
    import importlib.util
    import datasets
    print(datasets.__name__, importlib.util.find_spec('datasets.dataset_factory').origin)
    '''
STANDIN_ALONE = '''
    import importlib.util
    import datasets, datasets.standin_only
    print(datasets.WHOSE, datasets.standin_only.WHOSE, importlib.util.find_spec('slim_deploy'))
    '''


@pytest.mark.slow
def test_the_wheel_installs_slim_deploy_and_its_pth_only(wheels):
    with zipfile.ZipFile(wheels['slim']) as wheel:
        tops = {name.split('/')[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith('.dist-info')} == {
        'slim_deploy', 'slim_deploy.pth'}


@pytest.mark.slow
@pytest.mark.parametrize('first', ['slim', 'standin'])
def test_next_to_a_distribution_that_claims_datasets_both_work_in_either_order(
        wheels, tmp_path, first):
    env = Venv(tmp_path)
    env.pip('install', '--no-deps', '--no-index', str(wheels[first]))
    env.pip('install', '--no-deps', '--no-index',
            str(wheels['standin' if first == 'slim' else 'slim']))
    assert sorted(path.name for path in (env.site / 'datasets').glob('*.py')) == [
        '__init__.py', 'standin_only.py']  # slim-deploy wrote nothing into the folder.
    assert env.run(BOTH) == 'stand-in stand-in True\n'
    env.pip('uninstall', '-y', 'standin-datasets')
    assert env.run(SLIM_ALONE) == (
        f'slim_deploy.datasets {env.site}/slim_deploy/datasets/dataset_factory.py\n')
    env.pip('install', '--no-deps', '--no-index', str(wheels['standin']))
    env.pip('uninstall', '-y', 'slim-deploy')
    assert not (env.site / 'slim_deploy.pth').exists()
    assert env.run(STANDIN_ALONE) == 'stand-in stand-in None\n'
