"""DeploymentConfig: device strings, scopes, validation and the placement plan."""
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import model_deploy, setting_rules
from slim_deploy.deployment.model_deploy import PS_STRATEGIES, DeploymentConfig, placement_plan

W0 = '/job:worker/task:0'
W1 = '/job:worker/task:1'

# (config arguments, per-clone (device, scope), optimizer/inputs device, PS variable devices
#  in round-robin order or None for local variables on '/device:CPU:0').
DEVICE_MATRIX = {
    'defaults': (
        {}, [('/device:GPU:0', '')], '/device:CPU:0', None),
    'cpu_only': (
        {'clone_on_cpu': True}, [('/device:CPU:0', '')], '/device:CPU:0', None),
    '2_gpus': (
        {'num_clones': 2},
        [('/device:GPU:0', 'clone_0'), ('/device:GPU:1', 'clone_1')], '/device:CPU:0', None),
    '1_ps': (
        {'num_ps_tasks': 1}, [(W0 + '/device:GPU:0', '')], W0 + '/device:CPU:0',
        ['/job:ps/task:0/device:CPU:0']),
    '2_gpus_1_ps': (
        {'num_clones': 2, 'num_ps_tasks': 1},
        [(W0 + '/device:GPU:0', 'clone_0'), (W0 + '/device:GPU:1', 'clone_1')],
        W0 + '/device:CPU:0', ['/job:ps/task:0/device:CPU:0']),
    '2_replicas_2_ps': (
        {'num_replicas': 2, 'num_ps_tasks': 2}, [(W0 + '/device:GPU:0', '')],
        W0 + '/device:CPU:0', ['/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0']),
    'replicas_clones_ps': (
        {'num_clones': 2, 'num_replicas': 3, 'replica_id': 2, 'num_ps_tasks': 2},
        [('/job:worker/task:2/device:GPU:0', 'clone_0'),
         ('/job:worker/task:2/device:GPU:1', 'clone_1')],
        '/job:worker/task:2/device:CPU:0',
        ['/job:ps/task:0/device:CPU:0', '/job:ps/task:1/device:CPU:0']),
    'replica_id_1': (
        {'num_replicas': 2, 'replica_id': 1, 'num_ps_tasks': 1},
        [(W1 + '/device:GPU:0', '')], W1 + '/device:CPU:0', ['/job:ps/task:0/device:CPU:0']),
    'replica_id_1_on_cpu': (
        {'num_clones': 2, 'clone_on_cpu': True, 'num_replicas': 2, 'replica_id': 1,
         'num_ps_tasks': 1},
        [(W1 + '/device:CPU:0', 'clone_0'), (W1 + '/device:CPU:0', 'clone_1')],
        W1 + '/device:CPU:0', ['/job:ps/task:0/device:CPU:0']),
    'custom_job_names': (
        {'num_ps_tasks': 2, 'worker_job_name': 'trainer', 'ps_job_name': 'params'},
        [('/job:trainer/task:0/device:GPU:0', '')], '/job:trainer/task:0/device:CPU:0',
        ['/job:params/task:0/device:CPU:0', '/job:params/task:1/device:CPU:0']),
    # The Object Detection API's trainer names the task with the job: slim kept it.
    'job_name_with_task': (
        {'num_replicas': 3, 'num_ps_tasks': 1, 'worker_job_name': 'master/task:0'},
        [('/job:master/task:0/device:GPU:0', '')], '/job:master/task:0/device:CPU:0',
        ['/job:ps/task:0/device:CPU:0']),
    'job_name_with_another_task': (
        {'num_replicas': 3, 'replica_id': 1, 'num_ps_tasks': 1,
         'worker_job_name': 'worker/task:2'},
        [('/job:worker/task:2/device:GPU:0', '')], '/job:worker/task:2/device:CPU:0',
        ['/job:ps/task:0/device:CPU:0']),
    'clone_devices': (
        {'num_clones': 2, 'clone_devices': ['/device:CPU:0', '/device:CPU:1']},
        [('/device:CPU:0', 'clone_0'), ('/device:CPU:1', 'clone_1')], '/device:CPU:0', None),
    'clone_devices_with_ps': (
        {'num_clones': 2, 'clone_devices': ['/device:CPU:0', '/device:GPU:3'],
         'num_ps_tasks': 1},
        [(W0 + '/device:CPU:0', 'clone_0'), (W0 + '/device:GPU:3', 'clone_1')],
        W0 + '/device:CPU:0', ['/job:ps/task:0/device:CPU:0']),
}


def _variable_devices(device_fn, count, use_resource):
    """Devices that `device_fn` gives `count` new variables, in creation order."""
    with tf.Graph().as_default():
        with tf.device(device_fn):
            return [tf.get_variable(f'v{i}', [], use_resource=use_resource).op.device
                    for i in range(count)]


