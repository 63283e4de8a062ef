"""What every other package of slim-deploy uses.

Public (__all__): errors (UsageError, DataError, StorageError, ClusterError,
Interrupted, check_int), bounds (Bounds: the values a numeric setting takes), registry
(Registry: names to things, with one-line errors), compat (the tf-slim repairs). Internal:
fileio (atomic writes), native_stderr (capturing what C++ prints).

Importing this package repairs a tf_slim imported before it for the installed TensorFlow
(slim_deploy's import finder repairs it right before its import otherwise), and makes
tf.keras and tf.compat.v1.layers resolve to tf-keras, which TF1 graphs need, unless
TF_USE_LEGACY_KERAS says otherwise (see `compat`); it imports no TensorFlow itself.
"""
import sys

from slim_deploy.common import compat

if 'tf_slim' in sys.modules:
    compat.repair()
compat.prefer_tf_keras()

__all__ = ['bounds', 'compat', 'errors', 'registry']
