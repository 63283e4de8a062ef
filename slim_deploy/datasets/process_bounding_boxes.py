"""slim's process_bounding_boxes: ImageNet's bounding-box XML annotations as slim's CSV.

    python -m slim_deploy.datasets.process_bounding_boxes DIR [SYNSETS_FILE] > boxes.csv

DIR holds <synset>/<image>.xml annotations. Each box becomes the line
'<image>.JPEG,<xmin>,<ymin>,<xmax>,<ymax>': coordinates relative to the annotated image's
size (4 decimals), each pair ordered and clamped to [0, 1]; empty boxes are left out.
With SYNSETS_FILE (one synset per line) only those synsets' folders are read, and the
boxes of an annotation whose first object is another listed synset are left out (names
that are no synset, as in many of ImageNet's dog annotations, are kept). Counts go to
stderr. build_imagenet_data and the toolkit's ImageNet converter (--bounding_boxes) read
the CSV.
"""
import glob
import os
import sys
import xml.etree.ElementTree as ElementTree


class BoundingBox:
    """One box of an annotation, with the attributes ProcessXMLAnnotation sets: xmin, ymin,
    xmax, ymax (pixels), width, height (the annotated image's size), filename
    ('<name>.JPEG'), label (the name of the annotation's first object, as slim's: a synset,
    or a name) and xmin_scaled, ymin_scaled, xmax_scaled, ymax_scaled (relative, ordered,
    clamped to [0, 1])."""


def GetItem(name, root, index=0):
    """The text of the index-th element called `name` below root, in document order, or -1
    if there are not that many."""
    items = list(root.iter(name))
    return items[index].text if index < len(items) else -1


def GetInt(name, root, index=0):
    """GetItem as an int."""
    return int(GetItem(name, root, index))


def FindNumberBoundingBoxes(root):
    """The number of boxes below root: of its 'xmin' elements."""
    return sum(1 for _ in root.iter('xmin'))


def _ordered_and_clamped(low, high):
    return tuple(min(max(value, 0.0), 1.0) for value in sorted((low, high)))


def ProcessXMLAnnotation(xml_file):
    """The BoundingBoxes of the XML annotation xml_file, or None (said on stderr) if it
    cannot be parsed."""
    try:
        root = ElementTree.parse(xml_file).getroot()
    except (ElementTree.ParseError, OSError):
        print(f'Failed to parse: {xml_file}', file=sys.stderr)
        return None
    boxes = []
    for index in range(FindNumberBoundingBoxes(root)):
        box = BoundingBox()
        for side in ('xmin', 'ymin', 'xmax', 'ymax'):
            setattr(box, side, GetInt(side, root, index))
        box.width, box.height = GetInt('width', root), GetInt('height', root)
        box.filename = f'{GetItem("filename", root)}.JPEG'
        box.label = GetItem('name', root)
        box.xmin_scaled, box.xmax_scaled = _ordered_and_clamped(box.xmin / box.width,
                                                                box.xmax / box.width)
        box.ymin_scaled, box.ymax_scaled = _ordered_and_clamped(box.ymin / box.height,
                                                                box.ymax / box.height)
        boxes.append(box)
    return boxes


def main(argv):
    """Prints the CSV of the annotations under argv[1] (only of the synsets of the file
    argv[2], if given); a wrong command line or an unreadable annotation ends the program
    with a one-line message."""
    if len(argv) not in (2, 3):
        raise SystemExit('usage: process_bounding_boxes.py <dir> [synsets-file]')
    xml_files = sorted(glob.glob(os.path.join(argv[1], '*', '*.xml')))
    synsets = None
    if len(argv) == 3:
        with open(argv[2], encoding='utf-8') as f:
            synsets = {line.strip() for line in f if line.strip()}
    skipped_files = skipped_boxes = saved_files = saved_boxes = 0
    for xml_file in xml_files:
        synset = os.path.basename(os.path.dirname(xml_file))
        if synsets is not None and synset not in synsets:
            skipped_files += 1
            continue
        boxes = ProcessXMLAnnotation(xml_file)
        if boxes is None:
            raise SystemExit(f'{xml_file}: not a readable XML annotation')
        # The file's own name: some annotations' <filename> holds noise such as '%s'.
        image = os.path.splitext(os.path.basename(xml_file))[0] + '.JPEG'
        kept = [box for box in boxes
                if not (synsets is not None and box.label != synset and box.label in synsets)
                and box.xmin_scaled < box.xmax_scaled and box.ymin_scaled < box.ymax_scaled]
        for box in kept:
            print(f'{image},{box.xmin_scaled:.4f},{box.ymin_scaled:.4f},'
                  f'{box.xmax_scaled:.4f},{box.ymax_scaled:.4f}')
        skipped_boxes += len(boxes) - len(kept)
        saved_boxes += len(kept)
        saved_files += bool(kept)
        skipped_files += not kept
    print(f'{len(xml_files)} XML files: wrote {saved_boxes} boxes of {saved_files} images; '
          f'skipped {skipped_files} files and {skipped_boxes} boxes.', file=sys.stderr)


if __name__ == '__main__':
    main(sys.argv)
