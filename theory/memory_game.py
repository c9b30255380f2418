"""The memory-H strategy-table game that LLM agents play in Flint Ashery et al. (2025).

Each interaction pairs a random agent with a random neighbour; both pick a name at the same time
(an uncommitted agent by its strategy p(name | own last H interactions), a committed agent its
fixed name); both record ``(own name, partner's name)``; success means equal names.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Experimental
Setup, Table 1, Figs. 3, S8-S10 (strategies by memory state, committed minorities);
D. Centola, J. Becker, D. Brackbill, A. Baronchelli, Science 360, 1116 (2018) (best response).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from normlab._jit import kernel_variant, njit, prange
from normlab._rng import run_seeds
from normlab._validate import check_int

from ._batch import (
    S_CONS, S_ERR, S_FLIP, S_NDMAX, S_NINT, S_NWMAX, S_S95, S_STOP, S_STREAK, S_TMAX, S_WIN, SG_SCALARS,
    RunRows, choose_kernel, game_result, run_batches,
)
from ._common import check_stop, warn_unfinished
from ._criteria_kernels import end_round, window_flip_reached
from ._prng import _INV53, _next4
from ._sg_inputs import (
    PerRunTables, _challenger, _check_memory, _check_order_for, _kernel_params, _parse_sg_initial, _resolve_groups,
    _sg_names,
)
from .criteria import PUBLISHED_FLIP_THRESHOLD
# the prediction design lives in design.py; its names stay importable from here (calibration, tests)
from .design import _choice_thresholds, _sg_design, _sg_lean_run, strategy_design  # noqa: F401
from .population import committed_mask
from .results import GameResult
from .spec import GameSpec, Network, RunLength, _flip_threshold
from .strategies import KIND_BEST_RESPONSE, KIND_TABLE, KIND_USER, KIND_WSLS, _strategy_probs

__all__ = ["strategy_game", "play_strategy_game", "strategy_design"]


# Per-agent fields of the kernel's state array ``st`` (row ``a * _NF``): memory ring head and
# length, state code, last partner name, run of successes on ``_SNAME``, strategy kind and offset
# of its parameters (one strategy per group of agents).
_HEAD, _MLEN, _CODE, _LASTP, _SRUN, _SNAME, _KIND, _POFF = range(8)
_NF = 8
_UHEAD, _UMLEN, _UCODE, _ULASTP, _USRUN, _USNAME, _UKIND, _UPOFF = (np.uint64(v) for v in range(8))  # unsigned twins


@njit
def _remember(a, x, y, W, H, B, top_pow, st, ring, cnt, gs, nw, nd):
    """Record (own ``x``, partner ``y``) in agent ``a``'s memory; return (the name it is settled
    on after the push or -1, N_w, n_distinct).

    State: ``st`` per-agent fields (above); ``ring`` the last ``H`` own names then the last ``H``
    partner names of each agent (a ring, oldest at ``head`` once full); ``cnt`` per agent the
    count of each name in its memory, then of each partner name; ``gs`` per name the agents
    whose memory holds it, then the agents settled on it. Unsigned indices: no negative-index
    wrap-around test. The kernel calls it for the initial memories and runs the same steps
    written out in its loop (a call there costs a fifth to a third of the throughput).
    """
    f = np.uint64(a * _NF)
    k = st[f + _UMLEN]
    e = x * W + y
    ro = np.uint64(a * 2 * H)
    rp = ro + np.uint64(H)  # partner names
    co = np.uint64(a * 2 * W)
    cp = co + np.uint64(W)  # partner counts
    if k < H:
        ring[ro + np.uint64(k)] = x
        ring[rp + np.uint64(k)] = y
        st[f + _UMLEN] = k + 1
        st[f + _UCODE] = st[f + _UCODE] * B + e
    else:
        pos = np.uint64(st[f + _UHEAD])
        ox = ring[ro + pos]
        oy = ring[rp + pos]
        ring[ro + pos] = x
        ring[rp + pos] = y
        pos += np.uint64(1)
        if pos == np.uint64(H):
            pos = np.uint64(0)
        st[f + _UHEAD] = np.int64(pos)
        st[f + _UCODE] = (st[f + _UCODE] - (ox * W + oy) * top_pow) * B + e  # = (code % B**(H-1)) * B + e
        for w in (ox, oy):
            uw = np.uint64(w)
            c = cnt[co + uw] - 1
            cnt[co + uw] = c
            if c == 0:
                nw -= 1
                g = gs[uw] - 1
                gs[uw] = g
                if g == 0:
                    nd -= 1
        cnt[cp + np.uint64(oy)] -= 1
    for w in (x, y):
        uw = np.uint64(w)
        c = cnt[co + uw] + 1
        cnt[co + uw] = c
        if c == 1:
            nw += 1
            g = gs[uw] + 1
            gs[uw] = g
            if g == 1:
                nd += 1
    cnt[cp + np.uint64(y)] += 1
    st[f + _ULASTP] = y
    sn = st[f + _USNAME]
    before = sn if st[f + _USRUN] >= H else -1
    if x == y:
        if sn == x:
            st[f + _USRUN] += 1
        else:
            st[f + _USNAME] = x
            st[f + _USRUN] = 1
    else:
        st[f + _USNAME] = -1
        st[f + _USRUN] = 0
    after = st[f + _USNAME] if st[f + _USRUN] >= H else -1
    if before != after:
        if before >= 0:
            gs[W + before] -= 1
        if after >= 0:
            gs[W + after] += 1
    return after, nw, nd


@njit
def _choose(u, probs, W):
    """Name picked by the uniform ``u`` from ``probs``: first q with u < cumulative sum; -1 if
    the vector is not a probability vector."""
    tot = 0.0
    for q in range(W):
        pq = probs[q]
        if not (pq >= 0.0) or pq > 1.0 + 1e-9:
            return -1
        tot += pq
    if abs(tot - 1.0) > 1e-6:
        return -1
    acc = 0.0
    choice = -1
    for q in range(W):
        if probs[q] > 0.0:
            choice = q
            acc += probs[q]
            if u < acc:
                break
    return choice


@njit
def _chronological(a, k, H, st, ring, own, partner):
    """Copy agent ``a``'s ``k`` memory entries, oldest first, into ``own`` / ``partner``."""
    pos = st[a * _NF + _HEAD]
    ro = a * 2 * H
    for i in range(k):
        own[i] = ring[ro + pos]
        partner[i] = ring[ro + H + pos]
        pos += 1
        if pos == H:
            pos = 0


