"""Kubernetes JobSets from the launcher (`launch_cluster --jobset`): every field is one the
JobSet API or the official Kubernetes client's models define, the tasks' host flags name the
pods as JobSet names them, every pod resolves its own task from JOB_COMPLETION_INDEX, bad
input is one line, and the pods of a manifest, run on emulated hosts as Kubernetes would run
them, train to the last step and evaluate it."""
import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from absl import flags
import kubernetes.client
import pytest
import yaml

from slim_deploy.cluster import emulated_hosts, launch
from slim_deploy.common.errors import DataError, StorageError, UsageError
from slim_deploy.image_classifier import config, slim_flags

from helpers import ENV, REPO, TRAIN, checkpoint_step, evaluations, run, tf_config
import images

PROG = os.path.basename(sys.argv[0])
NAME = 'lenet-run'
IMAGE = 'registry.example/slim-deploy:1'
COMMAND = ['train_image_classifier', '--train_dir=/train/lenet', '--batch_size=16']

# The fields of JobSet's API (jobset.x-k8s.io/v1alpha2: api/jobset/v1alpha2/jobset_types.go
# of kubernetes-sigs/jobset), {type: {field: the type of its value}}: a type named V1... is
# the Kubernetes client's model of that name, a list [T] holds T's, None is a scalar or a
# list of scalars.
JOBSET_API = {
    'JobSet': {'apiVersion': None, 'kind': None, 'metadata': 'V1ObjectMeta',
               'spec': 'JobSetSpec'},
    'JobSetSpec': {'replicatedJobs': ['ReplicatedJob'], 'network': 'Network',
                   'successPolicy': 'SuccessPolicy', 'failurePolicy': 'FailurePolicy',
                   'startupPolicy': None, 'suspend': None, 'coordinator': None,
                   'managedBy': None, 'ttlSecondsAfterFinished': None,
                   'volumeClaimPolicies': None},
    'ReplicatedJob': {'name': None, 'groupName': None, 'template': 'V1JobTemplateSpec',
                      'replicas': None, 'dependsOn': None},
    'Network': {'enableDNSHostnames': None, 'subdomain': None,
                'publishNotReadyAddresses': None},
    'SuccessPolicy': {'operator': None, 'targetReplicatedJobs': None},
    'FailurePolicy': {'maxRestarts': None, 'restartStrategy': None,
                      'rules': ['FailurePolicyRule']},
    'FailurePolicyRule': {'name': None, 'action': None, 'onJobFailureReasons': None,
                          'onJobFailureMessagePatterns': None, 'targetReplicatedJobs': None},
}
OPERATORS = {'All', 'Any'}
ACTIONS = {'FailJobSet', 'RestartJobSet', 'RestartJobSetAndIgnoreMaxRestarts', 'RestartJob',
           'RestartJobAndIgnoreMaxRestarts'}
RULE_NAME = re.compile(r'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')
CLIENT = kubernetes.client.ApiClient()

# Launcher options -> the tasks of each job. Without ps tasks, COMMAND gets
# COLLECTIVE.
COLLECTIVE = '--variable_update=collective'
SHAPES = {
    'ps-workers': (['--num_ps_tasks=2', '--worker_replicas=3'], {'ps': 2, 'worker': 3}),
    'chief-workers': (['--num_ps_tasks=1', '--worker_replicas=3', '--chief'],
                      {'ps': 1, 'chief': 1, 'worker': 2}),
    'chief-alone': (['--num_ps_tasks=1', '--worker_replicas=1', '--chief'],
                    {'ps': 1, 'chief': 1}),
    'collective': (['--num_ps_tasks=0', '--worker_replicas=2'], {'worker': 2}),
    'evaluator': (['--num_ps_tasks=1', '--worker_replicas=2', '--evaluator', '--sync_replicas'],
                  {'ps': 1, 'worker': 2, 'evaluator': 1}),
    'volumes': (['--num_ps_tasks=1', '--worker_replicas=2', '--chief', '--evaluator',
                 '--volume=train:/train', '--volume=digits.data:/data/digits', '--port=3333',
                 '--max_restarts=4'], {'ps': 1, 'chief': 1, 'worker': 1, 'evaluator': 1}),
}


