"""Training throughput, the project's tf_cnn_benchmarks: deploy() against tf.distribute, per
precision, in one run.

    python -m benchmarks.throughput [--model_name resnet_v1_50] [--num_clones 2]
        [--batch_size 16] [--variable_update replicated[,parameter_server,collective]]
        [--precision float32[,bfloat16,float16]] [--xla off[,on]] [--seed off[,on]]
        [--compare_mirrored]
        [--dataset_name digits [--dataset_dir DIR]] [--steps 10] [--warmup_steps 3]
        [--rounds 3] [--json]

Every setup trains --model_name with momentum SGD on --batch_size examples per clone, on
--num_clones devices, with the same intra-/inter-op thread settings; one setup per
variable update, precision, XLA and seed setting listed (--seed on: deploy()'s setups
bit-reproducible, DeploymentConfig(seed=SEED); tf.distribute's unseeded):

  parameter_server, replicated   one process, --num_clones clones (deploy())
  collective                     --num_clones worker processes of one clone, on loopback
  with --compare_mirrored, tf.distribute on the same model, batch and devices:
  MirroredStrategy               one process, --num_clones replicas (against the above two)
  MultiWorkerMirroredStrategy    --num_clones worker processes (against collective)

The images are a synthetic batch held on each clone's device (no input pipeline, no
per-step transfer; 10 classes), or with --dataset_name the real tf.data pipeline of that
dataset (the trainer's: sharded TFRecords, decode, preprocessing, shuffle, prefetch).
Devices: a GPU per clone and per worker where there are GPUs, else a CPU device each
(ConfigProto device_count). Each setup's processes start in turn, alone on the machine, and
report their time to first step (graph build, then session creation and initialization,
then the first step; the import of TensorFlow before it apart); then all stay warm, run
--warmup_steps untimed steps and, per round, --steps timed steps, the setups in an order
rotated each round so that machine noise hits all alike.

Prints, per setup, images/sec (global: every worker's images over the span from the first
worker's start to the last one's end; the median over rounds, and the spread: (max - min) /
median), seconds per step (median), the time to first step and the loss of the first and
last step; then the ratios of the medians: each deploy setup against its tf.distribute
counterpart, each precision against float32, XLA on against off and seeded against
unseeded. --json prints one object instead, with the fields `model_name`, `batch_size`,
`num_clones`, `devices`, `data`, `steps`, `warmup_steps`, `rounds`, `intra_op_threads`,
`inter_op_threads`, `tensorflow`, `bfloat16_cpu` (how this machine's CPU runs bfloat16:
precision.cpu_support's 'native', 'emulated', 'not rewritten' or 'unknown'), `seconds` (the
whole run) and `setups`: {setup name ("replicated bfloat16", "MirroredStrategy float32
xla"): {`variable_update` (or `mirrored`, `multi_worker_mirrored`), `precision`, `xla`,
`seed` (bool), `processes`, `images_per_sec` (median), `images_per_sec_rounds`, `spread`,
`sec_per_step` (median), `sec_per_step_rounds`, `startup` {`import_secs`, `build_secs`,
`init_secs`, `first_step_secs`, `to_first_step_secs` (build + init + first step)},
`loss_first`, `loss_last`}}, and `ratios`: {"A / B": ratio of their median images/sec}.
A process that fails or stops answering (--timeout_secs) ends the run with a one-line error
and exit code 1; every process the benchmark started is ended on exit.
"""
import time

STARTED = time.time()  # Before anything is imported: the import's share of start-up.

from slim_deploy.image_classifier import verbosity  # noqa: E402

verbosity.start()  # Before TensorFlow is imported.

import argparse  # noqa: E402
import collections  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import tensorflow.compat.v1 as tf  # noqa: E402

from benchmarks import harness, trainers  # noqa: E402
from benchmarks.harness import at_least, names_in  # noqa: E402
from benchmarks.trainers import VARIABLE_UPDATES  # noqa: E402
from slim_deploy.cluster import launch  # noqa: E402
from slim_deploy.deployment import precision  # noqa: E402
from slim_deploy.nets import nets_factory  # noqa: E402

PROG = f'python -m {__spec__.name}'  # Its usage's and error lines' program name.

Kind = collections.namedtuple('Kind', ['label', 'workers', 'counterpart'])
Kind.__doc__ = """How a setup trains: its label in the table, whether it runs as one process
of --num_clones clones ('one') or as --num_clones worker processes of one clone ('each'),
and its tf.distribute counterpart (None: it is one)."""
KINDS = {
    'parameter_server': Kind('parameter_server', 'one', 'mirrored'),
    'replicated': Kind('replicated', 'one', 'mirrored'),
    'collective': Kind('collective', 'each', 'multi_worker_mirrored'),
    'mirrored': Kind('MirroredStrategy', 'one', None),
    'multi_worker_mirrored': Kind('MultiWorkerMirroredStrategy', 'each', None),
}

SEED = 1  # Of the seeded setups (--seed on).

