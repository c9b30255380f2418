"""Shared pieces of :mod:`normlab.figures`: the published archives (found once, loaded once),
skips, the models of the paper, round binning and the figure style.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025); the authors'
``plotter.ipynb`` (Ariel-Flint-Ashery/AI-norms at commit e57aeef, MIT): colours, model labels,
population-round bins.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import rc
from normlab.calibration import find_ainorms
from normlab.llm_runs import load_ainorms, load_ainorms_meta, load_ainorms_probes
from normlab.llm_runs.published.ainorms import META_COLUMNS, PROBE_COLUMNS
from normlab.llm_runs.published.ainorms_archive import AINORMS_SOURCE

#: The four LLMs of the paper, in its order (Figs. 1-3).
MODELS = ("Llama-3-70B-Instruct", "Llama-3.1-70B-Instruct", "Claude-3.5-Sonnet", "Llama-2-70B-Chat")
#: Labels the published figures use.
SHORT = {"Llama-3-70B-Instruct": "Llama 3 70B", "Llama-3.1-70B-Instruct": "Llama 3.1 70B",
         "Claude-3.5-Sonnet": "Claude 3.5 Sonnet", "Llama-2-70B-Chat": "Llama 2 70b"}
#: The authors' colour per model (``CB_color_cycle`` of ``plotter.ipynb``).
COLORS = {"Llama-3-70B-Instruct": "#377eb8", "Llama-3.1-70B-Instruct": "#ff7f00",
          "Claude-3.5-Sonnet": "#4daf4a", "Llama-2-70B-Chat": "#984ea3"}
#: The published archive holding each model's runs.
ARCHIVES = {"Llama-3-70B-Instruct": "llama3_data.zip", "Llama-3.1-70B-Instruct": "llama31_data.zip",
            "Claude-3.5-Sonnet": "claude_data.zip", "Llama-2-70B-Chat": "llama2_data.zip"}
#: The committed-minority setting of each model in Fig. 3 / Table S3: (N, H).
CM_SETTING = {"Llama-3-70B-Instruct": (48, 3), "Llama-3.1-70B-Instruct": (24, 5),
              "Claude-3.5-Sonnet": (24, 5), "Llama-2-70B-Chat": (24, 5)}
TEN = "Q,M,X,Y,F,J,P,R,C,D"
#: The authors' remaining colours (after the four models) and markers.
CB_COLORS = ["#377eb8", "#ff7f00", "#4daf4a", "#984ea3", "#f781bf", "#a65628", "#999999", "#e41a1c", "#dede00"]
MARKERS = ["o", "D", ".", "s", "^", "<", ">", "d", "P", "X", "v", "p", "*", "h"]


class FigureSkipped(Exception):
    """A figure cannot be drawn from the data at hand; ``str(exc)`` says why."""


def check_model(model) -> str:
    """Return ``model`` if it is one of :data:`MODELS`, else raise a one-line ``ValueError``."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {list(MODELS)}; got {model!r}")
    return model


