"""Shared test set-up: quiet TensorFlow's C++ logs and repair tf-slim before any test."""
import fcntl
import os

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow.compat.v1 as tf  # noqa: E402

from benchmarks import harness  # noqa: E402
from slim_deploy.cluster import emulated_hosts  # noqa: E402
from slim_deploy.datasets import digits  # noqa: E402
import slim_deploy.deployment  # noqa: E402,F401  (repairs tf-slim for the installed TensorFlow)


@pytest.fixture(scope='session')
def digits_dir(tmp_path_factory):
    """The embedded digits, converted once for the whole run; tests must not modify it."""
    return digits.prepare(str(tmp_path_factory.mktemp('digits')))


@pytest.fixture(scope='module')
def fast_variable_creation():
    """Halves the time to build deep nets' graphs; use with pytest.mark.usefixtures.

    TF's legacy layers hash every global variable each time they add one, and in TF2 mode
    Variable.__hash__ first checks for eager execution, which dominates the build of a
    ResNet-200. With tensor equality off the hash is plain identity; inside a tf.Graph
    tensors and variables compare by identity either way, so no test sees a difference.
    """
    tf.disable_tensor_equality()
    yield
    tf.enable_tensor_equality()


# The test files that make emulated hosts (network namespaces, themselves or through a
# launcher or benchmark they run) and check the machine's network for what they leave.
EMULATED_HOSTS_FILES = {
    f'tests/{name}.py' for name in (
        'benchmarks/test_benchmark_harness', 'benchmarks/test_fault_injection',
        'benchmarks/test_network_benchmark', 'benchmarks/test_scaling',
        'benchmarks/test_stragglers', 'cluster/test_emulated_hosts', 'cluster/test_jobset',
        'cluster/test_launch', 'cluster/test_silent_tasks', 'end_to_end/test_eight_workers')}


# Held by each test of EMULATED_HOSTS_FILES while it runs (flock), so that two pytest runs on
# one machine (a stress script's rounds, two developers' suites) make hosts one at a time.
EMULATED_HOSTS_LOCK = '/tmp/slim-deploy-emulated-hosts.lock'


@pytest.fixture(autouse=True)
def one_emulated_cluster_on_the_machine(request):
    """A test of EMULATED_HOSTS_FILES runs holding EMULATED_HOSTS_LOCK, so no other pytest
    run's hosts are there for it to collide with, after the instances of dead processes are
    removed. It fails if it leaves an instance behind: a new one of this process, of a
    process it started that still runs, or of a dead process (removed then, so that no later
    test finds it). Those of other live processes (a benchmark run beside the suite) are
    theirs."""
    if request.node.nodeid.split('::', 1)[0] not in EMULATED_HOSTS_FILES:
        yield
        return
    with open(EMULATED_HOSTS_LOCK, 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        emulated_hosts.remove_stale()
        before = emulated_hosts.instances()
        yield
        ours = {os.getpid(), *harness.descendants(os.getpid())}
        left = {prefix: alive for prefix, alive in emulated_hosts.instances().items()
                if prefix not in before
                and (not alive or emulated_hosts.owner_pid(prefix) in ours)}
        emulated_hosts.remove_stale()
        assert not left, f'emulated hosts left behind ({{prefix: owner alive}}): {left}'


# The test files whose tests share a module-scoped fixture (a training run, a wheel): each
# runs on one worker under -n, so the fixture runs once.
SHARED_FIXTURE_FILES = {
    f'tests/{name}.py' for name in (
        'benchmarks/test_quantization_benchmark', 'datasets/test_converters_imagenet_vww',
        'datasets/test_slim_datasets', 'deployment/test_partitioning',
        'deployment/test_precision', 'deployment/test_tflite', 'end_to_end/test_entry_points',
        'image_classifier/test_continuous_eval', 'image_classifier/test_image_classifier',
        'image_classifier/test_tensorboard', 'package/test_install_layout',
        'slim_scripts/test_mobilenet_v1_scripts')}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (-n N), each test is a unit of work for any worker, except the
    tests of EMULATED_HOSTS_FILES: one unit, run one test after another on one worker, so
    no test sees another's hosts (and two emulated clusters never share the cores); and
    each file of SHARED_FIXTURE_FILES, a unit of its own."""
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split('::', 1)[0]
            if path in EMULATED_HOSTS_FILES:
                return 'emulated hosts'
            return path if path in SHARED_FIXTURE_FILES else nodeid

    return Units(config, log)
