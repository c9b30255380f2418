"""The prediction design: every simulation of a prediction, all posterior draws, in one compiled call.

:func:`strategy_design` plays, for each draw of a strategy table, the convergence runs, the
committed-minority sweeps of every direction (with the published ensemble rule and the per-run
flips reduced in the kernel) and the relative-strength runs, and returns only the reductions
:func:`normlab.calibration.predict` reads. Each run is a *lean* kernel (:func:`_sg_lean_play`) that
draws the same numbers and makes the same choices as the full strategy-game kernel
(:func:`normlab.theory.memory_game._sg_run`), keeping only what the design reads, so each run is
bit-identical to the :func:`~normlab.theory.strategy_game` call with the same seed words (tested
run for run).

The kernels group their arguments in typed tuples: ``game = (n_agents, W, H, flip_thr,
order_cons, order_committed)`` (the name-order modes, :mod:`normlab.theory.name_order`), one
tuple per stage's plan (``consensus``, ``flips``, ``strength``) and one per stage's outputs.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Fig. 3,
Table S3.
"""

from __future__ import annotations

import math

import numpy as np

from normlab._jit import kernel_variant, njit

from ._batch import S_ERR, S_FLIP, S_NINT, S_STOP, S_STREAK, SG_SCALARS
from ._criteria_kernels import end_round, last3_sum, published_from_shares, window_flip_reached
from ._prng import _INV53, _next4
from .name_order import order_mode, order_tables
from .strategies import n_states
from .design_plan import DesignPlan, mixture_sources, sweep_shares
from ._thresholds import _choice_thresholds, _effect_thresholds, _table_logits

__all__ = ["strategy_design", "DesignPlan"]


# ----------------------------------------------------------------------------- one lean run
@njit(inline="always")
def _lean_start(N, W, H, offsets, committed, init_name, code, mlen, head, row, ring):
    """Initial memories: ``H`` successful plays of ``init_name[a]`` (-1: empty) per uncommitted agent."""
    B = W * W
    for a in range(N):
        code[a] = 0
        mlen[a] = 0
        head[a] = 0
        if not committed[a] and init_name[a] >= 0:
            e = init_name[a] * W + init_name[a]
            c = 0
            for h in range(H):
                ring[a * H + h] = e
                c = c * B + e
            code[a] = c
            mlen[a] = H
        row[a] = offsets[mlen[a]] + code[a]


@njit(inline="always")
def _lean_pick(u, thr, b, W):
    """The name a table row (thresholds from ``thr[b]``) gives the uniform ``u`` (``W``: invalid row)."""
    if W == 2:  # branch-free: the pick is a coin flip
        return np.int64(u >= thr[b]) + np.int64(u >= thr[b + 1])
    c = 0
    for q in range(W):
        if u >= thr[b + q]:
            c += 1
    return c


@njit(inline="always")
def _lean_remember(a, e, H, B, offsets, off_h, top_pow, top_mask, pow2, code, mlen, head, row, ring):
    """Append entry ``e`` to agent ``a``'s memory code (the oldest leaves by a mask when ``W**2`` is
    a power of two, else from the ring of entries) and update its table row (``off_h``: ``offsets[H]``,
    held in a register: a load of it after each store to the int64 work arrays is not hoisted)."""
    k = mlen[a]
    if k < H:
        ring[a * H + k] = e
        mlen[a] = k + 1
        c = code[a] * B + e
        code[a] = c
        row[a] = offsets[k + 1] + c
    elif pow2:
        c = (code[a] & top_mask) * B + e
        code[a] = c
        row[a] = off_h + c
    else:
        p = a * H + head[a]
        c = (code[a] - ring[p] * top_pow) * B + e
        code[a] = c
        row[a] = off_h + c
        ring[p] = e
        head[a] = head[a] + 1 if head[a] + 1 < H else 0


@njit(inline="always")
def _lean_round_rows(r, n, W, cword, pu1, nu, r_prod, r_produ):
    """Round ``r``'s production rows from its ``n`` interactions: with two names the uncommitted
    productions of name 1 (``pu1``) and of both (``nu``) were counted in registers, with more names
    ``r_produ[r]`` was counted in place; every committed production is ``cword``, so ``r_prod`` follows
    (``2 n`` productions in all)."""
    if W == 2:
        r_produ[r, 0] = nu - pu1
        r_produ[r, 1] = pu1
    for q in range(W):
        r_prod[r, q] = r_produ[r, q]
    if cword >= 0:
        r_prod[r, cword] += 2 * n - nu


