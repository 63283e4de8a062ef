"""Training over bandwidth-limited links: deploy()'s modes against MultiWorkerMirroredStrategy.

    python -m benchmarks.network [--model_name lenet] [--workers 2] [--num_ps_tasks 1]
        [--link_bandwidth 1gbit,10gbit] [--setups parameter_server,prefetch_reads,
        sync_replicas,collective,multi_worker_mirrored,parameter_server_strategy]
        [--precision float32,bfloat16] [--gradient_compression none,bfloat16]
        [--variable_partition_min_mb 0,1]
        [--batch_size 32] [--steps 20] [--warmup_steps 5] [--rounds 5]
        [--all_reduce_pack_bytes N] [--json]

Each step's time is set against the plan's lower bound for it
(slim_deploy.deployment.network_traffic). Needs root (network namespaces) and tc's tbf qdisc. Each
setup is a cluster of its own on emulated hosts (slim_deploy.cluster.emulated_hosts), one host
per task, each host's link limited to the bandwidth in both directions; every worker trains
--model_name with momentum SGD on a synthetic batch of --batch_size images held in its memory (one
clone; 10 classes):

  parameter_server   --num_ps_tasks ps tasks hold the variables; --workers asynchronous
                     workers (deploy(), as train_image_classifier.py's ps mode)
  prefetch_reads     the same, each step fetching the next step's values while it computes
                     and sends its gradients (--prefetch_reads)
  sync_replicas      the same, synchronous: a SyncReplicasOptimizer aggregates --workers
                     gradients per update (--sync_replicas), run by
                     training.loop.SyncReplicasHook; a step is an update: its workers run until
                     the global step has advanced --steps (the hook's start-up tokens let a
                     worker run a step ahead, so their step counts may differ by a few)
  collective         --workers workers all-reducing the gradients (deploy()'s
                     variable_update='collective', packs of --all_reduce_pack_bytes)
  multi_worker_mirrored  tf.distribute's MultiWorkerMirroredStrategy on --workers workers
  parameter_server_strategy  tf.distribute's ParameterServerStrategy: --num_ps_tasks ps
                     tasks hold the variables, a coordinator on a host of its own schedules
                     steps on --workers workers with a ClusterCoordinator, asynchronous
                     (trainers.coordinator_trainer: the same network and update)

Each setup but tf.distribute's (TF_DISTRIBUTE: float32 only) runs once per --precision (its
math) and --gradient_compression (the dtype its gradients cross the links in:
DeploymentConfig's gradient_compression); a run with 16-bit gradients is named
'<setup>:<dtype>' ('collective:bfloat16') and labelled '<label>, <dtype> gradients', one with
16-bit math '<setup>[:<dtype>]@<precision>' ('sync_replicas:bfloat16@bfloat16'), labelled
'<label>[, <dtype> gradients], <precision> math'. Each setup with ps tasks runs once per size of
--variable_partition_min_mb too (0: the variables whole), each variable in parts of about
that many MB, at most one per ps task (train_image_classifier's --variable_partition_min_mb;
ParameterServerStrategy's MinSizePartitioner, the same parts where a large variable's first
axis is its longest, as lenet's and cifarnet's): a run in parts is named
'<name>/<size>mb' ('parameter_server/1mb') and labelled '<label>, parts of <size> MB'.

Per bandwidth of --link_bandwidth, in turn: the setups' clusters start one after another
(each start-up alone on the machine), all stay warm and run --warmup_steps untimed steps
together, then per round each setup runs --steps timed steps while the others wait, in an
order rotated each round (harness.rounds). Waiting processes take no CPU, and lenet's 10
(2 workers, 1 ps task) take about 5 GB in all: keeping them warm together costs less than
restarting each setup every round, and rotating spreads the machine's noise over all setups.

Prints a table per bandwidth: images/sec (global: every worker's images over the span from
the first worker's start to the last one's end; median over rounds, and the spread (max -
min) / median), seconds per step (median), each setup's images/sec over
MultiWorkerMirroredStrategy's, and the plan's lower bound on the step: the bytes the busiest
link must pass one after another per step, read from the worker's own graph
(network_traffic.step_traffic: each way at once, in then out, or out then in for synchronous
workers), over the bandwidth, with the measured step time over it. A bound above a measured
step time is flagged: the plan or the measurement would be wrong. Below the table, each
setup's busiest link as measured: the host and direction whose link passed the most bytes
per step (counted at the bridge, frames' headers included, over the timed steps), and the
share of the step those bytes take at the link's rate. --json prints one object
instead: `model_name`, `batch_size`, `workers`, `num_ps_tasks`, `precision` (a list), `data`,
`steps`, `warmup_steps`, `rounds`, `all_reduce_pack_bytes`, `intra_op_threads`,
`inter_op_threads`, `tensorflow`, `seconds` (the whole run) and `links`: {bandwidth ('1gbit'):
{`link_gbps`, `seconds`, `setups`: {run ('collective', 'collective:bfloat16@bfloat16'):
{`label`, `processes`, `images_per_sec` (median), `images_per_sec_rounds`, `spread`,
`sec_per_step` (median), `sec_per_step_rounds`, `bound_secs` (None: the step runs collective
ops the plan does not count), `step_over_bound`, `network` (worker 0's
trainers.network_bound), `link_bytes` and `busiest_link` (link_bytes'), `startup`,
`loss_first`, `loss_last`}}, `ratios`: {"A / B": ratio of median images/sec}}}. A process
that fails or stops answering (--timeout_secs) ends the run with a one-line error and exit
code 1; every process and host it made is removed on exit.
"""
import time

