"""Reading the published AI-norms archives safely: the sources (a ``.zip``, a ``.pkl``, a folder of
them), checked before anything is inflated; every pickle through the restricted unpickler
(:func:`~normlab.llm_runs.published._unpickle.restricted_loads`); the published file names parsed
into what each file holds, and the loaders' filters. See :mod:`normlab.llm_runs.published.ainorms`
for the format."""

from __future__ import annotations

import os
import re
import threading
import zipfile
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Callable, Iterable, Sequence

from normlab.schema import validate_names

from ._unpickle import restricted_loads

#: File-name shorthand -> model name.
MODEL_NAMES = {
    "llama3_70b": "Llama-3-70B-Instruct",
    "llama3": "Llama-3-70B-Instruct",
    "llama31_70b": "Llama-3.1-70B-Instruct",
    "llama31": "Llama-3.1-70B-Instruct",
    "llama2_70b": "Llama-2-70B-Chat",
    "llama2": "Llama-2-70B-Chat",
    "claude": "Claude-3.5-Sonnet",
}
#: Where the published AI-norms data come from and where normlab looks for them, one sentence that
#: errors and skip reasons quote (``normlab calibrate --ainorms``, ``normlab figures``).
AINORMS_SOURCE = ("get llama3_data.zip and llama31_data.zip (claude_data.zip, llama2_data.zip optional) from the "
                  "authors' repository Ariel-Flint-Ashery/AI-norms (MIT), then set NORMLAB_AINORMS to their folder; "
                  "'normlab data' finds and checks them")

#: Largest pickle (uncompressed bytes) the loader accepts by default (published: 1.5 MB). Memory
#: while unpickling is bounded by the opcodes counted before building (:data:`._unpickle.MAX_BUILT`:
#: about 400 MB at most), whatever the bytes hold.
MAX_FILE_BYTES = 32 * 2**20
#: Largest total of uncompressed pickle bytes read from one archive.
MAX_ARCHIVE_BYTES = 1024 * 2**20
#: Highest uncompressed/compressed ratio of an archive member (published: at most 14); a zip
#: bomb is refused before it is inflated.
MAX_COMPRESSION_RATIO = 200
#: Most members an archive may hold (published: 63), counted from its end record before its index is
#: read; the index is then read once and every member inflated from that one opening.
MAX_MEMBERS = 4096
_ON_INCONSISTENCY = ("raise", "warn", "ignore")

_MODEL = r"(?P<model>[A-Za-z][A-Za-z0-9]*(?:_\d+b)?)"
_RUN_RE = re.compile(
    _MODEL
    + r"_(?:(?P<baseline>converged_baseline)|swap_(?P<swap_init>\d+)_(?P<cm>\d+)cmtd|evolved_from_(?P<evolved_init>\d+))"
    r"_(?P<names>.+?)_(?P<fail>[+-]?\d+)_(?P<succ>[+-]?\d+)_(?P<memory>\d+)mem_(?P<network>[A-Za-z]+(?:_[A-Za-z]+)?)"
    r"_(?P<n>\d+)ps(?:_(?P<ints>\d+)ints)?_(?P<tmp>\d+(?:\.\d+)?)tmp\.pkl"
)
_BIAS_RE = re.compile(_MODEL + r"_bias_test_(?P<mine>[^_]+)_(?P<partner>[^_]+)\.pkl")
_NOMEM_RE = re.compile(_MODEL + r"_no_memory_bias_test_(?P<pool>[^_]+)_(?P<memory>\d+)mem\.pkl")
_META_RE = re.compile(_MODEL + r"_meta_(?P<which>(?:prompting|test)[A-Za-z0-9_]*)\.pkl")


# --------------------------------------------------------------------------------------------
# sources: a .zip, a .pkl, a folder of them, or a sequence of those
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Member:
    archive: str | None  # archive file name, or None for a loose .pkl
    name: str  # base name of the pickle (the published file name)
    where: str  # human-readable location for messages
    size: int
    read: Callable[[], bytes]


def _bad_archive(zpath: Path, why: str) -> ValueError:
    return ValueError(f"{zpath}: {why}; give an intact AI-norms .zip, a .pkl or a folder of them")


