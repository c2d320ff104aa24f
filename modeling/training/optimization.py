"""The original release's optimizer, one Keras optimizer for every backend.

`AdamWeightDecayOptimizer` reproduces google-research/bert `optimization.py`
exactly (tests/optimization_test.py compares 3 steps with the original's)
and is the only implementation: the scripts' Trainer uses it on TensorFlow
(under tf.distribute) and on JAX (`stateless_apply` inside the jitted
step), and Keras's `compile`/`fit` uses it on both. It is written in
`keras.ops` (the formulas are training/update_rules.py's) and imports no
TensorFlow on JAX (on TensorFlow it traces each kind of update once:
`_update_rule`).

* learning rate: `init_lr * k / num_warmup_steps` while k < num_warmup_steps,
  else `init_lr * (1 - min(k, num_train_steps) / num_train_steps)`, where k is
  `global_step` (Keras's `iterations`) BEFORE the update's increment (the
  first update uses lr(0));
* gradients clipped to global norm 1.0 across all trainable variables, after
  the sum over replicas; the word-embedding gradient's rows are counted one
  by one, as the original's IndexedSlices were (TensorFlow hands one over;
  the JAX step passes the count in an `update_rules.CountedGradient`);
* Adam WITHOUT bias correction, epsilon 1e-6 added after the square root,
  decoupled weight decay 0.01 scaled by the learning rate and computed on the
  pre-update weight, skipped for names matching LayerNorm / layer_norm / bias;
* dense updates: every row of an embedding decays its m and v each step;
* `global_step` incremented once per applied update.

Keras's own Adam applies bias correction and keys slots by its own paths;
this class keeps the original's arithmetic and its checkpoint names
(`checkpoint_variables()`: `<name>/adam_m`, `<name>/adam_v`, `global_step`).

LAMB (`optimizer_type="lamb"`, You et al. 2019) is offered as an option; it is
not part of the original release.
"""

import re

import keras
from keras import ops

from modeling.training import schedule
from modeling.training import update_rules

EXCLUDE_FROM_WEIGHT_DECAY = update_rules.EXCLUDE_FROM_WEIGHT_DECAY
OPTIMIZER_TYPES = update_rules.OPTIMIZER_TYPES


