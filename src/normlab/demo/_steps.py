"""The demo's steps, one function each (probe, free generation, prediction, populations,
committed minorities, calibration, checks), and what they compare: the predicted and observed
facts that the report and ``summary.json`` show.

Every step takes a :class:`DemoRun` (settings, seeds, journal directories, the clock and the
printer) and journals its LLM calls in its own directory under ``OUT/llm/<key>/``.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from normlab._rng import spawn
from normlab.calibration import (calibrate, challenger_shares, llm_trajectories, predict,
                                 theory_trajectories)
from normlab.calibration import counts_from_probes
from normlab.calibration.fit.registry import fit_family, fit_strategy
from normlab.calibration.tip.search import tip
from normlab.calibration.tip.sources import LLMSource
from normlab.llm_runs import BudgetExhausted
from normlab.llm_runs import enumerate_states, individual_bias, run_game, strategy_table
from normlab.llm_runs.runner.mode import mode_of
from normlab.theory import StrategyTable, strategy_game
from normlab.theory.criteria import shares_from_result
from normlab.theory.stats import clopper_pearson
from normlab.theory.strategies import n_states

from ._common import cp_interval, finite, fmt_seconds
from ._ledger import Clock, demo_budget, free_generation_dir, journal_calls, stage_endpoint, stopped_at_budget
from ._plan import PROBE_SEED, DemoSettings, measure_speed, plan_rest
from ._progress import JournalBar, spinner

__all__ = ["GROUPS", "DemoRun", "ProbeStep", "probe_step", "sampled_probe_step", "pool_sampled", "free_generation_step", "prediction_step",
           "population_step", "committed_step", "TipStep", "tip_direction", "tip_step", "calibration_step",
           "checks_step"]

#: Groups of simulated experiments behind every predictive interval of a trajectory.
GROUPS = 200


@dataclass
class DemoRun:
    """What every step needs: the checked settings, the seeds, where the journals go, the clock
    and the printer."""

    cfg: DemoSettings
    seed: int
    ep: object  # the EndpointConfig every step uses (its budget staged per step)
    llm_dir: Path
    seeds: list
    clock: Clock
    echo: Callable[[str], None]
    progress: bool

    @property
    def llm_root(self) -> Path:
        """``OUT/llm``: the demo's budget covers every journal below it."""
        return self.cfg.out / "llm"

    def endpoint_for(self, directory: Path):
        """The endpoint for the step journaling in ``directory``, with what is left of the budget."""
        return stage_endpoint(self.ep, self.llm_root, directory)

    def budget(self):
        """One message about the demo's whole budget when a step reaches it."""
        return demo_budget(self.ep, self.llm_root)


# ----------------------------------------------------------------------------- 1. strategy table
@dataclass
class ProbeStep:
    """The probed strategy table and what the first, timed stage measured."""

    probe: object
    ptab: pd.DataFrame
    table: StrategyTable
    dirs: tuple
    speed: dict | None
    estimate: dict
    #: Sample mode: the table's posterior from the sampled answers (a Dirichlet per memory state),
    #: which the prediction draws from; ``None`` in exact mode (the probed table is exact).
    fit: object = None

    @property
    def source(self):
        """What the theory predicts from: the posterior of a sampled table, else the exact table."""
        return self.fit if self.fit is not None else self.table


