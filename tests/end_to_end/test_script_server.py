"""The tests' runs of scripts through script_server: what a served run's program sees and
what its caller gets are what a fresh interpreter's would be."""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from helpers import ENV, REPO, run, served, wait_for

PROBE = '''
    import atexit
    import os
    import sys

    atexit.register(print, 'atexit ran')
    print(__name__, sys.argv[1:], os.getcwd(), sys.path[0], os.environ.get('PYTHONUNBUFFERED'))
    print('to stderr', file=sys.stderr)
    print(os.getppid())
    {then}
    '''


def served_and_fresh(tmp_path, then):
    """run() of tmp_path/probe.py (PROBE, ending with `then`) in tmp_path, served and then
    fresh: the two results."""
    (tmp_path / 'probe.py').write_text(textwrap.dedent(PROBE.format(then=then)))
    return [run([sys.executable, tmp_path / 'probe.py', '--flag=1'], cwd=tmp_path, timeout=60,
                fresh=fresh) for fresh in (False, True)]


@pytest.mark.slow
def test_a_served_run_is_a_fresh_one(tmp_path):
    served, fresh = served_and_fresh(tmp_path, 'sys.exit(3)')
    served_lines, fresh_lines = served.stdout.splitlines(), fresh.stdout.splitlines()
    assert int(fresh_lines.pop(1)) == os.getpid() != int(served_lines.pop(1))  # Served.
    assert (served.returncode, served_lines, served.stderr) == (
        fresh.returncode, fresh_lines, fresh.stderr)
    assert served.returncode == 3
    assert served.stdout.splitlines()[0].startswith("__main__ ['--flag=1'] ")
    assert served.stdout.endswith('\natexit ran\n')
    assert served.stderr == 'to stderr\n'


@pytest.mark.slow
def test_an_exception_or_a_signal_ends_a_served_run_as_a_fresh_one(tmp_path):
    served, fresh = served_and_fresh(tmp_path, 'raise RuntimeError("a bug")')
    assert served.returncode == fresh.returncode == 1
    assert 'Traceback' in served.stderr
    assert served.stderr.endswith('RuntimeError: a bug\n') and fresh.stderr.endswith(
        'RuntimeError: a bug\n')
    served, fresh = served_and_fresh(tmp_path, 'os.kill(os.getpid(), 15)')
    assert served.returncode == fresh.returncode == -signal.SIGTERM


@pytest.mark.slow
def test_a_served_run_past_its_timeout_is_killed(tmp_path):
    (tmp_path / 'sleeper.py').write_text(textwrap.dedent('''
        import os, time
        print(os.getpid(), flush=True)
        time.sleep(120)
        '''))
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        run([sys.executable, str(tmp_path / 'sleeper.py')], timeout=5)
    with pytest.raises(ProcessLookupError):
        os.kill(int(raised.value.output), 0)


@pytest.mark.slow
def test_served_runs_run_at_once(tmp_path):
    """One run waits for a file that another, started after it, writes."""
    flag = tmp_path / 'flag'
    (tmp_path / 'waiter.py').write_text(textwrap.dedent(f'''
        import os, time
        deadline = time.monotonic() + 60
        while not os.path.exists({str(flag)!r}) and time.monotonic() < deadline:
            time.sleep(0.05)
        print(os.path.exists({str(flag)!r}))
        '''))
    results = []
    waiter = threading.Thread(target=lambda: results.append(
        run([sys.executable, str(tmp_path / 'waiter.py')])))
    waiter.start()
    (tmp_path / 'writer.py').write_text(f'open({str(flag)!r}, "w").close()')
    writer = run([sys.executable, str(tmp_path / 'writer.py')])
    assert writer.returncode == 0
    waiter.join()
    assert results[0].stdout == 'True\n'


STAND_IN_PROBE = '''
    import os, signal, sys, time
    signal.signal(signal.SIGTERM, lambda *_: (print('SIGTERM', flush=True), sys.exit(143)))
    print(os.getpid(), sys.argv[1:], os.getcwd(), os.environ['TF_CONFIG'], flush=True)
    print('to stderr', file=sys.stderr, flush=True)
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:  # Short sleeps: a signal just before one waits for it.
        time.sleep(0.1)
    '''


@pytest.mark.slow
def test_a_stand_in_is_its_run_to_who_started_it(tmp_path):
    """Its run has its streams, directory and environment; a signal sent to it reaches the
    run, and it ends as the run ended (here by its exit code, 143); SIGKILLed, it takes
    its run with it."""
    (tmp_path / 'probe.py').write_text(textwrap.dedent(STAND_IN_PROBE))
    command = served([sys.executable, tmp_path / 'probe.py'])
    server = os.path.join(REPO, 'tests', 'script_server.py')
    assert command[:3] == [sys.executable, server, '--stand_in']
    env = {**ENV, 'TF_CONFIG': '{"task": 1}'}
    stand_ins = [subprocess.Popen([*command, '60'], cwd=tmp_path, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    runs = []
    for stand_in in stand_ins:
        pid, rest = stand_in.stdout.readline().split(' ', 1)
        assert rest == f"['60'] {tmp_path} {{\"task\": 1}}\n"
        assert stand_in.stderr.readline() == 'to stderr\n'
        runs.append(int(pid))
    assert stand_ins[0].pid not in runs
    stand_ins[0].send_signal(signal.SIGTERM)
    assert stand_ins[0].wait(timeout=30) == 143
    assert stand_ins[0].stdout.read() == 'SIGTERM\n'
    stand_ins[1].kill()
    stand_ins[1].wait()
    wait_for(lambda: not os.path.exists(f'/proc/{runs[1]}'), timeout=10)
    # SIGINT's default action set first: started with SIGINT ignored (a background job of a
    # shell without job control), an interpreter and the runs of its server ignore it.
    (tmp_path / 'killed.py').write_text('import os, signal\n'
                                        'signal.signal(signal.SIGINT, signal.SIG_DFL)\n'
                                        'os.kill(os.getpid(), signal.SIGINT)')
    assert subprocess.run(served([sys.executable, tmp_path / 'killed.py'])).returncode == (
        -signal.SIGINT)
