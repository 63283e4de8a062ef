"""benchmarks.harness: rounds in rotated order, statistics and ratios, argparse types, and
role processes answering commands on this machine and on an emulated host."""
import argparse

import pytest

from benchmarks import harness
from slim_deploy.cluster import emulated_hosts

# A role process (module harness_role): replies with its role, the addresses of its host and
# its directory of temporary files, then echoes each command; a command {'fail': text} raises.
ROLE = '''
import json, subprocess, sys, tempfile

from benchmarks import harness

def serve(reply, commands):
    addresses = subprocess.run(['ip', '-4', '-o', 'addr', 'show'], capture_output=True,
                               text=True).stdout
    reply(role=json.loads(sys.argv[2]), addresses=[line.split()[3]
                                                  for line in addresses.splitlines()],
          temporary=tempfile.gettempdir())
    for command in commands:
        if 'fail' in command:
            raise ValueError(command['fail'])
        reply(echo=command)

harness.serve_role(serve)
'''


def test_rounds_rotate_the_order_and_report_each_round():
    calls, done = [], []
    results = harness.rounds(['a', 'b', 'c'], 4, lambda name: calls.append(name) or len(calls),
                             done=done.append)
    assert calls == list('abc' 'bca' 'cab' 'abc')
    assert results == {'a': [1, 6, 8, 10], 'b': [2, 4, 9, 11], 'c': [3, 5, 7, 12]}
    assert done == [1, 2, 3, 4]


def test_median_spread_and_ratios_against_baselines():
    assert harness.median_spread([4.0, 2.0, 3.0]) == (3.0, 2.0 / 3.0)
    values = {('x', 1): 6.0, ('x', 2): 3.0, ('y', 1): 2.0}
    ratios = harness.ratios(values, lambda key: [(key[0], 1), ('y', key[1])],
                            name=lambda key: f'{key[0]}{key[1]}')
    assert ratios == {'x1 / y1': 3.0, 'x2 / x1': 0.5}  # y2 is not measured: no 'x2 / y2'.


@pytest.mark.parametrize('kind, text, message', [
    (harness.at_least(1), '0', 'must be >= 1, got 0'),
    (harness.at_least(0.5, float), '0.25', 'must be >= 0.5, got 0.25'),
    (harness.names_in(('a', 'b')), 'a,c', 'c is not in a, b'),
    (harness.names_in(('a', 'b')), ' , ', 'nothing is not in a, b'),
])
def test_argparse_types_reject_in_one_line(kind, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=f'^{message}$'):
        kind(text)


def test_names_in_keeps_the_order_given_once_each():
    assert harness.names_in(('a', 'b', 'c'))('c, a,c') == ['c', 'a']


@pytest.mark.cluster
def test_role_processes_answer_on_this_machine_and_on_an_emulated_host(tmp_path, monkeypatch):
    (tmp_path / 'harness_role.py').write_text(ROLE)
    # `python -m harness_role` finds it in the working directory, and the benchmarks package
    # through the PYTHONPATH the harness gives.
    monkeypatch.chdir(tmp_path)
    options = argparse.Namespace(model_name='lenet', dataset_dir=None)
    with emulated_hosts.EmulatedHosts(['a']) as hosts:
        processes = harness.Processes(str(tmp_path), timeout_secs=60, hosts=hosts)
        try:
            remote = processes.start('remote', harness.role_command(
                'harness_role', {'task': 0}, options, ['model_name', 'dataset_dir']), host='a')
            local = processes.start('local', harness.role_command(
                'harness_role', {'task': 1}, options, []))
            first = processes.collect([remote, local], 'start')
            assert [reply['role'] for reply in first] == [{'task': 0}, {'task': 1}]
            assert hosts['a'].address + '/24' in first[0]['addresses']
            assert hosts['a'].address + '/24' not in first[1]['addresses']
            assert [reply['temporary'] for reply in first] == [str(tmp_path)] * 2
            for process in (remote, local):
                process.send(steps=3)
            assert processes.collect([remote, local], 'echo') == [{'echo': {'steps': 3}}] * 2
            remote.send(fail='bad\nsecond line')
            with pytest.raises(harness.BenchmarkError, match='^remote failed: ValueError: bad$'):
                processes.collect([remote], 'fail')
        finally:
            processes.close()
    assert remote.popen.returncode == 1 and local.popen.returncode == 0
