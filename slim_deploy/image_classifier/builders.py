"""What a run's config names, built: its dataset split, network and preprocessing, the
DeploymentConfig and session set-up of its clones, and its checkpoint restored. Training,
evaluation, export and the benchmarks build them here, the same way."""
from collections.abc import Callable
import dataclasses

from absl import logging
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory, dataset_utils, pipeline
from slim_deploy.deployment import model_deploy, placement, precision
from slim_deploy.nets import nets_factory
from slim_deploy.preprocessing import preprocessing_factory
from slim_deploy.training import loop

AUX_LOGITS_WEIGHT = 0.4  # Weight of the auxiliary head's loss (inception), as in slim.


@dataclasses.dataclass(frozen=True)
class Classifier:
    """A dataset split and the network that classifies it.

    network_fn: float32 images [batch, image_size, image_size, channels] -> (logits
    [batch, num_classes], end_points). preprocessing_fn: (image, height, width) -> float32
    [height, width, channels], as preprocessing_factory's. image_size: side in pixels.
    """
    split: dataset_utils.DatasetSplit
    num_classes: int
    network_fn: Callable
    preprocessing_fn: Callable
    image_size: int

    def training_batches(self, data, replica_id=0, num_replicas=1, seed=None, guard=None):
        """An endless shuffled dataset of (images, labels) batches of data.batch_size, this
        replica's share of the split (see pipeline.training_batches; seed None: a random
        order and augmentation; guard: the pipeline.RecordGuard of the reading, None: one
        that lets no bad record pass)."""
        return pipeline.training_batches(
            self.split, self.preprocessing_fn, self.image_size, data.batch_size,
            data.num_readers, data.num_preprocessing_threads, data.labels_offset,
            replica_id, num_replicas, seed=seed, guard=guard)

    def evaluation_batches(self, data, num_clones, guard=None):
        """Every example of the split once, as (images, labels, weights) batches in groups
        of num_clones (see pipeline.evaluation_batches; guard as in training_batches)."""
        return pipeline.evaluation_batches(
            self.split, self.preprocessing_fn, self.image_size, data.batch_size, num_clones,
            data.num_readers, data.num_preprocessing_threads, data.labels_offset, guard=guard)


def classifier(data, model, is_training, weight_decay=0.0, split=None):
    """The Classifier of a DataConfig and a ModelConfig. weight_decay: L2 penalty on the
    network's weights. split: the DatasetSplit to read; None: the one `data` names
    (converting the embedded digits on first use)."""
    if split is None:
        split = dataset_factory.get_dataset_split(data.dataset_name, data.dataset_split_name,
                                                  data.dataset_dir)
    num_classes = split.num_classes - data.labels_offset
    return Classifier(
        split=split, num_classes=num_classes,
        network_fn=nets_factory.get_network_fn(model.model_name, num_classes, weight_decay,
                                               is_training=is_training),
        preprocessing_fn=preprocessing_factory.get_preprocessing(
            model.preprocessing_name or model.model_name, is_training=is_training,
            use_grayscale=model.use_grayscale),
        image_size=model.image_size_or_default())


def add_classification_losses(logits, end_points, labels, num_classes, label_smoothing=0.0):
    """Adds to tf.GraphKeys.LOSSES the cross-entropy of `logits` [batch, num_classes] against
    `labels` [batch] (class indices) and, when end_points has 'AuxLogits', the auxiliary
    head's, weighted AUX_LOGITS_WEIGHT; returns their sum, a scalar."""
    onehot_labels = tf.one_hot(labels, num_classes)
    losses = []
    if 'AuxLogits' in end_points:
        losses.append(tf.losses.softmax_cross_entropy(
            onehot_labels, end_points['AuxLogits'], label_smoothing=label_smoothing,
            weights=AUX_LOGITS_WEIGHT, scope='aux_loss'))
    losses.append(tf.losses.softmax_cross_entropy(onehot_labels, logits,
                                                  label_smoothing=label_smoothing))
    return tf.add_n(losses)


def classification_model_fn(network_fn, iterator, inputs_device, num_classes, label_smoothing):
    """model_fn for deploy(): takes the next (images, labels) batch of `iterator` on
    `inputs_device` (clone i the i-th of the step: each clone's after the one before, so
    that a seeded run gives every clone the same batches each time), adds the
    classification losses (add_classification_losses) and slim's activation summaries, and
    returns the end points."""
    taken = []  # The batches the clones built so far take.

    def model_fn():
        with tf.device(inputs_device), tf.control_dependencies(taken[-1:]):
            images, labels = iterator.get_next()
        taken.append(images)
        logits, end_points = network_fn(images)
        add_classification_losses(logits, end_points, labels, num_classes, label_smoothing)
        for name, tensor in end_points.items():
            tf.summary.histogram(f'activations/{name}', tensor)
            tf.summary.scalar(f'sparsity/{name}', tf.nn.zero_fraction(tensor))
        return end_points
    return model_fn


