"""The compiled pieces of the training loop, and the SIGTERM watcher.

One module, over 500 lines: the compiled step and the SIGTERM watcher keep
one contract (the step sets `waiting_for_input` and reads the stop flag
after its batch; the watcher reads the one and sets the other), in one place.

Shapes: the dataset yields global batches; each replica receives B_r =
global batch / replicas examples and, with gradient accumulation N, runs N
micro-batches of B_r / N.
"""

import contextlib
import signal
import socket
import threading

import tensorflow as tf
from absl import logging

from modeling import losses
from modeling.training import distribute
from modeling.training import update_rules

# Dynamic loss scaling for float16 (the tf.keras LossScaleOptimizer defaults).
INITIAL_LOSS_SCALE = 2.0**15
LOSS_SCALE_GROWTH_STEPS = 2000
EXAMPLES_KEY = "_examples"


class StepFunctions:
    """tf.functions for a chunk of training steps and for one eval step.

    Args:
      model, task, optimizer, strategy, config: see training.Trainer; build
        under the strategy scope after the optimizer's variables exist.
      log_keys: the names task.loss_fn returns.
    """

    def __init__(self, model, task, optimizer, strategy, config, log_keys):
        self.log_keys = tuple(log_keys) + (EXAMPLES_KEY,)
        self.model = model
        self.task = task
        self.optimizer = optimizer
        self.strategy = strategy
        self.accumulation = config.gradient_accumulation_steps
        self.fp16 = config.precision == "mixed_float16"
        self.trained = False
        # Several processes (TF_CONFIG's workers) each run this loop: they
        # must run the same steps, each step's all-reduce waiting for all.
        self.workers = isinstance(
            strategy, tf.distribute.MultiWorkerMirroredStrategy
        )
        if self.fp16:
            sync = {
                "trainable": False,
                "synchronization": tf.VariableSynchronization.ON_WRITE,
                "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA,
            }
            self.loss_scale = tf.Variable(INITIAL_LOSS_SCALE, **sync)
            self.good_steps = tf.Variable(0, dtype=tf.int64, **sync)
        # XLA compiles the forward and backward pass; the all-reduce and the
        # update (which need merge_call) stay outside the compiled function.
        # autograph=False: the loops are explicit (tf.while_loop), and AST
        # conversion of every layer and optimizer update took most of the
        # tracing time.
        self._grad_fn = tf.function(
            self._grads, jit_compile=config.use_xla, autograph=False
        )
        self._train_chunk = tf.function(self._chunk, autograph=False)
        self.eval_step = tf.function(self._eval_step, autograph=False)

    def checkpoint_variables(self):
        """{name: variable} of the step's own state that a checkpoint keeps
        (the dynamic loss scale of float16, under tf.keras's names), so a
        resumed run scales as the uninterrupted one would."""
        if not self.fp16:
            return {}
        return {
            "current_loss_scale": self.loss_scale,
            "good_steps": self.good_steps,
        }

    def batches(self, dataset):
        """The dataset's batches, split over the strategy's replicas."""
        return iter(distribute.distribute_dataset(self.strategy, dataset))

    def sync(self):
        """Nothing to do: the variables are the state (see jax_steps)."""

    def reset(self):
        """Nothing to do: the variables are the state (see jax_steps)."""

    # === Gradients ===

    def _grads(self, features):
        """Loss logs and gradients of one (micro-)batch on one replica."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            logs = dict(self.task.loss_fn(features, outputs))
            loss = tf.cast(logs["loss"], tf.float32)
            if self.fp16:
                loss = loss * self.loss_scale
        grads = tape.gradient(loss, variables)
        return logs, grads

    def _accumulated_grads(self, features):
        """Mean gradients and logs over N micro-batches of the replica batch."""
        n = self.accumulation
        # tf.shape: a dynamically padded batch's length is not static.
        micro = {
            k: tf.reshape(v, tf.concat([[n, -1], tf.shape(v)[1:]], 0))
            for k, v in features.items()
        }
        logs, grads = self._grad_fn({k: v[0] for k, v in micro.items()})
        grads = _counted(grads)
        # A Python loop: N calls of the same traced function (a tf.while_loop
        # over gradient computations traces and runs markedly slower).
        for i in range(1, n):
            more_logs, more = self._grad_fn({k: v[i] for k, v in micro.items()})
            grads = [
                _add(g, m) for g, m in zip(grads, _counted(more), strict=True)
            ]
            logs = {k: logs[k] + more_logs[k] for k in logs}
        # A variable the loss does not use (the pooler, for SQuAD and NER)
        # keeps no gradient: the optimizer leaves it as it is.
        grads = [_scaled(g, 1.0 / n) for g in grads]
        logs = {k: v / n for k, v in logs.items()}
        return logs, grads

    def _whole_batch_denominators(self, features):
        """With the batch split (replicas, micro-batches), each part's
        weighted losses (masked LM, NER's tokens) divide by the whole
        batch's weight sum, so the update is one batch's
        (losses.WHOLE_BATCH_DENOMINATORS)."""
        replicas = self.strategy.num_replicas_in_sync
        parts = replicas * self.accumulation
        if parts == 1:
            return features

        def batch_sum(x):
            if replicas == 1:
                return x
            ctx = tf.distribute.get_replica_context()
            return ctx.all_reduce(tf.distribute.ReduceOp.SUM, x)

        return losses.whole_batch_denominators(features, parts, batch_sum)

    def _replica_step(self, features):
        features = self._whole_batch_denominators(features)
        if self.accumulation > 1:
            logs, grads = self._accumulated_grads(features)
        else:
            logs, grads = self._grad_fn(features)
        replicas = self.strategy.num_replicas_in_sync
        if replicas > 1:
            # Mean over replicas: each replica's loss is a mean over its
            # slice, so this is the gradient of the global-batch loss. The
            # rows' squares an embedding's clip norm counts: their sum.
            ctx = tf.distribute.get_replica_context()
            grads = _counted(grads)
            present = [i for i, g in enumerate(grads) if g is not None]
            counted = [i for i in present if _is_counted(grads[i])]
            dense = ctx.all_reduce(
                tf.distribute.ReduceOp.MEAN,
                [_dense_part(grads[i]) for i in present],
            )
            squares = {}
            if counted:
                squares = ctx.all_reduce(
                    tf.distribute.ReduceOp.SUM,
                    [grads[i].squares for i in counted],
                )
                squares = dict(zip(counted, squares, strict=True))
            grads = list(grads)
            for i, g in zip(present, dense, strict=True):
                grads[i] = (
                    update_rules.CountedGradient(g, squares[i] / replicas**2)
                    if i in squares
                    else g
                )
        should_apply = None
        if self.fp16:
            grads, should_apply = self._unscale(grads)
        variables = self.model.trainable_variables
        norm = self.optimizer.apply(
            grads, variables, should_apply=should_apply, reduced=True
        )
        if not self.fp16:
            # A NaN or Inf gradient under a finite loss (its clipped update
            # makes every weight NaN): the step reports a non-finite loss,
            # so the run stops there and no checkpoint is written after it
            # (fp16 instead skips the step and lowers its loss scale).
            # Flagged, not skipped: a skip costs three selects over every
            # weight and both slots at each step, outside XLA.
            loss = logs["loss"]
            logs["loss"] = tf.where(
                tf.math.is_finite(norm), loss, tf.cast(float("nan"), loss.dtype)
            )
        first = next(iter(features.values()))
        logs[EXAMPLES_KEY] = tf.cast(tf.shape(first)[0], tf.float32)
        return {k: tf.cast(v, tf.float32) for k, v in logs.items()}

    def _unscale(self, grads):
        """Divides out the loss scale; skips the step and halves it on Inf."""
        scale = self.loss_scale.read_value()
        grads = [_scaled(g, 1.0 / scale) for g in _counted(grads)]
        finite = tf.reduce_all(
            [
                tf.reduce_all(tf.math.is_finite(_dense_part(g)))
                for g in grads
                if g is not None
            ]
        )
        good = tf.where(finite, self.good_steps + 1, 0)
        grow = good >= LOSS_SCALE_GROWTH_STEPS
        new_scale = tf.where(
            finite,
            tf.where(grow, scale * 2.0, scale),
            tf.maximum(scale / 2.0, 1.0),
        )
        self.loss_scale.assign(new_scale)
        self.good_steps.assign(tf.where(grow, tf.zeros_like(good), good))
        return grads, finite

    # === Loops ===

    def _one_step(self, iterator, waiting, stop_flag):
        """One step; returns (its logs, whether it ran).

        `waiting` is True exactly while the step waits for its batch: the
        SIGTERM watcher saves from another thread only then, when every
        update of the previous step is done and none of this one's began.
        The batch may still arrive during that save: the stop flag, set
        before the watcher starts and read after `waiting` is cleared, then
        makes this step update nothing (its batch is read again on resume),
        so the save never sees the weights of a step its global_step does
        not count.
        """
        with tf.control_dependencies([waiting.assign(True)]):
            features = next(iterator)
        flat = tf.nest.flatten(features, expand_composites=True)
        with tf.control_dependencies(flat):
            received = waiting.assign(False)
        with tf.control_dependencies([received]):
            run = tf.logical_not(stop_flag.read_value())

        def step():
            per_replica = self.strategy.run(
                self._replica_step, args=(features,)
            )
            return {
                k: self.strategy.reduce(
                    tf.distribute.ReduceOp.MEAN, per_replica[k], axis=None
                )
                for k in self.log_keys
            }

        def skip():
            return {k: tf.constant(0.0) for k in self.log_keys}

        if self.workers:
            # One worker skipping a step the others run would leave them
            # waiting in its all-reduce (SIGTERM is a vote: `_chunk`).
            return step(), tf.constant(True)
        return tf.cond(run, step, skip), run

    def _chunk(self, iterator, num_steps, stop_flag, waiting, max_seconds):
        """Runs up to num_steps steps in one call.

        Stops early at the first non-finite loss (so no more updates follow
        it), when `stop_flag` is set (SIGTERM) or once `max_seconds` have
        passed (so the host logs progress and saves on time).

        Returns:
          (steps run int32, dict of summed logs, index of the first step with
          a non-finite loss or -1).
        """
        # The step is traced once, inside the loop body; the log names are
        # known from the eager call in build().
        sums = {k: tf.constant(0.0) for k in self.log_keys}
        start = tf.timestamp()

        def time_up():
            return tf.timestamp() - start >= max_seconds

        def cond(i, sums, bad, agreed):
            del sums
            go_on = (i < num_steps) & (bad < 0)
            if self.workers:
                return go_on & tf.logical_not(agreed)
            in_time = (i == 0) | tf.logical_not(time_up())
            return go_on & tf.logical_not(stop_flag) & in_time

        def body(i, sums, bad, agreed):
            logs, ran = self._one_step(iterator, waiting, stop_flag)
            sums = {k: sums[k] + logs[k] for k in sums}
            bad = tf.where(tf.math.is_finite(logs["loss"]), bad, i)
            if self.workers:
                # Each worker's clock and SIGTERM are its vote after the
                # step; all end the call after the same step (a worker
                # ending it alone by its own clock left the others waiting
                # in the next step's all-reduce, and it in the host's stop
                # vote: a hang).
                agreed = _any_worker(self.strategy, time_up() | stop_flag)
            return i + tf.cast(ran, i.dtype), sums, bad, agreed

        done, sums, bad, _ = tf.while_loop(
            cond,
            body,
            (tf.constant(0), sums, tf.constant(-1), tf.constant(False)),
        )
        return done, sums, bad

    def train_chunk(self, iterator, num_steps, stop_signal, max_seconds=None):
        """Runs up to num_steps steps (see `_chunk`); max_seconds None: no
        time limit."""
        self.trained = True
        return self._train_chunk(
            iterator,
            tf.constant(num_steps),
            stop_signal.flag,
            stop_signal.waiting_for_input,
            tf.constant(
                float("inf") if max_seconds is None else max_seconds,
                tf.float64,
            ),
        )

    def _eval_step(self, features):
        def replica_fn(f):
            outputs = self.model(f, training=False)
            return self.task.eval_metrics_fn(f, outputs)

        per_replica = self.strategy.run(replica_fn, args=(features,))
        total = tf.distribute.ReduceOp.SUM
        return {
            k: tuple(self.strategy.reduce(total, t, axis=None) for t in pair)
            for k, pair in per_replica.items()
        }


def _counted(grads):
    """Gradients as dense tensors; an IndexedSlices (the word embeddings')
    as an update_rules.CountedGradient: summed, with the sum of squares of
    its rows, which the clip norm counts one by one as the original's did
    (summed rows would count less). None, a variable the loss does not
    use, stays None."""
    out = []
    for g in grads:
        if isinstance(g, tf.IndexedSlices):
            squares = tf.reduce_sum(tf.square(tf.cast(g.values, tf.float32)))
            g = update_rules.CountedGradient(tf.convert_to_tensor(g), squares)
        out.append(g)
    return out


def _is_counted(g):
    return isinstance(g, update_rules.CountedGradient)


def _dense_part(g):
    return g.dense if _is_counted(g) else tf.convert_to_tensor(g)


def _add(a, b):
    """The sum of two micro-batches' gradients (None stays None)."""
    if a is None:
        return None
    if _is_counted(a):
        return update_rules.CountedGradient(
            a.dense + b.dense, a.squares + b.squares
        )
    return a + b


def _scaled(g, factor):
    """g * factor; a counted gradient's squares by factor squared."""
    if g is None:
        return None
    if _is_counted(g):
        return update_rules.CountedGradient(
            g.dense * factor, g.squares * factor * factor
        )
    return g * factor


def _any_worker(strategy, local):
    """Whether `local` (a bool) is true on any worker: an all-reduce."""
    value = tf.cast(local, tf.float32)
    votes = strategy.reduce(
        tf.distribute.ReduceOp.SUM,
        strategy.run(lambda: tf.identity(value)),
        axis=None,
    )
    return votes > 0


class StopSignal:
    """Turns SIGTERM into a flag the running tf.function sees.

    A Python signal handler runs only between bytecodes of the main thread,
    i.e. after the current tf.function call returns, which can be minutes
    away. `signal.set_wakeup_fd` makes the C-level handler write the signal
    number to a socket at once; a watcher thread wakes up and sets a
    tf.Variable that the in-graph loop checks before every step.

    The loop sees the flag only between steps; a step waiting for a batch
    that never comes (a blocked input: a pipe, a stalled remote read, a
    dataset that never yields) would never get there. So when the loop has
    not stopped `stuck_after_secs` after SIGTERM while it is still waiting
    for its batch (`waiting_for_input`) at the same global step (and, in a
    host loop, the same batch), the watcher calls `on_stuck` (the
    Trainer's: save a checkpoint, exit 143).

    A slow batch (not a stuck one) can arrive during that save. No step
    may change the state then: the in-graph step reads the stop flag after
    its batch and updates nothing once it is set (`_one_step`); a host
    loop's `set_waiting(False)` waits on the lock the watcher holds from
    its last look at `waiting_for_input` to the exit.
    """

    _SENTINEL = b"\xff"

    # A step waiting this long for its batch after SIGTERM counts as stuck.
    # Saving then is safe (no update is under way while a step waits), so
    # the bound is short: SIGTERM ends a run within a few seconds.
    def __init__(self, stuck_after_secs=2.0):
        self.flag = tf.Variable(False, trainable=False, name="stop_requested")
        self.waiting_for_input = tf.Variable(
            False, trainable=False, name="waiting_for_input"
        )
        self._requested = False
        # False for a worker of several (TensorFlow's): the workers vote to
        # stop, and none saves and exits alone when its input is stuck.
        self.alone = True
        # What the processes of a multi-process JAX run agreed after the
        # last chunk (jax_steps.TrainerSteps.train_chunk), or None.
        self.agreed = None
        # Batches a host loop (JAX's) has received: its global step moves
        # only between chunks, so the stuck check counts these too.
        self._batches = 0
        self.stuck_after_secs = stuck_after_secs
        # () -> None, called from the watcher thread (see above).
        self.on_stuck = None
        # () -> int, the global step (the stuck check needs it unchanged).
        self.step_fn = None
        self.acknowledged = threading.Event()
        self._stuck_lock = threading.Lock()

    @contextlib.contextmanager
    def installed(self, enabled=True):
        """Installs the SIGTERM handler (main thread only) for the block."""
        self._requested = False
        self.agreed = None
        self.acknowledged.clear()
        self.flag.assign(False)
        self.waiting_for_input.assign(False)
        if (
            not enabled
            or threading.current_thread() is not threading.main_thread()
        ):
            yield self
            return
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        old_fd = signal.set_wakeup_fd(
            writer.fileno(), warn_on_full_buffer=False
        )
        old_handler = signal.signal(signal.SIGTERM, self._handler)
        watcher = threading.Thread(
            target=self._watch, args=(reader,), daemon=True
        )
        watcher.start()
        try:
            yield self
        finally:
            self.acknowledged.set()  # Ends a stuck-input watcher.
            signal.signal(signal.SIGTERM, old_handler)
            signal.set_wakeup_fd(old_fd)
            writer.send(self._SENTINEL)
            watcher.join(timeout=5)
            reader.close()
            writer.close()

    def unanswered(self):
        """Whether a SIGTERM came that the loop did not stop for (it came
        after the last step's check, or several JAX processes did not
        vote to stop before their last step)."""
        return self._requested and not self.acknowledged.is_set()

    def is_requested(self):
        """Whether SIGTERM came (a loop outside the graph checks this
        between steps; the in-graph loop reads `flag`)."""
        return self._requested

    def set_waiting(self, waiting):
        """Marks a host loop as waiting for its next batch (or not: it has
        the batch; blocks while a stuck-input save runs, see above)."""
        if waiting:
            self.waiting_for_input.assign(True)
            return
        with self._stuck_lock:
            self._batches += 1
            self.waiting_for_input.assign(False)

    def _handler(self, signum, frame):
        del signum, frame
        self._request()

    def _request(self):
        first = not self._requested
        if first:
            logging.warning("SIGTERM: saving a checkpoint, then stopping.")
        self._requested = True
        # Eagerly even when the signal lands while a step is traced (else
        # the assignment is recorded into the step's graph).
        with tf.init_scope():
            self.flag.assign(True)
        if first and self.alone and self.on_stuck is not None:
            threading.Thread(target=self._watch_stuck, daemon=True).start()

    def _watch_stuck(self):
        """Calls on_stuck once the loop has waited for one batch for
        stuck_after_secs since SIGTERM; returns when the loop stops."""
        last = None
        while not self.acknowledged.wait(self.stuck_after_secs / 2):
            with self._stuck_lock:
                now = (
                    bool(self.waiting_for_input.numpy()),
                    self.step_fn(),
                    self._batches,
                )
                if now[0] and now == last:
                    # Under the lock: a host loop's batch arriving now
                    # waits (set_waiting) until the process exits.
                    self.on_stuck()
                    return
            last = now if now[0] else None

    def _watch(self, reader):
        while True:
            data = reader.recv(64)
            if not data or self._SENTINEL in data:
                return
            if signal.SIGTERM in data:
                self._request()

    def requested(self, strategy):
        """Whether to stop; all workers agree in multi-worker training (on
        JAX, through the steps' votes: `agreed`)."""
        if self.agreed is not None:
            if self.agreed:
                self.acknowledged.set()
            return self.agreed
        if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
            if self._requested:
                self.acknowledged.set()
            return self._requested
        stop = bool(_any_worker(strategy, tf.constant(self._requested)))
        if stop and self._requested:
            self.acknowledged.set()
        return stop
