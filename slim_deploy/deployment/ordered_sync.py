"""Synchronous replicas whose updates do not depend on the order gradients arrive in.

tf.train.SyncReplicasOptimizer's accumulators sum the gradients in the order they arrive,
and its workers share one token queue, so a fast worker may take another's token and give
two gradients to one update: its updates, and so a seeded run, vary from run to run.
OrderedSyncReplicasOptimizer (used by train_image_classifier with --seed and
--sync_replicas) keeps its protocol and interface, with each worker's gradients and tokens
in queues of its own:

  - worker i puts each micro-batch's gradients into its own queue on each ps task (its
    gradients of the variables there), then takes a token from its own token queue;
  - an update (the chief's aggregation, training.loop.SyncReplicasHook runs it) takes K
    gradients from every worker's queues, worker 0's first, sums them in that order, applies
    their mean, then puts K tokens into every worker's token queue.

K = replicas_to_aggregate / total_num_replicas (gradient accumulation: K micro-batches per
worker and update; 1 without). Every worker starts with K - 1 tokens, so each update holds
exactly K gradients of every worker, all computed on the values of the update before: none
is stale and none is dropped. A worker that restarts resumes with its queues as it left
them.
"""
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError


class OrderedSyncReplicasOptimizer(tf.train.SyncReplicasOptimizer):
    """A tf.train.SyncReplicasOptimizer (its constructor's arguments, and `replica_id`, the
    index of this worker among total_num_replicas) that aggregates in worker order (see the
    module docstring). replicas_to_aggregate must be a multiple of total_num_replicas:
    every worker gives every update the same number of gradients."""

    def __init__(self, opt, replicas_to_aggregate, total_num_replicas, replica_id,
                 name='ordered_sync_replicas'):
        if replicas_to_aggregate % total_num_replicas:
            raise UsageError(f'ordered synchronous updates take as many gradients from every '
                             f'worker: replicas_to_aggregate={replicas_to_aggregate} must be a '
                             f'multiple of the {total_num_replicas} workers')
        super().__init__(opt, replicas_to_aggregate, total_num_replicas, name=name)
        self._replica_id = replica_id
        self._per_worker = replicas_to_aggregate // total_num_replicas

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The op of one worker's step: its gradients pushed, then a token taken. Builds the
        chief's update too (get_chief_queue_runner)."""
        if global_step is None:
            raise ValueError('OrderedSyncReplicasOptimizer needs the global step')
        pairs = [(tf.convert_to_tensor(grad), var) for grad, var in grads_and_vars
                 if grad is not None]
        workers, per_worker = self._total_num_replicas, self._per_worker
        by_device = {}
        for grad, var in pairs:
            by_device.setdefault(var.device, []).append((grad, var))
        pushes, sums = [], []
        with tf.name_scope(name or self._name):
            for index, (device, group) in enumerate(sorted(by_device.items())):
                with tf.device(device):
                    queues = [tf.FIFOQueue(
                        per_worker, [var.dtype.base_dtype for _, var in group],
                        [var.shape for _, var in group],
                        shared_name=f'{self._name}_gradients_{index}_worker_{worker}',
                        name=f'gradients_{index}_worker_{worker}') for worker in range(workers)]
                pushes.append(queues[self._replica_id].enqueue([grad for grad, _ in group]))
                with tf.device(device):
                    taken = [queue.dequeue_many(per_worker) for queue in queues]
                    for position, (_, var) in enumerate(group):
                        # In a fixed order: worker by worker, then micro-batch by micro-batch.
                        total = tf.add_n([gradients[position] for gradients in taken])
                        sums.append((tf.reduce_sum(total, axis=0) / (workers * per_worker),
                                     var))
            with tf.device(global_step.device):
                self._tokens = [tf.FIFOQueue(-1, tf.int64, [],
                                             shared_name=f'{self._name}_tokens_worker_{worker}',
                                             name=f'tokens_worker_{worker}')
                                for worker in range(workers)]
                tokens_left = tf.add_n([queue.size() for queue in self._tokens])
            update = self._opt.apply_gradients(sums, global_step=global_step)
            with tf.control_dependencies([update]), tf.device(global_step.device):
                step = tf.identity(global_step)  # Read after the update.
                aggregate = tf.group(*[queue.enqueue_many(tf.fill([per_worker], step))
                                       for queue in self._tokens])
            self._chief_queue_runner = tf.train.QueueRunner(self._tokens[0], [aggregate])
            self._tokens_left = tokens_left
            self._gradients_applied = True
            self.local_step_init_op = tf.no_op()
            self.chief_init_op = tf.no_op()
            self.ready_for_local_init_op = tf.report_uninitialized_variables(
                tf.global_variables())
            with tf.control_dependencies(pushes), tf.device(global_step.device):
                return self._tokens[self._replica_id].dequeue().op

    def get_init_tokens_op(self, num_tokens=-1):
        """The op giving every worker its start tokens (num_tokens -1: K - 1 each, so that it
        pushes its K gradients of the first update), or num_tokens tokens each (to release
        workers waiting for an update that will not come)."""
        count = self._per_worker - 1 if num_tokens == -1 else num_tokens
        with tf.device(self._tokens[0].queue_ref.device):
            return tf.group(*[queue.enqueue_many(tf.zeros([count], tf.int64))
                              for queue in self._tokens])

    @property
    def initial_tokens(self):
        """Tokens get_init_tokens_op() queues: K - 1 per worker."""
        return self._total_num_replicas * (self._per_worker - 1)

    @property
    def tokens_left(self):
        """A scalar tensor: the tokens queued and not yet taken, every worker's."""
        return self._tokens_left

    @property
    def tokens_per_update(self):
        """Tokens an update queues: K per worker."""
        return self._total_num_replicas * self._per_worker