STARTED = time.time()  # Before anything is imported: the import's share of start-up.

from slim_deploy.image_classifier import verbosity  # noqa: E402

verbosity.start()  # Before TensorFlow is imported.

import argparse  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
from math import isfinite  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import tensorflow.compat.v1 as tf  # noqa: E402

from benchmarks import harness, trainers  # noqa: E402
from benchmarks.harness import at_least, names_in  # noqa: E402
from slim_deploy.cluster import emulated_hosts, launch, shape  # noqa: E402
from slim_deploy.deployment import compression, network_traffic, precision  # noqa: E402
from slim_deploy.nets import nets_factory  # noqa: E402

PROG = f'python -m {__spec__.name}'  # Its usage's and error lines' program name.

Setup = collections.namedtuple('Setup', ['label', 'kind', 'sync_replicas', 'prefetch_reads'],
                               defaults=[False])
Setup.__doc__ = """A setup: its label in the table, the trainers kind of its workers ('ps_worker'
runs with ps tasks), whether they are synchronous replicas and whether they prefetch their
reads (DeploymentConfig's prefetch_reads)."""
SETUPS = {
    'parameter_server': Setup('parameter_server async', 'ps_worker', False),
    'prefetch_reads': Setup('parameter_server async, prefetched reads', 'ps_worker', False,
                            prefetch_reads=True),
    'sync_replicas': Setup('parameter_server sync', 'ps_worker', True),
    'collective': Setup('collective', 'collective', False),
    'multi_worker_mirrored': Setup('MultiWorkerMirroredStrategy', 'multi_worker_mirrored',
                                   False),
    'parameter_server_strategy': Setup('ParameterServerStrategy', 'parameter_server_strategy',
                                       False),
}
BASELINE = 'multi_worker_mirrored'
TF_DISTRIBUTE = ('multi_worker_mirrored', 'parameter_server_strategy')  # Float32 alone.
WITH_PS = ('ps_worker', 'parameter_server_strategy')  # The trainers kinds with ps tasks.
COORDINATOR = 'chief:0'  # ParameterServerStrategy's task of its own.


def add_partition_option(parser):
    """Adds --variable_partition_min_mb to argparse `parser`: comma-separated part sizes in
    MB, each >= 0 (default 0: whole), each setup with ps tasks running with each."""
    def sizes(text):
        listed = [at_least(0, float)(part.strip()) for part in text.split(',') if part.strip()]
        if not listed or not all(map(isfinite, listed)):
            raise argparse.ArgumentTypeError(f'{text!r} is not a list of sizes in MB')
        return list(dict.fromkeys(listed))

    parser.add_argument('--variable_partition_min_mb', type=sizes, default=[0.0],
                        help='comma-separated part sizes in MB (0: whole); each setup with ps '
                             "tasks runs with each, the variables in parts of about that size, "
                             'at most one per ps task, as train_image_classifier splits them '
                             '(default 0)')


