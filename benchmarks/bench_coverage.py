"""Are normlab's intervals the intervals they say they are? Simulation-based calibration of
``calibrate`` and ``tip`` on hidden truths (issue 32).

Run from the repository root:

    python benchmarks/bench_coverage.py --truths T --seed S --json [FILE]     # T in-family truths
    python benchmarks/bench_coverage.py --tiny --json                          # the CI form (N = 8, H = 2)
    python benchmarks/bench_coverage.py --equality K                           # is a cheaper fit the same?
    python benchmarks/bench_coverage.py --summarise RESULTS.jsonl --json       # recompute from saved truths
    python benchmarks/bench_coverage.py --summarise OLD.jsonl --match NEW.jsonl  # OLD on NEW's truths only
    python benchmarks/bench_coverage.py --rescore RESULTS.jsonl OUT.jsonl      # score saved forecasts again
    python benchmarks/bench_coverage.py --refresh-alike RESULTS.jsonl OUT.jsonl  # all-or-none forecasts as now
    python benchmarks/bench_coverage.py --truth-scatter RESULTS.jsonl          # how noisy a truth's estimate is

**The full run** (prepared, hours; resumable: every finished truth is one line of ``--results``,
a rerun skips it; ``--max-seconds`` stops it cleanly, and so does Ctrl-C, which ends the workers at
once and loses only the truths they were running):

    python benchmarks/bench_coverage.py --truths 200 --wider 40 --seed 2026 --workers 16 \\
        --fit-model hierarchical --sbc both --results coverage_full.jsonl --figure coverage_ranks.png \\
        --json coverage_full.json

(``--nuts-draws 500`` halves the fits where ``--equality`` has shown it gives the same
intervals; the docstring of :func:`equality` says how that is judged.)

What one truth is
-----------------
A *truth* is a hidden strategy of the memory-H naming game at N = 24 (``--n-agents``), names Q, M:

``posterior`` (in the fitted family)
    One draw of a shipped fit's posterior (``llama31_70b_QM_H5``, ``llama3_70b_QM_H3``,
    ``llama3_70b_QM_H5`` in turn): the table, and one draw of its run effects (a shift ``b`` and
    a sharpness ``kappa`` per run on the logit, shared in part ``omega`` by the runs of one
    experiment cell -- the convergence runs, one committed count), as the prediction plays them.
``run_effects``
    As ``posterior`` with the effects' standard deviations doubled, a correlation of 0.6 and one
    effect per cell (``omega = 1``: a whole committed count shifted at once).
``shared_order``
    As ``posterior``, but the committed-minority runs show the two names in one order per
    interaction, shared by both players, with a first-listed bias ``gamma ~ U(0.5, 1.5)`` (the
    authors' protocol; README's fit: 1.23); the convergence runs keep independent orders.
``non_logit``
    Tables outside the fitted logit family, in turn: a conformity rule
    ``p(M | s) = eps + (1 - 2 eps) / (1 + exp(-beta d(s)))`` (``d``: the partners' net plays of M)
    perturbed by state effects drawn from a t distribution with 2 degrees of freedom; and a
    two-type population (half the agents one shipped table's draw, half another's).

For each truth the benchmark simulates **the paper's experiment** with :func:`normlab.theory.strategy_game`
(not the prediction kernel, so a kernel bug would show): 40 convergence runs from empty memories
(stopped at a 3N success streak, at most 60 rounds) and, for both directions, every committed
count 0 .. N - 1 with 10 runs of at most 30 rounds from a consensus (stopped at a 3N streak when
someone is committed) -- the log a user would hand to ``normlab calibrate``. Beside it, what the
truth *is*: P(flip within 30 rounds) at every count and direction (of one experiment cell: the
count's shared part of the run effects drawn once) and P(consensus on each name) within 200
rounds (of independent runs), from ``--truth-runs`` (1 000) and ``--truth-runs-consensus`` (10 000)
runs, every run its own draw of the run effects (the rows score a truth as ``k`` of ``n``
independent runs); and a second, independent full grid
(archive B) of the strong direction (overturn M), whose published-rule critical mass is the truth
``tip`` is scored against.

What is compared
----------------
The same ``calibrate`` a user runs (``fit_on="baseline"``: the committed runs are held out;
``sensitivity=False``, which does not change the intervals) and the same ``tip`` (on the
simulated log replayed, strong direction, its defaults):

===============  =============================================================  ===================================
key              interval                                                       truth
===============  =============================================================  ===================================
critical_mass    ``critical_mass()[k]["experiment"]`` (the log's own design)     the published-rule critical mass
                                                                                of the log's committed runs
flip             Beta of the per-draw flip frequencies (``beta_summary``),        true P(flip) at each count and
                 equal-tailed                                                    direction (at the truth's Monte
                                                                                Carlo resolution)
consensus        the same for P(consensus on Q), P(consensus on M)               true P(consensus on each name)
tip              ``TipResult.replication`` (a fresh experiment of the design)    archive B's critical mass
===============  =============================================================  ===================================

Levels 0.5, 0.8 and 0.95 are read from the same per-draw arrays. Per quantity and level: the
share of rows covered, with a 95 % interval (Clopper-Pearson when each truth gives one row;
a bootstrap over truths -- B = 2 000 -- when it gives several, as the rows of one truth are not
independent) and the **expected** share under calibration: the level itself for the continuous
quantities, and for the critical masses the mean predictive mass inside the reported intervals
(an equal-tailed interval of an integer holds more than its level by construction); and the
**randomised** share (``coverage_detail...randomised``, :func:`randomised_share`): the share of
rows whose randomised rank lies in the central ``level`` of (0, 1) -- the same intervals with a
truth at an end counted with the share of the end's probability they need to hold exactly their
level, whose expected share is the level itself for integers and probabilities alike. Ranks: the
randomised rank of the truth among the draws (``(#{x < y} + U (#{x == y} + 1)) / (D + 1)``;
the Beta PIT for flips and consensus), 20-bin histograms and ECDF differences with simultaneous
95 % bands (Säilynoja, Bürkner & Vehtari 2022) in ``--figure``.

Three views of each in-family truth (``--sbc``): **user** (the headline, ``coverage``): calibrate
on the simulated runs alone, as a user with new data would; **posterior** (``posterior_sbc``):
calibrate on the shipped model's own archive baselines plus the simulated ones -- exactly
calibrated when the truth is a draw of the posterior given those baselines and the fit kind is
the shipped one (posterior SBC: Säilynoja, Schmitt, Bürkner & Vehtari 2025), so a departure
there is the method's, not the truths' distribution's; and **prediction** (``prediction_sbc``):
no fit at all -- the source posterior the truth was drawn from predicts the simulated experiment
(``calibrate(..., fit=source)``), so the truth is one more draw of the prediction's own
predictive distribution and every interval must hold at least its level (the flip and consensus
intervals, of one cell's frequency, more: they are compared with the probability itself). It
checks the prediction step alone -- the simulation engine, the run effects, the design, the
readings -- in seconds per truth, where a fit costs minutes (``--sbc all``: the three;
``--sbc tip``: none, only ``tip`` on the simulated log scored against archive B, the truth's
probabilities not estimated).

In the fitted family the 40 convergence runs are independent runs: each plays its own draw of the
run effects, since the fit reads their spread as the whole between-run spread. The committed runs
of one count are one cell sharing a part ``omega`` of it, as the predictions play them. The
``run_effects`` family makes the convergence runs one cell too (a session effect the fit cannot
see: within one cell it only sees the runs' own part).

``--debug-shrink F`` plants an over-confident forecaster: every predictive distribution pulled
towards its median to ``F`` of its spread. The benchmark must see it (``tests/umbrella/test_benchmarks.py``).

JSON: ``coverage.{critical_mass,flip,consensus,tip}.{0.5,0.8,0.95}`` (in-family, user view),
``coverage_detail`` (share, interval, expected, randomised share with its interval, rows, truths,
zero-width share, the issue's window), ``coverage_flip_{open,alike,differ}`` and
``prediction_flip_{open,alike,differ}`` (the flip rows whose forecast is open, whose draws all saw the same
all-or-none outcome, or whose draws differ), ``posterior_sbc``, ``prediction_sbc`` (and ``prediction_by_family``), ``by_family``, ``by_source``
(in-family truths by the shipped fit they were drawn from), ``ranks``, ``acceptance``, ``n_truths``, ``seconds``
(wall), ``stage_seconds`` (per truth and stage), ``seed``, ``settings``.

References
----------
S. Talts, M. Betancourt, D. Simpson, A. Vehtari, A. Gelman, arXiv:1804.06788 (2018) (SBC);
T. Säilynoja, P.-C. Bürkner, A. Vehtari, Stat. Comput. 32, 32 (2022) (ECDF bands);
T. Säilynoja, M. Schmitt, P.-C. Bürkner, A. Vehtari, arXiv:2502.03279 (2025) (posterior SBC);
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Fig. 3, Table S3.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import json
import math
import os
import shutil
import sys
import time
import zlib
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
AINORMS = Path(os.environ["NORMLAB_AINORMS"]) if os.environ.get("NORMLAB_AINORMS") else (
    HERE.parents[1] / "shared" / "data" / "ai-norms")

LEVELS = (0.5, 0.8, 0.95)
QUANTITIES = ("critical_mass", "flip", "consensus", "tip")
FAMILIES = ("posterior", "run_effects", "shared_order", "non_logit")
#: The issue's acceptance windows (issue 32, "Done when").
WINDOWS = {0.95: (0.93, 0.97), 0.8: (0.76, 0.84)}
#: Shipped fits the in-family truths are drawn from, in turn, with the archive holding their baselines.
SOURCES = (("llama31_70b_QM_H5", "llama31_data.zip", "Llama-3.1-70B-Instruct"),
           ("llama3_70b_QM_H3", "llama3_data.zip", "Llama-3-70B-Instruct"),
           ("llama3_70b_QM_H5", "llama3_data.zip", "Llama-3-70B-Instruct"))
NAMES = ("Q", "M")

DEFAULTS = dict(n_agents=24, runs_per_count=10, baselines=40, baseline_rounds=60, window=30, truth_runs=1000,
                truth_runs_consensus=10000, consensus_rounds=200, fit_model="hierarchical", nuts_draws=1000,
                nuts_tune=None, chains=2, draws=200, tip_draws=200, tip_directions="M", sbc="user", debug_shrink=None,
                tiny=False)
TINY = dict(n_agents=8, runs_per_count=4, baselines=40, baseline_rounds=60, window=30, truth_runs=300,
            truth_runs_consensus=3000, consensus_rounds=200, fit_model="empirical", draws=40, tip_draws=40, tiny=True,
            sbc="all")


# ============================================================================ truths
def _logit(p):
    p = np.clip(np.asarray(p, float), 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, float)))


@dataclasses.dataclass
class Truth:
    """A hidden strategy: a table (``p1``: P(names[1] | state) per state) or two (``groups``), run
    effects ``(mu_b, mu_k, sd_b, sd_k, rho, omega)`` or None, a first-listed bias of the committed
    runs' shared name order, and what it is (``info``)."""

    family: str
    index: int
    memory: int
    n_agents: int = 24
    p1: np.ndarray | None = None
    groups: tuple | None = None  # (p1 of group 0, p1 of group 1): a two-type population, half each
    effects: np.ndarray | None = None
    order_bias: float = 0.0
    source: str | None = None  # the shipped fit (in-family truths)
    shared_baselines: bool = False  # the convergence runs share one cell's part omega of the effects
    llm: str | None = None
    info: dict = dataclasses.field(default_factory=dict)

    def tables(self, n: int, cells, g):
        """Per run its strategy (a StrategyTable, or a list of two with ``groups``), cell by cell
        (the runs of a cell share the part ``omega`` of the effects)."""
        from normlab.calibration.fit.run_effects import run_effect_values
        from normlab.theory import StrategyTable

        if self.groups is not None:
            ts = [StrategyTable(np.column_stack([1 - q, q]), memory=self.memory, names=NAMES) for q in self.groups]
            return [ts] * n
        base = StrategyTable(np.column_stack([1 - self.p1, self.p1]), memory=self.memory, names=NAMES)
        if self.effects is None or (self.effects[2] == 0 and self.effects[3] == 0 and self.effects[0] == 0
                                    and self.effects[1] == 0):
            return [base] * n
        b, k = run_effect_values(self.effects, list(cells), rng=g)
        lg = _logit(self.p1)
        out = []
        for bb, kk in zip(b, k):
            q = _sigmoid(kk * lg + bb)
            out.append(StrategyTable(np.column_stack([1 - q, q]), memory=self.memory, names=NAMES))
        return out


