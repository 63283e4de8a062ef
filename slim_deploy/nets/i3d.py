"""TF-Slim's I3D (Carreira and Zisserman, 2017, "Quo Vadis, Action Recognition?"):
Inception v1 inflated to 3-D, built as S3D-G (slim_deploy/nets/s3dg.py) without gating:
Conv2d_1a_7x7 spans 7 frames and the 3x3 convolutions from Conv2d_2c_3x3 on span 3
(full 3x3x3 kernels in i3d_arg_scope, separable with separable_conv3d).
"""
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets import i3d_utils, s3dg

# TF-Slim's module-level aliases.
trunc_normal = s3dg.trunc_normal
conv3d_spatiotemporal = i3d_utils.conv3d_spatiotemporal

# I3D's settings of the S3D-G backbone.
_I3D_BACKBONE = dict(first_temporal_kernel_size=7, temporal_conv_startat='Conv2d_2c_3x3',
                     gating_startat=None, min_depth=16, depth_multiplier=1.0,
                     data_format='NDHWC')


def i3d_arg_scope(weight_decay=1e-7, batch_norm_decay=0.999, batch_norm_epsilon=0.001,
                  use_renorm=False, separable_conv3d=False):
    """The arg_scope I3D is built in: i3d_utils.video_inception_arg_scope with batch
    renormalization if `use_renorm` and separable spatiotemporal convolutions if
    `separable_conv3d`."""
    return i3d_utils.video_inception_arg_scope(weight_decay, batch_norm_decay,
                                               batch_norm_epsilon, use_renorm,
                                               separable_conv3d)


def i3d_base(inputs, final_endpoint='Mixed_5c', scope='InceptionV1'):
    """Builds I3D's backbone on `inputs` [batch, frames, height, width, channels] up to
    `final_endpoint`; returns (net, end_points) as s3dg.s3dg_base does."""
    return s3dg.s3dg_base(inputs, final_endpoint=final_endpoint, scope=scope, **_I3D_BACKBONE)


def i3d(inputs, num_classes=1000, dropout_keep_prob=0.8, is_training=True,
        prediction_fn=slim.softmax, spatial_squeeze=True, reuse=None, scope='InceptionV1'):
    """Builds I3D on `inputs` [batch, frames, height, width, channels] (TF-Slim trains
    64 frames of 224x224 in [-1, 1]) with s3dg.s3dg's classifier; the parameters and
    the returned (net, end_points) are s3dg.s3dg's (num_classes 0 or None: the averaged
    features)."""
    return s3dg.s3dg(inputs, num_classes, final_endpoint='Mixed_5c',
                     dropout_keep_prob=dropout_keep_prob, is_training=is_training,
                     prediction_fn=prediction_fn, spatial_squeeze=spatial_squeeze,
                     reuse=reuse, scope=scope, **_I3D_BACKBONE)


i3d.default_image_size = 224