def link_rates(text):
    """argparse type: comma-separated tc rates ('1gbit,100mbit') -> {rate: Gbit/s}."""
    rates = {}
    for rate in (part.strip() for part in text.split(',') if part.strip()):
        bits = emulated_hosts.rate_bits(rate)
        if not bits:
            raise argparse.ArgumentTypeError(f'{rate!r} is not a rate such as 100mbit or 1gbit')
        rates[rate] = bits / 1e9
    if not rates:
        raise argparse.ArgumentTypeError('no rate given')
    return rates


def run_name(setup, compressed, math, partition_mb=0):
    """The name of the run of `setup` (a key of SETUPS) with gradients `compressed` (a name
    of compression.COMPRESSIONS), `math` (of precision.PRECISIONS) and variables in parts of
    about `partition_mb` MB (0: whole): '<setup>', then ':<compressed>' unless 'none',
    '@<math>' unless 'float32' and '/<partition_mb>mb' unless 0."""
    return (setup + (f':{compressed}' if compressed != 'none' else '') +
            (f'@{math}' if math != 'float32' else '') +
            (f'/{partition_mb:g}mb' if partition_mb else ''))


# What run_name names: the Setup, the gradient compression, the math and the part size of the
# variables in MB (0: whole).
Run = collections.namedtuple('Run', 'setup compression math partition_mb')


def parse_run(name):
    """The Run of run `name` (see run_name)."""
    rest, _, partition = name.partition('/')
    rest, _, math = rest.partition('@')
    setup, _, compressed = rest.partition(':')
    return Run(SETUPS[setup], compressed or 'none', math or 'float32',
               float(partition.removesuffix('mb') or 0))


def ps_tasks(args, name):
    """The ps tasks of run `name`'s cluster."""
    return args.num_ps_tasks if parse_run(name).setup.kind in WITH_PS else 0


def tasks_of(args, name):
    """The tasks of run `name`'s cluster: its ps tasks, workers and, for
    ParameterServerStrategy, its coordinator (COORDINATOR), each on an emulated host."""
    coordinator = ([COORDINATOR] if parse_run(name).setup.kind == 'parameter_server_strategy'
                   else [])
    return ([f'ps:{index}' for index in range(ps_tasks(args, name))] +
            [f'worker:{index}' for index in range(args.workers)] + coordinator)


def label(args, name):
    """'parameter_server async, 1 ps', 'collective, bfloat16 gradients, bfloat16 math',
    'ParameterServerStrategy, 4 ps, parts of 1 MB': run `name`'s label."""
    run, tasks = parse_run(name), ps_tasks(args, name)
    return (run.setup.label + (f', {tasks} ps' if tasks else '') +
            (f', {run.compression} gradients' if run.compression != 'none' else '') +
            (f', {run.math} math' if run.math != 'float32' else '') +
            (f', parts of {run.partition_mb:g} MB' if run.partition_mb else ''))


def start_setup(processes, hosts, args, name, link_gbps):
    """Starts run `name`'s tasks, each on its emulated host of `hosts` (its ps tasks
    first); returns the processes that train and reply (of harness.Processes
    `processes`): its workers, or ParameterServerStrategy's coordinator, started after its
    workers and ps tasks, which then only serve. link_gbps: the links' Gbit/s that the
    workers' step bound is reported for (None: no report; none for ParameterServerStrategy,
    whose steps are functions the plan does not read)."""
    run = parse_run(name)
    setup = run.setup
    cluster = launch.emulated_cluster_spec(hosts, ps_tasks(args, name), args.workers)
    role = dict(kind=setup.kind, precision=run.math, xla=False, cluster=cluster,
                devices=['/device:CPU:0'], cpu_devices=None,
                gradient_compression=run.compression,
                prefetch_reads=setup.prefetch_reads,
                variable_partition_min_mb=run.partition_mb)

    def start(task, task_role):
        return processes.start(f'{label(args, name)} {task}', harness.role_command(
            __spec__.name, task_role, args, trainers.OPTIONS), host=launch.emulated_host(task))

    for index in range(ps_tasks(args, name)):
        start(f'ps:{index}', dict(role, kind='ps', index=index))
    if setup.kind == 'parameter_server_strategy':
        cluster['chief'] = [f'{hosts[launch.emulated_host(COORDINATOR)].fqdn}:{shape.PORT}']
        for index in range(args.workers):
            start(f'worker:{index}', dict(role, kind='worker', index=index))
        return [start(COORDINATOR, role)]
    workers = []
    for index in range(args.workers):
        workers.append(start(f'worker:{index}', dict(
            role, index=index, sync_replicas=setup.sync_replicas,
            **({} if link_gbps is None else {'link_gbps': link_gbps}))))
    return workers


