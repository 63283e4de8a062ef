"""ClusterTask from TF_CONFIG and flags, its gRPC server, and serve() until a signal and then
until the chief has written its last checkpoint."""
import collections
import json
import signal
import socket
import sys
import time

import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.cluster import tasks
from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.cluster.tasks import ClusterTask
from slim_deploy.common.errors import AddressInUse, UsageError

from helpers import ENV, REPO, start_logged, wait_for

CHIEF = ['chief0:2222']
WORKERS = ['worker0:2222', 'worker1:2222']
PS = ['ps0:2222', 'ps1:2222']
FULL_CLUSTER = {'chief': CHIEF, 'worker': WORKERS, 'ps': PS}


def tf_config(cluster_jobs, task=None, **extra):
    config = {'cluster': cluster_jobs, **extra}
    if task is not None:
        config['task'] = task
    return json.dumps(config)


# from_tf_config

@pytest.mark.parametrize('text', [
    None, '', '   \n\t', '{}', '{"cluster": {}}', '{"cluster": null}',
    '{"cluster": {}, "task": {"type": "worker", "index": 0}}',
])
def test_tf_config_without_a_cluster_is_none(text):
    assert tasks.from_tf_config(text) is None


# (task type, index) -> (replica_index, is_chief, address) in FULL_CLUSTER.
@pytest.mark.parametrize('task_type, index, replica_index, is_chief, address', [
    ('chief', 0, 0, True, 'chief0:2222'),
    ('worker', 0, 1, False, 'worker0:2222'),
    ('worker', 1, 2, False, 'worker1:2222'),
    ('ps', 0, None, False, 'ps0:2222'),
    ('ps', 1, None, False, 'ps1:2222'),
])
def test_tf_config_of_a_tfjob_with_a_chief(task_type, index, replica_index, is_chief, address):
    text = tf_config(FULL_CLUSTER, {'type': task_type, 'index': index}, environment='cloud')
    task = tasks.from_tf_config(text)
    assert task == ClusterTask(FULL_CLUSTER, task_type, index)
    assert (task.num_ps_tasks, task.num_replicas) == (2, 3)
    assert (task.replica_index, task.is_chief, task.address) == (
        replica_index, is_chief, address)


@pytest.mark.parametrize('task_type, index, replica_index, is_chief', [
    ('worker', 0, 0, True),
    ('worker', 1, 1, False),
    ('ps', 0, None, False),
])
def test_tf_config_without_a_chief_makes_worker_0_the_chief(task_type, index, replica_index,
                                                            is_chief):
    jobs = {'worker': WORKERS, 'ps': PS[:1]}
    task = tasks.from_tf_config(tf_config(jobs, {'type': task_type, 'index': index}))
    assert (task.task_type, task.task_index) == (task_type, index)
    assert (task.num_ps_tasks, task.num_replicas) == (1, 2)
    assert (task.replica_index, task.is_chief) == (replica_index, is_chief)
    assert task.address == jobs[task_type][index]


@pytest.mark.parametrize('jobs', [FULL_CLUSTER, {**FULL_CLUSTER, 'evaluator': ['e:2222']}])
def test_tf_config_evaluator_task_is_outside_the_training_cluster(jobs):
    task = tasks.from_tf_config(tf_config(jobs, {'type': 'evaluator', 'index': 0}))
    assert (task.task_type, task.replica_index, task.is_chief) == ('evaluator', None, False)
    assert task.cluster == FULL_CLUSTER
    assert task.num_replicas == 3


def test_tf_config_task_index_defaults_to_0():
    task = tasks.from_tf_config(tf_config(FULL_CLUSTER, {'type': 'worker'}))
    assert (task.task_type, task.task_index, task.replica_index) == ('worker', 0, 1)
    assert task.address == 'worker0:2222'


def test_tf_config_of_a_single_worker_needs_no_ps():
    task = tasks.from_tf_config(
        tf_config({'worker': ['localhost:2222']}, {'type': 'worker', 'index': 0}))
    assert task.cluster == {'worker': ['localhost:2222']}
    assert (task.num_ps_tasks, task.num_replicas, task.replica_index, task.is_chief) == (
        0, 1, 0, True)


def test_tf_config_addresses_may_be_ipv6_or_at_the_port_bounds():
    jobs = {'worker': ['[::1]:1', 'localhost:65535'], 'ps': ['10.0.0.1:2222']}
    task = tasks.from_tf_config(tf_config(jobs, {'type': 'worker', 'index': 1}))
    assert task.cluster == jobs and task.address == 'localhost:65535'