def probe_step(run: DemoRun) -> ProbeStep:
    """The strategy table: short memories first (they time the endpoint), the plan printed, then the rest.
    Exact mode reads next-token probabilities (logprobs); sample mode estimates the table from sampled
    answers (:func:`sampled_probe_step`: no logprobs needed)."""
    if not mode_of(run.cfg.mode).uses_cache:
        return sampled_probe_step(run)
    cfg, clock, echo, ep = run.cfg, run.clock, run.echo, run.ep
    names, H, smp = cfg.names, cfg.memory, cfg.sampling
    L_a = 1  # 10 requests: enough to time the endpoint (for H = 1 it is the whole table)
    dir_a, dir_b = run.llm_dir / f"probe-H{L_a}", run.llm_dir / f"probe-H{H}"
    states_a = enumerate_states(names, L_a)
    states_b = [s for s in enumerate_states(names, H) if s not in set(states_a)]
    probe_kw = dict(mode="exact", endpoint=ep, progress=run.progress, rng=PROBE_SEED,
                    **{k: v for k, v in smp.items() if k not in ("top_p", "min_p", "parse")})
    with clock.step(f"strategy table, memories of length <= {L_a} (timed)", [dir_a]):
        before = len(journal_calls(dir_a))
        t = time.perf_counter()
        with run.budget():
            strategy_table(names, L_a, out=dir_a, **{**probe_kw, "endpoint": run.endpoint_for(dir_a)})
        wall_a = time.perf_counter() - t
    speed = measure_speed(dir_a, states_a, cfg, wall_a, len(journal_calls(dir_a)) - before, run.llm_dir / "speed.json")
    est = plan_rest(cfg, run.seed, ep, run.llm_dir, states_b, dir_b, speed, echo)
    with clock.step(f"strategy table (H = {H})", [dir_b]):
        with run.budget():
            probe = strategy_table(names, H, out=dir_b, cache=[dir_a],
                                   **{**probe_kw, "endpoint": run.endpoint_for(dir_b)})
    ptab = probe.to_frame()
    holes = int(ptab.groupby("memory_state")["p"].apply(lambda v: v.isna().any()).sum())
    table = probe.to_strategy_table(default=uniform_table(names, H))  # states with no name in reach: uniform
    if holes:
        echo(f"  note: in {holes} memory states no pool name was among the top logprobs in either order; "
             "the theory plays them uniformly, the LLM runs record an invalid answer there")
    p_empty = ptab[(ptab["memory_state"] == "") & (ptab["name"] == names[0])]
    echo(f"  strategy table: {ptab['memory_state'].nunique()} memory states; empty memory: "
         f"p({names[0]}) = {float(p_empty['p'].iloc[0]):.2f}, p({names[1]}) = {1 - float(p_empty['p'].iloc[0]):.2f}")
    return ProbeStep(probe=probe, ptab=ptab, table=table, dirs=(dir_a, dir_b), speed=speed, estimate=est)


def sampled_probe_step(run: DemoRun) -> ProbeStep:
    """Sample mode: the strategy table estimated from ``probe_samples`` answers generated and parsed
    in every memory state (the paper's protocol, re-asks as the runs; any endpoint, no logprobs),
    memories of length <= 1 first (they time the endpoint), then every state up to H. The answers of
    both stages are pooled per state; the table's uncertainty is a Dirichlet posterior per state
    (the ``empirical`` fit of the counts), which the prediction draws from."""
    cfg, clock, echo = run.cfg, run.clock, run.echo
    names, H, S = cfg.names, cfg.memory, cfg.probe_samples
    L_a = 1
    dir_a, dir_b = run.llm_dir / f"probe-sample-H{L_a}-S{S}", run.llm_dir / f"probe-sample-H{H}-S{S}"
    states_a = enumerate_states(names, L_a)
    kw = dict(mode="sample", samples=S, progress=run.progress, rng=run.seeds[0], **cfg.sampling)
    with clock.step(f"strategy table from sampled answers, memories of length <= {L_a} (timed)", [dir_a]):
        before = len(journal_calls(dir_a))
        t = time.perf_counter()
        with run.budget():
            pa = strategy_table(names, L_a, out=dir_a, endpoint=run.endpoint_for(dir_a), **kw)
        wall_a = time.perf_counter() - t
    speed = measure_speed(dir_a, states_a, cfg, wall_a, len(journal_calls(dir_a)) - before, run.llm_dir / "speed.json")
    states_b = [st for st in enumerate_states(names, H) if st not in set(states_a)]
    est = plan_rest(cfg, run.seed, run.ep, run.llm_dir, states_b, dir_b, speed, echo)
    parts = [pa]
    if H > L_a:
        with clock.step(f"strategy table from sampled answers (H = {H})", [dir_b]):
            with run.budget():
                parts.append(strategy_table(names, H, out=dir_b, endpoint=run.endpoint_for(dir_b), **kw))
    probe = pool_sampled(parts)
    ptab = probe.to_frame()
    fit = fit_strategy(counts_from_probes(ptab, names=names, memory=H), "empirical")
    table = probe.to_strategy_table(default=uniform_table(names, H))
    holes = int(ptab.groupby("memory_state")["n"].apply(lambda v: (v.fillna(0) == 0).all()).sum())
    if holes:
        echo(f"  note: in {holes} memory states no sampled answer named a pool name; the table plays them uniformly "
             "(their posterior is the flat prior)")
    emp = ptab[(ptab["memory_state"] == "") & (ptab["name"] == names[0])].iloc[0]
    n_all, n_bad = int(ptab.drop_duplicates("memory_state")["n"].fillna(0).sum()), int(
        ptab.drop_duplicates("memory_state")["n_invalid"].sum())
    echo(f"  strategy table (sample mode, {S} answers per state and stage): {ptab['memory_state'].nunique()} memory "
         f"states, {n_all} valid answers, {n_bad} invalid after re-asks; empty memory: p({names[0]}) = "
         f"{float(emp['p']):.2f} [{float(emp['ci_low']):.2f}, {float(emp['ci_high']):.2f}] ({int(emp['count'])} of "
         f"{int(emp['n'])})")
    return ProbeStep(probe=probe, ptab=ptab, table=table, dirs=(dir_a, dir_b), speed=speed, estimate=est, fit=fit)


