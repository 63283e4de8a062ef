"""evaluate_continuously (slim's evaluation_loop) on the checkpoints of a real lenet run on the
embedded digits, published one by one into a watched train_dir while the loop runs; the
evaluator task's config; and the settings and entry script of continuous evaluation."""
import contextlib
import json
import logging
import os
import shutil
import threading
import time

import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.image_classifier import evaluate, run_record, train
from slim_deploy.image_classifier.config import EvalConfig, TrainConfig

from helpers import run_script

INTERVAL = 0.1  # Seconds between the loop's looks in these tests.


@pytest.fixture(scope='module')
def run_dir(digits_dir, tmp_path_factory):
    """A real run of lenet whose checkpoints are at global steps 0, 2 and 4, its last step
    (run_config.json records max_number_of_steps=4)."""
    train_dir = tmp_path_factory.mktemp('run')
    for steps in (2, 4):
        train.train(TrainConfig.from_flags({
            'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'batch_size': 16,
            'num_clones': 1, 'max_number_of_steps': steps}))
    return train_dir


def watched(run_dir, train_dir, *steps):
    """Makes train_dir a copy of run_dir's record holding the checkpoints of `steps`."""
    train_dir.mkdir()
    shutil.copy(run_dir / run_record.FILENAME, train_dir)
    for step in steps:
        publish(run_dir, train_dir, step)
    return train_dir


def publish(run_dir, train_dir, step):
    """Puts run_dir's checkpoint of `step` into train_dir as a saver does: data, then index
    (each file appearing whole), then the 'checkpoint' file naming it the latest."""
    for suffix in ('.data-00000-of-00001', '.index'):
        replace_whole(run_dir / f'model.ckpt-{step}{suffix}', train_dir)
    state = tf.train.get_checkpoint_state(str(train_dir))
    listed = list(state.all_model_checkpoint_paths) if state else []
    prefix = str(train_dir / f'model.ckpt-{step}')
    tf.train.update_checkpoint_state(str(train_dir), prefix, listed + [prefix])


def replace_whole(source, directory):
    """Copies file `source` into `directory`, replacing any file of its name at once."""
    temporary = directory.parent / f'{directory.name}.{source.name}.tmp'
    shutil.copy(source, temporary)
    os.replace(temporary, directory / source.name)


def lines(eval_dir):
    path = eval_dir / evaluate.HISTORY_FILENAME
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@contextlib.contextmanager
def in_background(eval_dir, *actions):
    """Runs each of `actions` in a thread, the k-th (counting from 1) once
    eval_dir/metrics.jsonl has k lines and 1 s more has passed (about 10 looks of the
    loop); re-raises the thread's failure when the block ends."""
    failures = []

    def run():
        try:
            for count, action in enumerate(actions, 1):
                deadline = time.monotonic() + 120
                while len(lines(eval_dir)) < count:
                    assert time.monotonic() < deadline, f'no line {count} in 120 s'
                    time.sleep(0.05)
                time.sleep(1)
                action()
        except BaseException as e:  # Reported in the test's thread.
            failures.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    thread.join(timeout=130)
    if failures:
        raise failures[0]


def continuous_config(train_dir, eval_dir, **flags):
    """The EvalConfig of `eval_image_classifier.py --checkpoint_path=train_dir
    --eval_interval_secs=INTERVAL` and `flags`."""
    return run_record.eval_config(str(train_dir), eval_dir=str(eval_dir),
                                  eval_interval_secs=INTERVAL, **flags)


def accuracy_events(eval_dir):
    """[(step, value)] of the eval/Accuracy summaries in eval_dir's event files."""
    found = []
    for name in sorted(os.listdir(eval_dir)):
        if name.startswith('events.out.tfevents'):
            for event in tf.train.summary_iterator(str(eval_dir / name)):
                found += [(event.step, value.simple_value) for value in event.summary.value
                          if value.tag == 'eval/Accuracy']
    return found


@pytest.fixture
def info_log(caplog):
    """The messages our code logs through absl, from INFO up."""
    caplog.set_level(logging.INFO, logger='absl')
    return lambda: [record.getMessage() for record in caplog.records
                    if record.name == 'absl']


