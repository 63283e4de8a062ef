"""slim's datasets package (dataset descriptions with get_split, the factory, converters and
their scripts) on the toolkit's converters, and the tf.data input pipeline."""
