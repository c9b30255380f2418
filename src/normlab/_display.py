"""How result objects show themselves: one home for reprs, HTML cards, figure style and saving.

Every public result object of normlab follows the same conventions, built from the helpers here:

- ``repr(result)`` is one to a few lines: key numbers and settings, never raw arrays
  (:func:`short_repr`).
- ``result._repr_html_()`` is a compact card for notebooks: a title, a table of key numbers with
  their intervals, and the settings (:func:`html_card`).
- ``result.summary()`` returns plain Python values (``float``, ``int``, ``str``, ``None``, lists
  and dicts; never ``numpy.float64``) (:func:`plain`).
- ``result.plot(..., path=None)`` draws the figure a user would draw next, in normlab's seaborn
  style, and returns the matplotlib ``Axes`` (one panel) or ``Figure`` (several panels); with
  ``path`` it also saves the figure there (``.png``, ``.pdf``, ``.svg`` ...) in one call
  (:func:`plotting`).
- Results that are expensive to compute have ``result.save(path)`` and ``Class.load(path)``: a
  folder holding ``result.json`` (type, version, settings, scalars) and one Parquet file per
  table (:func:`save_result`, :func:`load_result`); :func:`load` reads any of them back.

Matplotlib, seaborn and pandas are imported only when a figure or a table is made, so
``import normlab`` stays fast.
"""

from __future__ import annotations

import contextlib
import functools
import html
import importlib
import inspect
import json
import math
from pathlib import Path

import normlab

__all__ = ["error_bars", "fmt", "fmt_interval", "plain", "short_repr", "html_card", "plotting", "new_axes", "new_figure", "legend_outside",
           "rc", "style", "save_figure", "save_result", "load_result", "load", "elapsed_bar"]

#: File holding the type tag, version and scalar content of a saved result.
MANIFEST = "result.json"
#: Version of the saved-result layout (bumped when a reader could misread an older folder).
FORMAT_VERSION = 1
#: The results :func:`load` may build, by the type tag their ``save`` writes
#: (``module:qualname``): ``result.json`` names one of these, never an arbitrary module. A new
#: saved result adds its tag here (``tests/umbrella/test_display.py`` checks every ``save_result`` caller).
LOADABLE = ("normlab.theory.results:GameResult", "normlab.llm_runs.probes:StrategyProbe",
            "normlab.calibration.posterior:StrategyFit", "normlab.calibration.prediction:Prediction",
            "normlab.calibration.observed_critical_mass:EmpiricalCriticalMass",
            "normlab.calibration.pipeline:Calibration", "normlab.calibration.adequacy:Adequacy",
            "normlab.calibration.sensitivity:StateSensitivity", "normlab.calibration.tip:TipResult")
