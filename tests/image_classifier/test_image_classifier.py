"""train(), evaluate() and export() in-process on the embedded digits: 2 clones on 2 CPU
devices, resuming, fine-tuning, moving averages, a diverging loss, evaluation and export
defaulting to the run, and user mistakes found once a run starts."""
import contextlib
import json
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf2
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.image_classifier import evaluate, export, run_record, train
from slim_deploy.image_classifier.config import EvalConfig, ExportConfig, TrainConfig
from slim_deploy.nets import nets_factory
from slim_deploy.training import checkpoints, loop

from helpers import checkpoint_step


def train_config(train_dir, digits_dir, **flags):
    return TrainConfig.from_flags({
        'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'batch_size': 16, 'num_clones': 2,
        'log_every_n_steps': 2, 'save_summaries_secs': 1, **flags})


@contextlib.contextmanager
def logged():
    """Yields the list of the messages our code logs (through absl) inside the block."""
    messages, logger = [], logging.getLogger('absl')
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def checkpoint_values(path):
    """Variable name -> value in the checkpoint `path` (prefix or directory)."""
    reader = tf.train.load_checkpoint(str(path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def event_tags(directory):
    tags = set()
    for name in os.listdir(directory):
        if name.startswith('events.out.tfevents'):
            for event in tf.train.summary_iterator(os.path.join(directory, name)):
                tags.update(value.tag for value in event.summary.value)
    return tags


def evaluate_run(train_dir, eval_dir, **given):
    """evaluate() as `eval_image_classifier.py --checkpoint_path=train_dir` runs it."""
    return evaluate.evaluate(
        run_record.eval_config(str(train_dir), eval_dir=str(eval_dir), **given))


@pytest.fixture(scope='module')
def trained(digits_dir, tmp_path_factory):
    """A run of 6 steps with 2 clones at image size 32 (not lenet's default 28), resumed to
    step 10, then rerun with nothing left to train: (train_dir, [(final step, log)] of the
    three runs)."""
    train_dir = tmp_path_factory.mktemp('train')
    runs_logged = []
    for steps in (6, 10, 10):
        with logged() as messages:
            final = train.train(train_config(train_dir, digits_dir, max_number_of_steps=steps,
                                             train_image_size=32))
        runs_logged.append((final, '\n'.join(messages)))
    return train_dir, runs_logged


def test_training_logs_the_plan_progress_and_result(trained):
    train_dir, ((final, log), _, _) = trained
    assert final == 6
    assert log.startswith('Placement:\nvariables  /device:CPU:0\n')
    assert 'Global batch 32 examples per step; learning rate 0.01' in log.splitlines()
    assert 'clone 1    /device:CPU:1  (scope clone_1/)' in log
    progress = [line for line in log.splitlines() if 'examples/sec' in line]
    assert [line.split(':')[0] for line in progress] == ['step 2', 'step 4', 'step 6']
    assert 'learning rate = ' in progress[0] and 'sec/step' in progress[0]
    assert log.endswith(f'Finished training at global step 6 after 6 steps here; checkpoints '
                        f'in {train_dir}')


def test_training_writes_summaries_and_the_run_record(trained):
    train_dir, _ = trained
    assert {'Losses/total_loss', 'learning_rate', 'throughput/examples_per_sec',
            'clone_0/Losses/clone_0//clone_loss', 'clone_0/activations/Logits',
            'clone_0/sparsity/Logits', 'variables/LeNet/fc4/weights'} <= event_tags(train_dir)
    record = json.loads((train_dir / run_record.FILENAME).read_text())
    assert record['flags'] == train_config(train_dir, record['flags']['dataset_dir'],
                                           max_number_of_steps=10,
                                           train_image_size=32).as_flags()
    assert (record['examples_per_step'], record['num_classes'], record['image_size'],
            record['num_samples'], record['learning_rate'], record['warmup_steps']) == (
        32, 10, 32, 1437, 0.01, 0)
    assert 'clone 1    /device:CPU:1  (scope clone_1/)' in record['placement']


def test_a_rerun_resumes_and_stops_at_the_last_step(trained):
    train_dir, (_, (resumed, resumed_log), (rerun, rerun_log)) = trained
    assert resumed == 10 and checkpoint_step(train_dir) == 10
    assert f'Resuming from {train_dir}/model.ckpt-6' in resumed_log
    assert 'step 8: loss' in resumed_log and 'step 2: loss' not in resumed_log
    assert rerun is None
    assert 'Nothing to train: the global step has reached 10 already' in rerun_log


def test_evaluation_with_only_the_checkpoint_path_is_the_runs(trained, digits_dir, tmp_path):
    train_dir, _ = trained
    # Only --checkpoint_path (and where to write): image size 32 and the dataset
    # directory come from the run; lenet at its default 28 would not even restore.
    metrics = evaluate_run(train_dir, tmp_path / 'defaults')
    explicit = evaluate.evaluate(EvalConfig.from_flags({
        'checkpoint_path': str(train_dir), 'eval_dir': str(tmp_path / 'explicit'),
        'model_name': 'lenet', 'dataset_name': 'digits', 'dataset_dir': digits_dir,
        'eval_image_size': 32, 'batch_size': 50, 'num_clones': 2}))
    assert metrics == explicit
    assert metrics['num_examples'] == 360 and metrics['global_step'] == 10
    assert 0.0 <= metrics['accuracy'] <= metrics['recall_5'] <= 1.0
    assert json.loads((tmp_path / 'defaults' / 'metrics.json').read_text()) == metrics
    assert {'eval/Accuracy', 'eval/Recall_5'} <= event_tags(tmp_path / 'defaults')


def test_export_defaults_to_the_run_and_serves_the_checkpoints_logits(trained, tmp_path):
    train_dir, _ = trained
    saved_model_dir, graph_file = tmp_path / 'saved_model', tmp_path / 'lenet.pb'
    written = export.export(run_record.export_config(str(train_dir),
                                                     saved_model_dir=str(saved_model_dir),
                                                     output_file=str(graph_file)))
    assert written == {'output_file': str(graph_file), 'saved_model_dir': str(saved_model_dir)}
    images = np.random.RandomState(0).uniform(-1, 1, [3, 32, 32, 1]).astype(np.float32)
    with tf.Graph().as_default():
        logits, _ = nets_factory.get_network_fn('lenet', 10)(tf.constant(images))
        with tf.Session() as sess:
            tf.train.Saver().restore(sess, tf.train.latest_checkpoint(str(train_dir)))
            expected = sess.run(logits)
    serving = tf2.saved_model.load(str(saved_model_dir)).signatures['serving_default']
    outputs = serving(images=tf2.constant(images))
    np.testing.assert_allclose(outputs['logits'].numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs['probabilities'].numpy().sum(axis=1), 1.0, rtol=1e-5)
    graph_def = tf.GraphDef.FromString(graph_file.read_bytes())
    (placeholder,) = [node for node in graph_def.node if node.name == 'input']
    assert [dim.size for dim in placeholder.attr['shape'].shape.dim] == [-1, 32, 32, 1]
    with pytest.raises(UsageError, match='already exists and is not empty'):
        export.export(ExportConfig.from_flags({'checkpoint_path': str(train_dir),
                                               'saved_model_dir': str(saved_model_dir)}))


@pytest.mark.slow
def test_trainable_scopes_and_moving_averages_through_evaluation(digits_dir, tmp_path):
    train_dir = tmp_path / 'train'
    # At the digits' own 8x8 (not padded to 28x28) 4 steps part the averaged and raw models.
    # Seeded: unseeded, their metrics tied, by estimate, about once in 160 runs.
    train.train(train_config(train_dir, digits_dir, max_number_of_steps=4, num_clones=1,
                             train_image_size=8, trainable_scopes='LeNet/fc4',
                             moving_average_decay=0.5, seed=1))
    initial = checkpoint_values(train_dir / 'model.ckpt-0')
    final = checkpoint_values(train_dir / 'model.ckpt-4')
    np.testing.assert_array_equal(final['LeNet/conv1/weights'], initial['LeNet/conv1/weights'])
    assert not np.array_equal(final['LeNet/fc4/weights'], initial['LeNet/fc4/weights'])
    average = final['LeNet/fc4/weights/ExponentialMovingAverage']
    assert not np.array_equal(average, final['LeNet/fc4/weights'])
    # Evaluation with the decay loads the averages into the model's variables.
    with tf.Graph().as_default():
        nets_factory.get_network_fn('lenet', 10)(tf.zeros([1, 8, 8, 1]))
        saver = tf.train.Saver(checkpoints.variables_to_restore(0.5))
        with tf.Session() as sess:
            saver.restore(sess, str(train_dir / 'model.ckpt-4'))
            restored = sess.run(tf.global_variables('LeNet/fc4/weights')[0])
    np.testing.assert_array_equal(restored, average)
    # The run's decay is evaluation's default; 0 evaluates the variables themselves.
    # The whole split: on 100 examples the barely trained models' metrics sometimes tied.
    averaged = evaluate_run(train_dir, tmp_path / 'averages')
    raw = evaluate_run(train_dir, tmp_path / 'raw', moving_average_decay=0)
    assert averaged['num_examples'] == raw['num_examples'] == 360
    assert averaged != raw


@pytest.mark.slow
def test_fine_tuning_only_seeds_an_empty_train_dir(trained, digits_dir, tmp_path):
    source, _ = trained
    flags = dict(checkpoint_path=str(source), checkpoint_exclude_scopes='LeNet/fc4',
                 train_image_size=32, optimizer='sgd', learning_rate=0.0,
                 learning_rate_decay_type='fixed', num_clones=1)
    with logged() as first:
        train.train(train_config(tmp_path, digits_dir, max_number_of_steps=1, **flags))
    assert any(message.startswith('Fine-tuning from') for message in first)
    tuned, original = checkpoint_values(tmp_path), checkpoint_values(source)
    np.testing.assert_array_equal(tuned['LeNet/conv1/weights'], original['LeNet/conv1/weights'])
    assert not np.array_equal(tuned['LeNet/fc4/weights'], original['LeNet/fc4/weights'])
    assert tuned['global_step'] == 1
    with logged() as second:
        train.train(train_config(tmp_path, digits_dir, max_number_of_steps=2, **flags))
    assert f'Resuming from {tmp_path}/model.ckpt-1 (ignoring --checkpoint_path)' in second
    assert not any(message.startswith('Fine-tuning from') for message in second)


def test_a_seeded_run_leaves_op_determinism_off_for_the_graphs_after_it(digits_dir, tmp_path):
    """Seeded, the run turns op determinism on; unseeded random ops of a later graph in the
    process still run (with it on they fail: 'Random ops require a seed')."""
    train.train(train_config(tmp_path, digits_dir, max_number_of_steps=1, num_clones=1, seed=3))
    with tf.Graph().as_default(), tf.Session() as sess:
        assert sess.run(tf.random.uniform([2])).shape == (2,)


@pytest.mark.slow
def test_checkpoints_of_every_mode_resume_fine_tune_and_evaluate_in_the_others(
        trained, digits_dir, tmp_path):
    source, _ = trained
    train_dir = tmp_path / 'train'
    for mode, steps in (('replicated', 4), ('parameter_server', 6), ('replicated', 8)):
        with logged() as messages:
            final = train.train(train_config(train_dir, digits_dir, max_number_of_steps=steps,
                                             train_image_size=32, variable_update=mode))
        assert final == steps
        assert any(message.startswith('Placement:') and f'  {mode}: a copy of' in message
                   for message in messages) == (mode == 'replicated')
        if steps > 4:
            assert f'Resuming from {train_dir}/model.ckpt-{steps - 2}' in messages
    assert checkpoint_values(train_dir).keys() == checkpoint_values(source).keys()
    metrics = evaluate_run(train_dir, tmp_path / 'eval')
    assert metrics['global_step'] == 8
    tuned_dir = tmp_path / 'tuned'
    with logged() as messages:
        train.train(train_config(tuned_dir, digits_dir, max_number_of_steps=1,
                                 checkpoint_path=str(source), train_image_size=32,
                                 checkpoint_exclude_scopes='LeNet/fc4', optimizer='sgd',
                                 learning_rate=0.0, variable_update='replicated'))
    assert any(message.startswith('Fine-tuning from') for message in messages)
    np.testing.assert_array_equal(checkpoint_values(tuned_dir)['LeNet/conv1/weights'],
                                  checkpoint_values(source)['LeNet/conv1/weights'])


@pytest.mark.slow
def test_scaled_and_warmed_up_learning_rate_is_logged_recorded_and_used(digits_dir, tmp_path):
    flags = dict(num_clones=2, batch_size=16, learning_rate=0.1, learning_rate_scaling='linear',
                 base_batch_size=64, warmup_epochs=0.1, warmup_learning_rate=0.01,
                 learning_rate_decay_type='fixed', max_number_of_steps=6)
    with logged() as messages:
        train.train(train_config(tmp_path, digits_dir, **flags))
    # 16 x 2 clones = 32 per step; 0.1 x 32 / 64 = 0.05; 0.1 epoch of 1437 = 5 steps.
    assert ('Global batch 32 examples per step; learning rate 0.05 (0.1 x 32 / 64), reached '
            'after a warmup of 5 steps from 0.01') in messages
    record = json.loads((tmp_path / run_record.FILENAME).read_text())
    assert (record['learning_rate'], record['warmup_steps']) == (0.05, 5)
    logged_rates = [float(m.split('learning rate = ')[1].split(',')[0])
                    for m in messages if 'examples/sec' in m]
    # Logged after steps 2, 4 and 6: the rate of the step that ran, at global step 1, 3, 5.
    np.testing.assert_allclose(logged_rates, [0.01 + 0.04 * 1 / 5, 0.01 + 0.04 * 3 / 5, 0.05],
                               rtol=1e-5)


@pytest.mark.slow
def test_accumulated_micro_batches_count_as_one_step(digits_dir, tmp_path):
    flags = dict(num_clones=2, batch_size=16, gradient_accumulation_steps=3,
                 max_number_of_steps=4, log_every_n_steps=2)
    with logged() as messages:
        final = train.train(train_config(tmp_path, digits_dir, **flags))
    assert final == 4 and checkpoint_step(tmp_path) == 4
    assert ('Global batch 96 examples per step, in 3 micro-batches; learning rate 0.01'
            in messages)
    assert [m.split(':')[0] for m in messages if 'examples/sec' in m] == ['step 2', 'step 4']
    assert messages[-1].startswith('Finished training at global step 4 after 4 steps here')
    assert json.loads((tmp_path / run_record.FILENAME).read_text())['examples_per_step'] == 96


@pytest.mark.slow
def test_synchronized_batch_norm_trains_a_net_with_batch_norm(digits_dir, tmp_path):
    with logged() as messages:
        final = train.train(train_config(tmp_path, digits_dir, model_name='mobilenet_v1',
                                         train_image_size=32, batch_size=4,
                                         max_number_of_steps=2, sync_batch_norm=True,
                                         optimizer='sgd'))  # No slots to build.
    assert final == 2
    assert ('batch norm  synchronized: the moments of the global batch, all-reduced over 2 '
            'members: the clones (27 batch norms)') in messages[0]


@pytest.mark.slow
def test_a_diverging_loss_stops_with_the_last_good_checkpoint(digits_dir, tmp_path):
    flags = dict(batch_size=16, optimizer='sgd', learning_rate_decay_type='fixed',
                 num_clones=1)
    train.train(train_config(tmp_path, digits_dir, max_number_of_steps=2, **flags))
    with pytest.raises(loop.NonFiniteLossError, match=r'^loss is (nan|inf) at global step'):
        train.train(train_config(tmp_path, digits_dir, max_number_of_steps=50,
                                 learning_rate=1e30, save_interval_secs=0, **flags))
    assert checkpoint_step(tmp_path) == 2
    assert all(np.isfinite(value).all() for value in checkpoint_values(tmp_path).values())


@pytest.mark.parametrize('flags, message', [
    ({'dataset_name': 'mnist', 'dataset_dir': '/nonexistent/mnist'},
     "--dataset_dir '/nonexistent/mnist' does not exist"),
    ({'dataset_name': 'mnist', 'dataset_dir': None},
     "--dataset_dir is required for dataset 'mnist'"),
    ({'trainable_scopes': 'LeNet/fc9'}, "--trainable_scopes='LeNet/fc9' matches no trainable "
                                        'variable'),
    ({'checkpoint_path': '/nonexistent/model.ckpt-1'},
     "--checkpoint_path '/nonexistent/model.ckpt-1' is neither a checkpoint nor a directory"),
])
def test_mistakes_found_when_training_starts_touch_nothing(digits_dir, tmp_path, flags, message):
    sentinel = tmp_path / 'keep.txt'
    sentinel.write_text('user data')
    with pytest.raises(UsageError, match='^' + message.replace('(', r'\(')):
        train.train(train_config(tmp_path, digits_dir, max_number_of_steps=1, **flags))
    assert os.listdir(tmp_path) == ['keep.txt']


def test_an_unwritable_train_dir_is_a_usage_error(digits_dir, tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('not a directory')
    with pytest.raises(UsageError, match=f"^--train_dir '{blocker}/sub' is not a writable "
                                         'directory'):
        train.train(train_config(blocker / 'sub', digits_dir))
    assert blocker.read_text() == 'not a directory'


def test_evaluation_of_a_missing_checkpoint_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="^--checkpoint_path '.*' is a directory with no "
                                         'checkpoint'):
        evaluate.evaluate(EvalConfig.from_flags({'checkpoint_path': str(tmp_path),
                                                 'eval_dir': str(tmp_path)}))


def test_the_record_keeps_the_dataset_dir_absolute(digits_dir, tmp_path, monkeypatch):
    data, run = tmp_path / 'data', tmp_path / 'run'
    shutil.copytree(digits_dir, data)
    run.mkdir()
    monkeypatch.chdir(tmp_path)
    run_record.write(train_config(run, 'data'))  # A dataset_dir relative to where it ran.
    assert json.loads((run / run_record.FILENAME).read_text())['flags']['dataset_dir'] == str(
        data)
    monkeypatch.chdir('/')  # Evaluation elsewhere finds it.
    assert run_record.eval_config(str(run)).data.dataset_dir == str(data)
