"""TF-Slim's Inception family under one name, as research/slim's nets.inception offers it:
each net's builder, its `_base` builder (up to a chosen end point) and its arg_scope.

    from nets import inception
    with slim.arg_scope(inception.inception_v3_arg_scope()):
        logits, end_points = inception.inception_v3(images, 1001, is_training=False)
"""
from slim_deploy.nets.inception_resnet_v2 import (  # noqa: F401  (re-exported)
    inception_resnet_v2,
    inception_resnet_v2_arg_scope,
    inception_resnet_v2_base,
)
from slim_deploy.nets.inception_v1 import inception_v1, inception_v1_arg_scope, inception_v1_base  # noqa: F401
from slim_deploy.nets.inception_v2 import inception_v2, inception_v2_arg_scope, inception_v2_base  # noqa: F401
from slim_deploy.nets.inception_v3 import inception_v3, inception_v3_arg_scope, inception_v3_base  # noqa: F401
from slim_deploy.nets.inception_v4 import inception_v4, inception_v4_arg_scope, inception_v4_base  # noqa: F401
