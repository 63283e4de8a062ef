"""TF-Slim's I3D (Carreira and Zisserman, 2017): Inception v1 inflated to 3-D.

Conv2d_1a_7x7 spans 7 frames and every 3x3 convolution from Conv2d_2c_3x3 on is 3x3x3;
no gating. Variables are TF-Slim's, under 'InceptionV1' (see slim_deploy/nets/i3d_utils.py).
"""
from slim_deploy.nets import i3d_utils

i3d_arg_scope = i3d_utils.video_inception_arg_scope


def i3d(videos, num_classes=1000, is_training=False, dropout_keep_prob=0.8,
        depth_multiplier=1.0, min_depth=16, scope='InceptionV1'):
    """Builds I3D on float32 `videos` [batch, frames, height, width, 3] (TF-Slim trains
    64 frames of 224x224 in [-1, 1]; any number of frames works).

    num_classes: width of the logits layer; 0 or None omits it and returns the averaged
      Mixed_5c features [batch, 1024] instead.
    dropout_keep_prob: probability of keeping a pooled activation before the logits
      layer; dropout acts only when `is_training`, as does batch norm's batch statistics.
    depth_multiplier, min_depth: every layer's depth d becomes max(int(d *
      depth_multiplier), min_depth).
    Returns (net, end_points) as i3d_utils.video_inception does: logits [batch,
    num_classes] (or the features); end_points from 'Conv2d_1a_7x7' to 'Mixed_5c', and
    'Logits' and 'Predictions'.
    """
    return i3d_utils.video_inception(
        videos, num_classes, is_training, dropout_keep_prob, scope,
        first_temporal_kernel_size=7, temporal_conv_startat='Conv2d_2c_3x3', gating_startat=None,
        separable=False, depth_multiplier=depth_multiplier, min_depth=min_depth)
