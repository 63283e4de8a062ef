"""Every network by name, behind one calling convention (slim's nets_factory).

    network_fn = get_network_fn('inception_v3', num_classes=1001, is_training=True)
    logits, end_points = network_fn(images)   # images: [batch, 299, 299, 3]

`NETWORKS` is the registry (flag --model_name): one `Network` record per name, holding the
builder, its arg_scope and its preprocessing together. Slim's `networks_map` and
`arg_scopes_map` are read from it. Adding a net is one entry.
"""
import dataclasses
import functools
from typing import Callable

import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.common.registry import Registry
from slim_deploy.nets import (
    alexnet,
    cifarnet,
    i3d,
    inception,
    keras_applications,
    lenet,
    mobilenet_v1,
    overfeat,
    resnet_v1,
    resnet_v2,
    s3dg,
    vgg,
)
from slim_deploy.nets.mobilenet import mobilenet_v2, mobilenet_v3
from slim_deploy.nets.nasnet import nasnet, pnasnet


@dataclasses.dataclass(frozen=True)
class Network:
    """One registered network.

    builder: slim's (images, num_classes, is_training=..., **kwargs) -> (net, end_points);
      with num_classes 0 or None it builds no logits layer and net is the features before
      it. Its `default_image_size` attribute is the side, in pixels, of the square input
      the net was designed for.
    arg_scope: (weight_decay=...) -> the arg_scope the builder runs in.
    preprocessing: the preprocessing family its inputs need, a name in
      preprocessing_factory.PREPROCESSING ('inception', 'vgg', 'cifarnet', 'lenet', 'video',
      'keras', 'keras_caffe').
    min_image_size, max_image_size: the sides in pixels of the square inputs the builder
      takes with its defaults (its convolutions need some size; a head whose kernel or
      weights fit one feature map's size, as VGG's fc6, also takes no larger ones); max None:
      any size from min up.
    """
    builder: Callable
    arg_scope: Callable
    preprocessing: str
    min_image_size: int = 1
    max_image_size: int | None = None

    @property
    def default_image_size(self):
        return self.builder.default_image_size


def _family(module, arg_scope, preprocessing, *names, **sizes):
    """{name: Network} of the builders `names` of `module`, sharing arg_scope, preprocessing
    and `sizes` (min_image_size, max_image_size)."""
    return {name: Network(getattr(module, name), arg_scope, preprocessing, **sizes)
            for name in names}


