"""How training scales from 2 to 8 workers on slow links, measured against the sizing planner.

    python -m benchmarks.scaling [--model_name lenet] [--workers 2,4,8]
        [--link_bandwidth 250mbit,1gbit] [--setups parameter_server,sync_replicas,collective]
        [--num_ps_tasks 2,4] [--variable_partition_min_mb 0,1]
        [--gradient_compression none,bfloat16] [--overlap 0.5]
        [--batch_size 32] [--steps 10] [--warmup_steps 3] [--rounds 1] [--json]

For each number of workers (--workers) and each setup of benchmarks.network (by its names:
parameter_server, asynchronous; prefetch_reads, the same prefetching its reads;
sync_replicas; collective; multi_worker_mirrored; parameter_server_strategy), each but
tf.distribute's once per --gradient_compression (the dtype its gradients cross the links
in), and each with ps tasks (the first three and the last) once per number of
--num_ps_tasks and, for each, once per --variable_partition_min_mb (the variables whole for
0, else in parts of about that many MB, at most one per ps task), a cluster of that many
workers (and ps tasks) trains --model_name on emulated hosts, one host per task, as
benchmarks.network runs it (needs root): first on links without a limit, then on links of
each --link_bandwidth, a cluster of its own each time.

Emulated hosts share this machine's cores, so a worker's compute grows with the number of
workers. The planner assumes a host per worker; it is given, for each setup and number of
workers, the step measured on the unlimited links as the worker's compute c (what the mode's
step costs the shared cores, with nothing of the network), its forward pass the fraction
that one worker measures alone here (sizing_figures.measure_compute), and --overlap, the
share of backprop and the sending of its gradients that run at once (sizing.Compute's: on
workers that share cores, the transfers' copies and sums take the cores backprop needs).
The last worker to read in a synchronous update computes while the others wait for it,
nearly alone on the cores: the planner gets one worker's step alone here as its compute
(sizing.synchronous_ps's last_reader).
From these and the bytes of the step (sizing_figures.step_traffics: the same traffic model
as --link_gbps), it predicts the step on each limited link (slim_deploy.deployment.sizing's
model of the mode, prefetched reads the asynchronous workers' with their reads beside the
rest of the step; MultiWorkerMirroredStrategy's ring is collective's, and
ParameterServerStrategy's workers are asynchronous ps workers moving the bytes of deploy()'s
step read without a caching device, a variable at each use, as TensorFlow 2 reads it:
sizing_figures.strategy_ps_traffic) at the rate the tensors' bytes get: the link's rate
times PAYLOAD_SHARE, as tc counts whole Ethernet frames of which TCP's payload is 1,448 of
1,514 bytes. What this checks is the planner's account of the network: what slower links
add to a step, and how much of it backprop hides. A run with 16-bit gradients is planned as
plan_cluster plans it when its setup's float32 run came first: that run's unlimited step
plus what the casts and sums cost
(sizing.compression_seconds at the seconds per byte sizing_figures.compression_seconds_per_byte
times here, times the sharing: the float32 step over one worker's step alone; the last reader
pays them once).

Prints per link, number of workers and setup: the measured seconds per step (a step: one
step of every worker; an update for sync_replicas; medians over --rounds), the predicted,
measured over predicted, and the scaling efficiency measured and predicted (c over the step:
the share of the workers' compute the cluster turns into training at that size, 1: the links
cost nothing). A prediction is within the target when measured over predicted lies in
[1 - TOLERANCE, 1 + TOLERANCE]; the last line counts them. --json prints one object instead:
`model_name`, `batch_size`, `num_ps_tasks` and `variable_partition_min_mb` (the lists),
`steps`, `warmup_steps`, `rounds`,
`alone_secs` (one worker's step alone here), `forward_fraction`, `overlap`,
`compression_seconds_per_byte` ({compression: seconds}), `payload_share`, `tolerance`,
`seconds` and `points`: [{`workers`, `setup`, `gradient_compression`, `num_ps_tasks` (0:
none), `variable_partition_min_mb`, `label`,
`compute_secs` (what the planner was given), `unlimited_secs` (the step on unlimited links),
`link_bandwidth`, `link_gbps`, `measured_secs`, `predicted_secs`, `ratio`,
`scaling_measured`, `scaling_predicted`, `within`}], and `within` (how many points are).

A cluster that fails or stops answering (--timeout_secs) ends the run with a one-line error
and exit code 1; 2 for bad arguments. Every process and host it made is removed on exit.
"""
import time

