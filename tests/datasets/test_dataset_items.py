"""Reading slim's richer records: ImageNet's boxes, synsets and names through the
factory's description and slim's decoder; unfinished converter files are never read."""
import numpy as np
import tensorflow.compat.v1 as tf

from slim_deploy.datasets import dataset_factory, dataset_utils


def imagenet_record(boxes, label=3):
    """A serialized ImageNet-style record of a 4x6 RGB PNG with `boxes` [[ymin, xmin,
    ymax, xmax], ...] (relative)."""
    image = tf.io.encode_png(np.zeros([4, 6, 3], np.uint8)).numpy()
    example = dataset_utils.image_to_tfexample(image, b'png', 4, 6, label)
    feature = example.features.feature
    for index, side in enumerate(('ymin', 'xmin', 'ymax', 'xmax')):
        feature[f'image/object/bbox/{side}'].CopyFrom(
            dataset_utils.float_feature([box[index] for box in boxes]))
    feature['image/object/bbox/label'].CopyFrom(
        dataset_utils.int64_feature([label] * len(boxes)))
    feature['image/class/synset'].CopyFrom(dataset_utils.bytes_feature(b'n01443537'))
    feature['image/class/text'].CopyFrom(dataset_utils.bytes_feature(b'goldfish'))
    return example.SerializeToString()


def test_imagenet_items_decode_through_slims_decoder(tmp_path):
    boxes = [[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0]]
    dataset_utils.write_tfrecord(str(tmp_path / 'train-00000-of-00001'),
                                 [imagenet_record(boxes)])
    # A converter killed mid-shard leaves its temporary file behind: it must not be read.
    (tmp_path / 'train-00001-of-00002.tmp-4242').write_bytes(b'half a record')
    split = dataset_factory.get_dataset_split('imagenet', 'train', str(tmp_path))
    assert split.files() == [str(tmp_path / 'train-00000-of-00001')]
    assert {'image/object/bbox/xmin', 'image/class/text'} <= set(split.features)
    dataset = split.as_slim_dataset()
    items = ['image', 'label', 'object/bbox', 'object/label', 'synset', 'label_text']
    assert set(items) <= set(dataset.decoder.list_items())
    with tf.Graph().as_default():
        record = tf.data.make_one_shot_iterator(
            tf.data.TFRecordDataset(split.files())).get_next()
        decoded = dataset.decoder.decode(record, items)
        with tf.Session() as sess:
            image, label, bbox, box_labels, synset, text = sess.run(decoded)
    assert image.shape == (4, 6, 3) and label == 3
    np.testing.assert_allclose(bbox, boxes, rtol=1e-6)
    assert box_labels.tolist() == [3, 3] and synset == b'n01443537' and text == b'goldfish'


def test_visualwakewords_has_boxes_but_no_class_text():
    info = dataset_factory.get_info('visualwakewords')
    assert info.has_bboxes and not info.has_class_text
    assert not dataset_factory.get_info('cifar10').has_bboxes
