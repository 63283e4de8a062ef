"""slim's download_and_convert_cifar10: run(dataset_dir) downloads cifar-10-python.tar.gz
into dataset_dir, converts it into cifar10_train.tfrecord, cifar10_test.tfrecord and
labels.txt (what cifar10.get_split reads) and removes the download, as slim's script does;
the work is the toolkit's converter's (cifar10.convert: atomic, resumable, reading the
archive in place)."""
from slim_deploy.datasets import cifar10, dataset_factory


def run(dataset_dir, source=None):
    """Converts CIFAR-10 into dataset_dir (created if missing) unless it is already there.

    source: cifar-10-python.tar.gz or its extracted directory, read in place; None
    downloads the archive into dataset_dir and removes it once converted. A bad source or a
    failed download ends the program with a one-line message (SystemExit; see
    dataset_factory.run_converter).
    """
    dataset_factory.run_converter('cifar10', dataset_dir, source, downloads=[cifar10.ARCHIVE])
