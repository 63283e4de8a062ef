"""Ends a task of a cluster, in bounded time, when a task it needs stops answering.

TensorFlow waits forever for a task whose host went silent (power or network lost: no TCP
reset ever arrives), so no restart policy fires. A Watchdog thread opens a TCP connection to
each task this one needs every few seconds; a task answers when its host responds: the
handshake completes, which the kernel of a live host does even while the task's process is
busy or frozen (initializing, checkpointing, waiting for slow peers), or the connection is
refused, when the task's process has ended (a task that finished its work is not lost, and
TensorFlow reports at once a crashed task's reset connections). When a task that answered
before has not answered
for `timeout_secs`, the watchdog prints one line naming it and its address and ends the
process with EXIT_CODE, which restart policies retry (the job resumes from the chief's last
checkpoint). A task that never answered yet (its host not up yet) is waited for, as
TensorFlow does, with a warning once the timeout has passed.

    dog = Watchdog('worker:1', 60, needs={'ps:0': 'ps-0.cluster:2222'},
                   while_waiting={'worker:0': 'worker-0.cluster:2222'})
    with dog:                       # probes from here...
        with dog.waiting():         # ...and needs the chief only while waiting for it
            session = create_session()
        train(session)              # ...until here

tasks.watchdog(task, ...) builds the one a task of a training cluster needs. Imports no
TensorFlow.
"""
import contextlib
import errno
import os
import selectors
import socket
import sys
import threading
import time

from absl import logging

from slim_deploy.common.errors import ClusterError

EXIT_CODE = ClusterError.exit_code
PROBES_PER_TIMEOUT = 10
MIN_PROBE_SECS, MAX_PROBE_SECS = 0.5, 5.0
RESTART = "restart the job to resume from the chief's last checkpoint"


def silence(names, here, seconds):
    """The sentence for tasks `names` ('ps:0 (host:port)', ...) that have not answered task
    `here` for `seconds`."""
    verb = 'has' if ', ' not in names else 'have'
    return f'{names} {verb} not answered {here} for {seconds:g} s; {RESTART}'


def answering(addresses, timeout_secs):
    """The names among `addresses` ({name: 'host:port'}) whose TCP handshake completes within
    `timeout_secs` (see responses)."""
    return {name for name, accepted in responses(addresses, timeout_secs).items() if accepted}


def responses(addresses, timeout_secs):
    """{name: whether the connection was accepted (else refused)} of the names among
    `addresses` ({name: 'host:port'}) whose host responds to a TCP handshake within
    `timeout_secs`, all tried at once. A name that does not resolve and silence are no
    response."""
    answered = {}
    with selectors.DefaultSelector() as selector, contextlib.ExitStack() as sockets:
        for name, address in addresses.items():
            host, _, port = address.rpartition(':')
            try:
                family, kind, proto, _, target = socket.getaddrinfo(
                    host.strip('[]'), int(port), type=socket.SOCK_STREAM)[0]
                probe = sockets.enter_context(socket.socket(family, kind, proto))
                probe.setblocking(False)
                code = probe.connect_ex(target)
            except (OSError, ValueError):
                continue
            if code in (0, errno.ECONNREFUSED):
                answered[name] = code == 0
            elif code == errno.EINPROGRESS:
                selector.register(probe, selectors.EVENT_WRITE, name)
        deadline = time.monotonic() + timeout_secs
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
                selector.unregister(key.fileobj)
                code = key.fileobj.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code in (0, errno.ECONNREFUSED):
                    answered[key.data] = code == 0
    return answered


def _exit(message):
    """Prints 'PROGRAM: error: MESSAGE' and ends the process at once with EXIT_CODE (its
    main thread may be blocked in TensorFlow, where no exception reaches it)."""
    sys.stderr.write(f'{os.path.basename(sys.argv[0])}: error: {message}\n')
    sys.stderr.flush()
    os._exit(EXIT_CODE)


class Watchdog:
    """Probes the tasks task `here` ('worker:1') needs while entered (start() to stop()).

    needs: {task name: 'host:port'} of the tasks needed all along; while_waiting: those
    needed only inside waiting() (the chief, for a worker waiting for it to initialize),
    probed all along too. timeout_secs (> 0): how long a task that answered before may go
    without answering. Probes go out every timeout_secs / PROBES_PER_TIMEOUT (0.5 to 5 s),
    so a silent task is found within timeout_secs plus one such period. on_silent: called
    with the one-line message, in the watchdog's thread, when a task is found silent, after
    which the watchdog stops; None: print it and end the process with EXIT_CODE.
    """

    def __init__(self, here, timeout_secs, needs, while_waiting=None, on_silent=None):
        if not timeout_secs > 0:
            raise ValueError(f'timeout_secs must be > 0, got {timeout_secs!r}')
        self.here = here
        self.timeout_secs = timeout_secs
        self.needs = dict(needs)
        self.while_waiting = dict(while_waiting or {})
        self.probe_secs = min(MAX_PROBE_SECS, max(MIN_PROBE_SECS,
                                                  timeout_secs / PROBES_PER_TIMEOUT))
        self._on_silent = on_silent or _exit
        self._waiting = 0  # Depth of waiting() blocks.
        self._stopped = threading.Event()
        self._thread = None
        self.last_answer = {}  # {name: time.monotonic() of its last answer}.

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def start(self):
        """Starts probing (in a daemon thread)."""
        self._stopped.clear()
        self._thread = threading.Thread(target=self._watch, daemon=True, name='watchdog')
        self._thread.start()

    def stop(self):
        """Stops probing; returns once the thread has ended."""
        self._stopped.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    @contextlib.contextmanager
    def waiting(self):
        """Within it, the while_waiting tasks are needed too."""
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1

    def _watch(self):
        started = time.monotonic()
        warned = set()
        addresses = {**self.needs, **self.while_waiting}
        while not self._stopped.is_set():
            round_started = time.monotonic()
            for name in responses(addresses, self.probe_secs):
                self.last_answer[name] = time.monotonic()
            now = time.monotonic()
            needed = {**self.needs, **(self.while_waiting if self._waiting else {})}
            for name, address in needed.items():
                last = self.last_answer.get(name)
                if last is not None and now - last >= self.timeout_secs:
                    self._stopped.set()
                    self._on_silent(silence(f'{name} ({address})', self.here,
                                            self.timeout_secs))
                    return
                if last is None and now - started >= self.timeout_secs and name not in warned:
                    warned.add(name)
                    logging.warning('%s (%s) has not answered %s since it started %.0f s ago: '
                                    'waiting for it to come up', name, address, self.here,
                                    now - started)
            self._stopped.wait(max(0.0, round_started + self.probe_secs - time.monotonic()))