Setup = collections.namedtuple('Setup', ['kind', 'precision', 'xla', 'seed'])
Setup.__doc__ = """One configuration measured: a key of KINDS, a precision, XLA on or off,
seeded or not."""


def setup_name(setup):
    """'replicated bfloat16', 'MirroredStrategy float32 xla', 'replicated float32 seed': the
    setup's name."""
    return (f'{KINDS[setup.kind].label} {setup.precision}' + (' xla' if setup.xla else '') +
            (' seed' if setup.seed else ''))


def machine_devices(args):
    """(one-process devices, each worker's device, CPU device count of a one-process session
    (None: TensorFlow's), environment of worker i (a function)) for this machine."""
    gpus = len(tf.config.list_physical_devices('GPU'))
    if not gpus:
        return ([f'/device:CPU:{i}' for i in range(args.num_clones)], '/device:CPU:0',
                args.num_clones, lambda index: {})
    if gpus < args.num_clones:
        raise harness.BenchmarkError(f'{gpus} GPU(s) found: --num_clones {args.num_clones} '
                                     f'needs {args.num_clones}')
    visible = os.environ.get('CUDA_VISIBLE_DEVICES')
    ids = visible.split(',') if visible else [str(i) for i in range(gpus)]
    return ([f'/device:GPU:{i}' for i in range(args.num_clones)], '/device:GPU:0', None,
            lambda index: {'CUDA_VISIBLE_DEVICES': ids[index]})


def setups(args):
    """The setups of the run, in the order of the table: each variable update (then its
    tf.distribute counterpart, with --compare_mirrored) in each precision and XLA setting,
    deploy()'s in each seed setting."""
    kinds = list(args.variable_update)
    if args.compare_mirrored:
        kinds += [kind for kind in ('mirrored', 'multi_worker_mirrored')
                  if any(KINDS[k].counterpart == kind for k in args.variable_update)]
    return [Setup(kind, p, xla, seed) for kind in kinds for p in args.precision
            for xla in args.xla for seed in (args.seed if kind in VARIABLE_UPDATES else [False])]


def start_setup(processes, args, setup, machine, ports):
    """Starts `setup`'s processes (harness.Processes), a cluster's tasks on `ports` (an
    iterator of free ports); returns them."""
    local_devices, worker_device, cpu_devices, worker_env = machine
    name = setup_name(setup)
    role = dict(kind=setup.kind, precision=setup.precision, xla=setup.xla,
                seed=SEED if setup.seed else None)

    def start(process_name, process_role, env=None):
        return processes.start(process_name, harness.role_command(
            __spec__.name, process_role, args, trainers.OPTIONS), env)

    if KINDS[setup.kind].workers == 'one':
        return [start(name, dict(role, devices=local_devices, cpu_devices=cpu_devices))]
    workers = len(local_devices)
    cluster = {'worker': [f'{launch.LOCALHOST}:{next(ports)}' for _ in range(workers)]}
    started = []
    for index in range(workers):
        started.append(start(f'{name} worker {index}', dict(
            role, index=index, cluster=cluster, devices=[worker_device], cpu_devices=None),
            worker_env(index)))
    return started


def baselines(setup):
    """The setups `setup` is compared with: its tf.distribute counterpart (unseeded),
    float32, XLA off, unseeded."""
    return [setup._replace(kind=KINDS[setup.kind].counterpart, seed=False),
            setup._replace(precision='float32'), setup._replace(xla=False),
            setup._replace(seed=False)]


def benchmark(args, log):
    """Runs every setup; returns the results as a JSON-able dict. `log`: progress lines."""
    started = time.monotonic()
    machine = machine_devices(args)
    for name in args.precision:
        slow = precision.slowness(name, machine[0][0], precision.cpu_flags())
        if slow:
            log(f'warning: {slow}')
    names = {setup: setup_name(setup) for setup in setups(args)}
    results = {name: {'variable_update': setup.kind, 'precision': setup.precision,
                      'xla': setup.xla, 'seed': setup.seed} for setup, name in names.items()}
    with tempfile.TemporaryDirectory() as directory:
        processes = harness.Processes(directory, args.timeout_secs)
        try:
            ports = iter(launch.free_ports(launch.LOCALHOST, len(machine[0]) * sum(
                KINDS[setup.kind].workers == 'each' for setup in names)))
            workers = {}
            for setup, name in names.items():  # In turn: each start-up alone on the machine.
                workers[name] = start_setup(processes, args, setup, machine, ports)
                first = processes.collect(workers[name], 'start')
                results[name].update(processes=len(workers[name]), loss_first=first[0]['ready'],
                                     startup=first[0]['startup'])
                log(f'{name}: first step after '
                    f"{first[0]['startup']['to_first_step_secs']:.1f} s")
            everyone = [worker for started in workers.values() for worker in started]
            for worker in everyone:
                worker.send(warmup=args.warmup_steps)
            processes.collect(everyone, f'run {args.warmup_steps} warm-up steps')
            measured = harness.rounds(
                names.values(), args.rounds,
                lambda name: trainers.run_steps(processes, workers[name], args.steps),
                done=lambda number: log(f'round {number}/{args.rounds} done, '
                                        f'{time.monotonic() - started:.0f} s'))
        finally:
            processes.close()
    for name, result in results.items():
        result.update(trainers.summary(measured[name]))
    return {
        'model_name': args.model_name, 'batch_size': args.batch_size,
        'num_clones': args.num_clones, 'devices': machine[0][0].split(':')[1],
        'data': args.dataset_name or 'synthetic', 'steps': args.steps,
        'warmup_steps': args.warmup_steps, 'rounds': args.rounds,
        'intra_op_threads': args.intra_op_threads, 'inter_op_threads': args.inter_op_threads,
        'tensorflow': tf.__version__,
        'bfloat16_cpu': precision.cpu_support('bfloat16', precision.cpu_flags()),
        'setups': results,
        'ratios': harness.ratios({setup: results[name]['images_per_sec']
                                  for setup, name in names.items()}, baselines, setup_name),
        'seconds': time.monotonic() - started,
    }


