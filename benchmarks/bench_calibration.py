"""Benchmark of normlab.calibration: fit + full prediction for one model (target < 3 min, 2 cores).

Run from the repository root (needs ../shared/data/ai-norms; falls back to a synthetic log):

    python benchmarks/bench_calibration.py [--draws 200] [--model llama31|llama3]

Prints the wall time of each stage: loading the baseline runs, counting states, the NUTS fit of
the hierarchical model (PyTensor compilation included; the first run on a fresh machine also
compiles PyTensor's C modules -- run with PYTENSOR_FLAGS=compiledir=/tmp/fresh to measure that),
drawing the tables, and the prediction (convergence runs, critical-mass sweeps for both
directions, relative strength) with ``--draws`` posterior draws.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

AINORMS = Path(__file__).resolve().parents[2] / "shared" / "data" / "ai-norms"
SETTINGS = {"llama31": ("Llama-3.1-70B-Instruct", 5, 24, 24), "llama3": ("Llama-3-70B-Instruct", 3, 24, 48)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--model", choices=sorted(SETTINGS), default="llama31")
    ap.add_argument("--no-strength", action="store_true")
    args = ap.parse_args(argv)
    import logging

    import pymc  # noqa: F401

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
