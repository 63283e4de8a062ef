"""model_deploy keeps TF-Slim's whole public surface: its names, signatures and properties
with slim's values, and the private helpers some users call. The methods' exact devices are
pinned by test_deployment_config's DEVICE_MATRIX."""
import inspect

import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import model_deploy
from slim_deploy.deployment.model_deploy import DeploymentConfig, create_clones, optimize_clones

SLIM_ALL = {'create_clones', 'deploy', 'optimize_clones', 'DeployedModel', 'DeploymentConfig',
            'Clone'}

# Slim's parameters, in order; ours may add more after them.
SLIM_PARAMETERS = {
    'create_clones': ['config', 'model_fn', 'args=None', 'kwargs=None'],
    'deploy': ['config', 'model_fn', 'args=None', 'kwargs=None', 'optimizer=None',
               'summarize_gradients=False'],
    'optimize_clones': ['clones', 'optimizer', 'regularization_losses=None', '**kwargs'],
    'DeploymentConfig': ['num_clones=1', 'clone_on_cpu=False', 'replica_id=0',
                         'num_replicas=1', 'num_ps_tasks=0', "worker_job_name='worker'",
                         "ps_job_name='ps'"],
    '_gather_clone_loss': ['clone', 'num_clones', 'regularization_losses'],
    '_sum_clones_gradients': ['clone_grads'],
    '_add_gradients_summaries': ['grads_and_vars'],
}
SLIM_METHODS = ['caching_device', 'clone_device', 'clone_scope', 'optimizer_device',
                'inputs_device', 'variables_device']

# Config arguments -> slim's properties. worker_device is slim's plus the replica's task.
PROPERTIES = {
    'defaults': ({}, dict(num_clones=1, clone_on_cpu=False, replica_id=0, num_replicas=1,
                          num_ps_tasks=0, ps_device='', worker_device='')),
    'clones_on_cpu': ({'num_clones': 3, 'clone_on_cpu': True},
                      dict(num_clones=3, clone_on_cpu=True, replica_id=0, num_replicas=1,
                           num_ps_tasks=0, ps_device='', worker_device='')),
    'one_ps': ({'num_ps_tasks': 1},
               dict(num_clones=1, clone_on_cpu=False, replica_id=0, num_replicas=1,
                    num_ps_tasks=1, ps_device='/job:ps', worker_device='/job:worker/task:0')),
    'replicas': ({'num_clones': 2, 'num_replicas': 3, 'replica_id': 2, 'num_ps_tasks': 2,
                  'worker_job_name': 'trainer', 'ps_job_name': 'params'},
                 dict(num_clones=2, clone_on_cpu=False, replica_id=2, num_replicas=3,
                      num_ps_tasks=2, ps_device='/job:params',
                      worker_device='/job:trainer/task:2')),
}


def test_all_lists_slims_names_and_every_name_exists():
    assert SLIM_ALL <= set(model_deploy.__all__)
    assert all(hasattr(model_deploy, name) for name in model_deploy.__all__)


@pytest.mark.parametrize('name', SLIM_PARAMETERS)
def test_slims_parameters_come_first(name):
    """slim's parameters, in slim's order; ours come after them or are keyword-only."""
    parameters = [str(p) for p in
                  inspect.signature(getattr(model_deploy, name)).parameters.values()
                  if p.kind != inspect.Parameter.KEYWORD_ONLY]
    assert parameters[:len(SLIM_PARAMETERS[name])] == SLIM_PARAMETERS[name]


def test_namedtuples_have_slims_fields():
    assert model_deploy.Clone._fields == ('outputs', 'scope', 'device')
    assert model_deploy.DeployedModel._fields == (
        'train_op', 'summary_op', 'total_loss', 'clones')


@pytest.mark.parametrize('name', PROPERTIES)
def test_properties_and_methods_with_slims_values(name):
    kwargs, expected = PROPERTIES[name]
    config = DeploymentConfig(**kwargs)
    assert {key: getattr(config, key) for key in expected} == expected
    assert all(callable(getattr(config, method)) for method in SLIM_METHODS)
    # worker_device prefixes every worker device; ps_device is the job of the variables.
    worker_devices = [config.clone_device(i) for i in range(config.num_clones)]
    worker_devices += [config.optimizer_device(), config.inputs_device()]
    assert all(d.startswith(config.worker_device + '/device:') for d in worker_devices)
    with tf.Graph().as_default(), tf.device(config.variables_device()):
        variable = tf.get_variable('v', [])
    assert variable.op.device == (f'{config.ps_device}/task:0/device:CPU:0'
                                  if config.num_ps_tasks else '/device:CPU:0')
    assert (config.caching_device() is None) == (config.num_ps_tasks == 0)


def _linear_model():
    """Loss 2w + 3b at w = 1, b = 0; w's regularizer 0.5 w^2 (made once, by clone 0)."""
    w = tf.get_variable('w', [], initializer=tf.ones_initializer(),
                        regularizer=lambda w: 0.5 * tf.square(w))
    b = tf.get_variable('b', [], initializer=tf.zeros_initializer())
    tf.losses.add_loss(2.0 * w + 3.0 * b)


def _optimize_two_clones(var_names=None, **kwargs):
    """optimize_clones(..., **kwargs) over 2 clones of _linear_model, with var_list the
    variables named `var_names` (None: no var_list): (total loss, gradient by name)."""
    with tf.Graph().as_default():
        clones = create_clones(DeploymentConfig(num_clones=2, clone_on_cpu=True), _linear_model)
        if var_names is not None:
            kwargs['var_list'] = [v for v in tf.global_variables() if v.op.name in var_names]
        total_loss, grads_and_vars = optimize_clones(
            clones, tf.train.GradientDescentOptimizer(0.1), **kwargs)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            loss, grads = sess.run([total_loss, [g for g, _ in grads_and_vars]])
    return loss, {v.op.name: g for (_, v), g in zip(grads_and_vars, grads)}


def test_optimize_clones_adds_the_regularization_losses_it_is_given():
    # Each clone's loss is halved; the clones' gradients sum to the mean loss's.
    assert _optimize_two_clones() == (pytest.approx(2.5), {'w': pytest.approx(3.0),
                                                           'b': pytest.approx(3.0)})
    assert _optimize_two_clones(regularization_losses=[]) == (
        pytest.approx(2.0), {'w': pytest.approx(2.0), 'b': pytest.approx(3.0)})


def test_optimize_clones_passes_kwargs_to_compute_gradients():
    assert _optimize_two_clones(var_names=['b'], gate_gradients=0) == (
        pytest.approx(2.5), {'b': pytest.approx(3.0)})
