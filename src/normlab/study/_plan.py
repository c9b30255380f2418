"""``normlab study --dry-run``: the plan of every stage -- its mode, requests, tokens and time --
before anything is sent, nothing written.

Requests and tokens come from the design and the rendered prompts (UTF-8 bytes / 3 per token);
the time from the speed the first stage (``measure``) measured in this directory: seconds of model
time per exact request and per sample decision, with the calls a sample decision took. Before that
stage has run the time is unknown (``--until measure`` runs it alone, about a minute). Once the
predictions are registered, the committed counts are the registered ones and the expected lengths of
the runs come from the prediction; before, the plan assumes the full grid in one direction and
``max_counts`` counts in the other.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from normlab.calibration.prediction import Prediction
from normlab.llm_runs.runner import distinct_prompts, make_settings, prompt_tokens

from ._register import PREDICTION_DIR
from ._settings import STAGE_MODES, STAGES, StudySettings
from ._stages import StageBook

__all__ = ["StudyPlan", "estimate_study", "plan_stages"]

#: Rough seconds of the stages that only compute (before they have run once).
THEORY_SECONDS = {"register": (90.0, 300.0), "score": (60.0, 240.0), "report": (20.0, 60.0)}
#: Runner time per decision answered from the cache (exact twins).
CACHED_DECISION_S = 0.01


@dataclass(frozen=True)
class StudyPlan:
    """The plan: one row per stage (``stage``, ``mode``, ``status``, ``requests``, ``prompt_tokens``,
    ``completion_tokens``, ``seconds``: each ``(typical, at_most)``, None where unknown), the speed it
    used and notes."""

    what: str
    stages: list
    speed: dict | None
    notes: tuple = ()
    sizes: dict = field(default_factory=dict)

    def totals(self) -> dict:
        out = {}
        for k in ("requests", "prompt_tokens", "completion_tokens", "seconds"):
            vals = [s[k] for s in self.stages]
            out[k] = tuple(None if any(v is None or v[i] is None for v in vals) else float(sum(v[i] for v in vals))
                           for i in (0, 1))
        return out

    def to_dict(self) -> dict:
        return {"plan": self.what, "nothing_sent": True, "speed": self.speed, "sizes": self.sizes,
                "stages": [{**s, **{k: list(v) if isinstance(v, tuple) else v for k, v in s.items()}}
                           for s in self.stages],
                "total": {k: list(v) for k, v in self.totals().items()}, "how": list(self.notes)}

    def __str__(self) -> str:
        def n(v):
            return "?" if v is None else f"{v:,.0f}"

        def t(v):
            if v is None:
                return "?"
            return f"{v:.0f} s" if v < 90 else (f"{v / 60:.1f} min" if v < 5400 else f"{v / 3600:.2f} h")

        def pair(v, f):
            return f"{f(v[0])} / {f(v[1])}" if v[0] != v[1] else f(v[0])

        lines = [f"plan (nothing was sent): {self.what}"]
        if self.speed:
            sp = self.speed
            lines.append(f"speed measured in stage 'measure' ({sp['time']}, load average {sp['load']} on {sp['cpus']} "
                         f"cores, {sp['threads'] or '?'} server thread(s)): sample {sp['s_per_decision']:.2f} s a "
                         f"decision ({sp['calls_per_decision']:.2f} calls, {sp['s_per_call']:.2f} s a call), exact "
                         f"{sp['s_per_request']:.2f} s a request (memories <= 1)"
                         + (f"; CPU {sp['cpu_s_per_decision']:.2f} s a decision, {sp['cpu_s_per_request']:.2f} s a "
                            "request (what a core of its own would take)" if sp.get("cpu_s_per_decision") and
                            sp.get("cpu_s_per_request") else ""))
        else:
            lines.append("speed: not measured yet -- times are unknown until the first stage has run "
                         "(add --until measure to run it alone, then --dry-run again)")
        lines.append(f"  {'stage':<12}{'status':<8}{'requests':>20}{'prompt tokens':>24}{'time':>22}  mode")
        for s in self.stages:
            lines.append(f"  {s['stage']:<12}{s['status']:<8}{pair(s['requests'], n):>20}"
                         f"{pair(s['prompt_tokens'], n):>24}{pair(s['seconds'], t):>22}  {s['mode']}")
        tot = self.totals()
        lines.append(f"  {'total':<20}{pair(tot['requests'], n):>20}{pair(tot['prompt_tokens'], n):>24}"
                     f"{pair(tot['seconds'], t):>22}  (typical / at most)")
        lines += [f"  - {x}" for x in self.notes]
        return "\n".join(lines)


def _speed(book: StageBook) -> dict | None:
    rec = book.done("measure")
    if rec is None:
        return None
    r = rec["result"]
    e, s, m = r["exact"], r["sample"], r["machine"]
    if not s.get("decisions") or s.get("s_per_decision") is None or e.get("s_per_request") is None:
        return None  # a first stage whose requests were all replayed from an earlier session measures nothing
    return {"s_per_request": e["s_per_request"], "s_per_decision": s["s_per_decision"],
            "calls_per_decision": s["calls_per_decision"],
            "s_per_call": s.get("s_per_call") or s["s_per_decision"] / max(s["calls_per_decision"], 1e-9),
            "time": m["time"], "load": m["load_average"][0], "cpus": m["cpus"], "threads": m.get("threads"),
            "prompt_tokens_per_call": s.get("prompt_tokens_per_call"), "cached_share": s.get("cached_share"),
            "cpu_s_per_decision": s.get("cpu_s_per_decision"), "cpu_s_per_request": e.get("cpu_s_per_request")}


def _registration(out: Path) -> dict | None:
    f = out / "predictions.json"
    if not f.exists():
        return None
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def plan_stages(st: StudySettings, out: Path, *, label: str) -> StudyPlan:
    """The plan of :func:`estimate_study` (settings checked already)."""
    out = Path(out)
    book = StageBook(out)
    done = {r["stage"]: r for r in book.timings()}
    speed = _speed(book)
    reg = _registration(out) if "register" in done else None
    N, H, P, R, names = st.n_agents, st.memory, st.populations, st.runs_per_count, st.names
    reasks = st.sampling.get("max_reasks", 2)
    per_max = 1 + (reasks if isinstance(reasks, int) else 10)
    sx, tx, _ = make_settings(N, H, names, max_interactions=1, mode="exact", embedded=True,
                              **{**st.exact_sampling(), "prefill": True})
    ss, ts, _ = make_settings(N, H, names, max_interactions=1, mode="sample", embedded=True, **st.sampling)
    tok_x = [prompt_tokens(sx, tx, k) for k in range(H + 1)]
    tok_s = prompt_tokens(ss, ts, H)
    n_states = [4 ** k for k in range(H + 1)]
    tok_x1 = (tok_x[0] + 4 * tok_x[1]) / 5
    tok_xh = sum(c * t for c, t in zip(n_states[2:], tok_x[2:])) / max(sum(n_states[2:]), 1) if H > 1 else tok_x1
    cpd = speed["calls_per_decision"] if speed else 1.0
    s_call = speed["s_per_call"] if speed else None
    s_req1 = speed["s_per_request"] if speed else None
    comp = ss.max_tokens

    def sample_row(decisions: tuple) -> dict:
        calls = (decisions[0] * cpd, decisions[1] * per_max)
        return {"requests": calls, "prompt_tokens": (calls[0] * tok_s, calls[1] * tok_s),
                "completion_tokens": (calls[0] * comp, calls[1] * comp),
                "seconds": (None, None) if s_call is None else (calls[0] * s_call, calls[1] * s_call)}

    rows = {}
    # measure: the exact table of memories <= 1 and one timed population
    n1 = distinct_prompts(names, 1)
    dm = 2 * st.measure_interactions
    sr = sample_row((dm, dm))
    rows["measure"] = {"requests": (n1 + sr["requests"][0], n1 + sr["requests"][1]),
                       "prompt_tokens": (n1 * tok_x1 + sr["prompt_tokens"][0], n1 * tok_x1 + sr["prompt_tokens"][1]),
                       "completion_tokens": (n1 + sr["completion_tokens"][0], n1 + sr["completion_tokens"][1]),
                       "seconds": (None, None) if s_req1 is None else (n1 * s_req1 + sr["seconds"][0],
                                                                         n1 * s_req1 + sr["seconds"][1])}
    # probe: the rest of the table and the jitter re-asks
    nh = distinct_prompts(names, H) - n1
    s_reqh = None if s_req1 is None else s_req1 * (tok_xh / tok_x1 if H > 1 else 1.0)
    rq = nh + st.jitter_states
    rows["probe"] = {"requests": (rq, rq), "prompt_tokens": ((nh * tok_xh + st.jitter_states * tok_xh),) * 2,
                     "completion_tokens": (rq, rq),
                     "seconds": (None, None) if s_reqh is None else (nh * s_reqh + st.jitter_states * s_reqh * 0.3,
                                                                     rq * s_reqh)}
    for k in ("register", "score", "report"):
        rows[k] = {"requests": (0, 0), "prompt_tokens": (0, 0), "completion_tokens": (0, 0), "seconds": THEORY_SECONDS[k]}
    # populations
    cap = st.population_cap
    typ_int = min(cap, 12 * N)
    expected = None
    if reg is not None:
        expected = _expected(out, st)
        if expected is not None:
            typ_int = expected["population_interactions"]
    dec_pop = (P * 2 * typ_int, P * 2 * cap)
    rows["populations"] = sample_row(dec_pop)
    # committed runs
    if reg is not None:
        tests = [(d["majority"], int(c)) for d in reg["design"]["committed"] for c in d["counts"]]
        pflip = {(p["majority"], p["committed"]): p["estimate"] for p in reg["predictions"] if p["id"].startswith("p_flip")}
    else:
        tests = [(names[0], c) for c in range(1, N)] + [(names[1], c) for c in range(1, min(st.max_counts, N - 1) + 1)]
        pflip = {}
    ccap = st.committed_cap
    typ_c = sum(R * 2 * (N - c) / N * ccap * (1 - 0.5 * pflip.get((x, c), 0.5)) for x, c in tests)
    max_c = sum(R * 2 * (N - c) / N * ccap for x, c in tests)
    rows["committed"] = sample_row((typ_c, max_c))
    # exact twins: from the cache
    dec_all = (dec_pop[0] + typ_c, dec_pop[1] + max_c)
    rows["exact"] = {"requests": (0, 0), "prompt_tokens": (0, 0), "completion_tokens": (0, 0),
                     "seconds": (dec_all[0] * CACHED_DECISION_S, dec_all[1] * CACHED_DECISION_S)}
    # tip: at most tip_runs committed runs (and up to R runs at count 0, outside that budget)
    T = st.tip_runs
    tip_max = (T * 2 * (N - 1) / N + (R * 2 if T else 0)) * ccap
    rows["tip"] = sample_row((0.6 * T * 2 * (N - 1) / N * ccap, tip_max))
    stages = []
    for name in STAGES:
        r = rows[name]
        if name in done:
            d = done[name]
            act = {"requests": (d["llm_calls"],) * 2, "prompt_tokens": (d["prompt_tokens"],) * 2,
                   "completion_tokens": (d["completion_tokens"],) * 2, "seconds": (d["wall_s"],) * 2}
            stages.append({"stage": name, "mode": STAGE_MODES[name], "status": "done", **act})
        else:
            stages.append({"stage": name, "mode": STAGE_MODES[name], "status": "to run", **r})
    notes = [
        "requests and tokens: from the design and the rendered prompts (UTF-8 bytes / 3 a token; tokenizers differ "
        "by about 20 %); completion tokens: max_tokens a sample call, 1 an exact request",
        "sample decisions: 2 per interaction of a population, 2 (N - c) / N of a run with c committed agents; typical: "
        + ("the populations' lengths and flip probabilities the registered prediction expects"
           if expected is not None else f"{min(cap, 12 * N)} interactions a population (12 N), committed runs "
                                        "three quarters of their cap")
        + f"; at most: every run to its cap, every re-ask used ({per_max} calls a decision)",
        "exact twins: every decision answered from the probe's cache (0 requests)",
        "time: model seconds from the first stage's requests; the theory stages (register, score, report) are "
        "rough until they have run once; done stages show what they took",
    ]
    if reg is None:
        notes.append(f"committed counts not registered yet: assumed the full grid 1..{N - 1} against {names[0]} and "
                     f"{min(st.max_counts, N - 1)} counts against {names[1]}")
    if speed and speed.get("cpu_s_per_decision") and speed.get("cpu_s_per_request"):
        fs = speed["cpu_s_per_decision"] / speed["s_per_decision"] if speed["s_per_decision"] else 1.0
        fx = speed["cpu_s_per_request"] / speed["s_per_request"] if speed["s_per_request"] else 1.0
        quiet = [0.0, 0.0]
        for st_row in stages:
            sec = st_row["seconds"]
            if sec[0] is None:
                break
            f = 1.0 if st_row["status"] == "done" else (fx if st_row["stage"] == "probe" else
                                                         fs if st_row["stage"] in ("measure", "populations", "committed",
                                                                                   "tip") else 1.0)
            quiet = [quiet[0] + f * sec[0], quiet[1] + f * sec[1]]
        else:
            notes.append(f"on cores of its own (the CPU seconds the first stage measured instead of its wall time): "
                         f"typical {quiet[0] / 3600:.2f} h, at most {quiet[1] / 3600:.2f} h")
    what = (f"normlab study, {label}: N = {N}, H = {H}, names {','.join(names)}, {P} populations (cap {st.max_rounds} "
            f"rounds), {R} committed runs per count ({st.window} rounds), tip at most {T} runs, {st.n_draws} draws")
    sizes = {"n_agents": N, "memory": H, "populations": P, "runs_per_count": R, "window": st.window,
             "max_rounds": st.max_rounds, "tip_runs": T, "committed_tests": len(tests)}
    return StudyPlan(what=what, stages=stages, speed=speed, notes=tuple(notes), sizes=sizes)


def _expected(out: Path, st: StudySettings) -> dict | None:
    """Expected interactions of a population under the registered prediction (converging runs stop at
    their streak, the others at the cap)."""
    try:
        pred = Prediction.load(out / PREDICTION_DIR)
        ds = pred.draw_stats
        conv = ds["converged"].to_numpy(float)
        cr = np.nan_to_num(ds["consensus_rounds"].to_numpy(float), nan=st.max_rounds)
        v = float(np.mean(conv * cr * st.n_agents + (1 - conv) * st.population_cap))
        return {"population_interactions": v if math.isfinite(v) else st.population_cap}
    except (OSError, ValueError, KeyError):
        return None


def estimate_study(out, settings: StudySettings | None = None, *, embedded_model: str | None = None, endpoint=None,
                   model_file=None) -> StudyPlan:
    """The plan of :func:`~normlab.study.run_study` with the same arguments: every stage's mode,
    requests, tokens and time (from the speed measured in ``out``'s first stage), done stages as
    they were; nothing is sent and nothing is written.

    Returns
    -------
    StudyPlan
        ``print()`` it, or ``to_dict()`` (``normlab study --dry-run --json``).
    """
    from ._model import prepare

    st, endpoint, choice = prepare(settings, embedded_model, endpoint, model_file)
    from ._settings import check_directory, check_stored

    out = check_directory(out)
    check_stored(out, st, {"embedded": choice.embedded, "alias": choice.alias})
    return plan_stages(st, out, label=choice.label)
