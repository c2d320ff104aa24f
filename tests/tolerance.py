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


def float32_atol(desired, rounding=0.0, rel=FLOAT32_REL):
    """rounding + rel * max(|desired|): see the module docstring."""
    desired = np.asarray(desired, dtype=np.float64)
    scale = float(np.max(np.abs(desired))) if desired.size else 0.0
    return rounding + rel * scale


def assert_float32_close(
    actual, desired, rounding=0.0, rel=FLOAT32_REL, err_msg=""
):
    """Asserts |actual - desired| <= rounding + rel * max(|desired|).

    Args:
      actual, desired: array-likes of the same shape.
      rounding: the deliberate rounding of `actual` (0.5 * 10**-decimals).
      rel: the float32 accumulation error relative to the magnitude;
        FLOAT32_REL unless a test justifies more (e.g. a whole training run).
      err_msg: passed to numpy's assertion.
    """
    atol = float32_atol(desired, rounding, rel)
    np.testing.assert_allclose(
        np.asarray(actual),
        np.asarray(desired),
        rtol=0,
        atol=atol,
        err_msg=f"{err_msg} (atol {atol:.3g} = {rounding:.3g} rounding + "
        f"{rel:.3g} x max |desired|)",
    )
