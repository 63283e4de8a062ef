"""--seed (TrainConfig's and DeploymentConfig's seed): two runs of the same command give
bit-identical checkpoints, compared tensor by tensor at two global steps (the second after
a resumption; at the first only for replicated mobilenet_v1), in one process with 2 clones
(parameter_server and replicated) and as collective and synchronous ps clusters; another
seed gives other values; asynchronous ps workers say in one line that their run is not
bit-reproducible."""
import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment.model_deploy import DeploymentConfig
from slim_deploy.image_classifier.config import TrainConfig

from clusters import launch_cluster
from helpers import TRAIN, run, train_args

STEPS = (6, 12)  # The run stops at the first, then resumes to the second.


def checkpoint_values(train_dir, step):
    """{tensor name: value} of train_dir's checkpoint of global step `step`."""
    reader = tf.train.load_checkpoint(str(train_dir / f'model.ckpt-{step}'))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def differing(a_dir, b_dir, step):
    """Names of the tensors whose values differ between two train_dirs' checkpoints of
    `step` (which hold the same tensors)."""
    a, b = checkpoint_values(a_dir, step), checkpoint_values(b_dir, step)
    assert a.keys() == b.keys() and len(a) > 8
    return sorted(name for name in a if not np.array_equal(a[name], b[name]))


def train_resuming(tmp_path, digits_dir, name, *flags, launch=None, stops=STEPS, outputs=None,
                   fresh=False):
    """Trains to each of `stops` in tmp_path/name (resuming), with `flags`, as one
    process or through the launcher with `launch` (its options), the processes started
    afresh if `fresh`, else served, appending the launcher's output of each to `outputs` (a
    list; None: not kept); returns the train_dir."""
    train_dir = tmp_path / name
    for steps in stops:
        args = train_args(train_dir, digits_dir, steps, *flags, log_every_n_steps=100)
        if launch is None:
            result = run([*TRAIN, *args], timeout=300, fresh=fresh)
            assert result.returncode == 0, result.stderr[-3000:]
        else:
            code, output = launch_cluster(*launch, args=args, fresh=fresh)
            assert code == 0, output[-3000:]
            if outputs is not None:
                outputs.append(output)
    return train_dir


@pytest.mark.slow
@pytest.mark.parametrize('flags, stops', [
    # cifarnet's preprocessing crops and flips at random; lenet drops out.
    (('--num_clones=2', '--model_name=cifarnet', '--train_image_size=16'), STEPS),
    # mobilenet_v1: batch norm, inception's preprocessing (random boxes, colors); not
    # resumed (a resumption is the same in every mode: cifarnet's and the clusters' show it).
    (('--num_clones=2', '--variable_update=replicated', '--model_name=mobilenet_v1',
      '--train_image_size=32', '--batch_size=8'), STEPS[:1]),
], ids=['parameter_server', 'replicated'])
def test_seeded_runs_in_one_process_are_bit_identical(tmp_path, digits_dir, flags, stops):
    first = train_resuming(tmp_path, digits_dir, 'first', '--seed=7', *flags, stops=stops)
    # Fresh: the second run draws a hash seed other than the served first's, as a user's
    # runs each draw their own.
    second = train_resuming(tmp_path, digits_dir, 'second', '--seed=7', *flags, stops=stops,
                            fresh=True)
    for step in stops:
        assert differing(first, second, step) == []
    if '--variable_update=replicated' not in flags:  # One case shows it; it is the seed's.
        other = train_resuming(tmp_path, digits_dir, 'other', '--seed=8', *flags,
                               stops=STEPS[:1])
        assert len(differing(first, other, STEPS[0])) > 8


@pytest.mark.cluster
def test_seeded_collective_workers_are_bit_identical(tmp_path, digits_dir):
    launch = ('--num_ps_tasks=0', '--worker_replicas=2')
    runs = [train_resuming(tmp_path, digits_dir, name, '--seed=7', '--variable_update=collective',
                           launch=launch, fresh=name == 'second')
            for name in ('first', 'second')]  # The second run's hash seeds are other.
    for step in STEPS:
        assert differing(*runs, step) == []


@pytest.mark.cluster
def test_seeded_synchronous_workers_aggregate_in_worker_order(tmp_path, digits_dir):
    """Each update takes every micro-batch's gradient of each worker (none dropped; the global
    batch counts both), summed in worker order: two runs give the same bits."""
    launch = ('--num_ps_tasks=1', '--worker_replicas=2', '--sync_replicas')
    outputs = []
    runs = [train_resuming(tmp_path, digits_dir, name, '--seed=7', '--replicas_to_aggregate=2',
                           '--gradient_accumulation_steps=2', launch=launch, outputs=outputs,
                           fresh=name == 'second')
            for name in ('first', 'second')]  # The second run's hash seeds are other.
    for step in STEPS:
        assert differing(*runs, step) == []
    for output in outputs:  # Each run of 6 updates: 2 workers x 2 micro-batches each.
        assert 'Global batch 64 examples per step, in 2 micro-batches' in output
        assert 'Sync replicas: 6 updates applied 24 gradients; 0 of the 24 gradients pushed' in (
            output)


def test_seeded_synchronous_workers_need_every_workers_gradient(digits_dir):
    flags = {'train_dir': '/nonexistent', 'dataset_dir': digits_dir, 'seed': 1,
             'worker_hosts': 'a:1,b:1,c:1', 'ps_hosts': 'd:1', 'job_name': 'worker', 'task': 0,
             'sync_replicas': True, 'replicas_to_aggregate': 2}
    with pytest.raises(UsageError, match=r"^--seed with --sync_replicas needs "
                       r"--replicas_to_aggregate equal to --worker_replicas=3, got 2: an "
                       r"update of fewer workers' gradients takes those that arrive first$"):
        TrainConfig.from_flags(flags)


@pytest.mark.cluster
def test_seeded_asynchronous_workers_say_their_run_is_not_reproducible(tmp_path, digits_dir):
    code, output = launch_cluster('--num_ps_tasks=1', '--worker_replicas=2',
                                  args=train_args(tmp_path, digits_dir, 4, '--seed=7'))
    assert code == 0, output[-3000:]
    lines = [line for line in output.splitlines() if 'not bit-reproducible' in line]
    assert len(lines) == 2  # One per worker.
    assert lines[0].endswith('seed 7: asynchronous workers apply their gradients to the ps '
                             'tasks in the order they arrive, so this run is not '
                             'bit-reproducible')


def test_each_worker_draws_from_its_own_graph_seed():
    assert DeploymentConfig().graph_seed is None
    assert DeploymentConfig(seed=7).graph_seed == 7
    assert DeploymentConfig(seed=7, num_replicas=3, replica_id=2, num_ps_tasks=1).graph_seed == 9
    with pytest.raises(ValueError, match=r'^seed must be an integer >= 0, got -1$'):
        DeploymentConfig(seed=-1)
