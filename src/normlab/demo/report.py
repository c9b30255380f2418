"""The demo report: figures (PNG), a self-contained HTML page and ``summary.json``.

The HTML embeds every figure as base64 PNG and uses plain HTML and CSS (no JavaScript), so it
opens anywhere and can be mailed as one file. ``summary.json`` follows :data:`SUMMARY_SCHEMA`
(checked before it is written). This module is the report's public face; the figures are drawn in
``_report_figures.py``, the numbers and sentences written in ``_report_text.py`` and the page laid
out in ``_report_html.py``.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1A (success
curves), Fig. 2B (collective bias), Fig. 3 (committed minorities), Fig. S8 (strategy table).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from normlab.llm_runs.backend import redact_url

from ._common import cp_interval
from ._report_figures import (_legend_below, _style, fig_calibration, fig_committed,  # noqa: F401 (_legend_below: tests)
                              fig_critical_mass, fig_population, fig_strategy)
from ._report_html import _html, _outside_html, checks_html  # noqa: F401 (_outside_html: tests)
from ._report_text import (_first_listed, _next_runs, _reading, strategy_caption,  # noqa: F401 (the names tests import)
                           strategy_reading_text, strategy_title_line, summary_paragraph, tip_facts, tip_figure_kind,
                           tip_text)


__all__ = ["write_figures", "write_report", "ReportContext", "SUMMARY_SCHEMA", "checks_html", "summary_paragraph", "tip_facts",
           "tip_text"]

_NUM = {"type": ["number", "null"]}
_INTERVAL = {"type": "object", "required": ["estimate", "low", "high"],
             "properties": {"estimate": _NUM, "low": _NUM, "high": _NUM}}
#: JSON schema of ``summary.json`` (draft 2020-12).
SUMMARY_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "normlab demo summary",
    "type": "object",
    "required": ["schema", "normlab_version", "created", "settings", "endpoint", "cost", "estimate", "timing",
                 "strategy_table", "free_generation", "population", "critical_mass", "committed_check", "tip", "checks",
                 "files"],
    "properties": {
        "schema": {"const": "normlab.demo/1"},
        "normlab_version": {"type": "string"},
        "created": {"type": "string"},
        "command": {"type": ["string", "null"]},
        "settings": {"type": "object", "required": ["names", "n_agents", "memory", "runs", "max_rounds", "committed",
                                                    "committed_runs", "mode", "fit", "n_draws", "within_rounds",
                                                    "seed", "sampling"]},
        "endpoint": {"type": "object", "required": ["model", "embedded", "base_url"],
                     "properties": {"model": {"type": "string"}, "embedded": {"type": "boolean"}}},
        "cost": {"type": "object", "required": ["llm_calls", "llm_calls_total", "prompt_tokens", "completion_tokens",
                                                "cost_usd"],
                 "properties": {"llm_calls": {"type": "integer", "minimum": 0},
                                "llm_calls_total": {"type": "integer", "minimum": 0}}},
        "estimate": {"type": "object", "required": ["calls", "prompt_tokens", "seconds", "tokens_per_s"]},
        "timing": {"type": "object", "required": ["wall_s", "cpu_s", "steps"],
                   "properties": {"wall_s": {"type": "number"}, "cpu_s": {"type": "number"},
                                  "steps": {"type": "array", "items": {
                                      "type": "object", "required": ["step", "wall_s", "cpu_s", "llm_calls"]}}}},
        "strategy_table": {"type": "object", "required": ["states", "llm_calls", "p_empty", "covered_mass_mean", "table"]},
        "free_generation": {"type": ["object", "null"]},
        "population": {"type": "object", "required": ["runs", "observed", "predicted", "predicted_from_log"],
                       "properties": {"predicted": {"type": "object", "required": ["consensus", "consensus_rounds",
                                                                                   "rounds_to_95"],
                                                    "properties": {"consensus_rounds": _INTERVAL,
                                                                   "rounds_to_95": _INTERVAL}}}},
        "critical_mass": {"type": "object", "required": ["from_probe", "from_log"]},
        "committed_check": {"type": "array", "items": {
            "type": "object", "required": ["majority", "challenger", "committed", "runs", "flips", "predicted",
                                           "low", "high", "consistent"]}},
        "tip": {"type": ["object", "null"],
                "required": ["majority", "challenger", "why", "critical_mass", "level", "p_within_one", "target",
                             "runs_used", "run_budget", "runs_per_count", "counts", "played", "baseline_runs",
                             "stopped", "text", "figure"],
                "properties": {"critical_mass": _INTERVAL, "runs_used": {"type": "integer", "minimum": 0},
                               "run_budget": {"type": "integer", "minimum": 1},
                               "text": {"type": "array", "items": {"type": "string"}}}},
        "checks": {"type": "array", "items": {"type": "object", "required": ["quantity", "key", "source", "predicted",
                                                                             "low", "high", "observed", "consistent"]}},
        "files": {"type": "object", "required": ["report", "figures", "tables", "llm"]},
    },
}


def _clean(o):
    """JSON-safe: numpy scalars to Python, NaN/inf to None, tuples to lists."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, (np.bool_, bool)):
        return bool(o)
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(o) else None
    if o is pd.NA:
        return None
    if isinstance(o, Path):
        return str(o)
    return o


