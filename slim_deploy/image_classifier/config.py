"""Typed run configs: every setting of a training, an evaluation or an export, validated
once, here.

    config = TrainConfig(train_dir='/tmp/lenet', data=DataConfig(batch_size=16))
    slim_deploy.image_classifier.train.train(config)

Each run config groups its settings into frozen dataclasses (data, model, devices,
optimization, cluster, schedule, fine-tuning) whose field names are slim's flags, with
slim's meanings and defaults; the entry scripts define their flags from these fields
(`slim_flags.define`). A bad value raises UsageError naming the flag, in the constructor, so a
config that exists is valid (what needs the file system, e.g. whether a directory can be
written, is checked when the run starts). `from_flags({flag: value})` builds a run config
from the flags a user gave (the others keep their defaults); `as_flags()` gives every
setting back as {flag: value}, as train() records it in the run's run_config.json.
"""
import dataclasses
import types
import typing

from slim_deploy.cluster import shape, tasks
from slim_deploy.common.bounds import INT32_MAX, INT64_MAX, MAX_SECONDS, Bounds, check_settings
from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory
from slim_deploy.deployment import compression, model_deploy, setting_rules, tflite
from slim_deploy.deployment.precision import PRECISIONS
from slim_deploy.nets import nets_factory
from slim_deploy.preprocessing import preprocessing_factory
from slim_deploy.training import checkpoints, loop, optimization

# Bounds that several settings share.
_COUNT = Bounds.integers(1, INT32_MAX)  # Examples, batches, tasks, threads: at least one.
_STEPS = Bounds.integers(0, INT64_MAX)  # Global steps, an int64 in the graph.
_RATE = Bounds.numbers(0)  # Learning rates, decays of weights: >= 0.
_FRACTION = Bounds.numbers(0, 1)  # Momentum and decay rates.
_DECAY = Bounds.numbers(0, 1, open_maximum=True)  # Moving averages' decays, label smoothing.
_SECONDS = Bounds.numbers(0, MAX_SECONDS)
_SOME_SECONDS = Bounds.numbers(0, MAX_SECONDS, open_minimum=True)  # More than none.
_THREADS = Bounds.integers(1, 1024)  # Input threads and files read at once.
# Side of the input images in pixels: beyond, one image alone fills gigabytes.
IMAGE_SIZE = Bounds.integers(1, 8192)
# Model clones per worker: beyond, a graph of that many clones takes minutes to build, and no
# machine has that many GPUs.
MAX_CLONES = 64


def setting(default, help_text, bounds=None, aliases=()):
    """A config field that is also a flag of the same name, with that help text; `bounds`:
    the values a numeric setting takes (a Bounds; None for the others), checked when the
    config is built (bounds.check_settings); `aliases`: other names of the flag (its former
    names)."""
    return dataclasses.field(default=default, metadata={'help': help_text, 'bounds': bounds,
                                                        'aliases': aliases})


def _group(group_class, **overrides):
    """A field holding a group of settings: group_class(**overrides) by default."""
    return dataclasses.field(default_factory=lambda: group_class(**overrides),
                             metadata={'overrides': overrides})


def _as_flag(name, value):
    """A setting as the flags name it in messages: '--worker_replicas=2', '--sync_replicas'
    (model_deploy's num_replicas is --worker_replicas, its variable_partitioner
    --variable_partition_min_mb)."""
    name = {'num_replicas': 'worker_replicas',
            'variable_partitioner': 'variable_partition_min_mb'}.get(name, name)
    return f'--{name}' if value is True else f'--{name}={value}'


def num_classes(dataset_name, labels_offset):
    """Classes the model predicts: the dataset's minus labels_offset (>= 1)."""
    info = dataset_factory.get_info(dataset_name)
    if labels_offset >= info.num_classes:
        raise UsageError(f'--labels_offset={labels_offset} leaves no class of dataset '
                         f'{dataset_name!r}, which has {info.num_classes}')
    return info.num_classes - labels_offset


def check_model(model, size_flag, dataset_name):
    """Raises UsageError unless the network of `model` (a ModelConfig) can take the examples
    of dataset `dataset_name` at model.image_size (flag --size_flag): a size in IMAGE_SIZE
    and among the network's (nets_factory.Network's min_image_size and max_image_size), and
    images, which every dataset of the toolkit holds (the video networks take videos)."""
    check_settings(model, UsageError, {'image_size': size_flag})
    network = nets_factory.NETWORKS[model.model_name]
    family = preprocessing_factory.family(model.preprocessing_name or model.model_name)
    if 'video' in (network.preprocessing, family):
        takes = (f'--model_name={model.model_name}' if network.preprocessing == 'video' else
                 f'--preprocessing_name={family}')
        raise UsageError(
            f'{takes} takes videos [frames, height, width, 3], and --dataset_name='
            f'{dataset_name} holds images, as every dataset of the toolkit does '
            f'({", ".join(dataset_factory.DATASETS)}): train a video network through '
            'deploy() on video records of your own (docs/networks.md)')
    check_image_size(model.model_name, model.image_size_or_default(), size_flag)


