"""Find a critical mass for a fraction of the cost: adaptive committed-minority experiments (``normlab tip``).

The critical mass of Flint Ashery et al. (2025, Table S3) is the smallest committed count whose
runs meet the authors' ensemble rule, read on a stated experiment -- its tested counts, runs per
count, run protocol and window (:class:`~normlab.calibration.ExperimentDesign`). The paper
played the whole grid. :func:`tip` plays only the runs that teach the most and stops when the
answer is known:

1. **Start** from what is known: baseline runs (the source's, or a log), or a fitted table or
   probe counts (``prior``).
2. **Refit** after every step, on *all* runs so far -- baselines and committed, since one table
   governs both -- the strategy table (default the Dirichlet table, ``empirical``: instant) and
   the between-run heterogeneity (:func:`~normlab.calibration.fit_run_effects`, on the runs).
3. **Predict the experiment, runs included.** Per posterior draw, every count of the design is
   read by the published rule (:func:`normlab.theory.criteria.published_rule`) on the ``k`` runs
   *observed* there plus ``R - k`` runs *simulated* by the draw (the design's runs per count
   ``R``; untested counts all simulated). The observed runs are part of the experiment, not
   evidence weighed against the model: a misspecified model cannot overrule them -- at a count
   played out it has no say at all. The draw's critical mass is the smallest count meeting the
   rule; over draws, its posterior predictive distribution **on the tested counts** (a draw
   whose critical mass falls past the last tested count, or is not reached, counts as "beyond
   the tested counts"): the estimate is the most probable tested count, never a count the
   design did not test, and the interval is equal-tailed over the same support.
4. **Stop** when the credible set -- the smallest set of tested counts holding ``target`` (0.9) of
   the mass -- spans at most ``tolerance`` agents (1: one count, or two neighbouring tested counts;
   grid-aware: on {0, 1, 2, 4, 6, 8, 10} the set {8, 10} is not tight), once its counts have had
   their experiments played out (up to ``confirm`` = 10 runs each, the estimate first: the
   published rule is an ensemble reading that one slow run of ten fails, which simulated runs
   cannot vouch for) -- or when the budget (runs, requests, tokens, money) is spent, or no playable count
   can change the answer. The result also gives the critical mass a *fresh* experiment of the
   same design would report (``replication``): the interval an independent archive falls in. Its
   table draws have the shared run effects of the cells they were fitted on integrated out
   (:func:`_fresh_tables`: the runs of one count share a part of their effects, which the fitted
   table absorbs and a fresh experiment's cells do not share).
5. **Choose** the next batch (``batch`` runs, default 2, at one count) by its expected
   information about the critical mass per unit of cost (``strategy="eig"``): for each playable
   count ``c``, the draws' simulated runs that the batch would replace give the posterior
   predictive joint law of the batch's outcome ``Z`` (per run: flipped by its end, challenger
   majority at the window's end, neither) and of the critical mass; the mutual information
   ``I(CM; Z)`` is divided by the batch's cost, ``batch * source.run_cost(c)``, by default
   ``batch * (N - c) / N`` baseline runs (the uncommitted agents' LLM calls: the tokens). Only
   counts that can still change the answer (``P(CM >= c) >= 0.05``) are candidates: a count
   above the critical mass does not move it, and a cheap run there must not win on its cost.
   ``strategy="half"``: the count whose probability of meeting the rule is nearest 1/2 among
   those candidates, per unit of cost.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods ("Committed
minorities"), Fig. 3, Table S3; the authors' ``plotter.ipynb`` cells 9-10. D. V. Lindley, Ann.
Math. Stat. 27, 986 (1956) (expected information of an experiment); K. Chaloner, I. Verdinelli,
Stat. Sci. 10, 273 (1995) (Bayesian experimental design).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from normlab._display import fmt, fmt_interval, plain
from normlab._rng import as_seed_sequence
from normlab._validate import check_int
from normlab.llm_runs import BudgetExhausted
from normlab.schema import GameLog
from normlab.theory.criteria import FLIP_SUM, LAST_ROUNDS, published_rule
from normlab.theory.strategies import StrategyTable

from ..evaluate.observed_critical_mass import challenger_shares
from ..fit.inputs import StateCounts, counts_from_log
from ..fit.posterior import StrategyFit
from ..fit.registry import fit_strategy
from ..fit.run_effects import MIN_RUNS, RunEffects, fit_run_effects
from ..prediction.api import predict
from ..prediction.experiment import PAPER_RUNS, ExperimentDesign
from .settings import STRATEGIES, TipSettings
from .sources import Batch, RunSource
from .result import TipResult, _set_text

__all__ = ["tip", "run_tip", "TipResult", "TipSettings", "STRATEGIES", "count_met"]
#: A count "can still change the answer" (a candidate of either strategy) when P(CM >= c) is at least this.
RELEVANT = 0.05
#: Child seed (of the search's) of the replication's tables and runs (the steps use 0, 1, 2, ...).
FRESH_KEY = 1_000_000


# ----------------------------------------------------------------------------- the search
def tip(source: RunSource, *, target: float = 0.9, level: float = 0.95, batch: int = 2, fit_model: str = "empirical",
        prior=None, run_effects: bool = True, n_draws: int = 200, strategy: str = "eig", max_runs: int | None = None,
        max_steps: int = 60, log: GameLog | None = None, confirm: int = PAPER_RUNS, tolerance: int = 1,
        progress=None, rng=None) -> "TipResult":
    """Find the published-rule critical mass of an experiment with as few runs as the answer needs.

    Parameters
    ----------
    source : RunSource
        Where runs come from: :class:`~normlab.calibration.tip.sources.ArchiveReplay` (a published
        or synthetic archive) or :class:`~normlab.calibration.tip.sources.LLMSource` (an endpoint);
        its ``design`` is the experiment whose critical mass is sought.
    target : float, optional
        Stop when the smallest set of tested counts holding this much of the posterior
        predictive mass (0.9) spans at most ``tolerance`` agents.
    level : float, optional
        Level of the reported interval (0.95).
    batch : int, optional
        Runs per step (at one count; fewer where fewer are left).
    fit_model : str, optional
        Registered fit kind refitted after every step (default ``"empirical"``, the Dirichlet table).
    prior : StrategyFit or StateCounts, optional
        What is known without runs (a fitted table's decision counts, probe counts): added to the
        runs' counts at every refit; a fit's stored run effects are used until the search has
        runs of its own to estimate them from.
    run_effects : bool, optional
        Estimate the between-run heterogeneity on the runs so far and simulate it (default True).
    n_draws : int, optional
        Posterior draws per step.
    strategy : {"eig", "half"}, optional
        How the next batch is chosen (module docstring).
    max_runs : int, optional
        Budget of committed-minority runs (the source's own budget of requests, tokens or money also stops it).
    max_steps : int, optional
        Safety cap on the number of steps.
    log : normlab.schema.GameLog, optional
        Baseline runs known in advance (``--from-log``), used with (or instead of) the source's.
    tolerance : int, optional
        Width (agents, on the tested counts) a credible set may span for the search to stop (1: one
        count, or two neighbouring tested counts such as {1, 2}; on a coarse grid such as
        {0, 1, 2, 4, 6, 8, 10} the set {8, 10} is not tight).
    confirm : int, optional
        Before stopping at the target, play out the most probable critical mass's experiment --
        its runs, up to ``confirm`` of them (default 10, the paper's runs per count; 0: off), where
        the source has them: the published rule is an ensemble reading that one slow run fails,
        which simulated runs cannot vouch for.
    progress : callable or bool, optional
        ``True`` prints one line per step to stderr; a callable receives each step's record.
    rng : optional
        Seeds the simulations of every step (step ``i`` uses child ``i``).

    Returns
    -------
    TipResult

    Raises
    ------
    ValueError, TypeError
        Invalid settings (checked before any run).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3;
    Lindley (1956); Chaloner & Verdinelli (1995).
    """
    _check_source(source)
    settings = TipSettings(target=target, level=level, batch=batch, n_draws=n_draws, strategy=strategy,
                           fit_model=fit_model, run_effects=run_effects, max_runs=max_runs, max_steps=max_steps,
                           confirm=confirm, tolerance=tolerance)
    return run_tip(source, settings, prior=prior, log=log, progress=progress, rng=rng)


def _check_source(source) -> None:
    if not isinstance(source, RunSource):
        raise TypeError(f"source must be a RunSource (ArchiveReplay, LLMSource); got {type(source).__name__}")


def run_tip(source: RunSource, settings: TipSettings, *, prior=None, log: GameLog | None = None, progress=None,
            rng=None) -> "TipResult":
    """The search engine: :func:`tip` with its settings in one :class:`TipSettings`.

    Parameters
    ----------
    source : RunSource
    settings : TipSettings
    prior, log, progress, rng : optional
        As for :func:`tip`.

    Returns
    -------
    TipResult
    """
    _check_source(source)
    if not isinstance(settings, TipSettings):
        raise TypeError(f"settings must be a TipSettings; got {type(settings).__name__}")
    s = settings
    target, level, B, D, strategy = s.target, s.level, s.batch, s.n_draws, s.strategy
    fit_model, run_effects, max_runs, max_steps = s.fit_model, s.run_effects, s.max_runs, s.max_steps
    tol = s.tolerance
    prior_counts, prior_effects = _prior(prior, source)
    if log is not None and not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    confirm_mode = check_int(s.confirm, "confirm", low=0)
    say = _printer(progress)
    ss = as_seed_sequence(rng)
    design = source.design
    t0 = time.perf_counter()

    known = [log] if log is not None else []
    kb = source.known()
    tokens = 0 if kb is None or kb.tokens is None else int(kb.tokens)
    usd = 0.0 if kb is None or kb.usd is None else float(kb.usd)
    tokens_known = kb is None or kb.tokens is not None
    if kb is not None and len(kb.log.runs):
        known.append(kb.log)
    baseline_runs = sum(len(x.runs) for x in known)
    if not known and prior_counts is None and kb is not None and not kb.complete:
        raise BudgetExhausted("the budget was spent before the baseline runs finished (nothing else to start from); "
                              "the runs played so far are kept")
    if not known and prior_counts is None:
        raise ValueError("nothing to start from: give baseline runs (a log or a source with baselines), a table or "
                         "probe counts (prior=)")
    played: list[Batch] = []
    steps, curves, run_rows = [], [], []
    effects = None
    stopped = None
    step = 0
    while True:
        data = known + [b.log for b in played if len(b.log.runs)]
        fit, effects = _refit(data, prior_counts, prior_effects, source, fit_model, run_effects, effects,
                              _child(ss, 2 * step))
        sim = _simulate(fit, design, D, _child(ss, 2 * step + 1))
        observed = _observed(played, source)
        met, cls, grid = _combine(sim, observed, design)
        cm = _critical_masses(met, grid)
        summ = _summarise(cm, level, grid, tol=tol, target=target)
        est, low, high = summ["estimate"], summ["low"], summ["high"]
        runs_used = sum(len(b.log.runs) for b in played)  # count 0 too: a tested count's runs cost as any
        rec = {"step": step, "estimate": est, "low": low, "high": high, "credible_set": list(summ["credible_set"]),
               "p_set": summ["p_set"], "tight": summ["tight"], "p_beyond": summ["p_beyond"],
               "p_within_one": summ["p_within_one"],
               "runs_used": runs_used, "tokens_used": tokens if tokens_known else None,
               "p_met": {int(c): float(m) for c, m in zip(grid.counts, met.mean(axis=0))},
               "seconds": round(time.perf_counter() - t0, 2)}
        if step > 0:
            b = played[-1]
            rec["played"] = {"count": b.count, "runs": int(len(b.log.runs)), "flipped": _flips(b, source)}
        p_at_least = np.array([np.mean(cm >= c) for c in grid.counts])
        for c, m, pa, pc in zip(grid.counts, met.mean(axis=0), p_at_least, [np.mean(cm == c) for c in grid.counts]):
            curves.append({"step": step, "committed": int(c), "p_met": float(m), "p_at_least": float(pa),
                           "p_cm": float(pc), "observed": int(len(observed.get(int(c), ())))})
        # ---- stop?
        n_obs = {c: len(v) for c, v in observed.items()}
        tight = summ["tight"]
        confirm = _to_confirm(summ, grid, source, n_obs, confirm_mode) if confirm_mode and tight else None
        if tight and confirm is None:
            stopped = f"target reached: P(CM in {_set_text(summ['credible_set'], grid)}) = {summ['p_set']:.3f} " \
                      f">= {target}"
        elif played and not played[-1].complete:
            stopped = "budget spent (requests, tokens or money)"
        elif max_runs is not None and runs_used >= max_runs:
            stopped = f"run budget spent ({runs_used} of {max_runs} runs)"
        elif step >= max_steps:
            stopped = f"step cap reached ({max_steps})"
        choice = None
        if stopped is None:
            left = None if max_runs is None else max_runs - runs_used
            k_max = B if left is None else min(B, left)
            if confirm is not None:
                j = grid.counts.index(confirm)
                k = min(k_max, source.remaining(confirm),
                        min(grid.runs[j], confirm_mode) - n_obs.get(confirm, 0))
                choice = (confirm, int(k), None)
            else:
                choice = _choose(strategy, met, cls, cm, grid, source, n_obs, k_max, p_at_least)
            if choice is None:
                stopped = "no playable count can change the answer"
        rec["next"] = None if choice is None else {"count": choice[0], "runs": choice[1], "value": choice[2],
                                                   "why": "confirm" if confirm is not None else strategy}
        rec["stopped"] = stopped
        steps.append(plain(rec))
        say(rec)
        if stopped is not None:
            break
        c, k, _ = choice
        step += 1
        b = source.play(c, k, step=step)
        played.append(b)
        if b.tokens is not None:
            tokens += int(b.tokens)
        else:
            tokens_known = False
        usd += float(b.usd or 0.0)
        for _, r in b.log.runs.iterrows():
            run_rows.append({"step": step, "committed": int(b.count), "run": int(r["run"]),
                             "interactions": int(r["n_interactions"])})
    # ---- the result
    # a fresh experiment of the same design from the final posterior (no observed run plugged in):
    # the interval an independent replication's critical mass should fall in
    # ... whose cells have their own shared run effects: those of the cells the table was fitted on
    # are integrated out of its draws (_fresh_tables)
    fresh = _fresh_tables(fit, effects, data, source, D, _child(ss, FRESH_KEY))
    sim_r = sim if fresh is None else _simulate(fresh[0], design, D, _child(ss, FRESH_KEY + 1), run_effects=fresh[1])
    met_r, _, _ = _combine(sim_r, {}, design)
    rs = _summarise(_critical_masses(met_r, grid), level, grid, tol=tol, target=target)
    replication = {k: rs[k] for k in ("estimate", "low", "high", "credible_set", "p_set", "p_beyond")}
    replication["distribution"] = rs["distribution"]
    obs_rows = _run_table(played, source, run_rows)
    counts = {}
    for b in played:
        if len(b.log.runs):
            counts[int(b.count)] = counts.get(int(b.count), 0) + int(len(b.log.runs))
    last = steps[-1]
    settings = {"target": float(target), "level": float(level), "batch": B, "fit_model": fit_model,
                "run_effects": bool(run_effects), "n_draws": D, "strategy": strategy, "max_runs": max_runs,
                "confirm": confirm_mode, "tolerance": int(tol),
                "source": source.label, "baseline_runs": int(baseline_runs),
                "prior": None if prior_counts is None else f"{prior_counts.n_decisions:.0f} decisions",
                "seconds": round(time.perf_counter() - t0, 2)}
    return TipResult(direction=source.direction, majority=source.majority, challenger=source.challenger,
                     names=tuple(source.names), n_agents=source.n_agents, memory=source.memory,
                     estimate=last["estimate"], low=last["low"], high=last["high"], p_set=last["p_set"],
                     credible_set=tuple(last["credible_set"]), replication=replication,
                     runs_used=last["runs_used"], runs_available=int(source.runs_available),
                     tokens_used=tokens if tokens_known else None, usd_used=usd,
                     decisions_used=int(sum(b.decisions for b in played)), counts=counts, steps=tuple(steps),
                     curves=pd.DataFrame(curves), runs=obs_rows, stopped=stopped, design=design.to_dict(),
                     settings=settings, fit_summary=_fit_line(fit, effects))


def _child(ss, i):
    return np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (int(i),))


def _printer(progress):
    if callable(progress):
        return progress
    if not progress:
        return lambda rec: None
    import sys

    def say(rec):
        played = rec.get("played")
        what = "start" if not played else (f"{played['runs']} run(s) at {played['count']} committed "
                                           f"({played['flipped']} flipped)")
        print(f"tip step {rec['step']}: {what}; critical mass {fmt(rec['estimate'])} "
              f"{fmt_interval(rec['low'], rec['high'])}, P(CM in {_set_text(rec['credible_set'])}) "
              f"{rec['p_set']:.2f}, "
              f"{rec['runs_used']} committed runs" + (f"; {rec['stopped']}" if rec.get("stopped") else ""),
              file=sys.stderr, flush=True)
    return say


def _prior(prior, source):
    """``(counts, run effects)`` of a prior table or probe counts (None, None without one)."""
    if prior is None:
        return None, None
    if isinstance(prior, StrategyFit):
        if tuple(prior.names) != tuple(source.names) and set(prior.names) == set(source.names):
            raise ValueError(f"the table's names are ordered {','.join(prior.names)}; give the pool in that order "
                             f"({','.join(prior.names)})")
        if tuple(prior.names) != tuple(source.names) or prior.memory != source.memory:
            raise ValueError(f"the table is for names {','.join(prior.names)}, H = {prior.memory}; the search for "
                             f"{','.join(source.names)}, H = {source.memory}")
        c = np.asarray(prior.counts, float)
        rows = np.flatnonzero(c.sum(axis=1) > 0)
        sc = StateCounts(tuple(prior.names), prior.memory, ("prior table",), np.zeros(len(rows), np.int64), rows,
                         c[rows], {"prior": prior.kind})
        return sc, RunEffects.from_dict(prior.meta.get("run_effects"))
    if isinstance(prior, StateCounts):
        if tuple(prior.names) != tuple(source.names) or prior.memory != source.memory:
            raise ValueError(f"the prior counts are for names {','.join(prior.names)}, H = {prior.memory}; the search "
                             f"for {','.join(source.names)}, H = {source.memory}")
        return prior, None
    raise TypeError(f"prior must be a StrategyFit or StateCounts; got {type(prior).__name__}")


# ----------------------------------------------------------------------------- one step
def _refit(data, prior_counts, prior_effects, source, model, use_effects, previous, seed):
    """The table refitted on every run so far (plus the prior's counts) and the run effects
    estimated on the runs (the prior's own effects until there are enough runs)."""
    parts = []
    runs_counts = None
    if data:
        lg = GameLog.concat(data) if len(data) > 1 else data[0]
        runs_counts = counts_from_log(lg, names=source.names, memory=source.memory)
        parts.append(runs_counts)
    if prior_counts is not None:
        parts.append(prior_counts)
    counts = StateCounts.concat(parts) if len(parts) > 1 else parts[0]
    fit = fit_strategy(counts, model, rng=seed, meta={"llm": None, "tip": True})
    effects = RunEffects.none("run_effects=False")
    if use_effects:
        if runs_counts is not None and len(np.unique(runs_counts.group_index)) >= MIN_RUNS:
            effects = fit_run_effects(runs_counts, fit, start=previous)
        elif prior_effects is not None:
            effects = prior_effects
    return replace(fit, meta={**fit.meta, "run_effects": effects.to_dict()}), effects


@dataclass
class _Grid:
    counts: list
    runs: list  # design runs per count
    tested: list  # a count of the design's tested grid (not the extension)


@dataclass
class _Sim:
    shares: np.ndarray  # (D, C, R, rounds) per-round challenger share, NaN after a run's end
    lengths: np.ndarray  # (D, C, R) rounds of each simulated run
    grid: _Grid
    window: int


def _simulate(fit, design: ExperimentDesign, D, seed, run_effects="fit") -> _Sim:
    """Every run of the design's grid simulated per posterior draw (tested and extension counts;
    each run as long as the design's cap, ending as ``design.stop`` says); ``fit`` a fit, or table
    draws with their ``run_effects`` (:func:`_fresh_tables`)."""
    g = design.grid()
    grid = _Grid([c for c, _, _ in g], [len(L) for _, L, _ in g], [t for _, _, t in g])
    sim_design = ExperimentDesign(design.majority, design.challenger, design.n_agents, tuple(grid.counts),
                                  tuple(L for _, L, _ in g), design.window, extend=False, stop=design.stop,
                                  source="tip")
    pred = predict(fit, n_agents=design.n_agents, n_draws=D, consensus=False, strength=False, committed=[0],
                   n_runs_flip=1, design_runs=1, design=sim_design, max_round=design.window,
                   directions=[(design.majority, design.challenger)], run_effects=run_effects, rng=seed)
    f = pred.experiment_shares
    ci = {c: i for i, c in enumerate(grid.counts)}
    draws = f["draw"].to_numpy()
    dmap = np.searchsorted(np.unique(draws), draws)
    c_idx = np.array([ci[int(c)] for c in f["committed"].to_numpy()]) if len(f) else np.zeros(0, int)
    run = f["run"].to_numpy()
    rnd = f["round"].to_numpy() - 1
    R = max(grid.runs)
    T = int(rnd.max()) + 1 if len(rnd) else 1
    shares = np.full((D, len(grid.counts), R, T), np.nan)
    shares[dmap, c_idx, run, rnd] = f["share"].to_numpy()
    lengths = (~np.isnan(shares)).sum(axis=3)
    return _Sim(shares, lengths, grid, design.window)


def _fresh_tables(fit, effects: RunEffects, data, source, D, seed):
    """Table draws for a *fresh* experiment and their run effects (``(tables, RunEffects)``; None
    when no run effects are played or there are no runs).

    The effects are those of the convergence runs (:func:`_independent_effects`). The runs of
    one experiment cell (one committed count and name) share a part ``omega`` of their run effects
    (:func:`normlab.calibration.fit.run_effects.run_effect_values`), so the table fitted on them
    has absorbed their cells' shared effects -- at the states those runs alone visit, all of it --
    and the average of their own parts. An independent experiment has other cells: per
    draw, with the draw's ``(sd_b, sd_k, rho, omega)``, every fitted run's effect is drawn (its
    cell's shared part and its own; a convergence run is a cell of its own) and taken out of each
    state's logit in proportion to the run's share of the state's decisions,
    ``l_s <- sum_r w_sr (l_s - b_r) / kappa_r + (1 - sum_r w_sr) l_s``, where
    ``logit p_r = kappa_r l_s + b_r`` is how a run plays the table. The effects' rows are paired
    with the tables (the same ``omega`` simulates the fresh experiment's cells).
    """
    if not effects.active or not data:
        return None
    g = np.random.default_rng(seed)
    lg = GameLog.concat(data) if len(data) > 1 else data[0]
    rc = counts_from_log(lg, names=source.names, memory=source.memory)
    effects = _independent_effects(lg, fit, effects, source)
    tabs, index = fit.sample_tables(D, rng=g, return_index=True)
    E = effects.draws(D, rng=g, index=index if effects.kind == "joint" else None)
    info = lg.runs.set_index("run")
    run_ids = np.array([int(str(x).split(":", 1)[1]) for x in rc.groups])
    kinds = info.loc[run_ids, "kind"].astype(str).to_numpy()
    cnt = info.loc[run_ids, "committed_count"].to_numpy()
    nm = info.loc[run_ids, "committed_name"].astype(str).to_numpy()
    cells = {}
    cell = np.array([cells.setdefault(("count", int(c), m) if k in ("swap", "evolved") else ("run", i), len(cells))
                     for i, (k, c, m) in enumerate(zip(kinds, cnt, nm))], np.int64)
    S, W = tabs.shape[1:]
    total = np.asarray(fit.counts, float).sum(axis=1) + W * float(getattr(fit, "prior", 0.0) or 0.0)
    n = np.asarray(rc.group_counts, float).sum(axis=1)
    st = np.asarray(rc.group_state, np.int64)
    w = n / np.maximum(total[st], 1e-300)
    r = np.asarray(rc.group_index, np.int64)
    zc = g.standard_normal((D, len(cells), 2))
    zr = g.standard_normal((D, len(run_ids), 2))
    tabs = _absorbed_out(tabs, E, zc, zr, cell, st, r, w)
    tables = [StrategyTable(t, memory=fit.memory, names=fit.names) for t in tabs]
    paired = replace(effects, sample=E[:, :5], omega=E[:, 5], kind="joint")
    return tables, paired


def _independent_effects(lg, fit, effects: RunEffects, source) -> RunEffects:
    """The run effects re-estimated on the convergence runs alone, where there are enough of them.

    The marginal fit reads its runs' spread as the whole covariance, the spread of independent
    runs; the committed runs of one count share a part ``omega`` of their effects, so with them
    in the fit the spread -- and the effects a fresh experiment's cells are drawn with -- is
    understated. The convergence runs are independent runs (the paper's protocol: each its own
    session). Fewer than :data:`~normlab.calibration.fit.run_effects.MIN_RUNS` of them: the
    search's own estimate."""
    sub = lg.select(kind="baseline")
    if len(sub.runs) < MIN_RUNS:
        return effects
    est = fit_run_effects(counts_from_log(sub, names=source.names, memory=source.memory), fit, start=effects)
    return est if est.active else effects


def _absorbed_out(tabs, E, zc, zr, cell, st, r, w):
    """:func:`_fresh_tables`' arithmetic: per draw ``d`` the runs' effects ``e_r = (sqrt(omega) zc[d,
    cell[r]] + sqrt(1 - omega) zr[d, r]) L^T`` (``L`` the Cholesky factor of the draw's covariance),
    and per decision row ``i`` (run ``r[i]``, state ``st[i]``, share ``w[i]`` of the state's
    decisions) the state's logit of name 1 moved by ``w_i ((l - b_r) / kappa_r - l)``. Two-name
    tables ``(D, S, 2)``; returns new tables."""
    from normlab.calibration.fit.run_effects import _chol

    out = np.array(tabs, float)
    seen, at = np.unique(st, return_inverse=True)  # the states some run played (the rest keep their draws)
    for d in range(out.shape[0]):
        _, _, sd_b, sd_k, rho, om = E[d]
        e = (math.sqrt(om) * zc[d, cell] + math.sqrt(1.0 - om) * zr[d]) @ _chol(sd_b, sd_k, rho).T
        p1 = np.clip(out[d, seen, 1], 1e-12, 1 - 1e-12)
        lo = np.log(p1) - np.log1p(-p1)
        shift = np.bincount(at, weights=w * ((lo[at] - e[r, 0]) * np.exp(-e[r, 1]) - lo[at]), minlength=len(seen))
        out[d, seen, 1] = 1.0 / (1.0 + np.exp(-(lo + shift)))
        out[d, seen, 0] = 1.0 - out[d, seen, 1]
    return out


def _observed(played, source) -> dict:
    """count -> list of per-round challenger shares of the runs played there."""
    out = {}
    for b in played:
        if b.count < 0 or not len(b.log.runs):
            continue
        sh = challenger_shares(b.log)
        for r in b.log.runs["run"]:
            s = sh[sh["run"] == r].sort_values("round")["share"].to_numpy(float)
            out.setdefault(int(b.count), []).append(s)
    return out


def count_met(trajectories, window: int) -> bool:
    """Whether one count's runs meet the published rule (:func:`normlab.theory.criteria.published_rule`).

    Where every run that did not meet the threshold at its end is shorter than the window (runs
    stopped at a consensus streak whose last three rounds fall short of 2.849, or a count whose
    runs all ended early) the rule has no full window to read; the mean is then read at the
    longest such run, the rounds the data have.

    Parameters
    ----------
    trajectories : sequence of array_like
        Per-round challenger shares of each run.
    window : int

    Returns
    -------
    bool
    """
    return _rule([np.asarray(t, float) for t in trajectories], int(window))


def _rule(trs, window) -> bool:
    """:func:`count_met` without the conversions (called per draw and count)."""
    try:
        return published_rule(trs, max_round=window)["success"]
    except ValueError:
        open_len = [len(t) for t in trs if len(t) and not (np.nansum(t[-LAST_ROUNDS:]) >= FLIP_SUM)]
        w = max(open_len) if open_len else window
        if w < LAST_ROUNDS:
            return False
        return published_rule(trs, max_round=min(window, w))["success"]


def _run_class(s: np.ndarray, window: int) -> int:
    """A run's outcome as the batch value sees it: 2 flipped by its end (or over the window's last
    three rounds), 1 the challenger's majority at the end of the window, 0 neither."""
    s = s[~np.isnan(s)]
    if len(s) < 1:
        return 0
    if np.sum(s[-LAST_ROUNDS:]) >= FLIP_SUM:
        return 2
    w = s[:window][-LAST_ROUNDS:]
    if np.sum(w) >= FLIP_SUM:
        return 2
    return 1 if np.mean(w) >= 0.5 else 0


def _combine(sim: _Sim, observed: dict, design: ExperimentDesign):
    """Per draw and count whether the count's experiment -- its observed runs plus simulated ones
    up to the design's runs -- meets the published rule; per draw, count and simulated run its
    outcome class (:func:`_run_class`)."""
    grid = sim.grid
    D, C, R, _ = sim.shares.shape
    W = sim.window
    met = np.zeros((D, C), bool)
    cls = np.zeros((D, C, R), np.int8)
    for j, c in enumerate(grid.counts):
        obs = observed.get(int(c), [])
        n_sim = max(grid.runs[j] - len(obs), 0)
        obs = obs[:grid.runs[j]]
        if n_sim == 0:
            met[:, j] = _rule(obs, W)
            continue
        met[:, j] = _rule_draws(obs, sim.shares[:, j, :n_sim], sim.lengths[:, j, :n_sim], W)
        cls[:, j, :n_sim] = _run_classes(sim.shares[:, j, :n_sim], sim.lengths[:, j, :n_sim], W)
    return met, cls, grid


def _rule_draws(obs, shares, lengths, window) -> np.ndarray:
    """:func:`_rule` on ``obs`` plus each draw's simulated runs, for all draws at once (the same
    arithmetic as :func:`normlab.theory.criteria.published_rule`: runs summed row after row, the
    last three rounds of the mean left to right).

    ``shares``: ``(D, n, T)`` per-round shares of the simulated runs (NaN after a run's end),
    ``lengths``: ``(D, n)`` their rounds."""
    D, n, T = shares.shape
    obs = [np.asarray(t, float) for t in obs]
    Tm = max([T] + [len(t) for t in obs])
    # rows: observed runs (the same in every draw), then the draw's simulated runs -> (rows, D, Tm)
    X = np.full((len(obs) + n, D, Tm), np.nan)
    lens = np.zeros((len(obs) + n, D), np.int64)
    for k, t in enumerate(obs):
        X[k, :, :len(t)] = t
        lens[k] = len(t)
    X[len(obs):, :, :T] = np.transpose(shares, (1, 0, 2))
    lens[len(obs):] = lengths.T
    idx = np.arange(Tm)
    # a run is padded when its own last three rounds, summed left to right, reach the threshold
    last3 = np.zeros(lens.shape)
    for q in range(LAST_ROUNDS, 0, -1):
        pos = lens - q
        v = np.take_along_axis(X, np.maximum(pos, 0)[..., None], axis=2)[..., 0]
        last3 = last3 + np.where(pos >= 0, v, 0.0)  # a run shorter than three rounds sums what it has
    padded = (lens >= 1) & (last3 >= FLIP_SUM)
    longest = lens.max(axis=0)
    open_max = np.where(padded, -1, lens).max(axis=0)  # -1: every run padded
    Wd = np.where((open_max >= 0) & (open_max < window), open_max, window)
    L = np.minimum(Wd, np.where(padded.any(axis=0), longest + 30, longest))
    inside = idx[None, None, :] < lens[..., None]
    M = np.where(inside, X, np.where(padded[..., None], 1.0, np.nan))
    M = np.where(idx[None, None, :] < L[None, :, None], M, np.nan)
    with np.errstate(invalid="ignore"):
        cnt = np.sum(~np.isnan(M), axis=0)
        mean = np.where(cnt > 0, np.nansum(M, axis=0) / np.maximum(cnt, 1), np.nan)  # (D, Tm)
    s = np.zeros(D)
    for q in range(LAST_ROUNDS, 0, -1):
        s = s + np.take_along_axis(mean, np.clip(L - q, 0, Tm - 1)[:, None], axis=1)[:, 0]
    return (Wd >= LAST_ROUNDS) & (L >= LAST_ROUNDS) & (s >= FLIP_SUM)


def _run_classes(shares, lengths, window) -> np.ndarray:
    """:func:`_run_class` of every simulated run (``(D, n, T)`` shares, NaN after a run's end)."""
    D, n, T = shares.shape
    out = np.zeros((D, n), np.int8)
    idx = np.arange(T)
    inside = idx < lengths[..., None]
    holes = np.isnan(shares) & inside
    slow = holes.any(axis=2)
    L = lengths
    Lw = np.minimum(L, window)

    def last3(upto):
        s = np.zeros(L.shape)
        for q in range(LAST_ROUNDS, 0, -1):
            pos = upto - q
            v = np.take_along_axis(shares, np.clip(pos, 0, T - 1)[..., None], axis=2)[..., 0]
            s = s + np.where(pos >= 0, v, 0.0)
        return s

    end3, w3 = last3(L), last3(Lw)
    nw = np.minimum(Lw, LAST_ROUNDS)
    wmean = np.where(nw > 0, w3 / np.maximum(nw, 1), 0.0)
    out[:] = np.where((end3 >= FLIP_SUM) | (w3 >= FLIP_SUM), 2, np.where(wmean >= 0.5, 1, 0))
    out[L < 1] = 0
    for d, k in zip(*np.nonzero(slow)):
        out[d, k] = _run_class(shares[d, k, :L[d, k]], window)
    return out


def _to_confirm(summ, grid, source, n_obs, upto):
    """The tested count whose experiment the search must still play out before stopping: the
    estimate, then the other counts of the credible set (most probable first), the first with
    fewer than ``min(its runs, upto)`` runs observed that can still be played (None: none).

    The published rule is an ensemble reading -- one slow run of ten fails a count -- so a count
    is taken as the critical mass only once its own runs show it; the counts below it are not
    confirmed run by run (a count fails with its first run that does not flip)."""
    dist = summ["distribution"]
    rest = sorted((c for c in summ["credible_set"] if c != summ["estimate"]), key=lambda c: -dist.get(c, 0.0))
    for c in [summ["estimate"], *rest]:
        if not np.isfinite(c) or int(c) not in grid.counts:
            continue
        c = int(c)
        j = grid.counts.index(c)
        if not grid.tested[j]:
            continue
        if n_obs.get(c, 0) >= min(grid.runs[j], upto) or source.remaining(c) < 1:
            continue
        return c
    return None


def _critical_masses(met, grid) -> np.ndarray:
    """Per draw the smallest count of the grid meeting the rule (inf: none)."""
    counts = np.asarray(grid.counts, float)
    first = np.where(met.any(axis=1), met.argmax(axis=1), -1)
    return np.where(first >= 0, counts[np.maximum(first, 0)], np.inf)


def _summarise(cm, level, grid, *, tol: int = 1, target: float = 0.9) -> dict:
    """The critical-mass draws read on the design's *tested* counts.

    The support is the tested counts plus one category, "beyond the tested grid" (``inf``: every
    draw whose critical mass falls in the extension past the last tested count, or is not
    reached). ``estimate`` is the mode of that support (ties: nearest the median), so always a
    tested count or ``inf``; ``credible_set`` the smallest set of support points holding at least
    ``target`` of the draws (most probable first; ties: nearest the estimate); ``tight`` when that
    set spans at most ``tol`` agents (``max - min <= tol``; the set ``{inf}`` alone is tight:
    the search then says "not reached on the tested grid"); ``low``, ``high`` the equal-tailed
    interval at ``level`` over the same support. ``p_within_one`` is ``P(|CM - estimate| <= 1)``
    over the support (the reading before issue 32, kept for comparison).

    Returns
    -------
    dict
        ``estimate``, ``low``, ``high``, ``p_mode``, ``credible_set`` (tuple, ``inf`` last),
        ``p_set``, ``p_beyond``, ``tight``, ``p_within_one``, ``distribution`` (support point ->
        probability; ``inf`` for beyond).
    """
    cm = np.asarray(cm, float)
    tested = sorted(int(c) for c, t in zip(grid.counts, grid.tested) if t)
    v = np.where(np.isin(cm, tested), cm, math.inf)
    support = [float(c) for c in tested] + [math.inf]
    p = np.array([np.mean(v == c) for c in support])
    beyond_at = float(tested[-1] + 1) if tested else 0.0  # where "beyond" sits for distances

    def pos(x):
        return x if np.isfinite(x) else beyond_at

    med = pos(float(np.quantile(v, 0.5, method="inverted_cdf")))
    best = [i for i in range(len(support)) if p[i] >= p.max() - 1e-12]
    est = support[min(best, key=lambda i: (abs(pos(support[i]) - med), pos(support[i])))]
    order = sorted(range(len(support)), key=lambda i: (-p[i], abs(pos(support[i]) - pos(est)), pos(support[i])))
    chosen, mass = [], 0.0
    for i in order:
        if p[i] <= 0:
            break
        chosen.append(support[i])
        mass += float(p[i])
        if mass >= target - 1e-12:
            break
    S = tuple(sorted(chosen))
    fin = [c for c in S if np.isfinite(c)]
    tight = bool(mass >= target - 1e-12 and ((S == (math.inf,)) or (len(fin) == len(S) and max(fin) - min(fin) <= tol)))
    a = (1 - level) / 2
    low = float(np.quantile(v, a, method="inverted_cdf"))
    high = float(np.quantile(v, 1 - a, method="inverted_cdf"))
    pw = float(np.mean(np.abs(v - est) <= 1)) if np.isfinite(est) else float(np.mean(np.isinf(v)))
    return {"estimate": float(est), "low": low, "high": high, "p_mode": float(p.max()), "credible_set": S,
            "p_set": float(mass), "p_beyond": float(p[-1]), "tight": tight, "p_within_one": pw,
            "distribution": {c: float(q) for c, q in zip(support, p) if q > 0}}


def _mutual_information(x, z) -> float:
    """Plug-in mutual information (bits) of two discrete samples of equal length."""
    x = np.asarray(x)
    z = np.asarray(z)
    _, xi = np.unique(x, return_inverse=True)
    _, zi = np.unique(z, return_inverse=True)
    n = len(x)
    joint = np.zeros((xi.max() + 1, zi.max() + 1))
    np.add.at(joint, (xi, zi), 1.0)
    joint /= n
    px = joint.sum(axis=1, keepdims=True)
    pz = joint.sum(axis=0, keepdims=True)
    nz = joint > 0
    return float(np.sum(joint[nz] * np.log2(joint[nz] / (px @ pz)[nz])))


def _choose(strategy, met, cls, cm, grid, source, n_obs, B, p_at_least):
    """``(count, runs, value per unit of cost)`` of the next batch, or None (nothing playable can
    change the answer)."""
    if B < 1:
        return None
    best = None
    cm_key = np.where(np.isinf(cm), -1, cm)
    for j, c in enumerate(grid.counts):
        left = source.remaining(c)
        n_sim = int(grid.runs[j] - n_obs.get(int(c), 0))  # simulated runs in the count's experiment now
        if left < 1 or n_sim < 1:
            continue
        k = min(B, left, n_sim)
        cost = k * float(source.run_cost(int(c)))
        p = float(met[:, j].mean())
        if p_at_least[j] < RELEVANT:
            continue
        if strategy == "eig":
            z = cls[:, j, n_sim - k:n_sim].astype(np.int64)
            code = np.zeros(len(z), np.int64)
            for col in range(k):  # an order-free code of the batch: how many runs in each outcome class
                code += np.where(z[:, col] == 2, k + 1, np.where(z[:, col] == 1, 1, 0))
            value = _mutual_information(cm_key, code) / cost
        else:
            if p <= 0.0 or p >= 1.0:
                continue
            value = (1.0 - abs(2.0 * p - 1.0)) / cost
        if value > 1e-9 and (best is None or value > best[2] + 1e-12):
            best = (int(c), int(k), float(value))
    return best


def _flips(b: Batch, source) -> int:
    """Runs of a batch that flipped, in the one meaning the search, its step lines and its run table
    share: the challenger's three-round share sum reached 2.849 by the run's end or over the window's
    last three rounds (:func:`_run_class` 2, the table's ``outcome == "flipped"``). The table's
    ``flipped_at_end`` is the narrower reading, named as such."""
    sh = challenger_shares(b.log) if len(b.log.runs) else None
    if sh is None:
        return 0
    n = 0
    for r in b.log.runs["run"]:
        s = sh[sh["run"] == r].sort_values("round")["share"].to_numpy(float)
        n += int(_run_class(s, source.design.window) == 2)
    return n


def _run_table(played, source, rows) -> pd.DataFrame:
    """One row per played run: step, count, run id, interactions, its outcome class and window share."""
    out = []
    by = {(r["step"], r["run"]): r for r in rows}
    for i, b in enumerate(played, start=1):
        if not len(b.log.runs):
            continue
        sh = challenger_shares(b.log)
        for r in b.log.runs["run"]:
            s = sh[sh["run"] == r].sort_values("round")["share"].to_numpy(float)
            w = s[:source.design.window][-LAST_ROUNDS:]
            base = by.get((i, int(r)), {"step": i, "committed": int(b.count), "run": int(r), "interactions": -1})
            out.append({**base, "outcome": ["neither", "majority", "flipped"][_run_class(s, source.design.window)],
                        "window_share": float(np.nanmean(w)) if np.isfinite(w).any() else float("nan"),
                        "flipped_at_end": bool(len(s) and np.nansum(s[-LAST_ROUNDS:]) >= FLIP_SUM)})
    cols = ["step", "committed", "run", "interactions", "outcome", "window_share", "flipped_at_end"]
    return pd.DataFrame(out, columns=cols)


def _fit_line(fit, effects) -> dict:
    s = fit.summary()
    return {"kind": fit.kind, "decisions": s.get("decisions"), "states_observed": s.get("states_observed"),
            "states_total": s.get("states_total"), "run_effects": None if effects is None else effects.summary()}


# ----------------------------------------------------------------------------- the result

