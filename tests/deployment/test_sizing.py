"""The sizing planner's arithmetic (slim_deploy.deployment.sizing) on made-up steps whose
seconds are worked out by hand in each test, and its rescaling of a small graph's traffic
against the traffic of graphs deploy() builds at the other size.

Links of 1 Gbit/s move 125,000 bytes per millisecond: 1 MB takes 8 ms. Each ps step here has
two variables, a and b, of 500 kB: a worker receives 1 MB of reads and sends 1 MB of
gradients, each gradient waiting for both reads (in then out: 2 MB, 16 ms). The compute is
30 ms per worker step, 10 ms of it the forward pass.
"""
import dataclasses

import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import network_traffic, sizing
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.deployment.network_traffic import (
    EACH_WAY,
    IN_THEN_OUT,
    OUT_THEN_IN,
    AllReduces,
    Link,
    PsGroup,
    StepTraffic,
)
from slim_deploy.deployment.sizing import ASYNC_PS, COLLECTIVE, SYNC_PS, Compute
from slim_deploy.image_classifier import sizing_figures

from graphs import CPUS, built

MB = 1_000_000
COMPUTE = Compute(seconds=0.030, forward=0.010)


def ps_step():
    """A ps step of 2 workers on 1 ps task: a and b, read (500 kB each) before any gradient
    (500 kB each) is sent."""
    groups = tuple(PsGroup(name, 0, received=((f'{name}_gradient', MB // 2, MB),),
                           sent=((f'{name}_read', MB // 2, MB),)) for name in 'ab')
    return StepTraffic(workers=2, worker=Link('worker', MB, MB, 2 * MB, IN_THEN_OUT),
                       ps_tasks=(Link('ps task 0', 2 * MB, 2 * MB, 2 * MB, EACH_WAY),),
                       all_reduces=None, groups=groups)


def collective_step():
    """A collective step of 2 workers of 1 clone all-reducing 1 MB of gradients."""
    return StepTraffic(workers=2, worker=Link('worker', MB, MB, MB, EACH_WAY), ps_tasks=(),
                       all_reduces=AllReduces(count=2, bytes=MB, members=2, local_members=1))


def test_collective_overlaps_the_ring_with_backprop_not_the_forward_pass():
    """4 members: the ring moves 2 x 3/4 x 1 MB = 1.5 MB each way, 12 ms at 1 Gbit/s, within
    backprop's 20 ms: the step is the compute, 30 ms. At 0.1 Gbit/s the ring's 120 ms come
    after the forward pass: 130 ms."""
    fast = sizing.collective(collective_step(), COMPUTE, workers=4, link_gbps=1)
    assert fast.seconds == pytest.approx(0.030)
    assert fast.traffic.worker == Link('worker', 1_500_000, 1_500_000, 1_500_000, EACH_WAY)
    assert fast.traffic.all_reduces.members == 4 and fast.traffic.workers == 4
    assert fast.bound == pytest.approx(0.012) and fast.bound_ratio == pytest.approx(2.5)
    assert (fast.mode, fast.ps_tasks, fast.applied) == (COLLECTIVE, None, 4)
    assert fast.scaling == pytest.approx(1)
    slow = sizing.collective(collective_step(), COMPUTE, workers=4, link_gbps=0.1)
    assert slow.seconds == pytest.approx(0.010 + 0.120)
    assert slow.scaling == pytest.approx(0.030 / 0.130)
    assert slow.bound_ratio == pytest.approx(0.130 / 0.120)


def test_collective_members_are_every_clone_of_every_worker():
    """2 workers of 2 clones: 4 members, 2 on each worker, the same ring as 4 workers of 1;
    1 worker of 2 clones all-reduces on its own machine: no network, bound 0."""
    two_by_two = sizing.collective(collective_step(), COMPUTE, workers=2, link_gbps=1,
                                   clones=2)
    assert two_by_two.traffic.worker.bytes == 1_500_000
    assert two_by_two.traffic.all_reduces.local_members == 2
    alone = sizing.collective(collective_step(), COMPUTE, workers=1, link_gbps=1, clones=2)
    assert alone.seconds == pytest.approx(0.030)
    assert alone.bound == 0 and alone.bound_ratio is None


def test_every_collective_member_waits_for_a_straggler():
    """One worker twice as slow: forward 20 ms, backprop 40 ms (the ring's 12 ms within)."""
    late = sizing.collective(collective_step(), COMPUTE, workers=4, link_gbps=1, straggler=2)
    assert late.seconds == pytest.approx(0.060)
    assert late.scaling == pytest.approx(0.5)


def test_overlap_hides_only_its_share_of_the_shorter_of_backprop_and_the_sending():
    """Half an overlap: collective on 4 members at 1 Gbit/s hides 6 of the ring's 12 ms behind
    backprop's 20: 10 + 20 + 6 = 36 ms. An asynchronous worker without overlap reads (8 ms),
    computes (30 ms), then sends (8 ms): 46 ms. A slower worker keeps its overlap."""
    half = dataclasses.replace(COMPUTE, overlap=0.5)
    collective = sizing.collective(collective_step(), half, workers=4, link_gbps=1)
    assert collective.seconds == pytest.approx(0.036)
    assert collective.scaling == pytest.approx(0.030 / 0.036)
    none = dataclasses.replace(COMPUTE, overlap=0)
    cycle = sizing.asynchronous_ps(ps_step(), none, workers=2, link_gbps=1, ps_tasks=1)
    assert cycle.seconds == pytest.approx(0.046)
    assert half.times(2) == Compute(0.060, 0.020, overlap=0.5)


def test_asynchronous_workers_read_compute_then_send_and_share_the_ps_link():
    """A worker's cycle: its reads (8 ms), the forward pass (10 ms), backprop (20 ms) while
    its gradients pass (8 ms): 38 ms. 4 workers' steps pass 4 MB each way through ps task 0,
    32 ms: the cycle bounds the step. 8 workers need 64 ms of the ps link: it bounds the
    step, unless 2 ps tasks carry 32 ms each."""
    four = sizing.asynchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=1)
    assert four.traffic.ps_tasks == (Link('ps task 0', 4 * MB, 4 * MB, 4 * MB, EACH_WAY),)
    assert four.seconds == pytest.approx(0.038)
    assert four.bound == pytest.approx(0.032) and four.traffic.busiest == four.traffic.ps_tasks
    assert (four.mode, four.ps_tasks, four.applied) == (ASYNC_PS, 1, 4)
    assert four.scaling == pytest.approx(0.030 / 0.038)
    eight = sizing.asynchronous_ps(ps_step(), COMPUTE, workers=8, link_gbps=1, ps_tasks=1)
    assert eight.seconds == pytest.approx(0.064) and eight.bound_ratio == pytest.approx(1)
    spread = sizing.asynchronous_ps(ps_step(), COMPUTE, workers=8, link_gbps=1, ps_tasks=2)
    assert [link.bytes for link in spread.traffic.ps_tasks] == [4 * MB, 4 * MB]
    assert spread.seconds == pytest.approx(0.038)


def test_choosing_ps_tasks_takes_the_fewest_within_one_percent_of_the_best():
    """8 workers: 1 task takes 64 ms, 2 (a task per variable, the least) 38 ms: 2. 4 workers:
    1 task is as good as 2: 1."""
    assert sizing.asynchronous_ps(ps_step(), COMPUTE, 8, link_gbps=1).ps_tasks == 2
    assert sizing.asynchronous_ps(ps_step(), COMPUTE, 4, link_gbps=1).ps_tasks == 1


def test_prefetched_reads_cross_while_the_worker_computes_and_sends():
    """Prefetched, a worker's reads (8 ms) pass beside its forward pass and backprop (30 ms),
    which hides its gradients (8 ms): a cycle of 30 ms, not 38, its link each way; 4 workers
    on 2 ps tasks (16 ms each) step every 30 ms, on 1 task (32 ms) every 32. At 0.1 Gbit/s
    the reads (80 ms) outlast the forward pass and the gradients (10 + 80): 2 workers on 2
    ps tasks (80 ms each) step every 90 ms, against 80 + 10 + 80 without prefetching."""
    four = sizing.asynchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=2,
                                  prefetch_reads=True)
    assert four.seconds == pytest.approx(0.030) and four.prefetch_reads
    assert four.traffic.worker == Link('worker', MB, MB, MB, EACH_WAY)
    assert sizing.asynchronous_ps(ps_step(), COMPUTE, 4, 1, 1, prefetch_reads=True).seconds == (
        pytest.approx(0.032))
    slow = [sizing.asynchronous_ps(ps_step(), COMPUTE, 2, 0.1, 2, prefetch_reads=prefetch)
            for prefetch in (True, False)]
    assert [p.seconds for p in slow] == [pytest.approx(0.090), pytest.approx(0.170)]


def test_asynchronous_workers_do_not_wait_for_a_straggler():
    """4 workers on 2 ps tasks (16 ms of the link per step), one 3 times slower: its cycle is
    8 + 30 + max(60, 8) = 98 ms, the others' 38 ms; the four step 3/38 + 1/98 times per ms,
    and a step of every worker takes 4 over that."""
    late = sizing.asynchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=2,
                                  straggler=3)
    assert late.seconds == pytest.approx(4 / (3 / 0.038 + 1 / 0.098))
    assert late.scaling == pytest.approx(0.030 / late.seconds)


def test_synchronous_workers_read_in_turn_and_the_last_computes_after_all_reads():
    """4 workers on 1 ps task: between updates it sends 4 MB of reads, one worker's after
    another, then the last worker's 1 MB of gradients still pass: 5 MB out then in, 40 ms.
    That last worker computes its forward pass (10 ms) after its reads and sends its
    gradients (8 ms) during its backprop (20 ms): 32 + 10 + 20 = 62 ms."""
    sync = sizing.synchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=1)
    assert sync.traffic.ps_tasks == (Link('ps task 0', 4 * MB, 4 * MB, 5 * MB, OUT_THEN_IN),)
    assert sync.traffic.synchronous
    assert sync.bound == pytest.approx(0.040)
    assert sync.seconds == pytest.approx(0.062)
    assert (sync.mode, sync.applied) == (SYNC_PS, 4)
    assert sync.scaling == pytest.approx(0.030 / 0.062)


def test_the_last_worker_to_read_can_compute_at_a_pace_of_its_own():
    """Hosts sharing cores: the last worker to read computes while the others wait, here in
    15 ms (forward 5): 32 + 5 + 10 = 47 ms, above every worker's own cycle at the shared
    pace (8 + 10 + 20 = 38 ms); the scaling still counts the shared pace's 30 ms."""
    sync = sizing.synchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=1,
                                 last_reader=Compute(seconds=0.015, forward=0.005))
    assert sync.seconds == pytest.approx(0.047)
    assert sync.scaling == pytest.approx(0.030 / 0.047)


def test_synchronous_workers_wait_for_a_straggler_unless_backup_workers_drop_it():
    """A worker twice as slow, last to read: 32 + 20 + 40 = 92 ms. With a backup worker (an
    update takes 3 gradients of 4) the update does not wait for it, the workers are not in
    lockstep (the ps link each way: 4 MB, 32 ms): 32 - 8 + 10 + 20 = 54 ms, applying 3
    workers' steps."""
    late = sizing.synchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=1,
                                 straggler=2)
    assert late.seconds == pytest.approx(0.092)
    for straggler in (1, 2):
        backed = sizing.synchronous_ps(ps_step(), COMPUTE, workers=4, link_gbps=1, ps_tasks=1,
                                       straggler=straggler, backup_workers=1)
        assert backed.traffic.ps_tasks[0].rule == EACH_WAY and not backed.traffic.synchronous
        assert backed.seconds == pytest.approx(0.054)
        assert backed.applied == 3
        assert backed.scaling == pytest.approx(3 * 0.030 / (4 * 0.054))


