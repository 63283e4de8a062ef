"""A server of the tests' script runs (helpers.run's) and its client. The server starts as
an entry point does (verbosity.start(): TensorFlow imported, its start-up noise dropped),
imports tf_slim and tf_keras, then forks one process per request that runs `python SCRIPT
ARGS` (or `python -m MODULE ARGS`) from there, so that each run skips the seconds of those
imports (a run that fails on a flag takes 1.5 s instead of 4.2). run() serves scripts only:
modules start fresh, as the launcher and several benchmarks import no TensorFlow, and a
process that has it imported takes most of a second more to end; a benchmark's own
processes (its roles, its launcher's tasks) are served through stand-ins
(stand_in_interpreter() as the benchmarks' BENCHMARKS_PYTHON), and so are the benchmarks
that import TensorFlow themselves (helpers.benchmark_command). The run is otherwise a
process of its own: its own stdin, stdout and stderr (file descriptors the client sends),
directory, environment and exit code, and it ends as the interpreter ends (atexit,
finalization). What it shares with the others is what the interpreter fixes on starting:
the hash seed, the rest of sys.path, and TensorFlow's C++ log level (the entry points'
default, 2). It runs in its client's network and mount namespaces, so a stand-in started on
an emulated host (`ip netns exec NAMESPACE`) gives the run that host's network and
/etc/hosts.

    python tests/script_server.py SOCKET

serves on the Unix socket SOCKET until its stdin closes (its test process ended); run() is
the client, which starts one server per test process on its first request. A request is
one message, JSON {"argv": [SCRIPT, *ARGS] or ["-m", MODULE, *ARGS], "cwd": ..., "env":
{...}} with five file descriptors: stdin, stdout, stderr and the client's network and mount
namespaces; the reply is two lines, the run's pid when it starts and its exit code
(negative: the signal that ended it) when it ends. A client that goes away (closes its
connection, or dies) takes its run with it: the run is killed.

    python tests/script_server.py --stand_in SOCKET SCRIPT ARGS    (or -m MODULE ARGS)

is a process that stands in for `python SCRIPT ARGS` (stand_in_command()), for a program
that starts its own processes (the cluster launcher's tasks, a test's ps and workers): the
run has its stdin, stdout, stderr, directory and environment; the signals it gets are
passed on to the run (all but SIGKILL, which kills the run through the closed connection,
and SIGSTOP, which cannot be passed on: a test that stops a task starts it fresh), and it
ends as the run ended, with its exit code or by its signal.
"""
import atexit
import contextlib
import ctypes
import json
import os
import runpy
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from slim_deploy.image_classifier import verbosity


def serve(path):
    """Accepts requests on `path` until stdin closes; returns None in the server when it
    does, and the request's connection in each process forked for one."""
    verbosity.start()
    import tf_keras  # noqa: F401
    import tf_slim  # noqa: F401
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(f'{path}.new')
    listener.listen()
    os.rename(f'{path}.new', path)  # Clients wait for the path: it accepts once there.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # Each request's process reaps its run.
    events = selectors.DefaultSelector()
    events.register(listener, selectors.EVENT_READ)
    events.register(sys.stdin, selectors.EVENT_READ)
    while True:
        for key, _ in events.select():
            if key.fileobj is sys.stdin:
                return None
            connection, _ = listener.accept()
            if os.fork() == 0:
                events.close()
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                return connection
            connection.close()


def start_run(connection):
    """In a request's process: forks the run, replies with its pid and, once it ended, its
    exit code (killing it first if the client goes away), then exits; in the run, returns
    the request's argv with its stdin, stdout, stderr, directory and environment in place."""
    message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3 + len(NAMESPACES))
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        connection.close()
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
            os.close(fd)
        _enter(fds[3:])
        os.chdir(request['cwd'])
        os.environ.clear()
        os.environ.update(request['env'])
        tempfile.tempdir = None  # Found again from the run's TMPDIR, as a fresh one would.
        return request['argv']
    for fd in fds:
        os.close(fd)
    connection.sendall(f'{pid}\n'.encode())
    watched = selectors.DefaultSelector()
    run_ended = os.pidfd_open(pid)
    watched.register(run_ended, selectors.EVENT_READ)
    watched.register(connection, selectors.EVENT_READ)
    ready = [key.fileobj for key, _ in watched.select()]
    if run_ended not in ready and not connection.recv(1):  # The client is gone: so is its run.
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):  # Unless the client is gone.
        connection.sendall(f'{os.waitstatus_to_exitcode(status)}\n'.encode())
    os._exit(0)


