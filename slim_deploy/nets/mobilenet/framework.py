"""Transitional: the names nets_factory used before mobilenet_v2/mobilenet_v3 took TF-Slim's
API. Delete this module once nets_factory uses mobilenet_v2.training_scope and
mobilenet_v3.training_scope."""
from slim_deploy.nets.mobilenet.mobilenet import training_scope as mobilenet_arg_scope  # noqa: F401
