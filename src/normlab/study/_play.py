"""The stages that ask the model (and the registration between them), one function each, on a
:class:`StudyRun`: what every stage needs (settings, directories, seeds, the model, the printer).

Every LLM call is journaled by the runner or the probe in its own directory under ``OUT/llm/``;
a stage killed midway is run again by the next invocation and replays what was journaled (the same
seeds give the same runs), so it ends with the results an uninterrupted stage would have had.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from normlab.calibration import predict
from normlab.calibration.prediction.from_probes import measure_jitter, probe_fit
from normlab.calibration.tip.search import tip
from normlab.calibration.tip.sources import LLMSource
from normlab.llm_runs import BudgetExhausted, journal, run_game, strategy_table
from normlab.llm_runs.journal import JOURNAL_FILE, read_journal, write_json_atomic
from normlab.schema import GameLog

from ._model import ModelHandle
from ._register import (PREDICTION_DIR, design_dict, predict_for_design, prediction_rows, study_designs,
                        write_registration)
from ._settings import StudySettings
from ._stages import StageBook, budget_guard, sha256_file, stage_endpoint

__all__ = ["StudyRun", "SEEDS", "measure_stage", "probe_stage", "register_stage", "populations_stage",
           "committed_stage", "exact_stage", "tip_stage", "committed_tests", "run_dirs", "read_logs",
           "probe_dirs", "save_json"]

#: Child ``k`` of the study's seed for each use (fixed: a resumed or extended study draws the same).
SEEDS = {"measure": 0, "jitter": 1, "tables": 2, "first_pass": 3, "prediction": 4, "populations": 5,
         "committed": 6, "tip_source": 7, "tip_search": 8, "score": 9}


@dataclass
class StudyRun:
    """What every stage needs."""

    st: StudySettings
    out: Path
    model: ModelHandle
    book: StageBook
    echo: Callable[[str], None]
    progress: bool
    session: str

    @property
    def llm(self) -> Path:
        return self.out / "llm"

    @property
    def stages(self) -> Path:
        return self.out / "stages"

    def seed(self, what: str):
        return np.random.SeedSequence(self.st.seed).spawn(len(SEEDS))[SEEDS[what]]

    def endpoint_for(self, directory: Path):
        """The model's endpoint with what is left of the study's budget for ``directory``."""
        return stage_endpoint(self.model.endpoint(), self.llm, directory)

    def budget(self):
        return budget_guard(self.model.base, self.llm)

    def run_kw(self, mode: str) -> dict:
        """Keyword arguments of :func:`~normlab.llm_runs.run_game` for ``mode``."""
        smp = self.st.sampling if mode == "sample" else {**self.st.exact_sampling(), "prefill": True}
        return {"mode": mode, **smp}


def _stopped(res) -> None:
    if getattr(res, "stopped", None) == "budget":
        raise BudgetExhausted("a stage reached the budget")


def _calls(directory: Path) -> list:
    f = Path(directory) / JOURNAL_FILE
    return journal.calls(read_journal(f)) if f.exists() else []


# ----------------------------------------------------------------------------- directories
def probe_dirs(st: StudySettings, llm: Path) -> list[Path]:
    """The exact probe's directories: memories <= 1 (the timed first stage) and, for H > 1, the rest."""
    a = llm / "probe-H1"
    return [a] if st.memory == 1 else [a, llm / f"probe-H{st.memory}"]


def committed_tests(reg: dict) -> list[tuple[str, str, int]]:
    """``(majority, challenger, count)`` of every registered committed-minority test (the searched
    direction's grid first)."""
    out = []
    for d in reg["design"]["committed"]:
        out += [(d["majority"], d["challenger"], int(c)) for c in d["counts"]]
    return out


def run_dirs(llm: Path, mode: str, tests) -> dict:
    """``{"populations": dir, (majority, count): dir}`` of the sample or exact runs."""
    out = {"populations": llm / f"populations-{mode}"}
    for x, _, c in tests:
        out[(x, c)] = llm / f"committed-{mode}" / f"overturn_{x}-c{c}"
    return out