def _sg_play_py(seed, game, rule, rounds, rec, scal):
    """One strategy-game run (compiled below with the built-in strategies, or per user function).

    ``game = (n_agents, W, H, indptr, nbrs, committed, cword, kinds, poffs, params, init_own,
    init_len)``, ``rule = (max_int, stop_code, flip_thr, order_mode)``, ``rounds = (r_count, r_succ, r_nw,
    r_nd, r_prod, r_produ)`` (per-round outputs), ``rec = (rec_pairs, rec_names)`` (every
    interaction, or empty), ``scal`` the scalar row (``S_*`` of :mod:`normlab.theory._batch`).

    Random draws per interaction, in this order (the reference twin consumes the same stream):
    first agent ``randbelow(N)``; partner ``randbelow(N - 1)`` (complete graph) or
    ``randbelow(degree)``; then one ``uniform`` for each uncommitted agent of the pair, first
    agent first, turned into a name as :func:`_choose` would.

    Name order (:mod:`normlab.theory.name_order`): with ``order_mode`` 0 nothing else is drawn
    and a table's parameters are its ``n_states`` rows. With a first-listed bias they are ``W``
    blocks of ``n_states`` rows (block ``f``: name ``f`` listed first) and the name listed first is
    ``randbelow(W)``, drawn once per interaction after the partner (mode 1, shared: the authors'
    ``committed()``) or once per uncommitted agent just before its ``uniform`` (mode 2,
    independent: ``population()``); only table strategies play with a bias.

    Agent ``a`` plays strategy kind ``kinds[a]`` with parameters ``params[poffs[a]:]`` (one
    strategy per group of agents; the same for all in a homogeneous population).
    Memories are rings of ``H`` entries with an incrementally kept base-``W**2`` state code;
    tables, best response and win-stay-lose-shift pick a name without building a probability
    vector, with the same partial sums (hence the same choices) as :func:`_choose`. The choice and
    the memory update (:func:`_remember`) are written out in the loop: as calls, even inlined ones,
    they halve the throughput (Numba reference-counts every array handed to a callee, twice per
    call and array).
    """
    N, W, H, indptr, nbrs, committed, cword, kinds, poffs, params, init_own, init_len = game
    max_int, stop_code, flip_thr, omode = rule
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    rec_pairs, rec_names = rec
    s0 = seed[0]
    s1 = seed[1]
    s2 = seed[2]
    s3 = seed[3]
    B = W * W
    complete = indptr.shape[0] == 0
    offsets = np.empty(H + 1, np.int64)
    offsets[0] = 0
    pw = 1
    for k in range(1, H + 1):
        offsets[k] = offsets[k - 1] + pw
        pw *= B
    top_pow = pw // B  # B ** (H - 1)
    S_ord = offsets[H] + pw  # states per name-order block of a table (order modes 1, 2)
    st = np.zeros(N * _NF, np.int64)
    for a in range(N):
        st[a * _NF + _SNAME] = -1
        st[a * _NF + _KIND] = kinds[a]
        st[a * _NF + _POFF] = poffs[a]
    ring = np.zeros(N * 2 * H, np.int64)
    cnt = np.zeros(N * 2 * W, np.int64)
    gs = np.zeros(2 * W, np.int64)
    nw = np.int64(0)  # N_w: distinct names summed over memories (a committed agent counts its one name)
    nd = np.int64(0)  # distinct names present (typed values: literal zeros would compile a second _remember)
    n_unc = 0
    for a in range(N):
        if committed[a]:
            gs[cword] += 1
            if gs[cword] == 1:
                nd += 1
            nw += 1
        else:
            n_unc += 1
            for i in range(init_len[a]):
                _, nw, nd = _remember(a, init_own[a, i], init_own[a, i], W, H, B, top_pow, st, ring, cnt, gs, nw, nd)
    probs = np.empty(W)
    own = np.empty(H, np.int64)
    partner = np.empty(H, np.int64)
    record = rec_pairs.shape[0] > 0
    L = 3 * N
    window = np.zeros(L, np.int8)
    widx = 0
    wsum = 0
    streak = 0
    ring_c = np.zeros(3, np.int64)
    ring_u = np.zeros(3, np.int64)
    slot = 0  # r % 3
    cur_c = 0
    cur_u = 0
    t_cons = -1
    winner = -1
    t_s95 = -1
    t_streak = -1
    t_flip = -1
    t_err = -1
    nwmax = nw
    tmax = 0
    ndmax = nd
    stop_reason = 0
    uN = np.uint64(N)
    uN1 = np.uint64(N - 1)
    uH = np.uint64(H)
    uW = np.uint64(W)
    sh32 = np.uint64(32)
    sh11 = np.uint64(11)
    t = 0
    r = 0
    in_round = 0
    succ = 0
    while t < max_int:
        if in_round == 0:
            for q in range(W):
                r_prod[r, q] = 0
                r_produ[r, q] = 0
        x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
        i = np.int64(((x >> sh32) * uN) >> sh32)
        if complete:
            x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
            j = np.int64(((x >> sh32) * uN1) >> sh32)
            if j >= i:
                j += 1
        else:
            d = indptr[i + 1] - indptr[i]
            x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
            j = nbrs[indptr[i] + np.int64(((x >> sh32) * np.uint64(d)) >> sh32)]
        i_unc = not committed[i]
        j_unc = not committed[j]
        fo = 0  # the name listed first (order modes: 1 shared per interaction, 2 per agent)
        if omode == 1:
            x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
            fo = np.int64(((x >> sh32) * uW) >> sh32)
        # simultaneous choices (from the memories before this interaction), first agent first
        ci = cword
        cj = cword
        for side in range(2):
            a = i if side == 0 else j
            if committed[a]:
                continue
            if omode == 2:
                x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
                fo = np.int64(((x >> sh32) * uW) >> sh32)
            x, s0, s1, s2, s3 = _next4(s0, s1, s2, s3)
            u = np.float64(x >> sh11) * _INV53
            f = np.uint64(a * _NF)  # unsigned indices: no negative-index wrap-around test
            k = st[f + _UMLEN]
            kd = st[f + _UKIND]
            c = -1
            if kd == KIND_TABLE:
                base = np.uint64(st[f + _UPOFF] + (fo * S_ord + offsets[k] + st[f + _UCODE]) * W)
                tot = 0.0
                open_ = True
                bad = False
                for q in range(W):
                    pq = params[base + np.uint64(q)]
                    if not (pq >= 0.0) or pq > 1.0 + 1e-9:
                        bad = True
                        break
                    tot += pq  # adding a zero changes no partial sum: same sums as _choose
                    if open_ and pq > 0.0:
                        c = q
                        if u < tot:
                            open_ = False
                if bad or abs(tot - 1.0) > 1e-6:
                    c = -1
            elif kd == KIND_BEST_RESPONSE or (kd == KIND_WSLS and k == 0):
                co = np.uint64(a * 2 * W + W)  # partner counts
                top = 0
                n_top = W
                if k > 0:
                    for q in range(W):
                        if cnt[co + np.uint64(q)] > top:
                            top = cnt[co + np.uint64(q)]
                    n_top = 0
                    for q in range(W):
                        if cnt[co + np.uint64(q)] == top:
                            n_top += 1
                p = 1.0 / n_top
                acc = 0.0
                for q in range(W):
                    if k == 0 or cnt[co + np.uint64(q)] == top:
                        c = q
                        acc += p
                        if u < acc:
                            break
            elif kd == KIND_WSLS:
                c = st[f + _ULASTP]  # the one-hot vector on the last partner's name
            else:
                _chronological(a, k, H, st, ring, own, partner)
                _strategy_probs(kd, own, partner, k, offsets[k] + st[f + _UCODE], W, H, params[st[f + _UPOFF]:],
                                probs)
                c = _choose(u, probs, W)
            if side == 0:
                ci = c
            else:
                cj = c
        if ci < 0 or cj < 0:
            t_err = t
            break
        if record:
            rec_pairs[t, 0] = i
            rec_pairs[t, 1] = j
            rec_names[t, 0] = ci
            rec_names[t, 1] = cj
        r_prod[r, ci] += 1
        r_prod[r, cj] += 1
        if i_unc:
            r_produ[r, ci] += 1
            cur_u += 1
            if ci == cword:
                cur_c += 1
        if j_unc:
            r_produ[r, cj] += 1
            cur_u += 1
            if cj == cword:
                cur_c += 1
        success = ci == cj
        if success:
            succ += 1
        # both record (own, partner): _remember written out (a call costs a fifth to a third of the throughput)
        new_settled = -1
        for side in range(2):
            if side == 0:
                a = i
                x = ci
                y = cj
            else:
                a = j
                x = cj
                y = ci
            if committed[a]:
                continue
            f = np.uint64(a * _NF)  # unsigned indices: no negative-index wrap-around test
            k = st[f + _UMLEN]
            e = x * W + y
            ro = np.uint64(a * 2 * H)
            rp = ro + uH  # partner names
            co = np.uint64(a * 2 * W)
            cp = co + uW  # partner counts
            if k < H:
                ring[ro + np.uint64(k)] = x
                ring[rp + np.uint64(k)] = y
                st[f + _UMLEN] = k + 1
                st[f + _UCODE] = st[f + _UCODE] * B + e
            else:
                pos = np.uint64(st[f + _UHEAD])
                ox = ring[ro + pos]
                oy = ring[rp + pos]
                ring[ro + pos] = x
                ring[rp + pos] = y
                pos += np.uint64(1)
                if pos == uH:
                    pos = np.uint64(0)
                st[f + _UHEAD] = np.int64(pos)
                st[f + _UCODE] = (st[f + _UCODE] - (ox * W + oy) * top_pow) * B + e
                for w in (ox, oy):
                    uw = np.uint64(w)
                    c = cnt[co + uw] - 1
                    cnt[co + uw] = c
                    if c == 0:
                        nw -= 1
                        g = gs[uw] - 1
                        gs[uw] = g
                        if g == 0:
                            nd -= 1
                cnt[cp + np.uint64(oy)] -= 1
            for w in (x, y):
                uw = np.uint64(w)
                c = cnt[co + uw] + 1
                cnt[co + uw] = c
                if c == 1:
                    nw += 1
                    g = gs[uw] + 1
                    gs[uw] = g
                    if g == 1:
                        nd += 1
            cnt[cp + np.uint64(y)] += 1
            st[f + _ULASTP] = y
            sn = st[f + _USNAME]
            before = sn if st[f + _USRUN] >= H else -1
            if x == y:
                if sn == x:
                    st[f + _USRUN] += 1
                else:
                    st[f + _USNAME] = x
                    st[f + _USRUN] = 1
            else:
                st[f + _USNAME] = -1
                st[f + _USRUN] = 0
            after = st[f + _USNAME] if st[f + _USRUN] >= H else -1
            if before != after:
                if before >= 0:
                    gs[W + before] -= 1
                if after >= 0:
                    gs[W + after] += 1
            if side == 0 or after >= 0:
                new_settled = after
        t += 1
        in_round += 1
        if nw > nwmax:
            nwmax = nw
            tmax = t
        if nd > ndmax:
            ndmax = nd
        if t_cons < 0 and new_settled >= 0 and gs[W + new_settled] == n_unc and (cword < 0 or cword == new_settled):
            t_cons = t
            winner = new_settled
            if stop_code == 1:
                stop_reason = 1
        ok = 1 if success else 0
        wsum += ok - window[widx]
        window[widx] = ok
        widx += 1
        if widx == L:
            widx = 0
        if t_s95 < 0 and t >= L and 100 * wsum >= 95 * L:
            t_s95 = t
            if stop_code == 2:
                stop_reason = 2
        if success:
            streak += 1
            if t_streak < 0 and streak >= L:
                t_streak = t
                if stop_code == 3:
                    stop_reason = 3
        else:
            streak = 0
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
    if in_round > 0:
        r_count[r] = in_round
        r_succ[r] = succ
        r_nw[r] = nw
        r_nd[r] = nd
    scal[S_NINT] = t
    scal[S_CONS] = t_cons
    scal[S_WIN] = winner
    scal[S_TMAX] = tmax
    scal[S_NWMAX] = nwmax
    scal[S_NDMAX] = ndmax
    scal[S_S95] = t_s95
    scal[S_STREAK] = t_streak
    scal[S_FLIP] = t_flip
    scal[S_STOP] = stop_reason
    scal[S_ERR] = t_err


