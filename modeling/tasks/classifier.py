"""What run_classifier.py does: fine-tune, evaluate, predict, export.

The script parses its flags into a `Settings` and calls `run`; everything else
is here, so it can be tested and reused without absl flags. The steps follow
the original's main(): the case check, the max_seq_length check, the records
written to output_dir (train/eval/predict.tf_record), training for
`int(len(train_examples) / train_batch_size * num_train_epochs)` steps with
`int(num_train_steps * warmup_proportion)` warmup steps, eval_results.txt and
test_results.tsv. Training, checkpoints and resuming are the shared
modeling.training.trainer loop's.

One module, over 500 lines: run_classifier's steps in the original's order; its
data, evaluation, settings and export are their own modules.
"""

import dataclasses
import os

import tensorflow as tf
from absl import logging
from keras import ops

from modeling import backend
from modeling import checkpoints
from modeling import config as config_lib
from modeling import errors
from modeling import models
from modeling import saved_encoder
from modeling import task_kinds
from modeling.data import classifier_data
from modeling.data import custom
from modeling.data import glue
from modeling.data import input_pipeline
from modeling.data import long_inputs as long_inputs_lib
from modeling.export import classifier as classifier_export
from modeling.tasks import classifier_eval
from modeling.tasks import common
from modeling.tasks import fine_tuning
from modeling.tasks.settings import classifier as classifier_settings
from modeling.text import in_graph
from modeling.text import tokenization
from modeling.training import checkpoint_manager

# The script's flags (modeling/tasks/settings/classifier.py).
Settings = classifier_settings.Settings
HubSettings = classifier_settings.HubSettings

# The head is new when fine-tuning starts from a pre-trained checkpoint.
HEAD_VARIABLES = models.BertClassifier.HEAD_VARIABLES


@dataclasses.dataclass
class ClassifierTask:
    """Everything fixed for one run: settings, processor, tokenizer, strategy."""

    settings: Settings
    # None for a hub encoder of unknown config (_read_hub_tokenization).
    bert_config: config_lib.BertConfig | None
    processor: glue.DataProcessor
    label_list: list | None
    tokenizer: tokenization.FullTokenizer
    strategy: tf.distribute.Strategy
    # Classification, regression or multi-label (with its threshold): how
    # the head's logits are trained on, reported and decided.
    kind: task_kinds.TaskKind = None
    # --long_inputs (modeling/data/long_inputs.py): truncate by default.
    long_inputs: long_inputs_lib.LongInputs = None

    @property
    def num_labels(self):
        return 1 if self.label_list is None else len(self.label_list)

    @property
    def multi_label(self):
        return self.kind.label_sets

    def path(self, name):
        return os.path.join(self.settings.output_dir, name)

    def write_records(self, examples, name, total=None):
        """Writes examples (any iterable; `total`: its expected length, for
        the progress lines) to output_dir/name (train/eval/predict.tf_record).

        Returns:
          (path, number of records).
        """
        path = self.path(name)
        count = classifier_data.file_based_convert_examples_to_features(
            examples,
            self.label_list,
            self.settings.max_seq_length,
            self.tokenizer,
            path,
            multi_label=self.multi_label,
            total=total,
            long_inputs=self.long_inputs,
        )
        return path, count

    def _decoded(self, records):
        label_dtype = tf.float32 if self.label_list is None else tf.int64
        spec = input_pipeline.classifier_feature_spec(
            self.settings.max_seq_length,
            label_dtype,
            self.num_labels if self.multi_label else None,
            windowed=self.long_inputs is not None and self.long_inputs.windowed,
        )
        return records.map(
            input_pipeline.as_written(
                lambda record: input_pipeline.decode_record(record, spec)
            ),
            num_parallel_calls=tf.data.AUTOTUNE,
        )

    def read_rows(self, path):
        """The records of `path` (eval/predict.tf_record) decoded, one row
        at a time in file order: what the predictor batches."""
        return self._decoded(tf.data.TFRecordDataset(path))

    def training_batches(self, path, batch_size, windows_per_example=1):
        """The original's training input_fn as a tf.data pipeline: the
        records repeated and shuffled with a buffer of 100 (seeded, see
        common.DEFAULT_DATA_SEED), the remainder dropped; with
        --dynamic_padding each batch is cut to its longest sequence.

        With --long_inputs=chunks a text's windows are consecutive records.
        --chunk_pooling=mean: the buffer holds 100 x `windows_per_example`
        records, so that a batch mixes as many texts as the original's.
        max: the buffer holds 100 texts, each with its windows, which stay
        consecutive (input_pipeline.shuffled_texts), so that the loss can
        take the maximum over a text's windows (loss_fn)."""
        # Repeating a file without records would spin forever.
        input_pipeline.check_record_files([path])
        seed = self.settings.random_seed
        seed = common.DEFAULT_DATA_SEED if seed is None else seed
        records = tf.data.TFRecordDataset(path)
        if _trains_on_texts(self.long_inputs):
            d = input_pipeline.shuffled_texts(self._decoded(records), seed)
        else:
            buffer = input_pipeline.TRAIN_SHUFFLE_BUFFER * windows_per_example
            d = self._decoded(
                input_pipeline.repeat_and_shuffle(records, seed, buffer)
            )
        d = d.batch(batch_size, drop_remainder=True)
        if self.settings.dynamic_padding:
            multiple = input_pipeline.padding_multiple(
                self.settings.max_seq_length, self.settings.run_config.use_xla
            )
            d = d.map(
                input_pipeline.as_written(
                    lambda f: input_pipeline.trim_padding(f, multiple)
                )
            )
        return d.prefetch(2)

    def predictor(self, model, batch_size):
        """The run's predictor (fine_tuning.make_predictor): length-sorted
        batches with --dynamic_padding, fixed shapes without."""
        return fine_tuning.make_predictor(
            self.settings,
            self.strategy,
            model,
            batch_size,
            length_sorted=self.settings.dynamic_padding,
        )


