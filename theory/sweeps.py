"""Sweeps on any ``concurrent.futures`` executor: critical mass, and any simulator over a grid.

Critical mass: for each committed count the model starts from consensus on the majority name,
the committed agents always play the alternative, and a run *flips* when the alternative reaches
the published criterion (its share among uncommitted agents' productions over the last 3N
interactions >= 2.849/3) within a given number of population rounds (30 in Flint Ashery et al. 2025, Methods).
Every point of a sweep gets its own child seed, so results are identical serially, in a process
pool or on a dask cluster (``Client.get_executor()``).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Methods
"Committed Minorities", Fig. 3 and Table S3; D. Centola et al., Science 360, 1116 (2018).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, legend_outside, new_axes, plain, plotting, short_repr, error_bars
from normlab._rng import spawn
from normlab._validate import check_int

from .criteria import published_rule, shares_from_result
from .memory_game import strategy_game
from .naming_game import minimal_naming_game
from .population import committed_counts
from .results import GameResult
from .stats import clopper_pearson, first_reaching, interval_crossing
from .strategies import resolve_strategy

__all__ = ["critical_mass", "CriticalMassResult", "locate_critical_mass", "sweep", "SweepResult",
           "clopper_pearson"]


def _check_executor(executor) -> None:
    """Refuse fork-based process pools before any work starts (Numba's OpenMP is not fork-safe)."""
    ctx = getattr(executor, "_mp_context", None)
    if ctx is not None and ctx.get_start_method() == "fork":
        raise ValueError(
            "a fork-based ProcessPoolExecutor would crash: Numba's OpenMP threads are not fork-safe. Use "
            "ProcessPoolExecutor(mp_context=multiprocessing.get_context('spawn')) (or 'forkserver'), a "
            "ThreadPoolExecutor, or dask.distributed's Client.get_executor()"
        )


@dataclass(frozen=True)
class CriticalMassResult:
    """Flip probability per committed count and the located critical mass.

    Attributes
    ----------
    n_agents : int
    within_rounds : int
        Flips count only when detected within this many population rounds.
    level : float
        Flip probability that defines the critical mass (default 0.5).
    committed : numpy.ndarray of int
        Committed counts swept.
    n_runs, n_flips : numpy.ndarray of int
    p_flip, ci_low, ci_high : numpy.ndarray of float
        Flip probability and its Clopper–Pearson 95% interval.
    mean_flip_round : numpy.ndarray of float
        Mean round of the flip among flipping runs (NaN if none).
    estimate : float
        Smallest swept count with ``p_flip >= level`` (NaN if none).
    interpolated : float
        Count where the piecewise-linear flip curve crosses ``level``.
    low, high : float
        Where the piecewise-linear upper CI bound first reaches ``level`` (``low``), and the
        smallest swept count whose lower CI bound reaches it (``high``): the critical mass lies in
        ``[low, high]`` given the sampling error of the sweep, and so do ``estimate`` and
        ``interpolated`` (``low`` is interpolated like ``interpolated``, so it may fall between
        swept counts).
    model : str
        Description of the simulated model.
    published_last3, published_success : numpy.ndarray
        The published ensemble rule of Flint Ashery et al. 2025, Table S3 (:mod:`normlab.theory.criteria`) applied
        to each point's ``n_runs`` runs with window ``within_rounds``: the 3-round sum of the
        mean challenger share, and whether it reaches 2.849 (NaN / False where the model has no
        tracked challenger).
    published : float
        Smallest swept count meeting the published rule (NaN if none).
    """

    n_agents: int
    within_rounds: int
    level: float
    committed: np.ndarray
    n_runs: np.ndarray
    n_flips: np.ndarray
    p_flip: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    mean_flip_round: np.ndarray
    estimate: float
    interpolated: float
    low: float
    high: float
    model: str = ""
    published_last3: np.ndarray = None
    published_success: np.ndarray = None
    published: float = float("nan")

    @property
    def fraction(self) -> float:
        """Critical mass as a fraction of the population (``estimate / n_agents``)."""
        return self.estimate / self.n_agents

    def to_frame(self):
        """One row per swept committed count."""
        import pandas as pd

        return pd.DataFrame(
            {
                "committed": self.committed,
                "fraction": self.committed / self.n_agents,
                "n_runs": self.n_runs,
                "n_flips": self.n_flips,
                "p_flip": self.p_flip,
                "ci_low": self.ci_low,
                "ci_high": self.ci_high,
                "mean_flip_round": self.mean_flip_round,
                "published_last3": self.published_last3,
                "published_success": self.published_success,
            }
        )

    def summary(self) -> dict:
        """Critical mass, its range and the published-rule value as plain Python numbers (NaN: None)."""
        out = {
            "model": self.model,
            "n_agents": self.n_agents,
            "within_rounds": self.within_rounds,
            "critical_mass": self.estimate,
            "critical_fraction": self.fraction,
            "interpolated": self.interpolated,
            "low": self.low,
            "high": self.high,
            "criterion": f"per_run (P(flip within the window) >= {self.level})",
            "published": None if not np.isfinite(self.published) else float(self.published),
        }
        return plain({k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in out.items()})

    def _runs_label(self) -> str:
        n = np.unique(self.n_runs)
        return f"{int(n[0])} runs per count" if n.size == 1 else f"{int(n.min())}-{int(n.max())} runs per count"

    def __repr__(self) -> str:
        cm = "not reached" if np.isnan(self.estimate) else (
            f"{fmt(self.estimate)} (interpolated {fmt(self.interpolated)}, range [{fmt(self.low)}, {fmt(self.high)}])")
        pub = "" if not np.isfinite(self.published) else f"published rule {fmt(self.published)}"
        c = self.committed
        return short_repr("CriticalMassResult", self.model or None, f"N={self.n_agents}",
                          f"committed {fmt(c.min())}..{fmt(c.max())} ({len(c)} counts, {self._runs_label()})",
                          f"within {self.within_rounds} rounds", f"critical mass {cm}", pub)

    def _repr_html_(self) -> str:
        rows = [("critical mass (per_run)", self.estimate, (self.low, self.high),
                 f"smallest count with P(flip) >= {self.level:g}; interval from the flip CIs"),
                ("interpolated crossing", self.interpolated, None),
                ("as a fraction of N", self.fraction, (self.low / self.n_agents, self.high / self.n_agents))]
        if self.published_success is not None:
            rows.append(("critical mass (published rule)", self.published, None, "ensemble rule of Table S3"))
        for c, k, n, lo, hi in zip(self.committed, self.n_flips, self.n_runs, self.ci_low, self.ci_high):
            rows.append((f"P(flip), {fmt(c)} committed", k / n, (lo, hi), f"{int(k)}/{int(n)} runs"))
        return html_card("CriticalMassResult", rows, subtitle=f"{self.model}, N = {self.n_agents}",
                         settings={"window (rounds)": self.within_rounds, "level": self.level,
                                   "runs": self._runs_label()},
                         note=".plot() draws the flip curve; .to_frame() gives one row per count.")

    @plotting
    def plot(self, *, ax=None, fraction: bool = False):
        """Flip probability against the committed count, with Clopper-Pearson 95% intervals, the
        level, and the located critical mass with its range.

        Parameters
        ----------
        ax : matplotlib Axes, optional
        fraction : bool, optional
            Committed fraction of the population on the x axis instead of the count.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 3B; Xie et al.,
        Phys. Rev. E 84, 011130 (2011), Fig. 2.
        """
        ax = new_axes(ax, (5.8, 4.6))
        f = 1.0 / self.n_agents if fraction else 1.0
        x = self.committed * f
        ax.errorbar(x, self.p_flip, yerr=error_bars(self.p_flip, self.ci_low, self.ci_high), fmt="o-", ms=4,
                    capsize=2, lw=1.2, label=f"P(flip within {self.within_rounds} rounds), 95% CI")
        ax.axhline(self.level, color="0.5", lw=0.8, ls=":")
        if np.isfinite(self.low) or np.isfinite(self.high):
            lo = self.low if np.isfinite(self.low) else x.min() / f
            hi = self.high if np.isfinite(self.high) else x.max() / f
            ax.axvspan(lo * f, hi * f, color="C1", alpha=0.12, lw=0, label="critical-mass range")
        if np.isfinite(self.estimate):
            ax.axvline(self.estimate * f, color="C1", lw=1.5,
                       label=f"critical mass {fmt(self.estimate * f)} (P(flip) >= {self.level:g})")
        if np.isfinite(self.published):
            ax.axvline(self.published * f, color="C2", lw=1.2, ls="--", label=f"published rule: {fmt(self.published * f)}")
        ax.set(xlabel="committed fraction" if fraction else "committed agents", ylabel="P(flip)", ylim=(-0.03, 1.03))
        if not fraction:
            ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(f"{self.model}, N = {self.n_agents}" if self.model else f"N = {self.n_agents}", fontsize=10)
        legend_outside(ax, "below")
        return ax

    @classmethod
    def _contract_example(cls) -> "CriticalMassResult":
        """Three committed counts of ten runs each, literal numbers (``tests/umbrella/test_contracts.py``)."""
        n, k = np.array([10, 10, 10]), np.array([1, 6, 10])
        return cls(n_agents=10, within_rounds=30, level=0.5, committed=np.array([1, 2, 3]), n_runs=n, n_flips=k,
                   p_flip=k / n, ci_low=np.array([0.003, 0.26, 0.69]), ci_high=np.array([0.45, 0.88, 1.0]),
                   mean_flip_round=np.array([20.0, 14.0, 9.0]), estimate=2.0, interpolated=1.8, low=1.1, high=3.0,
                   model="toy", published_last3=np.array([1.2, 2.5, 2.95]),
                   published_success=np.array([False, False, True]), published=3.0)


def locate_critical_mass(committed, p_flip, ci_low, ci_high, level: float = 0.5):
    """Estimate, interpolated crossing and bounds of the critical mass from a flip curve.

    ``estimate`` is the smallest swept count with ``p_flip >= level``; ``interpolated`` where the
    piecewise-linear flip curve first reaches ``level``; ``low`` where the piecewise-linear upper
    CI bound first reaches it; ``high`` the smallest swept count whose lower CI bound reaches it.
    Since ``ci_low <= p_flip <= ci_high`` at every point, ``low <= interpolated <= estimate <=
    high`` whenever they are defined (a grid ``low`` could exceed ``interpolated``: with the
    curve at 0.1 and 0.9 at counts 4 and 6, the crossing 5 lies below a grid bound of 6).

    Returns
    -------
    (float, float, float, float)
        ``estimate, interpolated, low, high`` (NaN where the curve never reaches ``level``).
    """
    c = np.asarray(committed, dtype=float)
    p = np.asarray(p_flip, dtype=float)
    est = first_reaching(c, p, level)
    low = interval_crossing(c, ci_high, level)
    high = first_reaching(c, ci_low, level)
    interp = interval_crossing(c, p, level)
    return est, interp, low, high


def _sweep_point(simulate, committed, n_agents, n_runs, within_rounds, seed, kwargs):
    """One sweep point (module-level so that process executors can pickle it)."""
    res = simulate(n_agents=n_agents, committed=int(committed), n_runs=n_runs, stop="flip",
                   max_interactions=within_rounds * n_agents, progress=False, rng=seed, **kwargs)
    flipped = res.flipped(within_rounds=within_rounds)
    ft = res.flip_times()[flipped] / n_agents
    last3, ok = float("nan"), False
    if res.n_names and res.committed_name >= 0:
        # the published ensemble rule on the same runs (normlab.theory.criteria): runs stopped by
        # the flip rule met the threshold at their end
        tr = [t[:within_rounds] for t in shares_from_result(res)]
        pub = published_rule(tr, max_round=within_rounds, met=flipped)
        last3, ok = pub["last3"], pub["success"]
    return (int(committed), int(flipped.sum()), int(n_runs), float(ft.mean()) if ft.size else float("nan"),
            last3, bool(ok))


def _resolve_model(model, kwargs):
    if callable(model):
        return model, kwargs, getattr(model, "__name__", type(model).__name__)
    if model == "minimal":
        kw = dict(n_words=2, initial="consensus")
        kw.update(kwargs)
        return minimal_naming_game, kw, f"minimal naming game (W={kw['n_words']})"
    if model == "binary_agreement":
        kw = dict(n_words=2, initial="consensus", names=("B", "A"))
        kw.update(kwargs)
        return minimal_naming_game, kw, "binary agreement (Xie et al. 2011)"
    if model == "strategy":
        if "strategy" not in kwargs or "memory" not in kwargs:
            raise ValueError("model='strategy' needs strategy=... and memory=... keyword arguments")
        kw = dict(kwargs)
        strat = kw.pop("strategy")
        kw.setdefault("initial", "consensus")
        # the challenger is tracked even with zero committed agents (spontaneous flips)
        kw.setdefault("committed_name", resolve_strategy(strat, kw.get("n_names")).n_names - 1)
        return functools.partial(strategy_game, strat), kw, f"strategy game ({strat if isinstance(strat, str) else type(strat).__name__}, H={kw['memory']})"
    raise ValueError(f"model must be 'minimal', 'binary_agreement', 'strategy' or a callable; got {model!r}")


def critical_mass(
    model="minimal",
    committed=None,
    *,
    n_agents: int,
    n_runs: int = 20,
    within_rounds: int = 30,
    level: float = 0.5,
    executor=None,
    progress: bool = True,
    rng=None,
    **model_kwargs,
) -> CriticalMassResult:
    """Sweep committed-minority sizes, estimate flip probabilities and locate the critical mass.

    Parameters
    ----------
    model : {"minimal", "binary_agreement", "strategy"} or callable, optional
        The model. A callable must accept ``n_agents, committed, n_runs, stop, max_interactions,
        progress, rng`` keywords (plus ``model_kwargs``) and return a
        :class:`~normlab.theory.GameResult` (e.g. a ``functools.partial`` of a simulator; it must
        be picklable for process executors).
    committed : array_like of int or float, optional
        Committed counts, or fractions in (0, 1) (converted to counts). Default: every count
        from 1 (0 for the strategy model, whose consensus may flip on its own) to ``n_agents // 2``.
    n_agents : int
    n_runs : int, optional
        Replicates per point.
    within_rounds : int, optional
        Population rounds allowed for the flip (30 in Flint Ashery et al. 2025, Methods).
    level : float, optional
        Flip probability defining the critical mass.
    executor : concurrent.futures.Executor, optional
        Runs the points (e.g. a ``ProcessPoolExecutor``, or ``dask.distributed.Client.get_executor()``);
        results do not depend on it because every point gets its own child seed.
    progress : bool, optional
        tqdm bar over points.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, optional
    **model_kwargs
        Passed to the simulator (e.g. ``strategy=table, memory=5, initial="consensus:M",
        committed_name="Q"``, or ``n_words=2``).

    Returns
    -------
    CriticalMassResult

    References
    ----------
    Implements the critical-mass protocol of Flint Ashery et al., Sci. Adv. 11, eadu9368 (2025),
    Methods "Committed Minorities" (flip within 30 population rounds).
    """
    from normlab._display import tqdm

    N = check_int(n_agents, "n_agents", low=2)
    R = check_int(n_runs, "n_runs", low=1)
    within = check_int(within_rounds, "within_rounds", low=3)
    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    zero_ok = model == "strategy" or callable(model)
    if committed is None:
        counts = np.arange(0 if zero_ok else 1, N // 2 + 1)
    else:
        counts = committed_counts(committed, N, low=0 if zero_ok else 1)
    simulate, kwargs, label = _resolve_model(model, dict(model_kwargs))
    for bad in ("stop", "max_interactions", "n_runs", "rng", "committed", "n_agents"):
        if bad in kwargs:
            raise ValueError(f"{bad!r} is set by critical_mass itself; do not pass it")
    _check_executor(executor)
    seeds = spawn(rng, len(counts))
    tasks = [(simulate, int(c), N, R, within, s, kwargs) for c, s in zip(counts, seeds)]
    results = []
    with tqdm(total=len(tasks), desc="critical mass", unit="point", disable=not progress, leave=False) as bar:
        if executor is None:
            for t in tasks:
                results.append(_sweep_point(*t))
                bar.update(1)
        else:
            futures = [executor.submit(_sweep_point, *t) for t in tasks]
            for f in futures:
                results.append(f.result())
                bar.update(1)
    c, k, n, mfr, last3, ok = (np.array(x) for x in zip(*results))
    p = k / n
    lo, hi = clopper_pearson(k, n)
    est, interp, low, high = locate_critical_mass(c, p, lo, hi, level)
    pub = float(c[ok.astype(bool)].min()) if ok.any() else float("nan")
    return CriticalMassResult(N, within, float(level), c, n, k, p, lo, hi, mfr.astype(float), est, interp, low, high, label,
                              published_last3=last3.astype(float), published_success=ok.astype(bool), published=pub)


# ----------------------------------------------------------------------------- generic sweeps
def _run_point(simulate, params: dict, n_runs: int, seed):
    return simulate(**params, n_runs=n_runs, progress=False, rng=seed)


@dataclass(frozen=True)
class SweepResult:
    """Results of a parameter sweep.

    Attributes
    ----------
    params : pandas.DataFrame
        One row per grid point (``point`` index plus one column per swept parameter).
    results : tuple of GameResult
        The simulator's result at each point, in ``params`` order.
    """

    params: pd.DataFrame
    results: tuple

    def _with_params(self, frames) -> pd.DataFrame:
        out = []
        for (_, row), df in zip(self.params.iterrows(), frames):
            df = df.copy()
            for col, val in row.items():
                df.insert(0, col, val)
            out.append(df)
        return pd.concat(out, ignore_index=True)

    def to_frame(self) -> pd.DataFrame:
        """Per-run observables of every point, with the point's parameters as columns."""
        return self._with_params(r.to_frame() for r in self.results)

    def success_rate(self, n_rounds: int | None = None) -> pd.DataFrame:
        """Mean success per round at every point (long format, parameters as columns)."""
        return self._with_params(r.success_rate(n_rounds) for r in self.results)

    def summary(self) -> pd.DataFrame:
        """One row per point: the parameters plus the simulator's scalar summary."""
        rows = []
        for r in self.results:  # swept parameters already have their own columns
            s = {k: v for k, v in r.summary().items() if not isinstance(v, dict) and k not in self.params.columns}
            rows.append(s)
        return pd.concat([self.params.reset_index(drop=True), pd.DataFrame(rows)], axis=1)

    def __repr__(self) -> str:
        grid = ", ".join(f"{c}: {len(self.params[c].unique())} values" for c in self.params.columns if c != "point")
        runs = sum(r.n_runs for r in self.results)
        return short_repr("SweepResult", f"{len(self.results)} points ({grid})", f"{runs} runs in all",
                          f"model {self.results[0].model}" if self.results else None)

    def _repr_html_(self) -> str:
        s = self.summary()
        cols = [c for c in s.columns if c not in ("model", "stop", "n_names", "stop_reasons")]
        return html_card("SweepResult", [], subtitle=f"{len(self.results)} grid points",
                         note=".plot(y=...) draws a summary column against the swept parameter; "
                              ".summary() and .to_frame() give the tables.") + \
            s[cols].head(20).to_html(index=False, float_format=lambda v: fmt(v))

    @plotting
    def plot(self, y: str = "consensus_rounds", *, x: str | None = None, hue: str | None = None, ax=None,
             logx: bool | None = None):
        """An observable against a swept parameter: per-run columns as the mean with a 95%
        confidence interval over runs, summary columns as they are.

        Parameters
        ----------
        y : str, optional
            A per-run column of :meth:`to_frame` (``consensus_time``, ``t_max``, ``n_words_max``
            ...; ``consensus_rounds`` is ``consensus_time / n_agents``) or a column of
            :meth:`summary` (``consensus_fraction``, ``flip_fraction`` ...).
        x, hue : str, optional
            Swept parameters on the x axis and as colour (default: the first and second).
        ax : matplotlib Axes, optional
        logx : bool, optional
            Logarithmic x axis (default: when the x values span more than a factor 20).

        Returns
        -------
        matplotlib.axes.Axes
        """
        import seaborn as sns

        runs = self.to_frame()
        runs["consensus_rounds"] = runs["consensus_time"] / np.repeat([r.n_agents for r in self.results],
                                                                      [r.n_runs for r in self.results])
        s = self.summary()
        data, per_run = (runs, True) if y in runs.columns else (s, False)
        swept = [c for c in self.params.columns if c != "point"]
        x = swept[0] if x is None else x
        if hue is None and len(swept) > 1:
            hue = next(c for c in swept if c != x)
        for c in (x, y) + ((hue,) if hue else ()):
            if c not in data.columns:
                raise ValueError(f"{c!r} is neither a per-run column nor a summary column of the sweep; "
                                 f"per run: {list(runs.columns)}; summary: {list(s.columns)}")
        ax = new_axes(ax)
        sns.lineplot(data=data, x=x, y=y, hue=hue, marker="o", ax=ax, palette="crest" if hue else None,
                     errorbar=("ci", 95) if per_run else None, seed=0)
        xs = pd.to_numeric(data[x], errors="coerce")
        if logx is None:
            logx = bool(xs.notna().all() and (xs > 0).all() and xs.max() / xs.min() > 20)
        if logx:
            ax.set_xscale("log")
        ax.set_ylabel(y.replace("_", " ") + (" (mean, 95% CI over runs)" if per_run else ""))
        if hue:
            legend_outside(ax, title=hue)
        return ax

    @classmethod
    def _contract_example(cls) -> "SweepResult":
        """Two grid points of :meth:`GameResult._contract_example` (``tests/umbrella/test_contracts.py``)."""
        from .results import GameResult

        r = GameResult._contract_example()
        return cls(params=pd.DataFrame({"point": [0, 1], "n_agents": [4, 8]}), results=(r, r))


def sweep(simulate, grid: dict, *, n_runs: int = 1, executor=None, progress: bool = True, rng=None,
          **fixed) -> SweepResult:
    """Run ``simulate`` at every combination of ``grid`` values, ``n_runs`` replicates each.

    Parameters
    ----------
    simulate : callable
        A simulator taking keyword arguments plus ``n_runs``, ``progress`` and ``rng`` and
        returning a :class:`~normlab.theory.GameResult` (e.g. ``minimal_naming_game`` or a
        ``functools.partial`` of ``strategy_game``). Must be picklable for process executors.
    grid : dict of str to sequence
        Parameter name -> values; the sweep covers their Cartesian product.
    n_runs : int, optional
        Replicates per point.
    executor : concurrent.futures.Executor, optional
        Where to run the points (e.g. ``dask.distributed.Client.get_executor()``); the results do
        not depend on it.
    progress : bool, optional
        tqdm bar over points.
    rng : None, int, numpy.random.SeedSequence or numpy.random.Generator, optional
        Point ``k`` uses child ``k`` of this seed.
    **fixed
        Keyword arguments passed unchanged to every call.

    Returns
    -------
    SweepResult

    Examples
    --------
    >>> from normlab.theory import minimal_naming_game, sweep
    >>> res = sweep(minimal_naming_game, {"n_agents": [100, 200, 400]}, n_runs=50, rng=1)
    >>> res.summary()[["n_agents", "mean_consensus_time"]]  # doctest: +SKIP
    """
    from normlab._display import tqdm

    if not callable(simulate):
        raise TypeError(f"simulate must be callable; got {type(simulate).__name__}")
    if not isinstance(grid, dict) or not grid:
        raise ValueError("grid must be a non-empty dict of parameter name -> list of values")
    for k, v in grid.items():
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__") or len(list(v)) == 0:
            raise ValueError(f"grid[{k!r}] must be a non-empty list of values")
    clash = set(grid) & set(fixed)
    if clash:
        raise ValueError(f"parameters {sorted(clash)} are both swept and fixed")
    for reserved in ("n_runs", "progress", "rng"):
        if reserved in grid or reserved in fixed:
            raise ValueError(f"{reserved!r} is set by sweep itself")
    R = check_int(n_runs, "n_runs", low=1)
    _check_executor(executor)
    keys = list(grid)
    points = [dict(zip(keys, combo)) for combo in itertools.product(*(list(grid[k]) for k in keys))]
    seeds = spawn(rng, len(points))
    results = [None] * len(points)
    with tqdm(total=len(points), desc="sweep", unit="point", disable=not progress, leave=False) as bar:
        if executor is None:
            for i, (p, s) in enumerate(zip(points, seeds)):
                results[i] = _run_point(simulate, {**fixed, **p}, R, s)
                bar.update(1)
        else:
            futs = [executor.submit(_run_point, simulate, {**fixed, **p}, R, s) for p, s in zip(points, seeds)]
            for i, f in enumerate(futs):
                results[i] = f.result()
                bar.update(1)
    for r in results:
        if not isinstance(r, GameResult):
            raise TypeError(f"simulate must return a GameResult; got {type(r).__name__}")
    params = pd.DataFrame(points)
    params.insert(0, "point", np.arange(len(points)))
    return SweepResult(params, tuple(results))
