"""Data: feature names, TFRecord I/O, file helpers, tf.data pipelines and
the GLUE examples -> features -> records path."""
