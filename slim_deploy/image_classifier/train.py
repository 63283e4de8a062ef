"""train(config): trains an image classifier as N data-parallel clones, alone or as a chief
or worker task of a parameter-server/worker cluster, with slim's semantics.

batch_size is per clone: one global step consumes config.examples_per_step examples.
Rerunning with the same train_dir resumes from its latest checkpoint; fine_tuning's
checkpoint_path only seeds a train_dir that has none.
"""
import collections
import contextlib

from absl import logging
import tensorflow.compat.v1 as tf
from tensorflow.python.framework import config as tf_config
import tf_slim as slim

from slim_deploy.cluster import tasks
from slim_deploy.common import fileio
from slim_deploy.common.errors import Interrupted, UsageError
from slim_deploy.datasets import pipeline
from slim_deploy.deployment import (
    all_reduce,
    model_deploy,
    network_traffic,
    ordered_sync,
    sizing,
    turns,
)
from slim_deploy.image_classifier import builders, run_record, sizing_figures
from slim_deploy.training import checkpoints, loop, optimization


def train(config):
    """Trains as `config` (a TrainConfig) says; returns the final global step.

    Returns None when no step ran: train_dir's checkpoint was at the last step already.
    Raises ValueError when `config` names a ps or evaluator task, which trains nothing
    (roles.run does what they do), UsageError for a user's mistake found once the run
    starts (an unwritable train_dir, a missing dataset or checkpoint),
    loop.NonFiniteLossError if the loss diverges, errors.Interrupted after SIGTERM or
    SIGINT (loop.SignalStop) and, in collective mode, errors.ClusterError when another
    worker stops answering. A worker of a cluster ends its process with
    errors.ClusterError.exit_code when a task it needs has not answered for
    --task_timeout_secs (tasks.watchdog).
    """
    cluster = config.cluster
    if cluster.is_ps or cluster.is_evaluator:
        raise ValueError(f'train() runs a chief or worker task, not {cluster.cluster_task.name}: '
                         'roles.run(config) does what each task does')
    # What the config names: the data and the network, the clones' devices, the sessions.
    model = builders.classifier(config.data, config.model, is_training=True,
                                weight_decay=config.optimization.weight_decay)
    fileio.check_writable_dir(config.train_dir, '--train_dir')
    deployment, num_cpu_devices = builders.deployment(
        config.devices, cluster,
        quantize_delay=config.quantize_delay if config.quantize_delay >= 0 else None,
        seed=config.seed)
    master, session_config = builders.session_target(config.devices, num_cpu_devices, cluster)
    warmup_steps = optimization.epochs_to_steps(
        model.split.num_samples, config.optimization.warmup_epochs, config.examples_per_step)
    collective = cluster.variable_update == 'collective'
    guard = pipeline.RecordGuard(config.data.max_bad_records)
    with tf.Graph().as_default(), _op_determinism_restored(), fileio.room_checked(
            config.train_dir, 'write', lambda: checkpoints.kept(config.train_dir)):
        # The training graph, and what it does, logged.
        graph = _build(config, model, deployment, warmup_steps, guard)
        logging.info('Placement:\n%s', graph.plan)
        slower = _compression_slows(deployment, cluster.link_gbps, graph.train_tensor)
        if slower:
            logging.warning(slower)
        logging.info('Global batch %d examples per step%s; %s', config.examples_per_step,
                     f', in {config.optimization.gradient_accumulation_steps} micro-batches'
                     if config.optimization.gradient_accumulation_steps > 1 else '',
                     _learning_rate_story(config, warmup_steps))
        # The chief records the run and says what it restores.
        init_fn = _start_as_chief(config, model, graph, warmup_steps) if cluster.is_chief else None
        # How this worker logs, stops, and waits for the others.
        monitor = _monitor(config, graph)
        stop = loop.SignalStop(config.schedule.grace_period_secs)
        hooks = []
        if cluster.sync_replicas:
            hooks.append(loop.SyncReplicasHook(graph.optimizer, cluster.is_chief,
                                               cluster.worker_replicas,
                                               _sync_gradients_per_update(config),
                                               config.schedule.max_number_of_steps or None))
            stop.on_request(hooks[-1].release)  # The others must not wait for this one.
            if cluster.is_chief:  # Backup workers' turns to read are leases it checks.
                hooks.append(turns.LeaseChecks())
        stop_group = None
        if collective:  # Every worker stops after the same step.
            stop_group = all_reduce.Group(
                size=cluster.worker_replicas, local_devices=(deployment.optimizer_device(),),
                has_source=False, timeout_secs=cluster.task_timeout_secs)
        watchdog = cluster.cluster_task and tasks.watchdog(
            cluster.cluster_task, cluster.task_timeout_secs, cluster.variable_update,
            cluster.sync_replicas, cluster.replicas_to_aggregate)
        reported = (_last_checkpoint_reported(cluster.cluster_task)
                    if cluster.cluster_task and cluster.is_chief else contextlib.nullcontext())
        # The loop.
        try:
            with guard.raising(), reported:
                final_step = loop.train(
                    graph.train_tensor, config.train_dir, monitor, master=master,
                    is_chief=cluster.is_chief,
                    scaffold=tf.train.Scaffold(summary_op=graph.summary_op, init_fn=init_fn),
                    hooks=hooks, save_summaries_secs=config.schedule.save_summaries_secs,
                    save_interval_secs=config.schedule.save_interval_secs,
                    keep_checkpoint_max=config.schedule.keep_checkpoint_max,
                    config=session_config, independent=collective, stop=stop,
                    stop_group=stop_group, watchdog=watchdog)
        except tasks.PEER_ERRORS as e:
            if not collective:
                raise
            raise tasks.lost_peer(cluster.cluster_task, e, cluster.task_timeout_secs) from e
    if final_step is None:
        logging.info('Nothing to train: the global step has reached %d already',
                     config.schedule.max_number_of_steps)
    else:
        skipped = [f'{monitor.skipped_updates} updates skipped by loss scaling'
                   if monitor.skipped_updates else '',
                   f'{len(guard.skipped)} bad records skipped (--max_bad_records='
                   f'{guard.max_bad_records})' if guard.skipped else '']
        logging.info('Finished training at global step %d after %d steps here%s; '
                     'checkpoints in %s', final_step, monitor.local_steps,
                     ''.join(f' ({line})' for line in skipped if line), config.train_dir)
    return final_step


