"""The feature names of the original release's TFRecords.

Plain constants, importable without TensorFlow (the data writers run
without it); `input_pipeline` re-exports them with the specs and readers.
"""

# === Pre-training records (create_pretraining_data.py -> run_pretraining.py) ===
# Order matters for nothing but readability; serialization sorts the keys.
PRETRAINING_SEQ_FEATURES = ("input_ids", "input_mask", "segment_ids")
PRETRAINING_PRED_INT_FEATURES = ("masked_lm_positions", "masked_lm_ids")
PRETRAINING_PRED_FLOAT_FEATURES = ("masked_lm_weights",)
NEXT_SENTENCE_LABELS = "next_sentence_labels"
# Every feature of a pre-training record, in the original's order.
PRETRAINING_FEATURES = (
    PRETRAINING_SEQ_FEATURES
    + PRETRAINING_PRED_INT_FEATURES
    + PRETRAINING_PRED_FLOAT_FEATURES
    + (NEXT_SENTENCE_LABELS,)
)

# === Classifier records (run_classifier.py) ===
CLASSIFIER_SEQ_FEATURES = ("input_ids", "input_mask", "segment_ids")
LABEL_IDS = "label_ids"
IS_REAL_EXAMPLE = "is_real_example"
# Not in the original: with --long_inputs=chunks each window is a record,
# carrying its text's position in the file and its text's window count.
EXAMPLE_INDEX = "example_index"
NUM_WINDOWS = "num_windows"

# === SQuAD records (run_squad.py) ===
UNIQUE_IDS = "unique_ids"
START_POSITIONS = "start_positions"
END_POSITIONS = "end_positions"
IS_IMPOSSIBLE = "is_impossible"