def read_logs(llm: Path, mode: str, tests) -> tuple[GameLog, GameLog]:
    """``(populations, committed runs)`` of one mode, read from their run directories."""
    dirs = run_dirs(llm, mode, tests)
    pop = GameLog.read_parquet(dirs.pop("populations"))
    com = GameLog.concat([GameLog.read_parquet(d) for d in dirs.values()])
    return pop, com


# ----------------------------------------------------------------------------- 1. measure
def measure_stage(run: StudyRun) -> dict:
    """The timed first stage: the exact strategy table of memories <= 1 (10 requests for two names)
    and one sample-mode population of ``measure_interactions`` interactions (on the study's own
    prompts). Their requests give the cost per decision in each mode, which the plan uses."""
    st = run.st
    dir_a, dir_s = run.llm / "probe-H1", run.llm / "measure-sample"
    run.model.endpoint()  # an embedded server is started (and its model loaded) before the clock starts
    n_a0, n_s0 = len(_calls(dir_a)), len(_calls(dir_s))
    t0, c0 = time.perf_counter(), time.process_time()
    with run.budget():
        strategy_table(st.names, 1, mode="exact", out=dir_a, endpoint=run.endpoint_for(dir_a), progress=run.progress,
                       rng=0, **{**st.exact_sampling(), "prefill": True})
    wall_a, cpu_a = time.perf_counter() - t0, time.process_time() - c0
    t1, c1 = time.perf_counter(), time.process_time()
    with run.budget():
        res = run_game(st.n_agents, st.memory, list(st.names), max_interactions=st.measure_interactions, runs=1,
                       stop="max", out=dir_s, rng=run.seed("measure"), endpoint=run.endpoint_for(dir_s),
                       progress=run.progress, **run.run_kw("sample"))
        _stopped(res)
    wall_s, cpu_s = time.perf_counter() - t1, time.process_time() - c1
    ca, cs = _calls(dir_a), _calls(dir_s)
    d = res.log.decisions
    u = d[~d["committed"]]
    # seconds per request and per decision: the wall time of what this session asked (a journaled call's
    # latency includes its wait for the one request in flight, so latencies do not add up to time)
    new_a, new_s = len(ca) - n_a0, len(cs) - n_s0
    per_call_s = wall_s / new_s if new_s else None
    out = {
        "exact": {"requests": len(ca), "prompt_tokens": int(sum(c.prompt_tokens for c in ca)),
                  "cached_tokens": int(sum(c.cached_tokens for c in ca)), "requests_this_session": new_a,
                  "wall_s_this_session": round(wall_a, 3), "cpu_s_this_session": round(cpu_a, 3),
                  "s_per_request": wall_a / new_a if new_a else None,
                  "cpu_s_per_request": cpu_a / new_a if new_a else None},
        "sample": {"decisions": int(len(u)), "calls": len(cs), "calls_per_decision": len(cs) / max(len(u), 1),
                   "invalid": int((~u["valid"]).sum()), "reasks": int(u["reasks"].sum()) if "reasks" in u else None,
                   "prompt_tokens_per_call": float(np.mean([c.prompt_tokens for c in cs])) if cs else None,
                   "cached_share": (sum(c.cached_tokens for c in cs) / max(sum(c.prompt_tokens for c in cs), 1))
                   if cs else None,
                   "completion_tokens_per_call": float(np.mean([c.completion_tokens for c in cs])) if cs else None,
                   "calls_this_session": new_s, "wall_s_this_session": round(wall_s, 3),
                   "cpu_s_this_session": round(cpu_s, 3), "s_per_call": per_call_s,
                   "cpu_s_per_decision": cpu_s / new_s * len(cs) / max(len(u), 1) if new_s else None,
                   "s_per_decision": None if per_call_s is None else per_call_s * len(cs) / max(len(u), 1)},
        "machine": _machine(run.model),
    }
    e, s = out["exact"], out["sample"]
    run.echo(f"  measured: exact {_sec(e['s_per_request'])} a request ({e['requests']} requests; CPU "
             f"{_sec(e['cpu_s_per_request'])}), sample {_sec(s['s_per_decision'])} a decision ({s['decisions']} "
             f"decisions, {s['calls_per_decision']:.2f} calls each, {s['cached_share'] or 0:.0%} of prompt tokens "
             f"cached; CPU {_sec(s['cpu_s_per_decision'])}); load average {out['machine']['load_average'][0]:.1f} on "
             f"{out['machine']['cpus']} cores")
    return out