def measure_link(args, rate, link_gbps, log):
    """Runs every setup on links of `rate` (a tc rate of `link_gbps` Gbit/s; both None: links
    without a limit, and no bound); returns that bandwidth's results (a JSON-able dict).
    `log`: progress lines."""
    started = time.monotonic()
    results, processes, workers, hosts_of = {}, {}, {}, {}
    global_steps = {}  # {setup: the global step its synchronous replicas reached}.

    def until(name, updates):
        """The global step synchronous replicas run to next, `updates` on; None for others."""
        if name in global_steps:
            global_steps[name] += updates
        return global_steps.get(name)

    with contextlib.ExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        for name in args.setups:  # In turn: each start-up alone on the machine.
            hosts = hosts_of[name] = stack.enter_context(emulated_hosts.EmulatedHosts(
                [launch.emulated_host(task) for task in tasks_of(args, name)],
                domain=launch.HOSTS_DOMAIN, bandwidth=rate))
            processes[name] = harness.Processes(directory, args.timeout_secs, hosts)
            stack.callback(processes[name].close)
            workers[name] = start_setup(processes[name], hosts, args, name, link_gbps)
            first = processes[name].collect(workers[name], 'start')
            if parse_run(name).setup.sync_replicas:
                global_steps[name] = max(reply['global_step'] for reply in first)
            results[name] = dict(
                label=label(args, name), processes=len(tasks_of(args, name)),
                loss_first=first[0]['ready'], startup=first[0]['startup'],
                network=first[0].get('network'),
                bound_secs=first[0].get('network', {}).get('bound_secs'))
            log(f'{rate or "unlimited"} {label(args, name)}: first step after '
                f"{first[0]['startup']['to_first_step_secs']:.1f} s")
        warming = args.setups if args.warmup_steps else []  # Together.
        for name in warming:
            target = until(name, args.warmup_steps)
            for worker in workers[name]:
                worker.send(warmup=args.warmup_steps,
                            **({} if target is None else {'until_global_step': target}))
        for name in warming:
            processes[name].collect(workers[name], f'run {args.warmup_steps} warm-up steps')

        def measure(name):
            """run_steps' result for `name`, and {host: (bytes in, bytes out) per step}."""
            before = hosts_of[name].traffic()
            result = trainers.run_steps(processes[name], workers[name], args.steps,
                                        until(name, args.steps))
            after = hosts_of[name].traffic()
            return result, {host: tuple((a - b) / args.steps for a, b in zip(after[host], counts))
                            for host, counts in before.items()}

        measured = harness.rounds(
            args.setups, args.rounds, measure,
            done=lambda number: log(f'{rate or "unlimited"}: round {number}/{args.rounds} done, '
                                    f'{time.monotonic() - started:.0f} s'))
    for name, result in results.items():
        steps, traffics = zip(*measured[name])
        result.update(trainers.summary(steps))
        bound = result['bound_secs']
        result['step_over_bound'] = result['sec_per_step'] / bound if bound else None
        result.update(link_bytes(traffics, result['sec_per_step'], link_gbps))
    return {'link_gbps': link_gbps, 'setups': results,
            'ratios': harness.ratios({name: results[name]['images_per_sec'] for name in results},
                                     lambda name: [BASELINE], lambda name: label(args, name)),
            'seconds': time.monotonic() - started}


