"""Worked example: train a small classifier as 2 data-parallel clones on 2 CPU devices.

    python examples/deploy_two_clones.py [--steps 200]

Prints the placement plan, then the mean loss of every 20 steps. Each clone takes its own batch
from a tf.data iterator (model_fn runs once per clone, so each call gets the next batch)
and the clones' gradients are summed into one update of the shared variables.
"""
import argparse

import numpy as np
import tensorflow.compat.v1 as tf
import tf_slim as slim

import slim_deploy.deployment  # noqa: F401  (repairs tf-slim; must precede tf_slim use)
from slim_deploy.deployment import model_deploy


def synthetic_dataset(num_examples=2048, features=16, classes=4, seed=0):
    """Gaussian blobs, one per class: (features [N, features] float32, labels [N] int64)."""
    rng = np.random.RandomState(seed)
    labels = rng.randint(classes, size=num_examples)
    centers = rng.randn(classes, features)
    inputs = centers[labels] + rng.randn(num_examples, features)
    return inputs.astype(np.float32), labels.astype(np.int64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=200, help='training steps')
    parser.add_argument('--batch_size', type=int, default=32, help='examples per clone')
    args = parser.parse_args()

    config = model_deploy.DeploymentConfig(
        num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1'])
    print(model_deploy.placement_plan(config))

    with tf.Graph().as_default():
        with tf.device(config.inputs_device()):
            batches = tf.data.Dataset.from_tensor_slices(synthetic_dataset()).shuffle(
                2048, seed=0).repeat().batch(args.batch_size).prefetch(2)
            iterator = tf.data.make_one_shot_iterator(batches)

        def model_fn():
            inputs, labels = iterator.get_next()
            net = slim.fully_connected(inputs, 32, normalizer_fn=slim.batch_norm,
                                       normalizer_params={'is_training': True}, scope='hidden')
            logits = slim.fully_connected(net, 4, activation_fn=None, scope='logits')
            tf.losses.sparse_softmax_cross_entropy(labels, logits)

        model = model_deploy.deploy(config, model_fn,
                                    optimizer=tf.train.MomentumOptimizer(0.05, 0.9))
        session_config = tf.ConfigProto(device_count={'CPU': 2})
        with tf.Session(config=session_config) as sess:
            sess.run(tf.global_variables_initializer())
            losses = []
            for step in range(1, args.steps + 1):
                losses.append(sess.run(model.train_op))  # train_op returns the total loss.
                if step % 20 == 0:
                    print(f'steps {step - 19:4d}-{step:<4d}  mean loss {np.mean(losses):.4f}')
                    losses = []


if __name__ == '__main__':
    main()
