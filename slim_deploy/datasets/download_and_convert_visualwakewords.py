"""slim's download_and_convert_visualwakewords: run(dataset_dir,
small_object_area_threshold, foreground_class_of_interest) downloads COCO 2014 into
dataset_dir/<--coco_dirname> (from the URL flags of download_and_convert_visualwakewords_lib)
and converts it into 'train.record-*' and 'val.record-*' shards and labels.txt (what
visualwakewords.get_split reads); the work is the toolkit's converter's
(visualwakewords.convert: atomic, resumable, parallel).

Defines slim's flag --coco_dirname.
"""
from absl import flags

from slim_deploy.datasets import (
    dataset_factory,
    download_and_convert_visualwakewords_lib,
    visualwakewords,
)

flags.DEFINE_string('coco_dirname', visualwakewords.COCO_DIRNAME,
                    'The directory inside the Visual Wake Words dataset directory that COCO '
                    '2014 is downloaded into.')

FLAGS = flags.FLAGS
# The flags that are options of visualwakewords.convert, of the same names.
COCO_FLAGS = ('coco_dirname', *download_and_convert_visualwakewords_lib.URL_FLAGS)


def coco_options():
    """visualwakewords.convert's options from COCO_FLAGS (their defaults until flags are
    parsed)."""
    return {name: FLAGS[name].value for name in COCO_FLAGS}


def run(dataset_dir, small_object_area_threshold, foreground_class_of_interest, source=None):
    """Converts COCO 2014 into Visual Wake Words in dataset_dir unless already there.

    small_object_area_threshold: the fraction of the image area an object of the class
    foreground_class_of_interest (a COCO category name) must exceed for label 1.
    source: a directory holding train2014/, val2014/ and annotations/, read in place;
    None downloads COCO 2014 (about 19 GB, kept). A bad source or a failed download ends
    the program with a one-line message (SystemExit; see dataset_factory.run_converter).
    """
    dataset_factory.run_converter(
        'visualwakewords', dataset_dir, source,
        small_object_area_threshold=small_object_area_threshold,
        foreground_class_of_interest=foreground_class_of_interest, **coco_options())
