"""OrderedSyncReplicasOptimizer in deploy()'s graph: each worker pushes into queues of its own
and takes tokens from its own queue, the update takes K gradients of every worker, the plan
sees lockstep workers, and a count of gradients that not every worker can give is refused.
Its runs are compared bit for bit in test_reproducibility."""
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.deployment import network_traffic
from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.deployment.network_traffic import OUT_THEN_IN
from slim_deploy.deployment.ordered_sync import OrderedSyncReplicasOptimizer

from graphs import LENET, lenet_model_fn


def ordered_graph(config, replicas_to_aggregate):
    """deploy()'s graph of worker config.replica_id under an OrderedSyncReplicasOptimizer;
    (graph, optimizer)."""
    with tf.Graph().as_default() as graph:
        optimizer = OrderedSyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.1), replicas_to_aggregate,
            total_num_replicas=config.num_replicas, replica_id=config.replica_id)
        deploy(config, lenet_model_fn(), optimizer=optimizer)
        optimizer.ready_for_local_init_op.mark_used()
    return graph, optimizer


@pytest.mark.parametrize('replica_id', [0, 2])
def test_each_worker_pushes_into_its_own_queue_and_takes_its_own_tokens(replica_id):
    config = DeploymentConfig(num_replicas=3, num_ps_tasks=1, replica_id=replica_id)
    graph, optimizer = ordered_graph(config, 6)  # 2 micro-batches of each of 3 workers.
    step = network_traffic.needed_ops([graph.get_operation_by_name('train_op')])
    pushes = [op for op in step if op.type == 'QueueEnqueueV2']
    assert [op.inputs[0].op.name for op in pushes] == [
        f'ordered_sync_replicas/gradients_0_worker_{replica_id}']
    assert len(pushes[0].inputs) - 1 == 8  # lenet's 8 gradients, in one queue per ps task.
    (take,) = [op for op in step if op.type == 'QueueDequeueV2']
    assert take.inputs[0].op.name == f'ordered_sync_replicas/tokens_worker_{replica_id}'
    update = optimizer.get_chief_queue_runner().enqueue_ops[0]
    takes = [op for op in network_traffic.needed_ops([update]) if op.type == 'QueueDequeueManyV2']
    assert sorted(op.inputs[0].op.name for op in takes) == [
        f'ordered_sync_replicas/gradients_0_worker_{worker}' for worker in range(3)]
    assert [int(tf.get_static_value(op.inputs[1])) for op in takes] == [2, 2, 2]
    assert (optimizer.initial_tokens, optimizer.tokens_per_update) == (3, 6)


def test_the_plan_sees_workers_in_lockstep():
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1)
    graph, _ = ordered_graph(config, 2)
    traffic = network_traffic.step_traffic(graph, config)
    assert traffic.synchronous
    (ps,) = traffic.ps_tasks
    assert ps.rule == OUT_THEN_IN and ps.bytes >= 3 * LENET


def test_a_count_every_worker_cannot_give_is_refused():
    with pytest.raises(UsageError, match=r'^ordered synchronous updates take as many '
                       r'gradients from every worker: replicas_to_aggregate=3 must be a '
                       r'multiple of the 2 workers$'):
        OrderedSyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 3,
                                     total_num_replicas=2, replica_id=0)


def test_a_seeded_deployment_refuses_tensorflows_own_sync_replicas():
    config = DeploymentConfig(num_replicas=2, num_ps_tasks=1, seed=3)
    with tf.Graph().as_default() as graph:
        optimizer = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2, 2)
        with pytest.raises(ValueError, match=(
                r'^seed=3 cannot make a tf\.train\.SyncReplicasOptimizer reproducible \(it sums '
                r'the gradients in the order they arrive\): use slim_deploy\.deployment\.'
                r'ordered_sync\.OrderedSyncReplicasOptimizer$')):
            deploy(config, lenet_model_fn(), optimizer=optimizer)
    assert graph.seed is None and not graph.get_operations()  # Refused before building.
