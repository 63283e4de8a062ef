"""roles.run: a cluster task's role decides what its process does (a trainer trains, the
evaluator evaluates the chief's checkpoints, a ps task serves until a signal and then for the
chief, within the grace period), and train() only trains."""
import os
import signal
import socket
import subprocess
import time

import pytest

from slim_deploy.cluster import watchdog
from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.image_classifier import roles, train
from slim_deploy.image_classifier.config import TrainConfig

from helpers import REPO, TRAIN, evaluations, tf_config, wait_for

# A cluster no test contacts: the evaluator and ps tasks below need no other task.
JOBS = {'worker': ['127.0.0.1:1'], 'ps': ['127.0.0.1:2']}


def config(train_dir, digits_dir, task_type=None, **flags):
    """The TrainConfig of a 2-step lenet run in train_dir, as `task_type` of JOBS (None:
    outside any cluster)."""
    task = task_type and tf_config(JOBS, task_type, 0)
    return TrainConfig.from_flags({
        'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'batch_size': 16,
        'num_clones': 1, 'max_number_of_steps': 2, 'tf_config': task, **flags})


@pytest.mark.parametrize('task_type', ['ps', 'evaluator'])
def test_train_refuses_a_task_that_trains_nothing(digits_dir, tmp_path, task_type):
    with pytest.raises(ValueError) as raised:
        train.train(config(tmp_path / 'train', digits_dir, task_type))
    assert str(raised.value) == (f'train() runs a chief or worker task, not {task_type}:0: '
                                 'roles.run(config) does what each task does')
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_a_trainer_trains_and_the_evaluator_evaluates_its_checkpoints(digits_dir, tmp_path):
    train_dir = tmp_path / 'train'
    assert roles.run(config(train_dir, digits_dir)) == 2
    assert not (train_dir / 'eval').exists()
    # The evaluator returns after the checkpoint of the last step, which is there already.
    assert roles.run(config(train_dir, digits_dir, 'evaluator')) is None
    evaluated = evaluations(train_dir)
    assert [evaluation['global_step'] for evaluation in evaluated] == [2]
    assert evaluated[0]['num_examples'] == 360  # The digits' test split.


@pytest.mark.slow
def test_the_script_as_a_ps_task_serves_until_sigterm_and_its_grace_period(tmp_path):
    """Its chief answers (a listening socket) but never reports its last checkpoint: the ps
    task serves --grace_period_secs after the signal."""
    ps_port, = free_ports(LOCALHOST, 1)
    with socket.socket() as chief:
        chief.bind((LOCALHOST, 0))
        chief.listen()
        process = subprocess.Popen(
            [*TRAIN, f'--train_dir={tmp_path / "train"}', f'--ps_hosts=127.0.0.1:{ps_port}',
             f'--worker_hosts=127.0.0.1:{chief.getsockname()[1]}', '--job_name=ps', '--task=0',
             '--grace_period_secs=1'],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: watchdog.answering({'ps:0': f'{LOCALHOST}:{ps_port}'}, 1),
                     timeout=60, process=process)
            signalled = time.monotonic()
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=60)
            seconds = time.monotonic() - signalled
        finally:
            process.kill()
            process.wait()
    assert process.returncode == 143, err[-3000:]
    assert f'ps:0 serving at 127.0.0.1:{ps_port} until SIGTERM or Ctrl-C' in err
    assert err.rstrip().splitlines()[-1] == (
        'train_image_classifier.py: ps:0 stopped by SIGTERM: the chief did not report its last '
        'checkpoint within 1 s (--grace_period_secs)')
    assert seconds >= 1
    assert os.listdir(tmp_path) == []  # A ps task writes no train_dir.