def printed(capsys, *options, command=COMMAND):
    """The manifests `launch_cluster --jobset NAME --image IMAGE OPTIONS -- COMMAND` prints,
    parsed."""
    assert launch.main([f'--jobset={NAME}', f'--image={IMAGE}', *options, '--', *command]) == 0
    out, err = capsys.readouterr()
    assert err == ''
    return list(yaml.safe_load_all(out))


def generate(capsys, *options, command=COMMAND):
    """The JobSet `launch_cluster --jobset NAME --image IMAGE OPTIONS -- COMMAND` prints
    first, parsed."""
    return printed(capsys, *options, command=command)[0]


@dataclasses.dataclass
class Shape:
    """A cluster's launcher options, its {job: tasks}, the COMMAND given and the manifest."""
    options: list
    counts: dict
    command: list
    manifest: dict


@pytest.fixture(params=SHAPES, ids=list(SHAPES))
def shape(request, capsys):
    options, counts = SHAPES[request.param]
    command = COMMAND + ([] if 'ps' in counts else [COLLECTIVE])
    return Shape(options, counts, command, generate(capsys, *options, command=command))


def unknown_fields(value, kind='JobSet', path='JobSet'):
    """The paths of fields in `value` that type `kind` of JOBSET_API does not define, or
    that the Kubernetes client's model `kind` (V1...) drops in a round trip through it."""
    if isinstance(kind, list):
        return [found for index, item in enumerate(value)
                for found in unknown_fields(item, kind[0], f'{path}[{index}]')]
    if kind.startswith('V1'):
        model = CLIENT.deserialize(json.dumps(value), kind, 'application/json')
        kept = CLIENT.sanitize_for_serialization(model)
        return [] if kept == value else [f'{path} ({kind}): {value} became {kept}']
    fields = JOBSET_API[kind]
    return [f'{path}.{name}' for name in value if name not in fields] + [
        found for name, child in fields.items() if child and name in value
        for found in unknown_fields(value[name], child, f'{path}.{name}')]


def pod_commands(manifest):
    """{(replicated job, Job index, pod index): the pod's command line} of every pod."""
    return {(job['name'], job_index, pod_index):
            job['template']['spec']['template']['spec']['containers'][0]['command']
            for job in manifest['spec']['replicatedJobs']
            for job_index in range(job['replicas'])
            for pod_index in range(job['template']['spec']['completions'])}


def train_config(argv, environ):
    """The TrainConfig train_image_classifier makes of command line `argv` (argv[0] the
    program) in environment `environ`."""
    flag_values = flags.FlagValues()
    slim_flags.define(config.TrainConfig, 'train_image_classifier', flag_values)
    flag_values(argv)
    return slim_flags.train_config(flag_values, environ)


def test_every_field_is_one_that_jobset_or_kubernetes_defines(shape):
    manifest = shape.manifest
    assert (manifest['apiVersion'], manifest['kind']) == ('jobset.x-k8s.io/v1alpha2', 'JobSet')
    assert unknown_fields(manifest) == []
    spec = manifest['spec']
    assert spec['successPolicy']['operator'] in OPERATORS
    for rule in spec['failurePolicy']['rules']:
        assert rule['action'] in ACTIONS and RULE_NAME.fullmatch(rule['name'])


def test_a_misspelled_field_is_found():
    template = {'spec': {'backofLimit': 0, 'template': {'spec': {
        'containers': [{'name': 'trainer', 'image': IMAGE, 'comand': ['true']}]}}}}
    assert len(unknown_fields(template, 'V1JobTemplateSpec')) == 1
    assert unknown_fields({'spec': {'network': {'enableDnsHostnames': True}}}) == [
        'JobSet.spec.network.enableDnsHostnames']


