r"""Downloads a dataset and converts it into TFRecord shards of slim's records + labels.txt.

    python download_and_convert_data.py --dataset_name=digits [--dataset_dir=DIR]
    python download_and_convert_data.py --dataset_name=mnist --dataset_dir=DIR \
        [--source=DIR_OF_THE_FOUR_IDX_GZ_FILES]
    python download_and_convert_data.py --dataset_name=cifar10 --dataset_dir=DIR \
        [--source=~/Downloads/cifar-10-python.tar.gz]
    python download_and_convert_data.py --dataset_name=flowers --dataset_dir=DIR \
        [--source=flower_photos.tgz]
    python download_and_convert_data.py --dataset_name=imagenet --dataset_dir=DIR \
        --source=IMAGENET_DIR [--bounding_boxes=boxes.csv] [--synsets_file=FILE] \
        [--metadata_file=FILE] [--validation_labels_file=FILE]
    python download_and_convert_data.py --dataset_name=visualwakewords --dataset_dir=DIR \
        [--source=COCO2014_DIR] [--small_object_area_threshold=0.005] \
        [--foreground_class_of_interest=person] [--coco_dirname=coco_dataset] \
        [--coco_train_url=URL] [--coco_validation_url=URL] [--coco_annotations_url=URL]

Without --source the published archive is downloaded into dataset_dir and kept there;
with it, the local archive or extracted directory is read and left as it is (ImageNet has
no anonymous download: --source is required; see slim_deploy/datasets/imagenet.py for its layout).
Without network, a download fails in one line naming its URL: convert a local copy with
--source instead. COCO 2014 is downloaded into --dataset_dir/--coco_dirname.
A rerun completes an interrupted conversion and returns at once for a complete one. The
embedded 'digits' needs no download: this converts them (into --dataset_dir or their
default directory) and prints where they are. The other flags are options of one
converter each (CONVERTER_OPTIONS); giving one for another dataset is an error.
"""
from slim_deploy.image_classifier import verbosity

verbosity.start()  # Before TensorFlow is imported.

import os  # noqa: E402

from absl import flags  # noqa: E402

from slim_deploy.common.errors import UsageError  # noqa: E402
from slim_deploy.datasets import (  # noqa: E402  (they define slim's --coco_* flags)
    dataset_factory,
    download_and_convert_visualwakewords,
    download_and_convert_visualwakewords_lib,
)
from slim_deploy.image_classifier import cli  # noqa: E402

FLAGS = flags.FLAGS

flags.DEFINE_string('dataset_name', None, 'Dataset to convert: '
                    f'{", ".join(dataset_factory.DATASETS)}.')
flags.DEFINE_string('dataset_dir', None, 'Directory for the TFRecord files and labels.txt '
                    '(created if missing; other files in it are left alone). Required but '
                    'for digits.')
flags.DEFINE_string('source', None, 'Local archive or extracted directory to convert instead '
                    'of downloading (mnist: the directory holding the four idx .gz files).')


class _PathParser(flags.ArgumentParser):
    """Parses a file path flag, expanding a leading '~'."""

    def parse(self, argument):
        return os.path.expanduser(argument)


def _define_path(name, help_text):
    flags.DEFINE(_PathParser(), name, None, help_text, serializer=flags.ArgumentSerializer())


_define_path('bounding_boxes', "imagenet: bounding boxes as slim's CSV, 'file name,xmin,ymin,"
             "xmax,ymax' lines (relative coordinates); none without it.")
_define_path('synsets_file', 'imagenet: the list of synsets, one per line (default: '
             'imagenet_lsvrc_2015_synsets.txt in --source).')
_define_path('metadata_file', 'imagenet: \'<synset>\\t<human name>\' lines (default: '
             'imagenet_metadata.txt in --source).')
_define_path('validation_labels_file', 'imagenet: the synset of each validation image, in '
             'file-name order (default: imagenet_2012_validation_synset_labels.txt in --source).')
flags.DEFINE_float('small_object_area_threshold', 0.005, 'visualwakewords: the fraction of '
                   'the image area an object of the foreground class must exceed for label 1.')
flags.DEFINE_string('foreground_class_of_interest', 'person', 'visualwakewords: the COCO '
                    'category that makes label 1.')
flags.mark_flag_as_required('dataset_name')
for _module in (download_and_convert_visualwakewords, download_and_convert_visualwakewords_lib):
    flags.adopt_module_key_flags(_module)  # --help lists the --coco_* flags.

# The flags each converter takes as keyword options, besides dataset_dir and source.
CONVERTER_OPTIONS = {
    'imagenet': ('bounding_boxes', 'synsets_file', 'metadata_file', 'validation_labels_file'),
    'visualwakewords': ('small_object_area_threshold', 'foreground_class_of_interest',
                        *download_and_convert_visualwakewords.COCO_FLAGS),
}


def converter_options(name):
    """{option: flag value} of the flags in CONVERTER_OPTIONS[name]; UsageError if `name`
    is no dataset or a flag of another converter is given."""
    dataset_factory.DATASETS.check(name)
    for dataset, options in CONVERTER_OPTIONS.items():
        given = [flag for flag in options if FLAGS[flag].present]
        if dataset != name and given:
            raise UsageError(f'--{given[0]} applies to {dataset} only, not to {name}')
    return {flag: FLAGS[flag].value for flag in CONVERTER_OPTIONS.get(name, ())}


def main(argv):
    del argv
    dataset_dir = dataset_factory.convert(FLAGS.dataset_name, FLAGS.dataset_dir, FLAGS.source,
                                          **converter_options(FLAGS.dataset_name))
    print(f'{FLAGS.dataset_name}: converted into {dataset_dir}')


def run():
    """Console-script entry point."""
    cli.run(main, __name__)


if __name__ == '__main__':
    run()