def _sec(v) -> str:
    return "?" if v is None else f"{v:.2f} s"


def _machine(model: ModelHandle) -> dict:
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    srv = model.server() or {}
    from normlab._cores import available_cores

    return {"cpus": available_cores(), "load_average": [round(x, 2) for x in load], "threads": srv.get("threads"),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


# ----------------------------------------------------------------------------- 2. probe
def probe_stage(run: StudyRun) -> dict:
    """The exact strategy table of every memory state (both name orders; memories <= 1 from the
    first stage's cache) and the endpoint's logprob jitter (``jitter_states`` prompts re-asked)."""
    st = run.st
    dirs = probe_dirs(st, run.llm)
    kw = {**st.exact_sampling(), "prefill": True}
    with run.budget():
        probe = strategy_table(st.names, st.memory, mode="exact", out=dirs[-1], cache=dirs[:-1] or None,
                               endpoint=run.endpoint_for(dirs[-1]), progress=run.progress, rng=0, **kw)
    jit = {"prompts": 0, "tokens_compared": 0, "jitter_sd": 0.0, "max_abs_diff": 0.0}
    if st.jitter_states:
        with run.budget():
            jit = measure_jitter(dirs[-1], endpoint=run.endpoint_for(dirs[-1]), n_states=st.jitter_states,
                                 rng=run.seed("jitter"))
    run.stages.mkdir(parents=True, exist_ok=True)
    ptab = probe.to_frame()
    ptab.to_parquet(run.stages / "probe_table.parquet", index=False)
    probe.by_order().to_parquet(run.stages / "probe_by_order.parquet", index=False)
    fit = probe_fit(dirs[-1], jitter_sd=jit["jitter_sd"])
    h = hashlib.sha256()
    h.update(json.dumps({"names": list(fit.names), "memory": fit.memory, "orders": list(fit.orders)}).encode())
    h.update(np.ascontiguousarray(fit.mass, dtype="<f8").tobytes())
    y = st.names[1]
    emp = ptab[(ptab["memory_state"] == "") & (ptab["name"] == y)]
    bo = probe.by_order()
    first = bo[(bo["memory_state"] == "") & (bo["name"] == y) & (bo["order"] == f"{y},{st.names[0]}")]
    second = bo[(bo["memory_state"] == "") & (bo["name"] == y) & (bo["order"] == f"{st.names[0]},{y}")]
    out = {"directory": str(dirs[-1].relative_to(run.out)), "model": probe.model, "memory_states": int(fit.n_states),
           "requests": len(_calls(dirs[-1])) + sum(len(_calls(d)) for d in dirs[:-1]),
           "table_sha256": h.hexdigest(), "journal_sha256": sha256_file(dirs[-1] / JOURNAL_FILE),
           "jitter": jit, "p_empty": {y: float(emp["p"].iloc[0]), st.names[0]: 1 - float(emp["p"].iloc[0])},
           "covered_mass_empty": float(emp["covered_mass"].iloc[0]),
           "p_listed_first_empty": (float(first["p"].iloc[0]) + (1 - float(second["p"].iloc[0]))) / 2
           if len(first) and len(second) else None,
           "covered_mass_min": float(ptab["covered_mass"].min())}
    run.echo(f"  strategy table: {out['memory_states']} memory states; empty memory p({y}) = {out['p_empty'][y]:.2f}; "
             f"jitter sd {jit['jitter_sd']:.3f} ({jit['prompts']} prompts re-asked)")
    return out


# ----------------------------------------------------------------------------- 3. register
def register_stage(run: StudyRun, probe_info: dict) -> dict:
    """Predict from the probed table, fix the design, and write ``predictions.json`` (+ its hash)
    before any population is played."""
    st = run.st
    fit = probe_fit(run.out / probe_info["directory"], jitter_sd=probe_info["jitter"]["jitter_sd"])
    tables = fit.tables(st.n_draws, rng=run.seed("tables"))
    t0 = time.perf_counter()
    first = predict(tables, n_agents=st.n_agents, n_draws=st.n_draws, within_rounds=st.window,
                    n_runs_consensus=st.populations, n_runs_flip=st.runs_per_count, max_rounds=st.max_rounds,
                    max_round=st.window, strength=False, rng=run.seed("first_pass"))
    des = study_designs(st, first)
    designs = [des["searched"]["design"], des["other"]["design"]]
    pred = predict_for_design(tables, st, designs, run.seed("prediction"))
    theory_s = time.perf_counter() - t0
    pdir = run.out / PREDICTION_DIR
    if pdir.exists():  # a registration cut short by a kill: made again (no population has been played)
        import shutil

        shutil.rmtree(pdir)
    pred.save(pdir)
    tested = {d.majority: list(d.counts) for d in designs}
    rows = prediction_rows(pred, st, tested)
    N, w, R = st.n_agents, st.window, st.runs_per_count
    doc = {
        "study": {"seed": st.seed, "settings": st.to_dict()},
        "model": run.model.identity(probe_info.get("model")),
        "probe": {k: probe_info[k] for k in ("directory", "memory_states", "requests", "table_sha256", "journal_sha256",
                                             "jitter", "p_empty", "covered_mass_empty", "p_listed_first_empty")},
        "design": {
            "populations": {"mode": "sample", "runs": st.populations, "n_agents": N, "memory": st.memory,
                            "names": list(st.names), "initial": "empty memories", "stop": f"a {3 * N}-success streak",
                            "cap_interactions": st.population_cap, "cap_rounds": st.max_rounds,
                            "name_order": "each player sees its own shuffle of the pool (both orders)"},
            "committed": [{**design_dict(designs[0]), "role": "searched (full grid; tip compared with it)",
                           "why": des["searched"]["why"], "mode": "sample", "initial": f"consensus:{designs[0].majority}",
                           "name_order": "one shuffle per interaction shown to both players"},
                          {**design_dict(designs[1]), "role": "the other convention (the counts that matter)",
                           "why": des["other"]["why"], "mode": "sample", "initial": f"consensus:{designs[1].majority}",
                           "name_order": "one shuffle per interaction shown to both players"}],
            "tip": des["tip"],
            "exact_twins": "every population and committed run played again in exact mode with the same seeds, "
                           "answered from the probe's cache (0 requests): the consistency check of the simulator "
                           "and the runner, not of the model",
            "sampling": st.sampling,
            "scoring": {"level": 0.95, "inside": "observed value within [low, high] (inclusive)",
                        "rivals": ["direction rule", "base rate", "committed-fraction logistic", "coin"],
                        "flip": "per run: challenger >= 95% of the uncommitted agents' productions over the last "
                                "three rounds, within the window"},
        },
        "predictions": rows,
        "theory_seconds": round(theory_s, 2),
    }
    sha = write_registration(run.out, doc)
    run.echo(f"  registered {len(rows)} predictions in {run.out / 'predictions.json'} (SHA-256 {sha[:16]}...); the "
             f"searched convention: {designs[0].majority} (counts {list(designs[0].counts)}); against "
             f"{designs[1].majority}: counts {list(designs[1].counts)}")
    return {"sha256": sha, "predictions": len(rows), "theory_s": round(theory_s, 2),
            "searched": designs[0].majority, "counts": tested}


# ----------------------------------------------------------------------------- 4-6. the runs
def populations_stage(run: StudyRun, mode: str = "sample") -> dict:
    """The populations from empty memories (sample mode: the paper's protocol)."""
    st = run.st
    d = run.llm / f"populations-{mode}"
    cache = probe_dirs(st, run.llm) if mode == "exact" else None
    with run.budget():
        res = run_game(st.n_agents, st.memory, list(st.names), max_interactions=st.population_cap,
                       runs=st.populations, stop="streak", initial="empty", out=d, cache=cache,
                       rng=run.seed("populations"), endpoint=run.endpoint_for(d), progress=run.progress,
                       **run.run_kw(mode))
        _stopped(res)
    r = res.log.runs
    win = [str(c) if (s == "streak" and isinstance(c, str)) else "none" for c, s in zip(r["consensus"], r["stop_reason"])]
    out = {"directory": str(d.relative_to(run.out)), "runs": len(win),
           "winners": {nm: win.count(nm) for nm in list(st.names) + ["none"]},
           "interactions": int(r["n_interactions"].sum()), "llm_calls": int(r["llm_calls"].sum())}
    run.echo(f"  populations ({mode}): " + ", ".join(f"{k} {v}" for k, v in out["winners"].items()))
    return out


def committed_stage(run: StudyRun, tests, mode: str = "sample") -> dict:
    """The registered committed-minority runs: ``runs_per_count`` runs per test, each from a consensus
    on the majority, ``window`` rounds at most, stopping at a ``3N`` success streak."""
    st = run.st
    dirs = run_dirs(run.llm, mode, tests)
    cache = probe_dirs(st, run.llm) if mode == "exact" else None
    seeds = run.seed("committed").spawn(2 * st.n_agents)
    out = {}
    for x, y, c in tests:
        d = dirs[(x, c)]
        with run.budget():
            res = run_game(st.n_agents, st.memory, list(st.names), max_interactions=st.committed_cap,
                           runs=st.runs_per_count, committed=c, committed_name=y, initial=f"consensus:{x}",
                           stop="streak", out=d, cache=cache, rng=seeds[st.names.index(x) * st.n_agents + c],
                           endpoint=run.endpoint_for(d), progress=run.progress, **run.run_kw(mode))
            _stopped(res)
        r = res.log.runs
        out[f"overturn_{x}:{c}"] = {"directory": str(d.relative_to(run.out)), "runs": int(len(r)),
                                    "ended_on_challenger": int((r["consensus"] == y).sum()),
                                    "interactions": int(r["n_interactions"].sum()),
                                    "llm_calls": int(r["llm_calls"].sum())}
        run.echo(f"  committed ({mode}): {c} committed to {y} vs {x}: {out[f'overturn_{x}:{c}']['ended_on_challenger']}"
                 f" of {len(r)} runs ended at a streak on {y}")
    return out


def exact_stage(run: StudyRun, tests) -> dict:
    """The exact twins of every run (same seeds, answered from the probe's cache)."""
    return {"populations": populations_stage(run, "exact"), "committed": committed_stage(run, tests, "exact")}


# ----------------------------------------------------------------------------- 7. tip
def tip_stage(run: StudyRun, reg: dict) -> dict:
    """``tip`` in sample mode against the convention the registration searched: live runs, the
    sample populations as what is known, at most ``tip_runs`` committed runs."""
    st = run.st
    t = reg["design"]["tip"]
    if not t["max_runs"]:
        return {"skipped": True}
    where = run.llm / "tip-sample"
    pop = GameLog.read_parquet(run.llm / "populations-sample")
    say = _tip_printer(run.echo)
    smp = {k: v for k, v in st.sampling.items()}
    with run.budget():
        source = LLMSource(names=list(st.names), majority=t["majority"], memory=st.memory, n_agents=st.n_agents,
                           out=where, endpoint=run.endpoint_for(where), runs_per_count=t["runs_per_count"],
                           window=t["window"], baselines=0, mode="sample", sampling=smp, progress=False,
                           rng=run.seed("tip_source"))
        res = tip(source, log=pop, max_runs=t["max_runs"], n_draws=t["n_draws"], confirm=t["confirm"],
                  target=t["target"], batch=t["batch"], strategy=t["strategy"], fit_model=t["fit_model"],
                  progress=say, rng=run.seed("tip_search"))
        if res.stopped.startswith("budget"):
            raise BudgetExhausted("the tip search reached the budget")
    res.save(run.stages / "tip")
    s = res.summary()
    run.echo(f"  tip: critical mass to overturn {t['majority']}: {s['critical_mass']}; {s['runs_used']} committed runs; "
             f"{res.stopped}")
    return {"directory": str(where.relative_to(run.out)), "critical_mass": s["critical_mass"],
            "runs_used": s["runs_used"], "counts": s["counts"], "stopped": res.stopped,
            "tokens_used": s.get("tokens_used")}


def _tip_printer(echo):
    def say(rec):
        pl = rec.get("played")
        what = "start" if not pl else f"+{pl['runs']} run(s) at {pl['count']} committed ({pl['flipped']} flipped)"
        echo(f"    tip step {rec['step']}: {what}; estimate {rec['estimate']}, P(within 1) {rec['p_within_one']:.2f}")
    return say


def save_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, obj)

