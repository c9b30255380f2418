"""The registry of regenerated figures and tables, and :func:`make`, which writes them.

Each entry names a data function (returns a tidy DataFrame; ``attrs["notes"]`` says what was
left out and the key numbers) and, for figures, a drawing function (returns a matplotlib
Figure). An entry is declared next to its data function by :func:`figure` (``@figure("fig1a",
"Fig. 1A: ...")``) in one of :data:`FIGURE_MODULES`; :data:`FIGURES` gathers them on first use.
:func:`make` runs them, writes ``<key>.png`` and ``<key>.csv``, and reports what it skipped and
why; ``normlab figures`` and ``paper_figures/*.py`` call it.
"""

from __future__ import annotations

import importlib
import inspect
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from normlab._display import style
from normlab._validate import check_out_dir

from ._common import FigureSkipped, archives

__all__ = ["FigureSpec", "FIGURES", "FIGURE_MODULES", "figure", "FigureOutcome", "make", "figure_keys", "script",
           "skip_reasons"]


@dataclass(frozen=True)
class FigureSpec:
    """One figure or table.

    Attributes
    ----------
    key : str
        Short name (``fig1a``, ``table1``, ...), also the output file stem.
    title : str
    module : str
        Module of :mod:`normlab.figures` holding the functions.
    data : str
        Data function (tidy DataFrame).
    draw : str or None
        Drawing function (``None`` for tables: CSV only).
    paper : str
        Which paper: ``"flint-ashery-2025"`` or ``"itcmas"``.
    published : str or None
        The authors' PDF to compare with (``ai-norms-code/figures/``), where there is one.
    """

    key: str
    title: str
    module: str
    data: str
    draw: str | None
    paper: str = "flint-ashery-2025"
    published: str | None = None

    def functions(self):
        """``(data_function, draw_function or None)``."""
        mod = importlib.import_module(f"normlab.figures.{self.module}")
        return getattr(mod, self.data), (getattr(mod, self.draw) if self.draw else None)


#: The modules of :mod:`normlab.figures` whose data functions declare figures (:func:`figure`).
FIGURE_MODULES = ("fig1", "fig2", "fig3", "meta", "emergence", "bias", "memory_states", "robustness", "tables",
                  "itcmas")
_DECLARED: dict[str, FigureSpec] = {}


def figure(key: str, title: str, *, draw=True, paper: str = "flint-ashery-2025", published: str | None = None):
    """Declare the decorated data function as the figure (or table) ``key`` of :data:`FIGURES`.

    The function returns the figure's tidy DataFrame; it may take ``data`` (the published
    archives), ``small`` and ``out`` (:func:`make` passes those it names). Its drawing function is
    ``<key>_draw`` in the same module (``draw=False``: a table, CSV only; a string names another
    function). A figure is then its functions plus the ``paper_figures/`` script that makes it.

    Parameters
    ----------
    key : str
        Short name (``fig1a``, ``table1``, ...), also the output file stem.
    title : str
    draw : bool or str, optional
    paper : str, optional
        ``"flint-ashery-2025"`` or ``"itcmas"``.
    published : str, optional
        The authors' PDF to compare with (``ai-norms-code/figures/``).
    """

    def declare(fn):
        spec = FigureSpec(key, title, fn.__module__.rsplit(".", 1)[-1], fn.__name__,
                          f"{key}_draw" if draw is True else (draw or None), paper, published)
        known = _DECLARED.get(key)
        if known is not None and (known.module, known.data) != (spec.module, spec.data):
            raise ValueError(f"figure {key!r} is declared twice: {known.module}.{known.data} and {spec.module}.{spec.data}")
        _DECLARED[key] = spec
        return fn

    return declare