class WarmupLinearDecay:
    """The original's schedule, evaluated in float32 exactly as TF1 did.

    Args:
      init_lr: peak learning rate (float).
      num_train_steps: step at which the rate reaches 0 (decay counted from 0).
      num_warmup_steps: linear warmup length; 0 or None disables warmup.
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be > 0: {num_train_steps}")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps or 0)

    def __call__(self, step):
        """Learning rate (float32 scalar) for integer `step`."""
        return update_rules.learning_rate(
            step, self.init_lr, self.num_train_steps, self.num_warmup_steps
        )


def default_variable_name(var):
    """Checkpoint name of a variable: its Keras path, or its TF name sans :N."""
    name = getattr(var, "path", None) or var.name
    return re.sub(r":\d+$", "", name)


def _is_indexed_slices(grad):
    """TensorFlow's sparse gradient of a gather (tested by its parts, so
    that this module needs no TensorFlow)."""
    return all(hasattr(grad, a) for a in ("values", "indices", "dense_shape"))


@keras.saving.register_keras_serializable(package="bert")
class AdamWeightDecayOptimizer(keras.optimizers.Optimizer):
    """The original's AdamWeightDecay (or LAMB) as a Keras optimizer.

    `iterations` is the `global_step`, and the slots are Keras variables, so
    `model.save` keeps them and `keras.models.load_model` restores them;
    `checkpoint_variables()` names them as the original's checkpoints do.

    The name and the defaults are those of the original's class (no weight
    decay, no clipping); `create_optimizer` gives the fine-tuning settings,
    as the original's `create_optimizer` did.

    Args:
      learning_rate: float, the peak rate.
      weight_decay_rate: decay coefficient (0 disables decay).
      beta_1, beta_2, epsilon: Adam constants.
      exclude_from_weight_decay: regexes; a match in the name skips decay.
      clip_norm: global-norm clip applied to all gradients (None: no clip).
      num_train_steps: int, the rate decays linearly to 0 there (counted
        from step 0, after the warmup, as `WarmupLinearDecay`); None: a
        constant rate until `set_num_train_steps` (BertTextClassifier.fit
        calls it with the steps it runs).
      num_warmup_steps: int, linear warmup; None: `int(num_train_steps *
        warmup_proportion)`.
      warmup_proportion: float, see num_warmup_steps.
      optimizer_type: "adamw" or "lamb".
      name_fn: var -> its checkpoint name (slot names, decay exclusion);
        not part of the saved config (the default: the Keras path).
    """

    slot_names = ("adam_m", "adam_v")

    # True: a step whose gradient is not finite (its global norm NaN or
    # Inf) changes nothing, as a skipped step, where the clip would make
    # every weight NaN (the JAX step sets it; Keras's stateless_apply
    # passes no argument).
    skip_non_finite = False

    def __init__(
        self,
        learning_rate=1e-3,
        weight_decay_rate=0.0,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=None,
        name="AdamWeightDecayOptimizer",
        # The original's seven arguments, in its order, then this one's.
        *,
        clip_norm=None,
        num_train_steps=None,
        num_warmup_steps=None,
        warmup_proportion=0.0,
        optimizer_type="adamw",
        name_fn=default_variable_name,
    ):
        # Keras reads the current rate from this callable (callbacks, logs);
        # the update reads the same schedule at the step it makes.
        super().__init__(learning_rate=self._current_rate, name=name)
        if optimizer_type not in OPTIMIZER_TYPES:
            raise ValueError(
                f"Unknown optimizer_type {optimizer_type!r}; expected one "
                f"of {OPTIMIZER_TYPES}"
            )
        self.init_lr = float(learning_rate)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = list(exclude_from_weight_decay or ())
        self.clip_norm = clip_norm
        self.warmup_proportion = warmup_proportion
        self.num_warmup_steps = num_warmup_steps
        self.optimizer_type = optimizer_type
        self.name_fn = name_fn
        self.schedule = None
        self.num_train_steps = None
        # A plain holder: functions (or a dict of them) set as attributes
        # would be tracked as the optimizer's state and saved with it.
        self._traced_rules = _TracedRules()
        if num_train_steps is not None:
            self.set_num_train_steps(num_train_steps)

    # === Schedule ===

    def set_num_train_steps(self, num_train_steps):
        """Sets the schedule: warmup, then linear decay to 0 at this step.

        Call before the first update (a traced train step keeps the
        schedule it was traced with).
        """
        warmup = self.num_warmup_steps
        if warmup is None:
            warmup = schedule.num_warmup_steps(
                num_train_steps, self.warmup_proportion
            )
        self.schedule = WarmupLinearDecay(self.init_lr, num_train_steps, warmup)
        self.num_train_steps = self.schedule.num_train_steps
        self.num_warmup_steps = self.schedule.num_warmup_steps

    def rate_at(self, step):
        """The rate (float32 scalar) of the update made at `step`."""
        if self.schedule is None:
            return ops.convert_to_tensor(self.init_lr, "float32")
        return self.schedule(step)

    def _current_rate(self):
        return self.rate_at(self._iterations)

    # === Variables ===

    def build(self, variables):
        """Creates the two slots of every variable (zeros)."""
        if self.built:
            return
        super().build(variables)
        self._names = [self.name_fn(v) for v in variables]
        self._decays = [
            update_rules.uses_weight_decay(
                n, self.weight_decay_rate, self.exclude_from_weight_decay
            )
            for n in self._names
        ]
        self._slots = [
            tuple(
                self.add_variable_from_reference(var, name=slot)
                for slot in self.slot_names
            )
            for var in variables
        ]

    @property
    def global_step(self):
        """The step counter (`iterations`)."""
        return self._iterations

    def checkpoint_variables(self):
        """{original checkpoint name: variable}: slots and global_step."""
        if not self.built:
            raise ValueError(
                "The optimizer has no slots before its first update (or "
                "`build`)."
            )
        out = {"global_step": self._iterations}
        for name, slots in zip(self._names, self._slots):
            for slot_name, slot in zip(self.slot_names, slots):
                out[f"{name}/{slot_name}"] = slot
        return out

    def load_own_variables(self, store):
        if len(store.keys()) == 1 and len(self.variables) > 1:
            # Saved before its first update: the step (0) was all it had.
            self._iterations.assign(store["0"])
            return
        super().load_own_variables(store)

    # === Update ===

    def apply(
        self,
        grads,
        trainable_variables=None,
        should_apply=None,
        reduced=False,
    ):
        """Sums over replicas, clips, then applies one update and increments
        `iterations`.

        Variables with a None gradient are left untouched (their slots are
        not updated), as in the original.

        Args:
          grads: the gradients, in the order of trainable_variables.
          trainable_variables: default: the variables of `build`.
          should_apply: optional bool scalar; when False the weights and
            slots keep their values (a skipped fp16 step) but the step still
            advances, so it keeps counting consumed batches.
          reduced: the gradients are already the same on every replica (the
            Trainer's mean); else, under tf.distribute, they are summed over
            the replicas here (Keras divides each replica's loss by their
            number, so the sum is the gradient of the global batch's mean).

        Returns:
          The global norm of the gradients before clipping (float32 scalar).
        """
        if trainable_variables is None:
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
        pairs = [
            (g, v)
            for g, v in zip(grads, trainable_variables, strict=True)
            if g is not None
        ]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        for _, var in pairs:
            if self._var_key(var) not in self._trainable_variables_indices:
                raise ValueError(
                    f"Variable {var.name} was not passed to build(); build "
                    "the optimizer on the model's trainable variables."
                )
        if not reduced:
            pairs = self._sum_over_replicas(pairs)
        grads, squares = [], {}
        for i, (grad, var) in enumerate(pairs):
            grad, counted = self._as_original(grad, var)
            grads.append(grad)
            if counted is not None:
                squares[i] = counted
        norm = update_rules.global_norm(
            [g.values if _is_indexed_slices(g) else g for g in grads], squares
        )
        if self.clip_norm is not None:
            scale = update_rules.clip_scale(norm, self.clip_norm)
            grads = [self._scaled(g, scale) for g in grads]
        # Densified after clipping, as the original's tf.multiply did.
        grads = [self._dense(g, v) for g, (_, v) in zip(grads, pairs)]
        lr = self._current_rate()
        if self.skip_non_finite:
            finite = ops.isfinite(norm)
            should_apply = (
                finite if should_apply is None else should_apply & finite
            )
        if should_apply is not None:
            # Through Keras's update step (on TensorFlow, the strategy's
            # per-variable update) with the rate: update_step unpacks it.
            lr = (lr, should_apply)
        self._backend_update_step(grads, [v for _, v in pairs], lr)
        self._iterations.assign_add(1)
        return norm

    def _sum_over_replicas(self, pairs):
        reduce = getattr(super(), "_all_reduce_sum_gradients", None)
        return list(reduce(pairs)) if reduce is not None else pairs

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # Keras's TensorFlow update step sums over replicas here; `apply`
        # summed them already (before the clip, whose norm is the global
        # batch's).
        return grads_and_vars

    def _as_original(self, grad, var):
        """(gradient, its rows' sum of squares or None): the gradient in
        the form the original's graph produced it.

        The clip norm counts an IndexedSlices gradient row by row (duplicate
        rows separately), so the form matters. The original produced
        IndexedSlices only for the word-embedding gather; its token-type
        lookup was a one-hot matmul, whose gradient is dense. A Keras gather
        elsewhere is densified here so the norm, and the update, match.
        """
        name = self._names[self._get_variable_index(var)]
        if isinstance(grad, update_rules.CountedGradient):
            # The original's own gathers (the word embeddings) count rows;
            # a Keras gather elsewhere was a dense gradient there.
            if update_rules.has_sparse_gradient(name):
                return grad.dense, grad.squares
            return grad.dense, None
        if not _is_indexed_slices(grad):
            return grad, None
        if update_rules.has_sparse_gradient(name):
            return grad, None  # global_norm reads its values
        return self._dense(grad, var), None

    @staticmethod
    def _scaled(grad, scale):
        if _is_indexed_slices(grad):
            return type(grad)(
                grad.values * scale, grad.indices, grad.dense_shape
            )
        return grad * scale

    @staticmethod
    def _dense(grad, var):
        if _is_indexed_slices(grad):
            return ops.segment_sum(
                grad.values, grad.indices, num_segments=var.shape[0]
            )
        return grad

    def update_step(self, gradient, variable, learning_rate):
        """One variable's update (Keras calls it per variable, on
        TensorFlow inside the strategy's update of that variable)."""
        should_apply = None
        if isinstance(learning_rate, tuple):
            learning_rate, should_apply = learning_rate
        index = self._get_variable_index(variable)
        m, v = self._slots[index]
        value = ops.convert_to_tensor(
            variable.value if isinstance(variable, keras.Variable) else variable
        )
        arrays = (value, gradient, m.value, v.value)
        rule = self._update_rule(self._decays[index], arrays)
        next_var, next_m, next_v = rule(*arrays, learning_rate)
        if should_apply is not None:
            next_var = ops.where(should_apply, next_var, value)
            next_m = ops.where(should_apply, next_m, m.value)
            next_v = ops.where(should_apply, next_v, v.value)
        self.assign(variable, ops.cast(next_var, variable.dtype))
        self.assign(m, next_m)
        self.assign(v, next_v)

    def _update_rule(self, use_decay, arrays):
        """`update_rules.adam_update` for the variables of one kind (with
        decay or not; the dtypes of `arrays`, a variable's (var, grad, m,
        v)), as (var, grad, m, v, lr) -> (var, m, v).

        On TensorFlow, one traced function per kind, which every variable's
        update calls: built op by op for each variable, the update was a
        third of a training step's tracing time (about 35 graph ops a
        variable, a third of a second per layer of the encoder). The
        function runs the same ops (TensorFlow inlines it). JAX traces the
        formula inline.
        """
        lamb = self.optimizer_type == "lamb"
        if keras.backend.backend() != "tensorflow":
            return lambda *args: update_rules.adam_update(
                *args, use_decay, self, lamb=lamb
            )
        # The constants are traced in: a change of one traces anew.
        dtypes = tuple(keras.backend.standardize_dtype(a.dtype) for a in arrays)
        key = (use_decay, lamb, dtypes, self.weight_decay_rate)
        key += (self.beta_1, self.beta_2, self.epsilon)
        if key not in self._traced_rules.functions:
            import tensorflow as tf

            def rule(var, grad, m, v, lr):
                return update_rules.adam_update(
                    var, grad, m, v, lr, use_decay, self, lamb=lamb
                )

            specs = [tf.TensorSpec(None, dtype) for dtype in dtypes]
            traced = tf.function(rule, autograph=False).get_concrete_function(
                *specs, tf.TensorSpec([], "float32")
            )
            self._traced_rules.functions[key] = traced
        return self._traced_rules.functions[key]

    def get_config(self):
        return {
            "name": self.name,
            "learning_rate": self.init_lr,
            "weight_decay_rate": self.weight_decay_rate,
            "beta_1": self.beta_1,
            "beta_2": self.beta_2,
            "epsilon": self.epsilon,
            "exclude_from_weight_decay": list(self.exclude_from_weight_decay),
            "clip_norm": self.clip_norm,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "warmup_proportion": self.warmup_proportion,
            "optimizer_type": self.optimizer_type,
        }


class _TracedRules:
    """The update functions an optimizer traced on TensorFlow, by kind; a
    copy of the optimizer starts without them (they are traced again)."""

    def __init__(self):
        self.functions = {}

    def __reduce__(self):
        return _TracedRules, ()


def create_optimizer(
    init_lr,
    num_train_steps=None,
    num_warmup_steps=None,
    optimizer_type="adamw",
    warmup_proportion=0.0,
    name_fn=default_variable_name,
):
    """The original's fine-tuning and pre-training optimizer (or LAMB):
    weight decay 0.01 except LayerNorm and biases, gradients clipped to
    global norm 1.0, warmup then linear decay to 0 at num_train_steps.

    Args:
      init_lr: peak learning rate.
      num_train_steps: total number of updates (the rate decays to 0 there);
        None: see AdamWeightDecayOptimizer.
      num_warmup_steps: linear warmup length (None: from warmup_proportion).
      optimizer_type: "adamw" (the original) or "lamb".
      warmup_proportion: see num_warmup_steps.
      name_fn: var -> original checkpoint name.

    Returns:
      An unbuilt `AdamWeightDecayOptimizer`; the first update builds it
      (or call `build(variables)`, under the strategy scope).
    """
    return AdamWeightDecayOptimizer(
        learning_rate=init_lr,
        weight_decay_rate=0.01,
        exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
        clip_norm=1.0,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
        warmup_proportion=warmup_proportion,
        optimizer_type=optimizer_type,
        name_fn=name_fn,
    )
