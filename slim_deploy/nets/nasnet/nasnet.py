"""NASNet-A (Zoph et al. 2017, arXiv:1707.07012) as TF-Slim builds it: CIFAR, Mobile and Large.

Normal and reduction cells from the paper's search; each reduction point inserts a stride-2
reduction cell and doubles the depth. Variable names match TF-Slim's checkpoints
(nasnet-a_mobile_04_10_2017, nasnet-a_large_04_10_2017: 1001 classes).
"""
from slim_deploy.nets.nasnet import cells

NORMAL_CELL = cells.CellSpec(
    combinations=((('separable_5x5', 0), ('separable_3x3', 1)),
                  (('separable_5x5', 1), ('separable_3x3', 1)),
                  (('avg_pool_3x3', 0), ('none', 1)),
                  (('avg_pool_3x3', 1), ('avg_pool_3x3', 1)),
                  (('separable_3x3', 0), ('none', 0))),
    concat=(1, 2, 3, 4, 5, 6))
REDUCTION_CELL = cells.CellSpec(
    combinations=((('separable_5x5', 0), ('separable_7x7', 1)),
                  (('max_pool_3x3', 0), ('separable_7x7', 1)),
                  (('avg_pool_3x3', 0), ('separable_5x5', 1)),
                  (('none', 3), ('avg_pool_3x3', 2)),
                  (('separable_3x3', 2), ('max_pool_3x3', 0))),
    concat=(3, 4, 5, 6))

# 18 cells of 32 filters: 6 @ 768 in the paper's notation (N cells per stage @ final depth).
CIFAR = cells.NetConfig(
    normal_cell=NORMAL_CELL, reduction_cell=REDUCTION_CELL, num_cells=18,
    num_conv_filters=32, stem_multiplier=3.0, imagenet_stem=False,
    skip_reduction_layer_input=False, drop_path_keep_prob=0.6,
    total_training_steps=937_500, dense_dropout_keep_prob=1.0)  # 600 epochs at batch size 32.
MOBILE = cells.NetConfig(  # 4 @ 1056.
    normal_cell=NORMAL_CELL, reduction_cell=REDUCTION_CELL, num_cells=12,
    num_conv_filters=44, stem_multiplier=1.0, imagenet_stem=True,
    skip_reduction_layer_input=False, drop_path_keep_prob=1.0,
    total_training_steps=250_000, dense_dropout_keep_prob=0.5)
LARGE = cells.NetConfig(  # 6 @ 4032.
    normal_cell=NORMAL_CELL, reduction_cell=REDUCTION_CELL, num_cells=18,
    num_conv_filters=168, stem_multiplier=3.0, imagenet_stem=True,
    skip_reduction_layer_input=True, drop_path_keep_prob=0.7,
    total_training_steps=250_000, dense_dropout_keep_prob=0.5)


def nasnet_cifar(images, num_classes=10, is_training=False, config=CIFAR, current_step=None):
    """Builds NASNet-A CIFAR on `images`, float32 [batch, 32, 32, 3]; see cells.build_network
    for the arguments and the returned (net, end_points)."""
    return cells.build_network(images, num_classes, is_training, config, current_step)


def nasnet_mobile(images, num_classes=1001, is_training=False, config=MOBILE,
                  current_step=None):
    """Builds NASNet-A Mobile on `images`, float32 [batch, 224, 224, 3]; see
    cells.build_network for the arguments and the returned (net, end_points)."""
    return cells.build_network(images, num_classes, is_training, config, current_step)


def nasnet_large(images, num_classes=1001, is_training=False, config=LARGE,
                 current_step=None):
    """Builds NASNet-A Large on `images`, float32 [batch, 331, 331, 3]; see
    cells.build_network for the arguments and the returned (net, end_points)."""
    return cells.build_network(images, num_classes, is_training, config, current_step)


def nasnet_cifar_arg_scope(weight_decay=5e-4, batch_norm_decay=0.9, batch_norm_epsilon=1e-5):
    """The arg_scope for nasnet_cifar: see cells.nasnet_arg_scope."""
    return cells.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_mobile_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                            batch_norm_epsilon=1e-3):
    """The arg_scope for nasnet_mobile: see cells.nasnet_arg_scope."""
    return cells.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def nasnet_large_arg_scope(weight_decay=5e-5, batch_norm_decay=0.9997,
                           batch_norm_epsilon=1e-3):
    """The arg_scope for nasnet_large: see cells.nasnet_arg_scope."""
    return cells.nasnet_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)

