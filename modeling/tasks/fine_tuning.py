"""What run_ner.py and run_multiple_choice.py share: in-memory feature
arrays as tf.data pipelines, the model's logits over them in order; and
what every fine-tuning script shares: the predictor of its evaluation and
prediction (`make_predictor`, `tflite_export_files`), and
--eval_during_training's best-checkpoint keeping (`train`,
`BestCheckpointKeeper`).

Their features are small (a few int arrays per example), so they are kept
as numpy arrays rather than written to TFRecords first.
"""

import dataclasses
import math
import os
import re

import tensorflow as tf
from absl import logging

from modeling import checkpoints
from modeling import config as config_lib
from modeling.data import input_pipeline
from modeling.export import tflite
from modeling.tasks import common
from modeling.tasks import metrics
from modeling.tasks.settings import common as settings_common
from modeling.text import tokenization
from modeling.training import checkpoint_manager
from modeling.training import predictor as predictor_lib

# --eval_during_training: the best checkpoint's folder in output_dir, and the
# file every evaluation is appended to.
BEST_DIR = "best"
EVAL_HISTORY_FILE = "eval_history.txt"

# The root-scope head of the classifier, tagger and multiple-choice models.
HEAD_VARIABLES = ("output_weights", "output_bias")


@dataclasses.dataclass
class ArrayTask:
    """What a task of run_ner / run_multiple_choice holds: its settings, the
    model config, the tokenizer and the strategy (`ArrayTask.prepare`)."""

    settings: settings_common.FineTuningSettings
    bert_config: config_lib.BertConfig
    tokenizer: tokenization.FullTokenizer
    strategy: tf.distribute.Strategy

    @classmethod
    def prepare(cls, settings):
        """Checks the settings and sets up; returns the task.

        Raises:
          ValueError: no mode, max_seq_length too long, case mismatch, vocab
            larger than the model's.
        """
        s = settings
        tokenization.validate_case_matches_checkpoint(
            s.do_lower_case, s.init_checkpoint
        )
        common.check_modes(
            s, ("do_train", "do_eval", "do_predict"), closing_quote="'"
        )
        bert_config = config_lib.BertConfig.from_json_file(s.bert_config_file)
        config_lib.check_max_seq_length(s.max_seq_length, bert_config)
        config_lib.check_vocab_size(s.vocab_file, bert_config)
        strategy = common.set_up(s)
        tokenizer = tokenization.FullTokenizer(s.vocab_file, s.do_lower_case)
        return cls(s, bert_config, tokenizer, strategy)

    def make_trainer(
        self, build_model, loss_fn, num_train_steps=1, num_warmup_steps=0
    ):
        """A Trainer of `build_model()` that starts from --init_checkpoint:
        the encoder, and the head too if it has this model's shape."""
        s = self.settings
        return common.make_trainer(
            s,
            self.strategy,
            build_model,
            loss_fn,
            lambda model: init_from_checkpoint(model, s.init_checkpoint),
            num_train_steps,
            num_warmup_steps,
        )

    def path(self, name):
        """`name` in output_dir."""
        return os.path.join(self.settings.output_dir, name)

    def logits(self, model, arrays, batch_size, per_position=False):
        """The model's logits for every row of the feature `arrays`, in
        input order (make_predictor's batches). per_position: logits with a
        sequence axis (a tagger's [N, T, L]), given at the arrays' full
        width (zeros at the positions a batch was cut at)."""
        s = self.settings
        predictor = make_predictor(
            s,
            self.strategy,
            model,
            batch_size,
            rank=arrays["input_ids"].ndim,
        )
        model_inputs = {k: arrays[k] for k in predictor_lib.MODEL_FEATURES}
        _, outputs = predictor.gather(
            model_inputs,
            width=arrays["input_ids"].shape[-1],
            seq_outputs=("logits",) if per_position else (),
            total=len(arrays["input_ids"]),
        )
        return outputs["logits"]

    def data_path(self, flag, names, what):
        """The file of a flag, else the first of `names` in data_dir."""
        s = self.settings
        value = getattr(s, flag)
        if value:
            return value
        if not s.data_dir:
            raise ValueError(f"--{flag} or --data_dir is required for {what}")
        for name in names:
            path = os.path.join(s.data_dir, name)
            if tf.io.gfile.exists(path):
                return path
        raise FileNotFoundError(
            f"No {what} file in --data_dir={s.data_dir} (looked for "
            f"{', '.join(names)}); name it with --{flag}"
        )


