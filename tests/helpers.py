"""Helpers of the tests: the project's programs run as a user runs them (subprocesses), a
training process writing to a log, waiting for what it writes, a task's TF_CONFIG, what a
run left (its checkpoint's step, its evaluations), a caught error's one-line message, a
small disk (tmpfs), and graphs' parts (nets built by the factory, variables, random labelled
images, a session on CPU devices). Cluster processes are in clusters.py, which builds on
this module; fixtures (the converted digits, fast variable creation) in conftest.py."""
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest
import script_server
import tensorflow.compat.v1 as tf

from slim_deploy.image_classifier import evaluate
from slim_deploy.nets import nets_factory

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = [sys.executable, os.path.join(REPO, 'train_image_classifier.py')]
# A user's shell: the entry points quiet TensorFlow themselves (conftest.py sets
# TF_CPP_MIN_LOG_LEVEL for the tests' own process). Unbuffered, so that a log file or a pipe
# gets each line as it is printed.
ENV = {**{name: value for name, value in os.environ.items()
          if name not in ('TF_CPP_MIN_LOG_LEVEL', 'PYTHONWARNINGS')},
       'PYTHONUNBUFFERED': '1'}


def run(argv, cwd='/', env=ENV, timeout=300, fresh=False):
    """Runs `argv` in directory `cwd` (default: elsewhere than the repository, as a user
    would) to its end, within `timeout` seconds; returns the CompletedProcess, its stdout
    and stderr captured as text. A script of this interpreter in ENV runs in a process
    forked from one that imported TensorFlow already (script_server), unless `fresh`: a
    run that must start its own interpreter (its own hash seed, say) passes fresh=True."""
    if env is ENV and not fresh and script_server.serves(argv):
        return script_server.run(argv, cwd, env, timeout)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def run_script(script, *args, **options):
    """run() of the repository's Python script `script` (a path relative to REPO) with
    `args`; options: run()'s."""
    return run([sys.executable, os.path.join(REPO, script), *args], **options)


def train_args(train_dir, digits_dir, steps, *extra, log_every_n_steps=5):
    """train_image_classifier.py's flags for lenet on the digits, one clone of batch 16,
    until global step `steps`; `extra` flags last."""
    return [f'--train_dir={train_dir}', f'--dataset_dir={digits_dir}', '--num_clones=1',
            '--batch_size=16', f'--log_every_n_steps={log_every_n_steps}',
            f'--max_number_of_steps={steps}', *extra]


def served(command, fresh=False):
    """`command` (a subprocess argv), or where script_server serves it (unless `fresh`), a
    stand-in process's command that runs it served: for a process started to run beside
    others (a cluster's task, through the launcher or not, on an emulated host or not:
    EmulatedHosts.command(host, argv)), whose environment is ENV with
    variables a program reads once started (TF_CONFIG). Signals other than SIGKILL and
    SIGSTOP sent to the stand-in reach the run; a test that stops a task passes fresh=True."""
    if fresh or not script_server.stands_in(command):
        return command
    return script_server.stand_in_command(command, ENV)


def benchmark_env():
    """ENV for a benchmark (`python -m benchmarks.NAME`) whose processes (its roles, its
    launched job's tasks, its evaluations) run served: BENCHMARKS_PYTHON names a stand-in of
    script_server for the Python that starts them."""
    return {**ENV, 'BENCHMARKS_PYTHON': shlex.join(script_server.stand_in_interpreter(ENV))}


def benchmark_command(name, *args):
    """The command of `python -m benchmarks.NAME ARGS`, a stand-in running it served: for the
    benchmarks that import TensorFlow (network, quantization, scaling, throughput; a launcher
    that imports none starts faster fresh), to run with env=benchmark_env()."""
    return [*script_server.stand_in_interpreter(ENV), '-m', f'benchmarks.{name}', *args]


def start_logged(command, log, env=ENV, fresh=False):
    """Starts served(`command`, fresh) in REPO, its stdout and stderr going to the file `log`
    (a path); returns its Popen."""
    with open(log, 'w') as out:
        return subprocess.Popen(served(command, fresh), cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, env=env)


