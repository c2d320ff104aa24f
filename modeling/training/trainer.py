"""The task-agnostic training and evaluation loop (run_pretraining,
run_classifier, run_squad).

A task gives three callables; the loop does the rest:

    task = training.Task(
        build_model=lambda: models.BertPretrainer(config),   # under scope
        loss_fn=lambda features, outputs: {"loss": ..., ...},
        eval_metrics_fn=lambda features, outputs: {"acc": (sum, weight)},
    )
    trainer = training.Trainer(task, training.RunConfig(...), strategy)
    trainer.train(lambda start_step: dataset_positioned_at(start_step))
    results = trainer.evaluate(eval_dataset, max_eval_steps)

`loss_fn` returns replica-local float32 scalars; "loss" is minimized, the rest
are logged (averaged over replicas and steps). `eval_metrics_fn` returns
(sum, weight) pairs, summed over replicas and batches; a metric is
sum / weight (the tf.metrics.mean of the original's Estimator).

What the loop provides: the original's AdamWeightDecay (or LAMB), several
steps per tf.function call (`iterations_per_loop`), gradient accumulation,
mixed precision (dynamic loss scaling for float16), XLA for the forward and
backward pass, checkpoints every `save_checkpoints_steps` in the original
format (resumed automatically, with a fallback when the newest is damaged),
a checkpoint on SIGTERM, a clear error on a non-finite loss, logs and
TensorBoard summaries in output_dir.

One module, over 500 lines: the loop, its checkpoints, resumption and logs
share the loop's state.
"""

import dataclasses
import os
import threading
import time
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from modeling import backend
from modeling import checkpoints
from modeling import encoder
from modeling import errors
from modeling import progress
from modeling import signals
from modeling.data import input_pipeline
from modeling.training import checkpoint_manager
from modeling.training import distribute
from modeling.training import optimization
from modeling.training import predictor
from modeling.training import run_config
from modeling.training import steps