def _sg_lean_play_py(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr, omode,
                     r_count, r_succ, r_prod, r_produ, scal, wk):
    """One strategy-table run as :func:`normlab.theory.memory_game._sg_run` plays it, keeping only
    what a prediction design reads: complete graph, a table given by :func:`_choice_thresholds`,
    initial memories of ``H`` successful plays of ``init_name[a]`` (-1: empty); writes
    ``r_count``, ``r_succ``, ``r_prod``, ``r_produ`` and the ``S_NINT``, ``S_STREAK``, ``S_FLIP``,
    ``S_STOP``, ``S_ERR`` scalars, each identical to ``_sg_run``'s for the same seed (same draws,
    same choices; tested run for run). Stop codes 0 (max), 3 (streak) and 4 (flip). ``wk``: int64
    work space of ``N * (4 + H)`` entries.

    Per agent only the state code is kept (a base ``W**2`` number of the last ``H`` entries);
    once the memory is full the oldest entry leaves by a mask when ``W**2`` is a power of two,
    else from a ring of entries. No name counts, distinct names or consensus bookkeeping.

    ``omode``: the name order (:mod:`normlab.theory.name_order`), as the full kernel draws it: 0
    none (``thr`` holds one table), 1 shared per interaction, 2 per agent (``thr`` holds ``W``
    per-order tables, block ``f`` for name ``f`` listed first).
    """
    s0 = seed[0]
    s1 = seed[1]
    s2 = seed[2]
    s3 = seed[3]
    B = W * W
    top_pow = offsets[H] - offsets[H - 1]  # B ** (H - 1)
    top_mask = top_pow - 1
    S_ord = offsets[H] + top_pow * B  # states per name-order block
    pow2 = (B & (B - 1)) == 0
    code = wk[:N]
    mlen = wk[N:2 * N]
    head = wk[2 * N:3 * N]
    row = wk[3 * N:4 * N]  # offsets[mlen] + code: the state's row of the table
    ring = wk[4 * N:4 * N + N * H]
    _lean_start(N, W, H, offsets, committed, init_name, code, mlen, head, row, ring)
    L = 3 * N
    streak = 0
    ring_c = np.zeros(3, np.int64)
    ring_u = np.zeros(3, np.int64)
    slot = 0
    cur_c = 0  # uncommitted productions of cword this round (more than two names; two: from pu1 and nu)
    nu = 0  # uncommitted productions this round
    pu1 = 0  # ... of name 1 (two names: r_produ's row is written at the round's end)
    off_h = offsets[H]
    t_streak = -1
    t_flip = -1
    t_err = -1
    stop_reason = 0
    uN = np.uint64(N)
    uN1 = np.uint64(N - 1)
    uW = np.uint64(W)
    sh32 = np.uint64(32)
    sh11 = np.uint64(11)
    t = 0
    r = 0
    in_round = 0
    succ = 0
    while t < max_int:
        if in_round == 0 and W != 2:
            for q in range(W):
                r_produ[r, q] = 0
        x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
        i = np.int64(((x >> sh32) * uN) >> sh32)
        x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
        j = np.int64(((x >> sh32) * uN1) >> sh32)
        if j >= i:
            j += 1
        i_unc = not committed[i]
        j_unc = not committed[j]
        ci = cword
        cj = cword
        if not _ORDER_DRAWS or omode == 0:  # one table (the plain kernel compiles only this branch)
            if i_unc:
                x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                ci = _lean_pick(np.float64(x >> sh11) * _INV53, thr, row[i] * W, W)
            if j_unc:
                x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                cj = _lean_pick(np.float64(x >> sh11) * _INV53, thr, row[j] * W, W)
        else:  # per-order tables: the name listed first, once per interaction (1) or per agent (2)
            fo = 0
            if omode == 1:
                x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                fo = np.int64(((x >> sh32) * uW) >> sh32)
            if i_unc:
                if omode == 2:
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    fo = np.int64(((x >> sh32) * uW) >> sh32)
                x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                ci = _lean_pick(np.float64(x >> sh11) * _INV53, thr, (row[i] + fo * S_ord) * W, W)
            if j_unc:
                if omode == 2:
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    fo = np.int64(((x >> sh32) * uW) >> sh32)
                x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                cj = _lean_pick(np.float64(x >> sh11) * _INV53, thr, (row[j] + fo * S_ord) * W, W)
        if ci >= W or cj >= W:
            t_err = t
            break
        # productions: counted in registers with two names (no store-to-load chain through memory
        # per interaction); the committed ones are cword's and r_prod follows at the round's end
        if i_unc:
            nu += 1
            if W == 2:
                pu1 += ci
            else:
                r_produ[r, ci] += 1
                cur_c += np.int64(ci == cword)
        if j_unc:
            nu += 1
            if W == 2:
                pu1 += cj
            else:
                r_produ[r, cj] += 1
                cur_c += np.int64(cj == cword)
        if i_unc:  # both record (own, partner), first agent first
            _lean_remember(i, ci * W + cj, H, B, offsets, off_h, top_pow, top_mask, pow2, code, mlen, head, row, ring)
        if j_unc:
            _lean_remember(j, cj * W + ci, H, B, offsets, off_h, top_pow, top_mask, pow2, code, mlen, head, row, ring)
        success = np.int64(ci == cj)
        t += 1
        in_round += 1
        succ += success
        streak = (streak + 1) * success
        if streak >= L and t_streak < 0:
            t_streak = t
            if stop_code == 3:
                stop_reason = 3
        if in_round == N:
            r_count[r] = N
            r_succ[r] = succ
            if W == 2:
                cur_c = 0 if cword < 0 else (pu1 if cword == 1 else nu - pu1)
            _lean_round_rows(r, N, W, cword, pu1, nu, r_prod, r_produ)
            slot = end_round(ring_c, ring_u, slot, cur_c, nu)
            cur_c = 0
            nu = 0
            pu1 = 0
            if cword >= 0 and t_flip < 0 and r >= 2 and window_flip_reached(ring_c, ring_u, flip_thr):
                t_flip = t
                if stop_code == 4:
                    stop_reason = 4
            r += 1
            in_round = 0
            succ = 0
        if stop_reason != 0:
            break
    if in_round > 0:
        r_count[r] = in_round
        r_succ[r] = succ
    if in_round > 0 or t_err >= 0:  # the round under way (an error at a round's start: rows of zeros)
        _lean_round_rows(r, in_round, W, cword, pu1, nu, r_prod, r_produ)
    scal[S_NINT] = t
    scal[S_STREAK] = t_streak
    scal[S_FLIP] = t_flip
    scal[S_STOP] = stop_reason
    scal[S_ERR] = t_err



# Two compiled variants of one source: without a name-order bias the order draws are compiled away,
# so the plain kernel is the one from before the bias existed, instruction for instruction (a branch
# on ``omode`` at run time cost 8% of the design's throughput).
_ORDER_DRAWS = False
_sg_lean_play = njit(cache=True)(_sg_lean_play_py)
_sg_lean_order_play = kernel_variant(_sg_lean_play_py, "_sg_lean_order_play_py", _ORDER_DRAWS=True)


# Run effects, lazily: a run visits a few dozen of the table's states, so the thresholds of its own
# table (the draw's logits under the run's shift and sharpness) are computed the first time the run
# meets a state, not for every state before the run (issue 32: that cost 10 us per run, 1.9 of
# predict's 3.7 CPU s). The effects variants of the lean kernels differ from the plain ones only in
# their pick (``_lean_pick_lazy``), so the plain kernels' code is what it was. The run's block keeps
# the thresholds where the plain kernel keeps a table's (two per state, 16 bytes: the hot part is no
# larger than a plain table's), a sentinel marks a state not yet met, and the states a run met are
# listed so the next run resets only those (a stamp per state beside its thresholds and a token read
# at every pick made the effects kernel 1.5x slower per interaction than the plain one).
#: A threshold no table gives (they are in [0, 1], 2.0, -1.0 or NaN): the state is not met yet in this run.
_UNSET = -2.0