def check_image_size(model_name, size, size_flag):
    """Raises UsageError unless network `model_name` takes images of `size` pixels (flag
    --size_flag): nets_factory.Network's min_image_size to max_image_size."""
    network = nets_factory.NETWORKS[model_name]
    low, high = network.min_image_size, network.max_image_size
    if size < low and high is None:
        raise UsageError(
            f'--{size_flag}={size} is smaller than the smallest input {model_name} '
            f'takes, {low} pixels: pass --{size_flag}={low} or more (its default is '
            f'{network.default_image_size})')
    if not low <= size <= (high or size):
        raise UsageError(
            f'--{size_flag}={size} is outside the sizes {model_name} takes, {low} to '
            f'{high} pixels: pass --{size_flag} in that range (its default is '
            f'{network.default_image_size})')


def input_channels(dataset_name, model):
    """Channels of the images the network of `model` (a ModelConfig) takes from
    `dataset_name`'s: those its preprocessing gives."""
    return preprocessing_factory.output_channels(
        model.preprocessing_name or model.model_name,
        dataset_factory.get_info(dataset_name).channels, model.use_grayscale)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Which examples a run reads, and how."""
    dataset_name: str = setting(
        'digits', 'Dataset: ' + ', '.join(dataset_factory.DATASETS) +
        ' (digits is embedded; the others are converted with download_and_convert_data.py).')
    dataset_split_name: str = setting('train', 'Split of the dataset to read.')
    dataset_dir: str | None = setting(
        None, 'Directory of the converted dataset; None: the default directory of the '
        'embedded digits (converted there on first use), required for the others.')
    labels_offset: int = setting(
        0, 'Subtracted from every label (1 to use 1001-class ImageNet records with a '
        '1000-class model).', Bounds.integers(0, INT32_MAX))
    batch_size: int = setting(32, 'Examples per clone per step.', _COUNT)
    num_readers: int = setting(4, 'TFRecord files read in parallel.', _THREADS)
    num_preprocessing_threads: int = setting(4, 'Examples decoded and preprocessed in parallel.',
                                             _THREADS)
    max_bad_records: int = setting(
        0, 'Records that do not decode (a corrupt image) skipped by each worker, each logged '
           'with its shard and index, before the next one ends the run; 0: the first ends it.',
        Bounds.integers(0, INT64_MAX))

    def __post_init__(self):
        check_settings(self, UsageError)
        dataset_factory.get_info(self.dataset_name).num_samples(self.dataset_split_name)
        num_classes(self.dataset_name, self.labels_offset)

    @property
    def num_classes(self):
        return num_classes(self.dataset_name, self.labels_offset)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Which network, and its input. image_size is flag --train_image_size, --eval_image_size
    or --image_size, and is checked by the run config holding this group (check_model)."""
    model_name: str = setting('lenet', 'Network: ' + ', '.join(nets_factory.NETWORKS))
    preprocessing_name: str | None = setting(
        None, "Preprocessing; None: the network's own.")
    image_size: int | None = setting(None, "Side of the input images in pixels, at least the "
                                           "network's smallest; None: the network's default.",
                                     IMAGE_SIZE)
    use_grayscale: bool = setting(False, 'Convert the images to one-channel grayscale.')

    def __post_init__(self):
        nets_factory.NETWORKS.check(self.model_name)
        if self.preprocessing_name is not None:
            preprocessing_factory.get_preprocessing(self.preprocessing_name)

    def image_size_or_default(self):
        """image_size, or the network's default size when it is None."""
        return self.image_size or nets_factory.NETWORKS[self.model_name].default_image_size


@dataclasses.dataclass(frozen=True)
class DevicesConfig:
    """Where a worker's clones run."""
    num_clones: int = setting(1, 'Model clones per worker, one per GPU (without GPUs, each '
                                 'clone gets a CPU device of its own).',
                              Bounds.integers(1, MAX_CLONES))
    clone_on_cpu: bool = setting(False, "Put every clone on CPU:0 (slim's CPU mode).")
    master: str = setting('', 'Address of the TensorFlow master (grpc://host:port); empty for '
                              'in-process.')
    log_device_placement: bool = setting(False, 'Log the device each op runs on.')
    precision: str = setting(
        'float32', 'The math of each step: float32, bfloat16 (mixed precision on CPUs with '
        'bfloat16 instructions) or float16 (mixed precision on GPUs, with dynamic loss '
        'scaling); variables, losses and checkpoints stay float32.')
    xla: bool = setting(False, "Compile each clone's forward and backward pass with XLA.")

    def __post_init__(self):
        check_settings(self, UsageError)
        PRECISIONS.check(self.precision)


