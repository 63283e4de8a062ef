"""The ImageNet and Visual Wake Words converters on miniature sources (raw_datasets)."""
import glob
import json
import os
import shutil
import tarfile

import numpy as np
import pytest
import tensorflow as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils, imagenet, visualwakewords

from helpers import error_message, run_script
from raw_datasets import (
    BOXES,
    GRAY_FILE,
    IMAGENET_KEYS,
    NAMES,
    PNG_FILE,
    SYNSETS,
    VWW_SHARDS,
    coco_zips,
    jpeg,
    make_coco,
    make_imagenet,
    read_split,
    shard_names,
    smooth_image,
    write,
)


def snapshot(directory):
    return {name: os.stat(os.path.join(directory, name)).st_mtime_ns
            for name in shard_names(directory)}


# ImageNet.

def convert_imagenet(dataset_dir, source, **options):
    options = {'bounding_boxes': os.path.join(source, 'boxes.csv'), 'train_shards': 2,
               'validation_shards': 1, 'num_workers': 2, **options}
    return imagenet.convert(str(dataset_dir), str(source), **options)


@pytest.fixture(scope='module')
def imagenet_source(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('imagenet_source'))
    return root, make_imagenet(root)


@pytest.fixture(scope='module')
def imagenet_dir(imagenet_source, tmp_path_factory):
    dataset_dir = tmp_path_factory.mktemp('imagenet')
    return convert_imagenet(dataset_dir, imagenet_source[0])


def test_imagenet_files_and_labels(imagenet_dir):
    assert shard_names(imagenet_dir) == [
        'labels.txt', 'manifest.json', 'train-00000-of-00002', 'train-00001-of-00002',
        'validation-00000-of-00001']
    assert dataset_utils.read_label_file(imagenet_dir) == {
        0: 'background', 1: 'great white shark', 2: 'tench, Tinca tinca', 3: 'goldfish'}


@pytest.mark.parametrize('split_name', ['train', 'validation'])
def test_imagenet_records(imagenet_source, imagenet_dir, split_name):
    root, expected = imagenet_source
    split, records = read_split('imagenet', split_name, imagenet_dir, IMAGENET_KEYS)
    assert split.num_classes == 1001 and split.labels_to_names[0] == 'background'
    names = [features['image/filename'].decode() for _, _, features in records]
    prefix = 'n' if split_name == 'train' else 'ILSVRC'
    listed = sorted(name for name in expected if name.startswith(prefix))
    if split_name == 'train':  # Listed synset by synset, in the synset file's order.
        listed.sort(key=lambda name: SYNSETS.index(name.split('_')[0]))
    order = np.random.RandomState(imagenet.SHUFFLE_SEED).permutation(len(listed))
    assert names == [listed[i] for i in order]
    for image, label, features in records:
        name = features['image/filename'].decode()
        synset, pixels = expected[name]
        assert label == SYNSETS.index(synset) + 1
        assert features['image/class/synset'].decode() == synset
        assert features['image/class/text'].decode() == NAMES[synset]
        assert features['image/format'] == b'jpeg'
        assert (features['image/colorspace'], features['image/channels']) == (b'RGB', 3)
        encoded = features['image/encoded']
        assert tf.image.extract_jpeg_shape(encoded).numpy().tolist() == [*pixels.shape[:2], 3]
        assert (features['image/height'], features['image/width']) == pixels.shape[:2]
        if name in (PNG_FILE, GRAY_FILE):  # Re-encoded as RGB JPEG: close, not equal.
            assert np.abs(image.astype(int) - pixels).max() <= 6
        else:  # Stored byte for byte.
            np.testing.assert_array_equal(image, pixels)
            with open(glob.glob(os.path.join(root, '*', '**', name), recursive=True)[0],
                      'rb') as f:
                assert encoded == f.read()
        boxes = BOXES.get(name, [])
        columns = np.reshape(boxes, (-1, 4)).T
        for key, column in zip(('xmin', 'ymin', 'xmax', 'ymax'), columns):
            np.testing.assert_allclose(features[f'image/object/bbox/{key}'], column)
        assert features['image/object/bbox/label'].tolist() == [label] * len(boxes)