#: Every result class (``module:qualname``, like :data:`LOADABLE`) with what it offers beyond a
#: one-line ``repr`` and an HTML card (``_repr_html_``): ``summary`` (a dict of plain Python values;
#: ``summary_frame``: a tidy DataFrame, one row per point of a sweep), ``to_frame`` (a tidy DataFrame), ``plot`` (an Axes or a Figure; ``path=`` saves it) and ``save``
#: (``save``/``load`` round trip; the tag is in :data:`LOADABLE`). Each class builds a tiny instance
#: from literal data with its ``_contract_example()`` classmethod, and ``tests/umbrella/test_contracts.py``
#: checks every entry against this contract (a new result class adds its line here).
RESULTS = {
    "normlab.schema:GameLog": ("summary", "plot"),
    "normlab.theory.results:GameResult": ("summary", "to_frame", "plot", "save"),
    "normlab.theory.strategies:StrategyTable": ("summary", "to_frame", "plot"),
    "normlab.theory.committed_minority:MeanFieldTrajectory": ("summary", "to_frame", "plot"),
    "normlab.theory.memory_mean_field:StrategyMeanField": ("summary", "to_frame", "plot"),
    "normlab.theory.norm_contagion:ContagionResult": ("summary", "to_frame", "plot"),
    "normlab.theory.norm_contagion:ContagionODE": ("summary", "to_frame", "plot"),
    "normlab.theory.sweeps:CriticalMassResult": ("summary", "to_frame", "plot"),
    "normlab.theory.sweeps:SweepResult": ("summary_frame", "to_frame", "plot"),
    "normlab.theory.itcmas.ltrha:LTRHAResult": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.runner.result:LLMRunResult": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.runner.estimate:RunEstimate": ("to_frame",),
    "normlab.llm_runs.probes:StrategyProbe": ("summary", "to_frame", "plot", "save"),
    "normlab.llm_runs.probes.bias:BiasResult": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.probes.meta:MetaResult": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.probes.neutral:NeutralSearch": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.crsec.records:NormDatabase": ("to_frame",),
    "normlab.llm_runs.crsec.runner:PopulationRun": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.published.crsec:CRSECRun": ("to_frame",),
    "normlab.llm_runs.scene.scoring:SceneScore": ("summary", "to_frame", "plot"),
    "normlab.llm_runs.scene.scoring:PublishedResults": ("to_frame",),
    "normlab.llm_runs.scene.taxonomy:Taxonomy": ("to_frame",),
    "normlab.calibration.inputs:StateCounts": ("summary", "to_frame"),
    "normlab.calibration.posterior:StrategyFit": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.run_effects:RunEffects": ("summary",),
    "normlab.calibration.bayes:ModelComparison": ("summary", "to_frame", "plot"),
    "normlab.calibration.prediction:Prediction": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.experiment:ExperimentDesign": ("summary", "to_frame"),
    "normlab.calibration.sensitivity:StateSensitivity": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.group_size:GroupSizeCurve": ("summary", "to_frame", "plot"),
    "normlab.calibration.probe_prediction:ProbeFit": ("summary", "to_frame"),
    "normlab.calibration.probe_prediction:ProbePrediction": ("summary", "to_frame", "plot"),
    "normlab.calibration.observed_critical_mass:EmpiricalCriticalMass": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.scoring:Scores": ("summary", "to_frame", "plot"),
    "normlab.calibration.transfer:TransferScores": ("summary", "to_frame", "plot"),
    "normlab.calibration.adequacy:Adequacy": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.adequacy:PairAgreement": ("summary", "to_frame", "plot"),
    "normlab.calibration.asymmetry:AsymmetryResult": ("to_frame", "plot"),
    "normlab.calibration.compare:TrajectoryComparison": ("summary", "to_frame", "plot"),
    "normlab.calibration.probe_comparison:ProbeCheck": ("to_frame", "plot"),
    "normlab.calibration.adoption:AdoptionFit": ("summary", "to_frame", "plot"),
    "normlab.calibration.tip:TipResult": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.pipeline:Calibration": ("summary", "to_frame", "plot", "save"),
    "normlab.calibration.critical_mass_check:CriticalMassCheck": ("summary", "to_frame"),
    "normlab.demo.pipeline:DemoResult": ("to_frame",),
}
#: Integer fields of ``result.json`` checked before a result is built from it: ``(lowest,
#: highest)`` (``None`` is left to the class; ``memory = -3`` or ``n_agents = 1e18`` is one line).
CHECKED_FIELDS = {"memory": (0, 1_000), "n_agents": (1, 10**8), "n_names": (0, 10**6), "n_draws": (1, 10**8),
                  "within_rounds": (1, 10**9), "llm_calls": (0, 10**15), "production_columns": (0, 10**6),
                  "max_interactions": (0, 10**15)}
#: Largest ``result.json`` read.
MAX_MANIFEST_BYTES = 64 * 2**20


