"""The guard against a change that slows a mode: this checkout's training speed against a base
commit's, measured on this machine in one run.

    python -m benchmarks.regression [--base main] [--pairs 3] [--model_name cifarnet]
        [--batch_size 64] [--steps 20] [--rounds 3]
        [--variable_update parameter_server,replicated,collective] [--network 1gbit]
        [--tolerance 0.05] [--json]

The base commit is checked out into a temporary git worktree (removed at the end); the head is
the checkout this runs from, uncommitted changes included. Each pair runs the same benchmark
once with the base's code and once with the head's (each its own PYTHONPATH; the order
alternates from pair to pair so that neither always runs first):

  python -m benchmarks.throughput --variable_update parameter_server,replicated,collective
      --compare_mirrored ...: one process (parameter_server and replicated against
      MirroredStrategy) and collective workers on loopback (against
      MultiWorkerMirroredStrategy), or the --variable_update listed;
  with --network BANDWIDTH (root), python -m benchmarks.network --link_bandwidth BANDWIDTH:
      asynchronous and synchronous ps workers and collective workers on emulated hosts, each
      against MultiWorkerMirroredStrategy.

What is compared is each deploy() setup's images/sec over its tf.distribute peer's in the
same run, which machine noise moves far less than images/sec: per ratio, its median over the
pairs with the base and with the head, and head / base. A ratio whose head median falls more
than --tolerance (relative) below the base's is a regression: the run prints them and exits
1 (0 without any; 2 for a base that cannot be checked out or run). --json prints one object:
`base`, `head` (commits), `pairs`, `commands` and `ratios`: {ratio: {`base`: [per pair],
`head`: [...], `base_median`, `head_median`, `change` (head / base median), `regression`
(bool)}}.
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchmarks import harness

PROG = f'python -m {__spec__.name}'
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIABLE_UPDATES = ('parameter_server', 'replicated', 'collective')


def benchmark_commands(args):
    """The benchmark command lines each pair runs (module and options), from `args`."""
    throughput = ['benchmarks.throughput', '--model_name', args.model_name, '--batch_size',
                  str(args.batch_size), '--variable_update', ','.join(args.variable_update),
                  '--compare_mirrored', '--steps', str(args.steps), '--rounds',
                  str(args.rounds)]
    commands = [throughput]
    if args.network:
        commands.append(['benchmarks.network', '--model_name', args.model_name,
                         '--link_bandwidth', args.network, '--setups',
                         'parameter_server,sync_replicas,collective,multi_worker_mirrored',
                         '--steps', str(args.steps), '--rounds', str(args.rounds)])
    return commands


def run_ratios(checkout, command, log):
    """{ratio name: value} of one `command` (a benchmark module and options, --json added)
    run with the code of `checkout` (a directory); the network benchmark's names are
    prefixed with the bandwidth ('1gbit: collective / MultiWorkerMirroredStrategy')."""
    result = subprocess.run(
        [sys.executable, '-m', *command, '--json'], cwd=checkout, capture_output=True,
        text=True, env=harness.environment({'PYTHONPATH': checkout}))
    if result.returncode:
        last = (result.stderr.strip().splitlines() or ['no output'])[-1]
        raise harness.BenchmarkError(f'{command[0]} failed in {checkout}: {last}')
    output = json.loads(result.stdout)
    log(f'{command[0]} on {checkout}: {output["seconds"]:.0f} s')
    if 'links' not in output:
        return output['ratios']
    return {f'{bandwidth}: {name}': value for bandwidth, link in output['links'].items()
            for name, value in link['ratios'].items()}


@contextlib.contextmanager
def worktree(commit):
    """Yields the directory of a temporary git worktree of `commit` (removed after), and its
    full commit id."""
    directory = tempfile.mkdtemp(prefix='regression-base-')
    added = subprocess.run(['git', '-C', REPO, 'worktree', 'add', '--detach', directory,
                            commit], capture_output=True, text=True)
    if added.returncode:
        os.rmdir(directory)
        raise harness.BenchmarkError(f'--base {commit!r}: {added.stderr.strip()}')
    try:
        yield directory, commit_id(directory)
    finally:
        subprocess.run(['git', '-C', REPO, 'worktree', 'remove', '--force', directory],
                       capture_output=True)


def commit_id(checkout):
    """The commit `checkout` has checked out, '+' appended when it has changes."""
    head = subprocess.run(['git', '-C', checkout, 'rev-parse', '--short', 'HEAD'],
                          capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(['git', '-C', checkout, 'status', '--porcelain',
                            '--untracked-files=no'],
                           capture_output=True, text=True, check=True).stdout.strip()
    return head + ('+' if dirty else '')


def compare(base_runs, head_runs, tolerance):
    """`ratios` of the result (see the module docstring) from each pair's {ratio: value} with
    the base and with the head."""
    compared = {}
    for name in base_runs[0]:
        base = [run[name] for run in base_runs]
        head = [run[name] for run in head_runs if name in run]
        if len(head) != len(base):
            continue
        base_median, head_median = statistics.median(base), statistics.median(head)
        compared[name] = {'base': base, 'head': head, 'base_median': base_median,
                          'head_median': head_median, 'change': head_median / base_median,
                          'regression': head_median < base_median * (1 - tolerance)}
    return compared


def benchmark(args, log):
    with worktree(args.base) as (base_dir, base):
        commands = benchmark_commands(args)
        runs = {'base': [], 'head': []}
        for pair in range(args.pairs):
            order = [('base', base_dir), ('head', REPO)][::1 if pair % 2 == 0 else -1]
            for side, checkout in order:
                runs[side].append({name: value for command in commands
                                   for name, value in run_ratios(checkout, command,
                                                                 log).items()})
            log(f'pair {pair + 1}/{args.pairs} done')
        return {'base': base, 'head': commit_id(REPO), 'pairs': args.pairs,
                'commands': [' '.join(command) for command in commands],
                'ratios': compare(runs['base'], runs['head'], args.tolerance)}


def table(result, tolerance):
    lines = [f'base {result["base"]} against head {result["head"]}, {result["pairs"]} '
             'pair(s) of runs of:', *(f'  python -m {command}' for command in
                                      result['commands']), '',
             f'{"ratio of images/sec (medians over pairs)":66s} {"base":>7s} {"head":>7s} '
             f'{"change":>7s}']
    for name, ratio in result['ratios'].items():
        flag = f'  REGRESSION (over {tolerance:.0%})' if ratio['regression'] else ''
        lines.append(f'{name:66s} {ratio["base_median"]:7.3f} {ratio["head_median"]:7.3f} '
                     f'{ratio["change"]:7.3f}{flag}')
    return lines


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split('\n\n')[0])
    parser.add_argument('--base', default='main', help='the commit to compare with (main)')
    parser.add_argument('--pairs', type=harness.at_least(1), default=3,
                        help='runs of the benchmarks on each side (3)')
    parser.add_argument('--model_name', default='cifarnet')
    parser.add_argument('--batch_size', type=harness.at_least(1), default=64)
    parser.add_argument('--steps', type=harness.at_least(1), default=20)
    parser.add_argument('--rounds', type=harness.at_least(1), default=3)
    parser.add_argument('--variable_update', type=harness.names_in(VARIABLE_UPDATES),
                        default=list(VARIABLE_UPDATES),
                        help='the deploy() setups of the throughput benchmark (all three)')
    parser.add_argument('--network', metavar='BANDWIDTH',
                        help='also run benchmarks.network at this link bandwidth (root)')
    parser.add_argument('--tolerance', type=float, default=0.05,
                        help='the relative fall of a ratio that counts as a regression (0.05)')
    parser.add_argument('--json', action='store_true', help='print one JSON object')
    args = parser.parse_args()
    harness.exit_on_sigterm()
    try:
        result = benchmark(args, lambda line: print(line, file=sys.stderr, flush=True))
    except harness.BenchmarkError as error:
        print(f'{PROG}: error: {error}', file=sys.stderr)
        return 2
    harness.print_result(result, table(result, args.tolerance), args.json)
    return 1 if any(ratio['regression'] for ratio in result['ratios'].values()) else 0


if __name__ == '__main__':
    sys.exit(main())
