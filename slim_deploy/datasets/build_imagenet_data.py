r"""slim's build_imagenet_data: converts ImageNet's training and validation folders into
slim's TFRecord shards, on the toolkit's ImageNet converter (imagenet.write_splits:
atomic, resumable, parallel).

    python -m slim_deploy.datasets.build_imagenet_data --train_directory=DIR/train \
        --validation_directory=DIR/validation --output_directory=OUT \
        --labels_file=imagenet_lsvrc_2015_synsets.txt \
        --imagenet_metadata_file=imagenet_metadata.txt \
        --bounding_box_file=imagenet_2012_bounding_boxes.csv

Both directories hold <synset>/*.JPEG (preprocess_imagenet_validation_data sorts the
validation images so); --bounding_box_file is process_bounding_boxes' CSV. The shards are
'validation-00000-of-00128' ... and 'train-00000-of-01024' ... in --output_directory, with
the records the imagenet module's docstring lists; labels are 1..1000 in the order of
--labels_file, 0 being background. Unlike slim's script, labels.txt is written too (last,
marking a complete conversion, so a rerun completes an interrupted one), and --num_threads
(threads writing whole shards) need not divide the shard counts.
"""
from absl import app, flags
import tensorflow.compat.v1 as tf

import slim_deploy.common  # noqa: F401  (repairs tf-slim before it is used)
from slim_deploy.datasets import conversion, imagenet

flags.DEFINE_string('train_directory', '/tmp/', 'Training data directory: <synset>/*.JPEG.')
flags.DEFINE_string('validation_directory', '/tmp/',
                    'Validation data directory: <synset>/*.JPEG.')
flags.DEFINE_string('output_directory', '/tmp/', 'Output data directory.')
flags.DEFINE_integer('train_shards', 1024, 'Number of shards in training TFRecord files.')
flags.DEFINE_integer('validation_shards', 128,
                     'Number of shards in validation TFRecord files.')
flags.DEFINE_integer('num_threads', 8, 'Number of threads writing shards.')
flags.DEFINE_string('labels_file', imagenet.SYNSETS_FILENAME,
                    'The synsets of the challenge, one per line; label i+1 is line i\'s.')
flags.DEFINE_string('imagenet_metadata_file', imagenet.METADATA_FILENAME,
                    'Lines \'<synset>\\t<human-readable name>\'.')
flags.DEFINE_string('bounding_box_file', './imagenet_2012_bounding_boxes.csv',
                    'Bounding boxes, \'<JPEG file name>,<xmin>,<ymin>,<xmax>,<ymax>\' lines '
                    'of relative coordinates (process_bounding_boxes.py writes them).')

FLAGS = flags.FLAGS


class ImageCoder:
    """slim's image coding helper (eager): RGB JPEG bytes from PNG or CMYK JPEG bytes,
    and decoded RGB JPEGs."""

    def png_to_jpeg(self, image_data):
        """RGB JPEG bytes (quality 100) of the PNG bytes image_data."""
        return imagenet.encode_rgb_jpeg(tf.io.decode_png(image_data, channels=3))

    def cmyk_to_rgb(self, image_data):
        """RGB JPEG bytes (quality 100) of the CMYK (or any) JPEG bytes image_data."""
        return imagenet.encode_rgb_jpeg(self.decode_jpeg(image_data))

    def decode_jpeg(self, image_data):
        """The uint8 RGB array [height, width, 3] of the JPEG bytes image_data."""
        return tf.io.decode_jpeg(image_data, channels=3).numpy()


def _flag(name):
    """Flag `name`'s value (its default until flags are parsed)."""
    return FLAGS[name].value


def main(unused_argv):
    """Converts the directories the flags name into --output_directory; a bad input ends
    the program with a one-line message naming it."""
    del unused_argv
    directories = {'validation': _flag('validation_directory'),
                   'train': _flag('train_directory')}
    with conversion.ending_scripts_in_one_line():
        imagenet.write_splits(
            _flag('output_directory'),
            lambda split_name, synsets: imagenet.list_synset_folders(
                directories[split_name], synsets),
            {'validation': _flag('validation_shards'), 'train': _flag('train_shards')},
            _flag('labels_file'), _flag('imagenet_metadata_file'),
            _flag('bounding_box_file'), _flag('num_threads'))


if __name__ == '__main__':
    app.run(main)
