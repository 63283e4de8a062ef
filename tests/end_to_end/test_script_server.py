"""The tests' runs of scripts through script_server: what a served run's program sees and
what its caller gets are what a fresh interpreter's would be."""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from helpers import run

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