@dataclasses.dataclass(frozen=True)
class OptimizationConfig:
    """The loss, the optimizer and its learning-rate schedule."""
    optimizer: str = setting('rmsprop', 'Optimizer: ' + ', '.join(optimization.OPTIMIZERS))
    learning_rate: float = setting(0.01, 'Initial learning rate (before scaling).', _RATE)
    learning_rate_scaling: str = setting(
        'none', 'How the learning rate follows the global batch: ' +
        ', '.join(optimization.LEARNING_RATE_SCALINGS) + ' (linear: learning_rate x global '
        'batch / --base_batch_size, Goyal et al. 2017).')
    base_batch_size: int = setting(256, 'The global batch --learning_rate is meant for, with '
                                        '--learning_rate_scaling=linear.', _COUNT)
    warmup_epochs: float = setting(0.0, 'Epochs over which the rate rises linearly from '
                                        '--warmup_learning_rate to the scaled rate, before '
                                        'the decay schedule; 0: none.', Bounds.numbers(0))
    warmup_learning_rate: float = setting(0.0, 'Learning rate at the start of the warmup.',
                                          _RATE)
    gradient_accumulation_steps: int = setting(
        1, 'Micro-batches per update: each clone accumulates the gradients of this many '
           'batches before one update, which the global step counts.', _COUNT)
    learning_rate_decay_type: str = setting(
        'exponential', 'Learning-rate schedule: ' +
        ', '.join(optimization.LEARNING_RATE_DECAY_TYPES))
    end_learning_rate: float = setting(0.0001, 'Final rate of the polynomial schedule.', _RATE)
    learning_rate_decay_factor: float = setting(0.94, 'Exponential decay factor.',
                                                Bounds.numbers(0, open_minimum=True))
    num_epochs_per_decay: float = setting(
        2.0, 'Epochs between decays (an epoch is the split\'s examples, whatever the clones '
             'and replicas).', Bounds.numbers(0, open_minimum=True))
    weight_decay: float = setting(0.00004, 'L2 weight decay of the model.', _RATE)
    label_smoothing: float = setting(0.0, 'Label smoothing amount.', _DECAY)
    moving_average_decay: float | None = setting(
        None, 'Decay of an exponential moving average of the model variables; None or 0 for '
              'none.', _DECAY)
    params: optimization.OptimizerParams = _group(optimization.OptimizerParams)

    def __post_init__(self):
        check_settings(self, UsageError)
        optimization.OPTIMIZERS.check(self.optimizer)
        optimization.LEARNING_RATE_DECAY_TYPES.check(self.learning_rate_decay_type)
        optimization.LEARNING_RATE_SCALINGS.check(self.learning_rate_scaling)


