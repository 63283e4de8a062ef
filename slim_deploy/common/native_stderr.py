"""Holding back what native code writes to stderr. Standard library only, so that
image_classifier.quiet can use it before TensorFlow is imported."""
import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def filtered(keep):
    """Inside the block, what is written to file descriptor 2 (by native code too) is held
    back; after it, written to stderr as keep(text) returns it (text: all that was held
    back, a str), or whole if the block raised."""
    sys.stderr.flush()
    saved = os.dup(2)
    failed = True
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
            failed = False
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode(errors='replace')
            sys.stderr.write(text if failed else keep(text))
            sys.stderr.flush()


def without_lines(pattern, text):
    """`text` without the lines that `pattern` (a compiled regular expression) matches
    whole."""
    return ''.join(line for line in text.splitlines(keepends=True)
                   if not pattern.fullmatch(line.rstrip('\n')))