# ----------------------------------------------------------------------------- the report
@dataclass(frozen=True)
class ReportContext:
    """What :func:`normlab.demo.run_demo` computed, as the report reads it (built once, after the
    checks): the settings and seed, the probe, the predictions from the probed table (``pred``,
    facts ``pfacts``, critical masses ``pcrit``, trajectories ``traj_th``), the LLM populations
    (``pop``, observed facts ``obs``, trajectories ``llm_curve``), the committed-minority rows and
    curves, the calibration from the log (``cal``, ``lfacts``, ``lcrit``), the checks, the tip
    step, the clock, the plan's estimate and measured speed, and the journals' ledger."""

    settings: object  # normlab.demo.DemoSettings
    seed: int
    command: str | None
    version: str
    clock: object
    estimate: dict
    speed: dict | None
    probe: object
    bias: object
    pred: object
    pfacts: dict
    pcrit: dict
    traj_th: pd.DataFrame
    llm_curve: pd.DataFrame
    pop: object
    obs: dict
    cm_rows: list
    cm_curves: list
    cal: object
    lfacts: dict
    lcrit: dict
    checks: pd.DataFrame
    llm_dir: Path
    tip: object = None
    ledger: dict = field(default_factory=dict)

    @property
    def cfg(self) -> dict:
        """The settings as a plain mapping (what the report's text functions read)."""
        return self.settings.to_dict()

    @property
    def names(self) -> tuple:
        return tuple(self.settings.names)

    @property
    def winner(self) -> str:
        """The name the probed table predicts the populations agree on most often."""
        pf = self.pfacts
        return max(self.names, key=lambda nm: pf["consensus"].get(nm, {}).get("estimate", 0))

    @property
    def observed(self) -> dict:
        """The populations' observed facts with ``n_agents`` and ``max_round`` (the longest run, in rounds)."""
        N = self.settings.n_agents
        return dict(self.obs, n_agents=N, max_round=float(np.ceil(self.pop.log.runs["n_interactions"].max() / N)))


def write_figures(out: Path, ctx: ReportContext) -> dict:
    """Tables (``out/tables/*.parquet``) and figures (``out/*.png``) of a demo; returns ``{name: path}``.

    ``ctx`` holds what :func:`normlab.demo.run_demo` computed (settings, probe, predictions, runs,
    calibration, checks)."""
    with _style(), warnings.catch_warnings():  # seaborn's notices about matplotlib colormap methods (not ours to fix)
        warnings.filterwarnings("ignore", category=PendingDeprecationWarning, module="seaborn")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="seaborn")
        return _write_figures(Path(out), ctx)


