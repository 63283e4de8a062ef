"""Kills tasks of a training cluster at random steps and checks that the job survives.

    python -m benchmarks.fault_injection [--kills 5] [--seed 0] [--max_number_of_steps 1000]
        [--num_ps_tasks 1] [--worker_replicas 2] [--max_restarts N] [--signals SIGKILL,SIGTERM]
        [--emulated_hosts [--partitions N] [--task_timeout_secs 20]]
        [--plan TASK[@FAULT],...] [--train_dir DIR] [--dataset_dir DIR] [--min_accuracy 0.9]
        [--time_limit_secs 900] [--json] [--verbose] [--keep] [-- TRAINING FLAGS...]

It runs `python -m slim_deploy.cluster.launch --num_ps_tasks P --worker_replicas W
--max_restarts N` on train_image_classifier.py (lenet on the embedded digits, converted into a
temporary directory unless --dataset_dir is given, trained as slim's train_lenet_on_mnist.sh
trains it: plain SGD at a fixed 0.01 without weight decay, whose first steps do not blow the
loss up as the default RMSProp's can (to 6-25 at step 2), which asynchronous workers may not
recover from; one clone per worker, a checkpoint every --save_interval_secs=2 so that a lost ps
task costs little), reads the launcher's output as it comes, and kills --kills tasks one after
the other: each a random task (ps:I or worker:I; worker:0 is the chief) sent SIGKILL or
SIGTERM, picked at random from --signals (--plan fixes the tasks and signals instead), at the
first progress line at or past a target global step drawn at random (seeded) in each of --kills
equal spans of the first half of the run. The task's pid is that of the launcher's child
process whose TF_CONFIG names it. Before the next kill it waits until the launcher has
restarted the task (the whole job, for a ps task) and the new incarnation has trained (a
progress line from it; from the chief, for a ps task), and for a few more steps; no kill is
made in the last 5% of the run. A restarted worker takes 10-30 s to start here, while the
others train on alone: hence the default of 1000 steps for 5 kills.

Once the launcher exits, eval_image_classifier.py evaluates the last checkpoint. Prints on
stdout a summary (with --json, one JSON object instead, the text going to stderr): each
kill (task, signal, global step, the step a SIGTERMed worker stopped at, the checkpoint the
chief resumed from, how long until the task trained again), the launcher's restart lines,
whether the job survived (launcher exit code 0), the final checkpoint's global step and the
test accuracy; a line per kill and recovery goes to stderr as it happens (--verbose adds
the launcher's output). Exit code 0 when every kill was made, the job survived, no task
process outlived the launcher, the final checkpoint is at --max_number_of_steps and the
accuracy is at least --min_accuracy; 1 otherwise, with one line on stderr saying why (the
work directory, with the launcher's output in launch.log, is then kept); 2 for bad
arguments.

With --emulated_hosts the launcher runs each task on an emulated host of its own
(slim_deploy.cluster.emulated_hosts; needs root), and --partitions N adds N partitions to the
kills (with the same seeded choice of tasks and steps, the kinds in random order): the task's host
is cut off (no reset: its packets vanish) for a random time, either shorter (0.2-0.7 x) or
longer (1.5-2.5 x) than --task_timeout_secs, then healed. A short one must heal with no
restart; after a long one, the tasks that need the host exit (code 75) and the launcher
restarts the whole job, which resumes once the host is back. A partition has recovered when
the chief trains after the heal (and after the restart, if there was one).

Everything is bounded by --time_limit_secs: on expiry, or on SIGINT/SIGTERM, the launcher
and every task are killed. The default run (5 kills, 1000 steps, 1 ps + 2 workers) takes
3-4 minutes on a shared 2-core machine (seed 0: 235 s, seed 5: 178 s), about 130 s of
it training; each restart costs 10-40 s.
"""
import argparse
import os
import random
import shutil
import signal
import sys
import tempfile
import time

from benchmarks import harness
from benchmarks.faults import PARTITION, Injector, kill_plan, kill_window, plan_list, signal_list
from benchmarks.harness import at_least

PROG = f'python -m {__spec__.name}'  # Its usage's and error lines' program name.


def say(text):
    print(f'{PROG}: {text}', file=sys.stderr, flush=True)


# ---- The run ----

def launcher_options(args):
    """The options of slim_deploy.cluster.launch for the run."""
    return [f'--num_ps_tasks={args.num_ps_tasks}', f'--worker_replicas={args.worker_replicas}',
            f'--max_restarts={args.max_restarts}',
            *(['--emulated_hosts'] if args.emulated_hosts else [])]


