"""How fast a cluster would train, on paper: per mode (asynchronous ps workers, synchronous ps
workers, collective all-reduce), the seconds a step takes on W workers, from what the step
moves over the network and what each worker computes.

    ps_traffic = network_traffic.step_traffic(ps_graph, ps_config)   # e.g. 2 workers, 1 ps
    collective_traffic = network_traffic.step_traffic(graph, collective_config)
    compute = Compute(seconds=0.30, forward=0.10)     # one worker's step, measured or given
    predictions = plan(ps_traffic, collective_traffic, compute, workers=256, link_gbps=10)
    best = recommended(predictions)
    print('\\n'.join(plan_rows([predictions], examples_per_worker_step=32)))

The bytes are network_traffic's, the same the start-up plan's --link_gbps prints: a ps step's
PsGroups (each variable with its reads, gradients and updates) spread over P ps tasks largest
first onto the least-loaded, as ps_strategy='bytes' places them and the plan's advice counts
(network_traffic.spread_links), for W workers, by the plan's rules ('each way' for
asynchronous workers, 'out then in' for synchronous ones); the worker's own link as the
ps step's (it does not change with W or P); and the ring all-reduce's 2 (N - 1) / N x S bytes
each way (network_traffic.AllReduces) for N = W x clones members. A StepTraffic built from
one small graph (2 workers, 1 ps task) thus stands for any W and P.

Units: seconds; bytes; link bandwidth in Gbit/s (10^9 bit/s) each way, full duplex, the same
for every host; t(x) = x x 8 / (link_gbps x 10^9), the seconds x bytes take on a link. The
bytes are the tensors' own: link_gbps is the rate they get (TCP over Ethernet frames of 1,500
bytes carries about 0.94 of the wire's). Latency and the bytes inside function bodies
(network_traffic's caveats) are not counted.

The model. c: the seconds of one worker's step (forward pass, backprop and update, its clones
in parallel on their own devices); c_f of it the forward pass, c_b = c - c_f. One worker may
be a straggler, k >= 1 times slower (c, c_f, c_b all times k). A step is one step of every
worker (an update, for synchronous modes); it applies A worker steps' gradients: W, or
W - backup workers for synchronous ps. Backprop and the sending of its gradients run at
once, the shorter hidden behind the longer by the share o (Compute.overlap; 1: wholly):
b || g = max(b, g) + (1 - o) min(b, g).

- Collective: deploy()'s all-reduce packs cross while backprop computes the gradients of the
  layers below them, but not during the forward pass, and every member waits for the
  slowest:  step = k c_f + (k c_b || t(ring)).
- A ps worker's own cycle: it reads the variables (its link's 'in'), computes the forward
  pass, then sends each gradient as backprop makes it:  cycle(c) = t(L) - t(out) + c_f +
  (c_b || t(out)), L the worker link's bytes by its rule (in + out when every gradient waits
  for every read: t(in) + c_f + (c_b || t(out))). With prefetched reads (--prefetch_reads)
  the next step's values cross while this one computes and sends (its link passes them each
  way):  cycle(c) = max(t(in), c_f + (c_b || t(out))).
- Asynchronous ps: workers do not wait for each other, and a ps task's link serves some
  while others compute; W worker steps need t(L_ps) of the busiest ps link. With a straggler
  the others step at their own pace: worker steps per second r = (W - 1) / cycle(c) +
  1 / cycle(k c), and  step = max(W / r, t(L_ps)).
- Synchronous ps: the busiest ps link passes its bytes 'out then in' (every worker's reads,
  in turn, then the gradients); the last worker to read still computes its forward pass, and
  its backprop overlaps its own gradients, g = t(L_ps.bytes_in / W):  step = max(cycle(c),
  t(L_ps) - g + c_f + (c_b || g)), with c times k when the update waits for every worker.
  That last worker computes while the others wait for the update: where hosts share cores
  (emulated hosts), faster than c, and its compute can be given apart (last_reader).
  With backup workers (an update aggregates W - B gradients, B >= 1) the update does not wait
  for the straggler (c stays c), the ps link passes 'each way' (network_traffic's rule when
  workers do not step in lockstep), and the B slowest gradients are dropped (A = W - B).
- 16-bit gradients (gradient compression): the traffic is that of a step that sends them,
  and the compute gains what their casts and sums cost (compression_seconds).
- Partitioned variables (partition_min_bytes M > 0, train_image_classifier's
  --variable_partition_min_mb): on P ps tasks each variable's PsGroup splits into the parts
  placement.min_size_partitioner(M, P) gives it (PsGroup.split: the reads and gradients in
  shares, what every part takes alike once per task), and the parts spread as variables do.
  The traffic must be of a step whose variables are whole.

Scaling: A x c over W x the step: the examples a step applies per second, over those W
workers computing alone would (1: perfect). The bound: the busiest link's time,
StepTraffic.seconds; its ratio, step / bound (1: network-bound; None without network).
ps tasks None ("choose"): the fewest whose step is within TOLERANCE of the step with a task
per PsGroup, or per part of one when partitioned (the least a ps link can carry).
"""
import dataclasses

