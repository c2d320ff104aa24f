"""The word-embedding gradient's norm as the original's optimizer counted it,
on Keras's JAX backend.

TensorFlow's gradient of a gather (the word-embedding lookup) is an
IndexedSlices: one row per looked-up token, a token that occurs k times
giving k rows. `tf.clip_by_global_norm` sums the squares of those rows, so
a repeated token counts as k separate rows, not as their sum. (Where the
table is also used densely, e.g. the pre-training decoder tied to it, the
two gradients add up to a dense tensor and the norm is the dense one's.)
JAX's gradient of a gather is dense. To clip as the original did, the JAX
step passes a scalar `probe` into the forward pass; `take` looks the rows
up as a gather does, and its backward pass returns, as the probe's
gradient, the sum of squares of the rows (what TensorFlow's norm counts).
training/jax_steps.py uses it in the global norm instead of the dense
gradient's squares when the table was only gathered.

Nothing changes outside a `counting` block: `take` is `ops.take`.
"""

import contextlib
import threading

from keras import ops

_STATE = threading.local()


class Record:
    """What the forward pass traced inside `counting` did with the table.

    Attributes:
      probe: the scalar whose gradient is the rows' sum of squares.
      gathers: how many lookups counted their rows.
      dense: the table was also used as a whole (its gradient is dense, as
        TensorFlow's then is).
    """

    def __init__(self, probe):
        self.probe = probe
        self.gathers = 0
        self.dense = False

    @property
    def sparse(self):
        """Whether TensorFlow's gradient would be an IndexedSlices."""
        return self.gathers > 0 and not self.dense


@contextlib.contextmanager
def counting(probe):
    """Makes `take` count its gradient rows into `probe`'s gradient while
    the forward pass is traced in this block; yields the Record."""
    record = Record(probe)
    previous = getattr(_STATE, "record", None)
    _STATE.record = record
    try:
        yield record
    finally:
        _STATE.record = previous


def take(table, ids):
    """table[ids] (rows of a [V, H] table); inside `counting` on JAX, the
    rows' squared gradient is counted (see the module doc)."""
    record = getattr(_STATE, "record", None)
    if record is None:
        return ops.take(table, ids, axis=0)
    record.gathers += 1
    return _counted_take()(table, ids, record.probe)


def used_densely():
    """Marks the table as used as a whole (the tied decoder's matmul)."""
    record = getattr(_STATE, "record", None)
    if record is not None:
        record.dense = True


_COUNTED = []


def _counted_take():
    """The lookup with the counting backward pass (a jax.custom_vjp, made
    once: JAX is imported only where it runs)."""
    if _COUNTED:
        return _COUNTED[0]
    import jax
    import jax.numpy as jnp

    @jax.custom_vjp
    def counted(table, ids, probe):
        del probe
        return jnp.take(table, ids, axis=0)

    def forward(table, ids, probe):
        del probe
        return jnp.take(table, ids, axis=0), (table, ids)

    def backward(residuals, grad):
        table, ids = residuals
        # The dense gradient, as JAX's own for a gather: a scatter-add.
        rows = jnp.zeros_like(table).at[ids].add(grad.astype(table.dtype))
        squares = jnp.sum(jnp.square(grad.astype(jnp.float32)))
        return rows, None, squares

    counted.defvjp(forward, backward)
    _COUNTED.append(counted)
    return counted