def _zip_entries(zpath: Path) -> int | None:
    """The number of entries an archive's end-of-central-directory record declares (zip64 too),
    read from its last 64 KiB before its index is parsed; ``None`` when there is no such record
    (:mod:`zipfile` then says what is wrong)."""
    try:
        with open(zpath, "rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - (65535 + 22))
            f.seek(start)
            tail = f.read()
            i = tail.rfind(b"PK\x05\x06")
            if i < 0 or len(tail) < i + 22:
                return None
            n = int.from_bytes(tail[i + 10:i + 12], "little")
            if n != 0xFFFF or i < 20 or tail[i - 20:i - 16] != b"PK\x06\x07":
                return n
            f.seek(int.from_bytes(tail[i - 12:i - 4], "little"))
            rec = f.read(56)
            if rec[:4] != b"PK\x06\x06":
                return None
            return int.from_bytes(rec[32:40], "little")
    except OSError:
        return None


class _OpenArchive:
    """One archive opened once, its index read once, shared by its members' reads (each read
    reopening it re-read the whole index: quadratic in the members, 70 of 74 s at 2 000)."""

    def __init__(self, zpath: Path, zf: zipfile.ZipFile):
        self.zpath, self.zf, self.lock = zpath, zf, threading.Lock()

    def read(self, info: zipfile.ZipInfo) -> bytes:
        try:
            with self.lock, self.zf.open(info) as f:
                data = f.read(info.file_size + 1)  # zipfile stops at the declared size and checks the CRC
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
            raise _bad_archive(self.zpath, f"member {info.filename!r} is corrupt ({type(exc).__name__}: {exc})") \
                from None
        if len(data) != info.file_size:
            raise _bad_archive(self.zpath, f"member {info.filename!r} does not match its declared size")
        return data


def _zip_members(zpath: Path, max_bytes: int) -> list[_Member]:
    """The .pkl members of an archive, checked before anything is inflated: the member count
    (:data:`MAX_MEMBERS`, before the index is read), sizes, compression ratio, names (no absolute
    or ``..`` paths), no symbolic links, no encryption. The archive is opened once; its members are
    read from that opening."""
    import stat

    if not _regular_file(zpath) or not zipfile.is_zipfile(zpath):
        raise ValueError(f"{zpath} is not a valid zip archive; give an AI-norms .zip, a .pkl or a folder of them")
    declared = _zip_entries(zpath)
    if declared is not None and declared > MAX_MEMBERS:
        raise _bad_archive(zpath, f"{declared:,} members, more than the {MAX_MEMBERS:,} allowed (published archives "
                                  "hold under 100); refused before reading its index")
    out = []
    total = 0
    try:
        zf = zipfile.ZipFile(zpath)
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise _bad_archive(zpath, f"unreadable zip archive ({exc})") from None
    if len(zf.infolist()) > MAX_MEMBERS:
        zf.close()
        raise _bad_archive(zpath, f"{len(zf.infolist()):,} members, more than the {MAX_MEMBERS:,} allowed; refused")
    archive = _OpenArchive(zpath, zf)
    try:
        for info in zf.infolist():
            name = info.filename
            base = name.rsplit("/", 1)[-1]
            if info.is_dir() or not base.lower().endswith(".pkl") or base.startswith("._") or "__MACOSX" in name:
                continue
            if name.startswith(("/", "\\")) or ".." in name.replace("\\", "/").split("/") or (len(name) > 1 and name[1] == ":"):
                raise _bad_archive(zpath, f"member {name!r} has an absolute or parent-directory path; refused")
            if stat.S_ISLNK(info.external_attr >> 16):
                raise _bad_archive(zpath, f"member {name!r} is a symbolic link; refused")
            if info.flag_bits & 0x1:
                raise _bad_archive(zpath, f"member {name!r} is encrypted; normlab reads unencrypted archives only")
            if info.file_size > max_bytes:
                raise ValueError(
                    f"{zpath.name}:{name} is {info.file_size} bytes uncompressed, more than the allowed "
                    f"{max_bytes}; raise max_file_bytes if this is intended"
                )
            if info.file_size > MAX_COMPRESSION_RATIO * max(info.compress_size, 1) and info.file_size > 2**20:
                raise _bad_archive(zpath, f"member {name!r} inflates {info.file_size / max(info.compress_size, 1):.0f}x "
                                          f"(more than {MAX_COMPRESSION_RATIO}x): a zip bomb; refused")
            total += info.file_size
            if total > MAX_ARCHIVE_BYTES:
                raise _bad_archive(zpath, f"more than {MAX_ARCHIVE_BYTES} bytes of pickles uncompressed; refused")
            out.append(_Member(zpath.name, base, f"{zpath.name}:{name}", info.file_size,
                               lambda info=info: archive.read(info)))
    except BaseException:
        zf.close()
        raise
    if not out:
        zf.close()
    return out


def _regular_file(p: Path) -> bool:
    """True for a regular file (after following links): FIFOs, devices and sockets are refused, so
    a ``.pkl`` named pipe or a link to ``/dev/zero`` cannot hang the loader or fill memory."""
    import stat

    try:
        return stat.S_ISREG(p.stat().st_mode)
    except OSError:
        return False


def _file_member(p: Path, max_bytes: int) -> _Member:
    if not _regular_file(p):
        raise ValueError(f"{p} is not a regular file (a pipe, device or dangling link); refused")
    size = p.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{p} is {size} bytes, more than the allowed {max_bytes}; raise max_file_bytes if intended")

    def _read(p=p, size=size):
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise ValueError(f"{p} grew beyond the allowed {max_bytes} bytes while being read; refused")
        return data

    return _Member(None, p.name, str(p), size, _read)


def _collect_members(path, max_bytes: int) -> list[_Member]:
    if isinstance(path, (str, PathLike)):
        paths = [path]
    elif isinstance(path, Sequence) and not isinstance(path, (bytes, bytearray)) and len(path) > 0:
        paths = list(path)
    else:
        raise TypeError(
            f"path must be a str or os.PathLike (or a non-empty sequence of them) naming an AI-norms .zip archive, "
            f"a .pkl file or a folder of them; got {type(path).__name__}"
        )
    members: list[_Member] = []
    for raw in paths:
        if not isinstance(raw, (str, PathLike)):
            raise TypeError(f"each path must be a str or os.PathLike; got {type(raw).__name__}")
        p = Path(raw)
        if not p.exists():
            raise FileNotFoundError(f"{p} does not exist; give an AI-norms .zip archive, a .pkl file or a folder of "
                                    f"them ({AINORMS_SOURCE})")
        if p.is_dir():
            found = sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in (".zip", ".pkl"))
            if not found:
                raise FileNotFoundError(f"{p} holds no .zip or .pkl files")
            for q in found:
                members.extend(_zip_members(q, max_bytes) if q.suffix.lower() == ".zip" else [_file_member(q, max_bytes)])
        elif p.suffix.lower() == ".zip":
            members.extend(_zip_members(p, max_bytes))
        elif p.suffix.lower() == ".pkl":
            members.append(_file_member(p, max_bytes))
        else:
            raise ValueError(f"{p} is neither a .zip archive nor a .pkl file; give an AI-norms .zip, .pkl or a folder")
    members.sort(key=lambda m: (m.name, m.archive or "", m.where))
    return members