@dataclasses.dataclass(frozen=True)
class ClusterConfig:
    """This worker's place among the replicas: alone, a task of the cluster that TF_CONFIG
    or --ps_hosts/--chief_host/--worker_hosts/--job_name/--task name, or (slim's way) a
    replica of servers started by hand, reached through --master.

    worker_replicas, num_ps_tasks and task: None means taken from the named cluster (1, 0
    and 0 without one); given, they must agree with it, except --task with the host flags,
    which is the index in --job_name's job (None: JOB_COMPLETION_INDEX's, or 0). After
    construction they hold the resolved values (task: the replica index), and
    `cluster_task` holds this process's ClusterTask (None when no cluster is named).
    tf_config and job_completion_index: the text of the environment variables TF_CONFIG and
    JOB_COMPLETION_INDEX (set in each pod of a Kubernetes Indexed Job); None: unset.
    """
    ps_hosts: str | None = setting(None, 'Comma-separated host:port of the ps tasks (instead '
                                         'of TF_CONFIG).')
    worker_hosts: str | None = setting(None, 'Comma-separated host:port of the worker tasks '
                                             '(instead of TF_CONFIG); worker 0 is the chief '
                                             'unless --chief_host names one.')
    chief_host: str | None = setting(None, "host:port of a chief task of its own (TF_CONFIG's "
                                           "'chief' job): training replica 0, before the "
                                           'workers.')
    job_name: str | None = setting(None, "This task's job in the host flags: ps, chief, worker "
                                         'or evaluator; --task is its index.')
    task: int | None = setting(None, "Index of this task in --job_name's job, or of this worker "
                                     'replica (0 being the chief) without the host flags; None: '
                                     "JOB_COMPLETION_INDEX (with the host flags), the cluster's, "
                                     'or 0.', Bounds.integers(0, INT32_MAX))
    worker_replicas: int | None = setting(None, 'Worker replicas; None: the cluster\'s, or 1.',
                                          _COUNT)
    num_ps_tasks: int | None = setting(None, 'Parameter-server tasks holding the variables; '
                                             "None: the cluster's, or 0 (variables local).",
                                       Bounds.integers(0, INT32_MAX))
    sync_replicas: bool = setting(False, "Aggregate the replicas' gradients synchronously.")
    replicas_to_aggregate: int = setting(1, 'Gradients aggregated per synchronous update.',
                                         _COUNT)
    ps_strategy: str = setting(
        'round_robin', 'How variables spread over the ps tasks: ' +
        ', '.join(model_deploy.PS_STRATEGIES) +
        " (slim's round-robin, or largest first onto the least-loaded task).")
    variable_update: str = setting(
        'parameter_server', 'How clones and workers share the variables: parameter_server '
        "(slim's: one copy, on the worker's CPU or the ps tasks), replicated (a copy on each "
        "clone's device, gradients all-reduced) or collective (replicated across the "
        'workers of a cluster without ps tasks).')
    all_reduce_pack_bytes: int = setting(
        model_deploy.ALL_REDUCE_PACK_BYTES, 'Gradients are all-reduced in packs of at most '
        'this many bytes (a larger one alone); 0: one all-reduce per gradient.',
        Bounds.integers(0, INT64_MAX))
    gradient_compression: str = setting(
        'none', 'The dtype gradients cross between tasks in: ' +
        ', '.join(compression.COMPRESSIONS) + " (none: float32); with "
        '--variable_update=collective the all-reduces, with ps tasks what each worker sends; '
        'updates stay float32 (float16 is scaled by a power of two against overflow and '
        'underflow).')
    prefetch_reads: bool = setting(
        False, "With ps tasks and asynchronous workers, fetch the variables' next values "
               'while the step computes and sends its gradients, instead of before it: the '
               'reads overlap the gradients on the wire, and each step computes with values '
               'one step older.')
    variable_partition_min_mb: float = setting(
        0.0, 'Split each variable of more than this many MB along its longest axis into parts '
             'of about this size (its size over this, rounded up, as '
             'min_max_variable_partitioner counts them), at most --num_ps_tasks parts, placed '
             "by --ps_strategy as variables are, so that no ps task's link carries a large "
             'layer alone; checkpoints hold whole variables. 0: none. Needs ps tasks.',
        Bounds.numbers(0))
    task_timeout_secs: float = setting(
        model_deploy.TASK_TIMEOUT_SECS,
        'Seconds a task this one needs (the ps tasks; the chief, while it initializes and, with'
        ' --sync_replicas, always; every worker with --variable_update=collective or '
        '--replicas_to_aggregate equal to the workers) may go without answering (a busy task '
        'answers, a lost or cut-off host does not) before this task exits with code 75 naming '
        'it, for a restart to resume from the last checkpoint; also the longest a collective '
        'all-reduce waits for the other workers. 0: forever.', _SECONDS,
        aliases=('collective_timeout_secs',))
    sync_batch_norm: bool = setting(
        False, "Batch norm normalizes with the mean and variance of the global batch (every "
               "clone's, and with --variable_update=collective every worker's) instead of "
               "each clone's own.")
    link_gbps: float | None = setting(
        None, "Bandwidth of each host's network link in Gbit/s, each way: the start-up plan "
              "then states what a step moves through each worker's and ps task's link, the "
              'least time that takes, the bottleneck and how many ps tasks would remove it; '
              'None: no network estimate.', Bounds.numbers(0, open_minimum=True))
    tf_config: str | None = dataclasses.field(default=None, metadata={'flag': False})
    job_completion_index: str | None = dataclasses.field(default=None, metadata={'flag': False})
    cluster_task: tasks.ClusterTask | None = dataclasses.field(
        default=None, init=False, compare=False, repr=False)

    def __post_init__(self):
        check_settings(self, UsageError)  # Those given; the cluster's are valid.
        model_deploy.PS_STRATEGIES.check(self.ps_strategy)
        model_deploy.VARIABLE_UPDATES.check(self.variable_update)
        compression.COMPRESSIONS.check(self.gradient_compression)
        task = self._named_task()
        object.__setattr__(self, 'cluster_task', task)
        if task and self.job_name:  # Named by the host flags: --task was used as its index.
            object.__setattr__(self, 'task', None)
        resolved = {'worker_replicas': 1, 'num_ps_tasks': 0, 'task': 0}
        if task:
            resolved = {'worker_replicas': task.num_replicas,
                        'num_ps_tasks': task.num_ps_tasks, 'task': task.replica_index}
        for flag, value in resolved.items():
            given = getattr(self, flag)
            if given is None or value is None:  # A ps task has no replica index.
                object.__setattr__(self, flag, value if given is None else given)
            elif task and given != value:
                raise UsageError(f'--{flag}={given} disagrees with the cluster, where it is '
                                 f'{value} ({task.task_type}:{task.task_index})')
        if self.is_ps or self.is_evaluator:
            return
        if not 0 <= self.task < self.worker_replicas:
            raise UsageError(f'--task must be in [0, --worker_replicas={self.worker_replicas}), '
                             f'got {self.task}')
        self._check_variable_update()
        problem = shape.workers_problem(self.worker_replicas, self.sync_replicas,
                                        self.replicas_to_aggregate)
        if problem:
            raise UsageError(problem)

    def _check_variable_update(self):
        """UsageError unless variable_update fits the replicas and ps tasks."""
        for problem in (
                setting_rules.variable_update_problem(
                    self.variable_update, self.worker_replicas, self.num_ps_tasks, _as_flag),
                setting_rules.gradient_compression_problem(
                    self.gradient_compression, self.variable_update, self.num_ps_tasks,
                    _as_flag),
                setting_rules.prefetch_reads_problem(
                    self.prefetch_reads, self.variable_update, self.num_ps_tasks, _as_flag),
                setting_rules.variable_partitioner_problem(
                    self.variable_partition_min_mb or None, self.variable_update,
                    self.num_ps_tasks, _as_flag)):
            if problem:
                raise UsageError(problem)
        if self.variable_update == 'collective' and not self.cluster_task:
            raise UsageError('--variable_update=collective needs the cluster named by '
                             'TF_CONFIG or --worker_hosts/--job_name/--task')
        if self.variable_update != 'parameter_server' and self.sync_replicas:
            raise UsageError(f'--sync_replicas aggregates gradients on ps tasks; '
                             f'--variable_update={self.variable_update} is synchronous already')

    def _named_task(self):
        """The ClusterTask that TF_CONFIG or the host flags name; None if neither does."""
        from_environment = tasks.from_tf_config(self.tf_config)
        from_flags = tasks.from_flags(self.ps_hosts, self.worker_hosts, self.job_name,
                                      self.task, self.chief_host, self.job_completion_index)
        if from_flags and from_environment:
            raise UsageError('both TF_CONFIG and --ps_hosts/--worker_hosts/--job_name name a '
                             'cluster: unset one')
        return from_flags or from_environment

    @property
    def is_ps(self):
        """Whether this process is a ps task (it serves the variables and trains nothing)."""
        return self.cluster_task is not None and self.cluster_task.task_type == 'ps'

    @property
    def is_evaluator(self):
        """Whether this process is a cluster's evaluator task (it evaluates the chief's
        checkpoints as they appear and trains nothing)."""
        return self.cluster_task is not None and self.cluster_task.task_type == tasks.EVALUATOR

    @property
    def is_chief(self):
        """Whether this is the chief: replica 0, which initializes, checkpoints and writes
        summaries."""
        return not self.is_ps and self.task == 0


