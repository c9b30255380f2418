"""The study's stage journal, ledger and budget.

``OUT/stages.jsonl`` is append-only: one ``start`` record each time a stage begins (or resumes),
one ``done`` record when it has finished and its results are on disk. A stage with a ``done``
record never runs again; a stage killed before it is resumed by the next run (its LLM work is
journaled by the runner and replayed, so it ends with the same results). The time of a stage is
the sum over its sessions: a finished session's own wall time, and for a session killed midway
the time from its start to the last file it wrote, read when the next session starts (before it
writes: an append-only journal's time moves on with every later session). Its requests and tokens
are counted over every session too: the ledger is recorded at each start.

The ledger reads what the runs and probes journaled under ``OUT/llm`` (requests and tokens), and
the budget (``--budget``) caps everything journaled there: each stage's endpoint gets the budget
less what the other directories spent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path

from normlab.llm_runs import BudgetExhausted
from normlab.llm_runs import journal
from normlab.llm_runs.journal import JOURNAL_FILE, read_journal, write_json_atomic

__all__ = ["StageBook", "ledger", "journal_dirs", "stage_endpoint", "budget_guard", "now_iso", "sha256_file",
           "write_manifest"]

STAGE_FILE = "stages.jsonl"


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def sha256_file(path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------------- ledger
def journal_dirs(root) -> list[Path]:
    """Every run or probe directory with a journal under ``root``."""
    root = Path(root)
    return sorted({j.parent for j in root.rglob(JOURNAL_FILE)}) if root.is_dir() else []


def ledger(directories) -> dict:
    """Requests and tokens journaled in ``directories`` and below them."""
    dirs = sorted({j.parent for d in directories if Path(d).is_dir() for j in Path(d).rglob(JOURNAL_FILE)})
    calls = [c for d in dirs for c in journal.calls(read_journal(d / JOURNAL_FILE))]
    return {"calls": len(calls), "prompt_tokens": int(sum(c.prompt_tokens for c in calls)),
            "completion_tokens": int(sum(c.completion_tokens for c in calls)),
            "cached_tokens": int(sum(c.cached_tokens for c in calls))}


def _spent(dirs, ep) -> tuple[float, float]:
    # what the journals count against a budget, write-ahead reservations of killed requests included
    # (the one count of every runner's budget: llm_runs/journal/budget.py)
    return journal.spent_under(dirs, (ep.price_input, ep.price_output))


def _budget_text(ep) -> str:
    parts = []
    if ep.budget_tokens is not None:
        parts.append(f"{ep.budget_tokens:,.0f} tokens")
    if ep.budget_usd is not None:
        parts.append(f"${ep.budget_usd:,.4f}")
    return " / ".join(parts)


def stage_endpoint(ep, llm_root: Path, own: Path):
    """``ep`` with what is left of the study's budget for the work journaled in ``own`` (the
    runner counts its own directory's spending; the other directories' is taken off here)."""
    if ep.budget_tokens is None and ep.budget_usd is None:
        return ep
    own = Path(own)
    others = [d for d in journal_dirs(llm_root) if d != own and own not in d.parents]
    tok, usd = _spent(others, ep)
    kw = {}
    for key, used in (("budget_tokens", tok), ("budget_usd", usd)):
        cap = getattr(ep, key)
        if cap is not None:
            if cap - used <= 0:
                raise BudgetExhausted(f"the study's budget of {_budget_text(ep)} is spent")
            kw[key] = cap - used
    return dataclasses.replace(ep, **kw)


@contextlib.contextmanager
def budget_guard(ep, llm_root: Path):
    """A stage's :class:`BudgetExhausted` as one message about the study's whole budget."""
    try:
        yield
    except BudgetExhausted:
        if ep.budget_tokens is None and ep.budget_usd is None:
            raise
        dirs = journal_dirs(llm_root)
        tok, usd = _spent(dirs, ep)
        raise BudgetExhausted(f"the study's budget of {_budget_text(ep)} is reached: {tok:,.0f} tokens"
                              + (f" (${usd:,.4f})" if ep.price_input or ep.price_output else "")
                              + f" in {ledger(dirs)['calls']:,} requests are journaled under {llm_root}") from None


# ----------------------------------------------------------------------------- the stage journal
class StageBook:
    """``OUT/stages.jsonl``: which stages have run, when, for how long, at what cost."""

    def __init__(self, out):
        self.out = Path(out)
        self.file = self.out / STAGE_FILE

    def records(self) -> list[dict]:
        """Every complete record (a line torn by a kill is skipped)."""
        if not self.file.exists():
            return []
        out = []
        for line in self.file.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "stage" in rec:
                out.append(rec)
        return out

    def done(self, stage: str) -> dict | None:
        """The ``done`` record of ``stage`` (None: it has not finished)."""
        return next((r for r in self.records() if r["stage"] == stage and r.get("event") == "done"), None)

    def append(self, rec: dict) -> None:
        """One record, whole or not at all as far as readers go (a line torn by a kill is skipped,
        and the next record starts on a line of its own)."""
        self.out.mkdir(parents=True, exist_ok=True)
        line = json.dumps(rec, default=str) + "\n"
        with open(self.file, "ab") as f:
            if f.tell() > 0:
                with open(self.file, "rb") as r:
                    r.seek(-1, os.SEEK_END)
                    if r.read(1) != b"\n":
                        line = "\n" + line
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())

    def timings(self) -> list[dict]:
        """The ``done`` records in stage order."""
        return [r for r in self.records() if r.get("event") == "done"]

    @contextlib.contextmanager
    def run(self, stage: str, dirs=(), *, session: str):
        """Run one stage: a ``start`` record, then (on success) the ``done`` record with the stage's
        wall and CPU time over all its sessions, its requests and tokens; the body fills ``row``
        (``row["result"]``: a small JSON-safe summary kept in the record)."""
        starts = [r for r in self.records() if r["stage"] == stage and r.get("event") == "start"]
        watched = tuple(dirs) + (self.out / "stages",)
        t0, c0 = time.time(), time.process_time()
        before = ledger(dirs)
        start = {"stage": stage, "event": "start", "time": now_iso(), "t": t0, "session": session, "ledger": before}
        if starts:  # the session before this one was killed: its time, read before this one writes
            start["previous_session_s"] = round(_last_write_after(starts[-1]["t"], t0, watched), 3)
        self.append(start)
        row: dict = {}
        yield row
        after = ledger(dirs)
        wall = time.time() - t0
        earlier = _earlier_sessions(starts + [start], watched)
        # requests and tokens over every session (the ledger at the first start; None for a stage
        # whose first start predates that record)
        first = starts[0].get("ledger") if starts else before
        over = {f"{k}_all_sessions": (after[a] - first[a] if first is not None else None)
                for k, a in (("llm_calls", "calls"), ("prompt_tokens", "prompt_tokens"),
                             ("completion_tokens", "completion_tokens"))}
        rec = {"stage": stage, "event": "done", "time": now_iso(), "session": session,
               "wall_s": round(wall + earlier, 3), "wall_s_this_session": round(wall, 3),
               "sessions": len(starts) + 1, "interrupted_wall_s": round(earlier, 3),
               "cpu_s": round(time.process_time() - c0, 3),
               "llm_calls": after["calls"] - before["calls"], "llm_calls_total": after["calls"],
               "prompt_tokens": after["prompt_tokens"] - before["prompt_tokens"],
               "completion_tokens": after["completion_tokens"] - before["completion_tokens"],
               "prompt_tokens_total": after["prompt_tokens"], "cached_tokens_total": after["cached_tokens"],
               **over, **{k: v for k, v in row.items()}}
        self.append(rec)


def _mtimes(dirs) -> list[float]:
    out = []
    for d in dirs:
        d = Path(d)
        if d.is_dir():
            out += [p.stat().st_mtime for p in d.rglob("*") if p.is_file()]
        elif d.is_file():
            out.append(d.stat().st_mtime)
    return out


def _last_write_after(a: float, b: float, dirs) -> float:
    """Seconds from ``a`` to the last file written under ``dirs`` before ``b`` (0: none)."""
    inside = [m for m in _mtimes(dirs) if a <= m < b]
    return (max(inside) - a) if inside else 0.0


def _earlier_sessions(starts: list[dict], dirs) -> float:
    """Seconds of the killed sessions before the last of ``starts``: each read by the session after
    it (``previous_session_s``); a start record without it (written before that field) falls back
    to the files' times now, which a later session's writes may have moved on."""
    total, old = 0.0, []
    for a, b in zip(starts[:-1], starts[1:]):
        if "previous_session_s" in b:
            total += float(b["previous_session_s"])
        else:
            old.append((a["t"], b["t"]))
    if old:
        m = _mtimes(dirs)
        for a, b in old:
            inside = [x for x in m if a <= x < b]
            total += (max(inside) - a) if inside else 0.0
    return total



def write_manifest(out: Path, book: StageBook, extra: dict) -> dict:
    """``OUT/manifest.json``: the sessions, every finished stage and the registration's hash."""
    path = Path(out) / "manifest.json"
    old = {}
    if path.exists():
        with contextlib.suppress(OSError, ValueError):
            old = json.loads(path.read_text(encoding="utf-8"))
    m = {"schema": "normlab.study.manifest/1", **old, **extra}
    m["stages"] = {r["stage"]: {k: v for k, v in r.items() if k not in ("stage", "event", "result")}
                   for r in book.timings()}
    write_json_atomic(path, m)
    return m
