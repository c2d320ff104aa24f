"""What run_ner.py does: token classification (CoNLL-2003 NER, or any
tagging task in CoNLL-style or JSON Lines files).

Fine-tunes BertTokenClassifier (the encoder plus root-scope `output_weights`
[L, H] / `output_bias` [L]) on a tagged file with the shared training loop,
evaluates entity-level precision/recall/F1 (conlleval's definition; for a
chunk scheme: IOB, IOBES, BILOU), token accuracy and loss into
eval_results.txt, and with --do_predict writes the test file back with a
predicted-tag column (test_predictions.txt) and predictions.jsonl.

Steps: `int(num_windows / train_batch_size * num_train_epochs)` training
steps (a window is a sentence, or a piece of a long one, see
modeling/data/conll.py), `int(steps * warmup_proportion)` warmup steps,
as run_classifier counts them.

The label list: --label_list, else output_dir/label_list.txt (written by an
earlier training run), else the training file's tags; it is written to
output_dir/label_list.txt so that eval and predict use the same ids.
"""

import dataclasses

import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from modeling import losses
from modeling import models
from modeling import progress
from modeling.data import conll
from modeling.data import file_io
from modeling.tasks import common
from modeling.tasks import conlleval
from modeling.tasks import fine_tuning
from modeling.tasks import predictions
from modeling.tasks.settings import ner as ner_settings
from modeling.training import checkpoint_manager

# The script's flags (modeling/tasks/settings/ner.py).
Settings = ner_settings.Settings

PREDICTIONS_FILE = "test_predictions.txt"
# Looked for in data_dir, in this order, unless a file flag names one.
TRAIN_FILES = ("train.txt", "eng.train", "train.jsonl")
EVAL_FILES = ("dev.txt", "valid.txt", "eng.testa", "dev.jsonl")
PREDICT_FILES = ("test.txt", "eng.testb", "test.jsonl")
SEQ_FEATURES = ("input_ids", "input_mask", "segment_ids")
LABEL_IDS = "label_ids"
LABEL_MASK = "label_mask"
# Sentences predicted at a time: one block's features and logits ([windows,
# T, labels] floats) are in memory, not the whole file's (a million
# sentences at seq 128 would be gigabytes of logits).
PREDICT_BLOCK = 16384


@dataclasses.dataclass
class NerTask(fine_tuning.ArrayTask):
    label_list: list = None
    # label_list.txt's path while it waits for `publish_labels`.
    pending_label_list: str = None

    def read(self, path, require_tags=True):
        """A CoNLL-style or JSON Lines file (conll.read_tagged_file)."""
        s = self.settings
        return conll.read_tagged_file(
            path, require_tags, s.tag_column, s.tokens_field, s.tags_field
        )

    @property
    def scheme(self):
        """The label list's tag scheme (conll.tag_scheme)."""
        return conll.tag_scheme(self.label_list)

    @property
    def main_metric(self):
        """Entity F1 for a chunk scheme, else token accuracy."""
        return (
            "eval_f1"
            if self.scheme in conll.CHUNK_SCHEMES
            else ("eval_accuracy")
        )

    def features(self, sentences):
        """Windowed features of the sentences as numpy arrays, and the
        conll.Feature list (for mapping predictions back)."""
        return conll.sentence_arrays(
            sentences,
            self.label_list,
            self.settings.max_seq_length,
            self.tokenizer,
        )


def prepare(settings):
    """Checks the settings; builds the task (fine_tuning.ArrayTask)."""
    return NerTask.prepare(settings)


