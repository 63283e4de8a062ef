"""Kubernetes JobSet manifests (kubernetes-sigs/jobset, apiVersion jobset.x-k8s.io/v1alpha2)
running a training cluster: what `launch_cluster --jobset NAME` prints.

    spec = manifest('lenet', 'registry.example/slim:1', ['train_image_classifier', ...],
                    num_ps_tasks=1, worker_replicas=2, evaluator=True,
                    volumes=['train-claim:/train'])
    print(to_yaml(spec, network_policy('lenet')))

Each job of the cluster (ps, chief, worker, evaluator: task_counts) is a replicated job
holding one Indexed Job whose pods are its tasks. With spec.network.enableDNSHostnames, task
i of job JOB answers at host_name(NAME, JOB, i) = NAME-JOB-0-i in subdomain NAME (JobSet's
headless service), on `port`. All pods of a job run one command line: COMMAND, the host
flags naming every task (cluster_flags: --ps_hosts, --chief_host, --worker_hosts; the same
in every pod) and --job_name=JOB; each task takes its index from JOB_COMPLETION_INDEX, which
Kubernetes sets in each pod of an Indexed Job (see tasks.from_flags).

What happens, as with the local launcher (launch.py):
- The JobSet succeeds once every chief, worker (and evaluator) pod has exited 0
  (spec.successPolicy); JobSet then deletes the ps pods, which serve until stopped.
- A pod exiting with one of errors.FINAL_EXIT_CODES (2, a user's mistake; 65, damaged data;
  74, a full disk: a restart repeats each) fails its Job through the Job's
  podFailurePolicy (reason PodFailurePolicy), and that fails the JobSet at once.
- Any other failure of a pod (exit code 75, errors.ClusterError: it lost a task it needs; a
  crash; an eviction or a preemption) fails its Job at once (backoffLimit 0, restartPolicy
  Never: no pod is restarted alone, which a ps task, whose variables lived only in its
  memory, and a collective worker cannot be) and restarts the whole JobSet, up to
  max_restarts times (spec.failurePolicy): every pod is recreated, and the chief resumes
  from its last checkpoint in --train_dir, which must outlive the pods (a persistent
  volume: `volumes`).

TensorFlow's gRPC servers have no authentication: any client that reaches a task's port can
read and write its variables and run ops there. network_policy(NAME) is the NetworkPolicy
that admits traffic to the JobSet's pods only on the task port and only from pods of the same
JobSet (JobSet labels every pod jobset.sigs.k8s.io/jobset-name=NAME); it takes effect only
where the cluster's network plugin enforces NetworkPolicy.
Imports no TensorFlow.
"""
import re

import yaml

from slim_deploy.cluster import shape
from slim_deploy.common.errors import FINAL_EXIT_CODES, UsageError

API_VERSION = 'jobset.x-k8s.io/v1alpha2'
JOBSET_NAME_LABEL = 'jobset.sigs.k8s.io/jobset-name'  # JobSet's label on each of its pods.
CONTAINER = 'trainer'  # The container of every pod.
HOST_FLAGS = {'ps': '--ps_hosts', 'chief': '--chief_host', 'worker': '--worker_hosts'}
MAX_HOST_NAME = 63  # A pod's host name is a DNS label.
_DNS_LABEL = re.compile(r'[a-z]([-a-z0-9]*[a-z0-9])?')  # RFC 1035, as Service names are.
_DNS_SUBDOMAIN = re.compile(r'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')


def task_counts(num_ps_tasks, worker_replicas, chief=False, evaluator=False):
    """{job: tasks} of the cluster's jobs that have tasks, in the order ps, chief, worker,
    evaluator. worker_replicas counts every training replica, the chief included (with
    `chief`, a job of its own holding replica 0; the 'worker' job holds the others)."""
    counts = {'ps': num_ps_tasks, 'chief': int(chief), 'worker': worker_replicas - int(chief),
              'evaluator': int(evaluator)}
    return {job: count for job, count in counts.items() if count > 0}


def host_name(name, job, index):
    """The host name JobSet gives task `index` of `job` in JobSet `name`:
    NAME-JOB-<Job index, 0: a replicated job of one Job>-<pod index>."""
    return f'{name}-{job}-0-{index}'


def cluster_flags(name, counts, port=shape.PORT):
    """The trainer's host flags naming every ps, chief and worker task of `counts`
    (task_counts) by its host name in subdomain `name`, at `port`:
    ['--ps_hosts=NAME-ps-0-0.NAME:2222,...', '--worker_hosts=...']."""
    return [flag + '=' + ','.join(f'{host_name(name, job, index)}.{name}:{port}'
                                  for index in range(counts[job]))
            for job, flag in HOST_FLAGS.items() if job in counts]