def _sg_run_py(seed, n_agents, W, H, indptr, nbrs, committed, cword, kinds, poffs, params, init_own,
               init_len, max_int, stop_code, flip_thr,
               r_count, r_succ, r_nw, r_nd, r_prod, r_produ, rec_pairs, rec_names, scal):
    """:func:`_sg_play` with every argument spelled out (the entry of the twin tests and
    benchmarks that drive one run by hand)."""
    _sg_play(seed, (n_agents, W, H, indptr, nbrs, committed, cword, kinds, poffs, params, init_own, init_len),
             (max_int, stop_code, flip_thr, np.int64(0)), (r_count, r_succ, r_nw, r_nd, r_prod, r_produ),
             (rec_pairs, rec_names), scal)


def _sg_batch_py(seeds, game, rule, rounds, rec, scal):
    """Run ``seeds.shape[0]`` replicates in parallel (one per seed row); ``rounds``/``rec`` hold
    one row per replicate."""
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    rec_pairs, rec_names = rec
    for b in prange(seeds.shape[0]):
        _sg_play(seeds[b], game, rule, (r_count[b], r_succ[b], r_nw[b], r_nd[b], r_prod[b], r_produ[b]),
                 (rec_pairs[b], rec_names[b]), scal[b])


def _sg_batch_serial_py(seeds, game, rule, rounds, rec, scal):
    """:func:`_sg_batch_py` without threads (small batches: no parallel-region overhead)."""
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    rec_pairs, rec_names = rec
    for b in range(seeds.shape[0]):
        _sg_play(seeds[b], game, rule, (r_count[b], r_succ[b], r_nw[b], r_nd[b], r_prod[b], r_produ[b]),
                 (rec_pairs[b], rec_names[b]), scal[b])


