"""Writes slim_deploy/datasets/digits.npz, the embedded digits dataset, from scikit-learn.

    pip install scikit-learn && python tools/embed_digits.py

The file holds UCI's Optical Recognition of Handwritten Digits (E. Alpaydin, C. Kaynak;
CC BY 4.0) as scikit-learn's load_digits gives it: `pixels`, uint8 [1797, 8, 8] with values
0..16, and `labels`, uint8 [1797] with values 0..9, in load_digits' order. The package
reads it instead of importing scikit-learn, whose import (through Keras, whenever it is
installed) costs every TensorFlow process over a second of CPU.
"""
import os

import numpy as np
from sklearn.datasets import load_digits

PATH = os.path.join(os.path.dirname(__file__), '..', 'slim_deploy', 'datasets', 'digits.npz')

digits = load_digits()
np.savez_compressed(PATH, pixels=digits.images.astype(np.uint8),
                    labels=digits.target.astype(np.uint8))
print(f'wrote {os.path.normpath(PATH)} ({os.path.getsize(PATH)} bytes)')
