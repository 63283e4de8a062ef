"""Entry-script plumbing: absl's app.run with quiet logging, and a user's mistakes (a bad flag
or a UsageError) ending in one line 'PROGRAM: error: MESSAGE' and exit code 2 (damaged data,
a DataError, with 65; a full disk, a StorageError, with 74; a lost task of the cluster, a
ClusterError, with 75; preprocessing that fails on good data, a ProgramError, with 1;
training stopped by a signal, an Interrupted, in one line
'PROGRAM: MESSAGE' and exit code 128 + the signal's number)."""
import os
import sys
import threading

from absl import app, flags

from slim_deploy.common import fileio
from slim_deploy.common.errors import (
    ClusterError,
    DataError,
    Interrupted,
    ProgramError,
    StorageError,
    UsageError,
)
from slim_deploy.image_classifier import verbosity


def run(main, module_name):
    """absl's app.run(main), with --help listing the flags of module `module_name` also when
    it runs as an installed console command (absl lists those of the module named argv[0]),
    and logging set up by verbosity.configure_logging from the parsed --verbosity before main.
    Other exceptions than flag errors and the errors of slim_deploy.common.errors keep their
    traceback (exit code 1)."""
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)

    def logged_main(argv):
        verbosity.configure_logging(flags.FLAGS.verbosity)
        threading.excepthook = _thread_failed
        try:
            return main(argv)
        except (UsageError, DataError, StorageError, ClusterError, ProgramError) as e:
            _fail(e, exit_code=e.exit_code)
        except Interrupted as e:
            _fail(e, exit_code=e.exit_code, label='')

    app.run(logged_main, flags_parser=_parse_flags)


def _thread_failed(args, default=threading.excepthook):
    """threading.excepthook: a thread that dies of a full disk (TensorFlow's event writer)
    says so in one line instead of a traceback; the run itself reports what it could not
    write. Other exceptions keep their traceback."""
    cause = fileio.no_room(args.exc_value)
    if cause is None:
        default(args)
    else:
        print(f'{os.path.basename(sys.argv[0])}: thread {args.thread.name} stopped: {cause}',
              file=sys.stderr)


def _parse_flags(argv):
    """absl's flag parsing, ending a bad command line with _fail."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        _fail(e)


def _fail(error, exit_code=2, label='error: '):
    """Prints 'PROGRAM: error: MESSAGE' (`error`'s message on one line, after `label`) and
    exits."""
    message = ' '.join(str(error).split()) or type(error).__name__
    print(f'{os.path.basename(sys.argv[0])}: {label}{message}', file=sys.stderr)
    sys.exit(exit_code)
