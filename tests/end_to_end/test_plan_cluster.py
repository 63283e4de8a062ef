"""plan_cluster as a user runs it: its predictions for a given compute and for one it times on
this machine, the traffic it reads from the graphs deploy() builds, and its one-line
mistakes."""
import collections
import re

import pytest

from helpers import run_script

pytestmark = pytest.mark.slow

# LeNet on 3-channel 28 x 28 images, 10 classes: its variables' bytes (float32), every one
# read and sent once per step by a ps worker and all-reduced once by a collective one.
LENET_BYTES = 4 * (5 * 5 * 3 * 32 + 32 + 5 * 5 * 32 * 64 + 64 + 7 * 7 * 64 * 1024 + 1024 +
                   1024 * 10 + 10)  # 13,104,936: 13.1 MB.
ROW = re.compile(r'^(\d+) +(ps, a?synchronous(?:, prefetched reads)?(?:, parts of \S+ MB)?|'
                 r'collective) +(\d+|-) +([\d.]+) +([\d,]+) +([\d.]+) +([\d.]+|-) +(.+?)'
                 r'(  <- recommended)?$', re.MULTILINE)
ASYNC, SYNC = 'ps, asynchronous', 'ps, synchronous'
ASYNC_PARTS, SYNC_PARTS = (f'{mode}, parts of 1.0 MB' for mode in (ASYNC, SYNC))
EVERY_MODE = (ASYNC, SYNC, ASYNC_PARTS, SYNC_PARTS, 'collective')  # By default, W > 1.


# A table row: its ps tasks ('-' for collective), sec/step, scaling, busiest link and mark.
Row = collections.namedtuple('Row', 'tasks seconds scaling busiest recommended')


def rows(stdout):
    """{(workers, mode): Row} of the table rows in `stdout`."""
    return {(int(workers), mode): Row(tasks, float(seconds), float(scaling), busiest, bool(mark))
            for workers, mode, tasks, seconds, _, scaling, _, busiest, mark
            in ROW.findall(stdout)}


def test_a_given_compute_is_planned_for_each_size_link_and_mode():
    result = run_script('plan_cluster.py', '--model_name=lenet', '--compute_secs=0.04',
                        '--worker_replicas=1,8', '--link_gbps=1,10', '--num_ps_tasks=2')
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:4] == [
        'Predictions on paper, not measurements (latency and overheads not counted)',
        'model    lenet, 10 classes, 32 examples per clone, 1 clone per worker',
        'compute  40.0 ms per worker step: given (--compute_secs), the forward pass 0.333 of '
        'it (--forward_fraction)',
        'traffic  ps: each worker receives 13.1 MB and sends 13.1 MB per step, in then out (8 '
        'variables with their ops); collective: 13.1 MB all-reduced per step in 3 all-reduces']
    tables = result.stdout.split('\nOn links of ')[1:]
    assert [table.splitlines()[0] for table in tables] == [
        '1 Gbit/s (125 MB/s) each way:', '10 Gbit/s (1250 MB/s) each way:']
    for table in tables:  # The ps modes with the variables whole and in parts of 1 MB.
        found = rows(table)
        assert set(found) == {(1, ASYNC), (1, ASYNC_PARTS), (1, 'collective'),
                              *((8, mode) for mode in EVERY_MODE)}
        assert {row.tasks for row in found.values()} == {'2', '-'}
        assert [key[0] for key, row in found.items() if row.recommended] == [1, 8]
    # One worker alone: collective trains locally, at the compute's 40 ms.
    alone = rows(tables[0])[1, 'collective']
    assert (alone.seconds, alone.scaling, alone.busiest) == (
        0.04, 1.0, 'none: nothing crosses the network')
    # 8 collective workers at 1 Gbit/s: the forward pass (13.3 ms), then the ring's
    # 2 x 7/8 x 13.1 MB each way, 183.5 ms.
    ring = 2 * 7 * LENET_BYTES // 8
    assert rows(tables[0])[8, 'collective'].seconds == pytest.approx(
        0.04 / 3 + ring * 8 / 1e9, abs=5e-4)