from slim_deploy.deployment import network_traffic, placement
from slim_deploy.deployment.network_traffic import EACH_WAY, Link

ASYNC_PS = 'ps, asynchronous'
SYNC_PS = 'ps, synchronous'
COLLECTIVE = 'collective'
# Among modes within TOLERANCE of the best scaling, the first of these is recommended:
# collective needs no ps hosts; synchronous updates are not stale.
PREFERENCE = (COLLECTIVE, SYNC_PS, ASYNC_PS)
TOLERANCE = 0.01  # Relative: steps (and scalings) closer than 1% count as equal.
_UNLIMITED = 2**31 - 1  # Ps tasks: more than any variable has parts.


@dataclasses.dataclass(frozen=True)
class Compute:
    """One worker's computation per step, in seconds: `seconds` the whole step (forward pass,
    backprop and update; its clones in parallel), `forward` the forward pass of it; `overlap`
    the share of the shorter of backprop and the sending of its gradients that runs hidden
    behind the longer (1: all of it; 0: one after the other)."""
    seconds: float
    forward: float
    overlap: float = 1.0

    def __post_init__(self):
        if not 0 < self.seconds or not 0 <= self.forward <= self.seconds:
            raise ValueError(f'compute needs 0 < seconds and 0 <= forward <= seconds, got '
                             f'seconds={self.seconds!r}, forward={self.forward!r}')
        if not 0 <= self.overlap <= 1:
            raise ValueError(f'compute needs 0 <= overlap <= 1, got overlap={self.overlap!r}')

    @property
    def backward(self):
        """Seconds of backprop and update: seconds - forward."""
        return self.seconds - self.forward

    def times(self, factor):
        """This computation `factor` times slower."""
        return dataclasses.replace(self, seconds=self.seconds * factor,
                                   forward=self.forward * factor)

    def backprop_with(self, sending):
        """Seconds of backprop and of `sending` (seconds of its gradients' transfer) run at
        once: max(backward, sending) + (1 - overlap) min(backward, sending)."""
        return (max(self.backward, sending) +
                (1 - self.overlap) * min(self.backward, sending))


@dataclasses.dataclass(frozen=True)
class Prediction:
    """One mode's predicted step on `workers` workers.

    mode: ASYNC_PS, SYNC_PS or COLLECTIVE. ps_tasks: P (None for collective). traffic: the
    StepTraffic of the step at this size (traffic.busiest: its busiest links). seconds: the
    predicted step. bound: traffic.seconds(link_gbps), the busiest link's time (0: no
    network). applied: the worker steps whose gradients a step applies (A). scaling: A x c
    over W x seconds. partition_min_bytes: M, the variables split into parts of about M
    bytes (0: whole). prefetch_reads: asynchronous workers' reads prefetched.
    """
    mode: str
    workers: int
    ps_tasks: int | None
    traffic: network_traffic.StepTraffic
    seconds: float
    bound: float
    applied: int
    scaling: float
    partition_min_bytes: int = 0
    prefetch_reads: bool = False

    @property
    def bound_ratio(self):
        """seconds / bound; None when nothing crosses the network."""
        return self.seconds / self.bound if self.bound else None


