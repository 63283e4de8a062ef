"""The one error class for a user's mistakes (a bad flag, parameter or input file).

Entry points print a UsageError as one line and exit with code 2; every other exception is
a bug or an outside failure and keeps its traceback (exit code 1).
"""


class UsageError(ValueError):
    """A user's mistake. The message is one line that names the flag (as `--flag_name`),
    parameter or file at fault and, where there are any, the valid choices."""