def link_bytes(traffics, sec_per_step, link_gbps):
    """What each host's link passed per step, from `traffics` (one {host: (bytes in, bytes
    out) per step} per round): {'link_bytes': {host: {'in', 'out'}} (medians over the
    rounds; frames' headers included), 'busiest_link': {'link' (host and direction: 'ps-0
    out'), 'bytes', 'busy' (the share of a step of `sec_per_step` seconds those bytes take
    on links of `link_gbps` Gbit/s; None: unlimited links)}}."""
    hosts = {host: {direction: statistics.median(traffic[host][index] for traffic in traffics)
                    for index, direction in enumerate(('in', 'out'))}
             for host in traffics[0]}
    host, direction = max(((host, direction) for host in hosts for direction in ('out', 'in')),
                          key=lambda pair: hosts[pair[0]][pair[1]])
    size = hosts[host][direction]
    return {'link_bytes': hosts, 'busiest_link': {
        'link': f'{host} {direction}', 'bytes': size,
        'busy': (network_traffic.transfer_seconds(size, link_gbps) / sec_per_step
                 if link_gbps else None)}}


def benchmark(args, log):
    """Runs every setup on links of each bandwidth; returns the results as a JSON-able dict.
    `log`: progress lines."""
    started = time.monotonic()
    links = {rate: measure_link(args, rate, gbps, log)
             for rate, gbps in args.link_bandwidth.items()}
    return {
        'model_name': args.model_name, 'batch_size': args.batch_size, 'workers': args.workers,
        'num_ps_tasks': args.num_ps_tasks, 'precision': args.precision, 'data': 'synthetic',
        'steps': args.steps, 'warmup_steps': args.warmup_steps, 'rounds': args.rounds,
        'all_reduce_pack_bytes': args.all_reduce_pack_bytes,
        'intra_op_threads': args.intra_op_threads, 'inter_op_threads': args.inter_op_threads,
        'tensorflow': tf.__version__, 'links': links, 'seconds': time.monotonic() - started,
    }


def table(results):
    """The results as printable lines."""
    r = results
    lines = [f"{r['model_name']}, batch {r['batch_size']} per worker, momentum SGD, "
             f"{r['workers']} workers on emulated hosts (a host per task), synthetic images, "
             f"{', '.join(r['precision'])} math (tf.distribute's: float32); "
             f"TensorFlow {r['tensorflow']}",
             f"{r['steps']} timed steps per round after {r['warmup_steps']} warm-up steps, "
             f"medians of {r['rounds']} round(s)"]
    for rate, link in r['links'].items():
        lines += ['', f"links of {rate} ({link['link_gbps']:g} Gbit/s each way)",
                  f"{'setup':<48} {'images/sec':>10} {'spread':>7} {'sec/step':>9} "
                  f"{'vs MWMS':>8} {'bound':>9}  {'busiest link':<42} {'step/bound':>10}"]
        notes = []
        baseline = link['setups'].get(BASELINE, {}).get('label')
        for setup in link['setups'].values():
            lines.append(setup_row(setup, link['ratios'].get(f"{setup['label']} / {baseline}"),
                                   notes))
        advice = next((setup['network']['advice'] for setup in link['setups'].values()
                       if setup['network'] and setup['network']['advice']), None)
        if advice:
            notes.append(f'plan: {advice}')
        lines += notes
    lines += ['', 'bound: the bytes the busiest link must pass one after another per step (read '
                  "from the worker's graph by network_traffic.step_traffic: its busier direction, "
                  'or in then out, or out then in) over the bandwidth; vs MWMS: images/sec over '
                  "MultiWorkerMirroredStrategy's",
              f"run took {r['seconds']:.0f} s"]
    return lines