@contextlib.contextmanager
def _last_checkpoint_reported(task):
    """Around the training loop of the chief, `task` (a ClusterTask): once the loop has ended
    with its last checkpoint written (it returned, or a signal interrupted it), reports it to
    the cluster's ps tasks, which a signal stops only then (tasks.serve). A loop that fails
    writes no last checkpoint: its process ends, as the ps tasks see."""
    try:
        yield
    except Interrupted:
        tasks.report_last_checkpoint(task)
        raise
    tasks.report_last_checkpoint(task)


@contextlib.contextmanager
def _op_determinism_restored():
    """Turns TensorFlow's op determinism back off on exit if it was off on entry: a seeded
    deploy() turns it on for the process, where it would make a later unseeded graph's
    random ops fail."""
    was_on = tf_config.is_op_determinism_enabled()
    try:
        yield
    finally:
        if not was_on:
            tf_config.disable_op_determinism()


def _start_as_chief(config, model, graph, warmup_steps):
    """The chief's start: logs how the run resized since the checkpoint's, writes the run's
    record (replacing the previous run's) and returns the init_fn that restores
    --checkpoint_path when train_dir has no checkpoint (None: nothing to restore)."""
    found = run_record.find(config.train_dir)  # Before this run's record replaces it.
    init_fn = _init_fn(config)
    resized = _resized(config, found)
    if resized:
        logging.info(resized)
    run_record.write(config, placement=graph.plan.splitlines(),
                     examples_per_step=config.examples_per_step,
                     learning_rate=config.scaled_learning_rate, warmup_steps=warmup_steps,
                     num_classes=model.num_classes, image_size=model.image_size,
                     num_samples=model.split.num_samples)
    return init_fn


