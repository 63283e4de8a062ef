"""TF-Slim's model_deploy and what it needs to build clones.

Public (__all__): model_deploy (DeploymentConfig, deploy, create_clones, optimize_clones,
placement_plan), quantize (tf.contrib.quantize's functions), tflite (a graph to a
TensorFlow Lite model, and its interpreter), precision (the session settings of a
precision), ordered_sync (OrderedSyncReplicasOptimizer, for seeded synchronous workers),
sizing (plan_cluster's predictions) and network_traffic (the bytes a step moves through each
link, which the predictions carry). The other modules are model_deploy's parts
(placement, variable_sharing, replicas, all_reduce, sync_batch_norm, accumulation,
compression): internal, named freely (model_deploy re-exports placement's public names).

Importing it repairs tf-slim and prefers tf-keras, as importing slim_deploy.common does.
"""
from slim_deploy import common  # noqa: F401 (imported for its repairs)

__all__ = ['model_deploy', 'network_traffic', 'ordered_sync', 'precision', 'quantize', 'sizing',
           'tflite']
