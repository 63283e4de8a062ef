"""Run configs: validation naming the flag, the cluster resolved from TF_CONFIG or flags,
flags defined from the configs, and evaluation/export defaults from a run's record."""
import re

from absl import flags
import pytest

from slim_deploy.common.errors import UsageError
from slim_deploy.image_classifier import config, run_record, slim_flags
from slim_deploy.image_classifier.config import EvalConfig, ExportConfig, TrainConfig

from helpers import tf_config

TWO_WORKERS = {'worker': ['127.0.0.1:2222', '127.0.0.1:2223'], 'ps': ['127.0.0.1:2224']}


@pytest.mark.parametrize('values, message', [
    ({'model_name': 'lenet5'}, "unknown --model_name 'lenet5'; valid: alexnet_v2, cifarnet, "),
    ({'dataset_name': 'svhn'},
     "unknown --dataset_name 'svhn'; valid: cifar10, digits, flowers, imagenet, mnist, "
     'visualwakewords'),
    ({'dataset_split_name': 'validation'},
     "unknown --dataset_split_name 'validation'; valid: train, test"),
    ({'preprocessing_name': 'fancy'}, "unknown --preprocessing_name 'fancy'; valid: "),
    ({'optimizer': 'lamb'}, "unknown --optimizer 'lamb'; valid: adadelta, adagrad, adam, "),
    ({'learning_rate_decay_type': 'cosine'},
     "unknown --learning_rate_decay_type 'cosine'; valid: exponential, fixed, polynomial"),
    ({'ps_strategy': 'random'}, "unknown --ps_strategy 'random'; valid: bytes, round_robin"),
    ({'num_clones': 0}, '--num_clones must be an integer in [1, 64], got 0'),
    ({'batch_size': -1}, '--batch_size must be an integer in [1, 2147483647], got -1'),
    ({'num_readers': 0}, '--num_readers must be an integer in [1, 1024], got 0'),
    ({'num_preprocessing_threads': 0}, '--num_preprocessing_threads must be an integer'
     ' in [1, 1024]'),
    ({'log_every_n_steps': 0}, '--log_every_n_steps must be an integer'
     ' in [1, 9223372036854775807], got 0'),
    ({'max_number_of_steps': -5}, '--max_number_of_steps must be an integer'
     ' in [0, 9223372036854775807], got -5'),
    ({'train_image_size': 0}, '--train_image_size must be an integer in [1, 8192], got 0'),
    ({'labels_offset': 10}, "--labels_offset=10 leaves no class of dataset 'digits', which "
                            'has 10'),
    ({'learning_rate': -0.1}, '--learning_rate must be a number in [0, 3.4e+38], got -0.1'),
    ({'learning_rate': float('nan')}, '--learning_rate must be a number in [0, 3.4e+38], got nan'),
    ({'num_epochs_per_decay': 0.0}, '--num_epochs_per_decay must be a number'
     ' in (0, 3.4e+38], got 0.0'),
    ({'label_smoothing': 1.0}, '--label_smoothing must be a number in [0, 1), got 1.0'),
    ({'moving_average_decay': 1.5},
     '--moving_average_decay must be a number in [0, 1), got 1.5'),
    ({'save_interval_secs': -1}, '--save_interval_secs must be an integer'
     ' in [0, 2147483647], got -1'),
    ({'replicas_to_aggregate': 0}, '--replicas_to_aggregate must be an integer'
     ' in [1, 2147483647], got 0'),
    ({'sync_replicas': True}, '--sync_replicas needs --worker_replicas > 1, got 1'),
    ({'worker_replicas': 2}, '--worker_replicas=2 needs ps tasks to hold the shared variables '
                             '(--num_ps_tasks=0)'),
    ({'worker_replicas': 2, 'num_ps_tasks': 1, 'master': 'grpc://h:1', 'task': 2},
     '--task must be in [0, --worker_replicas=2), got 2'),
    ({'worker_replicas': 2, 'num_ps_tasks': 1, 'master': 'grpc://h:1', 'sync_replicas': True,
      'replicas_to_aggregate': 3}, '--replicas_to_aggregate=3 exceeds --worker_replicas=2'),
    ({'num_ps_tasks': 1}, '--num_ps_tasks=1 needs a cluster of ps tasks: set TF_CONFIG'),
    ({'tf_config': tf_config(TWO_WORKERS, 'worker', 1), 'num_ps_tasks': 2},
     '--num_ps_tasks=2 disagrees with the cluster, where it is 1 (worker:1)'),
    ({'tf_config': tf_config(TWO_WORKERS, 'worker', 1), 'task': 0},
     '--task=0 disagrees with the cluster, where it is 1 (worker:1)'),
    ({'tf_config': tf_config(TWO_WORKERS, 'worker', 0), 'master': 'grpc://h:1'},
     "--master='grpc://h:1' and a cluster (TF_CONFIG or --worker_hosts) are exclusive"),
    ({'tf_config': tf_config(TWO_WORKERS, 'worker', 0), 'worker_hosts': '127.0.0.1:2222',
      'job_name': 'worker'},
     'both TF_CONFIG and --ps_hosts/--worker_hosts/--job_name name a cluster: unset one'),
    ({'tf_config': tf_config({'worker': TWO_WORKERS['worker']}, 'worker', 0)},
     '--worker_replicas=2 needs ps tasks to hold the shared variables (--num_ps_tasks=0), or '
     '--variable_update=collective'),
    ({'variable_update': 'mirrored'},
     "unknown --variable_update 'mirrored'; valid: collective, parameter_server, replicated"),
    ({'variable_update': 'replicated', 'tf_config': tf_config(TWO_WORKERS, 'worker', 0)},
     '--variable_update=replicated keeps the variables on the clones: it takes no ps tasks, '
     'got --num_ps_tasks=1'),
    ({'variable_update': 'collective', 'tf_config': tf_config(TWO_WORKERS, 'worker', 0)},
     '--variable_update=collective keeps the variables on the clones: it takes no ps tasks'),
    ({'variable_update': 'replicated',
      'tf_config': tf_config({'worker': TWO_WORKERS['worker']}, 'worker', 0)},
     '--variable_update=replicated runs on one worker, got --worker_replicas=2: use '
     '--variable_update=collective for several'),
    ({'variable_update': 'collective'},
     '--variable_update=collective needs several workers, got --worker_replicas=1: use '
     '--variable_update=replicated for one'),
    ({'variable_update': 'collective', 'worker_hosts': '127.0.0.1:2222', 'job_name': 'worker'},
     '--variable_update=collective needs several workers'),
    ({'variable_update': 'collective', 'worker_replicas': 2, 'master': 'grpc://h:1'},
     '--variable_update=collective needs the cluster named by TF_CONFIG or --worker_hosts'),
    ({'variable_update': 'collective', 'sync_replicas': True,
      'tf_config': tf_config({'worker': TWO_WORKERS['worker']}, 'worker', 0)},
     '--sync_replicas aggregates gradients on ps tasks; --variable_update=collective is '
     'synchronous already'),
    ({'variable_update': 'replicated', 'clone_on_cpu': True, 'num_clones': 2},
     '--variable_update=replicated all-reduces between the clones, which must sit on distinct '
     'devices, but --clone_on_cpu puts all 2 on CPU:0'),
    ({'sync_batch_norm': True, 'clone_on_cpu': True, 'num_clones': 2},
     '--sync_batch_norm all-reduces between the clones, which must sit on distinct devices, '
     'but --clone_on_cpu puts all 2 on CPU:0'),
    ({'gradient_accumulation_steps': 0},
     '--gradient_accumulation_steps must be an integer in [1, 2147483647], got 0'),
    ({'all_reduce_pack_bytes': -1}, '--all_reduce_pack_bytes must be an integer'
     ' in [0, 9223372036854775807], got -1'),
    ({'learning_rate_scaling': 'sqrt'},
     "unknown --learning_rate_scaling 'sqrt'; valid: linear, none"),
    ({'base_batch_size': 0}, '--base_batch_size must be an integer in [1, 2147483647], got 0'),
    ({'warmup_epochs': -1.0}, '--warmup_epochs must be a number in [0, 3.4e+38], got -1.0'),
    ({'warmup_learning_rate': -0.5}, '--warmup_learning_rate must be a number in [0, 3.4e+38]'),
    ({'task_timeout_secs': -1.0}, '--task_timeout_secs must be a number in [0, 2147483647]'),
    ({'worker_hosts': '127.0.0.1:2222', 'job_name': 'worker', 'task': 1},
     '--task 1 is out of range: the cluster has 1 worker task(s), indices 0 to 0'),
    ({'tf_config': '{"cluster": {"worker": ["127.0.0.1:2222"]'}, 'TF_CONFIG is not valid JSON'),
])
def test_bad_training_settings_name_their_flag(values, message):
    with pytest.raises(UsageError) as raised:
        TrainConfig.from_flags(values)
    assert str(raised.value).startswith(message)
    assert '\n' not in str(raised.value)


