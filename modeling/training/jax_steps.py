"""The compiled training step on Keras 3's JAX backend.

The TensorFlow step (training/steps.py) runs the model under tf.distribute;
this one is a pure function of arrays compiled once by `jax.jit`:

    state, logs = step(state, batch)

where `state` holds the model's trainable and non-trainable values (the
dropout seed generators are among the latter), the optimizer's `adam_m` /
`adam_v` per trainable variable and the step counter, and `batch` a dict of
numpy arrays (the host's tf.data pipeline yields them, or synthetic ones).
The model runs through Keras's stateless API (`model.stateless_call`), the
gradients come from `jax.value_and_grad`, and the update is the original's
arithmetic (training/update_rules.py, shared with the TensorFlow
optimizer). The old state's buffers are donated, so a step holds one copy
of the weights and slots.

Data parallel: with several local devices (GPUs, TPU cores, or host devices
under `XLA_FLAGS=--xla_force_host_platform_device_count=N`), the state is
replicated and each batch is split along its first axis over a
`keras.distribution.DeviceMesh`; XLA all-reduces the gradients, so the step
computes the mean over the global batch as one device would.

Gradient accumulation: N micro-batches of batch / N run in a `lax.scan`;
their mean gradient makes one update (the TensorFlow step's rule).

The clip norm as the original counted it: TensorFlow keeps a gathered
word-embedding gradient as IndexedSlices, and `tf.clip_by_global_norm`
counts a token that occurs k times in a batch as k rows; JAX's gradient is
dense (the k rows summed). The step counts the rows as TensorFlow does
(modeling/row_gradients.py) where TensorFlow's single-device step keeps the
IndexedSlices: the table only gathered (not the pre-training decoder's tied
matmul) and no gradient accumulation (which adds dense tensors there).
tests/jax_scripts_test.py holds a MiniLM MRPC fine-tuning run to
TensorFlow's within float32 accumulation; without the count its Adam slots
differed by 0.6% after two steps.

This module imports no TensorFlow: it runs where only JAX is installed.
"""

import dataclasses
import time

import jax
import jax.numpy as jnp
import keras
import numpy as np

from modeling import checkpoints
from modeling import row_gradients
from modeling.training import update_rules

# The key of the examples count in the logs (training/steps.py's).
EXAMPLES_KEY = "_examples"


@dataclasses.dataclass
class OptimizerSettings:
    """The original optimizer's settings (`optimization.create_optimizer`).

    Attributes:
      learning_rate: peak rate.
      num_train_steps: the rate decays linearly to 0 at this step.
      num_warmup_steps: linear warmup length.
      optimizer_type: "adamw" (the original) or "lamb".
      weight_decay_rate, beta_1, beta_2, epsilon, clip_norm: the original's
        constants.
    """

    learning_rate: float
    num_train_steps: int
    num_warmup_steps: int = 0
    optimizer_type: str = "adamw"
    weight_decay_rate: float = 0.01
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    clip_norm: float | None = 1.0

    def __post_init__(self):
        if self.optimizer_type not in update_rules.OPTIMIZER_TYPES:
            raise ValueError(
                f"Unknown optimizer_type {self.optimizer_type!r}; expected "
                f"one of {update_rules.OPTIMIZER_TYPES}"
            )


