"""Emulated hosts: processes on one machine that reach each other as separate machines do.

    with EmulatedHosts(['ps-0', 'worker-0', 'worker-1']) as hosts:
        hosts['ps-0'].fqdn, hosts['ps-0'].address      # 'ps-0.cluster', '10.231.3.1'
        server = hosts.popen('ps-0', ['python', ...])   # a process on host ps-0
        hosts.partition('ps-0')   # its packets vanish both ways: no reset, no error
        hosts.heal('ps-0')
        hosts.traffic()['ps-0']   # (bytes received, bytes sent) over its link so far

Each host is a network namespace with one interface, eth0, holding the host's address in a
/24 subnet of 10.231.0.0/16 that is the instance's own; a veth pair links it to a bridge in
a namespace of its own. Nothing of the machine's own network changes, and instances (of one
process or of several) never share a namespace, a subnet or a file. A process runs on a host
through `ip netns exec`, which mounts /etc/netns/<namespace>/hosts over /etc/hosts: every host
resolves every host's name and name.domain. A bandwidth limit (tc's tbf, both directions)
can apply to each host's link.

remove() removes everything (namespaces, links, /etc/netns files) and kills the processes
still running on the hosts, as switching machines off would; it runs at the end of a `with`
block, at exit, and on SIGTERM or SIGHUP when nothing else handles them. After a SIGKILL,
remove_stale() (or `python -m slim_deploy.cluster.emulated_hosts remove-stale`) removes what
instances of dead processes left. Needs root, `ip` (iproute2) and a kernel with network namespaces,
veth and bridges, plus `tc` and the tbf qdisc for bandwidth limits: EmulatedHostsError says
in one line what is missing. Imports no TensorFlow.
"""
import argparse
import atexit
import contextlib
import dataclasses
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

PREFIX = 'emuhost-'  # Of every namespace an instance creates: PREFIX<pid>.<start>-<subnet>.
SUBNET = '10.231.{}.0/24'  # The instance's subnet; host i has address 10.231.<subnet>.<i+1>.
MAX_HOSTS = 253
ETC_NETNS = '/etc/netns'
LOCK_FILE = '/run/lock/emulated_hosts.lock'  # Serializes the choice of subnets.
BRIDGE = 'br0'
KILL_WAIT_SECS = 5.0  # How long remove() waits for killed processes to be gone.
_NAME = re.compile(r'[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?')
_RATE = re.compile(r'(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)')
_RATE_UNITS = {'bit': 1, 'kbit': 10**3, 'mbit': 10**6, 'gbit': 10**9}
_HOSTS_HEADER = '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n'


class EmulatedHostsError(RuntimeError):
    """The machine lacks what emulated hosts need, or creating them failed: one line naming
    what."""


@dataclasses.dataclass(frozen=True)
class Host:
    """An emulated host: its short name, fully qualified name (name.domain), IPv4 address
    and network namespace."""
    name: str
    fqdn: str
    address: str
    namespace: str


