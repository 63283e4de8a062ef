"""Every network of the factory as a user names it on the embedded digits: each reads a batch
at its default image size (once for the networks that read alike), one network of each
builder trains two steps (or builds its training graph), or it is refused before anything is
built, in one line saying why and what to do: a video network given images, an image size
outside the ones the network takes."""
import pytest
import tensorflow.compat.v1 as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_factory
from slim_deploy.image_classifier import builders, train
from slim_deploy.image_classifier.config import EvalConfig, ExportConfig, TrainConfig
from slim_deploy.nets.nets_factory import NETWORKS

VIDEO = sorted(name for name, network in NETWORKS.items() if network.preprocessing == 'video')
IMAGES = sorted(set(NETWORKS) - set(VIDEO))
# One network of each builder (a module of nets/; the others are its depths and widths)
# trains two steps in the slow tier, or, where a session takes far longer than 20 s here,
# builds its training graph through deploy(). Every network builds for training at the ends
# of its sizes in tests/nets/test_nets.py, and reads a batch of its input here.
TRAINS = {
    'alexnet_v2', 'cifarnet', 'inception_v1', 'inception_v2', 'keras_mobilenet_v3_small',
    'lenet', 'mobilenet_v1', 'mobilenet_v2', 'mobilenet_v3_small', 'resnet_v1_50',
    'resnet_v2_50'}
BUILDS = {'inception_resnet_v2', 'inception_v3', 'inception_v4', 'nasnet_cifar', 'overfeat',
          'pnasnet_mobile', 'vgg_a'}


def reading(name):
    """What network `name`'s training reads: (its preprocessing family, default image size)."""
    return NETWORKS[name].preprocessing, NETWORKS[name].default_image_size


READINGS = {key: [name for name in IMAGES if reading(name) == key]
            for key in sorted(set(map(reading, IMAGES)))}


def builder_module(name):
    """The module of nets/ that builds network `name`."""
    builder = NETWORKS[name].builder
    return getattr(builder, 'func', builder).__module__


def test_the_networks_that_train_or_build_cover_every_builder():
    assert TRAINS | BUILDS <= set(IMAGES) and not TRAINS & BUILDS
    assert sorted(builder_module(name) for name in TRAINS | BUILDS) == sorted(
        {builder_module(name) for name in IMAGES})


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


def train_config(name, digits_dir, train_dir):
    """Two steps of batch 2 with plain SGD: no slot variables (RMSProp's, the default, triple
    a network's variables; each optimizer is tested in tests/training/test_optimization.py)."""
    return TrainConfig.from_flags({
        'model_name': name, 'dataset_dir': digits_dir, 'train_dir': str(train_dir),
        'batch_size': 2, 'max_number_of_steps': 2, 'log_every_n_steps': 2, 'optimizer': 'sgd'})


@pytest.mark.slow
@pytest.mark.usefixtures('fast_variable_creation')
@pytest.mark.parametrize('name', sorted(TRAINS | BUILDS))
def test_one_network_of_each_builder_trains_or_builds_its_training(name, digits_dir, tmp_path):
    config = train_config(name, digits_dir, tmp_path)
    if name in TRAINS:
        assert train.train(config) == 2
        return
    model = builders.classifier(config.data, config.model, is_training=True)
    deployment, _ = builders.deployment(config.devices)
    with tf.Graph().as_default():
        graph = train._build(config, model, deployment, warmup_steps=0)
        assert graph.train_tensor.shape == []


@pytest.mark.slow
@pytest.mark.parametrize('family, size', READINGS, ids=lambda value: str(value))
def test_every_image_network_reads_a_batch_of_the_digits_at_its_size(family, size, digits_dir,
                                                                      tmp_path):
    """Each network's training reads with its family's preprocessing at its default size;
    the first of the networks that read alike reads a batch (theirs is the same pipeline)."""
    configs = [train_config(name, digits_dir, tmp_path) for name in READINGS[family, size]]
    models = [builders.classifier(config.data, config.model, is_training=True)
              for config in configs]
    assert {(model.preprocessing_fn.__name__, model.image_size) for model in models} == {
        (f'{family}_preprocessing', size)}
    with tf.Graph().as_default(), tf.Session() as sess:
        batches = models[0].training_batches(configs[0].data)
        images, labels = sess.run(tf.data.make_one_shot_iterator(batches).get_next())
    assert images.shape[:3] == (2, size, size) and labels.shape == (2,)
