"""Minimal naming game (Baronchelli et al. 2006), with a finite or unlimited name pool.

Rules per interaction: a random speaker and a random neighbour (hearer) are drawn; the speaker
utters a name from its inventory (inventing one if the inventory is empty); if the hearer knows
it, both collapse their inventories to that name (with probability ``beta``: the β-model),
otherwise the hearer adds it. Committed agents always utter their name and never change.

References
----------
A. Baronchelli, M. Felici, V. Loreto, E. Caglioti, L. Steels, J. Stat. Mech. P06014 (2006);
A. Baronchelli, L. Dall'Asta, A. Barrat, V. Loreto, Phys. Rev. E 73, 015102 (2006);
A. Baronchelli, L. Dall'Asta, A. Barrat, V. Loreto, Phys. Rev. E 76, 051102 (2007) (β-model);
J. Xie et al., Phys. Rev. E 84, 011130 (2011) (committed agents);
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Supplementary Text
"Theoretical Model" (finite pool of W names), Fig. 1A and Fig. S3 (production bias).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace

import numpy as np

from normlab._jit import njit, prange
from normlab._rng import run_seeds
from normlab._validate import Check, Relation, check_int, validated

from ._batch import (
    S_CONS, S_FLIP, S_NDMAX, S_NINT, S_NWMAX, S_S95, S_STOP, S_STREAK, S_TMAX, S_WIN,
    choose_kernel, game_result, run_batches,
)
from ._common import check_stop, default_max_interactions, warn_unfinished
from ._criteria_kernels import end_round, window_flip_reached
from ._prng import _INV53, _next4
from .criteria import PUBLISHED_FLIP_THRESHOLD
from .population import committed_mask
from .results import GameResult
from .spec import GameSpec, Network, RunLength, _flip_threshold

__all__ = ["minimal_naming_game", "play_naming_game", "NamingRules"]


@njit
def _add_word(inv, ln, base, a, w, holders):
    """Append ``w`` to agent ``a``'s inventory (at ``inv[base:]``); return the change of distinct names."""
    inv[base + ln[a]] = w
    ln[a] += 1
    holders[w] += 1
    return 1 if holders[w] == 1 else 0


_V_NEXT, _V_NW, _V_ND, _V_FPOS, _V_DUE, _V_STREAK, _V_SLOT, _V_CURC, _V_CURU, _V_TCONS, _V_WIN, _V_TS95, \
    _V_TSTREAK, _V_TFLIP, _V_NWMAX, _V_TMAX, _V_NDMAX, _V_STOP, _V_T, _V_R, _V_INR, _V_SUCC = range(22)
_NV = 22  # loop-carried scalars of a run, kept in an array between calls of _ng_steps


