"""Seed 003 Fig. S3: production probability in the minimal naming game with W = 2 and a bias.

A speaker holding both names picks name '1' with probability ``b`` (the bias); b = 0.5 is the
unbiased game. A bias makes the population converge on name '1' faster and more often; the
curves average over runs, so they level off at P(consensus on '1'), which the script prints per
bias. In a finite population that probability is below 1 for a small bias (printed by this script
at b = 0.55: 0.60 for N = 24 with the defaults; 0.89 with --n-agents 400 --runs 2000; 0.998 with
--n-agents 1600 --runs 400): the paper's "inevitable" convergence is the large-N limit.

Usage:  python paper_figures/figS3_production_bias.py [--runs 10000] [--n-agents 24] [--out figS3.png]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S3.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from normlab._rng import spawn
from normlab.theory import minimal_naming_game


def curves(biases, runs: int, rounds: int, seed: int, n_agents: int = 24) -> pd.DataFrame:
    frames = []
    for b, child in zip(biases, spawn(seed, len(biases))):
        res = minimal_naming_game(n_agents, n_words=2, n_runs=runs, production_bias=[1 - b, b], rng=child)
        sh = res.production_share(uncommitted=False, n_rounds=rounds)
        m = sh[sh["name"] == "1"].groupby("round")["share"].mean()
        frames.append(pd.DataFrame({"round": m.index, "p_name_1": m.to_numpy(), "bias": b,
                                    "p_consensus_1": (res.winner == 1).mean()}))
    return pd.concat(frames, ignore_index=True)


def main(argv=None) -> pd.DataFrame:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--n-agents", type=int, default=24, help="population size N (default 24, the paper's)")
    ap.add_argument("--out", type=Path, default=Path("figS3_production_bias.png"))
    args = ap.parse_args(argv)
    biases = np.round(np.arange(0.5, 1.0001, 0.05), 2)
    df = curves(biases, args.runs, args.rounds, args.seed, args.n_agents)
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(df, x="round", y="p_name_1", hue="bias", palette="viridis", ax=ax, legend="full")
    ax.set(xlabel="population round", ylabel="production probability of name '1'", ylim=(0, 1.02),
           title=f"Minimal naming game, W = 2, N = {args.n_agents}: biased production")
    ax.legend(title="bias", fontsize=7, ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(args.out, dpi=150)
    print(df.groupby("bias")["p_consensus_1"].first().rename("P(consensus on '1')").to_string())
    print(f"wrote {args.out}")
    return df


if __name__ == "__main__":
    main()
