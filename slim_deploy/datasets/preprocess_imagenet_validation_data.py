"""slim's preprocess_imagenet_validation_data: sorts ImageNet's validation images into
synset folders, the layout build_imagenet_data reads.

    python -m slim_deploy.datasets.preprocess_imagenet_validation_data \
        ILSVRC2012_img_val imagenet_2012_validation_synset_labels.txt

Line i of the labels file (one synset per line) is the synset of image
'ILSVRC2012_val_<i:08d>.JPEG' of the directory; each image moves into <directory>/<synset>/.
Images already moved are skipped, so an interrupted run can be repeated. (The toolkit's
ImageNet converter reads the unsorted directory and the labels file as they are.)
"""
import os
import sys


def main(argv):
    """Moves the images of the directory argv[1] into the synset folders of the labels file
    argv[2]; a wrong command line or a missing image ends the program with a one-line
    message."""
    if len(argv) != 3:
        raise SystemExit('usage: preprocess_imagenet_validation_data.py '
                         '<validation data dir> <validation labels file>')
    data_dir, labels_file = argv[1:]
    try:
        with open(labels_file, encoding='utf-8') as f:
            synsets = [line.strip() for line in f if line.strip()]
    except OSError as error:
        raise SystemExit(f'{labels_file}: {error.strerror}') from None
    for number, synset in enumerate(synsets, start=1):
        name = f'ILSVRC2012_val_{number:08d}.JPEG'
        image, sorted_image = (os.path.join(data_dir, name),
                               os.path.join(data_dir, synset, name))
        if os.path.exists(sorted_image):
            continue
        if not os.path.isfile(image):
            raise SystemExit(f'{image}: missing; {labels_file} names {number} images')
        os.makedirs(os.path.dirname(sorted_image), exist_ok=True)
        os.rename(image, sorted_image)


if __name__ == '__main__':
    main(sys.argv)
