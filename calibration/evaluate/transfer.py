"""Transfer: fit a strategy at one (LLM, N, H), predict the runs of others, and score every prediction.

For every source fit and every target setting (LLM, population size ``N``, memory ``H``) of a
log, :func:`transfer_scores` predicts the target's experiments and scores them with
:func:`normlab.calibration.score` on the runs the source fit did not use:

- a different ``N`` needs nothing: the table is the same, the population differs;
- a different ``H`` needs a table over the target's memory states. ``memory_transfer``:
  ``"suffix"`` (default): an agent acts on its most recent ``H_fit`` entries -- the state of a
  longer memory is mapped to the fitted state of its last ``H_fit`` entries, a shorter memory to
  the fitted state with the same entries (every posterior draw of the fitted table, re-indexed; any
  fit kind); ``"features"``: the feature model of a logit/hierarchical fit evaluated at the new
  ``H``, state effects dropped; ``"prior"``: the same with every state effect drawn from its prior
  ``N(0, tau)`` (what the fit knows about states it never saw);
- a different LLM is the leave-one-model-out check: how much is lost by predicting a model with
  another model's strategy.

Every cell plays the source fit's run effects (:class:`~normlab.calibration.RunEffects`: they act on
the logits, so at any ``H``; an "other LLM" cell plays the source LLM's; a joint fit's lined up with
its table draws); the ``run_effects`` column says which (``joint``, ``marginal`` or ``none``).

Targets carry the design of their own experiments: the consensus interval is that of as many
runs as the target has baseline runs, the published-rule interval that of its runs per committed
count, flips are read within the target's observed window (``min(within_rounds, complete rounds of
its committed runs)``, so that short runs are not censored), and the authors' window is used for the
published rule (:func:`normlab.theory.criteria.published_max_round`). Predicted convergence runs
stop after ``3N`` consecutive successes; the published runs did so at N = 24, H = 5, but stopped
after 144 (N = 24, H = 3 and 4) or 72 (N = 200) -- cells where the rules differ say so in ``note``:
a table whose settled state keeps a few per cent of noise can meet a 72-success streak at N = 200
and still never meet a 600-success one.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables
S2-S3, Methods; Brier (1950); Gneiting & Raftery, JASA 102, 359 (2007).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import plotting
from normlab._rng import spawn
from normlab._validate import check_int
from normlab.llm_runs import load_ainorms
from normlab.llm_runs.published.ainorms_archive import find_ainorms
from normlab.schema import GameLog
from normlab.theory import StrategyTable
from normlab.theory.criteria import published_max_round
from normlab.theory.strategies import decode_state, encode_state, n_states

from ..fit.inputs import _check_names
from ..fit.posterior import StrategyFit, load_fit
from ..fit.run_effects import RunEffects
from ..prediction.api import predict
from .rivals import RIVAL_LABELS, design_rounds
from .scores import compare_forecasts, rival_wins, score, summarize_coverage

__all__ = ["TransferScores", "transfer_scores", "transfer_report", "tables_at_memory", "fitted_runs",
           "target_settings", "MEMORY_TRANSFERS"]

MEMORY_TRANSFERS = ("suffix", "features", "prior")


# ----------------------------------------------------------------------------- tables at another H
def _suffix_index(W: int, h_fit: int, h_new: int) -> np.ndarray:
    return np.array([encode_state(decode_state(s, W, h_new)[-h_fit:], W) for s in range(n_states(W, h_new))],
                    dtype=np.int64)


def tables_at_memory(fit: StrategyFit, memory: int, n_draws: int, *, how: str = "suffix", rng=None,
                     return_index: bool = False):
    """Posterior draws of a fitted strategy, as tables over the memory states of another ``H``.

    Parameters
    ----------
    fit : StrategyFit
    memory : int
        Target memory length.
    n_draws : int
    how : {"suffix", "features", "prior"}, optional
        ``"suffix"``: draw tables at the fitted ``H`` and re-index them -- a memory of the target
        ``H`` uses the fitted state of its last ``min(k, H_fit)`` entries (a longer memory acts
        on its most recent entries; a shorter one like a fitted memory with as many entries);
        ``"features"``: the feature model (logit/hierarchical fits) at the new ``H``, without
        state effects; ``"prior"``: the feature model with every state effect drawn from its prior
        ``N(0, tau)`` (hierarchical fits).
    rng : optional
    return_index : bool, optional
        Also return the stored posterior draw each table comes from (:meth:`StrategyFit.tables`;
        None for a fit without stored draws): a joint fit's run effects are paired with them.

    Returns
    -------
    list of normlab.theory.strategies.StrategyTable
        ``n_draws`` tables for ``memory`` (for ``memory == fit.memory`` the fit's own draws; with
        ``return_index``: ``(tables, index)``).

    Raises
    ------
    ValueError
        Unknown ``how``, or a feature-based transfer of a fit without features.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8 (tables
    at H = 3 and H = 5).
    """
    if how not in MEMORY_TRANSFERS:
        raise ValueError(f"how must be one of {MEMORY_TRANSFERS}; got {how!r}")
    if not isinstance(fit, StrategyFit):
        raise TypeError(f"fit must be a StrategyFit; got {type(fit).__name__}")
    H = check_int(memory, "memory", low=1)
    D = check_int(n_draws, "n_draws", low=1)
    if H == fit.memory:
        tabs, index = fit.tables(D, rng=rng, return_index=True)
        return (tabs, index) if return_index else tabs
    if how == "suffix":
        idx = _suffix_index(fit.n_names, fit.memory, H)
        arr, index = fit.sample_tables(D, rng=rng, return_index=True)
        tabs = [StrategyTable(t[idx], memory=H, names=fit.names) for t in arr]
        return (tabs, index) if return_index else tabs
    if not fit.family.features:
        raise ValueError(f"memory transfer {how!r} needs a feature-based fit (logit or hierarchical); "
                         f"use how='suffix' for an {fit.kind} fit")
    if how == "prior" and not fit.family.state_effects:
        raise ValueError("memory transfer 'prior' needs a hierarchical fit (state effects with a scale tau)")
    kind = "hierarchical" if how == "prior" else "logit"
    moved = StrategyFit(kind=kind, names=fit.names, memory=H, counts=np.zeros((n_states(fit.n_names, H), fit.n_names)),
                        prior=fit.prior, decay=fit.decay, coef_names=fit.coef_names, coef_draws=fit.coef_draws,
                        tau_draws=fit.tau_draws if how == "prior" else np.zeros(0),
                        meta={**fit.meta, "memory_transfer": {"from": fit.memory, "how": how}})
    return moved.tables(D, rng=rng, return_index=return_index)  # the same stored draws: the index holds


def fitted_runs(fit: StrategyFit, log: GameLog) -> np.ndarray:
    """Run ids of ``log`` that a fit was made from, read from its provenance (``meta["source"]``:
    LLMs, run kinds and population sizes; plus the fit's names and memory length).

    Returns
    -------
    numpy.ndarray of int
        Empty when the fit carries no provenance (e.g. a fit from probes).
    """
    src = fit.meta.get("source") or {}
    if src.get("kind") != "log":
        return np.zeros(0, np.int64)
    r = log.runs
    target = frozenset(fit.names)
    m = np.array(r["names"].map(lambda s: frozenset(str(s).split(",")) == target), dtype=bool)
    m &= (r["memory"] == fit.memory).to_numpy()
    for col, key in (("model", "models"), ("kind", "kinds"), ("n_agents", "n_agents")):
        if src.get(key):
            m &= r[col].isin(list(src[key])).to_numpy()
    return r.loc[m, "run"].to_numpy(np.int64)


# ----------------------------------------------------------------------------- result type
_RELATIONS = ("same setting", "other N", "other H", "other N and H", "other LLM")
#: per-cell scores of the rivals on the same runs: ``<metric>_<rival>``
_RIVAL_COLS = ("brier_flip_direction_rule", "log_score_flip_direction_rule", "brier_flip_logistic",
               "log_score_flip_logistic", "brier_consensus_base_rate", "log_score_consensus_base_rate")


def _split_rival_col(col: str) -> tuple[str, str]:
    for rival in ("direction_rule", "logistic", "base_rate"):
        if col.endswith("_" + rival):
            return col[: -len(rival) - 1], rival
    raise ValueError(col)


@dataclass(frozen=True)
class TransferScores:
    """Scores of every (source fit, target setting) prediction.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per source and target: ``source``, ``source_llm``, ``source_n``, ``source_h``,
        ``target``, ``target_llm``, ``target_n``, ``target_h``, ``relation`` (``"same setting"``,
        ``"other N"``, ``"other H"``, ``"other N and H"``, ``"other LLM"``), ``n_flip_runs``,
        ``n_consensus_runs``, ``brier_flip``, ``log_score_flip``, ``brier_consensus``,
        ``log_score_consensus``; the rivals on the same runs (:mod:`normlab.calibration.evaluate.rivals`):
        ``brier_flip_direction_rule``, ``log_score_flip_direction_rule``,
        ``brier_flip_logistic``, ``log_score_flip_logistic``, ``brier_consensus_base_rate``,
        ``log_score_consensus_base_rate``; ``coverage_experiment``, ``n_experiment``,
        ``zero_width_experiment`` (share of those intervals with ``low == high``),
        ``coverage_underlying``, ``n_underlying``, ``zero_width_underlying``,
        ``logistic_trained_on`` (``"other LLM"`` or ``"leave one run out"``), ``within_rounds``,
        ``seconds``, ``note`` (why a cell has no score).
    coverage : pandas.DataFrame
        The coverage rows of every scored cell (:attr:`Scores.coverage` with ``source`` and
        ``target``).
    scores : dict
        ``(source, target) -> Scores``.
    settings : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025); Brier (1950).
    """

    table: pd.DataFrame
    coverage: pd.DataFrame
    scores: dict
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """Long format: ``source``, ``target``, ``relation``, ``metric``, ``value``, ``n``."""
        rows = []
        for _, r in self.table.iterrows():
            for m, n in (("brier_flip", "n_flip_runs"), ("log_score_flip", "n_flip_runs"),
                         ("brier_consensus", "n_consensus_runs"), ("log_score_consensus", "n_consensus_runs"),
                         ("coverage_experiment", "n_experiment"), ("coverage_underlying", "n_underlying")):
                if r[n] and np.isfinite(r[m]):
                    rows.append({"source": r["source"], "target": r["target"], "relation": r["relation"],
                                 "metric": m, "value": float(r[m]), "n": int(r[n])})
        return pd.DataFrame(rows, columns=["source", "target", "relation", "metric", "value", "n"])

    def by_relation(self) -> pd.DataFrame:
        """Run-weighted mean scores per relation of source and target (the leave-one-model-out
        row is ``"other LLM"``), normlab's and its rivals' on the same runs (the columns of
        :attr:`table`), and coverage pooled over the intervals of the cells with the share of
        zero-width intervals."""
        t = self.table
        rows = []
        for rel in _RELATIONS:
            g = t[t["relation"] == rel]
            if g.empty:
                continue
            row = {"relation": rel, "cells": int(((g["n_flip_runs"] + g["n_consensus_runs"]) > 0).sum())}
            for kind, n in (("flip", "n_flip_runs"), ("consensus", "n_consensus_runs")):
                w = g[n].to_numpy(float)
                cols = [f"brier_{kind}", f"log_score_{kind}"] + [c for c in _RIVAL_COLS if f"_{kind}_" in c]
                for m in cols:
                    v = g[m].to_numpy(float)
                    ok = (w > 0) & np.isfinite(v)
                    row[m] = float(np.sum(v[ok] * w[ok]) / w[ok].sum()) if ok.any() else np.nan
                row[n] = int(w.sum())
            for kind in ("experiment", "underlying"):
                n = g[f"n_{kind}"].to_numpy(float)
                ok = n > 0
                for m in (f"coverage_{kind}", f"zero_width_{kind}"):
                    c = g[m].to_numpy(float)
                    row[m] = float(np.sum(c[ok] * n[ok]) / n[ok].sum()) if ok.any() else np.nan
                row[f"n_{kind}"] = int(n.sum())
            rows.append(row)
        return pd.DataFrame(rows)

    def forecasts(self) -> pd.DataFrame:
        """Every forecast of every scored cell (:meth:`Scores.forecasts` with ``source``,
        ``target_setting`` and ``relation``)."""
        rel = self.table.set_index(["source", "target"])["relation"]
        parts = []
        for (src, tgt), sc in self.scores.items():
            f = sc.forecasts()
            if len(f):
                parts.append(f.assign(source=src, target_setting=tgt, relation=rel[(src, tgt)]))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    def comparison(self) -> pd.DataFrame:
        """normlab beside its rivals per relation, on the pooled runs of the relation's cells:
        :meth:`Scores.comparison` with a ``relation`` column (all flips, each direction -- the
        ``convention`` is ``"strong"`` for the name every source's fit runs converged to most --
        and the consensus winners)."""
        fc = self.forecasts()
        if fc.empty:
            return pd.DataFrame()
        strong = {(self.scores[k].settings.get("rivals") or {}).get("strong") for k in self.scores}
        strong = next(iter(strong)) if len(strong) == 1 else None
        out = []
        for rel in _RELATIONS:
            g = fc[fc["relation"] == rel]
            if len(g):
                out.append(compare_forecasts(g, strong=strong).assign(relation=rel))
        c = pd.concat(out, ignore_index=True)
        return c[["relation"] + [k for k in c.columns if k != "relation"]]

    def coverage_summary(self) -> pd.DataFrame:
        """normlab's coverage per relation and group of rows (all, each direction, winners), with
        the share of zero-width intervals and the coverage of the other rows
        (:meth:`Scores.coverage_summary`, pooled over the relation's cells), and the flip
        fractions and winner shares inside each forecaster's experiment interval
        (``fraction_<forecaster>``)."""
        rel = self.table.set_index(["source", "target"])["relation"]
        out = []
        for r in _RELATIONS:
            keys = [k for k in self.scores if rel[k] == r]
            if not keys:
                continue
            cs = summarize_coverage(pd.concat([self.scores[k].coverage for k in keys], ignore_index=True))
            rc = pd.concat([self.scores[k].rival_coverage for k in keys], ignore_index=True)
            grp = np.array(["winners" if q == "p_consensus" else f"{str(k).split('_', 1)[1]}-majority"
                            for q, k in zip(rc["quantity"], rc["key"])], dtype=object)
            for fc in ("normlab", "direction_rule", "logistic", "base_rate"):
                col = f"fraction_{fc}"
                vals = {}
                for g in cs["group"].unique():
                    sel = (rc["forecaster"] == fc).to_numpy() & ((grp != "winners") if g == "all" else (grp == g))
                    vals[g] = float(rc.loc[sel, "covered"].astype(bool).mean()) if sel.any() else np.nan
                cs[col] = [vals[g] if i == "experiment" else np.nan for g, i in zip(cs["group"], cs["interval"])]
            cs["n_fraction"] = [int(((rc["forecaster"] == "normlab").to_numpy()
                                     & ((grp != "winners") if g == "all" else (grp == g))).sum())
                                if i == "experiment" else 0 for g, i in zip(cs["group"], cs["interval"])]
            out.append(cs.assign(relation=r))
        c = pd.concat(out, ignore_index=True)
        return c[["relation"] + [k for k in c.columns if k != "relation"]]

    def rival_wins(self) -> list:
        """Plain sentences: every relation, group of runs, score and rival where a rival scores
        better than normlab (:func:`normlab.calibration.evaluate.scores.rival_wins`)."""
        c = self.comparison()
        out = []
        for rel in _RELATIONS:
            g = c[c["relation"] == rel] if len(c) else c
            if len(g):
                out += rival_wins(g.drop(columns="relation"), where=f"{rel}: ")
        return out

    def summary(self) -> dict:
        """JSON-friendly: the per-relation means and the per-cell table."""
        def clean(d):
            return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in d.items()}

        return {"by_relation": [clean(r) for r in self.by_relation().to_dict("records")],
                "comparison": [clean(r) for r in self.comparison().to_dict("records")],
                "coverage": [clean(r) for r in self.coverage_summary().to_dict("records")],
                "rival_wins": self.rival_wins(),
                "cells": [clean(r) for r in self.table.drop(columns=["seconds"]).to_dict("records")],
                "settings": self.settings}

    @plotting
    def plot(self, axes=None):
        """Two heat maps, source fits (rows) by target settings (columns): Brier score of the
        flips and of the consensus winners on held-out runs (blank: nothing held out to score)."""
        import matplotlib.pyplot as plt

        if axes is None:
            ncol = len(self.table["target"].unique())
            _, axes = plt.subplots(1, 2, figsize=(min(16, 3.0 + 1.05 * ncol) * 1.0, 3.6), layout="constrained")
        t = self.table
        targets = list(dict.fromkeys(t["target"]))
        sources = list(dict.fromkeys(t["source"]))
        for ax, (kind, n, ref) in zip(axes, (("flip", "n_flip_runs", 0.25), ("consensus", "n_consensus_runs", 2 / 3))):
            M = np.full((len(sources), len(targets)), np.nan)
            N = np.zeros_like(M, dtype=int)
            flag = np.zeros_like(M, dtype=bool)
            for _, r in t.iterrows():
                i, j = sources.index(r["source"]), targets.index(r["target"])
                if r[n]:
                    M[i, j], N[i, j] = r[f"brier_{kind}"], r[n]
                    flag[i, j] = kind == "consensus" and "published runs stopped" in str(r["note"])
            cols = [j for j in range(len(targets)) if np.isfinite(M[:, j]).any()]
            Ms = M[:, cols]
            im = ax.imshow(Ms, cmap="viridis_r", vmin=0, vmax=ref, aspect="auto")
            ax.grid(False)
            for i in range(Ms.shape[0]):
                for jj, j in enumerate(cols):
                    if np.isfinite(M[i, j]):
                        ax.text(jj, i, f"{M[i, j]:.2f}{'*' if flag[i, j] else ''}\n({N[i, j]})", ha="center",
                                va="center", fontsize=7, color="w" if M[i, j] > 0.55 * ref else "k")
            ax.set_xticks(range(len(cols)), [targets[j] for j in cols], rotation=35, ha="right", fontsize=7)
            ax.set_yticks(range(len(sources)), sources, fontsize=7)
            ax.set_title(f"Brier score, {kind} (runs scored)" + ("; *: other stop rule" if flag.any() else ""),
                         fontsize=9)
            ax.figure.colorbar(im, ax=ax, shrink=0.8, label=f"Brier (uninformed: {ref:.2f})")
        return axes

    @plotting
    def plot_rivals(self, axes=None, metric: str = "brier"):
        """normlab beside its rivals: mean Brier (or log) score per relation, one panel per group
        of runs (all flips, the flips of each direction, the consensus winners); the coin as a
        dashed line. Lower is better."""
        import matplotlib.pyplot as plt

        if metric not in ("brier", "log_score"):
            raise ValueError(f"metric must be 'brier' or 'log_score'; got {metric!r}")
        c = self.comparison()
        if c.empty:
            raise ValueError("nothing was scored: no comparison to plot")
        groups = list(dict.fromkeys(zip(c["target"], c["majority"])))
        if axes is None:
            _, axes = plt.subplots(1, len(groups), figsize=(3.3 * len(groups) + 0.6, 3.5), layout="constrained",
                                   squeeze=False)
            axes = axes[0]
        order = ("normlab", "direction_rule", "logistic", "base_rate")
        for ax, (tgt, maj) in zip(axes, groups):
            g = c[(c["target"] == tgt) & (c["majority"] == maj)]
            rels = [r for r in _RELATIONS if r in set(g["relation"])]
            shown = [f for f in order if f in set(g["forecaster"])]
            w = 0.8 / max(1, len(shown))
            for k, fc in enumerate(shown):
                v = [g.loc[(g["relation"] == r) & (g["forecaster"] == fc), metric] for r in rels]
                v = [float(x.iloc[0]) if len(x) else np.nan for x in v]
                ax.bar(np.arange(len(rels)) + (k - (len(shown) - 1) / 2) * w, v, width=w, color=f"C{order.index(fc)}",
                       label=RIVAL_LABELS[fc])
            coin = g.loc[g["forecaster"] == "coin", metric]
            if len(coin):
                ax.axhline(float(coin.iloc[0]), color="0.4", ls="--", lw=1, label="coin")
            conv = g["convention"].dropna()
            title = ("consensus winners" if tgt == "consensus" else "flips, all directions" if maj == "all"
                     else f"flips of a consensus on {maj}" + (f" ({conv.iloc[0]})" if len(conv) else ""))
            ax.set_title(title, fontsize=9)
            ax.set_xticks(range(len(rels)), rels, rotation=30, ha="right", fontsize=8)
            ax.set_ylabel(f"mean {'Brier' if metric == 'brier' else 'log'} score (lower is better)", fontsize=8)
            ax.legend(frameon=False, fontsize=7)
        return axes

    def __repr__(self) -> str:
        b = self.by_relation()

        def f(v):
            return "-" if not np.isfinite(v) else f"{v:.3f}"

        parts = [f"{r['relation']}: flip {f(r['brier_flip'])} ({r['n_flip_runs']}; direction rule "
                 f"{f(r['brier_flip_direction_rule'])}, logistic {f(r['brier_flip_logistic'])}), consensus "
                 f"{f(r['brier_consensus'])} ({r['n_consensus_runs']}; base rate "
                 f"{f(r['brier_consensus_base_rate'])})" for _, r in b.iterrows()]
        return f"TransferScores(Brier by relation -- {'; '.join(parts)})"

    def _repr_html_(self) -> str:
        import html

        return (f"<p><code>{html.escape(repr(self))}</code></p>"
                + self.by_relation().to_html(index=False, float_format=lambda v: f"{v:.3f}"))

    @classmethod
    def _contract_example(cls) -> "TransferScores":
        """Two cells (a fit scored on its own setting and on another N), each :meth:`Scores._contract_example`,
        literal table (``tests/umbrella/test_contracts.py``)."""
        from .scores import Scores

        sc = Scores._contract_example()
        rows = []
        for tgt, n, rel in (("toy N=8 H=2", 8, "same setting"), ("toy N=16 H=2", 16, "other N")):
            rows.append({"source": "toy N=8 H=2", "source_llm": "toy", "source_n": 8, "source_h": 2, "target": tgt,
                         "target_llm": "toy", "target_n": n, "target_h": 2, "relation": rel, "n_flip_runs": 4,
                         "n_consensus_runs": 2, "brier_flip": 0.2, "log_score_flip": -0.6, "brier_consensus": 0.43,
                         "log_score_consensus": -0.78, **{c: 0.25 for c in _RIVAL_COLS}, "coverage_experiment": 1.0,
                         "n_experiment": 3, "zero_width_experiment": 0.0, "coverage_underlying": 0.0, "n_underlying": 1,
                         "zero_width_underlying": 0.0, "logistic_trained_on": "leave one run out", "within_rounds": 30,
                         "seconds": 1.0, "note": ""})
        table = pd.DataFrame(rows)
        coverage = pd.concat([sc.coverage.assign(source=r["source"], target=r["target"]) for r in rows],
                             ignore_index=True)
        return cls(table=table, coverage=coverage, scores={(r["source"], r["target"]): sc for r in rows})


# ----------------------------------------------------------------------------- entry point
def _short(llm: str) -> str:
    s = str(llm)
    return {"Llama-3-70B-Instruct": "Llama-3", "Llama-3.1-70B-Instruct": "Llama-3.1"}.get(s, s)


def target_settings(log: GameLog, names) -> list[dict]:
    """The settings (LLM, N, H) of a name pool in a log and their experiments.

    Returns
    -------
    list of dict
        ``llm``, ``n_agents``, ``memory``, ``n_baseline`` (runs from empty memories), ``counts``
        (committed counts of runs from a consensus; 0: unperturbed consensus runs),
        ``runs_per_count`` (median per direction and count), ``rounds`` (median complete rounds of
        the committed runs that did not stop in a consensus: the design length), ``stop_streak``
        (median final streak of the baseline runs: their stop rule).
    """
    names = _check_names(names)
    r = log.runs
    target = frozenset(names)
    r = r[np.array(r["names"].map(lambda s: frozenset(str(s).split(",")) == target), dtype=bool)]
    r = r[r["kind"] != "probe"]
    out = []
    for (llm, N, H), g in r.groupby(["model", "n_agents", "memory"], sort=True):
        init = g["initial"].astype(str)
        base = g[init == "empty"]
        cm = g[init.str.startswith("consensus:")]
        streak = base["stop_streak"].dropna() if "stop_streak" in base else pd.Series(dtype=float)
        out.append({"llm": str(llm), "n_agents": int(N), "memory": int(H), "n_baseline": int(len(base)),
                    "counts": sorted(int(c) for c in cm["committed_count"].unique()),
                    "runs_per_count": int(cm.groupby(["initial", "committed_count"]).size().median()) if len(cm) else 0,
                    # the design length of committed runs: runs that did not stop early in a consensus
                    "rounds": design_rounds(cm),
                    "stop_streak": int(streak.median()) if len(streak) else None})
    return out


def transfer_scores(sources: dict, log: GameLog, *, names=("Q", "M"), targets=None, n_draws: int = 100,
                    n_runs_flip: int = 16, within_rounds: int = 30, max_rounds: int = 200,
                    memory_transfer: str = "suffix", progress: bool = False, rng=None) -> TransferScores:
    """Predict every target setting of a log from every source fit and score the held-out runs.

    Parameters
    ----------
    sources : dict
        Label -> :class:`StrategyFit` (e.g. the shipped fits, :func:`normlab.calibration.load_fit`).
        The runs a fit used (:func:`fitted_runs`) are never scored against it.
    log : normlab.schema.GameLog
        Observed runs (e.g. both published AI-norms archives).
    names : sequence of str, optional
        The name pool (runs with these names in any order).
    targets : sequence of (llm, n_agents, memory), optional
        Default: every setting of the pool in the log.
    n_draws : int, optional
        Posterior draws per prediction.
    n_runs_flip : int, optional
        Simulated runs per draw and committed count.
    within_rounds : int, optional
        Longest window of the flip reading (shortened to a target's complete rounds).
    max_rounds : int, optional
        Cap of the simulated convergence runs.
    memory_transfer : {"suffix", "features", "prior"}, optional
        How a fit meets a target with another ``H`` (:func:`tables_at_memory`).
    progress : bool, optional
    rng : optional

    Returns
    -------
    TransferScores

    Raises
    ------
    ValueError, TypeError
        Bad sources, names, targets or settings (before any simulation).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Table S3.
    """
    names, D, nrf, wr_max, mr, avail = _check_transfer(sources, log, names, targets, n_draws, n_runs_flip,
                                                       within_rounds, max_rounds, memory_transfer)
    fitted = {lab: set(fitted_runs(f, log).tolist()) for lab, f in sources.items()}
    pairs = [(lab, t) for lab in sources for t in avail]
    seeds = spawn(rng, len(pairs))
    rows, cov, all_scores = [], [], {}
    it = list(zip(pairs, seeds))
    if progress:
        from normlab._display import tqdm

        it = tqdm(it, desc="transfer predictions")
    for (lab, t), s in it:
        row, sc = _transfer_cell(lab, sources[lab], t, log, names, fitted[lab], s, n_draws=D, n_runs_flip=nrf,
                                 within_rounds=wr_max, max_rounds=mr, memory_transfer=memory_transfer)
        rows.append(row)
        if sc is None:
            continue
        c = sc.coverage.copy()
        c.insert(0, "target", row["target"])
        c.insert(0, "source", lab)
        cov.append(c)
        all_scores[(lab, row["target"])] = sc
    settings = dict(names=list(names), n_draws=D, n_runs_flip=nrf, within_rounds=wr_max, max_rounds=mr,
                    memory_transfer=memory_transfer, sources=list(sources))
    coverage = pd.concat(cov, ignore_index=True) if cov else pd.DataFrame()
    return TransferScores(table=pd.DataFrame(rows), coverage=coverage, scores=all_scores, settings=settings)


def _check_transfer(sources, log, names, targets, n_draws, n_runs_flip, within_rounds, max_rounds, memory_transfer):
    """The validated settings of :func:`transfer_scores` and the target settings it predicts
    (before any simulation)."""
    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    if not isinstance(sources, dict) or not sources or not all(isinstance(f, StrategyFit) for f in sources.values()):
        raise TypeError("sources must be a non-empty dict of label -> StrategyFit")
    names = _check_names(names)
    for lab, f in sources.items():
        if frozenset(f.names) != frozenset(names):
            raise ValueError(f"source {lab!r} is a fit for names {f.names}, not {names}")
    if memory_transfer not in MEMORY_TRANSFERS:
        raise ValueError(f"memory_transfer must be one of {MEMORY_TRANSFERS}; got {memory_transfer!r}")
    D = check_int(n_draws, "n_draws", low=1)
    nrf = check_int(n_runs_flip, "n_runs_flip", low=1)
    wr_max = check_int(within_rounds, "within_rounds", low=3)
    mr = check_int(max_rounds, "max_rounds", low=3)
    avail = target_settings(log, names)
    if targets is not None:
        want = {(str(t[0]), int(t[1]), int(t[2])) for t in targets}
        avail = [t for t in avail if (t["llm"], t["n_agents"], t["memory"]) in want]
        missing = want - {(t["llm"], t["n_agents"], t["memory"]) for t in avail}
        if missing:
            raise ValueError(f"no runs of names {names} at targets {sorted(missing)}")
    if not avail:
        raise ValueError(f"the log holds no runs of names {names}")
    return names, D, nrf, wr_max, mr, avail


def _transfer_cell(lab, fit, t, log, names, fitted, s, *, n_draws, n_runs_flip, within_rounds, max_rounds,
                   memory_transfer):
    """One (source fit, target setting) cell: its row of :attr:`TransferScores.table` and its
    :class:`~normlab.calibration.Scores` (``None`` when nothing is left to score)."""
    t0 = time.perf_counter()
    D, nrf, wr_max, mr = n_draws, n_runs_flip, within_rounds, max_rounds
    src = fit.meta.get("source") or {}
    s_llm = fit.meta.get("llm") or (src.get("models") or [None])[0]
    s_n = (src.get("n_agents") or [None])
    s_n = s_n[0] if len(s_n) == 1 else None
    tl = f"{_short(t['llm'])} N={t['n_agents']} H={t['memory']}"
    if s_llm is not None and str(s_llm) != t["llm"]:
        rel = "other LLM"
    else:
        dn, dh = s_n is not None and s_n != t["n_agents"], fit.memory != t["memory"]
        rel = {(False, False): "same setting", (True, False): "other N", (False, True): "other H",
               (True, True): "other N and H"}[(dn, dh)]
    row = {"source": lab, "source_llm": _short(s_llm) if s_llm else None, "source_n": s_n, "source_h": fit.memory,
           "target": tl, "target_llm": _short(t["llm"]), "target_n": t["n_agents"], "target_h": t["memory"],
           "relation": rel, "n_flip_runs": 0, "n_consensus_runs": 0, "brier_flip": np.nan,
           "log_score_flip": np.nan, "brier_consensus": np.nan, "log_score_consensus": np.nan,
           **{c: np.nan for c in _RIVAL_COLS},
           "coverage_experiment": np.nan, "n_experiment": 0, "zero_width_experiment": np.nan,
           "coverage_underlying": np.nan, "n_underlying": 0, "zero_width_underlying": np.nan, "logistic_trained_on": "",
           "within_rounds": np.nan, "seconds": 0.0, "note": "", "run_effects": "none"}
    # what is left to score once the fit's own runs are set aside
    r = log.runs
    here = r[(r["model"] == t["llm"]) & (r["n_agents"] == t["n_agents"]) & (r["memory"] == t["memory"])
             & np.array(r["names"].map(lambda x: frozenset(str(x).split(",")) == frozenset(names)), dtype=bool)
             & ~r["run"].isin(fitted)]
    if here.empty:
        row["note"] = "every run here was used by the fit"
        return row, None
    init = here["initial"].astype(str)
    has_base = bool((init == "empty").any())
    cm = here[init.str.startswith("consensus:")]
    counts = sorted(int(c) for c in cm["committed_count"].unique()) or [0]
    wr = min(wr_max, t["rounds"]) if (len(cm) and t["rounds"]) else wr_max
    wr = max(wr, 3)
    dirs = [(x, y) for x in names for y in names if x != y]
    if len(cm):
        maj = sorted({str(v).split(":", 1)[1] for v in cm["initial"]})
        dirs = [(x, y) for x, y in dirs if x in maj]
    else:
        dirs = dirs[:1]
    tables, index = tables_at_memory(fit, t["memory"], D, how=memory_transfer, rng=spawn(s, 2)[0], return_index=True)
    n_base = int((init == "empty").sum())
    # the source fit's run effects (they act on logits, so at any H; an "other LLM" cell plays the source LLM's):
    # a joint fit's lined up with its table draws
    eff = RunEffects.from_dict(fit.meta.get("run_effects"))
    if eff.kind == "joint" and index is not None:
        eff = eff.aligned(index)
    pred = predict(tables, n_agents=t["n_agents"], n_draws=D, within_rounds=wr, committed=counts,
                   directions=dirs, consensus=has_base, strength=False, n_runs_flip=nrf,
                   n_runs_consensus=max(10, n_base), max_rounds=mr,
                   design_runs=max(1, t["runs_per_count"]), max_round=published_max_round(t["llm"], t["n_agents"]),
                   run_effects=eff if eff.active and len(names) == 2 else None, rng=spawn(s, 2)[1])
    row["run_effects"] = eff.kind if eff.active and len(names) == 2 else "none"
    try:
        sc = score(pred, log, exclude=sorted(fitted), llm=t["llm"], rng=s)
    except ValueError as exc:
        row["note"] = str(exc)
        return row, None
    sm = sc.summary()
    row.update({k: (np.nan if sm[k] is None else sm[k]) for k in
                ("brier_flip", "log_score_flip", "brier_consensus", "log_score_consensus")})
    for c in _RIVAL_COLS:  # e.g. brier_flip_logistic: the rival "logistic"'s brier_flip
        metric, rival = _split_rival_col(c)
        v = (sm["rivals"].get(rival) or {}).get(metric)
        row[c] = np.nan if v is None else v
    cov = sm["coverage"]
    row.update(n_flip_runs=sm["n_flip_runs"], n_consensus_runs=sm["n_consensus_runs"],
               coverage_experiment=np.nan if cov["experiment"] is None else cov["experiment"],
               n_experiment=cov["n_experiment"],
               zero_width_experiment=np.nan if cov["zero_width_experiment"] is None else cov["zero_width_experiment"],
               coverage_underlying=np.nan if cov["underlying"] is None else cov["underlying"],
               n_underlying=cov["n_underlying"],
               zero_width_underlying=np.nan if cov["zero_width_underlying"] is None else cov["zero_width_underlying"],
               logistic_trained_on=(sm["rivals"].get("logistic") or {}).get("trained_on") or "", within_rounds=wr,
               seconds=round(time.perf_counter() - t0, 2),
               note="; ".join([f"{v} {k}" for k, v in sm["excluded"].items() if k != "used by the fit"]
                              + ([f"published runs stopped after {t['stop_streak']} consecutive successes, the "
                                  f"prediction after 3N = {3 * t['n_agents']}"]
                                 if has_base and t["stop_streak"] and t["stop_streak"] != 3 * t["n_agents"]
                                 else [])))
    return row, sc


# ----------------------------------------------------------------------------- command line
_BY_RELATION = {"relation": "relation", "cells": "cells", "n_flip_runs": "flip_runs", "brier_flip": "normlab",
                "brier_flip_direction_rule": "direction_rule", "brier_flip_logistic": "logistic",
                "n_consensus_runs": "winner_runs", "brier_consensus": "winners_normlab",
                "brier_consensus_base_rate": "winners_base_rate", "coverage_experiment": "coverage",
                "n_experiment": "intervals", "zero_width_experiment": "zero_width"}


def transfer_report(ts: TransferScores) -> str:
    """The tables ``python -m normlab.calibration.evaluate.transfer`` prints (README's): Brier scores by
    relation beside the rivals, log scores, the same per direction with coverage and zero-width
    intervals, and every place a rival scores better than normlab."""
    def fmt(df):
        return df.to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")

    b = ts.by_relation()
    out = ["Brier scores by relation (flips: normlab, direction rule, logistic; winners: normlab, base rate) and "
           "normlab's coverage of the 95% experiment-size intervals with the share of them that are zero-width:"]
    out.append(fmt(b[list(_BY_RELATION)].rename(columns=_BY_RELATION)))
    lg = {"relation": "relation", "log_score_flip": "normlab", "log_score_flip_direction_rule": "direction_rule",
          "log_score_flip_logistic": "logistic", "log_score_consensus": "winners_normlab",
          "log_score_consensus_base_rate": "winners_base_rate"}
    out += ["", "log scores by relation:", fmt(b[list(lg)].rename(columns=lg))]
    c = ts.comparison()
    cs = ts.coverage_summary()
    rows = []
    if len(c):
        fl = c[(c["target"] == "flip") & (c["majority"] != "all")]
        for (rel, maj), g in fl.groupby(["relation", "majority"], sort=False):
            by = g.set_index("forecaster")
            cv = cs[(cs["relation"] == rel) & (cs["group"] == f"{maj}-majority") & (cs["interval"] == "experiment")]
            cv = cv.iloc[0] if len(cv) else None
            rows.append({"relation": rel, "majority": maj, "convention": by["convention"].iloc[0] or "-",
                         "runs": int(by["n"].iloc[0]),
                         **{f"brier_{k}": by["brier"].get(f, np.nan) for k, f in
                            (("normlab", "normlab"), ("direction", "direction_rule"), ("logistic", "logistic"))},
                         **{f"log_{k}": by["log_score"].get(f, np.nan) for k, f in
                            (("normlab", "normlab"), ("direction", "direction_rule"), ("logistic", "logistic"))},
                         "coverage": np.nan if cv is None else cv["covered"],
                         "intervals": 0 if cv is None else int(cv["n"]),
                         "zero_width": np.nan if cv is None else cv["zero_width"],
                         "inside_normlab": np.nan if cv is None else cv["fraction_normlab"],
                         "inside_direction": np.nan if cv is None else cv["fraction_direction_rule"],
                         "inside_logistic": np.nan if cv is None else cv["fraction_logistic"],
                         "fractions": 0 if cv is None else int(cv["n_fraction"])})
    if rows:
        out += ["", "flips by direction (the strong convention: the one every fit's runs converged to), Brier and log "
                "scores; normlab's coverage with its zero-width share; flip fractions inside each forecaster's "
                "experiment interval (a rival's: the binomial of the observed runs at its probability):",
                fmt(pd.DataFrame(rows))]
    wins = ts.rival_wins()
    out += ["", "where a rival scores better than normlab (paired difference rival - normlab +/- s.e. over the same "
            "runs):"]
    out += [f"  {w}" for w in wins] or ["  nowhere"]
    return "\n".join(out)


_SHIPPED = {"Llama-3 N=24 H=3": "llama3_70b_QM_H3", "Llama-3 N=24 H=5": "llama3_70b_QM_H5",
            "Llama-3.1 N=24 H=5": "llama31_70b_QM_H5"}


def main(argv=None) -> int:
    """``python -m normlab.calibration.evaluate.transfer``: the transfer scores of the shipped fits on the
    published Q/M runs (README's table)."""
    import argparse

    ap = argparse.ArgumentParser(description="Transfer scores of the shipped Llama-3 / Llama-3.1 fits on the "
                                             "published AI-norms Q/M runs (fit at one N and H, predict the others).")
    ap.add_argument("--ainorms", default=None, help="folder of the AI-norms archives (default: found like the tests)")
    ap.add_argument("--draws", type=int, default=200, help="posterior draws per prediction (default 200)")
    ap.add_argument("--memory-transfer", default="suffix", choices=MEMORY_TRANSFERS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cells", action="store_true", help="also print every (source, target) cell and the observed "
                                                        "values outside their experiment-size intervals")
    args = ap.parse_args(argv)
    path = args.ainorms or find_ainorms()
    if path is None:
        print("published AI-norms data not found (set NORMLAB_AINORMS or pass --ainorms)")
        return 2
    t0 = time.perf_counter()
    log = load_ainorms(path, kinds=["baseline", "swap", "evolved"], files=["*_Q_M_*", "*_M_Q_*"],
                       on_inconsistency="warn")
    src = {k: load_fit(v) for k, v in _SHIPPED.items()}
    ts = transfer_scores(src, log, n_draws=args.draws, memory_transfer=args.memory_transfer, rng=args.seed)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    print(f"transfer scores of the shipped fits ({args.draws} draws, memory transfer {args.memory_transfer!r}, "
          f"seed {args.seed}); Brier and log scores per run, lower is better, each beside two rivals on the same "
          "runs: the direction rule and the committed-fraction logistic (flips), the fit runs' base rate (winners); "
          "the coin (every outcome equally likely) scores 0.250 / 0.693 on flips, 0.667 / 1.099 on winners")
    print(transfer_report(ts))
    if args.cells:
        c = ts.table[["source", "target", "relation", "n_flip_runs", "brier_flip", "brier_flip_direction_rule",
                      "brier_flip_logistic", "n_consensus_runs", "brier_consensus", "brier_consensus_base_rate",
                      "coverage_experiment", "zero_width_experiment", "coverage_underlying", "note"]]
        print(c.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        cv = ts.coverage
        miss = cv[(cv["interval"] == "experiment") & ~cv["covered"].astype(bool)]
        print("observed values outside the experiment-size 95% interval:")
        print(miss[["source", "target", "quantity", "key", "committed", "observed", "n_obs", "low", "high"]]
              .to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
