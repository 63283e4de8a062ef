"""The TF-Slim network zoo behind one factory."""