def test_one_indexed_job_per_cluster_job_and_the_policies(shape):
    counts, manifest = shape.counts, shape.manifest
    spec = manifest['spec']
    assert manifest['metadata']['name'] == NAME
    assert spec['network'] == {'enableDNSHostnames': True, 'subdomain': NAME}
    assert {job['name']: job['template']['spec']['completions']
            for job in spec['replicatedJobs']} == counts
    for job in spec['replicatedJobs']:
        job_spec = job['template']['spec']
        assert job['replicas'] == 1
        assert job_spec['completionMode'] == 'Indexed'
        assert job_spec['parallelism'] == job_spec['completions']
        # A failed pod fails its Job at once, for the JobSet's failure policy to act on.
        assert job_spec['backoffLimit'] == 0
        pod = job_spec['template']['spec']
        assert pod['restartPolicy'] == 'Never'
        (container,) = pod['containers']
        assert container['image'] == IMAGE
        assert {'name': 'PYTHONUNBUFFERED', 'value': '1'} in container['env']
        # A user's mistake, damaged data or a full disk (exit code 2, 65, 74) fails the Job
        # for reason PodFailurePolicy ...
        assert job_spec['podFailurePolicy'] == {'rules': [{'action': 'FailJob', 'onExitCodes': {
            'containerName': container['name'], 'operator': 'In',
            'values': [UsageError.exit_code, DataError.exit_code, StorageError.exit_code]}}]}
        labels = job_spec['template']['metadata']['labels']
        assert labels['app.kubernetes.io/component'] == job['name']
    # ... which fails the JobSet; any other failure restarts it, the ps tasks too.
    first, *others = spec['failurePolicy']['rules']
    assert (first['action'], first['onJobFailureReasons']) == ('FailJobSet', ['PodFailurePolicy'])
    assert [rule['action'] for rule in others] == ['RestartJobSet']
    assert spec['failurePolicy']['maxRestarts'] == (
        4 if '--max_restarts=4' in shape.options else 0)
    # The ps tasks serve until stopped: the others' success is the JobSet's.
    assert spec['successPolicy'] == {
        'operator': 'All', 'targetReplicatedJobs': [job for job in counts if job != 'ps']}


def test_host_flags_name_every_task_by_its_pod_host_name(shape):
    counts, manifest = shape.counts, shape.manifest
    port = 3333 if '--port=3333' in shape.options else 2222
    subdomain = manifest['spec']['network']['subdomain']
    commands = pod_commands(manifest)
    sync = ['--sync_replicas'] if '--sync_replicas' in shape.options else []
    worker_replicas = counts.get('chief', 0) + counts.get('worker', 0)
    given = [*shape.command, f'--worker_replicas={worker_replicas}',
             f'--num_ps_tasks={counts.get("ps", 0)}', *sync]
    cluster_flags = None
    for (job, _, _), command in commands.items():
        assert command[:len(given)] == given
        assert command[-1] == f'--job_name={job}'
        flags_here = command[len(given):-1]
        assert cluster_flags in (None, flags_here)  # The same in every pod.
        cluster_flags = flags_here
    hosts = dict(flag.split('=', 1) for flag in cluster_flags)
    # JobSet's pod host names: <jobset>-<replicated job>-<Job index>-<pod index>.<subdomain>.
    expected = {flag: ','.join(f'{NAME}-{job}-{job_index}-{pod_index}.{subdomain}:{port}'
                               for (name, job_index, pod_index) in commands if name == job)
                for job, flag in (('ps', '--ps_hosts'), ('chief', '--chief_host'),
                                  ('worker', '--worker_hosts')) if job in counts}
    assert hosts == expected


def test_every_pod_resolves_its_own_task_from_job_completion_index(shape):
    counts = shape.counts
    tasks = {}
    for (job, _, pod_index), command in pod_commands(shape.manifest).items():
        named = train_config(command, {'JOB_COMPLETION_INDEX': str(pod_index)}).cluster
        tasks[named.cluster_task.name] = named.task  # The replica index of a chief or worker.
        assert named.worker_replicas == counts.get('chief', 0) + counts.get('worker', 0)
        assert named.num_ps_tasks == counts.get('ps', 0)
        assert named.is_chief == (named.task == 0)
    replicas = [f'chief:{index}' for index in range(counts.get('chief', 0))] + [
        f'worker:{index}' for index in range(counts.get('worker', 0))]
    assert tasks == {**{f'ps:{index}': None for index in range(counts.get('ps', 0))},
                     **{name: index for index, name in enumerate(replicas)},
                     **({'evaluator:0': None} if 'evaluator' in counts else {})}