# --------------------------------------------------------------------------------------------
# file-name parsing and filters
# --------------------------------------------------------------------------------------------
def _model_name(key: str) -> str:
    return MODEL_NAMES.get(key, key)


def _classify(name: str) -> dict | None:
    """Parse a published file name; ``None`` if it is not an AI-norms file."""
    m = _RUN_RE.fullmatch(name)
    if m:
        g = m.groupdict()
        kind = "baseline" if g["baseline"] else ("swap" if g["swap_init"] is not None else "evolved")
        init = g["swap_init"] if kind == "swap" else g["evolved_init"]
        return {
            "family": "run", "kind": kind, "model_key": g["model"], "model": _model_name(g["model"]),
            "names": tuple(g["names"].split("_")), "payoff_failure": int(g["fail"]),
            "payoff_success": int(g["succ"]), "memory": int(g["memory"]), "network": g["network"],
            "n_agents": int(g["n"]), "planned_interactions": int(g["ints"]) if g["ints"] else None,
            "temperature": float(g["tmp"]), "initial_index": int(init) if init is not None else None,
            "cm": int(g["cm"]) if g["cm"] is not None else 0,
        }
    m = _BIAS_RE.fullmatch(name)
    if m:
        return {"family": "probe", "kind": "probe", "probe": "strategy", "model_key": m["model"],
                "model": _model_name(m["model"]), "mine": m["mine"], "partner": m["partner"]}
    m = _NOMEM_RE.fullmatch(name)
    if m:
        return {"family": "probe", "kind": "probe", "probe": "no_memory", "model_key": m["model"],
                "model": _model_name(m["model"]), "pool": m["pool"], "memory": int(m["memory"])}
    m = _META_RE.fullmatch(name)
    if m:
        return {"family": "meta", "kind": None, "model_key": m["model"], "model": _model_name(m["model"])}
    return None


