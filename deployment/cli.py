"""Entry-script plumbing: user mistakes end in one line on stderr and exit code 2."""
import os
import sys


def fail(error):
    """Prints 'PROGRAM: error: MESSAGE' (the first line of `error`) and exits with code 2."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    print(f'{os.path.basename(sys.argv[0])}: error: {message}', file=sys.stderr)
    sys.exit(2)