@dataclasses.dataclass(frozen=True)
class ScheduleConfig:
    """How long to train, and how often to log, summarize and checkpoint."""
    max_number_of_steps: int = setting(1000, 'Global step to stop at; 0 trains forever.',
                                       _STEPS)
    log_every_n_steps: int = setting(10, 'Steps between progress lines.',
                                     Bounds.integers(1, INT64_MAX))
    save_summaries_secs: int = setting(600, 'Seconds between summary writes.',
                                       Bounds.integers(0, MAX_SECONDS))
    save_interval_secs: int = setting(600, 'Seconds between checkpoints.',
                                      Bounds.integers(0, MAX_SECONDS))
    keep_checkpoint_max: int = setting(
        5, 'Checkpoints kept in --train_dir: the oldest goes once a newer one is complete.',
        _COUNT)
    grace_period_secs: float = setting(
        loop.GRACE_SECS, 'On SIGTERM or Ctrl-C, training finishes its step, checkpoints '
        'it and exits (143 or 130) within this many seconds; past them, or on a second '
        'signal, it exits at once.', _SOME_SECONDS)

    def __post_init__(self):
        check_settings(self, UsageError)


def _scopes(value):
    """Scopes as a tuple: from a comma-separated string (slim's flags) or a sequence."""
    if value is None or isinstance(value, str):
        return tuple(checkpoints.parse_scopes(value))
    return tuple(value)


@dataclasses.dataclass(frozen=True)
class FineTuningConfig:
    """Where the first training step starts from, and what it trains."""
    checkpoint_path: str | None = setting(
        None, 'Checkpoint (file or directory) to fine-tune from, used only while --train_dir '
              'holds no checkpoint.')
    checkpoint_exclude_scopes: tuple[str, ...] = setting(
        (), "Comma-separated scopes not restored from --checkpoint_path (whole scopes: "
            "'Logits' excludes Logits/... but not Logits2/...).")
    trainable_scopes: tuple[str, ...] = setting((), 'Comma-separated scopes to train; empty: '
                                                    'all.')
    ignore_missing_vars: bool = setting(False, 'Skip variables missing from the checkpoint, '
                                               'or of another shape, instead of failing.')

    def __post_init__(self):
        for name in ('checkpoint_exclude_scopes', 'trainable_scopes'):
            object.__setattr__(self, name, _scopes(getattr(self, name)))


