"""Sphinx configuration of normlab's docs.

Build (README; CI runs it in .ci/run):

    pip install ".[docs]" && sphinx-build -W --keep-going -b html docs docs/_build/html

Before reading the pages, the build (``builder-inited``):

- takes each notebook of ``notebooks/`` as executed by ``tests/test_notebooks.py`` (stored in
  ``build/notebooks/``), executing only those whose copy is missing or stale
  (``tools/notebooks.py``), and renders the stored outputs: the notebooks run once per change, not
  once for the tests and again for the docs;
- draws the paper's figures and tables for the gallery (``tools/gallery.py``: ``normlab figures
  --small``, once per change of normlab's code or the data found) and writes ``paper/gallery.md``.

Pages written in MyST Markdown; ``{code-cell}`` blocks in pages are executed at build time
(myst-nb), so every number they print comes out of the code beside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
REPO = DOCS.parent
sys.path.insert(0, str(REPO / "tools"))

import normlab  # noqa: E402

project = "normlab"
author = "normlab developers"
copyright = "normlab developers (MIT)"
release = version = normlab.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "sphinx.ext.mathjax",
    "sphinx_design",
    "sphinx_copybutton",
]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints", "jupyter_execute"]
root_doc = "index"

# ----------------------------------------------------------------------------- MyST and notebooks
myst_enable_extensions = ["colon_fence", "dollarmath", "deflist"]
myst_heading_anchors = 3
# Notebooks are rendered from the copies tests/test_notebooks.py executed (see setup() below);
# a page with {code-cell} blocks is executed at build time (its own `execution_mode: force`).
nb_execution_mode = "off"
nb_execution_raise_on_error = True
nb_execution_timeout = 900
nb_merge_streams = True

# ----------------------------------------------------------------------------- API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections say the types
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set = set()
numpydoc_xref_param_type = False

# ----------------------------------------------------------------------------- HTML
html_theme = "pydata_sphinx_theme"
html_title = f"normlab {release}"
html_static_path: list = []
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False


# ----------------------------------------------------------------------------- API pages
#: The public packages, each a page of the API reference listing its exported names (``__all__``,
#: the names its lazy ``_EXPORTS`` serve); modules without ``__all__`` are documented whole.
API_PACKAGES = [
    ("normlab", "the umbrella: loading saved results, the version"),
    ("normlab.theory", "theory models of convention formation"),
    ("normlab.theory.itcmas", "ITCMA-S closed forms and the LTRHA loop"),
    ("normlab.llm_runs", "LLM population runners, probes, CRSEC, SCENE, the published-data loader"),
    ("normlab.llm_runs.backend", "endpoints: configuration, client, the embedded server"),
    ("normlab.llm_runs.probes", "probes of individual bias, strategy tables, comprehension"),
    ("normlab.llm_runs.crsec", "CRSEC: the norm lifecycle"),
    ("normlab.llm_runs.scene", "SCENE: implicit norms"),
    ("normlab.calibration", "strategy fits, predictions and their checks"),
    ("normlab.calibration.tip", "normlab tip: the critical mass with few runs"),
    ("normlab.figures", "every figure and table of the paper"),
    ("normlab.demo", "normlab demo: from nothing to a report"),
    ("normlab.study", "normlab study: a blind test, predictions registered before the runs"),
    ("normlab.experiment", "experiment files"),
]
API_MODULES = [
    ("normlab.schema", "the tidy game-log schema"),
    ("normlab.llm_runs.published.ainorms", "the published AI-norms loader"),
    ("normlab.llm_runs.published.ainorms_data", "finding and checking the published archives (normlab data)"),
]


def _api_pages() -> None:
    import importlib
    import inspect

    folder = DOCS / "api"
    index = ["# API reference", "",
             "Generated from the docstrings (numpydoc): every name each public package exports. The names are "
             "imported lazily, so `import normlab.theory` stays fast; `help(name)` in a notebook shows the same "
             "text.", "", "| package | what |", "|---|---|"]
    pages = []
    for name, what in API_PACKAGES:
        mod = importlib.import_module(name)
        names = sorted(set(getattr(mod, "__all__", ()) or ()) | set(getattr(mod, "_EXPORTS", {}) or {}))
        names = [n for n in names if not n.startswith("_") and not inspect.ismodule(getattr(mod, n))]
        page = [f"# `{name}`", "", f"```{{eval-rst}}", f".. automodule:: {name}", f"   :no-members:", "",
                f".. currentmodule:: {name}", "", ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
        page += [f"   {n}" for n in names] + ["```", ""]
        _write(folder / f"{name}.md", "\n".join(page))
        index.append(f"| [`{name}`]({name}.md) | {what} |")
        pages.append(name)
    for name, what in API_MODULES:
        page = [f"# `{name}`", "", "```{eval-rst}", f".. automodule:: {name}", "   :members:", "```", ""]
        _write(folder / f"{name}.md", "\n".join(page))
        index.append(f"| [`{name}`]({name}.md) | {what} |")
        pages.append(name)
    index += ["", "```{toctree}", ":hidden:", "", *pages, "```", ""]
    _write(folder / "index.md", "\n".join(index))


def _write(path: Path, text: str) -> None:
    """Write only when changed (an unchanged page is not read again by an incremental build)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


