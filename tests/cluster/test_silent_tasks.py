"""A task whose host goes silent (its link cut: no reset, packets vanish), on emulated hosts
with addresses and names of their own: every task that needs it exits within
--task_timeout_secs naming it, a rerun resumes from the chief's last checkpoint, a shorter
partition heals, and a chief that is slow to initialize is waited for."""
import re
import signal
import time

import pytest

from slim_deploy.cluster import emulated_hosts, launch

from clusters import Cluster, steps_run
from helpers import checkpoint_step, train_args

pytestmark = pytest.mark.cluster

TIMEOUT = 8  # --task_timeout_secs
# Detection may take one probe period more; the process then needs a moment to end.
MARGIN = TIMEOUT / 10 + 4
LAST_STEP = 60
# A last step that a run cut by a partition never reaches first, however fast the machine;
# its rerun then trains RERUN_STEPS past the chief's last checkpoint.
UNREACHED = 10 ** 6
RERUN_STEPS = 20
SYNC = ('--sync_replicas', '--replicas_to_aggregate=2')


@pytest.fixture
def hosts():
    """Emulated hosts ps-0, worker-0 and worker-1 (the test fails saying what is missing
    where they cannot run)."""
    try:
        with emulated_hosts.EmulatedHosts(launch.emulated_host_names(1, 2)) as made:
            yield made
    except emulated_hosts.EmulatedHostsError as e:
        pytest.fail(str(e))


def task_args(tmp_path, digits_dir, last_step, *flags):
    """The tasks' flags: train to `last_step` in tmp_path/train."""
    return train_args(tmp_path / 'train', digits_dir, last_step, '--save_interval_secs=1',
                      f'--task_timeout_secs={TIMEOUT}', *flags)


def start(tmp_path, hosts, digits_dir, num_ps_tasks, *flags, last_step=LAST_STEP, tasks=None,
          fresh=False):
    cluster = launch.emulated_cluster_spec(hosts, num_ps_tasks, 2)
    return Cluster(tmp_path, task_args(tmp_path, digits_dir, last_step, *flags), cluster,
                   hosts=hosts, tasks=tasks, fresh=fresh)


def silence_line(cluster, silent, here):
    job, index = silent.split(':')
    return (f'train_image_classifier.py: error: {silent} ({cluster.cluster[job][int(index)]}) '
            f'has not answered {here} for {TIMEOUT} s; restart the job to resume from the '
            "chief's last checkpoint")


@pytest.mark.parametrize('flags, num_ps_tasks, host, exits, rerun', [
    ((), 1, 'ps-0', {'worker:0': 'ps:0', 'worker:1': 'ps:0'}, True),
    (SYNC, 1, 'ps-0', {'worker:0': 'ps:0', 'worker:1': 'ps:0'}, False),
    # Asynchronous workers need no chief once it has initialized: worker:1 trains on.
    ((), 1, 'worker-0', {'worker:0': 'ps:0'}, False),
    (SYNC, 1, 'worker-0', {'worker:0': 'ps:0', 'worker:1': 'worker:0'}, False),
    (SYNC, 1, 'worker-1', {'worker:0': 'worker:1', 'worker:1': 'ps:0'}, False),
    (('--variable_update=collective',), 0, 'worker-1',
     {'worker:0': 'worker:1', 'worker:1': 'worker:0'}, True),
], ids=['ps-async', 'ps-sync', 'chief-async', 'chief-sync', 'worker-sync', 'worker-collective'])
def test_every_task_that_needs_a_silent_host_exits_naming_it(
        digits_dir, tmp_path, hosts, flags, num_ps_tasks, host, exits, rerun):
    train_dir = tmp_path / 'train'
    with start(tmp_path, hosts, digits_dir, num_ps_tasks, *flags, last_step=UNREACHED) as job:
        job.wait_for(lambda: (checkpoint_step(train_dir) or 0) >= 10)
        hosts.partition(host)
        cut = time.monotonic()
        for task, silent in exits.items():
            assert job.processes[task].wait(timeout=TIMEOUT + 60) == 75, job.log(task)[-3000:]
            assert time.monotonic() - cut < TIMEOUT + MARGIN
            assert job.log(task).splitlines()[-1] == silence_line(job, silent, task)
        if not rerun:
            return
        saved = checkpoint_step(train_dir)
        job.close()
        hosts.heal(host)
        job.args = task_args(tmp_path, digits_dir, saved + RERUN_STEPS, *flags)
        for task in job.processes:
            job.start(task)
        codes = job.wait_workers()
    assert codes == {'worker:0': 0, 'worker:1': 0}, job.log('worker:0', 1)[-3000:]
    assert f'Resuming from {train_dir}/model.ckpt-{saved}' in job.log('worker:0', 1)
    assert steps_run(job.log('worker:0', 1).splitlines())[0] == saved + RERUN_STEPS
    assert checkpoint_step(train_dir) == saved + RERUN_STEPS


def test_a_partition_shorter_than_the_timeout_heals_with_nothing_lost(digits_dir, tmp_path,
                                                                      hosts):
    train_dir = tmp_path / 'train'
    with start(tmp_path, hosts, digits_dir, 1) as job:
        job.wait_for(lambda: (checkpoint_step(train_dir) or 0) >= 10)
        hosts.partition('ps-0')
        time.sleep(TIMEOUT / 2)
        hosts.heal('ps-0')
        codes = job.wait_workers()
    assert codes == {'worker:0': 0, 'worker:1': 0}, job.log('worker:0')[-3000:]
    assert steps_run(job.log('worker:0').splitlines())[0] == LAST_STEP
    assert checkpoint_step(train_dir) == LAST_STEP
    assert 'error' not in job.log('worker:0') + job.log('worker:1')


def test_a_chief_slow_to_initialize_is_waited_for(digits_dir, tmp_path, hosts):
    """The chief, frozen (SIGSTOP) for two timeouts before it initializes the variables,
    still answers (its host's kernel completes the handshakes): worker:1 waits for it."""
    train_dir = tmp_path / 'train'
    # The chief starts alone: without its ps task it cannot initialize.
    with start(tmp_path, hosts, digits_dir, 1, tasks=['worker:0'],
               fresh=True) as job:  # Stopped by SIGSTOP.
        job.wait_for(lambda: 'Global batch' in job.log('worker:0'))
        job.processes['worker:0'].send_signal(signal.SIGSTOP)
        job.start('ps:0')
        job.start('worker:1')
        job.wait_for(lambda: 'Global batch' in job.log('worker:1'))
        time.sleep(2 * TIMEOUT)
        assert job.processes['worker:1'].poll() is None
        assert not re.search(r'step \d+: loss', job.log('worker:1'))  # Still waiting.
        job.processes['worker:0'].send_signal(signal.SIGCONT)
        codes = job.wait_workers()
    assert codes == {'worker:0': 0, 'worker:1': 0}, job.log('worker:1')[-3000:]
    assert checkpoint_step(train_dir) == LAST_STEP
