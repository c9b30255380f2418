"""Benchmark of ``normlab tip`` (adaptive committed-minority experiments) on ground truth we control.

Run from the repository root:

    python benchmarks/bench_tip.py [--seeds 2] [--truths llama31_re,llama31_shared_order] [--draws 100] [--json FILE]
    python benchmarks/bench_tip.py --archives [--seeds 6]      # the published archives by replay
    python benchmarks/bench_tip.py --tiny                      # seconds: the test suite's smoke run

**Hidden truths.** A truth is any simulator callable ``truth(count, n_runs, *, initial, committed_name,
max_interactions, rng, stop) -> GameLog`` (:class:`TableTruth` plays a strategy table, optionally with
between-run heterogeneity on the logit -- run effects, which the Dirichlet refit of the search
cannot represent: it fits one table). :class:`SharedOrderTruth` is outside the fitted family by
construction: the two names are shown in one order per interaction, shared by both players, and
the LLM leans to the name listed first, which correlates the two choices of a pair (``normlab.theory``
has no per-order play, so it is a plain-Python simulator of the game). Adding a truth is one entry
in :data:`TRUTHS`.

For each truth and seed the benchmark plays **two synthetic archives** of the same hidden table the
way the paper's experiments were played: 20 baseline runs from empty memories (stopped at a 3N
success streak) and the paper's full grid -- 10 runs at every committed count 0 .. N - 1, each at
most 30 rounds and stopped at a 3N streak. Archive A (seed 1000 + s) is replayed
(:class:`normlab.calibration.tip.sources.ArchiveReplay`: runs drawn without replacement, never a run
not paid for); archive B (seed 2000 + s) is never read by any method, and **the truth is B's
published-rule critical mass** (what an independent replication of the experiment reports,
:func:`normlab.theory.criteria.published_critical_mass`). A's own full-grid reading is kept as
``truth_same_archive``: once the search has played a count out, its reading is A's, so scoring
against A is largely structural. The methods, all scored against B:

- ``tip`` (``strategy="eig"``, and ``"half"`` with ``--strategies eig,half``): runs used, its
  estimate (always a tested count), its credible set, whether it hits B's value (``hit``) or lands
  within one agent (``hit1``); ``covered``: B's value inside the interval of a *fresh* experiment
  of the design (``TipResult.replication``); ``covered_same``: A's value inside the headline
  interval (structural); the categorical Brier score of its distribution over the tested counts
  (0: all mass on the truth, 2: all on one wrong value) and the share of zero-width intervals;
- ``full grid``: every committed run of A read by the rule -- the agreement with B no method reading
  A can beat;
- ``bisection`` on observed flip frequencies, over the counts 1 .. N - 1: at each probed count play
  ``m`` runs and call the count "overturned" when every one of them flipped by its end (flip
  frequency 1, the per-run analogue of the ensemble rule), m = 5; and the same with all 10 runs of
  the count read by the published rule (exact on A when the rule is monotone in the count). A
  point estimate's Brier score is 0 or 2.

``--archives``: ``tip`` on the Llama-3.1 and Llama-3 archives by replay, both directions (several
seeds: the seed orders the runs drawn), against their published critical masses (Table S3: 10 and
0, 6 and 1), with the same rivals. There is no second archive: the truth is the archive's own full
grid as its authors read it, so "covered" is structural once a count is played out.

Prints one line per (truth, seed, method), a table (runs used, mean and % of the full grid; exact
and within-one hits; Brier score; coverage and zero-width share of tip's intervals) and README's
tip table (estimate, credible set, runs, hits, Brier, covered, zero-width per case and method).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

AINORMS = Path(os.environ["NORMLAB_AINORMS"]) if os.environ.get("NORMLAB_AINORMS") else (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "ai-norms")


# ----------------------------------------------------------------------------- hidden truths
class TableTruth:
    """A hidden strategy: a table (``StrategyTable``) and, optionally, run effects
    ``logit p_r = kappa_r logit p + b_r`` drawn per run (``sd_b``, ``sd_k``; a share ``omega`` of
    the variance common to the runs of one call, i.e. of one committed count)."""

    def __init__(self, table, *, sd_b=0.0, sd_k=0.0, omega=0.5, name="table"):
        self.table, self.sd_b, self.sd_k, self.omega, self.name = table, float(sd_b), float(sd_k), float(omega), name
        self.names, self.memory = tuple(table.names), int(table.memory)

    def _run_tables(self, n, g):
        from normlab.theory import StrategyTable

        if self.sd_b == 0 and self.sd_k == 0:
            return [self.table] * n
        p = np.clip(self.table.table[:, 1], 1e-9, 1 - 1e-9)
        lg = np.log(p) - np.log1p(-p)
        shared = g.standard_normal(2)
        out = []
        for _ in range(n):
            e = np.sqrt(self.omega) * shared + np.sqrt(1 - self.omega) * g.standard_normal(2)
            q = 1 / (1 + np.exp(-(np.exp(self.sd_k * e[1]) * lg + self.sd_b * e[0])))
            out.append(StrategyTable(q, memory=self.memory, names=self.names))
        return out

    def __call__(self, count, n_runs, *, initial, committed_name, max_interactions, rng, stop="streak"):
        from normlab.schema import GameLog
        from normlab.theory import strategy_game

        import warnings

        g = np.random.default_rng(rng)
        logs = []
        for tab in self._run_tables(n_runs, g):
            with warnings.catch_warnings():  # runs ending at their cap are the protocol, not a problem
                warnings.simplefilter("ignore", RuntimeWarning)
                r = strategy_game(tab, n_agents=self.n_agents, memory=self.memory, n_runs=1, committed=int(count),
                                  committed_name=committed_name, initial=initial, stop=stop,
                                  max_interactions=int(max_interactions), record_decisions=True, progress=False,
                                  rng=int(g.integers(2**62)))
            lg = r.to_log()
            lg.runs["stop_reason"] = [str(x) for x in r.stop_reason]  # the run table says how a run ended
            logs.append(lg)
        return GameLog.concat(logs)


class SharedOrderTruth(TableTruth):
    """A hidden strategy the fitted family cannot represent: the authors' committed-minority protocol
    shows the two names in one order per *interaction*, shared by both players, and the LLM leans
    to the name listed first -- ``logit p = logit p_table(s) +- beta`` (+ when ``names[1]`` is listed
    first). Marginally each decision depends on its memory only, but the two choices of a pair are
    correlated, which no per-state table reproduces. ``normlab.theory`` has no per-order play, so
    this truth is a plain-Python simulator of the game (pairs drawn uniformly, memories of ``H``
    ``(own, partner)`` entries, a committed agent always plays the challenger, a run stops at its
    cap or, with ``stop="streak"``, at ``3N`` successes in a row), with run effects on top as in
    :class:`TableTruth`."""

    def __init__(self, table, *, beta=1.0, **kw):
        super().__init__(table, **kw)
        self.beta = float(beta)

    def __call__(self, count, n_runs, *, initial, committed_name, max_interactions, rng, stop="streak"):
        from normlab.schema import GameLog
        from normlab.theory.strategies import encode_state

        g = np.random.default_rng(rng)
        N, H, names = self.n_agents, self.memory, self.names
        ch = names.index(committed_name) if committed_name is not None else None
        labels = {}
        rows, runs = [], []
        for k, tab in enumerate(self._run_tables(n_runs, g)):
            p = np.clip(tab.table[:, 1], 1e-12, 1 - 1e-12)
            lg = np.log(p) - np.log1p(-p)
            if initial == "empty":
                mem = [[] for _ in range(N)]
            else:
                m = names.index(initial.split(":", 1)[1])
                mem = [[(m, m)] * H for _ in range(N)]
            committed = np.zeros(N, bool)
            committed[:int(count)] = True
            T = int(max_interactions)
            pairs = np.array([g.choice(N, 2, replace=False) for _ in range(T)])
            order = g.random(T) < 0.5  # names[1] listed first
            u = g.random((T, 2))
            streak, t_end = 0, T
            for t in range(T):
                plays, states = [], []
                for a in (0, 1):
                    i = int(pairs[t, a])
                    s = encode_state(mem[i], 2)
                    states.append(s)
                    if committed[i]:
                        plays.append(ch)
                    else:
                        x = lg[s] + (self.beta if order[t] else -self.beta)
                        plays.append(int(u[t, a] < 1.0 / (1.0 + np.exp(-x))))
                ok = plays[0] == plays[1]
                for a in (0, 1):
                    i = int(pairs[t, a])
                    s = states[a]
                    if s not in labels:
                        labels[s] = tab.state_label(s)
                    rows.append((k, t, t // N, i, int(pairs[t, 1 - a]), names[plays[a]], names[plays[1 - a]], True, ok,
                                 bool(committed[i]), labels[s], len(mem[i])))
                    mem[i] = (mem[i] + [(plays[a], plays[1 - a])])[-H:]
                streak = streak + 1 if ok else 0
                if stop == "streak" and streak >= 3 * N:
                    t_end = t + 1
                    break
            runs.append({"run": k, "model": "truth", "kind": "simulation", "names": ",".join(names), "n_agents": N,
                         "memory": H, "committed_count": int(count),
                         "committed_name": committed_name if count else None, "initial": initial,
                         "n_interactions": t_end, "consensus": None, "source_file": None,
                         "stop_reason": "streak" if t_end < T else "max"})
        cols = ["run", "t", "round", "agent", "partner", "name", "partner_name", "valid", "success", "committed",
                "memory_state", "memory_len"]
        return GameLog(pd.DataFrame(rows, columns=cols), pd.DataFrame(runs))


def _fit_truth(name, *, effects, perturb=0.0, seed=0, label=None, cls=None, **kw):
    from normlab.calibration import RunEffects, load_fit
    from normlab.theory import StrategyTable

    fit = load_fit(name)
    tab = fit.mean_table()
    if perturb:
        g = np.random.default_rng(seed)
        p = np.clip(tab.table[:, 1], 1e-9, 1 - 1e-9)
        lg = np.log(p) - np.log1p(-p) + perturb * g.standard_normal(len(p))
        tab = StrategyTable(1 / (1 + np.exp(-lg)), memory=tab.memory, names=tab.names)
    sd_b = sd_k = 0.0
    if effects:
        s = RunEffects.from_dict(fit.meta.get("run_effects")).summary()
        sd_b, sd_k = s["sd_b"]["estimate"], s["sd_k"]["estimate"]
    return (cls or TableTruth)(tab, sd_b=sd_b, sd_k=sd_k, name=label or name, **kw)


def _conformity_truth(memory=2, beta=1.6, noise=0.03):
    """A small hand-made table for the tiny run: p(name 1) rises with name 1 in the partners' plays."""
    from normlab.theory import StrategyTable
    from normlab.theory.strategies import decode_state, n_states

    S = n_states(2, memory)
    p = np.empty(S)
    for s in range(S):
        ent = decode_state(s, 2, memory)
        d = sum(1 if partner == 1 else -1 for _, partner in ent)
        p[s] = noise + (1 - 2 * noise) / (1 + np.exp(-beta * d))
    return TableTruth(StrategyTable(p, memory=memory, names=("X", "Y")), sd_b=0.3, sd_k=0.1, name="conformity")


