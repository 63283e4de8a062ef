"""Image preprocessing for training and evaluation, one function per network family."""