@pytest.mark.parametrize('config_class, values, message', [
    (EvalConfig, {'eval_image_size': 0}, '--eval_image_size must be an integer'
     ' in [1, 8192], got 0'),
    (EvalConfig, {'max_num_batches': 0}, '--max_num_batches must be an integer'
     ' in [1, 9223372036854775807], got 0'),
    (EvalConfig, {'model_name': 'x'}, "unknown --model_name 'x'; valid: "),
    (ExportConfig, {}, 'nothing to export: pass --output_file, --saved_model_dir and/or '
                       '--tflite_file'),
    (ExportConfig, {'saved_model_dir': '/tmp/m'},
     '--saved_model_dir needs --checkpoint_path (the values to export)'),
    (ExportConfig, {'output_file': 'g.pb', 'image_size': -3},
     '--image_size must be an integer in [1, 8192], got -3'),
    (ExportConfig, {'output_file': 'g.pb', 'dataset_name': 'flowers', 'labels_offset': 5},
     "--labels_offset=5 leaves no class of dataset 'flowers', which has 5"),
])
def test_bad_eval_and_export_settings_name_their_flag(config_class, values, message):
    with pytest.raises(UsageError, match='^' + message.replace('(', r'\(').replace(')', r'\)')
                       .replace('[', r'\[').replace('.', r'\.')):
        config_class.from_flags(values)


