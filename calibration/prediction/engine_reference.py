"""The reference prediction engine (``predict(..., engine="reference")``): one
:func:`normlab.theory.strategy_game` call per posterior draw and setting, reduced in Python.

It is the original implementation, kept as the reference of the compiled design
(:mod:`normlab.calibration.prediction.engine_kernel`): run ``k`` of seed group ``g`` of draw ``d`` uses
the same child seed in both, so they simulate the same runs (tested).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1, Fig. 2B,
Fig. 3, Table S3, Methods "Committed Minorities", Supplementary Text "Characterizing Relative
Strength".
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd

from normlab._rng import spawn
from normlab.theory import strategy_game
from normlab.theory.criteria import published_rule, shares_from_result
from normlab.theory.design_plan import mixture_sources, sweep_shares

from .readings import (NONE, WIDTH_FRACTIONS, _basin_boundary, _numba_threads, _padded_success, _winners,
                                first_round_reaching)

__all__ = []


# ----------------------------------------------------------------------------- per-draw work
def _children(seed):
    """Child seed sequences of ``seed`` in order, created only when used (the same children as
    ``seed.spawn(n)``; ``seed`` itself is not advanced)."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else spawn(seed, 1)[0]
    for k in itertools.count():
        yield np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (k,), pool_size=ss.pool_size)