class _RunConfig:
    """from_flags/as_flags for a run config: a frozen dataclass of settings and groups."""

    # Flag name of fields whose flag has another name: {field name: flag name}.
    RENAMED: typing.ClassVar[dict] = {}

    @classmethod
    def from_flags(cls, values):
        """The config with the settings in `values` ({flag name: value}); the others keep
        their defaults. ValueError for a name that is no setting of this config."""
        unknown = set(values) - {name for name, _, _ in _settings(cls, cls.RENAMED)}
        if unknown:
            raise ValueError(f'{cls.__name__} has no settings {sorted(unknown)}')
        return _from_flags(cls, values, cls.RENAMED)

    def as_flags(self):
        """Every setting as {flag name: value} (scopes comma-separated)."""
        return {name: value for name, value, _, _ in flag_settings(self, self.RENAMED)}


@dataclasses.dataclass(frozen=True)
class TrainConfig(_RunConfig):
    """Everything train() needs; the defaults train lenet on the embedded digits."""
    RENAMED = {'image_size': 'train_image_size'}

    train_dir: str = setting('/tmp/tfmodel/', 'Directory for checkpoints, event files and '
                                              'run_config.json.')
    quantize_delay: int = setting(
        -1, 'Train quantization-aware from this global step on (batch norm folded into the '
            'weights, activations fake-quantized to 8 bits, weights per output channel), for '
            'an int8 TensorFlow Lite model (TF 1 clients\' uint8 models come from '
            'tf.contrib.quantize\'s per-tensor weights: docs/mobile.md); -1: off.',
        Bounds.integers(-1, INT64_MAX))
    seed: int | None = setting(
        None, 'Makes training bit-reproducible: initial values, input order, dropout and '
              'augmentation drawn from this seed (worker i: seed + i), TensorFlow ops '
              'deterministic; asynchronous ps workers still apply gradients in arrival '
              'order. None: a random run.', Bounds.integers(0, INT32_MAX))
    data: DataConfig = _group(DataConfig)
    model: ModelConfig = _group(ModelConfig)
    devices: DevicesConfig = _group(DevicesConfig)
    optimization: OptimizationConfig = _group(OptimizationConfig)
    cluster: ClusterConfig = _group(ClusterConfig)
    schedule: ScheduleConfig = _group(ScheduleConfig)
    fine_tuning: FineTuningConfig = _group(FineTuningConfig)

    def __post_init__(self):
        check_settings(self, UsageError)
        check_model(self.model, 'train_image_size', self.data.dataset_name)
        cluster = self.cluster
        for problem in (
                setting_rules.quantize_delay_problem(self.quantize_delay, cluster.sync_batch_norm,
                                                    _as_flag),
                setting_rules.distinct_devices_problem(
                    cluster.variable_update, cluster.sync_batch_norm, self.devices.num_clones,
                    self.devices.clone_on_cpu, None, _as_flag),
                cluster.sync_replicas and setting_rules.sync_replicas_problem(
                    self.devices.precision, cluster.prefetch_reads, _as_flag)):
            if problem:
                raise UsageError(problem)
        if (self.seed is not None and cluster.sync_replicas and
                cluster.replicas_to_aggregate != cluster.worker_replicas):
            raise UsageError(f'--seed with --sync_replicas needs --replicas_to_aggregate equal '
                             f'to --worker_replicas={cluster.worker_replicas}, got '
                             f'{cluster.replicas_to_aggregate}: an update of fewer workers\' '
                             'gradients takes those that arrive first')
        if cluster.cluster_task and self.devices.master:
            raise UsageError(f'--master={self.devices.master!r} and a cluster (TF_CONFIG or '
                             '--worker_hosts) are exclusive: each task of a cluster trains '
                             'through its own server')
        if cluster.num_ps_tasks and not cluster.cluster_task and not self.devices.master:
            raise UsageError(f'--num_ps_tasks={cluster.num_ps_tasks} needs a cluster of ps tasks: '
                             'set TF_CONFIG or --ps_hosts/--worker_hosts/--job_name/--task (or '
                             '--master for servers started by hand)')

    @property
    def examples_per_step(self):
        """Examples one global step (an update) consumes: batch_size x num_clones x
        gradient_accumulation_steps, x replicas_to_aggregate with synchronous replicas, x
        worker_replicas when collective."""
        cluster = self.cluster
        replicas = (cluster.replicas_to_aggregate if cluster.sync_replicas else
                    cluster.worker_replicas if cluster.variable_update == 'collective' else 1)
        return (self.data.batch_size * self.devices.num_clones *
                self.optimization.gradient_accumulation_steps * replicas)

    @property
    def scaled_learning_rate(self):
        """The learning rate after --learning_rate_scaling for the global batch
        (examples_per_step): what warmup rises to and the decay schedule starts from."""
        optimizing = self.optimization
        return optimization.scaled_learning_rate(
            optimizing.learning_rate_scaling, optimizing.learning_rate,
            self.examples_per_step, optimizing.base_batch_size)


