"""datasets.conversion: PNG encoding, sharded resumable writes, progress."""
import io
import os

import numpy as np
import pytest
import tensorflow as tf

from datasets import conversion


@pytest.mark.parametrize('shape', [(5, 7), (5, 7, 1), (4, 6, 3)])
def test_encode_png_round_trips(shape):
    image = np.random.RandomState(0).randint(0, 256, shape).astype(np.uint8)
    decoded = tf.io.decode_png(conversion.encode_png(image)).numpy()
    np.testing.assert_array_equal(decoded, image.reshape(shape[0], shape[1], -1))


def read_shards(paths):
    return [[record.numpy() for record in tf.data.TFRecordDataset(path)] for path in paths]


def test_write_shards_splits_in_order_and_skips_complete_shards(tmp_path):
    items = list(range(10))
    paths = conversion.shard_paths(str(tmp_path), 'toy', 'train', 3)
    assert conversion.write_shards(paths, items, lambda i: b'%d' % i, 'toy train',
                                   num_workers=2) == paths
    assert [os.path.basename(p) for p in paths] == [
        f'toy_train_0000{i}-of-00003.tfrecord' for i in range(3)]
    assert read_shards(paths) == [[b'0', b'1', b'2', b'3'], [b'4', b'5', b'6'],
                                  [b'7', b'8', b'9']]
    os.remove(paths[1])
    written = []

    def to_example(item):
        written.append(item)
        return b'%d' % item
    conversion.write_shards(paths, items, to_example, 'toy train')
    assert written == [4, 5, 6]  # Only the missing shard is written again.
    assert read_shards(paths)[1] == [b'4', b'5', b'6']


def test_a_failing_example_leaves_no_shard_that_looks_complete(tmp_path):
    def to_example(item):
        if item == 7:
            raise conversion.ConversionError('item 7: corrupt')
        return b'x'
    with pytest.raises(conversion.ConversionError, match='item 7: corrupt'):
        conversion.write_shards(conversion.shard_paths(str(tmp_path), 'toy', 'train', 2),
                                list(range(10)), to_example, 'toy train', num_workers=1)
    assert sorted(os.listdir(tmp_path)) == ['toy_train_00000-of-00002.tfrecord']


def test_progress_draws_a_bar_and_ends_the_line():
    stream = io.StringIO()
    progress = conversion.Progress('toy', 4, stream=stream, width=4)
    for _ in range(4):
        progress.advance()
    assert stream.getvalue().startswith('\rtoy [....] 0/4')
    assert stream.getvalue().endswith('\rtoy [####] 4/4\n')


def test_require_file(tmp_path):
    with pytest.raises(conversion.ConversionError,
                       match=rf'^{tmp_path}/x.gz: missing; expected MNIST labels$'):
        conversion.require_file(str(tmp_path / 'x.gz'), 'MNIST labels')

