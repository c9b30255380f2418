"""Building a run's tidy tables (:class:`normlab.schema.GameLog`, calls, ledger) from its journal,
and writing them into the run directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from normlab.schema import GameLog, end_consensus, rebuild_decisions

from .. import journal as jr
from ..journal import JOURNAL_FILE, Journal, finish_session
from .groups import agent_groups
from .ledger import build_ledger, label_of, ledger_totals, prices_of, served_models
from .result import LLMRunResult
from .settings import GameSettings
from .state import RunState, run_setup


def build_result(s: GameSettings, journal: Journal, directory: Path | None, client_prices=(0.0, 0.0),
                 *, elapsed=0.0, replayed=0, stopped: str | None = None, models: dict | None = None) -> LLMRunResult:
    """Rebuild the tidy tables of all runs from the journal records."""
    records = journal.all_records()
    inter, ended = jr.replay(records, s.runs)
    calls = jr.calls(records)
    calls_by_run = {}
    for c in calls:
        calls_by_run.setdefault(c.run, []).append(c)
    labels, asked = agent_groups(s)
    models = models or served_models(directory)
    decs, runs = [], []
    for k in range(s.runs):
        recs = inter[k]
        committed_set, initial_memory = run_setup(s, k)
        committed_ids = sorted(committed_set)
        players = np.array([(r.i, r.j) for r in recs], dtype=np.int64).reshape(-1, 2)
        answers = [r.names for r in recs]
        d = rebuild_decisions(players, answers, run=k, n_agents=s.n_agents, memory=s.memory,
                              committed=committed_ids, initial_memory=initial_memory)
        sides = [side for r in recs for side in r.sides]
        d["names_shown"] = [x.names_shown for x in sides]
        d["prompt_hash"] = [x.prompt_hash for x in sides]
        d["p_name"] = [np.nan if x.p_name is None else x.p_name for x in sides]
        d["covered_mass"] = [np.nan if x.covered_mass is None else x.covered_mass for x in sides]
        d["probs"] = [x.probs for x in sides]
        d["p_approx"] = pd.array([x.p_approx for x in sides], dtype="boolean")
        d["cache_hit"] = pd.array([x.cache_hit for x in sides], dtype="boolean")
        d["llm_calls"] = np.array([x.llm_calls for x in sides], dtype=np.int64)
        d["reasks"] = np.array([x.reasks for x in sides], dtype=np.int64)
        d["invalid_reason"] = [x.invalid_reason for x in sides]
        d["raw_text"] = [x.text for x in sides]
        d["latency_s"] = [float(x.latency) for x in sides]
        d["prompt_tokens"] = np.array([x.prompt_tokens for x in sides], dtype=np.int64)
        d["completion_tokens"] = np.array([x.completion_tokens for x in sides], dtype=np.int64)
        d["group"] = [labels[a] for a in d["agent"]]
        d["model"] = [None if g is None else (models.get(g) or asked.get(g) or s.model) for g in d["group"]]
        decs.append(d)
        unc = d[~d["committed"]]
        st = RunState(s, committed_set, initial_memory)
        flip_t, mem_cons = np.nan, None
        for r in recs:
            st.apply(r.i, r.j, *r.names)
            if st.flipped and np.isnan(flip_t):
                flip_t = float(st.t - 1)
            if mem_cons is None:
                mem_cons = st.memory_consensus_name()
        rc = calls_by_run.get(k, [])
        ptok = sum(c.prompt_tokens for c in rc)
        ctok = sum(c.completion_tokens for c in rc)
        cost = sum(c.prompt_tokens * prices_of(client_prices, label_of(labels, c))[0]
                   + c.completion_tokens * prices_of(client_prices, label_of(labels, c))[1] for c in rc) / 1e6
        end = ended.get(k)
        runs.append({
            "run": k, "model": s.model, "kind": s.kind, "names": ",".join(s.names), "n_agents": s.n_agents,
            "memory": s.memory, "committed_count": s.committed, "committed_name": s.committed_name,
            "initial": s.initial, "n_interactions": len(recs), "consensus": end_consensus(d, s.n_agents), "consensus_rule": "end_window",
            "source_file": str(directory / JOURNAL_FILE) if directory is not None else None,
            "mode": s.mode, "template": s.template, "stop": s.stop,
            "stop_reason": end.reason if end else None, "finished": end is not None,
            "decisions": int(len(unc)), "llm_calls": len(rc),
            "cache_hits": int(unc["cache_hit"].fillna(False).sum()), "reasks": int(unc["reasks"].sum()),
            "wrap": s.wrap, "parse": s.parse, "max_reasks": str(s.max_reasks), "sampler": json.dumps(s.sampler()),
            "name_order": s.name_order, "committed_placement": s.committed_placement,
            "committed_mode": s.committed_mode, "committed_ids": ",".join(str(a) for a in committed_ids),
            "invalid": int((~unc["valid"]).sum()), "prompt_tokens": ptok, "completion_tokens": ctok,
            "cost_usd": cost,
            "memory_consensus": mem_cons, "flipped": bool(st.flipped), "flip_time": flip_t,
            "mean_latency_s": float(np.mean([0.0 if c.latency is None else c.latency for c in rc])) if rc else np.nan,
        })
    dec = pd.concat(decs, ignore_index=True)
    for c in ("names_shown", "prompt_hash", "invalid_reason", "raw_text", "probs", "group", "model"):
        dec[c] = dec[c].astype(object).where(dec[c].notna(), None)
    log = GameLog(dec, pd.DataFrame(runs))
    cf = pd.DataFrame({
        "call": [c.id for c in calls], "run": [c.run for c in calls], "t": [c.t for c in calls],
        "agent": [c.agent for c in calls], "purpose": [c.purpose for c in calls],
        "prompt_hash": [c.prompt_hash for c in calls], "partial": [c.partial for c in calls],
        "text": [c.text for c in calls],
        "top_logprobs": [json.dumps(c.top) if c.top is not None else None for c in calls],
        "finish_reason": [c.finish_reason for c in calls],
        "prompt_tokens": [c.prompt_tokens for c in calls], "completion_tokens": [c.completion_tokens for c in calls],
        "cached_tokens": [c.cached_tokens for c in calls],
        "latency_s": [np.nan if c.latency is None else c.latency for c in calls],
        "attempts": [c.attempts for c in calls],
        "errors": ["; ".join(c.errors) or None for c in calls],
    })
    return LLMRunResult(log=log, calls=cf, settings=s.to_dict(), directory=directory, elapsed=elapsed,
                        replayed=replayed, ledger=build_ledger(s, calls, client_prices, models), stopped=stopped)


#: What each table of a run directory holds (recorded in its manifest).
RUN_TABLES = {
    "decisions.parquet": "one row per agent decision, with the memory state before it (normlab.schema.GameLog)",
    "runs.parquet": "one row per run: outcome, stop reason, calls, tokens, cost",
    "calls.parquet": "one row per LLM request: prompt hash, answer, top logprobs, tokens, latency, retries",
    "ledger.parquet": "one row per LLM request: tokens, cost and their running totals (the token/cost ledger)",
    "journal.jsonl": "append-only record of every request and interaction (resumption replays it)",
    "settings.json": "the run's settings and their hash (a rerun must match them to resume)",
}


def write_tables(res: LLMRunResult, outcome: str | None = None) -> None:
    if res.directory is None:
        return
    res.log.to_parquet(res.directory)
    res.calls.to_parquet(res.directory / "calls.parquet", index=False)
    res.ledger.to_parquet(res.directory / "ledger.parquet", index=False)
    if outcome is not None:
        finish_session(res.directory, outcome=outcome, tables=RUN_TABLES, totals=ledger_totals(res.ledger))
