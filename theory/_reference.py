"""Slow, plain-Python reference twins of the Numba kernels.

Each twin states the model's rules with Python lists and dicts, consumes the same xoshiro256**
stream in the same order as its kernel (see the kernel docstrings), and returns the same
observables, so tests can demand exact agreement. Use them only on small problems.
"""

from __future__ import annotations

from ._prng import PyXoshiro
from .criteria import flip_reached


def _rounds_template():
    return {"count": [], "succ": [], "nw": [], "nd": [], "prod": [], "produ": []}


def ng_run_reference(seed_words, n_agents, n_words, neighbours, committed, cword, bias, beta,
                     init_word, max_int, stop_code, flip_thr, invent="keep", bias_empty=False):
    """Reference twin of :func:`normlab.theory.naming_game._ng_run` (one run).

    Parameters mirror the kernel's; ``neighbours`` is a list of neighbour lists or ``None``
    (complete graph), ``bias`` a list of weights or ``None``; ``invent="discard"``: an empty
    speaker utters the name it invents without keeping it (the authors' ``NG_module.py``);
    ``bias_empty``: an empty speaker draws that name from ``bias`` instead of uniformly.

    Returns
    -------
    dict
        ``scalars`` (dict with the kernel's scalar row, by name), ``rounds`` (dict of lists) and
        ``hits`` (success indicator of every interaction).
    """
    rng = PyXoshiro(seed_words)
    N, W = n_agents, n_words
    unlimited = W == 0
    inventories = [[] for _ in range(N)]
    for a in range(N):
        w0 = cword if committed[a] else init_word[a]
        if w0 >= 0:
            inventories[a].append(w0)
    next_word = max(max(init_word), cword, 0) + 1

    def census():
        present = set()
        for inv in inventories:
            present.update(inv)
        return sum(len(inv) for inv in inventories), len(present)

    nw, nd = census()
    nwmax, tmax, ndmax = nw, 0, nd
    t_cons = winner = t_s95 = t_streak = t_flip = -1
    history = []  # success indicators
    rounds = _rounds_template()
    cur = None
    stop_reason = 0
    streak = 0
    committed_prod = []  # per interaction: (uncommitted speaker?, said cword?)
    t = 0
    while t < max_int:
        if t % N == 0:
            cur = {"succ": 0, "prod": [0] * W, "produ": [0] * W}
            rounds["prod"].append(cur["prod"])
            rounds["produ"].append(cur["produ"])
        speaker = rng.randbelow(N)
        if neighbours is None:
            hearer = rng.randbelow(N - 1)
            if hearer >= speaker:
                hearer += 1
        else:
            nb = neighbours[speaker]
            hearer = nb[rng.randbelow(len(nb))]
        inv = inventories[speaker]
        if committed[speaker]:
            word = cword
        else:
            if not inv:
                if unlimited:
                    word = next_word
                    next_word += 1
                elif bias_empty:
                    u = rng.uniform() * sum(bias)
                    acc = 0.0
                    for x, bw in enumerate(bias):
                        if bw > 0:
                            word = x
                            acc += bw
                            if u < acc:
                                break
                else:
                    word = rng.randbelow(W)
                if invent == "keep":
                    inv.append(word)
            elif len(inv) == 1:
                word = inv[0]
            else:
                weights = [bias[x] for x in inv] if bias is not None else None
                if weights is not None and sum(weights) > 0:
                    u = rng.uniform() * sum(weights)
                    acc = 0.0
                    for x, bw in zip(inv, weights):
                        if bw > 0:
                            word = x
                            acc += bw
                            if u < acc:
                                break
                else:
                    word = inv[rng.randbelow(len(inv))]
        committed_prod.append((not committed[speaker], word == cword))
        if not unlimited:
            cur["prod"][word] += 1
            if not committed[speaker]:
                cur["produ"][word] += 1
        if committed[hearer]:
            success = word == cword
        else:
            success = word in inventories[hearer]
        if success:
            cur["succ"] += 1
            collapse = True
            if beta < 1.0:
                collapse = beta > 0.0 and rng.uniform() < beta
            if collapse:
                for a in (speaker, hearer):
                    if not committed[a]:
                        inventories[a] = [word]
        elif not committed[hearer]:
            inventories[hearer].append(word)
        t += 1
        history.append(success)
        nw, nd = census()
        if nw > nwmax:
            nwmax, tmax = nw, t
        ndmax = max(ndmax, nd)
        L = 3 * N
        if t_cons < 0 and nd == 1 and nw == N:
            t_cons, winner = t, inventories[0][0]
        if t_s95 < 0 and t >= L and 100 * sum(history[-L:]) >= 95 * L:
            t_s95 = t
        streak = streak + 1 if success else 0
        if t_streak < 0 and streak >= L:
            t_streak = t
        if t % N == 0:
            rounds["count"].append(N)
            rounds["succ"].append(cur["succ"])
            rounds["nw"].append(nw)
            rounds["nd"].append(nd)
            r = t // N - 1
            if cword >= 0 and t_flip < 0 and r >= 2:
                last = committed_prod[-3 * N:]
                tu = sum(1 for unc, _ in last if unc)
                tc = sum(1 for unc, c in last if unc and c)
                if flip_reached(tc, tu, flip_thr):
                    t_flip = t
        reached = {1: t_cons, 2: t_s95, 3: t_streak, 4: t_flip}.get(stop_code, -1)
        if reached == t:
            stop_reason = stop_code
            break
    if t % N != 0:
        rounds["count"].append(t % N)
        rounds["succ"].append(cur["succ"])
        rounds["nw"].append(nw)
        rounds["nd"].append(nd)
    scalars = dict(n_interactions=t, consensus_time=t_cons, winner=winner, t_max=tmax,
                   n_words_max=nwmax, n_distinct_max=ndmax, success95_time=t_s95,
                   streak_time=t_streak, flip_time=t_flip, stop_reason=stop_reason)
    return {"scalars": scalars, "rounds": rounds, "hits": [int(h) for h in history]}