def test_imagenet_second_convert_rewrites_nothing(imagenet_source, imagenet_dir):
    before = snapshot(imagenet_dir)
    convert_imagenet(imagenet_dir, imagenet_source[0])
    assert snapshot(imagenet_dir) == before


def test_imagenet_interrupted_conversion_is_completed(imagenet_source, imagenet_dir,
                                                      tmp_path):
    source = str(tmp_path / 'source')
    shutil.copytree(imagenet_source[0], source)
    broken = os.path.join(source, 'train', 'n00000001', 'n00000001_2.JPEG')
    with open(broken, 'rb') as f:
        good = f.read()
    write(broken, good[:len(good) // 2])  # Truncated.
    dataset_dir = tmp_path / 'out'
    with pytest.raises(UsageError) as excinfo:
        convert_imagenet(dataset_dir, source, num_workers=1)
    assert error_message(excinfo).startswith(f'{broken}: not a readable image')
    written = shard_names(dataset_dir)
    assert 'labels.txt' not in written and 'validation-00000-of-00001' in written
    assert len([name for name in written if name.startswith('train-')]) == 1
    assert not [name for name in written if '.tmp-' in name]
    before = snapshot(dataset_dir)
    write(broken, good)
    convert_imagenet(dataset_dir, source)
    for name, mtime in before.items():  # Complete shards were kept.
        assert snapshot(dataset_dir)[name] == mtime
    for name in shard_names(imagenet_dir):
        with open(dataset_dir / name, 'rb') as resumed, \
                open(os.path.join(imagenet_dir, name), 'rb') as clean:
            assert resumed.read() == clean.read(), name


def make_imagenet_tars(root, source):
    """Copies the source's text files and packs its images as the official tars."""
    os.makedirs(root)
    for name in os.listdir(source):
        if name.endswith(('.txt', '.csv')):
            shutil.copy(os.path.join(source, name), root)
    with tarfile.open(os.path.join(root, imagenet.ARCHIVES['train']), 'w') as train:
        for synset in sorted(os.listdir(os.path.join(source, 'train')), reverse=True):
            inner = os.path.join(root, f'{synset}.tar')
            with tarfile.open(inner, 'w') as tar:
                tar.add(os.path.join(source, 'train', synset), arcname='.')
            train.add(inner, arcname=f'{synset}.tar')
            os.remove(inner)
    with tarfile.open(os.path.join(root, imagenet.ARCHIVES['validation']), 'w') as val:
        for name in sorted(os.listdir(os.path.join(source, 'validation'))):
            val.add(os.path.join(source, 'validation', name), arcname=name)


def test_imagenet_from_the_official_tars(imagenet_source, imagenet_dir, tmp_path):
    source = str(tmp_path / 'tars')
    make_imagenet_tars(source, imagenet_source[0])
    dataset_dir = tmp_path / 'out'
    convert_imagenet(dataset_dir, source)
    for name in shard_names(imagenet_dir):  # The same records as from the folders.
        with open(dataset_dir / name, 'rb') as from_tars, \
                open(os.path.join(imagenet_dir, name), 'rb') as from_folders:
            assert from_tars.read() == from_folders.read(), name
    train = os.path.join(source, imagenet.ARCHIVES['train'])
    with tarfile.open(train, 'w') as tar:  # n00000002.tar is missing.
        tar.add(os.path.join(imagenet_source[0], imagenet.SYNSETS_FILENAME),
                arcname='n00000001.tar')
    assert imagenet_error(source, tmp_path / 'out2') == (
        f'{train}: holds no n00000003.tar; expected one tar of JPEG images per synset')
    write(train, b'not a tar')
    assert imagenet_error(source, tmp_path / 'out2').startswith(
        f'{train}: not a readable tar archive (')


def imagenet_error(source, dataset_dir, **options):
    with pytest.raises(UsageError) as excinfo:
        convert_imagenet(dataset_dir, source, **options)
    return error_message(excinfo)


def test_imagenet_bad_inputs(imagenet_source, tmp_path):
    source = str(tmp_path / 'source')
    shutil.copytree(imagenet_source[0], source)
    out = tmp_path / 'out'
    expected = ('a directory holding train/<synset>/*.JPEG and validation/*.JPEG, or '
                'ILSVRC2012_img_train.tar and ILSVRC2012_img_val.tar, and the synset files')
    with pytest.raises(UsageError) as excinfo:
        imagenet.convert(str(out), None)
    assert error_message(excinfo) == ('ImageNet cannot be downloaded without an account: '
                                      f'--source is required, {expected}')
    missing = os.path.join(source, 'missing.txt')
    assert imagenet_error(source, out, synsets_file=missing).startswith(
        f'{missing}: missing; expected the list of synsets')
    metadata = os.path.join(source, 'metadata.txt')
    write(metadata, 'n00000001\ttench\nn00000002\tgoldfish\n')
    assert imagenet_error(source, out, metadata_file=metadata) == (
        f"{metadata}: no name for synset 'n00000003' (1 synsets missing)")
    write(metadata, 'n00000001 tench\n')
    assert imagenet_error(source, out, metadata_file=metadata).startswith(
        f"{metadata}:1: expected '<synset>\\t<human name>' lines")
    labels = os.path.join(source, 'val_labels.txt')
    write(labels, 'n00000001\nn00000002\n')
    assert imagenet_error(source, out, validation_labels_file=labels) == (
        f'{labels}: 2 labels for 4 images in {os.path.join(source, "validation")}; '
        'expected one synset per image')
    write(labels, 'n00000001\nn00000002\nn00000009\nn00000001\n')
    assert imagenet_error(source, out, validation_labels_file=labels) == (
        f"{labels}: synset 'n00000009' is not in the synset list")
    boxes = os.path.join(source, 'bad_boxes.csv')
    write(boxes, 'a.JPEG,0.1,0.2,0.3\n')
    assert imagenet_error(source, out, bounding_boxes=boxes) == (
        f"{boxes}:1: expected 'file name,xmin,ymin,xmax,ymax' lines (relative coordinates), "
        "got 'a.JPEG,0.1,0.2,0.3'")
    write(boxes, 'a.JPEG,0.1,0.2,0.3,x\n')
    assert imagenet_error(source, out, bounding_boxes=boxes).startswith(f'{boxes}:1: expected')
    with pytest.raises(UsageError) as excinfo:
        imagenet.convert(str(out), os.path.join(source, 'boxes.csv'))
    assert error_message(excinfo) == (
        f"--source '{source}/boxes.csv' is not a directory; expected {expected}")
    write(os.path.join(out, 'labels.txt'), '0:something else\n')
    assert imagenet_error(source, out) == (
        f"{out}/labels.txt: exists but is not this dataset's labels file; move it away")
    os.remove(os.path.join(out, 'labels.txt'))
    shutil.rmtree(os.path.join(source, 'train', 'n00000002'))
    synset_dir = os.path.join(source, 'train', 'n00000002')
    assert imagenet_error(source, out) == (
        f'{synset_dir}: missing; expected the JPEG images of synset n00000002')
    assert not [name for name in shard_names(out) if name.startswith('train')]


# Visual Wake Words.

VWW_KEYS = {
    'image/encoded': tf.io.FixedLenFeature([], tf.string),
    'image/format': tf.io.FixedLenFeature([], tf.string),
    'image/height': tf.io.FixedLenFeature([], tf.int64),
    'image/width': tf.io.FixedLenFeature([], tf.int64),
    **{f'image/object/bbox/{key}': tf.io.VarLenFeature(tf.float32)
       for key in ('xmin', 'ymin', 'xmax', 'ymax')},
    'image/object/bbox/label': tf.io.VarLenFeature(tf.int64),
}


def convert_vww(dataset_dir, source, **options):
    options = {'num_shards': VWW_SHARDS, 'num_workers': 2, **options}
    return visualwakewords.convert(str(dataset_dir), str(source), **options)


@pytest.fixture(scope='module')
def coco_source(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('coco'))
    return root, make_coco(root)


@pytest.fixture(scope='module')
def vww_dir(coco_source, tmp_path_factory):
    return convert_vww(tmp_path_factory.mktemp('vww'), coco_source[0])


def test_vww_files_and_labels(vww_dir):
    assert shard_names(vww_dir) == ['labels.txt', 'manifest.json', 'train.record-00000-of-00002',
                                    'train.record-00001-of-00002', 'val.record-00000-of-00001']
    with open(os.path.join(vww_dir, 'labels.txt')) as f:
        assert f.read() == '0:background\n1:person\n'


@pytest.mark.parametrize('split_name', ['train', 'val'])
def test_vww_records(coco_source, vww_dir, split_name):
    root, expected = coco_source
    split, records = read_split('visualwakewords', split_name, vww_dir, VWW_KEYS)
    assert split.num_classes == 2
    assert len(records) == len(expected[split_name])
    for (image, label, features), (file_name, expected_label, boxes) in zip(
            records, expected[split_name]):
        with open(os.path.join(root, visualwakewords.SPLITS[split_name], file_name),
                  'rb') as f:
            data = f.read()
        assert features['image/encoded'] == data
        assert features['image/format'] == b'jpeg'
        np.testing.assert_array_equal(image, tf.io.decode_jpeg(data).numpy())
        assert (features['image/height'], features['image/width']) == image.shape[:2]
        assert label == expected_label, file_name
        for key, column in zip(('xmin', 'ymin', 'xmax', 'ymax'), np.reshape(boxes, (-1, 4)).T):
            np.testing.assert_allclose(features[f'image/object/bbox/{key}'], column)
        assert features['image/object/bbox/label'].tolist() == [1] * len(boxes)


def test_vww_labels_follow_the_threshold_and_class(coco_source):
    path = visualwakewords.annotations_path(coco_source[0], 'train')
    labels = [item[3] for item in visualwakewords.label_images(path, 0.0, 'person')]
    assert labels == [1, 1, 0, 1]
    labels = [item[3] for item in visualwakewords.label_images(path, 0.1, 'car')]
    assert labels == [0, 1, 0, 0]


def test_vww_interrupted_conversion_is_completed(coco_source, vww_dir, tmp_path):
    source = str(tmp_path / 'source')
    shutil.copytree(coco_source[0], source)
    missing = os.path.join(source, 'train2014', 'd.jpg')
    os.rename(missing, missing + '.away')
    dataset_dir = tmp_path / 'out'
    with pytest.raises(UsageError) as excinfo:
        convert_vww(dataset_dir, source)
    assert error_message(excinfo) == f'{missing}: missing; expected a COCO JPEG image'
    assert shard_names(dataset_dir) == ['train.record-00000-of-00002']
    before = snapshot(dataset_dir)
    os.rename(missing + '.away', missing)
    convert_vww(dataset_dir, source)
    assert snapshot(dataset_dir)['train.record-00000-of-00002'] == \
        before['train.record-00000-of-00002']
    for name in shard_names(vww_dir):
        with open(dataset_dir / name, 'rb') as resumed, \
                open(os.path.join(vww_dir, name), 'rb') as clean:
            assert resumed.read() == clean.read(), name


def vww_error(source, dataset_dir, **options):
    with pytest.raises(UsageError) as excinfo:
        convert_vww(dataset_dir, source, **options)
    return error_message(excinfo)


def test_vww_bad_inputs(coco_source, tmp_path):
    source = str(tmp_path / 'source')
    shutil.copytree(coco_source[0], source)
    out = tmp_path / 'out'
    assert vww_error(source, out, foreground_class_of_interest='dog') == (
        f"{visualwakewords.annotations_path(source, 'train')}: no category named 'dog'")
    assert vww_error(os.path.join(source, 'nowhere'), out) == (
        f"--source '{source}/nowhere' does not exist; expected a directory holding "
        "train2014/, val2014/ and annotations/")
    image = os.path.join(source, 'train2014', 'a.jpg')
    write(image, conversion.encode_png(smooth_image(0, 20, 30)))
    assert vww_error(source, out) == f'{image}: not a JPEG image'
    write(image, jpeg(smooth_image(0, 21, 30)))
    assert vww_error(source, out) == f'{image}: 21x30 pixels; its annotation says 20x30'
    annotations = visualwakewords.annotations_path(source, 'train')
    with open(annotations) as f:
        coco = json.load(f)
    write(annotations, json.dumps(coco)[:-20])
    assert vww_error(source, out).startswith(f'{annotations}: not valid JSON (')
    del coco['images'][0]['height']
    write(annotations, json.dumps(coco))
    assert vww_error(source, out).startswith(
        f"{annotations}: missing or malformed field (KeyError: 'height')")
    del coco['images'][0]
    write(annotations, json.dumps(coco))
    assert vww_error(source, out) == (
        f'{annotations}: annotation of image id 7 has an unknown image id or a bbox other '
        'than [x, y, width, height]: [3.0, 2.0, 10.0, 15.0]')
    os.remove(annotations)
    assert vww_error(source, out) == (
        f'{annotations}: missing; expected a COCO instances JSON file')
    write(os.path.join(out, 'labels.txt'), '0:background\n1:car\n')
    assert vww_error(source, out) == (
        f"{out}/labels.txt: exists but is not this dataset's labels file; move it away")
    assert 'train.record-00000-of-00002' not in shard_names(out)  # a.jpg's shard.
    assert not [name for name in shard_names(out) if '.tmp-' in name]


def test_vww_download_extracts_coco(coco_source, tmp_path):
    """source=None downloads the three COCO zips (here file:// URLs) into
    dataset_dir/<coco_dirname>, keeps them and extracts them there."""
    urls = coco_zips(coco_source, tmp_path)
    dataset_dir = tmp_path / 'vww'
    visualwakewords.convert(str(dataset_dir), num_shards=VWW_SHARDS, num_workers=1,
                            coco_dirname='coco', **urls)
    assert len(shard_names(dataset_dir)) == 5  # 3 shards, labels.txt, manifest.json.
    coco_dir = dataset_dir / 'coco'
    assert sorted(os.listdir(coco_dir)) == ['annotations', 'annotations.zip', 'train2014',
                                            'train2014.zip', 'val2014', 'val2014.zip']
    assert sorted(os.listdir(coco_dir / 'train2014')) == ['a.jpg', 'b.jpg', 'c.jpg', 'd.jpg']
    archive = coco_dir / 'train2014.zip'
    shutil.rmtree(coco_dir / 'train2014')
    write(str(archive), b'PK not a zip')  # A kept download is not fetched again.
    os.remove(dataset_dir / 'labels.txt')
    with pytest.raises(UsageError) as excinfo:
        visualwakewords.convert(str(dataset_dir), num_shards=VWW_SHARDS, coco_dirname='coco',
                                **urls)
    assert error_message(excinfo).startswith(f'{archive}: not a readable zip archive')
    assert not glob.glob(str(coco_dir / '**' / '*.tmp-*'), recursive=True)


@pytest.mark.slow
def test_script_passes_the_vww_options(coco_source, tmp_path):
    root, expected = coco_source
    out = tmp_path / 'out'
    result = run_script('download_and_convert_data.py', '--dataset_name=visualwakewords',
                        f'--dataset_dir={out}', f'--source={root}',
                        '--small_object_area_threshold=0.1')
    assert result.returncode == 0, result.stderr[-3000:]
    assert [label for _, label, _ in expected['train']] == [1, 0, 0, 1]  # At 0.005.
    _, records = read_split('visualwakewords', 'train', out, VWW_KEYS)
    assert [label for _, label, _ in records] == [1, 0, 0, 0]  # d.jpg's persons: < 10%.
    result = run_script('download_and_convert_data.py', '--dataset_name=visualwakewords',
                        f'--dataset_dir={tmp_path / "x"}', f'--source={root}',
                        '--bounding_boxes=boxes.csv')
    assert result.returncode == 2
    assert ('download_and_convert_data.py: error: --bounding_boxes applies to imagenet only, '
            'not to visualwakewords') in result.stderr.splitlines()
