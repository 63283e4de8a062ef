"""TF-Slim's CifarNet: two convolution/LRN/pooling stages and three fully connected layers.

Designed for 32x32 inputs (CIFAR-10); the variable names and shapes match TF-Slim's
('CifarNet/conv1/weights', 'CifarNet/logits/weights'), so its checkpoints load. As in
TF-Slim, both poolings are 2x2 with stride 2: a 32x32 input gives fc3 8 * 8 * 64 inputs.
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.nets.fully_convolutional import trunc_normal


def _local_response_norm(net, name):
    """TF-Slim CifarNet's LRN: depth radius 4, bias 1, alpha 0.001 / 9, beta 0.75."""
    return tf.nn.lrn(net, depth_radius=4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def cifarnet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
             prediction_fn=slim.softmax, scope='CifarNet'):
    """Builds CifarNet on `images`, a float32 [batch, height, width, channels] tensor.

    num_classes: width of the logits layer 'logits'; 0 or None omits it and returns the
      fc4 features [batch, 192] instead.
    dropout_keep_prob: probability of keeping an fc3 activation; dropout acts only when
      `is_training`.
    prediction_fn: (logits, scope='Predictions') -> the predictions (slim.softmax: op
      'CifarNet/Predictions/Reshape_1').
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points maps 'conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3', 'fc4', 'Logits'
    and 'Predictions' to their tensors.
    """
    end_points = {}
    with tf.variable_scope(scope, 'CifarNet', [images]):
        net = slim.conv2d(images, 64, [5, 5], scope='conv1')
        end_points['conv1'] = net
        net = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
        end_points['pool1'] = net
        net = _local_response_norm(net, 'norm1')
        net = slim.conv2d(net, 64, [5, 5], scope='conv2')
        end_points['conv2'] = net
        net = _local_response_norm(net, 'norm2')
        net = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
        end_points['pool2'] = net
        net = slim.flatten(net)
        end_points['Flatten'] = net
        net = slim.fully_connected(net, 384, scope='fc3')
        end_points['fc3'] = net
        net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope='dropout3')
        net = slim.fully_connected(net, 192, scope='fc4')
        end_points['fc4'] = net
        if not num_classes:
            return net, end_points
        logits = slim.fully_connected(
            net, num_classes, activation_fn=None, weights_regularizer=None,
            weights_initializer=trunc_normal(1 / 192.0),
            biases_initializer=tf.zeros_initializer(), scope='logits')
        end_points['Logits'] = logits
        end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
    return logits, end_points


cifarnet.default_image_size = 32


def cifarnet_arg_scope(weight_decay=0.004):
    """Returns the arg_scope CifarNet is built in: relu everywhere; convolutions with
    truncated normal weights (stddev 0.05); fully connected layers with truncated normal
    weights (stddev 0.04), biases 0.1 and an L2 penalty of `weight_decay` (0: none).
    The logits layer overrides these: stddev 1/192, zero biases, no penalty."""
    with slim.arg_scope(
            [slim.conv2d],
            weights_initializer=trunc_normal(0.05),
            activation_fn=tf.nn.relu):
        with slim.arg_scope(
                [slim.fully_connected],
                weights_initializer=trunc_normal(0.04),
                biases_initializer=tf.constant_initializer(0.1),
                weights_regularizer=slim.l2_regularizer(weight_decay),
                activation_fn=tf.nn.relu) as scope:
            return scope