class TrainStep:
    """One training step of `model` as a jitted function of arrays.

    Args:
      model: a built keras.Model taking a dict of features.
      loss_fn: (features, outputs) -> dict of float32 scalars with "loss"
        (keras.ops only: it is traced by JAX).
      settings: OptimizerSettings.
      gradient_accumulation_steps: micro-batches per update.
      devices: the devices to split each batch over (default: every local
        device of the default backend); one device runs without sharding.
    """

    def __init__(
        self,
        model,
        loss_fn,
        settings,
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
        self.settings = settings
        self.accumulation = gradient_accumulation_steps
        self.names = [
            checkpoints.variable_name(v) for v in model.trainable_variables
        ]
        self.use_decay = [
            update_rules.uses_weight_decay(n, settings.weight_decay_rate)
            for n in self.names
        ]
        sparse = [
            i
            for i, n in enumerate(self.names)
            if update_rules.has_sparse_gradient(n)
        ]
        self._sparse_index = sparse[0] if len(sparse) == 1 else None
        self._sparse_rows = False
        self.devices = list(devices or jax.local_devices())
        self._mesh = None
        if len(self.devices) > 1:
            mesh = keras.distribution.DeviceMesh(
                (len(self.devices),), ["batch"], self.devices
            )
            self._mesh = mesh.backend_mesh
        self._step = jax.jit(self._train_step, donate_argnums=0)

    # === State ===

    def initial_state(self, global_step=0, slots=None):
        """The state from the model's current values.

        Args:
          global_step: int, the step counter to start from.
          slots: None (zeros), or {checkpoint name: array} holding
            `<name>/adam_m` and `<name>/adam_v` of every trainable variable
            (a resumed run).
        """
        model = self.model
        m, v = [], []
        for name, var in zip(self.names, model.trainable_variables):
            if slots is None:
                zeros = np.zeros(var.shape, np.float32)
                m.append(zeros)
                v.append(zeros)
            else:
                m.append(np.asarray(slots[f"{name}/adam_m"], np.float32))
                v.append(np.asarray(slots[f"{name}/adam_v"], np.float32))
        state = {
            "trainable": [var.value for var in model.trainable_variables],
            "non_trainable": [
                var.value for var in model.non_trainable_variables
            ],
            "adam_m": m,
            "adam_v": v,
            "step": np.asarray(global_step, np.int32),
        }
        return self._place(state, replicate=True)

    def write_back(self, state):
        """Copies the state's weights into the model's variables."""
        for var, value in zip(
            self.model.trainable_variables, state["trainable"]
        ):
            var.assign(value)
        for var, value in zip(
            self.model.non_trainable_variables, state["non_trainable"]
        ):
            var.assign(value)

    def checkpoint_arrays(self, state):
        """{original checkpoint name: numpy array} of the weights and the
        optimizer's slots (`global_step` is the int(state["step"]))."""
        out = {}
        for name, w, m, v in zip(
            self.names, state["trainable"], state["adam_m"], state["adam_v"]
        ):
            out[name] = np.asarray(w)
            out[f"{name}/adam_m"] = np.asarray(m)
            out[f"{name}/adam_v"] = np.asarray(v)
        for var, value in zip(
            self.model.non_trainable_variables, state["non_trainable"]
        ):
            if "seed_generator" not in var.path:
                out[checkpoints.variable_name(var)] = np.asarray(value)
        return out

    def _place(self, tree, replicate):
        if self._mesh is None:
            return jax.device_put(tree, self.devices[0])
        spec = jax.sharding.PartitionSpec() if replicate else None
        if replicate:
            sharding = jax.sharding.NamedSharding(self._mesh, spec)
            return jax.device_put(tree, sharding)
        batch = jax.sharding.NamedSharding(
            self._mesh, jax.sharding.PartitionSpec("batch")
        )
        return jax.device_put(tree, batch)

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

    def __call__(self, state, batch):
        """(new state, logs): one update from `batch` (a dict of arrays)."""
        return self._step(state, self.place_batch(batch))

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
        one where TensorFlow's single-device step keeps them as an
        IndexedSlices: no accumulation; its accumulation adds dense
        tensors)."""
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
        micro = jax.tree.map(
            lambda x: x.reshape((n, x.shape[0] // n) + x.shape[1:]), batch
        )

        def body(carry, features):
            grad_sum, nt = carry
            (_, (logs, nt)), (grads, _) = grad_fn(
                trainable, jnp.zeros((), jnp.float32), nt, features
            )
            grad_sum = jax.tree.map(jnp.add, grad_sum, grads)
            return (grad_sum, nt), logs

        zeros = jax.tree.map(jnp.zeros_like, trainable)
        (grad_sum, non_trainable), logs = jax.lax.scan(
            body, (zeros, non_trainable), micro
        )
        grads = jax.tree.map(lambda g: g / n, grad_sum)
        logs = jax.tree.map(lambda x: jnp.mean(x, axis=0), logs)
        return logs, grads, non_trainable, {}

    def _train_step(self, state, batch):
        s = self.settings
        logs, grads, non_trainable, squares = self._grads(
            state["trainable"], state["non_trainable"], batch
        )
        grads = [jnp.asarray(g, jnp.float32) for g in grads]
        if s.clip_norm is not None:
            grads, norm = update_rules.clip_by_global_norm(
                grads, s.clip_norm, squares
            )
        else:
            norm = update_rules.global_norm(grads, squares)
        lr = update_rules.learning_rate(
            state["step"],
            s.learning_rate,
            s.num_train_steps,
            s.num_warmup_steps,
        )
        new = {"trainable": [], "adam_m": [], "adam_v": []}
        for var, grad, m, v, decay in zip(
            state["trainable"],
            grads,
            state["adam_m"],
            state["adam_v"],
            self.use_decay,
        ):
            next_var, next_m, next_v = update_rules.adam_update(
                var, grad, m, v, lr, decay, s, lamb=s.optimizer_type == "lamb"
            )
            new["trainable"].append(next_var.astype(var.dtype))
            new["adam_m"].append(next_m)
            new["adam_v"].append(next_v)
        new["non_trainable"] = non_trainable
        new["step"] = state["step"] + 1
        logs = {k: jnp.asarray(v, jnp.float32) for k, v in logs.items()}
        logs["grad_norm"] = norm
        logs["learning_rate"] = lr
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
      optimizer: the Trainer's optimization.AdamWeightDecay: its settings,
        its `global_step` and slot variables (checkpoint_variables()).
      config: the Trainer's RunConfig.
      devices: as TrainStep's (default: every local device).
    """

    def __init__(
        self, model, loss_fn, eval_metrics_fn, optimizer, config, devices=None
    ):
        if config.precision == "mixed_float16":
            raise ValueError(
                "--precision=mixed_float16 needs the loss scaling of the "
                "TensorFlow backend; on --backend=jax use mixed_bfloat16"
            )
        settings = OptimizerSettings(
            learning_rate=config.learning_rate,
            num_train_steps=config.num_train_steps,
            num_warmup_steps=config.num_warmup_steps,
            optimizer_type=config.optimizer_type,
            weight_decay_rate=optimizer.weight_decay_rate,
            beta_1=optimizer.beta_1,
            beta_2=optimizer.beta_2,
            epsilon=optimizer.epsilon,
            clip_norm=optimizer.clip_norm,
        )
        self.model = model
        self.optimizer = optimizer
        self.eval_metrics_fn = eval_metrics_fn
        self.step = TrainStep(
            model,
            loss_fn,
            settings,
            config.gradient_accumulation_steps,
            devices,
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

    def _slots(self):
        return {
            name: np.asarray(var)
            for name, var in self.optimizer.checkpoint_variables().items()
        }

    def train_chunk(self, iterator, num_steps, stop_signal, max_seconds=None):
        """Up to num_steps steps; returns (steps run, summed logs, index of
        the first step with a non-finite loss or -1), as StepFunctions'.

        Stops at SIGTERM and after max_seconds (checked between steps). A
        step's loss is read on the host one step later, so the devices
        never wait for the host; after a non-finite loss one more update
        may have run, which nothing saves (the Trainer stops there).
        """
        if self.state is None:
            self.state = self.step.initial_state(
                int(np.asarray(self.optimizer.global_step)), self._slots()
            )
        self.trained = True
        start = time.time()
        sums, done, bad = {}, 0, -1
        pending = None  # (index, logs) of the step not yet read

        def read(index, logs):
            nonlocal bad
            values = {k: float(v) for k, v in logs.items()}
            if bad < 0 and not np.isfinite(values["loss"]):
                bad = index
            for k, v in values.items():
                sums[k] = sums.get(k, 0.0) + v

        while done < num_steps and bad < 0 and not stop_signal.is_requested():
            if done and max_seconds is not None:
                if time.time() - start >= max_seconds:
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
            examples = float(np.shape(next(iter(batch.values())))[0])
            self.state, logs = self.step(self.state, batch)
            logs = {
                k: v
                for k, v in logs.items()
                if k not in ("grad_norm", "learning_rate")
            }
            logs[EXAMPLES_KEY] = examples
            if pending is not None:
                read(*pending)
            pending = (done, logs)
            done += 1
        if pending is not None:
            read(*pending)
        self.optimizer.global_step.assign(int(self.state["step"]))
        return done, sums, bad

    def sync(self):
        """Copies the devices' state into the model's and optimizer's
        variables (what checkpoints and evaluation read)."""
        if self.state is None:
            return
        state = self.state
        self.step.write_back(jax.device_get(state))
        slots = self.optimizer.checkpoint_variables()
        for name, m, v in zip(
            self.step.names, state["adam_m"], state["adam_v"]
        ):
            slots[f"{name}/adam_m"].assign(np.asarray(m))
            slots[f"{name}/adam_v"].assign(np.asarray(v))
        self.optimizer.global_step.assign(int(state["step"]))

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