_QUANTIZE_HELP = (
    "{what} the quantized graph, as slim's --quantize (weights and activations "
    'fake-quantized to 8 bits with the ranges quantization-aware training learned); the '
    'default is the run\'s: true when it trained with --quantize_delay.')


@dataclasses.dataclass(frozen=True)
class EvalConfig(_RunConfig):
    """Everything evaluate() needs."""
    RENAMED = {'image_size': 'eval_image_size'}

    checkpoint_path: str = setting('/tmp/tfmodel/', 'Checkpoint, or a directory whose latest '
                                                    'checkpoint is evaluated (a training '
                                                    "run's --train_dir).")
    eval_dir: str = setting('/tmp/tfmodel/', 'Directory for metrics.json and event files.')
    data: DataConfig = _group(DataConfig, dataset_split_name='test', batch_size=100)
    model: ModelConfig = _group(ModelConfig)
    devices: DevicesConfig = _group(DevicesConfig)
    moving_average_decay: float | None = setting(
        None, 'Evaluate the moving averages of the variables, kept in training with this '
              'decay; None or 0: the variables themselves.', _DECAY)
    max_num_batches: int | None = setting(
        None, 'Stop after this many batches (rounded up to whole steps of num_clones '
              'batches); None: the whole split.', Bounds.integers(1, INT64_MAX))
    eval_interval_secs: float | None = setting(
        None, 'Evaluate each new checkpoint in --checkpoint_path (a directory) as it appears, '
              'looking at most every this many seconds, until the checkpoint of the run\'s '
              'last step; None: evaluate one checkpoint once.', _SOME_SECONDS)
    timeout: float | None = setting(
        None, 'With --eval_interval_secs: stop after this many seconds without a new '
              'checkpoint; None: wait for the checkpoint of the run\'s last step.',
        _SOME_SECONDS)
    quantize: bool = setting(False, _QUANTIZE_HELP.format(what='Evaluate'))
    tflite_file: str = setting(
        '', 'Score this TensorFlow Lite model (.tflite) with the interpreter instead of a '
            'checkpoint, on the same examples and metrics; --checkpoint_path still names the '
            'run whose settings are the defaults.')

    def __post_init__(self):
        check_settings(self, UsageError)
        check_model(self.model, 'eval_image_size', self.data.dataset_name)
        if self.timeout is not None and self.eval_interval_secs is None:
            raise UsageError('--timeout needs --eval_interval_secs (it ends continuous '
                             'evaluation)')
        if self.tflite_file and self.eval_interval_secs is not None:
            raise UsageError('--eval_interval_secs evaluates new checkpoints as they appear; '
                             '--tflite_file scores one file: pass one of them')