def test_printing_a_manifest_imports_no_tensorflow():
    program = ('import sys\n'
               'from slim_deploy.cluster import launch\n'
               "code = launch.main(['--jobset=j', '--image=i', '--num_ps_tasks=1', "
               "'--worker_replicas=1', '--', 'train_image_classifier'])\n"
               "print(code, 'tensorflow' in sys.modules, file=sys.stderr)\n")
    result = run([sys.executable, '-c', program], cwd=REPO, timeout=60)
    assert result.stderr == '0 False\n'
    assert [spec['kind'] for spec in yaml.safe_load_all(result.stdout)] == [
        'JobSet', 'NetworkPolicy']


@pytest.mark.parametrize('options, port', [([], 2222), (['--port=3333'], 3333)])
def test_a_network_policy_admits_only_the_jobsets_pods_to_the_task_port(capsys, options,
                                                                        port):
    _, policy = printed(capsys, '--num_ps_tasks=1', '--worker_replicas=2', *options)
    model = CLIENT.deserialize(json.dumps(policy), 'V1NetworkPolicy', 'application/json')
    assert CLIENT.sanitize_for_serialization(model) == policy  # Every field is Kubernetes'.
    assert (policy['apiVersion'], policy['kind']) == ('networking.k8s.io/v1', 'NetworkPolicy')
    assert policy['metadata']['name'] == NAME
    spec = model.spec
    jobset_pods = {'jobset.sigs.k8s.io/jobset-name': NAME}  # JobSet labels its pods so.
    assert spec.pod_selector.match_labels == jobset_pods
    assert not spec.pod_selector.match_expressions
    assert spec.policy_types == ['Ingress']  # Nothing else may reach them.
    (rule,) = spec.ingress
    assert [(peer.pod_selector.match_labels, peer.namespace_selector, peer.ip_block)
            for peer in rule._from] == [(jobset_pods, None, None)]
    assert [(p.protocol, p.port, p.end_port) for p in rule.ports] == [('TCP', port, None)]


def test_no_network_policy_prints_the_jobset_alone(capsys):
    specs = printed(capsys, '--num_ps_tasks=1', '--worker_replicas=2', '--no_network_policy')
    assert [spec['kind'] for spec in specs] == ['JobSet']


def test_volumes_are_mounted_where_files_are_read_and_ports_where_tasks_serve(capsys):
    manifest = generate(capsys, *SHAPES['volumes'][0])
    for job in manifest['spec']['replicatedJobs']:
        pod = job['template']['spec']['template']['spec']
        (container,) = pod['containers']
        claims = {volume['name']: volume['persistentVolumeClaim']['claimName']
                  for volume in pod.get('volumes', [])}
        mounts = {mount['mountPath']: claims[mount['name']]
                  for mount in container.get('volumeMounts', [])}
        assert mounts == ({} if job['name'] == 'ps' else
                          {'/train': 'train', '/data/digits': 'digits.data'})
        assert container.get('ports') == (None if job['name'] == 'evaluator' else
                                          [{'name': 'grpc', 'containerPort': 3333}])


# The trainer in a pod: the index from JOB_COMPLETION_INDEX.

HOST_FLAGS = ['train_image_classifier', '--ps_hosts=p0:2222', '--chief_host=c0:2222',
              '--worker_hosts=w0:2222,w1:2222']


@pytest.mark.parametrize('job, index, replica', [
    ('chief', 0, 0), ('worker', 0, 1), ('worker', 1, 2), ('ps', 0, None), ('evaluator', 0, None),
])
def test_the_task_index_is_job_completion_index(job, index, replica):
    named = train_config([*HOST_FLAGS, f'--job_name={job}'],
                         {'JOB_COMPLETION_INDEX': str(index)}).cluster
    assert (named.cluster_task.task_type, named.cluster_task.task_index) == (job, index)
    assert (named.task, named.worker_replicas, named.num_ps_tasks) == (replica, 3, 1)
    assert named.is_chief == (job == 'chief')


def test_task_flag_wins_over_job_completion_index():
    named = train_config([*HOST_FLAGS, '--job_name=worker', '--task=1'],
                         {'JOB_COMPLETION_INDEX': '0'}).cluster
    assert (named.cluster_task.name, named.task) == ('worker:1', 2)


