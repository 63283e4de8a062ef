"""Entry-script plumbing: logging set-up; user mistakes end in one line and exit code 2."""
import os
import sys

import tensorflow.compat.v1 as tf


def setup_logging():
    """INFO logging, each line once (TensorFlow's logger would also reach absl's handler)."""
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.get_logger().propagate = False


def fail(error):
    """Prints 'PROGRAM: error: MESSAGE' (the first line of `error`) and exits with code 2."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    print(f'{os.path.basename(sys.argv[0])}: error: {message}', file=sys.stderr)
    sys.exit(2)
