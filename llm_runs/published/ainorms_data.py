"""Getting the published AI-norms data, one way: where the four archives of Flint Ashery, Aiello &
Baronchelli (2025) are, whether they are the published ones (SHA-256 pinned where normlab knows
it, the structure the loader expects where it does not), and what is missing and where to get it
(``normlab data``).

The archives are not shipped with normlab (MIT, the authors' repository Ariel-Flint-Ashery/AI-norms;
the data at its commit e57aeef). normlab looks for them in this order: a folder the user names
(``normlab data --where DIR``, ``--data``, ``--ainorms``; a clone of the authors' repository is
searched for them), ``$NORMLAB_AINORMS``, then ``shared/data/ai-norms`` beside the working
directory or one of its parents (:func:`~normlab.llm_runs.published.ainorms_archive.find_ainorms`).

Examples
--------
>>> from normlab.llm_runs.published.ainorms_data import ARCHIVES
>>> [a.file for a in ARCHIVES]
['llama3_data.zip', 'llama31_data.zip', 'claude_data.zip', 'llama2_data.zip']
>>> ARCHIVES[0].sha256[:12]
'b7cfc759e52b'
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from .ainorms_archive import AINORMS_SOURCE, MAX_FILE_BYTES, _classify, _collect_members, find_ainorms

#: The authors' repository: where the archives come from (MIT licence).
AUTHORS_REPOSITORY = "https://github.com/Ariel-Flint-Ashery/AI-norms"
#: The commit of the authors' repository whose archives normlab's checks were computed on.
AUTHORS_COMMIT = "e57aeef151a46108fd1521c66e345e557e57dbf6"


@dataclass(frozen=True)
class PublishedArchive:
    """One published archive: its file name, the model it holds, its file-name shorthands and, where
    normlab knows it, its SHA-256 and the number of pickles it holds."""

    file: str
    model: str
    shorthands: tuple[str, ...]
    sha256: str | None = None
    pickles: int | None = None
    used_by: str = ""


#: The four archives of the paper. Only the first two were available to normlab's authors: their
#: SHA-256 is pinned; the other two are checked by their structure (hash not known to normlab).
ARCHIVES = (
    PublishedArchive("llama3_data.zip", "Llama-3-70B-Instruct", ("llama3_70b", "llama3"),
                     "b7cfc759e52bf6d1dc358664eec799d315ca96d4020a93847048aa45fd900616", 39,
                     "every check, table and figure drawn from LLM runs"),
    PublishedArchive("llama31_data.zip", "Llama-3.1-70B-Instruct", ("llama31_70b", "llama31"),
                     "139a35d212e4e8069a4f697f17dd91eeb1ce389326fcd443af3b4207e8f2f648", 63,
                     "every check, table and figure drawn from LLM runs"),
    PublishedArchive("claude_data.zip", "Claude-3.5-Sonnet", ("claude",),
                     used_by="the Claude-3.5-Sonnet lines of Figs. 1-3 and S1-S10 (left out without it)"),
    PublishedArchive("llama2_data.zip", "Llama-2-70B-Chat", ("llama2_70b", "llama2"),
                     used_by="the Llama-2-70B-Chat lines of Figs. 1-2 and S1-S10 (left out without it)"),
)
#: The archives normlab's checks, tables and notebooks need (the other two add panels to figures).
REQUIRED = ("llama3_data.zip", "llama31_data.zip")

#: The one sentence every command, figure, notebook and check that needs the data says.
WHERE_TO_GET = AINORMS_SOURCE

def needs_data(what: str) -> str:
    """The one line a figure, notebook or check prints when the published data are absent.

    >>> needs_data("Table S3").split(":")[0]
    'Table S3 needs the published AI-norms data, not found here'
    """
    return f"{what} needs the published AI-norms data, not found here: {WHERE_TO_GET}"


@dataclass(frozen=True)
class ArchiveCheck:
    """What ``normlab data`` found for one archive.

    ``status`` is ``"ok"`` (SHA-256 matches), ``"structure ok"`` (hash not known to normlab, or an
    unpacked folder; its pickles parse as the loader expects), ``"mismatch"`` (another SHA-256 or
    a structure the loader does not read), or ``"missing"``.
    """

    archive: PublishedArchive
    status: str
    path: str | None = None
    detail: str = ""
    sha256: str | None = None
    pickles: int | None = None

    @property
    def usable(self) -> bool:
        return self.status in ("ok", "structure ok")


@dataclass(frozen=True)
class DataReport:
    """Where ``normlab data`` looked, what it found (:class:`ArchiveCheck` per archive) and what to do."""

    folder: str | None
    source: str
    looked_in: tuple[str, ...]
    checks: tuple[ArchiveCheck, ...] = field(default_factory=tuple)

    @property
    def ready(self) -> bool:
        """The archives normlab's checks need are present and intact, and nothing found is damaged."""
        by = {c.archive.file: c for c in self.checks}
        return (all(by[f].usable for f in REQUIRED if f in by) and len(by) > 0
                and not any(c.status == "mismatch" for c in self.checks))

    @property
    def missing(self) -> list[str]:
        return [c.archive.file for c in self.checks if c.status == "missing"]

    def summary(self) -> dict:
        """Plain Python (``--json``)."""
        return {
            "folder": self.folder, "source": self.source, "looked_in": list(self.looked_in), "ready": self.ready,
            "archives": [{"file": c.archive.file, "model": c.archive.model, "status": c.status, "path": c.path,
                          "sha256": c.sha256, "pinned_sha256": c.archive.sha256, "pickles": c.pickles,
                          "detail": c.detail, "used_by": c.archive.used_by} for c in self.checks],
            "missing": self.missing,
            "where_to_get": f"{AUTHORS_REPOSITORY} (the data archives; normlab's checks used commit {AUTHORS_COMMIT[:7]})",
            "export": f"export NORMLAB_AINORMS={self.folder}" if self.folder else None,
        }

    def lines(self) -> list[str]:
        """What ``normlab data`` prints."""
        out = []
        if self.folder is None:
            out.append("no published AI-norms archive found; looked in: " + ", ".join(self.looked_in))
        else:
            out.append(f"published AI-norms data: {self.folder} ({self.source})")
        width = max(len(a.file) for a in ARCHIVES)
        for c in self.checks:
            out.append(f"  {c.archive.file:<{width}}  {c.status:<12}  {c.detail}")
        miss = self.missing
        if miss:
            req = [m for m in miss if m in REQUIRED]
            opt = [m for m in miss if m not in REQUIRED]
            if req:
                out.append(f"missing, needed by every check, table and notebook on published runs: {', '.join(req)}")
            if opt:
                out.append(f"missing, optional (their models are left out of the figures, said in each): {', '.join(opt)}")
            out.append(f"get them from the authors' repository {AUTHORS_REPOSITORY} (MIT): clone it (or download its "
                       f"data archives) and run 'normlab data --where CLONE', which finds the archives inside it")
        bad = [c for c in self.checks if c.status == "mismatch"]
        if bad:
            out.append("damaged or different: " + ", ".join(c.archive.file for c in bad)
                       + f"; download them again from {AUTHORS_REPOSITORY}")
        if self.folder and self.source != "$NORMLAB_AINORMS" and self.ready:
            out.append(f"to use this folder from anywhere: export NORMLAB_AINORMS={self.folder}")
        return out