def training_flags(args, train_dir, dataset_dir):
    """The flags of train_image_classifier.py: lenet on the digits as slim trains lenet, one
    clone per worker."""
    return [f'--task_timeout_secs={args.task_timeout_secs}', f'--train_dir={train_dir}',
            f'--dataset_dir={dataset_dir}', '--dataset_name=digits', '--model_name=lenet',
            '--optimizer=sgd', '--learning_rate=0.01', '--learning_rate_decay_type=fixed',
            '--weight_decay=0',
            '--num_clones=1', f'--batch_size={args.batch_size}',
            f'--log_every_n_steps={args.log_every_n_steps}',
            f'--max_number_of_steps={args.max_number_of_steps}',
            f'--save_interval_secs={args.save_interval_secs}', *args.training_flags]


def fault_injection(args, work_dir):
    """Runs the job with its kills and evaluates it; returns the summary (a JSON-able dict),
    its 'failure' a one-line reason or None."""
    started = time.monotonic()
    deadline = started + args.time_limit_secs
    rng = random.Random(args.seed)
    plan = kill_plan(args, rng)
    train_dir = args.train_dir or os.path.join(work_dir, 'train')
    summary = {
        'num_ps_tasks': args.num_ps_tasks, 'worker_replicas': args.worker_replicas,
        'max_number_of_steps': args.max_number_of_steps, 'max_restarts': args.max_restarts,
        'seed': args.seed, 'kills_planned': [{'target_step': step, 'task': task, 'signal': name}
                                             for step, task, name in plan],
        'kills': [], 'restarts': [], 'finished': {}, 'launcher_exit_code': None,
        'survived': False,
        'final_checkpoint_step': None, 'accuracy': None, 'evaluated_step': None,
        'min_accuracy': args.min_accuracy, 'leftover_processes': [],
        'train_dir': train_dir, 'log': os.path.join(work_dir, 'launch.log'),
        'seconds': None, 'failure': None}
    job = None
    try:
        dataset_dir = args.dataset_dir or harness.prepare_digits(os.path.join(work_dir, 'digits'))
        with open(summary['log'], 'w') as log:
            job = harness.LaunchedJob(launcher_options(args),
                                      training_flags(args, train_dir, dataset_dir), log,
                                      args.verbose)
            say(f'launcher pid {job.process.pid}: {args.num_ps_tasks} ps + '
                f'{args.worker_replicas} workers, {args.max_number_of_steps} steps, '
                f'{len(plan)} kills planned at global steps {[p[0] for p in plan]}')
            injector = Injector(job, plan, started, deadline, args.recovery_timeout_secs,
                                last_kill_step=kill_window(args)[1],
                                gap=2 * args.log_every_n_steps, say=say,
                                partition_timeout=args.task_timeout_secs, rng=rng)
            try:
                injector.run()
            finally:
                summary['kills'] = [{k: v for k, v in kill.items()
                                     if k not in ('line', 'restart_line')}
                                    for kill in injector.kills]
                summary['restarts'] = [r[3] for r in job.restarts]
                summary['finished'] = {task: {'global_step': step, 'steps_here': here}
                                       for task, (step, here) in sorted(job.finished.items())}
                exited = job.process.poll() is not None  # By itself, not killed here.
                job.kill()
                left = job.leftovers()
                if exited:  # Otherwise they were being killed with the launcher.
                    summary['leftover_processes'] = left
                summary['final_checkpoint_step'] = harness.final_checkpoint_step(train_dir)
        code = summary['launcher_exit_code'] = job.process.returncode
        summary['survived'] = code == 0
        if summary['final_checkpoint_step'] is not None:
            summary['accuracy'], summary['evaluated_step'] = harness.evaluate(
                train_dir, deadline - time.monotonic())
        summary['failure'] = verdict(summary, len(plan))
    except harness.BenchmarkError as e:
        made = len(summary['kills'])
        summary['failure'] = (f'{e} ({args.time_limit_secs:g} s, --time_limit_secs) after '
                              f'{made} of {len(plan)} kills' if str(e) == 'time limit reached'
                              else str(e))
    finally:
        if job is not None and job.process.poll() is None:
            job.kill()
        summary['seconds'] = round(time.monotonic() - started, 1)
    return summary


