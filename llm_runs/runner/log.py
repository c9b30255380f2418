"""Building a run's tidy tables (:class:`normlab.schema.GameLog`, calls, ledger) from its journal
in bounded memory, and writing them into the run directory.

The journal is walked twice (:class:`~normlab.llm_runs.journal.JournalReader`). The first walk
keeps where each run's interactions are (8 bytes each), the per-run sums of its requests and
which optional columns hold any value at all. The second reads the interactions back run after
run and the requests in order, :data:`CHUNK_ROWS` rows at a time; each chunk is built exactly as
the one in-memory table of earlier versions was built, and written as one Parquet row group. So
the tables are those of the in-memory builder, value for value and dtype for dtype, while memory
stays flat whatever the length of the run (a million decisions: about the memory of one chunk).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from normlab.schema import decisions_frame, end_consensus, rebuild_decisions, runs_frame

from .. import journal as jr
from ..journal import JOURNAL_FILE, Journal, JournalReader, finish_session
from .groups import agent_groups
from .ledger import LedgerTotals, label_of, ledger_chunk, prices_of, served_models
from .result import LLMRunResult
from .settings import GameSettings
from .state import RunState, run_setup

#: Rows (decisions, or requests) per chunk and Parquet row group: what the builder holds at once.
CHUNK_ROWS = 4096

#: The tables of a run directory, in the order they are written.
TABLE_FILES = ("decisions.parquet", "runs.parquet", "calls.parquet", "ledger.parquet")

# decision columns turned into Python objects (None where empty) as in a GameLog
_DEC_OBJECT = ("names_shown", "prompt_hash", "invalid_reason", "raw_text", "probs", "group", "model")


def build_result(s: GameSettings, journal, directory: Path | None, client_prices=(0.0, 0.0),
                 *, elapsed=0.0, replayed=0, stopped: str | None = None, models: dict | None = None) -> LLMRunResult:
    """Build the tidy tables of all runs from the journal (:class:`Journal` or
    :class:`JournalReader`), write them into ``directory`` (in memory without one) and return
    the result, which reads them back when asked."""
    reader = journal.reader() if isinstance(journal, Journal) else journal
    models = models or served_models(directory)
    built = _build(s, reader, directory, client_prices, models)
    return LLMRunResult(runs=built.runs, settings=s.to_dict(), directory=directory, elapsed=elapsed,
                        replayed=replayed, stopped=stopped, totals=built.totals, groups=built.groups,
                        tables=built.buffers)


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
    """Close the session in the manifest (the tables are written by :func:`build_result`)."""
    if res.directory is None:
        return
    if outcome is not None:
        finish_session(res.directory, outcome=outcome, tables=RUN_TABLES, totals=res.totals)


# ----------------------------------------------------------------------------- the first walk
@dataclass
class _RunCalls:
    n: int = 0
    ptok: int = 0
    ctok: int = 0
    cost: float = 0
    latency: array = field(default_factory=lambda: array("d"))


# decision / call columns from the journal fields that fill them
_DEC_FROM = {"name": ("name", "partner_name"), "names_shown": ("names_shown",), "prompt_hash": ("prompt_hash",),
             "probs": ("probs",), "invalid_reason": ("invalid_reason",), "text": ("raw_text",)}
_CALL_FROM = {"purpose": "purpose", "prompt_hash": "prompt_hash", "partial": "partial", "text": "text",
              "top": "top_logprobs", "finish_reason": "finish_reason", "errors": "errors"}


def _filled(s: GameSettings, ix: jr.JournalIndex, groups, models) -> tuple[set, set]:
    """The decision and call columns that hold a value somewhere (from the index)."""
    labels, asked = groups
    dec = {c for f in ix.side_filled for c in _DEC_FROM[f]}
    if ix.min_agent is not None and 0 <= ix.min_agent < len(labels):
        g = labels[ix.min_agent]  # only injected committed agents (the highest ids) have no group
        if g is not None:
            dec.add("group")
            if (models.get(g) or asked.get(g) or s.model) is not None:
                dec.add("model")
    return dec, {_CALL_FROM[f] for f in ix.call_filled}


# ----------------------------------------------------------------------------- chunks
def _decision_piece(s: GameSettings, k: int, recs: list, committed_ids: list, memories: dict, t0: int,
                    groups, models) -> pd.DataFrame:
    """The decision rows of interactions ``recs`` of run ``k`` (from ``t0``), built as one run's
    table was: :func:`normlab.schema.rebuild_decisions` from each player's memory before them."""
    labels, asked = groups
    players = np.array([(r.i, r.j) for r in recs], dtype=np.int64).reshape(-1, 2)
    answers = [r.names for r in recs]
    d = rebuild_decisions(players, answers, run=k, n_agents=s.n_agents, memory=s.memory,
                          committed=committed_ids, initial_memory=memories, t0=t0)
    c = jr.decision_columns(jr.interaction_sides([r.record for r in recs]))
    nan = np.nan
    d["names_shown"] = c["names_shown"]
    d["prompt_hash"] = c["prompt_hash"]
    d["p_name"] = [nan if x is None else x for x in c["p_name"]]
    d["covered_mass"] = [nan if x is None else x for x in c["covered_mass"]]
    d["probs"] = c["probs"]
    d["p_approx"] = pd.array(c["p_approx"], dtype="boolean")
    d["cache_hit"] = pd.array(c["cache_hit"], dtype="boolean")
    d["llm_calls"] = np.array(c["llm_calls"], dtype=np.int64)
    d["reasks"] = np.array(c["reasks"], dtype=np.int64)
    d["invalid_reason"] = c["invalid_reason"]
    d["raw_text"] = c["text"]
    d["latency_s"] = [float(x) for x in c["latency"]]
    d["prompt_tokens"] = np.array(c["prompt_tokens"], dtype=np.int64)
    d["completion_tokens"] = np.array(c["completion_tokens"], dtype=np.int64)
    d["group"] = [labels[a] for a in d["agent"]]
    d["model"] = [None if g is None else (models.get(g) or asked.get(g) or s.model) for g in d["group"]]
    return d