def sha256_of(path: str | os.PathLike) -> str:
    """SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _structure(path: Path, arch: PublishedArchive) -> tuple[bool, str, int]:
    """Check an archive (or unpacked folder) the way the loader reads it, without unpickling: the
    safety checks on every member, and every pickle's file name parsed as a published file of
    this archive's model."""
    try:
        members = _collect_members(path, MAX_FILE_BYTES)
    except (ValueError, FileNotFoundError, OSError) as exc:
        return False, " ".join(str(exc).split()), 0
    if not members:
        return False, "holds no .pkl file", 0
    kinds: dict[str, int] = {}
    foreign = []
    for m in members:
        info = _classify(m.name)
        if info is None or info["model_key"] not in arch.shorthands:
            foreign.append(m.name)
            continue
        kinds[info["kind"] or "meta"] = kinds.get(info["kind"] or "meta", 0) + 1
    if foreign and len(foreign) == len(members):
        return False, f"none of its {len(members)} pickles is a published {arch.model} file (e.g. {foreign[0]})", len(members)
    parts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    extra = f"; {len(foreign)} other files ignored" if foreign else ""
    return True, f"{len(members)} pickles ({parts}){extra}", len(members)


def check_archive(path: str | os.PathLike, arch: PublishedArchive) -> ArchiveCheck:
    """Check one archive file (or its unpacked folder) against what normlab knows of it."""
    p = Path(path)
    if p.is_dir():
        ok, detail, n = _structure(p, arch)
        return ArchiveCheck(arch, "structure ok" if ok else "mismatch", str(p),
                            f"unpacked folder, hash not checked: {detail}" if ok else detail, None, n)
    digest = sha256_of(p)
    if arch.sha256 is not None:
        if digest == arch.sha256:
            return ArchiveCheck(arch, "ok", str(p), f"SHA-256 matches the published archive ({arch.model}, "
                                                     f"{arch.pickles} pickles)", digest, arch.pickles)
        ok, detail, n = _structure(p, arch)
        return ArchiveCheck(arch, "mismatch", str(p), f"SHA-256 {digest[:12]}... is not the published "
                                                      f"{arch.sha256[:12]}... ({detail})", digest, n)
    ok, detail, n = _structure(p, arch)
    if ok:
        return ArchiveCheck(arch, "structure ok", str(p), f"hash not known to normlab; structure as the loader "
                                                          f"expects: {detail}", digest, n)
    return ArchiveCheck(arch, "mismatch", str(p), f"not readable as {arch.model} data: {detail}", digest, n)


