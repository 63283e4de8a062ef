"""--variable_partition_min_mb: the flag and its one-line refusal without ps tasks, and runs of
train() in-process on gRPC servers on loopback (a worker and 4 or 2 ps tasks, reached through
--master) whose checkpoints pass between partitioned and whole variables, ps tasks and one
process, are fine-tuned from, evaluated and exported, survive a truncated newest checkpoint,
and are written on SIGTERM."""
import logging
import os
import signal

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.cluster.launch import LOCALHOST, free_ports
from slim_deploy.common.errors import Interrupted, UsageError
from slim_deploy.deployment import placement
from slim_deploy.image_classifier import builders, evaluate, export, run_record, train
from slim_deploy.image_classifier.config import DevicesConfig, TrainConfig

from helpers import checkpoint_step


def ps_cluster(ps_tasks):
    """The target of a worker of a cluster of `ps_tasks` ps tasks, all in-process servers."""
    addresses = [f'{LOCALHOST}:{port}' for port in free_ports(LOCALHOST, ps_tasks + 1)]
    cluster = tf.train.ClusterSpec({'ps': addresses[:ps_tasks], 'worker': addresses[-1:]})
    servers = [tf.distribute.Server(cluster, 'ps', index, start=True)
               for index in range(ps_tasks)]
    return tf.distribute.Server(cluster, 'worker', 0, start=True).target, servers


def run(train_dir, digits_dir, steps, **flags):
    """train() of lenet on the digits to global step `steps`, by SGD at rate 0 (the variables
    keep the values they were restored with), keeping moving averages; returns what it
    logged."""
    messages = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger('absl')
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        train.train(TrainConfig.from_flags({
            'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'batch_size': 8,
            'num_clones': 1, 'max_number_of_steps': steps, 'optimizer': 'sgd',
            'learning_rate': 0.0, 'moving_average_decay': 0.9, 'log_every_n_steps': 1,
            **flags}))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return '\n'.join(messages)


def values(path):
    """{name: value} of the model variables in the latest checkpoint in directory `path`
    (not the global step, nor the moving averages, which move towards them every step)."""
    reader = tf.train.load_checkpoint(str(path))
    names = reader.get_variable_to_shape_map()
    assert 'LeNet/fc3/weights/ExponentialMovingAverage' in names
    return {name: reader.get_tensor(name) for name in names
            if name != 'global_step' and not name.endswith('/ExponentialMovingAverage')}


def assert_same(actual, expected):
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)


@pytest.mark.parametrize('flags, message', [
    ({'variable_partition_min_mb': 1}, '--variable_partition_min_mb=1 splits the variables '
     'over the ps tasks, and --num_ps_tasks=0 has none: use it with ps tasks'),
    ({'variable_partition_min_mb': 1, 'variable_update': 'replicated', 'num_clones': 2},
     '--variable_partition_min_mb=1 splits the variables over the ps tasks, and '
     '--num_ps_tasks=0 has none (--variable_update=replicated keeps them on the clones): use '
     'it with ps tasks'),
    ({'variable_partition_min_mb': -1},
     '--variable_partition_min_mb must be a number in [0, 3.4e+38], got -1'),
])
def test_the_flag_is_refused_in_one_line_without_ps_tasks(flags, message):
    with pytest.raises(UsageError) as raised:
        TrainConfig.from_flags(flags)
    assert str(raised.value) == message


@pytest.mark.parametrize('min_mb, parts', [(0, None), (1, 4), (5, 3), (20, None)])
def test_the_flag_splits_into_parts_of_about_its_size_one_per_ps_task_at_most(min_mb, parts):
    """LeNet's fc3/weights, 12.8 MB on 4 ps tasks: in 13 parts of 1 MB, at most 4; in
    ceil(12.8 / 5) = 3; whole under 20 MB parts."""
    config = TrainConfig.from_flags({'variable_partition_min_mb': min_mb, 'num_ps_tasks': 4,
                                     'master': 'grpc://h:1'})
    deployment, _ = builders.deployment(DevicesConfig(), config.cluster)
    partitioner = deployment.variable_partitioner
    assert (partitioner is None) == (min_mb == 0)
    got = partitioner and placement.parts(partitioner, [3136, 1024], tf.float32)
    assert (len(got) if got else None) == parts


