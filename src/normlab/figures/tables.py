"""Tables 1, S1, S2, S3 and S5 of Flint Ashery, Aiello & Baronchelli (2025), with the published
values beside normlab's.

- **Table 1**: Llama-3.1's strategy in its first three interactions with {Q, M}: p(M) and p(Q)
  for the empty memory (10 000 first moves), the four one-entry memories and the eight two-entry
  memories probed (1000 answers each), with the interaction-level exact binomial test of the
  caption (the probed states of an interaction pooled, as equally likely).
- **Table S1**: first moves with empty memory, strong (M) and weak (Q) counts, exact binomial test.
- **Table S2**: consensus of the 40 Q/M runs, strong and weak.
- **Table S3**: critical masses (committed agents) to overturn M and Q, by the published
  ensemble rule (the authors' code) and by the per-run reading of the Methods.
- **Table S5**: per probed memory of Table 1, the exact binomial test of neutrality (p-dagger)
  and the one-tailed bootstrap test (p-double-dagger: 70 % subsamples, 10 000 times).

Table S5's p-dagger follows the authors' ``analyse_individual_bias.py``: one-sided, in the
direction of the observed bias; ``two_sided=True`` gives the two-sided test of the prose
("exact Binomial test with a null probability of p = 0.5").

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Tables
S1-S3, S5, Supplementary Text "Statistical Tests for Table 1"; ``analyse_individual_bias.py``,
``plotter.ipynb`` (MIT).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from normlab._rng import spawn
from normlab.calibration import counts_from_probes, strategy_asymmetry
from normlab.llm_runs import bootstrap_p

from . import _published as PUB
from ._common import MODELS, FigureSkipped, archives, check_model, missing_note, with_notes
from .fig2 import consensus_counts, first_move_counts
from .fig3 import critical_masses
from .registry import figure

__all__ = ["table1_data", "tableS1_data", "tableS2_data", "tableS3_data", "tableS5_data", "paper_memory"]

QM = ("Q", "M")


def paper_memory(state: str) -> str:
    """The paper's notation of a memory state: ``"M,Q;Q,M"`` -> ``"{1: M,Q; 2: Q,M}"``."""
    if not state:
        return "{}"
    return "{" + "; ".join(f"{k}: {e}" for k, e in enumerate(state.split(";"), start=1)) + "}"


def _strategy_probes(data, model: str, what: str) -> pd.DataFrame:
    pr = archives(data).probes
    if pr.empty:
        raise FigureSkipped(f"{what}: no probe files in the data")
    pr = pr[(pr["model"] == model) & (pr["names"] == "Q,M") & pr["valid"]]
    if not (pr["probe"] == "strategy").any():
        raise FigureSkipped(f"{what}: no strategy probes (*_bias_test_*) of {model} in the data (published for "
                            "Llama-3.1 only, in llama31_data.zip)")
    return pr


def _counts(pr: pd.DataFrame) -> pd.DataFrame:
    c = pr.groupby(["memory_state", "memory_len"])["name"].agg(
        n="size", k_M=lambda s: int((s == "M").sum()), k_Q=lambda s: int((s == "Q").sum())).reset_index()
    c["p_M"] = c["k_M"] / c["n"]
    c["p_Q"] = c["k_Q"] / c["n"]
    return c.sort_values(["memory_len", "memory_state"]).reset_index(drop=True)


