"""Emulated hosts (network namespaces on a bridge of their own) and the watchdog that finds a
silent task through them: real namespaces, real TCP, real processes."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from slim_deploy.cluster import emulated_hosts, watchdog
from slim_deploy.cluster.emulated_hosts import EmulatedHosts, EmulatedHostsError

from helpers import ENV, REPO, served

# Serves PORT on every address of its host: accepts connections and reads them to the end.
SERVER = '''
import socket, threading
server = socket.create_server(('', 5000))
def drain(connection):
    with connection:
        while connection.recv(1 << 16):
            pass
while True:
    threading.Thread(target=drain, args=(server.accept()[0],), daemon=True).start()
'''
# Prints the names among argv[2:] (name=host:port) that answer within argv[1] seconds.
ANSWERING = '''
import sys
from slim_deploy.cluster.watchdog import answering
addresses = dict(arg.split('=') for arg in sys.argv[2:])
print(' '.join(sorted(answering(addresses, float(sys.argv[1])))))
'''
# Sends argv[2] MB to argv[1]:5000; prints the seconds it took.
SEND = '''
import socket, sys, time
start = time.monotonic()
with socket.create_connection((sys.argv[1], 5000)) as connection:
    connection.sendall(bytes(int(float(sys.argv[2]) * 1e6)))
    connection.shutdown(socket.SHUT_WR)
    connection.recv(1)
print(time.monotonic() - start)
'''


def machine_network():
    """What emulated hosts must leave as it was: the machine's links and named namespaces,
    and /etc/netns."""
    links = subprocess.run(['ip', '-o', 'link'], capture_output=True, text=True).stdout
    names = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True).stdout
    etc = sorted(os.listdir(emulated_hosts.ETC_NETNS)) if os.path.isdir(
        emulated_hosts.ETC_NETNS) else []
    return re.sub(r'^\d+: ', '', links, flags=re.M), names, etc


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Emulated hosts can run here (or the test fails saying what is missing), and each test
    leaves the machine's network as it found it."""
    try:
        emulated_hosts.check(bandwidth=True)
    except EmulatedHostsError as e:
        pytest.fail(str(e))
    before = machine_network()
    yield
    assert machine_network() == before