_SOURCE_CACHE: dict = {}


def _source_fit(name):
    if name not in _SOURCE_CACHE:
        from normlab.calibration import load_fit

        _SOURCE_CACHE[name] = load_fit(name)
    return _SOURCE_CACHE[name]


def _posterior_draw(fit, g):
    """One table and one run-effects row of ``fit``'s posterior (paired where the fit pairs them)."""
    from normlab.calibration import RunEffects

    seed = int(g.integers(2**62))
    try:  # a joint fit pairs its tables and effects by draw index
        tabs, idx = fit.tables(1, rng=seed, return_index=True)
    except TypeError:
        tabs, idx = fit.tables(1, rng=seed), None
    p1 = np.asarray(tabs[0].table, float)[:, 1]
    re = RunEffects.from_dict(fit.meta.get("run_effects"))
    eff = None
    if re.active:
        try:
            eff = np.asarray(re.draws(1, rng=int(g.integers(2**62)), index=idx), float)[0] if idx is not None \
                else np.asarray(re.draws(1, rng=int(g.integers(2**62))), float)[0]
        except TypeError:
            eff = np.asarray(re.draws(1, rng=int(g.integers(2**62))), float)[0]
    return p1, eff


def _conformity(memory, beta, eps, g=None, t_scale=0.0):
    """``p(M | s) = eps + (1 - 2 eps) / (1 + exp(-beta d))``, ``d`` the partners' net plays of M,
    optionally with t(2) state effects on the logit (scale ``t_scale``)."""
    from normlab.theory.strategies import decode_state, n_states

    S = n_states(2, memory)
    p = np.empty(S)
    for s in range(S):
        d = sum(1 if partner == 1 else -1 for _, partner in decode_state(s, 2, memory))
        p[s] = eps + (1 - 2 * eps) / (1 + math.exp(-beta * d))
    if t_scale and g is not None:
        p = _sigmoid(_logit(p) + t_scale * g.standard_t(2, size=S))
    return p


def _tiny_source(cfg):
    """The tiny form's "shipped fit": an empirical fit of 40 convergence runs of a conformity
    table at H = 2 (N = 8), with its run effects -- made once, deterministically."""
    key = ("tiny", cfg["fit_model"])
    if key not in _SOURCE_CACHE:
        from normlab.calibration import calibrate

        t = Truth("posterior", -1, 2, cfg["n_agents"], p1=_conformity(2, 1.6, 0.03),
                  effects=np.array([0.0, 0.0, 0.3, 0.1, 0.0, 0.5]))
        log = simulate_log(t, cfg, np.random.default_rng(12345), grid=False, model="tiny-source")
        cal = calibrate(log, names=NAMES, memory=2, n_agents=cfg["n_agents"], model="empirical", n_draws=20,
                        compare_observed=False, sensitivity=False, rng=7)
        _SOURCE_CACHE[key] = (cal.fit, log)
    return _SOURCE_CACHE[key]


def make_truth(family: str, index: int, cfg: dict, g) -> Truth:
    """Truth ``index`` of ``family`` (module docstring), drawn with ``g``."""
    if cfg["tiny"]:
        fit, _ = _tiny_source(cfg)
        src, llm, H = "tiny-source", "tiny-source", 2
    else:
        src, _, llm = SOURCES[index % len(SOURCES)]
        fit = _source_fit(src)
        H = fit.memory
    if family in ("posterior", "run_effects", "shared_order"):
        p1, eff = _posterior_draw(fit, g)
        t = Truth(family, index, H, cfg["n_agents"], p1=p1, effects=eff, source=src, llm=llm)
        if family == "run_effects":
            e = np.zeros(6) if eff is None else eff.copy()
            e[2], e[3] = 2 * max(e[2], 0.15), 2 * max(e[3], 0.1)
            e[4], e[5] = 0.6, 1.0
            t.effects = e
            t.shared_baselines = True  # the convergence runs too are one session: the fit sees no spread
        if family == "shared_order":
            t.order_bias = float(g.uniform(0.5, 1.5))
        t.info = {"effects": None if t.effects is None else [round(float(v), 4) for v in t.effects],
                  "order_bias": t.order_bias}
        return t
    if family == "non_logit":
        if index % 2 == 0 or cfg["tiny"]:
            beta, eps = float(g.uniform(0.8, 2.0)), float(g.uniform(0.005, 0.04))
            p1 = _conformity(H, beta, eps, g, t_scale=float(g.uniform(0.3, 0.8)))
            return Truth(family, index, H, cfg["n_agents"], p1=p1,
                         info={"kind": "conformity + t(2)", "beta": beta, "eps": eps})
        a, _, _ = SOURCES[0]
        b = next(s for s, _, _ in SOURCES[1:] if _source_fit(s).memory == _source_fit(a).memory)
        pa, _ = _posterior_draw(_source_fit(a), g)
        pb, _ = _posterior_draw(_source_fit(b), g)
        return Truth(family, index, _source_fit(a).memory, cfg["n_agents"], groups=(pa, pb),
                     info={"kind": "two types", "tables": [a, b]})
    raise ValueError(f"unknown family {family!r}")