@figure("table1", "Table 1: Llama-3.1's strategy in its first three interactions", draw=False)
def table1_data(data=None, *, model: str = "Llama-3.1-70B-Instruct") -> pd.DataFrame:
    """Table 1: the strategy in the first three interactions, from the published probes.

    Returns
    -------
    pandas.DataFrame
        One row per probed memory: ``interaction`` (memory length + 1), ``memory`` (paper
        notation), ``memory_state`` (normlab's), ``n``, ``k_M``, ``p_M``, ``p_Q``, ``favours``,
        ``p_interaction`` (exact binomial test of the interaction's pooled answers),
        ``published_name`` and ``published`` (the values printed in the text, where any).
    """
    check_model(model)
    pr = _strategy_probes(data, model, "Table 1")
    c = _counts(pr)
    by_len = strategy_asymmetry(counts_from_probes(pr, names=QM, memory=2)).by_length.set_index("memory_len")
    c.insert(0, "interaction", c["memory_len"] + 1)
    c.insert(1, "memory", c["memory_state"].map(paper_memory))
    c["favours"] = np.where(c["p_M"] > 0.5, "M", np.where(c["p_M"] < 0.5, "Q", "-"))
    c["p_interaction"] = c["memory_len"].map(by_len["p_binom"])
    pub = {st: (nm, v) for (nm, st), v in PUB.TABLE_1.items()}
    c["published_name"] = c["memory_state"].map(lambda s: pub.get(s, (None, None))[0])
    c["published"] = c["memory_state"].map(lambda s: pub.get(s, (None, np.nan))[1])
    c = c.drop(columns="memory_len")
    i2 = c[c["interaction"] == 2].set_index("memory_state")
    stay = (i2.loc["M,M", "k_M"] + i2.loc["Q,Q", "k_Q"]) / (i2.loc["M,M", "n"] + i2.loc["Q,Q", "n"])
    switch = (i2.loc["M,Q", "k_Q"] + i2.loc["Q,M", "k_M"]) / (i2.loc["M,Q", "n"] + i2.loc["Q,M", "n"])
    i3 = c[c["interaction"] == 3]
    p_int = c.groupby("interaction")["p_interaction"].first()
    notes = [f"interaction-level p: {', '.join(f'{i}: {p:.3g}' for i, p in p_int.items())} (caption: 0.116, 0.110, "
             "< 2.2e-16)",
             f"after a success the name is kept {stay:.1%} of the time (text: 99.4%); after a failure it is switched "
             f"{switch:.1%} (text: 97.3%)",
             f"interaction 3: {int((i3['favours'] == 'M').sum())} of {len(i3)} probed memories favour M (text: 5 of 8)"]
    c.attrs.update(model=model, stay=float(stay), switch=float(switch))
    return with_notes(c, notes)


@figure("tableS5", "Table S5: tests of the memories of Table 1", draw=False)
def tableS5_data(data=None, *, model: str = "Llama-3.1-70B-Instruct", two_sided: bool = False, n_boot: int = 10_000,
                 rng=42) -> pd.DataFrame:
    """Table S5: tests of each probed memory of Table 1.

    Parameters
    ----------
    data : path or Archives, optional
    model : str
    two_sided : bool
        p-dagger two-sided (the prose) instead of one-sided in the observed direction (the code).
    n_boot : int
        Bootstrap subsamples of p-double-dagger (10 000).
    rng : seed
        The authors seeded NumPy with 42.

    Returns
    -------
    pandas.DataFrame
        ``memory``, ``memory_state``, ``n``, ``k_M``, ``p_M``, ``p_dagger``, ``p_double_dagger``,
        ``biased`` (p-dagger < 0.05), ``more_extreme_possible`` (p-double-dagger > 0.05).
    """
    check_model(model)
    from scipy.stats import binomtest

    c = _counts(_strategy_probes(data, model, "Table S5"))
    c = c[c["memory_len"] > 0].reset_index(drop=True)
    pd_, pdd = [], []
    for r, child in zip(c.itertuples(), spawn(rng, len(c))):
        alt = "two-sided" if two_sided else ("greater" if r.p_M > 0.5 else "less")
        pd_.append(binomtest(int(r.k_M), int(r.n), 0.5, alternative=alt).pvalue)
        pdd.append(bootstrap_p((int(r.k_Q), int(r.k_M)), n_boot=n_boot, rng=child))
    out = pd.DataFrame({"memory": c["memory_state"].map(paper_memory), "memory_state": c["memory_state"], "n": c["n"],
                        "k_M": c["k_M"], "p_M": c["p_M"], "p_dagger": pd_, "p_double_dagger": pdd})
    out["biased"] = out["p_dagger"] < 0.05
    out["more_extreme_possible"] = out["p_double_dagger"] > 0.05
    out.attrs.update(two_sided=two_sided)
    return with_notes(out, [f"{int(out['biased'].sum())} of {len(out)} memories biased (p-dagger < 0.05; "
                            f"{'two' if two_sided else 'one'}-sided); p-double-dagger > 0.05 for "
                            f"{int(out['more_extreme_possible'].sum())} of {len(out)} (paper: all, in both)"])


