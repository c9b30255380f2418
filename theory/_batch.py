"""Batching machinery shared by the game kernels (minimal naming game, strategy-table game).

A game's public function validates its inputs, derives one seed per run and calls
:func:`run_batches` with its batch kernel (chosen by :func:`choose_kernel`); every batch kernel
writes per-round buffers and one row of per-run scalars laid out as below; :func:`game_result`
turns those into a :class:`~normlab.theory.results.GameResult`. Nothing here knows the rules
of a game.
"""

from __future__ import annotations

import numpy as np

from normlab._jit import njit

from ._common import batch_size
from .results import GameResult, stop_reason_labels

# Layout of the per-run scalar output row written by the kernels.
S_NINT, S_CONS, S_WIN, S_TMAX, S_NWMAX, S_NDMAX, S_S95, S_STREAK, S_FLIP, S_STOP = range(10)
N_SCALARS = 10
#: The strategy-game kernels' extra slot: first interaction with an invalid probability vector.
S_ERR = N_SCALARS
SG_SCALARS = N_SCALARS + 1


#: Below this many interactions (runs x cap) a batch runs on one thread: opening a parallel
#: region costs milliseconds on a busy machine. Results are identical either way.
PARALLEL_MIN_WORK = 2_000_000


def choose_kernel(parallel, serial, n_runs: int, max_interactions: int):
    """The parallel batch kernel for big batches, the serial one otherwise."""
    import numba

    if n_runs >= 2 and numba.get_num_threads() > 1 and n_runs * max_interactions >= PARALLEL_MIN_WORK:
        return parallel
    return serial


@njit(cache=True)
def _pack_rows(src, nbytes, dst, start):
    """Append the first ``nbytes[b]`` bytes of each row ``b`` of ``src`` to ``dst`` from ``start``."""
    pos = start
    for b in range(src.shape[0]):
        n = nbytes[b]
        dst[pos:pos + n] = src[b, :n]
        pos += n
    return pos


def _as_bytes(arr, rows):
    """``arr[:rows]`` (C-contiguous) viewed as one row of bytes per first-axis entry."""
    return arr[:rows].reshape(rows, -1).view(np.uint8)


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        pass


def _progress_bar(progress, n_runs, desc):
    """A tqdm bar over runs, or a stand-in that costs nothing (tqdm is imported only when shown)."""
    if not progress:
        return _NoBar()
    from normlab._display import tqdm

    return tqdm(total=n_runs, desc=desc, unit="run", leave=False)