@njit(cache=True)
def _ng_steps(rng, v, inv, cap, ln, holders, n_agents, n_words, indptr, nbrs, committed, cword, bias, beta,
              max_int, stop_code, flip_thr, keep_invented, bias_empty, any_committed, fails, ring_c, ring_u,
              r_count, r_succ, r_nw, r_nd, r_prod, r_produ, hits):
    """The interactions of :func:`_ng_run` from the state in ``rng`` (xoshiro words), ``v``
    (scalars, ``_V_*``), the inventories and the success and flip windows (``fails``,
    ``ring_c``/``ring_u``) until the run ends (returns False) or an unlimited-pool inventory has
    just filled its ``cap`` slots (returns True: the caller doubles ``cap`` and calls again).

    Kept apart from :func:`_ng_run` so that no array is reassigned inside the loop: Numba
    reference-counts an array variable that a loop may reassign, two atomic operations on every
    failed interaction (a quarter of the throughput). For the same reason its arguments are not
    grouped in tuples (unpacking them costs 2% on runs of 1000 interactions) and the speaker's
    utterance, the hearer's update and the collapse are written out here: as calls (even
    inlined), each array handed over is reference-counted on every interaction (a fifth of the
    throughput). All measured against the kernel of ddab843.
    """
    s0 = rng[0]
    s1 = rng[1]
    s2 = rng[2]
    s3 = rng[3]
    sh32 = np.uint64(32)
    sh11 = np.uint64(11)
    N = n_agents
    uN = np.uint64(N)
    uN1 = np.uint64(N - 1)
    unlimited = n_words == 0
    complete = indptr.shape[0] == 0
    has_bias = bias.shape[0] > 0
    L = 3 * N
    n_prod = r_prod.shape[1]
    record_hits = hits.shape[0] > 0
    next_word = v[_V_NEXT]
    nw = v[_V_NW]
    nd = v[_V_ND]
    fpos = v[_V_FPOS]
    due = v[_V_DUE]
    K = fails.shape[0]
    streak = v[_V_STREAK]
    slot = v[_V_SLOT]
    cur_c = v[_V_CURC]
    cur_u = v[_V_CURU]
    t_cons = v[_V_TCONS]
    winner = v[_V_WIN]
    t_s95 = v[_V_TS95]
    t_streak = v[_V_TSTREAK]
    t_flip = v[_V_TFLIP]
    nwmax = v[_V_NWMAX]
    tmax = v[_V_TMAX]
    ndmax = v[_V_NDMAX]
    stop_reason = v[_V_STOP]
    t = v[_V_T]
    r = v[_V_R]
    in_round = v[_V_INR]
    succ = v[_V_SUCC]
    grow = False
    while t < max_int:
        if in_round == 0:
            for q in range(n_prod):
                r_prod[r, q] = 0
                r_produ[r, q] = 0
        # --- pair
        x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
        sp = np.int64(((x >> sh32) * uN) >> sh32)
        if complete:
            x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
            h = np.int64(((x >> sh32) * uN1) >> sh32)
            if h >= sp:
                h += 1
        else:
            d = indptr[sp + 1] - indptr[sp]
            x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
            h = nbrs[indptr[sp] + np.int64(((x >> sh32) * np.uint64(d)) >> sh32)]
        bs_ = sp * cap
        bh = h * cap
        # --- speaker's utterance
        if any_committed and committed[sp]:
            w = cword
        else:
            k = ln[sp]
            if k == 0:
                if unlimited:
                    w = next_word
                    next_word += 1
                elif bias_empty:
                    tot = 0.0
                    for m in range(n_words):
                        tot += bias[m]
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    u = (np.float64(x >> sh11) * _INV53) * tot
                    acc = 0.0
                    w = -1
                    for m in range(n_words):
                        if bias[m] > 0.0:
                            w = m
                            acc += bias[m]
                            if u < acc:
                                break
                else:
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    w = np.int64(((x >> sh32) * np.uint64(n_words)) >> sh32)
                if keep_invented:
                    inv[bs_] = w
                    ln[sp] = 1
                    holders[w] += 1
                    if holders[w] == 1:
                        nd += 1
                    nw += 1
            elif k == 1:
                w = inv[bs_]
            else:
                tot = 0.0
                if has_bias:
                    for m in range(k):
                        tot += bias[inv[bs_ + m]]
                if tot > 0.0:
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    u = (np.float64(x >> sh11) * _INV53) * tot
                    acc = 0.0
                    w = -1
                    for m in range(k):
                        bw = bias[inv[bs_ + m]]
                        if bw > 0.0:
                            w = inv[bs_ + m]
                            acc += bw
                            if u < acc:
                                break
                else:
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    w = inv[np.uint64(bs_) + (((x >> sh32) * np.uint64(k)) >> sh32)]
            cur_u += 1
            if w == cword:
                cur_c += 1
            if n_prod > 0:
                r_produ[r, w] += 1
        if n_prod > 0:
            r_prod[r, w] += 1
        # --- hearer
        success = False
        if any_committed and committed[h]:
            success = w == cword
        else:
            ub = np.uint64(bh)  # unsigned indices: no negative-index wrap-around test per element
            for m in range(ln[h]):
                if inv[ub + np.uint64(m)] == w:
                    success = True
                    break
        if success:
            succ += 1
            collapse = True
            if beta < 1.0:
                collapse = False
                if beta > 0.0:
                    x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                    collapse = np.float64(x >> sh11) * _INV53 < beta
            if collapse:
                for side in range(2):
                    a = sp if side == 0 else h
                    ba = bs_ if side == 0 else bh
                    if ln[a] == 0:  # a speaker that did not keep its invented name adopts it
                        inv[ba] = w
                        ln[a] = 1
                        holders[w] += 1
                        if holders[w] == 1:
                            nd += 1
                        nw += 1
                    elif not committed[a]:  # collapse to w (which a holds)
                        ub = np.uint64(ba)
                        for m in range(ln[a]):
                            y = np.uint32(inv[ub + np.uint64(m)])
                            if y != w:
                                holders[y] -= 1
                                if holders[y] == 0:
                                    nd -= 1
                        nw += 1 - ln[a]
                        inv[ba] = w
                        ln[a] = 1
        elif not committed[h]:
            inv[np.uint64(bh + ln[h])] = w
            ln[h] += 1
            if unlimited and ln[h] == cap:
                grow = True  # full: the caller doubles every inventory before the next interaction
            uw = np.uint64(w)
            holders[uw] += 1
            if holders[uw] == 1:
                nd += 1
            nw += 1
        t += 1
        in_round += 1
        # --- observables
        if nw > nwmax:
            nwmax = nw
            tmax = t
        if nd > ndmax:
            ndmax = nd
        if t_cons < 0 and nd == 1 and nw == N:
            t_cons = t
            winner = inv[0]
            if stop_code == 1:
                stop_reason = 1
        ok = np.int64(success)
        if record_hits:
            hits[t - 1] = ok
        # 95% of the last L interactions succeeded <=> fewer than K = L // 20 + 1 failures among
        # them <=> the K-th latest failure is at index <= t - L, i.e. t >= due
        if t_s95 < 0:
            if not success:
                fails[fpos] = t
                fpos = fpos + 1 if fpos + 1 < K else 0
                due = fails[fpos] + L
            if t >= due:
                t_s95 = t
                if stop_code == 2:
                    stop_reason = 2
        streak = (streak + 1) * ok
        if streak >= L and t_streak < 0:
            t_streak = t
            if stop_code == 3:
                stop_reason = 3
        if in_round == N:
            r_count[r] = N
            r_succ[r] = succ
            r_nw[r] = nw
            r_nd[r] = nd
            slot = end_round(ring_c, ring_u, slot, cur_c, cur_u)
            cur_c = 0
            cur_u = 0
            if cword >= 0 and t_flip < 0 and r >= 2 and window_flip_reached(ring_c, ring_u, flip_thr):
                t_flip = t
                if stop_code == 4:
                    stop_reason = 4
            r += 1
            in_round = 0
            succ = 0
        if stop_reason != 0:
            break
        if grow:
            break
    rng[0] = s0
    rng[1] = s1
    rng[2] = s2
    rng[3] = s3
    v[_V_NEXT] = next_word
    v[_V_NW] = nw
    v[_V_ND] = nd
    v[_V_FPOS] = fpos
    v[_V_DUE] = due
    v[_V_STREAK] = streak
    v[_V_SLOT] = slot
    v[_V_CURC] = cur_c
    v[_V_CURU] = cur_u
    v[_V_TCONS] = t_cons
    v[_V_WIN] = winner
    v[_V_TS95] = t_s95
    v[_V_TSTREAK] = t_streak
    v[_V_TFLIP] = t_flip
    v[_V_NWMAX] = nwmax
    v[_V_TMAX] = tmax
    v[_V_NDMAX] = ndmax
    v[_V_STOP] = stop_reason
    v[_V_T] = t
    v[_V_R] = r
    v[_V_INR] = in_round
    v[_V_SUCC] = succ
    return grow and stop_reason == 0 and t < max_int


