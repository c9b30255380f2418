"""Benchmark of normlab.calibration: fit + full prediction for one model (target < 3 min, 2 cores).

Run from the repository root (needs ../shared/data/ai-norms; falls back to a synthetic log):

    python benchmarks/bench_calibration.py [--draws 200] [--model llama31|llama3]

Prints the wall time of each stage: loading the baseline runs, counting states, the NUTS fit of
the hierarchical model (PyTensor compilation included; the first run on a fresh machine also
compiles PyTensor's C modules -- run with PYTENSOR_FLAGS=compiledir=/tmp/fresh to measure that),
drawing the tables, and the prediction (convergence runs, critical-mass sweeps for both
directions, relative strength) with ``--draws`` posterior draws.

``--engines`` instead times the prediction engine alone, on the shipped Llama-3.1 fit, old and
new measured in the same run, interleaved (CPU seconds of this process; one thread); its
``predict_run_effects`` line times the prediction with the fit's run effects, every state's
thresholds computed before each run (old) against on first use in a run (new; the same runs),
and ``predict_llama31_200_draws_cpu_s`` is the new one (issue 32's target: <= 1.5 s);
``interactions_by_stage`` and ``run_effects_per_interaction`` say where its time goes:

    python benchmarks/bench_calibration.py --engines [--reps 3]

old = ``predict(..., engine="reference")`` with the former NumPy table draws (one
``strategy_game`` call per draw and setting, pandas reductions); new = the compiled design
(``engine="kernel"``) with the compiled table draws. Also ``fit.mean_table()`` recomputed vs
read from the stored mean, and the table draws alone. Prints medians and old/new ratios.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

AINORMS = Path(__file__).resolve().parents[2] / "shared" / "data" / "ai-norms"
SETTINGS = {"llama31": ("Llama-3.1-70B-Instruct", 5, 24, 24), "llama3": ("Llama-3-70B-Instruct", 3, 24, 48)}


def _cpu(fn):
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def _where_predict_spends(fit, draws: int, reps: int) -> dict:
    """Where the default ``predict``'s time goes: the interactions each stage adds (the prediction
    played without it: an estimate, the other stages' runs may then come from other seed groups), and
    the cost per interaction of playing run effects, on identical runs:
    the compiled design of the default prediction replayed with no effects, with effects that change
    nothing (shift 0, sharpness 1: the same runs, every state's thresholds still computed on first
    use in each run) and with the fit's own effects."""
    import hashlib
    import statistics

    import numpy as np

    from normlab.calibration import predict
    from normlab.calibration.prediction import engine_kernel

    calls = []
    design = engine_kernel.strategy_design

    def spy(*a, **k):
        o = design(*a, **k)
        calls.append((a, k, int(o["interactions"].sum())))
        return o

    engine_kernel.strategy_design = spy
    try:
        stages, default = {}, None
        for label, kw in (("all", {}), ("without_consensus", {"consensus": False}),
                          ("without_strength", {"strength": False})):
            calls.clear()
            predict(fit, n_agents=24, n_draws=draws, rng=2, **kw)
            stages[label] = sum(c[2] for c in calls)
            if label == "all":
                (default,) = calls  # one compiled call for every draw
    finally:
        engine_kernel.strategy_design = design
    a, k, _ = default
    k = dict(k)
    b, kap = k.pop("effects")
    variants = {"none": None, "zero_effects": (np.zeros_like(b), np.ones_like(kap)), "fit_effects": (b, kap)}
    rate = {v: [] for v in variants}
    digest, n_int = {}, {}
    for _ in range(reps):
        for v, eff in variants.items():
            dt, o = _cpu(lambda: design(*a, effects=eff, **k))
            n_int[v] = int(o["interactions"].sum())
            rate[v].append(n_int[v] / dt / 1e6)
            digest[v] = hashlib.sha256(b"".join(np.ascontiguousarray(o[x]).tobytes() for x in sorted(o))).hexdigest()
    med = {v: statistics.median(r) for v, r in rate.items()}
    return {"interactions_by_stage": {"all": stages["all"], "consensus": stages["all"] - stages["without_consensus"],
                                      "strength": stages["all"] - stages["without_strength"]},
            "run_effects_per_interaction": {
                "interactions": n_int, "M_per_cpu_s": {v: round(r, 1) for v, r in med.items()},
                "zero_effects_same_runs": digest["none"] == digest["zero_effects"],
                "plain_vs_zero_effects": round(med["none"] / med["zero_effects"], 2)}}


