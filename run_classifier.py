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

FLAGS = flags.FLAGS

## Required parameters
flags.DEFINE_string(
    "data_dir",
    None,
    "The input data dir. Should contain the .tsv files (or other data files) "
    "for the task.",
)
flags.DEFINE_string(
    "task_name",
    None,
    "The name of the task to train (case-insensitive): cola, mnli, mrpc, "
    "xnli (the original's) or sst-2, sts-b, qqp, qnli, rte, wnli, mnli-mm, "
    "ax; or custom: your own CSV / TSV / JSON Lines files (--train_file, "
    "--dev_file, --test_file; --data_dir then optional).",
)
## Other parameters
shared_flags.define_flags(*shared_flags.FINE_TUNING)
shared_flags.define_flags(*shared_flags.LONG_INPUTS)
flags.DEFINE_integer(
    "max_seq_length",
    128,
    "The maximum total input sequence length after WordPiece tokenization. "
    "Sequences longer than this will be truncated, and sequences shorter "
    "than this will be padded.",
)
flags.DEFINE_bool(
    "do_predict",
    False,
    "Whether to run the model in inference mode on the test set.",
)

## Added (not in the original)
flags.DEFINE_bool(
    "eval_during_training",
    False,
    "Evaluate on the dev set at every checkpoint while training and keep "
    "the best checkpoint by the task's main metric (accuracy; F1 for "
    "MRPC/QQP; Matthews correlation for CoLA; Pearson for STS-B) under "
    "output_dir/best/. Its metrics are in output_dir/best/eval_results.txt.",
)
flags.DEFINE_string(
    "glue_submission_dir",
    None,
    "With --do_predict, also write <TASK>.tsv (CoLA.tsv, MRPC.tsv, ...) in "
    "the GLUE leaderboard's format (index, predicted label name or STS-B "
    "score) to this directory.",
)
flags.DEFINE_string(
    "export_dir",
    None,
    "Write a serving SavedModel here: its signature takes raw strings "
    "(text_a, and text_b for pair tasks), tokenizes them in the graph and "
    "returns class probabilities (STS-B: the score).",
)

flags.DEFINE_bool(
    "dynamic_padding",
    None,
    "Cut each batch to its longest sequence (rounded up to a multiple of 8; "
    "with --use_xla to one of 4 lengths, so XLA compiles at most 4 times) "
    "instead of computing on max_seq_length positions: the same results up "
    "to float rounding, several times faster on short texts (GLUE). "
    "Default: on, except on TPU (fixed shapes); --nodynamic_padding pads "
    "every batch to max_seq_length as the original.",
)

## Added: your own files (--task_name=custom)
flags.DEFINE_string(
    "train_file",
    None,
    "--task_name=custom: the training file, .csv, .tsv, .jsonl or .json "
    "(JSON Lines), with a header row (CSV/TSV) naming the columns. Default: "
    "train.csv / .tsv / .jsonl in --data_dir.",
)
flags.DEFINE_string(
    "dev_file", None, "--task_name=custom: the dev file (as --train_file)."
)
flags.DEFINE_string(
    "test_file",
    None,
    "--task_name=custom: the file to predict (as --train_file; no label "
    "column needed). Streamed: any number of rows.",
)
flags.DEFINE_enum(
    "task_type",
    None,
    ["classification", "regression", "multi_label"],
    "--task_name=custom: one label per row (classification), a number "
    "(regression: the STS-B head and metrics), or a set of labels "
    "(multi_label: a sigmoid per label). Default: output_dir/labels.json's, "
    "else classification.",
)
flags.DEFINE_string(
    "text_a_column",
    None,
    "--task_name=custom: the text column. Default: text_a, else the first "
    "of sentence1, sentence, text, question that the file has.",
)
flags.DEFINE_string(
    "text_b_column",
    None,
    "--task_name=custom: the second text of sentence pairs (default: none).",
)
flags.DEFINE_string(
    "label_column",
    None,
    "--task_name=custom: the label column (default: label).",
)
flags.DEFINE_string(
    "id_column",
    None,
    "--task_name=custom: the id written to predictions.jsonl. Default: id, "
    "idx, index or guid if the file has one, else the row's line number.",
)
flags.DEFINE_string(
    "labels",
    None,
    "--task_name=custom: the labels in id order, comma-separated. Default: "
    "output_dir/labels.json (written by training), else the sorted "
    "distinct training labels. List them to allow dev labels unseen in "
    "training.",
)
flags.DEFINE_string(
    "label_separator",
    ",",
    "--task_type=multi_label: splits a CSV/TSV label field into labels "
    "(JSON Lines may give a list).",
)
flags.DEFINE_string(
    "multi_label_threshold",
    None,
    "--task_type=multi_label: a label is predicted when its probability is "
    "at least this (in (0, 1)); auto: the threshold with the best micro-F1 "
    "on the dev set (needs --do_eval). Recorded in output_dir/labels.json "
    "and an export's bert_export.json, so later runs and the serving model "
    "decide alike. Default: labels.json's, else 0.5.",
)
flags.DEFINE_bool(
    "skip_bad_rows",
    False,
    "--task_name=custom: skip rows that are malformed (a ragged CSV row, a "
    "bad JSON line), have an empty text, an unknown label or a non-numeric "
    "regression target, counting and logging them, instead of stopping "
    "with an error naming the file and line.",
)

shared_flags.define_common_flags()


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
