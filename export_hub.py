"""Exports a BERT checkpoint as TF Hub-style SavedModels.

    python export_hub.py --bert_config_file=$BERT_BASE_DIR/bert_config.json \
      --init_checkpoint=$BERT_BASE_DIR/bert_model.ckpt \
      --vocab_file=$BERT_BASE_DIR/vocab.txt --do_lower_case=True \
      --export_path=/tmp/bert_hub

writes /tmp/bert_hub/encoder (dict in: input_word_ids, input_mask,
input_type_ids; dict out: pooled_output, sequence_output, encoder_outputs,
default; trainable variables; with --with_mlm an `mlm` subobject) and
/tmp/bert_hub/preprocessing (tokenize, bert_pack_inputs, and a default call
on single sentences). Both load with tf.saved_model.load or
keras.layers.TFSMLayer(path, call_endpoint="serving_default");
run_classifier_with_tfhub.py fine-tunes the encoder. The logic lives in
modeling/tasks/export_hub.py and modeling/export/hub.py.
"""

from absl import flags

from modeling import flags as shared_flags

FLAGS = flags.FLAGS

flags.DEFINE_string(
    "export_path",
    None,
    "Where to write the SavedModels: with --export_type=both, the folders "
    "<export_path>/encoder and <export_path>/preprocessing; else the one "
    "SavedModel. An earlier export there is replaced once the new one is "
    "complete; a folder holding anything else is refused.",
)
flags.DEFINE_enum(
    "export_type",
    "both",
    ["encoder", "preprocessing", "both"],
    "encoder: the encoder SavedModel; preprocessing: text -> the encoder's "
    "inputs (needs only --vocab_file and --do_lower_case); both: the two.",
)
flags.DEFINE_bool(
    "with_mlm",
    False,
    "Also export the masked-LM head as the encoder's `mlm` subobject and "
    "signature (mlm_logits [batch, predictions, vocab]); the checkpoint "
    "must hold cls/predictions/*, as pre-training checkpoints do.",
)
flags.DEFINE_integer(
    "max_seq_length",
    128,
    "The sequence length of the preprocessing model's default call (and the "
    "default of its bert_pack_inputs(seq_length=...)).",
)
flags.DEFINE_bool(
    "pad_to_longest",
    False,
    "The preprocessing model's default call pads each batch to its longest "
    "packed row (at most --max_seq_length) instead of always to "
    "--max_seq_length, so that the encoder works on the real tokens only. "
    "Off by default: TF Hub's convention is a fixed length.",
)
shared_flags.define_flags(
    "bert_config_file", "init_checkpoint", "vocab_file", "do_lower_case"
)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import export_hub

    export_hub.run(shared_flags.settings_from_flags(export_hub.Settings))


def run():
    """Console entry point (setup.py: bert-export-hub)."""
    shared_flags.run_script(main, required=("export_path", "vocab_file"))


if __name__ == "__main__":
    run()