def test_parts_spread_lenets_large_layer_over_the_ps_tasks():
    """8 asynchronous workers on 4 ps tasks: fc3/weights (12.85 MB) whole on one task moves
    8 x 12.85 = 102.8 MB each way per step through its link; in 4 parts of 3.21 MB, one per
    task, the busiest task holds a part and conv2/weights (204.8 kB): 8 x 3.42 = 27.3 MB."""
    result = run_script('plan_cluster.py', '--model_name=lenet', '--compute_secs=0.04',
                        '--worker_replicas=8', '--link_gbps=1', '--num_ps_tasks=4')
    assert result.returncode == 0, result.stderr
    found = rows(result.stdout)
    whole, parts = found[8, ASYNC], found[8, ASYNC_PARTS]
    assert (whole.tasks, whole.busiest) == ('4', 'ps task 0: 102.8 MB each way, 822.1 ms')
    assert (parts.tasks, parts.busiest) == ('4', 'ps task 0: 27.3 MB each way, 218.6 ms')


def test_prefetched_reads_cross_while_asynchronous_workers_compute():
    """2 asynchronous workers on 2 ps tasks at 1 Gbit/s, lenet in parts of 1 MB: a worker's
    reads (104.8 ms) pass beside its forward pass (13.3 ms) and its gradients (104.8 ms,
    hiding backprop), so its cycle is 118.2 ms, not 223; the busiest ps task holds a part
    of fc3/weights (6.4 MB) and conv2/weights: 2 x 6.6 MB each way per step, 106.0 ms.
    Synchronous workers do not prefetch: their reads come before the forward pass."""
    result = run_script('plan_cluster.py', '--model_name=lenet', '--compute_secs=0.04',
                        '--worker_replicas=2', '--link_gbps=1', '--num_ps_tasks=2',
                        '--variable_partition_min_mb=1', '--prefetch_reads')
    assert result.returncode == 0, result.stderr
    found, prefetched = rows(result.stdout), 'ps, asynchronous, prefetched reads, parts of 1.0 MB'
    assert set(found) == {(2, prefetched), (2, SYNC_PARTS), (2, 'collective')}
    row = found[2, prefetched]
    assert row.seconds == pytest.approx(0.04 / 3 + LENET_BYTES * 8 / 1e9, abs=5e-4)
    assert (row.tasks, row.busiest) == ('2', 'ps task 0: 13.3 MB each way, 106.0 ms')
    assert found[2, SYNC_PARTS].seconds >= 0.04 / 3 + 2 * LENET_BYTES * 8 / 1e9 - 5e-4


def test_overlap_is_the_share_of_backprop_and_its_sending_run_at_once():
    # 8 collective workers at 1 Gbit/s, half overlapping: the forward pass (13.3 ms), the
    # ring (183.5 ms) and half of backprop's 26.7 ms.
    result = run_script('plan_cluster.py', '--model_name=lenet', '--compute_secs=0.04',
                        '--worker_replicas=8', '--link_gbps=1', '--overlap=0.5')
    assert result.returncode == 0, result.stderr
    assert ('; 0.5 of backprop and its sending overlap (--overlap)'
            in result.stdout.splitlines()[2])
    ring = 2 * 7 * LENET_BYTES // 8
    assert rows(result.stdout)[8, 'collective'].seconds == pytest.approx(
        0.04 / 3 + ring * 8 / 1e9 + 0.5 * 0.08 / 3, abs=5e-4)


