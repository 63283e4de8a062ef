"""TF-Slim's S3D-G (Xie et al., 2018): I3D with separable temporal convolutions and
self-gating.

Conv2d_1a_7x7 spans 3 frames (by default); from Conv2d_2c_3x3 on (by default) each 3x3
convolution is a 1x3x3 convolution followed by a 3x1x1 one, and each block's output is
scaled by sigmoid gates computed from its mean. Variables are TF-Slim's, under
'InceptionV1' (see slim_deploy/nets/i3d_utils.py).
"""
from slim_deploy.nets import i3d_utils

s3dg_arg_scope = i3d_utils.video_inception_arg_scope


def s3dg(videos, num_classes=1000, is_training=False, dropout_keep_prob=0.8,
         first_temporal_kernel_size=3, temporal_conv_startat='Conv2d_2c_3x3',
         gating_startat='Conv2d_2c_3x3', depth_multiplier=1.0, min_depth=16,
         scope='InceptionV1'):
    """Builds S3D-G on float32 `videos` [batch, frames, height, width, 3] (TF-Slim trains
    64 frames of 224x224 in [-1, 1]; any number of frames works).

    num_classes: width of the logits layer; 0 or None omits it and returns the averaged
      Mixed_5c features [batch, 1024] instead.
    dropout_keep_prob: probability of keeping a pooled activation before the logits
      layer; dropout acts only when `is_training`, as does batch norm's batch statistics.
    first_temporal_kernel_size: frames spanned by Conv2d_1a_7x7: 1, 3, 5 or 7.
    temporal_conv_startat, gating_startat: the first block ('Conv2d_2c_3x3' or a
      'Mixed_*' block) with separable temporal convolutions, or with self-gating; later
      blocks have them too; None: no block. gating_startat=None builds S3D.
    depth_multiplier, min_depth: every layer's depth d becomes max(int(d *
      depth_multiplier), min_depth).
    Returns (net, end_points) as i3d_utils.video_inception does: logits [batch,
    num_classes] (or the features); end_points from 'Conv2d_1a_7x7' to 'Mixed_5c', and
    'Logits' and 'Predictions'.
    """
    return i3d_utils.video_inception(
        videos, num_classes, is_training, dropout_keep_prob, scope,
        first_temporal_kernel_size=first_temporal_kernel_size,
        temporal_conv_startat=temporal_conv_startat, gating_startat=gating_startat,
        separable=True, depth_multiplier=depth_multiplier, min_depth=min_depth)