def _write_figures(out: Path, ctx: ReportContext) -> dict:
    cfg, probe, pred, cal = ctx.cfg, ctx.probe, ctx.pred, ctx.cal
    names, winner, obs = ctx.names, ctx.winner, ctx.observed
    ptab = probe.to_frame()
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    ptab.to_parquet(tables / "strategy_table.parquet", index=False)
    probe.by_order().to_parquet(tables / "strategy_table_by_order.parquet", index=False)
    pd.concat([pred.to_frame().assign(source="probe"), cal.prediction.to_frame().assign(source="log")],
              ignore_index=True).to_parquet(tables / "predictions.parquet", index=False)
    pd.concat([pred.flip_curve().assign(source="probe"), cal.prediction.flip_curve().assign(source="log")],
              ignore_index=True).to_parquet(tables / "flip_curves.parquet", index=False)
    ctx.checks.to_parquet(tables / "checks.parquet", index=False)
    if ctx.cm_rows:
        pd.DataFrame(ctx.cm_rows).to_parquet(tables / "committed_check.parquet", index=False)
    figs = {
        "strategy": fig_strategy(ptab, probe.by_order(), names, cfg["memory"], out / "strategy.png"),
        "population": fig_population(ctx.traj_th, ctx.llm_curve, ctx.pfacts, obs, names, winner, cfg["runs"],
                                     out / "population.png"),
        "critical_mass": fig_critical_mass(pred, cal.prediction, ctx.cm_rows, names, max(cfg["committed_runs"], 1),
                                           out / "critical_mass.png"),
    }
    if ctx.cm_curves:
        figs["committed"] = fig_committed(ctx.cm_curves, cfg["committed_runs"], cfg["within_rounds"],
                                          out / "committed.png")
    figs["calibration"] = fig_calibration(ptab, cal, names, ctx.pfacts, ctx.lfacts, ctx.pcrit, ctx.lcrit,
                                          obs, out / "calibration.png")
    tp = ctx.tip
    if tp is not None:
        import matplotlib.pyplot as plt

        tp.result.runs.to_parquet(tables / "tip_runs.parquet", index=False)
        tp.result.curves.to_parquet(tables / "tip_path.parquet", index=False)
        fig = tp.result.plot(tip_figure_kind(tp.result), path=out / "tip.png")
        plt.close(fig if isinstance(fig, plt.Figure) else fig.figure)  # "path" alone returns its Axes
        figs["tip"] = out / "tip.png"
    return figs


