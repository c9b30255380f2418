"""The API reference's pages (``docs/api/``): one page per public package listing the names it
exports (``__all__``, the names its lazy ``_EXPORTS`` serve; autosummary writes a page per name
from its numpydoc docstring), one per module documented whole, and the index. ``docs/conf.py``
writes them before each build; they are committed so that links to them work on a checkout, and
``tests/umbrella/test_docs.py`` checks the committed pages are current.

    python tools/apidocs.py      # rewrite docs/api/*.md
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"

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


def pages() -> dict[str, str]:
    """``{path under docs/: MyST text}`` of the API reference: its index and one page per entry of
    :data:`API_PACKAGES` (the names each exports) and :data:`API_MODULES` (documented whole)."""
    import importlib
    import inspect

    out = {}
    index = ["# API reference", "",
             "Generated from the docstrings (numpydoc): every name each public package exports. The names are "
             "imported lazily, so `import normlab.theory` stays fast; `help(name)` in a notebook shows the same "
             "text.", "", "| package | what |", "|---|---|"]
    toc = []
    home = {}  # id of an object -> the package page documenting it (the first that exports it)
    for name, what in API_PACKAGES:
        mod = importlib.import_module(name)
        names = sorted(set(getattr(mod, "__all__", ()) or ()) | set(getattr(mod, "_EXPORTS", {}) or {}))
        names = [n for n in names if not n.startswith("_") and not inspect.ismodule(getattr(mod, n))]
        # an object exported by two packages is documented once; the other page names where
        elsewhere = {}
        for n in list(names):
            obj = getattr(mod, n)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) in home:
                elsewhere[n] = home[id(obj)]
                names.remove(n)
            elif inspect.isclass(obj) or inspect.isfunction(obj):
                home[id(obj)] = f"{name}.{n}"
        page = [f"# `{name}`", "", f"```{{eval-rst}}", f".. automodule:: {name}", f"   :no-members:", "",
                f".. currentmodule:: {name}", "", ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
        page += [f"   {n}" for n in names] + ["```", ""]
        if elsewhere:
            page += ["Also exported here, documented under the package that exports them first: "
                     + ", ".join(f"{{py:obj}}`{n} <{target}>`" for n, target in sorted(elsewhere.items())) + ".", ""]
        out[f"api/{name}.md"] = "\n".join(page) + "\n"
        index.append(f"| [`{name}`]({name}.md) | {what} |")
        toc.append(name)
    for name, what in API_MODULES:
        page = [f"# `{name}`", "", "```{eval-rst}", f".. automodule:: {name}", "   :members:", "```", ""]
        out[f"api/{name}.md"] = "\n".join(page) + "\n"
        index.append(f"| [`{name}`]({name}.md) | {what} |")
        toc.append(name)
    index += ["", "```{toctree}", ":hidden:", "", *toc, "```", ""]
    out["api/index.md"] = "\n".join(index) + "\n"
    return out


if __name__ == "__main__":
    for path, text in pages().items():
        (DOCS / path).parent.mkdir(parents=True, exist_ok=True)
        (DOCS / path).write_text(text, encoding="utf-8")
