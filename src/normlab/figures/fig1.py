"""Fig. 1 of Flint Ashery, Aiello & Baronchelli (2025): the spontaneous emergence of conventions.

- **1A**: success rate per population round of the LLM populations (N = 24, W = 10, H = 5; thick:
  mean of the 40 runs, thin: five individual runs), with the minimal naming game (N = 24, W = 10)
  per interaction in the inset (10 000 runs, 1000 interactions, x = interaction / N).
- **1B**: production probability of each of the ten names in one Llama-3.1 run (run 6 of the
  published file, as in the authors' code), bins of one population round.

Follows the authors' ``plotter.ipynb`` (cells 2-3): run curves padded with 1 after a run stopped
(consensus), to the longest run of all models; the theory is the per-interaction curve of their
``NG_module.py``, whose empty speaker does not keep its invented name (``invent="discard"``). The
caption's "dashed black line" in the main panel is the prose reading: ``theory_line=True`` draws
the per-round theory curve there too; ``invent="keep"`` draws normlab's default naming game.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 1;
Ariel-Flint-Ashery/AI-norms at commit e57aeef, ``plotter.ipynb`` cells 2-3, ``NG_module.py``,
``run_NG.py`` (MIT).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normlab.llm_runs.published.ainorms import first_round_reaching
from normlab.theory import minimal_naming_game

from ._common import (COLORS, MARKERS, MODELS, SHORT, TEN, FigureSkipped, archives, check_model, integer_ticks,
                      missing_note, pad_mean, success_by_run, with_notes)
from .registry import figure

__all__ = ["fig1a_data", "fig1a_draw", "fig1b_data", "fig1b_draw"]


def _theory(runs: int, rounds: int, interactions: int, invent: str, rng):
    res = minimal_naming_game(24, n_words=10, n_runs=runs, rng=rng, invent=invent, per_interaction=True,
                              progress=False)
    inset = res.success_by_interaction(n_interactions=interactions)
    per_round = res.success_rate(n_rounds=rounds)
    return inset, per_round


@figure("fig1a",
        "Fig. 1A: success rate of LLM populations, minimal naming game per interaction (inset)",
        published="FIGURE_1.pdf")
def fig1a_data(data=None, *, small: bool = False, runs: int | None = None, invent: str = "discard",
               interactions: int = 1000, n_thin: int = 5, rng=2025) -> pd.DataFrame:
    """Curves of Fig. 1A: LLM success rates (mean and individual runs) and the theory.

    Parameters
    ----------
    data : path or Archives, optional
        Published AI-norms data (default: found by :func:`normlab.figures.find_data`).
    small : bool
        1000 theory runs instead of 10 000.
    runs : int, optional
        Theory runs (overrides ``small``).
    invent : {"discard", "keep"}
        Theory rule for an empty speaker: the authors' ``NG_module.py`` (default) or normlab's.
    interactions : int
        Interactions of the inset (1000, as the authors').
    n_thin : int
        Individual runs drawn per model (the first five, as the authors').
    rng : seed

    Returns
    -------
    pandas.DataFrame
        Tidy: ``panel`` (``main``/``inset``), ``source`` (model or ``theory``), ``curve``
        (``mean``/``run``), ``run`` (published run key; -1 for means), ``round`` (population round;
        interaction / N in the inset), ``success_rate``. ``attrs["notes"]``: first round with mean
        success >= 0.95 per model, models without data.

    Raises
    ------
    FigureSkipped
        No published run with ten names.
    """
    if invent not in ("discard", "keep"):
        raise ValueError(f"invent must be 'discard' (the authors' NG_module.py) or 'keep'; got {invent!r}")
    arch = archives(data)
    per_model = {}
    for m in MODELS:
        log = arch.runs(model=m, kind="baseline", names=TEN, memory=5, n_agents=24)
        if log is not None:
            per_model[m] = log
    if not per_model:
        raise FigureSkipped(f"Fig. 1A: no run with the ten names {TEN} in {arch.path}")
    curves = {m: success_by_run(log) for m, log in per_model.items()}
    longest = max(int(c["round"].max()) for c in curves.values())
    frames, notes = [], []
    for m, c in curves.items():
        src = per_model[m].runs.set_index("run")["source_run"]
        mean = pad_mean(c, "success_rate", pad=1.0, length=longest)
        frames.append(mean.drop(columns="n_runs").assign(panel="main", source=m, curve="mean", run=-1))
        thin = c[c["run"].map(src) < n_thin].assign(panel="main", source=m, curve="run")
        frames.append(thin.assign(run=thin["run"].map(src)))
        r95 = first_round_reaching(mean.set_index("round")["success_rate"], 0.95)
        notes.append(f"{m}: {len(src)} runs, mean success first >= 0.95 at round {r95}")
    n = runs if runs is not None else (1000 if small else 10_000)
    inset, per_round = _theory(n, longest, interactions, invent, rng)
    frames.append(pd.DataFrame({"panel": "inset", "source": "theory", "curve": "mean", "run": -1,
                                "round": inset["round"], "success_rate": inset["success_rate"]}))
    frames.append(pd.DataFrame({"panel": "main", "source": "theory", "curve": "mean", "run": -1,
                                "round": per_round["round"], "success_rate": per_round["success_rate"]}))
    th = per_round.set_index("round")["success_rate"]
    notes.append(f"minimal naming game ({n} runs, invent={invent}): success {th.loc[15]:.3f} at round 15, "
                 f"{th.loc[17]:.3f} at round 17 (VALIDATION.md: 0.93, 0.96)")
    notes.append(missing_note("Fig. 1A", per_model))
    df = pd.concat(frames, ignore_index=True)[["panel", "source", "curve", "run", "round", "success_rate"]]
    df.attrs["theory_runs"] = n
    df.attrs["invent"] = invent
    return with_notes(df, notes)


def fig1a_draw(df: pd.DataFrame, *, theory_line: bool = False, ax=None):
    """Draw Fig. 1A from :func:`fig1a_data`.

    Parameters
    ----------
    df : pandas.DataFrame
    theory_line : bool
        Also draw the per-round theory curve as a dashed black line in the main panel (the
        caption's reading; the authors' code shows the theory only in the inset).
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 4.6))
    else:
        fig = ax.figure
    main = df[df["panel"] == "main"]
    models = [m for m in MODELS if m in set(main["source"])]
    for m in models:
        for _, r in main[(main["source"] == m) & (main["curve"] == "run")].groupby("run"):
            ax.plot(r["round"], r["success_rate"], lw=0.5, color=COLORS[m], alpha=0.4)
    for m in models:
        r = main[(main["source"] == m) & (main["curve"] == "mean")]
        ax.plot(r["round"], r["success_rate"], "-", marker=".", ms=7, lw=2.2, color=COLORS[m], label=SHORT[m])
    if theory_line:
        r = main[main["source"] == "theory"]
        ax.plot(r["round"], r["success_rate"], "--", color="k", lw=1.5, label="minimal naming game")
    ax.set(xlabel="Population Round", ylabel="Success Rate", ylim=(-0.03, 1.05))
    integer_ticks(ax)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, fontsize=9)
    ins = ax.inset_axes([0.62, 0.12, 0.34, 0.3])
    r = df[df["panel"] == "inset"]
    ins.plot(r["round"], r["success_rate"], color="k", lw=1)
    xmax = float(r["round"].max())
    ins.set(ylim=(-0.02, 1.05), yticks=[0, 1], xlim=(-1, xmax + 1), xticks=[0, 25] if xmax >= 25 else [0, int(xmax)])
    ins.tick_params(labelsize=8)
    ins.set_title(f"minimal naming game, per interaction ({df.attrs.get('theory_runs', '')} runs)", fontsize=7)
    fig.suptitle("Fig. 1A  Spontaneous emergence (N = 24, W = 10, H = 5)", fontsize=10, y=0.995)
    fig.tight_layout()
    return fig


