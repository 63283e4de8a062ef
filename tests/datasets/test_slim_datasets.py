"""research/slim's datasets package on slim-deploy: every module's public names and slim's
signatures, get_dataset's tf_slim Datasets (read through slim's DatasetDataProvider), the
converters' run(), slim's ImageNet scripts and the downloads, on miniature sources in the
real formats (raw_datasets) and file:// URLs; no network."""
import contextlib
import glob
import importlib
import inspect
import json
import os
import pathlib
import shutil
import socket
import tarfile
import zipfile

from absl import flags
from absl.testing import flagsaver
import numpy as np
import pytest
import tensorflow as tf2
import tensorflow.compat.v1 as tf
import tf_slim as slim

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import (
    build_imagenet_data,
    conversion,
    dataset_factory,
    dataset_utils,
    digits,
    download_and_convert_cifar10,
    download_and_convert_flowers,
    download_and_convert_mnist,
    download_and_convert_visualwakewords,
    download_and_convert_visualwakewords_lib,
    imagenet,
    preprocess_imagenet_validation_data,
    process_bounding_boxes,
    visualwakewords,
)

from helpers import error_message, run_script
from raw_datasets import (
    IMAGENET_KEYS,
    SYNSETS,
    VALIDATION,
    VWW_SHARDS,
    coco_zips,
    make_cifar,
    make_coco,
    make_flowers,
    make_imagenet,
    make_mnist,
    read_split,
    shard_names,
)

# Upstream's public functions, each as 'name(its parameters)': ours must start with them.
SIGNATURES = {
    'dataset_factory': ['get_dataset(name, split_name, dataset_dir, file_pattern=None, '
                        'reader=None)'],
    'dataset_utils': [
        'int64_feature(values)', 'bytes_list_feature(values)', 'float_list_feature(values)',
        'bytes_feature(values)', 'float_feature(values)',
        'image_to_tfexample(image_data, image_format, height, width, class_id)',
        'download_url(url, dataset_dir)', 'download_and_uncompress_tarball(tarball_url, '
        'dataset_dir)', 'download_and_uncompress_zipfile(zip_url, dataset_dir)',
        "write_label_file(labels_to_class_names, dataset_dir, filename='labels.txt')",
        "has_labels(dataset_dir, filename='labels.txt')",
        "read_label_file(dataset_dir, filename='labels.txt')",
        'open_sharded_output_tfrecords(exit_stack, base_path, num_shards)'],
    **{name: ['get_split(split_name, dataset_dir, file_pattern=None, reader=None)']
       for name in ('cifar10', 'flowers', 'mnist', 'visualwakewords', 'digits')},
    'imagenet': ['get_split(split_name, dataset_dir, file_pattern=None, reader=None)',
                 'create_readable_names_for_imagenet_labels()'],
    **{f'download_and_convert_{name}': ['run(dataset_dir)']
       for name in ('cifar10', 'flowers', 'mnist')},
    'download_and_convert_visualwakewords': [
        'run(dataset_dir, small_object_area_threshold, foreground_class_of_interest)'],
    'download_and_convert_visualwakewords_lib': [
        'download_coco_dataset(dataset_dir)',
        'create_labels_file(foreground_class_of_interest, visualwakewords_labels_file)',
        'create_visual_wakeword_annotations(annotations_file, visualwakewords_annotations_file, '
        'small_object_area_threshold, foreground_class_of_interest)',
        'create_tf_record_for_visualwakewords_dataset(annotations_file, image_dir, '
        'output_path, num_shards)'],
    'build_imagenet_data': ['main(unused_argv)', 'ImageCoder.png_to_jpeg(self, image_data)',
                            'ImageCoder.cmyk_to_rgb(self, image_data)',
                            'ImageCoder.decode_jpeg(self, image_data)'],
    'download_and_convert_flowers': [
        'run(dataset_dir)', 'ImageReader.read_image_dims(self, sess, image_data)',
        'ImageReader.decode_jpeg(self, sess, image_data)'],
    'process_bounding_boxes': ['GetItem(name, root, index=0)', 'GetInt(name, root, index=0)',
                               'FindNumberBoundingBoxes(root)',
                               'ProcessXMLAnnotation(xml_file)'],
}
# Upstream's flags of its script modules, with their defaults.
FLAGS_OF = {
    'build_imagenet_data': {
        'train_directory': '/tmp/', 'validation_directory': '/tmp/',
        'output_directory': '/tmp/', 'train_shards': 1024, 'validation_shards': 128,
        'num_threads': 8, 'labels_file': 'imagenet_lsvrc_2015_synsets.txt',
        'imagenet_metadata_file': 'imagenet_metadata.txt',
        'bounding_box_file': './imagenet_2012_bounding_boxes.csv'},
    'download_and_convert_visualwakewords': {'coco_dirname': 'coco_dataset'},
    'download_and_convert_visualwakewords_lib': {
        'coco_train_url': 'http://images.cocodataset.org/zips/train2014.zip',
        'coco_validation_url': 'http://images.cocodataset.org/zips/val2014.zip',
        'coco_annotations_url':
            'http://images.cocodataset.org/annotations/annotations_trainval2014.zip'},
}
# name: (a split, its size, classes, data_sources inside dataset_dir, slim's items).
SLIM_SPLITS = {
    'cifar10': ('train', 50000, 10, 'cifar10_train.tfrecord', {'image', 'label'}),
    'flowers': ('validation', 350, 5, 'flowers_validation_*.tfrecord', {'image', 'label'}),
    'imagenet': ('validation', 50000, 1001, 'validation-*',
                 {'image', 'label', 'label_text', 'object/bbox', 'object/label'}),
    'mnist': ('test', 10000, 10, 'mnist_test.tfrecord', {'image', 'label'}),
    'visualwakewords': ('val', 40504, 2, 'val.record-*', {'image', 'label', 'object/bbox'}),
}


