"""The one place where user-facing ``rng`` arguments are normalised.

Every public function takes a keyword-only ``rng=None`` that may be ``None`` (fresh OS entropy),
an ``int``, a :class:`numpy.random.SeedSequence` or a :class:`numpy.random.Generator`.
Replicates never share a stream: each gets a child of one :class:`~numpy.random.SeedSequence`
(:func:`spawn`), so results do not depend on thread count, batch size or executor.
"""

from __future__ import annotations

import numbers

import numpy as np

RngLike = "None | int | np.random.SeedSequence | np.random.Generator"


def as_seed_sequence(rng=None) -> np.random.SeedSequence:
    """Return the :class:`~numpy.random.SeedSequence` behind ``rng``.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
        ``None`` draws fresh entropy; an ``int`` (>= 0) seeds deterministically; a
        ``SeedSequence`` is used as is; a ``Generator`` contributes its own seed sequence (or,
        if it has none, a seed drawn from it).

    Returns
    -------
    numpy.random.SeedSequence
    """
    if rng is None:
        return np.random.SeedSequence()
    if isinstance(rng, np.random.SeedSequence):
        return rng
    if isinstance(rng, np.random.Generator):
        ss = getattr(rng.bit_generator, "seed_seq", None)
        if isinstance(ss, np.random.SeedSequence):
            return ss
        return np.random.SeedSequence(int(rng.integers(0, 2**63 - 1)))
    if isinstance(rng, (bool, np.bool_)):
        raise TypeError("rng must be None, a non-negative int, a SeedSequence or a Generator; got a bool")
    if isinstance(rng, numbers.Integral):
        if int(rng) < 0:
            raise ValueError(f"rng seed must be a non-negative int; got {rng}")
        return np.random.SeedSequence(int(rng))
    raise TypeError(
        "rng must be None, a non-negative int, a numpy SeedSequence or a numpy Generator; "
        f"got {type(rng).__name__}"
    )


def resolve_seed(seed) -> tuple[int, bool]:
    """``(seed, drawn)``: ``seed`` as given (a non-negative int), or -- for None -- a fresh one drawn
    from the OS (32 bits) and ``drawn=True``. Every command that draws random numbers resolves its
    ``--seed`` here first, prints a drawn seed and records it, so any run can be repeated exactly."""
    if seed is None:
        import secrets

        return int(secrets.randbits(32)), True
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise ValueError(f"--seed must be a non-negative int; got {seed!r}")
    return int(seed), False


def seed_record(rng) -> dict:
    """The seed a call used, as plain JSON: ``{"entropy", "spawn_key", "n_children_spawned"}`` of
    the :class:`~numpy.random.SeedSequence` behind ``rng`` (with ``rng=None``, the entropy drawn).
    :func:`from_record` rebuilds the sequence, which repeats the call. Take the record *before* the call spawns children: it returns the sequence to pass on."""
    ss = as_seed_sequence(rng)
    return {"entropy": int(ss.entropy) if np.isscalar(ss.entropy) else [int(x) for x in np.atleast_1d(ss.entropy)],
            "spawn_key": [int(x) for x in ss.spawn_key], "n_children_spawned": int(ss.n_children_spawned)}


def seeded(rng) -> tuple[np.random.SeedSequence, dict]:
    """``(seed sequence, record)``: the sequence a call spawns its children from and
    :func:`seed_record` of it, taken before any child is spawned (so the record repeats the call,
    even with ``rng=None``)."""
    ss = as_seed_sequence(rng)
    return ss, seed_record(ss)


def from_record(record: dict) -> np.random.SeedSequence:
    """The :class:`~numpy.random.SeedSequence` a :func:`seed_record` describes (pass it as ``rng=``)."""
    return np.random.SeedSequence(record["entropy"], spawn_key=tuple(record.get("spawn_key", ())),
                                  n_children_spawned=int(record.get("n_children_spawned", 0)))


def seed_list(ss: np.random.SeedSequence) -> tuple:
    """``(entropy, *spawn_key)`` of a seed sequence: how a run directory stores its seed (plain
    ints, so ``np.random.SeedSequence(entropy, spawn_key=...)`` rebuilds it)."""
    return (int(ss.entropy),) + tuple(int(x) for x in ss.spawn_key)


def as_generator(rng=None) -> np.random.Generator:
    """Return a :class:`numpy.random.Generator` for ``rng`` (a Generator is returned unchanged).

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator

    Returns
    -------
    numpy.random.Generator
    """
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(as_seed_sequence(rng))


def spawn(rng, n: int) -> list[np.random.SeedSequence]:
    """Return ``n`` independent child seed sequences of ``rng`` (one per replicate or task).

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
    n : int

    Returns
    -------
    list of numpy.random.SeedSequence
    """
    return as_seed_sequence(rng).spawn(int(n))


# Constants of numpy's SeedSequence (numpy/random/bit_generator.pyx), used to derive the seed
# words of many children at once, bit-identical to ``SeedSequence.spawn`` + ``generate_state``.
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R, _M32 = 0xCA01F9DD, 0x4973F715, 0xFFFFFFFF


def _hashmix(value, hc):
    value = value ^ np.uint32(hc[0])
    hc[0] = (hc[0] * _MULT_A) & _M32
    value = value * np.uint32(hc[0])
    return value ^ (value >> np.uint32(16))


def _mix(x, y):
    r = np.uint32(_MIX_L) * x - np.uint32(_MIX_R) * y
    return r ^ (r >> np.uint32(16))


