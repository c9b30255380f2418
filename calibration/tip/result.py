"""What a ``tip`` search returns: :class:`TipResult` (the critical mass on the tested counts, its credible
set, a fresh experiment's replication interval, what it cost and its path), with its JSON form, tables and plots."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, fmt_interval, html_card, load_result, new_figure, plain, plotting, save_result, short_repr

from ..prediction.api import predict
from ..prediction.experiment import ExperimentDesign

__all__ = ["TipResult"]

def _set_text(S, grid=None) -> str:
    """A credible set as text: ``{8}``, ``{8, 10}``, ``{beyond the tested counts}``."""
    return "{" + ", ".join("beyond the tested counts" if not np.isfinite(c) else str(int(c)) for c in S) + "}"


def _none_if_inf(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x


@dataclass(frozen=True)
class TipResult:
    """An adaptive search for a critical mass: the answer, what it cost, and its path.

    Attributes
    ----------
    direction, majority, challenger : str
    names : tuple of str
    n_agents, memory : int
    estimate, low, high : float
        The published-rule critical mass of the design -- the most probable *tested* count (``inf``:
        beyond the tested counts, i.e. past the last one or not reached) -- and its equal-tailed
        interval at ``settings["level"]`` over the same support: never a count the design did
        not test.
    p_set : float
        Probability of the credible set at the end (:attr:`credible_set`).
    credible_set : tuple of float
        The smallest set of tested counts (``inf``: beyond them) holding at least ``target`` of
        the posterior predictive mass; the search stops once it spans at most ``tolerance`` agents.
    replication : dict
        The critical mass a *fresh* experiment of the same design would report, from the final
        posterior (no observed run plugged in): ``estimate``, ``low``, ``high``,
        ``credible_set``, ``p_set``, ``p_beyond``, ``distribution`` (count -> probability; ``inf``:
        beyond). An independent archive of the same LLM should fall in it; the headline is this
        experiment's critical mass, whose played counts are read from their own runs. Its table
        draws have the shared run effects of the cells they were fitted on integrated out (a
        fresh experiment has cells of its own), with the effects of the convergence runs
        (docs/validation/calibration.md, "tip's fresh experiment").
    runs_used, runs_available : int
        Committed-minority runs played (at least one committed agent... or count 0 runs when the
        search asked for them) and those the source could have played.
    tokens_used : int or None
        Tokens of every run played, baselines included (None: a replay, which has no token counts).
    usd_used : float
    decisions_used : int
        LLM decisions of the uncommitted agents in the committed-minority runs played.
    counts : dict
        Committed count -> runs played there.
    steps : tuple of dict
        One record per step (step 0: before any committed run): the estimate, interval,
        ``credible_set``, ``p_set``, ``tight``, ``p_beyond``, ``p_within_one`` (``P(|CM - estimate| <= 1)``,
        for comparison), ``p_met`` per count, runs and tokens used so far, what was played and
        what comes next (or why the search stopped).
    curves : pandas.DataFrame
        Per step and count: ``p_met`` (the count's experiment meets the rule), ``p_cm`` (the
        critical mass is this count), ``p_at_least``, ``observed`` runs.
    runs : pandas.DataFrame
        One row per run played: ``step``, ``committed``, ``run``, ``interactions``, ``outcome``,
        ``window_share`` (mean challenger share of the window's last three rounds),
        ``flipped_at_end``.
    stopped : str
        Why the search stopped.
    design : dict
        The experiment (:meth:`ExperimentDesign.to_dict`).
    settings, fit_summary : dict

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3.
    """

    direction: str
    majority: str
    challenger: str
    names: tuple
    n_agents: int
    memory: int
    estimate: float
    low: float
    high: float
    p_set: float
    runs_used: int
    runs_available: int
    tokens_used: int | None
    usd_used: float
    decisions_used: int
    counts: dict
    steps: tuple
    curves: pd.DataFrame
    runs: pd.DataFrame
    stopped: str
    design: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    fit_summary: dict = field(default_factory=dict)
    credible_set: tuple = ()
    replication: dict = field(default_factory=dict)

    @property
    def target_reached(self) -> bool:
        """The credible set reached the target within the tolerance (the stop rule)."""
        return bool(self.steps and self.steps[-1].get("tight", self.p_set >= self.settings.get("target", 0.9)))

    @property
    def p_within(self) -> float:
        """``P(|CM - estimate| <= 1)`` at the end, over the tested counts (the stop rule before
        issue 32; read-only, for comparison)."""
        return float(self.steps[-1].get("p_within_one", float("nan"))) if self.steps else float("nan")

    def summary(self) -> dict:
        """The JSON of ``normlab tip --json``: ``direction``, ``critical_mass`` (``estimate``,
        ``low``, ``high``, ``credible_set``, ``p_set``; null: beyond the tested counts),
        ``replication`` (the same for a fresh experiment of the design, with its ``distribution``),
        ``runs_used``, ``runs_available``, ``tokens_used``, ``counts`` (count -> runs) and ``steps``
        (one record per step; the last says why the search stopped)."""
        rep = self.replication or {}
        return plain({
            "direction": self.direction,
            "critical_mass": {"estimate": _none_if_inf(self.estimate), "low": _none_if_inf(self.low),
                              "high": _none_if_inf(self.high), "credible_set": _json_set(self.credible_set),
                              "p_set": round(float(self.p_set), 4)},
            "replication": {"estimate": _none_if_inf(rep.get("estimate")), "low": _none_if_inf(rep.get("low")),
                            "high": _none_if_inf(rep.get("high")), "credible_set": _json_set(rep.get("credible_set", ())),
                            "p_set": rep.get("p_set"),
                            "distribution": {("beyond" if not np.isfinite(k) else str(int(k))): round(float(v), 4)
                                             for k, v in (rep.get("distribution") or {}).items()}},
            "runs_used": int(self.runs_used),
            "runs_available": int(self.runs_available),
            "tokens_used": self.tokens_used,
            "counts": {str(k): int(v) for k, v in sorted(self.counts.items())},
            "steps": [_json_step(s) for s in self.steps],
        })

    def to_frame(self) -> pd.DataFrame:
        """Tidy long: one row per step, count and quantity (``p_met``, ``p_cm``, ``p_at_least``,
        ``observed``)."""
        return self.curves.melt(id_vars=["step", "committed"], var_name="quantity", value_name="value")

    def describe(self) -> str:
        """A readable summary (what ``normlab tip`` prints without ``--json``)."""
        s = self.settings
        share = f" ({self.runs_used / self.runs_available:.0%} of the {self.runs_available} available)" \
            if self.runs_available else ""
        tok = "" if self.tokens_used is None else f", {self.tokens_used:,} tokens"
        lines = [
            f"critical mass to overturn {self.majority} (committed agents playing {self.challenger}), N = "
            f"{self.n_agents}, H = {self.memory}: {fmt(self.estimate)} {fmt_interval(self.low, self.high)} "
            f"({s.get('level', 0.95):.0%} interval over the tested counts); credible set "
            f"{_set_text(self.credible_set)} with P = {self.p_set:.2f} (target {s.get('target', 0.9)}, tolerance "
            f"{s.get('tolerance', 1)} agent(s)); "
            + (f"P(within one agent) = {self.p_within:.2f}" if np.isfinite(self.estimate) else
               f"P(not reached up to {self.n_agents - 1} committed) = {self.p_within:.2f}"),
            f"a fresh experiment of this design would report: {fmt((self.replication or {}).get('estimate'))} "
            f"{fmt_interval((self.replication or {}).get('low'), (self.replication or {}).get('high'))}",
            f"runs used: {self.runs_used} committed-minority runs{share}{tok}; "
            f"counts played: " + (", ".join(f"{c} ({n})" for c, n in sorted(self.counts.items())) or "none"),
            f"started from: {s.get('baseline_runs', 0)} baseline runs" +
            (f" and a prior of {s['prior']}" if s.get("prior") else "") + f"; source: {s.get('source')}",
            f"design: {ExperimentDesign.from_dict(self.design).describe()}",
            f"stopped: {self.stopped} after {len(self.steps) - 1} step(s), {s.get('seconds', 0):.0f} s",
            "path:",
        ]
        for st in self.steps:
            pl = st.get("played")
            what = "start" if not pl else f"+{pl['runs']} at {pl['count']} ({pl['flipped']} flipped)"
            lines.append(f"  {st['step']:>3}  {what:<22} CM {fmt(st['estimate']):>11} "
                         f"{fmt_interval(st['low'], st['high']):<24} "
                         f"P(CM in {_set_text(st.get('credible_set', ()))}) {st.get('p_set', float('nan')):.2f}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return short_repr("TipResult", f"{self.direction}, N={self.n_agents}, H={self.memory}",
                          f"critical mass {fmt(self.estimate)} {fmt_interval(self.low, self.high)}",
                          f"P(CM in {_set_text(self.credible_set)}) {self.p_set:.2f}",
                          f"{self.runs_used} of {self.runs_available} runs", f"{len(self.steps) - 1} steps",
                          self.stopped)

    def _repr_html_(self) -> str:
        rows = [("critical mass", self.estimate, (self.low, self.high)),
                (f"P(CM in {_set_text(self.credible_set)})", self.p_set),
                ("committed runs used", self.runs_used, None, f"of {self.runs_available} available"),
                ("tokens used", self.tokens_used)]
        rows += [(f"runs at {c} committed", n) for c, n in sorted(self.counts.items())]
        return html_card("TipResult", rows, level=self.settings.get("level", 0.95),
                         subtitle=f"{self.challenger} committed against a consensus on {self.majority}, "
                                  f"N = {self.n_agents}, H = {self.memory}",
                         settings={"source": self.settings.get("source"), "fit": self.settings.get("fit_model"),
                                   "strategy": self.settings.get("strategy"), "stopped": self.stopped},
                         note=".plot() draws the path of the search; .steps holds every step; .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "path", *, axes=None):
        """The path of the search.

        Parameters
        ----------
        kind : {"path", "estimate", "both"}, optional
            ``path``: P(the count's experiment meets the published rule) against the committed
            count, one line per step (darker: later), with the runs played as points (their
            mean challenger share over the window's last three rounds; filled: flipped, by their
            end or over the window's last three rounds); ``estimate``: the estimate and its
            interval against the committed runs used;
            ``both``: the two side by side.
        axes : Axes or sequence of Axes, optional

        Returns
        -------
        matplotlib.axes.Axes or matplotlib.figure.Figure

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3B.
        """
        if kind not in ("path", "estimate", "both"):
            raise ValueError(f"kind must be 'path', 'estimate' or 'both'; got {kind!r}")
        import matplotlib as mpl

        panels = ["path", "estimate"] if kind == "both" else [kind]
        fig, axs = new_figure(1, len(panels), figsize=(6.2 * len(panels), 4.2), axes=axes)
        axs = list(np.ravel(axs))
        cmap = mpl.colormaps["viridis"]
        n = max(len(self.steps), 2)
        for ax, what in zip(axs, panels):
            if what == "path":
                for st, g in self.curves.groupby("step"):
                    ax.plot(g["committed"], g["p_met"], color=cmap(0.9 * st / (n - 1)), lw=1.0 + 0.8 * (st == n - 1),
                            alpha=0.85, label=f"step {st}" if st in (0, len(self.steps) - 1) else None)
                if len(self.runs):
                    r = self.runs
                    jit = (np.arange(len(r)) % 5 - 2) * 0.06
                    for flipped, mk in ((True, "o"), (False, "x")):
                        m = (r["outcome"] == "flipped").to_numpy() == flipped
                        if m.any():
                            ax.scatter(r["committed"].to_numpy()[m] + jit[m], r["window_share"].to_numpy()[m],
                                       c=[cmap(0.9 * s / (n - 1)) for s in r["step"].to_numpy()[m]], marker=mk, s=28,
                                       label="runs: flipped" if flipped else "runs: not flipped",
                                       zorder=3)
                if _none_if_inf(self.estimate) is not None:
                    ax.axvline(self.estimate, color="C3", lw=1, ls="--", label=f"estimate {fmt(self.estimate)}")
                ax.set_xlabel("committed agents")
                ax.set_ylabel("P(experiment meets the rule); runs: window share")
                ax.set_ylim(-0.03, 1.03)
                ax.set_title(f"search path, {self.direction} (N = {self.n_agents})", fontsize=10)
                ax.legend(fontsize=7, loc="upper left")
            else:
                used = [s["runs_used"] for s in self.steps]
                est = [np.nan if _none_if_inf(s["estimate"]) is None else s["estimate"] for s in self.steps]
                lo = [np.nan if _none_if_inf(s["low"]) is None else s["low"] for s in self.steps]
                hi = [np.nan if _none_if_inf(s["high"]) is None else s["high"] for s in self.steps]
                xs = np.arange(len(used)) if len(set(used)) < len(used) else np.asarray(used, float)
                err = np.array([np.subtract(est, lo), np.subtract(hi, est)])
                ax.errorbar(xs, est, yerr=np.where(np.isfinite(err), err, 0.0), fmt="o-", color="C0", capsize=3,
                            label=f"estimate, {self.settings.get('level', 0.95):.0%} interval")
                ax.set_xticks(xs, [str(u) for u in used])
                ax2 = ax.twinx()
                ax2.plot(used, [s.get("p_set", s["p_within_one"]) for s in self.steps], "s:", color="C2", ms=3)
                ax2.axhline(self.settings.get("target", 0.9), color="C2", lw=0.8, ls="--")
                ax2.set_ylim(0, 1.02)
                ax2.set_ylabel("P(credible set)", color="C2")
                ax.set_xlabel("committed-minority runs used")
                ax.set_ylabel("critical mass")
                ax.legend(fontsize=7, loc="upper left")
        return axs[0] if len(axs) == 1 and axes is None and kind != "both" else fig

    def save(self, path) -> "Path":
        """Write the result to the folder ``path`` (``result.json`` + Parquet tables); read it
        back with :meth:`load` or ``normlab.load``."""
        meta = {k: getattr(self, k) for k in ("direction", "majority", "challenger", "n_agents", "memory",
                                               "estimate", "low", "high", "p_set", "runs_used", "runs_available",
                                               "tokens_used", "usd_used", "decisions_used", "stopped", "design",
                                               "settings", "fit_summary")}
        meta.update(names=list(self.names), counts={str(k): v for k, v in self.counts.items()},
                    steps=list(self.steps), credible_set=_json_set(self.credible_set),
                    replication={**(self.replication or {}),
                                 "credible_set": _json_set((self.replication or {}).get("credible_set", ())),
                                 "distribution": [[_none_if_inf(k), v] for k, v in
                                                  ((self.replication or {}).get("distribution") or {}).items()]})
        return save_result(path, type(self), plain(meta), tables={"curves": self.curves, "runs": self.runs})

    @classmethod
    def load(cls, path) -> "TipResult":
        m, t = load_result(path, cls)
        return cls(direction=m["direction"], majority=m["majority"], challenger=m["challenger"],
                   names=tuple(m["names"]), n_agents=m["n_agents"], memory=m["memory"], estimate=m["estimate"],
                   low=m["low"], high=m["high"], p_set=m.get("p_set", m.get("p_within")), runs_used=m["runs_used"],
                   runs_available=m["runs_available"], tokens_used=m["tokens_used"], usd_used=m["usd_used"],
                   decisions_used=m["decisions_used"], counts={int(k): v for k, v in m["counts"].items()},
                   steps=tuple(m["steps"]), curves=t["curves"], runs=t["runs"], stopped=m["stopped"],
                   design=m["design"], settings=m["settings"], fit_summary=m["fit_summary"],
                   credible_set=_set_back(m.get("credible_set", ())), replication=_replication_back(m.get("replication")))


    @classmethod
    def _contract_example(cls) -> "TipResult":
        """A two-step search on six agents (four committed runs at counts 2 and 3) on the design of
        :meth:`ExperimentDesign._contract_example`, literal numbers (``tests/umbrella/test_contracts.py``)."""
        design = ExperimentDesign._contract_example()
        steps = ({"step": 0, "estimate": 3.0, "low": 1.0, "high": 5.0, "p_within_one": 0.5, "p_set": 0.5, "credible_set": (2.0, 3.0, 4.0), "p_met": {1: 0.1, 2: 0.4, 3: 0.7},
                  "runs_used": 0, "tokens_used": 0, "played": None, "next": "play 2 runs at 2"},
                 {"step": 1, "estimate": 3.0, "low": 2.0, "high": 4.0, "p_within_one": 0.8, "p_set": 0.8, "credible_set": (2.0, 3.0), "p_met": {1: 0.05, 2: 0.3, 3: 0.8},
                  "runs_used": 2, "tokens_used": 900, "played": {"count": 2, "runs": 2, "flipped": 0}, "next": "play 2 runs at 3"},
                 {"step": 2, "estimate": 3.0, "low": 2.0, "high": 3.0, "p_within_one": 0.93, "p_set": 0.93, "credible_set": (3.0,), "p_met": {1: 0.02, 2: 0.2, 3: 0.9},
                  "runs_used": 4, "tokens_used": 1800, "played": {"count": 3, "runs": 2, "flipped": 2}, "next": None})
        curves = pd.DataFrame([(s["step"], c, p, p / 2, p, k) for s in steps for k, (c, p) in enumerate(s["p_met"].items())],
                              columns=["step", "committed", "p_met", "p_cm", "p_at_least", "observed"])
        runs = pd.DataFrame([(1, 2, 0, 180, "majority", 0.2, False), (1, 2, 1, 180, "majority", 0.3, False),
                             (2, 3, 0, 120, "flipped", 0.97, True), (2, 3, 1, 140, "flipped", 0.95, True)],
                            columns=["step", "committed", "run", "interactions", "outcome", "window_share", "flipped_at_end"])
        return cls(direction="overturn_A", majority="A", challenger="B", names=("A", "B"), n_agents=6, memory=1,
                   estimate=3.0, low=2.0, high=3.0, p_set=0.93, credible_set=(3.0,), runs_used=4, runs_available=9, tokens_used=1800,
                   usd_used=0.0, decisions_used=600, counts={2: 2, 3: 2}, steps=steps, curves=curves, runs=runs,
                   stopped="target reached: P(CM in {3}) = 0.930 >= 0.9", design=design.to_dict(),
                   settings={"level": 0.95, "target": 0.9, "source": "toy", "baseline_runs": 10, "seconds": 1.0})

def _json_set(S) -> list:
    """A credible set for JSON: counts as ints, beyond the tested counts as null."""
    return [None if x is None or not np.isfinite(x) else int(x) for x in (S or ())]


def _set_back(S) -> tuple:
    return tuple(math.inf if x is None else float(x) for x in (S or ()))


def _replication_back(r) -> dict:
    if not r:
        return {}
    out = dict(r)
    out["credible_set"] = _set_back(r.get("credible_set", ()))
    out["distribution"] = {(math.inf if k is None else float(k)): float(v) for k, v in r.get("distribution") or []}
    for k in ("estimate", "low", "high"):
        if out.get(k) is None:
            out[k] = math.inf
    return out


def _json_step(s: dict) -> dict:
    out = dict(s)
    for k in ("estimate", "low", "high"):
        out[k] = _none_if_inf(out.get(k))
    out["p_met"] = {str(k): round(float(v), 4) for k, v in (out.get("p_met") or {}).items()}
    out["p_within_one"] = round(float(out["p_within_one"]), 4)
    if "credible_set" in out:
        out["credible_set"] = _json_set(out["credible_set"])
    if out.get("p_set") is not None:
        out["p_set"] = round(float(out["p_set"]), 4)
    return out


# The type tag of saved results (normlab.load) and pickles name TipResult by its path before the regroup into
# sub-packages (issue 30), which still imports it: folders saved before and after load alike.
TipResult.__module__ = "normlab.calibration.tip"