TWO_WORKERS = {'worker': WORKERS, 'ps': PS}


@pytest.mark.parametrize('text, message', [
    ('{"cluster": ', 'TF_CONFIG is not valid JSON: Expecting value: line 1 column 13 (char 12)'),
    ('worker', 'TF_CONFIG is not valid JSON: Expecting value: line 1 column 1 (char 0)'),
    ('{"cluster": {}}\n{"task": 1}',
     'TF_CONFIG is not valid JSON: Extra data: line 2 column 1 (char 16)'),
    ('["worker",\n 0]', "TF_CONFIG must be a JSON object, got '[\"worker\",\\n 0]'"),
    ('"worker"', 'TF_CONFIG must be a JSON object, got \'"worker"\''),
    ('{"cluster": ["localhost:2222"]}',
     "TF_CONFIG cluster must be an object of job: [host:port, ...], got ['localhost:2222']"),
    ('{"cluster": "worker"}',
     "TF_CONFIG cluster must be an object of job: [host:port, ...], got 'worker'"),
    (tf_config(TWO_WORKERS),
     'TF_CONFIG task must be an object {"type": ..., "index": ...}, got None'),
    (tf_config(TWO_WORKERS, {'index': 0}),
     'TF_CONFIG task must be an object {"type": ..., "index": ...}, got {\'index\': 0}'),
    (tf_config(TWO_WORKERS, 'worker'),
     'TF_CONFIG task must be an object {"type": ..., "index": ...}, got \'worker\''),
    (tf_config({**TWO_WORKERS, 'master': ['m:2222']}, {'type': 'worker'}),
     "TF_CONFIG cluster has job 'master': this trainer runs chief, worker, ps tasks"),
    (tf_config({'worker': WORKERS, 'ps': []}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'ps' must be a non-empty list of host:port, got []"),
    (tf_config({'worker': 'worker0:2222'}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker' must be a non-empty list of host:port, "
     "got 'worker0:2222'"),
    (tf_config({'worker': ['localhost']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost' is not host:port"),
    (tf_config({'worker': [':2222']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': ':2222' is not host:port"),
    (tf_config({'worker': ['localhost:']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:' is not host:port"),
    (tf_config({'worker': WORKERS, 'ps': ['ps0:0']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'ps': 'ps0:0' is not host:port"),
    (tf_config({'worker': ['localhost:70000']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:70000' is not host:port"),
    (tf_config({'worker': ['localhost:65536']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:65536' is not host:port"),
    (tf_config({'worker': ['localhost:grpc']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:grpc' is not host:port"),
    (tf_config({'worker': ['localhost:-1']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:-1' is not host:port"),
    (tf_config({'worker': [2222]}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 2222 is not host:port"),
    (tf_config({'worker': ['localhost:\u00b2']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:\u00b2' is not host:port"),
    (tf_config({'worker': ['localhost:\u0661\u0662']}, {'type': 'worker'}),
     "TF_CONFIG cluster job 'worker': 'localhost:\u0661\u0662' is not host:port"),
    ('{"cluster": [], "task": {"type": "worker"}}',
     'TF_CONFIG cluster must be an object of job: [host:port, ...], got []'),
    ('{"cluster": 0, "task": {"type": "worker"}}',
     'TF_CONFIG cluster must be an object of job: [host:port, ...], got 0'),
    (tf_config(TWO_WORKERS, {'type': ['worker']}),
     "TF_CONFIG task type ['worker'] is not a job of the cluster (jobs: ps, worker)"),
    (tf_config({'chief': ['c0:2222', 'c1:2222'], 'worker': WORKERS, 'ps': PS},
               {'type': 'chief'}),
     "TF_CONFIG cluster must have at most one chief, got ['c0:2222', 'c1:2222']"),
    (tf_config(TWO_WORKERS, {'type': 'master', 'index': 0}),
     "TF_CONFIG task type 'master' is not a job of the cluster (jobs: ps, worker)"),
    (tf_config(TWO_WORKERS, {'type': 'evaluator', 'index': 1}),
     'TF_CONFIG task index 1 is out of range: the evaluator task has index 0'),
    (tf_config(TWO_WORKERS, {'type': 'chief', 'index': 0}),
     "TF_CONFIG task type 'chief' is not a job of the cluster (jobs: ps, worker)"),
    (tf_config(TWO_WORKERS, {'type': 'worker', 'index': 2}),
     'TF_CONFIG task index 2 is out of range: the cluster has 2 worker task(s), '
     'indices 0 to 1'),
    (tf_config(FULL_CLUSTER, {'type': 'chief', 'index': 1}),
     'TF_CONFIG task index 1 is out of range: the cluster has 1 chief task(s), '
     'indices 0 to 0'),
    (tf_config(TWO_WORKERS, {'type': 'ps', 'index': -1}),
     'TF_CONFIG task index -1 is out of range: the cluster has 2 ps task(s), indices 0 to 1'),
    (tf_config(TWO_WORKERS, {'type': 'worker', 'index': '1'}),
     "TF_CONFIG task index '1' is out of range: the cluster has 2 worker task(s), "
     'indices 0 to 1'),
    (tf_config(TWO_WORKERS, {'type': 'worker', 'index': True}),
     'TF_CONFIG task index True is out of range: the cluster has 2 worker task(s), '
     'indices 0 to 1'),
    (tf_config(TWO_WORKERS, {'type': 'worker', 'index': 1.0}),
     'TF_CONFIG task index 1.0 is out of range: the cluster has 2 worker task(s), '
     'indices 0 to 1'),
    (tf_config(TWO_WORKERS, {'type': 'worker', 'index': None}),
     'TF_CONFIG task index None is out of range: the cluster has 2 worker task(s), '
     'indices 0 to 1'),
    (tf_config({'ps': PS}, {'type': 'ps', 'index': 0}),
     'TF_CONFIG cluster has no worker or chief task to train'),
])
def test_malformed_tf_config_is_a_one_line_usage_error(text, message):
    with pytest.raises(UsageError) as raised:
        tasks.from_tf_config(text)
    assert str(raised.value) == message
    assert '\n' not in str(raised.value)


# from_flags

@pytest.mark.parametrize('ps_hosts, worker_hosts, job_name, task', [
    (None, None, None, 0),
    ('', '', '', 0),
    ('', '', None, 3),  # --task alone names no cluster.
])
def test_flags_without_hosts_or_job_are_none(ps_hosts, worker_hosts, job_name, task):
    assert tasks.from_flags(ps_hosts, worker_hosts, job_name, task) is None


@pytest.mark.parametrize('job_name, task, replica_index, is_chief, address', [
    ('worker', 0, 0, True, 'w0:2222'),
    ('worker', 2, 2, False, 'w2:2224'),
    ('ps', 1, None, False, 'p1:2223'),
])
def test_flags_of_ps_and_workers(job_name, task, replica_index, is_chief, address):
    result = tasks.from_flags('p0:2222,p1:2223', 'w0:2222,w1:2223,w2:2224', job_name, task)
    assert result == ClusterTask({'worker': ['w0:2222', 'w1:2223', 'w2:2224'],
                                  'ps': ['p0:2222', 'p1:2223']}, job_name, task)
    assert (result.num_ps_tasks, result.num_replicas) == (2, 3)
    assert (result.replica_index, result.is_chief, result.address) == (
        replica_index, is_chief, address)


def test_flags_host_lists_may_have_spaces_after_commas():
    task = tasks.from_flags('p0:2222, p1:2223', 'w0:2222 , w1:2223', 'worker', 1)
    assert task.cluster == {'worker': ['w0:2222', 'w1:2223'], 'ps': ['p0:2222', 'p1:2223']}


def test_flags_of_a_single_worker_need_no_ps_hosts():
    task = tasks.from_flags('', 'localhost:2222', 'worker', 0)
    assert task == ClusterTask({'worker': ['localhost:2222']}, 'worker', 0)
    assert (task.num_ps_tasks, task.is_chief) == (0, True)


@pytest.mark.parametrize('ps_hosts, worker_hosts, job_name, task, message', [
    ('p0:2222', None, 'ps', 0,
     "--ps_hosts, --worker_hosts (or --chief_host) and --job_name go together: got "
     "--worker_hosts=None --chief_host=None --job_name='ps'"),
    ('p0:2222', 'w0:2222', None, 0,
     "--ps_hosts, --worker_hosts (or --chief_host) and --job_name go together: got "
     "--worker_hosts='w0:2222' --chief_host=None --job_name=None"),
    ('', '', 'worker', 0,
     "--ps_hosts, --worker_hosts (or --chief_host) and --job_name go together: got "
     "--worker_hosts='' --chief_host=None --job_name='worker'"),
    ('p0:2222', 'w0:2222', 'worker', 1,
     '--task 1 is out of range: the cluster has 1 worker task(s), indices 0 to 0'),
    ('p0:2222', 'w0:2222', 'ps', -1,
     '--task -1 is out of range: the cluster has 1 ps task(s), indices 0 to 0'),
    ('p0:2222', 'w0:2222', 'worker', '1',
     "--task '1' is out of range: the cluster has 1 worker task(s), indices 0 to 0"),
    ('p0:2222', 'w0:2222', 'chief', 0,
     "--job_name 'chief' is not a job of the cluster (jobs: ps, worker)"),
    (None, 'w0:2222', 'ps', 0, "--job_name 'ps' is not a job of the cluster (jobs: worker)"),
    ('p0:2222', 'w0:2222,', 'worker', 0,
     "--ps_hosts/--worker_hosts job 'worker': '' is not host:port"),
    ('p0', 'w0:2222', 'worker', 0, "--ps_hosts/--worker_hosts job 'ps': 'p0' is not host:port"),
])
def test_inconsistent_flags_are_a_usage_error_naming_the_flag(ps_hosts, worker_hosts,
                                                              job_name, task, message):
    with pytest.raises(UsageError) as raised:
        tasks.from_flags(ps_hosts, worker_hosts, job_name, task)
    assert str(raised.value) == message
    assert '\n' not in str(raised.value)


# device_filters

@pytest.mark.parametrize('task_type, index, filters', [
    ('worker', 1, ['/job:ps', '/job:worker/task:1']),
    ('chief', 0, ['/job:ps', '/job:chief/task:0']),
    ('ps', 1, ['/job:ps', '/job:ps/task:1']),
])
def test_device_filters_are_the_ps_tasks_and_the_task_itself(task_type, index, filters):
    task = tasks.from_tf_config(tf_config(FULL_CLUSTER, {'type': task_type, 'index': index}))
    assert task.device_filters() == filters


# start_server (TensorFlow can't stop a server: each test binds its own port.)

def local_worker(port):
    return ClusterTask({'worker': [f'127.0.0.1:{port}']}, 'worker', 0)


def test_start_server_serves_sessions():
    server = local_worker(free_ports(LOCALHOST, 1)[0]).start_server()
    assert server.target.startswith('grpc://')
    with tf.Graph().as_default():
        with tf.device('/job:worker/task:0/device:CPU:0'):
            total = tf.constant(2.0) + tf.constant(3.0)
        with tf.Session(server.target) as sess:
            assert sess.run(total) == 5.0
            cpus = [d.name for d in sess.list_devices() if d.device_type == 'CPU']
    assert cpus == ['/job:worker/replica:0/task:0/device:CPU:0']


def test_start_server_config_sets_its_devices():
    config = tf.ConfigProto(device_count={'CPU': 2})
    server = local_worker(free_ports(LOCALHOST, 1)[0]).start_server(config=config)
    with tf.Graph().as_default():
        with tf.device('/job:worker/task:0/device:CPU:1'):
            value = tf.constant(7)
        with tf.Session(server.target) as sess:
            cpus = [d.name for d in sess.list_devices() if d.device_type == 'CPU']
            assert sess.run(value) == 7
    assert cpus == ['/job:worker/replica:0/task:0/device:CPU:0',
                    '/job:worker/replica:0/task:0/device:CPU:1']


def test_start_server_on_a_port_in_use_says_address_in_use():
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(AddressInUse) as raised:
            local_worker(port).start_server()
    assert str(raised.value) == (f'cannot start the gRPC server of worker:0 at 127.0.0.1:{port}: '
                                 f'address in use (another process holds port {port})')
    assert raised.value.exit_code == 98 and not isinstance(raised.value, UsageError)
    assert isinstance(raised.value.__cause__, tf.errors.UnknownError)


# serve, in its own process so its signal handlers and server don't outlive the test.

SERVE = r'''
import sys
from absl import logging
from slim_deploy.cluster import tasks
from slim_deploy.common.errors import Interrupted
logging.set_verbosity(logging.INFO)  # As the command-line tools do.
try:
    tasks.serve(tasks.from_flags(sys.argv[1], sys.argv[2], 'ps', int(sys.argv[3])),
                grace_secs=60)
except Interrupted as e:
    print(e, flush=True)
    sys.exit(e.exit_code)
'''


# A ps task that serving() started: its Popen, its address and its log.
Ps = collections.namedtuple('Ps', 'process address log')


def serving(tmp_path, chief, num_ps_tasks=1):
    """`num_ps_tasks` ps tasks serving (serve), each in a process of its own with a grace
    period of 60 s, whose chief is at address `chief`; returns their Ps by task once they
    all serve (killed if one does not)."""
    addresses = [f'127.0.0.1:{port}' for port in free_ports(LOCALHOST, num_ps_tasks)]
    env = {**ENV, 'PYTHONPATH': REPO, 'TF_CPP_MIN_LOG_LEVEL': '2'}
    ps = []
    try:
        for index, address in enumerate(addresses):
            log = tmp_path / f'ps{index}.log'
            command = [sys.executable, '-c', SERVE, ','.join(addresses), chief, str(index)]
            ps.append(Ps(start_logged(command, log, env), address, log))
        for index, task in enumerate(ps):
            wait_for(lambda: f'ps:{index} serving at {task.address}' in task.log.read_text(),
                     60, task.process, task.log)
    except BaseException:
        killed(ps)
        raise
    return ps


def killed(ps):
    """Kills the processes of `ps` (Ps) and waits for them."""
    for task in ps:
        task.process.kill()
        task.process.wait()


@pytest.mark.slow
def test_signalled_ps_tasks_serve_until_the_chief_reports_its_last_checkpoint(tmp_path):
    with socket.socket() as chief:  # It answers as a live chief's server does.
        chief.bind((LOCALHOST, 0))
        chief.listen()
        ps = serving(tmp_path, f'127.0.0.1:{chief.getsockname()[1]}', num_ps_tasks=2)
        the_chief = ClusterTask({'worker': [f'127.0.0.1:{chief.getsockname()[1]}'],
                                 'ps': [task.address for task in ps]}, 'worker', 0)
        try:
            tasks.report_last_checkpoint(the_chief)  # An earlier chief's, before the signal.
            for index, task in enumerate(ps):
                task.process.send_signal(signal.SIGTERM)
                wait_for(lambda: f'ps:{index} received SIGTERM: serving until the chief has '
                                 'written its last checkpoint (within 60 s)' in
                                 task.log.read_text(), 30, task.process, task.log)
            time.sleep(1)
            assert [task.process.poll() for task in ps] == [None, None]  # Serving on.
            tasks.report_last_checkpoint(the_chief)
            assert [task.process.wait(timeout=30) for task in ps] == [143, 143]
        finally:
            killed(ps)
    for index, task in enumerate(ps):
        assert task.log.read_text().rstrip().splitlines()[-1] == (
            f'ps:{index} stopped by SIGTERM: the chief has written its last checkpoint')


@pytest.mark.slow
def test_a_signalled_ps_task_whose_chief_does_not_answer_stops_at_once(tmp_path):
    (task,) = serving(tmp_path, f'127.0.0.1:{free_ports(LOCALHOST, 1)[0]}')
    try:
        task.process.send_signal(signal.SIGINT)
        assert task.process.wait(timeout=30) == 130
    finally:
        killed([task])
    assert task.log.read_text().rstrip().splitlines()[-1] == (
        'ps:0 stopped by SIGINT: the chief does not answer')


def test_lost_peer_names_the_task_the_error_names():
    task = ClusterTask({'chief': CHIEF, 'worker': WORKERS}, 'worker', 0)
    error = tf.errors.UnavailableError(None, None, 'Collective ops is aborted by: Socket '
                                       'closed from remote target /job:chief/replica:0/task:0 '
                                       'while serving /job:worker/replica:0/task:0')
    assert str(tasks.lost_peer(task, error, 20)) == (
        "chief:0 (chief0:2222) stopped answering worker:0 (UnavailableError); restart the job "
        "to resume from the chief's last checkpoint")


def test_lost_peer_probes_the_others_when_the_error_names_none():
    with socket.socket() as listening:
        listening.bind(('127.0.0.1', 0))
        listening.listen()
        alive = f'127.0.0.1:{listening.getsockname()[1]}'
        dead = f'127.0.0.1:{free_ports(LOCALHOST, 1)[0]}'
        error = tf.errors.DeadlineExceededError(None, None, 'Collective has timed out')
        task = ClusterTask({'worker': [alive, dead, alive]}, 'worker', 2)
        assert str(tasks.lost_peer(task, error, 20)) == (
            f'worker:1 ({dead}) has not answered worker:2 for 20 s; restart the job to resume '
            "from the chief's last checkpoint")
        stuck = ClusterTask({'worker': [alive, alive]}, 'worker', 1)
        assert str(tasks.lost_peer(stuck, error, 20)) == (
            f'worker:0 ({alive}) did not answer worker:1 within 20 s (DeadlineExceededError) '
            'but still accept connections: stuck or too slow (see --task_timeout_secs)')