@njit(cache=True)
def _ng_run(seed, game, rule, rounds, hits, scal):
    """One minimal-naming-game run; writes the per-round rows ``rounds = (r_count, r_succ, r_nw,
    r_nd, r_prod, r_produ)`` and the scalar row ``scal``.

    ``game = (n_agents, n_words, indptr, nbrs, committed, cword, bias, beta, init_word,
    keep_invented, bias_empty)``, ``rule = (max_int, stop_code, flip_thr)``. An empty speaker keeps
    the name it invents when ``keep_invented`` (normlab's default), otherwise it only utters it
    (the authors' ``NG_module.py``); with ``bias_empty`` (and a bias) it draws that name from the
    bias weights instead of uniformly. When ``hits`` is not empty, it receives the success
    indicator of every interaction (``hits[t]`` for ``t < n_interactions``).

    Random draws per interaction, in this order (the reference twin consumes the same stream):
    speaker ``randbelow(N)``; hearer ``randbelow(N - 1)`` (complete graph) or
    ``randbelow(degree)``; if the speaker is empty and the pool finite, ``randbelow(W)`` (one
    ``uniform`` with ``bias_empty``); if it holds k > 1 names, ``randbelow(k)`` (or one
    ``uniform`` with a production bias whose weights over the held names sum to > 0); on success
    with 0 < beta < 1, one ``uniform``.

    This sets a run up and reads its result; :func:`_ng_steps` plays the interactions.
    """
    n_agents, n_words, indptr, nbrs, committed, cword, bias, beta, init_word, keep_invented, bias_empty = game
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    N = n_agents
    unlimited = n_words == 0
    # inventories, insertion-ordered: agent a's names are inv[a * cap : a * cap + ln[a]]
    max_init = -1
    for a in range(N):
        if init_word[a] > max_init:
            max_init = init_word[a]
    if unlimited:
        cap = 8
        n_ids = N + 2 + max(max_init, cword)
        next_word = max(max_init, cword, 0) + 1  # id 0 is reserved for committed agents
    else:
        cap = n_words
        n_ids = n_words
        next_word = 0
    inv = np.empty(N * cap, np.int32)
    ln = np.zeros(N, np.int64)
    holders = np.zeros(n_ids, np.int64)
    nw = 0  # total inventory size N_w
    nd = 0  # distinct names present
    any_committed = np.any(committed)  # a typed value (a literal False would compile a second _ng_steps)
    for a in range(N):
        w0 = cword if committed[a] else init_word[a]
        if w0 >= 0:
            nd += _add_word(inv, ln, a * cap, a, w0, holders)
            nw += 1
    v = np.zeros(_NV, np.int64)
    v[_V_NEXT] = next_word
    v[_V_NW] = nw
    v[_V_ND] = nd
    v[_V_NWMAX] = nw
    v[_V_NDMAX] = nd
    for q in (_V_TCONS, _V_WIN, _V_TS95, _V_TSTREAK, _V_TFLIP):
        v[q] = -1
    rng = np.empty(4, np.uint64)
    for q in range(4):
        rng[q] = seed[q]
    v[_V_DUE] = 3 * N
    fails = np.zeros(3 * N // 20 + 1, np.int64)  # indices of the latest failures (a ring)
    ring_c = np.zeros(3, np.int64)  # committed-name / all uncommitted productions of the last 3 rounds
    ring_u = np.zeros(3, np.int64)
    max_int, stop_code, flip_thr = rule
    while _ng_steps(rng, v, inv, cap, ln, holders, N, n_words, indptr, nbrs, committed, cword, bias, beta, max_int,
                    stop_code, flip_thr, keep_invented, bias_empty, any_committed, fails, ring_c, ring_u, r_count,
                    r_succ, r_nw, r_nd, r_prod, r_produ, hits):
        new = np.empty(2 * N * cap, np.int32)  # grow every inventory (unlimited pool only)
        for a in range(N):
            for m in range(ln[a]):
                new[2 * a * cap + m] = inv[a * cap + m]
        inv = new
        cap *= 2
    r = v[_V_R]
    in_round = v[_V_INR]
    if in_round > 0:  # partial last round
        r_count[r] = in_round
        r_succ[r] = v[_V_SUCC]
        r_nw[r] = v[_V_NW]
        r_nd[r] = v[_V_ND]
    scal[S_NINT] = v[_V_T]
    scal[S_CONS] = v[_V_TCONS]
    scal[S_WIN] = v[_V_WIN]
    scal[S_TMAX] = v[_V_TMAX]
    scal[S_NWMAX] = v[_V_NWMAX]
    scal[S_NDMAX] = v[_V_NDMAX]
    scal[S_S95] = v[_V_TS95]
    scal[S_STREAK] = v[_V_TSTREAK]
    scal[S_FLIP] = v[_V_TFLIP]
    scal[S_STOP] = v[_V_STOP]


@njit(parallel=True, cache=True)
def _ng_batch(seeds, game, rule, rounds, hits, scal):
    """Run ``seeds.shape[0]`` independent replicates in parallel (one per seed row; ``rounds``
    and ``hits`` hold one row per replicate)."""
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    for b in prange(seeds.shape[0]):
        _ng_run(seeds[b], game, rule, (r_count[b], r_succ[b], r_nw[b], r_nd[b], r_prod[b], r_produ[b]), hits[b],
                scal[b])


@njit(cache=True)
def _ng_batch_serial(seeds, game, rule, rounds, hits, scal):
    """:func:`_ng_batch` without threads (small batches: no parallel-region overhead)."""
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    for b in range(seeds.shape[0]):
        _ng_run(seeds[b], game, rule, (r_count[b], r_succ[b], r_nw[b], r_nd[b], r_prod[b], r_produ[b]), hits[b],
                scal[b])


@njit(cache=True)
def _ng_batch_ragged(seeds, game, rule, rounds, hits, scal, pos):
    """:func:`_ng_batch_serial` writing the rounds of run after run from row ``pos`` of the ragged
    outputs (``hits`` empty); stops before a run that might not fit. Returns (runs done, next row)."""
    n_agents = game[0]
    max_int = rule[0]
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    R = (max_int + n_agents - 1) // n_agents
    for b in range(seeds.shape[0]):
        if pos + R > r_count.shape[0]:
            return b, pos
        _ng_run(seeds[b], game, rule, (r_count[pos:], r_succ[pos:], r_nw[pos:], r_nd[pos:], r_prod[pos:],
                                       r_produ[pos:]), hits, scal[b])
        pos += (scal[b, S_NINT] + n_agents - 1) // n_agents
    return seeds.shape[0], pos


def _parse_initial(initial, n_agents, n_words, names):
    """Initial names per agent (-1 = empty) from None / "consensus" / "consensus:<name>" / int / array."""
    init = np.full(n_agents, -1, np.int64)
    label = "empty"
    if initial is None or (isinstance(initial, str) and initial == "empty"):
        return init, label
    if isinstance(initial, str):
        if not initial.startswith("consensus"):
            raise ValueError(f"initial must be None, 'empty', 'consensus', 'consensus:<name>', an int or an array; got {initial!r}")
        _, _, nm = initial.partition(":")
        if nm == "":
            idx = 0
        elif names and nm in names:
            idx = names.index(nm)
        elif nm.isdigit():
            idx = int(nm)
        else:
            raise ValueError(f"unknown name {nm!r} in initial={initial!r}; "
                             + (f"names are {names}" if names else "without names, give a name index "
                                "(consensus:0, consensus:1, ...)"))
        initial = idx
    if isinstance(initial, numbers.Integral) and not isinstance(initial, (bool, np.bool_)):
        idx = int(initial)
        if idx < 0 or (n_words and idx >= n_words):
            raise ValueError(f"initial consensus name index must be in [0, {max(n_words - 1, 0)}]; got {idx}")
        init[:] = idx
        label = f"consensus:{names[idx] if names else idx}"
        return init, label
    arr = np.asarray(initial)
    if arr.shape != (n_agents,) or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"initial as an array must be {n_agents} integer name indices (-1 = empty)")
    if arr.min() < -1 or (n_words and arr.max() >= n_words):
        raise ValueError(f"initial name indices must lie in [-1, {max(n_words - 1, 0)}]")
    return arr.astype(np.int64), "custom"


