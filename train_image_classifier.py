# `python train_image_classifier.py` in a checkout runs the train_image_classifier command:
# slim_deploy/train_image_classifier.py, whose docstring (here too, for absl's --help)
# tells what it does.
from slim_deploy.train_image_classifier import __doc__, run  # noqa: F401

if __name__ == '__main__':
    run()