def collective(traffic, compute, workers, link_gbps, clones=1, straggler=1.0):
    """The Prediction of collective all-reduce on `workers` workers of `clones` clones, from
    the StepTraffic of a collective step (its all-reduces, of any number of members: a
    worker's link carries their ring alone), the Compute of one worker's step and links of
    `link_gbps` Gbit/s; one worker `straggler` times slower."""
    _check(workers, link_gbps, straggler)
    if traffic.all_reduces is None or traffic.ps_tasks:
        raise ValueError('a collective prediction needs the traffic of a step that '
                         'all-reduces its gradients, without ps tasks')
    reduces = dataclasses.replace(traffic.all_reduces, members=workers * clones,
                                  local_members=clones)
    ring = reduces.network_bytes
    sized = dataclasses.replace(traffic, workers=workers, all_reduces=reduces,
                                worker=Link('worker', ring, ring, ring, EACH_WAY))
    slow = compute.times(straggler)
    seconds = slow.forward + slow.backprop_with(network_traffic.transfer_seconds(ring,
                                                                                 link_gbps))
    return _prediction(COLLECTIVE, sized, None, compute, seconds, workers, link_gbps)


def asynchronous_ps(traffic, compute, workers, link_gbps, ps_tasks=None, straggler=1.0,
                    partition_min_bytes=0, prefetch_reads=False):
    """The Prediction of asynchronous ps workers, from the StepTraffic of a ps step (any
    number of workers and ps tasks; its variables whole), with `ps_tasks` ps tasks (None: the
    fewest within TOLERANCE of the least step) and the variables in parts of about
    `partition_min_bytes` bytes, at most one per ps task (0: whole), their reads prefetched
    if `prefetch_reads`; other arguments as collective's."""
    _check(workers, link_gbps, straggler)

    def predict(tasks):
        sized = _ps_traffic(traffic, workers, tasks, False, partition_min_bytes, prefetch_reads)
        fast = _cycle(sized.worker, compute, link_gbps)
        slow = _cycle(sized.worker, compute.times(straggler), link_gbps)
        steps_per_second = (workers - 1) / fast + 1 / slow
        seconds = max(workers / steps_per_second, sized.seconds(link_gbps))
        return _prediction(ASYNC_PS, sized, tasks, compute, seconds, workers, link_gbps,
                           partition_min_bytes, prefetch_reads)

    return _with_ps_tasks(predict, traffic, ps_tasks, partition_min_bytes)


def synchronous_ps(traffic, compute, workers, link_gbps, ps_tasks=None, straggler=1.0,
                   backup_workers=0, partition_min_bytes=0, last_reader=None):
    """The Prediction of synchronous ps workers (a SyncReplicasOptimizer aggregating
    workers - backup_workers gradients per update); last_reader: the Compute of the last
    worker to read in an update, while the others wait for it (None: `compute`); other
    arguments as asynchronous_ps's. Needs workers > 1 and 0 <= backup_workers < workers."""
    _check(workers, link_gbps, straggler)
    if workers < 2 or not 0 <= backup_workers < workers:
        raise ValueError(f'synchronous workers need workers > 1 and 0 <= backup_workers < '
                         f'workers, got workers={workers!r}, backup_workers={backup_workers!r}')
    lockstep = backup_workers == 0
    slowdown = straggler if lockstep else 1.0
    waited = compute.times(slowdown)
    last = (compute if last_reader is None else last_reader).times(slowdown)

    def predict(tasks):
        sized = _ps_traffic(traffic, workers, tasks, lockstep, partition_min_bytes)
        busiest_ps = max(sized.ps_tasks, key=lambda link: link.bytes)
        gradients = network_traffic.transfer_seconds(busiest_ps.bytes_in / workers, link_gbps)
        ps_step = (network_traffic.transfer_seconds(busiest_ps.bytes, link_gbps) - gradients +
                   last.forward + last.backprop_with(gradients))
        seconds = max(_cycle(sized.worker, waited, link_gbps), ps_step)
        return _prediction(SYNC_PS, sized, tasks, compute, seconds, workers - backup_workers,
                           link_gbps, partition_min_bytes)

    return _with_ps_tasks(predict, traffic, ps_tasks, partition_min_bytes)