def prepare(settings):
    """Checks the settings as the original's main() does; builds the task.

    Raises:
      ValueError: no mode selected, max_seq_length too long, case mismatch
        with the checkpoint name, unknown task, vocab larger than the model's,
        a --long_inputs flag other than the long_inputs.json of the
        checkpoints in output_dir (LongInputs.of).
    """
    s = settings
    tokenization.validate_case_matches_checkpoint(
        s.do_lower_case, s.init_checkpoint
    )
    common.check_modes(
        s, ("do_train", "do_eval", "do_predict"), closing_quote="'"
    )
    if _hub_handle(s):
        bert_config = _read_hub_tokenization(s)
    else:
        bert_config = config_lib.BertConfig.from_json_file(s.bert_config_file)
    if bert_config is not None:
        config_lib.check_max_seq_length(s.max_seq_length, bert_config)
    on_tpu = common.uses_tpu(s)
    if s.dynamic_padding and on_tpu:
        raise ValueError(
            "--dynamic_padding gives batches of varying shapes, which TPUs "
            "recompile for; leave it off with --use_tpu."
        )
    if s.dynamic_padding is None:
        # Fast by default where the numbers are the same: CPU and GPU.
        s.dynamic_padding = not on_tpu
        logging.info(
            "dynamic_padding: %s (the default %s)",
            s.dynamic_padding,
            "off on TPU" if on_tpu else "on CPU and GPU",
        )
    if bert_config is not None:
        config_lib.check_vocab_size(s.vocab_file, bert_config)
    # Only a folder holding checkpoints binds the run to the labels.json and
    # long_inputs.json its training wrote.
    trained = bool(checkpoint_manager.find_checkpoints(s.output_dir))
    if s.task_name.lower() == custom.TASK_NAME:
        processor = custom.processor_from_settings(s, trained)
    else:
        if not s.data_dir:
            raise ValueError(
                f"--data_dir is required for --task_name={s.task_name} (the "
                "folder of its .tsv files)"
            )
        processor = glue.get_processor(s.task_name)
        if s.multi_label_threshold is not None:
            raise ValueError(
                "--multi_label_threshold is for --task_name=custom "
                "--task_type=multi_label"
            )
    if s.glue_submission_dir and processor.submission_name is None:
        raise ValueError(
            f"--glue_submission_dir: {s.task_name} is not a GLUE task"
        )
    if s.glue_submission_dir:
        name = f"{processor.submission_name}.tsv"
        submission = os.path.realpath(os.path.join(s.glue_submission_dir, name))
        for path in processor.input_files(s.data_dir):
            if os.path.realpath(path) == submission:
                # AX's test file may be data_dir/AX.tsv.
                raise errors.UserError(
                    f"--glue_submission_dir={s.glue_submission_dir}: its "
                    f"{name} would replace the input {path}; give another "
                    "folder"
                )
    long_inputs = long_inputs_lib.LongInputs.of(
        s, s.output_dir if trained else None, s.max_seq_length
    )
    if (
        s.do_train
        and _trains_on_texts(long_inputs)
        and backend.current() == "jax"
    ):
        # Evaluation and prediction combine the windows in numpy: they run.
        raise ValueError(
            "--chunk_pooling=max trains with TensorFlow's segment ops: "
            "with --backend=jax use --chunk_pooling=mean"
        )
    strategy = common.set_up(s)
    tokenizer = tokenization.FullTokenizer(s.vocab_file, s.do_lower_case)
    threshold = getattr(processor, "multi_label_threshold", None)
    kind = task_kinds.get(
        processor.task_type,
        None if threshold == custom.AUTO else threshold,
    )
    if long_inputs.strategy != long_inputs_lib.TRUNCATE:
        logging.info("Long inputs: %s", long_inputs.to_json())
    return ClassifierTask(
        s,
        bert_config,
        processor,
        processor.get_labels(),
        tokenizer,
        strategy,
        kind,
        long_inputs,
    )