def _sg_batch_ragged_py(seeds, game, rule, rounds, rec, scal, pos):
    """:func:`_sg_batch_serial_py` writing the rounds of run after run from row ``pos`` of the ragged
    outputs (``rec`` empty: no decisions recorded); stops before a run that might not fit.
    Returns (runs done, next row)."""
    n_agents = game[0]
    max_int = rule[0]
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    R = (max_int + n_agents - 1) // n_agents
    for b in range(seeds.shape[0]):
        if pos + R > r_count.shape[0]:
            return b, pos
        _sg_play(seeds[b], game, rule, (r_count[pos:], r_succ[pos:], r_nw[pos:], r_nd[pos:], r_prod[pos:],
                                        r_produ[pos:]), rec, scal[b])
        pos += (scal[b, S_NINT] + n_agents - 1) // n_agents
    return seeds.shape[0], pos


def _own_params_py(game, params):
    """``game`` with its strategy parameters replaced by one run's own (``params``, a table's row)."""
    return (game[0], game[1], game[2], game[3], game[4], game[5], game[6], game[7], game[8], params, game[10],
            game[11])


def _sg_rows_batch_py(seeds, prow, game, rule, rounds, rec, scal):
    """:func:`_sg_batch_py` where run ``b`` plays its own strategy parameters ``prow[b]`` (a table
    per run: runs that differ, e.g. each its own draw of run effects)."""
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    rec_pairs, rec_names = rec
    for b in prange(seeds.shape[0]):
        gb = _own_params(game, prow[b])
        _sg_play(seeds[b], gb, rule, (r_count[b], r_succ[b], r_nw[b], r_nd[b], r_prod[b], r_produ[b]),
                 (rec_pairs[b], rec_names[b]), scal[b])