#: Hidden truths: name -> (factory, N). Add a truth here (any simulator callable, see the docstring).
TRUTHS = {
    "llama31": (lambda: _fit_truth("llama31_70b_QM_H5", effects=False, label="llama31"), 24),
    "llama31_re": (lambda: _fit_truth("llama31_70b_QM_H5", effects=True, label="llama31_re"), 24),
    "llama31_perturbed_re": (lambda: _fit_truth("llama31_70b_QM_H5", effects=True, perturb=0.5, seed=7,
                                                label="llama31_perturbed_re"), 24),
    "llama3_h3_re": (lambda: _fit_truth("llama3_70b_QM_H3", effects=True, label="llama3_h3_re"), 24),
    # outside the fitted family: a shared name order per interaction with a first-listed bias (+ run effects)
    "llama31_shared_order": (lambda: _fit_truth("llama31_70b_QM_H5", effects=True, label="llama31_shared_order",
                                                cls=SharedOrderTruth, beta=1.0), 24),
}


#: The default run (minutes): run effects as fitted, and a truth outside the fitted family.
DEFAULT_TRUTHS = ("llama31_re", "llama31_shared_order")


def synthetic_archive(truth, *, n_agents, majority, runs=10, baselines=20, window=30, baseline_rounds=60, seed=0):
    """Baselines and the full paper grid played by ``truth``, as an archive (kinds as the published
    ones: ``baseline``, ``swap``, ``evolved``)."""
    from normlab.schema import GameLog

    truth.n_agents = int(n_agents)
    names = truth.names
    challenger = names[1 - names.index(majority)]
    ss = np.random.SeedSequence(seed)
    kids = ss.spawn(n_agents + 1)
    parts = []
    b = truth(0, baselines, initial="empty", committed_name=None, max_interactions=baseline_rounds * n_agents,
              rng=kids[0])
    b.runs["kind"] = "baseline"
    parts.append(b)
    for c in range(n_agents):
        # with committed agents a run stops at a 3N streak (the authors' protocol); count 0 plays its length
        lg = truth(c, runs, initial=f"consensus:{majority}", committed_name=challenger,
                   max_interactions=window * n_agents, rng=kids[c + 1], stop="streak" if c else "max")
        lg.runs["kind"] = "swap" if c else "evolved"
        if not c:
            lg.runs["committed_name"] = None
        parts.append(lg)
    out = GameLog.concat(parts)
    out.runs["model"] = f"truth:{truth.name}"
    return out