# The namespaces a run shares with its client, and setns(2)'s type of each.
NAMESPACES = {'net': 0x40000000, 'mnt': 0x00020000}  # CLONE_NEWNET, CLONE_NEWNS


def _enter(namespace_fds):
    """In the run: joins each of its client's namespaces (file descriptors of /proc/PID/ns/,
    in NAMESPACES' order) that is not its own already, and closes the descriptors."""
    setns = ctypes.CDLL(None, use_errno=True).setns
    for (kind, nstype), fd in zip(NAMESPACES.items(), namespace_fds):
        if os.fstat(fd).st_ino != os.stat(f'/proc/self/ns/{kind}').st_ino and setns(fd, nstype):
            raise OSError(ctypes.get_errno(), f"joining the client's {kind} namespace")
        os.close(fd)


def run_as_main(argv):
    """Runs argv ([SCRIPT, *ARGS] or ['-m', MODULE, *ARGS]) as the interpreter runs a script
    or a module, as __main__, with sys.argv, sys.path[0] and the PYTHONPATH entries after it
    as it sets them (the server's own are kept)."""
    module = argv[0] == '-m'
    sys.path[0] = os.getcwd() if module else os.path.dirname(os.path.abspath(argv[0]))
    sys.path[1:1] = [entry for entry in os.environ.get('PYTHONPATH', '').split(os.pathsep)
                     if entry and entry not in sys.path]
    if module:
        sys.argv = argv[1:]  # run_module puts the module's path first.
        runpy.run_module(argv[1], run_name='__main__', alter_sys=True)
    else:
        sys.argv = argv
        runpy.run_path(argv[0], run_name='__main__')


def serves(argv):
    """Whether run() can run `argv` (a subprocess argv): this interpreter running a script
    without options of its own, at the entry points' default verbosity (the server imported
    TensorFlow quietly)."""
    argv = [os.fspath(arg) for arg in argv]
    return (len(argv) >= 2 and argv[0] == sys.executable and not argv[1].startswith('-')
            and verbosity.verbosity_in(argv) <= 0)


def stands_in(argv):
    """Whether a stand-in can stand for `argv` (a subprocess argv): one serves() accepts,
    alone or after an emulated host's `ip netns exec NAMESPACE`."""
    return serves(argv[_host_prefix_length(argv):])


def _host_prefix_length(argv):
    """4 if `argv` starts with `ip netns exec NAMESPACE` (EmulatedHosts.command's), else 0."""
    return 4 if [os.fspath(arg) for arg in argv[:3]] == ['ip', 'netns', 'exec'] else 0


_server = None  # (Popen, socket path) of this process's server, once started.
POLL_SECS = 0.1  # How long a client waits for a reply before looking for signals again.