def _choose_reference(u, probs):
    """Reference of the kernels' name choice: first name whose cumulative probability exceeds u."""
    if any(not (p >= 0.0) or p > 1.0 + 1e-9 for p in probs) or abs(sum(probs) - 1.0) > 1e-6:
        return -1
    acc, choice = 0.0, -1
    for q, p in enumerate(probs):
        if p > 0.0:
            choice = q
            acc += p
            if u < acc:
                break
    return choice


def sg_run_reference(seed_words, strategy, n_agents, memory, neighbours, committed, cword, initial_name,
                     max_int, stop_code, flip_thr, groups=None, order_bias=0.0, name_order="independent"):
    """Reference twin of :func:`normlab.theory.memory_game._sg_run_py` (one run).

    ``strategy`` is a :class:`~normlab.theory.strategies.Strategy` whose pure-Python ``probs``
    is used, or a list of them with ``groups`` (the strategy index of each agent: a mixed
    population); memories are Python lists of ``(own, partner)`` pairs; every observable is
    recomputed from scratch after each interaction. With ``order_bias`` (strategy tables) an
    agent whose prompt lists name ``f`` first picks from the row of ``f``'s per-order table
    (:func:`normlab.theory.name_order.order_tables`); ``f`` is drawn once per interaction
    (``name_order="shared"``) or per uncommitted agent (``"independent"``).

    Returns
    -------
    dict
        ``scalars``, ``rounds`` (as :func:`ng_run_reference`) and ``log`` (list of
        ``(i, j, name_i, name_j)``).
    """
    rng = PyXoshiro(seed_words)
    N, H = n_agents, memory
    strategy_of = [strategy[g] for g in groups] if groups is not None else [strategy] * N
    W = strategy_of[0].n_names
    memories = [[] for _ in range(N)]
    if initial_name is not None:  # one name for everybody, or one per agent (-1 = empty)
        per_agent = [initial_name] * N if isinstance(initial_name, int) else [int(x) for x in initial_name]
        for a in range(N):
            if not committed[a] and per_agent[a] >= 0:
                memories[a] = [(per_agent[a], per_agent[a])] * H
    unc = [a for a in range(N) if not committed[a]]
    per_order = None
    if order_bias:
        from .name_order import order_tables
        from .strategies import encode_state

        tabs = {id(s): order_tables(s.table, order_bias) for s in strategy_of}
        per_order = [tabs[id(s)] for s in strategy_of]

        def ordered_probs(a, f):
            return [float(v) for v in per_order[a][f, encode_state(memories[a][-H:], W)]]

    def census():
        nw, present = 0, set()
        for a in range(N):
            names = {cword} if committed[a] else {x for pair in memories[a] for x in pair}
            nw += len(names)
            present |= names
        return nw, len(present)

    def settled(a):
        m = memories[a]
        if len(m) < H or any(o != p or o != m[-1][0] for o, p in m):
            return -1
        return m[-1][0]

    nw, nd = census()
    nwmax, tmax, ndmax = nw, 0, nd
    t_cons = winner = t_s95 = t_streak = t_flip = -1
    history, prod_log, log = [], [], []
    rounds = _rounds_template()
    stop_reason = streak = 0
    t = 0
    cur = None
    while t < max_int:
        if t % N == 0:
            cur = {"succ": 0, "prod": [0] * W, "produ": [0] * W}
            rounds["prod"].append(cur["prod"])
            rounds["produ"].append(cur["produ"])
        i = rng.randbelow(N)
        if neighbours is None:
            j = rng.randbelow(N - 1)
            if j >= i:
                j += 1
        else:
            j = neighbours[i][rng.randbelow(len(neighbours[i]))]
        choice = {}
        first = rng.randbelow(W) if per_order is not None and name_order == "shared" else None
        for a in (i, j):
            if committed[a]:
                choice[a] = cword
            elif per_order is None:
                choice[a] = _choose_reference(rng.uniform(), list(strategy_of[a].probs(memories[a], H)))
            else:
                f = first if first is not None else rng.randbelow(W)
                choice[a] = _choose_reference(rng.uniform(), ordered_probs(a, f))
        ci, cj = choice[i], choice[j]
        if ci < 0 or cj < 0:
            raise ValueError("invalid probability vector")
        log.append((i, j, ci, cj))
        for a, c in ((i, ci), (j, cj)):
            cur["prod"][c] += 1
            if not committed[a]:
                cur["produ"][c] += 1
            prod_log.append((not committed[a], c == cword))
        success = ci == cj
        cur["succ"] += success
        for a, own, other in ((i, ci, cj), (j, cj, ci)):
            if not committed[a]:
                memories[a] = (memories[a] + [(own, other)])[-H:]
        t += 1
        history.append(success)
        nw, nd = census()
        if nw > nwmax:
            nwmax, tmax = nw, t
        ndmax = max(ndmax, nd)
        if t_cons < 0:
            s = {settled(a) for a in unc}
            if len(s) == 1 and -1 not in s and (cword < 0 or cword in s):
                t_cons, winner = t, s.pop()
        L = 3 * N
        if t_s95 < 0 and t >= L and 100 * sum(history[-L:]) >= 95 * L:
            t_s95 = t
        streak = streak + 1 if success else 0
        if t_streak < 0 and streak >= L:
            t_streak = t
        if t % N == 0:
            rounds["count"].append(N)
            rounds["succ"].append(cur["succ"])
            rounds["nw"].append(nw)
            rounds["nd"].append(nd)
            if cword >= 0 and t_flip < 0 and t // N - 1 >= 2:
                last = prod_log[-6 * N:]
                tu = sum(1 for u_, _ in last if u_)
                tc = sum(1 for u_, c in last if u_ and c)
                if flip_reached(tc, tu, flip_thr):
                    t_flip = t
        reached = {1: t_cons, 2: t_s95, 3: t_streak, 4: t_flip}.get(stop_code, -1)
        if reached == t:
            stop_reason = stop_code
            break
    if t % N != 0:
        rounds["count"].append(t % N)
        rounds["succ"].append(cur["succ"])
        rounds["nw"].append(nw)
        rounds["nd"].append(nd)
    scalars = dict(n_interactions=t, consensus_time=t_cons, winner=winner, t_max=tmax,
                   n_words_max=nwmax, n_distinct_max=ndmax, success95_time=t_s95,
                   streak_time=t_streak, flip_time=t_flip, stop_reason=stop_reason)
    return {"scalars": scalars, "rounds": rounds, "log": log}
