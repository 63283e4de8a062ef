"""Backup workers (--replicas_to_aggregate below --worker_replicas): a late worker's stale
gradients are dropped, and the others, the chief's aggregation and the token queues go on
without it and end cleanly (1 ps + 3 workers on loopback, one frozen for a while)."""
import re
import signal
import time

import pytest

from slim_deploy.cluster import launch

from clusters import Cluster, assert_restores, steps_run, sync_counts
from helpers import checkpoint_step, train_args

pytestmark = pytest.mark.cluster
FROZEN_SECS = 8


def logged_steps(log):
    """The global steps of a task's progress lines."""
    return [int(step) for step in re.findall(r'step (\d+): loss', log)]


def test_a_late_worker_is_waited_for_by_none_and_its_stale_gradients_are_dropped(
        digits_dir, tmp_path):
    train_dir = tmp_path / 'train'
    args = train_args(train_dir, digits_dir, 120, '--sync_replicas',
                      '--replicas_to_aggregate=2', log_every_n_steps=2)
    with Cluster(tmp_path, args, launch.cluster_spec(launch.LOCALHOST, 1, 3),
                 fresh=True) as cluster:  # Stopped by SIGSTOP.
        cluster.wait_for(lambda: logged_steps(cluster.log('worker:0')))
        late = cluster.processes['worker:2']
        late.send_signal(signal.SIGSTOP)
        frozen_at = logged_steps(cluster.log('worker:0'))[-1]
        time.sleep(FROZEN_SECS)
        advanced = logged_steps(cluster.log('worker:0'))[-1] - frozen_at
        late.send_signal(signal.SIGCONT)
        codes = cluster.wait_workers()
        chief = cluster.log('worker:0')
    assert codes == {'worker:0': 0, 'worker:1': 0, 'worker:2': 0}, chief[-3000:]
    assert advanced >= 4  # The two others updated without the frozen one.
    assert steps_run(chief.splitlines())[0] == 120
    updates, applied, dropped, pushed = sync_counts(chief.splitlines())
    assert (updates, applied) == (120, 240) and pushed == applied + dropped
    assert dropped >= 1  # The late worker's gradient of the step it was frozen in, at least.
    assert checkpoint_step(train_dir) == 120
    assert_restores(train_dir, 120)