def _as_list(x, what: str) -> list:
    if x is None:
        return []
    if isinstance(x, str):
        return [x]
    if isinstance(x, Iterable):
        out = list(x)
        if not all(isinstance(v, str) for v in out):
            raise TypeError(f"{what} must be a str or a sequence of str; got {out!r}")
        return out
    raise TypeError(f"{what} must be a str or a sequence of str; got {type(x).__name__}")


def _resolve_models(models) -> set[str] | None:
    if models is None:
        return None
    out = set()
    known = sorted(set(MODEL_NAMES) | set(MODEL_NAMES.values()))
    for m in _as_list(models, "models"):
        if m in MODEL_NAMES:
            out.add(MODEL_NAMES[m])
        elif m in MODEL_NAMES.values():
            out.add(m)
        else:
            raise ValueError(f"unknown model {m!r}; allowed: {known}")
    return out


def _resolve_choice(values, allowed: tuple, what: str) -> set[str] | None:
    if values is None:
        return None
    out = set(_as_list(values, what))
    bad = sorted(out - set(allowed))
    if bad:
        raise ValueError(f"unknown {what} {bad}; allowed: {list(allowed)}")
    if not out:
        raise ValueError(f"{what} is empty; give at least one of {list(allowed)} (or None for all)")
    return out


def _check_on_inconsistency(value: str) -> str:
    if value not in _ON_INCONSISTENCY:
        raise ValueError(f"on_inconsistency must be one of {_ON_INCONSISTENCY}; got {value!r}")
    return value


def _load_member(mem: _Member):
    return restricted_loads(mem.read(), source=mem.where)


# --------------------------------------------------------------------------------------------
# where the archives are, and the file names of a name pool's runs
# --------------------------------------------------------------------------------------------
def find_ainorms():
    """Locate the published AI-norms data folder, or return None.

    Looks at ``$NORMLAB_AINORMS`` first, then for ``shared/data/ai-norms`` (holding
    ``llama31_data.zip``) beside the current directory or any of its parents, and beside the
    installed package's parents (an editable install in ``<root>/main`` finds ``<root>/shared``).

    Returns
    -------
    pathlib.Path or None
    """
    env = os.environ.get("NORMLAB_AINORMS")
    if env:
        p = Path(env)
        return p if p.exists() else None
    here = Path.cwd().resolve()
    for base in [here, *here.parents, *Path(__file__).resolve().parents]:
        cand = base / "shared" / "data" / "ai-norms"
        if (cand / "llama31_data.zip").exists():
            return cand
    return None


def ainorms_file_patterns(names) -> list[str]:
    """File-name patterns of the AI-norms runs of a two-name pool (both orders), for
    :func:`normlab.llm_runs.published.ainorms.load_ainorms` ``files=``."""
    if names is None:
        raise ValueError("names must be given (e.g. ('Q', 'M'))")
    names = validate_names(names)
    if len(names) < 2:
        raise ValueError(f"a strategy needs a pool of at least two names; got {names}")
    if len(names) != 2:
        return ["*" + "_".join(names) + "_*"]
    a, b = names
    return [f"*_{a}_{b}_*", f"*_{b}_{a}_*"]
