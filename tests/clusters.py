"""Helpers of the cluster tests: training tasks as real processes, through the launcher or
started one by one (on this machine's network or on emulated hosts), and what they left.
Built on helpers.py (its REPO, ENV, TRAIN, run, served, start_logged, tf_config and
wait_for)."""
import re
import signal
import sys

import tensorflow.compat.v1 as tf

from slim_deploy.cluster import launch
from slim_deploy.cluster.tasks import port_in_use
from slim_deploy.nets import nets_factory

from helpers import ENV, REPO, TRAIN, run, served, start_logged, tf_config, wait_for

LAUNCH_TIMEOUT_SECS = 240  # Every process of a launched cluster must have exited by then.


def servers_here():
    """[ps task 0's, worker task 0's] tf.distribute.Server, started in this process on free
    loopback ports (a session on the worker's target runs ops on both)."""
    ports = launch.free_ports(launch.LOCALHOST, 2)
    cluster = tf.train.ClusterSpec({'ps': [f'{launch.LOCALHOST}:{ports[0]}'],
                                    'worker': [f'{launch.LOCALHOST}:{ports[1]}']})
    return [tf.distribute.Server(cluster, job, 0, start=True) for job in ('ps', 'worker')]


def launch_cluster(*options, args, command=TRAIN, timeout=LAUNCH_TIMEOUT_SECS, fresh=False):
    """Runs the launcher with `options` on `command` (a list; default:
    train_image_classifier.py) with `args`; returns (exit code, stdout + stderr). The tasks
    are served (helpers.served) unless `fresh`."""
    result = run([sys.executable, '-m', 'slim_deploy.cluster.launch', *options, '--',
                  *served(command, fresh), *args], cwd=REPO, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def task_lines(output, task):
    return [line[len(task) + 3:] for line in output.splitlines()
            if line.startswith(f'[{task}] ')]


def steps_run(lines):
    """Steps the task's 'Finished training ... after N steps here' line reports."""
    finished = [re.search(r'Finished training at global step (\d+) after (\d+) steps', line)
                for line in lines]
    (match,) = [m for m in finished if m]
    return int(match[1]), int(match[2])


def sync_counts(lines):
    """(updates, gradients applied, dropped, pushed) of the chief's 'Sync replicas: ...' line
    among `lines`."""
    (match,) = [m for m in (re.search(r'Sync replicas: (\d+) updates applied (\d+) gradients; '
                                      r'(\d+) of the (\d+) gradients pushed were dropped', line)
                            for line in lines) if m]
    return tuple(map(int, match.groups()))


def assert_restores(train_dir, step):
    """The latest checkpoint restores into a fresh lenet graph at global step `step`."""
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn('lenet', 10)
        network_fn(tf.placeholder(tf.float32, [1, 28, 28, 1]))
        global_step = tf.train.create_global_step()
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(train_dir)))
            assert sess.run(global_step) == step


class Cluster:
    """ps + worker processes of train_image_classifier.py started directly (no launcher),
    so that a test can kill and restart one; each task's output goes to a log file."""

    def __init__(self, tmp_path, args, cluster=None, by_flags=False, hosts=None, tasks=None,
                 fresh=False):
        """cluster: {job: [address, ...]}; None for 1 ps and 2 workers on free ports (or on
        `hosts`). by_flags: name it with --ps_hosts/--worker_hosts/--job_name/--task, not
        TF_CONFIG. hosts: the emulated_hosts.EmulatedHosts to run task ps:0 on host ps-0,
        ... (launch.emulated_host_names); None: this machine's network. The tasks are served
        (helpers.served) unless `fresh`. tasks: those to start now ('ps:0', ...); None: all."""
        self.hosts = hosts
        self.cluster = cluster or (launch.emulated_cluster_spec(hosts, 1, 2) if hosts else
                                   launch.cluster_spec(launch.LOCALHOST, 1, 2))
        self.by_flags, self.fresh = by_flags, fresh
        self.tmp_path, self.args, self.processes, self.logs = tmp_path, args, {}, {}
        for job, addresses in self.cluster.items():
            for index in range(len(addresses)):
                if tasks is None or f'{job}:{index}' in tasks:
                    self.start(f'{job}:{index}')

    def start(self, task):
        kind, index = task.split(':')
        args, env = self.args, {**ENV, 'TF_CONFIG': tf_config(self.cluster, kind, int(index))}
        if self.by_flags:
            args, env = [*args, f'--ps_hosts={",".join(self.cluster["ps"])}',
                         f'--worker_hosts={",".join(self.cluster["worker"])}',
                         f'--job_name={kind}', f'--task={index}'], ENV
        incarnation = sum(name.startswith(task) for name in self.logs)
        log = self.tmp_path / f'{task.replace(":", "")}.{incarnation}.log'
        command = [*TRAIN, *args]
        if self.hosts:
            command = self.hosts.command(f'{kind}-{index}', command)
        self.processes[task] = start_logged(command, log, env, self.fresh)
        self.logs[f'{task}.{incarnation}'] = log

    def log(self, task, incarnation=0):
        return self.logs[f'{task}.{incarnation}'].read_text()

    def wait_for(self, predicate, timeout=120):
        wait_for(predicate, timeout)

    def kill(self, task):
        """SIGKILLs `task`; returns once its port is free (a served run dies just after its
        stand-in)."""
        self.processes[task].send_signal(signal.SIGKILL)
        self.processes[task].wait()
        if not self.hosts:
            job, index = task.split(':')
            port = int(self.cluster[job][int(index)].rsplit(':', 1)[1])
            wait_for(lambda: not port_in_use(port), timeout=30)

    def wait_workers(self, timeout=180):
        """Waits for the training tasks to exit; returns their exit codes."""
        return {task: process.wait(timeout=timeout)
                for task, process in self.processes.items() if not task.startswith('ps')}

    def close(self):
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