def _decision_chunk(pieces: list) -> pd.DataFrame:
    """Pieces as one table: text columns as Python objects (None where empty), the schema's dtypes."""
    dec = pd.concat(pieces, ignore_index=True) if len(pieces) != 1 else pieces[0]
    for c in _DEC_OBJECT:
        dec[c] = dec[c].astype(object).where(dec[c].notna(), None)
    return decisions_frame(dec)


def _calls_chunk(c: dict) -> pd.DataFrame:
    """The calls table of requests (:func:`normlab.llm_runs.journal.call_columns`)."""
    nan = np.nan
    return pd.DataFrame({
        "call": c["id"], "run": c["run"], "t": c["t"], "agent": c["agent"], "purpose": c["purpose"],
        "prompt_hash": c["prompt_hash"], "partial": c["partial"], "text": c["text"],
        "top_logprobs": [json.dumps(x) if x is not None else None for x in c["top"]],
        "finish_reason": c["finish_reason"],
        "prompt_tokens": c["prompt_tokens"], "completion_tokens": c["completion_tokens"],
        "cached_tokens": c["cached_tokens"],
        "latency_s": [nan if x is None else x for x in c["latency"]],
        "attempts": c["attempts"],
        "errors": ["; ".join(e) or None for e in c["errors"]],
    })


def _full_call() -> dict:
    """A request with every optional field set (to learn each column's type when it holds values)."""
    res = SimpleNamespace(text="x", top=[["x", -1.0]], tokens=None, finish_reason="stop", prompt_tokens=1,
                          completion_tokens=1, cached_tokens=0, latency=0.0, attempts=1, errors=["x"])
    return jr.call_columns([jr.call_record(id=1, run=0, t=0, agent=0, purpose="sample", key="x", prompt_hash="x",
                                           partial="x", result=res)])


def _full_decisions(s: GameSettings, groups, models) -> pd.DataFrame:
    """Two decision rows with every optional field set (to learn each column's type when it holds values)."""
    name = s.names[0]
    ex = jr.exact_decision(shown="x", prompt_hash="x", probs=[0.5] * len(s.names), covered_mass=1.0, approx=False,
                           name=name, invalid_reason="x", p_name=0.5, calls=1, latency=0.0, prompt_tokens=1,
                           completion_tokens=1)
    sa = jr.sample_decision(shown="x", prompt_hash="x", name=name, invalid_reason="x", text="x", reasks=0, calls=1,
                            latency=0.0, prompt_tokens=1, completion_tokens=1)
    side = jr.Decision({**sa.record, **ex.record})
    rec = jr.Interaction(jr.interaction_record(0, 0, 0, 1, (side, side)))
    d = _decision_piece(s, 0, [rec], [], {}, 0, ({0: "x", 1: "x"}, {"x": "x"}), {})
    return _decision_chunk([d])


