"""slim-deploy: TF-Slim's model_deploy for data-parallel training on current TensorFlow.

Importing this package first repairs tf-slim for the installed TensorFlow (see `compat`).
"""
from deployment import compat

compat.repair()