def pool_sampled(probes):
    """One sampled :class:`~normlab.llm_runs.StrategyProbe` from several of the same pool: the answers
    of every probe pooled per (memory state, name), ``p`` and its Clopper-Pearson interval recomputed."""
    if len(probes) == 1:
        return probes[0]
    big = max(probes, key=lambda p: p.memory)
    frames = [p.table for p in probes]
    cat = pd.concat(frames, ignore_index=True)
    agg = cat.groupby(["memory_state", "name"], sort=False).agg(
        count=("count", lambda v: int(v.fillna(0).sum())), n=("n", lambda v: int(v.fillna(0).sum())),
        n_invalid=("n_invalid", "sum")).reset_index()
    t = big.table.drop(columns=["count", "n", "n_invalid", "p", "ci_low", "ci_high"]).merge(
        agg, on=["memory_state", "name"], how="left")
    t["p"] = np.where(t["n"] > 0, t["count"] / t["n"].where(t["n"] > 0, 1), np.nan)
    lo, hi = clopper_pearson(t["count"].astype(float), t["n"].astype(float))
    t["ci_low"], t["ci_high"] = lo, hi
    for c in ("count", "n"):
        t[c] = t[c].astype("Int64")
    t = t[list(big.table.columns)]
    return type(big)(names=big.names, memory=big.memory, mode=big.mode, table=t, by_order_table=big.by_order_table,
                     model=big.model, llm_calls=sum(p.llm_calls for p in probes))


def uniform_table(names, memory: int) -> StrategyTable:
    """Every name equally likely in every memory state."""
    return StrategyTable(np.full((n_states(len(names), memory), len(names)), 1.0 / len(names)), memory=memory,
                         names=names)


# ----------------------------------------------------------------------------- 2. free generation
def free_generation_step(run: DemoRun):
    """How often does the model, asked to write its answer, name no pool name at all? (None: skipped)"""
    cfg = run.cfg
    if not cfg.sample_check:
        return None
    sdir = free_generation_dir(run.llm_dir, cfg, run.seed)
    with run.clock.step("free-generation check", [sdir]):
        skw = {k: v for k, v in cfg.sampling.items()}
        skw["max_reasks"] = 0
        with run.budget():
            bias = individual_bias(cfg.names, trials=cfg.sample_check, mode="sample",
                                   endpoint=run.endpoint_for(sdir), out=sdir,
                                   progress=run.progress, rng=run.seeds[1], **skw)
    run.echo(f"  free generation at an empty memory: {bias.invalid} of {bias.trials} answers name no pool name")
    return bias


