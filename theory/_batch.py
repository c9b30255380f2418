"""Batching machinery shared by the game kernels (minimal naming game, strategy-table game).

A game's public function validates its inputs, derives one seed per run and calls
:func:`run_batches` with its batch kernel (chosen by :func:`choose_kernel`); every batch kernel
writes per-round buffers and one row of per-run scalars laid out as below; :func:`game_result`
turns those into a :class:`~normlab.theory.results.GameResult`. Nothing here knows the rules
of a game.
"""

from __future__ import annotations

import numpy as np

from ._common import batch_size
from .results import GameResult, stop_reason_labels

# Layout of the per-run scalar output row written by the kernels.
S_NINT, S_CONS, S_WIN, S_TMAX, S_NWMAX, S_NDMAX, S_S95, S_STREAK, S_FLIP, S_STOP = range(10)
N_SCALARS = 10


#: Below this many interactions (runs x cap) a batch runs on one thread: opening a parallel
#: region costs milliseconds on a busy machine. Results are identical either way.
PARALLEL_MIN_WORK = 2_000_000


def choose_kernel(parallel, serial, n_runs: int, max_interactions: int):
    """The parallel batch kernel for big batches, the serial one otherwise."""
    import numba

    if n_runs >= 2 and numba.get_num_threads() > 1 and n_runs * max_interactions >= PARALLEL_MIN_WORK:
        return parallel
    return serial


def run_batches(kernel, seeds, n_agents, n_cols, max_int, args, progress, desc, *, record=None,
                 n_scalars=N_SCALARS, hits=None):
    """Call a batch kernel on chunks of runs and assemble ragged per-round outputs.

    ``args`` are the kernel's arguments between ``seeds`` and the per-round buffers. Buffers
    are allocated once and reused by every chunk (kernels zero each round row they start), so
    memory is touched in proportion to the rounds actually simulated. With ``record`` (an int,
    possibly 0) the kernel also takes ``(pairs, names)`` buffers of ``record`` interactions per
    run, returned as ``out["pairs"]`` / ``out["names"]`` of shape ``(n_runs, T_used, 2)``. With
    ``hits`` (an int, possibly 0) the kernel also takes an int8 buffer of ``hits`` success
    indicators per run, returned summed over runs as ``out["hit_sum"]`` (int64, one entry per
    interaction index up to the longest run; a run adds to the indices it simulated).
    """
    from tqdm.auto import tqdm

    n_runs = len(seeds)
    max_rounds = -(-max_int // n_agents)
    rec_len = 0 if record is None else int(record)
    hit_len = 0 if hits is None else int(hits)
    per_run = max_rounds * (8 * 4 + 8 * max(n_cols, 0)) + 8 * n_scalars + 16 * rec_len + hit_len
    bs = batch_size(n_runs, per_run, budget=32 * 2**20)
    bufs = dict(
        count=np.empty((bs, max_rounds), np.int32),
        succ=np.empty((bs, max_rounds), np.int32),
        nw=np.empty((bs, max_rounds), np.int64),
        nd=np.empty((bs, max_rounds), np.int32),
        prod=np.empty((bs, max_rounds, n_cols), np.int32),
        produ=np.empty((bs, max_rounds, n_cols), np.int32),
    )
    parts = {k: [] for k in bufs}
    scal_all = np.empty((n_runs, n_scalars), np.int64)
    if record is not None:
        pairs_all = np.zeros((n_runs, rec_len, 2), np.int32)
        names_all = np.zeros((n_runs, rec_len, 2), np.int32)
    if hits is not None:
        hit_buf = np.empty((bs, hit_len), np.int8)
        hit_sum = np.zeros(hit_len, np.int64)
        hit_cols = np.arange(hit_len)
    cols = np.arange(max_rounds)
    with tqdm(total=n_runs, desc=desc, unit="run", disable=not progress, leave=False) as bar:
        for start in range(0, n_runs, bs):
            stop = min(n_runs, start + bs)
            B = stop - start
            view = {k: v[:B] for k, v in bufs.items()}
            scal = scal_all[start:stop]
            tail = (scal,) if record is None else (pairs_all[start:stop], names_all[start:stop], scal)
            if hits is not None:
                tail = (hit_buf[:B],) + tail
            kernel(seeds[start:stop], *args, view["count"], view["succ"], view["nw"], view["nd"],
                   view["prod"], view["produ"], *tail)
            n_used = -(-scal[:, S_NINT] // n_agents)
            mu = int(n_used.max()) if B else 0  # only scan the rounds some run reached
            used = cols[None, :mu] < n_used[:, None]
            for k, arr in view.items():
                parts[k].append(arr[:, :mu][used])  # boolean indexing copies, row-major = ragged order
            if hit_len:
                tu = int(min(hit_len, scal[:, S_NINT].max())) if B else 0
                ran = hit_cols[None, :tu] < scal[:, S_NINT, None]
                hit_sum[:tu] += np.where(ran, hit_buf[:B, :tu], 0).sum(axis=0)
            bar.update(B)
    lengths = -(-scal_all[:, S_NINT] // n_agents)
    out = {k: np.concatenate(v) for k, v in parts.items()}  # kernel dtypes (int32 counts, int64 N_w)
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


def game_result(out, *, model, n_agents, n_names, names, memory, committed, committed_name, stop,
                max_interactions, seed, params, absorbing=None, interactions=None) -> GameResult:
    """Assemble a :class:`GameResult` from the output of :func:`run_batches`.

    ``absorbing`` defaults to "stopped at consensus" (rules under which consensus cannot be left).
    """
    scal = out["scal"]
    if absorbing is None:
        absorbing = scal[:, S_STOP] == 1
    return GameResult(
        model=model,
        n_agents=n_agents,
        n_names=n_names,
        names=names,
        memory=memory,
        committed=committed,
        committed_name=committed_name,
        stop=stop,
        max_interactions=max_interactions,
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