def _monitor(config, graph):
    """The loop.MonitorHook of this worker. Asynchronous workers other than the chief stop
    W-1 steps early; the chief waits for their last updates and runs the remaining steps
    alone (see loop.MonitorHook)."""
    cluster = config.cluster
    last_step = config.schedule.max_number_of_steps or None
    alone_from = None
    if (last_step and cluster.worker_replicas > 1 and not cluster.sync_replicas and
            cluster.variable_update != 'collective'):
        alone_from = last_step - (cluster.worker_replicas - 1)
    if not cluster.is_chief and alone_from is not None:
        last_step, alone_from = alone_from, None
    return loop.MonitorHook(
        graph.train_tensor, graph.learning_rate, config.examples_per_step,
        config.schedule.log_every_n_steps,
        summary_dir=config.train_dir if cluster.is_chief else None, last_step=last_step,
        alone_from=alone_from, runs_per_step=config.optimization.gradient_accumulation_steps)


# What _build() made: train_tensor (runs one step and returns the loss), learning_rate,
# optimizer, summary_op and the placement plan (text).
_TrainingGraph = collections.namedtuple(
    '_TrainingGraph', ['train_tensor', 'learning_rate', 'optimizer', 'summary_op', 'plan'])


def _build(config, model, deployment, warmup_steps, guard=None):
    """Builds the training graph of `config` in the default graph, the learning rate rising
    over `warmup_steps` global steps first, its input read under `guard` (a
    pipeline.RecordGuard; None: one that lets no bad record pass)."""
    cluster, optimizing = config.cluster, config.optimization
    if deployment.seed is not None:  # Before the input pipeline, which deploy() follows.
        tf.set_random_seed(deployment.graph_seed)
    with tf.device(deployment.variables_device()):
        global_step = tf.train.create_global_step()
    with tf.device(deployment.inputs_device()):
        iterator = tf.data.make_one_shot_iterator(
            model.training_batches(config.data, cluster.task, cluster.worker_replicas,
                                   seed=deployment.graph_seed, guard=guard))
    with tf.device(deployment.optimizer_device()):
        learning_rate = optimization.learning_rate(
            optimizing.learning_rate_decay_type, config.scaled_learning_rate, global_step,
            optimization.decay_steps(model.split.num_samples, optimizing.num_epochs_per_decay,
                                     config.examples_per_step),
            optimizing.learning_rate_decay_factor, optimizing.end_learning_rate,
            warmup_steps, optimizing.warmup_learning_rate)
        optimizer = optimization.optimizer(optimizing.optimizer, learning_rate,
                                           optimizing.params)
        micro_batches = optimizing.gradient_accumulation_steps
        if cluster.sync_replicas:  # It accumulates: every micro-batch of every replica is pushed.
            if deployment.seed is None:
                optimizer = tf.train.SyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=_sync_gradients_per_update(config),
                    total_num_replicas=cluster.worker_replicas)
            else:  # Seeded: updates that do not depend on the order gradients arrive in.
                optimizer = ordered_sync.OrderedSyncReplicasOptimizer(
                    optimizer, replicas_to_aggregate=_sync_gradients_per_update(config),
                    total_num_replicas=cluster.worker_replicas, replica_id=cluster.task)
            micro_batches = 1

    def var_list():
        variables = checkpoints.variables_to_train(config.fine_tuning.trainable_scopes)
        if not variables:
            raise UsageError(f'--trainable_scopes='
                             f'{",".join(config.fine_tuning.trainable_scopes)!r} matches no '
                             'trainable variable')
        return variables

    model_fn = builders.classification_model_fn(
        model.network_fn, iterator, deployment.inputs_device(), model.num_classes,
        optimizing.label_smoothing)
    deployed = model_deploy.deploy(deployment, model_fn, optimizer=optimizer,
                                   var_list=var_list, gradient_accumulation_steps=micro_batches)
    train_tensor = deployed.train_op
    with tf.device(deployment.optimizer_device()):
        summaries = [deployed.summary_op, tf.summary.scalar('learning_rate', learning_rate)]
        summaries += [tf.summary.histogram(f'variables/{v.op.name}', v)
                      for v in slim.get_model_variables()]
        if optimizing.moving_average_decay:
            averages = tf.train.ExponentialMovingAverage(optimizing.moving_average_decay,
                                                         global_step)
            updates = []
            with tf.control_dependencies([deployed.train_op]):
                for variable in slim.get_model_variables():
                    # Next to the variable: on a ps task, not pulled to the worker and back.
                    with tf.colocate_with(variable):
                        updates.append(averages.apply([variable]))
            with tf.control_dependencies(updates):
                train_tensor = tf.identity(deployed.train_op, name='train_op_with_averages')
        summary_op = tf.summary.merge(summaries)
    plan = model_deploy.placement_plan(deployment, tf.get_default_graph(), cluster.link_gbps,
                                       fetches=[train_tensor])
    return _TrainingGraph(train_tensor=train_tensor, learning_rate=learning_rate,
                          optimizer=optimizer, summary_op=summary_op, plan=plan)


