"""Executed notebooks, once per change: ``tests/test_notebooks.py`` executes every notebook of
``notebooks/`` on the embedded model and stores the executed copy in ``build/notebooks/``; the docs
build (``docs/conf.py``) renders the stored copy and executes only a notebook whose copy is
missing or stale. A copy is stale when the notebook or any of normlab's source files changed
since it was executed (its key, :func:`source_key`, is recorded in the copy's metadata).

    python tools/notebooks.py            # execute the missing or stale ones (what the docs build does)
    python tools/notebooks.py --status   # which copies are current
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
STORE = REPO / "build" / "notebooks"
#: Folders whose files, when changed, make every stored notebook stale (normlab's code and data).
CODE = ("src", "theory", "llm_runs", "calibration")
_SUFFIXES = {".py", ".json"}


def code_key() -> str:
    """SHA-256 over normlab's source files (paths and bytes)."""
    h = hashlib.sha256()
    for folder in CODE:
        for p in sorted((REPO / folder).rglob("*")):
            if p.suffix in _SUFFIXES and p.is_file() and "__pycache__" not in p.parts:
                h.update(str(p.relative_to(REPO)).encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def source_key(path: Path, code: str | None = None) -> str:
    """The key of a notebook's executed copy: its bytes and normlab's source."""
    h = hashlib.sha256(Path(path).read_bytes())
    h.update((code or code_key()).encode())
    return h.hexdigest()


def stored(path: Path, code: str | None = None) -> Path | None:
    """The current executed copy of ``path`` (``None`` if missing or stale)."""
    copy = STORE / Path(path).name
    if not copy.exists():
        return None
    try:
        meta = json.loads(copy.read_text(encoding="utf-8"))["metadata"].get("normlab_executed", {})
    except (ValueError, KeyError):
        return None
    return copy if meta.get("source_key") == source_key(path, code) else None


def execute(path: Path, *, store: bool = True, timeout: int = 900):
    """Execute ``path`` headless (nbclient, kernel ``python3``, in a temporary folder) and, with
    ``store``, keep the executed copy in :data:`STORE`. Returns the executed notebook; a failing cell
    raises ``nbclient.exceptions.CellExecutionError``."""
    import nbclient
    import nbformat

    path = Path(path)
    key = source_key(path)
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": tmp}}).execute()
    nb.metadata["normlab_executed"] = {"source_key": key, "seconds": round(time.perf_counter() - t0, 1)}
    if store:
        STORE.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, STORE / path.name)
    return nb


def ensure(paths=None, *, say=print) -> list[Path]:
    """The executed copy of every notebook, executing only the missing or stale ones."""
    code = code_key()
    out = []
    for p in sorted(paths or NOTEBOOKS.glob("*.ipynb")):
        copy = stored(p, code)
        if copy is None:
            say(f"executing {p.name} (no current executed copy in {STORE.relative_to(REPO)})")
            execute(p)
            copy = STORE / p.name
        out.append(copy)
    return out


if __name__ == "__main__":
    if "--status" in sys.argv[1:]:
        code = code_key()
        for p in sorted(NOTEBOOKS.glob("*.ipynb")):
            print(f"{p.name:40s} {'current' if stored(p, code) else 'missing or stale'}")
    else:
        ensure()