@figure("tableS1", "Table S1: first moves with empty memory", draw=False)
def tableS1_data(data=None) -> pd.DataFrame:
    """Table S1: first moves with empty memory, strong (M) vs weak (Q), with the published counts.

    Returns
    -------
    pandas.DataFrame
        ``model``, ``strong``, ``weak``, ``n``, ``p_value`` (two-sided exact binomial),
        ``published_strong``, ``published_weak``, ``published_p``.
    """
    fm = first_move_counts(data, names="Q,M")
    if fm.empty:
        raise FigureSkipped("Table S1: no first-move probes over {Q, M} in the data")
    rows = []
    for m, g in fm.groupby("model", sort=False):
        g = g.set_index("name")
        ps, pw = PUB.TABLE_S1[m]
        rows.append({"model": m, "strong": int(g.loc["M", "count"]), "weak": int(g.loc["Q", "count"]),
                     "n": int(g.loc["M", "n"]), "p_value": float(g.loc["M", "p_value"]), "published_strong": ps,
                     "published_weak": pw, "published_p": PUB.TABLE_S1_P[m]})
    df = pd.DataFrame(rows)
    return with_notes(df, [missing_note("Table S1", set(df["model"]))])


@figure("tableS2", "Table S2: consensus of the Q/M runs", draw=False)
def tableS2_data(data=None) -> pd.DataFrame:
    """Table S2: consensus of the Q/M runs (N = 24, H = 5), strong (M) vs weak (Q).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``strong``, ``weak``, ``no_consensus``, ``n_runs``, ``published_strong``,
        ``published_weak``.
    """
    cc = consensus_counts(data, names="Q,M")
    if cc.empty:
        raise FigureSkipped("Table S2: no Q/M baseline runs (N = 24, H = 5) in the data")
    rows = []
    for m, g in cc.groupby("model", sort=False):
        k = dict(zip(g["name"], g["runs"]))
        ps, pw = PUB.TABLE_S2[m]
        rows.append({"model": m, "strong": k.get("M", 0), "weak": k.get("Q", 0), "no_consensus": k.get(None, 0),
                     "n_runs": int(g["n_runs"].iloc[0]), "published_strong": ps, "published_weak": pw})
    df = pd.DataFrame(rows)
    return with_notes(df, [missing_note("Table S2", set(df["model"]))])


@figure("tableS3", "Table S3: critical masses", draw=False)
def tableS3_data(data=None) -> pd.DataFrame:
    """Table S3: committed agents needed to overturn a consensus on M (strong) and on Q (weak).

    Returns
    -------
    pandas.DataFrame
        ``model``, ``n_agents``, ``memory``, ``majority``, ``published_rule`` (the authors'
        ensemble rule, their window), ``per_run`` (smallest tested count where half the runs flip
        within 30 rounds), ``c50`` (logistic 50 % point), ``window``, ``counts`` (tested),
        ``runs`` (committed-minority runs), ``published`` (Table S3).
    """
    cms = critical_masses(data)
    if not cms:
        raise FigureSkipped("Table S3: no committed-minority runs (swap files) in the data")
    rows = []
    for m, (e, N, H) in cms.items():
        pub = dict(zip(("M", "Q"), PUB.TABLE_S3[m]))
        for maj in ("M", "Q"):
            r = e.estimate(maj)
            rows.append({"model": m, "n_agents": N, "memory": H, "majority": maj, "published_rule": r["published"],
                         "per_run": r["first_count"], "c50": r["c50"], "window": r["max_round"],
                         "counts": ",".join(str(c) for c in r["counts"]), "runs": r["n_runs"], "published": pub[maj]})
    df = pd.DataFrame(rows)
    agree = (df["published_rule"] == df["published"]).all()
    return with_notes(df, [f"published rule reproduces Table S3 for every model at hand: {bool(agree)}",
                           missing_note("Table S3", set(df["model"]), MODELS)])