def _pool_names(names, W: int) -> tuple:
    """The name labels of a finite pool: given (validated), else ``"0"``, ``"1"``, ..."""
    if names is None:
        return tuple(str(k) for k in range(W))
    from normlab.schema import validate_names  # schema imports pandas: only when names are given

    if W == 0:
        raise ValueError("names can only be given for a finite pool (n_words=W)")
    names = validate_names(names)
    if len(names) != W:
        raise ValueError(f"got {len(names)} names for a pool of n_words={W}")
    return names


def _production_bias(production_bias, W: int) -> np.ndarray:
    """The bias as float64 weights over the ``W`` names (empty: none), checked."""
    if production_bias is None:
        return np.zeros(0, np.float64)
    if W == 0:
        raise ValueError("production_bias needs a finite pool (n_words=W)")
    bias = np.asarray(production_bias, dtype=np.float64)
    if bias.shape != (W,):
        raise ValueError(f"production_bias must have one weight per name, shape ({W},); got {bias.shape}")
    if not np.all(np.isfinite(bias)) or bias.min() < 0 or bias.sum() <= 0:
        raise ValueError("production_bias must be non-negative finite weights with a positive sum (a probability vector, up to scale)")
    if not np.isclose(bias.sum(), 1.0):
        raise ValueError(f"production_bias must be a probability vector summing to 1; sums to {bias.sum():.6g}")
    return bias