def _find_in(folder: Path, arch: PublishedArchive, depth: int = 3) -> Path | None:
    """``arch`` in ``folder``: the .zip (or its unpacked ``<model>_data/`` folder) directly inside,
    else anywhere up to ``depth`` folders down (a clone of the authors' repository)."""
    stem = arch.file[:-len(".zip")]
    for d in range(depth + 1):
        pattern = "/".join(["*"] * d + [arch.file]) if d else arch.file
        hits = sorted(q for q in folder.glob(pattern) if q.is_file() and ".git" not in q.parts)
        if hits:
            return hits[0]
    for d in range(depth + 1):
        pattern = "/".join(["*"] * d + [stem]) if d else stem
        hits = sorted(q for q in folder.glob(pattern) if q.is_dir() and any(q.glob("*.pkl")) and ".git" not in q.parts)
        if hits:
            return hits[0]
    return None


def locate(where: str | os.PathLike | None = None) -> tuple[Path | None, str, list[str]]:
    """The folder holding the archives, how it was found, and every place looked in.

    ``where`` (a folder or a clone of the authors' repository) wins; else ``$NORMLAB_AINORMS``;
    else ``shared/data/ai-norms`` beside the working directory or its parents.
    """
    looked: list[str] = []
    if where is not None:
        p = Path(where).expanduser()
        if not p.exists():
            raise FileNotFoundError(f"--where {p} does not exist: {WHERE_TO_GET}")
        if p.is_file():
            return p.parent.resolve(), "--where", [str(p)]
        return p.resolve(), "--where", [str(p)]
    env = os.environ.get("NORMLAB_AINORMS")
    if env:
        looked.append(f"$NORMLAB_AINORMS={env}")
        p = Path(env).expanduser()
        if p.exists():
            return (p.parent if p.is_file() else p).resolve(), "$NORMLAB_AINORMS", looked
        return None, "", looked
    looked.append("shared/data/ai-norms beside the working directory and its parents")
    found = find_ainorms()
    return (found.resolve() if found else None), "found beside the working directory", looked


def check_data(where: str | os.PathLike | None = None) -> DataReport:
    """Find the published archives and check each one (``normlab data``).

    Parameters
    ----------
    where : str or path-like, optional
        A folder holding the archives, or a clone of the authors' repository (searched up to three
        folders down). Default: ``$NORMLAB_AINORMS``, else ``shared/data/ai-norms`` nearby.

    Returns
    -------
    DataReport
        One :class:`ArchiveCheck` per archive of :data:`ARCHIVES`; ``report.ready`` when the two
        archives normlab's checks need are present and intact.
    """
    folder, source, looked = locate(where)
    if folder is None:
        return DataReport(None, source, tuple(looked),
                          tuple(ArchiveCheck(a, "missing", detail=f"needed by {a.used_by}") for a in ARCHIVES))
    checks = []
    for a in ARCHIVES:
        hit = _find_in(folder, a)
        checks.append(check_archive(hit, a) if hit is not None
                      else ArchiveCheck(a, "missing", detail=f"needed by {a.used_by}"))
    found = {Path(c.path).parent for c in checks if c.path and Path(c.path).is_file()}
    home = found.pop() if len(found) == 1 else folder
    return DataReport(str(home), source, tuple(looked), tuple(checks))
