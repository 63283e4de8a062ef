"""slim's download_and_convert_flowers: run(dataset_dir) downloads flower_photos.tgz into
dataset_dir, converts it into 5 train and 5 validation shards and labels.txt (what
flowers.get_split reads) and removes the download, as slim's script does; the work is the
toolkit's converter's (flowers.convert: atomic, resumable, parallel). ImageReader is slim's
JPEG-decoding helper."""
import tensorflow.compat.v1 as tf

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.datasets import dataset_factory, flowers


class ImageReader:
    """Decodes JPEG bytes to RGB in the session it is given; build it in that session's
    graph (its ops are added to the default graph)."""

    def __init__(self):
        self._jpeg_data = tf.placeholder(dtype=tf.string)
        self._decoded = tf.image.decode_jpeg(self._jpeg_data, channels=3)

    def read_image_dims(self, sess, image_data):
        """(height, width) of the JPEG bytes image_data."""
        return self.decode_jpeg(sess, image_data).shape[:2]

    def decode_jpeg(self, sess, image_data):
        """The uint8 array [height, width, 3] of the JPEG bytes image_data."""
        return sess.run(self._decoded, feed_dict={self._jpeg_data: image_data})


def run(dataset_dir, source=None):
    """Converts the flowers into dataset_dir (created if missing) unless they are already
    there.

    source: flower_photos.tgz or its extracted directory, read in place; None downloads
    the archive into dataset_dir and removes it once converted. A bad source or a failed
    download ends the program with a one-line message (SystemExit; see
    dataset_factory.run_converter).
    """
    dataset_factory.run_converter('flowers', dataset_dir, source, downloads=[flowers.ARCHIVE])