def table(results):
    """The results as printable lines."""
    r = results
    lines = [
        f"{r['model_name']}, batch {r['batch_size']} per clone, momentum SGD, "
        f"{r['num_clones']} {r['devices']} devices, {r['data']} images; TensorFlow "
        f"{r['tensorflow']}",
        f"{r['steps']} timed steps per round after {r['warmup_steps']} warm-up steps, "
        f"medians of {r['rounds']} round(s); threads intra-op {r['intra_op_threads']}, "
        f"inter-op {r['inter_op_threads']} (0: TensorFlow's default); bfloat16 on this CPU: "
        f"{r['bfloat16_cpu']}", '',
        f"{'setup':<40} {'images/sec':>10} {'spread':>7} {'sec/step':>9} "
        f"{'first step':>11}  loss first -> last"]
    for name, setup in r['setups'].items():
        lines.append(f"{name:<40} {setup['images_per_sec']:>10.1f} {setup['spread']:>7.1%} "
                     f"{setup['sec_per_step']:>9.3f} "
                     f"{setup['startup']['to_first_step_secs']:>10.1f}s  "
                     f"{setup['loss_first']:.4f} -> {setup['loss_last']:.4f}")
    if r['ratios']:
        lines += ['', f"{'ratio of images/sec (medians)':<72} value"]
        lines += [f'{pair:<72} {value:5.3f}' for pair, value in r['ratios'].items()]
    lines += ['', "first step: graph build + session creation and initialization + the "
                  "first step, s (TensorFlow's import apart)", f"run took {r['seconds']:.0f} s"]
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument('--model_name', default='resnet_v1_50',
                        choices=nets_factory.NETWORKS.names, metavar='NAME',
                        help='network of nets_factory (default resnet_v1_50)')
    parser.add_argument('--batch_size', type=at_least(1), default=16,
                        help='images per clone and step (default 16)')
    parser.add_argument('--num_clones', type=at_least(1), default=2,
                        help='clones (devices); collective: worker processes (default 2)')
    parser.add_argument('--variable_update', type=names_in(VARIABLE_UPDATES),
                        default=['replicated'],
                        help='comma-separated: ' + ', '.join(VARIABLE_UPDATES) +
                             ' (default replicated)')
    parser.add_argument('--precision', type=names_in(precision.PRECISIONS.names),
                        default=['float32'],
                        help='comma-separated: ' + ', '.join(precision.PRECISIONS) +
                             ' (default float32)')
    parser.add_argument('--xla', type=names_in(('off', 'on')), nargs='?', const=['on'],
                        default=['off'], help='XLA compilation: off, on or off,on (default '
                                              'off; --xla alone: on)')
    parser.add_argument('--seed', type=names_in(('off', 'on')), nargs='?', const=['on'],
                        default=['off'], help="deploy()'s setups seeded (bit-reproducible): "
                                              'off, on or off,on (default off; --seed alone: '
                                              'on)')
    parser.add_argument('--compare_mirrored', action='store_true',
                        help="also run tf.distribute's MirroredStrategy (and, for collective, "
                             'MultiWorkerMirroredStrategy) in each precision')
    parser.add_argument('--dataset_name', help='train on the real tf.data pipeline of this '
                                               'dataset (default: synthetic images)')
    parser.add_argument('--dataset_dir', help="the dataset's directory (digits: none needed)")
    trainers.add_options(parser, steps=10, warmup_steps=3, rounds=3)
    args = parser.parse_args(argv)
    if 'collective' in args.variable_update and args.num_clones < 2:
        parser.error('--variable_update=collective needs --num_clones >= 2 (its workers)')
    args.xla = [value == 'on' for value in args.xla]
    args.seed = [value == 'on' for value in args.seed]
    return args


if __name__ == '__main__':
    sys.exit(trainers.main(PROG, parse_args(), STARTED, benchmark, table))