def deployment(devices, cluster=None, quantize_delay=None, seed=None):
    """(DeploymentConfig, number of CPU devices the sessions need; None: the default) for a
    DevicesConfig and, when training, a ClusterConfig (None: one worker, no ps tasks), the
    global step quantization-aware training starts at (None: none) and the seed (None:
    none).

    On a machine without GPUs each clone gets a CPU device of its own (see
    model_deploy.local_clone_devices). In a cluster named by TF_CONFIG or flags, the worker's
    devices are those of its own task (its job may be 'chief'). Logs a warning when the
    precision will run no faster than float32 here (precision.slowness).
    """
    clone_devices, num_cpu_devices = model_deploy.local_clone_devices(devices.num_clones,
                                                                      devices.clone_on_cpu)
    replicas = {}
    if cluster is not None:
        task = cluster.cluster_task
        replicas = dict(
            replica_id=task.task_index if task else cluster.task,
            num_replicas=cluster.worker_replicas, num_ps_tasks=cluster.num_ps_tasks,
            worker_job_name=task.task_type if task else 'worker',
            ps_strategy=cluster.ps_strategy, variable_update=cluster.variable_update,
            all_reduce_pack_bytes=cluster.all_reduce_pack_bytes,
            task_timeout_secs=cluster.task_timeout_secs, is_chief=cluster.is_chief,
            sync_batch_norm=cluster.sync_batch_norm,
            gradient_compression=cluster.gradient_compression,
            prefetch_reads=cluster.prefetch_reads,
            variable_partitioner=partitioner(cluster.variable_partition_min_mb,
                                             cluster.num_ps_tasks))
    config = model_deploy.DeploymentConfig(num_clones=devices.num_clones,
                                           clone_on_cpu=devices.clone_on_cpu,
                                           clone_devices=clone_devices,
                                           precision=devices.precision, xla=devices.xla,
                                           quantize_delay=quantize_delay, seed=seed,
                                           **replicas)
    slow = precision.slowness(devices.precision, config.clone_device(0), precision.cpu_flags())
    if slow:
        logging.warning(slow)
    return config, num_cpu_devices


def partition_bytes(min_mb):
    """The part size of --variable_partition_min_mb=`min_mb` in bytes: min_mb x 10^6, at least
    one byte; 0 (no parts) for 0."""
    return max(1, round(min_mb * 1e6)) if min_mb else 0


def partitioner(min_mb, num_ps_tasks):
    """The variable partitioner of --variable_partition_min_mb=`min_mb` (None for 0): parts of
    about `min_mb` MB, at most `num_ps_tasks` of them (placement.min_size_partitioner)."""
    size = partition_bytes(min_mb)
    return placement.min_size_partitioner(size, num_ps_tasks) if size else None


def session_target(devices, num_cpu_devices, cluster=None):
    """(master, ConfigProto) of the sessions of a run. A task of a named cluster starts its
    own gRPC server, holding its devices, and its sessions run through it, talking only to
    the ps tasks and itself (and, in collective mode, to the other workers through
    collective ops, led by the chief)."""
    task = cluster.cluster_task if cluster is not None else None
    if task is None:
        return devices.master, loop.session_config(
            num_cpu_devices, devices.log_device_placement, precision=devices.precision,
            remote=bool(devices.master))
    leader = task.collective_leader if cluster.variable_update == 'collective' else None
    server = task.start_server(loop.session_config(
        num_cpu_devices, collective_leader=leader, precision=devices.precision, remote=True))
    return server.target, loop.session_config(
        log_device_placement=devices.log_device_placement,
        device_filters=task.device_filters(), collective_leader=leader,
        precision=devices.precision, remote=True)


def restore(session, checkpoint, var_list=None, quantized=False):
    """Restores `var_list` (as tf.train.Saver takes it; None: every variable) from checkpoint
    prefix `checkpoint` into `session`. quantized: the graph is quantized
    (quantize.create_eval_graph), so a checkpoint lacking the ranges that
    quantization-aware training learns raises UsageError naming --quantize."""
    try:
        tf.train.Saver(var_list).restore(session, checkpoint)
    except tf.errors.NotFoundError:
        if not quantized:
            raise
        raise UsageError(f'--quantize needs the ranges of quantization-aware training, which '
                         f'checkpoint {checkpoint} lacks: train with --quantize_delay, or pass '
                         '--noquantize') from None
