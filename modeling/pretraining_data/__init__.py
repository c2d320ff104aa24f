"""Pre-training data generation (create_pretraining_data.py): exact and
scale modes. Imports neither TensorFlow nor Keras."""