@dataclasses.dataclass(frozen=True)
class ExportConfig(_RunConfig):
    """Everything export() needs: a GraphDef (output_file) and/or a SavedModel."""
    model: ModelConfig = _group(ModelConfig)
    dataset_name: str = setting('digits', 'Dataset the model was trained on (gives the number '
                                          'of classes and image channels).')
    dataset_dir: str | None = setting(
        None, 'Directory of the converted dataset whose examples calibrate int8 '
              'quantization; None: the default directory of the embedded digits (converted '
              'there on first use).')
    dataset_split_name: str = setting('train', 'Split of the dataset those examples are '
                                               'drawn from.')
    labels_offset: int = setting(0, 'Labels offset used in training.',
                                 Bounds.integers(0, INT32_MAX))
    batch_size: int | None = setting(None, 'Batch size of the input; None leaves it open.',
                                     _COUNT)
    is_training: bool = setting(False, 'Export the training-mode graph.')
    quantize: bool = setting(False, _QUANTIZE_HELP.format(what='Export'))
    output_file: str = setting('', 'Where to write the GraphDef (slim\'s format, no variable '
                                   'values).')
    write_text_graphdef: bool = setting(False, 'Write the GraphDef as text.')
    checkpoint_path: str | None = setting(None, 'Checkpoint (file or directory) whose values go '
                                                'into the SavedModel.')
    saved_model_dir: str = setting('', 'Where to write the SavedModel (must not exist or be '
                                       'empty).')
    tflite_file: str = setting(
        '', "Where to write a TensorFlow Lite model (.tflite) of the checkpoint: input 'input' "
            "(as the GraphDef's), outputs 'logits' and 'probabilities'.")
    tflite_quantization: str | None = setting(
        None, 'Quantization of the .tflite: ' + ', '.join(tflite.QUANTIZATIONS) +
        ' (float16: float16 weights; dynamic: int8 weights, float activations; int8: int8 '
        'weights and activations, their ranges calibrated on --representative_steps examples '
        'of --dataset_split_name, or with --quantize those learned in training and the '
        "input's calibrated); None: int8 with --quantize, else float.")
    tflite_io_type: str = setting(
        'float32', 'Type of the .tflite\'s input and output: ' + ', '.join(tflite.IO_TYPES) +
        ' (int8 and uint8 with --tflite_quantization=int8, quantized with the scale and zero '
        'point the model records).')
    representative_steps: int = setting(
        100, 'Examples (batches of one, shuffled, preprocessed for evaluation) that calibrate '
             'int8 quantization.', _COUNT)

    def __post_init__(self):
        check_settings(self, UsageError)
        check_model(self.model, 'image_size', self.dataset_name)
        num_classes(self.dataset_name, self.labels_offset)
        dataset_factory.get_info(self.dataset_name).num_samples(self.dataset_split_name)
        if not (self.output_file or self.saved_model_dir or self.tflite_file):
            raise UsageError('nothing to export: pass --output_file, --saved_model_dir and/or '
                             '--tflite_file')
        for flag in ('saved_model_dir', 'tflite_file'):
            if getattr(self, flag) and not self.checkpoint_path:
                raise UsageError(f'--{flag} needs --checkpoint_path (the values to export)')
        if self.tflite_quantization is not None:
            tflite.QUANTIZATIONS.check(self.tflite_quantization)
        tflite.check_io_type(self.tflite_model_quantization, self.tflite_io_type)
        if self.quantize and self.tflite_model_quantization != 'int8':
            raise UsageError(f'--tflite_quantization={self.tflite_quantization} cannot convert '
                             'the quantized graph of --quantize, whose ranges make an int8 '
                             'model: pass --tflite_quantization=int8, or --noquantize')
        if self.tflite_file and self.is_training:
            raise UsageError('--tflite_file converts the evaluation graph: drop --is_training')

    @property
    def num_classes(self):
        return num_classes(self.dataset_name, self.labels_offset)

    @property
    def tflite_model_quantization(self):
        """The quantization of the .tflite: tflite_quantization, or when that is None, int8
        for the quantized graph (quantize) and float otherwise."""
        if self.tflite_quantization is not None:
            return self.tflite_quantization
        return 'int8' if self.quantize else 'float'


def _is_group(field):
    return dataclasses.is_dataclass(field.type)


def _settings(config, renamed, overrides=None):
    """(name, field, value) of every setting of `config`, groups flattened, named as their
    flags (`renamed`: {field name: flag name} where they differ). config: a run config or
    group instance (its values), or class (its defaults, with a group default's
    `overrides`)."""
    is_class = isinstance(config, type)
    for field in dataclasses.fields(config):
        if not field.init:
            continue
        if _is_group(field):
            if is_class:
                yield from _settings(field.type, renamed, field.metadata['overrides'])
            else:
                yield from _settings(getattr(config, field.name), renamed)
            continue
        value = ((overrides or {}).get(field.name, field.default) if is_class
                 else getattr(config, field.name))
        yield renamed.get(field.name, field.name), field, value


def flag_aliases(config_class):
    """{alias: flag name} of the settings of `config_class` (a run config) that have some."""
    return {alias: name for name, field, _ in _settings(config_class, config_class.RENAMED)
            for alias in field.metadata.get('aliases', ())}


def flag_settings(config, renamed=None):
    """(flag name, value, type, help) of every setting of `config` (a run config or group,
    instance or class, as for _settings) that is a flag, in field order. type is int,
    float, str or bool; scopes are given as a comma-separated str. help ends with the
    values a numeric setting takes ('Takes an integer in [1, 64].')."""
    for name, field, value in _settings(config, renamed or {}):
        if not field.metadata.get('flag', True):
            continue
        kind = _flag_type(field.type)
        if kind is tuple:
            value, kind = ','.join(value), str
        bounds = field.metadata.get('bounds')
        yield name, value, kind, field.metadata['help'] + (f' Takes {bounds}.' if bounds else '')


def _flag_type(annotation):
    """int, float, str, bool or tuple: the type of a field's value, None left aside."""
    if isinstance(annotation, types.UnionType):
        (annotation,) = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    return typing.get_origin(annotation) or annotation


def _from_flags(cls, values, renamed):
    """An instance of dataclass `cls` from the settings in `values` named like its fields (or
    as `renamed` says), flags or not (e.g. tf_config); groups are built the same way from
    the same values, settings left out keeping the group default's (eval's batch size)."""
    kwargs = {}
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if _is_group(field):
            overrides = {renamed.get(name, name): value
                         for name, value in field.metadata['overrides'].items()}
            kwargs[field.name] = _from_flags(field.type, {**overrides, **values}, renamed)
            continue
        name = renamed.get(field.name, field.name)
        if name in values:
            kwargs[field.name] = values[name]
    return cls(**kwargs)