def init_from_checkpoint(model, path):
    """--init_checkpoint for a model with a root-scope head (model.bert +
    `output_weights` / `output_bias`).

    The encoder always comes from the checkpoint. The head does too when the
    checkpoint has one of the model's shapes (continuing a run of the same
    task and labels); a pre-trained checkpoint has none, and the head of
    another task (a classifier's [2, H], a tagger's [L, H]) has another
    shape: the head then starts fresh, so a checkpoint fine-tuned by any of
    the scripts initialises the others.
    """
    shapes = checkpoints.checkpoint_shapes(path)
    head = [
        v
        for v in model.weights
        if checkpoints.variable_name(v) in HEAD_VARIABLES
    ]
    if all(
        shapes.get(checkpoints.variable_name(v)) == tuple(v.shape) for v in head
    ):
        return checkpoints.load_weights(model, path)
    other = {n: list(shapes[n]) for n in HEAD_VARIABLES if n in shapes}
    if other:
        logging.warning(
            "%s has a head of another shape (%s): only the encoder is "
            "loaded; the head starts untrained.",
            path,
            other,
        )
    return checkpoints.load_weights(model.bert, path)


def check_init_checkpoint(
    trainer, settings, ignore_missing=HEAD_VARIABLES, encoder_only=False
):
    """--init_checkpoint, when the run will start from it (output_dir holds
    no checkpoint): there, readable, and of this model's names and shapes
    (`ignore_missing`: the new head; `encoder_only`: the encoder's alone,
    for a model whose head starts fresh from a checkpoint's head of another
    shape, `init_from_checkpoint`). What a run calls after
    Trainer.check_output_dir, before it writes anything to output_dir or
    spends minutes on its features.

    Raises:
      FileNotFoundError, ValueError: one line naming the flag.
    """
    s = settings
    if not s.init_checkpoint or trainer.manager.candidates():
        return
    model = trainer.model.bert if encoder_only else trainer.model
    try:
        checkpoints.check_weights(model, s.init_checkpoint, ignore_missing)
    except (FileNotFoundError, ValueError) as e:
        message = f"--init_checkpoint={s.init_checkpoint}: {e}"
        raise type(e)(message) from None


def train_dataset(arrays, batch_size, seed, start_step=0, map_batch=None):
    """Training batches: every epoch a new seeded shuffle of all examples,
    repeated, remainder dropped, positioned after `start_step` batches (a
    resumed run sees the batches an uninterrupted one would); `map_batch`,
    if given, applied to each batch (e.g. cutting its padding)."""
    n = len(next(iter(arrays.values())))
    d = tf.data.Dataset.from_tensor_slices(arrays)
    seed = common.DEFAULT_DATA_SEED if seed is None else seed
    d = d.shuffle(n, seed=seed, reshuffle_each_iteration=True).repeat()
    d = d.batch(batch_size, drop_remainder=True)
    if start_step:
        d = d.skip(start_step)
    if map_batch is not None:
        d = d.map(input_pipeline.as_written(map_batch))
    return d.prefetch(2)


def make_predictor(
    settings, strategy, model, batch_size, rank=2, length_sorted=True
):
    """The predictor of a fine-tuning run's evaluation and prediction
    (modeling/training/predictor.py): the --predict_runtime backend,
    length-sorted batches (fixed shapes on TPU or without
    `length_sorted`), each cut to its longest row (with XLA, a few batch
    lengths only).

    Args:
      rank: of the features (3: multiple choice), for TF Lite.
    """
    s = settings
    backend = predictor_lib.make_backend(
        s.run_config.runtime, model, strategy, rank
    )
    return predictor_lib.Predictor(
        backend,
        batch_size,
        length_sorted=length_sorted and not common.uses_tpu(s),
        multiple=input_pipeline.predict_multiple(
            s.max_seq_length, s.run_config.use_xla
        ),
    )