def test_a_worker_alone_on_a_ps_task_pays_its_own_link():
    """One worker: its cycle, 38 ms; no synchronous mode; collective needs no network."""
    predictions = sizing.plan(ps_step(), collective_step(), COMPUTE, workers=1, link_gbps=1)
    assert [(p.mode, round(p.seconds, 6)) for p in predictions] == [
        (ASYNC_PS, 0.038), (COLLECTIVE, 0.030)]
    assert sizing.recommended(predictions).mode == COLLECTIVE


def test_plan_leaves_out_what_it_has_no_traffic_for_and_synchronous_without_enough_workers():
    assert [p.mode for p in sizing.plan(ps_step(), None, COMPUTE, 4, 1)] == [ASYNC_PS, SYNC_PS]
    assert [p.mode for p in sizing.plan(None, collective_step(), COMPUTE, 4, 1)] == [COLLECTIVE]
    assert [p.mode for p in sizing.plan(ps_step(), None, COMPUTE, 2, 1, backup_workers=2)] == [
        ASYNC_PS]


def test_compression_costs_its_gradients_float32_bytes_times_the_cost_per_byte():
    """A collective step all-reducing 1 MB of 16-bit gradients casts 2 MB of float32 ones;
    a ps step sending 1 MB, the same. At 0.5 ns per byte: 1 ms."""
    assert sizing.compression_seconds(collective_step(), 0.5e-9) == pytest.approx(0.001)
    assert sizing.compression_seconds(ps_step(), 0.5e-9) == pytest.approx(0.001)