# ----------------------------------------------------------------------------- Parquet
class _Retype(Exception):
    """The index's reading of which columns hold values was wrong (a journal not written by this
    module's writer): the table is built again with what was seen."""

    def __init__(self, filled: set):
        self.filled = filled


class _Sink:
    """One table written chunk by chunk as Parquet row groups, typed as one whole table would be:
    a column that holds no value anywhere keeps the null type its chunks give it; one that holds
    values somewhere takes, in every chunk, the type (and pandas metadata) of a filled column."""

    def __init__(self, dest, filled: set, full: pd.DataFrame | None):
        self.dest, self.filled, self.full = dest, set(filled), full
        self.writer = None
        self.schema = None
        self.seen: set = set()  # columns seen holding a value

    def _schema(self, t):
        import pyarrow as pa

        if self.full is None:
            return t.schema
        full = pa.Table.from_pandas(self.full, preserve_index=False).schema
        meta = json.loads(t.schema.metadata[b"pandas"])
        full_meta = {c["name"]: c for c in json.loads(full.metadata[b"pandas"])["columns"]}
        fields = []
        for f, c in zip(t.schema, meta["columns"]):
            if pa.types.is_null(f.type) and f.name in self.filled:
                f = full.field(f.name)
                c.update({k: full_meta[f.name][k] for k in ("pandas_type", "numpy_type", "metadata")})
            fields.append(f)
        return pa.schema(fields, metadata={**t.schema.metadata, b"pandas": json.dumps(meta).encode()})

    def write(self, chunk: pd.DataFrame) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        t = pa.Table.from_pandas(chunk, preserve_index=False)
        if self.full is not None:
            for f in t.schema:
                if not pa.types.is_null(f.type) and t.column(f.name).null_count < t.num_rows:
                    self.seen.add(f.name)
            if self.schema is not None and any(pa.types.is_null(self.schema.field(c).type) for c in self.seen):
                raise _Retype(self.filled | self.seen)
        if self.writer is None:
            self.schema = self._schema(t)
            self.writer = pq.ParquetWriter(self.dest, self.schema)
        self.writer.write_table(t.cast(self.schema))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def check(self) -> None:
        """Every column typed as holding values did (else :class:`_Retype`)."""
        if self.full is not None and self.filled - self.seen:
            raise _Retype(self.seen)


# ----------------------------------------------------------------------------- the second walk
@dataclass
class _Built:
    runs: pd.DataFrame
    totals: dict
    groups: dict | None
    buffers: dict


class _GroupCounts:
    """What the summary shows per group: model, uncommitted decisions, invalid ones, names."""

    def __init__(self):
        self.g: dict = {}

    def add(self, unc: pd.DataFrame) -> None:
        for g, x in unc.groupby("group", sort=False):
            e = self.g.setdefault(g, {"model": str(x["model"].iloc[0]), "decisions": 0, "invalid": 0, "names": {}})
            e["decisions"] += int(len(x))
            e["invalid"] += int((~x["valid"]).sum())
            for n, v in x["name"].value_counts(sort=False).items():
                e["names"][n] = e["names"].get(n, 0) + int(v)

    def summary(self) -> dict:
        return {str(g): {**{k: e[k] for k in ("model", "decisions", "invalid")},
                         "names": {str(n): v for n, v in sorted(e["names"].items(), key=lambda kv: -kv[1])}}
                for g, e in self.g.items()}


def _build(s: GameSettings, reader: JournalReader, directory: Path | None, prices, models) -> _Built:
    """The tables built from the journal (:func:`_build_tables`); written whole or not at all: a
    failure (a full disk) leaves no temporary copy behind, and the tables in place untouched."""
    try:
        return _build_tables(s, reader, directory, prices, models)
    except BaseException:
        if directory is not None:
            for f in TABLE_FILES:
                with contextlib.suppress(OSError):
                    os.unlink(directory / (f + ".tmp"))
        raise