@pytest.mark.slow
def test_checkpoints_pass_between_parts_whole_variables_ps_tasks_and_one_process(
        digits_dir, tmp_path):
    """Fine-tuned from a run in one process into parts over 4 ps tasks (fc4 excluded), resumed
    whole on 2 ps tasks, then in one process, then past a truncated newest checkpoint in parts
    over 4 again, then in 2 parts over 2: every checkpoint holds the variables the first did
    (the rate is 0) and their moving averages, which evaluation reads; export reads the
    variables."""
    four, _ = ps_cluster(4)
    two, _ = ps_cluster(2)
    source, train_dir = tmp_path / 'source', tmp_path / 'train'
    run(source, digits_dir, 1)
    log = run(train_dir, digits_dir, 1, master=four, num_ps_tasks=4,
              variable_partition_min_mb=1, checkpoint_path=str(source),
              checkpoint_exclude_scopes='LeNet/fc4')
    assert 'partitions  1 variable in 4 parts: LeNet/fc3/weights 12.8 MB in 4' in log
    assert 'Fine-tuning from' in log
    first = values(train_dir)
    assert first['LeNet/fc3/weights'].shape == (3136, 1024)
    tuned = {name: value for name, value in first.items() if not name.startswith('LeNet/fc4')}
    assert_same(tuned, {name: values(source)[name] for name in tuned})
    assert not np.array_equal(first['LeNet/fc4/weights'], values(source)['LeNet/fc4/weights'])
    for steps, flags in ((2, dict(master=two, num_ps_tasks=2)), (3, {})):
        log = run(train_dir, digits_dir, steps, **flags)
        assert f'Resuming from {train_dir}/model.ckpt-{steps - 1}' in log
        assert 'partitions' not in log
        assert_same(values(train_dir), first)
    (data,) = train_dir.glob('model.ckpt-3.data-*')
    data.write_bytes(data.read_bytes()[:-64])
    log = run(train_dir, digits_dir, 4, master=four, num_ps_tasks=4, variable_partition_min_mb=1)
    assert f'Resuming from {train_dir}/model.ckpt-2' in log
    log = run(train_dir, digits_dir, 5, master=two, num_ps_tasks=2, variable_partition_min_mb=1)
    assert 'partitions  1 variable in 2 parts: LeNet/fc3/weights 12.8 MB in 2' in log
    assert_same(values(train_dir), first)
    metrics = evaluate.evaluate(run_record.eval_config(str(train_dir),
                                                       eval_dir=str(tmp_path / 'eval')))
    assert metrics['global_step'] == 5
    written = export.export(run_record.export_config(
        str(train_dir), saved_model_dir=str(tmp_path / 'saved_model')))
    assert os.listdir(written['saved_model_dir'])


@pytest.mark.slow
def test_sigterm_checkpoints_the_step_of_a_partitioned_run(digits_dir, tmp_path):
    """SIGTERM, sent when the first step is logged, ends the run after that step's checkpoint
    of the parts' values, which restores whole."""
    target, _ = ps_cluster(2)

    class SignalOnFirstStep(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith('step ') and not hasattr(self, 'sent'):
                self.sent = True
                os.kill(os.getpid(), signal.SIGTERM)

    handler = SignalOnFirstStep(logging.INFO)
    logger = logging.getLogger('absl')
    logger.addHandler(handler)
    try:
        with pytest.raises(Interrupted) as raised:
            run(tmp_path, digits_dir, 1000, master=target, num_ps_tasks=2,
                variable_partition_min_mb=1)
    finally:
        logger.removeHandler(handler)
    step = checkpoint_step(tmp_path)
    assert str(raised.value) == (f'stopped by SIGTERM at global step {step}; checkpointed in '
                                 f'{tmp_path}: rerun to resume from it')
    assert 0 < step < 1000
    assert values(tmp_path)['LeNet/fc3/weights'].shape == (3136, 1024)