@pytest.mark.parametrize('name', DEVICE_MATRIX)
def test_device_matrix(name):
    kwargs, clones, worker_cpu, ps_devices = DEVICE_MATRIX[name]
    config = DeploymentConfig(**kwargs)
    assert [(config.clone_device(i), config.clone_scope(i))
            for i in range(config.num_clones)] == clones
    assert config.optimizer_device() == worker_cpu
    assert config.inputs_device() == worker_cpu
    if ps_devices is None:
        assert config.variables_device() == '/device:CPU:0'
        assert config.caching_device() is None
    else:
        expected = [ps_devices[i % len(ps_devices)] for i in range(5)]
        for use_resource in (False, True):
            assert _variable_devices(config.variables_device(), 5, use_resource) == expected
        with tf.Graph().as_default(), tf.device(config.clone_device(0)):
            reading_op = tf.no_op()
        assert config.caching_device()(reading_op) == worker_cpu  # Slim's type: op -> device.


def test_variables_device_leaves_other_ops_alone():
    config = DeploymentConfig(num_ps_tasks=2)
    with tf.Graph().as_default():
        with tf.device('/job:worker/task:0/device:GPU:0'), tf.device(config.variables_device()):
            var = tf.get_variable('v', [2])
            product = tf.multiply(tf.constant([1.0, 2.0]), 3.0)
            with tf.device('/job:ps/task:1/device:CPU:0'):
                pinned = tf.get_variable('pinned', [2])
    assert var.op.device == '/job:ps/task:0/device:CPU:0'
    assert product.op.device == '/job:worker/task:0/device:GPU:0'
    assert pinned.op.device == '/job:ps/task:1/device:CPU:0'


def test_caching_device_reads_variables_on_the_workers_cpu():
    """In a variable scope with it, a variable on a ps task is read on the worker's CPU."""
    config = DeploymentConfig(num_clones=2, num_replicas=2, replica_id=1, num_ps_tasks=1)
    with tf.Graph().as_default():
        with tf.device(config.clone_device(1)), tf.device(config.variables_device()):
            with tf.variable_scope('', caching_device=config.caching_device()):
                variable = tf.get_variable('v', [2])
    assert variable.op.device == '/job:ps/task:0/device:CPU:0'
    assert variable.value().device == W1 + '/device:CPU:0'


def test_properties_are_read_only():
    config = DeploymentConfig(num_clones=3, clone_on_cpu=True, num_replicas=2, replica_id=1,
                              num_ps_tasks=4, worker_job_name='w', ps_job_name='p',
                              clone_devices=['/device:CPU:0'] * 3)
    assert (config.num_clones, config.clone_on_cpu, config.num_replicas, config.replica_id,
            config.num_ps_tasks, config.worker_job_name, config.ps_job_name,
            config.clone_devices) == (3, True, 2, 1, 4, 'w', 'p', ('/device:CPU:0',) * 3)
    with pytest.raises(AttributeError):
        config.num_clones = 1
    assert 'num_clones=3' in repr(config) and "ps_job_name='p'" in repr(config)


