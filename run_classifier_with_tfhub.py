"""BERT finetuning runner with an encoder SavedModel (the original's flags).

    python run_classifier_with_tfhub.py --task_name=MRPC --do_train \
      --do_eval --data_dir=$GLUE_DIR/MRPC \
      --bert_hub_module_handle=/tmp/bert_hub/encoder \
      --max_seq_length=128 --train_batch_size=32 --learning_rate=2e-5 \
      --num_train_epochs=3.0 --output_dir=/tmp/mrpc_output/

run_classifier.py with the encoder, its vocabulary and its casing taken from
a SavedModel in the TF Hub BERT convention (modeling/saved_encoder.py): one
written by export_hub.py, or a TF Hub / Kaggle BERT encoder folder (local or gs://; a
URL needs the tensorflow_hub package). Everything else is run_classifier's:
its flags, records, head, training loop, checkpoints (for an export of this
repository, under the original names), eval_results.txt and
test_results.tsv. The original's version fine-tuned a TF1 hub.Module.
"""

from absl import flags

# run_classifier's flags, as the original imported them. The model flags
# (settings.FROM_THE_MODULE) come from the SavedModel instead: accepted, as
# the original accepted them, with a warning that they have no effect.
import run_classifier  # noqa: F401
from modeling import flags as shared_flags
from modeling.tasks.settings import classifier as settings

FLAGS = flags.FLAGS

# Its own: --bert_hub_module_handle.
shared_flags.define_settings_flags(settings.HubSettings)


def main(_):
    # Imported here so that `--help` does not load TensorFlow.
    from modeling.tasks import classifier

    # The module's, not the flags' (HubSettings' defaults).
    unset = {name: None for name in settings.FROM_THE_MODULE}
    unset["do_lower_case"] = True
    classifier.run(
        shared_flags.settings_from_flags(classifier.HubSettings, **unset)
    )


def run():
    """Console entry point (setup.py: bert-run-classifier-with-tfhub)."""
    shared_flags.run_script(
        main,
        # --data_dir too, except with --task_name=custom (checked then).
        required=("task_name", "bert_hub_module_handle", "output_dir"),
    )


if __name__ == "__main__":
    run()