def _build_tables(s: GameSettings, reader: JournalReader, directory: Path | None, prices, models) -> _Built:
    groups = agent_groups(s)
    ix = reader.index(s.runs)
    dec_filled, call_filled = _filled(s, ix, groups, models)
    buffers: dict = {}
    dest = {}
    for f in TABLE_FILES:
        if directory is None:
            dest[f] = buffers[f] = io.BytesIO()
        else:
            dest[f] = directory / (f + ".tmp")
    while True:
        try:
            runs, gcounts = _write_decisions(s, reader, ix, dest["decisions.parquet"], groups, models, dec_filled,
                                             directory)
            break
        except _Retype as exc:
            dec_filled = exc.filled
            if directory is None:
                dest["decisions.parquet"] = buffers["decisions.parquet"] = io.BytesIO()
    while True:
        try:
            totals, run_calls = _write_calls(s, reader, ix, dest, buffers, groups, models, prices, call_filled)
            break
        except _Retype as exc:
            call_filled = exc.filled
            if directory is None:
                for f in ("calls.parquet", "ledger.parquet"):
                    dest[f] = buffers[f] = io.BytesIO()
    for k, row in enumerate(runs):
        rc = run_calls[k]
        row.update({"llm_calls": rc.n, "prompt_tokens": rc.ptok, "completion_tokens": rc.ctok,
                    "cost_usd": rc.cost / 1e6,
                    "mean_latency_s": float(np.mean(rc.latency)) if rc.n else np.nan})
    runs_df = runs_frame(pd.DataFrame(runs))
    runs_df.to_parquet(dest["runs.parquet"], index=False)
    if directory is not None:  # all four in place together, each whole
        _never_fewer_rows(directory, dest)
        for f in TABLE_FILES:
            os.replace(dest[f], directory / f)
    else:
        for b in buffers.values():
            b.seek(0)
    g = gcounts.summary() if s.groups else None
    return _Built(runs=runs_df, totals=totals, groups=g, buffers=buffers)


def _never_fewer_rows(directory: Path, new: dict) -> None:
    """Refuse to replace tables by ones with fewer decisions or requests (the journal they were
    built from holds less than the one behind the tables in place): the new ones are removed, the
    old ones kept."""
    import pyarrow.parquet as pq

    for f in ("decisions.parquet", "calls.parquet"):
        old = directory / f
        if not old.exists():
            continue
        try:
            n_old = pq.ParquetFile(old).metadata.num_rows
        except Exception:  # unreadable old table: nothing to keep
            continue
        n_new = pq.ParquetFile(new[f]).metadata.num_rows
        if n_new < n_old:
            for p in new.values():
                with contextlib.suppress(OSError):
                    os.unlink(p)
            raise ValueError(
                f"{old} holds {n_old} rows and the journal now gives only {n_new}: the journal holds less than the "
                "tables built from it before (it was edited, truncated or replaced); the tables are kept -- "
                "restore the journal, or move the directory aside and start again")


