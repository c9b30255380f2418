"""README "What normlab reproduces": the table, regenerated from code.

Every normlab value below is computed by this script; the reference values are typed in with
their source, and a row says which flip criterion it uses (see ``normlab.theory.criteria``):
``published`` is the authors' ensemble rule behind Table S3 of Flint Ashery et al. (2025) (``plotter.ipynb`` cells
9-10), ``per_run`` the first-passage reading (50% of runs flip). Values taken from
``../shared/VALIDATION.md`` are labelled as such, not as published.

Usage:
    python paper_figures/reproduction_table.py            # full settings (a few minutes)
    python paper_figures/reproduction_table.py --quick    # small runs, seconds (what the test runs)
    python paper_figures/reproduction_table.py --data DIR # AI-norms archives (default ../shared/data/ai-norms)

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1A, Fig. 2,
Fig. 3, Table S3, Methods; the authors' code Ariel-Flint-Ashery/AI-norms at commit e57aeef
(``plotter.ipynb``); A. Baronchelli et al., PRE 73, 015102 (2006); J. Xie et al., PRE 84,
011130 (2011); D. Centola et al., Science 360, 1116 (2018).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(os.environ.get("NORMLAB_AINORMS") or
                    Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ai-norms")
VAL = "VALIDATION.md"
S3 = "published: Table S3"
TEN = ("Q", "M", "X", "Y", "F", "J", "P", "R", "C", "D")
MODELS = {  # shipped tables fitted on the baseline runs only
    "Llama-3.1": dict(llm="Llama-3.1-70B-Instruct", table="llama31_70b_QM_H5", N=24, H=5, s3={"M": 10, "Q": 0}),
    "Llama-3": dict(llm="Llama-3-70B-Instruct", table="llama3_70b_QM_H3", N=48, H=3, s3={"M": 6, "Q": 1}),
}


def _row(quantity, reference, source, normlab, criterion="—"):
    return {"quantity": quantity, "reference": reference, "source": source, "normlab": normlab, "criterion": criterion}


def _cm(v) -> str:
    return "not reached" if v is None or not np.isfinite(v) else f"{v:g}"


def theory_rows(quick: bool = False, rng: int = 2025) -> list[dict]:
    """Rows computed from the theory models alone."""
    from normlab.theory import centola_critical_mass, critical_fraction, minimal_naming_game

    rows = []
    n = 1000 if quick else 10_000
    res = minimal_naming_game(24, n_words=10, n_runs=n, rng=rng)
    sr = res.success_rate().set_index("round")["success_rate"]
    rows.append(_row(f"minimal NG, N = 24, W = 10: success at rounds 15 / 17 (Fig. 1A theory line; {n} runs)",
                     "0.93 / 0.96", f"{VAL} (read off Fig. 1A)", f"{sr.loc[15]:.3f} / {sr.loc[17]:.3f}"))
    N, n = 1600, (20 if quick else 200)
    res = minimal_naming_game(N, n_runs=n, rng=rng)
    rows.append(_row(f"unlimited pool, N = 1600 ({n} runs): t_max/N^1.5, N_w^max/N^1.5, peak distinct",
                     "0.58–0.62, 0.335, N/2", f"{VAL} (computed prefactors)",
                     f"{res.t_max.mean() / N**1.5:.3f}, {res.n_words_max.mean() / N**1.5:.3f}, "
                     f"{res.n_distinct_max.mean() / N:.3f} N"))
    rows.append(_row("binary agreement, mean-field p_c (Xie et al. 2011)", "0.09789", f"{VAL} (Xie et al., PRE 84)",
                     f"{critical_fraction():.5f} (bisection on the ODE)"))
    ref = {3: 0.111, 5: 0.165, 7: 0.199, 9: 0.223, 11: 0.242, 13: 0.257, 19: 0.288}
    dev = max(abs(centola_critical_mass(M) - v) for M, v in ref.items())
    rows.append(_row("Centola et al. C*_M, M = 3…19 (mean field)", "0.111 … 0.288", f"{VAL} (computed)",
                     f"all within {dev:.1e}"))
    return rows


def data_rows(data: Path, quick: bool = False, rng: int = 2025) -> list[dict]:
    """Rows read from the published AI-norms archives (observed values by each criterion)."""
    from normlab.calibration import empirical_critical_mass, select_runs
    from normlab.llm_runs.published.ainorms import first_round_reaching, load_ainorms, mean_success_by_round

    rows = []
    base = load_ainorms(data, kinds=["baseline"], files=["*_Q_M_*"])
    cons, r95 = [], []
    for key in ("Llama-3", "Llama-3.1"):
        b = select_runs(base, names=("Q", "M"), memory=5, n_agents=24, model=MODELS[key]["llm"], fit_on="baseline")
        cons.append(f"{int((b.runs['consensus'] == 'M').sum())}/{len(b.runs)}")
    rows.append(_row("AI-norms Q/M baselines (N = 24, H = 5): consensus on M (Llama-3, 3.1)", "40/40, 40/40",
                     f"{VAL} (counted in the published runs)", ", ".join(cons) + " (loader)"))
    if not quick:
        ten = load_ainorms(data, kinds=["baseline"], files=["*_" + "_".join(TEN) + "_*"])
        for key in ("Llama-3", "Llama-3.1"):
            b = ten.select(model=MODELS[key]["llm"])
            r95.append(str(first_round_reaching(mean_success_by_round(b), 0.95)))
        rows.append(_row("rounds to 0.95 success, W = 10 (Llama-3, 3.1)", "10, 13", f"{VAL} (from the published runs)",
                         ", ".join(r95) + " (loader)"))
    log = load_ainorms(data, kinds=["swap", "evolved"], files=["*_Q_M_*", "*_M_Q_*"])
    e = empirical_critical_mass(log, n_boot=0 if quick else 500, rng=rng)
    for key in ("Llama-3.1", "Llama-3"):
        m = MODELS[key]
        est = {x: e.estimate(x, n_agents=m["N"], memory=m["H"]) for x in ("M", "Q")}
        rows.append(_row(f"{key} (N = {m['N']}, H = {m['H']}) committed runs: critical mass overturning M / Q "
                         f"(window {est['M']['max_round']} rounds)", f"{m['s3']['M']} / {m['s3']['Q']}", S3,
                         f"{_cm(est['M']['published'])} / {_cm(est['Q']['published'])}", "published"))
        rows.append(_row(f"{key} same runs, smallest count where ≥ 50% of runs flip within 30 rounds (M / Q)", "—",
                         "not reported in the paper", f"{_cm(est['M']['first_count'])} / {_cm(est['Q']['first_count'])}",
                         "per_run"))
    return rows


def prediction_rows(quick: bool = False, rng: int = 2025) -> list[dict]:
    """Rows predicted from the baseline runs only (the shipped fitted tables)."""
    from normlab.calibration import load_fit, predict

    rows = []
    draws = 8 if quick else 200
    for key, m in MODELS.items():
        p = predict(load_fit(m["table"]), n_agents=m["N"], n_draws=draws, n_runs_consensus=10 if quick else 40,
                    strength=False, consensus=key == "Llama-3.1", rng=rng)
        cm = p.critical_mass()
        fmt = {crit: " / ".join(f"{_cm(cm[f'overturn_{x}'][crit]['estimate'])} "
                                f"[{_cm(cm[f'overturn_{x}'][crit]['low'])}, {_cm(cm[f'overturn_{x}'][crit]['high'])}]"
                                for x in ("M", "Q")) for crit in ("published", "per_run")}
        head = f"{key} (N = {m['N']}, H = {m['H']}) predicted from baselines only ({draws} draws)"
        if key == "Llama-3.1":
            pc = p.consensus_summary().set_index("name")
            rows.append(_row(f"{head}: P(consensus on M)", "40/40", f"{VAL} (counted in the published runs)",
                             f"{pc.loc['M', 'probability']:.2f} [{pc.loc['M', 'low']:.2f}, {pc.loc['M', 'high']:.2f}]"))
        rows.append(_row(f"{head}: critical mass overturning M / Q (the paper's design: 10 runs at "
                         f"every count per draw, each run its own effect; window {p.settings['max_round']})", f"{m['s3']['M']} / {m['s3']['Q']}", S3, fmt["published"],
                         "published"))
        rows.append(_row(f"{head}: critical mass overturning M / Q, 50% of runs flip", "—", "not reported in the paper",
                         fmt["per_run"], "per_run"))
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    lines = ["| quantity | reference | reference source | normlab | criterion |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['quantity']} | {r['reference']} | {r['source']} | {r['normlab']} | {r['criterion']} |")
    return "\n".join(lines)


def build(quick: bool = False, data: Path | None = DEFAULT_DATA, predictions: bool = True, rng: int = 2025) -> list[dict]:
    """All rows (data rows only when ``data`` holds the archives)."""
    rows = theory_rows(quick, rng)
    if data is not None and (Path(data) / "llama31_data.zip").exists():
        rows += data_rows(Path(data), quick, rng)
    if predictions:
        rows += prediction_rows(quick, rng)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small runs (seconds); the numbers are noisier")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="AI-norms archives folder")
    ap.add_argument("--no-data", action="store_true", help="skip the rows read from the published archives")
    ap.add_argument("--no-predictions", action="store_true", help="skip the rows predicted from the shipped fits")
    ap.add_argument("--seed", type=int, default=2025)
    args = ap.parse_args(argv)
    rows = build(args.quick, None if args.no_data else args.data, not args.no_predictions, args.seed)
    print(markdown(rows))


if __name__ == "__main__":
    main()
