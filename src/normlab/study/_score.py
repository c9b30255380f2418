"""Stage (c) and the comparison of (d): every registered prediction against what the sample-mode runs
did (and their exact twins), normlab's scores beside its rivals', the coverage of its intervals,
the adequacy check that explains the misses, and the tip search against the full grid.

Everything is read from disk (the registration, verified first; the run directories; the saved
prediction), so the stage gives the same numbers whenever it runs.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
from scipy.stats import binom

from normlab.calibration import (StrategyFit, check_adequacy, empirical_critical_mass, llm_trajectories,
                                 probe_check, run_flips, score)
from normlab.calibration.evaluate.scores import rival_wins
from normlab.calibration.prediction import Prediction
from normlab.calibration.prediction.from_probes import probe_fit
from normlab.schema import GameLog
from normlab.theory import clopper_pearson

from ._play import StudyRun, committed_tests, probe_dirs, read_logs, run_dirs
from ._register import PREDICTION_DIR

__all__ = ["score_stage", "observed_facts", "compare_rows", "is_inside", "why_missed", "tip_against_grid"]

#: Quantities whose ``None`` (JSON null) bound or observation means "not reached" (+inf).
NOT_REACHED = ("cm_per_run", "cm_published", "rounds_to_95")


def _cp(k: int, n: int) -> tuple[float, float]:
    lo, hi = clopper_pearson([k], [n])
    return float(lo[0]), float(hi[0])


def _f(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


# ----------------------------------------------------------------------------- observed values
def observed_facts(pop, com, st, tests) -> dict:
    """What the runs of one mode did, by prediction id: ``{"value", "low", "high", "n", "note"}``
    (``value`` None for a critical mass or round not reached)."""
    N, w, P = st.n_agents, st.window, st.populations
    out = {}
    r = pop.runs
    win = [str(c) if (s == "streak" and isinstance(c, str)) else "none" for c, s in zip(r["consensus"], r["stop_reason"])]
    n = len(win)
    for nm in list(st.names) + ["none"]:
        k = win.count(nm)
        lo, hi = _cp(k, n)
        out[f"p_consensus:{nm}"] = {"value": k / n, "low": lo, "high": hi, "n": n, "k": k}
    conv = r[r["stop_reason"] == "streak"]
    out["consensus_rounds"] = {"value": float((conv["n_interactions"] / N).mean()) if len(conv) else None,
                               "n": int(len(conv)), "note": "" if len(conv) else "no population converged"}
    tr = llm_trajectories(pop, n_rounds=st.max_rounds, n_boot=0)
    s = tr[tr["quantity"] == "success_rate"].sort_values("round")
    hit = np.flatnonzero(s["mean"].to_numpy() >= 0.95 - 1e-9)
    out["rounds_to_95"] = {"value": float(s["round"].to_numpy()[hit[0]]) if hit.size else None, "n": n}
    rf = run_flips(com, within_rounds=w)
    for x, y, c in tests:
        g = rf[(rf["majority"] == x) & (rf["committed"] == c)]
        k, m = int(g["flipped"].sum()), int(len(g))
        lo, hi = _cp(k, m) if m else (None, None)
        out[f"p_flip:{x}:{c}"] = {"value": k / m if m else None, "low": lo, "high": hi, "n": m, "k": k,
                                  "censored": int(g["censored"].sum())}
    for x in sorted({t[0] for t in tests}):
        counts = sorted(c for xx, _, c in tests if xx == x)
        p = {c: out[f"p_flip:{x}:{c}"]["value"] for c in counts}
        reached = [c for c in counts if p[c] is not None and p[c] >= 0.5]
        note = ""
        if reached and reached[0] == counts[0] and counts[0] > 1:
            note = f"the lowest count tested ({counts[0]}) already flips: the per-run critical mass may lie lower"
        out[f"cm_per_run:{x}"] = {"value": float(reached[0]) if reached else None, "n": len(counts), "note": note}
        sub = com.runs[com.runs["initial"].astype(str) == f"consensus:{x}"]
        lg = GameLog(com.decisions[com.decisions["run"].isin(sub["run"])], sub)
        try:
            e = empirical_critical_mass(lg, within_rounds=w, max_round=w, n_boot=0)
            est = next(iter(e.summary()["directions"].values()))["published"]
        except (ValueError, StopIteration):
            est = float("nan")
        val = None if est is None or not math.isfinite(est) else float(est)
        out[f"cm_published:{x}"] = {"value": val, "n": len(counts),
                                    "note": "" if val is not None else f"no tested count met the rule (up to {counts[-1]})"}
    return out


def is_inside(pid: str, value, low, high):
    """Is the observed ``value`` within ``[low, high]``? ``None`` bounds and values of the "not reached"
    quantities are +inf; an undefined value (e.g. no population converged) cannot be checked (None)."""
    kind = pid.split(":", 1)[0]
    inf = kind in NOT_REACHED
    if value is None and not inf:
        return None
    v = math.inf if value is None else float(value)
    lo = (math.inf if inf else None) if low is None else float(low)
    hi = (math.inf if inf else None) if high is None else float(high)
    if lo is None or hi is None:
        return None
    return bool(lo - 1e-9 <= v <= hi + 1e-9)


def compare_rows(reg: dict, obs_s: dict, obs_e: dict) -> pd.DataFrame:
    """One row per registered prediction: predicted (estimate, interval), what the sample runs did
    (with a Clopper-Pearson interval where it is a count), inside or not, and the exact twin."""
    rows = []
    for p in reg["predictions"]:
        pid = p["id"]
        s, e = obs_s.get(pid, {}), obs_e.get(pid, {})
        rows.append({"id": pid, "quantity": p["quantity"], "key": p["key"], "predicted": p["estimate"],
                     "low": p["low"], "high": p["high"], "observed": s.get("value"), "observed_low": s.get("low"),
                     "observed_high": s.get("high"), "n": s.get("n"),
                     "inside": is_inside(pid, s.get("value"), p["low"], p["high"]),
                     "exact_observed": e.get("value"), "exact_inside": is_inside(pid, e.get("value"), p["low"], p["high"]),
                     "note": s.get("note", ""), "interval": p.get("interval", "")})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the adequacy check
def probe_strategy_fit(fit, model: str) -> StrategyFit:
    """The probed table as a fit :func:`~normlab.calibration.check_adequacy` can play: its order-averaged
    mean table as Dirichlet counts of a million decisions per state (draws equal to it within 1e-3)."""
    M = np.asarray(fit.mean_table().table, float)
    return StrategyFit("empirical", fit.names, fit.memory, M * 1e6, prior=1e-3,
                       meta={"llm": model, "fit_on": "exact probe", "source": "the probed table (exact mode)"})


def _adequacy(sf, com, st, seed):
    try:
        a = check_adequacy(sf, com, n_agents=st.n_agents, window=st.window, n_draws=min(st.n_draws, 200),
                           run_effects=None, rng=seed)
    except ValueError as exc:
        return None, str(exc)
    return a, None


# ----------------------------------------------------------------------------- why a prediction missed
def why_missed(row: dict, adequacy_failures: pd.DataFrame, divergences: pd.DataFrame, invalid_share: float | None,
               n_rows: int, n_outside: int) -> str:
    """The likely reason an observed value fell outside its registered interval, in words."""
    bits = []
    pid = row["id"]
    if row["exact_inside"] is True:
        bits.append("its exact twin (the same runs played from the probed table) is inside, so the theory and the "
                    "runner agree: the model's sampled answers behave differently from its exact next-token "
                    "probabilities")
    elif row["exact_inside"] is False:
        bits.append("its exact twin misses too, so the prediction itself is off for this design (the theory's reading "
                    "of the runs, the run length or the stop rule), not only the model's sampling")
    if pid.startswith(("p_flip", "cm_")):
        x = pid.split(":")[1]
        f = adequacy_failures[adequacy_failures["direction"] == f"overturn_{x}"] if len(adequacy_failures) else []
        if len(f):
            worst = f.sort_values("p_value").iloc[0]
            bits.append(f"the adequacy check finds the probed table wrong against {x}: at {int(worst['committed'])} "
                        f"committed the '{worst['statistic']}' statistic is {worst['observed']:.2f} in the LLM runs vs "
                        f"{worst['sim_low']:.2f}-{worst['sim_high']:.2f} simulated (p = {worst['p_value']:.3f})")
    if len(divergences):
        d = divergences[divergences["aspect"].isin(["name chosen", "invalid answers"])]
        flagged = d[(d["observed"] < d["low"]) | (d["observed"] > d["high"])] if {"low", "high"} <= set(d) else d.iloc[0:0]
        for _, r in flagged.head(2).iterrows():
            bits.append(f"{r['aspect']}: sampled {r['measure']} {r['observed']:.3f} vs the probe's {r['predicted']:.3f} "
                        f"[{r['low']:.3f}, {r['high']:.3f}]")
    if invalid_share:
        bits.append(f"{invalid_share:.1%} of the sampled decisions stayed invalid after the re-asks (failed "
                    "interactions the exact table does not have)")
    p_chance = float(binom.sf(n_outside - 1, n_rows, 0.05)) if n_rows else 1.0
    bits.append(f"chance alone: {n_outside} of {n_rows} outside their 95% interval has probability {p_chance:.2f} if the "
                f"{n_rows} were independent (they are not: the consensus rows share one set of populations, a critical "
                "mass rests on the flips' runs; misses that come together make the chance larger)")
    return "; ".join(bits)


# ----------------------------------------------------------------------------- tip vs the grid
def tip_against_grid(tip_info: dict, reg: dict, obs_s: dict, st) -> dict | None:
    """The tip search's answer against the full grid played once in the same direction."""
    if not tip_info or tip_info.get("skipped"):
        return None
    x = reg["design"]["tip"]["majority"]
    grid = obs_s.get(f"cm_published:{x}", {}).get("value")
    cm = tip_info["critical_mass"]
    inside = is_inside("cm_published", grid, cm.get("low"), cm.get("high"))
    grid_runs = st.runs_per_count * (st.n_agents - 1)
    pred = next((p for p in reg["predictions"] if p["id"] == f"cm_published:{x}"), None)
    return {"majority": x, "grid_critical_mass": grid, "grid_runs": grid_runs, "tip": cm,
            "tip_runs": tip_info["runs_used"], "tip_counts": tip_info["counts"], "stopped": tip_info["stopped"],
            "grid_inside_tip_interval": inside,
            "tip_equals_grid": (cm.get("estimate") == grid) if grid is not None else (cm.get("estimate") is None),
            "registered": pred}


