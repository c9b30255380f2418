"""Every registered entry against its contract (scikit-learn's ``parametrize_with_checks`` style):
the tests read the registries and check each entry, so adding an entry is checked without
editing this file, and nothing here pins what the registries hold.

- result classes (:data:`normlab._display.RESULTS`): a one-line ``repr``, an HTML card, and what
  the registry says the class offers -- a plain-Python ``summary``, a tidy ``to_frame``, a
  ``plot`` that returns its Axes or Figure and saves with ``path=``, a ``save``/``load`` round
  trip -- each on the class's own tiny ``_contract_example()``; a class with an HTML card missing
  from the registry fails;
- fit kinds (:data:`normlab.calibration.fit_kinds.FIT_KINDS`): the ``FitFamily`` interface on a
  tiny table of counts (NUTS families with tiny sampler settings, marked slow);
- probes (:data:`normlab.llm_runs.probes.registry.PROBES`): the ``ProbeCommand`` hooks, a parser
  built from the entry's flags, and ``--dry-run``'s design;
- figures (:data:`normlab.figures.registry.FIGURES`): declared by ``@figure`` next to their data
  function, which takes the published data and ``small``; a ``paper_figures/`` script makes each.
"""

from __future__ import annotations

import pytest

import ast
import functools
import importlib
import inspect
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import normlab  # noqa: E402
from normlab._display import LOADABLE, RESULTS  # noqa: E402
import _paths  # noqa: E402  (the repository's and tests/' folders: tests/_paths.py)

REPO = _paths.REPO
SOURCES = {"theory": "normlab.theory", "llm_runs": "normlab.llm_runs", "calibration": "normlab.calibration",
           "src/normlab": "normlab"}
#: What a result class may offer (:data:`normlab._display.RESULTS`), and the attribute that offers it.
CAPABILITIES = {"summary": "summary", "summary_frame": "summary", "to_frame": "to_frame", "plot": "plot", "save": "save"}


# ----------------------------------------------------------------------------- result classes
def _resolve(tag: str):
    module, _, qualname = tag.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@functools.lru_cache(maxsize=None)
def _example(tag: str):
    cls = _resolve(tag)
    obj = cls._contract_example()
    assert type(obj) is cls, f"{tag}._contract_example() returned a {type(obj).__name__}"
    return obj


