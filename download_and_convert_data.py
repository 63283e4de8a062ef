# `python download_and_convert_data.py` in a checkout runs the download_and_convert_data command:
# slim_deploy/download_and_convert_data.py, whose docstring (here too, for absl's --help)
# tells what it does.
from slim_deploy.download_and_convert_data import __doc__, run  # noqa: F401

if __name__ == '__main__':
    run()