STARTED = time.time()  # Before anything is imported: the import's share of start-up.

from slim_deploy.image_classifier import verbosity  # noqa: E402

verbosity.start()  # Before TensorFlow is imported.

import argparse  # noqa: E402
import sys  # noqa: E402

from benchmarks import harness, network, trainers  # noqa: E402
from benchmarks.harness import at_least, names_in  # noqa: E402
from slim_deploy.cluster import emulated_hosts  # noqa: E402
from slim_deploy.deployment import compression, sizing  # noqa: E402
from slim_deploy.image_classifier import builders, sizing_figures  # noqa: E402
from slim_deploy.nets import nets_factory  # noqa: E402

PROG = f'python -m {__spec__.name}'  # Its usage's and error lines' program name.
TOLERANCE = 0.15  # Of the measured step over the predicted.
# The share of a tc rate TCP's payload gets: tc counts each Ethernet frame of 1,514 bytes
# (an MTU of 1,500 and its 14-byte header), 1,448 of them a segment's payload (20 bytes of
# IP header, 32 of TCP's with timestamps).
PAYLOAD_SHARE = 1448 / 1514


def predict(setup, traffics, compute, workers, link_gbps, ps_tasks, partition_min_bytes=0,
            last_reader=None):
    """The sizing.Prediction of benchmarks.network setup `setup` on `workers` workers, from
    `traffics` ((ps step, collective step) StepTraffics), the sizing.Compute of a worker's
    step, links of `link_gbps` Gbit/s and `ps_tasks` ps tasks, the variables in parts of
    about `partition_min_bytes` bytes (0: whole; ps setups only); last_reader: for
    sync_replicas, the sizing.Compute of the last worker to read in an update (None:
    `compute`)."""
    traffic, spec = traffic_of(setup, traffics), network.SETUPS[setup]
    if spec.kind not in network.WITH_PS:
        return sizing.collective(traffic, compute, workers, link_gbps)
    if spec.sync_replicas:
        return sizing.synchronous_ps(traffic, compute, workers, link_gbps, ps_tasks,
                                     partition_min_bytes=partition_min_bytes,
                                     last_reader=last_reader)
    return sizing.asynchronous_ps(traffic, compute, workers, link_gbps, ps_tasks,
                                  partition_min_bytes=partition_min_bytes,
                                  prefetch_reads=spec.prefetch_reads)


def traffic_of(setup, traffics):
    """The StepTraffic of `setup`'s step of `traffics` ((ps step, collective step,
    ParameterServerStrategy's step or None))."""
    ps_traffic, collective_traffic, strategy_traffic = traffics
    kind = network.SETUPS[setup].kind
    if kind == 'parameter_server_strategy':
        return strategy_traffic
    return ps_traffic if kind in network.WITH_PS else collective_traffic


def point(workers, setup, compressed, ps_tasks, partition_mb, label, compute, unlimited, rate,
          link_gbps, measured, prediction):
    """The JSON-able result of one measured point: `setup` with gradients `compressed`,
    `ps_tasks` ps tasks (0: none) and the variables in parts of about `partition_mb` MB (0:
    whole) (`label`) on `workers` workers and links of `rate` (`link_gbps` Gbit/s), its step
    measured in `measured` seconds against sizing.Prediction `prediction`, predicted from
    the `compute` seconds of a step; `unlimited`: its step on unlimited links."""
    ratio = measured / prediction.seconds
    return {'workers': workers, 'setup': setup, 'gradient_compression': compressed,
            'num_ps_tasks': ps_tasks, 'variable_partition_min_mb': partition_mb,
            'label': label, 'compute_secs': compute, 'unlimited_secs': unlimited,
            'link_bandwidth': rate, 'link_gbps': link_gbps,
            'measured_secs': measured, 'predicted_secs': prediction.seconds, 'ratio': ratio,
            'scaling_measured': compute / measured, 'scaling_predicted': prediction.scaling,
            'within': abs(ratio - 1) <= TOLERANCE}