def verdict(summary, planned):
    """Why the run failed, in one line; None when it passed."""
    if not summary['survived']:
        return (f'the job did not survive: the launcher exited with code '
                f'{summary["launcher_exit_code"]} after {len(summary["restarts"])} restarts')
    if len(summary['kills']) < planned:
        return (f'only {len(summary["kills"])} of the {planned} kills were made before '
                'training neared its end (a restarted worker takes long to start while the '
                'others train on: raise --max_number_of_steps)')
    if summary['leftover_processes']:
        return f'processes left running after the launcher exited: ' \
               f'{", ".join(summary["leftover_processes"])}'
    step, last = summary['final_checkpoint_step'], summary['max_number_of_steps']
    if step != last:
        return f'the final checkpoint is at global step {step}, not {last}'
    if summary['accuracy'] < summary['min_accuracy']:
        return (f'accuracy {summary["accuracy"]:.4f} is below --min_accuracy '
                f'{summary["min_accuracy"]:g}')
    return None


def report(summary):
    """The summary as printable lines."""
    s = summary
    lines = [f"{s['num_ps_tasks']} ps + {s['worker_replicas']} workers, "
             f"{s['max_number_of_steps']} steps, --max_restarts {s['max_restarts']}, "
             f"seed {s['seed']}: {len(s['kills'])} of {len(s['kills_planned'])} kills made"]
    for i, kill in enumerate(s['kills'], 1):
        facts = [f"kill {i}: {kill['task']:<9} {kill['signal']:<7} at global step "
                 f"{kill['step']} (target {kill['target_step']}, {kill['seconds']:g} s)"]
        if kill['signal'] == PARTITION:
            facts.append(f"cut off for {kill['partition_secs']:g} s")
        if kill['stopped_at'] is not None:
            facts.append(f"stopped at step {kill['stopped_at']}")
        if kill['resumed_from'] is not None:
            facts.append(f"chief resumed from checkpoint step {kill['resumed_from']}")
        if kill['recovery_secs'] is not None:
            watched = 'the chief' if kill['task'].startswith('ps:') else kill['task']
            facts.append(f"{watched} trained again after {kill['recovery_secs']:g} s")
        else:
            facts.append('no restarted incarnation trained before the end')
        lines.append('; '.join(facts))
    lines.append(f"launcher restarts: {len(s['restarts'])}")
    lines += [f'  {line}' for line in s['restarts']]
    code = s['launcher_exit_code']
    lines.append('launcher: ' + (f'killed by {PROG}' if code is None else
                                 f'exit code {code}' + (' (survived)' if code == 0 else '')))
    lines.append(f"final checkpoint: global step {s['final_checkpoint_step']} of "
                 f"{s['max_number_of_steps']}")
    if s['accuracy'] is not None:
        lines.append(f"accuracy: {s['accuracy']:.4f} at global step {s['evaluated_step']} "
                     f"(--min_accuracy {s['min_accuracy']:g})")
    if s['leftover_processes']:
        lines.append(f"leftover processes (killed): {', '.join(s['leftover_processes'])}")
    lines.append(f"took {s['seconds']:g} s; train_dir {s['train_dir']}")
    lines.append('result: ' + ('passed' if s['failure'] is None else f"FAILED: {s['failure']}"))
    return lines


# ---- Command line ----