# Preprocessing: VGG's for VGG and ResNet v1 (their checkpoints come from Caffe), Inception's
# for the other ImageNet nets, CifarNet's for NASNet-CIFAR, the video scheme for I3D and S3D-G.
# TF-Slim gave ResNet v2 VGG's, although its published ResNet v2 checkpoints were trained with
# Inception's, and had none for AlexNet, OverFeat, NASNet-CIFAR, I3D and S3D-G.
NETWORKS = Registry('model_name', {
    'alexnet_v2': Network(alexnet.alexnet_v2, alexnet.alexnet_v2_arg_scope, 'inception',
                          min_image_size=195, max_image_size=226),
    'cifarnet': Network(cifarnet.cifarnet, cifarnet.cifarnet_arg_scope, 'cifarnet',
                        min_image_size=4),
    'i3d': Network(i3d.i3d, i3d.i3d_arg_scope, 'video'),
    'inception_resnet_v2': Network(inception.inception_resnet_v2,
                                   inception.inception_resnet_v2_arg_scope, 'inception',
                                   min_image_size=107),
    'inception_v1': Network(inception.inception_v1, inception.inception_v1_arg_scope,
                            'inception', min_image_size=193, max_image_size=224),
    'inception_v2': Network(inception.inception_v2, inception.inception_v2_arg_scope,
                            'inception', max_image_size=256),
    'inception_v3': Network(inception.inception_v3, inception.inception_v3_arg_scope,
                            'inception', min_image_size=107, max_image_size=346),
    'inception_v4': Network(inception.inception_v4, inception.inception_v4_arg_scope,
                            'inception', min_image_size=107),
    'lenet': Network(lenet.lenet, lenet.lenet_arg_scope, 'lenet', min_image_size=4),
    **_family(mobilenet_v1, mobilenet_v1.mobilenet_v1_arg_scope, 'inception',
              'mobilenet_v1', 'mobilenet_v1_075', 'mobilenet_v1_050', 'mobilenet_v1_025',
              max_image_size=256),
    'mobilenet_v2': Network(mobilenet_v2.mobilenet, mobilenet_v2.training_scope, 'inception'),
    **_family(mobilenet_v2, mobilenet_v2.training_scope, 'inception',
              'mobilenet_v2_035', 'mobilenet_v2_140'),
    **{f'mobilenet_{name}': Network(getattr(mobilenet_v3, builder),
                                    mobilenet_v3.training_scope, 'inception')
       for name, builder in [('v3_large', 'large'), ('v3_small', 'small'),
                             ('v3_large_minimalistic', 'large_minimalistic'),
                             ('v3_small_minimalistic', 'small_minimalistic'),
                             ('edgetpu', 'edge_tpu'), ('edgetpu_075', 'edge_tpu_075')]},
    'nasnet_cifar': Network(nasnet.build_nasnet_cifar, nasnet.nasnet_cifar_arg_scope,
                            'cifarnet', min_image_size=9),
    'nasnet_large': Network(nasnet.build_nasnet_large, nasnet.nasnet_large_arg_scope,
                            'inception', min_image_size=67),
    'nasnet_mobile': Network(nasnet.build_nasnet_mobile, nasnet.nasnet_mobile_arg_scope,
                             'inception', min_image_size=67),
    'overfeat': Network(overfeat.overfeat, overfeat.overfeat_arg_scope, 'inception',
                        min_image_size=231, max_image_size=262),
    'pnasnet_large': Network(pnasnet.build_pnasnet_large, pnasnet.pnasnet_large_arg_scope,
                             'inception', min_image_size=67),
    'pnasnet_mobile': Network(pnasnet.build_pnasnet_mobile, pnasnet.pnasnet_mobile_arg_scope,
                              'inception', min_image_size=67),
    **_family(resnet_v1, resnet_v1.resnet_arg_scope, 'vgg',
              'resnet_v1_50', 'resnet_v1_101', 'resnet_v1_152', 'resnet_v1_200'),
    **_family(resnet_v2, resnet_v2.resnet_arg_scope, 'inception',
              'resnet_v2_50', 'resnet_v2_101', 'resnet_v2_152', 'resnet_v2_200'),
    's3dg': Network(s3dg.s3dg, s3dg.s3dg_arg_scope, 'video'),
    **_family(vgg, vgg.vgg_arg_scope, 'vgg', 'vgg_a', 'vgg_16', 'vgg_19', min_image_size=224,
              max_image_size=255),
    # tf-keras applications, built from scratch (slim_deploy/nets/keras_applications).
    **{name: Network(application.builder, application.arg_scope, application.preprocessing,
                     application.min_image_size)
       for name, application in keras_applications.APPLICATIONS.items()},
})

# Slim's two maps, {name: builder} and {name: arg_scope function}, made from NETWORKS; as in
# slim, get_network_fn reads them, so code that adds a net to both can build it by name.
networks_map = {name: network.builder for name, network in NETWORKS.items()}
arg_scopes_map = {name: network.arg_scope for name, network in NETWORKS.items()}


def get_network_fn(name, num_classes, weight_decay=0.0, is_training=False):
    """Returns network_fn(images, **kwargs) -> (net, end_points) for the net `name`, as
    slim's: the builder called in its arg_scope.

    num_classes: width of the logits layer; 0 or None builds the net without one and
      network_fn returns the features before it, as the net returns them ([batch, 1, 1,
      depth] for most convolutional nets, [batch, depth] for the others).
    weight_decay: L2 penalty on the weights, passed to the net's arg_scope (0: none).
    is_training: whether dropout and batch normalization run in training mode.

    network_fn takes float32 images [batch, height, width, channels] ([batch, frames,
    height, width, 3] for the video nets), of side network_fn.default_image_size for nets
    with fully connected heads, and passes kwargs on to the builder; with num_classes the
    logits are [batch, num_classes].
    Raises UsageError (a ValueError) naming --model_name and the valid names for a name
    not in networks_map.
    """
    if name not in networks_map:
        NETWORKS.check(name)
    builder, arg_scope = networks_map[name], arg_scopes_map[name]

    @functools.wraps(builder)  # Which copies its default_image_size.
    def network_fn(images, **kwargs):
        with slim.arg_scope(arg_scope(weight_decay=weight_decay)):
            return builder(images, num_classes=num_classes, is_training=is_training, **kwargs)

    return network_fn