@figure("fig1b", "Fig. 1B: word competition in one Llama-3.1 run", published="FIGURE_1.pdf")
def fig1b_data(data=None, *, model: str = "Llama-3.1-70B-Instruct", run: int = 6, errors: bool = False) -> pd.DataFrame:
    """Production probability of each name per population round in one run (Fig. 1B).

    Parameters
    ----------
    data : path or Archives, optional
    model : str
        Model of the run (the paper: Llama-3.1-70B-Instruct).
    run : int
        Run key in the published ten-name file (the authors' code draws run 6).
    errors : bool
        Add the standard error of each binned proportion (``sem``; the caption mentions error
        bars, the authors' code draws none).

    Returns
    -------
    pandas.DataFrame
        ``name``, ``round``, ``share``, ``n`` (productions in the round) and with ``errors``
        ``sem``.
    """
    check_model(model)
    arch = archives(data)
    log = arch.need_runs("Fig. 1B", model=model, kind="baseline", names=TEN, memory=5, n_agents=24)
    src = log.runs.set_index("run")["source_run"]
    rid = src.index[src == run]
    if len(rid) == 0:
        raise FigureSkipped(f"Fig. 1B: {model} has no ten-name run {run} (runs {sorted(src)[:3]}...)")
    d = log.decisions[log.decisions["run"] == rid[0]]
    N = int(log.runs.set_index("run").loc[rid[0], "n_agents"])
    rnd = d["t"].to_numpy() // N
    nb = int(rnd.max()) + 1
    tot = np.bincount(rnd, minlength=nb).astype(float)
    rows = []
    for nm in TEN.split(","):
        k = np.bincount(rnd, weights=(d["name"].to_numpy() == nm).astype(float), minlength=nb)
        p = k / tot
        row = pd.DataFrame({"name": nm, "round": np.arange(1, nb + 1), "share": p, "n": tot.astype(int)})
        if errors:
            row["sem"] = np.sqrt(p * (1 - p) / tot)
        rows.append(row)
    df = pd.concat(rows, ignore_index=True)
    cons = log.runs.set_index("run").loc[rid[0], "consensus"]
    df.attrs["title"] = f"{model}, ten names, run {run}: consensus on {cons}"
    return with_notes(df, [f"Fig. 1B: {model} run {run} reached consensus on {cons} after {nb} rounds"])


def fig1b_draw(df: pd.DataFrame, *, ax=None):
    """Draw Fig. 1B from :func:`fig1b_data` (one marker and colour per name, legend beside the axes).

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.6, 4.0))
    else:
        fig = ax.figure
    for j, (nm, r) in enumerate(df.groupby("name", sort=False)):
        kw = dict(marker=MARKERS[j % len(MARKERS)], ms=6, lw=1.8, label=nm, color=f"C{j}")
        if "sem" in r:
            ax.errorbar(r["round"], r["share"], yerr=r["sem"], capsize=2, **kw)
        else:
            ax.plot(r["round"], r["share"], **kw)
    ax.set(xlabel="Population Round", ylabel="Production Probability", ylim=(-0.03, 1.05))
    integer_ticks(ax)
    ax.legend(title="name", loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.suptitle(f"Fig. 1B  Word competition: {df.attrs.get('title', '')}", fontsize=10)
    fig.tight_layout()
    return fig