def _sg_rows_serial_py(seeds, prow, game, rule, rounds, rec, scal):
    """:func:`_sg_rows_batch_py` without threads."""
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    rec_pairs, rec_names = rec
    for b in range(seeds.shape[0]):
        gb = _own_params(game, prow[b])
        _sg_play(seeds[b], gb, rule, (r_count[b], r_succ[b], r_nw[b], r_nd[b], r_prod[b], r_produ[b]),
                 (rec_pairs[b], rec_names[b]), scal[b])


def _sg_rows_ragged_py(seeds, prow, game, rule, rounds, rec, scal, pos):
    """:func:`_sg_batch_ragged_py` where run ``b`` plays ``prow[b]``."""
    n_agents = game[0]
    max_int = rule[0]
    r_count, r_succ, r_nw, r_nd, r_prod, r_produ = rounds
    R = (max_int + n_agents - 1) // n_agents
    for b in range(seeds.shape[0]):
        if pos + R > r_count.shape[0]:
            return b, pos
        gb = _own_params(game, prow[b])
        _sg_play(seeds[b], gb, rule, (r_count[pos:], r_succ[pos:], r_nw[pos:], r_nd[pos:], r_prod[pos:],
                                      r_produ[pos:]), rec, scal[b])
        pos += (scal[b, S_NINT] + n_agents - 1) // n_agents
    return seeds.shape[0], pos


_sg_play = njit(cache=True)(_sg_play_py)
_sg_run = njit(cache=True)(_sg_run_py)
_sg_batch = njit(parallel=True, cache=True)(_sg_batch_py)
_sg_batch_serial = njit(cache=True)(_sg_batch_serial_py)
_sg_batch_ragged = njit(cache=True)(_sg_batch_ragged_py)
_own_params = njit(cache=True)(_own_params_py)
_sg_rows_batch = njit(parallel=True, cache=True)(_sg_rows_batch_py)
_sg_rows_serial = njit(cache=True)(_sg_rows_serial_py)
_sg_rows_ragged = njit(cache=True)(_sg_rows_ragged_py)

_USER_KERNELS: dict = {}