def test_job_completion_index_names_no_task_without_host_flags():
    cluster = {'worker': ['w0:2222', 'w1:2222'], 'ps': ['p0:2222']}
    named = train_config(['train_image_classifier'], {
        'TF_CONFIG': tf_config(cluster, 'worker', 1), 'JOB_COMPLETION_INDEX': '0'}).cluster
    assert named.cluster_task.name == 'worker:1'
    alone = train_config(['train_image_classifier'], {'JOB_COMPLETION_INDEX': '3'}).cluster
    assert (alone.cluster_task, alone.task, alone.worker_replicas) == (None, 0, 1)


@pytest.mark.parametrize('job, value, message', [
    ('worker', '2', 'JOB_COMPLETION_INDEX 2 is out of range: the cluster has 2 worker task(s), '
                    'indices 0 to 1'),
    ('worker', '-1', 'JOB_COMPLETION_INDEX -1 is out of range: the cluster has 2 worker '
                     'task(s), indices 0 to 1'),
    ('worker', 'one', "JOB_COMPLETION_INDEX 'one' is out of range: the cluster has 2 worker "
                      'task(s), indices 0 to 1'),
    ('ps', '1.0', "JOB_COMPLETION_INDEX '1.0' is out of range: the cluster has 1 ps task(s), "
                  'indices 0 to 0'),
    ('chief', '1', 'JOB_COMPLETION_INDEX 1 is out of range: the cluster has 1 chief task(s), '
                   'indices 0 to 0'),
    ('evaluator', '1', 'JOB_COMPLETION_INDEX 1 is out of range: the evaluator task has index 0'),
])
def test_a_bad_job_completion_index_is_one_line_naming_it_and_the_range(job, value, message):
    with pytest.raises(UsageError) as raised:
        train_config([*HOST_FLAGS, f'--job_name={job}'], {'JOB_COMPLETION_INDEX': value})
    assert str(raised.value) == message


@pytest.mark.parametrize('argv, message', [
    (['--chief_host=c0:2222,c1:2222', '--job_name=chief'],
     "--ps_hosts/--chief_host/--worker_hosts must have at most one chief, got "
     "['c0:2222', 'c1:2222']"),
    (['--chief_host=c0', '--job_name=chief'],
     "--ps_hosts/--chief_host/--worker_hosts job 'chief': 'c0' is not host:port"),
    (['--chief_host=c0:2222'],
     '--ps_hosts, --worker_hosts (or --chief_host) and --job_name go together: got '
     "--worker_hosts=None --chief_host='c0:2222' --job_name=None"),
])
def test_a_bad_chief_host_is_one_line_naming_it(argv, message):
    with pytest.raises(UsageError) as raised:
        train_config(['train_image_classifier', *argv], {})
    assert str(raised.value) == message


@pytest.mark.slow
def test_train_image_classifier_with_a_bad_job_completion_index_exits_2(tmp_path):
    result = run([*TRAIN, f'--train_dir={tmp_path}', '--ps_hosts=p0:2222',
                  '--worker_hosts=w0:2222,w1:2222', '--job_name=worker'],
                 env={**ENV, 'JOB_COMPLETION_INDEX': '2'}, timeout=120)
    assert (result.returncode, result.stdout) == (2, '')
    assert result.stderr == ('train_image_classifier.py: error: JOB_COMPLETION_INDEX 2 is out '
                             'of range: the cluster has 2 worker task(s), indices 0 to 1\n')
    assert os.listdir(tmp_path) == []


# Launcher arguments.

BAD_LABEL = ("must be a DNS label: lowercase letters, digits and '-', starting with a letter")
BAD_VOLUME = 'must be CLAIM:MOUNT_PATH, a PersistentVolumeClaim name and an absolute path'
NO_HOSTS = ('--jobset excludes --emulated_hosts, --bind, --link_bandwidth and --slow_host: '
            'Kubernetes gives each pod a host of its own')