class EmulatedHosts:
    """Hosts named `names` (DNS labels: lowercase letters, digits, '-'; at most MAX_HOSTS),
    in domain `domain`, each linked to one bridge. bandwidth: None (no limit), a tc rate
    ('100mbit', '1gbit') for every host's link, or {name: rate} for some; the limit holds in
    each direction. The instance owns (and remove() removes) what it creates; see attach()
    for one that does not. EmulatedHostsError when the machine lacks what it needs."""

    def __init__(self, names, domain='cluster', bandwidth=None):
        names = list(names)
        bandwidths = (bandwidth if isinstance(bandwidth, dict) else
                      dict.fromkeys(names, bandwidth) if bandwidth else {})
        _check_names(names, domain, bandwidths)
        check(bandwidth=bool(bandwidths))
        self._owner_pid, self._started = os.getpid(), []  # _started: popen()'s Popens.
        with _locked():
            subnet = _free_subnet()
            self.prefix = f'{PREFIX}{_process_token(os.getpid())}-{subnet}'
            self.hosts = {name: Host(name, f'{name}.{domain}', f'10.231.{subnet}.{i + 1}',
                                     f'{self.prefix}-{name}')
                          for i, name in enumerate(names)}
            _remove_at_exit(self)
            try:
                self._create(bandwidths)
            except BaseException:
                self.remove()
                raise

    @classmethod
    def attach(cls, prefix):
        """The hosts another process created (`prefix` is that instance's), to run commands
        on, partition and heal; they are not removed when this object goes, only by an
        explicit remove(). EmulatedHostsError when there is no such instance."""
        namespaces = [name for name in _namespaces() if name.startswith(prefix + '-')]
        hosts_files = [os.path.join(ETC_NETNS, name, 'hosts') for name in namespaces]
        readable = [path for path in hosts_files if os.path.isfile(path)]
        if not _is_instance(prefix) or not readable:
            raise EmulatedHostsError(f'no emulated hosts {prefix!r} (see `python -m '
                                     'slim_deploy.cluster.emulated_hosts list`)')
        self = cls.__new__(cls)
        self.prefix, self._owner_pid, self.hosts, self._started = prefix, None, {}, []
        with open(readable[0]) as f:
            for line in f.read()[len(_HOSTS_HEADER):].splitlines():
                address, fqdn, name = line.split()
                self.hosts[name] = Host(name, fqdn, address, f'{prefix}-{name}')
        return self

    def __getitem__(self, name):
        if name not in self.hosts:
            raise KeyError(f'no emulated host {name!r}; hosts: {", ".join(self.hosts)}')
        return self.hosts[name]

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()

    @property
    def switch(self):
        """The namespace of the bridge that links the hosts."""
        return self.prefix

    def port(self, name):
        """The bridge's end of host `name`'s link, in namespace `switch`."""
        return f'p{list(self.hosts).index(self[name].name)}'

    def command(self, name, argv):
        """`argv` as a command line that runs it on host `name`."""
        return ['ip', 'netns', 'exec', self[name].namespace, *argv]

    def popen(self, name, argv, **kwargs):
        """subprocess.Popen of `argv` on host `name` (kwargs: Popen's); remove() kills it
        even if it has not entered the host's namespace yet."""
        process = subprocess.Popen(self.command(name, argv), **kwargs)
        self._started.append(process)
        return process

    def run(self, name, argv, **kwargs):
        """subprocess.run of `argv` on host `name` (kwargs: run's)."""
        return subprocess.run(self.command(name, argv), **kwargs)

    def traffic(self):
        """{host name: (bytes received, bytes sent)} over each host's link so far, as its
        bridge port counts the frames (their headers included; what a limit lets through)."""
        result = subprocess.run(['ip', '-n', self.switch, '-s', '-j', 'link', 'show'],
                                capture_output=True, text=True, check=True)
        # A port sends what its host receives, and receives what it sends.
        counts = {port['ifname']: (port['stats64']['tx']['bytes'], port['stats64']['rx']['bytes'])
                  for port in json.loads(result.stdout)}
        return {name: counts[self.port(name)] for name in self.hosts}

    def partition(self, name):
        """Cuts host `name` off: every packet to or from it vanishes, as when a machine loses
        power or its network (no TCP reset, no ICMP error), until heal(name)."""
        _ip('-n', self.switch, 'link', 'set', self.port(name), 'down', needs='a bridge port')

    def heal(self, name):
        """Reconnects host `name` after partition(name)."""
        _ip('-n', self.switch, 'link', 'set', self.port(name), 'up', needs='a bridge port')

    def remove(self):
        """Kills the processes still running on the hosts and removes the namespaces, their
        links and /etc/netns files; does nothing the second time."""
        if self in _owned:
            _owned.remove(self)
        # Those not yet reaped: a reaped one's pid may be another process's now.
        _remove_instance(self.prefix, [p.pid for p in self._started if p.poll() is None])

    def _create(self, bandwidths):
        _ip('netns', 'add', self.switch, needs='network namespaces (CONFIG_NET_NS)')
        _ip('-n', self.switch, 'link', 'add', BRIDGE, 'type', 'bridge',
            needs='bridges (CONFIG_BRIDGE)')
        _ip('-n', self.switch, 'link', 'set', BRIDGE, 'up', needs='bridges (CONFIG_BRIDGE)')
        hosts_file = _HOSTS_HEADER + ''.join(f'{host.address} {host.fqdn} {host.name}\n'
                                             for host in self.hosts.values())
        for name, host in self.hosts.items():
            directory = os.path.join(ETC_NETNS, host.namespace)
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, 'hosts'), 'w') as f:
                f.write(hosts_file)
            port = self.port(name)
            _ip('netns', 'add', host.namespace, needs='network namespaces (CONFIG_NET_NS)')
            _ip('-n', host.namespace, 'link', 'set', 'lo', 'up', needs='a loopback interface')
            _ip('link', 'add', 'eth0', 'netns', host.namespace, 'type', 'veth', 'peer', 'name',
                port, 'netns', self.switch, needs='veth pairs (CONFIG_VETH)')
            _ip('-n', self.switch, 'link', 'set', port, 'master', BRIDGE, 'up',
                needs='bridges (CONFIG_BRIDGE)')
            _ip('-n', host.namespace, 'addr', 'add', f'{host.address}/24', 'dev', 'eth0',
                needs='IPv4 addresses')
            _ip('-n', host.namespace, 'link', 'set', 'eth0', 'up', needs='veth pairs')
            if bandwidths.get(name):
                for namespace, device in ((host.namespace, 'eth0'), (self.switch, port)):
                    _limit(namespace, device, bandwidths[name])


