# `python check_equivalence.py` in a checkout runs the check_equivalence command:
# slim_deploy/check_equivalence.py, whose docstring (here too, for absl's --help)
# tells what it does.
from slim_deploy.check_equivalence import __doc__, run  # noqa: F401

if __name__ == '__main__':
    run()
