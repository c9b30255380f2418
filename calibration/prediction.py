"""From posterior draws of a strategy table to population-level predictions with uncertainty.

Every posterior draw of the table is played in :func:`normlab.theory.strategy_game`, so each
prediction below is a distribution over draws (parameter uncertainty, including the prior
uncertainty of memory states the training runs never visited) mixed with the finite-run Monte
Carlo noise of the simulations -- the same noise the LLM experiments have.

What is predicted per draw
--------------------------
Collective bias and speed (runs from empty memories, Flint Ashery et al. 2025, Fig. 2B and Fig. 1)
    ``n_runs_consensus`` runs with ``stop="streak"`` -- the published convergence runs stop after
    ``3N`` consecutive successes -- capped at ``max_rounds`` population rounds. A run that stops
    has converged; its **winner** is the name produced most often in its last three recorded
    rounds (all of them successes, so in practice the only name played). A run that hits the cap
    has no winner (``"none"``). ``p_consensus[name]`` is the fraction of runs won by ``name``.
    The **success curve** is the mean success rate per population round (round ``r`` covers
    interactions ``(r - 1) N .. r N - 1``; a stopped run counts as success 1 afterwards, as in the
    published figures), and **rounds to 0.95** the first round where it reaches 0.95.
    **Time to consensus** is the mean stop time in rounds.
Critical mass (Flint Ashery et al. 2025, Methods "Committed Minorities", Fig. 3, Table S3)
    For each direction -- a consensus on ``X`` (every uncommitted memory holds ``H`` successful
    plays of ``X``) attacked by ``c`` agents committed to ``Y`` -- ``max(n_runs_flip,
    design_runs)`` runs of at most ``max(within_rounds, max_round)`` population rounds for every
    ``c`` in ``0 .. N - 1`` (with ``c = 0`` the challenger is tracked without committed agents, so
    a consensus that collapses on its own has critical mass 0). Two readings per draw (see
    :mod:`normlab.theory.criteria`): **published** -- the first ``design_runs`` (10) runs, cut at
    ``max_round`` (the authors' window), go through the paper's ensemble rule, and the draw's
    critical mass is the smallest count that succeeds, so the interval over draws carries both
    parameter uncertainty and the noise of a 10-run experiment, like Table S3 itself; **per_run**
    -- the smallest ``c`` where at least ``flip_level`` (0.5) of ``n_runs_flip`` runs flip
    (first passage within ``within_rounds``). ``inf``: not reached. With ``assume_monotone`` the
    sweep stops after two consecutive counts where every run flipped and the published rule was
    met (larger minorities are counted as flipping).
Relative strength (Supplementary Text "Characterizing Relative Strength", Fig. S9)
    **Width** of ``X``'s basin: the population starts from a mixture -- a fraction ``f`` of the
    uncommitted agents hold a full memory of ``X``, the others of ``Y`` -- for ``f`` = 1/8 .. 7/8;
    ``boundary`` is the ``f`` where ``P(consensus on X)`` crosses 1/2 (linear interpolation; 0 or 1
    if it never does) and ``width = 1 - boundary`` is the share of mixtures from which ``X``
    wins. **Pull**: ``1 -`` the mean share of ``Y`` in the uncommitted productions over
    ``within_rounds`` rounds when one agent committed to ``Y`` perturbs a consensus on ``X`` (the
    setting of Fig. S9 C-D; 1 = the perturbation is absorbed). **Exploration**: the same share
    with nobody committed (Fig. S9 A-B).

Engines
-------
``engine="kernel"`` (default) runs every simulation of every draw in one compiled call
(:func:`normlab.theory.memory_game.strategy_design`), with the reductions above inside it and the
seed words of all runs derived at once; ``engine="reference"`` makes one
:func:`~normlab.theory.strategy_game` call per draw and setting and reduces in Python. Run ``k``
of seed group ``g`` (consensus; each committed count; each strength setting, in that order) of
draw ``d`` uses the same child seed in both, so they simulate the same runs and return the same
prediction (tested; float means may differ in the last bits).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1, Fig. 2B,
Fig. 3, Table S2, Table S3, Methods "Committed Minorities", Supplementary Text "Characterizing
Relative Strength", Figs. S7, S9, S10.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, fmt_interval, html_card, legend_outside, new_axes, plain, plotting, short_repr
from normlab._rng import spawn

from .posterior import StrategyFit

__all__ = ["Prediction", "predict", "table_draws"]

NONE = "none"
FLIP_LEVEL = 0.5
#: Runs per committed count in the committed-minority experiments of Flint Ashery et al. (2025, Methods).
DESIGN_RUNS = 10
WIDTH_FRACTIONS = tuple(k / 8 for k in range(1, 8))


# ----------------------------------------------------------------------------- helpers
def table_draws(fit, n_draws: int, *, rng=None):
    """Posterior draws of a table as a list of :class:`~normlab.theory.strategies.StrategyTable`.

    Parameters
    ----------
    fit : StrategyFit, StrategyTable or sequence of StrategyTable
        A fit (drawn ``n_draws`` times), one fixed table (repeated: Monte Carlo noise only) or
        explicit draws (used as given; ``n_draws`` must not exceed their number).
    n_draws : int
    rng : optional

    Returns
    -------
    list of normlab.theory.strategies.StrategyTable
    """
    from normlab.theory.strategies import StrategyTable

    if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
        raise ValueError(f"n_draws must be an int >= 1; got {n_draws!r}")
    if isinstance(fit, StrategyFit):
        return fit.tables(int(n_draws), rng=rng)
    if isinstance(fit, StrategyTable):
        return [fit] * int(n_draws)
    if isinstance(fit, (list, tuple)) and fit and all(isinstance(t, StrategyTable) for t in fit):
        if n_draws > len(fit):
            raise ValueError(f"asked for {n_draws} draws but only {len(fit)} tables were given")
        return list(fit[:n_draws])
    raise TypeError(f"fit must be a StrategyFit, a StrategyTable or a list of them; got {type(fit).__name__}")


@contextlib.contextmanager
def _numba_threads(n):
    if n is None:
        yield
        return
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def _winners(res, names) -> list:
    """Winner per run of a streak-stopped strategy game (majority of the last 3 rounds)."""
    out = []
    for k in range(res.n_runs):
        if res.stop_reason[k] != "streak":
            out.append(NONE)
            continue
        a, b = res.round_offsets[k], res.round_offsets[k + 1]
        prod = res.round_production[max(a, b - 3):b].sum(axis=0)
        out.append(names[int(np.argmax(prod))])
    return out


def _padded_success(res, n_rounds) -> np.ndarray:
    m = res.success_matrix(n_rounds)
    stopped = res.stop_reason == "streak"
    m[stopped] = np.where(np.isnan(m[stopped]), 1.0, m[stopped])
    return m


def first_round_reaching(curve, threshold=0.95) -> float:
    """First round (from 1) where ``curve >= threshold`` (1e-9 tolerance); NaN if never."""
    hit = np.flatnonzero(np.asarray(curve) >= threshold - 1e-9)
    return float(hit[0] + 1) if hit.size else float("nan")


def _crossing(x, p, level=0.5):
    """Where a curve first reaches ``level`` by linear interpolation (x[0] if already there)."""
    x = np.asarray(x, float)
    p = np.asarray(p, float)
    idx = np.flatnonzero(p >= level)
    if not idx.size:
        return float("nan")
    i = idx[0]
    if i == 0:
        return float(x[0])
    return float(x[i - 1] + (level - p[i - 1]) / (p[i] - p[i - 1]) * (x[i] - x[i - 1]))


def _directions(names, directions):
    W = len(names)
    if directions is None:
        return [(x, y) for x in names for y in names if x != y] if W > 2 else [(names[0], names[1]), (names[1], names[0])]
    out = []
    for d in directions:
        if isinstance(d, str):
            if d not in names:
                raise ValueError(f"direction {d!r} is not a name of {names}")
            if W != 2:
                raise ValueError("with more than two names give directions as (majority, challenger) pairs")
            out.append((d, names[1 - names.index(d)]))
        else:
            x, y = d
            if x not in names or y not in names or x == y:
                raise ValueError(f"direction {d!r} must be two different names of {names}")
            out.append((x, y))
    return out


def _fit_llm(fit):
    """The LLM a fit was made from (``meta["llm"]``, or the one model of its source runs)."""
    if not isinstance(fit, StrategyFit):
        return None
    llm = fit.meta.get("llm")
    models = (fit.meta.get("source") or {}).get("models") or []
    return llm if llm else (models[0] if len(models) == 1 else None)


def _key(x, y, W):
    return f"overturn_{x}" if W == 2 else f"overturn_{x}_by_{y}"


# ----------------------------------------------------------------------------- per-draw work
def _children(seed):
    """Child seed sequences of ``seed`` in order, created only when used (the same children as
    ``seed.spawn(n)``; ``seed`` itself is not advanced)."""
    import itertools

    ss = seed if isinstance(seed, np.random.SeedSequence) else spawn(seed, 1)[0]
    for k in itertools.count():
        yield np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (k,), pool_size=ss.pool_size)


def _simulate_draw(table, d, seed, cfg) -> dict:
    """All simulations of one posterior draw (module level so process executors can pickle it)."""
    from normlab.theory import strategy_game

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
    from normlab.theory.criteria import published_rule, shares_from_result

    wr, mr = cfg["within_rounds"], cfg["max_round"]
    nrf, ndes = cfg["n_runs_flip"], cfg["design_runs"]
    nsim = max(nrf, ndes)
    T = max(wr, mr) * N
    for x, y in cfg["directions"]:
        saturated = 0
        cm = pub_cm = math.inf
        for c in cfg["committed"]:
            s = next(seeds)
            if cfg["assume_monotone"] and saturated >= 2:
                k, n, last3, ok, simulated = nrf, nrf, 3.0, True, False
            else:
                r = strategy_game(table, n_agents=N, memory=H, n_runs=nsim, committed=int(c),
                                  committed_name=y, initial=f"consensus:{x}", stop="flip", max_interactions=T,
                                  progress=False, rng=s)
                fl = r.flipped(within_rounds=wr)
                k, n = int(fl[:nrf].sum()), nrf
                # the paper's design: design_runs runs, window mr; a run stopped by the flip rule
                # met the threshold at its end (padded with 1s)
                tr = [t[:mr] for t in shares_from_result(r, y)[:ndes]]
                ft = r.flip_times()[:ndes]
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
                r = strategy_game(table, n_agents=N, memory=H, n_runs=cfg["n_runs_flip"], committed=c,
                                  committed_name=y, initial=f"consensus:{x}", stop="max", max_interactions=wr * N,
                                  progress=False, rng=next(seeds))
                ps = r.production_share(n_rounds=cfg["within_rounds"])
                shares.append(float(ps.loc[ps["name"] == y, "share"].mean()))
            px = []
            xi, yi = names.index(x), names.index(y)
            for f in WIDTH_FRACTIONS:
                k_x = int(round(f * N))
                init = np.full(N, yi, dtype=np.int64)
                init[:k_x] = xi
                r = strategy_game(table, n_agents=N, memory=H, n_runs=cfg["n_runs_flip"], initial=init,
                                  stop="streak", max_interactions=cfg["max_rounds"] * N, progress=False,
                                  rng=next(seeds))
                win = _winners(r, names)
                px.append(np.mean([w == x for w in win]))
            b = _crossing(WIDTH_FRACTIONS, px, 0.5)
            if np.isnan(b):
                b = 1.0  # X never wins a majority of runs, even from a 7/8 mixture
            elif b == WIDTH_FRACTIONS[0] and px[0] >= 0.5:
                b = 0.0  # X wins even from a 1/8 mixture
            out["strength"].append((d, x, y, 1.0 - b, b, 1.0 - shares[1], shares[0], *px))
    return out


def _run_chunk(tables, draw_ids, seeds, cfg, threads):
    import warnings

    with _numba_threads(threads), warnings.catch_warnings():
        # runs that never converge within max_rounds are an outcome here ("none"), not a problem
        warnings.filterwarnings("ignore", message=".*reached max_interactions.*", category=RuntimeWarning)
        return [_simulate_draw(t, d, s, cfg) for t, d, s in zip(tables, draw_ids, seeds)]


# ----------------------------------------------------------------------------- kernel engine
def _design_layout(cfg):
    """Runs per seed group of one draw, in the order :func:`_simulate_draw` consumes its children
    (consensus; per direction one group per committed count, then 2 + len(WIDTH_FRACTIONS)
    strength groups)."""
    sizes = [cfg["n_runs_consensus"]] if cfg["consensus"] else []
    nsim = max(cfg["n_runs_flip"], cfg["design_runs"])
    for _ in cfg["directions"]:
        sizes += [nsim] * len(cfg["committed"])
        if cfg["strength"]:
            sizes += [cfg["n_runs_flip"]] * (2 + len(WIDTH_FRACTIONS))
    return np.asarray(sizes, np.int64)


def _design_seeds(parent, draw_ids, cfg):
    """Kernel seed words of every run of every draw in one vectorised derivation: run ``k`` of
    group ``g`` of draw ``d`` is child ``k`` of child ``g`` of child ``d`` of ``parent`` -- the
    seeds the reference engine's ``strategy_game`` calls use, so both engines simulate the same
    runs."""
    from normlab._rng import descendant_seed_words

    sizes = _design_layout(cfg)
    G, M = len(sizes), int(sizes.max(initial=1))
    draw_ids = np.asarray(draw_ids, np.int64)
    g = np.repeat(np.arange(G), sizes)
    k = np.arange(len(g)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    n = len(g)
    keys = np.column_stack([np.repeat(draw_ids, n), np.tile(g, len(draw_ids)), np.tile(k, len(draw_ids))])
    out = np.zeros((len(draw_ids), G, M, 4), np.uint64)
    out[np.repeat(np.arange(len(draw_ids)), n), keys[:, 1], keys[:, 2]] = descendant_seed_words(parent, keys)
    return out


def _run_design(tables, draw_ids, parent, cfg):
    """The kernel engine on a chunk of draws: one seed derivation, one compiled call."""
    from normlab.theory.criteria import FLIP_SUM
    from normlab.theory.memory_game import strategy_design

    names = cfg["names"]
    arr = np.stack([t.table for t in tables])
    N = cfg["n_agents"]
    dirs = [(names.index(x), names.index(y)) for x, y in cfg["directions"]]
    return strategy_design(
        arr, _design_seeds(parent, draw_ids, cfg), n_agents=N, memory=cfg["memory"], consensus=cfg["consensus"],
        n_cons=cfg["n_runs_consensus"], cons_rounds=cfg["max_rounds"], directions=dirs,
        counts=np.asarray(cfg["committed"], np.int64), n_flip=cfg["n_runs_flip"], n_design=cfg["design_runs"],
        within=cfg["within_rounds"], window=cfg["max_round"], monotone=cfg["assume_monotone"], level=cfg["level"],
        flip_sum=FLIP_SUM, strength=cfg["strength"],
        mix_kx=np.array([int(round(f * N)) for f in WIDTH_FRACTIONS], np.int64))


def _frames_from_design(o, draw_ids, names, cfg):
    """The tidy tables of a :class:`Prediction` from :func:`_run_design`'s arrays (vectorised)."""
    D = len(draw_ids)
    draws = np.asarray(draw_ids, np.int64)
    W = len(names)
    dirs = cfg["directions"]
    counts = np.asarray(cfg["committed"], np.int64)
    nd, nc = len(dirs), len(counts)
    if cfg["consensus"]:
        nrc, R = cfg["n_runs_consensus"], cfg["max_rounds"]
        cons = pd.DataFrame({"draw": np.repeat(draws, W + 1),
                             "name": np.tile(np.array(list(names) + [NONE], dtype=object), D),
                             "runs": o["cons_wins"].reshape(-1), "n_runs": np.full(D * (W + 1), nrc, np.int64)})
        curve = o["cons_curve"]
        success = pd.DataFrame({"draw": np.repeat(draws, R), "round": np.tile(np.arange(1, R + 1), D),
                                "success_rate": curve.reshape(-1)})
        hit = curve >= 0.95 - 1e-9
        r95 = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1.0, np.nan)
        st = o["cons_streak"]
        ok = ~np.isnan(st)
        n_ok = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            cr = np.where(n_ok > 0, np.where(ok, st, 0.0).sum(axis=1) / np.maximum(n_ok, 1), np.nan)
        stats = pd.DataFrame({"draw": draws, "rounds_to_95": r95, "consensus_rounds": cr, "converged": n_ok / nrc})
    else:
        cons = pd.DataFrame(columns=["draw", "name", "runs", "n_runs"])
        success = pd.DataFrame(columns=["draw", "round", "success_rate"])
        stats = pd.DataFrame(columns=["draw", "rounds_to_95", "consensus_rounds", "converged"])
    maj = np.array([x for x, _ in dirs], dtype=object)
    cha = np.array([y for _, y in dirs], dtype=object)
    flips = pd.DataFrame({"draw": np.repeat(draws, nd * nc), "majority": np.tile(np.repeat(maj, nc), D),
                          "challenger": np.tile(np.repeat(cha, nc), D), "committed": np.tile(counts, D * nd),
                          "n_runs": np.full(D * nd * nc, cfg["n_runs_flip"], np.int64),
                          "n_flips": o["fl_k"].reshape(-1), "simulated": o["fl_sim"].reshape(-1),
                          "published_last3": o["fl_last3"].reshape(-1), "published_success": o["fl_ok"].reshape(-1)})
    cmd = pd.DataFrame({"draw": np.repeat(draws, nd), "majority": np.tile(maj, D), "challenger": np.tile(cha, D),
                        "published": o["cm_pub"].reshape(-1), "per_run": o["cm_run"].reshape(-1)})
    scol = ["draw", "majority", "challenger", "width", "boundary", "pull", "exploration"] + \
        [f"p_win_{f:.3f}" for f in WIDTH_FRACTIONS]
    if cfg["strength"]:
        px = o["st_wins"] / cfg["n_runs_flip"]
        rows = []
        for a, d in enumerate(draws):
            for i, (x, y) in enumerate(dirs):
                p = px[a, i]
                b = _crossing(WIDTH_FRACTIONS, p, 0.5)
                if np.isnan(b):
                    b = 1.0
                elif b == WIDTH_FRACTIONS[0] and p[0] >= 0.5:
                    b = 0.0
                sh = o["st_share"][a, i]
                rows.append((int(d), x, y, 1.0 - b, b, 1.0 - float(sh[1]), float(sh[0]), *(float(v) for v in p)))
        strg = pd.DataFrame(rows, columns=scol)
    else:
        strg = pd.DataFrame(columns=scol)
    return cons, success, stats, flips, cmd, strg