@njit(inline="always")
def _lean_pick_lazy(u, thr, b, W):
    """:func:`_lean_pick` (``W = 2``) on a run's table under its run effect, computed on first use.

    ``thr`` is the run's block of ``4 S + 3`` entries (``S`` states, :func:`_lazy_block`):
    ``[0, 2 S)`` the thresholds, two per state as :func:`_effect_thresholds` writes them (same
    arithmetic), ``_UNSET`` where the run has not met the state; ``[2 S, 3 S)`` the draw's
    logits; ``[3 S, 4 S)`` the states the run met, in order; then ``[shift, sharpness, met]``."""
    t0 = thr[b]
    if t0 == _UNSET:
        n = thr.shape[0]
        S = (n - 3) // 4
        s = b // 2
        x = thr[2 * S + s]
        if np.isnan(x):
            t0 = -1.0
            thr[b + 1] = -1.0
        else:
            eta = thr[n - 2] * x + thr[n - 3]
            p0 = 0.0 if eta > 709.0 else 1.0 / (1.0 + math.exp(eta))  # 709: exp overflows past it
            t0 = 2.0 if p0 >= 1.0 else p0
            thr[b + 1] = 2.0
        thr[b] = t0
        c = thr[n - 1]
        thr[3 * S + np.int64(c)] = s
        thr[n - 1] = c + 1.0
    return np.int64(u >= t0) + np.int64(u >= thr[b + 1])


@njit(inline="always")
def _lazy_block(S):
    """A run's block of lazily computed thresholds for a table of ``S`` states (:func:`_lean_pick_lazy`):
    every state unset, no state met."""
    blk = np.zeros(4 * S + 3)
    for s in range(S):
        blk[2 * s] = _UNSET
    return blk


@njit(inline="always")
def _lazy_new_run(blk, b, k):
    """Start a run on the lazy block: the states the last run met unset again, the run's shift and sharpness."""
    n = blk.shape[0]
    S = (n - 3) // 4
    for i in range(np.int64(blk[n - 1])):
        blk[2 * np.int64(blk[3 * S + i])] = _UNSET
    blk[n - 1] = 0.0
    blk[n - 3] = b
    blk[n - 2] = k


_sg_lean_effects_play = kernel_variant(_sg_lean_play_py, "_sg_lean_effects_play_py", _lean_pick=_lean_pick_lazy)
_sg_lean_order_effects_play = kernel_variant(_sg_lean_play_py, "_sg_lean_order_effects_play_py", _ORDER_DRAWS=True,
                                             _lean_pick=_lean_pick_lazy)
#: Added to a stage's name-order mode when its runs play lazily computed run effects (:func:`_lean`).
LAZY_MODE = 3


@njit(inline="always")
def _lean(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr, omode, r_count,
          r_succ, r_prod, r_produ, scal, wk):
    """One lean run: the plain kernel (``omode`` 0) or the one that draws name orders (1, 2); with
    ``LAZY_MODE`` added, their variants whose thresholds come from run effects on first use."""
    if omode == 0:
        _sg_lean_play(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr, omode,
                      r_count, r_succ, r_prod, r_produ, scal, wk)
    elif omode < LAZY_MODE:
        _sg_lean_order_play(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr,
                            omode, r_count, r_succ, r_prod, r_produ, scal, wk)
    elif omode == LAZY_MODE:
        _sg_lean_effects_play(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr,
                              omode - LAZY_MODE, r_count, r_succ, r_prod, r_produ, scal, wk)
    else:
        _sg_lean_order_effects_play(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code,
                                    flip_thr, omode - LAZY_MODE, r_count, r_succ, r_prod, r_produ, scal, wk)


def _sg_lean_run_py(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr,
                    r_count, r_succ, r_prod, r_produ, scal, wk):
    """:func:`_sg_lean_play` without a name-order bias (one table in ``thr``; the twin tests' entry)."""
    _sg_lean_play(seed, N, W, H, offsets, committed, cword, thr, init_name, max_int, stop_code, flip_thr,
                  np.int64(0), r_count, r_succ, r_prod, r_produ, scal, wk)


_sg_lean_run = njit(cache=True)(_sg_lean_run_py)


# ----------------------------------------------------------------------------- the design's stages
@njit(inline="always")
def _run_thr(re, d, g, k, thr):
    """The thresholds run ``k`` of group ``g`` of draw ``d`` plays: the draw's table, or -- with run
    effects (``re = (mode, b, kappa, logits, work)``) -- that table under the run's effect: every
    state's thresholds at once (``mode`` 1, the reference) or the run's shift and sharpness and a
    new token in the work block's tail, the thresholds computed on first use (``mode`` 2,
    :func:`_lean_pick_lazy`)."""
    mode, re_b, re_k, lg, thr_run = re
    if mode == 1:
        _effect_thresholds(lg, re_b[d, g, k], re_k[d, g, k], thr_run)
        return thr_run
    if mode == 2:
        _lazy_new_run(thr_run, re_b[d, g, k], re_k[d, g, k])
        return thr_run
    return thr


def _last3_winner_py(r_prod, nr, W, prod):
    """Name produced most in recorded rounds ``nr - 3 .. nr - 1`` (first on ties)."""
    for w in range(W):
        prod[w] = 0
    for q in range(max(0, nr - 3), nr):
        for w in range(W):
            prod[w] += r_prod[q, w]
    best = 0
    for w in range(1, W):
        if prod[w] > prod[best]:
            best = w
    return best


_last3_winner = njit(cache=True)(_last3_winner_py)