def benchmark(args, log):
    """Measures every setup on every number of workers, unlimited and on each link; returns
    the results as a JSON-able dict. `log`: progress lines."""
    started = time.monotonic()
    alone = sizing_figures.measure_compute(args.model_name, args.batch_size,
                                           trainers.NUM_CLASSES)
    forward_fraction = alone.forward / alone.seconds
    log(f'{args.model_name} alone here: {alone.seconds:.3f} s per step, the forward pass '
        f'{forward_fraction:.2f} of it')
    strategy_traffic = (sizing_figures.strategy_ps_traffic(
        args.model_name, args.batch_size, trainers.NUM_CLASSES)
        if any(run[0] == 'parameter_server_strategy' for run in args.runs) else None)
    traffics = {compressed: (*sizing_figures.step_traffics(args.model_name, args.batch_size,
                                                           trainers.NUM_CLASSES, compressed),
                             strategy_traffic)
                for compressed in args.gradient_compression}
    per_byte = {compressed: sizing_figures.compression_seconds_per_byte(compressed)
                for compressed in args.gradient_compression}
    points = []
    for workers in args.workers:
        # {(setup, ps tasks, part size): its float32 run's step on unlimited links}.
        uncompressed = {}
        for setup, compressed, ps_tasks, partition_mb in args.runs:
            name = network.run_name(setup, compressed, 'float32', partition_mb)
            size = argparse.Namespace(**{**vars(args), 'workers': workers, 'setups': [name],
                                         'num_ps_tasks': ps_tasks})
            unlimited = network.measure_link(size, None, None, log)['setups'][name]['sec_per_step']
            plain = uncompressed.get((setup, ps_tasks, partition_mb))
            casts = sizing.compression_seconds(traffic_of(setup, traffics[compressed]),
                                               per_byte[compressed])
            if compressed == 'none':
                compute = uncompressed[setup, ps_tasks, partition_mb] = unlimited
            elif plain:  # As plan_cluster plans 16-bit gradients.
                compute = plain + plain / alone.seconds * casts
            else:
                compute = unlimited
            given = sizing.Compute(compute, compute * forward_fraction, args.overlap)
            last_reader = sizing.Compute(alone.seconds + casts, alone.forward, args.overlap)
            for rate, link_gbps in args.link_bandwidth.items():
                measured = network.measure_link(size, rate, link_gbps, log)['setups'][name]
                prediction = predict(setup, traffics[compressed], given, workers,
                                     link_gbps * PAYLOAD_SHARE, ps_tasks,
                                     builders.partition_bytes(partition_mb), last_reader)
                points.append(point(workers, setup, compressed, ps_tasks, partition_mb,
                                    measured['label'], compute, unlimited, rate, link_gbps,
                                    measured['sec_per_step'], prediction))
                log(f"{rate}, {workers} workers, {measured['label']}: "
                    f"{measured['sec_per_step']:.3f} s per step, predicted "
                    f'{prediction.seconds:.3f} s')
    return {'model_name': args.model_name, 'batch_size': args.batch_size,
            'num_ps_tasks': args.num_ps_tasks,
            'variable_partition_min_mb': args.variable_partition_min_mb, 'steps': args.steps,
            'warmup_steps': args.warmup_steps, 'rounds': args.rounds,
            'alone_secs': alone.seconds, 'forward_fraction': forward_fraction,
            'overlap': args.overlap, 'compression_seconds_per_byte': per_byte,
            'payload_share': PAYLOAD_SHARE, 'tolerance': TOLERANCE, 'points': points,
            'within': sum(p['within'] for p in points), 'seconds': time.monotonic() - started}


