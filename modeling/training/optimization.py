"""The original release's optimizer: AdamWeightDecay, warmup + linear decay.

`create_optimizer` reproduces google-research/bert `optimization.py` exactly
(tests/optimization_test.py compares 3 steps with the original's):

* learning rate: `init_lr * k / num_warmup_steps` while k < num_warmup_steps,
  else `init_lr * (1 - min(k, num_train_steps) / num_train_steps)`, where k is
  `global_step` BEFORE the update's increment (the first update uses lr(0));
* gradients clipped to global norm 1.0 across all trainable variables (TF's
  own `clip_by_global_norm`, so IndexedSlices count their rows as the
  original's did);
* Adam WITHOUT bias correction, epsilon 1e-6 added after the square root,
  decoupled weight decay 0.01 scaled by the learning rate and computed on the
  pre-update weight, skipped for names matching LayerNorm / layer_norm / bias;
* dense updates: every row of an embedding decays its m and v each step;
* `global_step` (int64) incremented once per applied update.

The optimizer is a plain `tf.Module` with explicit slot variables rather than a
`keras.optimizers.Optimizer`: Keras's Adam applies bias correction and keys
slots by its own paths, while this class keeps the original's arithmetic and
names (`<name>/adam_m`, `<name>/adam_v`, `global_step`). It works under any
tf.distribute strategy: create (`build`) it under `strategy.scope()` and call
`apply_gradients` in replica context with all-reduced gradients.

LAMB (`optimizer_type="lamb"`, You et al. 2019) is offered as an option; it is
not part of the original release.
"""

import re

import keras
import tensorflow as tf

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


class AdamWeightDecay(tf.Module):
    """Adam without bias correction, with decoupled weight decay.

    Args:
      learning_rate: a float, or a callable int64 step -> float32 rate.
      weight_decay_rate: decay coefficient (0 disables decay).
      beta_1, beta_2, epsilon: Adam constants (the original's defaults).
      exclude_from_weight_decay: regexes; a match in the name skips decay.
      clip_norm: global-norm clip applied to all gradients (None: no clip).
      name_fn: var -> original checkpoint name (slot names, decay exclusion).
    """

    slot_names = ("adam_m", "adam_v")
    lamb = False  # Lamb: the update scaled by the trust ratio.

    def __init__(
        self,
        learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
        clip_norm=1.0,
        name_fn=default_variable_name,
        name="AdamWeightDecay",
    ):
        super().__init__(name=name)
        self.learning_rate = learning_rate
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = tuple(exclude_from_weight_decay or ())
        self.clip_norm = clip_norm
        self.name_fn = name_fn
        self.global_step = None
        self._slots = {}  # checkpoint name of the variable -> (m, v)
        self._names = {}  # id(tf variable) -> checkpoint name

    # === Variables ===

    def build(self, variables, make_slot=None):
        """Creates `global_step` and the zero slots. Call under strategy.scope().

        Args:
          variables: the trainable variables (Keras or tf.Variable).
          make_slot: optional (variable, slot name) -> a float32 tf.Variable
            of zeros shaped like the variable; a Keras optimizer that owns
            its variables passes its own (`AdamWeightDecayOptimizer`).
            `global_step` may likewise be set before build.
        """
        if self.global_step is None:
            self.global_step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="global_step"
            )
        for var in variables:
            name = self.name_fn(var)
            self._names[id(_tf_variable(var))] = name
            if name in self._slots:
                continue
            if make_slot is not None:
                slots = [make_slot(var, slot) for slot in self.slot_names]
            else:
                slots = [
                    tf.Variable(
                        tf.zeros(var.shape, tf.float32),
                        trainable=False,
                        name=f"{name}/{slot}".replace("/", "_"),
                    )
                    for slot in self.slot_names
                ]
            self._slots[name] = tuple(slots)

    def checkpoint_variables(self):
        """Dict original checkpoint name -> variable: slots and global_step."""
        out = {"global_step": self.global_step}
        for name, slots in self._slots.items():
            for slot_name, slot in zip(self.slot_names, slots):
                out[f"{name}/{slot_name}"] = slot
        return out

    def current_learning_rate(self):
        """The rate the next update will use (float32 scalar)."""
        if callable(self.learning_rate):
            return self.learning_rate(self.global_step)
        return tf.constant(self.learning_rate, tf.float32)

    def _use_weight_decay(self, name):
        return update_rules.uses_weight_decay(
            name, self.weight_decay_rate, self.exclude_from_weight_decay
        )

    # === Update ===

    def apply_gradients(self, grads_and_vars, should_apply=None):
        """Clips, then applies one update and increments `global_step`.

        Call in replica context (inside `strategy.run`) with gradients that are
        already identical on every replica (all-reduced), or outside any
        strategy. Variables with a None gradient are left untouched (their
        slots are not updated), as in the original.

        Args:
          grads_and_vars: (gradient, variable) pairs.
          should_apply: optional bool scalar; when False the weights and slots
            keep their values (a skipped fp16 step) but `global_step` still
            advances, so it keeps counting consumed batches.

        Returns:
          The global norm of the gradients before clipping (float32 scalar).
        """
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        if not pairs:
            raise ValueError("No gradients provided for any variable.")
        grads = [g for g, _ in pairs]
        tf_vars = [_tf_variable(v) for _, v in pairs]
        grads = [self._as_original(g, v) for g, v in zip(grads, tf_vars)]
        if self.clip_norm is not None:
            grads, global_norm = tf.clip_by_global_norm(grads, self.clip_norm)
        else:
            global_norm = tf.linalg.global_norm(grads)
        # Densify after clipping (the original's tf.multiply did the same).
        grads = [tf.convert_to_tensor(g) for g in grads]
        if should_apply is None:
            should_apply = True  # a Python bool: no select ops in the graph
        tf.__internal__.distribute.interim.maybe_merge_call(
            self._distributed_apply,
            tf.distribute.get_strategy(),
            list(zip(grads, tf_vars)),
            should_apply,
        )
        return global_norm

    def _as_original(self, grad, var):
        """The gradient in the form the original's graph produced it.

        The clip norm counts an IndexedSlices gradient row by row (duplicate
        rows separately), so the form matters. The original produced
        IndexedSlices only for the word-embedding gather; its token-type
        lookup was a one-hot matmul, whose gradient is dense. A Keras gather
        elsewhere is densified here so the norm, and the update, match.
        """
        if not isinstance(grad, tf.IndexedSlices):
            return grad
        name = self._names.get(id(var), var.name)
        if update_rules.has_sparse_gradient(name):
            return grad
        return tf.convert_to_tensor(grad)

    def _distributed_apply(self, strategy, grads_and_vars, should_apply):
        lr = self.current_learning_rate()
        for grad, var in grads_and_vars:
            name = self._names.get(id(var))
            if name is None:
                raise ValueError(
                    f"Variable {var.name} was not passed to build(); "
                    "build the optimizer on the model's trainable variables."
                )
            m, v = self._slots[name]
            strategy.extended.update(
                var,
                self._update_fn,
                args=(
                    grad,
                    m,
                    v,
                    lr,
                    self._use_weight_decay(name),
                    should_apply,
                ),
                group=False,
            )
        strategy.extended.update(
            self.global_step, lambda s: s.assign_add(1), group=False
        )

    def _update_fn(self, var, grad, m, v, lr, use_decay, should_apply):
        next_var, next_m, next_v = update_rules.adam_update(
            var, grad, m, v, lr, use_decay, self, lamb=self.lamb
        )
        if not (isinstance(should_apply, bool) and should_apply):
            next_var = tf.where(should_apply, next_var, var)
            next_m = tf.where(should_apply, next_m, m)
            next_v = tf.where(should_apply, next_v, v)
        return tf.group(
            var.assign(next_var), m.assign(next_m), v.assign(next_v)
        )