# ----------------------------------------------------------------------------- 3. theory prediction
def prediction_step(run: DemoRun, table):
    """The theory's prediction from the probed table, with intervals for an experiment of the
    demo's size; returns ``(prediction, trajectories, facts, critical masses)``."""
    cfg, N, names = run.cfg, run.cfg.n_agents, run.cfg.names
    nrf = max(cfg.committed_runs, 1)
    with run.clock.step("theory prediction (probed table)"):
        with spinner("theory: predicting from the probed table", run.progress):
            pred = predict(table, n_agents=N, n_draws=cfg.n_draws, within_rounds=cfg.within_rounds,
                           n_runs_consensus=cfg.runs, n_runs_flip=nrf, max_rounds=cfg.max_rounds,
                           rng=run.seeds[4])
            traj_th = theory_trajectories(table, n_agents=N, n_rounds=cfg.max_rounds, n_draws=cfg.n_draws,
                                          n_runs=cfg.runs, rng=run.seeds[5])
    pfacts, pcrit = prediction_facts(pred)
    winner = max(names, key=lambda nm: pfacts["consensus"].get(nm, {}).get("estimate", 0))
    run.echo(f"  predicted: consensus on {winner} with probability {pfacts['consensus'][winner]['estimate']:.2f}; "
             + "; ".join(f"critical mass to overturn {v['majority']}: {cm_text(v['per_run'])}" for v in pcrit.values()))
    return pred, traj_th, pfacts, pcrit


def prediction_facts(pred) -> tuple[dict, dict]:
    """Predicted consensus, speed and critical masses as JSON-safe dicts."""
    cs = pred.consensus_summary().set_index("name")
    cons = {nm: {"estimate": float(cs.loc[nm, "probability"]), "low": float(cs.loc[nm, "low"]),
                 "high": float(cs.loc[nm, "high"])} for nm in cs.index}
    cm = pred.critical_mass()
    crit = {}
    for k, v in cm.items():
        crit[k] = {"majority": v["majority"], "challenger": v["challenger"],
                   "per_run": {kk: finite(v["per_run"][kk]) for kk in ("estimate", "low", "high", "p_not_reached", "pooled")},
                   "published": {kk: finite(v["published"][kk]) for kk in ("estimate", "low", "high", "p_not_reached")}}
    cr = pred.consensus_rounds()
    r95 = pred.rounds_to_95()
    return {"consensus": cons, "consensus_rounds": {k: finite(float(v)) for k, v in cr.items()},
            "rounds_to_95": {k: finite(float(v)) for k, v in r95.items()}}, crit


def cm_text(v: dict) -> str:
    if v.get("pooled") is None:
        return "not reached"
    lo, hi = v.get("low"), v.get("high")
    return f"{v['pooled']:.0f}" + (f" [{lo:.0f}, {hi:.0f}]" if lo is not None and hi is not None else " [-, not reached]")


# ----------------------------------------------------------------------------- 4. populations
def population_step(run: DemoRun, pred, ptab, speed, cache):
    """LLM populations from empty memories; returns ``(result, observed facts)``."""
    cfg, N, H, smp = run.cfg, run.cfg.n_agents, run.cfg.memory, run.cfg.sampling
    cap = cfg.max_rounds * N
    pop_dir = run.llm_dir / f"population-N{N}-H{H}-R{cfg.runs}-cap{cfg.max_rounds}-{cfg.mode}-seed{run.seed}"
    exp_int = expected_interactions(pred, N, cap)
    if not mode_of(cfg.mode).uses_cache:  # sample mode: requests to announce
        cov = float(ptab.drop_duplicates("memory_state")["covered_mass"].mean())
        if not np.isfinite(cov):  # a table from sampled answers: the share of valid answers (after re-asks)
            st = ptab.drop_duplicates("memory_state")
            cov = float(st["n"].fillna(0).sum() / max(st["n"].fillna(0).sum() + st["n_invalid"].sum(), 1))
        reasks = smp.get("max_reasks", 2)
        per = sum((1 - cov) ** k for k in range((reasks if isinstance(reasks, int) else 10) + 1))
        n_req = 2 * exp_int * cfg.runs * per
        run.echo(f"  populations (sample mode): about {exp_int * cfg.runs:.0f} interactions expected -> "
                 f"~{n_req:.0f} requests" + (f", ~{fmt_seconds(n_req * speed['s_per_call'])}" if speed else ""))
    run_kw = dict(mode=cfg.mode, endpoint=run.ep, progress=False, **smp)
    with run.clock.step("LLM populations", [pop_dir]):
        with JournalBar(pop_dir, cfg.runs, exp_int, f"LLM populations ({cfg.mode})", run.progress):
            with run.budget():
                pop = run_game(N, H, cfg.names, max_interactions=cap, runs=cfg.runs, stop="streak", out=pop_dir,
                               cache=cache, rng=run.seeds[2], **{**run_kw, "endpoint": run.endpoint_for(pop_dir)})
                stopped_at_budget(pop)
    obs = population_observed(pop, cfg.names, N)
    run.echo(f"  LLM populations: winners {', '.join(obs['winners'])}")
    return pop, obs