def tflite_quantize(settings):
    """Whether the run's TF Lite model is int8 (True) or float32 (False);
    None when it evaluates and predicts with TensorFlow."""
    runtime = settings.run_config.runtime
    return None if runtime == "tensorflow" else runtime == "tflite_int8"


def tflite_export_files(settings, model, rank=2):
    """What an --export_dir holds besides its SavedModel when the run
    evaluates and predicts through TF Lite (the same converted model), else
    None: see base.save_export's `extra_files`."""
    runtime = settings.run_config.runtime
    if runtime == "tensorflow":
        return None
    backend = predictor_lib.TFLiteBackend.of_model(
        model, quantize=runtime == "tflite_int8", rank=rank
    )
    return tflite.export_files(
        backend.content, backend.output_names, backend.quantized
    )


def write_eval_results(path, results):
    """Logs the results and writes eval_results.txt (sorted `key = value`
    lines, floats as float32 values)."""
    logging.info(
        "***** Eval results *****\n%s", metrics.format_eval_results(results)
    )
    common.write_eval_results(path, metrics.as_reported(results))


class BestCheckpointKeeper:
    """--eval_during_training: evaluates at each checkpoint, keeps the best,
    the same for every fine-tuning script: the best weights (no optimizer
    slots, so it is small and loads like a released checkpoint plus the
    head) in output_dir/best/model.ckpt-<step> with its eval_results.txt,
    every evaluation appended to output_dir/eval_history.txt.

    Args:
      evaluate: global_step -> dict of eval results (with global_step).
      model: the model being trained.
      output_dir: str.
      metric: the key of the results to maximize (e.g. "eval_f1").
      write: whether this process writes files (the chief of a multi-worker
        run); every worker evaluates, as the collective ops require.
    """

    def __init__(self, evaluate, model, output_dir, metric, write=True):
        self.evaluate = evaluate
        self.model = model
        self.output_dir = output_dir
        self.metric = metric
        self.write = write
        self.best_dir = os.path.join(output_dir, BEST_DIR)
        self.best_value = _previous_best(self.best_dir, metric)
        # Steps an earlier run of this output_dir evaluated (a resume
        # offers its restored step again: see Trainer.train).
        self.evaluated = _evaluated_steps(
            os.path.join(output_dir, EVAL_HISTORY_FILE)
        )

    def __call__(self, global_step):
        """Evaluates the current weights; returns the eval results (None
        for a step evaluated already)."""
        if int(global_step) in self.evaluated:
            return None
        self.evaluated.add(int(global_step))
        results = self.evaluate(global_step)
        if not self.write:
            return results
        value = results[self.metric]
        if math.isnan(value):
            # Never a best: nothing would beat it (x > nan is False).
            logging.warning(
                "%s is nan at step %d: not a best checkpoint",
                self.metric,
                global_step,
            )
        elif self.best_value is None or value > self.best_value:
            logging.info(
                "New best %s = %s at step %d", self.metric, value, global_step
            )
            self.best_value = value
            # The trainable weights under their original names (no Keras
            # dropout seed states), as the training checkpoints hold them.
            checkpoints.write_checkpoint(
                os.path.join(self.best_dir, f"model.ckpt-{int(global_step)}"),
                checkpoint_manager.model_variables(self.model),
                global_step=global_step,
                keep_max=1,
            )
            write_eval_results(
                os.path.join(self.best_dir, common.EVAL_RESULTS_FILE), results
            )
        # Last: a step in the history counts as evaluated (a resume does not
        # offer it again), so its best checkpoint is written first.
        history = os.path.join(self.output_dir, EVAL_HISTORY_FILE)
        line = metrics.format_eval_results(results).replace("\n", "  ")
        with tf.io.gfile.GFile(history, "a") as f:
            f.write(line.rstrip() + "\n")
        return results


