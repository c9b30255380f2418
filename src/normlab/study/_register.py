"""The pre-registration: the design fixed from the probe alone, every prediction with its interval
for that design, written to ``OUT/predictions.json`` before any population is played, its SHA-256
in ``OUT/predictions.sha256``, the stage journal and the manifest; later stages refuse to run when
the file (or the saved prediction it names) changed.

What the design fixes (nothing an outcome sets): the populations (how many, their cap, the stop
rule), the convention whose critical mass is searched (the one the probe predicts more populations
reach: its full grid of committed counts is played, and ``tip`` searches it), the committed counts
tested against the other convention (those whose predicted per-run flip probability lies in
:data:`~normlab.study._settings.FLIP_BAND`, with one count either side), runs per count, the
window and cap of a committed run, the tip search's budget and target.

The predictions (each with its 95 % interval for an experiment of the size about to be run):
P(consensus) on each name and on none (``P`` populations), mean rounds to consensus of the
populations that converge, the round the mean success reaches 0.95, P(flip) per committed count and
direction (``R`` runs), the per-run critical mass per direction (the smallest count where half of
``R`` runs flip) and the published-rule critical mass on each direction's design (the grid's is what
``tip`` searches).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from normlab import __version__
from normlab.calibration import ExperimentDesign, predict
from normlab.llm_runs.journal import environment, write_json_atomic

from ._settings import FLIP_BAND, StudySettings
from ._stages import now_iso, sha256_file

__all__ = ["choose_counts", "study_designs", "prediction_rows", "write_registration", "verify_registration",
           "RegistrationChanged", "PREDICTIONS", "PREDICTIONS_SHA", "PREDICTION_DIR", "predict_for_design",
           "per_run_on_tested", "design_dict"]

PREDICTIONS = "predictions.json"
PREDICTIONS_SHA = "predictions.sha256"
#: The saved prediction (every draw) behind predictions.json: scoring reads it; its files are hashed too.
PREDICTION_DIR = Path("stages") / "prediction"


class RegistrationChanged(ValueError):
    """``predictions.json`` (or the prediction it names) is not the file that was registered."""


# ----------------------------------------------------------------------------- the design
def choose_counts(curve, majority: str, n_agents: int, max_counts: int) -> tuple[list[int], str]:
    """The committed counts that matter against a consensus on ``majority``: those whose predicted
    per-run flip probability lies in :data:`FLIP_BAND`, with the count just below and just above
    the band (at most ``max_counts``, the ones nearest P = 1/2 kept); where no count is uncertain,
    the two counts either side of the jump (or ``N - 1`` where no count flips). Returns the counts
    and why, in words."""
    lo, hi = FLIP_BAND
    g = curve[(curve["majority"] == majority) & (curve["committed"] >= 1)]
    p = {int(c): float(v) for c, v in zip(g["committed"], g["p_flip"])}
    counts = range(1, n_agents)
    for c in counts:  # the sweep stops after saturation: counts past it flip
        p.setdefault(c, 1.0)
    band = [c for c in counts if lo <= p[c] <= hi]
    if band:
        below = [c for c in counts if c < min(band) and p[c] < lo]
        above = [c for c in counts if c > max(band) and p[c] > hi]
        chosen = set(band) | ({max(below)} if below else set()) | ({min(above)} if above else set())
        why = (f"predicted P(flip) within [{lo}, {hi}] at {', '.join(map(str, band))} committed"
               + (f", with {max(below)} below" if below else "") + (f" and {min(above)} above" if above else ""))
    else:
        first = next((c for c in counts if p[c] >= 0.5), None)
        if first is None:
            chosen, why = {n_agents - 1}, f"no count flips (P(flip) < {lo} up to {n_agents - 1}): the largest tested"
        else:
            chosen = {first} | ({first - 1} if first > 1 else set())
            why = f"P(flip) jumps from below {lo} to above {hi} at {first}: the counts either side"
    keep = sorted(sorted(chosen, key=lambda c: (abs(p[c] - 0.5), c))[:max_counts])
    if len(keep) < len(chosen):
        why += f"; the {len(keep)} nearest P = 1/2 kept (--max-counts {max_counts}): {', '.join(map(str, keep))}"
    return keep, why


def study_designs(st: StudySettings, first_pass) -> dict:
    """The committed-minority design of both directions and of the tip search, from a first
    prediction (the flip curve of every count): ``{"searched": ..., "other": ..., "tip": ...}``."""
    N, R, w = st.n_agents, st.runs_per_count, st.window
    pc = first_pass.p_consensus()
    names = list(st.names)
    strong = max(names, key=lambda nm: (pc.get(nm, 0.0), -names.index(nm)))
    weak = names[1 - names.index(strong)]
    other_counts, why = choose_counts(first_pass.flip_curve(), weak, N, st.max_counts)
    grid = list(range(1, N))

    def design(maj, chal, counts, extend):
        return ExperimentDesign(maj, chal, N, tuple(counts), tuple((w * N,) * R for _ in counts), w, extend=extend,
                                runs_beyond=R, source="normlab study (registered)", stop="streak")

    return {
        "strong": strong, "weak": weak, "p_consensus_first_pass": pc,
        "searched": {"design": design(strong, weak, grid, False),
                     "why": f"the probe predicts more populations reach {strong} (P = {pc.get(strong, 0):.2f} vs "
                            f"{pc.get(weak, 0):.2f}): its critical mass is searched, every count 1..{N - 1} played "
                            "(the full grid tip is compared with)"},
        "other": {"design": design(weak, strong, other_counts, True), "why": why},
        "tip": {"majority": strong, "challenger": weak, "max_runs": st.tip_runs, "runs_per_count": R, "window": w,
                "target": 0.9, "batch": 2, "confirm": R, "strategy": "eig", "fit_model": "empirical",
                "n_draws": st.n_draws, "known_data": "the sample-mode populations (runs from empty memories)",
                "stop": f"a run ends at a {3 * N}-success streak or after {w} rounds"},
    }


def predict_for_design(tables, st: StudySettings, designs: list, rng):
    """The registered prediction: intervals for ``populations`` runs of ``max_rounds`` rounds and for
    ``runs_per_count`` committed runs of ``window`` rounds at every count, the published rule read on
    each direction's design."""
    return predict(tables, n_agents=st.n_agents, n_draws=st.n_draws, within_rounds=st.window,
                   n_runs_consensus=st.populations, n_runs_flip=st.runs_per_count, max_rounds=st.max_rounds,
                   max_round=st.window, design=designs, strength=False, rng=rng)


