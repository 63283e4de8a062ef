"""What one slow worker costs synchronous training, and what backup workers win back.

    python -m benchmarks.stragglers [--workers 4] [--num_ps_tasks 2] [--link_bandwidth 1gbit]
        [--slowdown 3] [--modes sync,backup,collective] [--backup_workers 1]
        [--batch_size 32] [--warmup_steps 5] [--steps 60] [--rounds 1]
        [--timeout_secs 600] [--json]

Each mode trains lenet on the embedded digits (one clone of --batch_size per worker, through
train_image_classifier.py) as a cluster that launch_cluster runs on emulated hosts (needs
root), every host's link limited to --link_bandwidth each way, twice: with every worker
alike, and with the last worker's link --slowdown times slower (launch_cluster --slow_host),
a straggler whose steps wait on its link. The modes:

  sync        --num_ps_tasks ps tasks, --sync_replicas: each update aggregates a gradient of
              every worker, so it waits for the straggler's
  backup      the same with --backup_workers backup workers (--replicas_to_aggregate W - B):
              each update takes the first W - B gradients, the late ones are dropped
  collective  --variable_update=collective: every step all-reduces over a ring through every
              worker's link

The two runs of a mode are adjacent in time (their order alternating over --rounds). A run's
rate is the chief's global steps per second from global step --warmup_steps to the last
(--warmup_steps + --steps), each progress line timed as it arrives (the default 60 steps
let a late backup worker's sit-outs, 1, 4 and then 16 updates, reach their full length, as
in a run of thousands of steps; a window of 20 falls mostly before that); images per second
count the gradients an update applies (W - B per update for backup, W for the others, times
--batch_size). Prints per mode the rates without and with the straggler (medians over the
rounds) and their ratio, the rate the straggler leaves; and, with both sync and backup, backup's
targets against plain sync with every worker alike: at least 0.95 of its updates per second
with every worker alike, and at least 0.85 of its images per second with the straggler.
--json prints one object instead:
`workers`, `num_ps_tasks`, `link_bandwidth`, `slow_link`, `batch_size`, `warmup_steps`,
`steps`, `rounds`, `backup_workers`, `seconds` and `modes`: {mode: {`label`,
`images_per_update`, `alike` and `straggler`: {`steps_per_sec` (median), `images_per_sec`,
`steps_per_sec_rounds`}, `kept` (straggler / alike)}}, `targets` ([{`name`, `ratio`,
`minimum`, `met`}], or None without sync or backup).

A launch that fails or exceeds --timeout_secs ends the run with a one-line error and exit
code 1 (its output is kept in the work directory); 2 for bad arguments. Every process and
host it made is removed on exit.
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from benchmarks import harness
from benchmarks.harness import at_least, names_in
from slim_deploy.cluster import emulated_hosts

PROG = f'python -m {__spec__.name}'  # Its usage's and error lines' program name.
MODES = {'sync': 'ps sync', 'backup': 'ps sync with backup workers',
         'collective': 'collective'}
CASES = ('alike', 'straggler')  # Every worker alike; the last one's link --slowdown times slower.
# Backup workers' targets: (name, backup's (case, rate), the minimum share of sync alike's rate).
TARGETS = (("backup alike's updates/s", ('alike', 'steps_per_sec'), 0.95),
           ("backup's images/s with the straggler", ('straggler', 'images_per_sec'), 0.85))
POLL_SECS = 0.02  # How often the launcher's output is taken: the resolution of the timings.


def launcher_options(args, mode, case):
    """launch_cluster's options of `mode`'s run in `case` (of CASES)."""
    ps = (['--num_ps_tasks=0'] if mode == 'collective' else
          [f'--num_ps_tasks={args.num_ps_tasks}', '--sync_replicas'])
    slow = ([f'--slow_host=worker:{args.workers - 1}={args.slow_link}'] if case == 'straggler'
            else [])
    return [*ps, f'--worker_replicas={args.workers}', '--emulated_hosts',
            f'--link_bandwidth={args.link_bandwidth}', *slow]


def training_flags(args, mode, train_dir, dataset_dir):
    """train_image_classifier.py's flags of `mode`'s run: lenet on the digits, one clone per
    worker, a progress line per step, no checkpoint or summary while it runs."""
    aggregated = {'sync': [f'--replicas_to_aggregate={args.workers}'],
                  'backup': [f'--replicas_to_aggregate={args.workers - args.backup_workers}'],
                  'collective': ['--variable_update=collective']}[mode]
    return [f'--train_dir={train_dir}', f'--dataset_dir={dataset_dir}', '--model_name=lenet',
            '--num_clones=1', f'--batch_size={args.batch_size}', '--log_every_n_steps=1',
            f'--max_number_of_steps={args.warmup_steps + args.steps}',
            '--save_interval_secs=0', '--save_summaries_secs=0', *aggregated]


def steps_per_sec(progress, first):
    """The global steps per second of a task's `progress` ([(global step, time it was
    seen)]) from its first line at global step `first` or later to its last line."""
    start = next(((step, seen) for step, seen in progress if step >= first), None)
    if start is None or progress[-1][0] <= start[0]:
        raise harness.BenchmarkError(f'the chief logged no step after global step {first}')
    end = progress[-1]
    return (end[0] - start[0]) / (end[1] - start[1])


def run(args, mode, case, work_dir, dataset_dir):
    """The chief's global steps per second in `mode`'s run in `case` (of CASES)."""
    name = f'{mode}-{case}-{time.monotonic_ns()}'
    log_path = os.path.join(work_dir, f'{name}.log')
    deadline = time.monotonic() + args.timeout_secs
    with open(log_path, 'w') as log:
        job = harness.LaunchedJob(
            launcher_options(args, mode, case),
            training_flags(args, mode, os.path.join(work_dir, name), dataset_dir), log)
        try:
            while not job.ended:
                if time.monotonic() > deadline:
                    raise harness.BenchmarkError(
                        f'{name}: not done after {args.timeout_secs:g} s (--timeout_secs); '
                        f'its output: {log_path}')
                job.pump(POLL_SECS)
        finally:
            job.kill()
            job.leftovers()
    if job.process.returncode:
        raise harness.BenchmarkError(f'{name}: the launcher exited with code '
                                     f'{job.process.returncode}; its output: {log_path}')
    return steps_per_sec(job.progress.get('worker:0', []), args.warmup_steps)


def stragglers(args, work_dir, log):
    """Runs every mode without and with a straggler; returns the results (a JSON-able dict).
    `log`: progress lines."""
    started = time.monotonic()
    dataset_dir = harness.prepare_digits(os.path.join(work_dir, 'digits'))
    rates = {mode: {case: [] for case in CASES} for mode in args.modes}
    for index in range(args.rounds):
        for mode in args.modes:
            for case in CASES[::1 if index % 2 == 0 else -1]:
                rates[mode][case].append(run(args, mode, case, work_dir, dataset_dir))
                log(f'round {index + 1}, {MODES[mode]}, {case}: {rates[mode][case][-1]:.3f} '
                    f'steps/s, {time.monotonic() - started:.0f} s')
    modes = {}
    for mode, by_case in rates.items():
        per_update = args.batch_size * (args.workers - (args.backup_workers if mode == 'backup'
                                                         else 0))
        cases = {case: {'steps_per_sec': statistics.median(values),
                        'images_per_sec': statistics.median(values) * per_update,
                        'steps_per_sec_rounds': values}
                 for case, values in by_case.items()}
        kept = cases['straggler']['steps_per_sec'] / cases['alike']['steps_per_sec']
        modes[mode] = {'label': MODES[mode], 'images_per_update': per_update, **cases,
                       'kept': kept}
    return {'workers': args.workers, 'num_ps_tasks': args.num_ps_tasks,
            'link_bandwidth': args.link_bandwidth, 'slow_link': args.slow_link,
            'batch_size': args.batch_size, 'warmup_steps': args.warmup_steps,
            'steps': args.steps, 'rounds': args.rounds, 'backup_workers': args.backup_workers,
            'modes': modes, 'targets': targets(modes),
            'seconds': round(time.monotonic() - started, 1)}


def targets(modes):
    """TARGETS measured in `modes` (stragglers()'s): [{'name', 'ratio' (backup's rate over
    sync alike's), 'minimum', 'met'}]; None without sync or backup."""
    if not {'sync', 'backup'} <= modes.keys():
        return None
    found = []
    for name, (case, rate), minimum in TARGETS:
        ratio = modes['backup'][case][rate] / modes['sync']['alike'][rate]
        found.append({'name': name, 'ratio': ratio, 'minimum': minimum,
                      'met': ratio >= minimum})
    return found


def table(result):
    """The result as printable lines."""
    r = result
    lines = [f"lenet, batch {r['batch_size']} per worker, {r['workers']} workers on emulated "
             f"hosts, links of {r['link_bandwidth']}; the straggler: worker:{r['workers'] - 1} "
             f"on {r['slow_link']}; {r['steps']} steps after {r['warmup_steps']}, medians of "
             f"{r['rounds']} round(s)",
             f"{'mode':<40} {'steps/s alike':>13} {'with straggler':>14} {'images/s alike':>14} "
             f"{'with straggler':>14} {'kept':>6}"]
    for mode, m in r['modes'].items():
        label = m['label'] + (f", {r['backup_workers']} of {r['workers']}" if mode == 'backup'
                              else '') + (f", {r['num_ps_tasks']} ps" if mode != 'collective'
                                          else '')
        lines.append(f"{label:<40} {m['alike']['steps_per_sec']:>13.3f} "
                     f"{m['straggler']['steps_per_sec']:>14.3f} "
                     f"{m['alike']['images_per_sec']:>14.1f} "
                     f"{m['straggler']['images_per_sec']:>14.1f} {m['kept']:>6.3f}")
    for t in r['targets'] or ():
        lines.append(f"target: {t['name']} >= {t['minimum']} of sync alike's: {t['ratio']:.3f}, "
                     f"{'met' if t['met'] else 'NOT met'}")
    lines.append(f"run took {r['seconds']:g} s")
    return lines


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument('--workers', type=at_least(2), default=4,
                        help='worker tasks, one emulated host each (default 4)')
    parser.add_argument('--num_ps_tasks', type=at_least(1), default=2,
                        help='ps tasks of sync and backup (default 2)')
    parser.add_argument('--link_bandwidth', default='1gbit',
                        help="tc rate of every host's link, each way (default 1gbit)")
    parser.add_argument('--slowdown', type=at_least(1.0, float), default=3.0,
                        help="how many times slower the straggler's link is (default 3)")
    parser.add_argument('--modes', type=names_in(tuple(MODES)), default=list(MODES),
                        help='comma-separated: ' + ', '.join(MODES) + ' (default: all)')
    parser.add_argument('--backup_workers', type=at_least(1), default=1,
                        help='backup workers of backup (default 1)')
    parser.add_argument('--batch_size', type=at_least(1), default=32,
                        help='images per worker and step (default 32)')
    parser.add_argument('--warmup_steps', type=at_least(1), default=5,
                        help='global steps before the timing starts (default 5)')
    parser.add_argument('--steps', type=at_least(1), default=60,
                        help='global steps timed (default 60)')
    parser.add_argument('--rounds', type=at_least(1), default=1,
                        help='runs of each mode and case (default 1)')
    parser.add_argument('--timeout_secs', type=at_least(1.0, float), default=600.0,
                        help='limit of each launch (default 600)')
    parser.add_argument('--json', action='store_true', help='print one JSON object')
    args = parser.parse_args(argv)
    bits = emulated_hosts.rate_bits(args.link_bandwidth)
    if bits is None:
        parser.error(f'--link_bandwidth {args.link_bandwidth!r} is not a rate such as 100mbit '
                     'or 1gbit')
    args.slow_link = f'{round(bits / args.slowdown / 1e3)}kbit'
    if 'backup' in args.modes and args.backup_workers >= args.workers:
        parser.error(f'--backup_workers {args.backup_workers} leaves no gradient to aggregate '
                     f'with --workers {args.workers}')
    harness.require_emulated_hosts(parser)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    harness.exit_on_sigterm()
    work_dir = tempfile.mkdtemp(prefix='stragglers-')
    try:
        result = stragglers(args, work_dir, lambda line: print(line, file=sys.stderr,
                                                               flush=True))
    except harness.BenchmarkError as e:
        print(f'{PROG}: error: {e}', file=sys.stderr)
        return 1
    harness.print_result(result, table(result), args.json)
    shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
