"""Every network of the factory as a user names it on the embedded digits: each trains (or,
where a step takes too long for CI, builds its training graph) at its default image size, or
is refused before anything is built, in one line saying why and what to do: a video network
given images, an image size outside the ones the network takes."""
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory
from slim_deploy.image_classifier import builders, train
from slim_deploy.image_classifier.config import EvalConfig, ExportConfig, TrainConfig
from slim_deploy.nets.nets_factory import NETWORKS

VIDEO = sorted(name for name, network in NETWORKS.items() if network.preprocessing == 'video')
IMAGES = sorted(set(NETWORKS) - set(VIDEO))
# Networks whose session (initialization, graph optimization, two steps) at their default
# size takes 20 s or more here: the slow tier builds their training graph (and reads a batch
# of their input) without a step. nasnet_cifar trains for the NASNet family.
BUILD_ONLY = {
    'inception_resnet_v2', 'inception_v3', 'inception_v4', 'nasnet_large', 'nasnet_mobile',
    'pnasnet_large', 'pnasnet_mobile', 'resnet_v1_101', 'resnet_v1_152', 'resnet_v1_200',
    'resnet_v2_101', 'resnet_v2_152', 'resnet_v2_200', 'vgg_a', 'vgg_16', 'vgg_19', 'overfeat',
    'keras_convnext_tiny'}


def test_build_only_names_networks():
    assert BUILD_ONLY <= set(IMAGES)


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
def test_every_image_network_trains_two_steps_on_the_digits(name, digits_dir, tmp_path):
    config = TrainConfig.from_flags({
        'model_name': name, 'dataset_dir': digits_dir, 'train_dir': str(tmp_path),
        'batch_size': 2, 'max_number_of_steps': 2, 'log_every_n_steps': 2})
    if name not in BUILD_ONLY:
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
