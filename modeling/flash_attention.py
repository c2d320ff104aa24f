"""BERT's self-attention with its dropout in one kernel, on JAX (Pallas).

The explicit attention (layers.SelfAttention) writes the [B, N, T, T]
scores, probabilities and dropout mask to device memory and reads them back
in the backward pass; cuDNN's fused kernel, which JAX's public API reaches
(ops.dot_product_attention), has no dropout, so a training step cannot use
it. This is the attention of flash-attention: a program per (example, head,
block of queries) walks the keys block by block with a running softmax,
drops probabilities inside the kernel and keeps only the output and each
row's log-sum-exp; the backward pass computes them again.

    context = attention(q, k, v, input_mask, rate=0.1, key=dropout_key)

The dropout mask is a hash of (seed, example, head, query, key): the
backward kernels draw the same units as the forward one without storing
them. A unit is dropped with probability round(rate * 2^16) / 2^16 (16
bits of the hash, as layers.half_word_dropout) and the kept probabilities
are scaled by its inverse complement. `keep_mask` gives the whole mask, for
tests. The masks differ from the explicit path's (another generator), as
each backend's do.

The numbers are the explicit path's: scores = (q k^T) / sqrt(D) plus
MASK_ADDER (-10000) on padded keys, in float32, softmax, dropout, times V.
A row without a real key attends to every key (-10000 on all of them), as
there. On a GPU the kernels lower through Triton; elsewhere (tests on a
CPU) they run in Pallas's interpreter.

JAX only: this module imports no TensorFlow and no Keras.
"""

import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

# The original's additive mask for padded keys (layers.MASK_ADDER).
MASK_ADDER = -10000.0
_UNIT_BITS = 16
# Triton's launch settings and the rows per block (None: `block_size`), to
# be tuned on a GPU (bench/jax_profile.py's flash variants set them).
NUM_WARPS = 4
NUM_STAGES = 2
BLOCK = None


def _mix(x):
    """A bijective avalanche of uint32 (the "lowbias32" integer hash)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _stream(seed, example_head):
    """The hash stream of one (example, head): a uint32."""
    return _mix(seed ^ _mix(jnp.asarray(example_head, jnp.uint32) + 1))


def _keep(stream, rows, cols, length, threshold):
    """Whether (query row, key col) survives dropout: int32 positions."""
    bits = _mix(stream + (rows * length + cols).astype(jnp.uint32))
    return (bits >> _UNIT_BITS).astype(jnp.int32) >= threshold


def _threshold(rate):
    levels = 1 << _UNIT_BITS
    return min(round(rate * levels), levels - 1)


def _kept_scale(rate):
    levels = 1 << _UNIT_BITS
    return levels / (levels - _threshold(rate))


def seed_from_key(key):
    """A uint32[1] seed from a JAX PRNG key (uint32[2] or a typed key)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    key = jnp.asarray(key, jnp.uint32).reshape(-1)
    return (_mix(key[0]) ^ key[-1]).reshape(1)


def keep_mask(seed, batch, heads, length, rate):
    """The kernels' dropout mask, whole: bool [batch, heads, length, length]
    (True: kept)."""
    streams = _stream(
        seed[0], jnp.arange(batch * heads, dtype=jnp.uint32)
    ).reshape(batch, heads, 1, 1)
    rows = lax.broadcasted_iota(jnp.int32, (length, length), 0)
    cols = lax.broadcasted_iota(jnp.int32, (length, length), 1)
    return _keep(streams, rows, cols, length, _threshold(rate))


def _dot_nt(a, b):
    """a @ b^T, accumulated in float32."""
    return lax.dot_general(
        a, b, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32
    )


def _dot_tn(a, b):
    """a^T @ b, accumulated in float32."""
    return lax.dot_general(
        a, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32
    )


def _scores(q, k, bias, scale):
    return _dot_nt(q, k) * scale + bias[None, :]


def _program_stream(seed_ref):
    """This program's hash stream: its (example, head) of the grid."""
    example, head = pl.program_id(0), pl.program_id(1)
    return _stream(seed_ref[0], example * pl.num_programs(1) + head)


