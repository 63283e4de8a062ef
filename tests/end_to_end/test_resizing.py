"""A cluster relaunched with another number of workers resumes from its checkpoint, says
how its global batch changed, and trains to the last step, through the launcher on loopback:
collective (whose all-reduces' group size changes) 2 -> 3 and 3 -> 2 workers, ps sync 3 -> 2
and ps async 2 -> 3, the latter with lenet's fc3/weights in a part on each of 2 ps tasks."""
import re

import pytest

from clusters import launch_cluster, steps_run, task_lines
from helpers import checkpoint_step, train_args

pytestmark = pytest.mark.cluster

MODES = {
    'ps_async': lambda workers: (['--num_ps_tasks=2'], ['--variable_partition_min_mb=1']),
    'ps_sync': lambda workers: (['--num_ps_tasks=1', '--sync_replicas'],
                                [f'--replicas_to_aggregate={workers}']),
    'collective': lambda workers: (['--num_ps_tasks=0'], ['--variable_update=collective']),
}


def launch(train_dir, digits_dir, mode, workers, steps):
    options, flags = MODES[mode](workers)
    code, output = launch_cluster(*options, f'--worker_replicas={workers}',
                                  args=train_args(train_dir, digits_dir, steps, *flags,
                                                  '--learning_rate_scaling=linear'))
    assert code == 0, output[-3000:]
    return output


@pytest.mark.parametrize('mode, before, after', [
    ('collective', 2, 3), ('collective', 3, 2), ('ps_sync', 3, 2), ('ps_async', 2, 3)])
def test_a_relaunch_with_other_workers_resumes_and_ends_at_the_last_step(
        tmp_path, digits_dir, mode, before, after):
    train_dir = tmp_path / 'train'
    launch(train_dir, digits_dir, mode, before, 8)
    assert checkpoint_step(train_dir) == 8
    output = launch(train_dir, digits_dir, mode, after, 16)
    chief = task_lines(output, 'worker:0')
    assert any(line.endswith(f'Resuming from {train_dir}/model.ckpt-8') for line in chief)
    # Batch 16 per worker: synchronous and collective steps take every worker's batch.
    per_step = {'ps_async': (16, 16)}.get(mode, (16 * before, 16 * after))
    rates = [0.01 * examples / 256 for examples in per_step]  # Scaled linearly from 256.
    (resized,) = [line for line in chief if 'Resized' in line]
    expected = (f"Resized: {after} workers where the checkpoint's run had {before}; the "
                f'global batch is {per_step[1]} examples per step (was {per_step[0]})')
    if rates[0] != rates[1]:
        expected += f', the learning rate {rates[1]:g} (was {rates[0]:g})'
    assert re.sub(r'^I \d\d:\d\d:\d\d ', '', resized) == expected
    assert steps_run(chief)[0] == 16
    assert checkpoint_step(train_dir) == 16