# ----------------------------------------------------------------------------- the predictions
def _num(v):
    """JSON-safe number: None for not finite (for a critical mass: not reached up to N - 1)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def prediction_rows(pred, st: StudySettings, tested: dict) -> list[dict]:
    """Every registered prediction: ``id``, ``quantity``, ``key``, ``estimate``, ``low``, ``high``,
    ``interval`` (what the interval is for), ``unit``. ``tested``: majority -> counts played there."""
    P, R, w, N = st.populations, st.runs_per_count, st.window, st.n_agents
    rows = []
    cs = pred.consensus_summary().set_index("name")
    for nm in list(st.names) + ["none"]:
        r = cs.loc[nm] if nm in cs.index else None
        rows.append({"id": f"p_consensus:{nm}", "quantity": "P(consensus)", "key": nm,
                     "estimate": _num(r["probability"]) if r is not None else 0.0,
                     "low": _num(r["low"]) if r is not None else 0.0, "high": _num(r["high"]) if r is not None else 0.0,
                     "interval": f"share of {P} populations (capped at {st.max_rounds} rounds) ending at a {3 * N}-success "
                                 f"streak on {nm}" if nm != "none" else f"share of {P} populations with no consensus "
                                 f"within {st.max_rounds} rounds", "unit": "share"})
    cr = pred.consensus_rounds()
    rows.append({"id": "consensus_rounds", "quantity": "rounds to consensus", "key": "",
                 "estimate": _num(cr["estimate"]), "low": _num(cr["low"]), "high": _num(cr["high"]),
                 "interval": f"mean stop round of the converging runs among {P} populations", "unit": "rounds"})
    # a draw whose populations never reach 0.95 within the cap counts as "not reached" (+inf), not as missing
    r95 = np.nan_to_num(pred.draw_stats["rounds_to_95"].to_numpy(float), nan=np.inf)
    q = [float(np.quantile(r95, a, method="inverted_cdf")) for a in (0.5, 0.025, 0.975)] if r95.size else [np.nan] * 3
    rows.append({"id": "rounds_to_95", "quantity": "rounds to 95% success", "key": "",
                 "estimate": _num(q[0]), "low": _num(q[1]), "high": _num(q[2]),
                 "p_not_reached": float(np.mean(np.isinf(r95))) if r95.size else None,
                 "interval": f"first round the mean success of {P} populations reaches 0.95 (none: not within "
                             f"{st.max_rounds})", "unit": "rounds"})
    fc = pred.flip_curve()
    for x, counts in tested.items():
        y = st.names[1 - st.names.index(x)]
        for c in counts:
            f = fc[(fc["majority"] == x) & (fc["committed"] == c)]
            if f.empty:  # past the sweep's saturation: every simulated run flipped
                est, lo, hi = 1.0, 1.0, 1.0
            else:
                est, lo, hi = (float(f[k].iloc[0]) for k in ("p_flip", "low", "high"))
            rows.append({"id": f"p_flip:{x}:{c}", "quantity": "P(flip)", "key": f"{c} committed to {y} vs {x}",
                         "majority": x, "challenger": y, "committed": int(c), "estimate": est, "low": lo, "high": hi,
                         "interval": f"share of {R} runs of {w} rounds that flip (challenger >= 95% of the uncommitted "
                                     "agents' last three rounds) within the window", "unit": "share"})
    cm = pred.critical_mass()
    for key, v in cm.items():
        x = v["majority"]
        counts = tested.get(x, [])
        est, lo, hi, p_nr = per_run_on_tested(pred, x, counts)
        rows.append({"id": f"cm_per_run:{x}", "quantity": "critical mass (per run)", "key": key, "majority": x,
                     "challenger": v["challenger"], "estimate": est, "low": lo, "high": hi, "p_not_reached": p_nr,
                     "interval": f"smallest tested count ({', '.join(map(str, counts))}) where at least half of {R} "
                                 "runs flip within the window (estimate: from the pooled flip probabilities; null: "
                                 "none of the tested counts)", "unit": "agents"})
        e = v.get("experiment")
        if e is not None:
            rows.append({"id": f"cm_published:{x}", "quantity": "critical mass (published rule)", "key": key,
                         "majority": x, "challenger": v["challenger"], "estimate": _num(e["estimate"]),
                         "low": _num(e["low"]), "high": _num(e["high"]), "p_not_reached": _num(e["p_not_reached"]),
                         "p_beyond_tested": _num(e.get("p_beyond_tested")),
                         "distribution": {str(k): float(p) for k, p in (e.get("distribution") or {}).items()},
                         "interval": f"the authors' ensemble rule on this direction's design (counts "
                                     f"{', '.join(map(str, tested.get(x, [])))}, {R} runs of {w} rounds each; "
                                     "null: not reached)", "unit": "agents"})
    return rows


def per_run_on_tested(pred, majority: str, counts) -> tuple:
    """The per-run critical mass read as the experiment reads it: per draw, the smallest *tested* count
    where at least half of its ``n_runs_flip`` simulated runs flip (a count past the sweep's saturation
    flips); its median and 95 % interval over draws, the share of draws where no tested count does
    (+inf, JSON null), and the estimate from the pooled flip probabilities."""
    f = pred.flips[pred.flips["majority"] == majority]
    counts = sorted(int(c) for c in counts)
    if not counts:
        return None, None, None, None
    frac = f.assign(p=f["n_flips"] / f["n_runs"]).pivot_table(index="draw", columns="committed", values="p")
    cms = []
    for _, row in frac.iterrows():
        hit = [c for c in counts if (row.get(c) if c in row.index and not np.isnan(row.get(c)) else 1.0) >= 0.5]
        cms.append(float(hit[0]) if hit else np.inf)
    cms = np.asarray(cms, float)
    q = [float(np.quantile(cms, a, method="inverted_cdf")) for a in (0.5, 0.025, 0.975)]
    pooled = f.groupby("committed")[["n_flips", "n_runs"]].sum()
    hit = [c for c in counts if (pooled.loc[c, "n_flips"] / pooled.loc[c, "n_runs"] if c in pooled.index else 1.0) >= 0.5]
    return (float(hit[0]) if hit else None), _num(q[1]), _num(q[2]), float(np.mean(np.isinf(cms)))


# ----------------------------------------------------------------------------- the file and its hash
def _dir_hashes(out: Path, folder: Path) -> dict:
    base = out / folder
    return {str((folder / p.relative_to(base)).as_posix()): sha256_file(p)
            for p in sorted(base.rglob("*")) if p.is_file()}


def write_registration(out: Path, doc: dict) -> str:
    """``predictions.json`` (with the hashes of the saved prediction), then ``predictions.sha256``;
    returns the file's SHA-256. Both writes are whole or not at all."""
    out = Path(out)
    env = environment()
    doc = {"schema": "normlab.study.predictions/1", "created": now_iso(), "normlab_version": __version__,
           "git": (env.get("git") or {}).get("normlab"), "python": env.get("python"),
           "packages": env.get("packages"), **doc,
           "artifacts": _dir_hashes(out, PREDICTION_DIR)}
    text = json.dumps(doc, indent=1, default=str, allow_nan=False)
    tmp = out / (PREDICTIONS + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    import os

    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, out / PREDICTIONS)
    sha = sha256_file(out / PREDICTIONS)
    t2 = out / (PREDICTIONS_SHA + ".tmp")
    t2.write_text(f"{sha}  {PREDICTIONS}\n", encoding="utf-8")
    os.replace(t2, out / PREDICTIONS_SHA)
    return sha