@pytest.mark.parametrize('options, message', [
    (['--image=i'], '--image needs --jobset'),
    (['--chief'], '--chief needs --jobset'),
    (['--volume=train:/train'], '--volume needs --jobset'),
    (['--port=3333'], '--port needs --jobset'),
    (['--no_network_policy'], '--no_network_policy needs --jobset'),
    (['--jobset=j', '--image=i', '--emulated_hosts'], NO_HOSTS),
    (['--jobset=j', '--image=i', '--bind=0.0.0.0'], NO_HOSTS),
    (['--jobset=j', '--image=i', '--link_bandwidth=1gbit'], NO_HOSTS),
    (['--jobset=j', '--image=i', '--slow_host=worker:0=1mbit'], NO_HOSTS),
    (['--jobset=j'], '--jobset needs --image, the container image that runs COMMAND'),
    (['--jobset=Lenet', '--image=i'], f"--jobset 'Lenet' {BAD_LABEL}"),
    (['--jobset=1lenet', '--image=i'], f"--jobset '1lenet' {BAD_LABEL}"),
    (['--jobset=lenet-', '--image=i'], f"--jobset 'lenet-' {BAD_LABEL}"),
    (['--jobset=' + 'n' * 50, '--image=i', '--evaluator'],
     f"--jobset '{'n' * 50}' is too long: its pod host name '{'n' * 50}-evaluator-0-0' has 64 "
     'characters, at most 63'),
    (['--jobset=j', '--image='], "--image must name a container image, got ''"),
    (['--jobset=j', '--image=my image'], "--image must name a container image, got 'my image'"),
    (['--jobset=j', '--image=i', '--volume=/train'], f"--volume '/train' {BAD_VOLUME}"),
    (['--jobset=j', '--image=i', '--volume=train:train'], f"--volume 'train:train' {BAD_VOLUME}"),
    (['--jobset=j', '--image=i', '--volume=Train:/train'],
     f"--volume 'Train:/train' {BAD_VOLUME}"),
    (['--jobset=j', '--image=i', '--volume=a:/train', '--volume=b:/train'],
     "--volume 'b:/train': /train is the mount path of claim 'a' already"),
    (['--jobset=j', '--image=i', '--port=0'], '--port must be in 1..65535, got 0'),
    (['--jobset=j', '--image=i', '--port=65536'], '--port must be in 1..65535, got 65536'),
    (['--jobset=j', '--image=i', '--worker_replicas=1', '--sync_replicas'],
     '--sync_replicas needs --worker_replicas > 1, got 1'),
])
def test_bad_jobset_arguments_end_in_one_line_and_exit_code_2(capsys, options, message):
    argv = ['--num_ps_tasks=1', '--worker_replicas=2', *options, '--', *COMMAND]
    assert launch.main(argv) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ('', f'{PROG}: error: {message}\n')


# The rehearsal: a manifest's pods as Kubernetes would run them, but for the control plane.

LAST_STEP = 30
POD_TIMEOUT_SECS = 240  # Every pod the success policy waits for must have exited by then.


@dataclasses.dataclass
class Pod:
    """A pod of a manifest: its host name, replicated job, command line and environment."""
    host: str
    job: str
    argv: list
    env: dict
    mounts: list


def pods(manifest, image=None):
    """The pods of `manifest`'s replicated jobs, each as Kubernetes runs it: the container's
    command, the image's environment with the container's env and JOB_COMPLETION_INDEX
    (Indexed Jobs), and the host name JobSet gives it. The image: `image` (an
    images.ImageRoot, whose command() finds the executable on its PATH), or None for this
    checkout (this venv's console scripts; helpers.ENV, a user's shell)."""
    path = os.pathsep.join([os.path.dirname(sys.executable), ENV['PATH']])
    base = image.env if image else {**ENV, 'PATH': path}
    for job in manifest['spec']['replicatedJobs']:
        template = job['template']['spec']
        (container,) = template['template']['spec']['containers']
        assert 'args' not in container  # The whole command line is the command.
        argv = container['command']
        if image is None:
            executable = shutil.which(argv[0], path=path)
            assert executable, argv[0]
            argv = [executable, *argv[1:]]
        for job_index in range(job['replicas']):
            for pod_index in range(template['completions']):
                host = f'{manifest["metadata"]["name"]}-{job["name"]}-{job_index}-{pod_index}'
                env = {**base, 'HOSTNAME': host,
                       **{variable['name']: variable['value'] for variable in container['env']},
                       'JOB_COMPLETION_INDEX': str(pod_index)}
                yield Pod(host, job['name'], image.command(argv) if image else argv, env,
                          [mount['mountPath'] for mount in container.get('volumeMounts', [])])