def true_critical_mass(archive, *, names, majority, memory, n_agents, window=30):
    """The published-rule critical mass of every committed run of the archive (the full grid)."""
    from normlab.calibration import challenger_shares
    from normlab.calibration.tip import count_met

    challenger = names[1 - names.index(majority)]
    r = archive.runs
    r = r[(r["initial"].astype(str) == f"consensus:{majority}").to_numpy() & (r["n_agents"] == n_agents).to_numpy()
          & (r["memory"] == memory).to_numpy()
          & ((r["committed_count"] == 0).to_numpy() | (r["committed_name"].astype(str) == challenger).to_numpy())]
    sel = archive.select(run=list(r["run"]))
    sh = challenger_shares(sel)
    by = {}
    for _, row in r.iterrows():
        s = sh[sh["run"] == row["run"]].sort_values("round")["share"].to_numpy(float)
        by.setdefault(int(row["committed_count"]), []).append(s)
    met = [c for c in sorted(by) if count_met(by[c], window)]
    return (float(met[0]) if met else float("inf")), by


# ----------------------------------------------------------------------------- the rivals
def bisection(source, *, per_probe, rule):
    """Bisection over the counts >= 1 the source can play: ``rule="flips"`` -- a count is overturned
    when all ``per_probe`` runs played there flipped by their end; ``"published"`` -- the published
    rule on the runs played there. Returns ``(estimate, runs used)``."""
    from normlab.calibration import challenger_shares
    from normlab.calibration.tip import count_met
    from normlab.theory.criteria import FLIP_SUM

    counts = [c for c in source.design.counts if c >= 1 and source.remaining(c) > 0]
    lo, hi, used, step = -1, len(counts), 0, 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c = counts[mid]
        step += 1
        b = source.play(c, min(per_probe, source.remaining(c)), step=step)
        used += len(b.log.runs)
        sh = challenger_shares(b.log)
        trs = [sh[sh["run"] == r].sort_values("round")["share"].to_numpy(float) for r in b.log.runs["run"]]
        if rule == "flips":
            ok = all(len(s) and np.nansum(s[-3:]) >= FLIP_SUM for s in trs)
        else:
            ok = count_met(trs, source.design.window)
        if ok:
            hi = mid
        else:
            lo = mid
    return (float(counts[hi]) if hi < len(counts) else float("inf")), used