def plan(ps_traffic, collective_traffic, compute, workers, link_gbps, ps_tasks=None, clones=1,
         straggler=1.0, backup_workers=0, partition_sizes=(0,), prefetch_reads=False):
    """The Predictions of every mode on `workers` workers: asynchronous ps (its reads
    prefetched if `prefetch_reads`), synchronous ps (only with workers > backup_workers and
    workers > 1), each with the variables in parts of about each of `partition_sizes` bytes
    (0: whole), and collective, from the StepTraffic of a ps step and of a collective step
    (either None: its modes left out); other arguments as the modes' functions take
    them."""
    predictions = []
    for size in partition_sizes if ps_traffic is not None else ():
        predictions.append(asynchronous_ps(ps_traffic, compute, workers, link_gbps, ps_tasks,
                                           straggler, size, prefetch_reads))
        if workers > max(1, backup_workers):
            predictions.append(synchronous_ps(ps_traffic, compute, workers, link_gbps,
                                              ps_tasks, straggler, backup_workers, size))
    if collective_traffic is not None:
        predictions.append(collective(collective_traffic, compute, workers, link_gbps, clones,
                                      straggler))
    return predictions


def compression_seconds(traffic, seconds_per_byte):
    """Seconds a worker's step spends on 16-bit gradients: `seconds_per_byte` (per float32
    byte, as sizing_figures.compression_seconds_per_byte times it) x the float32 bytes of the
    gradients, twice the 16-bit bytes that StepTraffic `traffic` (of a step with gradient
    compression) all-reduces, or without all-reduces sends to its ps tasks."""
    sent = traffic.all_reduces.bytes if traffic.all_reduces else traffic.worker.bytes_out
    return 2 * sent * seconds_per_byte


def recommended(predictions):
    """The Prediction of the best scaling; among those within TOLERANCE of it, the first mode
    in PREFERENCE."""
    best = max(prediction.scaling for prediction in predictions)
    close = [p for p in predictions if p.scaling >= best * (1 - TOLERANCE)]
    return min(close, key=lambda prediction: PREFERENCE.index(prediction.mode))


def plan_rows(plans, examples_per_worker_step):
    """The lines of a table of `plans` (lists of Predictions, one list per number of workers,
    as plan returns them), each list's recommended mode marked, a partitioned one's mode
    saying its parts' size ('ps, asynchronous, parts of 1.0 MB'); examples_per_worker_step:
    batch size x clones, for examples per second."""
    header = ('workers', 'mode', 'ps tasks', 'sec/step', 'examples/s', 'scaling',
              'step/bound', 'busiest link: bytes per step, rule, the bound')
    rows = [header]
    for predictions in plans:
        best = recommended(predictions)
        for p in predictions:
            ratio = p.bound_ratio
            rows.append((
                str(p.workers), _mode_text(p), '-' if p.ps_tasks is None else str(p.ps_tasks),
                f'{p.seconds:.3f}', f'{p.applied * examples_per_worker_step / p.seconds:,.0f}',
                f'{p.scaling:.2f}', '-' if ratio is None else f'{ratio:.2f}',
                _busiest_text(p) + ('  <- recommended' if p is best else '')))
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    return ['  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows]


def _mode_text(prediction):
    """'ps, asynchronous', followed by ', prefetched reads' when they are and ', parts of
    1.0 MB' for variables in parts."""
    size = prediction.partition_min_bytes
    return (prediction.mode + ', prefetched reads' * prediction.prefetch_reads +
            (f', parts of {network_traffic.human_bytes(size)}' if size else ''))


def _busiest_text(prediction):
    """'each worker: 204.7 MB in then out, 163.7 ms': the busiest link of `prediction` (the
    first of equals), its bytes per step, rule and time; 'none: ...' when nothing crosses the
    network."""
    if not prediction.bound:
        return 'none: nothing crosses the network'
    link = prediction.traffic.busiest[0]
    name = 'each worker' if link is prediction.traffic.worker else link.name
    return (f'{name}: {network_traffic.human_bytes(link.bytes)} {link.rule}, '
            f'{network_traffic.human_seconds(prediction.bound)}')


def _check(workers, link_gbps, straggler):
    """ValueError unless workers is a whole number >= 1, link_gbps > 0 and straggler >= 1."""
    network_traffic.check_link_gbps(link_gbps)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f'workers must be a whole number >= 1, got {workers!r}')
    if not straggler >= 1:
        raise ValueError(f'straggler must be a factor >= 1 (one worker that many times '
                         f'slower), got {straggler!r}')


