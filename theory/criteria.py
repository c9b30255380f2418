"""Flip criteria for committed-minority runs: one home for the three readings of Flint Ashery et al. (2025).

A committed-minority run starts from a consensus on ``X``; ``c`` agents always play the
challenger ``Y``. Every reading below looks at ``Y``'s share of the *uncommitted* agents' valid
productions in population rounds (bins of ``N`` interactions counted from ``t = 0``) and at the
threshold ``2.849`` on the sum of three consecutive shares (``2.849 / 3`` on their mean). They
differ in *what* is averaged and *when* it is checked:

============ ================================= =============================================== ===========================
criterion    unit                              a count ``c`` "overturns X" when ...            critical mass
============ ================================= =============================================== ===========================
published    the ensemble of runs at ``c``     the mean over runs of the per-round share       smallest tested ``c`` that
             (the authors' code, Table S3)     (bins of ``N`` interactions from ``t = 0``, the succeeds (``inf`` if none)
                                               last partial bin kept; a run whose own last
                                               three bins sum to >= 2.849 is padded with 1s),
                                               truncated at ``max_round`` (30; 21 for Llama-3
                                               at N = 48), sums to >= 2.849 over its last
                                               three rounds
per_run      each run (first passage)          a run flips when three consecutive *complete*   ``c50`` of a Firth logistic
                                               rounds ending at round ``r <= window`` sum to   curve with a bootstrap
                                               >= 2.849 (a run stopped in a consensus on       interval; and the smallest
                                               ``Y`` counts as flipped); flip probability per  tested ``c`` with
                                               count with a Clopper-Pearson interval           ``P(flip) >= level``
end_of_run   each run (at its end)             the share over the last three blocks of ``N``   smallest tested ``c`` with
                                               interactions *ending at the run's last          a fraction ``>= level`` of
                                               interaction* sums to >= 2.849 (the loader's     runs flipped at the end
                                               ``flipped`` column)
============ ================================= =============================================== ===========================

``published`` is what produced Table S3 of Flint Ashery et al. (2025) (``plotter.ipynb`` cells 9-10, function
``non_cm_word_use`` and ``did_converge``): it is the default wherever a result is compared with
the paper. It is an *ensemble* rule: a count can succeed although some of its runs never flip, and
fail although half of them flip early and drift back. ``per_run`` is the prose reading of Methods
("the committed name is adopted within 30 rounds"); ``end_of_run`` is the reading of the
AI-norms loader (``normlab.llm_runs.published.ainorms``) before this module existed.

Inputs are tidy and source-free: per-round challenger shares of one run (a 1-D array), or the
per-round (or per-interaction) counts they come from, so theory runs
(:class:`~normlab.theory.results.GameResult` ``round_production_uncommitted``, see
:func:`shares_from_result`), LLM logs (``normlab.schema.GameLog``, turned into shares by
:func:`normlab.calibration.challenger_shares`) and the published archives all go through the same
functions; :func:`evaluate` applies a criterion named by a string to a tidy table
(``committed``, ``run``, ``round``, ``share``).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods "Committed
Minorities", Fig. 3, Table S3; the authors' code, Ariel-Flint-Ashery/AI-norms at commit e57aeef,
``plotter.ipynb`` cells 9-10 (MIT); C. J. Clopper, E. S. Pearson, Biometrika 26, 404 (1934);
D. Firth, Biometrika 80, 27 (1993).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from normlab._rng import as_generator
from normlab._validate import check_int

from .stats import clopper_pearson, firth_logistic, smallest_count

__all__ = [
    "CRITERIA", "FLIP_SUM", "PUBLISHED_FLIP_THRESHOLD", "check_criterion", "published_max_round", "round_shares",
    "shares_from_result", "published_rule", "published_critical_mass", "first_passage", "flip_reached",
    "FlipWindow", "end_of_run_windows", "end_of_run_sum", "end_of_run_share_sum", "per_run_curve",
    "firth_logistic", "smallest_count", "evaluate",
]

#: The three readings, in the order of the table above.
CRITERIA = ("published", "per_run", "end_of_run")
#: Threshold on the sum of three consecutive round shares (Flint Ashery et al. 2025, Methods; ``did_converge``).
FLIP_SUM = 2.849
#: Rounds summed by every reading.
LAST_ROUNDS = 3
#: The same threshold on the challenger's share of the uncommitted productions of the last three
#: rounds taken together (``2.849 / 3``): the running flip check of the simulators and LLM runs
#: (:func:`flip_reached`), the default ``flip_threshold`` of every game.
PUBLISHED_FLIP_THRESHOLD = FLIP_SUM / 3
#: The authors' ``max_round`` (``plotter.ipynb`` cell 10): 30, except Llama-3 at N = 48 (21).
PUBLISHED_WINDOW = 30
PUBLISHED_WINDOW_LLAMA3_N48 = 21


def check_criterion(criterion) -> str:
    """Return ``criterion`` if it names a reading, else raise a one-line ``ValueError``."""
    if not isinstance(criterion, str) or criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {list(CRITERIA)}; got {criterion!r}")
    return criterion


def published_max_round(model: str | None = None, n_agents: int | None = None) -> int:
    """The authors' window ``max_round``: 21 for Llama-3 (not 3.1) at N = 48, else 30.

    The Llama-3 N = 48 committed runs last 1000 interactions, i.e. 21 bins of 48 (the last one
    partial), so the authors truncated there (``plotter.ipynb`` cell 10: ``max_round = 21``).

    Parameters
    ----------
    model : str, optional
        LLM label (``"Llama-3-70B-Instruct"``, a file shorthand such as ``"llama3_70b"``, ...).
    n_agents : int, optional
    """
    m = "" if model is None else str(model).lower().replace("-", "").replace("_", "").replace(".", "")
    is_llama3 = m.startswith("llama3") and not m.startswith("llama31")
    return PUBLISHED_WINDOW_LLAMA3_N48 if (is_llama3 and n_agents is not None and int(n_agents) == 48) \
        else PUBLISHED_WINDOW


def _check_flip_sum(flip_sum) -> float:
    f = float(flip_sum)
    if not 0 < f <= LAST_ROUNDS:
        raise ValueError(f"flip_sum must be in (0, {LAST_ROUNDS}]; got {flip_sum!r}")
    return f


def _trajectory(x, what="shares") -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{what} of one run must be a 1-D array; got shape {a.shape}")
    if a.size and (np.nanmin(a) < 0 or np.nanmax(a) > 1):
        raise ValueError(f"{what} must lie in [0, 1]")
    return a


def round_shares(hits, totals) -> np.ndarray:
    """Challenger share per round from counts: ``hits / totals`` (NaN where a round has no
    uncommitted production -- the authors' code would divide by zero there).

    Parameters
    ----------
    hits, totals : array_like
        Challenger productions and all valid productions of uncommitted agents per round.

    Returns
    -------
    numpy.ndarray
    """
    h = np.asarray(hits, dtype=float)
    t = np.asarray(totals, dtype=float)
    if h.shape != t.shape or h.ndim != 1:
        raise ValueError(f"hits and totals must be 1-D arrays of one shape; got {h.shape} and {t.shape}")
    if np.any(h < 0) or np.any(h > t):
        raise ValueError("need 0 <= hits <= totals in every round")
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(t > 0, h / np.maximum(t, 1), np.nan)


def shares_from_result(result, challenger=None) -> list[np.ndarray]:
    """Per-run challenger share per recorded round of a simulation (bins of ``N`` interactions
    from ``t = 0``; a partial last round is kept, as in the published rule).

    Parameters
    ----------
    result : normlab.theory.results.GameResult
        A finite-pool result (``round_production_uncommitted``).
    challenger : int or str, optional
        Name index or label; default: the result's ``committed_name``.

    Returns
    -------
    list of numpy.ndarray
        One array per run.
    """
    if not hasattr(result, "round_production_uncommitted"):
        raise TypeError(f"result must be a GameResult; got {type(result).__name__}")
    if result.n_names == 0:
        raise ValueError("challenger shares need a finite name pool")
    y = result.committed_name if challenger is None else challenger
    if isinstance(y, str):
        if y not in result.names:
            raise ValueError(f"challenger {y!r} is not one of {result.names}")
        y = result.names.index(y)
    y = check_int(y, "challenger", low=0, high=result.n_names - 1)
    prod = result.round_production_uncommitted
    tot = prod.sum(axis=1)
    sh = round_shares(prod[:, y], tot)
    off = result.round_offsets
    return [sh[off[k]:off[k + 1]] for k in range(result.n_runs)]


def _last3(x: np.ndarray) -> float:
    """Sum of the last three values, left to right as the authors' ``sum(run[-3:])``."""
    s = 0.0
    for v in x[-LAST_ROUNDS:]:
        s += v
    return s


def published_rule(trajectories: Sequence, *, max_round: int = PUBLISHED_WINDOW, flip_sum: float = FLIP_SUM,
                   met=None) -> dict:
    """The published ensemble rule for one committed count (``plotter.ipynb`` cells 9-10).

    Steps, as the authors coded them: (1) each run's challenger share per round (bins of ``N``
    interactions from ``t = 0``, the last partial bin kept); (2) a run whose own last three bins
    sum to ``>= flip_sum`` is padded with 1s (to the longest run's length + 30); (3) the shares
    are averaged over runs round by round (runs that ended earlier and were not padded drop out of
    later rounds); (4) the mean is truncated at ``max_round`` rounds; (5) the count succeeds when
    the last three rounds of the truncated mean sum to ``>= flip_sum``.

    Parameters
    ----------
    trajectories : sequence of array_like
        One 1-D array of per-round shares in [0, 1] per run (ragged; NaN = a round without any
        uncommitted production, left out of the mean).
    max_round : int, optional
        Window in population rounds (30; 21 for Llama-3 at N = 48, see :func:`published_max_round`).
    flip_sum : float, optional
        Threshold on the 3-round sum (2.849).
    met : array_like of bool, optional
        Runs known to have met the threshold at their end (e.g. a simulation stopped by its flip
        rule): padded whatever the rounding of their last three shares.

    Returns
    -------
    dict
        ``success`` (bool), ``last3`` (the 3-round sum of the mean), ``mean`` (the truncated
        mean curve), ``n_runs``, ``n_padded`` (runs meeting the threshold at their own end).

    Raises
    ------
    ValueError
        No run; a run that is not 1-D or has shares outside [0, 1]; a window longer than the
        runs (the longest run that did not meet the threshold at its end is shorter than
        ``max_round``: the authors' code would then read rounds nobody observed).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table S3, Fig. 3; the
    authors' ``plotter.ipynb`` cells 9-10 (``non_cm_word_use``, ``did_converge``).
    """
    W = check_int(max_round, "max_round", low=LAST_ROUNDS)
    f = _check_flip_sum(flip_sum)
    trs = [np.asarray(t, dtype=float) for t in trajectories]
    if not trs:
        raise ValueError("published_rule needs at least one run")
    if any(t.ndim != 1 for t in trs):
        raise ValueError("shares of one run must be a 1-D array")
    allv = np.concatenate(trs)
    if allv.size and (np.nanmin(allv, initial=0.0) < 0 or np.nanmax(allv, initial=0.0) > 1):
        raise ValueError("shares must lie in [0, 1]")
    longest = max(len(t) for t in trs)
    padded = np.array([len(t) >= 1 and _last3(t) >= f for t in trs])
    if met is not None:
        m = np.asarray(met, dtype=bool)
        if m.shape != padded.shape:
            raise ValueError(f"met must hold one flag per run ({len(trs)}); got shape {m.shape}")
        padded |= m & np.array([len(t) >= 1 for t in trs])
    open_len = [len(t) for t, p in zip(trs, padded) if not p]
    if open_len and max(open_len) < W:
        raise ValueError(f"the window of max_round={W} rounds is longer than the runs: the longest run that did "
                         f"not reach the threshold has {max(open_len)} rounds; use max_round <= {max(open_len)}")
    # the authors pad to longest + 30 rounds, then truncate the mean at W: only the first
    # min(W, that length) columns matter
    L = min(W, longest + 30 if padded.any() else longest)
    M = np.full((len(trs), L), np.nan)
    for k, (t, p) in enumerate(zip(trs, padded)):
        m = min(len(t), L)
        M[k, :m] = t[:m]
        if p:
            M[k, m:] = 1.0
    with np.errstate(invalid="ignore"):
        n = np.sum(~np.isnan(M), axis=0)
        mean = np.where(n > 0, np.nansum(M, axis=0) / np.maximum(n, 1), np.nan)
    last3 = _last3(mean)
    return {"success": bool(last3 >= f), "last3": float(last3), "mean": mean, "n_runs": len(trs),
            "n_padded": int(padded.sum())}


def published_critical_mass(by_count: dict, *, max_round: int = PUBLISHED_WINDOW, flip_sum: float = FLIP_SUM) -> float:
    """Smallest tested committed count meeting the published rule (Flint Ashery et al. 2025, Table S3).

    Parameters
    ----------
    by_count : dict
        committed count -> sequence of per-run share trajectories (see :func:`published_rule`).
    max_round, flip_sum : optional

    Returns
    -------
    float
        The count, or ``inf`` when no tested count succeeds.
    """
    if not by_count:
        raise ValueError("published_critical_mass needs at least one committed count")
    counts = sorted(by_count)
    ok = [published_rule(by_count[c], max_round=max_round, flip_sum=flip_sum)["success"] for c in counts]
    return smallest_count(counts, ok)


def first_passage(shares, *, window: int, flip_sum: float = FLIP_SUM, complete_rounds: int | None = None) -> float:
    """First round (from 1) at which three consecutive complete rounds sum to ``>= flip_sum``,
    if it is ``<= window`` (the ``per_run`` reading); NaN otherwise.

    Parameters
    ----------
    shares : array_like
        Per-round challenger shares of one run (NaN counts as 0).
    window : int
        Last round at which a flip counts (30 in Flint Ashery et al. 2025, Methods).
    flip_sum : float, optional
    complete_rounds : int, optional
        Rounds to look at (default all of ``shares``; pass ``T // N`` to leave out a partial last
        round).

    Returns
    -------
    float
    """
    W = check_int(window, "window", low=LAST_ROUNDS)
    f = _check_flip_sum(flip_sum)
    s = np.nan_to_num(_trajectory(shares))
    if complete_rounds is not None:
        s = s[:check_int(complete_rounds, "complete_rounds", low=0)]
    if s.size < LAST_ROUNDS:
        return float("nan")
    s3 = np.convolve(s, np.ones(LAST_ROUNDS), mode="valid")
    hit = np.flatnonzero(s3 >= f - 1e-12)
    if not hit.size or hit[0] + LAST_ROUNDS > W:
        return float("nan")
    return float(hit[0] + LAST_ROUNDS)


def flip_reached(committed_productions, uncommitted_productions, threshold: float = PUBLISHED_FLIP_THRESHOLD) -> bool:
    """The running flip reading, checked at the end of each population round (from the third on):
    the challenger made at least ``threshold`` of the uncommitted agents' productions of the last
    three rounds taken together (``2.849 / 3``; no production: no flip).

    The one statement of the check that the simulators' kernels (compiled from this function,
    :mod:`normlab.theory._criteria_kernels`), their pure-Python twins and the LLM runner apply;
    :class:`FlipWindow` keeps the three rounds.

    Parameters
    ----------
    committed_productions, uncommitted_productions : int
        Challenger productions by uncommitted agents, and all their productions, summed over
        the last three rounds.
    threshold : float, optional

    Returns
    -------
    bool
    """
    return uncommitted_productions > 0 and committed_productions >= threshold * uncommitted_productions


class FlipWindow:
    """The running flip reading over a run: the last three rounds' counts and :func:`flip_reached`.

    >>> w = FlipWindow()
    >>> [w.end_round(c, 10) for c in (9, 10, 10)]
    [False, False, True]
    """

    __slots__ = ("threshold", "_c", "_u")

    def __init__(self, threshold: float = PUBLISHED_FLIP_THRESHOLD):
        self.threshold = float(threshold)
        self._c: list[int] = []
        self._u: list[int] = []

    def end_round(self, committed_productions: int, uncommitted_productions: int) -> bool:
        """Record one finished round; whether the last three rounds (once there are three) meet the threshold."""
        self._c = (self._c + [committed_productions])[-LAST_ROUNDS:]
        self._u = (self._u + [uncommitted_productions])[-LAST_ROUNDS:]
        return len(self._c) == LAST_ROUNDS and flip_reached(sum(self._c), sum(self._u), self.threshold)


def end_of_run_windows(hits, uncommitted, n_agents: int) -> np.ndarray:
    """The ``end_of_run`` sum at every possible end of a run: for each ``e = 3N .. T``, the
    challenger's share among uncommitted productions in each of the three blocks of ``N``
    interactions before ``e``, summed (a block without uncommitted production counts 0).

    Parameters
    ----------
    hits, uncommitted : array_like
        Per interaction: challenger productions by uncommitted agents (0, 1 or 2) and productions
        by uncommitted agents.
    n_agents : int

    Returns
    -------
    numpy.ndarray
        ``T - 3N + 1`` sums (empty when the run is shorter than ``3N``); the last one is
        :func:`end_of_run_sum`, the first reaching :data:`FLIP_SUM` dates a flip.
    """
    N = check_int(n_agents, "n_agents", low=1)
    h = np.asarray(hits, dtype=float)
    u = np.asarray(uncommitted, dtype=float)
    if h.shape != u.shape or h.ndim != 1:
        raise ValueError(f"hits and uncommitted must be 1-D arrays of one shape; got {h.shape} and {u.shape}")
    T = h.size
    if T < LAST_ROUNDS * N:
        return np.zeros(0)
    ch = np.concatenate([[0.0], np.cumsum(h)])
    cu = np.concatenate([[0.0], np.cumsum(u)])
    ends = np.arange(LAST_ROUNDS * N, T + 1)
    total = np.zeros(ends.size)
    for b in range(LAST_ROUNDS):
        lo = ends - (LAST_ROUNDS - b) * N
        hb, ub = ch[lo + N] - ch[lo], cu[lo + N] - cu[lo]
        total += np.where(ub > 0, hb / np.where(ub > 0, ub, 1.0), 0.0)
    return total


def end_of_run_sum(hits, uncommitted, n_agents: int) -> float:
    """The ``end_of_run`` reading: the challenger's share among uncommitted productions in each
    of the last three blocks of ``N`` interactions ending at the run's last interaction, summed
    (NaN if the run is shorter than ``3N``; a block without uncommitted production counts 0).

    Parameters
    ----------
    hits, uncommitted : array_like
        Per interaction: challenger productions by uncommitted agents (0, 1 or 2) and productions
        by uncommitted agents.
    n_agents : int

    Returns
    -------
    float
        Compare with :data:`FLIP_SUM` (the loader's ``committed_share_last3``); the last of
        :func:`end_of_run_windows`.
    """
    w = end_of_run_windows(hits, uncommitted, n_agents)
    return float(w[-1]) if w.size else float("nan")


def end_of_run_share_sum(shares) -> float:
    """The ``end_of_run`` reading on per-round shares of a run that ends at a round boundary:
    its last three round shares summed (a round without uncommitted production counts 0; NaN
    with fewer than three rounds). Equal to :func:`end_of_run_sum` on the same run."""
    s = np.asarray(shares, dtype=float)
    if s.ndim != 1:
        raise ValueError(f"shares of one run must be a 1-D array; got shape {s.shape}")
    return float(np.nansum(s[-LAST_ROUNDS:])) if s.size >= LAST_ROUNDS else float("nan")


def per_run_curve(counts, n_flips, n_runs, *, level: float = 0.5, n_boot: int = 2000, rng=None) -> dict:
    """The ``per_run`` reading: flip probability per count (Clopper-Pearson 95%), the smallest
    tested count reaching ``level``, and the 50% point ``c50 = -b0 / b1`` of a Firth logistic
    curve with a bootstrap interval (runs resampled within each count).

    Parameters
    ----------
    counts, n_flips, n_runs : array_like
        Tested committed counts, runs that flipped (first passage within the window) and runs.
    level : float, optional
        Flip probability defining the critical mass (0.5).
    n_boot : int, optional
        Bootstrap replicates (0: no interval).
    rng : optional

    Returns
    -------
    dict
        ``p_flip``, ``ci_low``, ``ci_high`` (arrays), ``first_count``, ``first_all``, ``c50``,
        ``c50_low``, ``c50_high``, ``b0``, ``b1``, ``separated``.
    """
    x = np.asarray(counts, dtype=float)
    k = np.asarray(n_flips, dtype=float)
    n = np.asarray(n_runs, dtype=float)
    if not (x.ndim == k.ndim == n.ndim == 1 and x.size == k.size == n.size and x.size):
        raise ValueError("counts, n_flips and n_runs must be non-empty 1-D arrays of one length")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError("need n_runs >= 1 and 0 <= n_flips <= n_runs for every count")
    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be an int >= 0; got {n_boot!r}")
    g = as_generator(rng)
    p = k / n
    lo, hi = clopper_pearson(k, n)
    b0, b1 = firth_logistic(x, k, n)
    c50 = -b0 / b1 if b1 > 0 else np.nan
    lo50 = hi50 = np.nan
    if n_boot and x.size >= 2 and b1 > 0:
        boots = np.empty(int(n_boot))
        for i in range(int(n_boot)):
            bb0, bb1 = firth_logistic(x, g.binomial(n.astype(int), p), n)
            boots[i] = -bb0 / bb1 if bb1 > 0 else np.inf
        lo50, hi50 = np.quantile(boots, [0.025, 0.975])
    order = np.argsort(x)
    sep = bool(np.all((p == 0) | (p == 1)) and np.all(np.diff(p[order]) >= 0))
    return {"p_flip": p, "ci_low": lo, "ci_high": hi, "first_count": smallest_count(x, p >= level),
            "first_all": smallest_count(x, k == n), "c50": float(c50), "c50_low": float(lo50),
            "c50_high": float(hi50), "b0": float(b0), "b1": float(b1), "separated": sep}


def evaluate(shares, criterion: str = "published", *, window: int = PUBLISHED_WINDOW, level: float = 0.5,
             flip_sum: float = FLIP_SUM, n_boot: int = 0, rng=None) -> dict:
    """Apply one criterion to a tidy table of challenger shares (one direction).

    Parameters
    ----------
    shares : pandas.DataFrame
        Columns ``committed``, ``run``, ``round`` (from 1) and ``share`` (the challenger's share of
        the uncommitted agents' productions; e.g. :func:`normlab.calibration.challenger_shares`
        with a ``committed`` column, or :func:`shares_from_result` of simulations).
    criterion : {"published", "per_run", "end_of_run"}
    window : int, optional
        ``max_round`` of the published rule, or the first-passage window of ``per_run`` (30).
    level : float, optional
        Fraction of runs defining the ``per_run`` and ``end_of_run`` critical masses (0.5).
    flip_sum : float, optional
    n_boot : int, optional
        Bootstrap replicates of the ``per_run`` 50% point.
    rng : optional

    Returns
    -------
    dict
        ``criterion``, ``critical_mass`` (smallest tested count meeting the criterion; ``inf``
        when none), ``by_count`` (pandas.DataFrame: ``committed``, ``n_runs`` and ``last3`` /
        ``success`` for ``published``, ``n_flips`` / ``p_flip`` / ``ci_low`` / ``ci_high`` for
        ``per_run``, ``n_flips`` / ``p_flip`` for ``end_of_run``); ``per_run`` adds ``c50``,
        ``c50_low``, ``c50_high``. ``end_of_run`` here reads the last three *rounds* of each run
        (the 3N-interaction reading of :func:`end_of_run_sum` when runs end at a round boundary).

    Raises
    ------
    ValueError
        Unknown criterion, missing columns, a published window longer than the runs.
    """
    import pandas as pd

    crit = check_criterion(criterion)
    if not isinstance(shares, pd.DataFrame):
        raise TypeError(f"shares must be a pandas DataFrame; got {type(shares).__name__}")
    miss = {"committed", "run", "round", "share"} - set(shares.columns)
    if miss:
        raise ValueError(f"shares lacks columns {sorted(miss)}; need committed, run, round, share")
    if shares.empty:
        raise ValueError("shares is empty")
    W = check_int(window, "window", low=LAST_ROUNDS)
    df = shares.sort_values(["committed", "run", "round"])
    rows = []
    for c, gc in df.groupby("committed", sort=True):
        trs = [g["share"].to_numpy(float) for _, g in gc.groupby("run", sort=True)]
        if crit == "published":
            r = published_rule(trs, max_round=W, flip_sum=flip_sum)
            rows.append({"committed": c, "n_runs": len(trs), "last3": r["last3"], "success": r["success"]})
        elif crit == "per_run":
            k = sum(not np.isnan(first_passage(t, window=W, flip_sum=flip_sum)) for t in trs)
            rows.append({"committed": c, "n_runs": len(trs), "n_flips": int(k)})
        else:
            k = sum(end_of_run_share_sum(t) >= flip_sum for t in trs)
            rows.append({"committed": c, "n_runs": len(trs), "n_flips": int(k)})
    by = pd.DataFrame(rows)
    out = {"criterion": crit, "by_count": by}
    x = by["committed"].to_numpy(float)
    if crit == "published":
        out["critical_mass"] = smallest_count(x, by["success"].to_numpy(bool))
        return out
    by["p_flip"] = by["n_flips"] / by["n_runs"]
    if crit == "per_run":
        pr = per_run_curve(x, by["n_flips"], by["n_runs"], level=level, n_boot=n_boot, rng=rng)
        by["ci_low"], by["ci_high"] = pr["ci_low"], pr["ci_high"]
        out.update(critical_mass=pr["first_count"], c50=pr["c50"], c50_low=pr["c50_low"], c50_high=pr["c50_high"])
        return out
    out["critical_mass"] = smallest_count(x, by["p_flip"].to_numpy() >= level)
    return out