# ----------------------------------------------------------------------------- one case
def _on_support(x, tested) -> float:
    """A critical mass on the tested counts: itself, or inf ("beyond the tested counts")."""
    return float(x) if x is not None and np.isfinite(x) and int(x) in tested else float("inf")


def brier(dist: dict, truth: float) -> float:
    """Categorical Brier score of a distribution over the tested counts and "beyond" (``inf``):
    ``sum_k (p_k - 1{k = truth})^2`` (0: all mass on the truth; 2: all mass on one wrong value)."""
    keys = set(dist) | {truth}
    return float(sum((dist.get(k, 0.0) - (1.0 if k == truth else 0.0)) ** 2 for k in keys))


def _final_distribution(res, tested) -> dict:
    """The search's last-step distribution of this experiment's critical mass on the tested counts."""
    cv = res.curves[res.curves["step"] == res.curves["step"].max()]
    d = {float(c): float(p) for c, p in zip(cv["committed"], cv["p_cm"]) if int(c) in tested and p > 0}
    rest = 1.0 - sum(d.values())
    if rest > 1e-9:
        d[float("inf")] = rest
    return d


def _row(label, seed, method, truth, estimate, runs, full_runs, tested, **kw):
    t = _on_support(truth, tested)
    e = _on_support(estimate, tested)
    hit1 = bool(abs(e - t) <= 1) if np.isfinite(t) and np.isfinite(e) else bool(e == t)
    out = {"case": label, "seed": seed, "method": method, "truth": truth, "estimate": estimate,
           "estimate_tested": bool(estimate is not None and (not np.isfinite(estimate) or int(estimate) in tested)),
           "hit": bool(e == t), "hit1": hit1, "runs": runs, "full_grid": full_runs,
           "brier": 0.0 if e == t else 2.0}
    out.update(kw)
    return out


