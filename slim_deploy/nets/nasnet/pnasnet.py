"""PNASNet-5 (Liu et al. 2018, arXiv:1712.00559) as TF-Slim builds it: Mobile and Large.

One cell type throughout: at each reduction the normal cell itself runs with stride 2 and
the depth doubles, and it forms the ImageNet stem too. The configurations are
nasnet.HParams (see nasnet._config); variables have TF-Slim's names when built in this
module's arg_scope (checkpoints pnasnet-5_mobile_2017_12_13 and pnasnet-5_large_2017_12_13,
1001 classes).
"""
from slim_deploy.nets.nasnet import nasnet, nasnet_utils

arg_scope = nasnet.arg_scope


def large_imagenet_config():
    """PNASNet-5 Large: 12 cells of 216 filters (N = 4, F = 216)."""
    return nasnet._config(stem_multiplier=3.0, num_cells=12, num_conv_filters=216,
                          drop_path_keep_prob=0.6, skip_reduction_layer_input=1)


def mobile_imagenet_config():
    """PNASNet-5 Mobile: 9 cells of 54 filters (N = 3, F = 54), no drop path."""
    return nasnet._config(stem_multiplier=1.0, num_cells=9, num_conv_filters=54,
                          drop_path_keep_prob=1.0, skip_reduction_layer_input=1)


def pnasnet_large_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                            batch_norm_epsilon=0.001):
    """The arg_scope of build_pnasnet_large: see nasnet.nasnet_large_arg_scope."""
    return nasnet.nasnet_large_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


def pnasnet_mobile_arg_scope(weight_decay=4e-5, batch_norm_decay=0.9997,
                             batch_norm_epsilon=0.001):
    """The arg_scope of build_pnasnet_mobile: see nasnet.nasnet_mobile_arg_scope."""
    return nasnet.nasnet_mobile_arg_scope(weight_decay, batch_norm_decay, batch_norm_epsilon)


_OPERATIONS, _INPUTS = nasnet_utils.cell_tables((
    (('separable_5x5_2', 1), ('max_pool_3x3', 1)),
    (('separable_7x7_2', 0), ('max_pool_3x3', 0)),
    (('separable_5x5_2', 0), ('separable_3x3_2', 0)),
    (('separable_3x3_2', 4), ('max_pool_3x3', 0)),
    (('separable_3x3_2', 1), ('none', 0))))


class PNasNetNormalCell(nasnet_utils.NasNetABaseCell):
    """PNASNet-5's cell: output depth 5 x its filters (the combinations)."""

    def __init__(self, num_conv_filters, drop_path_keep_prob, total_num_cells,
                 total_training_steps, use_bounded_activation=False):
        super().__init__(num_conv_filters, _OPERATIONS, [1, 1, 0, 0, 0, 0, 0], _INPUTS,
                         drop_path_keep_prob, total_num_cells, total_training_steps,
                         use_bounded_activation)


def build_pnasnet_large(images, num_classes, is_training=True, final_endpoint=None,
                        config=None, current_step=None):
    """PNASNet-5 Large on `images` [batch, 331, 331, 3], by default in
    large_imagenet_config(); see nasnet.build_network (end points 'Stem', 'Cell_i',
    'AuxLogits', 'global_pool', 'Logits', 'Predictions')."""
    return nasnet.build_network(images, num_classes, is_training,
                                large_imagenet_config() if config is None else config,
                                final_endpoint, current_step, PNasNetNormalCell)
build_pnasnet_large.default_image_size = 331


def build_pnasnet_mobile(images, num_classes, is_training=True, final_endpoint=None,
                         config=None, current_step=None):
    """PNASNet-5 Mobile on `images` [batch, 224, 224, 3], by default in
    mobile_imagenet_config(); see nasnet.build_network (end points as build_pnasnet_large's).
    """
    return nasnet.build_network(images, num_classes, is_training,
                                mobile_imagenet_config() if config is None else config,
                                final_endpoint, current_step, PNasNetNormalCell)
build_pnasnet_mobile.default_image_size = 224
