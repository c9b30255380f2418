"""The token/cost ledger: one row per LLM request, from the journal's call records."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from .. import journal as jr
from ..journal import JOURNAL_FILE, SETTINGS_FILE, read_journal, read_manifest, read_settings
from .groups import agent_groups
from .settings import GameSettings


def prices_of(prices, label) -> tuple:
    if isinstance(prices, dict):
        return prices.get(label) or prices.get("all") or next(iter(prices.values()), (0.0, 0.0))
    return tuple(prices)


def build_ledger(s: GameSettings, calls: list[dict], prices=(0.0, 0.0), models: dict | None = None) -> pd.DataFrame:
    """The token/cost ledger: one row per LLM request, in the order they were made.

    Columns: ``call``, ``run``, ``t``, ``agent``, ``group``, ``model``, ``purpose``,
    ``prompt_tokens``, ``completion_tokens``, ``cached_tokens`` (as the server reported them),
    ``tokens`` (prompt + completion), ``cost_usd`` (at ``prices``: USD per million prompt /
    completion tokens, per group for a mixed population), and the running totals
    ``cum_prompt_tokens``, ``cum_completion_tokens``, ``cum_tokens``, ``cum_cost_usd``; then
    ``latency_s`` and ``attempts``.

    Parameters
    ----------
    s : GameSettings
    calls : list of journal.Call
        The journal's requests (:func:`normlab.llm_runs.journal.calls`; raw call records are read as such).
    prices : (float, float) or dict
        Prices, or ``{group label: prices}``.
    models : dict, optional
        ``{group label: model served}``; default the run's model for every group.
    """
    labels, asked = agent_groups(s)
    models = models or {}
    rows = []
    calls = [c if isinstance(c, jr.Call) else jr.Call(c) for c in calls]
    for c in sorted(calls, key=lambda c: 0 if c.id is None else c.id):
        a = c.agent
        g = labels[a] if isinstance(a, int) and 0 <= a < len(labels) else "all"
        pi, po = prices_of(prices, g)
        pt, ct = int(c.prompt_tokens), int(c.completion_tokens)
        rows.append({"call": c.id, "run": c.run, "t": c.t, "agent": a, "group": g,
                     "model": models.get(g) or asked.get(g) or s.model, "purpose": c.purpose,
                     "prompt_tokens": pt, "completion_tokens": ct, "cached_tokens": int(c.cached_tokens),
                     "tokens": pt + ct, "cost_usd": (pt * pi + ct * po) / 1e6,
                     "latency_s": np.nan if c.latency is None else c.latency, "attempts": c.attempts})
    cols = ["call", "run", "t", "agent", "group", "model", "purpose", "prompt_tokens", "completion_tokens",
            "cached_tokens", "tokens", "cost_usd", "cum_prompt_tokens", "cum_completion_tokens", "cum_tokens",
            "cum_cost_usd", "latency_s", "attempts"]
    df = pd.DataFrame(rows, columns=[c for c in cols if not c.startswith("cum_")])
    df["cum_prompt_tokens"] = df["prompt_tokens"].cumsum()
    df["cum_completion_tokens"] = df["completion_tokens"].cumsum()
    df["cum_tokens"] = df["tokens"].cumsum()
    df["cum_cost_usd"] = df["cost_usd"].cumsum()
    return df[cols]


def ledger_totals(ledger: pd.DataFrame) -> dict:
    """Totals of a ledger (for the manifest and summaries): requests, tokens and cost, overall
    and per group and model."""
    def tot(d):
        return {"requests": int(len(d)), "prompt_tokens": int(d["prompt_tokens"].sum()),
                "completion_tokens": int(d["completion_tokens"].sum()),
                "cached_tokens": int(d["cached_tokens"].sum()), "cost_usd": float(d["cost_usd"].sum())}

    out = tot(ledger)
    if ledger["group"].nunique() > 1:
        out["by_group"] = {str(k): {"model": str(d["model"].iloc[0]), **tot(d)}
                           for k, d in ledger.groupby("group", sort=False)}
    return out


def ledger_for_directory(directory, prices=(0.0, 0.0)) -> pd.DataFrame:
    """The token/cost ledger of any run or probe directory, rebuilt from its journal
    (:func:`build_ledger`; costs at ``prices``, USD per million prompt / completion tokens)."""
    directory = Path(directory)
    stored = read_settings(directory)
    if stored is None:
        raise FileNotFoundError(f"{directory} holds no normlab run or probe (no {SETTINGS_FILE})")
    names = {f.name for f in fields(GameSettings)}
    st = {k: (tuple(v) if isinstance(v, list) else v) for k, v in stored["settings"].items() if k in names}
    s = GameSettings(**st)
    f = directory / JOURNAL_FILE
    calls = jr.calls(read_journal(f)) if f.exists() else []
    return build_ledger(s, calls, prices, served_models(directory))


def label_of(labels, call) -> str | None:
    a = call.agent
    return labels[a] if isinstance(a, int) and 0 <= a < len(labels) else "all"


def served_models(directory) -> dict:
    """``{group label: model}`` as served in the directory's latest session (manifest)."""
    if directory is None:
        return {}
    try:
        m = read_manifest(directory)
    except (ValueError, OSError):
        return {}
    if not m or not m.get("sessions"):
        return {}
    return {e.get("group"): e.get("model") for e in m["sessions"][-1].get("endpoints") or [] if e.get("model")}