_api_pages()


def _prepare(app) -> None:
    """Executed notebooks and the figure gallery, before any page is read."""
    import notebooks
    import gallery

    target = DOCS / "notebooks"
    target.mkdir(exist_ok=True)
    if os.environ.get("NORMLAB_DOCS_EXECUTE", "1") == "0":  # drafting pages: stored copies, else unexecuted
        copies = [notebooks.stored(p) or p for p in sorted(notebooks.NOTEBOOKS.glob("*.ipynb"))]
    else:
        copies = notebooks.ensure(say=lambda s: print(f"[normlab docs] {s}"))
    for copy in copies:
        data = copy.read_bytes()
        dest = target / copy.name
        if not dest.exists() or dest.read_bytes() != data:
            dest.write_bytes(data)
    _notebooks_page(copies)
    if os.environ.get("NORMLAB_DOCS_GALLERY", "1") != "0":
        gallery.write_page(DOCS / "paper" / "gallery.md", say=lambda s: print(f"[normlab docs] {s}"))


def _notebooks_page(copies) -> None:
    """``notebooks.md``: every notebook of ``notebooks/``, its title, what it needs and how long it ran."""
    import json

    rows, names = [], []
    for copy in copies:
        nb = json.loads(copy.read_text(encoding="utf-8"))
        first = "".join(nb["cells"][0]["source"]).splitlines()[0].lstrip("# ").strip()
        secs = nb["metadata"].get("normlab_executed", {}).get("seconds")
        rows.append(f"| {{doc}}`{first} <notebooks/{copy.stem}>` | `notebooks/{copy.name}` | "
                    f"{'' if secs is None else f'{secs:.0f} s'} |")
        names.append(f"notebooks/{copy.stem}")
    text = "\n".join([
        "# Notebooks", "",
        "<!-- generated by docs/conf.py from notebooks/*.ipynb; do not edit -->", "",
        f"The {len(copies)} notebooks of `notebooks/`, executed headless on the embedded model (no key, no network) "
        "by `tests/test_notebooks.py`; these pages render that executed copy (`tools/notebooks.py`: a copy is "
        "executed again only when the notebook or normlab's code changed). Open them in JupyterLab with "
        "`pip install \".[notebooks]\"`. A notebook that needs the published data says so in one line when they "
        "are absent ([Getting the published data](data.md)).", "",
        "| notebook | file | executed in |", "|---|---|---|", *rows, "",
        "```{toctree}", ":hidden:", "", *names, "```", ""])
    _write(DOCS / "notebooks.md", text)


def setup(app):
    app.connect("builder-inited", _prepare)
    return {"parallel_read_safe": True}