# ----------------------------------------------------------------------------- numbers
def tqdm(*args, **kwargs):
    """A progress bar: ``tqdm.auto``'s (a widget in a notebook) where ipywidgets can draw it, else
    tqdm's text bar -- never the "IProgress not found" ``TqdmWarning`` that ``tqdm.auto`` prints into a
    notebook's output when ipywidgets is not installed (the ``notebooks`` extra installs it).
    Arguments as :class:`tqdm.std.tqdm`'s."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm as bar
    else:
        from tqdm.std import tqdm as bar
    return bar(*args, **kwargs)


def _is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)


def fmt(x, digits: int = 3) -> str:
    """A number as a person would write it: integers exact, floats to ``digits`` significant
    digits, ``None``/NaN as an em dash, infinity as ``not reached``."""
    x = plain(x)
    if x is None or _is_nan(x):
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    if isinstance(x, float):
        if math.isinf(x):
            return "not reached" if x > 0 else "-inf"
        if x.is_integer() and abs(x) < 1e15:
            return fmt(int(x))
        if abs(x) >= 10 ** digits:
            return f"{x:,.0f}"
        out = f"{x:.{digits}g}"
        d = digits
        while float(out) in (1.0, -1.0) and d < 6:  # 0.99996 is not 1
            d += 1
            out = f"{x:.{d}g}"
        return out
    return str(x)


def fmt_interval(low, high, digits: int = 3) -> str:
    """``[low, high]``, or an empty string when both ends are missing (or both infinite)."""
    low, high = plain(low), plain(high)
    if (low is None or _is_nan(low)) and (high is None or _is_nan(high)):
        return ""
    if isinstance(low, float) and isinstance(high, float) and math.isinf(low) and low == high:
        return ""  # "not reached [not reached, not reached]" says it once
    return f"[{fmt(low, digits)}, {fmt(high, digits)}]"


def plain(obj):
    """``obj`` with every NumPy scalar or array turned into plain Python (recursively through
    dicts, lists and tuples; tuples stay tuples), for ``summary()`` and JSON."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency
        np = None
    if isinstance(obj, dict):
        return {(plain(k) if not isinstance(k, str) else k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(plain(v) for v in obj)
    if np is not None:
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, np.integer):
            return int(obj)
        if isinstance(obj, np.floating):
            return float(obj)
        if isinstance(obj, np.str_):
            return str(obj)
        if isinstance(obj, np.ndarray):
            return plain(obj.tolist())
    if obj is not None and type(obj).__name__ in ("NAType", "NaTType"):
        return None
    return obj


# ----------------------------------------------------------------------------- text and HTML
def short_repr(name: str, *parts, width: int = 100) -> str:
    """``Name(part, part, ...)``; wrapped onto indented lines once it is wider than ``width``.
    Empty parts are dropped."""
    parts = [str(p) for p in parts if p not in (None, "")]
    one = f"{name}({', '.join(parts)})"
    if len(one) <= width:
        return one
    lines, cur = [], ""
    for p in parts:
        piece = p + ","
        if cur and len(cur) + 1 + len(piece) > width - 2:
            lines.append(cur)
            cur = piece
        else:
            cur = f"{cur} {piece}" if cur else piece
    lines.append(cur.rstrip(","))
    return f"{name}(\n  " + "\n  ".join(lines) + "\n)"


_CSS = ("font-family:var(--jp-ui-font-family, sans-serif);font-size:13px;line-height:1.35;"
        "border:1px solid #ccc;border-radius:4px;padding:6px 10px;display:inline-block;max-width:100%")
_TD = "padding:1px 10px 1px 0;text-align:left;border:none"
_TDN = "padding:1px 10px 1px 0;text-align:right;border:none;font-variant-numeric:tabular-nums"


def html_card(title: str, rows=(), *, subtitle: str = "", settings: dict | None = None, note: str = "",
              level: float | None = 0.95, max_rows: int = 40) -> str:
    """A compact HTML card: title, a table of key numbers with intervals, settings, a note.

    Parameters
    ----------
    title : str
        The class name (shown bold).
    rows : sequence of tuple
        ``(label, value)``, ``(label, value, (low, high))`` or ``(label, value, interval, note)``;
        numbers are formatted with :func:`fmt`, intervals with :func:`fmt_interval` (a string is
        shown as it is).
    subtitle : str, optional
        One line after the title (e.g. the model and population size).
    settings : dict, optional
        Shown as ``key = value`` pairs under the table.
    note : str, optional
        A closing sentence (what the numbers mean, what to call next).
    level : float or None, optional
        Level of the intervals, named in the column header.
    max_rows : int, optional
        Rows shown at most (the rest are counted).
    """
    e = html.escape
    rows = list(rows)
    has_int = any(len(r) > 2 and r[2] not in (None, "") for r in rows)
    has_note = any(len(r) > 3 and r[3] for r in rows)
    out = [f'<div class="normlab-result" style="{_CSS}">', f"<b>{e(title)}</b>"]
    if subtitle:
        out.append(f' <span style="color:#555">{e(subtitle)}</span>')
    if rows:
        head = "interval" if level is None else f"{level:.0%} interval"
        out.append('<table style="border-collapse:collapse;margin:4px 0">')
        out.append(f'<tr><th style="{_TD}">quantity</th><th style="{_TDN}">value</th>'
                   + (f'<th style="{_TDN}">{head}</th>' if has_int else "")
                   + (f'<th style="{_TD}"></th>' if has_note else "") + "</tr>")
        for r in rows[:max_rows]:
            label, value = r[0], r[1]
            iv = r[2] if len(r) > 2 else None
            nt = r[3] if len(r) > 3 else ""
            ivs = iv if isinstance(iv, str) else (fmt_interval(*iv) if iv is not None else "")
            val = value if isinstance(value, str) else fmt(value)
            out.append(f'<tr><td style="{_TD}">{e(str(label))}</td><td style="{_TDN}">{e(val)}</td>'
                       + (f'<td style="{_TDN}">{e(ivs)}</td>' if has_int else "")
                       + (f'<td style="{_TD};color:#555">{e(str(nt))}</td>' if has_note else "") + "</tr>")
        if len(rows) > max_rows:
            out.append(f'<tr><td style="{_TD};color:#555" colspan="4">… {len(rows) - max_rows} more</td></tr>')
        out.append("</table>")
    if settings:
        items = [f"{e(str(k))} = {e(v if isinstance(v, str) else fmt(v))}" for k, v in settings.items()
                 if v is not None and v != ""]
        out.append(f'<div style="color:#555;font-size:12px">{"; ".join(items)}</div>')
    if note:
        out.append(f'<div style="color:#555;font-size:12px;margin-top:2px">{e(note)}</div>')
    out.append("</div>")
    return "".join(out)


# ----------------------------------------------------------------------------- figures
def rc(look: str = "results") -> dict:
    """Matplotlib rc settings of normlab's two looks: ``"results"`` (what ``.plot()`` draws:
    seaborn ``whitegrid``, colour-blind palette) and ``"paper"`` (the regenerated figures of
    :mod:`normlab.figures`: seaborn ``ticks``, no top/right spines, as in the paper)."""
    import matplotlib as mpl
    import seaborn as sns

    if look == "paper":
        return {**sns.axes_style("ticks"), **sns.plotting_context("notebook"), "axes.spines.top": False,
                "axes.spines.right": False, "legend.frameon": False,
                "axes.prop_cycle": mpl.cycler(color=sns.color_palette())}
    if look != "results":
        raise ValueError(f"look must be 'results' or 'paper'; got {look!r}")
    return {**sns.axes_style("whitegrid"), **sns.plotting_context("notebook", font_scale=0.9),
            "axes.prop_cycle": mpl.cycler(color=sns.color_palette("colorblind")),
            "figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight", "legend.frameon": False}


@contextlib.contextmanager
def style(look: str = "results"):
    """A context in which figures get one of normlab's looks (:func:`rc`); the global matplotlib
    settings are left as they were."""
    import matplotlib as mpl

    inner = None
    with mpl.rc_context(rc(look)):
        try:
            yield
        finally:
            inner = mpl.rcParams["interactive"]
    # a backend first activated inside (Jupyter's inline backend switches interactive mode on
    # with the first figure) keeps its mode; otherwise no figure would show after the first
    mpl.rcParams["interactive"] = inner


def new_axes(ax=None, figsize=(5.5, 3.8)):
    """``ax`` itself, or a new figure's single Axes."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize=(10, 3.8), axes=None, **kw):
    """A new figure with a grid of Axes, or ``(figure, axes)`` of the ``axes`` given."""
    import matplotlib.pyplot as plt
    import numpy as np

    if axes is not None:
        axes = np.atleast_1d(axes)
        return axes.flat[0].figure, axes
    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, layout="constrained", squeeze=False, **kw)
    return fig, axes


def legend_outside(ax, where: str = "right", **kw):
    """The legend of ``ax`` outside the plot (``right`` or ``below``), where it cannot hide data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        if where == "below":  # under the x label: 40 points below the axes, whatever their height
            from matplotlib.transforms import offset_copy

            kw = {"ncol": min(len(handles), 2), **kw}
            ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=8,
                      bbox_transform=offset_copy(ax.transAxes, fig=ax.figure, y=-40, units="points"), **kw)
        else:
            ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0,
                      **kw)
    return ax