def run_case(archive, *, truth_cm, names, majority, memory, n_agents, window, seed, draws, strategies, label,
             full_runs, stop=None, truth_same=None, truth_kind="independent archive", verbose=True):
    """tip and its rivals on ``archive`` (replayed), scored against ``truth_cm``.

    ``truth_cm``: the critical mass the methods are scored against -- for a synthetic truth the
    full grid of a *second*, independent archive of the same hidden table (``truth_kind``), never
    read by the replay; ``truth_same``: the full grid of the replayed archive itself (the
    structural reading: a count played out is read identically by the search and by it)."""
    from normlab.calibration.tip import tip
    from normlab.calibration.tip.sources import ArchiveReplay

    rows = []

    def src(s):
        return ArchiveReplay(archive, names=names, majority=majority, memory=memory, n_agents=n_agents,
                             window=window, stop=stop, rng=s)

    tested = {int(c) for c in src(seed).design.counts}
    same = truth_cm if truth_same is None else truth_same
    for strat in strategies:
        t = time.perf_counter()
        res = tip(src(seed), strategy=strat, n_draws=draws, rng=seed)
        rep = res.replication or {}
        this = _final_distribution(res, tested)
        rdist = rep.get("distribution") or {}
        tr = _on_support(truth_cm, tested)
        rows.append(_row(label, seed, f"tip ({strat})", truth_cm, res.estimate, res.runs_used, full_runs, tested,
                         truth_kind=truth_kind, truth_same_archive=same, low=res.low, high=res.high,
                         credible_set=[None if not np.isfinite(c) else int(c) for c in res.credible_set],
                         p_set=res.p_set, p_within=res.p_within,
                         # the headline interval (this experiment: played counts read from their own runs)
                         covered_same=bool(res.low <= _on_support(same, tested) <= res.high),
                         zero_width=bool(res.low == res.high),
                         brier_same=brier(this, _on_support(same, tested)),
                         # the replication interval: what an independent experiment reports
                         rep_estimate=rep.get("estimate"), rep_low=rep.get("low"), rep_high=rep.get("high"),
                         covered=bool(rep.get("low", np.inf) <= tr <= rep.get("high", -np.inf)),
                         rep_zero_width=bool(rep.get("low") == rep.get("high")),
                         brier=brier(rdist, tr) if truth_kind != "published" else brier(this, tr),
                         stopped=res.stopped, seconds=round(time.perf_counter() - t, 1)))
        if truth_kind == "published":  # no second archive: the headline interval is scored
            rows[-1]["covered"] = bool(res.low <= tr <= res.high)
    for per, rule, name in ((5, "flips", "bisection (5 runs, all flip)"),
                            (10, "published", "bisection (10 runs, published rule)")):
        est, used = bisection(src(seed), per_probe=per, rule=rule)
        rows.append(_row(label, seed, name, truth_cm, est, used, full_runs, tested, truth_kind=truth_kind,
                         truth_same_archive=same))
    # the full grid of the replayed archive read by the rule: what no method reading it can beat
    rows.append(_row(label, seed, "full grid", truth_cm, same, full_runs, full_runs, tested, truth_kind=truth_kind,
                     truth_same_archive=same))
    if verbose:
        for r in rows:
            print(json.dumps({k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()}),
                  flush=True)
    return rows


