"""Fig. S1 of Flint Ashery, Aiello & Baronchelli (2025): meta-prompting (prompt comprehension).

Accuracy per comprehension question (Table S7: rules ``min``, ``max``, ``actions``, ``payoff``;
time ``round``, ``action_i``, ``points_i``; state ``#_actions``, ``#_points``), for agents of one
published run replayed with their memory. As in the authors' ``plotter.ipynb`` (cells 26-30): the
mean over players of each player's accuracy, error bar = standard deviation of the per-player
accuracies / sqrt(players) (NumPy's population std); Llama-3's file stores only these two numbers.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S1, Table S7,
Supplementary Text "Meta-Prompting"; ``plotter.ipynb`` cells 26-30 (MIT).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ._common import MODELS, SHORT, FigureSkipped, archives, missing_note, with_notes
from .registry import figure

__all__ = ["figS1_data", "figS1_draw", "QUESTIONS"]

#: Question keys in the loader's spelling and the figure's labels, in the paper's order.
QUESTIONS = {"min": "min", "max": "max", "actions": "actions", "payoff": "payoff", "round": "round",
             "action_i": "action_i", "points_i": "points_i", "no_actions": "#_actions", "no_points": "#_points"}


@figure("figS1", "Fig. S1: meta-prompting accuracy", published="SI_FIGURE_meta_prompts.pdf")
def figS1_data(data=None) -> pd.DataFrame:
    """Accuracy per model and comprehension question (Fig. S1).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``question`` (loader key), ``label`` (the figure's), ``accuracy``, ``sem``,
        ``n_players`` (NA for stored summaries), ``n_items``.
    """
    meta = archives(data).meta
    if meta.empty:
        raise FigureSkipped("Fig. S1: no meta-prompting file in the data")
    rows = []
    for m in MODELS:
        d = meta[meta["model"] == m]
        if d.empty:
            continue
        for q, lab in QUESTIONS.items():
            s = d[d["question"] == q]
            if s.empty:
                continue
            if s["correct"].isna().all():  # stored summary (Llama-3)
                rows.append({"model": m, "question": q, "label": lab, "accuracy": float(s["mean"].iloc[0]),
                             "sem": float(s["std"].iloc[0]), "n_players": pd.NA, "n_items": pd.NA})
                continue
            per = s.groupby("player")["correct"].mean().astype(float).to_numpy() if s["player"].notna().all() \
                else np.array([s["correct"].astype(float).mean()])
            rows.append({"model": m, "question": q, "label": lab, "accuracy": float(per.mean()),
                         "sem": float(per.std() / np.sqrt(len(per))), "n_players": len(per), "n_items": len(s)})
    df = pd.DataFrame(rows)
    have = list(dict.fromkeys(df["model"]))
    notes = [f"{m}: lowest accuracy {df[df['model'] == m]['accuracy'].min():.2f} "
             f"({df[df['model'] == m].sort_values('accuracy').iloc[0]['label']})" for m in have]
    return with_notes(df, notes + [missing_note("Fig. S1", have)])


def figS1_draw(df: pd.DataFrame):
    """One panel per model: accuracy and its standard error per question.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    models = [m for m in MODELS if m in set(df["model"])]
    fig, axes = plt.subplots(1, len(models), figsize=(3.6 * len(models) + 0.6, 3.9), sharey=True, squeeze=False)
    labels = list(QUESTIONS.values())
    for ax, m in zip(axes[0], models):
        d = df[df["model"] == m].set_index("label").reindex(labels)
        ax.errorbar(np.arange(len(labels)), d["accuracy"], yerr=d["sem"], fmt="^", color="k", ms=7, capsize=0)
        ax.set_xticks(np.arange(len(labels)), labels, rotation=90)
        ax.set_ylim(0.3, 1.03)
        ax.set_title(SHORT.get(m, m), fontsize=11, fontweight="bold")
        ax.grid(axis="y", color="0.92")
    axes[0, 0].set_ylabel("Response Accuracy")
    fig.supxlabel("Comprehension Questions", fontsize=10)
    fig.suptitle("Fig. S1  Meta-prompting: accuracy per comprehension question (mean over players ± s.e.)",
                 fontsize=10)
    fig.tight_layout()
    return fig