def _hub_handle(settings):
    return getattr(settings, "bert_hub_module_handle", None)


def _read_hub_tokenization(settings):
    """Sets vocab_file and do_lower_case from the encoder SavedModel.

    Returns:
      The BertConfig the encoder was exported from (exports of this
      repository carry it), else None: the sequence length and vocabulary
      size are then not checked.
    """
    handle = settings.bert_hub_module_handle
    module = saved_encoder.load_encoder(handle)
    settings.vocab_file, settings.do_lower_case = (
        saved_encoder.tokenization_info(module, handle)
    )
    logging.info(
        "Tokenization of %s: vocab_file=%s, do_lower_case=%s",
        handle,
        settings.vocab_file,
        settings.do_lower_case,
    )
    return saved_encoder.exported_config(handle)


def loss_fn(kind, long_inputs=None):
    """The original's loss: the kind's loss of each example (softmax
    cross-entropy, or the squared error of a regression task's single
    output, or a multi-label task's sigmoid cross-entropies), averaged over
    the whole batch (is_real_example is not used, as in the original); and
    the accuracy of its decisions (none for regression).

    Windows of long texts (--long_inputs=chunks) each carry their text's
    label, and every text counts once:
    - --chunk_pooling=mean: each window's loss weighs 1 / its text's
      windows. The loss is convex in the logits, so this bounds from above
      the loss of the mean of the windows' logits, what evaluation
      combines; and the window that holds the deciding words is pushed to
      decide alone, at the scale of one window's logits.
    - max: a text's windows are consecutive in the batch
      (input_pipeline.shuffled_texts) and the loss is that of their
      maximum logits, as evaluation combines them (a window without the
      deciding words is not pushed to the label). A text cut by the
      batch's edge weighs the share of its windows on each side."""

    def compute(features, logits):
        # keras.ops: this runs inside the compiled step of either backend.
        labels = features[input_pipeline.LABEL_IDS]
        if input_pipeline.EXAMPLE_INDEX not in features:
            return kind.batch_loss(logits, labels)
        if _trains_on_texts(long_inputs):
            logits, labels, weights = _max_of_windows(features, logits)
        else:
            weights = 1.0 / ops.cast(
                features[input_pipeline.NUM_WINDOWS], logits.dtype
            )
        losses = kind.example_loss(logits, labels)
        correct = kind.correct(logits, labels)
        results = {"loss": ops.sum(weights * losses) / ops.sum(weights)}
        if correct is not None:
            if len(correct.shape) > 1:  # Multi-label: per decision.
                correct = ops.mean(correct, axis=-1)
            rows = ops.cast(weights > 0, correct.dtype)
            results["accuracy"] = ops.sum(rows * correct) / ops.sum(rows)
        return results

    return compute


def _trains_on_texts(long_inputs):
    """Whether training batches whole texts and takes the loss of their
    windows' maximum (--long_inputs=chunks --chunk_pooling=max)."""
    return (
        long_inputs is not None
        and long_inputs.windowed
        and long_inputs.chunk_pooling == "max"
    )


