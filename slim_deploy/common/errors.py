"""The errors entry points print as one line: a user's mistake (a bad flag, parameter or
input file) and the loss of another task of the cluster.

Entry points print a UsageError as one line and exit with code 2, a DataError with 65, a
StorageError with 74, a ClusterError with 75 (an AddressInUse, one kind of it, with 98), a
ProgramError with 1, an Interrupted with 128 + its signal's number
(143 for SIGTERM, 130 for SIGINT); every other exception is a bug or an outside failure and
keeps its traceback (exit code 1).
"""
from slim_deploy.common.bounds import Bounds


def check_int(name, value, minimum, error=ValueError, none_ok=False):
    """Raises `error` (a ValueError or UsageError) naming `name` as given ('num_clones',
    '--num_clones') unless `value` is an int >= `minimum`, or None with none_ok."""
    Bounds.integers(minimum).check(name, value, error, none_ok)


class UsageError(ValueError):
    """A user's mistake. The message is one line that names the flag (as `--flag_name`),
    parameter or file at fault and, where there are any, the valid choices.

    exit_code: 2, which restart policies do not retry: a restart would repeat the mistake.
    """
    exit_code = 2


class DataError(RuntimeError):
    """The input data is damaged: a torn, missing or corrupt shard, or more undecodable
    records than --max_bad_records allows. The message is one line naming the shard (and the
    record's index in it).

    exit_code: 65 (EX_DATAERR of sysexits.h): a restart would read the same data.
    """
    exit_code = 65


class StorageError(RuntimeError):
    """A file could not be written: the disk is full, a quota or a read-only file system.
    The message is one line naming the directory, the cause and what was kept.

    exit_code: 74 (EX_IOERR of sysexits.h): a restart fails the same way until space is
    freed.
    """
    exit_code = 74


class ProgramError(RuntimeError):
    """A function given to the toolkit failed on input it should take (a preprocessing
    function on a record that decodes). The message is one line naming the function and the
    op that failed, and says the input is not at fault.

    exit_code: 1, as for any other bug: the data is not damaged (not 65).
    """
    exit_code = 1


# The exit codes a restart would repeat (restart policies must not retry them), each with
# what it means.
FINAL_EXIT_CODES = {UsageError.exit_code: "a user's mistake", DataError.exit_code: 'damaged data',
                    StorageError.exit_code: 'a write the storage refused'}


class ClusterError(RuntimeError):
    """Another task of the cluster failed or stopped answering. The message is one line
    naming the task.

    exit_code: 75 (EX_TEMPFAIL of sysexits.h, 'try again later'): the job must restart, and
    restart policies retry it (the launcher restarts the whole job), unlike 2, a user's
    mistake that a retry repeats.
    """
    exit_code = 75


class AddressInUse(ClusterError):
    """A task could not serve: another process holds its port. The message is one line
    naming the task and the address, and says 'address in use'.

    exit_code: 98 (EADDRINUSE's number on Linux): no mistake of the user's; the launcher
    that chose the ports restarts the cluster on new ones.
    """
    exit_code = 98


class Interrupted(Exception):
    """Training stopped on a signal (SIGTERM, SIGINT) after finishing its step in flight and,
    on the chief, checkpointing it. The message is one line saying where it stopped."""

    def __init__(self, message, signum):
        super().__init__(message)
        self.exit_code = 128 + signum