@pytest.mark.slow
def test_each_new_checkpoint_is_evaluated_once_until_the_runs_last_step(run_dir, tmp_path,
                                                                        info_log):
    train_dir = watched(run_dir, tmp_path / 'train', 0)
    eval_dir = tmp_path / 'eval'
    reported = []
    with in_background(eval_dir, lambda: publish(run_dir, train_dir, 2),
                       lambda: publish(run_dir, train_dir, 4)):
        # The timeout only guards the test: the checkpoint of step 4 must end the loop.
        evaluated = evaluate.evaluate_continuously(
            continuous_config(train_dir, eval_dir, timeout=100), on_evaluated=reported.append)

    assert [m['global_step'] for m in evaluated] == [0, 2, 4]
    assert [m['checkpoint'] for m in evaluated] == [
        str(train_dir / f'model.ckpt-{step}') for step in (0, 2, 4)]
    assert lines(eval_dir) == evaluated == reported
    assert all(m['num_examples'] == 360 and 0 <= m['recall_5'] <= 1 for m in evaluated)
    assert [m['wall_time'] for m in evaluated] == sorted(m['wall_time'] for m in evaluated)
    assert accuracy_events(eval_dir) == [
        (m['global_step'], pytest.approx(m['accuracy'])) for m in evaluated]
    latest = json.loads((eval_dir / evaluate.METRICS_FILENAME).read_text())
    assert latest == {key: evaluated[-1][key]
                      for key in ('accuracy', 'recall_5', 'num_examples', 'global_step')}
    log = info_log()
    assert log[0] == (f'Evaluating each new checkpoint in {train_dir} until the checkpoint '
                      'of global step 4 or 100 s pass without a new one')
    assert [message.split(':')[0] for message in log[1:]] == [
        f'Global step {step} ({train_dir}/model.ckpt-{step})' for step in (0, 2, 4)]


@pytest.mark.slow
def test_the_timeout_ends_the_loop_without_a_new_checkpoint(run_dir, tmp_path, info_log):
    train_dir = watched(run_dir, tmp_path / 'train', 0)
    evaluated = evaluate.evaluate_continuously(
        continuous_config(train_dir, tmp_path / 'eval', timeout=1.5))
    ended = time.time()
    assert [m['global_step'] for m in evaluated] == [0]
    assert 1.5 <= ended - evaluated[0]['wall_time'] < 10
    assert info_log()[-1] == (f'No new checkpoint in {train_dir} for 1.5 s; stopping after '
                              'global step 0')

    empty = tmp_path / 'not_yet_created'
    started = time.monotonic()
    assert evaluate.evaluate_continuously(
        continuous_config(empty, tmp_path / 'eval_empty', timeout=0.5), last_step=4) == []
    assert 0.5 <= time.monotonic() - started < 10
    assert info_log()[-1] == (f'No new checkpoint in {empty} for 0.5 s; stopping with none '
                              'evaluated')


@pytest.mark.slow
def test_a_corrupt_newest_checkpoint_is_skipped_with_one_warning(run_dir, tmp_path, info_log):
    train_dir = watched(run_dir, tmp_path / 'train', 0, 2, 4)
    data = train_dir / 'model.ckpt-4.data-00000-of-00001'
    data.write_bytes(data.read_bytes()[:-100])  # Truncated, as by a full disk.
    eval_dir = tmp_path / 'eval'
    # After ~10 looks at the same files, step 4's data is written again, whole.
    with in_background(eval_dir, lambda: replace_whole(
            run_dir / 'model.ckpt-4.data-00000-of-00001', train_dir)):
        evaluated = evaluate.evaluate_continuously(
            continuous_config(train_dir, eval_dir, timeout=100))

    # Step 2's, the newest intact one, first; step 0's is older and never evaluated.
    assert [m['global_step'] for m in evaluated] == [2, 4]
    warnings = [message for message in info_log() if 'unreadable' in message]
    assert len(warnings) == 1
    assert warnings[0].startswith(f'Checkpoint {train_dir}/model.ckpt-4 is unreadable (')