class Lamb(AdamWeightDecay):
    """LAMB: AdamWeightDecay's update scaled by a layer-wise trust ratio.

    The ratio is ||w|| / ||update|| (1 where either norm is 0, and for the
    variables excluded from weight decay, as tf-models' LAMB does). Adam's
    moments are used without bias correction, like the rest of this module.
    """

    lamb = True


def _tf_variable(var):
    """The tf.Variable (or DistributedVariable) behind a Keras variable."""
    return var.value if isinstance(var, keras.Variable) else var


def create_optimizer(
    init_lr,
    num_train_steps,
    num_warmup_steps,
    optimizer_type="adamw",
    name_fn=default_variable_name,
):
    """The original's optimizer (or LAMB) with its warmup + linear decay.

    Args:
      init_lr: peak learning rate.
      num_train_steps: total number of updates (the rate decays to 0 there).
      num_warmup_steps: linear warmup length (0: none).
      optimizer_type: "adamw" (the original) or "lamb".
      name_fn: var -> original checkpoint name.

    Returns:
      An unbuilt `AdamWeightDecay` (or `Lamb`); call `build(variables)` under
      the strategy scope before the first `apply_gradients`.
    """
    classes = {"adamw": AdamWeightDecay, "lamb": Lamb}
    if optimizer_type not in classes:
        raise ValueError(
            f"Unknown optimizer_type {optimizer_type!r}; expected one of "
            f"{OPTIMIZER_TYPES}"
        )
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    return classes[optimizer_type](learning_rate=schedule, name_fn=name_fn)


# === The same optimizer for Keras's compile/fit ===