def test_the_cost_of_16_bit_gradients_is_timed_per_byte_and_none_costs_nothing():
    assert sizing_figures.compression_seconds_per_byte('none') == 0
    for name in ('bfloat16', 'float16'):
        per_byte = sizing_figures.compression_seconds_per_byte(name, steps=2)
        # Casting and summing 16 MB takes this CPU well under 160 ms.
        assert 0 <= per_byte < 1e-8


def test_parameter_server_strategys_workers_read_each_penalized_weight_twice():
    """lenet on 28x28x3 images: its 4 weights, L2-penalized, cross a second time for their
    penalty: conv1 5x5x3x32, conv2 5x5x32x64, fc3 3136x1024, fc4 1024x10 float32s."""
    ps, _ = sizing_figures.step_traffics('lenet', 4, 10)
    strategy = sizing_figures.strategy_ps_traffic('lenet', 4, 10)
    weights = 4 * (5 * 5 * 3 * 32 + 5 * 5 * 32 * 64 + 3136 * 1024 + 1024 * 10)
    assert strategy.worker.bytes_in == ps.worker.bytes_in + weights
    assert strategy.worker.bytes_out == ps.worker.bytes_out
    assert sum(group.bytes for group in strategy.groups) == sum(
        group.bytes for group in ps.groups) + weights