@pytest.mark.parametrize('flags, message', [
    ({'eval_interval_secs': 0}, '--eval_interval_secs must be a number in (0, 2147483647], '
                                'got 0'),
    ({'eval_interval_secs': float('inf')}, '--eval_interval_secs must be a number in (0, '
                                           '2147483647], got inf'),
    ({'eval_interval_secs': 5, 'timeout': -1.0}, '--timeout must be a number in (0, 2147483647], '
                                                 'got -1.0'),
    ({'timeout': 60}, '--timeout needs --eval_interval_secs (it ends continuous evaluation)'),
])
def test_bad_continuous_settings_are_one_line_errors(flags, message):
    with pytest.raises(UsageError) as raised:
        EvalConfig.from_flags(flags)
    assert str(raised.value) == message


def test_continuous_evaluation_of_a_checkpoint_prefix_is_an_error(tmp_path):
    with tf.Graph().as_default():  # A real checkpoint: a run's would do no more here.
        tf.train.get_or_create_global_step()
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            prefix = tf.train.Saver().save(session, str(tmp_path / 'model.ckpt'), 2)
    eval_dir = tmp_path / 'eval'
    with pytest.raises(UsageError, match=f"^--eval_interval_secs watches a directory, but "
                                         f"--checkpoint_path '{prefix}' is a checkpoint: pass "
                                         'its directory$'):
        evaluate.evaluate_continuously(continuous_config(prefix, eval_dir))
    assert not eval_dir.exists()


@pytest.mark.slow
def test_the_script_prints_a_line_per_checkpoint_and_ends_at_the_last_step(run_dir, tmp_path):
    result = run_script('eval_image_classifier.py', f'--checkpoint_path={run_dir}',
                        f'--eval_dir={tmp_path}', '--eval_interval_secs=0.1')
    assert result.returncode == 0, result.stderr[-3000:]
    # The run is over: its last checkpoint is the newest, evaluated once.
    assert result.stdout.startswith('accuracy ')
    assert result.stdout.endswith('  examples 360  global step 4\n')
    assert result.stdout.count('\n') == 1
    assert [line['global_step'] for line in lines(tmp_path)] == [4]


@pytest.mark.slow
def test_the_script_rejects_a_bad_interval_in_one_line(tmp_path):
    result = run_script('eval_image_classifier.py', f'--checkpoint_path={tmp_path}',
                        f'--eval_dir={tmp_path}', '--eval_interval_secs=-5')
    assert result.returncode == 2
    assert result.stderr == ('eval_image_classifier.py: error: --eval_interval_secs must be a '
                             'number in (0, 2147483647], got -5.0\n')
    assert result.stdout == '' and os.listdir(tmp_path) == []


@pytest.mark.parametrize('dataset_name, split', [
    ('digits', 'test'), ('flowers', 'validation'), ('visualwakewords', 'val')])
def test_the_evaluator_of_a_training_run_watches_its_train_dir(dataset_name, split):
    training = TrainConfig.from_flags({
        'train_dir': '/runs/a', 'dataset_name': dataset_name, 'dataset_dir': '/data',
        'labels_offset': 1, 'model_name': 'cifarnet', 'preprocessing_name': 'lenet',
        'train_image_size': 40, 'use_grayscale': True, 'moving_average_decay': 0.99,
        'batch_size': 8, 'num_clones': 2, 'max_number_of_steps': 50})
    evaluator = evaluate.evaluator_config(training)
    assert (evaluator.checkpoint_path, evaluator.eval_dir) == ('/runs/a', '/runs/a/eval')
    assert evaluator.data.dataset_split_name == split
    assert (evaluator.data.dataset_name, evaluator.data.dataset_dir,
            evaluator.data.labels_offset) == (dataset_name, '/data', 1)
    assert evaluator.model == training.model
    assert evaluator.moving_average_decay == 0.99
    assert (evaluator.eval_interval_secs, evaluator.timeout) == (
        evaluate.EVALUATOR_INTERVAL_SECS, None)
    assert (evaluator.devices.num_clones, evaluator.data.batch_size) == (1, 100)