def _max_of_windows(features, logits):
    """A batch's windows -> one row per run of windows of one text: (their
    maximum logits, the text's label, the share of the text's windows in
    the run), each [B, ...] with the rows past the runs weighing 0 (static
    shapes, as XLA wants)."""
    index = features[input_pipeline.EXAMPLE_INDEX]
    rows = tf.shape(index)[0]
    new = tf.concat([[True], tf.not_equal(index[1:], index[:-1])], 0)
    runs = tf.cumsum(tf.cast(new, tf.int32)) - 1
    combined = tf.math.unsorted_segment_max(logits, runs, rows)
    size = tf.math.unsorted_segment_sum(tf.ones_like(runs), runs, rows)
    used = size > 0
    # Rows past the runs: 0 (an empty maximum is the lowest float).
    shape = tf.concat([[rows], tf.ones([tf.rank(logits) - 1], tf.int32)], 0)
    combined = tf.where(tf.reshape(used, shape), combined, 0.0)
    first = tf.math.unsorted_segment_min(tf.range(rows), runs, rows)
    first = tf.where(used, first, 0)
    labels = tf.gather(features[input_pipeline.LABEL_IDS], first)
    windows = tf.gather(features[input_pipeline.NUM_WINDOWS], first)
    share = tf.cast(size, logits.dtype) / tf.cast(windows, logits.dtype)
    return combined, labels, tf.where(used, share, 0.0)


def build_classifier(bert_config, num_labels, use_one_hot_embeddings=False):
    """models.BertClassifier (its head turns Keras autocasting off itself, so
    it works under a mixed-precision policy)."""
    return models.BertClassifier(
        bert_config, num_labels, use_one_hot_embeddings=use_one_hot_embeddings
    )


def make_trainer(task, num_train_steps=1, num_warmup_steps=0):
    """The shared training.Trainer around a BertClassifier, or with
    --bert_hub_module_handle a saved_encoder.BertHubClassifier (for
    inference only, the step counts just have to be valid)."""
    s = task.settings

    def build_model():
        if _hub_handle(s):
            return saved_encoder.BertHubClassifier(
                s.bert_hub_module_handle, task.num_labels
            )
        return build_classifier(
            task.bert_config, task.num_labels, use_one_hot_embeddings=s.use_tpu
        )

    def init_fn(model):
        if _hub_handle(s):
            return  # The encoder's weights are the module's already.
        # Only weights come from init_checkpoint (fresh Adam slots, step 0);
        # the classifier head is new unless the checkpoint has one.
        checkpoints.load_weights(
            model, s.init_checkpoint, ignore_missing=HEAD_VARIABLES
        )

    return common.make_trainer(
        s,
        task.strategy,
        build_model,
        loss_fn(task.kind, task.long_inputs),
        init_fn,
        num_train_steps,
        num_warmup_steps,
    )


def check_inputs(task):
    """Reads the dev and test files before training: a typo in a path, an
    unseen dev label, a ragged row or bytes that are not UTF-8 fail in
    seconds, not after the training run (a custom file too large to read in
    seconds gets its columns and first rows checked, the rest as it is
    used: custom.CustomProcessor.check_file)."""
    s = task.settings
    processor = task.processor
    # --eval_during_training reads the dev set at the first checkpoint:
    # checked now, not after train.tf_record and those steps.
    dev = s.do_eval or (s.do_train and s.eval_during_training)
    for needed, set_type in ((dev, "dev"), (s.do_predict, "test")):
        if not needed:
            continue
        if isinstance(processor, custom.CustomProcessor):
            processor.check_file(set_type)
        elif set_type == "dev":
            _check_not_empty(processor.get_dev_examples(s.data_dir), s)
        else:
            processor.get_test_examples(s.data_dir)


def _check_not_empty(examples, settings):
    if not examples:
        raise ValueError(
            f"The dev set of --task_name={settings.task_name} in "
            f"{settings.data_dir} has no example: nothing to evaluate"
        )


