"""Tolerances for comparing two float32 computations of the same quantity.

Two computations of the same value that run different kernels (another batch
or sequence shape, XLA or not, a distribution strategy, TF against a numpy
reimplementation, or the original release on another machine) add their
float32 terms in different orders. TensorFlow's CPU kernels (oneDNN by
default, Eigen with TF_ENABLE_ONEDNN_OPTS=0) pick the blocking and the
summation order per shape and per instruction set (AVX2, AVX-512), so the
last bits differ from machine to machine. Such a difference scales with the
magnitude of the values that were summed, not with each element: an element
near zero in a layer whose values reach 5 carries the rounding of sums of
terms of size ~5. Hence an absolute tolerance relative to the largest
|value| compared:

    atol = rounding + rel * max(|desired|)

float32 has a relative precision of 6e-8; a few hundred to a few thousand
accumulated terms per value (matmuls of the hidden size, a few layers of an
encoder) give errors of a few 1e-7 to 1e-6 of the magnitude, so rel=1e-5
holds on every CPU with a margin and still fails on any real bug (a wrong
weight, mask or formula moves values by 1e-3 of the magnitude or more).
`rounding` is what the compared output was rounded to on purpose (e.g.
5e-7 for values written with 6 decimals).

Comparisons of the same computation (same shapes, same code path) are
bitwise reproducible on one machine and stay exact or tight; they do not use
this module.
"""

import numpy as np

# Relative to the compared values' magnitude (see above).
FLOAT32_REL = 1e-5


def magnitude(values):
    """max |values| (0 for an empty array)."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.max(np.abs(values))) if values.size else 0.0


def float32_atol(desired, rounding=0.0, rel=FLOAT32_REL, scale=None):
    """rounding + rel * scale (default max |desired|): see the docstring."""
    if scale is None:
        scale = magnitude(desired)
    return rounding + rel * scale


def assert_float32_close(
    actual, desired, rounding=0.0, rel=FLOAT32_REL, scale=None, err_msg=""
):
    """Asserts |actual - desired| <= rounding + rel * scale.

    Args:
      actual, desired: array-likes of the same shape.
      rounding: the deliberate rounding of `actual` (0.5 * 10**-decimals).
      rel: the float32 accumulation error relative to the magnitude;
        FLOAT32_REL unless a test justifies more (e.g. a whole training run).
      scale: the magnitude of the values that were summed; default
        max |desired|. Give it when the compared values are much smaller
        than their inputs (a tanh or softmax of hidden states, updates of
        near-zero weights).
      err_msg: passed to numpy's assertion.
    """
    atol = float32_atol(desired, rounding, rel, scale)
    np.testing.assert_allclose(
        np.asarray(actual),
        np.asarray(desired),
        rtol=0,
        atol=atol,
        err_msg=f"{err_msg} (atol {atol:.3g} = {rounding:.3g} rounding + "
        f"{rel:.3g} x max |desired|)",
    )


# The original optimizer's Adam constants (AdamWeightDecayOptimizer).
ADAM_BETA_2 = 0.999
ADAM_EPSILON = 1e-6


def adam_update_atol(adam_v, steps, learning_rate, rel=FLOAT32_REL):
    """Per element: how far `steps` Adam updates can move a weight when its
    gradients carry float32 rounding of rel * (the largest gradient).

    Adam's update m / (sqrt(v) + epsilon) changes by about dg / (sqrt(v) +
    epsilon) when the gradient changes by dg: an element whose gradient is
    small beside the others' (sqrt(v) near epsilon) amplifies the rounding
    of sums of the large ones up to 1e6-fold; its update is then decided by
    rounding, not by the formula (at most 2 x learning_rate per step apart:
    the update's magnitude is at most about 1). The rounding is that of the
    weight's own largest gradient, the terms its gradients sum, read from
    its largest adam_v: v >= (1 - beta_2) g^2 after any step with gradient
    g.
    """
    adam_v = np.asarray(adam_v, dtype=np.float64)
    gradient = np.sqrt(magnitude(adam_v) / (1 - ADAM_BETA_2))
    per_step = rel * gradient / (np.sqrt(adam_v) + ADAM_EPSILON)
    return steps * learning_rate * np.minimum(per_step, 2.0)


def assert_checkpoints_close(actual, desired, rel, what, learning_rate):
    """Two trained checkpoints ({name: array}) with the same global_step.

    Each weight within rel of its magnitude, or of one update's size (the
    learning rate) where it is smaller: a gradient that is zero in exact
    arithmetic (the attention key's bias) leaves float32 noise of 1e-11
    that two computations do not share. A weight with Adam slots also
    within what its updates amplify of the gradients' rounding
    (adam_update_atol; seen: 1e-5 on an element whose sqrt(v) is 1e-3,
    the kernel's largest 4e-3). Each Adam slot within rel of the largest of
    its kind: the gradients' scale (Adam's update m / sqrt(v) does not
    change with the gradients' scale; its slots do, so a gradient summed
    where it is averaged shows there).

    learning_rate: the largest the run used (an upper bound per step).
    """
    assert sorted(actual) == sorted(desired)
    steps = int(desired["global_step"])
    assert int(actual["global_step"]) == steps
    slot_scale = {
        slot: max(magnitude(v) for k, v in desired.items() if k.endswith(slot))
        for slot in ("/adam_m", "/adam_v")
    }
    for name in desired:
        if name == "global_step":
            continue
        slot = name[name.rfind("/") :]
        if slot in slot_scale:
            tolerance = float32_atol(
                desired[name], rel=rel, scale=slot_scale[slot]
            )
        else:
            scale = max(magnitude(desired[name]), learning_rate)
            tolerance = float32_atol(desired[name], rel=rel, scale=scale)
            if name + "/adam_v" in desired:
                tolerance = tolerance + adam_update_atol(
                    desired[name + "/adam_v"],
                    steps,
                    learning_rate,
                    rel=rel,
                )
        actual_value = np.asarray(actual[name], dtype=np.float64)
        desired_value = np.asarray(desired[name], dtype=np.float64)
        excess = np.abs(actual_value - desired_value) - tolerance
        if excess.size and excess.max() > 0:
            index = np.unravel_index(int(np.argmax(excess)), excess.shape)
            raise AssertionError(
                f"{what}: {name}: {int(np.sum(excess > 0))} of {excess.size} "
                f"elements apart by more than float32 rounding; the worst at "
                f"{tuple(int(i) for i in index)}: {actual_value[index]!r} "
                f"against {desired_value[index]!r} (tolerance "
                f"{np.broadcast_to(tolerance, excess.shape)[index]:.3g}, "
                f"rel {rel:.3g})"
            )