def bench_truths(truths, seeds, draws, strategies, *, runs=10, verbose=True):
    """Per truth and seed two archives of the same hidden table: A (seed 1000 + s) is replayed,
    B (seed 2000 + s) is never read by any method and gives the truth."""
    rows = []
    for name in truths:
        factory, N = TRUTHS[name]
        truth = factory()
        names = truth.names
        majority = names[1]  # the Llama tables: M, the strong convention (names Q, M)
        for seed in seeds:
            t = time.perf_counter()
            arch = synthetic_archive(truth, n_agents=N, majority=majority, runs=runs, seed=1000 + seed)
            other = synthetic_archive(truth, n_agents=N, majority=majority, runs=runs, seed=2000 + seed)
            same, _ = true_critical_mass(arch, names=names, majority=majority, memory=truth.memory, n_agents=N)
            cm, _ = true_critical_mass(other, names=names, majority=majority, memory=truth.memory, n_agents=N)
            if verbose:
                print(f"# {name} seed {seed}: critical mass of archive B (the truth) {cm}, of the replayed archive A "
                      f"{same} (archives in {time.perf_counter() - t:.0f} s)", flush=True)
            rows += run_case(arch, truth_cm=cm, truth_same=same, names=names, majority=majority, memory=truth.memory,
                             n_agents=N, window=30, seed=seed, draws=draws, strategies=strategies, label=name,
                             full_runs=runs * (N - 1), stop="streak", verbose=verbose)
    return rows


#: The published archives: label, file, H, N and the published critical masses (Table S3: overturn_M, overturn_Q).
ARCHIVES = (("Llama-3.1 (N = 24, H = 5)", "llama31_data.zip", 5, 24, {"M": 10.0, "Q": 0.0}),
            ("Llama-3 (N = 48, H = 3)", "llama3_data.zip", 3, 48, {"M": 6.0, "Q": 1.0}))


def bench_archives(seeds, draws, strategies, verbose=True, directions=("M", "Q")):
    """tip and its rivals on the published archives by replay, per direction, scored against the
    published critical masses (there is no second archive: the truth is the archive's own full
    grid as its authors read it, so "covered" is structural once a count is played out)."""
    from normlab.llm_runs import load_ainorms
    from normlab.calibration.tip.sources import ArchiveReplay

    rows = []
    for label, zf, H, N, published in ARCHIVES:
        path = AINORMS / zf
        if not path.exists():
            print(f"# {path} not found: skipped", file=sys.stderr)
            continue
        arch = load_ainorms(path, kinds=["baseline", "swap", "evolved"])
        for maj in directions:
            full = ArchiveReplay(arch, names=("Q", "M"), majority=maj, memory=H, n_agents=N)
            same, _ = true_critical_mass(arch, names=("Q", "M"), majority=maj, memory=H, n_agents=N,
                                         window=full.design.window)
            for seed in seeds:
                rows += run_case(arch, truth_cm=published[maj], truth_same=same, names=("Q", "M"), majority=maj,
                                 memory=H, n_agents=N, window=None, seed=seed, draws=draws, strategies=strategies,
                                 label=f"{label}, overturn_{maj} ({published[maj]:g})", full_runs=full.runs_available,
                                 truth_kind="published", verbose=verbose)
    return rows


def table(rows) -> pd.DataFrame:
    """Per case and method: runs used (mean, share of the grid), exact and within-one hits against
    the truth, the mean Brier score, and for tip the coverage of its intervals and their
    zero-width share."""
    df = pd.DataFrame(rows)
    g = df.groupby(["case", "method"], sort=False)
    out = g.agg(seeds=("seed", "nunique"), runs_mean=("runs", "mean"), runs_max=("runs", "max"),
                full_grid=("full_grid", "first"), hit=("hit", "mean"), hit1=("hit1", "mean"),
                brier=("brier", "mean"), tested=("estimate_tested", "mean"))
    out["share_of_grid"] = out["runs_mean"] / out["full_grid"]
    for col in ("covered", "zero_width", "covered_same", "rep_zero_width"):
        if col in df:
            out[col] = df[df[col].notna()].groupby(["case", "method"], sort=False)[col].mean()
    return out.reset_index()