def save_figure(figure_or_axes, path) -> Path:
    """Save the figure of ``figure_or_axes`` (an Axes, a Figure, or an array of Axes) to
    ``path`` (format from the suffix; parent folders are created); returns the path."""
    import numpy as np
    from matplotlib.figure import Figure

    obj = figure_or_axes
    if isinstance(obj, np.ndarray):
        obj = obj.flat[0]
    fig = obj
    for _ in range(3):  # Axes -> (Sub)Figure -> root Figure
        if isinstance(fig, Figure):
            break
        fig = getattr(fig, "figure", None)
    if not isinstance(fig, Figure):
        raise TypeError(f"cannot save a {type(figure_or_axes).__name__}: expected a matplotlib Axes or Figure")
    path = Path(path)
    if not path.suffix:
        raise ValueError(f"path {str(path)!r} has no suffix; use .png, .pdf or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight")
    return path


def error_bars(center, low, high):
    """``[below, above]`` for Matplotlib's ``yerr=`` / ``xerr=``: the distances from ``center`` to an
    interval's ends, never negative (a point estimate can lie outside its interval -- the mean of draws
    beside their quantiles at 0 or 1, a probability with mass on names that only start like a pool
    name -- and Matplotlib refuses a negative error bar) and 0 where an end is missing. Accepts
    scalars, sequences or arrays (pandas Series included); returns two float arrays."""
    import numpy as np

    c = np.atleast_1d(np.asarray(center, dtype=float))
    lo = np.broadcast_to(np.atleast_1d(np.asarray(low, dtype=float)), c.shape)
    hi = np.broadcast_to(np.atleast_1d(np.asarray(high, dtype=float)), c.shape)
    below = np.nan_to_num(np.clip(c - lo, 0.0, None), nan=0.0)
    above = np.nan_to_num(np.clip(hi - c, 0.0, None), nan=0.0)
    return [below, above]


