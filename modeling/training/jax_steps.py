"""The compiled training step on Keras 3's JAX backend.

The TensorFlow step (training/steps.py) runs the model under tf.distribute;
this one is a pure function of arrays compiled once by `jax.jit`:

    state, logs = step(state, batch)

where `state` holds the model's trainable and non-trainable values (the
dropout seed generators are among the latter) and the optimizer's variables
(its step counter, `adam_m` and `adam_v` per trainable variable), and
`batch` a dict of numpy arrays (the host's tf.data pipeline yields them, or
synthetic ones). The model runs through Keras's stateless API
(`model.stateless_call`), the gradients come from `jax.value_and_grad`, and
the update is the one optimizer's (`optimization.AdamWeightDecayOptimizer.
stateless_apply`, the optimizer TensorFlow runs). The old state's buffers
are donated, so a step holds one copy of the weights and slots.

Data parallel: with several local devices (GPUs, TPU cores, or host devices
under `XLA_FLAGS=--xla_force_host_platform_device_count=N`), the state is
replicated and each batch is split along its first axis over a
`keras.distribution.DeviceMesh`; XLA all-reduces the gradients, so the step
computes the mean over the global batch as one device would.

Several processes (one per host, backend.join_processes): the devices are
every process's, each process reads the same global batches (the
TensorFlow multi-worker path's DATA sharding) and hands its own devices
their rows, and the first step's state is process 0's, so every process
starts from the same random weights. A process that must stop early (on
SIGTERM, or at a chunk's time limit) votes through the next step, whose
outputs every process reads alike; all of them stop after the same step.

Gradient accumulation: N micro-batches of batch / N run in a `lax.scan`;
their mean gradient makes one update (the TensorFlow step's rule).

The clip norm as the original counted it: TensorFlow keeps a gathered
word-embedding gradient as IndexedSlices, and `tf.clip_by_global_norm`
counts a token that occurs k times in a batch as k rows; JAX's gradient is
dense (the k rows summed). The step counts the rows as TensorFlow does
(modeling/row_gradients.py) where TensorFlow keeps the IndexedSlices: the
table only gathered (not the pre-training decoder's tied matmul), also
under gradient accumulation (each micro-batch's rows counted, as TensorFlow's
accumulation counts them).
tests/jax_scripts_test.py holds a MiniLM MRPC fine-tuning run to
TensorFlow's within float32 accumulation; without the count its Adam slots
differed by 0.6% after two steps.

This module imports no TensorFlow: it runs where only JAX is installed.

One module, over 500 lines: the compiled step (state layout, accumulation,
the clip norm's row count) and the Trainer's loop over it (chunks, votes,
the exchange with other processes) share the state and its donation.
"""

import contextlib
import time

import jax
import jax.numpy as jnp
import keras
import numpy as np
from absl import logging

from modeling import checkpoints
from modeling import errors
from modeling import losses
from modeling import row_gradients
from modeling.training import update_rules

# The key of the examples count in the logs (training/steps.py's).
EXAMPLES_KEY = "_examples"
# The key of the processes' vote in a step's logs, and its values (the
# largest vote wins): go on, end the chunk (its time is up), stop (SIGTERM).
VOTE_KEY = "_vote"
GO_ON, TIME_UP, STOP = 0, 1, 2
# What the error of a step whose exchange with a lost process failed says
# (lower case): the collectives' libraries (Gloo on CPUs, NCCL on GPUs),
# their sockets, and the distributed service's status codes.
_LOST_PROCESS_SIGNS = (
    "gloo",
    "nccl",
    "connection reset",
    "connection closed",
    "socket closed",
    "broken pipe",
    "unavailable:",
    "deadline_exceeded:",
    "coordination service",
    "heartbeat",
)