def wait_for(predicate, timeout=120, process=None, log=None):
    """Polls predicate() until it is true. Fails the test after `timeout` seconds, or once
    `process` (a Popen; None: none watched) has ended, showing the end of its `log`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if process is not None:
            assert process.poll() is None, (log.read_text()[-3000:] if log
                                            else f'exit code {process.returncode}')
        assert time.monotonic() < deadline, 'timed out'
        time.sleep(0.05)


@contextlib.contextmanager
def tmpfs(directory, size):
    """Mounts a tmpfs of `size` (as mount takes it: '4m') at `directory` (created) for the
    block, which gets its path; skips the test in one line where mounting is not permitted
    (the tests run as root). Unmounted after, lazily: a file still open there (an event
    file) is freed once closed."""
    os.makedirs(directory, exist_ok=True)
    mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={size}', 'tmpfs',
                              str(directory)], capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f'cannot mount a tmpfs here: {mounted.stderr.strip()}')
    try:
        yield directory
    finally:
        tf.summary.FileWriterCache.clear()  # Closes the event files this process opened.
        subprocess.run(['umount', '--lazy', str(directory)], check=True)


def fill(directory, leave):
    """Fills the file system of `directory` with a file, 'filler', until `leave` bytes (a
    whole number of its blocks) are free."""
    stat = os.statvfs(directory)
    with open(os.path.join(directory, 'filler'), 'ab') as f:
        f.write(b'\0' * (stat.f_bfree * stat.f_frsize - leave))


def tf_config(cluster, task_type, index):
    """The TF_CONFIG of task `task_type`:`index` of `cluster` ({job: [address, ...]})."""
    return json.dumps({'cluster': cluster, 'task': {'type': task_type, 'index': index}})


def error_message(excinfo):
    """The message of the exception in pytest's `excinfo`, asserted to be one line."""
    message = str(excinfo.value)
    assert '\n' not in message
    return message


def checkpoint_step(train_dir):
    """The global step of train_dir's latest checkpoint; None without one."""
    latest = tf.train.latest_checkpoint(str(train_dir))
    return int(latest.rsplit('-', 1)[1]) if latest else None


def evaluations(train_dir):
    """The evaluations an evaluator recorded in train_dir's eval/ history, oldest first:
    [{'global_step': ..., 'checkpoint': ..., 'num_examples': ..., metric: value, ...}]."""
    path = os.path.join(train_dir, 'eval', evaluate.HISTORY_FILENAME)
    with open(path) as history:
        return [json.loads(line) for line in history]


def variable_shapes():
    """{name: shape as a list} of the current graph's global variables."""
    return {v.op.name: v.shape.as_list() for v in tf.global_variables()}


def parameters(variables):
    """How many numbers `variables` (TensorFlow variables) hold."""
    return sum(int(np.prod(v.shape.as_list())) for v in variables)


def build_net(name, num_classes=1001, size=None, weight_decay=0.0, is_training=False,
              **builder_kwargs):
    """Builds `name` through the factory on 2 zero RGB images of side `size` (default: the
    net's) in the current graph; returns (net, end_points). 1001 classes: TF-Slim's
    ImageNet checkpoints (class 0 is background)."""
    network_fn = nets_factory.get_network_fn(name, num_classes, weight_decay, is_training)
    size = size or network_fn.default_image_size
    return network_fn(tf.zeros([2, size, size, 3]), **builder_kwargs)


def trainable_parameters(exclude_scope=None):
    """Trainable parameters in the current graph, less those under scope '*/exclude_scope/'."""
    return parameters(v for v in tf.trainable_variables()
                      if not exclude_scope or f'/{exclude_scope}/' not in v.op.name)


def regularized_variables(name_scope=''):
    """Names of the variables with an L2 penalty, from the names of the penalty ops
    ('<name_scope><layer>/kernel/Regularizer/...')."""
    suffixes = {'kernel': 'weights', 'bias': 'biases'}
    names = set()
    for loss in tf.losses.get_regularization_losses():
        assert loss.op.name.startswith(name_scope)
        path = loss.op.name[len(name_scope):].split('/Regularizer/')[0]
        layer, variable = path.rsplit('/', 1)
        names.add(f'{layer}/{suffixes[variable]}')
    return names


def labelled_images(shape, classes, seed=0, low=0.0):
    """(images float32 of `shape` [..., height, width, channels], uniform in [low, 1), labels
    int64 of shape[:-3], in [0, classes)), drawn with numpy seed `seed`."""
    rng = np.random.RandomState(seed)
    return (rng.uniform(low, 1.0, shape).astype(np.float32),
            rng.randint(classes, size=shape[:-3]).astype(np.int64))


def assert_values_close(actual, expected, rtol, atol):
    """`actual` and `expected` ({name: array}) have the same names and close values."""
    assert sorted(actual) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(actual[name], expected[name], rtol=rtol, atol=atol,
                                   err_msg=name)


def cpu_session(num_cpus=2):
    """A session with devices CPU:0..num_cpus-1, in which an op placed on a device it cannot
    run on fails (no soft placement)."""
    return tf.Session(config=tf.ConfigProto(device_count={'CPU': num_cpus},
                                            allow_soft_placement=False))
