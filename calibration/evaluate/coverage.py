"""Interval coverage of a prediction against observed runs: the rows of the observed runs matching
a prediction (consensus winners, flips per committed count, the published rule's reading), the
underlying and experiment-size intervals of each quantity and whether the observation falls inside,
and the coverage summaries (with the share of zero-width intervals). See
:mod:`normlab.calibration.evaluate.scores` ("Interval coverage") for what the two intervals mean.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 2, Fig. 3, Table
S3, Methods "Committed Minorities".
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from normlab._rng import as_generator
from normlab.llm_runs.published.ainorms import first_round_reaching, mean_success_by_round
from normlab.schema import GameLog

from .observed_critical_mass import empirical_critical_mass, run_flips
from .rivals import from_empty
from .scoring_rules import (NONE, _covers_at_resolution, _q, _underlying, beta_summary, brier_binary,
                            brier_categorical, denoised_probabilities, experiment_interval, kt_probability,
                            log_score_binary, log_score_categorical)

__all__ = ["summarize_coverage"]


# ----------------------------------------------------------------------------- coverage summaries
def _groups(fc: pd.DataFrame):
    """(target, majority, rows) of the comparison: all flips, each direction, the winners."""
    fl = fc[fc["target"] == "flip"]
    if len(fl):
        yield "flip", "all", fl
        for x in sorted(fl["majority"].unique()):
            yield "flip", str(x), fl[fl["majority"] == x]
    cr = fc[fc["target"] == "consensus"]
    if len(cr):
        yield "consensus", "all", cr


def _row_group(quantity: str, key: str) -> str:
    if quantity in ("p_consensus", "rounds_to_95"):
        return "winners"
    return f"{str(key).split('_', 1)[1]}-majority" if str(key).startswith("overturn_") else "all"


def _coverage_groups(cv: pd.DataFrame):
    if cv.empty:
        return
    grp = np.array([_row_group(q, k) for q, k in zip(cv["quantity"], cv["key"])], dtype=object)
    yield "all", cv
    for g in sorted(set(grp) - {"winners", "all"}):
        yield g, cv[grp == g]
    if (grp == "winners").any():
        yield "winners", cv[grp == "winners"]


def _coverage_block(cs: pd.DataFrame, group: str) -> dict:
    """``experiment``, ``n_experiment``, ``zero_width_experiment``, ``experiment_other``
    (coverage of the rows that are not zero-width) and the same for ``underlying``."""
    out = {}
    for kind in ("experiment", "underlying"):
        g = cs[(cs["group"] == group) & (cs["interval"] == kind)]
        if g.empty:
            out.update({kind: None, f"n_{kind}": 0, f"zero_width_{kind}": None, f"{kind}_other": None})
            continue
        r = g.iloc[0]
        out.update({kind: float(r["covered"]), f"n_{kind}": int(r["n"]), f"zero_width_{kind}": float(r["zero_width"]),
                    f"{kind}_other": None if not np.isfinite(r["covered_other"]) else float(r["covered_other"])})
    return out


def _fraction_coverage_summary(rc: pd.DataFrame) -> dict:
    """(target, majority) -> {forecaster: share inside, ..., "n": rows, "zero_width": {forecaster: share}}."""
    out = {}
    if rc is None or rc.empty:
        return out
    tgt = np.where(rc["quantity"] == "p_consensus", "consensus", "flip")
    maj = np.array([str(k).split("_", 1)[1] if str(k).startswith("overturn_") else "all" for k in rc["key"]],
                   dtype=object)
    for t in ("flip", "consensus"):
        for m in (["all"] + (sorted(set(maj[tgt == "flip"])) if t == "flip" else [])):
            sel = (tgt == t) & ((maj == m) if m != "all" else True)
            g = rc[sel]
            if g.empty:
                continue
            d = {"n": int((g["forecaster"] == "normlab").sum()), "zero_width": {}}
            for name, h in g.groupby("forecaster", sort=False):
                d[str(name)] = float(h["covered"].astype(bool).mean())
                d["zero_width"][str(name)] = float(h["zero_width"].astype(bool).mean())
            out[(t, m)] = d
    return out


def summarize_coverage(coverage: pd.DataFrame) -> pd.DataFrame:
    """Coverage per group of rows and interval kind with the share of zero-width rows (the
    columns of :meth:`Scores.coverage_summary`; works on the rows of several scores together)."""
    rows = []
    for grp, g in _coverage_groups(coverage):
        for kind in ("experiment", "underlying"):
            h = g[g["interval"] == kind]
            if h.empty:
                continue
            zw = (h["low"] == h["high"]).to_numpy(bool)
            cov = h["covered"].to_numpy(bool)
            rows.append({"group": grp, "interval": kind, "n": int(len(h)), "covered": float(cov.mean()),
                         "zero_width": float(zw.mean()),
                         "covered_other": float(cov[~zw].mean()) if (~zw).any() else np.nan})
    return pd.DataFrame(rows, columns=["group", "interval", "n", "covered", "zero_width", "covered_other"])


# ----------------------------------------------------------------------------- observed runs
def _matching(log: GameLog, prediction, llm, exclude):
    runs = log.runs
    target = frozenset(prediction.names)
    mask = np.array(runs["names"].map(lambda s: frozenset(str(s).split(",")) == target), dtype=bool)
    mask &= (runs["memory"] == prediction.memory).to_numpy() & (runs["n_agents"] == prediction.n_agents).to_numpy()
    mask &= (runs["kind"] != "probe").to_numpy()
    if llm is not None:
        models = [llm] if isinstance(llm, str) else list(llm)
        mask &= runs["model"].isin(models).to_numpy()
    sel = runs[mask]
    ex = set(int(r) for r in (exclude if exclude is not None else []))
    used = sel["run"].isin(ex).to_numpy()
    excluded = pd.DataFrame({"run": sel.loc[used, "run"].to_numpy(), "reason": "used by the fit"})
    keep = sel[~used]
    return GameLog(log.decisions[log.decisions["run"].isin(keep["run"])], keep), excluded


def _consensus_rows(sub: GameLog, prediction):
    runs = sub.runs
    cons = runs[from_empty(runs).to_numpy()]
    if cons.empty or prediction.consensus.empty:
        return pd.DataFrame(), cons
    names = list(prediction.names)
    cats = names + [NONE]
    K = len(cats)
    c = prediction.consensus
    tot = c.groupby("name")["runs"].sum()
    n = int(c.drop_duplicates("draw")["n_runs"].sum())
    p = np.array([kt_probability(tot.get(nm, 0), n, K) for nm in cats])
    rows = []
    for _, r in cons.iterrows():
        w = r["consensus"]
        obs = NONE if (w is None or (isinstance(w, float) and np.isnan(w)) or str(w) not in names) else str(w)
        j = cats.index(obs)
        rows.append({"run": int(r["run"]), "target": "consensus", "majority": "", "challenger": "",
                     "committed": np.nan, "observed": obs, "p_observed": float(p[j]), "p_event": np.nan,
                     "brier": brier_categorical(p, j), "log_score": log_score_categorical(p, j)})
    return pd.DataFrame(rows), cons


def _flip_rows(sub: GameLog, prediction):
    runs = sub.runs
    if not runs["initial"].astype(str).str.startswith("consensus:").any():
        return pd.DataFrame(), pd.DataFrame(columns=["run", "reason"]), pd.DataFrame()
    rf = run_flips(sub, within_rounds=prediction.within_rounds)
    f = prediction.flips
    g = f.groupby(["majority", "challenger", "committed"])[["n_flips", "n_runs"]].sum()
    dirs = set(zip(f["majority"], f["challenger"]))
    rows, excluded = [], []
    for _, r in rf.iterrows():
        key = (r["majority"], r["challenger"], int(r["committed"]))
        if (r["majority"], r["challenger"]) not in dirs:
            excluded.append((int(r["run"]), "direction not predicted"))
            continue
        if key not in g.index:
            excluded.append((int(r["run"]), "count not predicted"))
            continue
        if bool(r["censored"]):
            excluded.append((int(r["run"]), "censored"))
            continue
        k, n = g.loc[key]
        p = float(kt_probability(k, n))
        y = bool(r["flipped"])
        rows.append({"run": int(r["run"]), "target": "flip", "majority": r["majority"], "challenger": r["challenger"],
                     "committed": int(r["committed"]), "observed": int(y), "p_observed": p if y else 1.0 - p,
                     "p_event": p, "brier": float(brier_binary(p, y)), "log_score": float(log_score_binary(p, y))})
    return pd.DataFrame(rows), pd.DataFrame(excluded, columns=["run", "reason"]), rf


# ----------------------------------------------------------------------------- coverage
def _flip_coverage(flip_rows, prediction, level, rng, n_resample):
    """Coverage rows of flip fractions and critical masses at the observed counts."""
    out = []
    f = prediction.flips
    for (x, y), obs in flip_rows.groupby(["majority", "challenger"], sort=False):
        fd = f[(f["majority"] == x) & (f["challenger"] == y)]
        counts = sorted(int(c) for c in obs["committed"].unique())
        kk, nn, pub = {}, {}, {}
        for c in counts:
            d = fd[fd["committed"] == c].sort_values("draw")
            kk[c], nn[c] = d["n_flips"].to_numpy(float), d["n_runs"].to_numpy(float)
            pub[c] = d["published_success"].to_numpy(bool)
            oc = obs[obs["committed"] == c]
            k_obs, n_obs = int(oc["observed"].sum()), int(len(oc))
            ab = beta_summary(kk[c], nn[c])
            lo_u, hi_u = _underlying(*ab, level)
            lo_e, hi_e = experiment_interval(*ab, n_obs, level)
            base = {"quantity": "flip_fraction", "key": f"overturn_{x}", "committed": c, "observed": k_obs / n_obs,
                    "n_obs": n_obs}
            out.append({**base, "interval": "underlying", "low": lo_u, "high": hi_u, "n_sim": int(np.median(nn[c])),
                        "covered": _covers_at_resolution(lo_u, hi_u, k_obs, n_obs)})
            out.append({**base, "interval": "experiment", "low": lo_e / n_obs, "high": hi_e / n_obs,
                        "n_sim": int(np.median(nn[c])), "covered": bool(lo_e <= k_obs <= hi_e)})
        # critical masses at the tested counts
        cs = np.asarray(counts, float)
        n_obs_c = {c: int((obs["committed"] == c).sum()) for c in counts}
        obs_frac = np.array([obs.loc[obs["committed"] == c, "observed"].mean() for c in counts])
        first = np.flatnonzero(obs_frac >= 0.5 - 1e-12)
        obs_cm = float(cs[first[0]]) if first.size else math.inf
        Pd = np.column_stack([denoised_probabilities(kk[c], nn[c]) for c in counts])  # draws x counts
        Nn = np.column_stack([nn[c] for c in counts])
        hit = Pd >= 0.5 - 1e-12
        under = np.where(hit.any(axis=1), cs[np.argmax(hit, axis=1)], math.inf)
        # experiment: n_obs runs per count, n_resample replicate experiments per draw
        D = Pd.shape[0]
        g = as_generator(rng)
        nob = np.array([n_obs_c[c] for c in counts])
        ko = g.binomial(nob[None, None, :], np.broadcast_to(np.clip(Pd, 0, 1)[:, None, :], (D, n_resample, len(counts))))
        hit_e = ko / nob[None, None, :] >= 0.5 - 1e-12
        exper = np.where(hit_e.any(axis=2), cs[np.argmax(hit_e, axis=2)], math.inf).reshape(-1)
        base = {"quantity": "critical_mass_per_run", "key": f"overturn_{x}", "committed": np.nan, "observed": obs_cm,
                "n_obs": int(len(obs))}
        for kind, v, nsim in (("underlying", under, int(np.median(Nn))), ("experiment", exper, int(np.median(Nn)))):
            _, lo, hi = _q(v, level)
            out.append({**base, "interval": kind, "low": lo, "high": hi, "n_sim": nsim,
                        "covered": bool(lo <= obs_cm <= hi)})
        # published rule: the draw's replication of the paper's design at the tested counts
        P = np.column_stack([pub[c] for c in counts])
        pub_cm = np.where(P.any(axis=1), cs[np.argmax(P, axis=1)], math.inf)
        out.append({"quantity": "critical_mass_published", "key": f"overturn_{x}", "committed": np.nan,
                    "observed": np.nan, "n_obs": int(len(obs)), "interval": "experiment",
                    "low": _q(pub_cm, level)[1], "high": _q(pub_cm, level)[2],
                    "n_sim": int(prediction.settings.get("design_runs", 10)), "covered": False,
                    "_pub_counts": counts})
    return out


def _published_observed(sub: GameLog, prediction, rows):
    """Fill in the observed published critical mass (the authors' rule at the tested counts)."""
    todo = [r for r in rows if r["quantity"] == "critical_mass_published"]
    if not todo:
        return rows
    mr = prediction.settings.get("max_round")
    e = empirical_critical_mass(sub, within_rounds=prediction.within_rounds, max_round=mr, n_boot=0)
    keep = []
    for r in rows:
        if r["quantity"] != "critical_mass_published":
            keep.append(r)
            continue
        counts = r.pop("_pub_counts")
        x = r["key"].split("_", 1)[1]
        cur = e.curves[(e.curves["majority"] == x) & e.curves["committed"].isin(counts)].sort_values("committed")
        ok = cur["published_success"]
        if ok.isna().any():  # runs shorter than the window at some count: the rule cannot be read
            continue
        hit = cur.loc[ok.astype(bool), "committed"]
        obs = float(hit.min()) if len(hit) else math.inf
        r["observed"] = obs
        r["covered"] = bool(r["low"] <= obs <= r["high"])
        keep.append(r)
    return keep


def _consensus_coverage(cons_runs, prediction, level):
    out = []
    c = prediction.consensus
    n_obs = int(len(cons_runs))
    names = list(prediction.names)
    won = cons_runs["consensus"].astype(object).where(cons_runs["consensus"].notna(), NONE).astype(str)
    for nm in names + [NONE]:
        d = c[c["name"] == nm].sort_values("draw")
        k, n = d["runs"].to_numpy(float), d["n_runs"].to_numpy(float)
        k_obs = int((won == nm).sum())
        ab = beta_summary(k, n)
        lo_u, hi_u = _underlying(*ab, level)
        lo_e, hi_e = experiment_interval(*ab, n_obs, level)
        base = {"quantity": "p_consensus", "key": nm, "committed": np.nan, "observed": k_obs / n_obs, "n_obs": n_obs}
        out.append({**base, "interval": "underlying", "low": lo_u, "high": hi_u, "n_sim": int(np.median(n)),
                    "covered": _covers_at_resolution(lo_u, hi_u, k_obs, n_obs)})
        out.append({**base, "interval": "experiment", "low": lo_e / n_obs, "high": hi_e / n_obs,
                    "n_sim": int(np.median(n)), "covered": bool(lo_e <= k_obs <= hi_e)})
    return out


def _rounds_coverage(sub_cons: GameLog, prediction, level):
    x = prediction.draw_stats["rounds_to_95"].to_numpy(float)
    if not x.size:
        return []
    obs = first_round_reaching(mean_success_by_round(sub_cons), 0.95)
    obs = math.inf if obs is None else float(obs)
    x = np.where(np.isnan(x), math.inf, x)
    _, lo, hi = _q(x, level)
    return [{"quantity": "rounds_to_95", "key": "", "committed": np.nan, "observed": obs,
             "n_obs": int(len(sub_cons.runs)), "interval": "experiment", "low": lo, "high": hi,
             "n_sim": int(prediction.consensus["n_runs"].iloc[0]) if len(prediction.consensus) else 0,
             "covered": bool(lo <= obs <= hi)}]