def train(task, trainer, train_examples):
    """Writes train.tf_record and fine-tunes with `trainer` (made for the
    steps of `train_examples`); returns it."""
    s = task.settings
    train_file, records = task.write_records(train_examples, "train.tf_record")
    logging.info(
        "***** Running training: %d examples, batch size %d, %d steps *****",
        len(train_examples),
        s.train_batch_size,
        trainer.config.num_train_steps,
    )
    windows = -(-records // max(len(train_examples), 1))

    def dataset_fn(start_step):
        d = task.training_batches(train_file, s.train_batch_size, windows)
        return d.skip(start_step)

    def make_evaluate(model):
        eval_file = classifier_eval.eval_examples_and_file(task)
        return lambda step: classifier_eval.evaluate(
            task, model, eval_file, step
        )

    return fine_tuning.train(
        trainer, dataset_fn, s, task.processor.main_metric, make_evaluate
    )


def restore_for_inference(task, trainer, element_spec):
    """Loads the weights eval/predict/export use when nothing was trained
    (Trainer.restore_for_inference): the newest checkpoint in output_dir (as
    the Estimator did), else --init_checkpoint (the head stays untrained: a
    warning says so).

    Raises:
      ValueError: neither exists.
    """
    s = task.settings
    # The TF Hub module is the initial weights there, as the original's
    # Estimator initialized from it.
    initial = _hub_handle(s) or s.init_checkpoint
    trainer.restore_for_inference(
        element_spec,
        missing_message=(
            f"No checkpoint in --output_dir={s.output_dir} and no "
            "--init_checkpoint: nothing to evaluate. Train first (--do_train)."
        ),
        init_warning=(
            f"No checkpoint in {s.output_dir}: using {initial}, whose "
            "classifier head is untrained."
        ),
    )


def export(task, model):
    """Writes the serving SavedModel to --export_dir."""
    s = task.settings
    classifier_export.export_classifier(
        model,
        in_graph.TextPreprocessor(
            s.vocab_file, s.do_lower_case, s.max_seq_length
        ),
        s.export_dir,
        kind=task.kind,
        has_text_b=task.processor.has_text_b,
        label_list=task.label_list,
        max_seq_length=s.max_seq_length,
        tflite_quantize=fine_tuning.tflite_quantize(s),
        long_inputs=task.long_inputs,
        # A custom task's columns: predict_lite.py reads them by default.
        text_columns=(
            getattr(task.processor, "text_a_column", None),
            getattr(task.processor, "text_b_column", None),
        ),
    )
    logging.info("Exported the serving SavedModel to %s", s.export_dir)


def run(settings):
    """run_classifier's main(): train, then evaluate, predict and export.

    Returns:
      The eval results (dict) when do_eval, else None.
    """
    task = prepare(settings)
    s = task.settings
    # Everything that can be checked is, before anything is written to
    # output_dir: the input files, then the checkpoints already there.
    check_inputs(task)
    train_examples = None
    if s.do_train:
        train_examples = task.processor.get_train_examples(s.data_dir)
        # With chunks an epoch is every window of every text.
        num_rows = classifier_data.count_records(
            train_examples, s.max_seq_length, task.tokenizer, task.long_inputs
        )
        trainer = make_trainer(task, *common.fine_tuning_steps(s, num_rows))
    else:
        trainer = make_trainer(task)
    trainer.check_output_dir(
        _element_spec(task, s.train_batch_size if s.do_train else None)
    )
    if not _hub_handle(s):
        fine_tuning.check_init_checkpoint(trainer, s, HEAD_VARIABLES)
    if trainer.is_chief and isinstance(task.processor, custom.CustomProcessor):
        custom.publish_spec(task.processor)
    if s.do_train and trainer.is_chief:
        task.long_inputs.save(s.output_dir)
    if s.do_train:
        train(task, trainer, train_examples)
    else:
        restore_for_inference(task, trainer, None)
    results = None
    if s.do_eval:
        eval_file = classifier_eval.eval_examples_and_file(task)
        logits = classifier_eval.dev_logits(task, trainer.model, eval_file)
        if (
            getattr(task.processor, "multi_label_threshold", None)
            == custom.AUTO
        ):
            classifier_eval.choose_threshold(task, logits, trainer.is_chief)
        results = classifier_eval.evaluate(
            task, trainer.model, eval_file, trainer.global_step, logits
        )
        if trainer.is_chief:
            fine_tuning.write_eval_results(
                task.path(common.EVAL_RESULTS_FILE), results
            )
    if s.do_predict:
        classifier_eval.predict(task, trainer.model, trainer.is_chief)
    if s.export_dir and trainer.is_chief:
        export(task, trainer.model)
    return results


def _element_spec(task, batch_size=None):
    """The batches' structure, from which the Trainer builds its variables
    (`batch_size`: training's, whose divisibility the Trainer checks)."""
    seq = [
        batch_size,
        None if task.settings.dynamic_padding else task.settings.max_seq_length,
    ]
    spec = {
        name: tf.TensorSpec(seq, tf.int32)
        for name in input_pipeline.CLASSIFIER_SEQ_FEATURES
    }
    label = tf.float32 if task.label_list is None else tf.int32
    label_shape = [None, task.num_labels] if task.multi_label else [None]
    label_shape[0] = batch_size
    spec[input_pipeline.LABEL_IDS] = tf.TensorSpec(label_shape, label)
    spec[input_pipeline.IS_REAL_EXAMPLE] = tf.TensorSpec([batch_size], tf.int32)
    if task.long_inputs is not None and task.long_inputs.windowed:
        for name in (input_pipeline.EXAMPLE_INDEX, input_pipeline.NUM_WINDOWS):
            spec[name] = tf.TensorSpec([batch_size], tf.int32)
    return spec
