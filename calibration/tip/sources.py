"""Where the runs of an adaptive committed-minority search come from: a published archive replayed,
or an LLM endpoint played live (:func:`normlab.calibration.tip`).

A source knows the experiment whose critical mass is sought -- its :class:`ExperimentDesign`:
the counts that may be tested, the runs per count, how a run ends (a cap on its interactions and,
for the published Llama-3.1 runs, a stop at a streak of ``3N`` successes) and the window of the
published rule -- and plays runs at a committed count when the search asks, one batch at a time.
It hands back only the runs it played (:class:`Batch`); the search never sees anything else.

:class:`ArchiveReplay`
    A run requested at committed count ``c`` is one of the archive's runs at ``c`` (same names, N
    and H, the same LLM), drawn without replacement in an order fixed by the seed; counts the
    archive did not test cannot be played. The archive's baseline runs (from empty memories) are
    what is known before the search. The design is read from the archive's *run table* only (counts,
    runs per count, the longest run as the cap, whether runs ended at a consensus streak): no
    decision of a run the search has not drawn is read. This is how the search is validated, on
    the published archives and on synthetic archives played by a hidden strategy
    (``benchmarks/bench_tip.py``).
:class:`LLMSource`
    Runs played now through :func:`normlab.llm_runs.run_game` (journaled, resumable: one run
    directory per step under ``out``), on the embedded model or any endpoint, under one budget of
    tokens or money for the whole search; the paper's design (10 runs of 30 rounds at every count,
    a run stopping at a consensus streak, as the authors' runs did).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods ("Committed
minorities"), Fig. 3, Table S3; the authors' archives (Ariel-Flint-Ashery/AI-norms).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._rng import as_generator
from normlab.llm_runs import run_game
from normlab.llm_runs.backend import EndpointConfig
from normlab.llm_runs.journal import JOURNAL_FILE, journal_spent
from normlab._validate import check_int
from normlab.schema import GameLog, validate_names
from normlab.theory.criteria import published_max_round

from ..fit.inputs import select_runs
from ..prediction.experiment import PAPER_RUNS, ExperimentDesign

__all__ = ["Batch", "RunSource", "ArchiveReplay", "LLMSource", "archive_design"]


@dataclass(frozen=True)
class Batch:
    """The runs a source played for one request.

    Attributes
    ----------
    log : normlab.schema.GameLog
        Those runs only (decisions and run table).
    count : int
        Committed count they were played at (-1: baseline runs from empty memories).
    tokens : int or None
        Prompt plus completion tokens they cost (None: unknown, e.g. a replayed archive).
    usd : float or None
    decisions : int
        LLM decisions of their uncommitted agents (the unit of cost of a replay).
    complete : bool
        False when a budget stopped a run before its end (such runs are not in ``log``).
    """

    log: GameLog
    count: int
    tokens: int | None = None
    usd: float | None = None
    decisions: int = 0
    complete: bool = True


class RunSource:
    """What :func:`normlab.calibration.tip` asks of a source of runs (subclass it for another).

    Attributes
    ----------
    names : tuple of str
        The two-name pool.
    majority, challenger : str
        The consensus attacked and the committed agents' name.
    n_agents, memory : int
    design : ExperimentDesign
        The experiment whose published-rule critical mass is sought (the simulated runs of the
        search follow it: run lengths are caps, ``design.stop`` how a run ends early).
    runs_available : int
        Runs of the committed grid the source could play in all (the design's counts, 0 included
        where it is tested: a run there is paid like any other).
    label : str
        One line naming the source.
    """

    names: tuple
    majority: str
    challenger: str
    n_agents: int
    memory: int
    design: ExperimentDesign
    runs_available: int
    label: str = ""

    def remaining(self, count: int) -> int:
        """Runs that can still be played at ``count`` (0: none, or a count that cannot be tested)."""
        raise NotImplementedError

    def known(self) -> Batch | None:
        """Runs known before the search (baselines from empty memories), or None."""
        return None

    def run_cost(self, count: int) -> float:
        """Cost of one run at ``count`` in the unit the search weighs batches by: the uncommitted
        agents' share of its LLM calls, ``(N - count) / N`` (its tokens; a replay weighs its runs as
        the live runs would have cost)."""
        return (self.n_agents - int(count)) / self.n_agents

    def play(self, count: int, n_runs: int, *, step: int) -> Batch:
        """Play ``n_runs`` runs at committed ``count`` (step ``step`` of the search)."""
        raise NotImplementedError

    @property
    def direction(self) -> str:
        return f"overturn_{self.majority}"


def _pool(names, majority):
    names = validate_names(names)
    if len(names) != 2:
        raise ValueError(f"an adaptive search needs a two-name pool; got {list(names)}")
    if majority not in names:
        raise ValueError(f"the majority {majority!r} is not a name of the pool {list(names)}")
    return names, names[1 - names.index(majority)]


def _direction_runs(log, names, majority, challenger, memory, n_agents, llm):
    """The committed-minority runs of ``log`` overturning ``majority`` (count 0: nobody committed)."""
    sel = select_runs(log, names=names, memory=memory, n_agents=n_agents, model=llm,
                      fit_on=("swap", "evolved", "simulation"))
    r = sel.runs
    keep = (r["initial"].astype(str) == f"consensus:{majority}").to_numpy() & (
        (r["committed_count"] == 0).to_numpy() | (r["committed_name"].astype(str) == challenger).to_numpy())
    return r[keep]


def archive_design(log: GameLog, *, names, majority: str, memory: int, n_agents: int, llm: str | None = None,
                   window: int | None = None, stop: str | None = None) -> ExperimentDesign:
    """The design of an archive's committed-minority experiment as a search must simulate it: the one
    home, :meth:`ExperimentDesign.from_log` (tested counts, runs per count, the protocol's cap and
    stop rule, read from the run table only; never a run's own length)."""
    names, _ = _pool(names, majority)
    return ExperimentDesign.from_log(log, names=names, majority=majority, memory=memory, n_agents=n_agents, llm=llm,
                                     window=window, stop=stop)


class ArchiveReplay(RunSource):
    """Replay a published (or synthetic) archive: the runs a search asks for, drawn from it.

    Parameters
    ----------
    log : normlab.schema.GameLog
        The archive (:func:`normlab.llm_runs.published.load_ainorms`, or any log with baseline and
        committed-minority runs).
    names : sequence of str
        Two-name pool (runs with the same names in any order).
    majority : str
        The consensus attacked (``overturn_<majority>``).
    memory, n_agents : int
        ``H`` and ``N`` of the committed-minority runs (baselines of every N are known).
    llm : str, optional
        The ``model`` run column.
    window : int, optional
        Window of the published rule (default: the authors').
    baselines : bool, optional
        Start from the archive's baseline runs (default True).
    stop : {"none", "streak"}, optional
        How the archive's runs ended (default: read from its run table, see :func:`archive_design`).
    rng : optional
        Seeds the order in which each count's runs are drawn.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table S3 (the critical
    masses the archives' authors reported).
    """

    def __init__(self, log: GameLog, *, names, majority: str, memory: int, n_agents: int, llm: str | None = None,
                 window: int | None = None, baselines: bool = True, stop: str | None = None, rng=None):
        if not isinstance(log, GameLog):
            raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
        names, challenger = _pool(names, majority)
        H = check_int(memory, "memory", low=1)
        N = check_int(n_agents, "n_agents", low=2)
        self.names, self.majority, self.challenger, self.n_agents, self.memory = names, majority, challenger, N, H
        self.design = archive_design(log, names=names, majority=majority, memory=H, n_agents=N, llm=llm,
                                     window=window, stop=stop)
        r = _direction_runs(log, names, majority, challenger, H, N, llm)
        self._llm = str(r["model"].iloc[0])
        g = as_generator(rng)
        self._queue = {}
        for c in self.design.counts:
            ids = r.loc[r["committed_count"].astype(int) == c, "run"].to_numpy()
            self._queue[int(c)] = list(g.permutation(ids))
        # every run the replay can hand out: the committed grid at the design's counts (0 included where the
        # archive tested it: its runs cost what any run costs)
        self.runs_available = int(sum(len(q) for q in self._queue.values()))
        self._log = log  # private: only play() and known() hand runs out
        self._baselines = bool(baselines)
        self.label = f"replay of {self._llm} ({self.runs_available} committed runs overturning {majority})"

    def remaining(self, count: int) -> int:
        return len(self._queue.get(int(count), ()))

    def _take(self, ids) -> GameLog:
        d = self._log.decisions
        return GameLog(d[d["run"].isin(ids)], self._log.runs[self._log.runs["run"].isin(ids)])

    def known(self) -> Batch | None:
        if not self._baselines:
            return None
        try:
            b = select_runs(self._log, names=self.names, memory=self.memory, model=self._llm, fit_on="baseline")
        except ValueError:
            return None
        return Batch(log=b, count=-1, decisions=_uncommitted_decisions(b))

    def play(self, count: int, n_runs: int, *, step: int) -> Batch:
        c = int(count)
        k = check_int(n_runs, "n_runs", low=1)
        q = self._queue.get(c)
        if q is None:
            raise ValueError(f"the archive did not test {c} committed agents (tested: {list(self.design.counts)})")
        if k > len(q):
            raise ValueError(f"{k} runs asked at {c} committed agents; the archive has {len(q)} left there")
        ids, self._queue[c] = q[:k], q[k:]
        lg = self._take(ids)
        return Batch(log=lg, count=c, decisions=_uncommitted_decisions(lg))


def _uncommitted_decisions(log: GameLog) -> int:
    return int((~log.decisions["committed"].to_numpy(bool)).sum())


class LLMSource(RunSource):
    """Runs played now on an LLM endpoint (embedded SmolLM2 by default) through
    :func:`normlab.llm_runs.run_game`: one journaled run directory per step under ``out``, so a
    search killed and started again with the same settings replays what was played and goes on.

    Parameters
    ----------
    names : sequence of str
        Two-name pool.
    majority : str
    memory, n_agents : int
    out : path
        Directory of the search (``baselines/``, ``step01_c10/``, ...).
    endpoint : normlab.llm_runs.backend.EndpointConfig, optional
        Default: the environment's, else the embedded server. Its ``budget_tokens`` /
        ``budget_usd`` / ``budget_requests`` bound the whole search: everything journaled under ``out`` (a probe of
        ``normlab tip --probe`` too) counts, requests cut off by a kill in full, and each step is
        capped at what is left.
    runs_per_count : int, optional
        Runs per count of the design (10, the paper's).
    window : int, optional
        Rounds per run and of the published rule (30).
    baselines : int, optional
        Baseline runs from empty memories played first (0: none; e.g. when a table is given).
    baseline_rounds : int, optional
        Cap of a baseline run in rounds (it stops earlier at a consensus streak).
    mode : {"sample", "exact"}, optional
    sampling : dict, optional
        Further :func:`~normlab.llm_runs.run_game` keywords (template, temperature, ...).
    cache : path or list of paths, optional
        Exact mode: reuse distributions journaled there (e.g. a strategy probe's directory).
    progress : bool, optional
    rng : optional
        Seeds every step's runs (step ``i`` uses child ``i``).
    """

    def __init__(self, *, names, majority: str, memory: int, n_agents: int, out, endpoint=None,
                 runs_per_count: int = PAPER_RUNS, window: int = 30, baselines: int = 4, baseline_rounds: int = 60,
                 mode: str = "sample", sampling: dict | None = None, cache=None, progress: bool = False, rng=None):
        names, challenger = _pool(names, majority)
        self.names, self.majority, self.challenger = names, majority, challenger
        self.memory = check_int(memory, "memory", low=1)
        self.n_agents = check_int(n_agents, "n_agents", low=3)
        R = check_int(runs_per_count, "runs_per_count", low=1)
        W = check_int(window, "window", low=3)
        self.n_baselines = check_int(baselines, "baselines", low=0)
        self.baseline_rounds = check_int(baseline_rounds, "baseline_rounds", low=3)
        if mode not in ("sample", "exact"):
            raise ValueError(f"mode must be 'sample' or 'exact'; got {mode!r}")
        if out is None:
            raise ValueError("a live search needs out= (a directory: every step is journaled there)")
        self.out = Path(out)
        if self.out.exists() and not self.out.is_dir():
            raise ValueError(f"out {self.out} exists and is not a directory")
        self.design = ExperimentDesign.paper(majority, challenger, self.n_agents, runs=R, window=W, stop="streak")
        # the whole committed grid, count 0 included: a run there costs what any run costs (as a replay's)
        self.runs_available = int(sum(self.design.runs[c] for c in self.design.counts))
        self.endpoint = endpoint
        self.mode = mode
        self.sampling = dict(sampling or {})
        self.cache = cache
        self.progress = bool(progress)
        self._seeds = rng
        self._played = {}
        self.label = "live runs on " + ("the embedded model" if endpoint is None or getattr(endpoint, "embedded", True)
                                        else str(getattr(endpoint, "model", None) or "the endpoint"))

    def remaining(self, count: int) -> int:
        c = int(count)
        if not 0 <= c < self.n_agents:
            return 0
        return self.design.runs[c] - self._played.get(c, 0)

    def _endpoint(self, where: str):
        """The endpoint of step ``where``: its budget what the search's budget leaves after every
        other journal under ``out`` (the probe's, the other steps'), as each counts against a
        budget (:func:`~normlab.llm_runs.journal.journal_spent`: requests cut off by a kill in
        full); the step's own journal is counted by its run. ``None``: nothing left."""
        cfg = self.endpoint if self.endpoint is not None else EndpointConfig.from_env()
        if cfg.budget_tokens is None and cfg.budget_usd is None and cfg.budget_requests is None:
            return cfg
        tokens = usd = 0.0
        requests = 0
        for j in sorted(self.out.glob(f"*/{JOURNAL_FILE}")) if self.out.is_dir() else ():
            if j.parent.name != where:
                spent = journal_spent(j.parent, (cfg.price_input, cfg.price_output))
                tokens, usd, requests = tokens + spent["tokens"], usd + spent["usd"], requests + spent["requests"]
        if cfg.budget_requests is not None:
            left = cfg.budget_requests - requests
            if left <= 0:
                return None
            cfg = dataclasses.replace(cfg, budget_requests=int(left))
        if cfg.budget_tokens is not None:
            left = cfg.budget_tokens - tokens
            if left <= 0:
                return None
            cfg = dataclasses.replace(cfg, budget_tokens=left)
        if cfg.budget_usd is not None:
            left = cfg.budget_usd - usd
            if left <= 0:
                return None
            cfg = dataclasses.replace(cfg, budget_usd=left)
        return cfg

    def _run(self, where, *, count, n_runs, max_interactions, initial, seed, committed_name) -> Batch:
        cfg = self._endpoint(where)
        if cfg is None:
            return Batch(log=_empty_log(), count=count, tokens=0, usd=0.0, complete=False)
        # a run with committed agents stops at a 3N success streak (the authors' protocol); with nobody
        # committed the consensus itself is such a streak, so those runs play to their length
        res = run_game(self.n_agents, self.memory, list(self.names), max_interactions=max_interactions, runs=n_runs,
                       mode=self.mode, committed=max(count, 0), committed_name=committed_name, initial=initial,
                       stop="max" if count == 0 else "streak", endpoint=cfg, out=self.out / where,
                       progress=self.progress, rng=seed, cache=self.cache, **self.sampling)
        r = res.log.runs
        tokens = int(r["prompt_tokens"].sum() + r["completion_tokens"].sum())
        usd = float(r["cost_usd"].sum())
        done = r["finished"].to_numpy(bool)
        ids = r.loc[done, "run"].to_numpy()
        lg = GameLog(res.log.decisions[res.log.decisions["run"].isin(ids)], r[done])
        return Batch(log=lg, count=count, tokens=tokens, usd=usd, decisions=_uncommitted_decisions(lg),
                     complete=bool(done.all()) and res.stopped is None)

    def known(self) -> Batch | None:
        if not self.n_baselines:
            return None
        return self._run("baselines", count=-1, n_runs=self.n_baselines,
                         max_interactions=self.baseline_rounds * self.n_agents, initial="empty",
                         seed=_seed_int(self._seeds, 0), committed_name=None)

    def play(self, count: int, n_runs: int, *, step: int) -> Batch:
        c = int(count)
        k = check_int(n_runs, "n_runs", low=1)
        if k > self.remaining(c):
            raise ValueError(f"{k} runs asked at {c} committed agents; the design has {self.remaining(c)} left there")
        b = self._run(f"step{int(step):02d}_c{c}", count=c, n_runs=k, max_interactions=self.design.window * self.n_agents,
                      initial=f"consensus:{self.majority}", seed=_seed_int(self._seeds, int(step)),
                      committed_name=self.challenger if c > 0 else None)
        self._played[c] = self._played.get(c, 0) + len(b.log.runs)
        return b


def _seed_int(rng, k: int):
    """A reproducible integer seed for step ``k`` (None: fresh entropy, stored in the run directory)."""
    if rng is None:
        return None
    ss = np.random.SeedSequence(rng) if isinstance(rng, (int, np.integer)) else rng
    if not isinstance(ss, np.random.SeedSequence):
        raise TypeError("a live source needs rng=None, an int or a SeedSequence (its steps must be reproducible)")
    return int(np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (int(k),)).generate_state(1)[0])


def _empty_log() -> GameLog:
    from normlab.schema import DECISION_COLUMNS, RUN_COLUMNS

    return GameLog(pd.DataFrame({c: [] for c in DECISION_COLUMNS}), pd.DataFrame({c: [] for c in RUN_COLUMNS}))
