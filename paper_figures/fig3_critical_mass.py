"""Seed 003 Fig. 3B / Table S3: critical mass of a committed minority, predicted vs observed.

For Llama-3.1 (N = 24, H = 5) and Llama-3 (N = 48, H = 3): the flip probability against the
committed count, for a majority on M attacked by Q and on Q attacked by M. The band is the
prediction of normlab's strategy table fitted on the model's *baseline* runs only (the shipped
tables, 200 posterior draws); the points are the published committed-minority runs (when
../shared/data/ai-norms is present), with Clopper-Pearson intervals. Published critical masses
(Table S3): Llama-3.1 10 (M) and 0 (Q); Llama-3 6 (M) and 1 (Q). The curves are the per-run
reading (P(flip) within the window); the printed critical masses give both the published
ensemble rule (normlab.theory.criteria, the reading of Table S3) and the per-run 50% point.

Usage:  python paper_figures/fig3_critical_mass.py [--draws 200] [--out fig3.png] [--data DIR]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 3,
Table S3, Methods "Committed Minorities".
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import seaborn as sns

from normlab import calibration as cal

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ai-norms"
MODELS = {
    "Llama-3.1-70B-Instruct": dict(table="llama31_70b_QM_H5", N=24, H=5, window=30, published={"M": 10, "Q": 0}),
    # Llama-3's committed runs last 1000 interactions (about 20 rounds of 48 agents)
    "Llama-3-70B-Instruct": dict(table="llama3_70b_QM_H3", N=48, H=3, window=20, published={"M": 6, "Q": 1}),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=Path("fig3_critical_mass.png"))
    args = ap.parse_args(argv)
    log = None
    if (args.data / "llama31_data.zip").exists():
        from normlab.llm_runs import load_ainorms

        log = load_ainorms(args.data, kinds=["swap", "evolved"], files=["*_Q_M_*", "*_M_Q_*"])
    sns.set_theme(style="whitegrid")
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for row, (llm, m) in zip(axes, MODELS.items()):
        pred = cal.predict(cal.load_fit(m["table"]), n_agents=m["N"], n_draws=args.draws, within_rounds=m["window"],
                           consensus=False, strength=False, rng=args.seed)
        emp = None
        if log is not None:
            sub = cal.select_runs(log, names=("Q", "M"), memory=m["H"], n_agents=m["N"], model=llm, fit_on=["swap", "evolved"])
            emp = cal.empirical_critical_mass(sub, within_rounds=m["window"], rng=args.seed)
        cm = pred.summary()["critical_mass"]
        for ax, maj in zip(row, ("M", "Q")):
            cal.plot_flip_curves(pred, emp, majority=maj, n_agents=m["N"], memory=m["H"], ax=ax,
                                 label=f"{llm}, N = {m['N']}: overturning {maj} (published {m['published'][maj]})")
            c = cm[f"overturn_{maj}"]
            pub, pr = c["published"], c["per_run"]
            obs = "" if emp is None else \
                f", observed (published rule) {emp.estimate(maj, n_agents=m['N'], memory=m['H'])['published']:g}"
            print(f"{llm:24s} overturn {maj}: predicted (published rule, 10-run replications) {pub['estimate']} "
                  f"[{pub['low']}, {pub['high']}], (50% of runs flip) {pr['estimate']} [{pr['low']}, {pr['high']}]; "
                  f"Table S3 {m['published'][maj]}{obs}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
