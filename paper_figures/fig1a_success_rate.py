"""Seed 003 Fig. 1A: success rate per population round, LLM runs vs the minimal naming game.

Theory: minimal naming game, N = 24, W = 10, averaged over 10,000 runs (dashed line in the
paper). LLM curves: the published Llama-3 / Llama-3.1 runs with ten names (read from
../shared/data/ai-norms when present; the figure shows theory only otherwise).

Usage:  python paper_figures/fig1a_success_rate.py [--runs 10000] [--out fig1a.png] [--data DIR]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 1A.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from normlab.theory import minimal_naming_game

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ai-norms"
TEN = "Q,M,X,Y,F,J,P,R,C,D"


def theory_curve(runs: int, rounds: int, seed: int) -> pd.DataFrame:
    res = minimal_naming_game(24, n_words=10, n_runs=runs, rng=seed)
    sr = res.success_rate(n_rounds=rounds)
    return sr.assign(source="minimal naming game (W = 10)")


def llm_curves(data: Path, rounds: int) -> pd.DataFrame:
    from normlab.llm_runs import load_ainorms
    from normlab.llm_runs.published.ainorms import mean_success_by_round

    frames = []
    log = load_ainorms(data, kinds="baseline")
    for model in sorted(log.runs["model"].unique()):
        sub = log.select(model=model, names=TEN, memory=5, n_agents=24)
        if len(sub.runs) == 0:
            continue
        curve = mean_success_by_round(sub).iloc[:rounds]
        frames.append(pd.DataFrame({"round": curve.index, "success_rate": curve.to_numpy(),
                                    "source": f"{model} ({len(sub.runs)} runs)"}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--seed", type=int, default=2025)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=Path("fig1a_success_rate.png"))
    args = ap.parse_args(argv)
    df = theory_curve(args.runs, args.rounds, args.seed)
    if (args.data / "llama31_data.zip").exists():
        df = pd.concat([df, llm_curves(args.data, args.rounds)], ignore_index=True)
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(6, 4))
    for src, sub in df.groupby("source", sort=False):
        style = dict(color="k", ls="--") if src.startswith("minimal") else {}
        ax.plot(sub["round"], sub["success_rate"], label=src, **style)
    ax.set(xlabel="population round (N interactions)", ylabel="success rate", ylim=(0, 1.02),
           title="Spontaneous emergence of conventions (N = 24, W = 10)")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    th = df[df["source"].str.startswith("minimal")].set_index("round")["success_rate"]
    print(f"theory: success {th.loc[15]:.3f} at round 15, {th.loc[17]:.3f} at round 17 (paper: 0.93, 0.96)")
    for src, sub in df.groupby("source"):
        hit = sub.loc[sub["success_rate"] >= 0.95, "round"]
        print(f"{src:45s} first round with success >= 0.95: {int(hit.iloc[0]) if len(hit) else None}")
    print(f"wrote {args.out}")
    return df


if __name__ == "__main__":
    main()