def resolve_labels(task, train_data=None):
    """Sets task.label_list (see the module doc); a new one is written to
    output_dir/label_list.txt by `publish_labels`, once the run has checked
    its inputs and the checkpoints already there.

    Raises:
      ValueError: no source of labels; --label_list disagreeing with the
        saved list; a training tag outside the list (file and line).
    """
    s = task.settings
    saved_path = task.path(conll.LABEL_LIST_FILE)
    saved = None
    if tf.io.gfile.exists(saved_path):
        saved = conll.read_label_list(saved_path)
    # Only a folder holding checkpoints binds the run to its list, as the
    # classifier's labels.json. One without (left by a predict-only run, or
    # by a training run killed before its first checkpoint) is what a run
    # that does not train reads, but gives way to --label_list and to the
    # labels of a training run, which replace it.
    binding = saved is not None and bool(
        checkpoint_manager.find_checkpoints(s.output_dir)
    )
    if s.label_list:
        labels = [x.strip() for x in s.label_list.split(",") if x.strip()]
        if binding and saved != labels:
            raise ValueError(
                f"--label_list {labels} differs from {saved_path} {saved} "
                "that this output_dir's checkpoints were trained with"
            )
    elif saved is not None and (binding or train_data is None):
        labels = saved
    elif train_data is not None:
        labels = conll.labels_from_sentences(
            train_data.sentences, train_data.scheme
        )
    else:
        raise ValueError(
            f"No label list: {saved_path} does not exist; train first "
            "(--do_train) or give --label_list"
        )
    conll.tag_scheme(labels)  # A mixed list fails here, before training.
    if train_data is not None:
        conll.check_tags(train_data, labels)
    if not binding and (train_data is not None or s.label_list):
        task.pending_label_list = saved_path
    task.label_list = labels
    logging.info("Labels (%d): %s", len(labels), " ".join(labels))


def publish_labels(task, trainer):
    """Checks the checkpoints in output_dir against this run's model
    (their number of labels among the rest), then writes the label list
    `resolve_labels` found new: a failed run leaves a trained folder as it
    was."""
    s = task.settings
    trainer.check_output_dir(
        element_spec(task, s.train_batch_size if s.do_train else None)
    )
    fine_tuning.check_init_checkpoint(trainer, s, encoder_only=True)
    path = task.pending_label_list
    if path and trainer.is_chief:
        conll.write_label_list(path, task.label_list)
    task.pending_label_list = None


def loss_fn(features, logits):
    """Cross-entropy over the labelled pieces, and their accuracy
    (keras.ops: it runs inside either backend's compiled step)."""
    mask = ops.cast(features[LABEL_MASK], "float32")
    loss = losses.token_classification_loss(
        logits, features[LABEL_IDS], mask, features
    )
    predicted = ops.cast(ops.argmax(logits, axis=-1), "int32")
    labels = ops.cast(features[LABEL_IDS], "int32")
    correct = ops.cast(ops.equal(predicted, labels), "float32")
    accuracy = ops.sum(correct * mask) / ops.maximum(ops.sum(mask), 1.0)
    return {"loss": loss, "accuracy": accuracy}


def make_trainer(task, num_train_steps=1, num_warmup_steps=0):
    return task.make_trainer(
        lambda: models.BertTokenClassifier(
            task.bert_config,
            len(task.label_list),
            use_one_hot_embeddings=task.settings.use_tpu,
        ),
        loss_fn,
        num_train_steps,
        num_warmup_steps,
    )


def element_spec(task, batch_size=None):
    seq = tf.TensorSpec([batch_size, task.settings.max_seq_length], tf.int32)
    return {name: seq for name in SEQ_FEATURES + (LABEL_IDS, LABEL_MASK)}


def train(task, train_data, eval_data=None):
    """Fine-tunes on train_data (a ConllFile), evaluating on eval_data with
    --eval_during_training; returns the Trainer."""
    s = task.settings
    arrays, _ = task.features(train_data.sentences)
    num_windows = len(arrays["input_ids"])
    num_train_steps, num_warmup_steps = common.fine_tuning_steps(
        s, num_windows, "training windows"
    )
    logging.info(
        "***** Running training: %d sentences (%d windows), batch size %d, "
        "%d steps *****",
        len(train_data.sentences),
        num_windows,
        s.train_batch_size,
        num_train_steps,
    )
    trainer = make_trainer(task, num_train_steps, num_warmup_steps)
    publish_labels(task, trainer)

    def make_evaluate(model):
        data = eval_data or read_eval_data(task)
        return lambda step: evaluate(task, model, data, step)

    return fine_tuning.train_on_arrays(
        trainer, arrays, s, task.main_metric, make_evaluate
    )


def read_eval_data(task):
    path = task.data_path("eval_file", EVAL_FILES, "evaluation")
    data = task.read(path)
    conll.check_tags(data, task.label_list)
    return data


def read_predict_data(task):
    path = task.data_path("predict_file", PREDICT_FILES, "prediction")
    data = task.read(path, require_tags=False)
    conll.check_tags(data, task.label_list)
    return data