def run(argv, cwd, env, timeout):
    """What subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
    timeout=timeout) returns (or raises), for an `argv` (strings or paths) that serves()
    accepts, run by this process's server (started with `env`: requests must all pass the
    same); stdin is /dev/null."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            open(os.devnull) as null, socket.socket(socket.AF_UNIX) as connection:
        replies = _request(connection, _started(env), argv[1:], cwd, env,
                           [null.fileno(), out.fileno(), err.fileno()])
        deadline = time.monotonic() + timeout
        pid = int(replies.line(deadline))
        try:
            code = int(replies.line(deadline))
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            replies.line(None)
            raise subprocess.TimeoutExpired(argv, timeout, _text(out), _text(err)) from None
        return subprocess.CompletedProcess(argv, code, _text(out), _text(err))


def _request(connection, path, argv, cwd, env, fds):
    """Connects `connection` (a Unix socket) to the server at `path` and asks it to run
    `argv` ([SCRIPT, *ARGS], strings or paths) in directory `cwd` with environment `env` and
    the file descriptors `fds` as stdin, stdout and stderr, in this process's namespaces;
    returns the _Replies to come."""
    connection.connect(path)
    request = json.dumps({'argv': [os.fspath(arg) for arg in argv], 'cwd': os.fspath(cwd),
                          'env': env})
    namespaces = [os.open(f'/proc/self/ns/{kind}', os.O_RDONLY) for kind in NAMESPACES]
    try:
        socket.send_fds(connection, [request.encode()], [*fds, *namespaces])
    finally:
        for fd in namespaces:
            os.close(fd)
    return _Replies(connection)


class _Replies:
    """The lines a server sends on `connection`."""

    def __init__(self, connection):
        self._connection, self._received = connection, b''

    def line(self, deadline):
        """The next line (str), waiting until `deadline` (time.monotonic(); None: no limit),
        then raising TimeoutError. It waits POLL_SECS at a time: a signal that comes just
        before a wait begins (after the interpreter last looked for one) is handled within
        POLL_SECS instead of when the line comes."""
        while b'\n' not in self._received:
            left = POLL_SECS if deadline is None else deadline - time.monotonic()
            self._connection.settimeout(max(min(left, POLL_SECS), 0.001))
            try:
                data = self._connection.recv(4096)
            except TimeoutError:
                if deadline is not None and left <= POLL_SECS:  # The deadline has come.
                    raise
                continue
            if not data:
                raise RuntimeError('the script server ended during a run')
            self._received += data
        line, _, self._received = self._received.partition(b'\n')
        return line.decode()


def stand_in_command(argv, env):
    """The command of a process that stands in for `argv` (a subprocess argv stands_in()
    accepts; on the host `argv` names, if any), run by this process's server (started with
    `env` unless running)."""
    argv = [os.fspath(arg) for arg in argv]
    host = _host_prefix_length(argv)
    return [*argv[:host], *stand_in_interpreter(env), *argv[host + 1:]]


def stand_in_interpreter(env):
    """The command that takes this interpreter's place in a command line (`SCRIPT ARGS` or
    `-m MODULE ARGS` after it) to make that a stand-in, run by this process's server
    (started with `env` unless running)."""
    return [sys.executable, os.path.abspath(__file__), '--stand_in', _started(env)]


# The signals a stand-in passes on to its run (SIGKILL and SIGSTOP cannot be caught).
PASSED_ON = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGABRT, signal.SIGUSR1,
             signal.SIGUSR2, signal.SIGALRM, signal.SIGTERM, signal.SIGCONT)


def stand_in(path, argv):
    """Runs `argv` in the server on socket `path` as this process would (module
    docstring); never returns."""
    run_pid, received = None, []

    def pass_on(signum, _):
        if run_pid is None:
            received.append(signum)
        else:
            os.kill(run_pid, signum)

    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    with socket.socket(socket.AF_UNIX) as connection:
        replies = _request(connection, path, argv, os.getcwd(), dict(os.environ), [0, 1, 2])
        run_pid = int(replies.line(None))
        for signum in received:
            os.kill(run_pid, signum)
        code = int(replies.line(None))
    if code < 0:  # Ends by the run's signal.
        if -code in PASSED_ON:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code % 256)


def _text(file):
    """What a temporary file holds, decoded as subprocess's text mode decodes output."""
    file.seek(0)
    return file.read().decode().replace('\r\n', '\n').replace('\r', '\n')


def _started(env):
    """The socket path of this process's server, starting it (with `env`) unless running."""
    global _server
    if _server is None or _server[0].poll() is not None:
        directory = tempfile.mkdtemp(prefix='script-server-')
        path = os.path.join(directory, 'socket')
        with open(os.path.join(directory, 'log'), 'w') as log:
            server = subprocess.Popen([sys.executable, os.path.abspath(__file__), path],
                                      stdin=subprocess.PIPE, stdout=log, stderr=log,
                                      env=env, cwd='/')
        atexit.register(_stop, server, directory)
        while not os.path.exists(path):
            if server.poll() is not None:
                with open(os.path.join(directory, 'log')) as log:
                    raise RuntimeError(f'the script server ended: {log.read()[-3000:]}')
            time.sleep(0.05)
        _server = server, path
    return _server[1]


def _stop(server, directory):
    """Ends `server` (its stdin closes) and removes its directory."""
    server.stdin.close()
    server.wait()
    shutil.rmtree(directory, ignore_errors=True)


if __name__ == '__main__':
    if sys.argv[1] == '--stand_in':
        stand_in(sys.argv[2], sys.argv[3:])
    connection = serve(sys.argv[1])
    if connection is not None:
        run_as_main(start_run(connection))