def _paper_order(spec: FigureSpec) -> tuple:
    """The paper's order: main figures, supplementary figures, tables, supplementary tables (by
    number, then panel), then the other papers' figures as declared."""
    import re

    m = re.fullmatch(r"(fig|table)(S?)(\d+)([a-z]?)(.*)", spec.key)
    if spec.paper != "flint-ashery-2025" or m is None:
        return (1,)
    kind, supp, num, panel, rest = m.groups()
    return (0, kind == "table", supp == "S", int(num), rest != "", panel, rest)


def _figures() -> dict:
    """:data:`FIGURES`, built on first use from the ``@figure`` declarations of :data:`FIGURE_MODULES`."""
    got = globals().get("FIGURES")
    if got is None:
        for m in FIGURE_MODULES:
            importlib.import_module(f"normlab.figures.{m}")
        order = {m: k for k, m in enumerate(FIGURE_MODULES)}
        specs = sorted(_DECLARED.values(), key=lambda s: (_paper_order(s), order.get(s.module, len(order))))
        got = globals()["FIGURES"] = {s.key: s for s in specs}
    return got


def __getattr__(name):
    if name == "FIGURES":  # every figure and table, by key, in the paper's order (built on first use)
        return _figures()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def figure_keys(only=None) -> list[str]:
    """Validated keys: all when ``only`` is None; else the listed ones (str "a,b" or sequence)."""
    figures = _figures()
    if only is None:
        return list(figures)
    keys = [k.strip() for k in only.split(",")] if isinstance(only, str) else [str(k) for k in only]
    keys = [k for k in keys if k]
    bad = [k for k in keys if k not in figures]
    if bad or not keys:
        raise ValueError(f"unknown figure(s) {bad or only!r}; choose from: {', '.join(figures)}")
    return keys


@dataclass(frozen=True)
class FigureOutcome:
    """What :func:`make` did for one entry: ``status`` is ``"written"`` or ``"skipped"``."""

    key: str
    status: str
    files: tuple = ()
    reason: str = ""
    notes: tuple = ()
    seconds: float = 0.0


def _kw(fn, **kw) -> dict:
    params = inspect.signature(fn).parameters
    return {k: v for k, v in kw.items() if k in params}


def script(keys, doc: str, argv=None, *, add_arguments=None, options=None, draw_options=None):
    """Command line of a ``paper_figures/<figure>.py`` script: ``--out DIR`` (default ``figures``),
    ``--data DIR``, ``--small``, ``--dpi``, plus the script's own flags.

    Parameters
    ----------
    keys : str or sequence of str
        Registry keys the script makes.
    doc : str
        The script's docstring (its ``--help``).
    argv : list of str, optional
    add_arguments : callable, optional
        ``add_arguments(parser)`` adds the script's own flags.
    options, draw_options : callable, optional
        ``options(args)`` -> per-key keyword arguments of the data / drawing functions.

    Returns
    -------
    list of FigureOutcome
    """
    import argparse

    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("figures"), help="output folder (default: figures)")
    ap.add_argument("--data", type=Path, default=None, help="folder holding published AI-norms archives "
                                                            "(default: $NORMLAB_AINORMS or shared/data/ai-norms)")
    ap.add_argument("--small", action="store_true", help="fewer simulation runs (fast)")
    ap.add_argument("--dpi", type=int, default=150)
    if add_arguments is not None:
        add_arguments(ap)
    args = ap.parse_args(argv)
    return make(keys, out=args.out, data=args.data, small=args.small, dpi=args.dpi,
                options=options(args) if options else None, draw_options=draw_options(args) if draw_options else None)


