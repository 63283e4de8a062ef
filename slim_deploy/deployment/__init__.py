"""slim-deploy: TF-Slim's model_deploy for data-parallel training on current TensorFlow.

Importing this package repairs a tf_slim imported before it for the installed TensorFlow
(slim_deploy's import finder repairs it right before its import otherwise), and makes
tf.keras and tf.compat.v1.layers resolve to tf-keras, which TF1 graphs need, unless
TF_USE_LEGACY_KERAS says otherwise (see `compat`); it imports no TensorFlow itself.
"""
import sys

from slim_deploy.deployment import compat

if 'tf_slim' in sys.modules:
    compat.repair()
compat.prefer_tf_keras()