def check(bandwidth=False):
    """EmulatedHostsError naming what emulated hosts need and this process lacks: root, `ip`
    and, when `bandwidth` limits are wanted, `tc`. (What the kernel lacks is named when the
    first namespace, bridge, veth pair or tbf qdisc cannot be created.)"""
    if os.geteuid() != 0:
        raise EmulatedHostsError('emulated hosts need root (to create network namespaces)')
    for tool, use in (('ip', 'network namespaces'), ('tc', 'bandwidth limits')):
        if (tool == 'ip' or bandwidth) and shutil.which(tool) is None:
            raise EmulatedHostsError(f'emulated hosts need the `{tool}` command of iproute2 '
                                     f'for {use}; it is not on PATH')


def instances():
    """{prefix: whether the process that created it is alive} of every instance on this
    machine (namespaces or /etc/netns files left)."""
    names = set(_namespaces())
    if os.path.isdir(ETC_NETNS):
        names.update(os.listdir(ETC_NETNS))
    prefixes = {_instance_of(name) for name in names if name.startswith(PREFIX)}
    return {prefix: _alive(prefix) for prefix in sorted(p for p in prefixes if p)}


def owner_pid(prefix):
    """The pid of the process that created instance `prefix` (which may be gone)."""
    return int(_owner_token(prefix).split('.')[0])


def remove_stale():
    """Removes the instances whose process is gone (killed before it could remove them);
    returns their prefixes."""
    stale = [prefix for prefix, alive in instances().items() if not alive]
    for prefix in stale:
        _remove_instance(prefix)
    return stale


def _check_names(names, domain, bandwidths):
    if not names or len(names) > MAX_HOSTS or len(set(names)) < len(names):
        raise ValueError(f'names must be 1 to {MAX_HOSTS} distinct host names, got {names!r}')
    for name in names:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f'host name {name!r} is not a DNS label (a-z, 0-9 and -, at '
                             'most 63)')
    if not all(_NAME.fullmatch(label) for label in str(domain).split('.')):
        raise ValueError(f'domain {domain!r} is not a DNS name')
    for name, rate in bandwidths.items():
        if name not in names:
            raise ValueError(f'bandwidth names host {name!r}, which is not one of {names}')
        if rate is not None and (not isinstance(rate, str) or rate_bits(rate) is None):
            raise ValueError(f'bandwidth of {name} must be a tc rate such as 100mbit or '
                             f'1gbit, got {rate!r}')


def rate_bits(rate):
    """Bits per second of tc rate `rate` ('100mbit', '1gbit'; units bit, kbit, mbit, gbit);
    None if it is not one."""
    match = _RATE.fullmatch(rate)
    return float(match[1]) * _RATE_UNITS[match[2]] if match else None


def _limit(namespace, device, rate):
    """Limits what `device` sends to `rate` with a token bucket whose burst holds 5 ms at
    that rate (at least 64 KiB: one segment of the veth's segmentation offload)."""
    burst = max(64 << 10, int(rate_bits(rate) / 8 * 0.005))
    _run(['tc', '-n', namespace, 'qdisc', 'add', 'dev', device, 'root', 'tbf', 'rate', rate,
          'burst', str(burst), 'latency', '50ms'], needs='the tbf qdisc (CONFIG_NET_SCH_TBF)')


def _ip(*args, needs):
    _run(['ip', *args], needs)


def _run(argv, needs):
    """Runs a command of iproute2; EmulatedHostsError naming what it `needs` if it fails."""
    result = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode:
        said = ' '.join(result.stderr.split()) or f'exit code {result.returncode}'
        raise EmulatedHostsError(f'emulated hosts: `{" ".join(argv)}` failed (it needs '
                                 f'{needs}): {said}')


def _namespaces():
    """The names of the machine's named network namespaces."""
    result = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True)
    return [line.split()[0] for line in result.stdout.splitlines() if line.strip()]


