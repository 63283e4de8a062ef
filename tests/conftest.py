"""Shared test set-up: quiet TensorFlow's C++ logs and repair tf-slim before any test."""
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import deployment  # noqa: E402,F401  (repairs tf-slim for the installed TensorFlow)