@pytest.mark.parametrize('kwargs, message', [
    ({'num_clones': 0}, r'num_clones must be an integer >= 1, got 0'),
    ({'num_clones': -2}, r'num_clones must be an integer >= 1, got -2'),
    ({'num_clones': 1.5}, r'num_clones must be an integer >= 1, got 1\.5'),
    ({'num_replicas': 0}, r'num_replicas must be an integer >= 1, got 0'),
    ({'replica_id': -1}, r'replica_id must be an integer >= 0, got -1'),
    ({'num_ps_tasks': -1}, r'num_ps_tasks must be an integer >= 0, got -1'),
    ({'num_replicas': 2, 'replica_id': 2, 'num_ps_tasks': 1},
     r'replica_id must be less than num_replicas=2, got 2'),
    ({'replica_id': 1}, r'replica_id must be less than num_replicas=1, got 1'),
    ({'num_replicas': 2}, r"num_replicas=2 needs ps tasks to hold the shared variables "
                           r"\(num_ps_tasks=0\), or variable_update='collective'"),
    ({'num_ps_tasks': 1, 'worker_job_name': ''}, r"worker_job_name must be a non-empty .*got ''"),
    ({'num_ps_tasks': 1, 'ps_job_name': ''}, r"ps_job_name must be a non-empty .*got ''"),
    ({'num_replicas': 2, 'num_ps_tasks': 1, 'ps_job_name': None},
     r'ps_job_name must be a non-empty .*got None'),
    ({'num_clones': 2, 'clone_devices': ['/device:CPU:0']},
     r"clone_devices must list one device per clone \(num_clones=2\), got \['/device:CPU:0'\]"),
    ({'ps_strategy': 'largest_first'},
     r"ps_strategy must be one of \('bytes', 'round_robin'\), got 'largest_first'"),
    ({'num_ps_tasks': 2, 'ps_strategy': 'Bytes'}, r"ps_strategy must be one of .*got 'Bytes'"),
    ({'ps_strategy': None}, r'ps_strategy must be one of .*got None'),
])
def test_invalid_config_raises(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeploymentConfig(**kwargs)


@pytest.mark.parametrize('worker_job_name, replica_id, is_chief', [
    ('worker', 0, True), ('worker', 1, False),  # Slim's scripts: worker 0 is the chief.
    ('chief', 0, True), ('master', 0, True),
    ('master/task:0', 0, True), ('worker/task:0', 0, False),  # The OD API's trainer.
    ('worker/task:1', 1, False),
])
def test_is_chief_follows_the_job_slims_callers_name(worker_job_name, replica_id, is_chief):
    config = DeploymentConfig(num_replicas=3, replica_id=replica_id, num_ps_tasks=1,
                              worker_job_name=worker_job_name)
    assert config.is_chief is is_chief
    assert DeploymentConfig(num_replicas=3, replica_id=replica_id, num_ps_tasks=1,
                            worker_job_name=worker_job_name,
                            is_chief=not is_chief).is_chief is not is_chief


@pytest.mark.parametrize('worker_job_name', ['worker:1', 'worker/task:one',
                                             'worker/task:0/device:CPU:0'])
def test_a_worker_job_name_that_is_no_job_raises(worker_job_name):
    message = (r"worker_job_name must be a job name, optionally with its task \('worker', "
               rf"'master/task:0'\), got '{worker_job_name}'")
    with pytest.raises(ValueError, match=message):
        DeploymentConfig(num_ps_tasks=1, worker_job_name=worker_job_name)


def test_empty_job_names_are_fine_without_cluster():
    assert DeploymentConfig(worker_job_name='', ps_job_name='').clone_device(0) == '/device:GPU:0'


@pytest.mark.parametrize('method', ['clone_device', 'clone_scope'])
@pytest.mark.parametrize('index', [2, -1, '0'])
def test_clone_index_out_of_range(method, index):
    config = DeploymentConfig(num_clones=2)
    message = rf'clone_index must be in \[0, num_clones=2\), got {index!r}'
    with pytest.raises(ValueError, match=message):
        getattr(config, method)(index)


def test_placement_plan_names_every_device():
    plan = placement_plan(DeploymentConfig(num_clones=2, num_replicas=2, replica_id=1,
                                           num_ps_tasks=2)).splitlines()
    assert plan == [
        'variables  round-robin over /job:ps/task:0/device:CPU:0, /job:ps/task:1/device:CPU:0',
        'inputs     /job:worker/task:1/device:CPU:0',
        'optimizer  /job:worker/task:1/device:CPU:0',
        'clone 0    /job:worker/task:1/device:GPU:0  (scope clone_0/)',
        'clone 1    /job:worker/task:1/device:GPU:1  (scope clone_1/)',
    ]
    assert placement_plan(DeploymentConfig(clone_on_cpu=True)).splitlines() == [
        'variables  /device:CPU:0',
        'inputs     /device:CPU:0',
        'optimizer  /device:CPU:0',
        'clone 0    /device:CPU:0',
    ]


def test_ps_strategy_is_read_only_and_in_repr():
    assert PS_STRATEGIES.names == ('bytes', 'round_robin')
    assert DeploymentConfig().ps_strategy == 'round_robin'
    config = DeploymentConfig(num_ps_tasks=2, ps_strategy='bytes')
    assert config.ps_strategy == 'bytes'
    assert ", clone_devices=None, ps_strategy='bytes', " in repr(config)
    with pytest.raises(AttributeError):
        config.ps_strategy = 'round_robin'


@pytest.mark.parametrize('use_resource', [False, True])
def test_bytes_variables_device_puts_each_variable_on_the_least_loaded_task(use_resource):
    """Each new variable goes to the task with the fewest bytes so far, pinned ones
    included; among equals, to the lowest task."""
    config = DeploymentConfig(num_ps_tasks=2, ps_strategy='bytes')
    with tf.Graph().as_default():
        with tf.device('/job:ps/task:1/device:CPU:0'):
            tf.get_variable('pinned', [250], use_resource=use_resource)  # 1000 bytes.
        with tf.device(config.variables_device()):
            variables = [tf.get_variable(f'v{i}', shape, use_resource=use_resource)
                         for i, shape in enumerate([[100], [10], [150], [10], [1]])]
    # Bytes on tasks 0/1 before each: 0/1000, 400/1000, 440/1000, 1040/1000, 1040/1040.
    assert [v.op.device for v in variables] == [
        f'/job:ps/task:{t}/device:CPU:0' for t in (0, 0, 0, 1, 0)]


def test_bytes_changes_nothing_without_ps_tasks():
    config = DeploymentConfig(ps_strategy='bytes')
    assert config.variables_device() == '/device:CPU:0'
    assert placement_plan(config) == placement_plan(DeploymentConfig())


def test_placement_plan_names_the_strategy():
    plan = placement_plan(DeploymentConfig(num_ps_tasks=2, ps_strategy='bytes'))
    assert plan.splitlines()[0] == (
        'variables  largest first onto the least-loaded of /job:ps/task:0/device:CPU:0, '
        '/job:ps/task:1/device:CPU:0')


def test_the_setting_rules_keep_their_names_in_model_deploy():
    rules = [name for name in vars(setting_rules) if name.endswith('_problem')]
    assert len(rules) == 7
    for name in rules:
        assert getattr(model_deploy, name) is getattr(setting_rules, name)