def plotting(func):
    """Decorator for every ``plot`` method and figure function: draws in :func:`style` and
    adds a keyword-only ``path``; with a path, the figure is also saved there
    (:func:`save_figure`). The decorated function returns what it drew on (Axes or Figure)."""

    @functools.wraps(func)
    def wrapper(*args, path=None, **kwargs):
        with style():
            out = func(*args, **kwargs)
            if path is not None:
                save_figure(out, path)
        return out

    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    new = inspect.Parameter("path", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = next((i for i, p in enumerate(params) if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))
    wrapper.__signature__ = sig.replace(parameters=params[:at] + [new] + params[at:])
    doc = wrapper.__doc__ or ""
    if "path :" not in doc:
        wrapper.__doc__ = doc.rstrip() + (
            "\n\n    Figures are drawn in normlab's seaborn style; ``path=...`` (keyword) also saves the\n"
            "    figure there (PNG, PDF or SVG by suffix).\n")
    return wrapper


# ----------------------------------------------------------------------------- saving results
def _type_tag(cls) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _json_default(o):
    o2 = plain(o)
    if o2 is not o:
        return o2
    if hasattr(o, "isoformat"):
        return o.isoformat()
    if isinstance(o, (set, frozenset)):
        return sorted(o)
    if isinstance(o, Path):
        return str(o)
    return repr(o)  # provenance only: kept readable rather than failing the save


def save_result(path, cls, meta: dict, tables: dict | None = None, children: dict | None = None) -> Path:
    """Write a result folder: ``result.json`` (``meta`` plus the type tag and versions) and one
    Parquet file per table; ``children`` are ``{name: result}`` saved in sub-folders by their own
    ``save``. An existing folder is overwritten only if it holds a saved result.

    Returns
    -------
    pathlib.Path
        The folder.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{str(path)!r} exists and is not a folder; save() writes a folder")
    if path.is_dir() and any(path.iterdir()) and not (path / MANIFEST).exists():
        raise ValueError(f"{str(path)!r} is a non-empty folder without {MANIFEST}; choose a new path")
    path.mkdir(parents=True, exist_ok=True)
    tables = dict(tables or {})
    children = dict(children or {})
    for name, df in tables.items():
        df.to_parquet(path / f"{name}.parquet", index=False)
    for name, child in children.items():
        child.save(path / name)
    doc = {"format": _type_tag(cls), "version": FORMAT_VERSION, "normlab": normlab.__version__,
           "tables": sorted(tables), "children": sorted(children), **meta}
    from normlab.user_files import write_user_text

    write_user_text(path / MANIFEST, json.dumps(doc, indent=1, default=_json_default, allow_nan=True))
    return path


def load_result(path, cls) -> tuple[dict, dict]:
    """Read a folder written by :func:`save_result` for ``cls``: ``(meta, tables)``.

    Raises
    ------
    ValueError
        Not a saved result, a result of another type, or a newer layout.
    """
    import pandas as pd

    from normlab.user_files import read_user_parquet

    path = Path(path)
    meta = _manifest(path)
    want = _type_tag(cls)
    if meta["format"] != want:
        raise ValueError(f"{str(path)!r} holds a {meta['format'].split(':')[-1]}, not a {cls.__name__} "
                         f"(use normlab.load(path) to read any saved result)")
    tables = {name: read_user_parquet(_inside(path, f"{name}.parquet"), f"{path / name}.parquet")
              for name in meta.get("tables", [])}
    return meta, tables


def _inside(folder: Path, name: str) -> Path:
    """``folder / name`` for a file name read from ``result.json``: a plain name (letters, digits,
    ``_ . -``; no separator, no ``..``) whose path, links followed, stays inside ``folder``."""
    import re

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name) or ".." in name:
        raise ValueError(f"{MANIFEST} in {str(folder)!r} names the file {name!r}; a saved result's tables and "
                         "sub-folders are plain names inside its folder")
    p = folder / name
    if not p.resolve().is_relative_to(folder.resolve()):
        raise ValueError(f"{str(p)!r} leads outside the saved result's folder; refused")
    return p


def _manifest(path: Path) -> dict:
    from normlab.user_files import read_user_json

    f = path / MANIFEST
    if not (f.exists() or f.is_symlink()):
        raise ValueError(f"{str(path)!r} is not a saved normlab result (no {MANIFEST})")
    meta = read_user_json(f, str(f), max_bytes=MAX_MANIFEST_BYTES)  # a regular file, size and depth capped
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), str) or \
            not meta["format"].startswith("normlab."):
        raise ValueError(f"{str(f)!r} is not a normlab result manifest")
    version = meta.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{str(f)!r}: version must be an integer; got {version!r}")
    if version > FORMAT_VERSION:
        raise ValueError(f"{str(path)!r} was saved by a newer normlab (layout version {meta['version']}); upgrade normlab")
    for key in ("tables", "children"):
        names = meta.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"{str(f)!r}: {key} must be a list of names; got {names!r}"[:300])
        for n in names:
            _inside(path, n)
    _check_fields(meta, str(f))
    return meta


def _check_fields(meta: dict, where: str) -> None:
    """The integer fields of a manifest (:data:`CHECKED_FIELDS`) within their ranges, and
    ``names`` a list of strings, before a class allocates anything from them."""
    for key, (low, high) in CHECKED_FIELDS.items():
        v = meta.get(key)
        if v is None:
            continue
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise ValueError(f"{where}: {key} must be an integer in [{low:,}, {high:,}]; got {meta.get(key)!r}")
    names = meta.get("names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise ValueError(f"{where}: names must be a list of strings; got {names!r}"[:300])


#: Most entries (files and sub-folders, all levels) a saved result's folder may hold for ``load``.
MAX_SAVED_ENTRIES = 10_000


def _stays_inside(folder: Path) -> None:
    """Every entry of a saved result's folder, at every level, links resolved, inside the folder:
    a ``fit/`` or ``prediction/`` sub-folder (or any file in one) that is a link leading out is
    refused before any class reads it (a class reads its children by name, whatever
    ``result.json`` lists)."""
    root = folder.resolve()
    stack, seen = [folder], 0
    while stack:
        d = stack.pop()
        for entry in d.iterdir():
            seen += 1
            if seen > MAX_SAVED_ENTRIES:
                raise ValueError(f"{str(folder)!r} holds more than {MAX_SAVED_ENTRIES:,} files and folders; not a "
                                 "saved normlab result")
            target = entry.resolve()
            if not target.is_relative_to(root):
                raise ValueError(f"{str(entry)!r} leads outside the saved result's folder (to {str(target)!r}); "
                                 "refused")
            if entry.is_dir() and not entry.is_symlink():
                stack.append(entry)


def load(path):
    """Read back any result saved with ``result.save(path)`` (the class is read from the folder).

    Parameters
    ----------
    path : str or os.PathLike
        The folder ``save`` wrote.

    Returns
    -------
    object
        The result, of the class that saved it.

    Raises
    ------
    ValueError
        Not a saved result; a type outside :data:`LOADABLE`; a table or sub-folder named in
        ``result.json`` outside the folder, or any file or sub-folder (``fit/``, ``prediction/``)
        that is a link leading out of it; a field out of range (:data:`CHECKED_FIELDS`); a file
        that is not a regular file or too large (:mod:`normlab.user_files`).
    """
    path = Path(path)
    tag = _manifest(path)["format"]
    _stays_inside(path)
    if tag not in LOADABLE:  # result.json never chooses a module to import
        raise ValueError(f"{str(path / MANIFEST)!r} names the type {tag!r}, which is not a saved normlab result; "
                         f"readable: {', '.join(t.split(':')[1] for t in LOADABLE)}")
    module, _, qualname = tag.partition(":")
    cls = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    try:
        return cls.load(path)
    except (KeyError, IndexError) as exc:  # a field or column the class needs is missing or out of range
        raise ValueError(f"{str(path)!r} is a damaged saved {qualname}: {type(exc).__name__} {exc}") from None


# ----------------------------------------------------------------------------- progress
class elapsed_bar:
    """Context manager: a progress line on stderr showing the elapsed time of a step whose length
    is not known in advance (a tqdm bar without total, refreshed twice a second by a thread)."""

    def __init__(self, desc: str, *, enabled: bool = True):
        self.desc, self.enabled = desc, bool(enabled)
        self._bar = self._thread = self._stop = None

    def __enter__(self):
        if self.enabled:
            import threading

            self._bar = tqdm(total=None, desc=self.desc, bar_format="{desc}: {elapsed} elapsed", leave=False)
            self._stop = threading.Event()

            def tick():
                while not self._stop.wait(0.5):
                    self._bar.refresh()

            self._thread = threading.Thread(target=tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._stop.set()
            self._thread.join()
            self._bar.close()
        return False