@njit(cache=True)
def _design_consensus(seeds, d, g, game, plan, out, work, re):
    """Stage 1 of draw ``d``: ``n_cons`` runs from empty memories, ``stop="streak"`` (group ``g``).
    Returns ``(runs with an invalid vector, interactions)``."""
    N, W, H, flip_thr, om_cons, om_comm = game
    _, n_cons, cons_rounds = plan
    cons_wins, cons_sum, cons_n, cons_streak = out
    r_count, r_succ, r_prod, r_produ, scal, mask, init_name, wk, thr, offsets, sh, lens, pad, mean, prod = work
    NONE, STREAK = np.int64(-1), np.int64(3)  # typed values: a literal would compile a second _sg_lean_run
    n_err = 0
    n_int = 0
    mask[:] = False
    init_name[:] = -1
    for k in range(n_cons):
        _lean(seeds[d, g, k], N, W, H, offsets, mask, NONE, _run_thr(re, d, g, k, thr), init_name, cons_rounds * N, STREAK,
                     flip_thr, om_cons, r_count, r_succ, r_prod, r_produ, scal, wk)
        if scal[S_ERR] >= 0:
            n_err += 1
        n_int += scal[S_NINT]
        t = scal[S_NINT]
        nr = (t + N - 1) // N
        stopped = scal[S_STOP] == 3
        for q in range(cons_rounds):
            if q < nr:
                cons_sum[d, q] += r_succ[q] / max(r_count[q], 1)
                cons_n[d, q] += 1
            elif stopped:
                cons_sum[d, q] += 1.0
                cons_n[d, q] += 1
        if stopped:
            cons_streak[d, k] = scal[S_STREAK] / N
            cons_wins[d, _last3_winner(r_prod, nr, W, prod)] += 1
        else:
            cons_streak[d, k] = np.nan
            cons_wins[d, W] += 1
    return n_err, n_int


@njit(inline="always")
def _add_shares(r_produ, nr, W, y, s, n):
    """``(s, n)`` with the share of ``y`` in the uncommitted productions of each of the first ``nr``
    rounds added (rounds with none skipped): the strength stage's pull and exploration."""
    for q in range(nr):
        tot = 0
        for w in range(W):
            tot += r_produ[q, w]
        if tot > 0:
            s += r_produ[q, y] / tot
            n += 1
    return s, n