def write_report(out: Path, ctx: ReportContext, figs: dict) -> dict:
    """``summary.json`` (checked against :data:`SUMMARY_SCHEMA`) and ``report.html``; returns the summary."""
    out = Path(out)
    cfg, probe, pop, cal, clock = ctx.cfg, ctx.probe, ctx.pop, ctx.cal, ctx.clock
    bias, ledger, cm_rows, checks = ctx.bias, ctx.ledger, ctx.cm_rows, ctx.checks
    pfacts, lfacts, pcrit, lcrit = ctx.pfacts, ctx.lfacts, ctx.pcrit, ctx.lcrit
    names, obs = ctx.names, ctx.observed
    N, H = cfg["n_agents"], cfg["memory"]
    ptab = probe.to_frame()
    tables = out / "tables"
    ep = cfg["endpoint"]
    model = probe.model
    emp = ptab[ptab["memory_state"] == ""].set_index("name")
    steps = [{k: v for k, v in s.items() if not k.startswith("_")} for s in clock.steps]
    this_calls = int(sum(s.get("llm_calls", 0) for s in steps))
    this_ptok = int(sum(s.get("prompt_tokens", 0) for s in steps))
    this_ctok = int(sum(s.get("completion_tokens", 0) for s in steps))
    fs = cal.fit.summary()
    free = None
    if bias is not None:
        lo, hi = cp_interval(bias.invalid, bias.trials)
        dec = bias.decisions if bias.decisions is not None else pd.DataFrame()
        examples = [t for t in dec.get("raw_text", pd.Series(dtype=object)).dropna().astype(str).tolist()][:6]
        free = {"trials": bias.trials, "invalid": bias.invalid, "invalid_share": bias.invalid / bias.trials,
                "interval": [lo, hi], "predicted_invalid_share": 1 - float(emp["covered_mass"].iloc[0]),  # NaN: sampled
                "counts": dict(zip(names, map(int, bias.counts))), "examples": examples}
    summary = {
        "schema": "normlab.demo/1",
        "normlab_version": ctx.version,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": ctx.command,
        "settings": {"names": list(names), "n_agents": N, "memory": H, "runs": cfg["runs"],
                     "max_rounds": cfg["max_rounds"], "committed": cfg["committed"],
                     "committed_tested": [[r["majority"], r["challenger"], r["committed"]] for r in cm_rows],
                     "committed_runs": cfg["committed_runs"], "sample_check": cfg["sample_check"], "mode": cfg["mode"],
                     "fit": cfg["fit"], "n_draws": cfg["n_draws"], "within_rounds": cfg["within_rounds"], "seed": ctx.seed,
                     "tip_runs": cfg["tip_runs"], "sampling": cfg["sampling"]},
        "endpoint": {"model": str(model), "embedded": bool(ep.embedded),
                     "base_url": None if ep.embedded else redact_url(str(ep.base_url)),
                     "threads": ep.embedded_threads},
        "cost": {"llm_calls": this_calls, "llm_calls_total": ledger["calls"], "prompt_tokens": this_ptok,
                 "completion_tokens": this_ctok, "prompt_tokens_total": ledger["prompt_tokens"],
                 "cached_prompt_tokens_total": ledger["cached_tokens"],
                 "cost_usd": (this_ptok * ep.price_input + this_ctok * ep.price_output) / 1e6,
                 "population_cache_hits": int(pop.log.runs["cache_hits"].sum())},
        "estimate": dict(ctx.estimate, speed=ctx.speed),
        "timing": {**clock.total(), "steps": steps},
        "strategy_table": {"states": int(ptab["memory_state"].nunique()), "llm_calls": int(probe.llm_calls),
                           "mode": probe.mode,
                           "answers": (None if probe.mode == "exact" else
                                       {"valid": int(ptab.drop_duplicates("memory_state")["n"].fillna(0).sum()),
                                        "invalid": int(ptab.drop_duplicates("memory_state")["n_invalid"].sum())}),
                           "p_empty": {nm: float(emp.loc[nm, "p"]) for nm in names},
                           "p_first_listed_empty": _first_listed(probe.by_order()),
                           "covered_mass_mean": float(ptab.drop_duplicates("memory_state")["covered_mass"].mean()),
                           "states_without_name": int(ptab.groupby("memory_state")["p"].apply(lambda v: v.isna().any()).sum()),
                           "prompts": (int(len(probe.by_order()[["memory_state", "order"]].drop_duplicates()))
                                       if probe.mode == "exact" else int(probe.llm_calls)),
                           "reading": _reading(ptab, probe.by_order(), names, H),
                           "table": "tables/strategy_table.parquet"},
        "free_generation": free,
        "population": {"runs": cfg["runs"], "n_agents": N, "memory": H, "mode": cfg["mode"],
                       "observed": {k: v for k, v in obs.items() if k not in ("max_round",)},
                       "predicted": pfacts, "predicted_from_log": lfacts,
                       "log_fit": {"model": cal.fit.kind, "decisions": int(fs.get("decisions") or 0),
                                   "states_observed": fs.get("states_observed"), "states_total": fs.get("states_total")}},
        "critical_mass": {"from_probe": pcrit, "from_log": lcrit,
                          "criteria": {"per_run": f"smallest count where >= 50% of runs flip within {cfg['within_rounds']} "
                                                  f"rounds; 'pooled' over all simulated runs, interval for "
                                                  f"{max(cfg['committed_runs'], 1)}-run experiments",
                                       "published": "the ensemble rule behind Table S3 on simulated 10-run experiments"}},
        "committed_check": cm_rows,
        "tip": tip_facts(ctx.tip, cfg, str(model), bool(ep.embedded), out, ctx.llm_dir),
        "checks": checks.to_dict(orient="records"),
        "files": {"report": "report.html", "figures": [p.name for p in figs.values()],
                  "tables": sorted(p.relative_to(out).as_posix() for p in tables.glob("*.parquet")),
                  "llm": Path(ctx.llm_dir).relative_to(out).as_posix()},
    }
    summary = _clean(summary)
    import jsonschema

    jsonschema.validate(summary, SUMMARY_SCHEMA)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    page = _html(summary, figs, ctx, free)
    (out / "report.html").write_text(page, encoding="utf-8")
    return summary