def _user_kernel(user_fn):
    """The batch kernels with ``_strategy_probs`` bound to a user function (compiled once per fn;
    uncached variants with names of their own: :func:`normlab._jit.kernel_variant`)."""
    key = id(user_fn)
    if key not in _USER_KERNELS:

        @njit
        def probs_fn(kind, own, partner, k, code, W, H, params, out):
            user_fn(own[:k], partner[:k], W, params, out)

        play = kernel_variant(_sg_play_py, cache=False, _strategy_probs=probs_fn)
        batch = kernel_variant(_sg_batch_py, cache=False, parallel=True, _sg_play=play)
        serial = kernel_variant(_sg_batch_serial_py, cache=False, _sg_play=play)
        _USER_KERNELS[key] = (user_fn, batch, serial)  # keep user_fn alive so id() stays unique
    return _USER_KERNELS[key][1:]


def strategy_game(
    strategy,
    *,
    n_agents: int,
    memory: int,
    n_runs: int = 1,
    groups=None,
    committed=0,
    committed_name=None,
    initial=None,
    graph=None,
    max_interactions: int | None = None,
    stop: str = "consensus",
    n_names: int | None = None,
    names=None,
    flip_threshold: float = PUBLISHED_FLIP_THRESHOLD,
    record_decisions: bool = False,
    order_bias: float = 0.0,
    name_order: str = "independent",
    progress: bool | None = None,
    per_run: bool = False,
    rng=None,
) -> GameResult:
    """Simulate the memory-H naming game with agents that choose by a strategy table.

    The keywords are a convenience: they are checked, then built into a
    :class:`~normlab.theory.spec.GameSpec` (population, memory, pool, committed agents and
    their name, initial memories, graph, stop rule and cap, name order) for
    :func:`play_strategy_game`, the engine.

    Parameters
    ----------
    strategy : Strategy, str or list of them
        A :class:`~normlab.theory.strategies.StrategyTable`, another
        :class:`~normlab.theory.strategies.Strategy`, or a built-in name: ``"best_response"``
        (alias ``"centola"``) or ``"wsls"`` (alias ``"win_stay_lose_shift"``). A list (with
        ``groups``) gives a mixed population: one strategy per group of agents (e.g. two LLMs'
        tables); a :class:`~normlab.theory.strategies.FunctionStrategy` cannot be mixed.
    n_agents : int
        Population size ``N`` (>= 2).
    memory : int
        Memory length ``H`` (>= 1): agents see their last ``H`` interactions.
    n_runs : int, optional
        Number of independent replicates (run in parallel, one child seed each).
    groups : array_like of int, optional
        With a list of ``G`` strategies: the group (strategy index) of each of the ``N`` agents,
        or ``G`` group sizes summing to ``N`` (agents ``0 .. sizes[0] - 1`` play the first
        strategy, and so on). Committed agents (below) keep their group but never choose.
    committed : int or array_like of int, optional
        Number of committed agents (the last ``k``) or their indices.
    committed_name : int or str, optional
        Name the committed agents always play (default: the last name of the pool). With no
        committed agent it names the *challenger* whose takeover the flip criterion tracks
        (a consensus that flips on its own, as Llama-3.1's Q consensus in Flint Ashery et al. 2025, Fig. S7).
    initial : None, str, int or array_like of int, optional
        ``None``/``"empty"``: empty memories (the convergence runs of Flint Ashery et al. 2025); ``"consensus"``,
        ``"consensus:<name>"`` or a name index: every uncommitted memory holds ``H`` successful
        plays of that name (Flint Ashery et al. 2025, Fig. 3 committed-minority runs); an array of ``N`` name
        indices gives each agent ``H`` successful plays of its name (``-1``: empty memory).
    graph : networkx.Graph, optional
        Interaction network; complete graph if omitted.
    max_interactions : int, optional
        Cap per run (default 1000 rounds).
    stop : {"consensus", "success95", "streak", "flip", "max"}, optional
        Consensus = every uncommitted agent's last ``H`` plays were successes on one name (and
        the committed agents, if any, hold it); the other rules as in
        :func:`~normlab.theory.minimal_naming_game`.
    n_names : int, optional
        Pool size ``W`` for a built-in strategy given by name (default 2).
    names : sequence of str, optional
        Labels of the names (used by ``initial``, ``committed_name`` and the decision log).
    flip_threshold : float, optional
        Committed-name share among uncommitted productions over 3 rounds counted as a flip
        (default 2.849/3, the published criterion).
    record_decisions : bool, optional
        Keep every interaction so that :meth:`GameResult.to_log` can build the tidy decision
        table (memory cost ``8 * max_interactions`` bytes per run).
    order_bias : float, optional
        First-listed bias ``gamma`` (logit shift toward the name the prompt lists first;
        :mod:`normlab.theory.name_order`): the table is played as ``W`` per-order tables whose
        average over the listed-first name is the table itself. 0 (default): the plain table,
        bit-identical to a call without it. Strategy tables only.
    name_order : {"independent", "shared"}, optional
        How the name order is drawn when ``order_bias`` is not 0: per agent (the authors'
        ``population()``: the same game in law as without bias) or once per interaction, seen by
        both agents (``committed()``: a bias correlates their choices).
    progress : bool, optional
        Show a tqdm bar over runs (default: when more than 1000 runs).
    per_run : bool, optional
        Each run plays its own table: ``strategy`` is then a list of ``n_runs``
        :class:`~normlab.theory.strategies.StrategyTable` (one memory and pool) or an array
        ``(n_runs, n_states, W)`` of tables (``(n_runs, n_states)`` of p(name 1 | s) for two names),
        and run ``k`` plays table ``k`` exactly as run ``k`` of a call with table ``k`` alone and
        the same ``rng`` does: runs that differ, e.g. each its own draw of the run effects of
        :mod:`normlab.calibration.fit.run_effects`, in one compiled call. ``n_runs`` is the
        number of tables (passing it is optional); no ``groups``.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, optional

    Returns
    -------
    GameResult
        With per-round success, production counts (all and uncommitted agents), ``N_w`` (sum
        over agents of the distinct names in their memory window; a committed agent counts 1)
        and distinct names present, and the flip time for committed runs.

    References
    ----------
    Implements the LLM naming game of Flint Ashery et al., Sci. Adv. 11, eadu9368 (2025),
    Experimental Setup and Fig. 3 (committed minorities), with agents replaced by strategy tables
    p(name | memory) (Table 1, Fig. S8) and the name order of their prompts as the authors'
    ``simulation_module.py`` draws it; best response as in Centola et al., Science 360, 1116 (2018).

    Examples
    --------
    >>> from normlab.theory import strategy_game
    >>> res = strategy_game("best_response", n_agents=50, memory=5, committed=12,
    ...                     initial="consensus", stop="flip", max_interactions=50 * 200, rng=3)
    >>> res.flipped().mean()  # doctest: +SKIP
    """
    N = check_int(n_agents, "n_agents", low=2)
    H = check_int(memory, "memory", low=1)
    R = check_int(n_runs, "n_runs", low=1)
    if per_run:
        if groups is not None:
            raise ValueError("per_run=True gives each run its own table; it cannot be mixed with groups=")
        per = PerRunTables.of(strategy, H, n_runs if n_runs != 1 else None)
        R = per.tables.shape[0]
        strats, group = [per], np.zeros(N, np.int64)
    else:
        strats, group = _resolve_groups(strategy, groups, n_names, N)
    W = strats[0].n_names
    check_stop(stop)
    _check_order_for(strats, order_bias, name_order)
    _flip_threshold(flip_threshold, "flip_threshold")
    _check_memory(strats, W, H)
    given = names
    names = _sg_names(strats, names, W)
    mask = committed_mask(committed, N)
    cword = _challenger(committed_name, names, W, mask)
    if stop == "flip" and cword < 0:
        raise ValueError("stop='flip' needs committed agents or a committed_name (the challenger)")
    _parse_sg_initial(initial, N, W, H, names)
    net = Network.of(graph, N)
    run = RunLength(stop, 1000 * N if max_interactions is None else max_interactions)
    spec = GameSpec(n_agents=N, memory=H, n_names=W, names=None if given is None else names, committed=committed,
                    committed_name=cword if cword >= 0 else None, initial=initial, graph=net, run=run,
                    flip_threshold=flip_threshold, order_bias=order_bias, name_order=name_order)
    return play_strategy_game(spec, strats[0] if groups is None else strats, None if groups is None else group, n_runs=R,
                              record_decisions=record_decisions, progress=progress, rng=rng)


