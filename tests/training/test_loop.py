"""The training loop: a non-finite loss is never checkpointed; logging and resuming."""
import threading
import time

import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment import model_deploy
from slim_deploy.training import loop


def build_counter_loss(nan_after):
    """A train tensor that adds 1 to x and to the global step, and returns the loss
    log(nan_after + 0.5 - x): finite for the first `nan_after` steps, NaN after."""
    global_step = tf.train.get_or_create_global_step()
    x = tf.Variable(0.0, name='x')
    with tf.control_dependencies([x.assign_add(1.0), global_step.assign_add(1)]):
        return tf.math.log(nan_after + 0.5 - x.read_value())


def test_non_finite_loss_stops_before_it_is_checkpointed(tmp_path):
    with tf.Graph().as_default():
        train_tensor = build_counter_loss(nan_after=3)
        monitor = loop.MonitorHook(train_tensor, tf.constant(0.1), 8, every_n_steps=1,
                                   summary_dir=str(tmp_path), last_step=10)
        with pytest.raises(loop.NonFiniteLossError, match='loss is nan at global step 4'):
            # A checkpoint after every step: the step that went NaN must not be one.
            loop.train(train_tensor, str(tmp_path), monitor, save_interval_secs=1e-9,
                       save_summaries_secs=1e-9)
    latest = tf.train.latest_checkpoint(str(tmp_path))
    assert latest.endswith('model.ckpt-3')
    assert tf.train.load_checkpoint(latest).get_tensor('x') == 3.0


def test_monitor_logs_and_training_resumes(tmp_path, caplog):
    caplog.set_level('INFO')
    for last_step, steps_run in ((4, 4), (6, 6), (6, None)):
        with tf.Graph().as_default():
            train_tensor = build_counter_loss(nan_after=100)
            monitor = loop.MonitorHook(train_tensor, tf.constant(0.25), 64, every_n_steps=2,
                                       last_step=last_step)
            # The third run restores step 6 and runs no step at all.
            assert loop.train(train_tensor, str(tmp_path), monitor) == steps_run
    messages = [r.getMessage() for r in caplog.records if 'examples/sec' in r.getMessage()]
    # Every 2nd local step (the first one starts the clock); the rerun resumes at step 4.
    assert [m.split(':')[0] for m in messages] == ['step 2', 'step 4', 'step 6']
    assert 'learning rate = 0.25' in messages[0] and 'sec/step' in messages[0]
    assert tf.train.load_checkpoint(str(tmp_path)).get_tensor('x') == 6.0


def test_session_config_and_clone_devices():
    config = loop.session_config(num_cpu_devices=3, log_device_placement=True)
    assert config.allow_soft_placement and config.log_device_placement
    assert config.device_count['CPU'] == 3
    assert model_deploy.local_clone_devices(2, clone_on_cpu=True) == (None, None)
    assert model_deploy.local_clone_devices(3, clone_on_cpu=False) == (
        ['/device:CPU:0', '/device:CPU:1', '/device:CPU:2'], 3)  # No GPU on this machine.


def test_chief_waits_for_the_other_workers_before_running_the_last_steps_alone(tmp_path,
                                                                              monkeypatch):
    # An in-process gRPC server: the chief and a thread standing for another worker share
    # its variables. Once the global step reaches 8, the other worker's last two updates
    # land 0.3 s apart; the chief, told that the others stop at 8, must wait for them
    # (taking the run to 10, the last step) instead of running steps 9 and 10 itself, the
    # global step still for 1.5 s (3 s, QUIET_MIN_SECS, in a real run).
    monkeypatch.setattr(loop, 'QUIET_MIN_SECS', 1.5)
    server = tf.distribute.Server.create_local_server()
    with tf.Graph().as_default() as graph:
        train_tensor = build_counter_loss(nan_after=100)
        global_step = tf.train.get_global_step()
        other_update = global_step.assign_add(1)
        monitor = loop.MonitorHook(train_tensor, tf.constant(0.1), 1, every_n_steps=100,
                                   last_step=10, alone_from=8)

        def global_step_value(sess):
            try:
                return sess.run(global_step)
            except tf.errors.FailedPreconditionError:  # The chief has not initialized it yet.
                return 0

        def other_worker():
            with tf.Session(server.target, graph=graph) as sess:
                while global_step_value(sess) < 8:
                    time.sleep(0.01)
                for _ in range(2):
                    time.sleep(0.3)
                    updates.append(sess.run(other_update))

        updates = []
        thread = threading.Thread(target=other_worker)
        thread.start()
        try:
            loop.train(train_tensor, str(tmp_path), monitor, master=server.target)
        finally:
            thread.join()
    assert updates == [9, 10]
    assert monitor.local_steps == 8 and monitor.global_step == 10
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith('model.ckpt-10')