def _positions(start, shape, axis):
    return start + lax.broadcasted_iota(jnp.int32, shape, axis)


def _forward_kernel(
    seed_ref, q_ref, k_ref, v_ref, bias_ref, o_ref, lse_ref, *, rate, block_k
):
    block_q, depth = q_ref.shape
    length = k_ref.shape[0]
    scale = 1.0 / math.sqrt(depth)
    stream = _program_stream(seed_ref)
    shape = (block_q, block_k)
    rows = _positions(pl.program_id(2) * block_q, shape, 0)
    q = q_ref[...]

    def body(j, carry):
        m, total, acc = carry
        keys = pl.ds(j * block_k, block_k)
        s = _scores(q, k_ref[keys, :], bias_ref[keys], scale)
        m_new = jnp.maximum(m, jnp.max(s, axis=1))
        p = jnp.exp(s - m_new[:, None])
        alpha = jnp.exp(m - m_new)
        total = total * alpha + jnp.sum(p, axis=1)
        if rate > 0:
            cols = _positions(j * block_k, shape, 1)
            kept = _keep(stream, rows, cols, length, _threshold(rate))
            p = jnp.where(kept, p * _kept_scale(rate), 0.0)
        v = v_ref[keys, :]
        acc = acc * alpha[:, None] + jnp.dot(
            p.astype(v.dtype), v, preferred_element_type=jnp.float32
        )
        return m_new, total, acc

    m = jnp.full((block_q,), -jnp.inf, jnp.float32)
    total = jnp.zeros((block_q,), jnp.float32)
    acc = jnp.zeros((block_q, depth), jnp.float32)
    m, total, acc = lax.fori_loop(0, length // block_k, body, (m, total, acc))
    o_ref[...] = (acc / total[:, None]).astype(o_ref.dtype)
    lse_ref[...] = m + jnp.log(total)


def _block_grads(q, k, v, bias, do, lse, delta, drop):
    """(dropped P, dS) of one block of queries by keys, recomputed from
    the forward pass's log-sum-exp. `drop`: (stream, rows, cols, length,
    rate) of the block's mask. dS is the gradient of the scaled scores'
    pre-scale products (q k^T), so dQ = dS k and dK = dS^T q."""
    stream, rows, cols, length, rate = drop
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = jnp.exp(_scores(q, k, bias, scale) - lse[:, None])
    dp = _dot_nt(do, v)
    dropped_p = p
    if rate > 0:
        kept = _keep(stream, rows, cols, length, _threshold(rate))
        dropped_p = jnp.where(kept, p * _kept_scale(rate), 0.0)
        dp = jnp.where(kept, dp * _kept_scale(rate), 0.0)
    # D_i = sum_j P_ij dP_ij = do_i . o_i (the dropout included).
    return dropped_p, p * (dp - delta[:, None]) * scale


def _dkdv_kernel(*refs, rate, block_q):
    # The refs: _attention_bwd's inputs, then dK and dV.
    seed_ref, q_ref, k_ref, v_ref = refs[:4]
    bias_ref, do_ref, lse_ref, delta_ref, dk_ref, dv_ref = refs[4:]
    block_k, depth = k_ref.shape
    length = q_ref.shape[0]
    stream = _program_stream(seed_ref)
    shape = (block_q, block_k)
    start_k = pl.program_id(2) * block_k
    bias = bias_ref[pl.ds(start_k, block_k)]
    k, v = k_ref[...], v_ref[...]
    cols = _positions(start_k, shape, 1)

    def body(i, carry):
        dk, dv = carry
        queries = pl.ds(i * block_q, block_q)
        q, do = q_ref[queries, :], do_ref[queries, :]
        rows = _positions(i * block_q, shape, 0)
        dropped_p, ds = _block_grads(
            q,
            k,
            v,
            bias,
            do,
            lse_ref[queries],
            delta_ref[queries],
            (stream, rows, cols, length, rate),
        )
        dv = dv + _dot_tn(dropped_p.astype(do.dtype), do)
        dk = dk + _dot_tn(ds.astype(q.dtype), q)
        return dk, dv

    zeros = jnp.zeros((block_k, depth), jnp.float32)
    dk, dv = lax.fori_loop(0, length // block_q, body, (zeros, zeros))
    dk_ref[...] = dk.astype(dk_ref.dtype)
    dv_ref[...] = dv.astype(dv_ref.dtype)


def _dq_kernel(*refs, rate, block_k):
    # The refs: _attention_bwd's inputs, then dQ.
    seed_ref, q_ref, k_ref, v_ref = refs[:4]
    bias_ref, do_ref, lse_ref, delta_ref, dq_ref = refs[4:]
    block_q, depth = q_ref.shape
    length = k_ref.shape[0]
    stream = _program_stream(seed_ref)
    shape = (block_q, block_k)
    q, do = q_ref[...], do_ref[...]
    lse, delta = lse_ref[...], delta_ref[...]
    rows = _positions(pl.program_id(2) * block_q, shape, 0)

    def body(j, dq):
        keys = pl.ds(j * block_k, block_k)
        k = k_ref[keys, :]
        cols = _positions(j * block_k, shape, 1)
        _, ds = _block_grads(
            q,
            k,
            v_ref[keys, :],
            bias_ref[keys],
            do,
            lse,
            delta,
            (stream, rows, cols, length, rate),
        )
        return dq + jnp.dot(
            ds.astype(k.dtype), k, preferred_element_type=jnp.float32
        )

    dq = lax.fori_loop(
        0, length // block_k, body, jnp.zeros((block_q, depth), jnp.float32)
    )
    dq_ref[...] = dq.astype(dq_ref.dtype)


def _specs(batch, heads, length, depth, block):
    """BlockSpecs on the grid (example, head, block): a block of rows of
    [B, T, N, D], all rows of it, a block of / all of [B, N, T], and the
    [B, T] bias and the seed whole."""
    del batch, heads
    return {
        "rows": pl.BlockSpec(
            (None, block, None, depth), lambda b, h, i: (b, i, h, 0)
        ),
        "all_rows": pl.BlockSpec(
            (None, length, None, depth), lambda b, h, i: (b, 0, h, 0)
        ),
        "row_stats": pl.BlockSpec(
            (None, None, block), lambda b, h, i: (b, h, i)
        ),
        "all_row_stats": pl.BlockSpec(
            (None, None, length), lambda b, h, i: (b, h, 0)
        ),
        "bias": pl.BlockSpec((None, length), lambda b, h, i: (b, 0)),
        "seed": pl.BlockSpec((1,), lambda b, h, i: (0,)),
    }


def _call(kernel, grid, in_specs, out_specs, out_shape, interpret):
    from jax.experimental.pallas import triton as pl_triton

    # Older JAX names it TritonCompilerParams.
    params = getattr(pl_triton, "CompilerParams", None)
    params = params or pl_triton.TritonCompilerParams
    return pl.pallas_call(
        kernel,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        interpret=interpret,
        # Triton's lowering (Pallas's default on GPUs is Mosaic GPU).
        compiler_params=params(num_warps=NUM_WARPS, num_stages=NUM_STAGES),
    )


def _forward(q, k, v, bias, seed, rate, block, interpret):
    batch, length, heads, depth = q.shape
    s = _specs(batch, heads, length, depth, block)
    o, lse = _call(
        functools.partial(_forward_kernel, rate=rate, block_k=block),
        (batch, heads, length // block),
        [s["seed"], s["rows"], s["all_rows"], s["all_rows"], s["bias"]],
        [s["rows"], s["row_stats"]],
        [
            jax.ShapeDtypeStruct(q.shape, q.dtype),
            jax.ShapeDtypeStruct((batch, heads, length), jnp.float32),
        ],
        interpret,
    )(seed, q, k, v, bias)
    return o, lse


@functools.partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7))
def _attention(q, k, v, bias, seed, rate, block, interpret):
    return _forward(q, k, v, bias, seed, rate, block, interpret)[0]


def _attention_fwd(q, k, v, bias, seed, rate, block, interpret):
    o, lse = _forward(q, k, v, bias, seed, rate, block, interpret)
    return o, (q, k, v, bias, seed, o, lse)


def _attention_bwd(rate, block, interpret, residuals, do):
    q, k, v, bias, seed, o, lse = residuals
    batch, length, heads, depth = q.shape
    # Each row's sum of P * dP (_block_grads).
    delta = jnp.sum(
        o.astype(jnp.float32) * do.astype(jnp.float32), axis=-1
    ).transpose(0, 2, 1)
    s = _specs(batch, heads, length, depth, block)
    inputs = (seed, q, k, v, bias, do, lse, delta)
    grid = (batch, heads, length // block)
    dk, dv = _call(
        functools.partial(_dkdv_kernel, rate=rate, block_q=block),
        grid,
        [
            s["seed"],
            s["all_rows"],
            s["rows"],
            s["rows"],
            s["bias"],
            s["all_rows"],
            s["all_row_stats"],
            s["all_row_stats"],
        ],
        [s["rows"], s["rows"]],
        [
            jax.ShapeDtypeStruct(k.shape, k.dtype),
            jax.ShapeDtypeStruct(v.shape, v.dtype),
        ],
        interpret,
    )(*inputs)
    dq = _call(
        functools.partial(_dq_kernel, rate=rate, block_k=block),
        grid,
        [
            s["seed"],
            s["rows"],
            s["all_rows"],
            s["all_rows"],
            s["bias"],
            s["rows"],
            s["row_stats"],
            s["row_stats"],
        ],
        s["rows"],
        jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret,
    )(*inputs)
    return dq, dk, dv, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


def block_size(length):
    """The query and key block for `length` (64, 32 or 16, the largest
    dividing it), or None where the kernels do not apply."""
    for block in (64, 32, 16):
        if length % block == 0:
            return block
    return None


def attention(q, k, v, input_mask, rate, key=None, block=None, interpret=None):
    """Softmax attention with dropout, in one kernel per pass.

    Args:
      q, k, v: [B, T, N, D] (a block's [B*T, H] projections, reshaped: no
        transpose), float32 or bfloat16.
      input_mask: int [B, T], 1 = a real key.
      rate: the dropout rate of the probabilities (a Python float).
      key: the dropout's JAX PRNG key (needed when rate > 0).
      block: rows per block (default BLOCK, else `block_size(T)`).
      interpret: run in Pallas's interpreter (default: off a GPU).

    Returns:
      The context, [B, T, N, D] in q's dtype.
    """
    length = q.shape[1]
    block = block or BLOCK or block_size(length)
    if block is None or length % block:
        raise ValueError(
            f"flash attention needs a length divisible by 16: {length}"
        )
    if interpret is None:
        interpret = jax.devices()[0].platform != "gpu"
    bias = (1.0 - jnp.asarray(input_mask, jnp.float32)) * MASK_ADDER
    if rate > 0:
        seed = seed_from_key(key)
    else:
        seed = jnp.zeros((1,), jnp.uint32)
    return _attention(q, k, v, bias, seed, float(rate), block, interpret)


def reference(q, k, v, input_mask, rate, seed):
    """The same numbers by XLA ops, the [B, N, T, T] tensors whole: what
    the kernels are tested against."""
    batch, length, heads, depth = q.shape
    scores = jnp.einsum(
        "btnd,bsnd->bnts", q, k, preferred_element_type=jnp.float32
    )
    bias = (1.0 - jnp.asarray(input_mask, jnp.float32)) * MASK_ADDER
    scores = scores / math.sqrt(depth) + bias[:, None, None, :]
    probs = jax.nn.softmax(scores, axis=-1)
    if rate > 0:
        kept = keep_mask(seed, batch, heads, length, rate)
        probs = jnp.where(kept, probs * _kept_scale(rate), 0.0)
    return jnp.einsum(
        "bnts,bsnd->btnd",
        probs.astype(v.dtype),
        v,
        preferred_element_type=jnp.float32,
    ).astype(q.dtype)