def setup_row(setup, ratio, notes):
    """The table's line of `setup` (its results; `ratio`: its images/sec over the baseline's,
    None: none); appends what needs saying to `notes`."""
    network = setup['network']
    if setup['bound_secs'] is None:
        bound = planned = over = '-'
        notes.append(f"{setup['label']}: no bound: " + (
            f"network_traffic.step_traffic does not count its {', '.join(network['uncounted'])} "
            'ops' if network else 'its steps are functions the plan does not read'))
    else:
        bound = network_traffic.human_seconds(setup['bound_secs'])
        planned = (f"{' & '.join(network['busiest'])} "
                   f"{network_traffic.human_bytes(network['bytes'])}")
        over = f"{setup['step_over_bound']:.2f}"
        if min(setup['sec_per_step_rounds']) < setup['bound_secs']:
            over += ' !'
            notes.append(f"! {setup['label']}: a round's step time is below the bound: the "
                         'plan or the measurement is wrong')
    busiest = setup['busiest_link']
    notes.append(f"{setup['label']}: busiest link measured: {busiest['link']}, "
                 f"{network_traffic.human_bytes(busiest['bytes'])} per step" +
                 ('' if busiest['busy'] is None else f", {busiest['busy']:.0%} of the step"))
    return (f"{setup['label']:<48} {setup['images_per_sec']:>10.1f} {setup['spread']:>7.1%} "
            f"{setup['sec_per_step']:>9.3f} {'-' if ratio is None else f'{ratio:.3f}':>8} "
            f"{bound:>9}  {planned:<42} {over:>10}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument('--model_name', default='lenet', choices=nets_factory.NETWORKS.names,
                        metavar='NAME', help='network of nets_factory (default lenet)')
    parser.add_argument('--batch_size', type=at_least(1), default=32,
                        help='images per worker and step (default 32)')
    parser.add_argument('--workers', type=at_least(2), default=2,
                        help='worker tasks, one emulated host each (default 2)')
    parser.add_argument('--num_ps_tasks', type=at_least(0), default=1,
                        help='ps tasks of the parameter-server setups (default 1; 0: run '
                             'only the others)')
    parser.add_argument('--link_bandwidth', type=link_rates, default=link_rates('1gbit'),
                        help="comma-separated tc rates of every host's link, each way "
                             '(default 1gbit)')
    parser.add_argument('--setups', type=names_in(tuple(SETUPS)),
                        help='comma-separated: ' + ', '.join(SETUPS) + ' (default: all, the '
                             'first three only with ps tasks)')
    parser.add_argument('--precision', type=names_in(precision.PRECISIONS.names),
                        default=['float32'],
                        help='comma-separated: ' + ', '.join(precision.PRECISIONS) +
                             "; each setup but tf.distribute's (float32) runs "
                             'with each; with ps tasks and 16-bit gradients a 16-bit '
                             'precision sends the variable reads in 16 bits too (default '
                             'float32)')
    parser.add_argument('--gradient_compression', type=names_in(compression.COMPRESSIONS.names),
                        default=['none'],
                        help='comma-separated: ' + ', '.join(compression.COMPRESSIONS) +
                             "; each setup but tf.distribute's runs with each (default none)")
    add_partition_option(parser)
    trainers.add_options(parser, steps=20, warmup_steps=5, rounds=5)
    parser.set_defaults(dataset_name=None, dataset_dir=None)  # Synthetic data (trainers).
    args = parser.parse_args(argv)
    with_ps = [name for name in SETUPS if SETUPS[name].kind in WITH_PS]
    if args.setups is None:
        args.setups = [name for name in SETUPS if args.num_ps_tasks or name not in with_ps]
    wanting = [name for name in args.setups if name in with_ps]
    if wanting and not args.num_ps_tasks:
        parser.error(f'--setups {",".join(wanting)} needs --num_ps_tasks >= 1')
    args.setups = [run_name(name, compressed, math, size) for name in args.setups
                   for math in (['float32'] if name in TF_DISTRIBUTE else args.precision)
                   for compressed in (['none'] if name in TF_DISTRIBUTE
                                      else args.gradient_compression)
                   for size in (args.variable_partition_min_mb if name in with_ps else [0])]
    if not args.role:
        harness.require_emulated_hosts(parser)
    return args


if __name__ == '__main__':
    sys.exit(trainers.main(PROG, parse_args(), STARTED, benchmark, table,
                           failures=(emulated_hosts.EmulatedHostsError,)))