def make(only=None, *, out, data=None, small: bool = False, dpi: int = 150, options: dict | None = None,
         draw_options: dict | None = None, report=print, endpoint=None) -> list[FigureOutcome]:
    """Regenerate figures and tables into ``out``.

    Parameters
    ----------
    only : str or sequence of str, optional
        Keys of :data:`FIGURES` (default: all).
    out : str or pathlib.Path
        Output folder (created).
    data : path or Archives, optional
        Published AI-norms data (default: ``$NORMLAB_AINORMS`` or ``shared/data/ai-norms`` found
        beside the working directory); figures that need absent data are skipped.
    small : bool
        Fewer simulation runs and posterior draws (seconds instead of minutes).
    dpi : int
    options, draw_options : dict, optional
        Per key, extra keyword arguments of the data / drawing function (e.g.
        ``{"fig1a": {"invent": "keep"}}``, ``{"fig1a": {"theory_line": True}}``).
    report : callable or None
        Receives one line per event (default ``print``).
    endpoint : normlab.llm_runs.EndpointConfig, optional
        The LLM of the figures run on one (Figs. S11, S12, Table S6; ``normlab figures
        --embedded-model``, ``--base-url``); default: the environment's, else the embedded SmolLM2.

    Returns
    -------
    list of FigureOutcome

    Raises
    ------
    ValueError
        Unknown keys.
    FileNotFoundError
        ``data`` names a path that does not exist.
    """
    keys = figure_keys(only)
    options, draw_options = options or {}, draw_options or {}
    for k in list(options) + list(draw_options):
        if k not in keys:
            raise ValueError(f"options given for {k!r}, which is not among the figures made ({', '.join(keys)})")
    check_out_dir(out, "out")
    out = Path(out)
    arch = archives(data, required=False)  # a missing data folder fails before the output folder is made
    out.mkdir(parents=True, exist_ok=True)
    say = report or (lambda s: None)
    outcomes = []
    with style("paper"):  # keeps Jupyter's interactive mode if the first figure switches it on
        for key in keys:
            outcomes.append(_make_one(_figures()[key], out, arch, small, dpi, options.get(key, {}),
                                      draw_options.get(key, {}), say, endpoint))
    n_w = sum(o.status == "written" for o in outcomes)
    skipped = [o for o in outcomes if o.status == "skipped"]
    say(f"{n_w} written, {len(skipped)} skipped" + (":" if skipped else ""))
    for line in skip_reasons(skipped):
        say(line)
    return outcomes


def skip_reasons(outcomes) -> list[str]:
    """Each reason for skipping once, with the figures it skipped (in the order met)."""
    by: dict[str, list[str]] = {}
    for o in outcomes:
        if o.status == "skipped":
            by.setdefault(o.reason, []).append(o.key)
    return [f"  {', '.join(keys)}: {why}" for why, keys in by.items()]


def _make_one(spec, out, arch, small, dpi, opts, draw_opts, say, endpoint=None) -> FigureOutcome:
    import matplotlib.pyplot as plt

    key = spec.key
    t0 = time.perf_counter()
    fdata, fdraw = spec.functions()
    try:
        df = fdata(**{**_kw(fdata, data=arch, small=small, out=out, **({} if endpoint is None else {"endpoint": endpoint})),
                      **opts})
    except FigureSkipped as exc:
        why = str(exc)
        if arch is not None and str(arch.path) not in why:
            why += f" (data folder: {arch.path})"
        say(f"{key:16s} skipped (the reason at the end)")
        return FigureOutcome(key, "skipped", reason=why, seconds=time.perf_counter() - t0)
    files = []
    csv = out / f"{key}.csv"
    _tidy_for_csv(df).to_csv(csv, index=False)
    files.append(csv)
    if fdraw is not None:
        fig = fdraw(df, **draw_opts)
        png = out / f"{key}.png"
        fig.savefig(png, dpi=dpi, bbox_inches="tight")
        plt.close(fig)
        files.insert(0, png)
    notes = tuple(df.attrs.get("notes", ()))
    dt = time.perf_counter() - t0
    say(f"{key:16s} wrote {', '.join(str(f) for f in files)} ({dt:.1f} s)")
    for n in notes:
        say(f"{'':16s}   {n}")
    return FigureOutcome(key, "written", tuple(str(f) for f in files), notes=notes, seconds=dt)


def _tidy_for_csv(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    out.attrs = {}
    return out