def _run_ragged(ragged, seeds, n_agents, n_cols, max_int, args, extra, progress, desc, n_scalars):
    """:func:`run_batches` with a serial kernel that appends the rounds of run after run straight
    into the ragged outputs (``ragged(seeds, *args, rounds, extra, scal, pos) -> (runs done,
    next row)``; it stops before a run that might not fit): no per-chunk buffers, no copies."""
    n_runs = len(seeds)
    max_rounds = -(-max_int // n_agents)
    ncol = max(n_cols, 0)
    cap = min(n_runs * max_rounds, max(max_rounds, 1 << 14))
    out = dict(count=np.empty(cap, np.int32), succ=np.empty(cap, np.int32), nw=np.empty(cap, np.int64),
               nd=np.empty(cap, np.int32), prod=np.empty((cap, ncol), np.int32), produ=np.empty((cap, ncol), np.int32))
    scal_all = np.empty((n_runs, n_scalars), np.int64)
    step = int(min(4096, max(1, 50_000_000 // max(max_int, 1))))  # runs per call: a progress update every ~1 s
    start = pos = 0
    with _progress_bar(progress, n_runs, desc) as bar:
        while start < n_runs:
            stop = min(n_runs, start + step)
            done, pos = ragged(seeds[start:stop], *_chunk(args, start, stop), tuple(out.values()), extra,
                               scal_all[start:stop], pos)
            start += done
            bar.update(done)
            if start < stop:  # out of rows: extrapolate (+15%), grow by a quarter at least
                need = pos * n_runs * 23 // (20 * max(start, 1)) + max_rounds
                cap = max(need, cap + cap // 4, pos + max_rounds)
                for k, v in out.items():
                    if 4 * pos < cap:  # little to copy: a fresh block (resize would zero-fill all of it)
                        out[k] = np.empty((cap,) + v.shape[1:], v.dtype)
                        out[k][:pos] = v[:pos]
                    else:  # in place (no second copy of what is already there)
                        v.resize((cap,) + v.shape[1:], refcheck=False)
    for v in out.values():
        v.resize((pos,) + v.shape[1:], refcheck=False)  # in place: no second copy of the outputs
    lengths = -(-scal_all[:, S_NINT] // n_agents)
    out["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    out["scal"] = scal_all
    return out


class RunRows:
    """An argument of a batch kernel with one row per run (a per-run strategy table): each chunk of
    runs gets its rows, where every other argument is passed whole."""

    __slots__ = ("rows",)

    def __init__(self, rows):
        self.rows = rows


def _chunk(args, start: int, stop: int) -> tuple:
    """``args`` for runs ``start:stop``: :class:`RunRows` sliced, the rest as they are."""
    return tuple(a.rows[start:stop] if isinstance(a, RunRows) else a for a in args)


def _contiguous(a):
    """``a`` (or every array of a tuple ``a``) C-contiguous and writeable."""
    if isinstance(a, RunRows):
        return RunRows(np.require(a.rows, requirements=["C", "W"]))
    if isinstance(a, np.ndarray):
        return np.require(a, requirements=["C", "W"])
    if isinstance(a, tuple):
        return tuple(_contiguous(x) for x in a)
    return a


def run_batches(kernel, seeds, n_agents, n_cols, max_int, args, progress, desc, *, record=None,
                 n_scalars=N_SCALARS, hits=None, ragged=None):
    """Call a batch kernel on chunks of runs and assemble ragged per-round outputs.

    The kernel is called as ``kernel(seeds, *args, rounds, extra, scal)``: ``args`` are the
    game's argument groups (typed tuples, e.g. ``(game, rule)``), ``rounds`` the tuple of per-round
    buffers ``(count, succ, nw, nd, prod, produ)`` (one row per run of the chunk), ``scal`` the
    per-run scalar rows. With ``record`` (an int, possibly 0; the strategy game) ``extra`` is the
    ``(pairs, names)`` buffers of ``record`` interactions per run, returned as ``out["pairs"]`` /
    ``out["names"]`` of shape ``(n_runs, T_used, 2)``; with ``hits`` (an int, possibly 0; the
    naming game) it is an int8 buffer of ``hits`` success indicators per run, returned summed
    over runs as ``out["hit_sum"]`` (int64, one entry per interaction index up to the longest
    run; a run adds to the indices it simulated).

    An argument wrapped in :class:`RunRows` holds one row per run and is sliced with the seeds.

    ``ragged``, given with the serial kernel, is its twin that writes the outputs in place (see
    :func:`_run_ragged`); it is used when neither decisions (``record`` > 0) nor per-interaction
    successes (``hits`` > 0) are kept. The outputs are identical either way.

    Buffers are allocated once and reused by every chunk (kernels zero each round row they
    start), so memory is touched in proportion to the rounds actually simulated; each chunk's
    rounds are appended to the ragged outputs (sized from the first chunk, grown in place if
    needed, trimmed in place at the end).
    """
    if (record is None) == (hits is None):
        raise ValueError("run_batches needs exactly one of record= (strategy game) and hits= (naming game)")
    n_runs = len(seeds)
    # one compiled specialisation per kernel: every array argument C-contiguous and writeable
    # (a read-only or strided table would otherwise compile, and cache, a second version)
    args = tuple(_contiguous(a) for a in args)
    seeds = np.require(seeds, np.uint64, ["C", "W"])
    if any(isinstance(a, RunRows) and len(a.rows) != n_runs for a in args):
        raise ValueError(f"RunRows need one row per run ({n_runs})")
    if ragged is not None and not record and not hits:
        if record is None:  # naming game: an empty success row
            extra = np.zeros(0, np.int8)
        else:  # strategy game: empty decision rows
            extra = (np.zeros((0, 2), np.int32), np.zeros((0, 2), np.int32))
        return _run_ragged(ragged, seeds, n_agents, n_cols, max_int, args, extra, progress, desc, n_scalars)
    max_rounds = -(-max_int // n_agents)
    rec_len = 0 if record is None else int(record)
    hit_len = 0 if hits is None else int(hits)
    per_run = max_rounds * (8 * 4 + 8 * max(n_cols, 0)) + 8 * n_scalars + 16 * rec_len + hit_len
    bs = batch_size(n_runs, per_run, budget=8 * 2**20)
    ncol = max(n_cols, 0)
    bufs = dict(
        count=np.empty((bs, max_rounds), np.int32),
        succ=np.empty((bs, max_rounds), np.int32),
        nw=np.empty((bs, max_rounds), np.int64),
        nd=np.empty((bs, max_rounds), np.int32),
        prod=np.empty((bs, max_rounds, ncol), np.int32),
        produ=np.empty((bs, max_rounds, ncol), np.int32),
    )
    row_bytes = {k: v.itemsize * (ncol if v.ndim == 3 else 1) for k, v in bufs.items()}
    out = {k: None for k in bufs}
    filled = 0  # rounds appended so far
    scal_all = np.empty((n_runs, n_scalars), np.int64)
    if record is not None:
        pairs_all = np.zeros((n_runs, rec_len, 2), np.int32)
        names_all = np.zeros((n_runs, rec_len, 2), np.int32)
    if hits is not None:
        hit_buf = np.empty((bs, hit_len), np.int8)
        hit_sum = np.zeros(hit_len, np.int64)
        hit_cols = np.arange(hit_len)
    with _progress_bar(progress, n_runs, desc) as bar:
        for start in range(0, n_runs, bs):
            stop = min(n_runs, start + bs)
            B = stop - start
            scal = scal_all[start:stop]
            extra = hit_buf[:B] if record is None else (pairs_all[start:stop], names_all[start:stop])
            kernel(seeds[start:stop], *_chunk(args, start, stop), tuple(v[:B] for v in bufs.values()), extra, scal)
            n_used = -(-scal[:, S_NINT] // n_agents)
            need = filled + int(n_used.sum())
            cap = 0 if out["count"] is None else len(out["count"])
            if need > cap:  # first chunk: extrapolate to all runs (+15%); later: grow by a quarter
                new_cap = (need * n_runs * 23) // (20 * stop) + 64 if cap == 0 else max(need, cap + cap // 4)
                for k, v in bufs.items():
                    if out[k] is None:
                        out[k] = np.empty((new_cap,) + v.shape[2:], v.dtype)
                    else:
                        out[k].resize((new_cap,) + v.shape[2:], refcheck=False)
            for k, v in bufs.items():
                if row_bytes[k]:
                    dst = out[k].reshape(-1).view(np.uint8)
                    _pack_rows(_as_bytes(v, B), n_used * row_bytes[k], dst, filled * row_bytes[k])
                    del dst  # no view may outlive a resize
            filled = need
            if hit_len:
                tu = int(min(hit_len, scal[:, S_NINT].max())) if B else 0
                ran = hit_cols[None, :tu] < scal[:, S_NINT, None]
                hit_sum[:tu] += np.where(ran, hit_buf[:B, :tu], 0).sum(axis=0)
            bar.update(B)
    del bufs
    for k, v in out.items():
        v.resize((filled,) + v.shape[1:], refcheck=False)  # in place: no second copy of the outputs
    lengths = -(-scal_all[:, S_NINT] // n_agents)
    out["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    out["scal"] = scal_all
    if hit_len:
        out["hit_sum"] = hit_sum[:int(scal_all[:, S_NINT].max()) if n_runs else 0]
    if record is not None:
        T = int(scal_all[:, S_NINT].max()) if n_runs else 0
        out["pairs"] = pairs_all[:, :T]
        out["names"] = names_all[:, :T]
    return out


def scalar_times(scal, col):
    v = scal[:, col].astype(float)
    v[v < 0] = np.nan
    return v


def game_result(out, spec, *, model, names, seed, params, absorbing=None, interactions=None) -> GameResult:
    """Assemble a :class:`GameResult` from the output of :func:`run_batches` and the game's
    :class:`~normlab.theory.spec.GameSpec` as the engine resolved it (its cap in interactions,
    its challenger: ``committed_name`` an index, ``None`` for none); ``names`` are the pool's
    labels.

    ``absorbing`` defaults to "stopped at consensus" (rules under which consensus cannot be left).
    """
    scal = out["scal"]
    if absorbing is None:
        absorbing = scal[:, S_STOP] == 1
    return GameResult(
        model=model,
        n_agents=spec.n_agents,
        n_names=spec.n_names or 0,
        names=names,
        memory=spec.memory or 0,
        committed=spec.committed_mask(),
        committed_name=-1 if spec.committed_name is None else spec.committed_name,
        stop=spec.run.stop,
        max_interactions=spec.run.interactions(spec.n_agents),
        n_interactions=scal[:, S_NINT].copy(),
        consensus_time=scalar_times(scal, S_CONS),
        winner=scal[:, S_WIN].copy(),
        t_max=scal[:, S_TMAX].copy(),
        n_words_max=scal[:, S_NWMAX].copy(),
        n_distinct_max=scal[:, S_NDMAX].copy(),
        success95_time=scalar_times(scal, S_S95),
        streak_time=scalar_times(scal, S_STREAK),
        flip_time=scalar_times(scal, S_FLIP),
        stop_reason=stop_reason_labels(scal[:, S_STOP]),
        absorbing=absorbing,
        round_offsets=out["offsets"],
        round_count=out["count"],
        round_success=out["succ"],
        round_n_words=out["nw"],
        round_n_distinct=out["nd"],
        round_production=out["prod"],
        round_production_uncommitted=out["produ"],
        seed=seed,
        params=params,
        interactions=interactions,
        interaction_success=out.get("hit_sum"),
    )