def _evaluated_steps(history):
    """The global_steps of eval_history.txt's lines (none without one)."""
    if not tf.io.gfile.exists(history):
        return set()
    with tf.io.gfile.GFile(history) as f:
        return {int(m) for m in re.findall(r"global_step = (\d+)", f.read())}


def _previous_best(best_dir, metric):
    """`metric` of an earlier run's best checkpoint (resume), if any."""
    path = os.path.join(best_dir, common.EVAL_RESULTS_FILE)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        for line in f:
            key, _, value = line.partition(" = ")
            if key == metric:
                value = float(value)
                return None if math.isnan(value) else value
    return None


def train(trainer, dataset_fn, settings, metric, make_evaluate):
    """Runs `trainer.train(dataset_fn)`; with --eval_during_training, first
    hooks a BestCheckpointKeeper on `metric` to every checkpoint it saves.

    Args:
      trainer: the task's Trainer.
      dataset_fn: start_step -> the training batches from that step on.
      settings: the task's FineTuningSettings.
      metric: the eval results' key that picks the best checkpoint.
      make_evaluate: model -> (global_step -> eval results); called once,
        only when evaluating during training (it reads the eval data).

    Returns:
      The trainer.
    """
    if settings.eval_during_training:
        trainer.build(dataset_fn(0).element_spec)
        keeper = BestCheckpointKeeper(
            make_evaluate(trainer.model),
            trainer.model,
            settings.output_dir,
            metric,
            write=trainer.is_chief,
        )
        trainer.save_callbacks.append(lambda step, prefix: keeper(step))
    trainer.train(dataset_fn)
    return trainer


def train_on_arrays(
    trainer, arrays, settings, metric, make_evaluate, map_batch=None
):
    """`train` on in-memory feature arrays (`train_dataset`: shuffled with
    --random_seed, resumable at any step, each batch through `map_batch`)."""

    def dataset_fn(start_step):
        return train_dataset(
            arrays,
            settings.train_batch_size,
            settings.random_seed,
            start_step,
            map_batch,
        )

    return train(trainer, dataset_fn, settings, metric, make_evaluate)


def restore_for_inference(task, trainer, element_spec, head):
    """Without --do_train: the newest checkpoint in output_dir, else
    --init_checkpoint, whose `head` (e.g. "choice head") is untrained: a
    warning says so (Trainer.restore_for_inference)."""
    s = task.settings
    trainer.restore_for_inference(
        element_spec,
        missing_message=(
            f"No checkpoint in --output_dir={s.output_dir} and no "
            "--init_checkpoint: nothing to evaluate. Train first "
            "(--do_train)."
        ),
        init_warning=(
            f"No checkpoint in {s.output_dir}: using {s.init_checkpoint}, "
            f"whose {head} is untrained."
        ),
    )
    return trainer


def evaluate_predict_export(task, trainer, evaluate, predict, export):
    """The steps after training, as the flags ask: --do_eval (eval_results.txt),
    --do_predict, --export_dir (the chief writes).

    Args:
      evaluate: (model, global_step) -> eval results.
      predict: (task, model, write) -> writes test_results.tsv.
      export: model -> writes the serving SavedModel to --export_dir.

    Returns:
      The eval results (dict) when do_eval, else None.
    """
    s = task.settings
    results = None
    if s.do_eval:
        results = evaluate(trainer.model, trainer.global_step)
        if trainer.is_chief:
            write_eval_results(task.path(common.EVAL_RESULTS_FILE), results)
    if s.do_predict:
        predict(task, trainer.model, trainer.is_chief)
    if s.export_dir and trainer.is_chief:
        export(trainer.model)
        logging.info("Exported the serving SavedModel to %s", s.export_dir)
    return results