def manifest(name, image, command, num_ps_tasks, worker_replicas, chief=False,
             evaluator=False, max_restarts=0, volumes=(), port=shape.PORT):
    """The JobSet (a dict, as its YAML reads) named `name` that runs the cluster of
    task_counts(num_ps_tasks, worker_replicas, chief, evaluator), every task running
    `command` (argv, in container image `image`) with cluster_flags and its --job_name.
    volumes: 'CLAIM:MOUNT_PATH' strings, each a PersistentVolumeClaim mounted at an
    absolute path in the chief, worker and evaluator pods (the ps tasks read no files).
    UsageError naming the launcher's flag (--jobset, --image, --volume, --port) for a bad
    value."""
    counts = task_counts(num_ps_tasks, worker_replicas, chief, evaluator)
    _check(name, image, counts, port)
    claims = _volumes(volumes)
    labels = {'app.kubernetes.io/name': 'slim-deploy', 'app.kubernetes.io/instance': name}
    flags = cluster_flags(name, counts, port)
    return {
        'apiVersion': API_VERSION,
        'kind': 'JobSet',
        'metadata': {'name': name, 'labels': labels},
        'spec': {
            'network': {'enableDNSHostnames': True, 'subdomain': name},
            'successPolicy': {'operator': 'All',
                              'targetReplicatedJobs': [job for job in counts if job != 'ps']},
            'failurePolicy': {'maxRestarts': max_restarts, 'rules': [
                {'name': 'UsersMistake', 'action': 'FailJobSet',
                 'onJobFailureReasons': ['PodFailurePolicy']},
                {'name': 'LostTaskCrashOrPreemption', 'action': 'RestartJobSet'}]},
            'replicatedJobs': [
                _replicated_job(job, tasks, image, [*command, *flags, f'--job_name={job}'],
                                {**labels, 'app.kubernetes.io/component': job},
                                {} if job == 'ps' else claims, port)
                for job, tasks in counts.items()],
        },
    }


def network_policy(name, port=shape.PORT):
    """The NetworkPolicy (a dict, as its YAML reads) named `name` that admits traffic to the
    pods of JobSet `name` only from pods of the same JobSet, only to TCP `port`."""
    def pods():  # A selector of the JobSet's pods (a new dict each: no YAML anchors).
        return {'matchLabels': {JOBSET_NAME_LABEL: name}}

    return {
        'apiVersion': 'networking.k8s.io/v1',
        'kind': 'NetworkPolicy',
        'metadata': {'name': name, 'labels': {'app.kubernetes.io/name': 'slim-deploy',
                                              'app.kubernetes.io/instance': name}},
        'spec': {'podSelector': pods(), 'policyTypes': ['Ingress'],
                 'ingress': [{'from': [{'podSelector': pods()}],
                              'ports': [{'protocol': 'TCP', 'port': port}]}]},
    }


def to_yaml(*specs):
    """`specs` (manifests) as YAML documents, keys in each manifest's order."""
    return yaml.safe_dump_all(specs, sort_keys=False)


def _replicated_job(job, tasks, image, argv, labels, claims, port):
    """The replicated job of `job`: one Indexed Job of `tasks` pods running `argv`, with
    the volumes of `claims` ({mount path: claim})."""
    container = {'name': CONTAINER, 'image': image, 'command': argv,
                 'env': [{'name': 'PYTHONUNBUFFERED', 'value': '1'}]}
    if job != 'evaluator':  # It serves nothing.
        container['ports'] = [{'name': 'grpc', 'containerPort': port}]
    pod = {'restartPolicy': 'Never', 'containers': [container]}
    if claims:
        names = [f'volume-{index}' for index in range(len(claims))]
        container['volumeMounts'] = [{'name': volume, 'mountPath': path}
                                     for volume, path in zip(names, claims)]
        pod['volumes'] = [{'name': volume, 'persistentVolumeClaim': {'claimName': claim}}
                          for volume, claim in zip(names, claims.values())]
    return {'name': job, 'replicas': 1, 'template': {'spec': {
        'completionMode': 'Indexed', 'completions': tasks, 'parallelism': tasks,
        'backoffLimit': 0,
        'podFailurePolicy': {'rules': [{'action': 'FailJob', 'onExitCodes': {
            'containerName': CONTAINER, 'operator': 'In', 'values': list(FINAL_EXIT_CODES)}}]},
        'template': {'metadata': {'labels': labels}, 'spec': pod},
    }}}


def _check(name, image, counts, port):
    if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name):
        raise UsageError(f"--jobset {name!r} must be a DNS label: lowercase letters, digits "
                         "and '-', starting with a letter")
    longest = max((host_name(name, job, tasks - 1) for job, tasks in counts.items()), key=len)
    if len(longest) > MAX_HOST_NAME:
        raise UsageError(f'--jobset {name!r} is too long: its pod host name {longest!r} has '
                         f'{len(longest)} characters, at most {MAX_HOST_NAME}')
    if not image or any(c.isspace() for c in image):
        raise UsageError(f'--image must name a container image, got {image!r}')
    if not 0 < port < 65536:
        raise UsageError(f'--port must be in 1..65535, got {port}')


def _volumes(specs):
    """{mount path: claim} of 'CLAIM:MOUNT_PATH' `specs`."""
    claims = {}
    for spec in specs:
        claim, _, path = spec.partition(':')
        if not _DNS_SUBDOMAIN.fullmatch(claim) or not path.startswith('/'):
            raise UsageError(f"--volume {spec!r} must be CLAIM:MOUNT_PATH, a "
                             'PersistentVolumeClaim name and an absolute path')
        if path in claims:
            raise UsageError(f'--volume {spec!r}: {path} is the mount path of claim '
                             f'{claims[path]!r} already')
        claims[path] = claim
    return claims
