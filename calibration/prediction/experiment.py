"""The design of a committed-minority experiment: what a published-rule critical mass is read from.

The critical mass of Flint Ashery et al. (2025, Table S3) is not a property of the LLM alone: it
is the smallest *tested* count whose runs meet the authors' ensemble rule, so it depends on the
counts tested, the runs per count, how long a run may last and the window of the rule. An
interval for it must be the interval of the experiment it is compared with. The published
archives test coarse grids (Llama-3.1: 1, 2, 4, 6, 8, 10 committed agents, 10 runs each, capped at
800 interactions and stopped at a streak of 3N successes); the paper's design for prediction is
10 runs of the full window at every count.

:class:`ExperimentDesign` holds one direction's design -- the tested counts and the cap of each
run, with the stop rule -- either read from what the experimenter of a log's committed runs fixed
before running (:meth:`ExperimentDesign.from_log`: counts, runs per count, the protocol's cap and
stop rule; never a run's own length, which in a stopped run tells its outcome) or the paper's
(:meth:`ExperimentDesign.paper`). Past the last tested count the grid is
*extended*: the count the experimenters would have tested next, with the design's typical
number of runs, each as long as the window, so that a predicted critical mass beyond the tested
counts is a number, not just "not reached" (``extend=False`` keeps the grid as tested).
:func:`normlab.calibration.predict` simulates every run of the design per posterior draw and
applies the published rule exactly as to the data (runs padded only if they meet the threshold
at their own end, ragged runs dropping out, the window), so the interval carries the noise of
this experiment.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods
("Committed minorities"), Fig. 3, Table S3; the authors' ``plotter.ipynb`` cells 9-10.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from normlab._display import html_card, plain, short_repr
from normlab._validate import check_int
from normlab.schema import GameLog
from normlab.theory.criteria import PUBLISHED_WINDOW, published_max_round

from ..fit.inputs import select_runs

__all__ = ["ExperimentDesign", "experiment_designs", "committed_runs", "PAPER_RUNS"]

#: Runs per committed count in the experiments of Flint Ashery et al. (2025, Methods).
PAPER_RUNS = 10
#: How a simulated run of a design ends (see :class:`ExperimentDesign`).
STOPS = ("none", "streak")


def _check_lengths(lengths, n_agents) -> tuple:
    out = []
    for runs in lengths:
        r = tuple(check_int(int(t), "run length (interactions)", low=1) for t in runs)
        if not r:
            raise ValueError("every tested count needs at least one run")
        out.append(r)
    return tuple(out)


@dataclass(frozen=True)
class ExperimentDesign:
    """One direction's committed-minority experiment: counts tested, runs per count, run lengths, window.

    Attributes
    ----------
    majority, challenger : str
        The consensus attacked and the committed agents' name (``overturn_<majority>``).
    n_agents : int
    counts : tuple of int
        Tested committed counts, increasing (0: the consensus left alone, the authors' "evolved" runs).
    lengths : tuple of tuple of int
        Interactions of each run at each tested count: caps fixed before the run (with
        ``stop="streak"`` a run may end earlier; :meth:`from_log` gives every run of a count its
        count's cap, never a run's own length).
    window : int
        Rounds of the published rule (``max_round``).
    extend : bool
        Continue the grid past the last tested count, one count at a time up to ``N - 1``, with
        :attr:`runs_beyond` runs of ``window`` rounds each.
    runs_beyond : int
        Runs per count of the extension (default: the median runs per tested count).
    source : str
        Where it comes from (``"paper"``, or the log's description).
    stop : {"none", "streak"}
        How a simulated run of the design ends: after its number of interactions (``"none"``), or
        earlier at a streak of ``3N`` successes (``"streak"``: the protocol of runs stopped at a
        consensus, such as the Llama-3.1 archive's committed runs). With nobody committed (count
        0) the consensus attacked is itself such a streak, so those runs play to their length
        either way (as the archive's count-0 runs did).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Table S3.
    """

    majority: str
    challenger: str
    n_agents: int
    counts: tuple
    lengths: tuple
    window: int = PUBLISHED_WINDOW
    extend: bool = True
    runs_beyond: int = 0
    source: str = "paper"
    stop: str = "none"

    def __post_init__(self):
        N = check_int(self.n_agents, "n_agents", low=2)
        counts = tuple(check_int(int(c), "committed count", low=0, high=N - 1) for c in self.counts)
        if not counts:
            raise ValueError("an experiment design needs at least one tested count")
        if any(b <= a for a, b in zip(counts, counts[1:])):
            raise ValueError(f"tested counts must be distinct and increasing; got {list(counts)}")
        lengths = _check_lengths(self.lengths, N)
        if len(lengths) != len(counts):
            raise ValueError(f"one list of run lengths per tested count: {len(counts)} counts, {len(lengths)} lists")
        if str(self.majority) == str(self.challenger):
            raise ValueError("majority and challenger must differ")
        if self.stop not in STOPS:
            raise ValueError(f"stop must be one of {list(STOPS)}; got {self.stop!r}")
        window = check_int(self.window, "window", low=3)
        rb = int(self.runs_beyond) or int(np.median([len(r) for r in lengths]))
        object.__setattr__(self, "n_agents", N)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "window", window)
        object.__setattr__(self, "runs_beyond", check_int(rb, "runs_beyond", low=1))
        object.__setattr__(self, "majority", str(self.majority))
        object.__setattr__(self, "challenger", str(self.challenger))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def paper(cls, majority: str, challenger: str, n_agents: int, *, runs: int = PAPER_RUNS,
              window: int = PUBLISHED_WINDOW, counts=None, stop: str = "none") -> "ExperimentDesign":
        """The paper's design: ``runs`` runs of ``window`` full rounds at every count ``0 .. N - 1``
        (or at ``counts``).

        Parameters
        ----------
        majority, challenger : str
        n_agents : int
        runs : int, optional
            Runs per count (10, Flint Ashery et al. 2025, Methods).
        window : int, optional
            Rounds per run and of the rule (30).
        counts : sequence of int, optional
        stop : {"none", "streak"}, optional
            Whether a run ends early at a streak of ``3N`` successes (see :class:`ExperimentDesign`).

        Returns
        -------
        ExperimentDesign
        """
        N = check_int(n_agents, "n_agents", low=2)
        R = check_int(runs, "runs", low=1)
        W = check_int(window, "window", low=3)
        cs = tuple(range(N)) if counts is None else tuple(sorted({int(c) for c in counts}))
        return cls(majority, challenger, N, cs, tuple((W * N,) * R for _ in cs), W, extend=counts is not None,
                   runs_beyond=R, source="paper", stop=stop)

    @classmethod
    def from_log(cls, log: GameLog, *, names, majority: str, memory: int | None = None,
                 n_agents: int | None = None, llm: str | None = None, window: int | None = None,
                 stop: str | None = None, cap: int | None = None, extend: bool = True) -> "ExperimentDesign":
        """The committed-minority experiment of a log in one direction, as the experimenter fixed it
        before running: the tested counts, the runs per count, the protocol's cap on a run's length
        and its stop rule -- never a run's own length.

        The runs that start from a consensus on ``majority`` (``initial == "consensus:<majority>"``)
        with agents committed to the other name -- and those with nobody committed (count 0, the
        authors' "evolved" runs) -- of the pool ``names`` (any order), at ``memory`` and
        ``n_agents`` (default: the most common among them), of ``llm`` (the ``model`` column). Only
        the run table is read (no decision):

        - **counts** and **runs** per count as tested;
        - the **cap** of a run with at least one committed agent: ``cap`` if given, else the largest
          planned length the run table records (``planned_interactions`` of the published archives,
          ``max_interactions`` of normlab's runs), else the longest such run (a run that played to the
          cap); if every run stopped before its cap, any cap of at least the window reads the same,
          so ``max(longest, window * N)`` (said in :attr:`source`). Count 0: its own planned length,
          else its longest run;
        - the **stop** rule: ``stop`` if given, else ``"streak"`` when a run with committed agents
          ended at a streak of ``3N`` successes before the cap (``stop_streak`` of the published
          archives, ``stop_reason`` of normlab's runs), else ``"none"``.

        Every run of a count gets its count's cap (:attr:`lengths` are caps fixed before the run).
        A run's own length is not used: in the published Llama-3.1 runs every run shorter than the
        800-interaction cap ended in the challenger's consensus, so its length tells its outcome, and
        a simulated run given that length would leak it (issue 32).

        Parameters
        ----------
        log : normlab.schema.GameLog
        names : sequence of str
            Two-name pool.
        majority : str
        memory, n_agents : int, optional
        llm : str, optional
        window : int, optional
            Default: the authors' window for the LLM at this N
            (:func:`normlab.theory.criteria.published_max_round`).
        stop : {"none", "streak"}, optional
            Override the stop rule read from the run table.
        cap : int, optional
            Override the cap (interactions) of the runs with committed agents.
        extend : bool, optional

        Returns
        -------
        ExperimentDesign

        Raises
        ------
        ValueError
            No committed-minority run in that direction.
        """
        r = committed_runs(log, names=names, majority=majority, memory=memory, n_agents=n_agents, llm=llm)
        names = tuple(str(n) for n in names)
        challenger = names[1] if names[0] == majority else names[0]
        N = int(r["n_agents"].iloc[0])
        models = sorted(map(str, r["model"].unique()))
        W = published_max_round(models[0], N) if window is None else check_int(window, "window", low=3)
        if stop is not None and stop not in STOPS:
            raise ValueError(f"stop must be one of {list(STOPS)}; got {stop!r}")
        n_int = r["n_interactions"].astype(int).to_numpy()
        cc = r["committed_count"].astype(int).to_numpy()
        planned = _planned(r)
        has = cc > 0
        note = ""
        if cap is not None:
            cap_c = check_int(cap, "cap", low=1)
        elif has.any() and np.isfinite(planned[has]).any():
            cap_c = int(np.nanmax(planned[has]))
        elif has.any():
            cap_c = int(n_int[has].max())
        else:
            cap_c = W * N
        ended = _stopped(r, cc, n_int, cap_c, N)
        if cap is None and has.any() and not np.isfinite(planned[has]).any() and ended[has].all():
            cap_c = max(cap_c, W * N)  # every run stopped: the cap is unknown beyond its longest run
            note = f"; cap unknown (every run stopped): {cap_c} interactions"
        if (cc == 0).any():
            p0 = planned[cc == 0]
            cap0 = int(np.nanmax(p0)) if np.isfinite(p0).any() else int(n_int[cc == 0].max())
        else:
            cap0 = cap_c
        if stop is None:
            stop = "streak" if (ended & has).any() else "none"
        counts = sorted(int(c) for c in np.unique(cc))
        lengths = tuple((cap0 if c == 0 else cap_c,) * int((cc == c).sum()) for c in counts)
        return cls(majority, challenger, N, tuple(counts), lengths, W, extend=extend,
                   source=f"{models[0]}: {len(r)} committed-minority runs in the data (cap {cap_c} interactions"
                          f"{', stopped at a 3N streak' if stop == 'streak' else ''}){note}", stop=stop)

    # ------------------------------------------------------------------ views
    @property
    def direction(self) -> str:
        return f"overturn_{self.majority}"

    @property
    def runs(self) -> tuple:
        """Runs per tested count."""
        return tuple(len(x) for x in self.lengths)

    @property
    def n_runs(self) -> int:
        return int(sum(self.runs))

    def grid(self) -> list[tuple[int, tuple, bool]]:
        """``(count, run lengths, tested)`` for every count of the grid: the tested ones, then the
        extension (untested counts past the last, up to ``N - 1``)."""
        out = [(c, L, True) for c, L in zip(self.counts, self.lengths)]
        if self.extend:
            full = (self.window * self.n_agents,) * self.runs_beyond
            out += [(c, full, False) for c in range(self.counts[-1] + 1, self.n_agents)]
        return out

    def max_rounds(self) -> int:
        """Rounds of the longest run of the grid (partial last round counted)."""
        return max(-(-max(L) // self.n_agents) for _, L, _ in self.grid())

    def to_frame(self) -> pd.DataFrame:
        """One row per run: ``majority``, ``challenger``, ``committed``, ``run``, ``interactions``,
        ``rounds``, ``tested``."""
        rows = []
        for c, L, tested in self.grid():
            for k, t in enumerate(L):
                rows.append({"majority": self.majority, "challenger": self.challenger, "committed": c, "run": k,
                             "interactions": t, "rounds": t / self.n_agents, "tested": tested})
        return pd.DataFrame(rows)

    def summary(self) -> dict:
        """Plain Python: counts, runs per count, caps (interactions per count, and in rounds: min/median/max),
        window, stop rule, extension."""
        rounds = [t / self.n_agents for L in self.lengths for t in L]
        return plain({"direction": self.direction, "majority": self.majority, "challenger": self.challenger,
                      "n_agents": self.n_agents, "counts": list(self.counts), "runs": list(self.runs),
                      "cap": [max(L) for L in self.lengths],
                      "rounds": {"min": min(rounds), "median": float(np.median(rounds)), "max": max(rounds)},
                      "window": self.window, "extend": self.extend, "runs_beyond": self.runs_beyond,
                      "source": self.source, "stop": self.stop})

    def describe(self) -> str:
        """One line: ``counts 1, 2, 4 (10 runs each), runs of 14-33 rounds, window 30``."""
        runs = set(self.runs)
        per = f"{self.runs[0]} runs each" if len(runs) == 1 else "runs " + "/".join(map(str, self.runs))
        rounds = [t / self.n_agents for L in self.lengths for t in L]
        lo, hi = min(rounds), max(rounds)
        span = f"{lo:.0f} rounds" if abs(hi - lo) < 0.5 else f"{lo:.0f}-{hi:.0f} rounds"
        ext = f"; beyond {self.counts[-1]}: {self.runs_beyond} runs of {self.window} rounds per count" \
            if self.extend and self.counts[-1] < self.n_agents - 1 else ""
        if self.stop == "streak":
            length = f"capped at {span}, stopped at a 3N streak"
        else:
            length = f"runs of {span}"
        return (f"counts {', '.join(map(str, self.counts))} ({per}), {length}, window {self.window} rounds"
                f"{ext}")

    def to_dict(self) -> dict:
        """JSON-able form (a prediction's settings keep it); :meth:`from_dict` reads it."""
        return {"majority": self.majority, "challenger": self.challenger, "n_agents": self.n_agents,
                "counts": list(self.counts), "lengths": [list(x) for x in self.lengths], "window": self.window,
                "extend": self.extend, "runs_beyond": self.runs_beyond, "source": self.source, "stop": self.stop}

    @classmethod
    def from_dict(cls, d: dict) -> "ExperimentDesign":
        return cls(d["majority"], d["challenger"], int(d["n_agents"]), tuple(d["counts"]),
                   tuple(tuple(x) for x in d["lengths"]), int(d["window"]), bool(d.get("extend", True)),
                   int(d.get("runs_beyond", 0)), str(d.get("source", "")), str(d.get("stop", "none")))

    def __repr__(self) -> str:
        return short_repr("ExperimentDesign", f"{self.challenger} overturning {self.majority}, N={self.n_agents}",
                          self.describe(), self.source)

    def _repr_html_(self) -> str:
        rows = [(f"count {c}", len(L), None, f"runs of {min(L) / self.n_agents:.0f}-{max(L) / self.n_agents:.0f} rounds")
                for c, L in zip(self.counts, self.lengths)]
        return html_card("ExperimentDesign", rows, subtitle=f"{self.challenger} overturning {self.majority}, "
                                                            f"N = {self.n_agents}",
                         settings={"window (rounds)": self.window, "extended past the last count": self.extend,
                                   "source": self.source})

    @classmethod
    def _contract_example(cls) -> "ExperimentDesign":
        """The paper's design for six agents at three counts, three runs each (``tests/umbrella/test_contracts.py``)."""
        return cls.paper("A", "B", 6, runs=3, counts=(1, 2, 3))



def _planned(r: pd.DataFrame) -> np.ndarray:
    """Per run the length planned before it ran (NaN: not recorded): ``planned_interactions`` (the
    published archives) or ``max_interactions`` (normlab's runs), the larger where both are."""
    out = np.full(len(r), np.nan)
    for col in ("planned_interactions", "max_interactions"):
        if col in r.columns:
            v = pd.to_numeric(r[col], errors="coerce").to_numpy(float)
            out = np.fmax(out, np.where(v > 0, v, np.nan))
    return out


def _stopped(r: pd.DataFrame, cc, n_int, cap: int, N: int) -> np.ndarray:
    """Per run whether it ended at a consensus streak of ``3N`` successes (before its cap)."""
    out = np.zeros(len(r), bool)
    if "stop_streak" in r.columns:  # the published archives: the success streak the run ended on
        streak = pd.to_numeric(r["stop_streak"], errors="coerce").fillna(0).to_numpy()
        out |= (streak >= 3 * N) & (n_int < cap)
    if "stop_reason" in r.columns:  # normlab's runs
        out |= (r["stop_reason"].astype(str) == "streak").to_numpy()
    return out & (cc > 0)


def committed_runs(log: GameLog, *, names, majority: str, memory: int | None = None, n_agents: int | None = None,
                   llm: str | None = None) -> pd.DataFrame:
    """The runs of a log that make one direction's committed-minority experiment (the rows of
    ``log.runs`` :meth:`ExperimentDesign.from_log` reads; arguments as there).

    Returns
    -------
    pandas.DataFrame
        Runs from a consensus on ``majority`` with agents committed to the other name of the
        two-name pool ``names`` or nobody committed, at one ``n_agents``, ``memory`` and LLM.

    Raises
    ------
    ValueError
        No such run; several memory lengths or LLMs without ``memory`` / ``llm``.
    """
    names = tuple(str(n) for n in names)
    if len(names) != 2 or majority not in names:
        raise ValueError(f"names must be a two-name pool holding majority={majority!r}; got {names}")
    challenger = names[1] if names[0] == majority else names[0]
    sel = select_runs(log, names=names, memory=memory, n_agents=n_agents, model=llm, fit_on=("swap", "evolved",
                                                                                                "simulation",
                                                                                                "committed"))
    r = sel.runs
    keep = (r["initial"].astype(str) == f"consensus:{majority}") & (
        (r["committed_count"] == 0) | (r["committed_name"].astype(str) == challenger))
    r = r[keep.to_numpy()]
    if not len(r):
        raise ValueError(f"the log holds no committed-minority run overturning {majority} (pool {names})")
    if n_agents is None:
        n_agents = int(r["n_agents"].value_counts().index[0])
    r = r[r["n_agents"] == int(n_agents)]
    if memory is None and r["memory"].nunique() > 1:
        raise ValueError(f"runs of several memory lengths {sorted(r['memory'].unique())}; choose memory=")
    models = sorted(map(str, r["model"].unique()))
    if len(models) > 1:
        raise ValueError(f"runs of several LLMs {models}; choose llm=")
    return r


def experiment_designs(log: GameLog, *, names, memory: int | None = None, n_agents: int | None = None,
                       llm: str | None = None, window: int | None = None) -> list[ExperimentDesign]:
    """The designs of every direction a log's committed-minority runs test (none: an empty list).

    Parameters
    ----------
    log : normlab.schema.GameLog
    names : sequence of str
        Two-name pool.
    memory, n_agents, llm, window : optional
        As :meth:`ExperimentDesign.from_log`.

    Returns
    -------
    list of ExperimentDesign
    """
    out = []
    for x in names:
        try:
            out.append(ExperimentDesign.from_log(log, names=names, majority=x, memory=memory, n_agents=n_agents,
                                                 llm=llm, window=window))
        except ValueError as exc:
            if "no committed-minority run" not in str(exc) and "no run matches" not in str(exc):
                raise
    return out
