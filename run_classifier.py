"""BERT finetuning runner: GLUE tasks and XNLI (the original's flags).

    python run_classifier.py --task_name=MRPC --do_train --do_eval \
      --data_dir=$GLUE_DIR/MRPC --vocab_file=$BERT_BASE_DIR/vocab.txt \
      --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output/

Writes, as the original: train.tf_record, eval.tf_record, predict.tf_record,
checkpoints (original variable names, classifier head `output_weights` /
`output_bias` at the root scope), eval_results.txt and test_results.tsv.
Added: predictions.jsonl (each test row's id, predicted label and
probabilities by label name), --eval_during_training (keeps the best
checkpoint under output_dir/best/), --glue_submission_dir, --export_dir
(serving SavedModel on raw text), the shared speed/distribution flags of
modeling/flags.py, and your own files:

    python run_classifier.py --task_name=custom \
      --train_file=train.csv --dev_file=dev.csv --test_file=new.jsonl \
      --text_a_column=review --label_column=stars ... (the flags above)

(classification, regression or multi-label; labels.json beside the
checkpoints keeps the labels for later predict and export runs).
"""

from absl import flags

from modeling import errors
from modeling import flags as shared_flags
from modeling.tasks.settings import classifier as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


# === The original's importable names ===
# Notebooks written for the original `import run_classifier` and use its
# examples, processors and converters; they are the library's, loaded on
# first use (so that `--help` still does not load TensorFlow).
_CLASSIFIER_DATA = "modeling.data.classifier_data"
_GLUE = "modeling.data.glue"
_ORIGINAL_NAMES = {
    "InputExample": (_CLASSIFIER_DATA, "InputExample"),
    "PaddingInputExample": (_CLASSIFIER_DATA, "PaddingInputExample"),
    "InputFeatures": (_CLASSIFIER_DATA, "InputFeatures"),
    "convert_single_example": (_CLASSIFIER_DATA, "convert_single_example"),
    "convert_examples_to_features": (
        _CLASSIFIER_DATA,
        "convert_examples_to_features",
    ),
    "file_based_convert_examples_to_features": (
        _CLASSIFIER_DATA,
        "file_based_convert_examples_to_features",
    ),
    "truncate_seq_pair": (_CLASSIFIER_DATA, "truncate_seq_pair"),
    "_truncate_seq_pair": (_CLASSIFIER_DATA, "truncate_seq_pair"),
    "DataProcessor": (_GLUE, "DataProcessor"),
    "XnliProcessor": (_GLUE, "XnliProcessor"),
    "MnliProcessor": (_GLUE, "MnliProcessor"),
    "MrpcProcessor": (_GLUE, "MrpcProcessor"),
    "ColaProcessor": (_GLUE, "ColaProcessor"),
}
_FIT = (
    "modeling.BertTextClassifier.from_checkpoint(folder, num_labels=...) "
    "and model.fit on raw texts (docs/keras.md: Use from Keras), or "
    "run_classifier.py's flags"
)
# The original's Estimator plumbing: importable; calling it says what
# replaces it.
model_fn_builder = errors.estimator_only("model_fn_builder", _FIT)
create_model = errors.estimator_only(
    "create_model",
    "modeling.BertClassifier.from_checkpoint(folder, num_labels=...): "
    "calling it on the features gives the logits; "
    "modeling.losses.classifier_loss(logits, labels) is the loss",
)
input_fn_builder = errors.estimator_only(
    "input_fn_builder",
    _FIT + "; or a tf.data.Dataset of the features' input_ids, "
    "input_mask and segment_ids fed to modeling.BertClassifier",
)
file_based_input_fn_builder = errors.estimator_only(
    "file_based_input_fn_builder",
    "modeling.data.input_pipeline.classifier_feature_spec and "
    "decode_record in a tf.data pipeline over the records, as "
    "run_classifier.py reads them",
)


def __getattr__(name):
    if name not in _ORIGINAL_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module, attribute = _ORIGINAL_NAMES[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import classifier

    classifier.run(shared_flags.settings_from_flags(classifier.Settings))


def run():
    """Console entry point (setup.py: bert-run-classifier)."""
    shared_flags.run_script(
        main,
        # --data_dir too, except with --task_name=custom (checked then).
        required=(
            "task_name",
            "vocab_file",
            "bert_config_file",
            "output_dir",
        ),
    )


if __name__ == "__main__":
    run()
