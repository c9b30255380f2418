"""Empirical critical mass from committed-minority runs (LLM or simulated).

Each run that starts from a consensus on ``X`` (``initial = "consensus:X"``: the AI-norms
``swap`` and ``evolved`` files, normlab's own LLM runs, or :func:`normlab.theory.strategy_game`
logs) is classified by the **published flip criterion**, computed from its decisions exactly as
the theory simulator does: the challenger ``Y``'s share of the uncommitted agents' valid
productions in each population round (round ``r`` = interactions ``(r - 1) N .. r N - 1``), summed
over three consecutive complete rounds, reaches ``2.849`` -- checked at the end of every complete
round up to ``within_rounds``. A run that stopped in a consensus on ``Y`` (a final streak of ``3N``
successes on ``Y``) counts as flipped at its last round, as an absorbed theory run does. This is
the "at any time within the window" reading; the loader's ``flipped`` column (criterion on the last
three rounds of the run, "at end") is reported alongside for comparison -- they differ for runs
that flip and then drift back, which happens in the N = 48 Llama-3.1 files.

A run that neither flipped nor stopped in a consensus and has fewer than ``within_rounds``
complete rounds is *censored* (it might have flipped later); it counts as not flipped and is
flagged. The Llama-3 N = 48 committed runs have 1000 interactions (20 complete rounds), so with
``within_rounds=30`` every non-flipping one of them is censored: seed 003 Methods measures the
Llama-3 critical masses "within the same time frame" as the weak-convention experiment, i.e. the
run length, so compare with ``within_rounds=20`` there.

The flip probability per committed count gets a Clopper-Pearson interval; a logistic curve
``P(flip) = 1 / (1 + exp(-(b0 + b1 c)))`` is fitted by Firth's penalised likelihood (finite even
under complete separation, common here), and the critical mass ``c50 = -b0 / b1`` gets a
bootstrap interval (runs resampled within each count). The count reported in seed 003 Table S3 is
the smallest *tested* count that overturns the majority; ``first_count`` (smallest tested count
with flip frequency >= ``level``) is its analogue.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods "Committed
Minorities", Fig. 3, Table S3, Fig. S7; D. Firth, Biometrika 80, 27 (1993); C. J. Clopper,
E. S. Pearson, Biometrika 26, 404 (1934).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._rng import as_generator
from normlab.schema import GameLog

__all__ = ["run_flips", "empirical_critical_mass", "EmpiricalCriticalMass", "firth_logistic"]

FLIP_SUM = 2.849


def _challenger(row, names):
    if row["committed_name"] is not None and not (isinstance(row["committed_name"], float)):
        return str(row["committed_name"])
    maj = str(row["initial"]).split(":", 1)[1]
    if len(names) == 2:
        return names[1 - names.index(maj)] if maj in names else None
    ct = row.get("committed_to")
    return None if ct is None or (isinstance(ct, float) and np.isnan(ct)) else str(ct)


def run_flips(log: GameLog, *, within_rounds: int = 30, flip_sum: float = FLIP_SUM) -> pd.DataFrame:
    """Classify every committed-minority (or unperturbed consensus) run by the flip criterion.

    Parameters
    ----------
    log : normlab.schema.GameLog
        Runs starting from a consensus (``initial = "consensus:<name>"``); other runs are ignored.
    within_rounds : int, optional
        Window in population rounds (30 in seed 003 Methods).
    flip_sum : float, optional
        Threshold on the 3-round sum of the challenger's share (2.849).

    Returns
    -------
    pandas.DataFrame
        One row per run: ``run``, ``model``, ``kind``, ``n_agents``, ``memory``, ``majority``,
        ``challenger``, ``committed``, ``rounds`` (complete rounds observed), ``flipped``
        (within the window), ``flip_round`` (NaN if not), ``censored``, ``final_share``
        (challenger share over the last three complete rounds), ``consensus`` and, when the log
        has them, the loader's ``flipped_at_end`` and ``flip_interaction``.

    Raises
    ------
    ValueError
        No run starts from a consensus.
    """
    from normlab.theory._common import check_int

    if not isinstance(log, GameLog):
        raise TypeError(f"log must be a normlab.schema.GameLog; got {type(log).__name__}")
    W_rounds = check_int(within_rounds, "within_rounds", low=3)
    runs = log.runs[log.runs["initial"].astype(str).str.startswith("consensus:")]
    if runs.empty:
        raise ValueError("no run starts from a consensus (initial='consensus:<name>'); committed-minority runs needed")
    d = log.decisions[log.decisions["run"].isin(runs["run"])]
    d = d[d["valid"].to_numpy() & ~d["committed"].to_numpy()]
    rows = []
    by_run = {r: g for r, g in d.groupby("run")}
    for _, r in runs.iterrows():
        names = str(r["names"]).split(",")
        maj = str(r["initial"]).split(":", 1)[1]
        y = _challenger(r, names)
        N = int(r["n_agents"])
        n_int = int(r["n_interactions"])
        R = n_int // N  # complete rounds
        g = by_run.get(r["run"])
        tot = np.zeros(R)
        cy = np.zeros(R)
        if g is not None and R > 0:
            rr = g["round"].to_numpy()
            keep = rr < R
            np.add.at(tot, rr[keep], 1)
            np.add.at(cy, rr[keep], (g["name"].to_numpy()[keep] == y))
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(tot > 0, cy / np.maximum(tot, 1), np.nan)
        s3 = np.convolve(np.nan_to_num(share), np.ones(3), mode="valid") if R >= 3 else np.zeros(0)
        hit = np.flatnonzero(s3 >= flip_sum - 1e-12)
        flip_round = float(hit[0] + 3) if hit.size else np.nan  # rounds from 1
        cons = r["consensus"]
        if np.isnan(flip_round) and cons is not None and str(cons) == y:
            flip_round = float(-(-n_int // N))
        flipped = bool(not np.isnan(flip_round) and flip_round <= W_rounds)
        stopped = cons is not None and not (isinstance(cons, float))
        censored = (not flipped) and (not stopped) and R < W_rounds
        row = {"run": r["run"], "model": r["model"], "kind": r["kind"], "n_agents": N, "memory": int(r["memory"]),
               "majority": maj, "challenger": y, "committed": int(r["committed_count"]), "rounds": R,
               "flipped": flipped, "flip_round": flip_round if flipped else np.nan, "censored": bool(censored),
               "final_share": float(s3[-1] / 3) if len(s3) else np.nan, "consensus": cons}
        for c in ("flipped", "flip_interaction"):
            if c in runs.columns:
                v = r[c]
                row["flipped_at_end" if c == "flipped" else c] = None if v is None or v is pd.NA else v
        rows.append(row)
    return pd.DataFrame(rows)


def firth_logistic(x, k, n, *, max_iter: int = 100, tol: float = 1e-10):
    """Firth-penalised logistic regression ``logit P = b0 + b1 x`` on grouped binomial data.

    Parameters
    ----------
    x, k, n : array_like
        Covariate, successes and trials per group.

    Returns
    -------
    numpy.ndarray
        ``[b0, b1]``.

    References
    ----------
    D. Firth, "Bias reduction of maximum likelihood estimates", Biometrika 80, 27 (1993).
    """
    x, k, n = (np.asarray(v, float) for v in (x, k, n))
    X = np.column_stack([np.ones_like(x), x])
    b = np.zeros(2)
    for _ in range(max_iter):
        p = 1 / (1 + np.exp(-(X @ b)))
        w = n * p * (1 - p)
        I = X.T @ (X * w[:, None])
        try:
            Iinv = np.linalg.inv(I)
        except np.linalg.LinAlgError:
            Iinv = np.linalg.pinv(I)
        h = w * np.einsum("ij,jk,ik->i", X, Iinv, X)
        U = X.T @ (k - n * p + h * (0.5 - p))
        step = Iinv @ U
        # damping keeps the iteration stable under separation
        m = np.max(np.abs(step))
        if m > 5:
            step *= 5 / m
        b = b + step
        if np.max(np.abs(step)) < tol:
            break
    return b


@dataclass(frozen=True)
class EmpiricalCriticalMass:
    """Empirical flip curves and critical masses, one direction per (majority, challenger, N, H).

    Attributes
    ----------
    curves : pandas.DataFrame
        One row per direction and committed count: ``model``, ``majority``, ``challenger``,
        ``n_agents``, ``memory``, ``committed``, ``n_runs``, ``n_flips``, ``p_flip``, ``ci_low``,
        ``ci_high`` (Clopper-Pearson 95%), ``n_censored``, ``n_flipped_at_end`` (loader column,
        if present), ``mean_flip_round``.
    estimates : pandas.DataFrame
        One row per direction: ``model``, ``majority``, ``challenger``, ``n_agents``, ``memory``,
        ``first_count`` (smallest tested count with ``p_flip >= level``; the analogue of Table S3),
        ``first_all`` (smallest tested count where every run flipped), ``c50`` (logistic),
        ``c50_low``, ``c50_high`` (bootstrap interval), ``b0``, ``b1``, ``n_runs``, ``counts``
        (tested counts), ``separated`` (every tested count all-flip or all-stay on one side).
    runs : pandas.DataFrame
        The per-run classification (:func:`run_flips`).
    within_rounds : int
    level : float

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods, Fig. 3, Table S3.
    """

    curves: pd.DataFrame
    estimates: pd.DataFrame
    runs: pd.DataFrame
    within_rounds: int
    level: float = 0.5
    settings: dict = field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """The flip curves (tidy)."""
        return self.curves.copy()

    def estimate(self, majority: str, *, n_agents: int | None = None, memory: int | None = None) -> dict:
        """The estimate row of one direction as a dict."""
        e = self.estimates[self.estimates["majority"] == majority]
        if n_agents is not None:
            e = e[e["n_agents"] == n_agents]
        if memory is not None:
            e = e[e["memory"] == memory]
        if len(e) != 1:
            raise ValueError(f"{len(e)} directions match majority={majority!r}, n_agents={n_agents}, memory={memory}")
        return e.iloc[0].to_dict()


def empirical_critical_mass(log: GameLog, *, within_rounds: int = 30, level: float = 0.5, n_boot: int = 2000,
                            include_evolved: bool = True, rng=None) -> EmpiricalCriticalMass:
    """Flip probability vs committed count from committed-minority runs, with a logistic critical mass.

    Parameters
    ----------
    log : normlab.schema.GameLog
        Runs starting from a consensus (AI-norms ``swap``/``evolved`` files, normlab LLM runs,
        or simulations). Directions are grouped by model, majority, challenger, N and H.
    within_rounds : int, optional
        Flip window in population rounds (30, seed 003 Methods).
    level : float, optional
        Flip probability defining the critical mass (0.5).
    n_boot : int, optional
        Bootstrap replicates of the logistic fit (0 to skip).
    include_evolved : bool, optional
        Count unperturbed consensus runs (``evolved``: nobody committed) as committed count 0.
    rng : optional

    Returns
    -------
    EmpiricalCriticalMass

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Methods "Committed
    Minorities", Fig. 3, Table S3; Firth, Biometrika 80, 27 (1993).
    """
    from normlab.theory.sweeps import clopper_pearson

    if not 0 < float(level) < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be an int >= 0; got {n_boot!r}")
    rf = run_flips(log, within_rounds=within_rounds)
    if not include_evolved:
        rf = rf[rf["kind"] != "evolved"]
    if rf.empty:
        raise ValueError("no committed-minority run to analyse")
    g = as_generator(rng)
    curves, ests = [], []
    keys = ["model", "majority", "challenger", "n_agents", "memory"]
    for key, grp in rf.groupby(keys, sort=True):
        c = grp.groupby("committed").agg(
            n_runs=("flipped", "size"), n_flips=("flipped", "sum"), n_censored=("censored", "sum"),
            mean_flip_round=("flip_round", "mean"),
        ).reset_index()
        if "flipped_at_end" in grp.columns:
            c["n_flipped_at_end"] = grp.groupby("committed")["flipped_at_end"].apply(
                lambda s: int(np.nansum(pd.to_numeric(s, errors="coerce")))).to_numpy()
        c["p_flip"] = c["n_flips"] / c["n_runs"]
        lo, hi = clopper_pearson(c["n_flips"].to_numpy(), c["n_runs"].to_numpy())
        c["ci_low"], c["ci_high"] = lo, hi
        for kk, v in zip(keys, key):
            c[kk] = v
        curves.append(c)
        x = c["committed"].to_numpy(float)
        k = c["n_flips"].to_numpy(float)
        n = c["n_runs"].to_numpy(float)
        p = k / n
        first = x[p >= level]
        first_all = x[k == n]
        b0, b1 = firth_logistic(x, k, n) if len(x) >= 1 else (np.nan, np.nan)
        c50 = -b0 / b1 if b1 > 0 else np.nan
        lo50 = hi50 = np.nan
        if n_boot and len(x) >= 2 and b1 > 0:
            # resample runs within each count (binomial resampling of the flip indicator)
            boots = []
            for _ in range(int(n_boot)):
                kb = g.binomial(n.astype(int), p)
                bb0, bb1 = firth_logistic(x, kb, n)
                boots.append(-bb0 / bb1 if bb1 > 0 else np.inf)
            boots = np.asarray(boots)
            lo50, hi50 = np.quantile(boots, [0.025, 0.975])
        # separation: the flip frequency jumps from all-0 to all-1 between adjacent tested counts
        sep = bool(np.all((p == 0) | (p == 1)) and np.all(np.diff(p[np.argsort(x)]) >= 0))
        ests.append({**dict(zip(keys, key)),
                     "first_count": float(first.min()) if first.size else np.inf,
                     "first_all": float(first_all.min()) if first_all.size else np.inf,
                     "c50": float(c50), "c50_low": float(lo50), "c50_high": float(hi50),
                     "b0": float(b0), "b1": float(b1), "n_runs": int(n.sum()), "counts": [int(v) for v in x],
                     "separated": sep})
    cols = keys + ["committed", "n_runs", "n_flips", "p_flip", "ci_low", "ci_high", "n_censored", "mean_flip_round"]
    curves = pd.concat(curves, ignore_index=True)
    curves = curves[cols + [c for c in curves.columns if c not in cols]]
    return EmpiricalCriticalMass(curves=curves, estimates=pd.DataFrame(ests), runs=rf,
                                 within_rounds=int(within_rounds), level=float(level),
                                 settings={"n_boot": int(n_boot), "include_evolved": bool(include_evolved),
                                           "flip_sum": FLIP_SUM, "criterion": "any complete round within the window"})