def parameters(function, count):
    """'(its first `count` parameters, with their defaults)' of `function`."""
    first = list(inspect.signature(function).parameters.values())[:count]
    return f'({", ".join(map(str, first))})'


def closed_port_url(filename):
    """An http URL on this machine that refuses connections: a download fails at once."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return f'http://127.0.0.1:{port}/{filename}'


def read_with_provider(dataset, items=('image', 'label')):
    """Every record of a tf_slim Dataset once, read by slim's DatasetDataProvider in a graph
    with queue runners: (the items' static shapes, [tuple of the items' values])."""
    with tf.Graph().as_default():
        provider = slim.dataset_data_provider.DatasetDataProvider(
            dataset, shuffle=False, num_epochs=1, common_queue_capacity=32,
            common_queue_min=1)
        tensors = provider.get(list(items))
        records = []
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coordinator = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coordinator)
            with contextlib.suppress(tf.errors.OutOfRangeError):
                while True:
                    records.append(tuple(sess.run(tensors)))
            coordinator.request_stop()
            coordinator.join(threads)
    return [tensor.shape.as_list() for tensor in tensors], records


def by_content(images, labels):
    """(label, image bytes) pairs, sorted: records compared whatever the file order."""
    return sorted((int(label), np.asarray(image).tobytes()) for image, label in
                  zip(images, labels))


# --- the public surface ------------------------------------------------------------------

@pytest.mark.parametrize('module_name', sorted(SIGNATURES))
def test_public_functions_have_slims_signatures(module_name):
    module = importlib.import_module(f'slim_deploy.datasets.{module_name}')
    assert importlib.import_module(f'datasets.{module_name}') is module  # slim's path.
    for expected in SIGNATURES[module_name]:
        name, _, rest = expected.partition('(')
        function = module
        for part in name.split('.'):  # A function or a class's method.
            function = getattr(function, part)
        count = 0 if rest == ')' else rest.count(',') + 1
        assert name + parameters(function, count) == expected


def test_public_constants_and_classes():
    assert dataset_utils.LABELS_FILENAME == visualwakewords.LABELS_FILENAME == 'labels.txt'
    assert imagenet.LOAD_READABLE_NAMES is True
    assert importlib.import_module('datasets.flowers').SPLITS_TO_SIZES == {
        'train': 3320, 'validation': 350}
    assert importlib.import_module('datasets.cifar10').SPLITS_TO_SIZES == {
        'train': 50000, 'test': 10000}
    assert inspect.isclass(process_bounding_boxes.BoundingBox)
    assert set(dataset_factory.datasets_map) == {*SLIM_SPLITS, 'digits'}
    for name, module in dataset_factory.datasets_map.items():
        assert module is importlib.import_module(f'slim_deploy.datasets.{name}')
        assert dataset_factory.DATASETS[name] is module.DATASET_INFO


@pytest.mark.parametrize('module_name', sorted(FLAGS_OF))
def test_script_modules_define_slims_flags(module_name):
    importlib.import_module(f'slim_deploy.datasets.{module_name}')
    for name, default in FLAGS_OF[module_name].items():
        assert flags.FLAGS[name].default == default, name


# --- get_dataset and get_split -----------------------------------------------------------

@pytest.mark.parametrize('name', sorted(SLIM_SPLITS))
def test_get_dataset_describes_a_split_without_touching_the_disk(name, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setattr(imagenet, 'LOAD_READABLE_NAMES', False)
    split_name, num_samples, num_classes, data_sources, items = SLIM_SPLITS[name]
    dataset_dir = str(tmp_path / 'not_yet')
    dataset = dataset_factory.get_dataset(name, split_name, dataset_dir)
    assert isinstance(dataset, slim.dataset.Dataset)
    assert dataset.data_sources == os.path.join(dataset_dir, data_sources)
    assert dataset.reader is tf.TFRecordReader
    assert (dataset.num_samples, dataset.num_classes) == (num_samples, num_classes)
    assert dataset.labels_to_names is None
    assert items <= set(dataset.decoder.list_items()) == set(dataset.items_to_descriptions)
    module = dataset_factory.datasets_map[name]
    same = module.get_split(split_name, dataset_dir, 'x-%s-*', tf.WholeFileReader)
    assert (same.data_sources, same.reader) == (
        os.path.join(dataset_dir, f'x-{split_name}-*'), tf.WholeFileReader)
    monkeypatch.chdir(tmp_path)  # slim's export asks with dataset_dir=''.
    assert dataset_factory.get_dataset(name, split_name, '').data_sources == data_sources
    assert os.listdir(tmp_path) == []


def test_get_dataset_reads_labels_txt(tmp_path):
    dataset_utils.write_label_file(labels_to_class_names={0: 'zero', 1: 'one'},
                                   dataset_dir=str(tmp_path))
    for name in ('mnist', 'imagenet'):  # ImageNet's labels.txt spares the download.
        dataset = dataset_factory.get_dataset(name, 'train', str(tmp_path))
        assert dataset.labels_to_names == {0: 'zero', 1: 'one'}


@pytest.mark.parametrize('args, message', [
    (('nope', 'train', ''), "unknown --dataset_name 'nope'; valid: cifar10, digits, flowers, "
                            "imagenet, mnist, visualwakewords"),
    (('mnist', 'validation', ''), "unknown --dataset_split_name 'validation'; valid: train, "
                                  "test"),
])
def test_get_dataset_raises_valueerror_as_slim(args, message):
    with pytest.raises(ValueError) as excinfo:
        dataset_factory.get_dataset(*args)
    assert isinstance(excinfo.value, UsageError) and error_message(excinfo) == message


@pytest.fixture(scope='module')
def mnist_dir(tmp_path_factory):
    """MNIST converted by run() from a miniature source directory (the toolkit's --source):
    (dataset_dir, {split: (images, labels)})."""
    root = tmp_path_factory.mktemp('mnist')
    expected = make_mnist(root / 'source')
    download_and_convert_mnist.run(str(root / 'out'), source=str(root / 'source'))
    return str(root / 'out'), expected


@pytest.fixture(scope='module')
def cifar10_dir(tmp_path_factory):
    """CIFAR-10 converted by run() with no source, its archive already downloaded into
    dataset_dir: (dataset_dir, {split: (images, labels)})."""
    root = tmp_path_factory.mktemp('cifar10')
    archive, expected = make_cifar(root / 'source')
    (root / 'out').mkdir()
    shutil.copy(archive, root / 'out')
    download_and_convert_cifar10.run(str(root / 'out'))
    return str(root / 'out'), expected


def test_run_writes_what_get_split_reads_and_removes_the_downloads(mnist_dir, cifar10_dir):
    assert sorted(os.listdir(mnist_dir[0])) == ['labels.txt', 'manifest.json',
                                                'mnist_test.tfrecord', 'mnist_train.tfrecord']
    assert sorted(os.listdir(cifar10_dir[0])) == ['cifar10_test.tfrecord',
                                                  'cifar10_train.tfrecord', 'labels.txt',
                                                  'manifest.json']


@pytest.mark.parametrize('name, split_name, image_shape', [
    ('mnist', 'test', [28, 28, 1]), ('cifar10', 'test', [32, 32, 3]),
    ('digits', 'test', [8, 8, 1])])
def test_dataset_data_provider_reads_get_datasets_records(name, split_name, image_shape,
                                                          request):
    if name == 'digits':
        dataset_dir = request.getfixturevalue('digits_dir')
        images, labels = digits.load_images()
        indices = digits.split_indices(split_name)
        images, labels = images[indices, :, :, None], labels[indices]
    else:
        dataset_dir, expected = request.getfixturevalue(f'{name}_dir')
        images, labels = expected[split_name]
        images = np.reshape(images, [-1, *image_shape])
    dataset = dataset_factory.get_dataset(name, split_name, dataset_dir)
    assert dataset.labels_to_names[3] == ('cat' if name == 'cifar10' else 'three')
    shapes, records = read_with_provider(dataset)
    assert shapes == [image_shape, []]
    assert len(records) == len(labels)
    assert by_content(*zip(*records)) == by_content(images, labels)


# --- ImageNet's readable names -----------------------------------------------------------

def write_names(directory, count=1000):
    """imagenet_lsvrc_2015_synsets.txt with `count` synsets and imagenet_metadata.txt
    naming them (and one more) in directory; returns its file:// URL."""
    directory.mkdir(exist_ok=True)
    synsets = [f'n{9000 - i:08d}' for i in range(count)]  # Not sorted: file order counts.
    (directory / imagenet.SYNSETS_FILENAME).write_text('\n'.join(synsets) + '\n')
    (directory / imagenet.METADATA_FILENAME).write_text(''.join(
        f'{synset}\tthing {synset[-4:]}, kind\n' for synset in ['n00000001', *synsets]))
    return directory.as_uri()


def test_create_readable_names_for_imagenet_labels(tmp_path):
    names = imagenet.create_readable_names_for_imagenet_labels(write_names(tmp_path / 'ok'))
    assert len(names) == 1001 and names[0] == 'background'
    assert (names[1], names[1000]) == ('thing 9000, kind', 'thing 8001, kind')
    url = write_names(tmp_path / 'short', count=999)
    with pytest.raises(UsageError) as excinfo:
        imagenet.create_readable_names_for_imagenet_labels(url)
    assert error_message(excinfo) == (
        f'{url}/{imagenet.SYNSETS_FILENAME}: 999 synsets; expected 1000')
    missing = (tmp_path / 'missing').as_uri()
    with pytest.raises(dataset_utils.DownloadError) as excinfo:
        imagenet.create_readable_names_for_imagenet_labels(missing)
    assert error_message(excinfo).startswith(
        f'cannot download {missing}/{imagenet.SYNSETS_FILENAME}: ')


def test_imagenet_get_split_downloads_the_names_once(tmp_path, monkeypatch):
    monkeypatch.setattr(imagenet, 'READABLE_NAMES_URL', write_names(tmp_path / 'names'))
    dataset_dir = tmp_path / 'imagenet'
    dataset_dir.mkdir()
    names = imagenet.get_split('train', str(dataset_dir)).labels_to_names
    assert len(names) == 1001 and names[1] == 'thing 9000, kind'
    assert dataset_utils.read_label_file(str(dataset_dir)) == names  # Kept as labels.txt.
    monkeypatch.chdir(tmp_path / 'names')
    assert imagenet.get_split('train', '').labels_to_names == names
    assert 'labels.txt' not in os.listdir('.')  # The working directory gets nothing.


# --- dataset_utils -----------------------------------------------------------------------

def test_list_features_and_label_files(tmp_path):
    assert dataset_utils.bytes_list_feature([b'a', b'b']).bytes_list.value == [b'a', b'b']
    assert dataset_utils.float_list_feature([0.5, 2.0]).float_list.value == [0.5, 2.0]
    dataset_utils.write_label_file(labels_to_class_names={1: 'b', 0: 'a'},
                                   dataset_dir=str(tmp_path), filename='names.txt')
    assert (tmp_path / 'names.txt').read_text() == '0:a\n1:b\n'
    assert dataset_utils.has_labels(str(tmp_path), 'names.txt')
    assert dataset_utils.read_label_file(str(tmp_path), 'names.txt') == {0: 'a', 1: 'b'}


def test_open_sharded_output_tfrecords_is_atomic(tmp_path):
    base = str(tmp_path / 'train.record')
    with pytest.raises(RuntimeError), contextlib.ExitStack() as stack:
        writers = dataset_utils.open_sharded_output_tfrecords(stack, base, 2)
        writers[0].write(b'lost')
        raise RuntimeError('interrupted')
    assert os.listdir(tmp_path) == []
    with contextlib.ExitStack() as stack:
        writers = dataset_utils.open_sharded_output_tfrecords(stack, base, 3)
        for index in range(5):
            writers[index % 3].write(b'%d' % index)
        assert os.listdir(tmp_path) == [] or all('.tmp-' in name
                                                 for name in os.listdir(tmp_path))
    paths = [f'{base}-{shard:05d}-of-00003' for shard in range(3)]
    assert sorted(glob.glob(base + '*')) == paths
    assert [[record.numpy() for record in tf2.data.TFRecordDataset(path)] for path in paths] == [
        [b'0', b'3'], [b'1', b'4'], [b'2']]


def test_download_url_and_uncompress_on_file_urls(tmp_path):
    source = tmp_path / 'source'
    (source / 'd').mkdir(parents=True)
    (source / 'd' / 'a.txt').write_text('a')
    (source / 'd' / 'b.txt').write_text('b')
    with tarfile.open(tmp_path / 'files.tar.gz', 'w:gz') as tar:
        tar.add(source / 'd', 'd')
    shutil.make_archive(str(tmp_path / 'files'), 'zip', source, 'd')
    out = tmp_path / 'out'
    path = dataset_utils.download_url((tmp_path / 'files.tar.gz').as_uri(), str(out))
    assert path == str(out / 'files.tar.gz')
    assert pathlib.Path(path).read_bytes() == (tmp_path / 'files.tar.gz').read_bytes()
    dataset_utils.download_and_uncompress_tarball((tmp_path / 'files.tar.gz').as_uri(),
                                                  str(out / 'tar'))
    assert (out / 'tar' / 'd' / 'b.txt').read_text() == 'b'
    url = (tmp_path / 'files.zip').as_uri()
    dataset_utils.download_and_uncompress_zipfile(url, str(out / 'zip'))
    assert sorted(os.listdir(out / 'zip' / 'd')) == ['a.txt', 'b.txt']
    os.remove(tmp_path / 'files.zip')  # The kept download serves the next call.
    os.remove(out / 'zip' / 'd' / 'a.txt')
    (out / 'zip' / 'd' / 'b.txt').write_text('mine')  # Existing files are kept.
    dataset_utils.download_and_uncompress_zipfile(url, str(out / 'zip'))
    assert [(out / 'zip' / 'd' / name).read_text() for name in ('a.txt', 'b.txt')] == [
        'a', 'mine']
    with zipfile.ZipFile(out / 'evil.zip', 'w') as archive:
        archive.writestr('../escaped.txt', 'x')
    with pytest.raises(UsageError) as excinfo:
        dataset_utils.download_and_uncompress_zipfile('file:///nowhere/evil.zip', str(out))
    assert error_message(excinfo) == (
        f"{out / 'evil.zip'}: member '../escaped.txt' lies outside {out}; refusing to extract it")
    assert not (tmp_path / 'escaped.txt').exists()


@pytest.mark.parametrize('where', ['closed_port', 'missing_file'])
def test_a_failed_download_is_one_line_naming_the_url(where, tmp_path):
    url = closed_port_url('x.tar.gz') if where == 'closed_port' else 'file:///nowhere/x.tar.gz'
    with pytest.raises(dataset_utils.DownloadError) as excinfo:
        dataset_utils.download_url(url, str(tmp_path))
    assert error_message(excinfo).startswith(f'cannot download {url}: ')
    assert os.listdir(tmp_path) == []


# --- the converters' run() ---------------------------------------------------------------

def test_a_bad_source_ends_run_in_one_line(tmp_path):
    source, _ = make_flowers(tmp_path / 'source')  # 15 photos: too few for slim's split.
    with pytest.raises(SystemExit) as excinfo:
        download_and_convert_flowers.run(str(tmp_path / 'out'), source=str(source))
    assert str(excinfo.value.code) == (
        f'{source}: 15 photos; expected more than the 350 of the validation split')


def test_flowers_image_reader_decodes_in_the_callers_session():
    image = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
    data = tf2.io.encode_jpeg(image).numpy()
    with tf.Graph().as_default():
        reader = download_and_convert_flowers.ImageReader()
        with tf.Session() as sess:
            assert tuple(reader.read_image_dims(sess, data)) == (5, 7)
            assert reader.decode_jpeg(sess, data).shape == (5, 7, 3)


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
    """A miniature COCO 2014 and its zips: (directory, expected labels, convert's URL
    options)."""
    root = tmp_path_factory.mktemp('coco')
    expected = make_coco(str(root / 'coco'))
    (root / 'zips').mkdir()
    return str(root / 'coco'), expected, coco_zips((str(root / 'coco'),), root / 'zips')


def test_visualwakewords_run_downloads_with_slims_flags(coco, tmp_path):
    out = tmp_path / 'vww'
    with flagsaver.flagsaver(coco_dirname='coco', **coco[2]):
        download_and_convert_visualwakewords.run(str(out), 0.1, 'person')
    assert sorted(os.listdir(out / 'coco')) == ['annotations', 'annotations.zip', 'train2014',
                                                'train2014.zip', 'val2014', 'val2014.zip']
    assert len(glob.glob(str(out / 'train.record-*-of-00100'))) == 100
    dataset = dataset_factory.get_dataset('visualwakewords', 'train', str(out))
    assert dataset.labels_to_names == {0: 'background', 1: 'person'}
    _, records = read_with_provider(dataset, ['label', 'object/bbox', 'object/label'])
    assert sorted(int(label) for label, _, _ in records) == [0, 0, 0, 1]  # At 10%.
    (boxes, box_labels), = [(bbox, labels) for label, bbox, labels in records if label]
    np.testing.assert_allclose(boxes, [[2 / 20, 3 / 30, 17 / 20, 13 / 30]], rtol=1e-6)
    assert box_labels.tolist() == [1]


def test_offline_run_ends_in_one_line_naming_the_url(tmp_path):
    url = closed_port_url('train2014.zip')
    with flagsaver.flagsaver(coco_train_url=url), pytest.raises(SystemExit) as excinfo:
        download_and_convert_visualwakewords.run(str(tmp_path / 'vww'), 0.005, 'person')
    message = excinfo.value.code
    assert message.startswith(f'cannot download {url}: ') and '\n' not in message
    assert message.endswith('; without network, convert a local copy: download_and_convert_data '
                            '--dataset_name=visualwakewords --dataset_dir=DIR --source=PATH')
    with pytest.raises(UsageError) as excinfo:  # The toolkit's convert(): the same line.
        dataset_factory.convert('visualwakewords', str(tmp_path / 'vww'), coco_train_url=url)
    assert error_message(excinfo) == message


def test_visualwakewords_lib_steps(coco, tmp_path):
    root, expected, _ = coco
    lib = download_and_convert_visualwakewords_lib
    lib.create_labels_file('person', str(tmp_path / 'labels.txt'))
    assert (tmp_path / 'labels.txt').read_text() == '0:background\n1:person\n'
    annotations = str(tmp_path / 'instances_visualwakewords_train2014.json')
    lib.create_visual_wakeword_annotations(visualwakewords.annotations_path(root, 'train'),
                                           annotations, 0.005, 'person')
    with open(annotations) as f:
        written = json.load(f)
    assert [written['annotations'][str(image['id'])]['label']
            for image in written['images']] == [label for _, label, _ in expected['train']]
    assert list(written['categories'].values())[0]['name'] == 'person'
    lib.create_tf_record_for_visualwakewords_dataset(
        annotations, os.path.join(root, 'train2014'), str(tmp_path / 'lib' / 'train.record'),
        VWW_SHARDS['train'])
    converted = visualwakewords.convert(str(tmp_path / 'toolkit'), root,
                                        num_shards=VWW_SHARDS)
    for name in ('train.record-00000-of-00002', 'train.record-00001-of-00002'):
        assert (tmp_path / 'lib' / name).read_bytes() == pathlib.Path(
            converted, name).read_bytes()


# --- slim's ImageNet scripts -------------------------------------------------------------

def test_imagenet_scripts_sort_convert_and_read_back(tmp_path, capsys):
    root = tmp_path / 'imagenet'
    expected = make_imagenet(str(root))
    labels_file = str(root / imagenet.VALIDATION_LABELS_FILENAME)
    preprocess_imagenet_validation_data.main(['p', str(root / 'validation'), labels_file])
    preprocess_imagenet_validation_data.main(['p', str(root / 'validation'), labels_file])
    assert sorted(os.listdir(root / 'validation')) == sorted(set(VALIDATION))
    assert os.listdir(root / 'validation' / 'n00000001') == ['ILSVRC2012_val_00000004.JPEG']
    out = tmp_path / 'out'
    with flagsaver.flagsaver(
            train_directory=str(root / 'train'), validation_directory=str(root / 'validation'),
            output_directory=str(out), train_shards=2, validation_shards=1, num_threads=2,
            labels_file=str(root / imagenet.SYNSETS_FILENAME),
            imagenet_metadata_file=str(root / imagenet.METADATA_FILENAME),
            bounding_box_file=str(root / 'boxes.csv')):
        build_imagenet_data.main([])
    assert shard_names(out) == ['labels.txt', 'manifest.json', 'train-00000-of-00002',
                                'train-00001-of-00002', 'validation-00000-of-00001']
    _, records = read_split('imagenet', 'validation', out, IMAGENET_KEYS)
    assert sorted((features['image/filename'].decode(), label)
                  for _, label, features in records) == sorted(
        (name, SYNSETS.index(synset) + 1) for name, (synset, _) in expected.items()
        if name.startswith('ILSVRC'))
    boxes = {features['image/filename'].decode(): features['image/object/bbox/label'].tolist()
             for _, _, features in records}
    assert boxes['ILSVRC2012_val_00000002.JPEG'] == [SYNSETS.index(VALIDATION[1]) + 1]
    _, records = read_with_provider(dataset_factory.get_dataset('imagenet', 'train', str(out)),
                                    ['image', 'label', 'label_text'])
    assert len(records) == 7 and {int(label) for _, label, _ in records} == {1, 2, 3}
    assert {text for _, _, text in records} == {b'great white shark', b'tench, Tinca tinca',
                                                b'goldfish'}


def test_build_imagenet_data_ends_in_one_line(tmp_path):
    with flagsaver.flagsaver(labels_file=str(tmp_path / 'none.txt'),
                             output_directory=str(tmp_path)), \
            pytest.raises(SystemExit) as excinfo:
        build_imagenet_data.main([])
    assert excinfo.value.code.startswith(f'{tmp_path / "none.txt"}: missing; expected the list '
                                         'of synsets')


def test_image_coder():
    coder = build_imagenet_data.ImageCoder()
    image = np.tile(np.arange(0, 240, 20, dtype=np.uint8)[:, None, None], (1, 9, 3))
    jpeg = coder.png_to_jpeg(conversion.encode_png(image))
    assert jpeg[:2] == b'\xff\xd8'
    decoded = coder.decode_jpeg(jpeg)
    assert decoded.shape == (12, 9, 3) and np.abs(decoded.astype(int) - image).max() <= 6
    gray = tf2.io.encode_jpeg(image[..., :1]).numpy()
    assert tf2.image.extract_jpeg_shape(coder.cmyk_to_rgb(gray)).numpy().tolist() == [12, 9, 3]


XML = '''<annotation><folder>{synset}</folder><filename>{image}</filename>
<size><width>200</width><height>100</height><depth>3</depth></size>{objects}</annotation>'''
OBJECT = ('<object><name>{0}</name><bndbox><xmin>{1}</xmin><ymin>{2}</ymin><xmax>{3}</xmax>'
          '<ymax>{4}</ymax></bndbox></object>')


def write_annotation(directory, synset, image, *objects):
    (directory / synset).mkdir(parents=True, exist_ok=True)
    (directory / synset / f'{image}.xml').write_text(XML.format(
        synset=synset, image=image, objects=''.join(OBJECT.format(*o) for o in objects)))


def test_process_bounding_boxes(tmp_path, capsys):
    boxes = tmp_path / 'boxes'
    write_annotation(boxes, 'n00000001', 'n00000001_1',
                     ('n00000001', 20, 10, 120, 60),
                     ('n00000002', 0, 0, 100, 100),  # Labelled by the first object: kept.
                     ('Scottish_deerhound', 250, 50, 150, -10),  # Ordered and clamped.
                     ('n00000001', 30, 30, 30, 40))  # Empty: left out.
    write_annotation(boxes, 'n00000001', 'n00000001_2',  # Another listed synset's boxes.
                     ('n00000002', 0, 0, 100, 50))
    write_annotation(boxes, 'n00000009', 'n00000009_1', ('n00000009', 0, 0, 200, 50))
    xml_file = str(boxes / 'n00000001' / 'n00000001_1.xml')
    root = process_bounding_boxes.ElementTree.parse(xml_file).getroot()
    assert process_bounding_boxes.FindNumberBoundingBoxes(root) == 4
    assert process_bounding_boxes.GetItem('name', root, 2) == 'Scottish_deerhound'
    assert process_bounding_boxes.GetInt('xmin', root, 1) == 0
    assert process_bounding_boxes.GetItem('xmin', root, 4) == -1
    third = process_bounding_boxes.ProcessXMLAnnotation(xml_file)[2]
    assert isinstance(third, process_bounding_boxes.BoundingBox)
    assert (third.filename, third.label, third.width, third.height, third.xmin, third.ymax) == (
        'n00000001_1.JPEG', 'n00000001', 200, 100, 250, -10)
    assert (third.xmin_scaled, third.ymin_scaled, third.xmax_scaled, third.ymax_scaled) == (
        0.75, 0.0, 1.0, 0.5)
    process_bounding_boxes.main(['p', str(boxes)])
    first_file = ['n00000001_1.JPEG,0.1000,0.1000,0.6000,0.6000',
                  'n00000001_1.JPEG,0.0000,0.0000,0.5000,1.0000',
                  'n00000001_1.JPEG,0.7500,0.0000,1.0000,0.5000']
    assert capsys.readouterr().out.splitlines() == [
        *first_file, 'n00000001_2.JPEG,0.0000,0.0000,0.5000,0.5000',
        'n00000009_1.JPEG,0.0000,0.0000,1.0000,0.5000']
    (tmp_path / 'synsets.txt').write_text('n00000001\nn00000002\n')
    process_bounding_boxes.main(['p', str(boxes), str(tmp_path / 'synsets.txt')])
    csv = tmp_path / 'boxes.csv'
    csv.write_text(capsys.readouterr().out)
    assert csv.read_text().splitlines() == first_file
    assert imagenet.read_bounding_boxes(str(csv)) == {  # The converter's input.
        'n00000001_1.JPEG': [[0.1, 0.1, 0.6, 0.6], [0.0, 0.0, 0.5, 1.0], [0.75, 0.0, 1.0, 0.5]]}
    (boxes / 'n00000001' / 'broken.xml').write_text('<annotation>')
    with pytest.raises(SystemExit) as excinfo:
        process_bounding_boxes.main(['p', str(boxes)])
    assert excinfo.value.code == f'{boxes}/n00000001/broken.xml: not a readable XML annotation'
    assert 'Failed to parse: ' in capsys.readouterr().err


# --- the entry script --------------------------------------------------------------------

@pytest.mark.slow
def test_script_offline_download_is_one_line(tmp_path):
    url = closed_port_url('train2014.zip')
    result = run_script('download_and_convert_data.py', '--dataset_name=visualwakewords',
                        f'--dataset_dir={tmp_path / "vww"}', f'--coco_train_url={url}',
                        '--coco_dirname=c')
    assert result.returncode == 2 and 'Traceback' not in result.stderr
    errors = [line for line in result.stderr.splitlines()
              if line.startswith('download_and_convert_data.py: error: ')]
    assert len(errors) == 1
    assert errors[0].startswith(f'download_and_convert_data.py: error: cannot download {url}: ')
    assert errors[0].endswith('--source=PATH')
    assert os.listdir(tmp_path / 'vww') == ['c']