def play_strategy_game(spec: GameSpec, strategy, groups=None, *, n_runs: int = 1, record_decisions: bool = False,
                       progress=None, rng=None) -> GameResult:
    """The engine of :func:`strategy_game`: the game ``spec`` describes, played by ``strategy``.

    ``strategy`` and ``groups`` as in :func:`strategy_game` (a list of resolved strategies with
    one group id per agent for a mixed population); ``spec.memory`` is required and
    ``spec.n_names`` must be the strategies' pool size (or ``None``); ``spec.committed_name``
    ``None``: the last name of the pool when agents are committed; a cap of ``None``: 1000
    rounds. Same seeds, same runs as the keyword call.
    """
    R = check_int(n_runs, "n_runs", low=1)
    N, H, stop = spec.n_agents, spec.memory, spec.run.stop
    if H is None:
        raise ValueError("the strategy game needs a memory length (GameSpec.memory)")
    per_run = isinstance(strategy, PerRunTables)
    if per_run:
        if strategy.tables.shape[0] != R:
            raise ValueError(f"n_runs={R} but {strategy.tables.shape[0]} per-run tables")
        strats, group = [strategy], np.zeros(N, np.int64)
    else:
        strats, group = _resolve_groups(strategy, groups, spec.n_names, N)
    strat = strats[0]
    W = strat.n_names
    omode = _check_order_for(strats, spec.order_bias, spec.name_order)
    _check_memory(strats, W, H)
    names = _sg_names(strats, spec.names, W)
    mask = spec.committed_mask()
    cword = _challenger(spec.committed_name, names, W, mask)
    if stop == "flip" and cword < 0:
        raise ValueError("stop='flip' needs committed agents or a committed_name (the challenger)")
    init_own, init_len, init_label, init_idx = _parse_sg_initial(spec.initial, N, W, H, names)
    indptr, nbrs = spec.csr()
    T = spec.run.interactions(N, default=1000 * N)
    if spec.run.cap is None or spec.run.unit != "interactions" or spec.n_names != W \
            or spec.committed_name != (cword if cword >= 0 else None):
        spec = replace(spec, n_names=W, run=RunLength(stop, T), committed_name=cword if cword >= 0 else None)
    if record_decisions and T * R > 50_000_000:
        raise ValueError(f"record_decisions keeps every interaction: {T * R:,} is too many; lower max_interactions or n_runs")
    if progress is None:
        progress = R > 1000
    rows, ragged = None, None
    if per_run:  # one row of parameters per run, laid out as a single table's (per-order blocks with a bias)
        rows = strategy.kernel_rows(spec.order_bias if omode else 0.0)
        params, kinds, poffs = rows[0], np.zeros(N, np.int64) + KIND_TABLE, np.zeros(N, np.int64)
        kernel = choose_kernel(_sg_rows_batch, _sg_rows_serial, R, T)
        ragged = _sg_rows_ragged if kernel is _sg_rows_serial else None
    else:
        params, kinds, poffs = _kernel_params(strats, group, H, spec.order_bias if omode else 0.0)
        if strat.kind == KIND_USER:
            strat.check(H)
            kernel = choose_kernel(*_user_kernel(strat.fn), R, T)
        else:
            kernel = choose_kernel(_sg_batch, _sg_batch_serial, R, T)
            ragged = _sg_batch_ragged if kernel is _sg_batch_serial else None
    ss, seeds = run_seeds(rng, R)
    args = ((N, W, H, indptr, nbrs, mask, cword, kinds, poffs, params, init_own, init_len),  # game
            (T, spec.run.code, spec.flip_threshold, int(omode)))  # rule
    if per_run:
        args = (RunRows(rows),) + args
    out = run_batches(kernel, seeds, N, W, T, args, progress, "strategy game", record=T if record_decisions else 0,
                      n_scalars=SG_SCALARS, ragged=ragged)
    net = spec.graph
    return _sg_result(out, spec, strats, group, names=names, seed=ss, record_decisions=record_decisions,
                      init_idx=init_idx, params=dict(
                          strategy=("StrategyTable (per run)" if per_run else type(strat).__name__) if len(strats) == 1
                          else [type(s).__name__ for s in strats],
                          groups=None if groups is None else group.tolist(), initial_label=init_label,
                          flip_threshold=spec.flip_threshold, order_bias=spec.order_bias,
                          name_order=spec.name_order,
                          graph=None if net is None else f"{net.kind}({net.n_nodes} nodes)"))


