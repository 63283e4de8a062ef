"""slim's download_and_convert_visualwakewords_lib: COCO 2014 to Visual Wake Words in
slim's steps (download, labels file, annotations JSON, TFRecord shards), on the toolkit's
converter (visualwakewords: atomic, resumable, parallel writes).

Defines slim's flags --coco_train_url, --coco_validation_url and --coco_annotations_url,
the COCO zips download_coco_dataset() fetches.
"""
import json
import os

from absl import flags

from slim_deploy.common import fileio
from slim_deploy.common.errors import UsageError
from slim_deploy.datasets import dataset_utils, visualwakewords

flags.DEFINE_string('coco_train_url', visualwakewords.COCO_TRAIN_URL,
                    'URL of the zip of COCO 2014\'s training images.')
flags.DEFINE_string('coco_validation_url', visualwakewords.COCO_VALIDATION_URL,
                    'URL of the zip of COCO 2014\'s validation images.')
flags.DEFINE_string('coco_annotations_url', visualwakewords.COCO_ANNOTATIONS_URL,
                    'URL of the zip of COCO 2014\'s annotations.')
URL_FLAGS = ('coco_train_url', 'coco_validation_url', 'coco_annotations_url')

FLAGS = flags.FLAGS


def download_coco_dataset(dataset_dir):
    """Downloads the COCO zips of the URL flags (their defaults until flags are parsed) into
    dataset_dir and extracts them there, skipping what is already there
    (visualwakewords.download_coco)."""
    visualwakewords.download_coco(dataset_dir, [FLAGS[name].value for name in URL_FLAGS])


def create_labels_file(foreground_class_of_interest, visualwakewords_labels_file):
    """Writes the labels file '0:background', '1:<foreground_class_of_interest>' to the
    path visualwakewords_labels_file, atomically."""
    dataset_utils.write_label_file({0: 'background', 1: foreground_class_of_interest},
                                   os.path.dirname(visualwakewords_labels_file),
                                   os.path.basename(visualwakewords_labels_file))


def create_visual_wakeword_annotations(annotations_file, visualwakewords_annotations_file,
                                       small_object_area_threshold,
                                       foreground_class_of_interest):
    """Writes the Visual Wake Words annotations of the COCO instances file annotations_file
    (visualwakewords.visualwakewords_annotations) as JSON to
    visualwakewords_annotations_file, atomically."""
    fileio.write_atomically(visualwakewords_annotations_file, json.dumps(
        visualwakewords.visualwakewords_annotations(
            annotations_file, small_object_area_threshold, foreground_class_of_interest)))


def create_tf_record_for_visualwakewords_dataset(annotations_file, image_dir, output_path,
                                                 num_shards):
    """Writes the images of a Visual Wake Words annotations file (written by
    create_visual_wakeword_annotations), whose JPEGs are in image_dir, as num_shards
    TFRecord shards '<output_path>-0000i-of-<num_shards>' (existing shards are kept; the
    directory is created if missing)."""
    what = 'Visual Wake Words annotations (create_visual_wakeword_annotations)'
    annotations = visualwakewords.read_json(annotations_file, what)
    try:
        annotations['annotations'] = {int(image_id): found for image_id, found
                                      in annotations['annotations'].items()}
        items = visualwakewords.examples(annotations)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(f'{annotations_file}: missing or malformed field '
                         f'({type(error).__name__}: {error}); expected {what}') from None
    os.makedirs(os.path.dirname(output_path) or '.', exist_ok=True)
    visualwakewords.write_records(items, image_dir,
                                  dataset_utils.sharded_paths(output_path, num_shards),
                                  os.path.basename(output_path))