# ----------------------------------------------------------------------------- the archives
@dataclass(frozen=True, eq=False)
class Archives:
    """The published AI-norms data in one folder (any of the four archives), loaded on first use.

    Game runs, probes and meta-prompting tests are each read once (through the restricted
    unpickler of :mod:`normlab.llm_runs.published.ainorms`) and shared by every figure.

    Parameters
    ----------
    path : pathlib.Path
        A folder holding ``llama3_data.zip``, ``llama31_data.zip``, ``claude_data.zip`` and/or
        ``llama2_data.zip`` (or their unpacked pickles), or one archive.
    """

    path: Path

    @cached_property
    def games(self):
        """Every game run (baseline, swap, evolved) as an ``AINormsLog`` (``None`` if none)."""
        try:
            return load_ainorms(self.path)
        except FileNotFoundError:  # a folder without any .zip/.pkl
            return None
        except ValueError as exc:
            if "no AI-norms file" in str(exc):
                return None
            raise

    @cached_property
    def probes(self) -> pd.DataFrame:
        """Strategy and first-move probes (empty frame if none)."""
        try:
            return load_ainorms_probes(self.path)
        except FileNotFoundError:
            return pd.DataFrame(columns=list(PROBE_COLUMNS))
        except ValueError as exc:
            if "no AI-norms probe file" in str(exc):
                return pd.DataFrame(columns=list(PROBE_COLUMNS))
            raise

    @cached_property
    def meta(self) -> pd.DataFrame:
        """Meta-prompting tests (empty frame if none)."""
        try:
            return load_ainorms_meta(self.path)
        except FileNotFoundError:
            return pd.DataFrame(columns=list(META_COLUMNS))
        except ValueError as exc:
            if "no AI-norms meta-prompting file" in str(exc):
                return pd.DataFrame(columns=list(META_COLUMNS))
            raise

    def runs(self, *, model: str, kind=None, names: str | None = None, memory: int | None = None,
             n_agents: int | None = None):
        """The game runs of one setting as a ``GameLog`` (``None`` when there are none)."""
        g = self.games
        if g is None:
            return None
        cond = {"model": model}
        for k, v in (("kind", kind), ("names", names), ("memory", memory), ("n_agents", n_agents)):
            if v is not None:
                cond[k] = v
        sub = g.select(**cond)
        return sub if len(sub.runs) else None

    def need_runs(self, what: str, **sel):
        """Like :meth:`runs`, but raises :class:`FigureSkipped` naming the missing runs."""
        log = self.runs(**sel)
        if log is None:
            model = sel.get("model", "")
            raise FigureSkipped(f"{what}: no {model} runs in {self.path} (the {ARCHIVES.get(model, 'model')} archive "
                                "is absent or lacks them)")
        return log


_OPENED: dict = {}


def _signature(p: Path) -> tuple:
    files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.suffix in (".zip", ".pkl"))
    return tuple((str(q), q.stat().st_mtime_ns, q.stat().st_size) for q in files)


def find_data() -> Path | None:
    """The published data folder: ``$NORMLAB_AINORMS``, else ``shared/data/ai-norms`` beside the
    working directory, one of its parents or the installed package (``None`` if not found)."""
    return find_ainorms()


def archives(data=None, *, required: bool = True) -> Archives | None:
    """Resolve ``data`` (``None``: :func:`find_data`; a folder or archive path; an
    :class:`Archives`) to an :class:`Archives`, opened once per folder and process.

    Raises
    ------
    FigureSkipped
        No data found and ``required``.
    FileNotFoundError
        ``data`` names a path that does not exist.
    """
    if isinstance(data, Archives):
        return data
    if data is None:
        path = find_data()
        if path is None:
            if required:
                raise FigureSkipped(f"no published AI-norms data found: {AINORMS_SOURCE} (or pass --data DIR)")
            return None
    else:
        if not isinstance(data, (str, Path)):
            raise TypeError(f"data must be a folder path or an Archives; got {type(data).__name__}")
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"--data {path} does not exist: {AINORMS_SOURCE}")
    path = path.resolve()
    key = (str(path), _signature(path))
    if key not in _OPENED:
        _OPENED.clear()  # one folder at a time: the loaded runs take ~100 MB
        _OPENED[key] = Archives(path)
    return _OPENED[key]


def present(arch: Archives, models=MODELS, *, kind=None, names=None, memory=None, n_agents=None) -> list[str]:
    """The models among ``models`` with runs of the given setting."""
    return [m for m in models if arch.runs(model=m, kind=kind, names=names, memory=memory, n_agents=n_agents)
            is not None]


def missing_note(what: str, have, models=MODELS) -> str | None:
    """``"<what>: Claude-3.5-Sonnet, Llama-2-70B-Chat not drawn (archives absent)"`` or ``None``."""
    miss = [m for m in models if m not in have]
    return f"{what}: {', '.join(miss)} left out (no data for them)" if miss else None


def with_notes(df: pd.DataFrame, notes) -> pd.DataFrame:
    """Attach human-readable notes (what was left out, and why) to a figure's data."""
    df.attrs["notes"] = [n for n in notes if n]
    return df


