"""TF-Slim's LeNet variant: two 5x5 convolution/pooling stages and two fully connected layers.

Designed for 28x28 inputs (MNIST); the variable names match TF-Slim's ('LeNet/conv1/weights').
"""
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)


def lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5,
          prediction_fn=slim.softmax, scope='LeNet'):
    """Builds LeNet on `images`, a float32 [batch, height, width, channels] tensor.

    num_classes: width of the logits layer 'fc4'; 0 or None omits it (and the dropout
      before it) and returns the fc3 features [batch, 1024] instead.
    dropout_keep_prob: probability of keeping an fc3 activation; dropout acts only when
      `is_training`.
    prediction_fn: (logits, scope='Predictions') -> the predictions, built outside the
      variable scope `scope` (slim.softmax: op 'Predictions/Reshape_1').
    Returns (net, end_points): net is the logits [batch, num_classes] (or the features);
    end_points maps 'conv1', 'pool1', 'conv2', 'pool2', 'Flatten', 'fc3', 'dropout3',
    'Logits' and 'Predictions' to their tensors.
    """
    end_points = {}
    with tf.variable_scope(scope, 'LeNet', [images]):
        net = slim.conv2d(images, 32, [5, 5], scope='conv1')
        end_points['conv1'] = net
        net = slim.max_pool2d(net, [2, 2], 2, scope='pool1')
        end_points['pool1'] = net
        net = slim.conv2d(net, 64, [5, 5], scope='conv2')
        end_points['conv2'] = net
        net = slim.max_pool2d(net, [2, 2], 2, scope='pool2')
        end_points['pool2'] = net
        net = slim.flatten(net)
        end_points['Flatten'] = net
        net = slim.fully_connected(net, 1024, scope='fc3')
        end_points['fc3'] = net
        if not num_classes:
            return net, end_points
        net = slim.dropout(net, dropout_keep_prob, is_training=is_training, scope='dropout3')
        end_points['dropout3'] = net
        logits = slim.fully_connected(net, num_classes, activation_fn=None, scope='fc4')
        end_points['Logits'] = logits
    end_points['Predictions'] = prediction_fn(logits, scope='Predictions')
    return logits, end_points


lenet.default_image_size = 28


def lenet_arg_scope(weight_decay=0.0):
    """Returns the arg_scope LeNet is built in: relu, truncated normal weights
    (stddev 0.1) and an L2 penalty of `weight_decay` on every conv/fc weight (0: none)."""
    with slim.arg_scope(
            [slim.conv2d, slim.fully_connected],
            weights_regularizer=slim.l2_regularizer(weight_decay),
            weights_initializer=tf.truncated_normal_initializer(stddev=0.1),
            activation_fn=tf.nn.relu) as scope:
        return scope
