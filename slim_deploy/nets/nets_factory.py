"""Every network by name, behind one calling convention.

    network_fn = get_network_fn('inception_v3', num_classes=1001, is_training=True)
    logits, end_points = network_fn(images)   # images: [batch, 299, 299, 3]

`NETWORKS` is the registry (flag --model_name): one `Network` record per name, holding the
builder, its arg_scope, its default input size and its preprocessing together. Adding a net
is one entry.
"""
import dataclasses
from typing import Callable

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim before it is used)
import tensorflow.compat.v1 as tf
import tf_slim as slim
from tf_slim.nets import alexnet, inception, overfeat, resnet_utils, resnet_v1, resnet_v2, vgg

from slim_deploy.deployment.errors import UsageError
from slim_deploy.deployment.registry import Registry
from slim_deploy.nets import (cifarnet, i3d, inception_resnet_v2, inception_v4, keras_applications,
                              lenet, mobilenet_v1, s3dg)
from slim_deploy.nets.mobilenet import framework as mobilenet_framework, mobilenet_v2, mobilenet_v3
from slim_deploy.nets.nasnet import nasnet, pnasnet


@dataclasses.dataclass(frozen=True)
class Network:
    """One registered network.

    builder: (images, num_classes, is_training=..., **kwargs) -> (net, end_points); with
      num_classes None it builds no logits layer and net is the features before it.
    arg_scope: (weight_decay=...) -> the arg_scope the builder runs in.
    default_image_size: side, in pixels, of the square input the net was designed for.
    preprocessing: the preprocessing family its inputs need, a name in
      preprocessing_factory.PREPROCESSING ('inception', 'vgg', 'cifarnet', 'lenet', 'video',
      'keras', 'keras_caffe').
    logits_optional: False for builders that always build a logits layer (tf_slim 1.1.0's
      AlexNet, OverFeat, VGG and Inception): they need num_classes > 0.
    """
    builder: Callable
    arg_scope: Callable
    default_image_size: int
    preprocessing: str
    logits_optional: bool = True


_MOBILENET_SCOPE = mobilenet_framework.mobilenet_arg_scope
_RESNET_SCOPE = resnet_utils.resnet_arg_scope

