"""slim's download_and_convert_mnist: run(dataset_dir) downloads MNIST's four idx files into
dataset_dir, converts them into mnist_train.tfrecord, mnist_test.tfrecord and labels.txt
(what mnist.get_split reads) and removes the downloads, as slim's script does; the work is
the toolkit's converter's (mnist.convert: atomic, resumable)."""
from slim_deploy.datasets import dataset_factory, mnist


def run(dataset_dir, source=None):
    """Converts MNIST into dataset_dir (created if missing) unless it is already there.

    source: a directory holding the four idx .gz files, read in place; None downloads them
    into dataset_dir and removes them once converted. A bad source or a failed download
    ends the program with a one-line message (SystemExit; see
    dataset_factory.run_converter).
    """
    dataset_factory.run_converter(
        'mnist', dataset_dir, source,
        downloads=[name for files in mnist.SPLIT_FILES.values() for name in files])