def _ps_traffic(traffic, workers, tasks, synchronous, partition_min_bytes,
                prefetch_reads=False):
    """The StepTraffic of ps step `traffic` taken by `workers` workers, its PsGroups split
    into parts of about `partition_min_bytes` (0: whole) for `tasks` ps tasks (_parts) and
    spread largest first onto the least-loaded of them; in lockstep if `synchronous`; with
    `prefetch_reads`, the worker's link passes its reads and gradients each way."""
    groups = sorted(_parts(traffic.groups, partition_min_bytes, tasks),
                    key=lambda group: (-group.bytes, group.name))
    worker = traffic.worker
    if prefetch_reads:
        worker = dataclasses.replace(worker, bytes=max(worker.bytes_in, worker.bytes_out),
                                     rule=EACH_WAY)
    return dataclasses.replace(
        traffic, workers=workers, synchronous=synchronous, groups=tuple(groups), worker=worker,
        ps_tasks=network_traffic.spread_links(groups, tasks, workers, synchronous))


def _parts(groups, partition_min_bytes, tasks):
    """PsGroups `groups` with each variable's split as --variable_partition_min_mb splits it
    on `tasks` ps tasks (placement.min_size_partitioner(partition_min_bytes, tasks)); the
    groups themselves when partition_min_bytes is 0."""
    if not partition_min_bytes:
        return tuple(groups)
    partitioner = placement.min_size_partitioner(partition_min_bytes, tasks)
    split = []
    for group in groups:
        shapes = group.shape and placement.parts(partitioner, group.shape, group.dtype)
        split += group.split(shapes) if shapes else [group]
    return tuple(split)


def _with_ps_tasks(predict, traffic, ps_tasks, partition_min_bytes):
    """predict(ps_tasks), or with ps_tasks None, predict(P) for the fewest P whose step is
    within TOLERANCE of predict(one task per PsGroup, or per part of one split into parts of
    about `partition_min_bytes` bytes, as many as their size allows)'s."""
    if not traffic.ps_tasks:
        raise ValueError('a ps prediction needs the traffic of a step with ps tasks')
    if ps_tasks is not None:
        if isinstance(ps_tasks, bool) or not isinstance(ps_tasks, int) or ps_tasks < 1:
            raise ValueError(f'ps_tasks must be a whole number >= 1 or None, got {ps_tasks!r}')
        return predict(ps_tasks)
    most = max(1, len(_parts(traffic.groups, partition_min_bytes, _UNLIMITED)))
    least = predict(most).seconds
    return next(prediction for prediction in map(predict, range(1, most + 1))
                if prediction.seconds <= least * (1 + TOLERANCE))


def _cycle(worker, compute, link_gbps):
    """A ps worker's own step, in seconds: its link `worker`'s bytes pass by its rule, with
    the forward pass after its reads and backprop overlapping its gradients:
    t(bytes) - t(out) + forward + (backward || t(out)); on a link passing each way
    (prefetched reads), the reads beside the rest: max(t(in), forward + (backward ||
    t(out)))."""
    out = network_traffic.transfer_seconds(worker.bytes_out, link_gbps)
    computing = compute.forward + compute.backprop_with(out)
    if worker.rule == EACH_WAY:
        return max(network_traffic.transfer_seconds(worker.bytes_in, link_gbps), computing)
    return network_traffic.transfer_seconds(worker.bytes, link_gbps) - out + computing


def _prediction(mode, traffic, ps_tasks, compute, seconds, applied, link_gbps,
                partition_min_bytes=0, prefetch_reads=False):
    """The Prediction of `mode` whose step, of StepTraffic `traffic`, takes `seconds` and
    applies `applied` worker steps, with the variables in parts of about
    `partition_min_bytes` bytes (0: whole), their reads prefetched if `prefetch_reads`."""
    workers = traffic.workers
    return Prediction(mode=mode, workers=workers, ps_tasks=ps_tasks, traffic=traffic,
                      seconds=seconds, bound=traffic.seconds(link_gbps), applied=applied,
                      scaling=applied * compute.seconds / (workers * seconds),
                      partition_min_bytes=partition_min_bytes, prefetch_reads=prefetch_reads)
