"""Every import path, command and console command a user had keeps working: modules that
moved answer to their former names (slim_deploy.aliases.MOVED), with and without
slim_deploy, as the same module objects; every console command loads; every `python -m`
command the manual shows runs."""
import importlib
from importlib import metadata
import importlib.util
import os
import pathlib
import re
import sys

import pytest

from slim_deploy import aliases

from helpers import REPO, run

BIN = os.path.dirname(sys.executable)  # Where pip installed the console commands.
CONSOLE_COMMANDS = {'train_image_classifier', 'eval_image_classifier', 'export_inference_graph',
                    'download_and_convert_data', 'check_equivalence', 'plan_cluster',
                    'launch_cluster'}
# `python -m MODULE ARGS` as users run them (the manual, slim's own docs), former names too.
MODULE_COMMANDS = [
    ['deployment.launch', '--help'],
    ['slim_deploy.deployment.launch', '--help'],
    ['slim_deploy.cluster.launch', '--help'],
    ['slim_deploy.deployment.emulated_hosts', '--help'],
    ['slim_deploy.cluster.emulated_hosts', '--help'],
    ['nets.mobilenet_v1_train', '--help'],
    ['slim_deploy.image_classifier.flag_reference'],
    *([f'benchmarks.{name}', '--help'] for name in (
        'throughput', 'input_pipeline', 'network', 'fault_injection', 'quantization')),
]


@pytest.mark.parametrize('former, now', sorted(aliases.MOVED.items()))
def test_a_moved_module_answers_to_its_former_names(former, now):
    module = importlib.import_module(f'slim_deploy.{now}')
    assert importlib.import_module(f'slim_deploy.{former}') is module
    assert importlib.import_module(former) is module
    package, _, name = former.rpartition('.')
    assert getattr(importlib.import_module(f'slim_deploy.{package}'), name) is module


def test_every_console_command_is_installed():
    commands = {entry.name: entry for entry in metadata.entry_points(group='console_scripts')
                if entry.dist.name == 'slim-deploy'}
    assert set(commands) == CONSOLE_COMMANDS
    for entry in commands.values():
        assert importlib.util.find_spec(entry.module) is not None, entry
        assert os.access(os.path.join(BIN, entry.name), os.X_OK), entry


@pytest.mark.slow
@pytest.mark.parametrize('command', sorted(CONSOLE_COMMANDS))
def test_every_console_command_runs(command):
    result = run([os.path.join(BIN, command), '--help'], timeout=120)
    assert_printed_help(result)


@pytest.mark.slow
@pytest.mark.parametrize('command', MODULE_COMMANDS, ids=lambda command: command[0])
def test_every_module_command_runs(command):
    result = run([sys.executable, '-m', *command], cwd=REPO, timeout=120)
    assert_printed_help(result)


def assert_printed_help(result):
    """The command printed its help (absl's --help exits 1, argparse's 0) and no error."""
    assert result.returncode in (0, 1) and 'Traceback' not in result.stderr, (
        result.stderr[-2000:])
    assert result.stdout.strip()


def test_the_api_reference_names_public_modules_only():
    api = pathlib.Path(REPO, 'docs', 'api.md').read_text()
    modules = set(re.findall(r'slim_deploy\.(\w+)\.(\w+)\b(?!\.md)', api))
    assert modules
    for package, module in modules:
        assert module in importlib.import_module(f'slim_deploy.{package}').__all__, module