def test_the_recommended_mode_scales_best_and_ties_go_to_the_simpler_mode():
    """At 1 Gbit/s with 4 workers: collective 1.0, asynchronous 30/38, synchronous 30/62. With
    a straggler 3 times slower the asynchronous workers (0.75 of the compute) beat the
    others (1/3). Within 1%, collective goes before synchronous before asynchronous."""
    predictions = sizing.plan(ps_step(), collective_step(), COMPUTE, 4, 1)
    assert sizing.recommended(predictions).mode == COLLECTIVE
    late = sizing.plan(ps_step(), collective_step(), COMPUTE, 4, 1, ps_tasks=2, straggler=3)
    assert sizing.recommended(late).mode == ASYNC_PS
    tied = [dataclasses.replace(prediction, scaling=scaling)
            for prediction, scaling in zip(predictions, (0.995, 1.0, 0.991))]
    assert sizing.recommended(tied).mode == COLLECTIVE
    assert sizing.recommended(tied[:2]).mode == SYNC_PS


def test_plan_rows_print_each_mode_and_mark_the_recommended_one():
    plans = [sizing.plan(ps_step(), collective_step(), COMPUTE, workers, 1, ps_tasks=1)
             for workers in (1, 4)]
    assert sizing.plan_rows(plans, examples_per_worker_step=32) == [
        'workers  mode              ps tasks  sec/step  examples/s  scaling  step/bound  '
        'busiest link: bytes per step, rule, the bound',
        '1        ps, asynchronous  1         0.038     842         0.79     2.38        '
        'each worker: 2.0 MB in then out, 16.0 ms',
        '1        collective        -         0.030     1,067       1.00     -           '
        'none: nothing crosses the network  <- recommended',
        '4        ps, asynchronous  1         0.038     3,368       0.79     1.19        '
        'ps task 0: 4.0 MB each way, 32.0 ms',
        '4        ps, synchronous   1         0.062     2,065       0.48     1.55        '
        'ps task 0: 5.0 MB out then in, 40.0 ms',
        '4        collective        -         0.030     4,267       1.00     2.50        '
        'each worker: 1.5 MB each way, 12.0 ms  <- recommended']


@pytest.mark.parametrize('call, message', [
    (lambda: Compute(0, 0), 'compute needs 0 < seconds and 0 <= forward <= seconds'),
    (lambda: Compute(0.01, 0.02), 'compute needs 0 < seconds'),
    (lambda: Compute(0.01, 0.005, overlap=1.5), 'compute needs 0 <= overlap <= 1'),
    (lambda: sizing.collective(collective_step(), COMPUTE, 0, 1), 'workers must be a whole'),
    (lambda: sizing.collective(collective_step(), COMPUTE, 2.5, 1), 'workers must be a whole'),
    (lambda: sizing.collective(collective_step(), COMPUTE, 2, 0), 'link_gbps must be'),
    (lambda: sizing.collective(collective_step(), COMPUTE, 2, 1, straggler=0.5),
     'straggler must be a factor >= 1'),
    (lambda: sizing.collective(ps_step(), COMPUTE, 2, 1), 'needs the traffic of a step that '
                                                          'all-reduces'),
    (lambda: sizing.asynchronous_ps(collective_step(), COMPUTE, 2, 1), 'needs the traffic of '
                                                                       'a step with ps tasks'),
    (lambda: sizing.asynchronous_ps(ps_step(), COMPUTE, 2, 1, ps_tasks=0), 'ps_tasks must be'),
    (lambda: sizing.synchronous_ps(ps_step(), COMPUTE, 1, 1), 'synchronous workers need'),
    (lambda: sizing.synchronous_ps(ps_step(), COMPUTE, 3, 1, backup_workers=3),
     'synchronous workers need'),
])
def test_bad_arguments_are_value_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# Graphs deploy() builds: the rescaled traffic of a small one is that of one built at the size.

