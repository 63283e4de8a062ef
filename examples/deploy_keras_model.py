"""Worked example: a tf-keras model trained by deploy() as 2 data-parallel clones on 2 CPU devices.

    python examples/deploy_keras_model.py [--steps 200] [--variable_update replicated]

The model is built once, before deploy(), and model_fn calls it on each clone's batch; the
clones share its variables (or, with --variable_update=replicated, each clone's device holds a
copy), so they train one model. Prints the placement plan, the model's variables, then the
mean loss of every 20 steps and, at the end, how far batch norm's moving mean has moved (its
updates run as slim's do: clone 0's, each step).
"""
import argparse

from deploy_two_clones import synthetic_dataset  # examples/deploy_two_clones.py
import numpy as np
import tensorflow as tf2
import tensorflow.compat.v1 as tf

import slim_deploy.deployment  # noqa: F401  (first: makes tf.keras tf-keras, which TF1 graphs need)
from slim_deploy.deployment import model_deploy

keras = tf2.keras


def build_model(features=16, classes=4):
    """A functional tf-keras model: dense, batch norm, ReLU, logits."""
    inputs = keras.Input([features])
    net = keras.layers.Dense(32, kernel_regularizer=keras.regularizers.l2(1e-4))(inputs)
    net = keras.layers.ReLU()(keras.layers.BatchNormalization()(net))
    return keras.Model(inputs, keras.layers.Dense(classes)(net))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--steps', type=int, default=200, help='training steps')
    parser.add_argument('--batch_size', type=int, default=32, help='examples per clone')
    parser.add_argument('--variable_update', default='parameter_server',
                        choices=['parameter_server', 'replicated'])
    args = parser.parse_args()

    config = model_deploy.DeploymentConfig(
        num_clones=2, clone_devices=['/device:CPU:0', '/device:CPU:1'],
        variable_update=args.variable_update)
    print(model_deploy.placement_plan(config))

    with tf.Graph().as_default():
        with tf.device(config.inputs_device()):
            batches = tf.data.Dataset.from_tensor_slices(synthetic_dataset()).shuffle(
                2048, seed=0).repeat().batch(args.batch_size).prefetch(2)
            iterator = tf.data.make_one_shot_iterator(batches)
        model = build_model()

        def model_fn():  # Called once per clone.
            inputs, labels = iterator.get_next()
            logits = model(inputs, training=True)  # Batch statistics; moving averages updated.
            tf.losses.sparse_softmax_cross_entropy(labels, logits)
            # Keras keeps its regularization losses on the model: add them (clone 0's count).
            tf.losses.add_loss(tf.add_n(model.losses), tf.GraphKeys.REGULARIZATION_LOSSES)

        deployed = model_deploy.deploy(config, model_fn,
                                       optimizer=tf.train.MomentumOptimizer(0.05, 0.9))
        print(f'{len(tf.trainable_variables())} trainable variables, one model: '
              f'{", ".join(v.op.name for v in tf.trainable_variables())}')
        (moving_mean,) = [v for v in model.weights if 'moving_mean' in v.name]
        with tf.Session(config=tf.ConfigProto(device_count={'CPU': 2})) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(tf.local_variables_initializer())  # The replicated copies.
            losses = []
            for step in range(1, args.steps + 1):
                losses.append(sess.run(deployed.train_op))  # Returns the total loss.
                if step % 20 == 0:
                    print(f'steps {step - 19:4d}-{step:<4d}  mean loss {np.mean(losses):.4f}')
                    losses = []
            print(f'batch norm moving mean: norm {np.linalg.norm(sess.run(moving_mean)):.4f}')


if __name__ == '__main__':
    main()
