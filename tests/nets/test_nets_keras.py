"""The tf-keras applications in the zoo (slim_deploy/nets/keras_applications): each builds from
scratch behind the factory's contract, trains a step, has its published size, and trains on the
embedded digits in every variable update, then evaluates and exports like slim's nets."""
import os

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.deployment.model_deploy import DeploymentConfig, deploy
from slim_deploy.image_classifier import evaluate, export, run_record, train
from slim_deploy.image_classifier.config import TrainConfig
from slim_deploy.nets import keras_applications, nets_factory

from clusters import launch_cluster
from helpers import checkpoint_step, parameters

APPLICATIONS = sorted(keras_applications.APPLICATIONS)
CLASSES = 5
# Published parameter counts (1000 classes): the Keras applications table (ResNet50 exactly,
# EfficientNetB0 5.3M, ConvNeXtTiny 28.6M), and MobileNetV3-Small 1.0's 2.5M (its paper).
PUBLISHED = {'keras_resnet50': 25_636_712, 'keras_efficientnet_b0': 5.3e6,
             'keras_convnext_tiny': 28.6e6, 'keras_mobilenet_v3_small': 2.5e6}
FEATURES = {'keras_resnet50': 2048, 'keras_efficientnet_b0': 1280, 'keras_convnext_tiny': 768,
            'keras_mobilenet_v3_small': 576}
BATCH_NORMS = {'keras_resnet50': 53, 'keras_efficientnet_b0': 49, 'keras_convnext_tiny': 0,
               'keras_mobilenet_v3_small': 34}


def _images(size=32):
    return np.random.RandomState(0).uniform(0, 255, (2, size, size, 3)).astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize('name', APPLICATIONS)
def test_each_application_trains_a_step_from_scratch(name):
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn(name, CLASSES, weight_decay=1e-4,
                                                 is_training=True)
        logits, end_points = network_fn(tf.constant(_images()))
        assert logits.shape.as_list() == [2, CLASSES] and end_points['Logits'] is logits
        assert end_points['Predictions'].shape.as_list() == [2, CLASSES]
        assert set(tf.get_collection(tf.GraphKeys.MODEL_VARIABLES)) == set(tf.global_variables())
        kernels = [v for v in tf.trainable_variables() if v.shape.rank > 1]
        assert len(tf.losses.get_regularization_losses()) == len(kernels)
        updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
        assert len(updates) == 2 * BATCH_NORMS[name]  # Moving mean and variance.
        tf.losses.sparse_softmax_cross_entropy([0, 1], logits)
        loss = tf.losses.get_total_loss()
        with tf.control_dependencies(updates):
            step = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            before = session.run(loss)
            session.run(step)
            assert np.isfinite(before) and session.run(loss) != before


@pytest.mark.parametrize('name', [
    pytest.param(name, marks=[] if name == 'keras_mobilenet_v3_small' else pytest.mark.slow)
    for name in APPLICATIONS])
def test_inference_is_deterministic_and_updates_nothing(name):
    with tf.Graph().as_default():
        logits, _ = nets_factory.get_network_fn(name, CLASSES)(tf.constant(_images()))
        assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == []
        assert tf.losses.get_regularization_losses() == []  # No weight decay asked.
        with tf.Session() as session:
            session.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(session.run(logits), session.run(logits))


@pytest.mark.slow
@pytest.mark.parametrize('name', APPLICATIONS)
def test_two_clones_share_one_application(name):
    with tf.Graph().as_default():
        network_fn = nets_factory.get_network_fn(name, CLASSES, is_training=True)
        images = iter(tf.split(tf.constant(_images()), 2))

        def model_fn():
            logits, _ = network_fn(next(images))
            tf.losses.sparse_softmax_cross_entropy([0], logits)

        deploy(DeploymentConfig(num_clones=2, clone_devices=['/cpu:0', '/cpu:1']), model_fn,
               optimizer=tf.train.GradientDescentOptimizer(0.1))
        names = sorted(v.op.name for v in tf.trainable_variables())
    with tf.Graph().as_default():
        nets_factory.get_network_fn(name, CLASSES, is_training=True)(tf.constant(_images()))
        assert names == sorted(v.op.name for v in tf.trainable_variables())


@pytest.mark.slow
@pytest.mark.parametrize('name', APPLICATIONS)
def test_published_size_and_features_without_classes(name):
    with tf.Graph().as_default():
        nets_factory.get_network_fn(name, 1000)(tf.zeros([1, 224, 224, 3]))
        count = parameters(tf.global_variables())
    assert abs(count - PUBLISHED[name]) / PUBLISHED[name] < 0.025, count
    with tf.Graph().as_default():
        features, end_points = nets_factory.get_network_fn(name, None)(tf.constant(_images()))
    assert features.shape.as_list() == [2, FEATURES[name]] and end_points == {}


# Plain SGD: no slot variables to create (RMSProp, the default, triples the variables; each
# optimizer is tested in tests/training/test_optimization.py).
def _train_config(train_dir, digits_dir, name, variable_update):
    return TrainConfig.from_flags({
        'train_dir': str(train_dir), 'dataset_dir': digits_dir, 'model_name': name,
        'train_image_size': 32, 'batch_size': 4, 'num_clones': 2, 'max_number_of_steps': 3,
        'variable_update': variable_update, 'save_summaries_secs': 0, 'optimizer': 'sgd'})


# Every application is built by the same builder, and each trains a step and shares its
# variables between clones above: the entry points' paths and the other variable updates are
# shown with one application each (they take a minute apiece).
@pytest.mark.slow
def test_trains_evaluates_and_exports_on_digits(digits_dir, tmp_path):
    config = _train_config(tmp_path, digits_dir, 'keras_efficientnet_b0', 'parameter_server')
    assert train.train(config) == 3
    metrics = evaluate.evaluate(run_record.eval_config(
        str(tmp_path), eval_dir=str(tmp_path / 'eval'), max_num_batches=1))
    assert metrics['global_step'] == 3 and 0 <= metrics['accuracy'] <= 1
    export.export(run_record.export_config(str(tmp_path), saved_model_dir=str(tmp_path / 'model')))
    assert os.path.exists(tmp_path / 'model' / 'saved_model.pb')


@pytest.mark.slow
def test_trains_replicated_on_digits(digits_dir, tmp_path):
    assert train.train(_train_config(tmp_path, digits_dir, 'keras_mobilenet_v3_small',
                                     'replicated')) == 3


@pytest.mark.slow
@pytest.mark.cluster
def test_trains_collective_through_the_launcher(digits_dir, tmp_path):
    name = 'keras_mobilenet_v3_small'
    code, output = launch_cluster(
        '--num_ps_tasks=0', '--worker_replicas=2',
        args=[f'--train_dir={tmp_path}', f'--dataset_dir={digits_dir}', f'--model_name={name}',
              '--train_image_size=32', '--batch_size=4', '--max_number_of_steps=3',
              '--variable_update=collective', '--optimizer=sgd'], timeout=300)
    assert code == 0, output[-6000:]
    assert checkpoint_step(tmp_path) == 3
