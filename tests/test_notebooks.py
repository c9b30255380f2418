"""Every notebook in notebooks/ executes headless from top to bottom (nbclient), is committed
without outputs, opens with what it answers and ends with what to try next. The executed copy is
kept in build/notebooks/ (tools/notebooks.py), where the docs build renders it instead of
executing the notebook a second time."""

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("_nb_tools", Path(__file__).resolve().parents[1] / "tools" / "notebooks.py")
nb_tools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_tools)

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(path):
    """Outputs are stripped in git (they are made in CI); the first cell says what the notebook
    answers and the last what to try next."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; strip them (jupyter nbconvert --clear-output --inplace)"
    first, last = ("".join(nb["cells"][k]["source"]) for k in (0, -1))
    assert nb["cells"][0]["cell_type"] == "markdown" and "What this answers" in first, path.name
    assert "What to try next" in last, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    nb = nb_tools.execute(path)  # raises CellExecutionError on the first failing cell; stores the executed copy
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