# ----------------------------------------------------------------------------- the stage
def score_stage(run: StudyRun, reg: dict, tip_info: dict) -> dict:
    """Every comparison, score and check; tables under ``OUT/tables/``; returns the summary."""
    st = run.st
    tests = committed_tests(reg)
    pop_s, com_s = read_logs(run.llm, "sample", tests)
    pop_e, com_e = read_logs(run.llm, "exact", tests)
    obs_s, obs_e = observed_facts(pop_s, com_s, st, tests), observed_facts(pop_e, com_e, st, tests)
    rows = compare_rows(reg, obs_s, obs_e)
    pred = Prediction.load(run.out / PREDICTION_DIR)
    log_s = GameLog.concat([pop_s, com_s])
    seeds = run.seed("score").spawn(4)
    scores = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, excl in (("all_runs", None), ("committed_beside_direction_rule", list(range(len(pop_s.runs))))):
            try:
                sc = score(pred, log_s, exclude=excl, rng=seeds[0])
            except ValueError as exc:
                scores[name] = {"error": str(exc)}
                continue
            scores[name] = {"summary": _jsonable(sc.summary()), "comparison": sc.comparison(),
                            "coverage": sc.coverage_summary(), "rival_coverage": sc.rival_coverage,
                            "rival_wins": rival_wins(sc.comparison()), "coverage_rows": sc.coverage}
    # the adequacy check: the probed table against the sample runs (and, as a control, the exact twins)
    fit = probe_fit(probe_dirs(st, run.llm)[-1])
    sf = probe_strategy_fit(fit, reg["model"].get("alias") or reg["model"].get("model") or "the model")
    ad_s, err_s = _adequacy(sf, com_s, st, seeds[1])
    ad_e, err_e = _adequacy(sf, com_e, st, seeds[2])
    fails = ad_s.failures() if ad_s is not None else pd.DataFrame(columns=["direction", "committed", "statistic"])
    try:
        pc = probe_check(probe_dirs(st, run.llm)[-1], populations=[run_dirs(run.llm, "sample", [])["populations"],
                                                                   run_dirs(run.llm, "exact", [])["populations"]],
                         n_draws=min(st.n_draws, 200), rng=seeds[3])
    except ValueError as exc:
        pc, pc_err = None, str(exc)
    else:
        pc_err = None
    div = pc.divergences if pc is not None else pd.DataFrame()
    u = pop_s.decisions[~pop_s.decisions["committed"]]
    invalid = float((~u["valid"]).mean()) if len(u) else None
    n_rows = int(rows["inside"].notna().sum())
    n_out = int((rows["inside"] == False).sum())  # noqa: E712
    rows["why"] = [why_missed(r, fails, div, invalid, n_rows, n_out) if r["inside"] is False else ""
                   for r in rows.to_dict("records")]
    tg = tip_against_grid(tip_info, reg, obs_s, st)
    # tables
    tables = run.out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    rows.to_parquet(tables / "predicted_vs_observed.parquet", index=False)
    for name, s in scores.items():
        if "comparison" in s:
            s["comparison"].to_parquet(tables / f"scores_{name}.parquet", index=False)
            s["coverage_rows"].to_parquet(tables / f"coverage_{name}.parquet", index=False)
    if ad_s is not None:
        ad_s.checks.to_parquet(tables / "adequacy_sample.parquet", index=False)
        ad_s.save(run.stages / "adequacy_sample")
    if ad_e is not None:
        ad_e.checks.to_parquet(tables / "adequacy_exact.parquet", index=False)
    if pc is not None:
        pc.states.to_parquet(tables / "probe_check_states.parquet", index=False)
        pc.population.to_parquet(tables / "probe_check_populations.parquet", index=False)
        div.to_parquet(tables / "probe_check_divergences.parquet", index=False)
    out = {
        "rows": _jsonable(rows.to_dict("records")),
        "inside": int((rows["inside"] == True).sum()), "outside": n_out, "checked": n_rows,  # noqa: E712
        "exact_inside": int((rows["exact_inside"] == True).sum()),  # noqa: E712
        "exact_checked": int(rows["exact_inside"].notna().sum()),
        "p_chance_outside": float(binom.sf(n_out - 1, n_rows, 0.05)) if n_rows else None,
        "scores": {k: ({kk: _jsonable(vv.to_dict("records")) if isinstance(vv, pd.DataFrame) else _jsonable(vv)
                        for kk, vv in v.items() if kk != "coverage_rows"}) for k, v in scores.items()},
        "adequacy": {"sample": _jsonable(ad_s.summary()["overall"]) if ad_s is not None else None,
                     "sample_failures": _jsonable(fails.to_dict("records")),
                     "exact_failures": _jsonable(ad_e.failures().to_dict("records")) if ad_e is not None else None,
                     "error": err_s or err_e},
        "probe_check": {"divergences": _jsonable(div.to_dict("records")),
                        "populations": _jsonable(pc.population.to_dict("records")) if pc is not None else None,
                        "invalid_reasons": _jsonable(pc.invalid_reasons().to_dict("records")) if pc is not None else None,
                        "error": pc_err},
        "invalid_share_sample": invalid,
        "tip_vs_grid": _jsonable(tg),
        "observed": {"sample": _jsonable(obs_s), "exact": _jsonable(obs_e)},
    }
    run.echo(f"  scored: {out['inside']} of {n_rows} predictions inside their registered interval "
             f"({out['exact_inside']} of {out['exact_checked']} for the exact twins)")
    return out


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, pd.DataFrame):
        return _jsonable(o.to_dict("records"))
    if isinstance(o, (np.bool_, bool)):
        return bool(o)
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return float(o) if math.isfinite(o) else None
    if o is pd.NA or o is None:
        return None
    if isinstance(o, (str, int)):
        return o
    try:
        if pd.isna(o):
            return None
    except (TypeError, ValueError):
        pass
    return str(o)
