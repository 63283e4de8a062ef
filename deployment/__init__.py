"""slim-deploy: TF-Slim's model_deploy for data-parallel training on current TensorFlow.

Importing this package repairs tf-slim for the installed TensorFlow before tf_slim is first
imported (see `compat`); it imports no TensorFlow itself.
"""
from deployment import compat

compat.repair_before_tf_slim()