def expected_interactions(pred, n_agents: int, cap: int) -> float:
    """Expected interactions per run from empty memories: converging runs stop at their streak,
    the others at the cap (mean over the predicted draws)."""
    st = pred.draw_stats
    conv = st["converged"].to_numpy(float)
    cr = np.nan_to_num(st["consensus_rounds"].to_numpy(float), nan=cap / n_agents)
    return float(np.mean(conv * cr * n_agents + (1 - conv) * cap))


def population_observed(res, names, n_agents) -> dict:
    """What the populations did: winners (a run that stopped at its streak), consensus shares with
    Clopper-Pearson intervals, rounds to consensus, invalid answers."""
    r = res.log.runs
    win = [(str(c) if (s == "streak" and isinstance(c, str)) else "none") for c, s in zip(r["consensus"], r["stop_reason"])]
    n = len(win)
    share = {}
    for nm in list(names) + ["none"]:
        k = sum(w == nm for w in win)
        lo, hi = cp_interval(k, n)
        share[nm] = {"runs": k, "estimate": k / n, "low": lo, "high": hi}
    conv = r[r["stop_reason"] == "streak"]
    d = res.log.decisions
    u = d[~d["committed"]]
    return {"runs": n, "winners": win, "consensus": share,
            "consensus_rounds": finite(float((conv["n_interactions"] / n_agents).mean())) if len(conv) else None,
            "invalid_share": float((~u["valid"]).mean()) if len(u) else None,
            "covered_mass": float(u["covered_mass"].mean()) if "covered_mass" in u and u["covered_mass"].notna().any() else None,
            "decisions": int(len(u)), "interactions": int(r["n_interactions"].sum())}