# Preprocessing: VGG's for VGG and ResNet v1 (their checkpoints come from Caffe), Inception's
# for the other ImageNet nets, CifarNet's for NASNet-CIFAR, the video scheme for I3D and S3D-G.
# TF-Slim gave ResNet v2 VGG's, although its published ResNet v2 checkpoints were trained with
# Inception's, and had none for AlexNet, OverFeat, NASNet-CIFAR, I3D and S3D-G.
NETWORKS = Registry('model_name', {
    'alexnet_v2': Network(alexnet.alexnet_v2, alexnet.alexnet_v2_arg_scope, 224, 'inception',
                          logits_optional=False),
    'cifarnet': Network(cifarnet.cifarnet, cifarnet.cifarnet_arg_scope, 32, 'cifarnet'),
    'i3d': Network(i3d.i3d, i3d.i3d_arg_scope, 224, 'video'),
    'inception_resnet_v2': Network(inception_resnet_v2.inception_resnet_v2,
                                   inception_resnet_v2.inception_resnet_v2_arg_scope, 299,
                                   'inception'),
    'inception_v1': Network(inception.inception_v1, inception.inception_v1_arg_scope, 224,
                            'inception', logits_optional=False),
    'inception_v2': Network(inception.inception_v2, inception.inception_v2_arg_scope, 224,
                            'inception', logits_optional=False),
    'inception_v3': Network(inception.inception_v3, inception.inception_v3_arg_scope, 299,
                            'inception', logits_optional=False),
    'inception_v4': Network(inception_v4.inception_v4, inception_v4.inception_v4_arg_scope, 299,
                            'inception'),
    'lenet': Network(lenet.lenet, lenet.lenet_arg_scope, 28, 'lenet'),
    'mobilenet_edgetpu': Network(mobilenet_v3.edgetpu, _MOBILENET_SCOPE, 224, 'inception'),
    'mobilenet_edgetpu_075': Network(mobilenet_v3.edgetpu_075, _MOBILENET_SCOPE, 224,
                                     'inception'),
    'mobilenet_v1': Network(mobilenet_v1.mobilenet_v1, mobilenet_v1.mobilenet_v1_arg_scope, 224,
                            'inception'),
    'mobilenet_v1_025': Network(mobilenet_v1.mobilenet_v1_025,
                                mobilenet_v1.mobilenet_v1_arg_scope, 224, 'inception'),
    'mobilenet_v1_050': Network(mobilenet_v1.mobilenet_v1_050,
                                mobilenet_v1.mobilenet_v1_arg_scope, 224, 'inception'),
    'mobilenet_v1_075': Network(mobilenet_v1.mobilenet_v1_075,
                                mobilenet_v1.mobilenet_v1_arg_scope, 224, 'inception'),
    'mobilenet_v2': Network(mobilenet_v2.mobilenet_v2, _MOBILENET_SCOPE, 224, 'inception'),
    'mobilenet_v2_035': Network(mobilenet_v2.mobilenet_v2_035, _MOBILENET_SCOPE, 224,
                                'inception'),
    'mobilenet_v2_140': Network(mobilenet_v2.mobilenet_v2_140, _MOBILENET_SCOPE, 224,
                                'inception'),
    'mobilenet_v3_large': Network(mobilenet_v3.large, _MOBILENET_SCOPE, 224, 'inception'),
    'mobilenet_v3_large_minimalistic': Network(mobilenet_v3.large_minimalistic,
                                               _MOBILENET_SCOPE, 224, 'inception'),
    'mobilenet_v3_small': Network(mobilenet_v3.small, _MOBILENET_SCOPE, 224, 'inception'),
    'mobilenet_v3_small_minimalistic': Network(mobilenet_v3.small_minimalistic,
                                               _MOBILENET_SCOPE, 224, 'inception'),
    'nasnet_cifar': Network(nasnet.nasnet_cifar, nasnet.nasnet_cifar_arg_scope, 32, 'cifarnet'),
    'nasnet_large': Network(nasnet.nasnet_large, nasnet.nasnet_large_arg_scope, 331, 'inception'),
    'nasnet_mobile': Network(nasnet.nasnet_mobile, nasnet.nasnet_mobile_arg_scope, 224,
                             'inception'),
    'overfeat': Network(overfeat.overfeat, overfeat.overfeat_arg_scope, 231, 'inception',
                        logits_optional=False),
    'pnasnet_large': Network(pnasnet.pnasnet_large, pnasnet.pnasnet_large_arg_scope, 331,
                             'inception'),
    'pnasnet_mobile': Network(pnasnet.pnasnet_mobile, pnasnet.pnasnet_mobile_arg_scope, 224,
                              'inception'),
    'resnet_v1_50': Network(resnet_v1.resnet_v1_50, _RESNET_SCOPE, 224, 'vgg'),
    'resnet_v1_101': Network(resnet_v1.resnet_v1_101, _RESNET_SCOPE, 224, 'vgg'),
    'resnet_v1_152': Network(resnet_v1.resnet_v1_152, _RESNET_SCOPE, 224, 'vgg'),
    'resnet_v1_200': Network(resnet_v1.resnet_v1_200, _RESNET_SCOPE, 224, 'vgg'),
    'resnet_v2_50': Network(resnet_v2.resnet_v2_50, _RESNET_SCOPE, 224, 'inception'),
    'resnet_v2_101': Network(resnet_v2.resnet_v2_101, _RESNET_SCOPE, 224, 'inception'),
    'resnet_v2_152': Network(resnet_v2.resnet_v2_152, _RESNET_SCOPE, 224, 'inception'),
    'resnet_v2_200': Network(resnet_v2.resnet_v2_200, _RESNET_SCOPE, 224, 'inception'),
    's3dg': Network(s3dg.s3dg, s3dg.s3dg_arg_scope, 224, 'video'),
    'vgg_16': Network(vgg.vgg_16, vgg.vgg_arg_scope, 224, 'vgg', logits_optional=False),
    'vgg_19': Network(vgg.vgg_19, vgg.vgg_arg_scope, 224, 'vgg', logits_optional=False),
    'vgg_a': Network(vgg.vgg_a, vgg.vgg_arg_scope, 224, 'vgg', logits_optional=False),
    # tf-keras applications, built from scratch (slim_deploy/nets/keras_applications).
    **{name: Network(application.builder, application.arg_scope, 224, application.preprocessing)
       for name, application in keras_applications.APPLICATIONS.items()},
})


def get_network_fn(name, num_classes, weight_decay=0.0, is_training=False):
    """Returns network_fn(images, **kwargs) -> (logits, end_points) for the net `name`.

    num_classes: width of the logits layer; 0 or None builds the net without one (only
      nets whose record has logits_optional) and network_fn returns its features.
    weight_decay: L2 penalty on the weights, passed to the net's arg_scope (0: none).
    is_training: whether dropout and batch normalization run in training mode.

    network_fn takes float32 images [batch, height, width, channels], of side
    network_fn.default_image_size for nets with fully connected heads, and passes kwargs
    on to the builder. Outputs pooled to 1x1 are squeezed, so logits are
    [batch, num_classes] and ResNet features [batch, depth]. With a logits layer,
    end_points holds them as 'Logits' and their softmax as 'Predictions', and
    inception_v3's auxiliary logits as 'AuxLogits'.
    Raises UsageError for an unknown name, or no num_classes for a net that needs them.
    """
    network = NETWORKS[name]
    if not num_classes and not network.logits_optional:
        raise UsageError(f'--model_name {name!r} always has a logits layer: num_classes must '
                         f'be a positive integer, got {num_classes!r}')
    num_classes = num_classes or None

    def network_fn(images, **kwargs):
        with slim.arg_scope(network.arg_scope(weight_decay=weight_decay)):
            net, end_points = network.builder(images, num_classes, is_training=is_training,
                                              **kwargs)
        if net.shape.rank == 4 and net.shape[1] == 1 and net.shape[2] == 1:
            net = tf.squeeze(net, [1, 2], name='SpatialSqueeze')
        if num_classes:
            end_points['Logits'] = net
            if 'Predictions' not in end_points:
                end_points['Predictions'] = slim.softmax(net, scope='Predictions')
        return net, end_points

    network_fn.default_image_size = network.default_image_size
    return network_fn