# ============================================================================ playing a truth
def _play(truth: Truth, n_runs: int, *, count: int, initial: str, challenger, max_interactions: int, stop: str,
          g, record: bool, cells=None, order: bool = False, tables=None, runs_per_table=None):
    """Runs of the truth: a list of GameResults, one per distinct table. By default ``n_runs`` runs
    with the truth's run effects (cells as given); with ``tables``, ``runs_per_table[i]`` runs of
    table ``i`` in one call each."""
    import warnings

    from normlab.theory import strategy_game

    N = truth.n_agents
    if tables is None:
        tabs = truth.tables(n_runs, cells if cells is not None else [n_runs], g)
        if all(t is tabs[0] for t in tabs):
            tables, runs_per_table = [tabs[0]], [n_runs]
        else:
            tables, runs_per_table = tabs, [1] * len(tabs)
    kw = dict(n_agents=N, memory=truth.memory, committed=int(count), committed_name=challenger, initial=initial,
              stop=stop, max_interactions=int(max_interactions), record_decisions=record, progress=False)
    if order and truth.order_bias:
        kw.update(order_bias=truth.order_bias, name_order="shared")
    if truth.groups is not None:
        kw["groups"] = [N // 2, N - N // 2]
    out = []
    with warnings.catch_warnings():  # runs ending at their cap are the protocol
        warnings.simplefilter("ignore", RuntimeWarning)
        for t, n in zip(tables, runs_per_table):
            if n > 0:
                out.append(strategy_game(t, n_runs=int(n), rng=int(g.integers(2**62)), **kw))
    return out


def simulate_log(truth: Truth, cfg: dict, g, *, grid: bool = True, model: str | None = None):
    """The paper's experiment played by the truth, as a log: convergence runs (kind ``baseline``) and,
    with ``grid``, both directions' full grid (``swap``; ``evolved`` at count 0)."""
    from normlab.schema import GameLog

    N = truth.n_agents = cfg["n_agents"]
    parts = []

    def add(results, kind, count, challenger):
        for r in results:
            lg = r.to_log()
            lg.runs["stop_reason"] = [str(x) for x in r.stop_reason]
            lg.runs["kind"] = kind
            if kind == "evolved":
                lg.runs["committed_name"] = None
            parts.append(lg)

    # in the fitted family the convergence runs are independent (the fit reads their spread as the
    # whole between-run spread); the committed counts are cells sharing a part omega of the effects
    nb = cfg["baselines"]
    add(_play(truth, nb, count=0, initial="empty", challenger=None, max_interactions=cfg["baseline_rounds"] * N,
              stop="streak", g=g, record=True, cells=[nb] if truth.shared_baselines else [1] * nb),
        "baseline", 0, None)
    if grid:
        for maj in NAMES:
            ch = NAMES[1 - NAMES.index(maj)]
            for c in range(N):
                R = cfg["runs_per_count"]
                add(_play(truth, R, count=c, initial=f"consensus:{maj}", challenger=ch,
                          max_interactions=cfg["window"] * N, stop="streak" if c else "max", g=g, record=True,
                          order=True), "swap" if c else "evolved", c, ch)
    log = GameLog.concat(parts)
    log.runs["model"] = model or f"truth:{truth.family}:{truth.index}"
    return log


def truth_values(truth: Truth, cfg: dict, g) -> dict:
    """What the truth is: P(flip within the window) per direction and count -- the flip probability
    of one experiment cell, the committed runs sharing a part ``omega`` of their run effects with
    their own parts drawn per run, as the log's counts and the predictions play them (one cell per
    direction, the same at every count: a count's probability is a cell's, and the curve over
    counts stays monotone, so two counts where all runs flipped still end the sweep) -- and
    P(consensus on each name) within ``consensus_rounds`` of
    independent convergence runs (one cell with ``shared_baselines``); the flips from ``truth_runs``
    runs, the consensus from ``truth_runs_consensus`` (``truth_runs`` where a record has no such
    key), every run its own draw of the run effects (its own part within the cell). The rows
    score the truth as ``k`` of ``n`` independent runs (binomial noise); runs sharing a table
    would carry more noise than that (the first runs here played 100 tables of 10 runs each: the
    Llama-3.1 truths' P(consensus on M) then scattered 2.6-3.3x as far as ``n`` independent runs
    do; ``docs/validation/calibration.md``, "The truths' own noise"). Near P = 0 or 1 the binomial
    noise of 1 000 runs is as wide as a forecast's interval, so a calibrated forecast would cover
    only 0.934 of the user view's consensus rows at 95 %; with 10 000 convergence runs 0.949
    (their ``expected``): the consensus truths get the runs (about 3 CPU s a truth), the flips'
    (one call per run, 4-16 s per truth at 1 000) do not."""

    N, R = cfg["n_agents"], int(cfg["truth_runs"])
    truth.n_agents = N
    # one table per run where runs differ (each its own run effect), else one table for all R runs
    K = R if truth.effects is not None else 1
    per = [R // K] * K
    out = {"flip": {}, "consensus": {}, "runs": R, "effect_tables": K}
    for maj in NAMES:
        ch = NAMES[1 - NAMES.index(maj)]
        saturated = 0
        cell = truth.tables(K, [K], g)  # one cell: its shared part once, the runs' own parts
        for c in range(N):
            if saturated >= 2:  # two counts in a row where every run flipped: larger minorities flip too
                out["flip"][f"overturn_{maj}:{c}"] = [R, R]
                continue
            k = n = 0
            for r in _play(truth, R, count=c, initial=f"consensus:{maj}", challenger=ch,
                           max_interactions=cfg["window"] * N, stop="flip", g=g, record=False, order=True,
                           tables=cell, runs_per_table=per):
                f = r.flipped(within_rounds=cfg["window"])
                k += int(f.sum())
                n += len(f)
            out["flip"][f"overturn_{maj}:{c}"] = [k, n]
            saturated = saturated + 1 if k == n else 0
    Rc = int(cfg.get("truth_runs_consensus", R))
    out["consensus"] = _consensus_counts(truth, cfg, g, Rc if truth.effects is not None else 1, runs=Rc)
    out["runs_consensus"] = Rc
    return out


def _consensus_counts(truth: Truth, cfg: dict, g, tables: int, runs: int | None = None) -> dict:
    """Name -> ``[runs won, runs]`` of ``runs`` (default ``truth_runs``) convergence runs of the
    truth played in ``tables`` tables (``runs / tables`` runs each; one cell with ``shared_baselines``)."""
    N, R = truth.n_agents, int(cfg["truth_runs"] if runs is None else runs)
    K = tables
    won = {nm: 0 for nm in NAMES}
    n = 0
    tabs = truth.tables(K, [K] if truth.shared_baselines else [1] * K, g)
    for r in _play(truth, R, count=0, initial="empty", challenger=None, max_interactions=cfg["consensus_rounds"] * N,
                   stop="streak", g=g, record=False, tables=tabs, runs_per_table=[R // K] * K):
        for w in _winners(r):
            if w in won:
                won[w] += 1
        n += r.n_runs
    return {nm: [won[nm], n] for nm in NAMES}


def truth_scatter(records, *, source: str = "llama31_70b_QM_H5", n_truths: int = 3, reps: int = 30,
                  tables: int = 100) -> list:
    """How far a truth's estimated P(consensus on M) scatters, played in ``tables`` tables of
    ``truth_runs / tables`` runs (how this benchmark once estimated it) against one table per run
    (each run its own run effect, as the rows assume): per truth (the first ``n_truths`` of
    ``source`` in ``records``, rebuilt from their seeds) the standard deviation of ``reps``
    estimates each way and the binomial one of ``truth_runs`` independent runs."""
    out = []
    for rec in [r for r in records if r.get("source") == source][:n_truths]:
        cfg = rec["cfg"]
        truth, _, _ = _stored_truth(rec)
        R = int(cfg["truth_runs"])
        est = {}
        for K in (tables, R):
            g = np.random.default_rng([7, rec["index"], K])
            est[K] = np.array([_consensus_counts(truth, cfg, g, K, runs=R)["M"][0] / R for _ in range(reps)])
        p = float(est[R].mean())
        b = math.sqrt(p * (1 - p) / R)
        out.append({"index": rec["index"], "p_M": round(p, 3), "binomial_sd": round(b, 4),
                    f"sd_{tables}_tables": round(float(est[tables].std(ddof=1)), 4),
                    "sd_one_table_per_run": round(float(est[R].std(ddof=1)), 4),
                    "ratio_tables": round(float(est[tables].std(ddof=1)) / b, 2),
                    "ratio_one_per_run": round(float(est[R].std(ddof=1)) / b, 2), "reps": reps, "runs": R})
    return out


def _winners(res) -> list:
    """Per run the name produced most in its last three recorded rounds of a run that stopped at
    its streak (None: the cap came first) -- the prediction's reading of a convergence run."""
    out = []
    off = res.round_offsets
    for k in range(res.n_runs):
        if str(res.stop_reason[k]) != "streak":
            out.append(None)
            continue
        prod = res.round_production[off[k]:off[k + 1]][-3:].sum(axis=0)
        out.append(NAMES[int(np.argmax(prod))])
    return out


def archive_b_critical_mass(truth: Truth, cfg: dict, majority: str, g) -> float:
    """The published-rule critical mass of a second, independent full grid of the truth (archive
    B: every count 0 .. N - 1, ``runs_per_count`` runs, the paper's protocol), read by the rule
    ``tip`` reads (:func:`normlab.calibration.tip.count_met`)."""
    from normlab.calibration.tip import count_met
    from normlab.theory.criteria import shares_from_result

    N = truth.n_agents = cfg["n_agents"]
    ch = NAMES[1 - NAMES.index(majority)]
    for c in range(N):
        trs = []
        for r in _play(truth, cfg["runs_per_count"], count=c, initial=f"consensus:{majority}", challenger=ch,
                       max_interactions=cfg["window"] * N, stop="streak" if c else "max", g=g, record=False,
                       order=True):
            trs += shares_from_result(r, ch)
        if count_met(trs, cfg["window"]):
            return float(c)
    return math.inf


# ============================================================================ readings
def randomised_rank(draws, y, u: float) -> float:
    """``(#{x < y} + u (#{x == y} + 1)) / (D + 1)``: uniform on (0, 1) when ``y`` is exchangeable
    with the draws (``u ~ U(0, 1)``; ties split at random; ``inf`` compares as the largest value)."""
    x = np.asarray(draws, float)
    return float((np.sum(x < y) + u * (np.sum(x == y) + 1)) / (len(x) + 1))


def discrete_interval(values, probs, level: float) -> tuple[float, float]:
    """Equal-tailed interval of a discrete distribution by the inverted CDF, the quantile rule of
    the predictions (``numpy.quantile(draws, a, method="inverted_cdf")``, ``a = (1 - level) / 2``
    and ``1 - a``): the smallest value whose cumulative weight reaches ``a`` (``1 - a``) of the
    total, ``a`` computed as the predictions compute it, so that with draw counts as ``probs`` the
    interval is the one a user reads, ties included (tested against numpy)."""
    v = np.asarray(values, float)
    p = np.asarray(probs, float)
    o = np.argsort(v, kind="stable")
    v, p = v[o], p[o]
    cum = np.cumsum(p)
    n = p.sum()
    a = (1 - level) / 2
    lo = v[min(int(np.searchsorted(cum, n * a, side="left")), len(v) - 1)]
    hi = v[min(int(np.searchsorted(cum, n * (1 - a), side="left")), len(v) - 1)]
    return float(lo), float(hi)


def expected_coverage(values, probs, low: float, high: float) -> float:
    """Predictive mass inside ``[low, high]``: the coverage a calibrated forecaster's interval has."""
    v = np.asarray(values, float)
    p = np.asarray(probs, float)
    return float(p[(v >= low) & (v <= high)].sum() / p.sum())


def _shrink_values(x, F, support=None):
    """A planted over-confident forecaster: values pulled to their median, ``m + F (x - m)``, rounded
    to the nearest support point (integers without one); ``inf`` stays."""
    x = np.asarray(x, float)
    fin = x[np.isfinite(x)]
    if not len(fin):
        return x
    m = float(np.quantile(x, 0.5, method="inverted_cdf"))
    if not np.isfinite(m):
        return x
    y = np.where(np.isfinite(x), m + F * (x - m), x)
    if support is None:
        return np.where(np.isfinite(y), np.round(y), y)
    s = np.asarray([v for v in support if np.isfinite(v)], float)
    return np.where(np.isfinite(y), s[np.argmin(np.abs(y[:, None] - s[None, :]), axis=1)], y)


def _beta(k, n, F=None):
    from normlab.calibration.evaluate.scoring_rules import beta_summary

    a, b = beta_summary(k, n)
    if F:
        m, c = a / (a + b), a + b
        v = m * (1 - m) / (c + 1) * F * F
        c2 = max(m * (1 - m) / max(v, 1e-300) - 1, 1e-3)
        a, b = m * c2, (1 - m) * c2
    return float(a), float(b)


def resolution_coverage(a: float, b: float, n: int, low: float, high: float, nodes: int = 400) -> float:
    """The share of truths a calibrated Beta(a, b) forecast covers at the truth's resolution: the
    truth ``p ~ Beta(a, b)`` is known through ``k ~ Binomial(n, p)`` runs, and a row counts as
    covered when ``floor(low n + 1/2) <= k <= floor(high n + 1/2)`` (the nearest attainable
    fraction to some point of the interval). The expected share of :func:`_prob_rows` under
    calibration: the level itself for a wide interval, more near 0 and 1."""
    from scipy.stats import beta as B
    from scipy.stats import binom

    p = B.ppf((np.arange(nodes) + 0.5) / nodes, a, b)
    klo, khi = math.floor(low * n + 0.5), math.floor(high * n + 0.5)
    return float(np.mean(binom.cdf(khi, n, p) - binom.cdf(klo - 1, n, p)))


def _prob_rows(kind, key, k_draws, n_draws, truth_kn, u, F):
    """Rows of a probability (flip, consensus): the Beta of the per-draw frequencies
    (``beta_summary``), equal-tailed, vs the truth known through ``k`` of ``n`` runs: covered when
    ``k / n`` is the nearest attainable fraction to some point of the interval, with the share a
    calibrated forecast would cover under the same rule (:func:`resolution_coverage`) as
    ``expected``; the rank is the randomised PIT of ``k`` under the beta-binomial predictive."""
    a, b = _beta(k_draws, n_draws, F)
    row = _prob_rows_ab(kind, key, a, b, truth_kn, u)
    from normlab.calibration.evaluate.scoring_rules import all_or_none

    row["alike"] = all_or_none(k_draws, n_draws)  # beta_summary's branch without a spread
    return row


def _prob_rows_ab(kind, key, a, b, truth_kn, u):
    """:func:`_prob_rows` from the forecast's Beta ``(a, b)``."""
    from scipy.stats import beta as B
    from scipy.stats import betabinom

    k, n = (int(v) for v in truth_kn)
    y = k / n
    pit = float((betabinom.cdf(k - 1, n, a, b) if k > 0 else 0.0) + u * betabinom.pmf(k, n, a, b))
    row = {"quantity": kind, "key": key, "truth": y, "truth_n": n, "rank": pit, "a": a, "b": b,
           "nontrivial": bool(0.02 < y < 0.98)}
    for L in LEVELS:
        lo, hi = float(B.ppf((1 - L) / 2, a, b)), float(B.ppf((1 + L) / 2, a, b))
        cov = math.floor(lo * n + 0.5) <= k <= math.floor(hi * n + 0.5)
        row[str(L)] = {"low": lo, "high": hi, "covered": bool(cov), "expected": resolution_coverage(a, b, n, lo, hi),
                       "zero_width": bool(hi - lo < 0.5 / n)}
    return row


def _discrete_rows(kind, key, values, probs, truth, u, F, support=None, draws=None):
    v = np.asarray(values, float)
    p = np.asarray(probs, float)
    if F:
        v = _shrink_values(v, F, support)
    pr = p / p.sum()
    rank = float(pr[v < truth].sum() + u * pr[v == truth].sum())
    row = {"quantity": kind, "key": key, "truth": None if not np.isfinite(truth) else float(truth), "rank": rank}
    for L in LEVELS:
        lo, hi = discrete_interval(v, p, L)
        row[str(L)] = {"low": _j(lo), "high": _j(hi), "covered": bool(lo <= truth <= hi),
                       "expected": expected_coverage(v, p, lo, hi), "zero_width": bool(lo == hi)}
    return row


def _j(x):
    return None if x is None or not np.isfinite(x) else float(x)


def calibration_rows(cal, truth_vals: dict, g, F=None) -> list:
    """Every compared row of one calibration (module docstring): critical masses, flips, consensus."""
    pred = cal.prediction
    rows = []
    cm = pred.critical_mass()
    for key, entry in cm.items():
        maj = entry["majority"]
        obs = ((cal.observed.get("critical_mass") or {}).get(key) or {}).get("published") or {}
        if not obs:
            continue
        y = math.inf if obs.get("estimate") is None else float(obs["estimate"])
        e = pred.experiment_cm
        x = e.loc[(e["majority"] == maj), "critical_mass"].to_numpy(float)
        if not len(x):
            continue
        vals, cnt = np.unique(x, return_counts=True)
        row = _discrete_rows("critical_mass", key, vals, cnt, y, float(g.random()), F)
        if not F:  # the intervals reported are the ones the user sees (the same quantile rule on the same draws)
            for L in LEVELS:
                ex = dataclasses.replace(pred, level=L).critical_mass()[key].get("experiment")
                if ex is None:
                    continue
                lo, hi = float(ex["low"]), float(ex["high"])
                r = row[str(L)]
                if (_j(lo), _j(hi)) != (r["low"], r["high"]):
                    r["reading_differs"] = [r["low"], r["high"]]
                r.update(low=_j(lo), high=_j(hi), covered=bool(lo <= y <= hi), zero_width=bool(lo == hi),
                         expected=expected_coverage(vals, cnt, lo, hi))
        rows.append(row)
    f = pred.flips
    for (maj, ch, c), d in f.groupby(["majority", "challenger", "committed"], sort=True):
        key = f"overturn_{maj}:{int(c)}"
        if key not in truth_vals["flip"]:
            continue
        d = d.sort_values("draw")
        rows.append(_prob_rows("flip", key, d["n_flips"].to_numpy(float), d["n_runs"].to_numpy(float),
                               truth_vals["flip"][key], float(g.random()), F))
    c = pred.consensus
    for nm in NAMES:
        d = c[c["name"] == nm].sort_values("draw")
        if not len(d):
            continue
        rows.append(_prob_rows("consensus", nm, d["runs"].to_numpy(float), d["n_runs"].to_numpy(float),
                               truth_vals["consensus"][nm], float(g.random()), F))
    return rows


def tip_row(res, truth_cm: float, g, F=None) -> dict:
    tested = [float(c) for c in res.design["counts"]]
    dist = res.replication["distribution"]
    vals = np.array(list(dist.keys()), float)
    probs = np.array(list(dist.values()), float)
    y = truth_cm if (np.isfinite(truth_cm) and truth_cm in tested) else math.inf
    row = _discrete_rows("tip", res.direction, vals, probs, y, float(g.random()), F, support=tested + [math.inf])
    row.update(runs_used=int(res.runs_used), runs_available=int(res.runs_available),
               estimate=_j(res.estimate), replication_estimate=_j(res.replication.get("estimate")),
               stopped=res.stopped)
    return row


# ============================================================================ one truth
def _views(sbc: str, family: str, truth: Truth) -> list:
    """The views of one truth (``--sbc``): ``user`` and ``posterior`` refit (posterior only for
    in-family truths); ``prediction`` predicts from the source posterior itself (truths with a source)."""
    asked = {"user": ["user"], "posterior": ["posterior"], "both": ["user", "posterior"],
             "prediction": ["prediction"], "all": ["user", "posterior", "prediction"], "tip": []}[sbc]
    out = []
    for v in asked:
        if v == "posterior" and family != "posterior":
            v = "user" if sbc == "posterior" else None
        if v == "prediction" and truth.source is None:
            v = None
        if v and v not in out:
            out.append(v)
    return out


def _source_of(truth: Truth, cfg: dict):
    return _tiny_source(cfg)[0] if cfg["tiny"] else _source_fit(truth.source)


def _calibrate(log, truth: Truth, cfg: dict, seed, *, llm=None, fit=None):
    from normlab.calibration import calibrate

    fk = {}
    # --assume-monotone: the saturation shortcut predict used by default before (flip frequencies above
    # two all-flipped counts filled in as 1), kept to measure what it did
    pk = {"assume_monotone": True} if cfg.get("assume_monotone") else None
    if fit is not None:
        return calibrate(log, names=NAMES, memory=truth.memory, n_agents=cfg["n_agents"], fit_on="baseline",
                         model=fit.kind, n_draws=int(cfg["draws"]), fit=fit, sensitivity=False,
                         compare_observed=True, predict_kwargs=pk, rng=seed)
    if cfg["fit_model"] != "empirical":
        fk = {"draws": int(cfg["nuts_draws"]), "tune": int(cfg["nuts_tune"] or cfg["nuts_draws"]),
              "chains": int(cfg["chains"]), "cores": 1}
    return calibrate(log, names=NAMES, memory=truth.memory, n_agents=cfg["n_agents"], fit_on="baseline",
                     model=cfg["fit_model"], llm=llm, n_draws=int(cfg["draws"]), fit_kwargs=fk, sensitivity=False,
                     compare_observed=True, predict_kwargs=pk, rng=seed)


def _archive_baselines(truth: Truth, cfg: dict):
    """The shipped fit's own baseline runs (posterior SBC): the archive's, or the tiny source's."""
    if cfg["tiny"]:
        return _tiny_source(cfg)[1]
    from normlab.calibration import select_runs
    from normlab.llm_runs import load_ainorms

    zf = next(z for s, z, _ in SOURCES if s == truth.source)
    key = ("archive", zf)
    if key not in _SOURCE_CACHE:
        path = AINORMS / zf
        if not path.exists():
            _SOURCE_CACHE[key] = None
        else:
            _SOURCE_CACHE[key] = load_ainorms(path, kinds=["baseline"])
    arch = _SOURCE_CACHE[key]
    if arch is None:
        return None
    return select_runs(arch, names=NAMES, memory=truth.memory, model=truth.llm, fit_on="baseline")


def run_truth(spec: dict) -> dict:
    """Everything about one truth: simulate, calibrate (user view; posterior view for in-family
    truths when asked), tip, and the rows compared. ``spec``: family, index, seed words, cfg."""
    import warnings

    _worker_env()
    with warnings.catch_warnings():
        # quantiles over draws that include "not reached" (inf) subtract inf from inf: harmless
        warnings.filterwarnings("ignore", "invalid value encountered in subtract", RuntimeWarning)
        try:
            return _run_truth(spec)
        except Exception as exc:  # one broken truth must not end a run of hours
            import traceback

            return {"family": spec["family"], "index": spec["index"], "fingerprint": spec["fingerprint"],
                    "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}


def _run_truth(spec: dict) -> dict:
    cfg = spec["cfg"]
    ss = np.random.SeedSequence(spec["entropy"], spawn_key=tuple(spec["spawn_key"]))
    s_truth, s_log, s_vals, s_b, s_cal, s_post, s_tip, s_rows = ss.spawn(8)
    stages = {}
    t0 = time.perf_counter()
    truth = make_truth(spec["family"], spec["index"], cfg, np.random.default_rng(s_truth))
    log = simulate_log(truth, cfg, np.random.default_rng(s_log))
    stages["simulate"] = time.perf_counter() - t0
    t = time.perf_counter()
    # --sbc tip: tip alone, scored against archive B; the truth's probabilities are not needed
    vals = {} if cfg["sbc"] == "tip" else truth_values(truth, cfg, np.random.default_rng(s_vals))
    stages["truth_values"] = time.perf_counter() - t
    out = {"family": spec["family"], "index": spec["index"], "seed": [spec["entropy"], *spec["spawn_key"]],
           "source": truth.source, "memory": truth.memory, "info": truth.info, "truth_values": vals,
           "views": {}, "stages": stages, "fingerprint": spec["fingerprint"], "cfg": cfg}
    gr = np.random.default_rng(s_rows)
    views = _views(cfg["sbc"], spec["family"], truth)
    for view in views:
        t = time.perf_counter()
        if view == "user":
            cal = _calibrate(log, truth, cfg, s_cal)
        elif view == "prediction":  # no fit: the source posterior predicts the experiment it drew the truth from
            cal = _calibrate(log, truth, cfg, s_cal, fit=_source_of(truth, cfg))
        else:
            base = _archive_baselines(truth, cfg)
            if base is None:
                out["views"][view] = {"skipped": "the archive of the source fit was not found"}
                continue
            from normlab.schema import GameLog

            sim = GameLog(log.decisions, log.runs.assign(model=base.runs["model"].iloc[0]))
            both = GameLog.concat([base, sim])
            cal = _calibrate(both, truth, cfg, s_post, llm=str(base.runs["model"].iloc[0]))
        stages[f"calibrate_{view}"] = time.perf_counter() - t
        honest = calibration_rows(cal, vals, np.random.default_rng(s_rows))
        rec = {"rows": honest, "fit": _fit_diag(cal.fit)}
        if cfg.get("debug_shrink"):
            rec["rows_shrunk"] = calibration_rows(cal, vals, np.random.default_rng(s_rows),
                                                  F=cfg["debug_shrink"])
        out["views"][view] = rec
    # tip on the simulated log replayed, scored against archive B
    dirs = [] if cfg["tip_directions"] in ("none", "") else (list(NAMES) if cfg["tip_directions"] == "both"
                                                               else cfg["tip_directions"].split(","))
    tip_rows, tip_shrunk = [], []
    for maj in dirs:
        from normlab.calibration.tip import tip
        from normlab.calibration.tip.sources import ArchiveReplay

        t = time.perf_counter()
        cm_b = archive_b_critical_mass(truth, cfg, maj, np.random.default_rng(s_b))
        stages["archive_b"] = stages.get("archive_b", 0) + time.perf_counter() - t
        t = time.perf_counter()
        seed = int(np.random.default_rng(s_tip).integers(2**31))
        src = ArchiveReplay(log, names=NAMES, majority=maj, memory=truth.memory, n_agents=cfg["n_agents"],
                            window=cfg["window"], rng=seed)
        res = tip(src, n_draws=int(cfg["tip_draws"]), rng=seed)
        stages["tip"] = stages.get("tip", 0) + time.perf_counter() - t
        r = tip_row(res, cm_b, gr)
        r["truth_same_archive"] = _j(_log_cm(log, maj, cfg, truth.memory))
        tip_rows.append(r)
        if cfg.get("debug_shrink"):
            tip_shrunk.append(tip_row(res, cm_b, gr, F=cfg["debug_shrink"]))
    out["tip"] = tip_rows
    if cfg.get("debug_shrink"):
        out["tip_shrunk"] = tip_shrunk
    stages["total"] = time.perf_counter() - t0
    out["stages"] = {k: round(v, 2) for k, v in stages.items()}
    return out


def rescore(records, workers: int = 1) -> list:
    """The records with their flip and consensus rows scored again against the truth's
    probabilities as :func:`truth_values` computes them now (same truth, same seed stream; the
    forecasts, stored as their Beta ``(a, b)``, do not depend on the truth values). For results
    written before a change of what the true probabilities are (or how they are estimated); the
    critical-mass rows are kept. ``workers`` processes, one record each (same output)."""
    return _map_workers(_rescore_one, records, workers)


def _rescored_settings(rec) -> dict:
    """``rec`` with the settings this code would record for it: keys it no longer reads dropped
    (``effect_tables``: the truth's runs were once played in that many tables) and the fingerprint
    recomputed, so that a run of the same command resumes from the rescored rows."""
    cfg = {k: v for k, v in rec["cfg"].items() if k != "effect_tables"}
    cfg.setdefault("truth_runs_consensus", (TINY if cfg.get("tiny") else DEFAULTS)["truth_runs_consensus"])
    return dict(rec, cfg=cfg, fingerprint=_fingerprint(cfg))


def _stored_truth(rec):
    """The truth of a stored record rebuilt from its seed: ``(truth, seed sequence, its first eight
    children)`` -- the children :func:`_run_truth` drew (0: the truth, 2: its probabilities)."""
    entropy, *key = rec["seed"]
    ss = np.random.SeedSequence(entropy, spawn_key=tuple(key))
    kids = ss.spawn(8)
    truth = make_truth(rec["family"], rec["index"], rec["cfg"], np.random.default_rng(kids[0]))
    truth.n_agents = rec["cfg"]["n_agents"]
    return truth, ss, kids


def _rescore_one(rec) -> dict:
    rec = _rescored_settings(rec)
    cfg = rec["cfg"]
    truth, ss, kids = _stored_truth(rec)
    vals = truth_values(truth, cfg, np.random.default_rng(kids[2]))
    g = np.random.default_rng(ss.spawn(9)[8])
    rec = dict(rec, truth_values=vals, rescored=True, views=dict(rec.get("views") or {}))
    for view, v in list(rec["views"].items()):
        if "rows" not in v:
            continue
        rows = []
        for r in v["rows"]:
            if r["quantity"] in ("flip", "consensus") and r["key"] in vals[r["quantity"]]:
                r = dict(_prob_rows_ab(r["quantity"], r["key"], r["a"], r["b"], vals[r["quantity"]][r["key"]],
                                       float(g.random())), **({"alike": r["alike"]} if "alike" in r else {}))
            rows.append(r)
        rec["views"][view] = dict(v, rows=rows)
    return rec


def refresh_alike(records) -> list:
    """The records with the forecasts of ``beta_summary``'s all-or-none branch (draws that all saw
    no event, or only events) replaced by what that branch gives since 2026-11-30
    (:func:`normlab.calibration.evaluate.scoring_rules._unseen_beta`), for results written before.

    Exact, not an approximation: such a forecast is a function of the draws' runs alone, and the
    stored pooled ``(a, b)`` gives their total ``N = a + b + 1`` and which side they were on; every
    draw of a prediction plays the same runs, so ``n_d = N / draws``. Each row keeps its truth and
    its randomised rank's uniform ``u`` (recovered from the stored rank; where the old forecast gave
    the truth a probability below 1e-12 it is not in the rank, and is drawn again from a generator
    seeded by the row, a count printed); every other row is kept as it is and marked
    ``alike = False``.
    """
    from scipy.stats import betabinom

    from normlab.calibration.evaluate.scoring_rules import beta_summary

    out = []
    unknown_u = 0
    for rec in records:
        D = int(rec["cfg"]["draws"])
        views = {}
        for view, v in (rec.get("views") or {}).items():
            if "rows" not in v:
                views[view] = v
                continue
            if "rows_shrunk" in v:  # a shrunk forecast is not the pooled beta: its draws are not in it
                raise ValueError(f"refresh_alike: truth {rec['index']} has --debug-shrink rows; run it again instead")
            rows = []
            for r in v["rows"]:
                if r["quantity"] in ("flip", "consensus") and "alike" not in r:
                    if not _pooled_alike(r):
                        r = dict(r, alike=False)
                    else:
                        a0, b0 = r["a"], r["b"]
                        N = round(a0 + b0 + 1.0)
                        if N % D:
                            raise ValueError(f"refresh_alike: {N} runs do not split over {D} draws (truth {rec['index']})")
                        n = int(r["truth_n"])
                        k = int(round(r["truth"] * n))
                        lo = float(betabinom.cdf(k - 1, n, a0, b0)) if k > 0 else 0.0
                        pk = float(betabinom.pmf(k, n, a0, b0))
                        if pk > 1e-12:
                            u = min(max((r["rank"] - lo) / pk, 0.0), 1.0)
                        else:  # a truth the old forecast gave no chance: its u is not in the rank
                            u = float(np.random.default_rng([zlib.crc32(f"{r['quantity']}:{r['key']}".encode()),
                                                             int(rec["index"])]).random())
                            unknown_u += 1
                        none = a0 < b0  # no draw saw an event
                        kd = np.zeros(D) if none else np.full(D, N // D, float)
                        a, b = beta_summary(kd, np.full(D, N // D, float))
                        r = dict(_prob_rows_ab(r["quantity"], r["key"], float(a), float(b), (k, n), u), alike=True)
                rows.append(r)
            views[view] = dict(v, rows=rows)
        out.append(dict(rec, views=views))
    if unknown_u:
        print(f"# refresh_alike: {unknown_u} rows whose truth the old forecast gave probability < 1e-12: "
              "their uniform drawn again (seeded by row)", file=sys.stderr)
    return out


def _log_cm(log, maj, cfg, memory):
    """The critical mass of the replayed log itself (the structural truth, for comparison)."""
    from normlab.calibration import challenger_shares
    from normlab.calibration.tip import count_met

    r = log.runs
    r = r[(r["initial"].astype(str) == f"consensus:{maj}")]
    sh = challenger_shares(log.select(run=list(r["run"])))
    by = {}
    for _, row in r.iterrows():
        s = sh[sh["run"] == row["run"]].sort_values("round")["share"].to_numpy(float)
        by.setdefault(int(row["committed_count"]), []).append(s)
    met = [c for c in sorted(by) if count_met(by[c], cfg["window"])]
    return float(met[0]) if met else math.inf


def _fit_diag(fit) -> dict:
    d = dict(getattr(fit, "diagnostics", {}) or {})
    keep = {k: d[k] for k in ("r_hat_max", "ess_bulk_min", "divergences") if k in d}
    return {"kind": fit.kind, **{k: (float(v) if v is not None else None) for k, v in keep.items()}}


def _worker_env():
    """One thread per worker (the truths are the parallelism), a PyTensor cache per process."""
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")


def _map_workers(fn, items, workers: int) -> list:
    """``[fn(x) for x in items]``, in order, on ``workers`` spawned processes (one thread each, a
    PyTensor cache per process) when there is more than one item and worker."""
    if workers <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    with _worker_pool(workers) as ex:
        futs = [ex.submit(fn, x) for x in items]  # not ex.map: on an exception it cancels the queue from outside
        try:
            out = [f.result() for f in futs]
        except BaseException:  # Ctrl-C or a failed item: the workers end now, not after the queue
            _end_pool(ex)
            raise
        ex.shutdown(wait=True)
        return out


@contextlib.contextmanager
def _worker_pool(workers: int):
    """A pool of ``workers`` spawned processes (one thread each), each with a PyTensor cache in a
    temporary folder that is removed when the block ends (the caller ends the pool inside it)."""
    import multiprocessing as mp
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    base = tempfile.mkdtemp(prefix="bench-coverage-")
    try:
        yield ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                  initargs=(base,))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _end_pool(ex) -> None:
    """Stop a pool at once: its queued items cancelled by the pool itself (a future cancelled from outside
    can crash Python 3.11's pool when its workers then die), its workers terminated (their items are
    lost; what finished was kept by the caller), the pool shut without waiting."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        p.terminate()
    for p in procs:  # gone before the caller removes their caches
        p.join(timeout=10)


def _init_worker(base):
    import signal

    # a terminal's Ctrl-C reaches the whole process group: only the parent acts on it (it ends the workers)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker_env()
    if base:
        d = Path(base) / f"pytensor-{os.getpid()}"
        d.mkdir(parents=True, exist_ok=True)
        flags = os.environ.get("PYTENSOR_FLAGS", "")
        os.environ["PYTENSOR_FLAGS"] = (flags + "," if flags else "") + f"compiledir={d}"


# ============================================================================ summaries
def share_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a share ``k / n``."""
    from normlab.theory.stats import clopper_pearson

    if n == 0:
        return float("nan"), float("nan")
    lo, hi = clopper_pearson(k, n, alpha=1 - level)
    return float(lo), float(hi)


def cluster_bootstrap(groups, level: float = 0.95, B: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile interval of the pooled share ``sum(covered) / sum(rows)`` resampling whole truths
    (``groups``: one ``(covered, rows)`` pair per truth)."""
    gr = np.asarray(groups, float).reshape(-1, 2)
    if not len(gr) or gr[:, 1].sum() == 0:
        return float("nan"), float("nan")
    g = np.random.default_rng(seed)
    idx = g.integers(0, len(gr), size=(B, len(gr)))
    k = gr[idx, 0].sum(axis=1)
    n = gr[idx, 1].sum(axis=1)
    s = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    a = (1 - level) / 2
    return float(np.nanquantile(s, a)), float(np.nanquantile(s, 1 - a))


def _rows_of(rec: dict, view: str, shrunk: bool) -> list:
    if view == "tip":
        return rec.get("tip_shrunk" if shrunk else "tip") or []
    v = (rec.get("views") or {}).get(view) or {}
    return v.get("rows_shrunk" if shrunk else "rows") or []


def _open(row) -> bool:
    """A flip row whose *forecast* is open: predictive mean in (0.02, 0.98). Rows are selected on the
    forecast, never on the truth (selecting truths inside (0.02, 0.98) keeps the misses of a
    forecast near 0 or 1 and drops its hits: coverage biased low)."""
    m = row["a"] / (row["a"] + row["b"])
    return bool(0.02 < m < 0.98)


def _draws_alike(row) -> bool:
    """A probability row whose forecast is ``beta_summary``'s for draws that all saw the same
    all-or-none outcome (no event in any draw, or only events): its ``alike`` entry (rows written
    since 2026-11-30), else :func:`_pooled_alike` of its ``(a, b)``."""
    if "alike" in row:
        return bool(row["alike"])
    return _pooled_alike(row)


def _pooled_alike(row) -> bool:
    """A row written by ``beta_summary``'s all-or-none branch before 2026-11-30, when it was one
    probability seen through the draws' ``N`` runs: ``c = a + b = N - 1`` and mean
    ``0.5 / (N + 1)`` or ``(N + 0.5) / (N + 1)``. Read off the stored ``(a, b)`` exactly (the
    formula of that branch); never true for the spread branch's ``c``, which is not an integer
    less one with that mean."""
    a, b = row["a"], row["b"]
    c = a + b
    if abs(c + 1 - round(c + 1)) > 1e-9 * max(c, 1.0):
        return False
    m = a / c
    return abs(m - 0.5 / (c + 2)) < 1e-12 or abs(m - (c + 1.5) / (c + 2)) < 1e-12


#: Which flip rows a coverage table counts (``flip_rows``): all, the open forecasts, or the rows
#: whose draws all agreed / did not.
FLIP_ROWS = {"all": lambda r: True, "open": _open, "alike": _draws_alike, "differ": lambda r: not _draws_alike(r)}


def coverage_table(records, view: str = "user", shrunk: bool = False, quantities=QUANTITIES,
                   flip_rows: str = "all") -> dict:
    """Per quantity and level: share covered with its 95 % interval, expected share, rows, truths,
    zero-width share, and the issue's window (``flip_rows``: which flip rows, :data:`FLIP_ROWS`:
    ``"open"`` the rows whose forecast is open, :func:`_open`; ``"alike"`` / ``"differ"`` those whose
    draws all saw the same all-or-none outcome or not, :func:`_draws_alike`)."""
    keep = FLIP_ROWS[flip_rows]
    out = {}
    for q in quantities:
        per = []  # per truth: rows of q
        for rec in records:
            rows = _rows_of(rec, "tip" if q == "tip" else view, shrunk)
            rows = [r for r in rows if r["quantity"] == q and (q != "flip" or keep(r))]
            if rows:
                per.append(rows)
        out[q] = {}
        for L in LEVELS:
            lv = str(L)
            groups = [(sum(r[lv]["covered"] for r in rows), len(rows)) for rows in per]
            k = sum(a for a, _ in groups)
            n = sum(b for _, b in groups)
            if n == 0:
                out[q][lv] = {"share": None, "low": None, "high": None, "expected": None, "rows": 0, "truths": 0}
                continue
            if all(b == 1 for _, b in groups):
                lo, hi = share_interval(k, n)
                how = "Clopper-Pearson"
            else:
                lo, hi = cluster_bootstrap(groups, seed=zlib.crc32(f"{q}:{lv}".encode()))  # not hash(): salted per process
                how = "bootstrap over truths"
            exp = float(np.mean([r[lv]["expected"] for rows in per for r in rows]))
            zw = float(np.mean([r[lv]["zero_width"] for rows in per for r in rows]))
            entry = {"share": k / n, "low": lo, "high": hi, "interval": how, "expected": exp, "rows": n,
                     "truths": len(per), "zero_width": zw}
            if L in WINDOWS:
                entry["window"] = list(WINDOWS[L])
                entry["in_window"] = bool(WINDOWS[L][0] <= k / n <= WINDOWS[L][1])
            entry["expected_inside"] = bool(lo - 1e-12 <= exp <= hi + 1e-12)
            entry["randomised"] = randomised_share(per, L, seed=zlib.crc32(f"{q}:{lv}:pit".encode()))
            out[q][lv] = entry
    return out


def randomised_share(per, level: float, seed: int = 0) -> dict | None:
    """The randomised coverage of the central ``level`` intervals: the share of rows whose randomised
    rank lies in ``[(1 - level) / 2, (1 + level) / 2]``, with its 95 % interval (bootstrap over
    truths, or Clopper-Pearson for one row a truth) and the issue's window. A row counts when the
    truth is strictly inside the predictive's central interval, and at an end with the share of the
    end's probability that the interval needs to hold ``level`` exactly (the randomised interval of a
    discrete predictive: Brockwell 2007; Czado, Gneiting & Held 2009). Under calibration its expected
    share is ``level`` itself, at any resolution of the truth (the flips' and consensus' ranks are of
    the truth's ``k`` of ``n`` runs under the beta-binomial predictive) and for integers (critical
    masses): the coverage with the discreteness taken out, where ``share`` counts the integer
    intervals a user reads (which hold more than their level by construction: ``expected``).
    ``per``: the rows of each truth; None when no row has a rank."""
    a, b = (1 - level) / 2, (1 + level) / 2
    groups = [(sum(a <= r["rank"] <= b for r in rows if r.get("rank") is not None),
               sum(r.get("rank") is not None for r in rows)) for rows in per]
    groups = [g for g in groups if g[1]]
    k, n = sum(x for x, _ in groups), sum(y for _, y in groups)
    if not n:
        return None
    if all(y == 1 for _, y in groups):
        lo, hi = share_interval(k, n)
    else:
        lo, hi = cluster_bootstrap(groups, seed=seed)
    out = {"share": k / n, "low": lo, "high": hi, "expected": level, "rows": n}
    if level in WINDOWS:
        out["window"] = list(WINDOWS[level])
        out["in_window"] = bool(WINDOWS[level][0] <= k / n <= WINDOWS[level][1])
    out["expected_inside"] = bool(lo - 1e-12 <= level <= hi + 1e-12)
    return out


def ranks(records, view: str = "user", bins: int = 20, shrunk: bool = False) -> dict:
    out = {}
    for q in QUANTITIES:
        r = [row["rank"] for rec in records for row in _rows_of(rec, "tip" if q == "tip" else view, shrunk)
             if row["quantity"] == q]
        out[q] = {"values": [round(float(v), 5) for v in r],
                  "histogram": np.histogram(r, bins=bins, range=(0, 1))[0].tolist() if r else [0] * bins}
    return out


def ecdf_band(n: int, level: float = 0.95, sims: int = 2000, grid: int = 100, seed: int = 0):
    """Simultaneous band of ECDF(u) - u for ``n`` uniform ranks (Säilynoja et al. 2022, by simulation:
    the pointwise level adjusted until ``level`` of simulated ECDFs stay inside at every point)."""
    from scipy.stats import binom

    z = np.linspace(0, 1, grid + 1)[1:-1]
    g = np.random.default_rng(seed)
    u = np.sort(g.random((sims, n)), axis=1)
    F = np.stack([np.searchsorted(row, z, side="right") for row in u])  # counts <= z
    lo_g, hi_g = 1e-6, 1 - level
    for _ in range(30):
        gam = (lo_g + hi_g) / 2
        lo = binom.ppf(gam / 2, n, z)
        hi = binom.ppf(1 - gam / 2, n, z)
        inside = np.mean(np.all((F >= lo) & (F <= hi), axis=1))
        if inside >= level:
            lo_g = gam
        else:
            hi_g = gam
    gam = lo_g
    return z, binom.ppf(gam / 2, n, z) / n - z, binom.ppf(1 - gam / 2, n, z) / n - z


def plot_ranks(records, path, view: str = "user"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rk = ranks(records, view)
    qs = [q for q in QUANTITIES if rk[q]["values"]] or list(QUANTITIES)  # no empty panel (tip not run)
    fig, axs = plt.subplots(2, len(qs), figsize=(3.4 * len(qs), 5.6), squeeze=False)
    for j, q in enumerate(qs):
        v = np.asarray(rk[q]["values"], float)
        ax = axs[0, j]
        n = len(v)
        ax.hist(v, bins=20, range=(0, 1), color="C0", alpha=0.8)
        if n:
            from scipy.stats import binom

            ax.axhspan(binom.ppf(0.025, n, 1 / 20), binom.ppf(0.975, n, 1 / 20), color="0.8", zorder=0)
        ax.set_title(f"{q} ({n} rows)", fontsize=9)
        ax.set_xlabel("rank of the truth")
        ax = axs[1, j]
        if n:
            z, lo, hi = ecdf_band(n)
            e = np.searchsorted(np.sort(v), z, side="right") / n - z
            ax.fill_between(z, lo, hi, color="0.85")
            ax.plot(z, e, color="C0")
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xlabel("u")
        ax.set_ylabel("ECDF(u) - u")
    fig.suptitle(f"simulation-based calibration, {view} view: ranks (rows of a truth are not independent; "
                 "the grey bands are for independent ranks)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summarise(records, cfg: dict, seconds: float, seed) -> dict:
    """The JSON of the benchmark (module docstring). The records are taken in the order of their
    family and index, not the order they finished in: the bootstrap intervals resample truths by
    position, and the same truths must give the same summary however the workers' timing fell."""
    records = sorted(records, key=lambda r: (FAMILIES.index(r["family"]) if r["family"] in FAMILIES else
                                             len(FAMILIES), r["index"]))
    fam = {f: [r for r in records if r["family"] == f] for f in FAMILIES}
    inf = fam["posterior"]
    detail = coverage_table(inf, "user")
    cov = {q: {lv: (None if e["share"] is None else round(e["share"], 4)) for lv, e in v.items()}
           for q, v in detail.items()}
    out = {"coverage": cov, "coverage_detail": detail,
           "coverage_flip_open": coverage_table(inf, "user", quantities=("flip",), flip_rows="open"),
           "coverage_flip_alike": coverage_table(inf, "user", quantities=("flip",), flip_rows="alike"),
           "coverage_flip_differ": coverage_table(inf, "user", quantities=("flip",), flip_rows="differ"),
           "by_family": {f: coverage_table(r, "user") for f, r in fam.items() if r},
           "n_truths": len(inf), "n_truths_by_family": {f: len(r) for f, r in fam.items()},
           "ranks": {q: v["histogram"] for q, v in ranks(inf, "user").items()},
           "seconds": round(seconds, 1), "seed": seed}
    sources = sorted({r["source"] for r in inf if r.get("source")})
    # where a shortfall sits: which fitted model the truths were drawn from (the user view, or the
    # prediction view in a run without the user's fit)
    src_view = "user" if any(_rows_of(r, "user", False) for r in inf) else "prediction"
    if len(sources) > 1 and any(_rows_of(r, src_view, False) for r in inf):
        out["by_source"] = {s: _source_table([r for r in inf if r.get("source") == s], src_view) for s in sources}
        out["by_source_view"] = src_view
        out["n_truths_by_source"] = {s: sum(r.get("source") == s for r in inf) for s in sources}
    pv = [r for r in inf if "rows" in ((r.get("views") or {}).get("prediction") or {})]
    if pv:
        out["prediction_sbc"] = coverage_table(pv, "prediction", quantities=("critical_mass", "flip", "consensus"))
        for part in ("open", "alike", "differ"):
            out[f"prediction_flip_{part}"] = coverage_table(pv, "prediction", quantities=("flip",), flip_rows=part)
        out["prediction_sbc_ranks"] = {q: v["histogram"] for q, v in ranks(pv, "prediction").items() if q != "tip"}
        out["prediction_by_family"] = {
            f: coverage_table([x for x in r if "rows" in ((x.get("views") or {}).get("prediction") or {})],
                              "prediction", quantities=("critical_mass", "flip", "consensus"))
            for f, r in fam.items() if f != "posterior" and any(
                "rows" in ((x.get("views") or {}).get("prediction") or {}) for x in r)}
    post = [r for r in inf if "posterior" in (r.get("views") or {}) and "rows" in r["views"]["posterior"]]
    if post:
        out["posterior_sbc"] = coverage_table(post, "posterior", quantities=("critical_mass", "flip", "consensus"))
        out["posterior_sbc_ranks"] = {q: v["histogram"] for q, v in ranks(post, "posterior").items() if q != "tip"}
    if cfg.get("debug_shrink"):
        out["shrunk"] = {"factor": cfg["debug_shrink"], "coverage": {
            q: {lv: e["share"] for lv, e in v.items()} for q, v in coverage_table(inf, "user", shrunk=True).items()}}
    st = [r["stages"] for r in records]
    if st:
        keys = sorted({k for s in st for k in s})
        out["stage_seconds"] = {k: {"mean": round(float(np.mean([s.get(k, 0) for s in st])), 2),
                                    "max": round(float(np.max([s.get(k, 0) for s in st])), 2)} for k in keys}
    tips = [t for r in inf for t in (r.get("tip") or [])]
    if cfg.get("sbc") == "tip" and tips:  # what the search cost: runs read of the archive's grid
        used = np.array([t["runs_used"] for t in tips], float)
        grid = np.array([t["runs_available"] for t in tips], float)
        out["tip_runs"] = {"searches": len(tips), "mean": round(float(used.mean()), 1), "min": int(used.min()),
                           "max": int(used.max()), "mean_share": round(float((used / grid).mean()), 4),
                           "grid": int(np.median(grid))}
        # the rival with the same archive: its whole grid read by the published rule (240 runs)
        for key, name in (("estimate", "tip"), ("truth_same_archive", "full_grid")):
            d = [abs(t[key] - t["truth"]) if t.get(key) is not None and t.get("truth") is not None else
                 (0.0 if t.get(key) is None and t.get("truth") is None else math.inf) for t in tips]
            out["tip_runs"][f"{name}_exact"] = int(sum(x == 0 for x in d))
            out["tip_runs"][f"{name}_within_1"] = int(sum(x <= 1 for x in d))
        # where a shortfall sits: tip's coverage per fitted model the truths were drawn from
        srcs = sorted({r["source"] for r in inf if r.get("source") and r.get("tip")})
        if len(srcs) > 1:
            out["tip_by_source"] = {s: coverage_table([r for r in inf if r.get("source") == s], "user",
                                                      quantities=("tip",))["tip"] for s in srcs}
    out["reading_differs"] = sum(1 for rec in inf for v in (rec.get("views") or {}).values() for row in
                                 (v.get("rows") or []) for lv in map(str, LEVELS)
                                 if isinstance(row.get(lv), dict) and "reading_differs" in row[lv])
    out["acceptance"] = acceptance(out)
    out["settings"] = {k: v for k, v in cfg.items()}
    return out


def _source_table(records, view: str = "user") -> dict:
    """One view's coverage of one source's truths: critical masses, open flip forecasts, consensus."""
    tab = coverage_table(records, view, quantities=("critical_mass", "consensus"))
    return {"critical_mass": tab["critical_mass"],
            "flip, open forecast": coverage_table(records, view, quantities=("flip",), flip_rows="open")["flip"],
            "consensus": tab["consensus"]}


def acceptance(js: dict) -> list:
    """The lines of the acceptance decision: per quantity and level, the observed share with its 95 %
    interval, the expected share under calibration, and the issue's window."""
    lines = []
    for view, tab in (("user", js.get("coverage_detail") or {}), ("posterior SBC", js.get("posterior_sbc") or {}),
                      ("prediction", js.get("prediction_sbc") or {})):
        for q, v in tab.items():
            for lv, e in v.items():
                if e.get("share") is None:
                    continue
                w = e.get("window")
                line = {"view": view, "quantity": q, "level": float(lv), "share": round(e["share"], 4),
                        "interval": [round(e["low"], 4), round(e["high"], 4)],
                        "expected": round(e["expected"], 4), "rows": e["rows"], "truths": e["truths"],
                        "window": w, "in_window": e.get("in_window"),
                        "expected_inside_interval": e["expected_inside"]}
                rz = e.get("randomised")
                if rz:
                    line.update(randomised_share=round(rz["share"], 4),
                                randomised_interval=[round(rz["low"], 4), round(rz["high"], 4)],
                                randomised_in_window=rz.get("in_window"),
                                level_inside_randomised_interval=rz["expected_inside"])
                lines.append(line)
    return lines


def print_table(js: dict, file=sys.stdout):
    print(f"# {js['n_truths']} in-family truths (user view: calibrate on the simulated runs alone); "
          f"{js['seconds']:.0f} s", file=file)
    hdr = f"{'view':<14}{'quantity':<15}{'level':>6}  {'share':>6}  {'95% interval':<17}{'expected':>9}  " \
          f"{'randomised':<25}{'window':<12}{'rows':>6}{'truths':>7}{'zero-w':>8}"
    print(hdr, file=file)
    for view, q, lv, e, ws in _table_rows(js):
        print(f"{view:<14}{q:<15}{float(lv):>6.2f}  {e['share']:>6.3f}  [{e['low']:.3f}, {e['high']:.3f}]"
              f"   {e['expected']:>7.3f}  {_randomised_text(e):<25}{ws:<12}{e['rows']:>6}{e['truths']:>7}"
              f"{e['zero_width']:>8.2f}", file=file)
    for f, tab in (js.get("by_family") or {}).items():
        if f == "posterior":
            continue
        parts = [f"{q} {tab[q]['0.95']['share']:.2f}" for q in QUANTITIES if tab.get(q, {}).get("0.95", {}).get("share")
                 is not None]
        print(f"# {f} ({js['n_truths_by_family'][f]} truths), share inside the 95% intervals: " + ", ".join(parts),
              file=file)
    for f, tab in (js.get("prediction_by_family") or {}).items():
        parts = [f"{q} {tab[q]['0.95']['share']:.2f}" for q in QUANTITIES if tab.get(q, {}).get("0.95", {}).get("share")
                 is not None]
        print(f"# {f}, prediction view, share inside the 95% intervals: " + ", ".join(parts), file=file)


def _table_rows(js: dict, open_flips: bool = False):
    """``(view, quantity, level, entry, window text)`` of every filled cell of the coverage tables,
    view by view; with ``open_flips`` the flip rows whose forecast is open, and those whose draws all
    agreed or not, follow all flip rows."""
    parts = (("open", "flip, open forecast"), ("alike", "flip, every draw alike"), ("differ", "flip, draws differ"))
    extra = {view: [(label, (js.get(f"{pre}_flip_{part}") or {}).get("flip")) for part, label in parts]
             for view, pre in (("user", "coverage"), ("prediction", "prediction"))} if open_flips else {}
    for view, tab in (("user", js.get("coverage_detail") or {}), ("posterior SBC", js.get("posterior_sbc") or {}),
                      ("prediction", js.get("prediction_sbc") or {})):
        items = list(tab.items())
        more = [(label, e) for label, e in extra.get(view, []) if e]
        if more and "flip" in tab:
            i = [k for k, _ in items].index("flip") + 1
            items = items[:i] + more + items[i:]
        for q, v in items:
            for lv, e in v.items():
                if e.get("share") is None:
                    continue
                w = e.get("window")
                yield view, q, lv, e, (f"{w[0]:.2f}-{w[1]:.2f}" if w else "")


def _randomised_text(e) -> str:
    """``share [low, high]`` of an entry's randomised coverage (:func:`randomised_share`), or empty."""
    rz = e.get("randomised")
    return f"{rz['share']:.3f} [{rz['low']:.3f}, {rz['high']:.3f}]" if rz else ""


def markdown_table(js: dict) -> list:
    """The coverage table as Markdown lines (the docs' tables are this output of a stored summary,
    ``--summarise RESULTS --markdown``), then one line per wider family and view."""
    out = ["| view | quantity | level | share | 95% interval | expected | randomised [95% interval] | window | rows "
           "| truths | zero-width |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for view, q, lv, e, ws in _table_rows(js, open_flips=True):
        out.append(f"| {view} | {q} | {float(lv):.2f} | {e['share']:.3f} | [{e['low']:.3f}, {e['high']:.3f}] | "
                   f"{e['expected']:.3f} | {_randomised_text(e)} | {ws} | {e['rows']} | {e['truths']} | "
                   f"{e['zero_width']:.2f} |")
    out.append("")
    for key, view in (("by_family", "user"), ("prediction_by_family", "prediction")):
        for f, tab in (js.get(key) or {}).items():
            if f == "posterior":
                continue
            parts = [f"{q} {tab[q]['0.95']['share']:.2f}" for q in QUANTITIES
                     if (tab.get(q, {}).get("0.95", {}) or {}).get("share") is not None]
            if parts:
                n = (js.get("n_truths_by_family") or {}).get(f)
                out.append(f"- {f} ({n} truths), {view} view, share inside the 95% intervals: " + ", ".join(parts))
    tr = js.get("tip_runs")
    if tr:
        out.append(f"- tip ({tr['searches']} searches): runs read {tr['mean']:.1f} on average ({tr['min']}-{tr['max']}) of "
                   f"the grid's {tr['grid']}, {100 * tr['mean_share']:.0f} %; its estimate equals archive B's critical "
                   f"mass in {tr['tip_exact']} and is within one agent in {tr['tip_within_1']}; archive A's whole grid "
                   f"read by the published rule: {tr['full_grid_exact']} and {tr['full_grid_within_1']}")
    for src, v in (js.get("tip_by_source") or {}).items():
        rz = [(v[str(L)].get("randomised") or {}).get("share") for L in LEVELS]
        if None not in rz:
            out.append(f"- tip, truths from `{src}` ({v['0.95']['truths']}): randomised share inside the 50 / 80 / 95 % "
                       "intervals " + " / ".join(f"{x:.3f}" for x in rz) + "; plain " +
                       " / ".join(f"{v[str(L)]['share']:.3f}" for L in LEVELS) + " (expected " +
                       " / ".join(f"{v[str(L)]['expected']:.3f}" for L in LEVELS) + ")")
    for src, tab in (js.get("by_source") or {}).items():
        parts = []
        for q, v in tab.items():
            if all((v.get(lv) or {}).get("share") is not None for lv in map(str, LEVELS)):
                parts.append(f"{q} " + " / ".join(f"{v[str(L)]['share']:.3f}" for L in LEVELS) + " ("
                             + " / ".join(f"{v[str(L)]['expected']:.3f}" for L in LEVELS) + ")")
        n = (js.get("n_truths_by_source") or {}).get(src)
        out.append(f"- from `{src}` ({n} truths), {js.get('by_source_view', 'user')} view, share inside the "
                   "50 / 80 / 95 % intervals (expected): " + "; ".join(parts))
    return out


# ============================================================================ the run
def _read_lines(path) -> list:
    """The lines of a results file (``.gz``: gzip, as stored under docs/validation/_data/)."""
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return fh.read().splitlines()
    return path.read_text().splitlines()


def _append_line(path, line: str) -> None:
    """Append one line (a gzip member of its own to a ``.gz`` file: readers see one stream)."""
    path = Path(path)
    with (gzip.open(path, "at") if path.suffix == ".gz" else path.open("a")) as fh:
        fh.write(line + "\n")


def _fingerprint(cfg: dict) -> str:
    import hashlib

    keep = {k: v for k, v in cfg.items() if k not in ("workers",)}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:12]


def plan(truths: int, wider: int, families, seed: int, cfg: dict) -> list:
    """The truths to run: ``truths`` in-family, ``wider`` of every other family asked for; truth
    ``i`` of family ``f`` uses child ``(f, i)`` of ``SeedSequence(seed)`` (stable when T grows)."""
    fp = _fingerprint(cfg)
    specs = []
    for f in families:
        n = truths if f == "posterior" else wider
        fi = FAMILIES.index(f)
        for i in range(n):
            specs.append({"family": f, "index": i, "entropy": int(seed), "spawn_key": [fi, i], "cfg": cfg,
                          "fingerprint": fp})
    # in-family and wider truths interleaved, so a run stopped early has some of each
    total = {f: (truths if f == "posterior" else wider) for f in families}
    specs.sort(key=lambda s: ((s["index"] + 0.5) / max(total[s["family"]], 1), s["family"]))
    return specs


def run(specs, workers: int, results: Path | None, progress=True, max_seconds: float | None = None) -> list:
    """Run the truths not yet in ``results`` on ``workers`` processes (one truth each), appending
    every finished truth to ``results``; with ``max_seconds``, no truth starts after that and the
    ones running get a minute's grace (what finished is kept: rerun to resume)."""
    done = {}
    if results is not None and results.exists():
        for line in _read_lines(results):
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[(r["family"], r["index"], r.get("fingerprint"))] = r
    todo = [s for s in specs if (s["family"], s["index"], s["fingerprint"]) not in done]
    records = [done[(s["family"], s["index"], s["fingerprint"])] for s in specs
               if (s["family"], s["index"], s["fingerprint"]) in done]
    if progress and done:
        print(f"# {len(records)} truths read from {results}, {len(todo)} to run", file=sys.stderr, flush=True)

    def keep(rec):
        if "error" in rec:  # not written: a rerun tries the truth again
            print(f"# truth {rec['family']} {rec['index']} failed: {rec['error']}", file=sys.stderr, flush=True)
            return
        records.append(rec)
        if results is not None:
            _append_line(results, json.dumps(rec))
        if progress:
            print(f"# truth {rec['family']} {rec['index']}: {rec['stages'].get('total', 0):.0f} s "
                  f"({len(records)} of {len(specs)})", file=sys.stderr, flush=True)

    def interrupted():
        print(f"# interrupted: {len(records)} of {len(specs)} truths done"
              + (f", kept in {results} (rerun with --results to resume)" if results is not None else ""),
              file=sys.stderr, flush=True)

    t0 = time.time()
    if workers <= 1:
        try:
            for s in todo:
                if max_seconds is not None and time.time() - t0 > max_seconds:
                    break
                keep(run_truth(s))
        except KeyboardInterrupt:  # the running truth is lost, the finished ones are in `results`
            interrupted()
            raise
    else:
        from concurrent.futures import FIRST_COMPLETED, wait

        with _worker_pool(workers) as ex:
            # one truth per free worker, submitted as another ends: nothing waits in the pool's queue, so
            # stopping never has to cancel a queued truth (Python 3.11's pool can then die on a cancelled future)
            pending, live, timed_out = list(todo[::-1]), set(), False
            deadline = None if max_seconds is None else t0 + max_seconds
            try:
                while True:
                    while pending and len(live) < workers and (deadline is None or time.time() < deadline):
                        live.add(ex.submit(run_truth, pending.pop()))
                    if not live:
                        break
                    left = None if deadline is None else max(0.0, deadline - time.time())
                    done, live = wait(live, timeout=left, return_when=FIRST_COMPLETED)
                    for f in done:
                        keep(f.result())
                    if not done:  # time is up: no truth starts, the running ones get a minute
                        timed_out = True
                        done, live = wait(live, timeout=60)
                        for f in done:
                            if f.exception() is None:
                                keep(f.result())
                        break
            except KeyboardInterrupt:  # Ctrl-C: the running truths are lost, the finished ones are in `results`
                _end_pool(ex)
                interrupted()
                raise
            except BaseException:
                _end_pool(ex)
                raise
            if live:
                _end_pool(ex)
            else:
                ex.shutdown(wait=True)
        if progress and (pending or timed_out):
            print(f"# stopped after {max_seconds} s: {len(records)} of {len(specs)} truths done (rerun with "
                  f"--results to resume)", file=sys.stderr, flush=True)
    order = {(s["family"], s["index"]): k for k, s in enumerate(specs)}
    records.sort(key=lambda r: order.get((r["family"], r["index"]), 0))
    return records


# ============================================================================ cheaper fits: the same intervals?
def equality(K: int, seed: int, cfg: dict, cheap: dict, workers: int = 1) -> dict:
    """Is a cheaper fit per truth the same as the default? (issue 32: "use a cheaper fit per truth only
    where you show, on a subset, that it gives the same intervals as the default").

    Per in-family truth (``K`` of them) three fits of the same simulated log: the default with
    seed a, the default with seed b, the cheap one with seed a; the same prediction seed for all
    three (``calibrate(..., fit=...)``). For every compared row and level the coverage indicator
    and the interval ends: ``d_ab`` -- how often default a and default b disagree on coverage
    (the default's own Monte Carlo noise), ``d_ca`` -- cheap vs default a. The cheap fit is
    accepted when ``d_ca - d_ab`` has a one-sided 95 % bootstrap upper bound (over truths) of at
    most 0.02, the ends move no more than between two default seeds (``|cheap - a|`` larger than
    ``|b - a|`` in no more rows than a sign test allows, one-sided 5 %), and every cheap fit has
    R-hat < 1.01, bulk ESS >= 400 and no divergence.
    """
    specs = [{"family": "posterior", "index": i, "entropy": int(seed), "spawn_key": [9, i], "cfg": cfg,
              "cheap": cheap, "fingerprint": "equality"} for i in range(K)]
    return equality_verdict(_map_workers(_equality_truth, specs, workers), cfg, cheap)


def _equality_truth(spec) -> dict:
    _worker_env()
    from normlab.calibration import calibrate, counts_from_log, fit_strategy, select_runs

    cfg, cheap = spec["cfg"], spec["cheap"]
    ss = np.random.SeedSequence(spec["entropy"], spawn_key=tuple(spec["spawn_key"]))
    s_truth, s_log, s_vals, s_a, s_b, s_pred, s_rows = ss.spawn(7)
    truth = make_truth("posterior", spec["index"], cfg, np.random.default_rng(s_truth))
    log = simulate_log(truth, cfg, np.random.default_rng(s_log))
    vals = truth_values(truth, cfg, np.random.default_rng(s_vals))
    sel = select_runs(log, names=NAMES, memory=truth.memory, fit_on="baseline")
    counts = counts_from_log(sel, names=NAMES, memory=truth.memory)
    meta = {"llm": str(sel.runs["model"].iloc[0]), "fit_on": "baseline"}
    out = {"index": spec["index"], "fits": {}, "seconds": {}}
    low = {**cfg, **cheap}
    for name, fseed, c in (("a", s_a, cfg), ("b", s_b, cfg), ("cheap", s_a, low)):
        t = time.perf_counter()
        fit = fit_strategy(counts, c["fit_model"], rng=fseed, meta=meta, **_fit_kwargs(c))
        t_fit = time.perf_counter() - t
        cal = calibrate(log, names=NAMES, memory=truth.memory, n_agents=cfg["n_agents"], fit_on="baseline",
                        model=c["fit_model"], n_draws=int(cfg["draws"]), fit=fit, sensitivity=False, rng=s_pred)
        out["seconds"][name] = {"fit": round(t_fit, 1), "total": round(time.perf_counter() - t, 1)}
        out["fits"][name] = {"rows": calibration_rows(cal, vals, np.random.default_rng(s_rows)),
                             "fit": _fit_diag(fit)}
    return out


def _fit_kwargs(cfg):
    if cfg["fit_model"] == "empirical":
        return {}
    return {"draws": int(cfg["nuts_draws"]), "tune": int(cfg.get("nuts_tune") or cfg["nuts_draws"]),
            "chains": int(cfg["chains"]), "cores": 1}


def equality_verdict(recs, cfg, cheap) -> dict:
    from scipy.stats import binomtest

    per = []  # per truth: (disagreements a-b, disagreements c-a, rows)
    ends = {}  # quantity -> [(|c - a|, |b - a|)]
    for rec in recs:
        ra = {(r["quantity"], r["key"]): r for r in rec["fits"]["a"]["rows"]}
        rb = {(r["quantity"], r["key"]): r for r in rec["fits"]["b"]["rows"]}
        rc = {(r["quantity"], r["key"]): r for r in rec["fits"]["cheap"]["rows"]}
        dab = dca = n = 0
        for key in ra.keys() & rb.keys() & rc.keys():
            for L in LEVELS:
                lv = str(L)
                a, b, c = ra[key][lv], rb[key][lv], rc[key][lv]
                dab += a["covered"] != b["covered"]
                dca += c["covered"] != a["covered"]
                n += 1
                for end in ("low", "high"):
                    if None in (a[end], b[end], c[end]):
                        continue
                    ends.setdefault(key[0], []).append((abs(c[end] - a[end]), abs(b[end] - a[end])))
        per.append((dab, dca, n))
    per = np.asarray(per, float)
    diff = (per[:, 1] - per[:, 0]) / np.maximum(per[:, 2], 1)
    g = np.random.default_rng(0)
    boot = [np.mean(diff[g.integers(0, len(diff), len(diff))]) for _ in range(2000)] if len(diff) else [np.nan]
    upper = float(np.quantile(boot, 0.95))
    signs = {}
    for q, pairs in ends.items():
        worse = sum(1 for c, b in pairs if c > b + 1e-12)
        better = sum(1 for c, b in pairs if c < b - 1e-12)
        p = float(binomtest(worse, worse + better, 0.5, alternative="greater").pvalue) if worse + better else 1.0
        signs[q] = {"cheap_further": worse, "cheap_closer": better, "ties": len(pairs) - worse - better,
                    "p_one_sided": round(p, 4), "ok": p > 0.05}
    diag = [r["fits"]["cheap"]["fit"] for r in recs]
    diag_default = [r["fits"][k]["fit"] for r in recs for k in ("a", "b")]
    diag_ok = all((d.get("r_hat_max") is None or d["r_hat_max"] < 1.01)
                  and (d.get("ess_bulk_min") is None or d["ess_bulk_min"] >= 400)
                  and not d.get("divergences") for d in diag)
    ok = bool(upper <= 0.02 and all(s["ok"] for s in signs.values()) and diag_ok)
    return {"K": len(recs), "default": {"fit_model": cfg["fit_model"], **_fit_kwargs(cfg)},
            "cheap": {"fit_model": {**cfg, **cheap}["fit_model"], **_fit_kwargs({**cfg, **cheap})},
            "disagreement_default_a_b": round(float(per[:, 0].sum() / max(per[:, 2].sum(), 1)), 4),
            "disagreement_cheap_a": round(float(per[:, 1].sum() / max(per[:, 2].sum(), 1)), 4),
            "excess_upper_95": round(upper, 4), "ends": signs, "cheap_diagnostics": diag,
            "default_diagnostics": diag_default,
            "diagnostics_ok": diag_ok, "accepted": ok,
            "seconds": [r["seconds"] for r in recs]}


# ============================================================================ command line
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truths", type=int, default=20, help="in-family truths T (default 20; the full run: 200)")
    ap.add_argument("--wider", type=int, default=None,
                    help="truths of every wider family (run_effects, shared_order, non_logit; default T // 4)")
    ap.add_argument("--families", default=",".join(FAMILIES), help=f"comma-separated, of {list(FAMILIES)}")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2, help="processes, one truth each (default 2)")
    ap.add_argument("--fit-model", default=None, help="fit kind calibrate uses (default hierarchical, as a user's)")
    ap.add_argument("--nuts-draws", type=int, default=None, help="NUTS draws (and tuning steps) per chain (1000)")
    ap.add_argument("--draws", type=int, default=None, help="posterior draws of each prediction (200)")
    ap.add_argument("--tip-draws", type=int, default=None, help="posterior draws per tip step (200)")
    ap.add_argument("--tip-directions", default=None, help="M (default: the strong convention), both, or none")
    ap.add_argument("--truth-runs", type=int, default=None, help="runs behind each true flip probability (1000)")
    ap.add_argument("--truth-runs-consensus", type=int, default=None,
                    help="runs behind each true P(consensus) (10000; the tiny form 3000)")
    ap.add_argument("--sbc", choices=["user", "posterior", "both", "prediction", "all", "tip"], default=None,
                    help="user: calibrate on the simulated runs alone (the headline); posterior: on the shipped "
                         "model's archive baselines plus them (posterior SBC); both; prediction: no fit, the "
                         "source posterior predicts (the prediction step alone); all; tip: no view, tip alone "
                         "(default user)")
    ap.add_argument("--assume-monotone", action="store_true",
                    help="predict with the saturation shortcut (off by default since issue 32: it biases the flip "
                         "frequencies under run effects); to measure it")
    ap.add_argument("--results", default=None, help="JSON lines, one per finished truth (resume; --summarise; .gz: gzip)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no truth after this many seconds (the finished ones are kept in --results)")
    ap.add_argument("--summarise", default=None, metavar="RESULTS", help="only summarise a results file")
    ap.add_argument("--match", default=None, metavar="RESULTS",
                    help="--summarise: only the truths (family, index) that RESULTS holds (two runs compared on the "
                         "same truths)")
    ap.add_argument("--truth-scatter", default=None, metavar="RESULTS",
                    help="how far a truth's P(consensus on M) scatters in 100 tables of 10 runs against one table "
                         "per run, for the first Llama-3.1 truths of RESULTS (truth_scatter())")
    ap.add_argument("--scatter-truths", type=int, default=3, help="--truth-scatter: truths (3)")
    ap.add_argument("--scatter-reps", type=int, default=30, help="--truth-scatter: estimates each way (30)")
    ap.add_argument("--rescore", nargs=2, default=None, metavar=("RESULTS", "OUT"),
                    help="score the flip and consensus rows of RESULTS again with this code's truth values "
                         "(rescore(); --workers processes); write OUT (.gz: gzip)")
    ap.add_argument("--refresh-alike", nargs=2, default=None, metavar=("RESULTS", "OUT"),
                    help="give the rows of draws that all agreed beta_summary's forecast of now (refresh_alike()); write OUT")
    ap.add_argument("--markdown", action="store_true", help="print the coverage table as Markdown (the docs' form)")
    ap.add_argument("--figure", default=None, help="rank histograms and ECDF differences (PNG)")
    ap.add_argument("--json", nargs="?", const="-", default=None, help="print the JSON (or write it to FILE)")
    ap.add_argument("--tiny", action="store_true", help="the CI form: N = 8, H = 2, 8 truths, empirical fit")
    ap.add_argument("--debug-shrink", type=float, default=None, metavar="F",
                    help="plant an over-confident forecaster: predictive spread shrunk to F (0 < F < 1)")
    ap.add_argument("--equality", type=int, default=None, metavar="K",
                    help="judge a cheaper fit on K in-family truths instead (see equality())")
    ap.add_argument("--cheap-draws", type=int, default=500, help="--equality: the cheap fit's NUTS draws (500)")
    ap.add_argument("--cheap-model", default=None,
                    help="--equality: the cheap fit's kind (default the default's, with --cheap-draws); e.g. "
                         "empirical, which needs no PyMC")
    a = ap.parse_args(argv)
    cfg = dict(DEFAULTS)
    if a.tiny:
        cfg.update(TINY)
    for k in ("fit_model", "nuts_draws", "draws", "tip_draws", "tip_directions", "truth_runs", "truth_runs_consensus",
              "sbc", "debug_shrink"):
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    if a.assume_monotone:
        cfg["assume_monotone"] = True
    for k in ("truth_runs", "truth_runs_consensus"):
        if int(cfg[k]) < 1:
            ap.error(f"--{k.replace('_', '-')} must be at least 1; got {cfg[k]}")
    if cfg["debug_shrink"] is not None and not 0 < cfg["debug_shrink"] < 1:
        ap.error("--debug-shrink must be in (0, 1)")
    if a.match and not a.summarise:
        ap.error("--match selects the truths of --summarise RESULTS; give --summarise")
    t0 = time.perf_counter()
    if a.equality:
        cheap = {"nuts_draws": a.cheap_draws, **({"fit_model": a.cheap_model} if a.cheap_model else {})}
        res = equality(a.equality, a.seed, cfg, cheap, workers=a.workers)
        res["seconds_total"] = round(time.perf_counter() - t0, 1)
        _emit(res, a.json)
        return 0
    families = [f for f in a.families.split(",") if f]
    bad = set(families) - set(FAMILIES)
    if bad:
        ap.error(f"unknown families {sorted(bad)}; known: {list(FAMILIES)}")
    T = 8 if a.tiny and "--truths" not in (argv or sys.argv) else a.truths
    W = (1 if a.tiny else max(1, T // 4)) if a.wider is None else a.wider
    if a.truth_scatter:
        recs = [json.loads(x) for x in _read_lines(a.truth_scatter) if x.strip()]
        print(json.dumps(truth_scatter(recs, n_truths=a.scatter_truths, reps=a.scatter_reps), indent=1))
        return 0
    if a.rescore:
        src, dst = a.rescore
        recs = [json.loads(x) for x in _read_lines(src) if x.strip()]
        out = rescore(recs, workers=a.workers)
        with (gzip.open(dst, "wt") if str(dst).endswith(".gz") else Path(dst).open("w")) as fh:
            for rec in out:
                fh.write(json.dumps(rec) + "\n")
        print(f"# {len(recs)} truths rescored into {dst}", file=sys.stderr)
        return 0
    if a.refresh_alike:
        src, dst = a.refresh_alike
        recs = [json.loads(x) for x in _read_lines(src) if x.strip()]
        out = refresh_alike(recs)
        with (gzip.open(dst, "wt") if str(dst).endswith(".gz") else Path(dst).open("w")) as fh:
            for rec in out:
                fh.write(json.dumps(rec) + "\n")
        n = sum(bool(r.get("alike")) for rec in out for v in rec["views"].values() for r in v.get("rows", []))
        print(f"# {len(recs)} truths, {n} all-or-none rows refreshed into {dst}", file=sys.stderr)
        return 0
    if a.summarise:
        records = [json.loads(x) for x in _read_lines(a.summarise) if x.strip()]
        if a.match:
            keep = {(r["family"], r["index"]) for r in (json.loads(x) for x in _read_lines(a.match) if x.strip())}
            records = [r for r in records if (r["family"], r["index"]) in keep]
        cfg = records[0].get("cfg", cfg) if records else cfg
    else:
        specs = plan(T, W, families, a.seed, cfg)
        try:
            records = run(specs, a.workers, Path(a.results) if a.results else None, max_seconds=a.max_seconds)
        except KeyboardInterrupt:
            return 130
    js = summarise(records, cfg, time.perf_counter() - t0, a.seed)
    if a.figure:
        inf = [r for r in records if r["family"] == "posterior"]
        view = "user" if any("rows" in ((r.get("views") or {}).get("user") or {}) for r in inf) else "prediction"
        plot_ranks(inf, a.figure, view=view)
    if a.markdown:
        print("\n".join(markdown_table(js)))
    elif a.json is None or a.json != "-":
        print_table(js)
    if a.json is not None:
        _emit(js, a.json)
    return 0


def _emit(js, where):
    text = json.dumps(js, indent=1, default=lambda o: None if isinstance(o, float) else str(o))
    if where in (None, "-"):
        print(text)
    else:
        Path(where).write_text(text)


if __name__ == "__main__":
    sys.exit(main())