def _write_decisions(s, reader, ix, dest, groups, models, filled, directory) -> tuple[list, _GroupCounts]:
    """The decisions table, run after run in chunks; each run's row of the runs table (its request
    sums are added by :func:`_write_calls`) and the per-group counts."""
    sink = _Sink(dest, filled, _full_decisions(s, groups, models))
    gcounts = _GroupCounts()
    pieces, n_rows, runs = [], 0, []
    try:
        for k in range(s.runs):
            keys = ix.inter[k]
            n_k = len(keys)
            committed_set, initial = run_setup(s, k)
            committed_ids = sorted(committed_set)
            st = RunState(s, committed_set, initial)
            flip_t, mem_cons = np.nan, None
            tail, L = [], 3 * s.n_agents
            unc_n = hits = reasks = invalid = 0
            records = reader.at(keys)
            step = max(1, CHUNK_ROWS // 2)
            for t0 in range(0, max(n_k, 1), step):
                recs = [jr.Interaction(r) for _, r in zip(range(step), records)]
                memories = {}
                for r in recs:
                    for a in (r.i, r.j):
                        if a not in memories:
                            memories[a] = list(st.mem[a])
                d = _decision_piece(s, k, recs, committed_ids, memories, t0, groups, models)
                for r in recs:
                    st.apply(r.i, r.j, *r.names)
                    if st.flipped and np.isnan(flip_t):
                        flip_t = float(st.t - 1)
                    if mem_cons is None:
                        mem_cons = st.memory_consensus_name()
                piece = _decision_chunk([d])
                unc = piece[~piece["committed"]]
                unc_n += int(len(unc))
                hits += int(unc["cache_hit"].fillna(False).sum())
                reasks += int(unc["reasks"].sum())
                invalid += int((~unc["valid"]).sum())
                gcounts.add(unc)
                if n_k >= L:
                    last = piece[piece["t"] >= n_k - L]
                    if len(last):
                        tail.append(last[["t", "success", "valid", "committed", "name"]])
                pieces.append(piece)
                n_rows += len(piece)
                if n_rows >= CHUNK_ROWS:
                    sink.write(_decision_chunk(pieces))
                    pieces, n_rows = [], 0
            end = ix.ended.get(k)
            cons = end_consensus(pd.concat(tail, ignore_index=True), s.n_agents) if tail else None
            runs.append({
                "run": k, "model": s.model, "kind": s.kind, "names": ",".join(s.names), "n_agents": s.n_agents,
                "memory": s.memory, "committed_count": s.committed, "committed_name": s.committed_name,
                "initial": s.initial, "n_interactions": n_k, "consensus": cons, "consensus_rule": "end_window",
                "source_file": str(directory / JOURNAL_FILE) if directory is not None else None,
                "mode": s.mode, "template": s.template, "stop": s.stop, "max_interactions": s.max_interactions,
                "stop_reason": end.reason if end else None, "finished": end is not None,
                "decisions": unc_n, "llm_calls": 0, "cache_hits": hits, "reasks": reasks,
                "wrap": s.wrap, "parse": s.parse, "max_reasks": str(s.max_reasks), "sampler": json.dumps(s.sampler()),
                "name_order": s.name_order, "committed_placement": s.committed_placement,
                "committed_mode": s.committed_mode, "committed_ids": ",".join(str(a) for a in committed_ids),
                "invalid": invalid, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
                "memory_consensus": mem_cons, "flipped": bool(st.flipped), "flip_time": flip_t,
                "mean_latency_s": np.nan,
            })
        if pieces or sink.schema is None:
            sink.write(_decision_chunk(pieces))
    finally:
        sink.close()
    sink.check()
    return runs, gcounts


def _write_calls(s, reader, ix, dest, buffers, groups, models, prices, filled) -> tuple[dict, dict]:
    """The calls table (journal order) and the ledger (request id order), chunk by chunk; the
    ledger's totals and each run's request sums (added in journal order, as one table's were)."""
    labels = groups[0]
    calls_sink = _Sink(dest["calls.parquet"], filled, _calls_chunk(_full_call()))
    ledger_sink = _Sink(dest["ledger.parquet"], set(), None)
    totals = LedgerTotals()
    run_calls = {k: _RunCalls() for k in range(s.runs)}
    carry, last_id, in_order = None, None, True
    ids = array("q")
    keys = ix.calls
    try:
        for lo in range(0, max(len(keys), 1), CHUNK_ROWS):
            c = jr.call_columns(reader.at(keys[lo:lo + CHUNK_ROWS]))
            for name in ("id", "run", "t", "agent"):
                col = c[name]
                if not all(type(x) is int for x in col) and not (
                        name == "id" and all(type(x) is int or x is None for x in col)):
                    bad = next(x for x in col if type(x) is not int)
                    raise ValueError(f"a journal request record has {name} {bad!r}, not an integer; the journal is "
                                     "corrupt or was edited")
            for cid in c["id"]:
                cid = 0 if cid is None else cid
                ids.append(cid)
                if last_id is not None and cid < last_id:
                    in_order = False
                last_id = cid
            for run, agent, pt, ct, lat in zip(c["run"], c["agent"], c["prompt_tokens"], c["completion_tokens"],
                                               c["latency"]):
                rc = run_calls.get(run)
                if rc is not None:
                    g = labels[agent] if 0 <= agent < len(labels) else "all"
                    pr = prices_of(prices, g)
                    rc.n += 1
                    rc.ptok += pt
                    rc.ctok += ct
                    rc.cost += pt * pr[0] + ct * pr[1]
                    rc.latency.append(0.0 if lat is None else lat)
            calls_sink.write(_calls_chunk(c))
            if in_order:
                led, carry = ledger_chunk(s, c, prices, models, carry, groups)
                ledger_sink.write(led)
                totals.add(led)
    finally:
        calls_sink.close()
        ledger_sink.close()
    calls_sink.check()
    if not in_order:  # requests journaled out of id order: the ledger again, in id order
        order = array("q", (keys[i] for i in sorted(range(len(keys)), key=ids.__getitem__)))
        if isinstance(dest["ledger.parquet"], io.BytesIO):
            dest["ledger.parquet"] = buffers["ledger.parquet"] = io.BytesIO()
        ledger_sink = _Sink(dest["ledger.parquet"], set(), None)
        totals, carry = LedgerTotals(), None
        try:
            for lo in range(0, len(order), CHUNK_ROWS):
                c = jr.call_columns(reader.at(order[lo:lo + CHUNK_ROWS]))
                led, carry = ledger_chunk(s, c, prices, models, carry, groups)
                ledger_sink.write(led)
                totals.add(led)
        finally:
            ledger_sink.close()
    return totals.totals(), run_calls