def _invent(value, name):
    if not isinstance(value, str) or value not in ("keep", "discard"):
        raise ValueError(f"invent must be 'keep' or 'discard'; got {value!r}")
    return value


def _true_or_false(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def _bias_empty(value, name, values):
    value = _true_or_false(value, name)
    if value and values["production_bias"] is None:
        raise ValueError("bias_empty=True needs a production_bias")
    return value


def _beta(value, name):
    if not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"beta must be a probability in [0, 1]; got {value!r}")
    return float(value)


@validated
@dataclass(frozen=True, eq=False)
class NamingRules:
    """How the minimal naming game's agents speak and listen (:func:`minimal_naming_game` has the
    details of each rule).

    Parameters
    ----------
    production_bias : array_like of float, optional
        Weights over the ``W`` names of a finite pool for a speaker holding several names
        (checked against the pool by the game).
    beta : float
        Probability that a success collapses the inventories (β-model; 1 = minimal game).
    invent : {"keep", "discard"}
        Whether an empty speaker keeps the name it invents or only utters it.
    bias_empty : bool
        An empty speaker draws its name from the bias weights too (needs ``production_bias``).
    per_interaction : bool
        Also record every interaction's success, summed over runs.
    """

    production_bias: object = None
    beta: float = 1.0
    invent: str = "keep"
    bias_empty: bool = False
    per_interaction: bool = False

    _parameter_constraints = {"invent": Check(_invent), "per_interaction": Check(_true_or_false),
                              "bias_empty": Relation(_bias_empty), "beta": Check(_beta)}


