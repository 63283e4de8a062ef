"""slim-deploy: TF-Slim's model_deploy for data-parallel training on current TensorFlow.

Importing this package repairs tf-slim for the installed TensorFlow before tf_slim is first
imported, and makes tf.keras and tf.compat.v1.layers resolve to tf-keras, which TF1 graphs
need, unless TF_USE_LEGACY_KERAS says otherwise (see `compat`); it imports no TensorFlow
itself.
"""
from slim_deploy.deployment import compat

compat.repair_before_tf_slim()
compat.prefer_tf_keras()