def _instance_of(name):
    """The instance prefix of one of its namespace names: PREFIX<pid>.<start>-<subnet>."""
    match = re.match(re.escape(PREFIX) + r'\d+\.\d+-\d+', name)
    return match[0] if match else None


def _is_instance(prefix):
    return _instance_of(prefix) == prefix


def _process_token(pid):
    """'<pid>.<start time>' of process `pid`, None if it is gone: a pid reused later by
    another process has another start time."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f'{pid}.{f.read().rsplit(")", 1)[1].split()[19]}'
    except (OSError, IndexError):
        return None


def _owner_token(prefix):
    """'<pid>.<start time>' of the process that created instance `prefix`."""
    return prefix[len(PREFIX):].split('-')[0]


def _alive(prefix):
    return _process_token(owner_pid(prefix)) == _owner_token(prefix)


def _free_subnet():
    """The lowest subnet number no instance on the machine uses (call it locked)."""
    used = {int(prefix.rsplit('-', 1)[1]) for prefix in instances()}
    free = [number for number in range(256) if number not in used]
    if not free:
        raise EmulatedHostsError('emulated hosts: all 256 subnets of 10.231.0.0/16 are in use '
                                 '(remove_stale() removes those of dead processes)')
    return free[0]


@contextlib.contextmanager
def _locked():
    os.makedirs(os.path.dirname(LOCK_FILE), exist_ok=True)
    with open(LOCK_FILE, 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _remove_instance(prefix, started=()):
    """Kills the processes in the instance's namespaces and those of pids `started` (what
    its popen() started, which may not have entered its namespace yet), deletes the
    namespaces (which destroys their links) and their /etc/netns directories."""
    namespaces = [name for name in _namespaces() if _instance_of(name) == prefix]
    namespaces.sort(key=len, reverse=True)  # The hosts first, then the switch.
    pids = [*started, *(int(pid) for name in namespaces for pid in subprocess.run(
        ['ip', 'netns', 'pids', name], capture_output=True, text=True).stdout.split())]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_SECS
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for name in namespaces:
        subprocess.run(['ip', 'netns', 'delete', name], capture_output=True)
    if os.path.isdir(ETC_NETNS):
        for name in os.listdir(ETC_NETNS):
            if _instance_of(name) == prefix:
                shutil.rmtree(os.path.join(ETC_NETNS, name), ignore_errors=True)


def _running(pid):
    """Whether process `pid` exists and is no zombie."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


_owned = []  # Instances this process created and has not removed.


def _remove_at_exit(instance):
    """Removes `instance` at exit, and on SIGTERM or SIGHUP while their handler is the
    default one (which would end the process without exit handlers)."""
    if not _owned:
        atexit.register(_remove_owned)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGHUP):
                if signal.getsignal(signum) == signal.SIG_DFL:
                    signal.signal(signum, _remove_and_die)
    _owned.append(instance)


def _remove_owned():
    while _owned:
        instance = _owned.pop()
        if instance._owner_pid == os.getpid():  # Not in a forked child.
            instance.remove()


def _remove_and_die(signum, frame):
    _remove_owned()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def main(argv=None):
    """`python -m slim_deploy.cluster.emulated_hosts list | partition PREFIX HOST | heal PREFIX
    HOST | remove-stale`; returns the exit code."""
    parser = argparse.ArgumentParser(prog='python -m slim_deploy.cluster.emulated_hosts',
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest='command', required=True)
    commands.add_parser('list', help='list the instances: prefix, owner alive or dead, hosts')
    for name, verb in (('partition', 'cut HOST off'), ('heal', 'reconnect HOST')):
        command = commands.add_parser(name, help=f'{verb} (instance PREFIX)')
        command.add_argument('prefix', metavar='PREFIX')
        command.add_argument('host', metavar='HOST')
    commands.add_parser('remove-stale', help='remove the instances of dead processes')
    args = parser.parse_args(argv)
    prog = parser.prog
    try:
        check()
        if args.command == 'list':
            for prefix, alive in instances().items():
                hosts = EmulatedHosts.attach(prefix).hosts if alive else {}
                print(prefix, 'alive' if alive else 'stale',
                      ' '.join(f'{h.name}={h.address}' for h in hosts.values()))
        elif args.command == 'remove-stale':
            for prefix in remove_stale():
                print('removed', prefix)
        else:
            getattr(EmulatedHosts.attach(args.prefix), args.command)(args.host)
    except (EmulatedHostsError, KeyError) as e:
        print(f'{prog}: error: {e.args[0]}', file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main())