def minimal_naming_game(
    n_agents: int,
    *,
    n_words: int | None = None,
    n_runs: int = 1,
    graph=None,
    committed=0,
    production_bias=None,
    beta: float = 1.0,
    initial=None,
    max_interactions: int | None = None,
    stop: str = "consensus",
    flip_threshold: float = PUBLISHED_FLIP_THRESHOLD,
    names=None,
    invent: str = "keep",
    bias_empty: bool = False,
    per_interaction: bool = False,
    progress: bool | None = None,
    rng=None,
) -> GameResult:
    """Simulate the minimal naming game (replicates in parallel, one child seed per run).

    The keywords are a convenience: they are checked, then built into a
    :class:`~normlab.theory.spec.GameSpec` (population, pool, committed agents, initial
    inventories, graph, stop rule and cap) and :class:`NamingRules` (production bias, β,
    invention, per-interaction record) for :func:`play_naming_game`, the engine.

    Parameters
    ----------
    n_agents : int
        Population size ``N`` (>= 2).
    n_words : int, optional
        Size ``W`` of a finite name pool (Flint Ashery et al. 2025); ``None`` (default) lets empty speakers invent
        brand-new words (Baronchelli et al. 2006).
    n_runs : int, optional
        Number of independent replicates.
    graph : networkx.Graph, optional
        Interaction network (speaker = random node, hearer = random neighbour); complete graph
        if omitted.
    committed : int or array_like of int, optional
        Number of committed agents (the last ``k`` agents) or their indices. They are committed
        to the last name of the pool (``W - 1``), or to word ``0`` for the unlimited pool.
    production_bias : array_like of float, optional
        Weights over the ``W`` names: a speaker holding several names picks one with probability
        proportional to its weight (Fig. S3 of Flint Ashery et al. 2025 uses ``(1 - b, b)`` for ``W = 2``).
        Finite pool only. Held names whose weights are all zero are chosen uniformly.
    beta : float, optional
        Probability that a success collapses the inventories (β-model; 1 = minimal game).
    initial : None, str, int or array_like, optional
        ``None``/``"empty"``: empty inventories; ``"consensus"`` or ``"consensus:<name>"`` or a
        name index: every uncommitted agent starts holding that single name; an array of ``N``
        name indices (``-1`` = empty) sets each agent.
    max_interactions : int, optional
        Cap on interactions per run (default: 1000 rounds, or ``40 N^1.5`` for the unlimited pool).
    stop : {"consensus", "success95", "streak", "flip", "max"}, optional
        End a run at consensus (all agents hold one same name); when 95% of the last ``3N``
        interactions succeeded (Flint Ashery et al. 2025, Methods); after ``3N`` consecutive successes (the
        published LLM runs); at the flip criterion; or only at ``max_interactions``.
    flip_threshold : float, optional
        Share of the committed name among uncommitted agents' productions over the last 3
        rounds that counts as a flip (default 2.849/3, the published criterion).
    names : sequence of str, optional
        Labels of the ``W`` names (default ``"0"``, ``"1"``, ...).
    invent : {"keep", "discard"}, optional
        What an empty speaker does with the name it invents (or draws from the pool): ``"keep"``
        (default) adds it to its inventory, as in Baronchelli et al. (2006); ``"discard"`` only
        utters it -- it holds the name only if the interaction succeeds -- as in the authors'
        ``NG_module.py``, which produced the theory line of Fig. 1A of Flint Ashery et al. 2025 (round-1 success
        0.058 instead of 0.112 at N = 24, W = 10).
    bias_empty : bool, optional
        With ``production_bias``: an empty speaker also draws the name it utters from the bias
        weights, instead of uniformly from the pool -- an agent that "has the option of producing
        either name" (Flint Ashery et al. 2025, Fig. S3 caption), which puts the first round's production at the
        bias, as in the published figure. Default ``False`` (the bias acts on held names only).
    per_interaction : bool, optional
        Also record the success of every interaction, summed over runs, for
        :meth:`GameResult.success_by_interaction` (the per-interaction curve of Fig. 1A's inset).
    progress : bool, optional
        Show a tqdm bar over runs (default: when more than 1000 runs).
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, optional
        Seed; run ``k`` uses child ``k`` of its SeedSequence.

    Returns
    -------
    GameResult
        Per-run ``consensus_time`` (NaN if not reached), ``winner``, ``t_max``, ``n_words_max``,
        ``n_distinct_max``; per-round success, ``N_w``, distinct names and production counts;
        ``success_rate()`` and ``to_frame()``.

    References
    ----------
    Implements the minimal naming game of Baronchelli et al., Phys. Rev. E 73, 015102 (2006),
    with the finite pool of Flint Ashery et al., Sci. Adv. 11, eadu9368 (2025), Supplementary
    Text (``invent="discard"``: their published code, ``NG_module.py``, Fig. 1A); the β-model of Baronchelli et al., Phys. Rev. E 76, 051102 (2007); committed agents as
    in Xie et al., Phys. Rev. E 84, 011130 (2011).

    Examples
    --------
    >>> from normlab.theory import minimal_naming_game
    >>> res = minimal_naming_game(24, n_words=10, n_runs=100, rng=1)
    >>> res.success_rate().head()  # doctest: +SKIP
    """
    N = check_int(n_agents, "n_agents", low=2)
    W = 0 if n_words is None else check_int(n_words, "n_words", low=1)
    R = check_int(n_runs, "n_runs", low=1)
    check_stop(stop)
    rules = NamingRules(production_bias=production_bias, beta=beta, invent=invent, bias_empty=bias_empty,
                        per_interaction=per_interaction)
    _flip_threshold(flip_threshold, "flip_threshold")
    given = names
    names = _pool_names(names, W)
    mask = committed_mask(committed, N)
    cword = -1
    if mask.any():
        cword = W - 1 if W else 0
    if stop == "flip" and cword < 0:
        raise ValueError("stop='flip' needs committed agents")
    _production_bias(rules.production_bias, W)
    init, _ = _parse_initial(initial, N, W, names)
    if W == 0 and init.max() >= 0 and cword == 0 and np.any(init == 0):
        raise ValueError("for the unlimited pool, word 0 is reserved for committed agents; start others on ids >= 1")
    net = Network.of(graph, N)
    run = RunLength(stop, default_max_interactions(N, stop, W == 0) if max_interactions is None else max_interactions)
    spec = GameSpec(n_agents=N, n_names=W or None, names=None if given is None else names, committed=committed,
                    committed_name=cword if cword >= 0 else None, initial=initial, graph=net, run=run,
                    flip_threshold=flip_threshold)
    return play_naming_game(spec, rules, n_runs=R, progress=progress, rng=rng)


