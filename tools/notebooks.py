"""The notebooks' executed copies, committed in ``docs/notebooks/``: the docs build
(``docs/conf.py``) renders them and never executes a notebook (CI's docs build stays within minutes
on 2 cores). ``notebooks/`` keeps the notebooks without outputs; this script executes them headless
on the embedded model and writes each executed copy (PNG outputs reduced, to keep the repository
small). ``tests/umbrella/test_notebooks.py`` checks in the default tier that every
notebook has an executed copy with the same cells, and executes every notebook in the slow tier.
A copy also records the key of normlab's source it ran against (:func:`source_key`); ``--status``
says which copies ran against other code.

    python tools/notebooks.py              # execute the notebooks whose copy has other cells or is missing
    python tools/notebooks.py --all        # execute every notebook again
    python tools/notebooks.py --status     # which copies match their notebook, and which ran on this code
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
STORE = REPO / "docs" / "notebooks"
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


def same_cells(path: Path, copy: Path) -> bool:
    """Whether the executed ``copy`` holds exactly the cells (type and source) of ``path``."""
    def cells(p):
        nb = json.loads(Path(p).read_text(encoding="utf-8"))
        return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"])
                for c in nb["cells"]]
    return cells(path) == cells(copy)


def _shrink_png(nb) -> None:
    """Every PNG output wider than 900 px halved, and reduced to a 64-colour palette (the figures
    are line plots and heat maps: the page shows the same picture at a third of the bytes)."""
    import base64
    import io

    from PIL import Image

    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" not in data:
                continue
            img = Image.open(io.BytesIO(base64.b64decode(data["image/png"]))).convert("RGB")
            if img.width > 900:
                img = img.resize((img.width // 2, img.height // 2), Image.LANCZOS)
            buf = io.BytesIO()
            img.quantize(64).save(buf, format="PNG", optimize=True)
            data["image/png"] = base64.b64encode(buf.getvalue()).decode("ascii")


def execute(path: Path, *, store: bool = True, timeout: int = 900):
    """Execute ``path`` headless (nbclient, kernel ``python3``, in a temporary folder that is also its
    ``TMPDIR``) and, with ``store``, keep the executed copy in :data:`STORE`. Returns the executed
    notebook; a failing cell raises ``nbclient.exceptions.CellExecutionError``."""
    import nbclient
    import nbformat

    path = Path(path)
    key = source_key(path)
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:  # the kernel's folder and its TMPDIR: what a notebook leaves goes too
        nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": tmp}}).execute(env={**os.environ, "TMPDIR": tmp})
    nb.metadata["normlab_executed"] = {"source_key": key, "seconds": round(time.perf_counter() - t0, 1)}
    _shrink_png(nb)
    if store:
        STORE.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, STORE / path.name)
    return nb


def ensure(paths=None, *, every: bool = False, say=print) -> list[Path]:
    """Execute the notebooks whose executed copy is missing or holds other cells (all with
    ``every``); returns the copies."""
    out = []
    for p in sorted(paths or NOTEBOOKS.glob("*.ipynb")):
        copy = STORE / p.name
        if every or not copy.exists() or not same_cells(p, copy):
            say(f"executing {p.name}")
            execute(p)
        out.append(copy)
    return out


if __name__ == "__main__":
    if "--status" in sys.argv[1:]:
        code = code_key()
        for p in sorted(NOTEBOOKS.glob("*.ipynb")):
            copy = STORE / p.name
            cells = copy.exists() and same_cells(p, copy)
            print(f"{p.name:40s} {'same cells' if cells else 'missing or other cells':24s} "
                  f"{'ran on this code' if stored(p, code) else 'ran on other code'}")
    else:
        ensure(every="--all" in sys.argv[1:])
