"""Every network of the factory as a user names it on the embedded digits: each builds its
training graph and reads a batch at its default image size (one network of each builder
trains two steps), or is refused before anything is built, in one line saying why and what
to do: a video network given images, an image size outside the ones the network takes."""
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory
from slim_deploy.image_classifier import builders, train
from slim_deploy.image_classifier.config import EvalConfig, ExportConfig, TrainConfig
from slim_deploy.nets.nets_factory import NETWORKS

VIDEO = sorted(name for name, network in NETWORKS.items() if network.preprocessing == 'video')
IMAGES = sorted(set(NETWORKS) - set(VIDEO))
# The networks that train two steps in the slow tier: of each builder, one whose session
# (initialization, graph optimization, the steps) takes well under 20 s here; the others
# (its depths and widths, and the builders too slow for that) build their training graph and
# read a batch of their input.
TRAINS = {
    'alexnet_v2', 'cifarnet', 'inception_v1', 'inception_v2', 'keras_mobilenet_v3_small',
    'lenet', 'mobilenet_v1', 'mobilenet_v2', 'mobilenet_v3_small', 'nasnet_cifar',
    'resnet_v1_50', 'resnet_v2_50'}


def test_the_networks_that_train_are_image_networks():
    assert TRAINS <= set(IMAGES)


@pytest.mark.parametrize('name', VIDEO)
def test_a_video_network_on_image_data_is_refused_naming_the_datasets(name):
    datasets = ', '.join(dataset_factory.DATASETS)
    for config_class, values in ((TrainConfig, {}), (EvalConfig, {}),
                                 (ExportConfig, {'output_file': 'graph.pb'})):
        with pytest.raises(UsageError) as raised:
            config_class.from_flags({'model_name': name, **values})
        assert str(raised.value) == (
            f'--model_name={name} takes videos [frames, height, width, 3], and --dataset_name='
            f'digits holds images, as every dataset of the toolkit does ({datasets}): train a '
            'video network through deploy() on video records of your own (docs/networks.md)')


def test_video_preprocessing_for_an_image_network_is_refused():
    with pytest.raises(UsageError, match=r'^--preprocessing_name=video takes videos '):
        TrainConfig.from_flags({'model_name': 'lenet', 'preprocessing_name': 'video'})


@pytest.mark.parametrize('name', IMAGES)
def test_every_image_network_takes_its_sizes_and_refuses_the_others_in_one_line(name):
    network = NETWORKS[name]
    low, high = network.min_image_size, network.max_image_size
    assert low <= network.default_image_size <= (high or network.default_image_size)
    for size in (low, high or low, network.default_image_size):
        TrainConfig.from_flags({'model_name': name, 'train_image_size': size})
    refused = ([low - 1] if low > 1 else []) + ([high + 1] if high else [])
    for size in refused:
        with pytest.raises(UsageError) as raised:
            TrainConfig.from_flags({'model_name': name, 'train_image_size': size})
        if high is None:
            assert str(raised.value) == (
                f'--train_image_size={size} is smaller than the smallest input {name} takes, '
                f'{low} pixels: pass --train_image_size={low} or more (its default is '
                f'{network.default_image_size})')
        else:
            assert str(raised.value) == (
                f'--train_image_size={size} is outside the sizes {name} takes, {low} to {high} '
                f'pixels: pass --train_image_size in that range (its default is '
                f'{network.default_image_size})')
    if refused:  # Evaluation and export name their own flag.
        with pytest.raises(UsageError, match=rf'^--eval_image_size={refused[0]} is '):
            EvalConfig.from_flags({'model_name': name, 'eval_image_size': refused[0]})
        with pytest.raises(UsageError, match=rf'^--image_size={refused[0]} is '):
            ExportConfig.from_flags({'model_name': name, 'image_size': refused[0],
                                     'output_file': 'graph.pb'})


@pytest.mark.slow
@pytest.mark.usefixtures('fast_variable_creation')
@pytest.mark.parametrize('name', IMAGES)
def test_every_image_network_builds_its_training_on_the_digits(name, digits_dir, tmp_path):
    config = TrainConfig.from_flags({
        'model_name': name, 'dataset_dir': digits_dir, 'train_dir': str(tmp_path),
        'batch_size': 2, 'max_number_of_steps': 2, 'log_every_n_steps': 2})
    if name in TRAINS:
        assert train.train(config) == 2
        return
    model = builders.classifier(config.data, config.model, is_training=True)
    deployment, _ = builders.deployment(config.devices)
    with tf.Graph().as_default():
        graph = train._build(config, model, deployment, warmup_steps=0)
        assert graph.train_tensor.shape == []
    with tf.Graph().as_default(), tf.Session() as sess:
        batches = model.training_batches(config.data)
        images, labels = sess.run(tf.data.make_one_shot_iterator(batches).get_next())
    size = NETWORKS[name].default_image_size
    assert images.shape[:3] == (2, size, size) and labels.shape == (2,)