def readme_table(rows) -> str:
    """The README's tip table: per case, tip (estimate, credible set, runs) beside its rivals."""
    df = pd.DataFrame(rows)
    lines = ["| case (truth) | method | estimate (seed 1) | credible set | runs (mean, % of grid) | exact / within 1 "
             "| Brier | covered | zero-width |", "|---|---|---|---|---|---|---|---|---|"]
    for (case, method), g in df.groupby(["case", "method"], sort=False):
        r0 = g.iloc[0]
        est = "not reached" if r0["estimate"] is None or not np.isfinite(r0["estimate"]) else f"{r0['estimate']:g}"
        iv = f" [{r0['low']:g}, {r0['high']:g}]" if "low" in g and pd.notna(r0.get("low")) else ""
        cs = "{" + ", ".join("beyond" if c is None else str(c) for c in r0["credible_set"]) + "}" \
            if isinstance(r0.get("credible_set"), list) else ""
        cov = f"{g['covered'].mean():.2f}" if "covered" in g and g["covered"].notna().any() else ""
        zw = f"{g['zero_width'].mean():.2f}" if "zero_width" in g and g["zero_width"].notna().any() else ""
        lines.append(f"| {case} | {method} | {est}{iv} | {cs} | {g['runs'].mean():.1f} "
                     f"({g['runs'].mean() / g['full_grid'].iloc[0]:.0%}) | {g['hit'].mean():.2f} / {g['hit1'].mean():.2f} "
                     f"| {g['brier'].mean():.2f} | {cov} | {zw} |")
    return "\n".join(lines)


def tiny():
    """Seconds: a small hand-made truth at N = 8, H = 2, 4 runs per count, one seed, 40 draws; the
    replayed archive A (seed 1) and the truth's archive B (seed 2) from the same hidden table."""
    truth = _conformity_truth()
    arch = synthetic_archive(truth, n_agents=8, majority="Y", runs=4, baselines=8, seed=1)
    other = synthetic_archive(truth, n_agents=8, majority="Y", runs=4, baselines=8, seed=2)
    same, _ = true_critical_mass(arch, names=truth.names, majority="Y", memory=2, n_agents=8)
    cm, _ = true_critical_mass(other, names=truth.names, majority="Y", memory=2, n_agents=8)
    rows = run_case(arch, truth_cm=cm, truth_same=same, names=truth.names, majority="Y", memory=2, n_agents=8,
                    window=30, seed=1, draws=40, strategies=("eig",), label="conformity (tiny)", full_runs=4 * 7,
                    stop="streak", verbose=False)
    for r in rows:
        r.update(replay_seed=1, truth_seed=2)
    return rows


def _finite(o):
    """JSON: inf and NaN as null, recursively."""
    if isinstance(o, float):
        return o if np.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, (np.floating, np.integer, np.bool_)):
        return _finite(o.item())
    return o


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds per truth (default 2; the README's table: 6)")
    ap.add_argument("--first-seed", type=int, default=1, help="seeds run from here (default 1)")
    ap.add_argument("--truths", default=",".join(DEFAULT_TRUTHS),
                    help=f"comma-separated, of {list(TRUTHS)} (default: {','.join(DEFAULT_TRUTHS)})")
    ap.add_argument("--draws", type=int, default=100, help="posterior draws per step (default 100; normlab tip: 200)")
    ap.add_argument("--strategies", default="eig", help="eig and/or half, comma-separated (default eig)")
    ap.add_argument("--archives", action="store_true", help="the published archives by replay instead")
    ap.add_argument("--tiny", action="store_true", help="a seconds-long smoke run (JSON rows on stdout)")
    ap.add_argument("--json", default=None, help="write every row to this file")
    a = ap.parse_args(argv)
    if a.tiny:
        print(json.dumps(_finite(tiny()), default=str))
        return 0
    seeds = list(range(a.first_seed, a.first_seed + a.seeds))
    strategies = tuple(s for s in a.strategies.split(",") if s)
    t = time.perf_counter()
    if a.archives:
        rows = bench_archives(seeds, a.draws, strategies)
    else:
        unknown = set(a.truths.split(",")) - set(TRUTHS)
        if unknown:
            ap.error(f"unknown truths {sorted(unknown)}; known: {list(TRUTHS)}")
        rows = bench_truths(a.truths.split(","), seeds, a.draws, strategies)
    tab = table(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(tab.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    print()
    print(readme_table(rows))
    print(f"# {time.perf_counter() - t:.0f} s", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(_finite({"rows": rows, "table": tab.to_dict(orient="records")}), indent=1,
                                           default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
