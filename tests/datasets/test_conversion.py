"""slim_deploy.datasets.conversion: PNG encoding, sharded resumable writes, input checks;
dataset_utils.Progress, the progress bars of conversions and downloads."""
import io
import logging
import os
import select

import numpy as np
import pytest
import tensorflow as tf

from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import conversion, dataset_utils


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
            raise UsageError('item 7: corrupt')
        return b'x'
    with pytest.raises(UsageError, match='item 7: corrupt'):
        conversion.write_shards(conversion.shard_paths(str(tmp_path), 'toy', 'train', 2),
                                list(range(10)), to_example, 'toy train', num_workers=1)
    assert sorted(os.listdir(tmp_path)) == ['toy_train_00000-of-00002.tfrecord']


def test_progress_draws_in_place_on_a_terminal():
    reader_fd, writer_fd = os.openpty()  # A real terminal: the bar is redrawn in place.
    with open(writer_fd, 'w') as terminal:
        with dataset_utils.Progress('toy', 4, stream=terminal, width=4) as progress:
            for _ in range(4):
                progress.advance()
    drawn = ''
    while not drawn.endswith('\n') and select.select([reader_fd], [], [], 10)[0]:
        drawn += os.read(reader_fd, 4096).decode()  # A pty may hand the writes over in parts.
    os.close(reader_fd)
    assert drawn.startswith('\rtoy [....] 0/4')
    assert drawn.endswith('\rtoy [####] 4/4\r\n')  # The terminal sends '\n' as '\r\n'.


def test_progress_logs_one_line_elsewhere(caplog):
    stream = io.StringIO()
    caplog.set_level(logging.INFO)
    with dataset_utils.Progress('toy train', 5, stream=stream) as progress:
        progress.advance(2)
        progress.advance(3)
    assert stream.getvalue() == ''
    assert [record.getMessage() for record in caplog.records] == ['toy train: 5/5 done']
    caplog.clear()
    with pytest.raises(KeyboardInterrupt):  # An unfinished split logs nothing.
        with dataset_utils.Progress('toy test', 5, stream=stream) as progress:
            progress.advance()
            raise KeyboardInterrupt
    assert caplog.records == [] and stream.getvalue() == ''


def test_write_shards_logs_one_line_per_split(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    conversion.write_shards(conversion.shard_paths(str(tmp_path), 'toy', 'train', 2),
                            list(range(5)), lambda i: b'x', 'toy train')
    assert [record.getMessage() for record in caplog.records] == ['toy train: 5/5 done']


def test_require_file(tmp_path):
    with pytest.raises(UsageError) as excinfo:
        conversion.require_file(str(tmp_path / 'x.gz'), 'MNIST labels')
    assert str(excinfo.value) == f'{tmp_path}/x.gz: missing; expected MNIST labels'


def test_require_source_names_the_flag(tmp_path):
    (tmp_path / 'a.tgz').write_bytes(b'')
    assert conversion.require_source(str(tmp_path / 'a.tgz'), 'an archive') == str(
        tmp_path / 'a.tgz')
    assert conversion.require_source(str(tmp_path), 'a directory', directory=True) == str(
        tmp_path)
    with pytest.raises(UsageError) as excinfo:
        conversion.require_source(str(tmp_path / 'b.tgz'), 'an archive')
    assert str(excinfo.value) == f"--source '{tmp_path}/b.tgz' does not exist; expected an archive"
    with pytest.raises(UsageError) as excinfo:
        conversion.require_source(str(tmp_path / 'a.tgz'), 'a directory', directory=True)
    assert str(excinfo.value) == (
        f"--source '{tmp_path}/a.tgz' is not a directory; expected a directory")
