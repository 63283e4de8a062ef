"""Graphs that deploy() builds for the tests: lenet's model_fn and the bytes of its variables
(and so of its gradients), a graph deploy() built, and two CPU devices for clones."""
import tensorflow.compat.v1 as tf

from slim_deploy.deployment.model_deploy import deploy
from slim_deploy.nets import nets_factory

# LeNet's variables on 28 x 28 x 1 images, 10 classes, in bytes (float32): its kernels
# (conv 5x5x1x32, conv 5x5x32x64, fc 3136x1024, fc 1024x10) and biases.
LENET_KERNELS = 4 * (5 * 5 * 1 * 32 + 5 * 5 * 32 * 64 + 7 * 7 * 64 * 1024 + 1024 * 10)
LENET_BIASES = 4 * (32 + 64 + 1024 + 10)
LENET = LENET_KERNELS + LENET_BIASES  # 13,098,536 bytes.
CPUS = ['/device:CPU:0', '/device:CPU:1']


def lenet_model_fn(weight_decay=4e-5):
    """model_fn of LeNet on a batch of 2 zero images, its kernels L2-regularized."""
    network_fn = nets_factory.get_network_fn('lenet', 10, weight_decay=weight_decay,
                                             is_training=True)

    def model_fn():
        logits, _ = network_fn(tf.zeros([2, 28, 28, 1]))
        tf.losses.sparse_softmax_cross_entropy(tf.zeros([2], tf.int64), logits)
    return model_fn


def built(config, model_fn, optimizer=None):
    """A graph that deploy() built with `config`, `model_fn` and `optimizer` (default:
    gradient descent at a constant rate, whose scalars are constants)."""
    with tf.Graph().as_default() as graph:
        deploy(config, model_fn, optimizer=optimizer or tf.train.GradientDescentOptimizer(0.1))
    return graph
