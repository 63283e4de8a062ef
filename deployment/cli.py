"""Entry-script plumbing: logging set-up; user mistakes end in one line and exit code 2."""
import os
import sys

from absl import app, flags
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


def run(main, module_name):
    """absl's app.run(main), with --help listing the flags of module `module_name` also when
    it runs as an installed console command (absl lists those of the module named argv[0])."""
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    app.run(main)