def child_seed_words(ss: np.random.SeedSequence, n: int, start: int = 0) -> np.ndarray:
    """Seed words of children ``start .. start + n - 1`` of ``ss``, vectorised.

    Row ``k`` equals ``SeedSequence(ss.entropy, spawn_key=ss.spawn_key + (start + k,),
    pool_size=ss.pool_size).generate_state(4, numpy.uint64)`` -- what ``ss.spawn`` would give
    -- computed without creating ``n`` Python objects. ``ss`` is not modified.

    Parameters
    ----------
    ss : numpy.random.SeedSequence
    n : int
    start : int, optional

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 4)``, dtype ``uint64``; an all-zero row is replaced (xoshiro forbids it).
    """
    idx = np.arange(start, start + n, dtype=np.uint64)
    if n and int(idx.max()) >= 2**32:
        raise ValueError("child index must be < 2**32")
    return descendant_seed_words(ss, idx[:, None])


def descendant_seed_words(ss: np.random.SeedSequence, keys) -> np.ndarray:
    """Seed words of descendants of ``ss`` given by spawn-key suffixes, vectorised.

    Row ``k`` equals ``SeedSequence(ss.entropy, spawn_key=ss.spawn_key + tuple(keys[k]),
    pool_size=ss.pool_size).generate_state(4, numpy.uint64)``: with one column, child
    ``keys[k, 0]`` of ``ss``; with two, child ``keys[k, 1]`` of child ``keys[k, 0]`` (what nested
    ``spawn`` calls give), and so on.

    Parameters
    ----------
    ss : numpy.random.SeedSequence
    keys : array_like of int, shape (n, m)
        Spawn-key suffixes, each entry in ``[0, 2**32)``.

    Returns
    -------
    numpy.ndarray
        Shape ``(n, 4)``, dtype ``uint64``; an all-zero row is replaced (xoshiro forbids it).
    """
    from numpy.random.bit_generator import _coerce_to_uint32_array

    keys = np.asarray(keys)
    if keys.ndim != 2 or keys.shape[1] < 1:
        raise ValueError(f"keys must be a 2-D array with one spawn-key suffix per row; got shape {keys.shape}")
    n = keys.shape[0]
    if n and (int(keys.min()) < 0 or int(keys.max()) >= 2**32):
        raise ValueError("spawn-key entries must lie in [0, 2**32)")
    pool = ss.pool_size
    run_entropy = _coerce_to_uint32_array(ss.entropy)
    if len(run_entropy) < pool:  # children always have a spawn key, so pad as numpy does
        run_entropy = np.concatenate([run_entropy, np.zeros(pool - len(run_entropy), np.uint32)])
    base = np.concatenate([run_entropy, _coerce_to_uint32_array(tuple(ss.spawn_key))]).astype(np.uint32)
    # The pool is mixed from the parent's words (the same for every row: mixed once, as scalars), then
    # from each row's key columns; the hash constants advance in the same order either way.
    with np.errstate(over="ignore"):
        hc = [_INIT_A]
        mixer = [None] * pool
        for i in range(pool):
            mixer[i] = _hashmix(np.uint32(base[i]), hc)
        for i_src in range(pool):
            for i_dst in range(pool):
                if i_src != i_dst:
                    mixer[i_dst] = _mix(mixer[i_dst], _hashmix(mixer[i_src], hc))
        for i_src in range(pool, len(base)):
            for i_dst in range(pool):
                mixer[i_dst] = _mix(mixer[i_dst], _hashmix(np.uint32(base[i_src]), hc))
        for col in keys.T.astype(np.uint32):
            for i_dst in range(pool):
                mixer[i_dst] = _mix(mixer[i_dst], _hashmix(col, hc))
        words = np.empty((n, 8), np.uint32)
        hb = _INIT_B
        for i_dst in range(8):
            v = mixer[i_dst % pool] ^ np.uint32(hb)
            hb = (hb * _MULT_B) & _M32
            v = v * np.uint32(hb)
            words[:, i_dst] = v ^ (v >> np.uint32(16))
    out = words.astype("<u4").view("<u8").astype(np.uint64)
    zero = ~out.any(axis=1)
    out[zero, 0] = np.uint64(0x9E3779B97F4A7C15)
    return out


def run_seeds(rng, n: int) -> tuple[np.random.SeedSequence, np.ndarray]:
    """Parent seed sequence and kernel seed words for ``n`` replicates.

    Run ``k`` uses child ``k`` of the parent (see :func:`child_seed_words`), so a run can be
    reproduced alone and results do not depend on thread count or batching. A ``Generator``
    contributes a fresh child of its own seed sequence, so repeated calls differ.

    Parameters
    ----------
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator
    n : int

    Returns
    -------
    (numpy.random.SeedSequence, numpy.ndarray)
    """
    if isinstance(rng, np.random.Generator):
        ss = getattr(rng.bit_generator, "seed_seq", None)
        parent = ss.spawn(1)[0] if isinstance(ss, np.random.SeedSequence) else as_seed_sequence(rng)
    else:
        parent = as_seed_sequence(rng)
    return parent, child_seed_words(parent, int(n))


def kernel_seeds(children: list[np.random.SeedSequence]) -> np.ndarray:
    """Seed words for the Numba kernels' xoshiro256** streams, one row of 4 ``uint64`` per child.

    Parameters
    ----------
    children : list of numpy.random.SeedSequence

    Returns
    -------
    numpy.ndarray
        Shape ``(len(children), 4)``, dtype ``uint64``; never an all-zero row.
    """
    out = np.empty((len(children), 4), dtype=np.uint64)
    for i, child in enumerate(children):
        out[i] = child.generate_state(4, np.uint64)
    zero = ~out.any(axis=1)
    out[zero, 0] = np.uint64(0x9E3779B97F4A7C15)  # xoshiro must not start from the zero state
    return out