@keras.saving.register_keras_serializable(package="bert")
class AdamWeightDecayOptimizer(keras.optimizers.Optimizer):
    """`AdamWeightDecay` (or `Lamb`) as a Keras optimizer, for `compile`.

    The arithmetic is this module's `AdamWeightDecay`, held as `inner` and
    called from `apply`: the original's clipping, update and schedule, not
    Keras's Adam. Keras owns the variables: `iterations` is the
    `global_step` and the slots are Keras variables, so `model.save` keeps
    them and `keras.models.load_model` restores them.
    `checkpoint_variables()` names them as the original's checkpoints do
    (`<name>/adam_m`, `<name>/adam_v`, `global_step`).

    The name and the defaults are those of the original's class (no weight
    decay, no clipping); `create_keras_optimizer` gives the fine-tuning
    settings, as the original's `create_optimizer` did.

    Args:
      learning_rate: float, the peak rate.
      weight_decay_rate, beta_1, beta_2, epsilon, exclude_from_weight_decay,
        clip_norm: see `AdamWeightDecay`.
      num_train_steps: int, the rate decays linearly to 0 there (counted
        from step 0, after the warmup, as `WarmupLinearDecay`); None: a
        constant rate until `set_num_train_steps` (BertTextClassifier.fit
        calls it with the steps it runs).
      num_warmup_steps: int, linear warmup; None: `int(num_train_steps *
        warmup_proportion)`.
      warmup_proportion: float, see num_warmup_steps.
      optimizer_type: "adamw" or "lamb".
    """

    def __init__(
        self,
        learning_rate=1e-3,
        weight_decay_rate=0.0,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=None,
        clip_norm=None,
        num_train_steps=None,
        num_warmup_steps=None,
        warmup_proportion=0.0,
        optimizer_type="adamw",
        name="AdamWeightDecayOptimizer",
    ):
        # Keras reads the current rate from this callable (callbacks,
        # logs); the update itself uses the inner optimizer's schedule.
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
        classes = {"adamw": AdamWeightDecay, "lamb": Lamb}
        self.inner = classes[optimizer_type](
            learning_rate=self.init_lr,
            weight_decay_rate=weight_decay_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            exclude_from_weight_decay=self.exclude_from_weight_decay,
            clip_norm=clip_norm,
            name=name,
        )
        self.num_train_steps = None
        if num_train_steps is not None:
            self.set_num_train_steps(num_train_steps)

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
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(warmup)
        self.inner.learning_rate = WarmupLinearDecay(
            self.init_lr, self.num_train_steps, self.num_warmup_steps
        )

    def _current_rate(self):
        if self.inner.global_step is None:
            step = tf.constant(0, tf.int64)
        else:
            step = self.inner.global_step
        rate = self.inner.learning_rate
        return rate(step) if callable(rate) else tf.constant(rate, tf.float32)

    def build(self, variables):
        if self.built:
            return
        super().build(variables)
        # The inner optimizer updates Keras-owned variables: the step
        # counter and one pair of slots per variable.
        self.inner.global_step = self._iterations.value

        def make_slot(var, slot):
            return self.add_variable_from_reference(var, name=slot).value

        self.inner.build(variables, make_slot=make_slot)

    def apply(self, grads, trainable_variables=None):
        """One update of the original's arithmetic (`AdamWeightDecay.
        apply_gradients`); increments `iterations`."""
        if trainable_variables is None:
            trainable_variables = self._trainable_variables
        trainable_variables = list(trainable_variables)
        if not self.built:
            with keras.name_scope(self.name, caller=self):
                self.build(trainable_variables)
        # A variable the loss does not reach (an embedder's unused pooler)
        # has no gradient and no update, as in the original's loop.
        pairs = [
            (g, v)
            for g, v in zip(grads, trainable_variables, strict=True)
            if g is not None
        ]
        # Keras divides each replica's loss by the number of replicas, so
        # the sum over replicas is the gradient of the global batch's mean.
        pairs = self._all_reduce_sum_gradients(
            [(g, _tf_variable(v)) for g, v in pairs]
        )
        self.inner.apply_gradients(pairs)

    def load_own_variables(self, store):
        if len(store.keys()) == 1 and len(self.variables) > 1:
            # Saved before its first update: the step (0) was all it had.
            self._iterations.assign(store["0"])
            return
        super().load_own_variables(store)

    @property
    def global_step(self):
        """The step counter (`iterations`), a tf.Variable (int64)."""
        return self._iterations.value

    def checkpoint_variables(self):
        """{original checkpoint name: variable}: slots and global_step."""
        if not self.built:
            raise ValueError(
                "The optimizer has no slots before its first update (or "
                "`build`)."
            )
        return self.inner.checkpoint_variables()

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


def create_keras_optimizer(
    init_lr,
    num_train_steps=None,
    num_warmup_steps=None,
    warmup_proportion=0.0,
    optimizer_type="adamw",
):
    """`create_optimizer`'s optimizer as a Keras optimizer (for `compile`):
    weight decay 0.01 except LayerNorm and biases, gradients clipped to
    global norm 1.0, warmup then linear decay (see AdamWeightDecayOptimizer
    for num_train_steps None)."""
    return AdamWeightDecayOptimizer(
        learning_rate=init_lr,
        weight_decay_rate=0.01,
        exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
        clip_norm=1.0,
        num_train_steps=num_train_steps,
        num_warmup_steps=num_warmup_steps,
        warmup_proportion=warmup_proportion,
        optimizer_type=optimizer_type,
    )