def bench_engines(reps: int = 3, draws: int = 200) -> dict:
    """Old vs new prediction engine, interleaved, CPU seconds (see the module docstring)."""
    import contextlib
    import dataclasses
    import statistics

    import numba
    import numpy as np

    from normlab.calibration import load_fit, predict
    from normlab.calibration.fit import hierarchical as post

    numba.set_num_threads(1)
    fit = load_fit("llama31_70b_QM_H5")
    plain = dataclasses.replace(fit, stored_mean=np.zeros((0, 0)))

    @contextlib.contextmanager
    def old_draws():
        new = post.conditional_deltas
        post.conditional_deltas = post._conditional_deltas_reference
        try:
            yield
        finally:
            post.conditional_deltas = new

    def old_predict():
        with old_draws():
            return predict(fit, n_agents=24, n_draws=draws, engine="reference", run_effects=None, rng=2)

    def new_predict():  # like for like: the reference engine plays no run effects, so neither does this
        return predict(fit, n_agents=24, n_draws=draws, run_effects=None, rng=2)

    def old_mean():
        with old_draws():
            return plain.mean_table()

    def old_tables():
        with old_draws():
            return fit.sample_tables(draws, rng=1)

    from normlab.theory import design as design_mod

    def effects_predict(eager):  # the shipped fit with its run effects: thresholds for every state before each
        def go():  # run (eager, the reference) or per state on first use in a run (lazy, the default)
            design_mod._EAGER_EFFECTS = eager
            try:
                return predict(fit, n_agents=24, n_draws=draws, rng=2)
            finally:
                design_mod._EAGER_EFFECTS = False
        return go

    tasks = {"predict": (old_predict, new_predict), "mean_table": (old_mean, fit.mean_table),
             "table_draws": (old_tables, lambda: fit.sample_tables(draws, rng=1)),
             "predict_run_effects": (effects_predict(True), effects_predict(False))}
    # warm-up: compile / load every kernel once
    predict(fit, n_agents=6, n_draws=1, n_runs_consensus=2, n_runs_flip=2, run_effects=None, rng=1)
    predict(fit, n_agents=6, n_draws=1, n_runs_consensus=2, n_runs_flip=2, engine="reference", run_effects=None, rng=1)
    times = {k: {"old": [], "new": []} for k in tasks}
    results = {}
    for _ in range(reps):
        for k, (old, new) in tasks.items():
            for which, fn in (("old", old), ("new", new)):
                dt, res = _cpu(fn)
                times[k][which].append(dt)
                results[(k, which)] = res
    out = {}
    for k, v in times.items():
        o, n = statistics.median(v["old"]), statistics.median(v["new"])
        out[k] = {"old_cpu_s": round(o, 4), "new_cpu_s": round(n, 4), "ratio": round(o / n, 1),
                  "old_all": [round(x, 3) for x in v["old"]], "new_all": [round(x, 3) for x in v["new"]]}
    # the compiled design alone (tables drawn beforehand): interactions per CPU second
    from normlab._rng import spawn
    from normlab.calibration.prediction.engine_kernel import _run_design
    from normlab.theory.criteria import published_max_round

    tabs = fit.tables(draws, rng=1)
    cfg = dict(n_agents=24, within_rounds=30, n_runs_consensus=40, n_runs_flip=16, max_rounds=200,
               committed=list(range(24)), directions=[("Q", "M"), ("M", "Q")], consensus=True, strength=True,
               assume_monotone=True, level=0.5, design_runs=10, max_round=published_max_round(fit.meta.get("llm"), 24),
               names=fit.names, memory=fit.memory)
    from normlab.theory import strategy_game

    def batch():  # baseline in the same run: one big strategy_game batch of flip-sweep-like runs
        return strategy_game(tabs[0], n_agents=24, memory=fit.memory, n_runs=20000, committed=6, committed_name="Q",
                             initial="consensus:M", stop="max", max_interactions=24 * 30, progress=False, rng=1)

    batch()
    ks, bs = [], []
    for _ in range(reps):
        ks.append(_cpu(lambda: _run_design(tabs, list(range(draws)), spawn(2, 1)[0], cfg)))
        bs.append(_cpu(batch))
    n_int = int(ks[0][1]["interactions"].sum())
    kr = statistics.median(n_int / k[0] / 1e6 for k in ks)
    br = statistics.median(int(b[1].n_interactions.sum()) / b[0] / 1e6 for b in bs)
    out["design_kernel"] = {"cpu_s": round(statistics.median(k[0] for k in ks), 3), "interactions": n_int,
                            "M_per_cpu_s": round(kr, 1), "strategy_game_batch_M_per_cpu_s": round(br, 1),
                            "design_vs_batch": round(kr / br, 2)}
    a, b = results[("predict", "old")], results[("predict", "new")]
    out["predict"]["same_critical_mass"] = a.critical_mass() == b.critical_mass()
    e, z = results[("predict_run_effects", "old")], results[("predict_run_effects", "new")]
    out["predict_run_effects"]["identical"] = bool(e.flips.equals(z.flips) and e.critical_mass() == z.critical_mass())
    # issue 32's target: predict(load_fit("llama31_70b_QM_H5"), n_agents=24, n_draws=200), run effects played
    out["predict_llama31_200_draws_cpu_s"] = out["predict_run_effects"]["new_cpu_s"]
    out.update(_where_predict_spends(fit, draws, reps))
    out["predict"]["overturn_M_new"] = [b.critical_mass()["overturn_M"][q] for q in ("estimate", "low", "high")]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--model", choices=sorted(SETTINGS), default="llama31")
    ap.add_argument("--no-strength", action="store_true")
    ap.add_argument("--engines", action="store_true", help="time the old and new prediction engines only")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    if args.engines:
        print(json.dumps(bench_engines(args.reps, args.draws), indent=2))
        return 0
    import logging

    from normlab.calibration.fit.logit import import_pymc

    import_pymc()  # its daily ArviZ notice silenced
    logging.getLogger("pymc").setLevel(logging.WARNING)
    from normlab.calibration import counts_from_log, fit_hierarchical, predict, select_runs

    llm, H, n_fit, n_pred = SETTINGS[args.model]
    times = {}
    t = time.perf_counter()
    if (AINORMS / "llama31_data.zip").exists():
        from normlab.llm_runs.published.ainorms import load_ainorms

        log = load_ainorms(AINORMS, kinds="baseline", files=["*_Q_M_*"])
        log = select_runs(log, names=("Q", "M"), memory=H, n_agents=n_fit, model=llm)
        source = str(AINORMS)
    else:  # synthetic stand-in of the same size
        from normlab.calibration import load_fit
        from normlab.schema import GameLog
        from normlab.theory import strategy_game

        table = load_fit(f"{'llama31_70b' if args.model == 'llama31' else 'llama3_70b'}_QM_H{H}").mean_table()
        res = strategy_game(table, n_agents=n_fit, memory=H, n_runs=40, stop="streak", max_interactions=n_fit * 200,
                            record_decisions=True, rng=1)
        lg = res.to_log()
        runs = lg.runs.assign(kind="baseline")
        log = GameLog(lg.decisions, runs)
        source = "synthetic (shipped mean table)"
    times["load"] = time.perf_counter() - t
    t = time.perf_counter()
    counts = counts_from_log(log, names=("Q", "M"))
    times["count_states"] = time.perf_counter() - t
    t = time.perf_counter()
    fit = fit_hierarchical(counts, rng=1)
    times["fit_hierarchical"] = time.perf_counter() - t
    times["nuts_sampling_only"] = fit.diagnostics["sampling_seconds"]
    t = time.perf_counter()
    fit.sample_tables(args.draws, rng=2)
    times["draw_tables"] = time.perf_counter() - t
    t = time.perf_counter()
    pred = predict(fit, n_agents=n_pred, n_draws=args.draws, strength=not args.no_strength, rng=3)
    times["predict"] = time.perf_counter() - t
    times["fit_plus_predict"] = times["fit_hierarchical"] + times["predict"]
    out = {"model": llm, "source": source, "memory": H, "n_agents_predicted": n_pred, "draws": args.draws,
           "decisions": counts.n_decisions, "states_observed": int(counts.observed.sum()),
           "seconds": {k: round(v, 2) for k, v in times.items()},
           "critical_mass": {k: [v["estimate"], v["low"], v["high"]] for k, v in pred.critical_mass().items()},
           "p_consensus": pred.p_consensus(), "diagnostics": fit.diagnostics}
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