def wait(processes, deadline, logs):
    """{host: exit code} of `processes` ({host: Popen}), each given until `deadline`."""
    codes = {}
    for host, process in processes.items():
        try:
            codes[host] = process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f'{host} still runs: ' + logs[host].read_text()[-3000:])
    return codes


@pytest.mark.cluster
@pytest.mark.parametrize('runtime', ['checkout', pytest.param('image', marks=pytest.mark.slow)])
def test_rehearsal_of_a_manifest_on_emulated_hosts(capsys, digits_dir, tmp_path, runtime):
    """Each pod's command and environment, on an emulated host of its pod's name: run by this
    checkout, or in the Containerfile's image (images.build) as its user."""
    volume = tmp_path / 'volume'
    train_dir = volume / 'lenet'
    if runtime == 'image':
        images.build()
    manifest = generate(
        capsys, '--num_ps_tasks=1', '--worker_replicas=2', '--evaluator',
        f'--volume=train:{volume}', f'--volume=digits:{digits_dir}',
        command=['train_image_classifier', f'--train_dir={train_dir}',
                 f'--dataset_dir={digits_dir}', '--num_clones=1', '--batch_size=16',
                 f'--max_number_of_steps={LAST_STEP}', '--save_interval_secs=1'])
    volume.mkdir()
    with (images.image_root([str(volume), digits_dir]) if runtime == 'image'
          else contextlib.nullcontext()) as image:
        if image:  # The volumes, as the image's user sees them.
            os.chown(volume, image.uid, image.gid)
            for directory, _, _ in os.walk(digits_dir):
                os.chmod(directory, 0o755)
        rehearse(manifest, list(pods(manifest, image)), image, volume, digits_dir, tmp_path)
    assert checkpoint_step(train_dir) == LAST_STEP
    evaluated = evaluations(train_dir)
    assert evaluated[-1]['global_step'] == LAST_STEP
    assert evaluated[-1]['checkpoint'] == f'{train_dir}/model.ckpt-{LAST_STEP}'


def rehearse(manifest, every_pod, image, volume, digits_dir, tmp_path):
    """Runs `every_pod` of `manifest` on emulated hosts as Kubernetes would, in `image` (an
    images.ImageRoot; None: this checkout): until the success policy is met, then the other
    pods are stopped; every pod must exit 0."""
    assert [pod.host for pod in every_pod] == [
        f'{NAME}-ps-0-0', f'{NAME}-worker-0-0', f'{NAME}-worker-0-1', f'{NAME}-evaluator-0-0']
    for pod in every_pod:  # What the chief, workers and evaluator read and write is mounted.
        assert pod.mounts == ([] if pod.job == 'ps' else [str(volume), digits_dir])
    targets = manifest['spec']['successPolicy']['targetReplicatedJobs']
    logs = {pod.host: tmp_path / f'{pod.host}.log' for pod in every_pod}
    processes = {}
    try:
        with emulated_hosts.EmulatedHosts(
                [pod.host for pod in every_pod],
                domain=manifest['spec']['network']['subdomain']) as hosts:
            if image:  # The hosts' names, as the cluster's DNS gives them to every pod.
                shutil.copy(os.path.join(emulated_hosts.ETC_NETNS,
                                         hosts[every_pod[0].host].namespace, 'hosts'),
                            os.path.join(image.root, 'etc/hosts'))
            for pod in every_pod:
                with open(logs[pod.host], 'w') as log:
                    processes[pod.host] = hosts.popen(pod.host, pod.argv, env=pod.env, cwd='/',
                                                      stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + POD_TIMEOUT_SECS
            succeeded = wait({pod.host: processes[pod.host] for pod in every_pod
                              if pod.job in targets}, deadline, logs)
            assert set(succeeded.values()) == {0}, {
                host: logs[host].read_text()[-3000:] for host, code in succeeded.items() if code}
            # The success policy is met: JobSet deletes the other pods (the ps), which stop as
            # processes stopped by SIGTERM do, at once: the chief that wrote the last
            # checkpoint is gone.
            others = {host: process for host, process in processes.items()
                      if host not in succeeded}
            for process in others.values():
                process.send_signal(signal.SIGTERM)
            assert set(wait(others, time.monotonic() + 30, logs).values()) == {143}
    except emulated_hosts.EmulatedHostsError as e:
        pytest.fail(str(e))  # Says what this machine lacks for emulated hosts.
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