def play_naming_game(spec: GameSpec, rules: NamingRules | None = None, *, n_runs: int = 1, progress=None,
                     rng=None) -> GameResult:
    """The engine of :func:`minimal_naming_game`: the game ``spec`` describes under ``rules``.

    ``spec.n_names`` ``None`` is the unlimited pool; ``spec.memory`` is not read (inventories
    have no window); ``spec.committed_name`` ``None``: the last name of the pool (word 0 of the
    unlimited pool) when agents are committed; a cap of ``None``: 1000 rounds, or ``40 N^1.5``
    interactions for the unlimited pool. Same seeds, same runs as the keyword call.
    """
    rules = NamingRules() if rules is None else rules
    R = check_int(n_runs, "n_runs", low=1)
    N, W, stop = spec.n_agents, spec.n_names or 0, spec.run.stop
    names = _pool_names(spec.names, W)
    mask = spec.committed_mask()
    cword = _naming_challenger(spec.committed_name, names, W, mask)
    if stop == "flip" and cword < 0:
        raise ValueError("stop='flip' needs committed agents")
    bias = _production_bias(rules.production_bias, W)
    init, init_label = _parse_initial(spec.initial, N, W, names)
    if W == 0 and init.max() >= 0 and cword == 0 and np.any(init == 0):
        raise ValueError("for the unlimited pool, word 0 is reserved for committed agents; start others on ids >= 1")
    indptr, nbrs = spec.csr()
    T = spec.run.interactions(N, default=default_max_interactions(N, stop, W == 0))
    if spec.run.cap is None or spec.run.unit != "interactions" or spec.memory is not None \
            or spec.committed_name != (cword if cword >= 0 else None):  # the spec as resolved, for the result
        spec = replace(spec, memory=None, run=RunLength(stop, T), committed_name=cword if cword >= 0 else None)
    if progress is None:
        progress = R > 1000
    ss, seeds = run_seeds(rng, R)
    args = ((N, W, indptr, nbrs, mask, cword, bias, rules.beta, init, rules.invent == "keep", rules.bias_empty),  # game
            (T, spec.run.code, spec.flip_threshold))  # rule
    kernel = choose_kernel(_ng_batch, _ng_batch_serial, R, T)
    out = run_batches(kernel, seeds, N, W, T, args, progress, "naming game", hits=T if rules.per_interaction else 0,
                      ragged=_ng_batch_ragged if kernel is _ng_batch_serial else None)
    warn_unfinished(stop, out["scal"][:, S_STOP], T, stacklevel=4)  # names the caller of minimal_naming_game
    net = spec.graph
    return game_result(
        out, spec, model="minimal", names=names, seed=ss,
        params=dict(beta=rules.beta, production_bias=bias.tolist() or None, initial_label=init_label,
                    graph=None if net is None else f"{net.kind}({net.n_nodes} nodes, {net.n_edges} edges)",
                    flip_threshold=spec.flip_threshold, invent=rules.invent, bias_empty=rules.bias_empty),
    )


def _naming_challenger(committed_name, names, W: int, mask) -> int:
    """The committed agents' word: given (index, or label of a finite pool), else the last name
    of the pool (word 0 of the unlimited pool) when agents are committed, else -1."""
    if committed_name is None:
        return (W - 1 if W else 0) if mask.any() else -1
    if isinstance(committed_name, str):
        if committed_name not in names:
            raise ValueError(f"committed_name {committed_name!r} is not in {names}")
        return names.index(committed_name)
    return int(committed_name)