def test_16_bit_gradients_halve_the_bytes_and_add_their_casts_to_the_compute():
    result = run_script('plan_cluster.py', '--model_name=lenet', '--compute_secs=0.04',
                        '--worker_replicas=8', '--link_gbps=1', '--gradient_compression=bfloat16')
    assert result.returncode == 0, result.stderr
    compute, traffic = result.stdout.splitlines()[2:4]
    casts = re.search(r'^compute  ([\d.]+) ms per worker step: given \(--compute_secs\), the '
                      r'forward pass 0.333 of it \(--forward_fraction\); plus ([\d.]+) ms for '
                      r'bfloat16 gradients \(([\d.e-]+) ns per float32 byte, timed here\)$',
                      compute)
    assert casts, compute
    step, extra, per_byte = map(float, casts.groups())
    assert step == pytest.approx(40 + extra, abs=0.1)
    assert extra == pytest.approx(LENET_BYTES * per_byte * 1e-6, rel=0.05, abs=0.001)
    assert 'sends 6.6 MB per step' in traffic and '6.6 MB all-reduced per step' in traffic
    # 8 collective workers: the forward pass, then the ring's 2 x 7/8 x 6.55 MB each way.
    ring = 2 * 7 * (LENET_BYTES // 2) // 8
    assert rows(result.stdout)[8, 'collective'].seconds == pytest.approx(
        0.04 / 3 + ring * 8 / 1e9, abs=5e-4)


def test_the_done_case_resnet_v1_50_on_256_workers_at_10_gbits():
    """The command the docs lead with, with the compute given (timing ResNet-50 takes a
    minute): collective is recommended, its ring's 2 x 255/256 of the gradients each way."""
    result = run_script('plan_cluster.py', '--model_name=resnet_v1_50', '--worker_replicas=256',
                        '--link_gbps=10', '--compute_secs=0.3', timeout=600)
    assert result.returncode == 0, result.stderr
    found = rows(result.stdout)
    assert set(found) == {(256, mode) for mode in EVERY_MODE}
    collective = found[256, 'collective']
    assert collective.recommended and collective.busiest.startswith('each worker: ')
    assert 'model    resnet_v1_50, 1001 classes,' in result.stdout


def test_the_compute_is_timed_here_unless_given():
    result = run_script('plan_cluster.py', '--model_name=lenet', '--worker_replicas=4',
                        '--measure_steps=2', '--straggler=2', '--backup_workers=1')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('Timing 2 training steps of lenet on this machine ...\n')
    assert re.search(r'^compute  \S+ m?s per worker step: measured on this machine \(median of '
                     r'2 steps\), the forward pass \S+ m?s$', result.stdout, re.MULTILINE)
    assert ('model    lenet, 10 classes, 32 examples per clone, 1 clone per worker, one worker '
            '2 times slower, 1 backup workers') in result.stdout
    assert set(rows(result.stdout)) == {(4, mode) for mode in EVERY_MODE}


@pytest.mark.parametrize('args, message', [
    (['--worker_replicas=0'], "--worker_replicas takes whole numbers >= 1, comma-separated; "
                              "got '0'"),
    (['--worker_replicas=8,many'], "--worker_replicas takes whole numbers >= 1, "
                                   "comma-separated; got 'many'"),
    (['--link_gbps=0'], "--link_gbps takes numbers > 0 (Gbit/s), comma-separated; got '0'"),
    (['--num_ps_tasks=some'], "--num_ps_tasks takes a number >= 1 or 'choose', got 'some'"),
    (['--variable_partition_min_mb=1,-1'], "--variable_partition_min_mb takes numbers >= 0 "
                                           "(MB), comma-separated; got '-1'"),
    (['--model_name=resnet'], "unknown --model_name 'resnet'; valid: alexnet_v2, cifarnet,"),
    (['--model_name=i3d'], "--model_name 'i3d' takes videos"),
    (['--gradient_compression=int8'], 'flag --gradient_compression=int8: value should be one '
                                      'of <bfloat16|float16|none>'),
    (['--straggler=0.5'], 'flag --straggler=0.5: 0.5 is not number >= 1'),
    (['--forward_fraction=0.3'], '--forward_fraction needs --compute_secs'),
    (['--compute_secs=1', '--forward_fraction=1'], '--forward_fraction must be in [0, 1), '
                                                   'got 1.0'),
    (['--compute_secs=0'], '--compute_secs must be > 0, got 0.0'),
    (['--overlap=1.5'], 'flag --overlap=1.5: 1.5 is not a number in the range [0, 1]'),
    (['--backup_workers=2', '--worker_replicas=1,2'],
     '--backup_workers=2 leaves no gradient to aggregate with --worker_replicas=2'),
])
def test_a_mistake_is_one_line_naming_the_flag(args, message):
    result = run_script('plan_cluster.py', *args)
    assert result.returncode == 2
    assert result.stderr.startswith(f'plan_cluster.py: error: {message}'), result.stderr
    assert result.stderr.count('\n') == 1 and 'Traceback' not in result.stderr
    assert result.stdout == ''
