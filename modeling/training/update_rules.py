"""The original optimizer's arithmetic in `keras.ops`, for every backend.

One copy of each formula of google-research/bert `optimization.py`, used by
the one optimizer (`optimization.AdamWeightDecayOptimizer`) on every
backend; no TensorFlow is imported here.

* `learning_rate`: warmup, then linear decay to 0 at `num_train_steps`,
  evaluated in float32 as TF1's `polynomial_decay` did; `step` is the
  `global_step` BEFORE the update's increment.
* `adam_update`: Adam WITHOUT bias correction, epsilon added after the
  square root, decoupled weight decay scaled by the learning rate and
  computed on the pre-update weight; LAMB's trust ratio when asked.
* `global_norm` and `clip_scale`: TF's `tf.clip_by_global_norm`, with a
  gradient's rows counted one by one where the original's was an
  IndexedSlices (`CountedGradient`).
"""

import re
import typing

from keras import ops

from modeling.training import run_config

# The original's exclusion list (regexes searched in the checkpoint name).
EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_TYPES = run_config.OPTIMIZER_TYPES
# Variables whose gradient the original left as IndexedSlices (tf.gather):
# the global norm counts their rows one by one (modeling/row_gradients.py).
SPARSE_GRADIENT_NAMES = (r"word_embeddings$",)


class CountedGradient(typing.NamedTuple):
    """A dense gradient and the sum of squares the clip norm counts for it
    (the JAX step's word-embedding gradient, whose rows the original's
    IndexedSlices counted one by one: modeling/row_gradients.py)."""

    dense: typing.Any
    squares: typing.Any


def learning_rate(step, init_lr, num_train_steps, num_warmup_steps):
    """The rate (float32 scalar) of the update made at integer `step`.

    `init_lr * step / num_warmup_steps` while step < num_warmup_steps, else
    `init_lr * (1 - min(step, num_train_steps) / num_train_steps)`.
    """
    decay_steps = ops.convert_to_tensor(float(num_train_steps), "float32")
    p = ops.minimum(ops.cast(step, "float32"), decay_steps) / decay_steps
    init = ops.convert_to_tensor(float(init_lr), "float32")
    lr = init * (1.0 - p)
    if num_warmup_steps:
        step_int = ops.cast(step, "int32")
        warmup_int = ops.convert_to_tensor(int(num_warmup_steps), "int32")
        done = ops.cast(step_int, "float32") / ops.cast(warmup_int, "float32")
        warmup_lr = init * done
        is_warmup = ops.cast(step_int < warmup_int, "float32")
        lr = (1.0 - is_warmup) * lr + is_warmup * warmup_lr
    return lr


def has_sparse_gradient(name):
    """Whether the original's gradient of variable `name` was an
    IndexedSlices (when it is only gathered)."""
    return any(re.search(r, name) for r in SPARSE_GRADIENT_NAMES)


def uses_weight_decay(
    name, weight_decay_rate, exclude=EXCLUDE_FROM_WEIGHT_DECAY
):
    """Whether the variable of checkpoint name `name` decays."""
    if not weight_decay_rate:
        return False
    return not any(re.search(r, name) for r in exclude or ())


def adam_update(var, grad, m, v, lr, use_decay, hyper, lamb=False):
    """One AdamWeightDecay (or LAMB) update of one variable.

    Args:
      var, grad, m, v: float32 arrays of one shape (the weight, its
        gradient, its adam_m and adam_v slots).
      lr: float32 scalar, `learning_rate` at this step.
      use_decay: Python bool, `uses_weight_decay` of the variable.
      hyper: the constants, as attributes `weight_decay_rate`, `beta_1`,
        `beta_2`, `epsilon` (the optimizer).
      lamb: Python bool, scale the update by LAMB's trust ratio
        ||w|| / ||update|| (1 where either is 0, and for the variables
        without weight decay).

    Returns:
      (next_var, next_m, next_v).
    """
    beta_1, beta_2 = hyper.beta_1, hyper.beta_2
    # Python floats first, as the original: 1.0 - 0.9 rounds to 0.1 in f32.
    next_m = ops.multiply(beta_1, m) + ops.multiply(1.0 - beta_1, grad)
    next_v = ops.multiply(beta_2, v) + ops.multiply(
        1.0 - beta_2, ops.square(grad)
    )
    update = next_m / (ops.sqrt(next_v) + hyper.epsilon)
    if use_decay:
        update += hyper.weight_decay_rate * var
    if lamb and use_decay:
        w_norm = ops.sqrt(ops.sum(ops.square(var)))
        u_norm = ops.sqrt(ops.sum(ops.square(update)))
        ratio = ops.where(
            ops.logical_and(w_norm > 0.0, u_norm > 0.0),
            w_norm / u_norm,
            ops.ones_like(w_norm),
        )
        update = ratio * update
    return var - lr * update, next_m, next_v


def global_norm(grads, squares=None):
    """sqrt of the sum of every gradient's squares (float32 scalar).

    Args:
      squares: optional {index in grads: its sum of squares as counted
        instead} (row_gradients: a gather's rows counted one by one).
    """
    squares = squares or {}
    terms = [
        squares[i] if i in squares else ops.sum(ops.square(g))
        for i, g in enumerate(grads)
    ]
    # One reduction over the stacked terms (TF's add_n): a chain of adds
    # is a graph that TensorFlow's optimizer may reassociate differently in
    # different functions, so two runs of one step would round apart.
    return ops.sqrt(ops.sum(ops.stack([ops.cast(t, "float32") for t in terms])))


def clip_scale(norm, clip_norm):
    """The factor that brings gradients of global norm `norm` to at most
    clip_norm: TF's formula, clip_norm * min(1 / norm, 1 / clip_norm); a
    non-finite norm gives NaN (every gradient NaN), as TF's does."""
    scale = clip_norm * ops.minimum(1.0 / norm, 1.0 / clip_norm)
    nan = ops.convert_to_tensor(float("nan"), "float32")
    return ops.where(ops.isfinite(norm), scale, nan)
