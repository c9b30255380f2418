"""xoshiro256** for the Numba kernels, plus its pure-Python twin.

Kernels carry their stream as a ``uint64[4]`` state array seeded from a child
:class:`numpy.random.SeedSequence` (:func:`normlab._rng.kernel_seeds`), so every replicate is
reproducible on its own, whatever the thread count. Derived draws:

- ``uniform``: ``(x >> 11) * 2**-53`` in [0, 1);
- ``randbelow(n)``: ``((x >> 32) * n) >> 32`` for ``0 < n < 2**32`` (Lemire's multiply-shift on
  the top 32 bits; the bias ``n / 2**32`` is far below any statistical resolution used here).

Reference: D. Blackman, S. Vigna, "Scrambled linear pseudorandom number generators",
ACM TOMS 47, 36 (2021).
"""

from __future__ import annotations

import numpy as np
from normlab._jit import njit

_M64 = (1 << 64) - 1
_INV53 = 1.0 / 9007199254740992.0


@njit(inline="always")
def _rotl(x, k):
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@njit(inline="always")
def _next(s):
    """Advance the state ``s`` (uint64[4], in place) and return the next 64-bit output."""
    result = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
    t = s[1] << np.uint64(17)
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return result


@njit(inline="always")
def _next4(s0, s1, s2, s3):
    """:func:`_next` on a state held in four scalars (registers): ``(output, s0, s1, s2, s3)``."""
    result = _rotl(s1 * np.uint64(5), 7) * np.uint64(9)
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, 45)
    return result, s0, s1, s2, s3


@njit(inline="always")
def _uniform(s):
    return np.float64(_next(s) >> np.uint64(11)) * _INV53


@njit(inline="always")
def _randbelow(s, n):
    return np.int64(((_next(s) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


class PyXoshiro:
    """Pure-Python twin of the kernel stream (same outputs for the same seed words)."""

    __slots__ = ("s",)

    def __init__(self, seed_words):
        self.s = [int(w) & _M64 for w in seed_words]

    def next(self) -> int:
        s = self.s
        x = (s[1] * 5) & _M64
        result = ((((x << 7) | (x >> 57)) & _M64) * 9) & _M64
        t = (s[1] << 17) & _M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = ((s[3] << 45) | (s[3] >> 19)) & _M64
        return result

    def uniform(self) -> float:
        return float(self.next() >> 11) * _INV53

    def randbelow(self, n: int) -> int:
        return ((self.next() >> 32) * n) >> 32