# Every numeric flag at the edges of its type and of its bounds, as a user types it.
INT64 = 2**63
EDGES = {int: [str(INT64), str(-INT64 - 1), '99999999999999999999'],
         float: ['inf', '-inf', 'nan', '1e400', '3.5e38', '-3.5e38']}
RUN_CONFIGS = (TrainConfig, EvalConfig, ExportConfig)


def numeric_flags():
    """(run config, flag, type, bounds) of every int and float flag of the entry scripts."""
    for config_class in RUN_CONFIGS:
        for name, _, kind, help_text in config.flag_settings(config_class, config_class.RENAMED):
            if kind in (int, float):
                yield config_class, name, kind, help_text


def parsed(config_class, argument):
    """config_class's run config of one command-line argument, through absl's parsing."""
    flag_values = flags.FlagValues()
    slim_flags.define(config_class, 'test', flag_values)
    flag_values(['prog', argument])
    return config_class.from_flags(slim_flags.given(config_class, flag_values))


@pytest.mark.parametrize('config_class, name, kind, help_text', list(numeric_flags()),
                         ids=lambda value: getattr(value, '__name__', str(value)))
def test_every_numeric_flag_refuses_values_past_its_types_limits_and_its_bounds(
        config_class, name, kind, help_text):
    bounds = re.search(r'Takes (an integer|a number) in ([\[(])(\S+), (\S+)([\])])\.$',
                       help_text)
    assert bounds, f'--{name} states no bounds in its help: {help_text!r}'
    low, high = (kind(float(value)) for value in bounds.group(3, 4))
    outside = [*EDGES[kind], str(low - (1 if kind is int else max(1.0, abs(low)))),
               str(high + (1 if kind is int else max(1.0, abs(high))))]
    outside += [str(low)] * (bounds.group(2) == '(') + [str(high)] * (bounds.group(5) == ')')
    for value in outside:
        with pytest.raises(UsageError) as raised:
            parsed(config_class, f'--{name}={value}')
        assert str(raised.value).startswith(f'--{name} must be {bounds.group(1)} in ')
        assert '\n' not in str(raised.value)


