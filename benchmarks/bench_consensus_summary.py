"""Does a prediction's consensus interval hold its own draws' P(consensus on M)?

``predict`` reports P(consensus on each name) as a Beta (:func:`beta_summary`) of the per-draw
frequencies: each posterior draw's probability seen through ``n_runs_consensus`` runs (40 by
default). The interval is meant to be the spread of the draws' probabilities themselves. This
checks it against them, with no fit and no truth: for each shipped fit, a reference prediction
of ``--reference-draws`` draws with ``--reference-runs`` runs each gives the draws' probabilities
(frequencies shrunk by their binomial part, :func:`denoised_probabilities`), and ``--replicates``
predictions with ``R`` runs per draw (each its own seed, so its own draws) give intervals;
reported is the share of the reference draws inside each interval, averaged over replicates
("mass"), at 50 / 80 / 95 %, beside the level. A mass below the level means intervals
narrower than the spread they summarise: coverage of truths drawn from that spread falls short
by as much (docs/validation/calibration.md,
"The user view").

    python benchmarks/bench_consensus_summary.py --json docs/validation/_data/consensus_summary.json

Prints one line per fit and runs per draw; ``--json`` writes ``{"rows": [...], "settings": ...}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

LEVELS = (0.5, 0.8, 0.95)
FITS = ("llama3_70b_QM_H3", "llama3_70b_QM_H5", "llama31_70b_QM_H5")


def _m_counts(fit, n_agents, draws, runs, seed):
    from normlab.calibration import predict

    c = predict(fit, n_agents=n_agents, n_draws=draws, n_runs_consensus=runs, strength=False, committed=[0],
                rng=seed).consensus
    d = c[c["name"] == "M"]
    return d["runs"].to_numpy(float), d["n_runs"].to_numpy(float)


def check(fit_name, *, n_agents=24, draws=200, runs=(40, 120), reference_runs=1000, reference_draws=1000,
          replicates=40, seed=5):
    """Rows of one fit: per ``R`` in ``runs`` the mean mass of the reference draws' P(M) inside the
    intervals of ``replicates`` predictions with ``R`` runs per draw, and the mean interval widths."""
    from scipy.stats import beta as B

    from normlab.calibration import load_fit
    from normlab.calibration.evaluate.scoring_rules import beta_summary, denoised_probabilities

    fit = load_fit(fit_name)
    ss = np.random.SeedSequence(seed)
    ref_seed, *rep_seeds = ss.spawn(1 + replicates)
    ref = denoised_probabilities(*_m_counts(fit, n_agents, reference_draws, reference_runs, ref_seed))
    rows = []
    for R in runs:
        mass = {L: [] for L in LEVELS}
        width = {L: [] for L in LEVELS}
        for s in rep_seeds:
            a, b = beta_summary(*_m_counts(fit, n_agents, draws, R, s))
            for L in LEVELS:
                lo, hi = B.ppf((1 - L) / 2, a, b), B.ppf((1 + L) / 2, a, b)
                mass[L].append(float(np.mean((ref >= lo) & (ref <= hi))))
                width[L].append(float(hi - lo))
        rows.append({"fit": fit_name, "runs_per_draw": int(R), "replicates": int(replicates),
                     "reference_mean": float(ref.mean()),
                     "mass": {str(L): float(np.mean(mass[L])) for L in LEVELS},
                     "mass_min": {str(L): float(np.min(mass[L])) for L in LEVELS},
                     "width": {str(L): float(np.mean(width[L])) for L in LEVELS},
                     "reference_width": {str(L): float(np.subtract(*np.quantile(ref, [(1 + L) / 2, (1 - L) / 2])))
                                         for L in LEVELS}})
    return rows


def _width_ratio(row) -> float:
    """Mean 80 % interval width over the reference draws' own 80 % quantile range."""
    return row["width"]["0.8"] / row["reference_width"]["0.8"]


def markdown_table(js: dict) -> list:
    """The page's table of a stored run."""
    out = ["| fit | runs per draw | P(M) | mass in 50 % | mass in 80 % | mass in 95 % "
           "| width / reference width at 80 % |", "|---|---|---|---|---|---|---|"]
    for r in js["rows"]:
        m = r["mass"]
        out.append(f"| {r['fit']} | {r['runs_per_draw']} | {r['reference_mean']:.3f} | {m['0.5']:.3f} | "
                   f"{m['0.8']:.3f} | {m['0.95']:.3f} | {_width_ratio(r):.2f} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fits", default=",".join(FITS), help="shipped fits, comma-separated")
    ap.add_argument("--n-agents", type=int, default=24)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--runs", default="40,120", help="runs per draw of the checked predictions, comma-separated")
    ap.add_argument("--reference-runs", type=int, default=1000)
    ap.add_argument("--reference-draws", type=int, default=1000)
    ap.add_argument("--replicates", type=int, default=40)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args(argv)
    try:
        runs = tuple(int(x) for x in a.runs.split(","))
    except ValueError:
        ap.error(f"--runs must be comma-separated integers; got {a.runs!r}")
    if min(runs) < 2 or a.reference_runs < 2 or a.replicates < 1 or min(a.draws, a.reference_draws) < 2:
        ap.error("--runs and --reference-runs must be >= 2, --draws and --reference-draws >= 2, --replicates >= 1")
    t0 = time.process_time()
    rows = []
    for f in a.fits.split(","):
        for r in check(f, n_agents=a.n_agents, draws=a.draws, runs=runs, reference_runs=a.reference_runs,
                       reference_draws=a.reference_draws, replicates=a.replicates, seed=a.seed):
            rows.append(r)
            print(f"{r['fit']:<20} R {r['runs_per_draw']:>4}  P(M) {r['reference_mean']:.3f}  mass in "
                  + "  ".join(f"{L:.0%} {r['mass'][str(L)]:.3f}" for L in LEVELS)
                  + f"  width/reference at 80% {_width_ratio(r):.2f}", flush=True)
    settings = {k: v for k, v in vars(a).items() if k not in ("json", "markdown")}
    js = {"rows": rows, "settings": settings, "cpu_seconds": round(time.process_time() - t0, 1)}
    print(f"# {js['cpu_seconds']} CPU s")
    if a.markdown:
        print("\n".join(markdown_table(js)))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(js, fh, indent=1)
    return js


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
