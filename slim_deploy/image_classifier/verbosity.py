"""Quiet by default: TensorFlow's start-up noise, C++ info lines and deprecation warnings stay
hidden unless --verbosity (-v) is 1 or more; errors always show.

Each entry script calls start() as its first statement, before anything imports TensorFlow.
The user's own settings win: with TF_CPP_MIN_LOG_LEVEL set, TensorFlow's C++ output is left
to it; with PYTHONWARNINGS (or -W) set, Python's warning filters are left alone.
Standard library only at module level (native_stderr is), so that importing this module
stays cheap.
"""
import logging
import os
import re
import sys
import warnings

from slim_deploy.common import native_stderr

# Start-up lines of TensorFlow's C++ side that say nothing a user can act on.
_NOISE = re.compile(
    r'[IW]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ \S+:\d+\] .*'  # glog-format info and warning lines
    r'|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR'
    r'|To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler '
    r'flags\.')  # The second line of cpu_feature_guard's info.
_NO_CUDA_DRIVER = 'Could not find cuda drivers on your machine'
_CUINIT_FAILED = re.compile(r'E\d{4} .*\] failed call to cuInit: .*')


def verbosity_in(argv):
    """The value of absl's --verbosity flag (also -v, --v, -verbosity) in `argv`, the last one
    given before any '--'; 0 (absl's default) when it is absent or not an integer."""
    value = '0'
    args = iter(argv)
    for arg in args:
        if arg == '--':
            break
        name, equals, rest = arg.partition('=')
        if name in ('--verbosity', '-verbosity', '--v', '-v'):
            value = rest if equals else next(args, value)
    try:
        return int(value)
    except ValueError:
        return 0


def start():
    """Unless sys.argv asks for verbosity >= 1: hides Python's deprecation warnings, sets
    TF_CPP_MIN_LOG_LEVEL=2 and imports TensorFlow with its start-up noise filtered out."""
    if verbosity_in(sys.argv[1:]) > 0:
        return
    if not sys.warnoptions:
        warnings.filterwarnings('ignore', category=DeprecationWarning)
        warnings.filterwarnings('ignore', category=PendingDeprecationWarning)
        warnings.filterwarnings('ignore', '.*deprecated', UserWarning)
        warnings.filterwarnings('ignore', '.*deprecated', FutureWarning)
    if 'TF_CPP_MIN_LOG_LEVEL' not in os.environ:
        os.environ['TF_CPP_MIN_LOG_LEVEL'] = '2'
        _import_tensorflow()


def drop_startup_noise(text):
    """`text` (what TensorFlow wrote to stderr while starting) without its info and warning
    lines; the cuInit failure goes too when TensorFlow found no CUDA driver to initialize."""
    no_driver = _NO_CUDA_DRIVER in text
    text = native_stderr.without_lines(_NOISE, text)
    return native_stderr.without_lines(_CUINIT_FAILED, text) if no_driver else text


def _import_tensorflow():
    """Imports TensorFlow and lists its GPUs (its first device enumeration) with file
    descriptor 2 held back, then writes it to stderr filtered by drop_startup_noise, or
    whole when the import fails."""
    with native_stderr.filtered(drop_startup_noise):
        import tensorflow as tf
        tf.config.list_physical_devices('GPU')


def configure_logging(verbosity):
    """Sets up Python logging once absl has parsed its flags (absl's --verbosity already sets
    the level of our own lines): one short format, 'I 12:03:04 message', for every handler of
    the root logger (absl's), and TensorFlow's logger sending each record there once, at
    WARNING or above and without its deprecation notices unless `verbosity` >= 1."""
    formatter = logging.Formatter('%(levelname).1s %(asctime)s %(message)s', '%H:%M:%S')
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
    tensorflow = logging.getLogger('tensorflow')
    tensorflow.handlers.clear()  # TensorFlow adds its own when it logs before absl's is set up.
    tensorflow.propagate = True
    if verbosity > 0:
        tensorflow.setLevel(logging.NOTSET)  # The root's, which absl set from the verbosity.
        tensorflow.removeFilter(_not_deprecation)
    else:
        tensorflow.setLevel(max(logging.WARNING, logging.getLogger().level))
        tensorflow.addFilter(_not_deprecation)


def _not_deprecation(record):
    """False for a log record that announces a deprecation."""
    return 'deprecated' not in record.getMessage()