# ----------------------------------------------------------------------------- 5. committed minorities
def committed_step(run: DemoRun, table, pred, pcrit, cache):
    """Committed-minority runs against each convention, compared with the predicted flip
    probability; returns ``(results, rows, curves)``."""
    cfg, N, H = run.cfg, run.cfg.n_agents, run.cfg.memory
    wr = cfg.within_rounds
    fc = pred.flip_curve()
    tests = []
    if cfg.committed_runs:
        for key, v in pcrit.items():
            x, y = v["majority"], v["challenger"]
            if cfg.committed == "auto":
                pooled = v["per_run"]["pooled"]
                counts = [min(max(int(pooled), 1), N - 1)] if pooled is not None else [N // 2]
            else:
                counts = cfg.committed
            for c in counts:
                tests.append((x, y, int(c)))
    run_kw = dict(mode=cfg.mode, endpoint=run.ep, progress=False, **cfg.sampling)
    seeds = run.seeds
    committed_res, cm_rows, cm_curves = [], [], []
    for i, (x, y, c) in enumerate(tests):
        cdir = run.llm_dir / f"committed-{x}-by-{y}-c{c}-N{N}-H{H}-R{cfg.committed_runs}-w{wr}-{cfg.mode}-seed{run.seed}"
        th_curve, th_len = committed_theory(table, x, y, c, cfg, spawn(seeds[7], len(tests))[i])
        with run.clock.step(f"committed minority: {c} committed to {y} vs a consensus on {x}", [cdir]):
            with JournalBar(cdir, cfg.committed_runs, th_len, f"committed {c}x{y} vs {x} ({cfg.mode})",
                            run.progress):
                with run.budget():
                    r = run_game(N, H, cfg.names, max_interactions=wr * N, runs=cfg.committed_runs, committed=c,
                                 committed_name=y, initial=f"consensus:{x}", stop="flip", out=cdir, cache=cache,
                                 rng=spawn(seeds[3], len(tests))[i],
                                 **{**run_kw, "endpoint": run.endpoint_for(cdir)})
                    stopped_at_budget(r)
        committed_res.append(r)
        k = int(r.log.runs["flipped"].sum())
        n = int(len(r.log.runs))
        row = fc[(fc["majority"] == x) & (fc["committed"] == c)]
        p = float(row["p_flip"].iloc[0]) if len(row) else float("nan")
        lo, hi = (float(row["low"].iloc[0]), float(row["high"].iloc[0])) if len(row) else (float("nan"),) * 2
        olo, ohi = cp_interval(k, n)
        cm_rows.append({"majority": x, "challenger": y, "committed": c, "runs": n, "flips": k,
                        "observed": k / n, "observed_low": olo, "observed_high": ohi,
                        "predicted": p, "low": lo, "high": hi, "consistent": bool(lo - 1e-9 <= k / n <= hi + 1e-9)})
        shares = llm_committed_shares(r, wr)
        cm_curves.append({"majority": x, "challenger": y, "committed": c, "theory": th_curve, "llm": shares})
        a_, b_ = round(lo * n), round(hi * n)
        run.echo(f"  committed minority: {c} committed to {y} against a consensus on {x}: {k} of {n} runs flipped "
                 f"(predicted flip probability {p:.2f}: {a_ if a_ == b_ else f'{a_} to {b_}'} of {n} in 95% of such "
                 f"experiments)")
    return committed_res, cm_rows, cm_curves


def committed_theory(table, x, y, c, cfg, seed):
    """Challenger share per round of committed-minority runs of the probed table: ``GROUPS``
    simulated experiments of ``committed_runs`` runs each (stop at the flip, padded with 1 after
    it as the published rule does). Returns (curves frame, mean run length in interactions)."""
    N, H, wr, n = cfg.n_agents, cfg.memory, cfg.within_rounds, max(cfg.committed_runs, 1)
    r = strategy_game(table, n_agents=N, memory=H, n_runs=GROUPS * n, committed=int(c), committed_name=y,
                      initial=f"consensus:{x}", stop="flip", max_interactions=wr * N, progress=False, rng=seed)
    sh = shares_from_result(r, y)
    M = np.full((len(sh), wr), np.nan)
    for k, s in enumerate(sh):
        M[k, :min(len(s), wr)] = s[:wr]
        if r.stop_reason[k] == "flip":
            M[k, len(s):] = 1.0
    G = M.reshape(GROUPS, n, wr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rounds of empty groups
        gm = np.nanmean(G, axis=1)
        frame = pd.DataFrame({"round": np.arange(1, wr + 1), "mean": np.nanmean(M, axis=0),
                              "low": np.nanquantile(gm, 0.025, axis=0), "high": np.nanquantile(gm, 0.975, axis=0)})
    return frame, float(np.mean(r.n_interactions))


def llm_committed_shares(res, wr: int) -> pd.DataFrame:
    """Challenger share per run and round of LLM committed-minority runs (padded with 1 after a flip)."""
    sh = challenger_shares(res.log)
    runs = res.log.runs.set_index("run")
    rows = []
    for k, g in sh.groupby("run"):
        v = np.full(wr, np.nan)
        s = g.sort_values("round")["share"].to_numpy(float)[:wr]
        v[:len(s)] = s
        if bool(runs.loc[k, "flipped"]):
            v[len(s):] = 1.0
        rows.append(pd.DataFrame({"run": k, "round": np.arange(1, wr + 1), "share": v}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["run", "round", "share"])


# ----------------------------------------------------------------------------- 5b. the tip search
@dataclass
class TipStep:
    """The adaptive search for the critical mass that overturns the populations' convention."""

    result: object  # normlab.calibration.TipResult
    majority: str
    challenger: str
    why: str  # how the convention to overturn was chosen
    runs_per_count: int
    directory: Path


def tip_direction(obs: dict, pfacts: dict, names) -> tuple[str, str]:
    """The convention to overturn: the one more populations reached, else (a tie, or no consensus)
    the one the probed table predicts. Returns ``(name, why)``."""
    won = {nm: int(obs["consensus"][nm]["runs"]) for nm in names}
    a, b = sorted(names, key=lambda nm: -won[nm])
    if won[a] > won[b]:
        return a, f"{won[a]} of {obs['runs']} populations reached {a}"
    p = max(names, key=lambda nm: pfacts["consensus"].get(nm, {}).get("estimate", 0))
    return p, (f"the populations reached {a} and {b} equally often ({won[a]} each), so the convention the probed "
               f"table predicts (P = {pfacts['consensus'][p]['estimate']:.2f})")


def tip_dir(run: DemoRun, majority: str, runs_per_count: int) -> Path:
    """The search's journal directory (one sub-directory per step); not keyed by ``--tip-runs``, so
    a rerun with a larger budget replays the steps played and goes on."""
    cfg = run.cfg
    return run.llm_dir / (f"tip-overturn_{majority}-N{cfg.n_agents}-H{cfg.memory}-R{runs_per_count}"
                          f"-w{cfg.within_rounds}-{cfg.mode}-seed{run.seed}")


def tip_runs_per_count(cfg: DemoSettings) -> int:
    """Runs per count of the experiment the search reads: the committed check's (at least 2)."""
    return max(int(cfg.committed_runs), 2)


def tip_draws(cfg: DemoSettings) -> int:
    """Posterior draws per step of the search: the demo's ``n_draws``, at least the 20 ``tip`` needs."""
    return max(int(cfg.n_draws), 20)


def tip_step(run: DemoRun, pop, obs, pfacts, cache) -> TipStep | None:
    """:func:`normlab.calibration.tip` on the demo's endpoint, starting from the populations' runs
    (baselines from empty memories, the known data), at most ``tip_runs`` committed runs against
    the convention the populations reached; None when ``tip_runs`` is 0."""
    cfg, N, names = run.cfg, run.cfg.n_agents, run.cfg.names
    if not cfg.tip_runs:
        return None
    x, why = tip_direction(obs, pfacts, names)
    y = names[1 - names.index(x)]
    R = tip_runs_per_count(cfg)
    where = tip_dir(run, x, R)
    s_src, s_tip = spawn(spawn(run.seed, 9)[8], 2)  # seeds 0-7 are the other steps'

    def say(rec):
        pl = rec.get("played")
        what = "start" if not pl else f"+{pl['runs']} run(s) at {pl['count']} committed ({pl['flipped']} flipped)"
        run.echo(f"    tip step {rec['step']}: {what}; critical mass {_num(rec['estimate'])} "
                 f"[{_num(rec['low'])}, {_num(rec['high'])}], P(within 1) {rec['p_within_one']:.2f}")

    with run.clock.step(f"tip: critical mass to overturn {x} (at most {cfg.tip_runs} committed runs)", [where]):
        where.mkdir(parents=True, exist_ok=True)  # the search's folder, also when it needs no run at all
        with run.budget():
            source = LLMSource(names=names, majority=x, memory=cfg.memory, n_agents=N, out=where,
                               endpoint=run.endpoint_for(where), runs_per_count=R, window=cfg.within_rounds,
                               baselines=0, mode=cfg.mode, sampling=cfg.sampling, cache=cache, progress=False,
                               rng=s_src)
            res = tip(source, log=pop.log, max_runs=cfg.tip_runs, n_draws=tip_draws(cfg), confirm=R,
                      progress=say, rng=s_tip)
            if res.stopped.startswith("budget"):
                raise BudgetExhausted("the tip search reached the budget")
    run.echo(f"  tip: critical mass to overturn {x} ({why}): {_num(res.estimate)} [{_num(res.low)}, "
             f"{_num(res.high)}], " + ("P(within one agent)" if np.isfinite(res.estimate) else "P(not reached)")
             + f" {res.p_within:.2f}, from {res.runs_used} committed runs at "
             + (", ".join(f"{c} ({n})" for c, n in sorted(res.counts.items())) or "no count")
             + f"; {res.stopped}")
    return TipStep(result=res, majority=x, challenger=y, why=why, runs_per_count=R, directory=where)


def _num(v) -> str:
    return "not reached" if v is None or not np.isfinite(v) else f"{v:.0f}"


# ----------------------------------------------------------------------------- 6. calibration
def calibration_step(run: DemoRun, pop):
    """The strategy fitted on the population's log alone, and its prediction; returns
    ``(calibration, facts, critical masses)``."""
    cfg = run.cfg
    nrf = max(cfg.committed_runs, 1)
    own_bars = fit_family(cfg.fit, "fit").uses_nuts  # a NUTS fit shows the sampler's progress bars
    with run.clock.step(f"calibration from the population log ({cfg.fit})"):
        with spinner(f"calibrating ({cfg.fit}) from the population log and predicting",
                     run.progress and not own_bars):
            cal = calibrate(pop.log, names=cfg.names, memory=cfg.memory, n_agents=cfg.n_agents,
                            model=cfg.fit, n_draws=cfg.n_draws, within_rounds=cfg.within_rounds,
                            predict_kwargs=dict(n_runs_consensus=cfg.runs, max_rounds=cfg.max_rounds,
                                                n_runs_flip=nrf),
                            source="normlab demo population", rng=run.seeds[6],
                            progress=run.progress and own_bars)
    lfacts, lcrit = prediction_facts(cal.prediction)
    return cal, lfacts, lcrit


# ----------------------------------------------------------------------------- checks
def checks_step(run: DemoRun, pfacts, lfacts, obs, cm_rows, bias, ptab, pop):
    """Predicted vs observed, one row per comparison; returns ``(checks frame, LLM trajectories)``."""
    cfg, names = run.cfg, run.cfg.names
    checks = []
    for src, facts in (("probe", pfacts), ("log", lfacts)):
        for nm in list(names) + ["none"]:
            o = obs["consensus"][nm]
            checks.append(check_row("P(consensus)", nm, src,
                                    facts["consensus"].get(nm, {"estimate": 0.0, "low": 0.0, "high": 0.0}),
                                    o["estimate"], o["low"], o["high"]))
        checks.append(check_row("rounds to consensus", "", src, facts["consensus_rounds"], obs["consensus_rounds"]))
    llm_curve = llm_trajectories(pop.log, n_rounds=cfg.max_rounds, rng=run.seeds[5])
    s_llm = llm_curve[(llm_curve["quantity"] == "success_rate")].sort_values("round")
    hit = np.flatnonzero(s_llm["mean"].to_numpy() >= 0.95 - 1e-9)
    r95_obs = float(hit[0] + 1) if hit.size else None
    for src, facts in (("probe", pfacts), ("log", lfacts)):
        checks.append(check_row("rounds to 95% success", "", src, facts["rounds_to_95"], r95_obs))
    for row in cm_rows:
        checks.append(check_row("P(flip)", f"{row['committed']} committed to {row['challenger']} vs {row['majority']}",
                                "probe", {"estimate": row["predicted"], "low": row["low"], "high": row["high"]},
                                row["observed"], row["observed_low"], row["observed_high"]))
    if bias is not None:
        cov_empty = float(ptab.loc[ptab["memory_state"] == "", "covered_mass"].iloc[0])
        olo, ohi = cp_interval(bias.invalid, bias.trials)
        if np.isfinite(cov_empty):
            lo, hi = binom_interval(bias.trials, 1 - cov_empty)
            checks.append(check_row("invalid free answers", "empty memory", "probe",
                                    {"estimate": 1 - cov_empty, "low": lo, "high": hi}, bias.invalid / bias.trials, olo,
                                    ohi, note="predicted: 1 - probability mass of the pool names at the answer position"))
        else:  # sampled table: its answers were re-asked, so it predicts nothing about a first answer
            checks.append(check_row("invalid free answers", "empty memory", "probe",
                                    {"estimate": None, "low": None, "high": None}, bias.invalid / bias.trials, olo, ohi,
                                    note="not predicted: the strategy table was sampled with re-asks (sample mode); "
                                         "the probability mass on pool names needs logprobs (exact mode)"))
    return pd.DataFrame(checks), llm_curve


def check_row(quantity, key, source, pred, obs, olo=None, ohi=None, note=""):
    lo, hi = pred.get("low"), pred.get("high")
    est = pred.get("estimate")
    ok = None
    if obs is not None and lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi):
        ok = bool(lo - 1e-9 <= obs <= hi + 1e-9)
    return {"quantity": quantity, "key": key, "source": source, "predicted": finite(est), "low": finite(lo),
            "high": finite(hi), "observed": obs, "observed_low": olo, "observed_high": ohi, "consistent": ok,
            "note": note}


def binom_interval(n: int, p: float, level: float = 0.95) -> tuple[float, float]:
    """Equal-tailed interval of ``k / n`` for ``k ~ Binomial(n, p)`` (what an experiment of ``n`` shows)."""
    from scipy.stats import binom

    a = (1 - level) / 2
    return float(binom.ppf(a, n, p) / n), float(binom.ppf(1 - a, n, p) / n)