# ----------------------------------------------------------------------------- round binning
def round_bins(values, n_agents: int) -> np.ndarray:
    """Means over population rounds: bins of ``n_agents`` consecutive entries from the first,
    the last partial bin kept (the authors' binning)."""
    v = np.asarray(values, dtype=float)
    n = -(-len(v) // n_agents)
    idx = np.arange(len(v)) // n_agents
    return np.bincount(idx, weights=v, minlength=n) / np.bincount(idx, minlength=n)


def success_by_run(log) -> pd.DataFrame:
    """Success rate per run and population round (label from 1, last partial round kept)."""
    inter = log.decisions.drop_duplicates(["run", "t"]).sort_values(["run", "t"])
    n_agents = log.runs.set_index("run")["n_agents"]
    rows = []
    for run, g in inter.groupby("run", sort=True):
        s = round_bins(g["success"].to_numpy(), int(n_agents.loc[run]))
        rows.append(pd.DataFrame({"run": run, "round": np.arange(1, len(s) + 1), "success_rate": s}))
    return pd.concat(rows, ignore_index=True)


def production_by_run(log, name_of_run, *, uncommitted: bool = False) -> pd.DataFrame:
    """Share of one name among the valid productions per run and population round.

    ``name_of_run`` maps a run id to the name counted (e.g. its initial consensus).
    """
    d = log.decisions
    if uncommitted:
        d = d[~d["committed"]]
    n_agents = log.runs.set_index("run")["n_agents"]
    rows = []
    for run, g in d[d["valid"]].groupby("run", sort=True):
        nm = name_of_run(run)
        N = int(n_agents.loc[run])
        t = g["t"].to_numpy()
        hit = (g["name"].to_numpy() == nm).astype(float)
        nb = int(t.max()) // N + 1
        tot = np.bincount(t // N, minlength=nb).astype(float)
        with np.errstate(invalid="ignore"):
            share = np.bincount(t // N, weights=hit, minlength=nb) / tot
        rows.append(pd.DataFrame({"run": run, "round": np.arange(1, nb + 1), "name": nm, "share": share}))
    return pd.concat(rows, ignore_index=True)


def pad_mean(curves: pd.DataFrame, value: str, *, pad=1.0, length: int | None = None) -> pd.DataFrame:
    """Mean over runs per round after padding each run to ``length`` rounds with ``pad`` (the
    authors' convention: a run that stopped at consensus counts as ``pad`` afterwards; ``None``
    averages only the runs still going)."""
    wide = curves.pivot(index="run", columns="round", values=value)
    L = int(wide.columns.max()) if length is None else int(length)
    wide = wide.reindex(columns=range(1, L + 1))
    if pad is not None:
        wide = wide.apply(lambda r: _pad_row(r, pad), axis=1)
    return pd.DataFrame({"round": np.arange(1, L + 1), value: wide.mean(axis=0, skipna=True).to_numpy(),
                         "n_runs": wide.notna().sum(axis=0).to_numpy()})


def _pad_row(r: pd.Series, pad) -> pd.Series:
    v = r.to_numpy(dtype=float).copy()
    seen = np.flatnonzero(~np.isnan(v))
    if len(seen):
        v[seen[-1] + 1:] = pad
    return pd.Series(v, index=r.index)


# ----------------------------------------------------------------------------- style
def style() -> dict:
    """The figures' look as matplotlib rc settings (seaborn ``ticks``, ``notebook`` context, no
    top/right spines, no legend frame; one home: :func:`normlab._display.rc`); :func:`normlab.figures.make`
    draws inside it, leaving the caller's settings alone."""
    return rc("paper")


def integer_ticks(ax, axis: str = "x"):
    """Whole-number ticks (rounds, counts) on ``axis`` (``"x"``, ``"y"`` or ``"both"``)."""
    from matplotlib.ticker import MaxNLocator

    for a in ("x", "y") if axis == "both" else (axis,):
        getattr(ax, f"{a}axis").set_major_locator(MaxNLocator(integer=True))


def panel_label(ax, letter: str):
    """Bold panel letter at the top left, outside the axes (as in the paper)."""
    ax.text(-0.14, 1.08, letter, transform=ax.transAxes, fontsize=15, fontweight="bold", va="bottom", ha="left")