def predict_words(task, model, sentences, batch_size):
    """Per-word predicted tags of every sentence, and the logits and
    features they came from.

    Returns:
      (tags per sentence, logits [W, T, L] of the real windows, arrays).
    """
    arrays, feats = task.features(sentences)
    logits = task.logits(model, arrays, batch_size, per_position=True)
    predicted = np.argmax(logits, axis=-1)
    tags = conll.word_predictions(feats, predicted, sentences, task.label_list)
    return tags, logits, arrays


def evaluate(task, model, eval_data, global_step):
    """eval_results: conlleval entity precision/recall/F1 (overall and
    `eval_f1_<TYPE>`; a chunk scheme's labels only), token accuracy over
    words, and eval_loss, the mean cross-entropy over labelled pieces."""
    s = task.settings
    logging.info(
        "***** Running evaluation: %d sentences *****",
        len(eval_data.sentences),
    )
    tags, logits, arrays = predict_words(
        task, model, eval_data.sentences, s.eval_batch_size
    )
    scores = conlleval.evaluate([x.tags for x in eval_data.sentences], tags)
    mask = arrays[LABEL_MASK].astype(bool)
    nll = losses.softmax_cross_entropy(logits[mask], arrays[LABEL_IDS][mask])
    results = {
        "eval_accuracy": scores["accuracy"],
        "eval_loss": float(np.mean(np.asarray(nll, np.float64))),
        "global_step": int(global_step),
    }
    if task.scheme in conll.CHUNK_SCHEMES:
        results.update(
            eval_precision=scores["precision"],
            eval_recall=scores["recall"],
            eval_f1=scores["f1"],
        )
        for kind, per in scores["per_type"].items():
            results[f"eval_f1_{kind}"] = per["f1"]
    return results


def predict(task, model, write=True, data=None):
    """Writes output_dir/test_predictions.txt: the predict file's lines,
    each word line with its predicted tag appended (a JSON Lines file's
    sentences as `word [tag] predicted` lines); and predictions.jsonl: each
    sentence's id, words and predicted tags (`data`: the predict file
    already read, by read_predict_data)."""
    s = task.settings
    if data is None:
        data = read_predict_data(task)
    logging.info(
        "***** Running prediction: %d sentences *****", len(data.sentences)
    )
    tags = []
    counter = progress.Progress(
        "Predicting", total=len(data.sentences), unit="sentences"
    )
    for begin in range(0, len(data.sentences), PREDICT_BLOCK):
        block = data.sentences[begin : begin + PREDICT_BLOCK]
        block_tags, _, _ = predict_words(
            task, model, block, s.predict_batch_size
        )
        tags.extend(block_tags)
        counter.add(len(block))
    counter.finish()
    lines = conll.prediction_lines(data, tags)
    if write:
        file_io.write_texts(
            {
                task.path(PREDICTIONS_FILE): "".join(f"{x}\n" for x in lines),
                task.path(predictions.FILE): "".join(
                    predictions.line(
                        {"id": x.id, "tokens": x.words, "tags": predicted}
                    )
                    for x, predicted in zip(data.sentences, tags, strict=True)
                ),
            }
        )
    return tags


def run(settings):
    """run_ner's main(): train, evaluate, predict.

    Returns:
      The eval results (dict) when do_eval, else None.
    """
    task = prepare(settings)
    s = task.settings
    # Every input file is read and checked before anything is written to
    # output_dir (and before training).
    train_data = None
    if s.do_train:
        train_data = task.read(
            task.data_path("train_file", TRAIN_FILES, "training")
        )
    resolve_labels(task, train_data)
    eval_data = read_eval_data(task) if s.do_eval else None
    predict_data = read_predict_data(task) if s.do_predict else None
    if s.do_train:
        trainer = train(task, train_data, eval_data)
    else:
        trainer = make_trainer(task)
        publish_labels(task, trainer)
        fine_tuning.restore_for_inference(
            task, trainer, None, "token classifier head"
        )

    def export(model):
        from modeling.export import tagger as tagger_export

        tagger_export.export_tagger(
            model,
            s.vocab_file,
            s.do_lower_case,
            s.max_seq_length,
            task.label_list,
            s.export_dir,
            extra_files=fine_tuning.tflite_export_files(s, model),
            tokens_field=s.tokens_field,
        )

    return fine_tuning.evaluate_predict_export(
        task,
        trainer,
        lambda model, step: evaluate(task, model, eval_data, step),
        lambda task, model, write: predict(task, model, write, predict_data),
        export,
    )