def _sg_result(out, spec, strats, group, *, names, seed, record_decisions, init_idx, params) -> GameResult:
    """The :class:`GameResult` of a batch of the game ``spec`` (as :func:`play_strategy_game`
    resolved it): invalid vectors refused, unfinished runs warned about, absorbing consensuses
    marked, decisions and initial memories attached."""
    N, H, T, stop = spec.n_agents, spec.memory, spec.run.cap, spec.run.stop
    mask = spec.committed_mask()
    scal = out["scal"]
    bad = scal[:, S_ERR] >= 0
    if bad.any():
        raise ValueError(
            f"the strategy returned an invalid probability vector (negative, NaN or not summing to 1) in "
            f"{int(bad.sum())} run(s), first at interaction {int(scal[bad, S_ERR].min())}"
        )
    warn_unfinished(stop, scal[:, S_STOP], T, stacklevel=5)  # names strategy_game's caller
    winner = scal[:, S_WIN].copy()
    # A consensus is absorbing when the strategy plays the winner surely from a full-winner memory.
    absorbing = np.zeros(len(scal), bool)
    playing = [strats[q] for q in np.unique(group[~mask])]  # strategies of the uncommitted agents
    for w in np.unique(winner[(scal[:, S_STOP] == 1) & (winner >= 0)]):
        at = (scal[:, S_STOP] == 1) & (winner == w)
        if hasattr(playing[0], "absorbs"):  # each run its own table (PerRunTables)
            absorbing |= at & playing[0].absorbs(int(w))
        elif all(s.probs([(int(w), int(w))] * H, H)[w] == 1.0 for s in playing):
            absorbing |= at
    interactions = None
    if record_decisions:
        interactions = (out["pairs"], out["names"], scal[:, S_NINT].copy())
    initial_memory = None
    if init_idx is not None:
        initial_memory = {a: [(names[init_idx[a]], names[init_idx[a]])] * H
                          for a in range(N) if not mask[a] and init_idx[a] >= 0}
    params = dict(strategy=params["strategy"], groups=params["groups"], initial_label=params["initial_label"],
                  initial_memory=initial_memory, flip_threshold=params["flip_threshold"], graph=params["graph"],
                  **({"order_bias": params["order_bias"], "name_order": params["name_order"]}
                     if params["order_bias"] else {}))
    return game_result(out, spec, model="strategy", names=tuple(names), seed=seed, absorbing=absorbing,
                       interactions=interactions, params=params)