def test_unknown_setting_names_are_a_value_error():
    with pytest.raises(ValueError, match=r"TrainConfig has no settings \['batchsize'\]"):
        TrainConfig.from_flags({'batchsize': 8})


# Every flag of slim's train_image_classifier.py with slim's default (its flags file, facts).
SLIM_TRAIN_DEFAULTS = dict(
    master='', train_dir='/tmp/tfmodel/', num_clones=1, clone_on_cpu=False, worker_replicas=1,
    num_ps_tasks=0, num_readers=4, num_preprocessing_threads=4, log_every_n_steps=10,
    save_summaries_secs=600, save_interval_secs=600, task=0, weight_decay=0.00004,
    optimizer='rmsprop', adadelta_rho=0.95, adagrad_initial_accumulator_value=0.1,
    adam_beta1=0.9, adam_beta2=0.999, opt_epsilon=1.0, ftrl_learning_rate_power=-0.5,
    ftrl_initial_accumulator_value=0.1, ftrl_l1=0.0, ftrl_l2=0.0, momentum=0.9,
    rmsprop_momentum=0.9, rmsprop_decay=0.9, quantize_delay=-1,
    learning_rate_decay_type='exponential', learning_rate=0.01, end_learning_rate=0.0001,
    label_smoothing=0.0, learning_rate_decay_factor=0.94, num_epochs_per_decay=2.0,
    sync_replicas=False, replicas_to_aggregate=1, moving_average_decay=None,
    dataset_name='imagenet', dataset_split_name='train', dataset_dir=None, labels_offset=0,
    model_name='inception_v3', preprocessing_name=None, batch_size=32, train_image_size=None,
    max_number_of_steps=None, use_grayscale=False, checkpoint_path=None,
    checkpoint_exclude_scopes=None, trainable_scopes=None, ignore_missing_vars=False)
# Ours where they differ, as the README lists: the embedded data and its net, a run that
# ends, no scope given as the empty list.
OUR_EXCEPTIONS = dict(dataset_name='digits', model_name='lenet', max_number_of_steps=1000,
                      checkpoint_exclude_scopes='', trainable_scopes='')


def test_every_slim_train_flag_keeps_slims_default_but_the_listed_exceptions():
    ours = TrainConfig().as_flags()
    expected = {**SLIM_TRAIN_DEFAULTS, **OUR_EXCEPTIONS}
    assert {name: ours.get(name, 'missing') for name in expected} == expected


def test_evaluation_defaults():
    evaluation = EvalConfig()
    assert (evaluation.data.batch_size, evaluation.data.dataset_split_name,
            evaluation.devices.num_clones) == (100, 'test', 1)
    assert EvalConfig.from_flags({'batch_size': 7}).data == config.DataConfig(
        dataset_split_name='test', batch_size=7)


def test_flags_round_trip_and_scopes_are_tuples():
    train = TrainConfig.from_flags({
        'batch_size': 16, 'train_image_size': 32, 'optimizer': 'adam', 'adam_beta1': 0.8,
        'checkpoint_exclude_scopes': 'LeNet/fc4, LeNet/fc3/', 'sync_replicas': False})
    assert train.fine_tuning.checkpoint_exclude_scopes == ('LeNet/fc4', 'LeNet/fc3')
    assert train.model.image_size == 32 and train.optimization.params.adam_beta1 == 0.8
    flat = train.as_flags()
    assert flat['checkpoint_exclude_scopes'] == 'LeNet/fc4,LeNet/fc3'
    assert flat['train_image_size'] == 32 and 'image_size' not in flat
    assert TrainConfig.from_flags(flat) == train
    assert train.examples_per_step == 16