def python(hosts, host, code, *args, timeout=30):
    """Runs Python `code` on `host`; returns its stdout, stripped."""
    result = hosts.run(host, [sys.executable, '-c', code, *map(str, args)], cwd=REPO,
                       capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def serve(hosts, host):
    process = hosts.popen(host, [sys.executable, '-c', SERVER])
    python(hosts, host, 'import socket, time\nwhile socket.socket().connect_ex(("127.0.0.1", '
                        '5000)):\n    time.sleep(0.02)')
    return process


def test_hosts_reach_each_other_by_name_and_address():
    with EmulatedHosts(['a', 'b'], domain='test.local') as hosts:
        assert hosts['a'].fqdn == 'a.test.local' and hosts['a'].address != hosts['b'].address
        serve(hosts, 'a')
        answered = python(hosts, 'b', ANSWERING, 2, 'fqdn=a.test.local:5000', 'short=a:5000',
                          f'address={hosts["a"].address}:5000', 'closed=a:5001',
                          'unknown=z:5000')
        assert answered == 'address fqdn short'
        # The machine's own network is out of reach.
        assert python(hosts, 'b', ANSWERING, 1, 'outside=8.8.8.8:53') == ''


def test_a_served_run_on_a_host_is_in_the_hosts_network(tmp_path):
    """A stand-in started on a host (helpers.served, as a cluster's tasks on emulated hosts
    start) runs its script in the host's network, which resolves the hosts' names."""
    (tmp_path / 'answering.py').write_text(ANSWERING)
    with EmulatedHosts(['a', 'b']) as hosts:
        serve(hosts, 'a')
        command = served(hosts.command('b', [sys.executable, tmp_path / 'answering.py', '2',
                                             'short=a:5000', 'closed=a:5001']))
        assert command[5].endswith('script_server.py')
        result = subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True,
                                timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'short'


@pytest.mark.slow
def test_partition_silences_a_host_without_a_reset_until_healed():
    with EmulatedHosts(['a', 'b']) as hosts:
        serve(hosts, 'a')
        hosts.partition('a')
        start = time.monotonic()
        assert python(hosts, 'b', ANSWERING, 1.5, 'a=a.cluster:5000') == ''
        assert time.monotonic() - start >= 1.5  # No answer at all: not even a refusal.
        hosts.heal('a')
        assert python(hosts, 'b', ANSWERING, 5, 'a=a.cluster:5000') == 'a'


@pytest.mark.slow
def test_bandwidth_limits_a_hosts_link_in_each_direction():
    with EmulatedHosts(['slow', 'fast', 'peer'], bandwidth={'slow': '16mbit'}) as hosts:
        serve(hosts, 'peer')
        serve(hosts, 'slow')
        megabytes = 2.0  # 1 s at 16 Mbit/s.
        before = hosts.traffic()
        assert float(python(hosts, 'slow', SEND, 'peer', megabytes)) >= 0.9
        after = hosts.traffic()
        # (received, sent) by each: the payload with its frames' headers one way, the
        # acknowledgements back; none for the host that took no part.
        moved = {name: [a - b for a, b in zip(after[name], before[name])] for name in after}
        assert 2e6 < moved['slow'][1] < 2.2e6 and moved['peer'][1] < 0.2e6
        assert moved['peer'][0] == pytest.approx(moved['slow'][1], rel=0.01)
        assert moved['slow'][0] == pytest.approx(moved['peer'][1], rel=0.05)
        assert moved['fast'][1] < 1e3
        assert float(python(hosts, 'fast', SEND, 'slow', megabytes)) >= 0.9
        assert float(python(hosts, 'fast', SEND, 'peer', megabytes)) < 0.5


def test_everything_is_removed_when_the_block_fails_with_processes_running():
    with pytest.raises(ZeroDivisionError):
        with EmulatedHosts(['a']) as hosts:
            sleeper = hosts.popen('a', ['sleep', '60'])
            1 / 0
    assert sleeper.wait(timeout=5) == -signal.SIGKILL
    assert hosts.prefix not in emulated_hosts.instances()


OWNER = '''
import sys, time
from slim_deploy.cluster.emulated_hosts import EmulatedHosts
hosts = EmulatedHosts(['a', 'b'])
print(hosts.prefix, flush=True)
for _ in range(600):  # Short sleeps: a signal just before one waits for it.
    time.sleep(0.1)
'''


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_owner_leaves_nothing_or_a_stale_instance_removed_later(signum):
    owner = subprocess.Popen([sys.executable, '-c', OWNER], cwd=REPO, stdout=subprocess.PIPE,
                             text=True)
    prefix = owner.stdout.readline().strip()
    assert emulated_hosts.instances()[prefix] is True
    owner.send_signal(signum)
    owner.wait(timeout=10)
    owner.stdout.close()
    if signum == signal.SIGKILL:  # No handler runs: what it made stays, marked stale.
        assert emulated_hosts.instances()[prefix] is False
        assert prefix in emulated_hosts.remove_stale()
    assert prefix not in emulated_hosts.instances()


@pytest.mark.slow
def test_command_line_lists_partitions_and_heals_another_process_hosts():
    cli = [sys.executable, '-m', 'slim_deploy.cluster.emulated_hosts']
    with EmulatedHosts(['a', 'b']) as hosts:
        serve(hosts, 'a')
        listed = subprocess.run([*cli, 'list'], cwd=REPO, capture_output=True, text=True)
        assert (f'{hosts.prefix} alive a={hosts["a"].address} b={hosts["b"].address}'
                in listed.stdout.splitlines())
        subprocess.run([*cli, 'partition', hosts.prefix, 'a'], cwd=REPO, check=True)
        assert python(hosts, 'b', ANSWERING, 1, 'a=a:5000') == ''
        subprocess.run([*cli, 'heal', hosts.prefix, 'a'], cwd=REPO, check=True)
        assert python(hosts, 'b', ANSWERING, 5, 'a=a:5000') == 'a'
        unknown = subprocess.run([*cli, 'heal', hosts.prefix, 'c'], cwd=REPO,
                                 capture_output=True, text=True)
        assert unknown.returncode == 2
        assert unknown.stderr == ('python -m slim_deploy.cluster.emulated_hosts: error: no '
                                  "emulated host 'c'; hosts: a, b\n")


def test_what_is_missing_is_named(monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    with pytest.raises(EmulatedHostsError, match=r'^emulated hosts need the `ip` command of '
                       r'iproute2 for network namespaces; it is not on PATH$'):
        EmulatedHosts(['a'])
    monkeypatch.setattr(os, 'geteuid', lambda: 1000)
    with pytest.raises(EmulatedHostsError, match=r'^emulated hosts need root \(to create '
                       r'network namespaces\)$'):
        EmulatedHosts(['a'])


@pytest.mark.parametrize('names, kwargs, message', [
    (['Worker'], {}, "host name 'Worker' is not a DNS label"),
    (['a', 'a'], {}, 'names must be 1 to 253 distinct host names'),
    (['a'], {'bandwidth': {'b': '1gbit'}}, "bandwidth names host 'b', which is not one of"),
    (['a'], {'bandwidth': '1 GB/s'}, 'bandwidth of a must be a tc rate such as 100mbit'),
])
def test_bad_hosts_are_refused_before_anything_is_made(names, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EmulatedHosts(names, **kwargs)


# Watchdog: on emulated hosts for silence, on loopback for the rest.

WATCHED = '''
import sys, time
from slim_deploy.cluster.watchdog import Watchdog
with Watchdog('worker:0', float(sys.argv[1]), needs={'ps:0': 'a.cluster:5000'}):
    print('watching', flush=True)
    time.sleep(60)
'''


WAITING = '''
import time
from slim_deploy.cluster.watchdog import Watchdog
with Watchdog('worker:1', 2, needs={}, while_waiting={'worker:0': 'a.cluster:5000'}) as dog:
    print('watching', flush=True)
    time.sleep(6)
    print('waiting', flush=True)
    with dog.waiting():
        time.sleep(60)
'''


@pytest.mark.slow
def test_a_task_needed_only_while_waiting_is_watched_only_then():
    with EmulatedHosts(['a', 'b']) as hosts:
        serve(hosts, 'a')
        watched = hosts.popen('b', [sys.executable, '-c', WAITING], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert watched.stdout.readline() == 'watching\n'
        time.sleep(1)  # It has heard from a.
        hosts.partition('a')  # Silent for 5 s, twice the timeout, before it is needed.
        assert watched.stdout.readline() == 'waiting\n'
        waiting = time.monotonic()
        _, err = watched.communicate(timeout=20)
        assert time.monotonic() - waiting < watchdog.MIN_PROBE_SECS + 1.5
        assert watched.returncode == 75
        assert err.endswith('error: worker:0 (a.cluster:5000) has not answered worker:1 for 2 '
                            "s; restart the job to resume from the chief's last checkpoint\n")


@pytest.mark.slow
def test_a_finished_task_is_not_silent(server):
    """A refused connection: the task's host is up, its process ended (TensorFlow reports a
    crashed one itself)."""
    address, close = server
    messages = []
    with watchdog.Watchdog('worker:1', 0.5, needs={'worker:0': address},
                           on_silent=messages.append):
        time.sleep(1)
        close()
        time.sleep(1.5)
    assert messages == []


@pytest.mark.slow
def test_a_silent_task_ends_the_process_within_the_timeout_naming_it():
    with EmulatedHosts(['a', 'b']) as hosts:
        serve(hosts, 'a')
        watched = hosts.popen('b', [sys.executable, '-c', WATCHED, '2'], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert watched.stdout.readline() == 'watching\n'
        time.sleep(1)  # It has heard from a.
        hosts.partition('a')
        cut = time.monotonic()
        _, err = watched.communicate(timeout=20)
        seconds = time.monotonic() - cut
        assert watched.returncode == watchdog.EXIT_CODE == 75
        # Silent since its last answer, up to a probe period before the cut.
        assert 2 - watchdog.MIN_PROBE_SECS <= seconds < 2 + watchdog.MIN_PROBE_SECS + 1.5
        assert err == ("-c: error: ps:0 (a.cluster:5000) has not answered worker:0 for 2 s; "
                       "restart the job to resume from the chief's last checkpoint\n")


@pytest.fixture
def server():
    """'127.0.0.1:PORT' of a server accepting (and closing) connections, and a function
    that closes it (its port then refuses connections)."""
    listening = socket.create_server(('127.0.0.1', 0))
    stop = threading.Event()

    def accept():
        listening.settimeout(0.05)
        while not stop.is_set():
            try:
                listening.accept()[0].close()
            except socket.timeout:
                pass
        listening.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()

    def close():
        stop.set()
        thread.join()
    yield f'127.0.0.1:{listening.getsockname()[1]}', close
    close()


@pytest.mark.slow
def test_a_task_that_answers_is_never_silent_and_one_never_up_only_warned_about(
        server, caplog):
    address, _ = server
    never_up = 'ps-1.invalid:2222'  # Its name does not resolve yet, as a pod not scheduled.
    messages = []
    dog = watchdog.Watchdog('worker:1', 0.5, needs={'ps:0': address, 'ps:1': never_up},
                            on_silent=messages.append)
    with dog:
        time.sleep(2)
    assert messages == [] and dog.last_answer.keys() == {'ps:0'}
    (warning,) = [r.getMessage() for r in caplog.records if 'has not answered' in r.getMessage()]
    assert re.fullmatch(re.escape(f'ps:1 ({never_up}) has not answered worker:1 since it '
                                  'started ') + r'\d s ago: waiting for it to come up', warning)
