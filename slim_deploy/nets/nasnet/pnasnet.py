"""PNASNet-5 (Liu et al. 2018, arXiv:1712.00559) as TF-Slim builds it: Mobile and Large.

One cell type throughout: at each reduction point the normal cell itself runs with stride 2
and the depth doubles; the ImageNet stem uses it too. Variable names match TF-Slim's
checkpoints (pnasnet-5_mobile_2017_12_13, pnasnet-5_large_2017_12_13: 1001 classes).
"""
from slim_deploy.nets.nasnet import cells

NORMAL_CELL = cells.CellSpec(
    combinations=((('separable_5x5', 1), ('max_pool_3x3', 1)),
                  (('separable_7x7', 0), ('max_pool_3x3', 0)),
                  (('separable_5x5', 0), ('separable_3x3', 0)),
                  (('separable_3x3', 4), ('max_pool_3x3', 0)),
                  (('separable_3x3', 1), ('none', 0))),
    concat=(2, 3, 4, 5, 6))

MOBILE = cells.NetConfig(  # N = 3 cells per stage, F = 54 filters.
    normal_cell=NORMAL_CELL, reduction_cell=None, num_cells=9, num_conv_filters=54,
    stem_multiplier=1.0, imagenet_stem=True, skip_reduction_layer_input=True,
    drop_path_keep_prob=1.0, total_training_steps=250_000, dense_dropout_keep_prob=0.5)
LARGE = cells.NetConfig(  # N = 4, F = 216.
    normal_cell=NORMAL_CELL, reduction_cell=None, num_cells=12, num_conv_filters=216,
    stem_multiplier=3.0, imagenet_stem=True, skip_reduction_layer_input=True,
    drop_path_keep_prob=0.6, total_training_steps=250_000, dense_dropout_keep_prob=0.5)


def pnasnet_mobile(images, num_classes=1001, is_training=False, config=MOBILE,
                   current_step=None):
    """Builds PNASNet-5 Mobile on `images`, float32 [batch, 224, 224, 3]; see
    cells.build_network for the arguments and the returned (net, end_points)."""
    return cells.build_network(images, num_classes, is_training, config, current_step)


def pnasnet_large(images, num_classes=1001, is_training=False, config=LARGE,
                  current_step=None):
    """Builds PNASNet-5 Large on `images`, float32 [batch, 331, 331, 3]; see
    cells.build_network for the arguments and the returned (net, end_points)."""
    return cells.build_network(images, num_classes, is_training, config, current_step)


def pnasnet_mobile_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                             batch_norm_epsilon=1e-3):
    """The arg_scope for pnasnet_mobile: see cells.nasnet_arg_scope."""
    return cells.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def pnasnet_large_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                            batch_norm_epsilon=1e-3):
    """The arg_scope for pnasnet_large: see cells.nasnet_arg_scope."""
    return cells.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)