def test_cluster_settings_come_from_tf_config():
    chief_job = {'chief': ['c:1'], 'worker': ['w:1', 'w:2'], 'ps': ['p:1']}
    second_worker = TrainConfig.from_flags({'tf_config': tf_config(chief_job, 'worker', 1),
                                            'worker_replicas': 3}).cluster
    assert (second_worker.worker_replicas, second_worker.num_ps_tasks, second_worker.task) == (
        3, 1, 2)
    assert not second_worker.is_chief and not second_worker.is_ps
    assert second_worker.cluster_task.task_type == 'worker'
    ps = TrainConfig.from_flags({'tf_config': tf_config(chief_job, 'ps', 0)}).cluster
    assert ps.is_ps and ps.task is None and not ps.is_chief
    ps_by_flags = TrainConfig.from_flags({'ps_hosts': 'p:1', 'worker_hosts': 'w:1',
                                          'job_name': 'ps', 'task': 0}).cluster
    assert ps_by_flags.is_ps and not ps_by_flags.is_chief
    by_flags = TrainConfig.from_flags({'ps_hosts': 'p:1', 'worker_hosts': 'w:1,w:2',
                                       'job_name': 'worker', 'task': 1}).cluster
    assert (by_flags.worker_replicas, by_flags.num_ps_tasks, by_flags.task) == (2, 1, 1)
    sync = TrainConfig.from_flags({'tf_config': tf_config(TWO_WORKERS, 'worker', 0),
                                   'sync_replicas': True, 'replicas_to_aggregate': 2,
                                   'num_clones': 3, 'batch_size': 4})
    assert sync.cluster.is_chief and sync.examples_per_step == 4 * 3 * 2
    accumulated = TrainConfig.from_flags({'tf_config': tf_config(TWO_WORKERS, 'worker', 0),
                                          'sync_replicas': True, 'replicas_to_aggregate': 2,
                                          'num_clones': 3, 'batch_size': 4,
                                          'gradient_accumulation_steps': 5})
    assert accumulated.examples_per_step == 4 * 3 * 5 * 2
    collective = TrainConfig.from_flags({
        'tf_config': tf_config({'worker': TWO_WORKERS['worker']}, 'worker', 1),
        'variable_update': 'collective', 'num_clones': 3, 'batch_size': 4,
        'learning_rate': 0.1, 'learning_rate_scaling': 'linear', 'base_batch_size': 12})
    assert not collective.cluster.is_chief and collective.examples_per_step == 4 * 3 * 2
    assert collective.scaled_learning_rate == pytest.approx(0.1 * 24 / 12)


def test_flags_are_defined_from_the_configs_once():
    flag_values = flags.FlagValues()
    slim_flags.define(TrainConfig, 'train_module', flag_values)
    flag_values(['train', '--batch_size=8', '--checkpoint_exclude_scopes=a,b',
                 '--moving_average_decay=0.9', '--collective_timeout_secs=30'])
    assert flag_values['batch_size'].default == 32
    assert flag_values['batch_size'].help == ('Examples per clone per step. Takes an integer '
                                              'in [1, 2147483647].')
    assert slim_flags.given(TrainConfig, flag_values) == {
        'batch_size': 8, 'checkpoint_exclude_scopes': 'a,b', 'moving_average_decay': 0.9,
        'task_timeout_secs': 30.0}  # --collective_timeout_secs: its former name.
    assert {flag.name for flag in flag_values.get_key_flags_for_module('train_module')} >= {
        'batch_size', 'model_name', 'rmsprop_decay', 'ps_hosts', 'train_image_size'}
    evaluation = flags.FlagValues()
    slim_flags.define(EvalConfig, 'eval_module', evaluation)
    # Shared flags: one help text, each script's own default.
    assert evaluation['batch_size'].help == flag_values['batch_size'].help
    assert evaluation['batch_size'].default == 100
    assert evaluation['dataset_split_name'].default == 'test'
    assert 'eval_image_size' in evaluation and 'train_image_size' not in evaluation