# The run settings (modeling/training/run_config.py: TensorFlow-free, the
# training flags' declaration).
RunConfig = run_config.RunConfig


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or Inf; training stopped."""


class TrainingInterrupted(errors.Interrupted, RuntimeError):
    """SIGTERM: a checkpoint was saved and training stopped early (the
    scripts exit with tasks.common.EXIT_INTERRUPTED)."""


@dataclasses.dataclass
class Task:
    """What differs between tasks.

    Attributes:
      build_model: () -> keras.Model, called under the strategy scope. The
        model takes a dict of features (`model(features, training=...)`).
      loss_fn: (features, outputs) -> dict of float32 scalars with "loss".
      eval_metrics_fn: (features, outputs) -> dict name -> (sum, weight).
      batch_metrics_fn: optional, a batch's summed eval_metrics_fn pairs
        (over every replica: floats) -> more pairs, for a metric of the
        whole batch that is no sum of its rows (pre-training's "loss", the
        batch's total loss, whose masked-LM term divides by the batch's
        weight sum, not by a replica's).
      init_fn: optional model -> None, run when output_dir has no checkpoint
        (e.g. load --init_checkpoint with `checkpoints.load_weights`).
    """

    build_model: Callable
    loss_fn: Callable
    eval_metrics_fn: Callable | None = None
    init_fn: Callable | None = None
    batch_metrics_fn: Callable | None = None


class Trainer:
    """Builds the model and optimizer under a strategy and runs the loops.

    The loop is the same on both Keras backends; the compiled step is the
    backend's: steps.StepFunctions (tf.function under the strategy) on
    TensorFlow, jax_steps.TrainerSteps (jax.jit over every device, of
    every process on several hosts) on JAX, where the strategy is TensorFlow's default one (tf.data reads
    the records on the host).

    Args:
      task: Task.
      config: RunConfig.
      strategy: tf.distribute.Strategy (default: the current one).
    """

    def __init__(self, task, config, strategy=None):
        self.task = task
        self.config = config
        self.strategy = strategy or tf.distribute.get_strategy()
        self.backend = backend.current()
        if self.backend == "jax" and self.strategy.num_replicas_in_sync > 1:
            raise ValueError(
                "--backend=jax splits each batch over every local device "
                "itself: run it without a tf.distribute strategy "
                "(--strategy=default, no --use_tpu)"
            )
        if config.gradient_accumulation_steps < 1:
            raise ValueError("gradient_accumulation_steps must be >= 1")
        with self.strategy.scope():
            self.model = task.build_model()
            if config.gradient_checkpointing:
                encoder.set_gradient_checkpointing(self.model)
            self.optimizer = optimization.create_optimizer(
                config.learning_rate,
                # An evaluation-only run (the original's --num_train_steps
                # may be 0 then) makes no update.
                max(config.num_train_steps, 1),
                config.num_warmup_steps,
                config.optimizer_type,
                name_fn=checkpoints.variable_name,
            )
        self.is_chief = distribute.is_chief(self.strategy)
        self.manager = None
        self._steps = None
        self._built = False
        self._writer = None
        self.stop_signal = steps.StopSignal()
        self.stop_signal.on_stuck = self._save_and_exit_stuck
        self.stop_signal.step_fn = lambda: self.global_step
        self._save_lock = threading.Lock()
        self._on_tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
        # Called as fn(global_step, prefix) after each checkpoint (e.g.
        # run_classifier's --eval_during_training).
        self.save_callbacks = []
        # Workers must agree to stop: they vote (steps.StepFunctions).
        self.stop_signal.alone = not isinstance(
            self.strategy, tf.distribute.MultiWorkerMirroredStrategy
        )

    # === Set-up ===

    def build(self, element_spec):
        """Creates every variable (model, slots, step) under the scope.

        Args:
          element_spec: the dataset's element_spec (a dict of TensorSpecs);
            a model whose heads are built lazily is called once on zeros
            (on JAX, on symbolic tensors of those shapes).
        """
        if self._built:
            return
        self._check_batch_size(element_spec)
        # Unknown dimensions (dynamic padding) get length 2.
        shapes = {
            k: (1, *(d or 2 for d in s.shape[1:]))
            for k, s in element_spec.items()
        }
        self._symbolic_inputs = {
            k: keras.KerasTensor(shapes[k], s.dtype.name)
            for k, s in element_spec.items()
        }
        with self.strategy.scope():
            if self.backend == "jax":
                # A symbolic call builds lazy layers from the shapes and
                # runs no op (eagerly, JAX compiles each op on its own:
                # ~100 small programs, seconds); the JAX step finds the
                # logged values' names when it traces.
                self.model(self._symbolic_inputs, training=False)
            else:
                # One eager call on zeros builds lazy layers and names the
                # logged values.
                dummy = {
                    k: tf.zeros(shapes[k], s.dtype)
                    for k, s in element_spec.items()
                }
                logs = self.task.loss_fn(
                    dummy, self.model(dummy, training=False)
                )
            self.optimizer.build(self.model.trainable_variables)
            if self.backend == "jax":
                from modeling.training import jax_steps

                self._steps = jax_steps.TrainerSteps(
                    self.model,
                    self.task.loss_fn,
                    self.task.eval_metrics_fn,
                    self.optimizer,
                    self.config,
                )
            else:
                self._steps = steps.StepFunctions(
                    self.model,
                    self.task,
                    self.optimizer,
                    self.strategy,
                    self.config,
                    log_keys=sorted(logs),
                )
        self.manager = checkpoint_manager.CheckpointManager(
            self.config.output_dir,
            self.model,
            self.optimizer,
            self.config.keep_checkpoint_max,
            self.is_chief,
            getattr(self._steps, "checkpoint_variables", dict)(),
        )
        self._built = True

    def _check_batch_size(self, element_spec):
        batch = next(iter(element_spec.values())).shape[0]
        replicas = self.strategy.num_replicas_in_sync
        if self.backend == "jax":
            import jax

            replicas = jax.device_count()
        parts = replicas * self.config.gradient_accumulation_steps
        if batch is not None and batch % parts:
            raise ValueError(
                f"The batch size {batch} must be divisible by the number of "
                f"replicas ({replicas}) times "
                "gradient_accumulation_steps "
                f"({self.config.gradient_accumulation_steps})."
            )

    def check_output_dir(self, element_spec):
        """Builds the variables and checks that the checkpoints already in
        output_dir (if any) are this model's, reading no weight: what a run
        calls before it writes anything there (records, a label list).

        Raises:
          checkpoint_manager.ConfigMismatchError: naming what differs (the
            number of labels when only the output layer does).
        """
        self.build(element_spec)
        self.manager.check_compatible()

    def restore_or_initialize(self):
        """Resumes from output_dir, else runs task.init_fn; returns the step."""
        if self.manager.restore_latest() is None and self.task.init_fn:
            self.task.init_fn(self.model)
        self._check_processes_start_together()
        self._position_dropout()
        self._steps.reset()
        return self.global_step

    def _check_processes_start_together(self):
        """With several processes (TF_CONFIG's workers, JAX's processes),
        refuses to train, evaluate or predict when they restored different
        steps: each reads output_dir's newest checkpoint, and a worker
        whose output_dir does not hold the chief's checkpoints started
        afresh, its gradients averaged into the chief's resumed model, or
        its share of each evaluated batch computed by another model
        (silently mixed). All-reduces the step, so every process raises.

        Raises:
          ValueError: naming the steps and output_dir.
        """
        step = self.global_step
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            low, high = distribute.worker_range(self.strategy, step)
        elif self.backend == "jax" and backend.several_processes():
            from jax.experimental import multihost_utils

            steps = multihost_utils.process_allgather(np.int32(step))
            low, high = int(np.min(steps)), int(np.max(steps))
        else:
            return
        if low != high:
            raise ValueError(
                f"The processes restored different steps ({low} to "
                f"{high}; this one {step}): each restores the newest "
                "checkpoint in its --output_dir, which must be one folder "
                f"every process sees (shared storage), not a "
                f"{self.config.output_dir} of each host's own"
            )

    def _position_dropout(self):
        """Sets every dropout generator's state to an uninterrupted run's at
        the global step, so a resumed run draws the same masks and ends
        with the same weights: a generator keeps its seed (fixed by the
        model's construction under --random_seed) and counts its draws,
        gradient_accumulation_steps times a forward pass's a step. What a
        forward pass draws is counted on a symbolic call (it runs each
        layer's Python and computes nothing): one a layer, two or three
        for run_embeddings' sides, the checkpointed pass's second run
        drawing none. The checkpoint holds no random state, as the
        original's held none."""
        step = self.global_step
        generators = [
            g
            for layer in self.model._flatten_layers()
            if isinstance(
                g := getattr(layer, "seed_generator", None),
                keras.random.SeedGenerator,
            )
        ]
        if not step or not generators:
            return
        draws = {id(g): 0 for g in generators}

        def counting(generator):
            def next_seed(ordered=True):
                draws[id(generator)] += 1
                return type(generator).next(generator, ordered)

            return next_seed

        for g in generators:
            g.next = counting(g)
        try:
            self.model(self._symbolic_inputs, training=True)
        finally:
            for g in generators:
                del g.next
        per_step = self.config.gradient_accumulation_steps
        for g in generators:
            seed = keras.ops.convert_to_numpy(g.state.value)
            # Wrapped as the counter wraps (JAX's is uint32).
            count = (
                step
                * per_step
                * draws[id(g)]
                % (int(np.iinfo(seed.dtype).max) + 1)
            )
            g.state.assign(np.array([seed[0], count], seed.dtype))

    @property
    def global_step(self):
        return int(self.optimizer.global_step.numpy())

    def _summary_writer(self):
        if self._writer is None and self.is_chief:
            self._writer = tf.summary.create_file_writer(self.config.output_dir)
        return self._writer

    # === Training ===

    def train(self, dataset_fn):
        """Trains to num_train_steps, resuming from output_dir if possible.

        Args:
          dataset_fn: start_step -> tf.data.Dataset of global batches (dicts)
            positioned after the `start_step` batches already consumed, so a
            resumed run sees the same data as an uninterrupted one.

        Returns:
          The final global step.

        Raises:
          NonFiniteLossError: naming the step; nothing is saved after it.
          TrainingInterrupted: after SIGTERM and a checkpoint.
        """
        cfg = self.config
        dataset = dataset_fn(0)
        self.build(dataset.element_spec)
        start = self.restore_or_initialize()
        if start and start < cfg.num_train_steps:
            dataset = dataset_fn(start)
        try:
            # One handler for the resumed step's callbacks and the loop: a
            # SIGTERM during those callbacks stops the run (on several
            # processes, through the loop's first vote).
            with self.stop_signal.installed(cfg.handle_sigterm):
                if start and self.save_callbacks and self._on_schedule(start):
                    # A checkpoint saved on SIGTERM ran no callback (an
                    # evaluation would have delayed the exit): they see it
                    # now (the best-checkpoint keeper passes over a step it
                    # has evaluated).
                    prefix = self.manager.candidates()[0]
                    self._run_save_callbacks(start, prefix)
                if start >= cfg.num_train_steps:
                    logging.info("Already trained to step %d.", start)
                    step = start
                else:
                    iterator = self._batches(dataset)
                    try:
                        step = self._train_loop(iterator, start)
                    finally:
                        # The model holds the trained weights (JAX: they
                        # were on the devices).
                        self._steps.sync()
                workers = isinstance(
                    self.strategy, tf.distribute.MultiWorkerMirroredStrategy
                )
                if self.stop_signal.unanswered() and workers:
                    logging.warning(
                        "SIGTERM after the last training step: global_step "
                        "%d is saved; going on with the other workers (they "
                        "did not stop).",
                        step,
                    )
                elif self.stop_signal.unanswered():
                    # After the last step's check (or, several JAX
                    # processes, after the last vote): the run is complete,
                    # but what follows it (evaluation, prediction) must not
                    # run on after SIGTERM. (Not with TensorFlow's workers:
                    # the others' evaluation would wait on this one in
                    # their collectives; JAX evaluates in each process.)
                    raise TrainingInterrupted(
                        f"SIGTERM after the last training step: global_step "
                        f"{step} is saved in {cfg.output_dir}; stopped before "
                        "what follows training (re-run the same command for "
                        "it)."
                    )
                return step
        except TrainingInterrupted:
            # Saved: a script now only exits, and must even if freeing the
            # input pipeline on the way out waits holding the interpreter
            # lock (modeling/signals.py; a no-op outside the scripts).
            signals.arm_exit_backstop()
            raise

    def _on_schedule(self, step):
        """Whether `step` is a scheduled checkpoint's (its callbacks run)."""
        cfg = self.config
        return (
            step % cfg.save_checkpoints_steps == 0
            or step >= cfg.num_train_steps
        )

    def run_steps(self, iterator, num_steps):
        """Runs `num_steps` training steps in one call: no checkpoints, no
        logs (benchmarks). Call `build` first.

        Returns:
          dict of the logged values averaged over the steps.
        """
        done, sums, _ = self._steps.train_chunk(
            iterator, num_steps, self.stop_signal
        )
        return {k: float(v) / int(done) for k, v in sums.items()}

    def _batches(self, dataset):
        # Training and evaluation read their datasets through here: without
        # tf.data's autotuner, whose sleep could hold up the iterator's end
        # (a SIGTERMed run's exit, the end of an evaluation) by up to a
        # minute (input_pipeline.without_autotuning).
        return self._steps.batches(input_pipeline.without_autotuning(dataset))

    def _next_chunk(self, step):
        """Steps of the next compiled call: iterations_per_loop, cut at the
        next checkpoint and the end; off TPU also at log_every_steps (the
        call also ends after log_every_secs: `_chunk_seconds`)."""
        cfg = self.config
        to_save = cfg.save_checkpoints_steps - step % cfg.save_checkpoints_steps
        limit = min(
            cfg.iterations_per_loop, cfg.num_train_steps - step, to_save
        )
        if not self._on_tpu and cfg.log_every_steps:
            limit = min(limit, cfg.log_every_steps)
        return max(1, limit)

    def _chunk_seconds(self):
        """The time limit of a compiled call (None on TPU: a call there is
        iterations_per_loop steps, as the original's host loop)."""
        if self._on_tpu:
            return None
        limits = [self.config.log_every_secs, self.config.save_checkpoints_secs]
        limits = [t for t in limits if t]
        return min(limits) if limits else None

    def _train_loop(self, iterator, step):
        cfg = self.config
        replicas = self.strategy.num_replicas_in_sync
        last_save = time.time()
        # The rate (for the ETA) is measured from the end of the first call,
        # which includes tracing and compilation.
        rate_start = None
        # A resumed run starts from the checkpoint of its first step.
        saved_step = step if step else None
        while step < cfg.num_train_steps:
            num_steps = self._next_chunk(step)
            start_time = time.time()
            try:
                done, sums, bad = self._steps.train_chunk(
                    iterator, num_steps, self.stop_signal, self._chunk_seconds()
                )
            except errors.LostProcessError as e:
                latest = self.manager.candidates()
                raise errors.LostProcessError(
                    f"{e} Re-run every process to resume from the newest "
                    f"checkpoint in {cfg.output_dir} "
                    f"({os.path.basename(latest[0]) if latest else 'none yet'})."
                ) from e.__cause__
            elapsed = time.time() - start_time
            done, bad = int(done), int(bad)
            if bad >= 0:
                self._raise_non_finite(step + bad, sums)
            step = self.global_step
            if done:  # 0 when SIGTERM came before the chunk's first step
                logs = {k: float(v) / done for k, v in sums.items()}
                batch_size = logs.pop(steps.EXAMPLES_KEY) * replicas
                eta = None
                if rate_start is None:
                    rate_start = (step, time.time())
                elif step > rate_start[0]:
                    seconds = time.time() - rate_start[1]
                    eta = (
                        (cfg.num_train_steps - step)
                        * seconds
                        / (step - rate_start[0])
                    )
                self._log(step, logs, done, elapsed, batch_size, eta)
            stopping = self.stop_signal.requested(self.strategy)
            on_schedule = self._on_schedule(step)
            on_time = bool(cfg.save_checkpoints_secs) and (
                time.time() - last_save >= cfg.save_checkpoints_secs
            )
            # SIGTERM right after a scheduled save: the next call runs no
            # step, and that step's checkpoint is already written.
            repeat = stopping and step == saved_step
            if (on_schedule or on_time or stopping) and not repeat:
                with self._save_lock:
                    self._steps.sync()
                    prefix = self.manager.save()
                saved_step = step
                last_save = time.time()
                if on_time and not on_schedule:
                    logging.info(
                        "(a time-based safety checkpoint, every %ss: "
                        "--save_checkpoints_secs)",
                        cfg.save_checkpoints_secs,
                    )
                # Callbacks (e.g. --eval_during_training) follow the step
                # schedule, not the safety checkpoints; after SIGTERM none
                # runs (an evaluation would delay the exit unboundedly).
                if on_schedule and not stopping:
                    self._run_save_callbacks(step, prefix)
            elif repeat:
                logging.info(
                    "SIGTERM: the checkpoint of global_step %d is already "
                    "written.",
                    step,
                )
            if stopping:
                # The chief (JAX: process 0) wrote it, the others nothing.
                where = (
                    f"saved a checkpoint at global_step {step} in "
                    f"{cfg.output_dir}"
                    if self.is_chief
                    else "the chief saved a checkpoint at global_step "
                    f"{step} in its output_dir"
                )
                raise TrainingInterrupted(
                    f"SIGTERM: {where}; re-run the same command to resume."
                )
        return step

    def _run_save_callbacks(self, step, prefix):
        """Calls the save callbacks; their predictions stop between batches
        at SIGTERM (TrainingInterrupted)."""
        with predictor.between_batches(self._stop_evaluation_if_requested):
            for callback in self.save_callbacks:
                callback(step, prefix)

    def _stop_evaluation_if_requested(self):
        """Raises TrainingInterrupted after SIGTERM, between the batches of
        an evaluation at a checkpoint (that checkpoint is saved): the
        Trainer's handler only sets a flag, and the evaluation would run to
        its end. One process only: several evaluate in collectives, where
        one stopping alone would leave the others waiting on it."""
        if not self.stop_signal.is_requested() or not self.stop_signal.alone:
            return
        if self.backend == "jax":
            import jax

            if jax.process_count() > 1:
                return
        raise TrainingInterrupted(
            "SIGTERM during an evaluation: stopped it; the newest "
            f"checkpoint is saved in {self.config.output_dir}; re-run "
            "the same command to resume."
        )

    def _raise_non_finite(self, step, sums):
        latest = self.manager.candidates()
        raise NonFiniteLossError(
            f"Non-finite loss or gradients (loss {float(sums['loss'])}) at "
            f"global_step {step}: "
            "training stopped and no checkpoint was written after it; the "
            f"last good checkpoint is {latest[0] if latest else 'none'}. "
            "Lower --learning_rate or check the input data."
        )

    def _save_and_exit_stuck(self):
        """SIGTERM while the input pipeline gives no batch (the watcher
        thread, see steps.StopSignal): saves the state, which no step is
        changing, and exits at once with errors.EXIT_INTERRUPTED (the main
        thread is blocked inside the compiled loop and cannot raise)."""
        with self._save_lock:
            if self.stop_signal.acknowledged.is_set():
                return  # The loop stopped after all; it saves itself.
            logging.warning(
                "SIGTERM: the input pipeline has given no batch for %.0f s; "
                "saving a checkpoint and exiting.",
                self.stop_signal.stuck_after_secs,
            )
            try:
                # On JAX the step counter moves only at a sync.
                self._steps.sync()
                logging.warning(
                    "SIGTERM: saving global_step %d.", self.global_step
                )
                self.manager.save()
                logging.warning(
                    "Saved; re-run the same command to resume from %s.",
                    self.config.output_dir,
                )
            except BaseException as e:  # exit_now below drops it.
                logging.error("SIGTERM: no checkpoint could be saved: %s", e)
            finally:
                signals.exit_now(errors.EXIT_INTERRUPTED)

    def _log(self, step, logs, done, elapsed, batch_size, eta=None):
        lr = float(self.optimizer.rate_at(max(step - 1, 0)))
        steps_per_sec = done / max(elapsed, 1e-9)
        examples_per_sec = steps_per_sec * batch_size
        total = self.config.num_train_steps
        logging.info(
            "step %d/%d (%.0f%%): %s, learning_rate = %.4g, %.3f steps/s, "
            "%.2f examples/s, ETA %s",
            step,
            total,
            100.0 * step / max(total, 1),
            ", ".join(f"{k} = {v:.5g}" for k, v in sorted(logs.items())),
            lr,
            steps_per_sec,
            examples_per_sec,
            progress.format_seconds(eta),
        )
        writer = self._summary_writer()
        if writer is None:
            return
        with writer.as_default(step=step):
            for name, value in logs.items():
                _scalar(f"train/{name}", value)
            _scalar("train/learning_rate", lr)
            _scalar("train/steps_per_sec", steps_per_sec)
            _scalar("train/examples_per_sec", examples_per_sec)
        writer.flush()

    # === Evaluation ===

    def restore_for_inference(
        self, element_spec=None, missing_message=None, init_warning=None
    ):
        """Loads the weights to evaluate or predict with, when this Trainer
        has not trained: the newest checkpoint of output_dir (as the
        Estimator did), else task.init_fn (e.g. --init_checkpoint).

        Args:
          element_spec: builds the variables first when given (see `build`).
          missing_message: the ValueError's message when neither exists.
          init_warning: logged as a warning when task.init_fn is used (e.g.
            to say that a new head is untrained).

        Raises:
          ValueError: no checkpoint in output_dir and no task.init_fn.
        """
        if element_spec is not None:
            self.build(element_spec)
        restored = self.manager.restore_latest() is not None
        if not restored and self.task.init_fn is not None:
            if init_warning:
                logging.warning("%s", init_warning)
            self.task.init_fn(self.model)
        # Before any error: with several processes, every one checks.
        self._check_processes_start_together()
        if not restored and self.task.init_fn is None:
            raise ValueError(
                missing_message
                or f"No checkpoint in {self.config.output_dir} and no "
                "initial checkpoint: nothing to evaluate. Train first "
                "(--do_train) or give --init_checkpoint."
            )
        self._steps.reset()

    def evaluate(self, dataset, max_eval_steps=None, restore=True):
        """Runs eval_metrics_fn over `max_eval_steps` batches (or all).

        Args:
          dataset: tf.data.Dataset of global batches.
          max_eval_steps: int or None (the whole dataset; it must be finite).
          restore: unless this Trainer has trained, load the newest
            checkpoint of output_dir, else task.init_fn.

        Returns:
          dict name -> float (sum / weight), plus "global_step".
        """
        self.build(dataset.element_spec)
        if restore and not self._steps.trained:
            self.restore_for_inference()
        if max_eval_steps is not None:
            dataset = dataset.take(max_eval_steps)
        totals = {}
        counter = progress.Progress(
            "Evaluating", total=max_eval_steps, unit="batches"
        )
        self._steps.sync()
        for features in self._batches(dataset):
            self._stop_evaluation_if_requested()
            pairs = {
                name: (float(s), float(w))
                for name, (s, w) in self._steps.eval_step(features).items()
            }
            if self.task.batch_metrics_fn:
                pairs.update(self.task.batch_metrics_fn(pairs))
            for name, (s, w) in pairs.items():
                total = totals.setdefault(name, [0.0, 0.0])
                total[0] += s
                total[1] += w
            counter.add()
        counter.finish()
        if not totals:
            raise errors.UserError(
                "The evaluation input gave no batch (no records, or fewer "
                "than one batch): nothing to evaluate."
            )
        results = {
            k: s / w if w else float("nan") for k, (s, w) in totals.items()
        }
        results["global_step"] = self.global_step
        writer = self._summary_writer()
        if writer is not None:
            with writer.as_default(step=self.global_step):
                for name, value in results.items():
                    if name != "global_step":
                        _scalar(f"eval/{name}", value)
            writer.flush()
        return results


# TensorBoard's scalar plugin marker. tf.summary.scalar needs the tensorboard
# package, which is not a dependency; tf.summary.write is TF's own op.
_SCALAR_METADATA = tf.compat.v1.SummaryMetadata(
    plugin_data=tf.compat.v1.SummaryMetadata.PluginData(plugin_name="scalars")
)


def _scalar(name, value):
    """Writes a scalar summary readable by TensorBoard's scalar dashboard."""
    tf.summary.write(
        name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA
    )


def set_seed(seed):
    """Seeds Python, NumPy and TF (weight init, dropout) for reproducibility."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
