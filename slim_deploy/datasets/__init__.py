"""Dataset descriptions, converters and the tf.data input pipeline."""
