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
modeling/tasks/export_hub.py and modeling/export/encoder.py.
"""

from absl import flags

from modeling import backend
from modeling import flags as shared_flags
from modeling.tasks.settings import export_hub as settings

FLAGS = flags.FLAGS

shared_flags.define_settings_flags(settings.Settings)


def main(_):
    # It writes TensorFlow SavedModels: Keras on TensorFlow, whatever
    # KERAS_BACKEND says (set before Keras is imported).
    backend.select("tensorflow")
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import export_hub

    export_hub.run(shared_flags.settings_from_flags(export_hub.Settings))


def run():
    """Console entry point (setup.py: bert-export-hub)."""
    shared_flags.run_script(main, required=("export_path", "vocab_file"))


if __name__ == "__main__":
    run()
