"""The random draws of CPython's `random.Random`, inlined for speed.

The original makes its draws with `rng.shuffle` and `rng.randint`; both
reduce to `Random._randbelow(n)`: `getrandbits(n.bit_length())`, redrawn
while the result is >= n (each `getrandbits(k)` with k <= 32 consumes one
32-bit output). Calling `getrandbits` directly consumes the same stream
(tests compare generator states) and makes a shuffle about 3x faster.
"""

import random

# Shuffles of up to this many items (candidate lists) memoize their steps.
_MAX_MEMO_SHUFFLE = 4096


def randbelow(n, getrandbits):
    """CPython's `Random._randbelow(n)`: `randint(a, a+n-1)` is `a+this`."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def _shuffle_steps(n, cache={}):  # noqa: B006 (a deliberate memo)
    """((i, bit_length(i + 1)) for i = n-1 .. 1): the draws of a shuffle."""
    steps = cache.get(n)
    if steps is None:
        steps = tuple((i, (i + 1).bit_length()) for i in range(n - 1, 0, -1))
        if n <= _MAX_MEMO_SHUFFLE:
            cache[n] = steps
    return steps


def shuffle(x, getrandbits):
    """CPython's `Random.shuffle(x)` with `_randbelow` inlined (3x faster).

    Step i swaps x[i] with x[r], r = `_randbelow(i + 1)`: the top
    `bit_length(i + 1)` bits of one 32-bit output, redrawn while r > i.
    """
    for i, k in _shuffle_steps(len(x)):
        r = getrandbits(k)
        while r > i:
            r = getrandbits(k)
        x[i], x[r] = x[r], x[i]


def make_rng(seed):
    """The original's generator: `random.Random(seed)`."""
    return random.Random(seed)