def _plain_only(obj, where="summary"):
    """Fail on any value that is not plain Python (numpy scalars print as np.float64(...))."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            assert type(k) in (str, int), f"{where}: key {k!r} is a {type(k).__name__}"
            _plain_only(v, f"{where}.{k}")
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _plain_only(v, where)
    else:
        assert obj is None or type(obj) in (int, float, str, bool), f"{where}: {obj!r} is a {type(obj).__name__}"


def check_capabilities_declared(cls, obj, tmp_path, caps):
    """The registry says exactly what the class offers."""
    has = {a for a in CAPABILITIES.values() if getattr(cls, a, None) is not None}
    declared = {CAPABILITIES[c] for c in caps}
    assert has == declared, f"{cls.__name__} offers {sorted(has)}; RESULTS declares {sorted(caps)}"


def check_repr(cls, obj, tmp_path, caps):
    """``Name(key numbers, settings)`` on one line, wrapped onto a few only where that line would be
    wider than 100 columns (:func:`normlab._display.short_repr`); never raw arrays."""
    r = repr(obj)
    assert r.startswith(cls.__name__ + "("), r[:80]
    lines = r.splitlines()
    if len(lines) > 1:
        one = lines[0] + " ".join(x.strip() for x in lines[1:-1]) + lines[-1].strip()
        assert len(lines) <= 8 and len(one) > 100, f"repr of {cls.__name__} spans {len(lines)} lines: {r}"
    assert "array(" not in r and "np.float64" not in r and "np.int64" not in r, r


def check_html_card(cls, obj, tmp_path, caps):
    """An HTML fragment for notebooks (most are :func:`normlab._display.html_card`: a title, the key
    numbers, the settings); never raw arrays."""
    h = obj._repr_html_()
    assert isinstance(h, str) and h.startswith("<") and h.rstrip().endswith(">"), h[:80]
    assert "array(" not in h and "np.float64" not in h and "np.int64" not in h


def check_summary(cls, obj, tmp_path, caps):
    s = obj.summary() if callable(obj.summary) else obj.summary
    assert isinstance(s, dict) and s
    _plain_only(s)
    json.dumps(s, allow_nan=True)


def check_summary_frame(cls, obj, tmp_path, caps):
    """A summary that is a table (one row per point of a sweep): tidy, like :meth:`to_frame`."""
    _check_tidy(obj.summary())


def _check_tidy(df):
    assert isinstance(df, pd.DataFrame) and len(df) > 0 and len(df.columns) > 0
    assert not isinstance(df.columns, pd.MultiIndex), "columns are one level"
    assert all(isinstance(c, str) for c in df.columns) and df.columns.is_unique, list(df.columns)
    assert isinstance(df.index, pd.RangeIndex), f"index is a {type(df.index).__name__}: columns hold the keys"


def check_to_frame(cls, obj, tmp_path, caps):
    _check_tidy(obj.to_frame())


def check_plot(cls, obj, tmp_path, caps):
    """``plot()`` draws (its Axes; a multi-panel figure: its Figure, or the array of its Axes where a
    class returned that before the convention) and ``path=`` saves a PNG."""
    path = tmp_path / "plot.png"
    out = obj.plot(path=path)
    try:
        panels = list(np.ravel(out)) if isinstance(out, np.ndarray) else [out]
        assert panels and all(isinstance(a, (matplotlib.axes.Axes, matplotlib.figure.Figure)) for a in panels), \
            type(out).__name__
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        fig = panels[0] if isinstance(panels[0], matplotlib.figure.Figure) else panels[0].figure
        assert fig.axes and any(a.has_data() for a in fig.axes)
    finally:
        plt.close("all")


def check_save_load(cls, obj, tmp_path, caps):
    folder = obj.save(tmp_path / "saved")
    tag = json.loads((Path(folder) / "result.json").read_text())["format"]
    assert tag in LOADABLE, f"{tag} is saved but not loadable"
    back = normlab.load(folder)
    assert type(back) is cls and repr(back) == repr(obj)
    if "to_frame" in caps:
        pd.testing.assert_frame_equal(back.to_frame(), obj.to_frame(), check_dtype=False, check_categorical=False)


_RESULT_CHECKS = (check_capabilities_declared, check_repr, check_html_card)
_CAPABILITY_CHECKS = {"summary": check_summary, "summary_frame": check_summary_frame, "to_frame": check_to_frame, "plot": check_plot,
                      "save": check_save_load}


def _result_checks():
    for tag, caps in RESULTS.items():
        for check in _RESULT_CHECKS + tuple(_CAPABILITY_CHECKS[c] for c in caps):
            yield pytest.param(tag, check, id=f"{tag.split(':')[1]}-{check.__name__}")


@pytest.mark.parametrize("tag, check", list(_result_checks()))
def test_result_class_contract(tag, check, tmp_path):
    check(_resolve(tag), _example(tag), tmp_path, RESULTS[tag])


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_every_result_class_is_registered():
    """Every class with an HTML card (the mark of a result object) is in RESULTS, and the saved
    ones are exactly the loadable ones."""
    registered = {_resolve(tag) for tag in RESULTS}
    missing = []
    for folder, root in SOURCES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO / folder).with_suffix("")
            module = ".".join([root, *rel.parts]).removesuffix(".__init__")
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(n, ast.FunctionDef) and n.name == "_repr_html_" for n in node.body):
                    if getattr(importlib.import_module(module), node.name) not in registered:
                        missing.append(f"{module}:{node.name}")
    assert not missing, f"result classes missing from normlab._display.RESULTS: {missing}"
    saved = {_resolve(tag) for tag, caps in RESULTS.items() if "save" in caps}
    assert saved == {_resolve(tag) for tag in LOADABLE}


# ----------------------------------------------------------------------------- fit kinds
def _fit_kinds():
    from normlab.calibration.fit_kinds import FIT_KINDS

    for key, kind in FIT_KINDS.items():
        slow = getattr(kind.load(), "uses_nuts", False)
        yield pytest.param(key, id=key, marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("key", list(_fit_kinds()))
def test_fit_kind_contract(key, tmp_path):
    """Every registered fit kind implements the FitFamily interface: it fits a tiny table of counts
    (NUTS with tiny settings), draws whole tables, has a posterior mean, describes itself and
    saves its parameters (to_dict/from_dict gives the same document back)."""
    from normlab.calibration import StateCounts, StrategyFit
    from normlab.calibration.fit_kinds import FIT_KINDS, fit_family
    from normlab.calibration.posterior import FitFamily

    kind = FIT_KINDS[key]
    family = fit_family(key)
    assert isinstance(family, FitFamily) and isinstance(kind.title, str) and kind.title
    for hook in ("fit", "sample_tables"):  # the two a family must implement
        assert getattr(type(family), hook) is not getattr(FitFamily, hook), f"{key} does not implement {hook}"
    counts = StateCounts._contract_example()
    tiny = dict(draws=20, tune=20, chains=1, cores=1, progress=False) if family.uses_nuts else {}
    fit = family.fit(counts, rng=1, **tiny)
    assert isinstance(fit, StrategyFit) and fit.kind == key and fit.names == counts.names
    S, W = counts.counts.shape
    draws = fit.sample_tables(5, rng=2)
    assert draws.shape == (5, S, W) and np.all(draws >= 0)
    np.testing.assert_allclose(draws.sum(axis=2), 1.0, atol=1e-9)
    np.testing.assert_allclose(fit.mean_table().table.sum(axis=1), 1.0, atol=1e-9)
    s = fit.summary()
    _plain_only(s)
    assert s["kind"] == key and key in repr(fit)
    assert isinstance(fit.coef_frame(), pd.DataFrame)
    doc = fit.to_dict()
    back = StrategyFit.from_dict(json.loads(json.dumps(doc)))
    assert back.kind == key and json.dumps(back.to_dict()) == json.dumps(doc)


# ----------------------------------------------------------------------------- probes
def _probes():
    from normlab.llm_runs.probes.registry import PROBES

    return [pytest.param(key, id=key) for key in PROBES]


@pytest.mark.parametrize("key", _probes())
def test_probe_contract(key):
    """Every registered probe's module has the ProbeCommand hooks (and the optional ones with
    their parameters), its flags build the ``llm-probe KEY`` parser, and its ``--dry-run``
    design is (requests (typical, at most), prompt tokens, what, notes)."""
    from normlab.cli import build_parser
    from normlab.llm_runs.cli_kit import sampling
    from normlab.llm_runs.probes.registry import OPTIONAL_HOOKS, PROBES, ProbeCommand
    from normlab.llm_runs.runner import make_settings

    spec = PROBES[key]
    hooks = spec.command()
    assert isinstance(hooks, ProbeCommand), f"{spec.module} lacks a hook of ProbeCommand"
    for name in ("command_design", "command_run", "command_table", "command_estimate"):
        want = [p for p in inspect.signature(getattr(ProbeCommand, name)).parameters if p != "self"]
        assert len(inspect.signature(getattr(hooks, name)).parameters) == len(want), f"{spec.module}.{name}{want}"
    for name, want in OPTIONAL_HOOKS.items():
        if hasattr(hooks, name):
            assert len(inspect.signature(getattr(hooks, name)).parameters) == len(want), f"{spec.module}.{name}"
    args = build_parser().parse_args(["llm-probe", key])
    for flags, _ in spec.arguments:
        dest = flags[0].lstrip("-").replace("-", "_")
        assert hasattr(args, dest), f"--{dest} of {key} is not parsed"
    assert args.probe == key and hasattr(args, "cache") == spec.journal
    names, memory = hooks.command_design(args)
    kw, mode = sampling(args, meta=spec.own_sampling), args.mode or "exact"
    if hasattr(hooks, "command_protocol"):
        kw, mode = hooks.command_protocol(args, kw, mode)
    s, tpl, _ = make_settings(2, memory, names, max_interactions=1, mode=mode, embedded=True, **kw)
    requests, ptok, what, notes = hooks.command_estimate(args, s, tpl, 3)
    typical, most = requests
    assert typical > 0 and (most is None or most >= typical)
    assert ptok > 0 and isinstance(what, str) and what and all(isinstance(n, str) for n in notes)


# ----------------------------------------------------------------------------- figures
def _figure_keys():
    from normlab.figures.registry import FIGURES

    return [pytest.param(key, id=key) for key in FIGURES]


@pytest.mark.parametrize("key", _figure_keys())
def test_figure_contract(key):
    """Every figure is declared by ``@figure`` on its data function in a figure module; the data
    function takes the published data and ``small`` where it uses them (nothing else without a
    default), the drawing function the data frame; a ``paper_figures/`` script makes it."""
    from normlab.figures.registry import FIGURE_MODULES, FIGURES

    spec = FIGURES[key]
    assert spec.module in FIGURE_MODULES
    data, draw = spec.functions()
    params = inspect.signature(data).parameters
    assert set(params) - {"data", "small", "out"} <= {p for p, v in params.items() if v.default is not v.empty}, \
        f"{spec.data} has a parameter without a default that make() does not pass"
    if draw is not None:
        first = next(iter(inspect.signature(draw).parameters.values()))
        assert first.default is first.empty, f"{spec.draw} takes the data frame first"
    scripts = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "paper_figures").glob("*.py"))
    assert f'"{key}"' in scripts, f"no paper_figures/ script makes {key}"