class TrainStep:
    """One training step of `model` as a jitted function of arrays.

    Args:
      model: a built keras.Model taking a dict of features.
      loss_fn: (features, outputs) -> dict of float32 scalars with "loss"
        (keras.ops only: it is traced by JAX).
      optimizer: an optimization.AdamWeightDecayOptimizer (built here on
        the model's trainable variables if it is not).
      gradient_accumulation_steps: micro-batches per update.
      devices: the devices to split each batch over (default: every
        device of every process); one device runs without sharding.
    """

    def __init__(
        self,
        model,
        loss_fn,
        optimizer,
        gradient_accumulation_steps=1,
        devices=None,
    ):
        if keras.backend.backend() != "jax":
            raise RuntimeError(
                "jax_steps.TrainStep needs KERAS_BACKEND=jax (this process "
                f"runs Keras on {keras.backend.backend()})"
            )
        if gradient_accumulation_steps < 1:
            raise ValueError(
                "gradient_accumulation_steps must be >= 1: "
                f"{gradient_accumulation_steps}"
            )
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        # A NaN or Inf gradient is not applied (its step reports a NaN
        # loss, so the Trainer stops with nothing saved after it).
        optimizer.skip_non_finite = True
        optimizer.build(model.trainable_variables)
        self.accumulation = gradient_accumulation_steps
        self.names = [
            checkpoints.variable_name(v) for v in model.trainable_variables
        ]
        sparse = [
            i
            for i, n in enumerate(self.names)
            if update_rules.has_sparse_gradient(n)
        ]
        self._sparse_index = sparse[0] if len(sparse) == 1 else None
        self._sparse_rows = False
        self.devices = list(devices or jax.devices())
        self.processes = len({d.process_index for d in self.devices})
        self._mesh = None
        if len(self.devices) > 1:
            mesh = keras.distribution.DeviceMesh(
                (len(self.devices),), ["batch"], self.devices
            )
            self._mesh = mesh.backend_mesh
        self._step = jax.jit(self._train_step, donate_argnums=0)

    # === State ===

    def initial_state(self):
        """The state from the current values of the model's and the
        optimizer's variables (zeros, or what a checkpoint restored)."""
        model = self.model
        counter = self.optimizer.global_step
        state = {
            "trainable": [var.value for var in model.trainable_variables],
            "non_trainable": [
                var.value for var in model.non_trainable_variables
            ],
            # The state shares the variables' buffers, which the first step
            # frees (donated): until `sync`, the variables are not to be
            # read. The step counter is copied, so that it stays readable
            # (the chunk's first value) by the Trainer's stuck-input
            # watcher; the rest is not, so that a step still holds one copy
            # of the weights and slots.
            "optimizer": [
                jnp.array(var.value, copy=True) if var is counter else var.value
                for var in self.optimizer.variables
            ],
        }
        return self._place(state, replicate=True)

    def global_step(self, state):
        """The state's step counter (int)."""
        for var, value in zip(self.optimizer.variables, state["optimizer"]):
            if var is self.optimizer.global_step:
                return int(value)
        raise AssertionError("the optimizer has no step counter")

    def write_back(self, state):
        """Copies the state into the model's and the optimizer's
        variables."""
        for key, variables in (
            ("trainable", self.model.trainable_variables),
            ("non_trainable", self.model.non_trainable_variables),
            ("optimizer", self.optimizer.variables),
        ):
            for var, value in zip(variables, state[key], strict=True):
                var.assign(value)

    def checkpoint_arrays(self, state):
        """{original checkpoint name: numpy array} of the weights, the
        optimizer's slots and `global_step`."""
        out = {}
        for name, w in zip(self.names, state["trainable"]):
            out[name] = np.asarray(w)
        index = {id(v): i for i, v in enumerate(self.optimizer.variables)}
        for name, var in self.optimizer.checkpoint_variables().items():
            out[name] = np.asarray(state["optimizer"][index[id(var)]])
        out["global_step"] = out["global_step"].astype(np.int64)
        for var, value in zip(
            self.model.non_trainable_variables, state["non_trainable"]
        ):
            if "seed_generator" not in var.path:
                out[checkpoints.variable_name(var)] = np.asarray(value)
        return out

    def _place(self, tree, replicate):
        if self._mesh is None:
            return jax.device_put(tree, self.devices[0])
        spec = jax.sharding.PartitionSpec(*(() if replicate else ("batch",)))
        sharding = jax.sharding.NamedSharding(self._mesh, spec)
        if self.processes == 1:
            return jax.device_put(tree, sharding)
        # Each process fills its own devices' parts; the values are alike
        # everywhere: the same batches, and process 0's state.
        tree = jax.tree.map(np.asarray, tree)
        if replicate:
            from jax.experimental import multihost_utils

            tree = multihost_utils.broadcast_one_to_all(tree)
            tree = jax.tree.map(np.asarray, tree)
        return jax.tree.map(
            lambda x: jax.make_array_from_callback(
                x.shape, sharding, lambda index: x[index]
            ),
            tree,
        )

    def place_batch(self, batch):
        """The batch on the devices (split along its first axis over them)."""
        if self._mesh is not None:
            n = len(self.devices)
            for name, array in batch.items():
                if np.shape(array)[0] % (n * self.accumulation):
                    raise ValueError(
                        f"batch of {np.shape(array)[0]} ({name}) does not "
                        f"split into {n} devices x {self.accumulation} "
                        "micro-batches"
                    )
        return self._place(dict(batch), replicate=False)

    # === The step ===

    def __call__(self, state, batch, vote=GO_ON):
        """(new state, logs): one update from `batch` (a dict of arrays).
        With several processes, `vote` is this process's (GO_ON, TIME_UP or
        STOP) and logs[VOTE_KEY] the largest of all processes'."""
        votes = None
        if self.processes > 1:
            votes = self._place(
                np.full((len(self.devices),), vote, np.int32), False
            )
        return self._step(state, self.place_batch(batch), votes)

    def _loss(self, trainable, probe, non_trainable, batch):
        with row_gradients.counting(probe) as record:
            outputs, non_trainable = self.model.stateless_call(
                trainable, non_trainable, batch, training=True
            )
        # Decided while tracing: whether TensorFlow's word-embedding
        # gradient would be an IndexedSlices (row_gradients).
        self._sparse_rows = record.sparse
        logs = dict(self.loss_fn(batch, outputs))
        loss = jnp.asarray(logs["loss"], jnp.float32)
        return loss, (logs, non_trainable)

    def _grads(self, trainable, non_trainable, batch):
        """(logs, grads, non_trainable, squares): `squares` as
        update_rules.global_norm's (the word-embedding rows counted one by
        one where TensorFlow keeps them as an IndexedSlices, under gradient
        accumulation too: every micro-batch's rows)."""
        grad_fn = jax.value_and_grad(self._loss, argnums=(0, 1), has_aux=True)
        if self.accumulation == 1:
            probe = jnp.zeros((), jnp.float32)
            (_, (logs, non_trainable)), (grads, rows) = grad_fn(
                trainable, probe, non_trainable, batch
            )
            squares = {}
            if self._sparse_rows and self._sparse_index is not None:
                squares = {self._sparse_index: rows}
            return logs, grads, non_trainable, squares
        n = self.accumulation
        d = len(self.devices) if self._mesh is not None else 1

        def split(x):
            # Micro-batch i is every device's i-th block of its own rows
            # (as each TensorFlow replica accumulates its own): then each
            # device computes its share of each micro-batch. Blocks of the
            # whole batch would lie on some devices only, and XLA would
            # gather every micro-batch onto every device.
            rest = x.shape[1:]
            x = x.reshape((d, n, x.shape[0] // (d * n)) + rest)
            return x.swapaxes(0, 1).reshape((n, x.shape[0] * x.shape[2]) + rest)

        # Each micro-batch's weighted losses over the whole batch's weight
        # sum: the accumulated update is one batch's.
        batch = losses.whole_batch_denominators(batch, n, lambda x: x)
        micro = jax.tree.map(split, batch)
        if self._mesh is not None:
            micro = jax.lax.with_sharding_constraint(
                micro,
                jax.sharding.NamedSharding(
                    self._mesh, jax.sharding.PartitionSpec(None, "batch")
                ),
            )

        def body(carry, features):
            grad_sum, rows_sum, nt = carry
            (_, (logs, nt)), (grads, rows) = grad_fn(
                trainable, jnp.zeros((), jnp.float32), nt, features
            )
            grad_sum = jax.tree.map(jnp.add, grad_sum, grads)
            return (grad_sum, rows_sum + rows, nt), logs

        zeros = jax.tree.map(jnp.zeros_like, trainable)
        (grad_sum, rows_sum, non_trainable), logs = jax.lax.scan(
            body, (zeros, jnp.zeros((), jnp.float32), non_trainable), micro
        )
        grads = jax.tree.map(lambda g: g / n, grad_sum)
        logs = jax.tree.map(lambda x: jnp.mean(x, axis=0), logs)
        squares = {}
        if self._sparse_rows and self._sparse_index is not None:
            # Every micro-batch's rows, as TensorFlow's accumulation keeps
            # them (steps.py's CountedGradient): the gradient is divided
            # by n, so their squares by n**2.
            squares = {self._sparse_index: rows_sum / n**2}
        return logs, grads, non_trainable, squares

    def _unused(self, trainable, non_trainable, batch):
        """Indices of the trainable variables the loss does not reach (the
        pooler of a span labeler, a tagger, an embedder), found while
        tracing: their gradient is None, as TensorFlow's tape gives it, so
        the optimizer leaves them and their slots as they are (a zero
        gradient would still decay them)."""
        try:
            from jax._src.interpreters import partial_eval
        except ImportError:  # Another JAX layout: every variable is used.
            logging.warning(
                "This JAX has no partial_eval.dce_jaxpr: variables the loss "
                "does not use (a pooler) get weight decay, unlike TensorFlow"
            )
            return frozenset()
        closed = jax.make_jaxpr(self._loss)(
            trainable, jnp.zeros((), jnp.float32), non_trainable, batch
        )
        outputs = len(closed.jaxpr.outvars)  # The loss, then the aux.
        _, used = partial_eval.dce_jaxpr(
            closed.jaxpr, [True] + [False] * (outputs - 1)
        )
        return frozenset(i for i in range(len(trainable)) if not used[i])

    def _train_step(self, state, batch, votes=None):
        unused = self._unused(state["trainable"], state["non_trainable"], batch)
        logs, grads, non_trainable, squares = self._grads(
            state["trainable"], state["non_trainable"], batch
        )
        grads = [
            None if i in unused else jnp.asarray(g, jnp.float32)
            for i, g in enumerate(grads)
        ]
        finite = jnp.all(
            jnp.stack(
                [jnp.all(jnp.isfinite(g)) for g in grads if g is not None]
            )
        )
        for i, rows in squares.items():
            grads[i] = update_rules.CountedGradient(grads[i], rows)
        trainable, optimizer = self.optimizer.stateless_apply(
            state["optimizer"], grads, state["trainable"]
        )
        new = {
            "trainable": trainable,
            "non_trainable": non_trainable,
            "optimizer": optimizer,
        }
        logs = {k: jnp.asarray(v, jnp.float32) for k, v in logs.items()}
        logs["loss"] = jnp.where(finite, logs["loss"], jnp.nan)
        if votes is not None:
            logs[VOTE_KEY] = jnp.max(votes)
        return new, logs


# === The Trainer's step on JAX ===


class TrainerSteps:
    """The Trainer's compiled pieces on the JAX backend: what
    training/steps.py's StepFunctions is on TensorFlow, with the same
    methods (`batches`, `train_chunk`, `eval_step`, `sync`).

    The loop's state lives on the devices between chunks (TrainStep's); the
    model's variables and the optimizer's slot variables, which the
    checkpoint manager writes and restores, are brought up to date by
    `sync` (before a checkpoint, an evaluation, and when training ends),
    and the state is made again from them after a restore.

    Args:
      model: the built Keras model.
      loss_fn, eval_metrics_fn: the task's (keras.ops only).
      optimizer: the Trainer's optimization.AdamWeightDecayOptimizer (the
        update, and the variables checkpoints read).
      config: the Trainer's RunConfig.
      devices: as TrainStep's (default: every local device).
    """

    def __init__(
        self, model, loss_fn, eval_metrics_fn, optimizer, config, devices=None
    ):
        self.model = model
        self.optimizer = optimizer
        self.eval_metrics_fn = eval_metrics_fn
        self.step = TrainStep(
            model,
            loss_fn,
            optimizer,
            config.gradient_accumulation_steps,
            devices,
        )
        devices = self.step.devices
        logging.info(
            "JAX training step on %d %s device(s) of %d process(es); this "
            "is process %d",
            len(devices),
            devices[0].platform,
            self.step.processes,
            jax.process_index(),
        )
        self.state = None
        self.trained = False
        self._eval = None

    @property
    def num_devices(self):
        return len(self.step.devices)

    def batches(self, dataset):
        """The dataset's batches as dicts of numpy arrays (host input)."""
        return dataset.as_numpy_iterator()

    def train_chunk(self, iterator, num_steps, stop_signal, max_seconds=None):
        """Up to num_steps steps; returns (steps run, summed logs, index of
        the first step with a non-finite loss or -1), as StepFunctions'.

        Stops at SIGTERM and after max_seconds (checked between steps). A
        step's loss is read on the host one step later, so the devices
        never wait for the host; after a non-finite loss one more update
        may have run, which nothing saves (the Trainer stops there).

        With several processes, SIGTERM and the time limit are votes that
        the next step carries; every process reads the result one step
        later, ends the chunk after the same step, and on a STOP vote sets
        `stop_signal.agreed` (what the Trainer's stop check then answers on
        every process, SIGTERMed or not).
        """
        if self.state is None:
            self.state = self.step.initial_state()
        self.trained = True
        several = self.step.processes > 1
        start = time.time()
        sums, done, bad, agreed = {}, 0, -1, GO_ON
        pending = None  # (index, logs) of the step not yet read

        def read(index, logs):
            nonlocal bad, agreed
            values = {k: float(v) for k, v in logs.items()}
            agreed = max(agreed, int(values.pop(VOTE_KEY, GO_ON)))
            if bad < 0 and not np.isfinite(values["loss"]):
                bad = index
            for k, v in values.items():
                sums[k] = sums.get(k, 0.0) + v

        while done < num_steps and bad < 0:
            vote = GO_ON
            if stop_signal.is_requested():
                vote = STOP
            elif done and max_seconds is not None:
                if time.time() - start >= max_seconds:
                    vote = TIME_UP
            if agreed if several else vote:
                break
            stop_signal.set_waiting(True)
            try:
                batch = next(iterator)
            except StopIteration:
                raise ValueError(
                    "The training input ran out of batches before "
                    "num_train_steps"
                ) from None
            finally:
                stop_signal.set_waiting(False)
            if not several and stop_signal.is_requested():
                # SIGTERM while the batch was awaited: as the in-graph
                # step, no update (a resume reads the batch again).
                break
            examples = float(np.shape(next(iter(batch.values())))[0])
            with self._exchange(several):
                self.state, logs = self.step(self.state, batch, vote)
                logs = dict(logs)
                logs[EXAMPLES_KEY] = examples
                if pending is not None:
                    read(*pending)
            pending = (done, logs)
            done += 1
        if pending is not None:
            with self._exchange(several):
                read(*pending)
        if several:
            stop_signal.agreed = agreed == STOP
        self.optimizer.global_step.assign(self.step.global_step(self.state))
        return done, sums, bad

    @contextlib.contextmanager
    def _exchange(self, several):
        """Runs a step, or reads its outputs; with several processes, a
        failure of the step's exchange with the others (a lost process:
        the collectives' or the distributed service's error) is a
        LostProcessError naming it. Other errors (out of memory, a bug)
        stay as they are."""
        try:
            yield
        except jax.errors.JaxRuntimeError as e:
            # The failed step's state (its inputs were donated) is lost:
            # the variables keep the last synced values, and the Trainer's
            # final sync raises nothing in place of this error.
            self.state = None
            text = str(e).strip()
            lost = any(sign in text.lower() for sign in _LOST_PROCESS_SIGNS)
            if not (several and lost):
                raise
            first = text.splitlines()[0] if text else ""
            raise errors.LostProcessError(
                f"Process {jax.process_index()} of {jax.process_count()}: "
                f"a training step failed in its exchange with the other "
                f"processes ({first}); another process has probably stopped "
                "(see its log)."
            ) from e

    def sync(self):
        """Copies the devices' state into the model's and optimizer's
        variables (what checkpoints and evaluation read)."""
        if self.state is not None:
            self.step.write_back(jax.device_get(self.state))

    def reset(self):
        """Forgets the state: the next chunk starts from the variables
        (after a checkpoint was restored into them)."""
        self.state = None

    def eval_step(self, features):
        """{name: (sum, weight)} of one batch, with the model's variables."""
        if self._eval is None:
            model, metrics_fn = self.model, self.eval_metrics_fn

            def evaluate(trainable, non_trainable, batch):
                outputs, _ = model.stateless_call(
                    trainable, non_trainable, batch, training=False
                )
                return metrics_fn(batch, outputs)

            self._eval = jax.jit(evaluate)
        return self._eval(
            [v.value for v in self.model.trainable_variables],
            [v.value for v in self.model.non_trainable_variables],
            features,
        )