def table(results):
    """The results as printable lines."""
    r = results
    lines = [f"{r['model_name']}, batch {r['batch_size']} per worker, synthetic images, on "
             f"emulated hosts (a host per task); {r['steps']} timed steps after "
             f"{r['warmup_steps']}, medians of {r['rounds']} round(s); compute: the step on "
             f"unlimited links, its forward pass {r['forward_fraction']:.2f} of it, overlap "
             f"{r['overlap']:g}; links' payload {r['payload_share']:.3f} of their rate",
             f"{'link':<8} {'workers':>7}  {'setup':<50} {'compute':>8} {'measured':>9} "
             f"{'predicted':>9} {'ratio':>6} {'scaling':>7} {'predicted':>9}"]
    for p in sorted(r['points'], key=lambda p: p['link_gbps']):
        lines.append(f"{p['link_bandwidth']:<8} {p['workers']:>7}  {p['label']:<50} "
                     f"{p['compute_secs']:>8.3f} {p['measured_secs']:>9.3f} "
                     f"{p['predicted_secs']:>9.3f} {p['ratio']:>6.2f}"
                     f"{'' if p['within'] else '!':<1}{p['scaling_measured']:>6.2f} "
                     f"{p['scaling_predicted']:>9.2f}")
    lines += ['', 'seconds per step (a step of every worker; an update of sync_replicas); '
                  'ratio: measured / predicted, ! beyond the target; scaling: compute / step',
              f"within {r['tolerance']:.0%} of the prediction: {r['within']} of "
              f"{len(r['points'])} points", f"run took {r['seconds']:.0f} s"]
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument('--model_name', default='lenet', choices=nets_factory.NETWORKS.names,
                        metavar='NAME', help='network of nets_factory (default lenet)')
    parser.add_argument('--batch_size', type=at_least(1), default=32,
                        help='images per worker and step (default 32)')
    parser.add_argument('--workers', type=counts_from(2), default=[2, 4, 8],
                        help='comma-separated numbers of workers >= 2 (default 2,4,8)')
    parser.add_argument('--num_ps_tasks', type=counts_from(1), default=[2],
                        help='comma-separated numbers of ps tasks >= 1; each setup with ps '
                             'tasks (parameter_server, prefetch_reads, sync_replicas, '
                             'parameter_server_strategy) runs with each (default 2)')
    parser.add_argument('--link_bandwidth', type=network.link_rates,
                        default=network.link_rates('250mbit,1gbit'),
                        help="comma-separated tc rates of every host's link, each way "
                             '(default 250mbit,1gbit)')
    parser.add_argument('--overlap', type=share, default=0.5,
                        help='the share of backprop and the sending of its gradients that '
                             'run at once, for the planner (default 0.5)')
    parser.add_argument('--setups', type=names_in(tuple(network.SETUPS)),
                        default=['parameter_server', 'sync_replicas', 'collective'],
                        help='comma-separated: ' + ', '.join(network.SETUPS) +
                             ' (default parameter_server,sync_replicas,collective)')
    parser.add_argument('--gradient_compression', type=names_in(compression.COMPRESSIONS.names),
                        default=['none'],
                        help='comma-separated: ' + ', '.join(compression.COMPRESSIONS) +
                             "; each setup but tf.distribute's runs with each (default "
                             'none)')
    network.add_partition_option(parser)
    trainers.add_options(parser, steps=10, warmup_steps=3, rounds=1)
    # What benchmarks.network's clusters read: synthetic data.
    parser.set_defaults(dataset_name=None, dataset_dir=None)
    args = parser.parse_args(argv)
    # (setup, gradient compression, ps tasks (0: none), part size in MB (0: whole)).
    args.runs = [(setup, compressed, ps_tasks, partition_mb) for setup in args.setups
                 for compressed in (['none'] if setup in network.TF_DISTRIBUTE
                                    else args.gradient_compression)
                 for ps_tasks, partition_mb in (
                     [(count, size) for count in args.num_ps_tasks
                      for size in args.variable_partition_min_mb]
                     if network.SETUPS[setup].kind in network.WITH_PS else [(0, 0)])]
    if not args.role:
        harness.require_emulated_hosts(parser)
    return args


def share(text):
    """argparse type: a number in [0, 1]."""
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f'{text!r} is not a share in [0, 1]')
    return value


def counts_from(least):
    """argparse type: comma-separated whole numbers, each >= `least`."""
    def counts(text):
        return [at_least(least)(part.strip()) for part in text.split(',')]
    return counts


if __name__ == '__main__':
    sys.exit(trainers.main(PROG, parse_args(), STARTED, benchmark, table,
                           failures=(emulated_hosts.EmulatedHostsError,)))