def verify_registration(out: Path, registered_sha: str | None) -> dict:
    """The registered predictions, after checking that ``predictions.json``, ``predictions.sha256``,
    the stage journal's hash and the saved prediction all still agree.

    Raises
    ------
    RegistrationChanged
        Any of them differs: the study refuses to go on.
    """
    out = Path(out)
    f = out / PREDICTIONS
    if not f.exists():
        raise RegistrationChanged(f"{f} is missing: the registered predictions are gone; the study refuses to go on "
                                  "(restore the file, or start a new study in a new directory)")
    sha = sha256_file(f)
    side = (out / PREDICTIONS_SHA).read_text(encoding="utf-8").split()[0] if (out / PREDICTIONS_SHA).exists() else None
    where = []
    if registered_sha is not None and sha != registered_sha:
        where.append(f"the registration recorded in stages.jsonl ({registered_sha[:12]}...)")
    if side != sha:
        where.append(f"{PREDICTIONS_SHA} ({(side or 'missing')[:12]}...)")
    if where:
        raise RegistrationChanged(f"{PREDICTIONS} changed after it was registered: its SHA-256 is now {sha[:12]}..., not "
                                  f"that of {' or '.join(where)}; the study refuses to go on (restore the registered "
                                  "file, or start a new study in a new directory)")
    doc = json.loads(f.read_text(encoding="utf-8"))
    now = _dir_hashes(out, PREDICTION_DIR) if (out / PREDICTION_DIR).is_dir() else {}
    if now != doc.get("artifacts", {}):
        bad = sorted(k for k in set(now) | set(doc.get("artifacts", {})) if now.get(k) != doc["artifacts"].get(k))
        raise RegistrationChanged(f"the saved prediction behind {PREDICTIONS} changed ({', '.join(bad[:3])}); the "
                                  "study refuses to go on (restore it, or start a new study in a new directory)")
    return doc


def design_dict(d: ExperimentDesign) -> dict:
    """A design as registered (counts, runs per count, cap, window, stop rule)."""
    return {"majority": d.majority, "challenger": d.challenger, "counts": list(d.counts),
            "runs_per_count": int(np.median([len(x) for x in d.lengths])),
            "cap_interactions": int(max(max(x) for x in d.lengths)), "window_rounds": d.window, "stop": d.stop,
            "extend": d.extend}
