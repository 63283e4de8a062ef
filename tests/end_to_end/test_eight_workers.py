"""Eight workers, each on an emulated host of its own behind a 1 Gbit/s link, train lenet on
the digits to the last step through the launcher: as collective workers, and synchronously
over 2 ps tasks with 2 backup workers (--replicas_to_aggregate=6) while one worker's link is
20 times slower, lenet's fc3/weights in a part on each ps task (--variable_partition_min_mb).
The launcher removes every host it made; the checkpoint restores whole."""

import pytest

from clusters import assert_restores, launch_cluster, steps_run, sync_counts, task_lines
from helpers import checkpoint_step, train_args

pytestmark = pytest.mark.cluster
WORKERS = 8
STEPS = 12


@pytest.mark.parametrize('options, flags', [
    (['--num_ps_tasks=0'], ['--variable_update=collective']),
    (['--num_ps_tasks=2', '--sync_replicas', '--slow_host=worker:7=50mbit'],
     ['--replicas_to_aggregate=6', '--variable_partition_min_mb=1']),
], ids=['collective', 'sync_ps_with_backup_workers'])
def test_eight_workers_on_emulated_hosts_train_to_the_last_step(digits_dir, tmp_path, options,
                                                                flags):
    train_dir = tmp_path / 'train'
    code, output = launch_cluster(
        f'--worker_replicas={WORKERS}', '--emulated_hosts', '--link_bandwidth=1gbit', *options,
        args=train_args(train_dir, digits_dir, STEPS, *flags, log_every_n_steps=4),
        timeout=420)
    assert code == 0, output[-3000:]
    for index in range(WORKERS):
        lines = task_lines(output, f'worker:{index}')
        assert steps_run(lines)[0] == STEPS, '\n'.join(lines[-20:])
    if '--sync_replicas' in options:
        assert sync_counts(task_lines(output, 'worker:0'))[:2] == (STEPS, 6 * STEPS)
        assert 'partitions  1 variable in 2 parts: LeNet/fc3/weights 12.8 MB in 2' in output
    assert checkpoint_step(train_dir) == STEPS
    assert_restores(train_dir, STEPS)