def write_run(train_dir, **flag_values):
    """A run_config.json as train() writes it, for TrainConfig.from_flags(flag_values)."""
    train_dir.mkdir(exist_ok=True)
    run_record.write(TrainConfig.from_flags({'train_dir': str(train_dir), **flag_values}),
                     placement=[])
    return train_dir


def test_evaluation_and_export_default_to_the_run(tmp_path):
    train_dir = write_run(tmp_path / 'run', model_name='cifarnet', dataset_name='cifar10',
                          dataset_dir='/data/cifar', train_image_size=40,
                          moving_average_decay=0.99, use_grayscale=True,
                          preprocessing_name='inception')
    evaluation = EvalConfig.from_flags(run_record.with_run_defaults(
        str(train_dir), {'checkpoint_path': str(train_dir), 'batch_size': 10},
        run_record.EVAL_DEFAULTS))
    assert evaluation.model == config.ModelConfig(
        model_name='cifarnet', preprocessing_name='inception', image_size=40,
        use_grayscale=True)
    assert (evaluation.data.dataset_name, evaluation.data.dataset_dir,
            evaluation.data.dataset_split_name, evaluation.data.batch_size) == (
        'cifar10', '/data/cifar', 'test', 10)
    assert evaluation.moving_average_decay == 0.99
    # A checkpoint prefix in the run's directory finds the run too; given flags win.
    export = ExportConfig.from_flags(run_record.with_run_defaults(
        str(train_dir / 'model.ckpt-5'), {'saved_model_dir': 'm', 'image_size': 48,
                                          'checkpoint_path': 'x'}, run_record.EXPORT_DEFAULTS))
    assert (export.model.model_name, export.model.image_size, export.dataset_name,
            export.model.use_grayscale) == ('cifarnet', 48, 'cifar10', True)


def test_without_a_run_record_the_given_flags_stand(tmp_path):
    assert run_record.with_run_defaults(
        str(tmp_path), {'batch_size': 3}, run_record.EVAL_DEFAULTS) == {'batch_size': 3}


@pytest.mark.parametrize('given, message', [
    ({'model_name': 'cifarnet'},
     "--model_name=cifarnet contradicts the run recorded in {path}, which trained lenet"),
    ({'dataset_name': 'flowers'},
     '--dataset_name=flowers gives lenet 5 classes and 3 input channels, but the run '
     'recorded in {path} trained it with 10 and 1'),
    ({'labels_offset': 1},
     '--labels_offset=1 gives lenet 9 classes and 1 input channels, but the run recorded '),
])
def test_flags_contradicting_the_runs_model_are_an_error(tmp_path, given, message):
    train_dir = write_run(tmp_path)
    with pytest.raises(UsageError) as raised:
        run_record.with_run_defaults(str(train_dir), given, run_record.EVAL_DEFAULTS)
    assert str(raised.value).startswith(
        message.format(path=train_dir / run_record.FILENAME))
    # Another dataset giving the model the same shape is fine (mnist: 10 gray classes).
    assert run_record.with_run_defaults(str(train_dir), {'dataset_name': 'mnist'},
                                        run_record.EVAL_DEFAULTS)['dataset_name'] == 'mnist'


def test_an_unreadable_run_record_is_a_usage_error(tmp_path):
    (tmp_path / run_record.FILENAME).write_text('{not json')
    with pytest.raises(UsageError, match=f'cannot read {tmp_path / run_record.FILENAME}: '):
        run_record.with_run_defaults(str(tmp_path), {}, run_record.EVAL_DEFAULTS)
