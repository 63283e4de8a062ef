"""TensorBoard reads what a training and its evaluation write: a short real training and
evaluation on the embedded digits, read back through TensorBoard's own data provider (what
`tensorboard --logdir TRAIN_DIR` serves) from the train_dir, the evaluation in TRAIN_DIR/eval."""
import json
import math
import os

import pytest
from tensorboard import context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer

from slim_deploy.image_classifier import config, evaluate, run_record, train


def tensorboard_scalars(logdir):
    """{run: {tag: [(step, value)]}} of every scalar TensorBoard shows for `logdir`; runs are
    named as TensorBoard names them, by their directory relative to logdir ('.' for itself)."""
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
    scalars = provider.read_scalars(context.RequestContext(), experiment_id='',
                                    plugin_name='scalars', downsample=10_000)
    return {run: {tag: [(point.step, point.value) for point in points]
                  for tag, points in tags.items()}
            for run, tags in scalars.items()}


@pytest.fixture(scope='module')
def logdir(digits_dir, tmp_path_factory):
    """A train_dir after 6 steps of lenet (learning rate 0.02) and an evaluation of its last
    checkpoint into train_dir/eval."""
    train_dir = str(tmp_path_factory.mktemp('tensorboard'))
    train.train(config.TrainConfig.from_flags({
        'train_dir': train_dir, 'dataset_dir': digits_dir, 'batch_size': 16,
        'max_number_of_steps': 6, 'learning_rate': 0.02, 'log_every_n_steps': 2,
        'save_summaries_secs': 1}))
    evaluate.evaluate(run_record.eval_config(train_dir, eval_dir=os.path.join(train_dir, 'eval')))
    return train_dir


def test_tensorboard_shows_the_training_loss_and_learning_rate(logdir):
    training = tensorboard_scalars(logdir)['.']
    for tag in ('Losses/total_loss', 'Losses/clone_loss', 'Losses/regularization_loss'):
        assert training[tag], tag
        for step, loss in training[tag]:
            assert 1 <= step <= 6 and math.isfinite(loss) and loss > 0, (tag, step, loss)
    # The exponential schedule decays every 2 epochs: over 6 steps the rate stays the flag's.
    assert [rate for _, rate in training['learning_rate']] == pytest.approx(
        [0.02] * len(training['learning_rate']))
    assert [step for step, _ in training['throughput/examples_per_sec']] == [2, 4, 6]


def test_tensorboard_shows_eval_accuracy_at_the_checkpoints_step(logdir):
    with open(os.path.join(logdir, 'eval', evaluate.METRICS_FILENAME)) as f:
        metrics = json.load(f)
    assert metrics['global_step'] == 6
    evaluation = tensorboard_scalars(logdir)['eval']
    assert evaluation['eval/Accuracy'] == [(6, pytest.approx(metrics['accuracy']))]
    assert evaluation['eval/Recall_5'] == [(6, pytest.approx(metrics['recall_5']))]