def _compression_slows(deployment, link_gbps, train_tensor):
    """The line saying that 16-bit gradients slow this worker's step: their casts and sums
    (timed here per byte) cost more than the whole network time of the step of `train_tensor`
    on links of `link_gbps` Gbit/s, more than sending float32 gradients could add. None when
    they do not, or without gradient compression or link_gbps."""
    compressed = deployment.gradient_compression
    if compressed == 'none' or not link_gbps:
        return None
    traffic = network_traffic.step_traffic(tf.get_default_graph(), deployment, [train_tensor])
    cost = sizing.compression_seconds(
        traffic, sizing_figures.compression_seconds_per_byte(compressed))
    network = traffic.seconds(link_gbps)
    if cost < network:
        return None
    return (f'--gradient_compression={compressed} slows this step: its casts and sums cost '
            f'{network_traffic.human_seconds(cost)} per step here, more than the '
            f'{network_traffic.human_seconds(network)} its bytes take on links of '
            f'{link_gbps:g} Gbit/s (--link_gbps); float32 gradients (none) are faster')


def _sync_gradients_per_update(config):
    """Gradients a synchronous update aggregates: each micro-batch of replicas_to_aggregate
    replicas (the SyncReplicasOptimizer does the accumulation)."""
    return (config.cluster.replicas_to_aggregate *
            config.optimization.gradient_accumulation_steps)


def _learning_rate_story(config, warmup_steps):
    """'learning rate 0.4 (0.1 x 1024 / 256), reached after a warmup of 50 steps from 0':
    the rate the schedule starts from, how it was scaled and warmed up."""
    optimizing = config.optimization
    story = f'learning rate {config.scaled_learning_rate:g}'
    if optimizing.learning_rate_scaling == 'linear':
        story += (f' ({optimizing.learning_rate:g} x {config.examples_per_step} / '
                  f'{optimizing.base_batch_size})')
    if warmup_steps:
        story += (f', reached after a warmup of {warmup_steps} steps from '
                  f'{optimizing.warmup_learning_rate:g}')
    return story


def _resized(config, found):
    """The line saying how the run resuming in config.train_dir changed its number of workers
    since the run that wrote `found` (run_record.find's (path, record); None: no record), and with
    it the global batch and the learning rate scaled by it; None when the train_dir has no
    checkpoint to resume (after _init_fn) or the number is the same."""
    if found is None or not checkpoints.latest(config.train_dir):
        return None
    record = found[1]
    before, now = record['flags'].get('worker_replicas'), config.cluster.worker_replicas
    if before is None or before == now:
        return None
    line = (f'Resized: {now} workers where the checkpoint\'s run had {before}; the global '
            f'batch is {config.examples_per_step} examples per step (was '
            f'{record["examples_per_step"]})')
    if record['learning_rate'] != config.scaled_learning_rate:
        line += (f', the learning rate {config.scaled_learning_rate:g} (was '
                 f'{record["learning_rate"]:g})')
    return line


def _init_fn(config):
    """The chief's Scaffold init_fn: restores --checkpoint_path into a train_dir that has no
    intact checkpoint yet; None when there is nothing to restore. A train_dir whose latest
    checkpoint is unreadable resumes from the newest intact one (checkpoints.resume_point)."""
    checkpoint_path = config.fine_tuning.checkpoint_path
    latest = checkpoints.resume_point(config.train_dir)
    if latest:
        logging.info('Resuming from %s%s', latest,
                     ' (ignoring --checkpoint_path)' if checkpoint_path else '')
        return None
    if not checkpoint_path:
        return None
    return checkpoints.fine_tune_init_fn(checkpoint_path,
                                         config.fine_tuning.checkpoint_exclude_scopes,
                                         config.fine_tuning.ignore_missing_vars)