def _design_chunk(tables, draw_ids, parent, cfg):
    """Kernel engine on a chunk of draws (module level so process executors can pickle it)."""
    return draw_ids, _run_design(tables, draw_ids, parent, cfg)


# ----------------------------------------------------------------------------- result type
def _q(x, level, method="inverted_cdf"):
    x = np.asarray(x, float)
    x = x[~np.isnan(x)]
    if not x.size:
        return float("nan"), float("nan"), float("nan")
    a = (1 - level) / 2
    return (float(np.quantile(x, 0.5, method=method)), float(np.quantile(x, a, method=method)),
            float(np.quantile(x, 1 - a, method=method)))


def _fin(v):
    return None if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))) else v


@dataclass(frozen=True)
class Prediction:
    """Population-level predictions of a fitted strategy, one entry per posterior draw.

    Attributes
    ----------
    names : tuple of str
    memory, n_agents, n_draws, within_rounds : int
    level : float
        Credible level of the intervals (equal-tailed over draws).
    consensus : pandas.DataFrame
        ``draw``, ``name`` (a name or ``"none"``), ``runs`` (runs won), ``n_runs``.
    success : pandas.DataFrame
        ``draw``, ``round`` (from 1), ``success_rate`` (mean over the draw's runs, stopped runs
        padded with 1).
    draw_stats : pandas.DataFrame
        ``draw``, ``rounds_to_95``, ``consensus_rounds`` (mean stop time in rounds),
        ``converged`` (fraction of runs that stopped within ``max_rounds``).
    flips : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``committed``, ``n_runs``, ``n_flips``
        (``per_run``), ``simulated`` (False where the monotone shortcut filled the count in),
        ``published_last3`` and ``published_success`` (the published rule on the draw's
        replication of the paper's experiment).
    critical_mass_draws : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``published``, ``per_run`` (``inf``: not
        reached).
    strength : pandas.DataFrame
        ``draw``, ``majority``, ``challenger``, ``width``, ``boundary``, ``pull``,
        ``exploration`` and ``p_win_<f>`` (P(consensus on the majority name) from a mixture
        with fraction ``f`` of its holders); empty if not computed.
    settings : dict
    fit_summary : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables S2-S3,
    Methods "Committed Minorities", Supplementary Text "Characterizing Relative Strength".
    """

    names: tuple
    memory: int
    n_agents: int
    n_draws: int
    within_rounds: int
    level: float
    consensus: pd.DataFrame
    success: pd.DataFrame
    draw_stats: pd.DataFrame
    flips: pd.DataFrame
    critical_mass_draws: pd.DataFrame
    strength: pd.DataFrame
    settings: dict = field(default_factory=dict)
    fit_summary: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ summaries
    def p_consensus(self) -> dict:
        """Posterior predictive probability that a run converges on each name (pooled over draws).

        Returns
        -------
        dict
            name -> probability (``"none"`` not included; see :meth:`consensus_summary`).
        """
        c = self.consensus
        if c.empty:  # predicted with consensus=False
            return {}
        tot = c.groupby("name")["runs"].sum()
        n = c.drop_duplicates("draw")["n_runs"].sum()
        return {nm: float(tot.get(nm, 0) / n) for nm in self.names} if n else {}

    def consensus_summary(self) -> pd.DataFrame:
        """Per name (and ``"none"``): pooled probability, and the median and interval of the
        per-draw fraction of runs."""
        c = self.consensus.copy()
        if c.empty:  # predicted with consensus=False
            return pd.DataFrame(columns=["name", "probability", "median", "low", "high"])
        c["p"] = c["runs"] / c["n_runs"]
        rows = []
        for nm, g in c.groupby("name", sort=False):
            med, lo, hi = _q(g["p"], self.level, "linear")
            rows.append({"name": nm, "probability": float(g["runs"].sum() / g["n_runs"].sum()), "median": med,
                         "low": lo, "high": hi})
        return pd.DataFrame(rows)

    def rounds_to_95(self) -> dict:
        """Median and credible interval of the round at which the mean success rate reaches 0.95
        (``n_runs_consensus`` runs per draw, like the 40 runs of a published experiment)."""
        x = self.draw_stats["rounds_to_95"].to_numpy(float)
        est, lo, hi = _q(x, self.level)
        return {"estimate": est, "low": lo, "high": hi, "p_not_reached": float(np.mean(np.isnan(x))) if x.size else float("nan")}

    def consensus_rounds(self) -> dict:
        """Median and interval of the mean stop time (rounds) of converging runs."""
        est, lo, hi = _q(self.draw_stats["consensus_rounds"], self.level, "linear")
        return {"estimate": est, "low": lo, "high": hi}

    def success_curve(self) -> pd.DataFrame:
        """Mean success rate per round: ``round``, ``mean``, ``median``, ``low``, ``high`` over draws."""
        s = self.success
        a = (1 - self.level) / 2
        g = s.groupby("round")["success_rate"]
        return pd.DataFrame({"mean": g.mean(), "median": g.median(), "low": g.quantile(a),
                             "high": g.quantile(1 - a)}).reset_index()

    def critical_mass(self, criterion: str | None = None) -> dict:
        """Critical mass per direction by the ``published`` and ``per_run`` criteria.

        Parameters
        ----------
        criterion : {"published", "per_run"}, optional
            Return only that reading (``overturn_<X>`` -> its dict); default both.

        Returns
        -------
        dict
            ``overturn_<X>`` -> ``published`` and ``per_run``, each ``estimate`` (median over
            draws), ``low``, ``high`` (credible interval; ``inf`` = not reached within the swept
            counts) and ``p_not_reached``; ``per_run`` also ``pooled`` (smallest count where the
            pooled posterior predictive flip probability reaches ``flip_level``). The top-level
            ``estimate``, ``low``, ``high``, ``p_not_reached`` repeat ``published`` (the reading of
            Flint Ashery et al. 2025, Table S3), with ``criterion``, ``majority``, ``challenger``, ``n_agents``.
            ``published`` is the smallest count whose simulated replication of the paper's
            experiment (``design_runs`` runs per count, window ``max_round``) meets the authors'
            ensemble rule, per draw -- so its interval carries parameter *and* experiment-size
            uncertainty; ``per_run`` the smallest count where at least ``flip_level`` of the
            draw's ``n_runs_flip`` runs flip within ``within_rounds``.
        """
        if criterion is not None:
            from normlab.theory.criteria import check_criterion

            if check_criterion(criterion) == "end_of_run":
                raise ValueError("predictions report the 'published' and 'per_run' criteria; got 'end_of_run'")
        out = {}
        W = len(self.names)
        curve = self.flip_curve()
        for (x, y), g in self.critical_mass_draws.groupby(["majority", "challenger"], sort=False):
            entry = {}
            for crit in ("published", "per_run"):
                v = g[crit].to_numpy(float)
                est, lo, hi = _q(v, self.level)
                entry[crit] = {"estimate": est, "low": lo, "high": hi, "p_not_reached": float(np.mean(np.isinf(v)))}
            cv = curve[(curve["majority"] == x) & (curve["challenger"] == y)]
            pooled = cv.loc[cv["p_flip"] >= self.settings.get("flip_level", FLIP_LEVEL), "committed"]
            entry["per_run"]["pooled"] = float(pooled.min()) if len(pooled) else math.inf
            if criterion is not None:
                out[_key(x, y, W)] = entry[criterion]
                continue
            out[_key(x, y, W)] = {**{k: entry["published"][k] for k in ("estimate", "low", "high", "p_not_reached")},
                                  "criterion": "published", "published": entry["published"],
                                  "per_run": entry["per_run"], "majority": x, "challenger": y,
                                  "n_agents": self.n_agents}
        return out

    def flip_curve(self) -> pd.DataFrame:
        """Posterior predictive flip curve per committed count: ``majority``, ``challenger``,
        ``committed``, ``p_flip`` (``per_run``: pooled runs), ``low``, ``high`` (interval of the
        per-draw flip frequency), ``n_flips``, ``n_runs``, ``p_published`` (fraction of draws
        whose simulated replication of the paper's experiment meets the published rule at this
        count)."""
        f = self.flips.copy()
        f["p"] = f["n_flips"] / f["n_runs"]
        f["pub"] = f["published_success"].astype(float)
        a = (1 - self.level) / 2
        g = f.groupby(["majority", "challenger", "committed"], sort=False)
        out = g.agg(n_flips=("n_flips", "sum"), n_runs=("n_runs", "sum"), low=("p", lambda s: s.quantile(a)),
                    high=("p", lambda s: s.quantile(1 - a)), p_published=("pub", "mean")).reset_index()
        out["p_flip"] = out["n_flips"] / out["n_runs"]
        return out[["majority", "challenger", "committed", "p_flip", "low", "high", "n_flips", "n_runs", "p_published"]]

    def relative_strength(self) -> pd.DataFrame:
        """Per convention: median and interval of ``width``, ``boundary``, ``pull``, ``exploration``."""
        if self.strength.empty:
            return pd.DataFrame(columns=["majority", "quantity", "estimate", "low", "high"])
        rows = []
        for x, g in self.strength.groupby("majority", sort=False):
            for q in ("width", "boundary", "pull", "exploration"):
                est, lo, hi = _q(g[q], self.level, "linear")
                rows.append({"majority": x, "quantity": q, "estimate": est, "low": lo, "high": hi})
        return pd.DataFrame(rows)

    def to_frame(self) -> pd.DataFrame:
        """All headline quantities in long format: ``quantity``, ``key``, ``estimate``, ``low``,
        ``high``."""
        rows = []
        for _, r in self.consensus_summary().iterrows():
            rows.append({"quantity": "p_consensus", "key": r["name"], "estimate": r["probability"],
                         "low": r["low"], "high": r["high"]})
        r95 = self.rounds_to_95()
        rows.append({"quantity": "rounds_to_95", "key": "", "estimate": r95["estimate"], "low": r95["low"],
                     "high": r95["high"]})
        cr = self.consensus_rounds()
        rows.append({"quantity": "consensus_rounds", "key": "", **cr})
        for k, v in self.critical_mass().items():
            for crit, q in (("published", "critical_mass"), ("per_run", "critical_mass_per_run")):
                rows.append({"quantity": q, "key": k, "estimate": v[crit]["estimate"], "low": v[crit]["low"],
                             "high": v[crit]["high"]})
        for _, r in self.relative_strength().iterrows():
            rows.append({"quantity": r["quantity"], "key": r["majority"], "estimate": r["estimate"], "low": r["low"],
                         "high": r["high"]})
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        """JSON-friendly summary (the ``normlab calibrate --json`` output)."""
        def clean(v):
            if isinstance(v, dict):
                return {kk: clean(vv) for kk, vv in v.items()}
            return _fin(v) if isinstance(v, float) else v

        cm = {k: clean(v) for k, v in self.critical_mass().items()}
        fc = self.flip_curve()
        curves = {}
        for (x, y), g in fc.groupby(["majority", "challenger"], sort=False):
            curves[_key(x, y, len(self.names))] = [
                {"committed": int(r["committed"]), "p_flip": float(r["p_flip"]), "low": float(r["low"]),
                 "high": float(r["high"]), "p_published": float(r["p_published"])} for _, r in g.iterrows()]
        r95 = {k: _fin(v) for k, v in self.rounds_to_95().items()}
        cons = self.consensus_summary().set_index("name")
        strength = {}
        for _, r in self.relative_strength().iterrows():
            strength.setdefault(r["majority"], {})[r["quantity"]] = {"estimate": _fin(r["estimate"]),
                                                                   "low": _fin(r["low"]), "high": _fin(r["high"])}
        out = {
            "names": list(self.names),
            "memory": self.memory,
            "n_agents": self.n_agents,
            "draws": self.n_draws,
            "level": self.level,
            "within_rounds": self.within_rounds,
            "p_consensus": self.p_consensus(),
            "p_no_consensus": float(cons.loc[NONE, "probability"]) if NONE in cons.index else 0.0,
            "p_consensus_interval": {nm: [_fin(cons.loc[nm, "low"]), _fin(cons.loc[nm, "high"])]
                                     for nm in self.names if nm in cons.index},
            "rounds_to_95": r95,
            "consensus_rounds": {k: _fin(v) for k, v in self.consensus_rounds().items()},
            "critical_mass": cm,
            "flip_curve": curves,
            "relative_strength": strength,
            "settings": dict(self.settings),
        }
        return plain(out)

    # ------------------------------------------------------------------ display, save / load
    def _headline(self) -> list:
        """``(label, estimate, (low, high), note)`` rows of the headline quantities."""
        rows = []
        cs = self.consensus_summary()
        for _, r in cs.iterrows():
            rows.append((f"P(consensus on {r['name']})", r["probability"], (r["low"], r["high"]),
                         "pooled; interval of the per-draw fraction"))
        if len(self.draw_stats):
            r95 = self.rounds_to_95()
            rows.append(("rounds to 95% success", r95["estimate"], (r95["low"], r95["high"]),
                         f"not reached in {r95['p_not_reached']:.0%} of draws" if r95["p_not_reached"] else ""))
            cr = self.consensus_rounds()
            rows.append(("rounds to 3N consecutive successes", cr["estimate"], (cr["low"], cr["high"])))
        for k, v in self.critical_mass().items():
            rows.append((f"critical mass {k} (published rule)", v["published"]["estimate"],
                         (v["published"]["low"], v["published"]["high"]),
                         f"{self.settings.get('design_runs', DESIGN_RUNS)}-run experiment per draw"))
            pr = v["per_run"]
            rows.append((f"critical mass {k} (per run)", pr["estimate"], (pr["low"], pr["high"]),
                         f"P(flip) >= {self.settings.get('flip_level', FLIP_LEVEL):g} within {self.within_rounds} rounds"))
        for _, r in self.relative_strength().iterrows():
            rows.append((f"{r['quantity']} of {r['majority']}", r["estimate"], (r["low"], r["high"])))
        return rows

    def __repr__(self) -> str:
        parts = [f"names {','.join(self.names)}", f"H={self.memory}", f"N={self.n_agents}", f"{self.n_draws} draws"]
        pc = self.p_consensus()
        if pc:
            parts.append("P(consensus) " + ", ".join(f"{k} {v:.2f}" for k, v in pc.items()))
        for k, v in self.critical_mass().items():
            parts.append(f"critical mass {k} {fmt(v['estimate'])} {fmt_interval(v['low'], v['high'])}")
        if len(self.draw_stats):
            r = self.rounds_to_95()
            parts.append(f"rounds to 95% success {fmt(r['estimate'])} {fmt_interval(r['low'], r['high'])}")
        return short_repr("Prediction", *parts)

    def _repr_html_(self) -> str:
        fs = self.fit_summary or {}
        return html_card("Prediction", self._headline(), level=self.level,
                         subtitle=f"{fs.get('kind', 'strategy')} fit, names {','.join(self.names)}, H = {self.memory}, "
                                  f"N = {self.n_agents}",
                         settings={"posterior draws": self.n_draws, "flip window (rounds)": self.within_rounds,
                                   "published window (rounds)": self.settings.get("max_round"),
                                   "runs per draw (convergence / flips)":
                                       f"{self.settings.get('n_runs_consensus')} / {self.settings.get('n_runs_flip')}"},
                         note="equal-tailed credible intervals over posterior draws; .plot() draws the flip curves "
                              "(kind='success': the success curve); .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "flip", *, ax=None, observed=None):
        """Posterior predictive curves: flip probability against the committed count (one line
        per direction), or the mean success rate per round, with 95% bands over draws.

        Parameters
        ----------
        kind : {"flip", "success"}, optional
            ``flip`` (Fig. 3B analogue): P(flip within the window) pooled over draws, the band
            of the per-draw flip frequency, and (dashed) the fraction of draws whose simulated
            replication of the paper's experiment meets the published rule; the critical masses
            of both readings in the legend. ``success`` (Fig. 1A analogue): mean success rate per
            round, band over draws, and the 0.95 level.
        ax : matplotlib Axes, optional
        observed : pandas.Series or EmpiricalCriticalMass, optional
            Observed values on top: a success curve indexed by round (``success``), or the
            empirical flip curves of committed-minority runs (``flip``, Clopper-Pearson 95%).

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. 1A and 3B, Table S3.
        """
        if kind not in ("flip", "success"):
            raise ValueError(f"kind must be 'flip' or 'success'; got {kind!r}")
        if kind == "success":
            if self.success.empty:
                raise ValueError("this prediction has no convergence runs (predicted with consensus=False)")
            ax = new_axes(ax)
            sc = self.success_curve()
            ax.fill_between(sc["round"], sc["low"], sc["high"], alpha=0.25, lw=0, color="C0",
                            label=f"{self.level:.0%} band over draws")
            ax.plot(sc["round"], sc["mean"], color="C0", label=f"predicted (N = {self.n_agents})")
            if observed is not None:
                ax.plot(observed.index, np.asarray(observed, float), "o-", ms=3, color="C3", label="observed")
            ax.axhline(0.95, color="0.5", lw=0.8, ls=":")
            done = sc.loc[sc["mean"] >= 0.99, "round"]  # show the rise, not 200 rounds of 1.0
            if len(done):
                ax.set_xlim(0, min(float(sc["round"].max()), max(10.0, 1.5 * float(done.iloc[0]))))
            r95 = self.rounds_to_95()
            ax.set(xlabel="population round (N interactions)", ylabel="success rate", ylim=(-0.02, 1.02),
                   title=f"rounds to 95% success: {fmt(r95['estimate'])} {fmt_interval(r95['low'], r95['high'])}")
            ax.title.set_fontsize(9)
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.legend(fontsize=8, loc="lower right")
            return ax
        ax = new_axes(ax, (7.6, 3.9))
        fc = self.flip_curve()
        cm = self.critical_mass()
        W = len(self.names)
        for k, ((x, y), g) in enumerate(fc.groupby(["majority", "challenger"], sort=False)):
            key = _key(x, y, W)
            c = f"C{k}"
            v = cm.get(key, {})
            pub, per = v.get("published", {}), v.get("per_run", {})
            ax.fill_between(g["committed"], g["low"], g["high"], color=c, alpha=0.2, lw=0)
            ax.plot(g["committed"], g["p_flip"], "-", color=c, lw=1.8,
                    label=f"{key}: P(flip), per run; critical mass {fmt(per.get('estimate'))} "
                          f"{fmt_interval(per.get('low'), per.get('high'))}")
            ax.plot(g["committed"], g["p_published"], "--", color=c, lw=1.2,
                    label=f"{key}: P(published rule met); critical mass {fmt(pub.get('estimate'))} "
                          f"{fmt_interval(pub.get('low'), pub.get('high'))}")
            if observed is not None:
                cv = observed.curves
                cv = cv[(cv["majority"] == x) & (cv["n_agents"] == self.n_agents) & (cv["memory"] == self.memory)]
                if len(cv):
                    ax.errorbar(cv["committed"], cv["p_flip"], yerr=[cv["p_flip"] - cv["ci_low"],
                                                                       cv["ci_high"] - cv["p_flip"]],
                                fmt="o", color=c, mec="k", mew=0.6, capsize=3, label=f"{key}: observed runs")
        ax.axhline(self.settings.get("flip_level", FLIP_LEVEL), color="0.5", lw=0.8, ls=":")
        full = fc[(fc["low"] >= 1) & (fc["p_published"] >= 1)].groupby(["majority", "challenger"])["committed"].min()
        if len(full) == fc.groupby(["majority", "challenger"]).ngroups:  # every curve saturates: stop after it
            right = min(float(fc["committed"].max()), float(full.max()) + 2.5)
            if observed is not None:  # but show every observed count
                cv = observed.curves
                cv = cv[(cv["n_agents"] == self.n_agents) & (cv["memory"] == self.memory)]
                right = max(right, float(cv["committed"].max()) + 0.5) if len(cv) else right
            ax.set_xlim(-0.5, right)
        ax.set(xlabel="committed agents", ylabel="probability", ylim=(-0.03, 1.03),
               title=f"predicted flip curves, N = {self.n_agents}, window {self.within_rounds} rounds "
                     f"({self.level:.0%} bands over {self.n_draws} draws)")
        ax.title.set_fontsize(9)
        ax.xaxis.get_major_locator().set_params(integer=True)
        legend_outside(ax, "below", ncol=1)
        return ax

    _TABLES = ("consensus", "success", "draw_stats", "flips", "critical_mass_draws", "strength")

    def save(self, path) -> "Path":
        """Write the prediction to the folder ``path`` (``result.json`` and one Parquet table per
        per-draw frame); read it back with :meth:`load` or ``normlab.load``."""
        from normlab._display import save_result

        meta = {"names": list(self.names), "memory": self.memory, "n_agents": self.n_agents,
                "n_draws": self.n_draws, "within_rounds": self.within_rounds, "level": self.level,
                "settings": self.settings, "fit_summary": self.fit_summary}
        return save_result(path, type(self), meta, {k: getattr(self, k) for k in self._TABLES})

    @classmethod
    def load(cls, path) -> "Prediction":
        """Read a prediction written by :meth:`save`."""
        from normlab._display import load_result

        meta, t = load_result(path, cls)
        return cls(names=tuple(meta["names"]), memory=int(meta["memory"]), n_agents=int(meta["n_agents"]),
                   n_draws=int(meta["n_draws"]), within_rounds=int(meta["within_rounds"]), level=float(meta["level"]),
                   settings=meta["settings"], fit_summary=meta["fit_summary"], **{k: t[k] for k in cls._TABLES})


def _predict_kernel(tables, ids, parent, cfg, names, H, executor):
    """The kernel engine: all draws in one compiled call (or one per chunk on ``executor``)."""
    cfg = dict(cfg, names=tuple(names), memory=H)
    if executor is None:
        out = _run_design(tables, ids, parent, cfg)
    else:
        D = len(ids)
        n_chunks = max(1, min(D, 4 * int(getattr(executor, "_max_workers", 2) or 2)))
        parts = [p for p in np.array_split(np.arange(D), n_chunks) if len(p)]
        futs = [executor.submit(_design_chunk, [tables[i] for i in p], [ids[i] for i in p], parent, cfg)
                for p in parts]
        res = [f.result()[1] for f in futs]
        out = {k: np.concatenate([r[k] for r in res]) for k in res[0]}
    return _frames_from_design(out, ids, tuple(names), cfg)


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


# ----------------------------------------------------------------------------- entry point
def predict(fit, *, n_agents: int, n_draws: int = 200, within_rounds: int = 30, n_runs_consensus: int = 40,
            n_runs_flip: int = 16, max_rounds: int = 200, committed=None, directions=None, consensus: bool = True,
            strength: bool = True, assume_monotone: bool = True, level: float = 0.95, flip_level: float = FLIP_LEVEL,
            design_runs: int = DESIGN_RUNS, max_round: int | None = None, threads: int | None = 1, executor=None,
            engine: str = "kernel", rng=None) -> Prediction:
    """Predict collective bias, convergence speed, critical masses and relative strength.

    Parameters
    ----------
    fit : StrategyFit, StrategyTable or list of StrategyTable
        Posterior to draw from (see :func:`table_draws`).
    n_agents : int
        Population size ``N`` of the predicted experiment.
    n_draws : int, optional
        Posterior draws of the table.
    within_rounds : int, optional
        Window (population rounds) of the flip criterion and of pull/exploration (30 in Flint Ashery et al.
        2025, Methods).
    n_runs_consensus : int, optional
        Convergence runs per draw (40 per published experiment).
    n_runs_flip : int, optional
        Runs per draw and committed count of the ``per_run`` reading (and per mixture for the
        basin width).
    max_rounds : int, optional
        Cap of the convergence runs.
    committed : sequence of int, optional
        Committed counts swept (default ``0 .. N - 1``; Flint Ashery et al. (2025) report critical masses up to
        two thirds of N).
    directions : sequence, optional
        Majority names (two-name pools) or ``(majority, challenger)`` pairs; default: every
        ordered pair.
    consensus, strength : bool, optional
        Skip the convergence runs / the relative-strength runs.
    assume_monotone : bool, optional
        Stop a sweep after two consecutive counts where every run flipped and the published
        rule was met (saturation; larger counts are counted as flipping).
    level : float, optional
        Credible level of the reported intervals.
    flip_level : float, optional
        Flip frequency defining a draw's ``per_run`` critical mass (0.5).
    design_runs : int, optional
        Runs per committed count of the simulated replication of the paper's experiment, to which
        the ``published`` rule is applied (10, Flint Ashery et al. 2025, Methods); the first ``design_runs`` of the
        ``max(n_runs_flip, design_runs)`` runs simulated per count.
    max_round : int, optional
        Window of the published rule; default the authors' window for the fitted LLM at this N
        (:func:`normlab.theory.criteria.published_max_round`: 30, 21 for Llama-3 at N = 48; the
        LLM is read from the fit's ``meta``: ``llm``, or the single model of its source runs).
    threads : int or None, optional
        Numba threads per simulation call of the ``"reference"`` engine (default 1: the many
        small simulations are faster without a parallel region each; None keeps the current
        setting). The kernel engine runs on one thread; use ``executor`` to spread draws.
    executor : concurrent.futures.Executor, optional
        Runs chunks of draws in parallel (a ``ProcessPoolExecutor`` with the ``spawn`` context,
        or a dask client's executor); results do not depend on it.
    engine : {"kernel", "reference"}, optional
        ``"kernel"`` (default): every simulation of every draw in one compiled call
        (:func:`normlab.theory.memory_game.strategy_design`) with the reductions inside it and
        one vectorised seed derivation; ``"reference"``: one
        :func:`~normlab.theory.strategy_game` call per draw and setting, reduced in Python (the
        original implementation, kept as the reference). Both simulate the same runs from the
        same seeds and return the same prediction (up to the last bits of float means).
    rng : optional

    Returns
    -------
    Prediction

    Raises
    ------
    ValueError, TypeError
        Invalid settings (checked before any simulation).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables S2-S3,
    Methods "Committed Minorities", Supplementary Text "Characterizing Relative Strength".
    """
    from normlab.theory._common import check_int
    from normlab.theory.criteria import published_max_round

    if engine not in ("kernel", "reference"):
        raise ValueError(f"engine must be 'kernel' or 'reference'; got {engine!r}")
    N = check_int(n_agents, "n_agents", low=2)
    D = check_int(n_draws, "n_draws", low=1)
    wr = check_int(within_rounds, "within_rounds", low=3)
    nrc = check_int(n_runs_consensus, "n_runs_consensus", low=1)
    nrf = check_int(n_runs_flip, "n_runs_flip", low=1)
    mr = check_int(max_rounds, "max_rounds", low=3)
    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    if not 0 < float(flip_level) <= 1:
        raise ValueError(f"flip_level must be in (0, 1]; got {flip_level}")
    nd = check_int(design_runs, "design_runs", low=1)
    if max_round is None:
        mxr = published_max_round(_fit_llm(fit), N)
    else:
        mxr = check_int(max_round, "max_round", low=3)
    if committed is None:
        counts = list(range(0, N))
    else:
        counts = sorted(set(int(c) for c in np.atleast_1d(committed)))
        if not counts or counts[0] < 0 or counts[-1] >= N:
            raise ValueError(f"committed counts must lie in [0, {N - 1}]")
    if isinstance(fit, StrategyFit):
        names, H = fit.names, fit.memory
    else:
        first = fit if not isinstance(fit, (list, tuple)) else (fit[0] if fit else None)
        if first is None or not hasattr(first, "names"):
            raise TypeError(f"fit must be a StrategyFit, a StrategyTable or a list of them; got {type(fit).__name__}")
        names, H = tuple(first.names), first.memory
    dirs = _directions(tuple(names), directions)
    seeds = spawn(rng, 2)
    tables = table_draws(fit, D, rng=seeds[0])
    draw_seeds = spawn(seeds[1], D) if engine == "reference" else None
    cfg = dict(n_agents=N, within_rounds=wr, n_runs_consensus=nrc, n_runs_flip=nrf, max_rounds=mr,
               committed=counts, directions=dirs, consensus=bool(consensus), strength=bool(strength),
               assume_monotone=bool(assume_monotone), level=float(flip_level), design_runs=nd, max_round=mxr)
    ids = list(range(D))
    if engine == "kernel":
        cons, success, stats, flips, cmd, strg = _predict_kernel(tables, ids, seeds[1], cfg, names, H, executor)
    else:
        cons, success, stats, flips, cmd, strg = _predict_reference(tables, ids, draw_seeds, cfg, threads, executor)
    settings = dict(cfg, committed=list(counts), directions=[list(d) for d in dirs], flip_level=float(flip_level),
                    n_draws=D, stop="streak (3N consecutive successes)", winner_rule="majority of the last 3 rounds",
                    criteria={"published": f"ensemble rule of Flint Ashery et al. 2025, Table S3 (plotter.ipynb cells 9-10) on "
                                           f"{nd} runs per count, window {mxr} rounds",
                              "per_run": f"first passage within {wr} rounds, {nrf} runs per count, "
                                         f"flip frequency >= {float(flip_level)}"})
    fs = fit.summary() if isinstance(fit, StrategyFit) else {"kind": "fixed table"}
    return Prediction(names=tuple(names), memory=H, n_agents=N, n_draws=D, within_rounds=wr, level=float(level),
                      consensus=cons, success=success, draw_stats=stats, flips=flips, critical_mass_draws=cmd,
                      strength=strg, settings=settings, fit_summary=fs)