def two_variables(loss=lambda a, b: tf.reduce_sum(a) + tf.reduce_sum(b * b)):
    """model_fn of variables a (1000 floats) and b (3000) and loss(a, b)."""
    def model_fn():
        tf.losses.add_loss(loss(tf.get_variable('a', [1000]), tf.get_variable('b', [3000])))
    return model_fn


def traffic_of(config, model_fn=None):
    """The StepTraffic of the graph deploy() builds with `config` and `model_fn` (None:
    two_variables()), training by gradient descent."""
    return network_traffic.step_traffic(built(config, model_fn or two_variables()), config)


def test_a_ps_step_rescaled_is_the_step_of_a_graph_of_that_size():
    """2 workers on 1 ps task, rescaled to 5 workers on 2 tasks: the links of worker 0's graph
    of 5 workers on 2 tasks spread by bytes."""
    small = traffic_of(DeploymentConfig(num_replicas=2, num_ps_tasks=1))
    large_config = DeploymentConfig(num_replicas=5, num_ps_tasks=2, ps_strategy='bytes')
    large = traffic_of(large_config)
    predicted = sizing.asynchronous_ps(small, COMPUTE, workers=5, link_gbps=1, ps_tasks=2)
    assert sorted(predicted.traffic.ps_tasks, key=lambda link: link.bytes) == sorted(
        large.ps_tasks, key=lambda link: link.bytes)
    assert predicted.traffic.worker == large.worker
    assert predicted.traffic.seconds(1) == large.seconds(1)


def test_synchronous_links_are_those_of_a_sync_replicas_graph_but_its_scalars():
    """3 synchronous workers, each gradient waiting for both reads (loss (sum(a) + sum(b))^2):
    the ps link of a SyncReplicasOptimizer's graph passes out then in the bytes sizing
    derives from a graph of 2 asynchronous workers (3 workers' reads, 48 kB, then the last
    one's gradients, 16 kB), and its protocol's scalars besides: a local step of 8 bytes to
    each of the 2 accumulators, and a token of 8 bytes back, per worker."""
    squared = two_variables(lambda a, b: tf.square(tf.reduce_sum(a) + tf.reduce_sum(b)))
    small = traffic_of(DeploymentConfig(num_replicas=2, num_ps_tasks=1), squared)
    config = DeploymentConfig(num_replicas=3, num_ps_tasks=1)
    with tf.Graph().as_default() as graph:
        optimizer = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 3,
                                                   total_num_replicas=3)
        deploy(config, squared, optimizer=optimizer)
        optimizer.ready_for_local_init_op.mark_used()  # Else TF logs an error when freed.
    (graph_link,) = network_traffic.step_traffic(graph, config).ps_tasks
    (predicted,) = sizing.synchronous_ps(small, COMPUTE, workers=3, link_gbps=1,
                                         ps_tasks=1).traffic.ps_tasks
    assert predicted == Link('ps task 0', 48_000, 48_000, 64_000, OUT_THEN_IN)
    assert graph_link == Link('ps task 0', 48_000 + 3 * 2 * 8, 48_000 + 3 * 8, 64_000,
                              OUT_THEN_IN)


def test_a_collective_step_rescaled_is_the_step_of_a_graph_of_that_size():
    """2 workers of 1 clone, rescaled to 3 workers of 2 clones: worker 1's graph of that."""
    small = traffic_of(DeploymentConfig(num_replicas=2, variable_update='collective',
                                        clone_on_cpu=True))
    large = traffic_of(DeploymentConfig(num_replicas=3, replica_id=1, num_clones=2,
                                        clone_devices=CPUS, variable_update='collective'))
    predicted = sizing.collective(small, COMPUTE, workers=3, link_gbps=1, clones=2)
    assert predicted.traffic.all_reduces == large.all_reduces
    assert predicted.traffic.worker == large.worker