@njit(cache=True)
def _design_flips(seeds, d, g, i, game, plan, out, work, re, share_at, st_share):
    """Stage 2 of draw ``d``, direction ``i``: one group of flip runs per committed count from
    group ``g`` on, their flips and the published rule. Where ``share_at[c] == j`` (``c`` = 0, 1:
    the strength stage's exploration and pull, :func:`_sg_design_py`), count ``j``'s runs are played
    to their cap, read for the flips only up to their flip (as if stopped there: the same draws,
    the same readings) and give ``st_share[d, i, c]``. Returns ``(next group, runs with an invalid
    vector, interactions)``."""
    N, W, H, flip_thr, om_cons, om_comm = game
    dir_x, dir_y, counts, n_flip, n_design, within, window, monotone, level, flip_sum = plan
    fl_k, fl_sim, fl_last3, fl_ok, fl_all, cm_pub, cm_run = out
    r_count, r_succ, r_prod, r_produ, scal, mask, init_name, wk, thr, offsets, sh, lens, pad, mean, prod = work
    FLIP, NOSTOP = np.int64(4), np.int64(0)  # typed values: a literal would compile a second _sg_lean_run
    nsim = max(n_flip, n_design)
    T_flip = max(within, window) * N
    n_err = 0
    n_int = 0
    x = dir_x[i]
    y = dir_y[i]
    saturated = 0
    cm_run[d, i] = np.inf
    cm_pub[d, i] = np.inf
    for j in range(counts.shape[0]):
        c = counts[j]
        if monotone and saturated >= 2:
            fl_k[d, i, j] = n_flip
            fl_sim[d, i, j] = False
            fl_last3[d, i, j] = 3.0
            fl_ok[d, i, j] = True
            fl_all[d, i, j] = True
        else:
            mask[:] = False
            for a in range(N - c, N):
                mask[a] = True
            init_name[:] = x
            kf = 0
            all_f = True
            shr = c < 2 and share_at[c] == j  # also the strength stage's runs: played to the cap
            s_y = 0.0
            n_y = 0
            for k in range(nsim):
                _lean(seeds[d, g, k], N, W, H, offsets, mask, y, _run_thr(re, d, g, k, thr), init_name, T_flip,
                      NOSTOP if shr else FLIP, flip_thr, om_comm, r_count, r_succ, r_prod, r_produ, scal, wk)
                if scal[S_ERR] >= 0:
                    n_err += 1
                n_int += scal[S_NINT]
                ft = scal[S_FLIP]
                fl = ft >= 0 and ft <= within * N
                all_f = all_f and fl
                if k < n_flip and fl:
                    kf += 1
                if shr and k < n_flip:  # the share of y over the first `within` rounds, flip or not
                    s_y, n_y = _add_shares(r_produ, min((scal[S_NINT] + N - 1) // N, within), W, y, s_y, n_y)
                if k < n_design:
                    # a run played on past its flip is read as the flip rule would have stopped it (at
                    # the end of the round the flip was seen: its records up to there are the same)
                    nr = ((ft if (shr and ft >= 0) else scal[S_NINT]) + N - 1) // N
                    ln = min(nr, window)
                    for q in range(ln):
                        tot = 0
                        for w in range(W):
                            tot += r_produ[q, w]
                        sh[k, q] = r_produ[q, y] / max(tot, 1) if tot > 0 else np.nan
                    s = last3_sum(sh, k, ln)
                    lens[k] = ln
                    pad[k] = ln >= 1 and (s >= flip_sum or (ft >= 0 and ft <= window * N))
            last3, ok = published_from_shares(sh, lens, pad, n_design, window, flip_sum, mean)
            if shr:
                st_share[d, i, c] = s_y / n_y if n_y > 0 else np.nan
            fl_k[d, i, j] = kf
            fl_sim[d, i, j] = True
            fl_last3[d, i, j] = last3
            fl_ok[d, i, j] = ok
            fl_all[d, i, j] = all_f
            saturated = saturated + 1 if (all_f and ok) else 0
        if cm_run[d, i] == np.inf and fl_k[d, i, j] / n_flip >= level:
            cm_run[d, i] = c
        if cm_pub[d, i] == np.inf and fl_ok[d, i, j]:
            cm_pub[d, i] = c
        g += 1
    return g, n_err, n_int


@njit(cache=True)
def _design_strength(seeds, d, g, i, game, cons_rounds, flips, plan, out, work, re):
    """Stage 3 of draw ``d``, direction ``i`` (``x`` to ``y``): the share of ``y`` with 0 and 1 agent
    committed to it, then the streak runs of every mixture (groups from ``g`` on; a mixture the
    reverse direction played is read from its runs, see :func:`_sg_design_py`). Returns ``(next
    group, runs with an invalid vector, interactions)``."""
    N, W, H, flip_thr, om_cons, om_comm = game
    dir_x, dir_y, counts, n_flip, n_design, within, window, monotone, level, flip_sum = flips
    _, mix_kx, mix_src, share_at = plan
    st_share, st_wins, st_wins_y = out
    x = dir_x[i]
    y = dir_y[i]
    r_count, r_succ, r_prod, r_produ, scal, mask, init_name, wk, thr, offsets, sh, lens, pad, mean, prod = work
    NONE, NOSTOP, STREAK = np.int64(-1), np.int64(0), np.int64(3)  # typed values, not literals
    n_err = 0
    n_int = 0
    for c in range(2):
        if share_at[c] >= 0:  # the sweep's runs of this count gave the share (_design_flips)
            g += 1
            continue
        mask[:] = False
        mask[N - 1] = c == 1
        init_name[:] = x
        s = 0.0
        n = 0
        for k in range(n_flip):
            _lean(seeds[d, g, k], N, W, H, offsets, mask, y, _run_thr(re, d, g, k, thr), init_name, within * N, NOSTOP,
                         flip_thr, om_comm, r_count, r_succ, r_prod, r_produ, scal, wk)
            if scal[S_ERR] >= 0:
                n_err += 1
            n_int += scal[S_NINT]
            s, n = _add_shares(r_produ, min((scal[S_NINT] + N - 1) // N, within), W, y, s, n)
        st_share[d, i, c] = s / n if n > 0 else np.nan
        g += 1
    mask[:] = False
    for f in range(mix_kx.shape[0]):
        if mix_src[i, f, 0] >= 0:  # the same mixture was played for the reverse direction: its runs won by x
            st_wins[d, i, f] = st_wins_y[d, mix_src[i, f, 0], mix_src[i, f, 1]]
            g += 1
            continue
        for a in range(N):
            init_name[a] = x if a < mix_kx[f] else y
        for k in range(n_flip):
            _lean(seeds[d, g, k], N, W, H, offsets, mask, NONE, _run_thr(re, d, g, k, thr), init_name, cons_rounds * N, STREAK,
                         flip_thr, om_comm, r_count, r_succ, r_prod, r_produ, scal, wk)
            if scal[S_ERR] >= 0:
                n_err += 1
            n_int += scal[S_NINT]
            if scal[S_STOP] == 3:
                nr = (scal[S_NINT] + N - 1) // N
                win = _last3_winner(r_prod, nr, W, prod)
                if win == x:
                    st_wins[d, i, f] += 1
                elif win == y:
                    st_wins_y[d, i, f] += 1
        g += 1
    return g, n_err, n_int


@njit(cache=True)
def _design_experiment(seeds, d, g, i, game, plan, out, work, wx, re):
    """Stage 4 of draw ``d``, direction ``i``: the experiment as designed (one group per entry
    ``j`` of its grid -- the entries with ``e_dir[j] == i`` -- from group ``g`` on). Each run plays its own number of
    interactions without stopping at a flip (as the published runs did) -- or, where ``e_stop[j] == 3``, until a
    streak of ``3N`` successes (the protocol of runs stopped at a consensus) -- and the published rule reads them as it reads the data: a run
    whose own last three rounds meet ``flip_sum`` at its end is padded with 1s, the others drop out
    after their last round, the mean is cut at ``window`` rounds. Counts after the first that meets
    the rule are simulated only where ``e_all[j]`` (the tested counts). Returns ``(next group, runs
    with an invalid vector, interactions)``."""
    N, W, H, flip_thr, om_cons, om_comm = game
    dir_x, dir_y, e_dir, e_counts, e_off, e_len, e_all, e_keep, window, flip_sum, e_stop = plan
    ex_ok, ex_last3, ex_cm, ex_share = out
    r_count, r_succ, r_prod, r_produ, scal, mask, init_name, wk, thr, offsets, sh, lens, pad, mean, prod = work
    sh2, lens2, pad2, mean2 = wx
    n_err = 0
    n_int = 0
    x = dir_x[i]
    y = dir_y[i]
    ex_cm[d, i] = np.inf
    met = False
    for j in range(e_counts.shape[0]):
        if e_dir[j] != i:
            continue
        c = e_counts[j]
        if met and not e_all[j]:
            ex_ok[d, j] = -1
            ex_last3[d, j] = np.nan
            g += 1
            continue
        mask[:] = False
        for a in range(N - c, N):
            mask[a] = True
        init_name[:] = x
        n_runs = e_off[j + 1] - e_off[j]
        for k in range(n_runs):
            T = e_len[e_off[j] + k]
            _lean(seeds[d, g, k], N, W, H, offsets, mask, y, _run_thr(re, d, g, k, thr), init_name, T,
                  e_stop[j], flip_thr, om_comm, r_count, r_succ, r_prod, r_produ, scal, wk)
            if scal[S_ERR] >= 0:
                n_err += 1
            n_int += scal[S_NINT]
            nr = (scal[S_NINT] + N - 1) // N
            for q in range(nr):
                tot = 0
                for w in range(W):
                    tot += r_produ[q, w]
                sh2[k, q] = r_produ[q, y] / tot if tot > 0 else np.nan
            full = last3_sum(sh2, k, nr)
            lens2[k] = min(nr, window)
            pad2[k] = nr >= 1 and full >= flip_sum
            if e_keep[j] >= 0:
                row = e_keep[j] + k
                for q in range(ex_share.shape[2]):
                    ex_share[d, row, q] = sh2[k, q] if q < nr else np.nan
        last3, ok = published_from_shares(sh2, lens2, pad2, n_runs, window, flip_sum, mean2)
        ex_ok[d, j] = 1 if ok else 0
        ex_last3[d, j] = last3
        if ok and not met:
            met = True
            ex_cm[d, i] = c
        g += 1
    return g, n_err, n_int


def _sg_design_py(seeds, tables, game, consensus, flips, strength, out_cons, out_flips, out_strength, experiment,
                  out_exp, effects):
    """A whole prediction design of strategy-table games, every posterior draw in one call.

    ``game = (n_agents, W, H, flip_thr, order_cons, order_committed)`` (the name-order modes of
    the convergence runs and of every other stage: 0 none, 1 shared, 2 independent; with a mode
    other than 0 each ``tables[d]`` holds ``W`` per-order tables, block ``f`` for name ``f``
    listed first, :func:`normlab.theory.name_order.order_tables`); ``consensus = (do_cons, n_cons,
    cons_rounds)``;
    ``flips = (dir_x, dir_y, counts, n_flip, n_design, within, window, monotone, level,
    flip_sum)``; ``strength = (do_strength, mix_kx, mix_src, share_at)``; outputs ``out_cons = (cons_wins,
    cons_sum, cons_n, cons_streak)``, ``out_flips = (fl_k, fl_sim, fl_last3, fl_ok, fl_all,
    cm_pub, cm_run)``, ``out_strength = (st_share, st_wins, st_wins_y)``; ``experiment = (do_exp, dir_x, dir_y,
    e_dir, e_counts, e_off, e_len, e_all, e_keep, window, flip_sum, max_rounds, e_stop)`` (one entry ``j``
    per direction and count of the grid) and ``out_exp = (ex_ok, ex_last3, ex_cm, ex_share)``.

    Per draw ``d`` (table ``tables[d]``), in this order, run ``k`` of group ``g`` seeded by
    ``seeds[d, g, k]`` (groups numbered as they come):

    1. (``do_cons``) ``n_cons`` runs from empty memories, ``stop="streak"``, at most
       ``cons_rounds`` rounds: per draw the number of runs won by each name (winner: the name
       produced most in the last three recorded rounds of a stopped run; column ``W`` = none),
       per round the sum and count of success rates (stopped runs padded with 1) and per run the
       streak time in rounds (NaN if it did not stop);
    2. per direction ``(dir_x[i], dir_y[i])`` and committed count ``counts[j]`` (one group each):
       ``max(n_flip, n_design)`` runs from a consensus on ``x`` with the last ``c`` agents
       committed to ``y``, ``stop="flip"``, at most ``max(within, window)`` rounds; ``fl_k``: flips
       within ``within`` rounds among the first ``n_flip`` runs; ``fl_last3``/``fl_ok``: the
       published ensemble rule (:func:`normlab.theory.criteria.published_rule`, same arithmetic)
       on the first ``n_design`` runs cut at ``window`` rounds; ``fl_all``: every run flipped.
       With ``monotone`` a sweep stops simulating after two consecutive counts where every run
       flipped and the rule was met (``fl_sim`` False, counted as flipping); ``cm_run``/``cm_pub``:
       the smallest count reaching ``level`` / meeting the rule (inf if none);
    3. (``do_strength``) two groups of ``n_flip`` runs of ``within`` rounds from a consensus on
       ``x`` with 0 and 1 agent committed to ``y`` (``st_share``: mean share of ``y`` among
       uncommitted productions over runs and rounds; where the sweep has that count,
       ``share_at[c] = j`` (:func:`~normlab.theory.design_plan.sweep_shares`), the first ``n_flip``
       runs of its group ``j`` are those runs -- played to the cap, not stopped at a flip, read by
       stage 2 as if stopped -- and the group here is skipped, its number still taken), then one group of ``n_flip`` streak runs
       per mixture (``mix_kx[f]`` agents start on ``x``, the others on ``y``; ``st_wins``: runs
       won by ``x``, ``st_wins_y``: by ``y``). Where ``mix_src[i, f] = (i', f')`` (not -1), the
       reverse direction ``i' < i`` already played that mixture (its mixture ``f'`` has the same
       agents on each name, :func:`~normlab.theory.design_plan.mixture_sources`): its group is
       skipped (its number still taken) and ``st_wins[d, i, f]`` is that mixture's runs won by
       ``x`` (``st_wins_y[d, i', f']``) -- the same experiment, simulated once.

    4. (``experiment``, after the directions' groups) per direction the experiment as designed:
       one group per count of its grid (:func:`_design_experiment`): ``ex_ok`` (1 met, 0 not, -1 not
       simulated), ``ex_last3``, ``ex_cm`` (the smallest count of the grid meeting the rule, inf if
       none) and the per-round shares of the runs of the kept counts (``ex_share``).

    ``effects = (mode, b, kappa)`` (arrays shaped like ``seeds[..., 0]``): with ``mode`` 1 or 2
    run ``k`` of group ``g`` of draw ``d`` plays the draw's table under its run effect, logits
    ``kappa * logit p + b`` (two names; with per-order tables each order's logit), its thresholds
    computed for every state before the run (1) or for each state the run meets, when it meets it
    (2, the default: same thresholds, same runs); ``mode`` 0, the draw's table itself
    (bit-identical to before).

    Every run is :func:`_sg_lean_play`. Returns ``(runs with an invalid probability vector,
    interactions simulated)``.
    """
    N, W, H = game[0], game[1], game[2]
    do_cons, cons_rounds = consensus[0], consensus[2]
    dir_x = flips[0]
    n_design, within, window = flips[4], flips[5], flips[6]
    do_strength = strength[0]
    do_exp = experiment[0]
    plan_exp = (experiment[1], experiment[2], experiment[3], experiment[4], experiment[5], experiment[6],
                experiment[7], experiment[8], experiment[9], experiment[10], experiment[12])
    ex_rounds = experiment[11]
    e_off = experiment[5]
    n_rows = max(cons_rounds, within, window, ex_rounds) + 1
    S = tables.shape[1] // W
    thr = np.empty(S * W)
    offsets = np.empty(H + 1, np.int64)
    offsets[0] = 0
    for k in range(1, H + 1):
        offsets[k] = offsets[k - 1] * W * W + 1
    work = (np.empty(n_rows, np.int32), np.empty(n_rows, np.int32), np.empty((n_rows, W), np.int32),
            np.empty((n_rows, W), np.int32), np.empty(SG_SCALARS, np.int64), np.zeros(N, np.bool_),
            np.full(N, -1, np.int64), np.empty(N * (4 + H), np.int64), thr, offsets,
            np.empty((max(n_design, 1), window)), np.zeros(max(n_design, 1), np.int64),
            np.zeros(max(n_design, 1), np.bool_), np.empty(window), np.zeros(W, np.int64))
    max_runs = 1
    for j in range(e_off.shape[0] - 1):
        max_runs = max(max_runs, e_off[j + 1] - e_off[j])
    wx = (np.empty((max_runs, n_rows)), np.zeros(max_runs, np.int64), np.zeros(max_runs, np.bool_),
          np.empty(max(window, 1)))
    mode, re_b, re_k = effects
    lg = np.empty(S)
    if mode == 2:  # lazily: thresholds, logits, the states met, [b, kappa, met] (see _lean_pick_lazy)
        thr_run = _lazy_block(S)
        game = (game[0], game[1], game[2], game[3], game[4] + LAZY_MODE, game[5] + LAZY_MODE)
    else:
        thr_run = np.empty(S * W)
    re = (mode, re_b, re_k, lg, thr_run)
    n_err = 0
    n_int = 0
    for d in range(tables.shape[0]):
        _choice_thresholds(tables[d], S, W, thr)
        if mode:
            _table_logits(tables[d], S, W, lg)
            if mode == 2:
                for s in range(S):
                    thr_run[2 * S + s] = lg[s]
        g = 0
        if do_cons:
            e, m = _design_consensus(seeds, d, g, game, consensus, out_cons, work, re)
            n_err += e
            n_int += m
            g += 1
        for i in range(dir_x.shape[0]):
            g, e, m = _design_flips(seeds, d, g, i, game, flips, out_flips, work, re, strength[3], out_strength[0])
            n_err += e
            n_int += m
            if do_strength:
                g, e, m = _design_strength(seeds, d, g, i, game, cons_rounds, flips, strength, out_strength, work, re)
                n_err += e
                n_int += m
        if do_exp:
            for i in range(plan_exp[0].shape[0]):
                g, e, m = _design_experiment(seeds, d, g, i, game, plan_exp, out_exp, work, wx, re)
                n_err += e
                n_int += m
    return n_err, n_int


_sg_design = njit(cache=True)(_sg_design_py)




def _check_tables(tables, memory) -> np.ndarray:
    tables = np.ascontiguousarray(tables, dtype=np.float64)
    D, S, W = tables.shape
    H = int(memory)
    if S != n_states(W, H):
        raise ValueError(f"tables must have {n_states(W, H)} states for W={W}, H={H}; got {S}")
    return tables


def strategy_design(tables, seeds, n_agents, memory, plan: DesignPlan | None = None, *, experiment=None, effects=None,
                    **keywords) -> dict:
    """Run :func:`_sg_design` (one compiled call for every draw) and return its reductions.

    ``tables``: ``(D, n_states, W)`` probabilities; ``seeds``: ``(D, n_groups, n_runs_max, 4)``
    kernel seed words laid out as :func:`_sg_design` reads them; ``plan``: the stages and their
    sizes (:class:`DesignPlan`). Used by :func:`normlab.calibration.predict`; no input checks
    beyond shapes and the plan's own (the caller validates). Without ``plan`` the
    :class:`DesignPlan` fields are taken as keywords (``consensus=..., n_cons=..., ...``), a
    convenience that builds the plan.

    ``experiment`` (optional): a dict with ``directions`` (``(x, y)`` pairs) and, one entry per
    count of each direction's grid (sorted by direction; one seed group each, after the other
    groups), ``direction`` (its index), ``counts``, ``runs`` (runs of the entry), ``simulate_all``
    (simulate even after a smaller count met the rule), ``keep`` (keep the runs' per-round
    shares); ``lengths`` (interactions of each run, entry by entry), ``window`` and
    ``max_rounds`` (rounds of the longest run); optionally ``stop`` (per entry: 0 play every run to its length, 3 stop
    a run at a streak of ``3N`` successes; default 0). ``effects`` (optional): ``(b,
    kappa)``, arrays shaped like ``seeds[..., 0]``: per run the shift and sharpness of its table
    (two names). The plan's ``order_bias`` (:mod:`normlab.theory.name_order`), with its
    ``name_order`` = (order of the convergence runs, of the committed-minority runs); 0 plays the
    tables as they are (bit-identical, no draw for the order).

    Returns
    -------
    dict of numpy.ndarray
        ``cons_wins (D, W + 1)``, ``cons_curve (D, cons_rounds)``, ``cons_streak (D, n_cons)``,
        ``fl_k``, ``fl_sim``, ``fl_last3``, ``fl_ok``, ``fl_all`` ``(D, n_dirs, n_counts)``,
        ``cm_pub``, ``cm_run`` ``(D, n_dirs)``, ``st_share (D, n_dirs, 2)``, ``st_wins (D, n_dirs, n_mix)``,
        ``interactions`` (one entry: interactions simulated in all); with ``experiment`` also
        ``ex_ok``, ``ex_last3`` ``(D, n_entries)``, ``ex_cm (D, n_exp_dirs)`` and ``ex_share
        (D, kept runs, max_rounds)``.
    """
    if plan is None:
        _check_tables(tables, memory)
        plan = DesignPlan(**keywords)
    elif keywords:
        raise TypeError(f"strategy_design takes a plan or its fields as keywords, not both; got {sorted(keywords)}")
    tables = _check_tables(tables, memory)
    D, S, W = tables.shape
    H = int(memory)
    om = (order_mode(plan.order_bias, plan.name_order[0]), order_mode(plan.order_bias, plan.name_order[1]))
    if om != (0, 0):  # W per-order tables per draw, block f for name f listed first
        tables = np.ascontiguousarray(np.moveaxis(order_tables(tables, plan.order_bias), 0, 1).reshape(D, W * S, W))
    flat = np.ascontiguousarray(tables.reshape(D, -1))
    seeds = np.require(seeds, np.uint64, ["C", "W"])
    dirs = plan.directions
    nd, nc, nm = len(dirs), len(plan.counts), len(plan.mix_kx)
    n_cons, cons_rounds = plan.n_cons, plan.cons_rounds
    out_cons = (np.zeros((D, W + 1), np.int64), np.zeros((D, cons_rounds)), np.zeros((D, cons_rounds), np.int64),
                np.full((D, n_cons), np.nan))
    out_flips = (np.zeros((D, nd, nc), np.int64), np.zeros((D, nd, nc), np.bool_), np.zeros((D, nd, nc)),
                 np.zeros((D, nd, nc), np.bool_), np.zeros((D, nd, nc), np.bool_), np.full((D, nd), np.inf),
                 np.full((D, nd), np.inf))
    out_strength = (np.full((D, nd, 2), np.nan), np.zeros((D, nd, nm), np.int64), np.zeros((D, nd, nm), np.int64))
    game = (int(n_agents), W, H, plan.flip_threshold, om[0], om[1])
    plan_cons = (plan.consensus, n_cons, cons_rounds)
    plan_flips = (np.ascontiguousarray(dirs[:, 0]), np.ascontiguousarray(dirs[:, 1]), plan.counts, plan.n_flip,
                  plan.n_design, plan.within, plan.window, plan.monotone, plan.level, plan.flip_sum)
    plan_strength = (plan.strength, plan.mix_kx, mixture_sources(dirs, plan.mix_kx, int(n_agents)),
                     sweep_shares(plan.counts, plan.strength))
    plan_exp, out_exp = _experiment_plan(experiment, D, plan.flip_sum)
    if effects is None:
        eff = (np.int64(0), np.zeros((1, 1, 1)), np.ones((1, 1, 1)))
    else:
        if W != 2:
            raise ValueError(f"run effects act on two-name tables; got W={W}")
        b, k = (np.ascontiguousarray(a, np.float64) for a in effects)
        if b.shape != seeds.shape[:3] or k.shape != seeds.shape[:3]:
            raise ValueError(f"effects must be shaped like seeds[..., 0] {seeds.shape[:3]}; got {b.shape}, {k.shape}")
        eff = (np.int64(1 if _EAGER_EFFECTS else 2), b, k)
    n_err, n_int = _sg_design(seeds, flat, game, plan_cons, plan_flips, plan_strength, out_cons, out_flips,
                              out_strength, plan_exp, out_exp, eff)
    if n_err:
        raise ValueError(f"a table returned an invalid probability vector (negative, NaN or not summing to 1) in "
                         f"{n_err} run(s)")
    cons_wins, cons_sum, cons_n, cons_streak = out_cons
    fl_k, fl_sim, fl_last3, fl_ok, fl_all, cm_pub, cm_run = out_flips
    st_share, st_wins, _ = out_strength
    with np.errstate(invalid="ignore", divide="ignore"):
        curve = np.where(cons_n > 0, cons_sum / np.maximum(cons_n, 1), np.nan)
    out = dict(cons_wins=cons_wins, cons_curve=curve, cons_streak=cons_streak, fl_k=fl_k, fl_sim=fl_sim,
               fl_last3=fl_last3, fl_ok=fl_ok, fl_all=fl_all, cm_pub=cm_pub, cm_run=cm_run, st_share=st_share,
               st_wins=st_wins, interactions=np.array([n_int], np.int64))
    if experiment is not None:
        out.update(ex_ok=out_exp[0], ex_last3=out_exp[1], ex_cm=out_exp[2], ex_share=out_exp[3])
    return out


#: Play run effects by computing every state's thresholds before each run (the reference of the lazy
#: thresholds, :func:`_lean_pick_lazy`; bit-identical, slower). Tests switch it on.
_EAGER_EFFECTS = False


def _experiment_plan(experiment, D, flip_sum):
    """The kernel's ``experiment`` tuple and outputs (inert placeholders without an experiment, so
    ``_sg_design`` keeps one signature)."""
    if experiment is None:
        z = np.zeros(0, np.int64)
        plan = (False, z, z, z, z, np.zeros(1, np.int64), z, np.zeros(0, np.bool_), z, 3, float(flip_sum), 0, z)
        out = (np.zeros((D, 0), np.int8), np.zeros((D, 0)), np.zeros((D, 0)), np.zeros((D, 0, 0)))
        return plan, out
    dirs = np.asarray(experiment["directions"], np.int64).reshape(-1, 2)
    e_dir = np.ascontiguousarray(experiment["direction"], np.int64)
    counts = np.ascontiguousarray(experiment["counts"], np.int64)
    runs = np.asarray(experiment["runs"], np.int64)
    off = np.concatenate([[0], np.cumsum(runs)]).astype(np.int64)
    lengths = np.ascontiguousarray(experiment["lengths"], np.int64)
    if not (len(runs) == len(counts) == len(e_dir)) or len(lengths) != off[-1] or np.any(runs < 1) \
            or np.any(lengths < 1) or np.any(np.diff(e_dir) < 0) or (len(e_dir) and e_dir.max() >= len(dirs)):
        raise ValueError("experiment: entries sorted by direction, one run count >= 1 per entry and one length "
                         ">= 1 per run")
    sim_all = np.ascontiguousarray(experiment["simulate_all"], np.bool_)
    keep = np.asarray(experiment["keep"], np.bool_)
    keep_at = np.full(len(counts), -1, np.int64)
    n_keep = 0
    for j in range(len(counts)):
        if keep[j]:
            keep_at[j] = n_keep
            n_keep += runs[j]
    R = int(experiment["max_rounds"])
    stop = np.ascontiguousarray(experiment.get("stop", np.zeros(len(counts))), np.int64)
    if stop.shape != counts.shape or not np.isin(stop, (0, 3)).all():
        raise ValueError("experiment: one stop code per entry, 0 (none) or 3 (streak)")
    plan = (True, np.ascontiguousarray(dirs[:, 0]), np.ascontiguousarray(dirs[:, 1]), e_dir, counts, off, lengths,
            sim_all, keep_at, int(experiment["window"]), float(flip_sum), R, stop)
    out = (np.zeros((D, len(counts)), np.int8), np.zeros((D, len(counts))), np.full((D, len(dirs)), np.inf),
           np.full((D, n_keep, R), np.nan))
    return plan, out