def parse_args(argv):
    split = argv.index('--') if '--' in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog=PROG, usage='%(prog)s [options] [-- TRAINING FLAGS...]',
        description=__doc__.splitlines()[0] + ' Flags after "--" go to '
        'train_image_classifier.py.')
    parser.add_argument('--num_ps_tasks', metavar='P', type=at_least(1), default=1,
                        help='ps tasks (default 1)')
    parser.add_argument('--worker_replicas', metavar='W', type=at_least(1), default=2,
                        help='worker tasks, worker:0 the chief (default 2)')
    parser.add_argument('--max_number_of_steps', metavar='STEPS', type=at_least(20),
                        default=1000,
                        help='global step training stops at (default 1000: a worker kill lets '
                             'the others train 100-250 steps alone while it restarts)')
    parser.add_argument('--kills', metavar='N', type=at_least(0), default=None,
                        help='kills to make (default 5, or the length of --plan)')
    parser.add_argument('--plan', type=plan_list, default=None, metavar='TASK[@FAULT],...',
                        help='the tasks to kill (or cut off), in order, e.g. '
                             'worker:1,ps:0@SIGTERM,ps:0@PARTITION (a signal left out is '
                             'picked from --signals); default: random tasks')
    parser.add_argument('--emulated_hosts', action='store_true',
                        help='run each task on an emulated host of its own (needs root)')
    parser.add_argument('--partitions', metavar='N', type=at_least(0), default=0,
                        help='partitions to make besides the kills (needs --emulated_hosts; '
                             'default 0)')
    parser.add_argument('--task_timeout_secs', metavar='SECS', type=at_least(1.0, float),
                        default=20.0,
                        help="the trainer's --task_timeout_secs (default 20)")
    parser.add_argument('--signals', type=signal_list, default=['SIGKILL', 'SIGTERM'],
                        metavar='SIGNAL,...',
                        help='signals a kill picks from at random (default SIGKILL,SIGTERM)')
    parser.add_argument('--max_restarts', metavar='N', type=at_least(0), default=None,
                        help="the launcher's --max_restarts (default: kills + partitions + 2)")
    parser.add_argument('--seed', metavar='N', type=int, default=0,
                        help='seed of the kill steps, tasks and signals (default 0)')
    parser.add_argument('--batch_size', metavar='N', type=at_least(1), default=32,
                        help='examples per worker and step (default 32)')
    parser.add_argument('--log_every_n_steps', metavar='N', type=at_least(1), default=5,
                        help='steps between progress lines of each worker (default 5)')
    parser.add_argument('--save_interval_secs', metavar='SECS', type=at_least(1), default=2,
                        help="seconds between the chief's checkpoints (default 2)")
    parser.add_argument('--train_dir', metavar='DIR', default=None,
                        help='where training writes (must be new or empty; default: in a '
                             'temporary work directory)')
    parser.add_argument('--dataset_dir', metavar='DIR', default=None,
                        help='converted digits (default: converted into the work directory)')
    parser.add_argument('--min_accuracy', metavar='A', type=float, default=0.9,
                        help='test accuracy the final checkpoint must reach (default 0.9)')
    parser.add_argument('--time_limit_secs', metavar='SECS', type=at_least(1.0, float),
                        default=900.0,
                        help='bound on the whole run, seconds (default 900)')
    parser.add_argument('--recovery_timeout_secs', metavar='SECS', type=at_least(1.0, float),
                        default=240.0,
                        help='longest wait, after a kill, for the task to train again '
                             '(default 240)')
    parser.add_argument('--json', action='store_true',
                        help='print the summary as one JSON object (the text goes to stderr)')
    parser.add_argument('--verbose', action='store_true',
                        help="echo the launcher's output to stderr")
    parser.add_argument('--keep', action='store_true',
                        help='keep the work directory (kept anyway when the run fails)')
    args = parser.parse_args(argv[:split])
    args.training_flags = argv[split + 1:]
    if not args.emulated_hosts and (args.partitions or (args.plan and any(
            fault == PARTITION for _, fault in args.plan))):
        parser.error('partitions need --emulated_hosts')
    if args.plan:
        if args.partitions:
            parser.error('--partitions and --plan exclude each other: name them in --plan')
        if args.kills is not None and args.kills != len(args.plan):
            parser.error(f'--kills {args.kills} disagrees with the {len(args.plan)} kills of '
                         '--plan')
        for task, _ in args.plan:
            job, index = task.split(':')
            count = args.num_ps_tasks if job == 'ps' else args.worker_replicas
            if int(index) >= count:
                parser.error(f'--plan names {task}, but the cluster has {count} {job} tasks')
        args.kills = len(args.plan)
    elif args.kills is None:
        args.kills = 5
    if args.max_restarts is None:
        args.max_restarts = args.kills + args.partitions + 2
    if args.train_dir and os.path.exists(args.train_dir) and (
            not os.path.isdir(args.train_dir) or os.listdir(args.train_dir)):
        parser.error(f'--train_dir {args.train_dir} is not an empty directory: give a new one')
    for name in ('train_dir', 'dataset_dir'):
        if getattr(args, name):
            setattr(args, name, os.path.abspath(getattr(args, name)))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    harness.exit_on_sigterm()
    work_dir = tempfile.mkdtemp(prefix='fault_injection-')
    try:
        summary = fault_injection(args, work_dir)
    except KeyboardInterrupt:
        print(f'{PROG}: interrupted; every process was killed (work directory {work_dir})',
              file=sys.stderr)
        return 128 + signal.SIGINT
    lines = report(summary)
    if args.json:
        print('\n'.join(lines), file=sys.stderr)
    harness.print_result(summary, lines, args.json)
    sys.stdout.flush()
    if summary['failure']:
        print(f'{PROG}: error: {summary["failure"]} (launcher output: {summary["log"]})',
              file=sys.stderr)
        return 1
    if not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
