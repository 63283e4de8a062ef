r"""Predicts how fast a cluster would train a network, per mode, before you rent it.

    plan_cluster --model_name resnet_v1_50 --worker_replicas 256 --link_gbps 10
    plan_cluster --model_name lenet --worker_replicas 1,8,64 --link_gbps 1,10 \
        --compute_secs 0.04 --straggler 2 --backup_workers 1

For each --link_gbps and --worker_replicas it prints, per mode (asynchronous ps workers,
their reads prefetched with --prefetch_reads, synchronous ps workers, each with its variables
in parts of each --variable_partition_min_mb, by default whole and in parts of 1 MB, and
collective all-reduce): the ps tasks (--num_ps_tasks, or the fewest that bring the step
within 1% of its best: 'choose'), the predicted seconds per step, examples per second, the
scaling (the fraction of the workers' compute the cluster turns into training), the step over
its network bound, and the busiest link with the bytes it passes per step; the mode to use is
marked. These are predictions on paper, not measurements: the docs' Sizing a cluster page
says what they count and what they leave out.

The network bytes are those the trainer's start-up plan prints with --link_gbps, read from the
graphs deploy() builds of --model_name (2 workers on a ps task, and 2 collective workers). The
compute is one worker's step of one clone on --batch_size synthetic images, timed on this
machine (--measure_steps steps after one to warm up, and as many of the forward pass alone),
unless --compute_secs gives it (and --forward_fraction its forward pass; default 1/3).
--overlap says how much of backprop and the sending of its gradients run at once (default 1:
wholly). With --gradient_compression the step moves 16-bit gradients, and backprop gains
what their casts and sums cost this machine per byte
(sizing_figures.compression_seconds_per_byte). --link_gbps is the rate the tensors' bytes
get: TCP over Ethernet frames of 1,500 bytes carries about 0.94 of a link's nominal rate.
The work is slim_deploy.deployment.sizing.plan.

Exit code: 0; 2 a bad flag (one line naming it).
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

import dataclasses  # noqa: E402
import math  # noqa: E402

from absl import flags  # noqa: E402

from slim_deploy.common.errors import UsageError  # noqa: E402
from slim_deploy.deployment import compression, network_traffic, sizing  # noqa: E402
from slim_deploy.image_classifier import builders, cli, sizing_figures  # noqa: E402

FLAGS = flags.FLAGS
CHOOSE = 'choose'
FORWARD_FRACTION = 1 / 3  # Of a given --compute_secs: backprop takes about twice the forward.

flags.DEFINE_string('model_name', 'lenet', 'Network to plan: a name of nets_factory.')
flags.DEFINE_integer('batch_size', 32, 'Examples per clone and step.', lower_bound=1)
flags.DEFINE_integer('num_clones', 1, 'Clones per worker, each on a device of its own (a '
                     "worker's step computes them in parallel).", lower_bound=1)
flags.DEFINE_integer('num_classes', None, "Classes of the network's logits; default: 10 for "
                     "lenet's and cifarnet's preprocessing families, else 1001 (ImageNet).",
                     lower_bound=2)
flags.DEFINE_list('worker_replicas', ['1', '8', '64', '256', '1024'],
                  'Numbers of workers to predict for, comma-separated.')
flags.DEFINE_string('num_ps_tasks', CHOOSE, "Ps tasks of the ps modes: a number >= 1, or "
                    f"'{CHOOSE}': the fewest that bring the step within 1% of its best.")
flags.DEFINE_list('variable_partition_min_mb', ['0', '1'],
                  "Part sizes in MB to predict the ps modes with, comma-separated, as "
                  "train_image_classifier's --variable_partition_min_mb splits the variables "
                  '(into parts of about that size, at most one per ps task); 0: whole. The '
                  'default compares whole variables with parts of 1 MB.')
flags.DEFINE_list('link_gbps', ['10'], "Bandwidths of every host's link in Gbit/s each way, "
                  'comma-separated: a table each.')
flags.DEFINE_float('compute_secs', None, "Seconds of one worker's training step (its clones in "
                   'parallel); default: timed on this machine.')
flags.DEFINE_float('forward_fraction', None, "The forward pass's part of --compute_secs, in "
                   f'[0, 1); default {FORWARD_FRACTION:.3g}. Timed with the step without '
                   '--compute_secs.')
flags.DEFINE_float('overlap', 1.0, 'The share of the shorter of backprop and the sending of its '
                   'gradients that hides behind the longer: 1 (all of it) gives the fastest '
                   'step a mode can go; about 0.5 on CPU workers (the Sizing page).',
                   lower_bound=0, upper_bound=1)
flags.DEFINE_integer('measure_steps', 3, 'Steps timed (after one to warm up) to measure the '
                     'compute.', lower_bound=1)
flags.DEFINE_float('straggler', 1.0, 'One worker is this many times slower than the others.',
                   lower_bound=1)
flags.DEFINE_integer('backup_workers', 0, 'Synchronous ps workers whose gradients an update '
                     'does without (--replicas_to_aggregate = workers - this).', lower_bound=0)
flags.DEFINE_enum('gradient_compression', 'none', list(compression.COMPRESSIONS),
                  'The dtype gradients cross between tasks in (none: float32).')
flags.DEFINE_bool('prefetch_reads', False, "Asynchronous ps workers prefetch their reads, as "
                  "train_image_classifier's --prefetch_reads: each step's next values cross "
                  'while it computes.')
for _name in ('compute_secs', 'forward_fraction', 'straggler'):
    flags.register_validator(_name, lambda value: value is None or math.isfinite(value),
                             message=f'--{_name} must be finite')


def numbers(flag, kind, valid, description):
    """The values of list flag --`flag` converted by `kind` (int, float); UsageError naming
    the flag and `description` (what it takes) unless each converts and is `valid`."""
    values = []
    for text in FLAGS[flag].value:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not valid(value):
            raise UsageError(f'--{flag} takes {description}, comma-separated; got {text!r}')
        values.append(value)
    if not values:
        raise UsageError(f'--{flag} takes {description}, comma-separated; got none')
    return values


def ps_tasks():
    """--num_ps_tasks: a number >= 1, or None for 'choose'; UsageError otherwise."""
    if FLAGS.num_ps_tasks == CHOOSE:
        return None
    if not FLAGS.num_ps_tasks.isdigit() or int(FLAGS.num_ps_tasks) < 1:
        raise UsageError(f"--num_ps_tasks takes a number >= 1 or '{CHOOSE}', got "
                         f'{FLAGS.num_ps_tasks!r}')
    return int(FLAGS.num_ps_tasks)


def given_compute():
    """sizing.Compute of --compute_secs and --forward_fraction (default FORWARD_FRACTION);
    None without --compute_secs. UsageError for values out of range, or --forward_fraction
    without --compute_secs."""
    if FLAGS.compute_secs is None:
        if FLAGS.forward_fraction is not None:
            raise UsageError('--forward_fraction needs --compute_secs (without it, the forward '
                             'pass is timed with the step)')
        return None
    if FLAGS.compute_secs <= 0:
        raise UsageError(f'--compute_secs must be > 0, got {FLAGS.compute_secs}')
    fraction = FORWARD_FRACTION if FLAGS.forward_fraction is None else FLAGS.forward_fraction
    if not 0 <= fraction < 1:
        raise UsageError(f'--forward_fraction must be in [0, 1), got {fraction}')
    return sizing.Compute(FLAGS.compute_secs, FLAGS.compute_secs * fraction, FLAGS.overlap)


def compute(given, num_classes):
    """(sizing.Compute of one worker's step, where it comes from): `given`, or timed here."""
    if given is not None:
        return given, (f'given (--compute_secs), the forward pass '
                       f'{given.forward / given.seconds:.3g} of it (--forward_fraction)')
    print(f'Timing {FLAGS.measure_steps} training steps of {FLAGS.model_name} on this machine '
          '...', flush=True)
    measured = dataclasses.replace(
        sizing_figures.measure_compute(FLAGS.model_name, FLAGS.batch_size, num_classes,
                                       FLAGS.measure_steps), overlap=FLAGS.overlap)
    return measured, (f'measured on this machine (median of {FLAGS.measure_steps} steps), '
                      f'the forward pass {network_traffic.human_seconds(measured.forward)}')


def traffic_text(ps_traffic, collective_traffic):
    """A line on what a step moves: a ps worker's link, and the all-reduces."""
    worker, reduces = ps_traffic.worker, collective_traffic.all_reduces
    return (f'ps: each worker receives {network_traffic.human_bytes(worker.bytes_in)} and sends '
            f'{network_traffic.human_bytes(worker.bytes_out)} per step, {worker.rule} '
            f'({len(ps_traffic.groups)} variables with their ops); collective: '
            f'{network_traffic.human_bytes(reduces.bytes)} all-reduced per step in '
            f'{reduces.count} all-reduce{"s" * (reduces.count != 1)}')


def main(argv):
    del argv
    sizing_figures.image_size(FLAGS.model_name)  # A name of an image network.
    workers = numbers('worker_replicas', int, lambda value: value >= 1, 'whole numbers >= 1')
    links = numbers('link_gbps', float, lambda value: math.isfinite(value) and value > 0,
                    'numbers > 0 (Gbit/s)')
    tasks = ps_tasks()
    partition_sizes = [builders.partition_bytes(size) for size in numbers(
        'variable_partition_min_mb', float, lambda value: math.isfinite(value) and value >= 0,
        'numbers >= 0 (MB)')]
    too_few = [count for count in workers if 1 < count <= FLAGS.backup_workers]
    if too_few:
        raise UsageError(f'--backup_workers={FLAGS.backup_workers} leaves no gradient to '
                         f'aggregate with --worker_replicas={too_few[0]}: it must be below '
                         'every number of workers above 1')
    given = given_compute()
    num_classes = FLAGS.num_classes or sizing_figures.default_num_classes(FLAGS.model_name)
    computed, source = compute(given, num_classes)
    ps_traffic, collective_traffic = sizing_figures.step_traffics(
        FLAGS.model_name, FLAGS.batch_size, num_classes, FLAGS.gradient_compression)
    if FLAGS.gradient_compression != 'none':
        per_byte = sizing_figures.compression_seconds_per_byte(FLAGS.gradient_compression)
        extra = sizing.compression_seconds(collective_traffic, per_byte)
        computed = dataclasses.replace(computed, seconds=computed.seconds + extra)
        source += (f'; plus {network_traffic.human_seconds(extra)} for '
                   f'{FLAGS.gradient_compression} gradients ({per_byte * 1e9:.3g} ns per '
                   'float32 byte, timed here)')
    plural = 's' * (FLAGS.num_clones != 1)
    print('Predictions on paper, not measurements (latency and overheads not counted)')
    print(f'model    {FLAGS.model_name}, {num_classes} classes, {FLAGS.batch_size} examples per '
          f'clone, {FLAGS.num_clones} clone{plural} per worker'
          + (f', one worker {FLAGS.straggler:g} times slower' if FLAGS.straggler > 1 else '')
          + (f', {FLAGS.backup_workers} backup workers' if FLAGS.backup_workers else ''))
    print(f'compute  {network_traffic.human_seconds(computed.seconds)} per worker step: {source}'
          + (f'; {computed.overlap:g} of backprop and its sending overlap (--overlap)'
             if computed.overlap < 1 else ''))
    print(f'traffic  {traffic_text(ps_traffic, collective_traffic)}')
    for link_gbps in links:
        plans = [sizing.plan(ps_traffic, collective_traffic, computed, count, link_gbps, tasks,
                             FLAGS.num_clones, FLAGS.straggler, FLAGS.backup_workers,
                             partition_sizes, FLAGS.prefetch_reads)
                 for count in workers]
        print(f'\nOn links of {link_gbps:g} Gbit/s ({link_gbps * 125:g} MB/s) each way:')
        print('\n'.join(sizing.plan_rows(plans, FLAGS.batch_size * FLAGS.num_clones)))
    return 0


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
