"""The local cluster launcher, on real processes running a small Python task script."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from slim_deploy.cluster import launch

# A task: binds its own port from TF_CONFIG (so it must be free and unique; an evaluator,
# which the cluster does not list, binds none; a port another process holds ends it as
# errors.AddressInUse ends a real task), prints and marks '<type><index>.ready' in
# OUT_DIR (or, when that mark exists already, '<type><index>.restarted'), and waits for
# every task of the cluster to be ready (a restarted task: for up to 2 s, every task to be
# restarted, as in a restart of the whole job). Then it runs the action PLAN (JSON) names for
# 'type:index' or 'type': 'exit:N', 'kill' (SIGKILLs itself), 'chatter' (long stdout and
# stderr lines), 'forever' (the ps default) or 'ignore_term'; 'once:ACTION' is ACTION the
# first time the task runs and the default when it is restarted. A signal writes
# '<type><index>.<SIGNAME>' and exits. Tasks end after 20 s anyway, so a failing test
# leaves no process behind.
TASK = r'''
import errno, json, os, signal, socket, sys, time
from slim_deploy.common.errors import AddressInUse
out_dir, plan = sys.argv[1], json.loads(sys.argv[2])
config = json.loads(os.environ['TF_CONFIG'])
kind, index = config['task']['type'], config['task']['index']
name = f'{kind}:{index}'
default = 'forever' if kind == 'ps' else 'exit:0'
action = plan.get(name, plan.get(kind, default))
restarted = os.path.exists(os.path.join(out_dir, f'{kind}{index}.ready'))
if action.startswith('once:'):
    action = default if restarted else action[5:]

def mark(what):
    info = {'pid': os.getpid(), 'args': sys.argv[3:], 'tf_config': config,
            'network': os.readlink('/proc/self/ns/net')}
    path = os.path.join(out_dir, f'{kind}{index}.{what}')
    with open(path + '.tmp', 'w') as f:
        json.dump(info, f)
    os.replace(path + '.tmp', path)  # Whole, for a reader polling the directory.

def on_signal(signum, frame):
    mark(signal.Signals(signum).name)
    sys.exit(0)

signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, signal.SIG_IGN if action == 'ignore_term' else on_signal)
if kind in config['cluster']:
    host, port = config['cluster'][kind][index].rsplit(':', 1)
    server = socket.socket()
    try:
        server.bind((host, int(port)))
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            raise
        print(name, 'address in use')
        sys.exit(AddressInUse.exit_code)
print(name, 'ready')
mark('restarted' if restarted else 'ready')
ready = [os.path.join(out_dir, f'{task_type}{i}.ready')
         for task_type, addresses in config['cluster'].items() for i in range(len(addresses))]
while not all(map(os.path.exists, ready)):
    time.sleep(0.01)
end = time.monotonic() + 2
while restarted and time.monotonic() < end and not all(
        os.path.exists(path[:-len('ready')] + 'restarted') for path in ready):
    time.sleep(0.01)
if action == 'chatter':
    for i in range(100):
        print(name, 'out', i, name * 1000)
        print(name, 'err', i, name * 1000, file=sys.stderr)
    sys.stdout.write(name + ' partial')
    action = 'exit:0'
if action.startswith('exit:'):
    sys.exit(int(action[5:]))
if action == 'kill':
    os.kill(os.getpid(), signal.SIGKILL)
end = time.monotonic() + 20
while time.monotonic() < end:
    time.sleep(0.01)
'''

PROG = os.path.basename(sys.argv[0])


@pytest.fixture(autouse=True)
def time_limit():
    """Fails a test that runs for more than 15 s."""
    def expire(signum, frame):
        raise TimeoutError('test took more than 15 s')
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 15)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def task_command(out_dir, plan=None):
    return [sys.executable, '-c', TASK, str(out_dir), json.dumps(plan or {})]


def launch_tasks(capsys, out_dir, options, plan=None):
    """Runs launch.main in this process; returns (exit code, stdout, stderr, seconds)."""
    start = time.monotonic()
    code = launch.main([*options, '--', *task_command(out_dir, plan)])
    seconds = time.monotonic() - start
    captured = capsys.readouterr()
    return code, captured.out, captured.err, seconds


def marks(out_dir, suffix):
    """{'ps0': info, ...} of the tasks that wrote a '.suffix' mark."""
    return {name[:-len(suffix) - 1]: json.loads((out_dir / name).read_text())
            for name in os.listdir(out_dir) if name.endswith('.' + suffix)}


def test_tf_config_flags_and_ps_stopped_after_workers(capsys, tmp_path):
    code, out, err, seconds = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '2', '--worker_replicas', '3', '--sync_replicas'])
    assert (code, err) == (0, '')
    ready = marks(tmp_path, 'ready')
    assert sorted(ready) == ['ps0', 'ps1', 'worker0', 'worker1', 'worker2']
    cluster = ready['ps0']['tf_config']['cluster']
    addresses = cluster['ps'] + cluster['worker']
    assert len(cluster['ps']) == 2 and len(cluster['worker']) == 3
    assert len(set(addresses)) == 5
    assert all(re.fullmatch(r'127\.0\.0\.1:\d+', address) for address in addresses)
    for name, info in ready.items():
        kind, index = name[:-1], int(name[-1])
        assert info['tf_config'] == {'cluster': cluster, 'task': {'type': kind, 'index': index}}
        assert info['args'] == ['--worker_replicas=3', '--num_ps_tasks=2', '--sync_replicas']
    # The ps tasks, which would serve for 20 s, got SIGTERM once the workers were done.
    assert sorted(marks(tmp_path, 'SIGTERM')) == ['ps0', 'ps1']
    assert seconds < 5
    assert sorted(out.splitlines()) == [
        '[ps:0] ps:0 ready', '[ps:1] ps:1 ready', '[worker:0] worker:0 ready',
        '[worker:1] worker:1 ready', '[worker:2] worker:2 ready']


def test_no_ps_tasks_no_ps_job_and_no_sync_flag(capsys, tmp_path):
    code, _, err, _ = launch_tasks(capsys, tmp_path, ['--num_ps_tasks=0', '--worker_replicas=2'])
    assert (code, err) == (0, '')
    info = marks(tmp_path, 'ready')['worker1']
    assert info['args'] == ['--worker_replicas=2', '--num_ps_tasks=0']
    assert list(info['tf_config']['cluster']) == ['worker']  # A collective cluster.


def test_every_output_line_keeps_its_task_prefix(capsys, tmp_path):
    code, out, _, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '3'],
        plan={'worker': 'chatter'})
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1 + 3 * 202
    for line in lines:
        # Each line is whole: its prefix names the task that wrote all of it.
        match = re.fullmatch(r'\[(\w+:\d)\] (\1) (ready|partial|(out|err) \d+ (\1)+)', line)
        assert match, line[:200]
    for index in range(3):
        name = f'worker:{index}'
        assert sum(line.startswith(f'[{name}] {name} out ') for line in lines) == 100
        assert sum(line.startswith(f'[{name}] {name} err ') for line in lines) == 100
        assert f'[{name}] {name} partial' in lines


@pytest.mark.parametrize('plan, failure', [
    ({'worker:1': 'exit:3'}, 'worker:1 (exit code 3)'),
    ({'worker:2': 'kill'}, 'worker:2 (signal SIGKILL)'),
])
def test_a_failed_worker_is_named_and_stops_every_task(capsys, tmp_path, plan, failure):
    code, _, err, seconds = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '3'],
        plan={'worker': 'forever', **plan})
    assert code == 1
    assert err == f'{PROG}: error: failed: {failure}; stopped all tasks\n'
    stopped = {'ps0', 'worker0', 'worker1', 'worker2'} - {failure[:8].replace(':', '')}
    assert set(marks(tmp_path, 'SIGTERM')) == stopped
    assert seconds < 5


def test_ps_ending_early_stops_every_task(capsys, tmp_path):
    code, _, err, seconds = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '2', '--worker_replicas', '2'],
        plan={'ps:1': 'exit:5', 'worker': 'forever'})
    assert code == 1
    assert err == (f'{PROG}: error: ps:1 ended (exit code 5) before the workers; '
                   'stopped all tasks\n')
    assert sorted(marks(tmp_path, 'SIGTERM')) == ['ps0', 'worker0', 'worker1']
    assert seconds < 5


@pytest.mark.slow
def test_a_failed_worker_is_restarted_alone_with_the_same_tf_config(capsys, tmp_path):
    code, out, err, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '2',
                           '--max_restarts', '1'], plan={'worker:1': 'once:exit:3'})
    assert code == 0
    assert err == f'{PROG}: worker:1 ended (exit code 3); restarting it (restart 1 of 1)\n'
    restarted = marks(tmp_path, 'restarted')
    assert sorted(restarted) == ['worker1']
    assert restarted['worker1']['tf_config'] == marks(tmp_path, 'ready')['worker1']['tf_config']
    assert out.count('[worker:1] worker:1 ready') == 2


@pytest.mark.parametrize('options, plan, dead', [
    (['--num_ps_tasks', '1', '--worker_replicas', '2'],
     {'ps:0': 'once:exit:5', 'worker': 'once:forever'}, 'ps:0 ended (exit code 5)'),
    (['--num_ps_tasks', '0', '--worker_replicas', '2'],  # Collective: all or none.
     {'worker:1': 'once:kill', 'worker:0': 'once:forever'}, 'worker:1 ended (signal SIGKILL)'),
    (['--num_ps_tasks', '1', '--worker_replicas', '2'],  # It lost a task it needs.
     {'worker:1': 'once:exit:75', 'worker:0': 'once:forever'}, 'worker:1 ended (exit code 75)'),
])
def test_a_dead_ps_task_or_collective_worker_restarts_the_whole_job(capsys, tmp_path, options,
                                                                    plan, dead):
    code, _, err, _ = launch_tasks(capsys, tmp_path, [*options, '--max_restarts', '1'],
                                   plan=plan)
    assert code == 0
    assert err == f'{PROG}: {dead}; restarting the whole job (restart 1 of 1)\n'
    assert sorted(marks(tmp_path, 'restarted')) == sorted(marks(tmp_path, 'ready'))


@pytest.mark.parametrize('exit_code, cause', [
    (2, "a user's mistake"), (65, 'damaged data'), (74, 'a write the storage refused')])
def test_what_a_restart_repeats_is_not_restarted(capsys, tmp_path, exit_code, cause):
    code, _, err, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '2', '--max_restarts', '3'],
        plan={'worker:1': f'exit:{exit_code}', 'worker': 'forever'})
    assert code == 1
    assert err == (f'{PROG}: error: failed: worker:1 (exit code {exit_code}), {cause} that a '
                   'restart repeats; stopped all tasks\n')
    assert marks(tmp_path, 'restarted') == {}


@pytest.mark.slow
def test_restarts_run_out_and_every_task_stops(capsys, tmp_path):
    code, out, err, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '2',
                           '--max_restarts', '2'], plan={'worker:1': 'exit:3'})
    assert code == 1
    assert err.splitlines() == [
        f'{PROG}: worker:1 ended (exit code 3); restarting it (restart 1 of 2)',
        f'{PROG}: worker:1 ended (exit code 3); restarting it (restart 2 of 2)',
        f'{PROG}: error: failed: worker:1 (exit code 3) after 2 restarts (--max_restarts); '
        'stopped all tasks']
    assert out.count('[worker:1] worker:1 ready') == 3
    assert sorted(marks(tmp_path, 'SIGTERM')) == ['ps0']


def holding_ports(monkeypatch, times):
    """Makes the launcher's cluster_spec hold (as another process would, on every
    interface) the port it picks for worker:0, the first `times` times it is called; returns
    the clusters it picks, in order, and the sockets holding ports."""
    pick, picked, held = launch.cluster_spec, [], []

    def pick_then_take(*args):
        picked.append(pick(*args))
        if len(picked) <= times:
            port = int(picked[-1]['worker'][0].rpartition(':')[2])
            held.append(socket.create_server(('0.0.0.0', port)))
        return picked[-1]
    monkeypatch.setattr(launch, 'cluster_spec', pick_then_take)
    return picked, held


def test_free_ports_are_distinct_bindable_and_below_the_kernels_ephemeral_range():
    """Outgoing connections take their ports from the ephemeral range, so a port picked there
    could be taken before its server binds it."""
    with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
        first_ephemeral = int(f.read().split()[0])
    ports = launch.free_ports(launch.LOCALHOST, 50)
    assert len(set(ports)) == 50
    assert all(10000 <= port < first_ephemeral for port in ports)
    for port in ports:
        socket.create_server((launch.LOCALHOST, port)).close()


def test_a_port_handed_out_is_no_other_callers_until_its_hold_ends(monkeypatch, tmp_path):
    """Two jobs starting at once, or one while another's task restarts on its port, never get
    the same port: free_ports in another process passes over those this one was given, though
    free, and takes them once their hold has ended."""
    candidates = launch.free_ports(launch.LOCALHOST, 10)
    record = tmp_path / 'ports'
    monkeypatch.setattr(launch, 'PORTS_HANDED_OUT', str(record))
    monkeypatch.setattr(launch, '_ports_below_ephemeral_range', lambda: list(candidates))
    first = launch.free_ports(launch.LOCALHOST, 5)

    def in_another_process(now):
        code = (f'import time; from slim_deploy.cluster import launch; '
                f'launch.PORTS_HANDED_OUT = {str(record)!r}; time.time = lambda: {now}; '
                f'launch._ports_below_ephemeral_range = lambda: {candidates}; '
                f'print(*launch.free_ports(launch.LOCALHOST, 5))')
        result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                                check=True)
        return [int(port) for port in result.stdout.split()]

    second = in_another_process(time.time())
    assert sorted(first + second) == sorted(candidates)
    later = in_another_process(time.time() + launch.HOLD_SECS + 1)
    assert len(set(later)) == 5 and set(later) <= set(candidates)
    assert sorted(int(line.split()[0]) for line in record.read_text().splitlines()) == sorted(
        later)  # The ended holds are dropped.


def test_free_ports_without_a_record_it_can_open_still_give_free_ports(monkeypatch, tmp_path):
    monkeypatch.setattr(launch, 'PORTS_HANDED_OUT', str(tmp_path / 'missing' / 'ports'))
    for port in launch.free_ports(launch.LOCALHOST, 2):
        socket.create_server((launch.LOCALHOST, port)).close()


def test_free_ports_pass_over_a_taken_port(monkeypatch):
    """Its only candidate taken, free_ports asks the kernel for a port."""
    with socket.create_server((launch.LOCALHOST, 0)) as taken:
        port = taken.getsockname()[1]
        monkeypatch.setattr(launch, '_ports_below_ephemeral_range', lambda: [port])
        assert launch.free_ports(launch.LOCALHOST, 1) != [port]


def test_a_port_taken_before_its_task_binds_it_restarts_the_cluster_on_new_ports(
        capsys, tmp_path, monkeypatch):
    picked, held = holding_ports(monkeypatch, times=1)
    try:
        code, out, err, _ = launch_tasks(capsys, tmp_path,
                                         ['--num_ps_tasks', '1', '--worker_replicas', '2'])
    finally:
        for server in held:
            server.close()
    assert code == 0, err
    first, second = picked
    assert err == (f'{PROG}: worker:0 could not bind {first["worker"][0]}: address in use; '
                   f'restarting every task on new ports (retry 1 of {launch.PORT_RETRIES})\n')
    assert '[worker:0] worker:0 address in use' in out.splitlines()
    assert first['worker'][0] not in second['ps'] + second['worker']
    last = {**marks(tmp_path, 'ready'), **marks(tmp_path, 'restarted')}
    assert sorted(last) == ['ps0', 'worker0', 'worker1']
    assert {json.dumps(info['tf_config']['cluster']) for info in last.values()} == {
        json.dumps(second)}


def test_ports_taken_every_time_end_the_launch_after_the_retries(capsys, tmp_path,
                                                                 monkeypatch):
    picked, held = holding_ports(monkeypatch, times=launch.PORT_RETRIES + 1)
    try:
        code, _, err, _ = launch_tasks(capsys, tmp_path,
                                       ['--num_ps_tasks', '1', '--worker_replicas', '2',
                                        '--max_restarts', '0'])
    finally:
        for server in held:
            server.close()
    assert code == 1
    assert len(picked) == launch.PORT_RETRIES + 1
    assert err.splitlines() == [
        *(f'{PROG}: worker:0 could not bind {cluster["worker"][0]}: address in use; restarting '
          f'every task on new ports (retry {retry} of {launch.PORT_RETRIES})'
          for retry, cluster in enumerate(picked[:-1], 1)),
        f'{PROG}: error: failed: worker:0 (exit code 98), address in use; stopped all tasks']


def test_evaluator_task_runs_with_tf_config_outside_the_cluster(capsys, tmp_path):
    code, out, err, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '1', '--evaluator'],
        plan={'evaluator': 'once:exit:0'})
    assert (code, err) == (0, '')
    config = marks(tmp_path, 'ready')['evaluator0']['tf_config']
    assert config['task'] == {'type': 'evaluator', 'index': 0}
    assert sorted(config['cluster']) == ['ps', 'worker']
    assert '[evaluator:0] evaluator:0 ready' in out.splitlines()


def test_tasks_ignoring_sigterm_get_sigkill_after_the_grace_period(capsys, tmp_path,
                                                                   monkeypatch):
    monkeypatch.setattr(launch, 'GRACE_SECS', 0.5)
    code, _, err, seconds = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '1'],
        plan={'ps': 'ignore_term'})
    assert (code, err) == (0, '')
    assert marks(tmp_path, 'SIGTERM') == {}
    assert 0.5 <= seconds < 5


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT])
def test_signal_to_launcher_reaches_every_task(tmp_path, signum):
    # The launcher as a script: `python -m slim_deploy.cluster.launch` would import TensorFlow
    # too.
    launcher = subprocess.Popen(
        [sys.executable, launch.__file__, '--num_ps_tasks=1', '--worker_replicas=2', '--',
         *task_command(tmp_path, {'worker': 'forever'})],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while len(marks(tmp_path, 'ready')) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        launcher.send_signal(signum)
        out, err = launcher.communicate(timeout=10)
    finally:
        launcher.kill()
    assert launcher.returncode == 128 + signum
    name = signal.Signals(signum).name
    assert err == f'launch.py: received {name}; stopped all tasks\n'
    assert sorted(marks(tmp_path, name)) == ['ps0', 'worker0', 'worker1']
    for info in marks(tmp_path, name).values():
        with pytest.raises(ProcessLookupError):
            os.kill(info['pid'], 0)
    assert sorted(out.splitlines()) == [
        '[ps:0] ps:0 ready', '[worker:0] worker:0 ready', '[worker:1] worker:1 ready']


@pytest.mark.parametrize('options, message', [
    (['--num_ps_tasks=-1', '--worker_replicas=2'],
     '--num_ps_tasks must be an integer >= 0, got -1'),
    (['--num_ps_tasks=1', '--worker_replicas=0'],
     '--worker_replicas must be an integer >= 1, got 0'),
    (['--num_ps_tasks=1', '--worker_replicas=1', '--sync_replicas'],
     '--sync_replicas needs --worker_replicas > 1, got 1'),
    (['--num_ps_tasks=1', '--worker_replicas=1', '--max_restarts=-1'],
     '--max_restarts must be an integer >= 0, got -1'),
    (['--num_ps_tasks=x', '--worker_replicas=1'],
     "argument --num_ps_tasks: invalid int value: 'x'"),
    (['--worker_replicas=1'], 'the following arguments are required: --num_ps_tasks'),
    (['--num_ps_tasks=0', '--worker_replicas=1', 'python'], 'unrecognized arguments: python'),
    (['--num_ps_tasks=0', '--worker_replicas=1', '--bind=192.0.2.1'],
     '--bind 192.0.2.1: Cannot assign requested address'),
    (['--num_ps_tasks=0', '--worker_replicas=1', '--bind=0.0.0.0', '--emulated_hosts'],
     '--bind and --emulated_hosts exclude each other: emulated hosts have addresses of their '
     'own'),
    (['--num_ps_tasks=0', '--worker_replicas=1', '--link_bandwidth=1gbit'],
     '--link_bandwidth needs --emulated_hosts'),
    (['--num_ps_tasks=0', '--worker_replicas=1', '--emulated_hosts', '--link_bandwidth=fast'],
     '--emulated_hosts: bandwidth of worker-0 must be a tc rate such as 100mbit or 1gbit, got '
     "'fast'"),
    (['--num_ps_tasks=0', '--worker_replicas=2', '--slow_host=worker:1=10mbit'],
     '--slow_host needs --emulated_hosts'),
    (['--num_ps_tasks=1', '--worker_replicas=2', '--emulated_hosts', '--slow_host=worker:2=1mbit'],
     "--slow_host takes TASK=RATE, TASK one of ps:0, worker:0, worker:1 and RATE a tc rate such "
     "as 100mbit; got 'worker:2=1mbit'"),
    (['--num_ps_tasks=0', '--worker_replicas=2', '--emulated_hosts', '--slow_host=worker:1'],
     "--slow_host takes TASK=RATE, TASK one of worker:0, worker:1 and RATE a tc rate such as "
     "100mbit; got 'worker:1'"),
])
def test_bad_arguments_end_in_one_line_and_exit_code_2(capsys, options, message):
    assert launch.main([*options, '--', 'true']) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ('', f'{PROG}: error: {message}\n')


@pytest.mark.parametrize('options, bandwidths', [
    ([], {}),
    (['--link_bandwidth=1gbit'], {'ps-0': '1gbit', 'worker-0': '1gbit', 'worker-1': '1gbit'}),
    (['--slow_host=worker:1=100mbit'], {'worker-1': '100mbit'}),
    (['--link_bandwidth=1gbit', '--slow_host=worker:1=100mbit', '--slow_host=ps:0=2gbit'],
     {'ps-0': '2gbit', 'worker-0': '1gbit', 'worker-1': '100mbit'}),
])
def test_a_slow_host_gets_its_own_link_rate(options, bandwidths):
    args, _ = launch.parse_args(['--num_ps_tasks=1', '--worker_replicas=2', '--emulated_hosts',
                                 *options, '--', 'true'])
    assert launch.link_bandwidths(args) == bandwidths


@pytest.mark.parametrize('argv', [['--num_ps_tasks=0', '--worker_replicas=1'],
                                  ['--num_ps_tasks=0', '--worker_replicas=1', '--']])
def test_missing_command(capsys, argv):
    assert launch.main(argv) == 2
    assert capsys.readouterr().err == f'{PROG}: error: missing COMMAND: put it after "--"\n'


def test_command_that_cannot_run(capsys, tmp_path):
    missing = str(tmp_path / 'missing')
    assert launch.main(['--num_ps_tasks=1', '--worker_replicas=1', '--', missing]) == 2
    assert capsys.readouterr().err == (
        f'{PROG}: error: cannot run {missing}: No such file or directory\n')


def test_bind_elsewhere_warns(capsys, tmp_path):
    code, _, err, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks=1', '--worker_replicas=1', '--bind=0.0.0.0'])
    assert code == 0
    assert err == (f"{PROG}: warning: --bind 0.0.0.0: TensorFlow's gRPC servers accept any "
                   'client that can reach their ports (no authentication)\n')
    cluster = marks(tmp_path, 'ready')['ps0']['tf_config']['cluster']
    assert all(address.startswith('0.0.0.0:') for address in cluster['ps'] + cluster['worker'])


def test_emulated_hosts_run_each_task_on_a_host_of_its_own(capsys, tmp_path):
    code, _, err, _ = launch_tasks(
        capsys, tmp_path, ['--num_ps_tasks', '1', '--worker_replicas', '2', '--evaluator',
                           '--emulated_hosts'])
    assert code == 0, err  # Where emulated hosts cannot run, err says why.
    (line,) = err.splitlines()
    prefix = re.fullmatch(r'\S+: emulated hosts (emuhost-\S+): ps-0\.cluster=(\S+) '
                          r'worker-0\.cluster=\S+ worker-1\.cluster=\S+ '
                          r'evaluator-0\.cluster=\S+', line)[1]
    ready = marks(tmp_path, 'ready')
    assert ready['ps0']['tf_config']['cluster'] == {
        'ps': ['ps-0.cluster:2222'], 'worker': ['worker-0.cluster:2222', 'worker-1.cluster:2222']}
    networks = {info['network'] for info in ready.values()}
    assert len(networks) == 4 and os.readlink('/proc/self/ns/net') not in networks
    assert prefix not in subprocess.run(['ip', 'netns', 'list'], capture_output=True,
                                        text=True).stdout