def _simulate_draw(table, d, seed, cfg) -> dict:
    """All simulations of one posterior draw (module level so process executors can pickle it)."""
    N, H, names = cfg["n_agents"], table.memory, table.names
    seeds = _children(seed)
    out = {"consensus": [], "success": None, "stats": {}, "flips": [], "cm": [], "strength": []}
    # --- convergence from empty memories
    if cfg["consensus"]:
        R = cfg["max_rounds"]
        res = strategy_game(table, n_agents=N, memory=H, n_runs=cfg["n_runs_consensus"], stop="streak",
                            max_interactions=R * N, progress=False, rng=next(seeds))
        win = _winners(res, names)
        for nm in list(names) + [NONE]:
            out["consensus"].append((d, nm, sum(w == nm for w in win), len(win)))
        m = _padded_success(res, R)
        curve = np.nanmean(m, axis=0)
        out["success"] = curve
        st = res.streak_time[res.stop_reason == "streak"] / N
        out["stats"] = {"draw": d, "rounds_to_95": first_round_reaching(curve, 0.95),
                        "consensus_rounds": float(np.mean(st)) if st.size else float("nan"),
                        "converged": float(np.mean(res.stop_reason == "streak"))}
    # --- critical mass sweeps: per count, max(n_runs_flip, design_runs) runs of the flip game;
    # the first n_runs_flip give the per-run reading, the first design_runs the published one
    wr, mr = cfg["within_rounds"], cfg["max_round"]
    nrf, ndes = cfg["n_runs_flip"], cfg["design_runs"]
    nsim = max(nrf, ndes)
    T = max(wr, mr) * N
    kx_all = np.array([int(round(f * N)) for f in WIDTH_FRACTIONS], np.int64)
    src = mixture_sources([(names.index(x), names.index(y)) for x, y in cfg["directions"]], kx_all, N)
    mix_winners = {}  # (direction index, mixture) -> the winners of its runs
    share_at = sweep_shares(cfg["committed"], cfg["strength"])
    for i_dir, (x, y) in enumerate(cfg["directions"]):
        saturated = 0
        cm = pub_cm = math.inf
        swept = {}  # count 0 / 1 -> the challenger's share over the first wr rounds of its runs (strength)
        for j, c in enumerate(cfg["committed"]):
            s = next(seeds)
            if cfg["assume_monotone"] and saturated >= 2:
                k, n, last3, ok, simulated = nrf, nrf, 3.0, True, False
            else:
                # counts 0 and 1 are also the strength stage's runs (sweep_shares): played to the cap,
                # read for the flips only up to their flip, as the flip rule would have stopped them
                shr = c < 2 and share_at[c] == j
                r = strategy_game(table, n_agents=N, memory=H, n_runs=nsim, committed=int(c),
                                  committed_name=y, initial=f"consensus:{x}", stop="max" if shr else "flip",
                                  max_interactions=T, progress=False, rng=s)
                fl = r.flipped(within_rounds=wr)
                k, n = int(fl[:nrf].sum()), nrf
                # the paper's design: design_runs runs, window mr; a run stopped by the flip rule
                # met the threshold at its end (padded with 1s)
                ft = r.flip_times()[:ndes]
                tr = shares_from_result(r, y)[:ndes]
                if shr:
                    tr = [t if np.isnan(f) else t[:-(-int(f) // N)] for t, f in zip(tr, ft)]
                    ps = r.production_share(n_rounds=wr)
                    swept[int(c)] = float(ps.loc[(ps["name"] == y) & (ps["run"] < nrf), "share"].mean())
                tr = [t[:mr] for t in tr]
                pub = published_rule(tr, max_round=mr, met=~np.isnan(ft) & (ft <= mr * N))
                last3, ok, simulated = pub["last3"], pub["success"], True
                saturated = saturated + 1 if (bool(fl.all()) and ok) else 0
            out["flips"].append((d, x, y, int(c), n, k, simulated, float(last3), bool(ok)))
            if cm == math.inf and k / n >= cfg["level"]:
                cm = float(c)
            if pub_cm == math.inf and ok:
                pub_cm = float(c)
        out["cm"].append((d, x, y, pub_cm, cm))
        # --- relative strength
        if cfg["strength"]:
            shares = []
            for c in (0, 1):
                s = next(seeds)  # the group's seeds, taken even where the sweep's runs gave the share
                if c in swept:
                    shares.append(swept[c])
                    continue
                r = strategy_game(table, n_agents=N, memory=H, n_runs=cfg["n_runs_flip"], committed=c,
                                  committed_name=y, initial=f"consensus:{x}", stop="max", max_interactions=wr * N,
                                  progress=False, rng=s)
                ps = r.production_share(n_rounds=cfg["within_rounds"])
                shares.append(float(ps.loc[ps["name"] == y, "share"].mean()))
            px = []
            xi, yi = names.index(x), names.index(y)
            for f, k_x in enumerate(kx_all):
                s = next(seeds)  # the mixture's seed group, taken even where its runs are the reverse direction's
                if src[i_dir, f, 0] >= 0:  # the same mixture, played for the reverse direction
                    win = mix_winners[(int(src[i_dir, f, 0]), int(src[i_dir, f, 1]))]
                else:
                    init = np.full(N, yi, dtype=np.int64)
                    init[:k_x] = xi
                    r = strategy_game(table, n_agents=N, memory=H, n_runs=cfg["n_runs_flip"], initial=init,
                                      stop="streak", max_interactions=cfg["max_rounds"] * N, progress=False, rng=s)
                    win = _winners(r, names)
                    mix_winners[(i_dir, f)] = win
                px.append(np.mean([w == x for w in win]))
            b = _basin_boundary(px)
            out["strength"].append((d, x, y, 1.0 - b, b, 1.0 - shares[1], shares[0], *px))
    return out


def _run_chunk(tables, draw_ids, seeds, cfg, threads):
    with _numba_threads(threads), warnings.catch_warnings():
        # runs that never converge within max_rounds are an outcome here ("none"), not a problem
        warnings.filterwarnings("ignore", message=".*reached max_interactions.*", category=RuntimeWarning)
        return [_simulate_draw(t, d, s, cfg) for t, d, s in zip(tables, draw_ids, seeds)]


def _predict_reference(tables, ids, draw_seeds, cfg, threads, executor):
    """The reference engine: one ``strategy_game`` call per draw and setting, reduced in Python."""
    D = len(ids)
    if executor is None:
        results = _run_chunk(tables, ids, draw_seeds, cfg, threads)
    else:
        n_chunks = max(1, min(D, 4 * int(getattr(executor, "_max_workers", 2) or 2)))
        parts = np.array_split(np.arange(D), n_chunks)
        futs = [executor.submit(_run_chunk, [tables[i] for i in p], [ids[i] for i in p],
                                [draw_seeds[i] for i in p], cfg, threads) for p in parts if len(p)]
        results = [r for f in futs for r in f.result()]
    cons = pd.DataFrame([c for r in results for c in r["consensus"]], columns=["draw", "name", "runs", "n_runs"])
    succ_rows = []
    for r in results:
        if r["success"] is not None:
            d = r["stats"]["draw"]
            succ_rows.append(pd.DataFrame({"draw": d, "round": np.arange(1, len(r["success"]) + 1),
                                           "success_rate": r["success"]}))
    success = pd.concat(succ_rows, ignore_index=True) if succ_rows else pd.DataFrame(columns=["draw", "round", "success_rate"])
    stats = pd.DataFrame([r["stats"] for r in results if r["stats"]],
                         columns=["draw", "rounds_to_95", "consensus_rounds", "converged"])
    flips = pd.DataFrame([f for r in results for f in r["flips"]],
                         columns=["draw", "majority", "challenger", "committed", "n_runs", "n_flips", "simulated",
                                  "published_last3", "published_success"])
    cmd = pd.DataFrame([c for r in results for c in r["cm"]],
                       columns=["draw", "majority", "challenger", "published", "per_run"])
    scol = ["draw", "majority", "challenger", "width", "boundary", "pull", "exploration"] + \
        [f"p_win_{f:.3f}" for f in WIDTH_FRACTIONS]
    strg = pd.DataFrame([s for r in results for s in r["strength"]], columns=scol)
    return cons, success, stats, flips, cmd, strg
