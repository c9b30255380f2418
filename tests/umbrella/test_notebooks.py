"""Every notebook in notebooks/ executes headless from top to bottom (nbclient), is committed
without outputs, opens with what it answers and ends with what to try next. Its executed copy is
committed in docs/notebooks/ (``python tools/notebooks.py``), where the docs build renders it
instead of executing it: the copy holds the notebook's very cells, executed, without errors."""

import importlib.util
import json
from pathlib import Path

import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)

_spec = importlib.util.spec_from_file_location("_nb_tools", _paths.REPO / "tools" / "notebooks.py")
nb_tools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_tools)

NOTEBOOKS = sorted((_paths.REPO / "notebooks").glob("*.ipynb"))
COPIES = sorted(nb_tools.STORE.glob("*.ipynb"))


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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_docs_render_an_executed_copy_of_the_notebook(path):
    """docs/notebooks/ holds the notebook's cells, every code cell executed, no error: a notebook
    changed without running ``python tools/notebooks.py`` fails here, not on the docs site."""
    copy = nb_tools.STORE / path.name
    assert copy.is_file(), f"no executed copy of {path.name}: run python tools/notebooks.py"
    assert nb_tools.same_cells(path, copy), f"{copy.name} holds other cells: run python tools/notebooks.py"
    nb = json.loads(copy.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c.get("execution_count") for c in code), f"{copy.name}: cells not executed"
    assert not [o for c in code for o in c.get("outputs", []) if o["output_type"] == "error"], copy.name
    assert "seconds" in nb["metadata"].get("normlab_executed", {}), copy.name


def test_every_executed_copy_has_its_notebook():
    assert [p.name for p in COPIES] == [p.name for p in NOTEBOOKS]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    nb = nb_tools.execute(path, store=False)  # raises CellExecutionError on the first failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


@pytest.mark.slow
def test_a_notebooks_temporary_folders_go_with_its_run(tmp_path):
    """The notebooks write into ``tempfile.mkdtemp()`` folders (a saved prediction, CRSEC runs): run
    headless their ``TMPDIR`` is the run's own folder, removed with it (before, every CI run left them in /tmp)."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    path = tmp_path / "leave.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import tempfile\nd = tempfile.mkdtemp()\nopen(d + '/x', 'w').write('x')\nprint(d)")]), path)
    nb = nb_tools.execute(path, store=False)
    left = nb.cells[0].outputs[0]["text"].strip()
    assert left and not Path(left).exists(), left
