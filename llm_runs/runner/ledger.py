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


LEDGER_COLUMNS = ("call", "run", "t", "agent", "group", "model", "purpose", "prompt_tokens", "completion_tokens",
                  "cached_tokens", "tokens", "cost_usd", "cum_prompt_tokens", "cum_completion_tokens", "cum_tokens",
                  "cum_cost_usd", "latency_s", "attempts")
_CUM = {"cum_prompt_tokens": "prompt_tokens", "cum_completion_tokens": "completion_tokens", "cum_tokens": "tokens",
        "cum_cost_usd": "cost_usd"}


def build_ledger(s: GameSettings, calls: list[dict], prices=(0.0, 0.0), models: dict | None = None) -> pd.DataFrame:
    """The token/cost ledger: one row per LLM request, in the order they were made.

    Columns: ``call``, ``run``, ``t``, ``agent``, ``group``, ``model``, ``purpose``,
    ``prompt_tokens``, ``completion_tokens``, ``cached_tokens`` (as the server reported them),
    ``tokens`` (prompt + completion), ``cost_usd`` (at ``prices``: USD per million prompt /
    completion tokens, per group for a mixed population), and the running totals
    ``cum_prompt_tokens``, ``cum_completion_tokens``, ``cum_tokens``, ``cum_cost_usd``; then
    ``latency_s`` and ``attempts``. (A run's ledger is written in chunks by
    :mod:`normlab.llm_runs.runner.log`, each made by :func:`ledger_chunk`: the same rows.)

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
    calls = [c if isinstance(c, jr.Call) else jr.Call(c) for c in calls]
    calls = sorted(calls, key=lambda c: 0 if c.id is None else c.id)
    df, _ = ledger_chunk(s, jr.call_columns([c.record for c in calls]), prices, models)
    return df


def ledger_chunk(s: GameSettings, calls: dict, prices=(0.0, 0.0), models: dict | None = None,
                 carry: dict | None = None, groups=None) -> tuple[pd.DataFrame, dict]:
    """The ledger rows of requests (``calls``: :func:`normlab.llm_runs.journal.call_columns`, in
    the order given) with running totals that go on from ``carry`` (the totals after the chunk
    before; ``None``: the first chunk), and the totals to carry on. ``groups``:
    :func:`agent_groups` of ``s`` (computed when ``None``)."""
    labels, asked = agent_groups(s) if groups is None else groups
    models = models or {}
    n = len(labels)
    of_group = {}  # group -> (model, prices)
    grp, mdl, cost = [], [], []
    for a, pt, ct in zip(calls["agent"], calls["prompt_tokens"], calls["completion_tokens"]):
        g = labels[a] if isinstance(a, int) and 0 <= a < n else "all"
        if g not in of_group:
            of_group[g] = (models.get(g) or asked.get(g) or s.model, prices_of(prices, g))
        model, (pi, po) = of_group[g]
        grp.append(g)
        mdl.append(model)
        cost.append((int(pt) * pi + int(ct) * po) / 1e6)
    pt = [int(x) for x in calls["prompt_tokens"]]
    ct = [int(x) for x in calls["completion_tokens"]]
    cols = {"call": calls["id"], "run": calls["run"], "t": calls["t"], "agent": calls["agent"], "group": grp,
            "model": mdl, "purpose": calls["purpose"], "prompt_tokens": pt, "completion_tokens": ct,
            "cached_tokens": [int(x) for x in calls["cached_tokens"]], "tokens": [a + b for a, b in zip(pt, ct)],
            "cost_usd": cost, "latency_s": [np.nan if x is None else x for x in calls["latency"]],
            "attempts": calls["attempts"]}
    df = pd.DataFrame(cols) if len(pt) else pd.DataFrame([], columns=list(cols))
    nxt = {}
    for cum, col in _CUM.items():
        x = df[col]
        if carry is None:
            df[cum] = x.cumsum()
        else:  # the running sum goes on from the last total, added in the order of one long table
            df[cum] = pd.Series(np.r_[np.asarray([carry[cum]], dtype=x.dtype), x.to_numpy()]).cumsum().to_numpy()[1:]
        nxt[cum] = df[cum].iloc[-1] if len(df) else (0 if carry is None else carry[cum])
    return df[list(LEDGER_COLUMNS)], nxt


class LedgerTotals:
    """:func:`ledger_totals` added up chunk by chunk (a ledger too long to hold at once)."""

    def __init__(self):
        self._all = self._zero()
        self._groups: dict = {}

    @staticmethod
    def _zero() -> dict:
        return {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "cost_usd": 0.0}

    @staticmethod
    def _add(t: dict, d: pd.DataFrame) -> None:
        t["requests"] += int(len(d))
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            t[k] += int(d[k].sum())
        t["cost_usd"] += float(d["cost_usd"].sum())

    def add(self, chunk: pd.DataFrame) -> None:
        self._add(self._all, chunk)
        for k, d in chunk.groupby("group", sort=False):
            if k not in self._groups:
                self._groups[k] = {"model": str(d["model"].iloc[0]), **self._zero()}
            self._add(self._groups[k], d)

    def totals(self) -> dict:
        out = dict(self._all)
        if len(self._groups) > 1:
            out["by_group"] = {str(k): dict(v) for k, v in self._groups.items()}
        return out


def ledger_totals(ledger: pd.DataFrame) -> dict:
    """Totals of a ledger (for the manifest and summaries): requests, tokens and cost, overall
    and per group and model."""
    t = LedgerTotals()
    t.add(ledger)
    return t.totals()


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
