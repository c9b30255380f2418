"""Seed 003 Fig. 1A: success rate per population round, LLM runs vs the minimal naming game.

Theory (the inset, as in the paper): the minimal naming game, N = 24, W = 10, success per
interaction averaged over 10,000 runs, plotted against interaction / N, for the first 1000
interactions. By default the authors' variant (``invent="discard"``: an empty speaker utters a
random name without keeping it, as in their ``NG_module.py`` / ``run_NG.py``); ``--invent keep``
draws normlab's default rules instead. LLM curves (main panel): the published Llama-3 /
Llama-3.1 runs with ten names (read from ../shared/data/ai-norms when present; the main panel
is empty otherwise).

Usage:  python paper_figures/fig1a_success_rate.py [--runs 10000] [--invent discard|keep]
            [--out fig1a.png] [--data DIR]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 1A.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from normlab.theory import minimal_naming_game

DEFAULT_DATA = Path(os.environ.get("NORMLAB_AINORMS", Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ai-norms"))
TEN = "Q,M,X,Y,F,J,P,R,C,D"


def theory_curves(runs: int, rounds: int, seed: int, invent: str, interactions: int = 1000):
    """Per-interaction curve (the inset) and per-round curve of the minimal naming game."""
    res = minimal_naming_game(24, n_words=10, n_runs=runs, rng=seed, invent=invent, per_interaction=True)
    per_int = res.success_by_interaction(n_interactions=interactions)
    per_round = res.success_rate(n_rounds=rounds).assign(source=f"minimal naming game (W = 10, invent={invent})")
    return per_int, per_round


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
    ap.add_argument("--invent", choices=("discard", "keep"), default="discard",
                    help="discard: the authors' NG_module.py (default); keep: normlab's default rules")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--out", type=Path, default=Path("fig1a_success_rate.png"))
    args = ap.parse_args(argv)
    per_int, theory = theory_curves(args.runs, args.rounds, args.seed, args.invent)
    llm = llm_curves(args.data, args.rounds) if (args.data / "llama31_data.zip").exists() else pd.DataFrame()
    sns.set_theme(style="ticks")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    if len(llm):
        for src, sub in llm.groupby("source", sort=False):
            ax.plot(sub["round"], sub["success_rate"], marker="o", ms=3, lw=1.5, label=src)
        ax.legend(frameon=False, fontsize=8, loc="center right", bbox_to_anchor=(1.0, 0.62))
    ax.set(xlabel="Population Round", ylabel="Success Rate", ylim=(-0.02, 1.05), xlim=(0, args.rounds + 1),
           title="Spontaneous emergence of conventions (N = 24, W = 10)")
    sns.despine(ax=ax)
    ins = ax.inset_axes([0.60, 0.10, 0.36, 0.32])
    ins.plot(per_int["round"], per_int["success_rate"], color="k", lw=1)
    ins.set(ylim=(0, 1.02), yticks=[0, 1], xticks=[0, 25])
    ins.tick_params(labelsize=8)
    ins.set_title(f"model ({args.runs:,} runs, per interaction)", fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    th = theory.set_index("round")["success_rate"]
    print(f"theory ({args.invent}): success {th.loc[1]:.3f} in round 1, {th.loc[2]:.3f} in round 2 "
          f"(authors' NG_module.py: 0.058, 0.194); {th.loc[15]:.3f} at round 15, {th.loc[17]:.3f} at round 17")
    df = pd.concat([theory, llm], ignore_index=True)
    for src, sub in df.groupby("source"):
        hit = sub.loc[sub["success_rate"] >= 0.95, "round"]
        print(f"{src:55s} first round with success >= 0.95: {int(hit.iloc[0]) if len(hit) else None}")
    print(f"wrote {args.out}")
    return df, per_int


if __name__ == "__main__":
    main()
