"""Result type shared by all game simulators (minimal naming game, binary agreement, strategy game).

Time is counted in interactions; a population round is ``n_agents`` interactions, and round
``r`` (from 1) covers interactions ``(r - 1) N .. r N - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from normlab._display import html_card, legend_outside, load_result, new_axes, plain, plotting, save_result, short_repr

from ._common import STOP_NAMES
from .stats import clopper_pearson


@dataclass(frozen=True)
class GameResult:
    """Replicate runs of a naming-game model.

    Per-run arrays have length ``n_runs``; per-round arrays are ragged and stored flat:
    the rounds of run ``k`` are rows ``round_offsets[k]:round_offsets[k + 1]``.

    Attributes
    ----------
    model : str
        ``"minimal"``, ``"binary_agreement"`` or ``"strategy"``.
    n_agents : int
    n_names : int
        Size ``W`` of the name pool; ``0`` for the unlimited pool (invention of new words).
    names : tuple of str
        Labels of the names (``("0", "1", ...)`` unless given); empty for the unlimited pool.
    memory : int
        Memory length ``H`` (strategy game); ``0`` for the naming games.
    committed : numpy.ndarray of bool
        Mask of committed agents, shape ``(n_agents,)``.
    committed_name : int
        Index of the committed agents' name (``-1`` if none).
    stop : str
        Stop rule used.
    max_interactions : int
    n_interactions : numpy.ndarray of int64
        Interactions simulated per run.
    consensus_time : numpy.ndarray of float64
        First time (interactions) all agents agree on one name; NaN if never.
    winner : numpy.ndarray of int64
        Name index at consensus (``-1`` if no consensus; for the unlimited pool the word id).
    t_max, n_words_max, n_distinct_max : numpy.ndarray of int64
        Time of the peak of the total inventory ``N_w``, that peak, and the peak number of
        distinct names present in the population.
    success95_time, streak_time, flip_time : numpy.ndarray of float64
        First time that 95% of the last ``3N`` interactions succeeded; that ``3N`` consecutive
        interactions succeeded; that the committed name reached the flip threshold among
        uncommitted agents' productions over the last 3 rounds (checked at round ends). NaN if never.
    stop_reason : numpy.ndarray of str
        Which rule ended each run (``"max"`` when the cap was hit first).
    absorbing : numpy.ndarray of bool
        True when the run ended in an absorbing consensus, so later rounds are known exactly
        (all successes, everybody producing the winner) and are filled in by the round summaries.
    round_offsets : numpy.ndarray of int64
    round_count, round_success : numpy.ndarray of int32
        Interactions and successes in each recorded round.
    round_n_words : numpy.ndarray of int64
    round_n_distinct : numpy.ndarray of int32
        ``N_w`` and the number of distinct names at the end of each round.
    round_production, round_production_uncommitted : numpy.ndarray of int32
        Productions per name in each round, shape ``(total_rounds, n_names)`` (all agents /
        uncommitted agents only); zero columns for the unlimited pool.
    seed : numpy.random.SeedSequence
        Parent seed sequence; run ``k`` used ``seed.spawn`` child ``k``.
    params : dict
        Remaining settings (for provenance).
    interaction_success : numpy.ndarray of int64 or None
        Successes at each interaction index summed over the runs that simulated it (only when
        the simulator was asked for ``per_interaction=True``); see :meth:`success_by_interaction`.
    """

    model: str
    n_agents: int
    n_names: int
    names: tuple
    memory: int
    committed: np.ndarray
    committed_name: int
    stop: str
    max_interactions: int
    n_interactions: np.ndarray
    consensus_time: np.ndarray
    winner: np.ndarray
    t_max: np.ndarray
    n_words_max: np.ndarray
    n_distinct_max: np.ndarray
    success95_time: np.ndarray
    streak_time: np.ndarray
    flip_time: np.ndarray
    stop_reason: np.ndarray
    absorbing: np.ndarray
    round_offsets: np.ndarray
    round_count: np.ndarray
    round_success: np.ndarray
    round_n_words: np.ndarray
    round_n_distinct: np.ndarray
    round_production: np.ndarray
    round_production_uncommitted: np.ndarray
    seed: np.random.SeedSequence
    params: dict = field(default_factory=dict)
    interactions: object = None  # optional (players, answers) per run, see GameResult.to_log
    interaction_success: object = None  # optional successes summed over runs per interaction index

    # ------------------------------------------------------------------ basic views
    @property
    def n_runs(self) -> int:
        return len(self.n_interactions)

    def name_label(self, index: int) -> str | None:
        if index < 0:
            return None
        return self.names[index] if self.names else str(int(index))

    def to_frame(self) -> pd.DataFrame:
        """One row per run with its scalar observables.

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``n_interactions``, ``consensus_time``, ``winner`` (label or None),
            ``t_max``, ``n_words_max``, ``n_distinct_max``, ``success95_time``, ``streak_time``,
            ``flip_time``, ``stop_reason``.
        """
        import pandas as pd

        return pd.DataFrame(
            {
                "run": np.arange(self.n_runs),
                "n_interactions": self.n_interactions,
                "consensus_time": self.consensus_time,
                "winner": [self.name_label(w) for w in self.winner],
                "t_max": self.t_max,
                "n_words_max": self.n_words_max,
                "n_distinct_max": self.n_distinct_max,
                "success95_time": self.success95_time,
                "streak_time": self.streak_time,
                "flip_time": self.flip_time,
                "stop_reason": self.stop_reason,
            }
        )

    def rounds(self) -> pd.DataFrame:
        """Recorded per-round observables, one row per run and round (rounds from 1).

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``round``, ``interactions``, ``successes``, ``success_rate``,
            ``n_words``, ``n_distinct``.
        """
        import pandas as pd

        lengths = np.diff(self.round_offsets)
        run = np.repeat(np.arange(self.n_runs), lengths)
        rnd = np.concatenate([np.arange(1, m + 1) for m in lengths]) if len(lengths) else np.zeros(0, int)
        return pd.DataFrame(
            {
                "run": run,
                "round": rnd,
                "interactions": self.round_count,
                "successes": self.round_success,
                "success_rate": self.round_success / np.maximum(self.round_count, 1),
                "n_words": self.round_n_words,
                "n_distinct": self.round_n_distinct,
            }
        )

    # ------------------------------------------------------------------ filled per-run curves
    def _filled(self, values: np.ndarray, absorbed_value, n_rounds: int | None) -> np.ndarray:
        """Per-run x per-round matrix; rounds after an absorbing stop get ``absorbed_value``."""
        lengths = np.diff(self.round_offsets)
        R = int(lengths.max()) if n_rounds is None else int(n_rounds)
        shape = (self.n_runs, R) + values.shape[1:]
        out = np.full(shape, np.nan)
        for k in range(self.n_runs):
            a, b = self.round_offsets[k], self.round_offsets[k + 1]
            m = min(b - a, R)
            out[k, :m] = values[a:a + m]
            if self.absorbing[k] and m < R:
                out[k, m:] = absorbed_value(k)
        return out

    def success_matrix(self, n_rounds: int | None = None) -> np.ndarray:
        """Success rate per run (rows) and round (columns); absorbed rounds are filled with 1.

        The partially simulated last round of an absorbed run is completed with successes.
        Rounds a non-absorbed run did not reach are NaN.
        """
        count = self.round_count.astype(float)
        succ = self.round_success.astype(float)
        rate = succ / np.maximum(count, 1)
        if self.absorbing.any():
            last = self.round_offsets[1:] - 1
            for k in np.flatnonzero(self.absorbing):
                i = last[k]
                if i >= self.round_offsets[k]:
                    rate[i] = (succ[i] + (self.n_agents - count[i])) / self.n_agents
        return self._filled(rate, lambda k: 1.0, n_rounds)

    def success_rate(self, n_rounds: int | None = None) -> pd.DataFrame:
        """Mean success rate per population round over runs (Flint Ashery et al. 2025, Fig. 1A).

        Parameters
        ----------
        n_rounds : int, optional
            Number of rounds to report (default: the longest run).

        Returns
        -------
        pandas.DataFrame
            Columns ``round`` (from 1), ``success_rate`` (mean over runs with data), ``sem``,
            ``n_runs`` (runs contributing). Runs that stopped in an absorbing consensus
            contribute success 1 to later rounds.
        """
        import pandas as pd

        m = self.success_matrix(n_rounds)
        n = np.sum(~np.isnan(m), axis=0)
        import warnings

        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # rounds with fewer than two runs
            mean = np.nanmean(np.where(n > 0, m, 0.0), axis=0) if m.size else np.zeros(0)
            sd = np.nanstd(m, axis=0, ddof=1) if m.shape[0] > 1 else np.full(m.shape[1], np.nan)
        mean = np.where(n > 0, mean, np.nan)
        return pd.DataFrame(
            {"round": np.arange(1, m.shape[1] + 1), "success_rate": mean, "sem": sd / np.sqrt(np.maximum(n, 1)), "n_runs": n}
        )

    def success_by_interaction(self, n_interactions: int | None = None):
        """Mean success per interaction index over runs (Flint Ashery et al. 2025, Fig. 1A inset; ``run_NG.py``).

        Needs a result simulated with ``per_interaction=True``. Runs that stopped in an
        absorbing consensus count as successes at every later interaction; runs that stopped
        otherwise drop out of the later means.

        Parameters
        ----------
        n_interactions : int, optional
            Interactions to report (default: the longest run).

        Returns
        -------
        pandas.DataFrame
            Columns ``interaction`` (from 1), ``round`` (``interaction / n_agents``, a float),
            ``success_rate`` (mean over contributing runs), ``sem`` and ``n_runs``.
        """
        import pandas as pd

        if self.interaction_success is None:
            raise ValueError("this result holds no per-interaction successes; simulate with per_interaction=True")
        hs = np.asarray(self.interaction_success, dtype=np.int64)
        T = len(hs) if n_interactions is None else int(n_interactions)
        succ = np.zeros(T, np.int64)
        m = min(T, len(hs))
        succ[:m] = hs[:m]
        t = np.arange(T)
        ran = np.searchsorted(np.sort(self.n_interactions), t, side="right")  # runs with n_int <= t
        ended = np.sort(self.n_interactions[self.absorbing])
        absorbed = np.searchsorted(ended, t, side="right")  # absorbed runs already over at t
        n = (self.n_runs - ran) + absorbed
        succ = succ + absorbed
        with np.errstate(invalid="ignore", divide="ignore"):
            p = succ / n
            sem = np.sqrt(p * (1 - p) / np.maximum(n - 1, 1))
        return pd.DataFrame({"interaction": t + 1, "round": (t + 1) / self.n_agents, "success_rate": p,
                             "sem": sem, "n_runs": n})

    def production_share(self, *, uncommitted: bool = True, n_rounds: int | None = None) -> pd.DataFrame:
        """Production probability of each name per run and round (long format; Flint Ashery et al. 2025, Fig. 3A, S3).

        Parameters
        ----------
        uncommitted : bool, optional
            Count only uncommitted agents' productions (default), as in the flip criterion.
        n_rounds : int, optional
            Rounds to report (default: the longest run); absorbed runs are filled with the winner.

        Returns
        -------
        pandas.DataFrame
            Columns ``run``, ``round``, ``name``, ``share``.
        """
        import pandas as pd

        if self.n_names == 0:
            raise ValueError("production shares are recorded only for a finite name pool (n_words=W)")
        prod = (self.round_production_uncommitted if uncommitted else self.round_production).astype(float)
        tot = prod.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = prod / tot

        def absorbed(k):
            v = np.zeros(self.n_names)
            v[self.winner[k]] = 1.0
            return v

        m = self._filled(share, absorbed, n_rounds)
        R = m.shape[1]
        return pd.DataFrame(
            {
                "run": np.repeat(np.arange(self.n_runs), R * self.n_names),
                "round": np.tile(np.repeat(np.arange(1, R + 1), self.n_names), self.n_runs),
                "name": np.tile(np.asarray(self.names, dtype=object), self.n_runs * R),
                "share": m.reshape(-1),
            }
        )

    def consensus_counts(self) -> pd.DataFrame:
        """How many runs reached consensus on each name (``None`` = no consensus).

        Returns
        -------
        pandas.DataFrame
            Columns ``name``, ``runs``, ``probability``.
        """
        import pandas as pd

        labels = pd.Series([self.name_label(w) for w in self.winner], dtype=object)
        counts = labels.value_counts(dropna=False)
        # value_counts turns None into NaN; runs without a winner are reported as None
        names = [None if (n is None or (isinstance(n, float) and np.isnan(n))) else n for n in counts.index]
        return pd.DataFrame(
            {"name": pd.Series(names, dtype=object), "runs": counts.to_numpy(),
             "probability": counts.to_numpy() / self.n_runs}
        )

    def flip_times(self) -> np.ndarray:
        """Time (interactions) at which each run flipped to the committed name; NaN if it did not.

        The flip criterion is checked at the end of each round; a run that stopped earlier in a
        consensus on the committed name (absorbing, so the criterion would be met) counts as
        flipped at its consensus time.
        """
        if self.committed_name < 0:
            raise ValueError("flip times need committed agents (committed > 0)")
        ft = self.flip_time.copy()
        early = np.isnan(ft) & self.absorbing & (self.winner == self.committed_name)
        ft[early] = self.consensus_time[early]
        return ft

    def flipped(self, *, within_rounds: int | None = None) -> np.ndarray:
        """Whether each run flipped to the committed name (see :meth:`flip_times`).

        Parameters
        ----------
        within_rounds : int, optional
            Only count flips within this many population rounds.

        Returns
        -------
        numpy.ndarray of bool
        """
        ft = self.flip_times()
        ok = ~np.isnan(ft)
        if within_rounds is not None:
            ok &= ft <= within_rounds * self.n_agents
        return ok

    def to_log(self):
        """The decisions and runs tables (:class:`normlab.schema.GameLog`) of a recorded run.

        Only available when the simulator was called with ``record_decisions=True``.

        Returns
        -------
        normlab.schema.GameLog
        """
        import pandas as pd

        from normlab.schema import GameLog, end_consensus, rebuild_decisions

        if self.interactions is None:
            raise ValueError("this result holds no interaction log; run the simulator with record_decisions=True")
        players, answers, lengths = self.interactions
        names = np.asarray(self.names, dtype=object)
        committed_ids = np.flatnonzero(self.committed)
        initial = self.params.get("initial_memory")
        decs, runs = [], []
        for k in range(self.n_runs):
            T = int(lengths[k])
            ans = [(names[a], names[b]) for a, b in answers[k, :T]]
            decs.append(
                rebuild_decisions(
                    players[k, :T], ans, run=k, n_agents=self.n_agents, memory=max(self.memory, 1),
                    committed=committed_ids, initial_memory=initial,
                )
            )
            runs.append(
                {
                    "run": k, "model": f"theory:{self.model}", "kind": "simulation",
                    "names": ",".join(self.names), "n_agents": self.n_agents, "memory": self.memory,
                    "committed_count": int(self.committed.sum()),
                    "committed_name": self.name_label(self.committed_name),
                    "initial": self.params.get("initial_label", "empty"),
                    "n_interactions": T, "consensus": end_consensus(decs[-1], self.n_agents),
                    "source_file": None, "memory_consensus": self.name_label(self.winner[k]),
                    "consensus_rule": "end_window", "stop": self.stop, "stop_reason": str(self.stop_reason[k]),
                    "max_interactions": int(self.max_interactions),
                }
            )
        return GameLog(pd.concat(decs, ignore_index=True), pd.DataFrame(runs))

    def summary(self) -> dict:
        """A JSON-friendly summary (used by the CLI)."""
        ct = self.consensus_time
        reached = ~np.isnan(ct)
        out = {
            "model": self.model,
            "n_agents": self.n_agents,
            "n_names": self.n_names if self.n_names else "unlimited",
            "runs": self.n_runs,
            "committed": int(self.committed.sum()),
            "stop": self.stop,
            "consensus_fraction": float(reached.mean()),
            "mean_consensus_time": float(np.mean(ct[reached])) if reached.any() else None,
            "mean_consensus_rounds": float(np.mean(ct[reached]) / self.n_agents) if reached.any() else None,
            "mean_t_max": float(np.mean(self.t_max)),
            "mean_n_words_max": float(np.mean(self.n_words_max)),
            "mean_n_distinct_max": float(np.mean(self.n_distinct_max)),
            # runs without a consensus have no winner: key "none" (JSON keys cannot be null)
            "winners": {("none" if r["name"] is None else str(r["name"])): int(r["runs"])
                        for _, r in self.consensus_counts().iterrows()},
            "stop_reasons": {str(k): int(v) for k, v in zip(*np.unique(self.stop_reason, return_counts=True))},
        }
        if self.committed_name >= 0:
            out["flip_fraction"] = float(self.flipped().mean())
        if self.params.get("groups") is not None:  # a mixed population: agents per strategy
            out["strategies"] = list(self.params["strategy"])
            out["group_sizes"] = np.bincount(self.params["groups"], minlength=len(out["strategies"])).tolist()
        return plain(out)

    # ------------------------------------------------------------------ display
    def _label(self) -> str:
        lab = {"minimal": "minimal naming game", "binary_agreement": "binary agreement",
               "strategy": "strategy game"}.get(self.model, self.model)
        pool = f"W={self.n_names}" if self.n_names else "unlimited pool"
        strat = self.params.get("strategy")
        if isinstance(strat, list):  # a mixed population
            sizes = np.bincount(self.params["groups"], minlength=len(strat))
            strat = " + ".join(f"{n} x {k}" for k, n in zip(strat, sizes))
        extra = f", H={self.memory}, {strat}" if self.model == "strategy" else ""
        k = int(self.committed.sum())
        com = f", {k} committed to {self.name_label(self.committed_name)}" if k else ""
        return f"{lab}, N={self.n_agents}, {pool}{extra}{com}"

    def _winners(self, top: int = 4) -> str:
        cc = self.consensus_counts()
        parts = [f"{'none' if r['name'] is None else r['name']}: {int(r['runs'])}" for _, r in cc.head(top).iterrows()]
        return ", ".join(parts) + (f", +{len(cc) - top} more" if len(cc) > top else "")

    def __repr__(self) -> str:
        reached = ~np.isnan(self.consensus_time)
        parts = [self._label(), f"{self.n_runs} runs", f"consensus {reached.mean():.0%}"]
        if reached.any():
            parts.append(f"mean {np.mean(self.consensus_time[reached]) / self.n_agents:.3g} rounds")
        if self.n_names:
            parts.append(f"winners {{{self._winners()}}}")
        if self.committed_name >= 0:
            parts.append(f"flipped {self.flipped().mean():.0%}")
        parts.append(f"stop={self.stop}")
        return short_repr("GameResult", *parts)

    def _repr_html_(self) -> str:
        R, N = self.n_runs, self.n_agents
        rows = [("runs", R)]
        reached = ~np.isnan(self.consensus_time)
        lo, hi = clopper_pearson(int(reached.sum()), R)
        rows.append(("P(consensus)", float(reached.mean()), (float(lo), float(hi)), "Clopper-Pearson"))

        def mean_ci(x, what, note="mean over runs"):
            x = x[~np.isnan(x)] / N
            if x.size:
                h = 1.96 * x.std(ddof=1) / np.sqrt(x.size) if x.size > 1 else float("nan")
                rows.append((what, float(x.mean()), (float(x.mean() - h), float(x.mean() + h)), note))

        mean_ci(self.consensus_time, "rounds to consensus")
        mean_ci(self.success95_time, "rounds to 95% success (3N window)")
        if self.committed_name >= 0:
            f = self.flipped()
            lo, hi = clopper_pearson(int(f.sum()), R)
            rows.append((f"P(flip to {self.name_label(self.committed_name)})", float(f.mean()), (float(lo), float(hi)),
                         "Clopper-Pearson"))
            mean_ci(self.flip_times(), "rounds to flip")
        if not self.n_names:
            rows.append(("t_max / N^1.5", float(np.mean(self.t_max)) / N ** 1.5, None, "peak of the inventory"))
            rows.append(("N_w^max / N^1.5", float(np.mean(self.n_words_max)) / N ** 1.5, None))
        else:
            rows.append(("winners (runs)", self._winners(6)))
        stops = ", ".join(f"{k}: {v}" for k, v in zip(*np.unique(self.stop_reason, return_counts=True)))
        settings = {"stop": self.stop, "stop reasons": stops, "max interactions": self.max_interactions,
                    "names": ",".join(self.names) if self.names and len(self.names) <= 8 else None}
        return html_card("GameResult", rows, subtitle=self._label(), settings=settings,
                         note=".plot() draws the success curve (production shares with committed agents); "
                              ".to_frame(), .rounds() give the tables.")

    @plotting
    def plot(self, kind: str | None = None, *, ax=None, n_rounds: int | None = None):
        """The curve of the runs over population rounds, mean over runs with a 95% band. Runs that
        stopped in an absorbing consensus count as settled afterwards; runs that stopped otherwise
        drop out, and the legend then says how many runs the mean holds.

        Parameters
        ----------
        kind : {"success", "production", "inventory"}, optional
            ``success``: success rate per round (Flint Ashery et al. 2025, Fig. 1A); ``production``: share of each
            name among uncommitted agents' productions (Fig. 3A; the committed name highlighted);
            ``inventory``: total inventory ``N_w`` per round (unlimited pool). Default:
            ``production`` with committed agents, ``inventory`` for the unlimited pool, else
            ``success``.
        ax : matplotlib Axes, optional
        n_rounds : int, optional
            Rounds shown (default: the longest run).

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. 1A and 3A.
        """
        if kind is None:
            kind = "production" if self.committed_name >= 0 else ("inventory" if not self.n_names else "success")
        if kind not in ("success", "production", "inventory"):
            raise ValueError(f"kind must be 'success', 'production' or 'inventory'; got {kind!r}")
        ax = new_axes(ax, (7.2, 3.8) if kind == "production" else (5.5, 3.8))
        R = self.n_runs
        if kind == "success":
            sr = self.success_rate(n_rounds)
            lo = np.clip(sr["success_rate"] - 1.96 * sr["sem"].fillna(0), 0, 1)
            hi = np.clip(sr["success_rate"] + 1.96 * sr["sem"].fillna(0), 0, 1)
            ax.fill_between(sr["round"], lo, hi, alpha=0.25, lw=0, label="95% CI of the mean" if R > 1 else None)
            n = sr["n_runs"].to_numpy()
            # runs that stopped without an absorbing consensus drop out of the later rounds: say what is averaged
            lab = (f"mean of {R} runs" if n.size == 0 or n.min() == R else
                   f"mean of the runs still going ({int(n.max())} of {R} at first, {int(n[-1])} in the last round)")
            ax.plot(sr["round"], sr["success_rate"], marker="o", ms=3, label=lab)
            ax.set(xlabel="population round (N interactions)", ylabel="success rate", ylim=(-0.02, 1.02))
        elif kind == "production":
            if not self.n_names:
                raise ValueError("production shares need a finite name pool")
            ps = self.production_share(uncommitted=True, n_rounds=n_rounds)
            st = ps.groupby(["name", "round"], sort=False)["share"].agg(["mean", "std", "count"]).reset_index()
            # runs that stopped without an absorbing consensus drop out: show the mean only while
            # at least half of the runs contribute, and each run of the committed name thinly
            st = st[st["count"] >= max(1, R / 2)]
            final = st[st["round"] == st["round"].max()].set_index("name")["mean"]
            names = list(self.names)
            if len(names) > 6:
                names = list(final.sort_values(ascending=False).index[:6])
            cname = self.name_label(self.committed_name)
            for k, nm in enumerate(names):
                d = st[st["name"] == nm]
                h = 1.96 * d["std"].fillna(0) / np.sqrt(d["count"].clip(lower=1))
                lab = f"{nm} (committed), mean" if nm == cname else f"{nm}, mean"
                ax.fill_between(d["round"], (d["mean"] - h).clip(0, 1), (d["mean"] + h).clip(0, 1), alpha=0.2,
                                lw=0, color=f"C{k}")
                ax.plot(d["round"], d["mean"], lw=2.2 if nm == cname else 1.4, color=f"C{k}", label=lab)
                if nm == cname and R <= 50:
                    for run, g in ps[ps["name"] == nm].groupby("run"):
                        ax.plot(g["round"], g["share"], lw=0.6, alpha=0.35, color=f"C{k}",
                                label="single runs" if run == 0 else None)
            if self.committed_name >= 0:
                thr = float(self.params.get("flip_threshold", float("nan")))
                if np.isfinite(thr):
                    ax.axhline(thr, color="0.4", lw=0.8, ls="--", label=f"flip threshold ({thr:.3g})")
            ax.set(xlabel="population round (N interactions)", ylabel="share of uncommitted productions",
                   ylim=(-0.02, 1.02))
        else:
            rd = self.rounds()
            if n_rounds is not None:
                rd = rd[rd["round"] <= n_rounds]
            st = rd.groupby("round")["n_words"].agg(["mean", "std", "count"]).reset_index()
            h = 1.96 * st["std"].fillna(0) / np.sqrt(st["count"].clip(lower=1))
            ax.fill_between(st["round"], st["mean"] - h, st["mean"] + h, alpha=0.25, lw=0)
            ax.plot(st["round"], st["mean"], label=f"mean of runs still going ({R} runs)")
            ax.set(xlabel="population round (N interactions)", ylabel="total inventory $N_w$")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(self._label(), fontsize=10)
        if kind == "production":
            legend_outside(ax)
        else:  # success curves rise to the top left; the inventory falls to the bottom right
            ax.legend(fontsize=8, loc="lower right" if kind == "success" else "upper right")
        return ax

    # ------------------------------------------------------------------ save / load
    def save(self, path) -> "Path":
        """Write the result to the folder ``path`` (``result.json`` and Parquet tables); read it
        back with :meth:`load` or ``normlab.load``. Returns the folder."""
        import pandas as pd

        R = self.n_runs
        runs = pd.DataFrame({k: getattr(self, k) for k in _RUN_FIELDS})
        runs["stop_reason"] = runs["stop_reason"].astype(str)
        lengths = np.diff(self.round_offsets)
        rounds = pd.DataFrame({"run": np.repeat(np.arange(R), lengths),
                               **{k: getattr(self, k) for k in _ROUND_FIELDS}})
        W = self.round_production.shape[1] if self.round_production.ndim == 2 else 0
        for j in range(W):
            rounds[f"production_{j}"] = self.round_production[:, j]
            rounds[f"production_uncommitted_{j}"] = self.round_production_uncommitted[:, j]
        tables = {"runs": runs, "rounds": rounds}
        if self.interaction_success is not None:
            tables["interaction_success"] = pd.DataFrame({"successes": np.asarray(self.interaction_success)})
        if self.interactions is not None:
            pairs, answers, lens = self.interactions
            rows = [pd.DataFrame({"run": k, "t": np.arange(int(lens[k])), "speaker": pairs[k, :int(lens[k]), 0],
                                  "hearer": pairs[k, :int(lens[k]), 1], "answer_speaker": answers[k, :int(lens[k]), 0],
                                  "answer_hearer": answers[k, :int(lens[k]), 1]}) for k in range(R)]
            tables["interactions"] = pd.concat(rows, ignore_index=True)
            tables["interaction_lengths"] = pd.DataFrame({"length": np.asarray(lens)})
        params = dict(self.params)
        if params.get("initial_memory") is not None:
            params["initial_memory"] = [[int(a), [list(p) for p in m]] for a, m in params["initial_memory"].items()]
        seed = self.seed
        meta = {"model": self.model, "n_agents": self.n_agents, "n_names": self.n_names, "names": list(self.names),
                "memory": self.memory, "committed": np.flatnonzero(self.committed).tolist(),
                "committed_name": self.committed_name, "stop": self.stop, "max_interactions": self.max_interactions,
                "production_columns": W, "params": params,
                "interaction_shape": None if self.interactions is None else list(self.interactions[0].shape),
                "seed": None if seed is None else {"entropy": seed.entropy, "spawn_key": list(seed.spawn_key),
                                                   "pool_size": seed.pool_size,
                                                   "n_children_spawned": seed.n_children_spawned}}
        return save_result(path, type(self), meta, tables)

    @classmethod
    def load(cls, path) -> "GameResult":
        """Read a result written by :meth:`save`."""
        meta, t = load_result(path, cls)
        runs, rounds = t["runs"], t["rounds"]
        R = len(runs)
        lengths = np.bincount(rounds["run"].to_numpy(), minlength=R) if len(rounds) else np.zeros(R, np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        W = int(meta["production_columns"])
        prod = np.column_stack([rounds[f"production_{j}"].to_numpy() for j in range(W)]) if W else \
            np.zeros((len(rounds), 0), np.int32)
        produ = np.column_stack([rounds[f"production_uncommitted_{j}"].to_numpy() for j in range(W)]) if W else \
            np.zeros((len(rounds), 0), np.int32)
        mask = np.zeros(int(meta["n_agents"]), dtype=bool)
        committed = meta["committed"]
        if not isinstance(committed, list) or not all(isinstance(a, int) and not isinstance(a, bool)
                                                      and 0 <= a < mask.size for a in committed):
            raise ValueError(f"{str(path)!r}: committed must list agent indices in [0, {mask.size - 1}]")
        mask[committed] = True
        params = dict(meta["params"])
        if params.get("initial_memory") is not None:
            params["initial_memory"] = {int(a): [tuple(p) for p in m] for a, m in params["initial_memory"]}
        s = meta["seed"]
        seed = None if s is None else np.random.SeedSequence(s["entropy"], spawn_key=tuple(s["spawn_key"]),
                                                               pool_size=s["pool_size"],
                                                               n_children_spawned=s["n_children_spawned"])
        interactions = None
        if "interactions" in t:
            shape = tuple(meta["interaction_shape"])
            it, lens = t["interactions"], t["interaction_lengths"]["length"].to_numpy()
            pairs = np.zeros(shape, dtype=it["speaker"].dtype)
            answers = np.zeros(shape, dtype=it["answer_speaker"].dtype)
            r, tt = it["run"].to_numpy(), it["t"].to_numpy()
            pairs[r, tt, 0], pairs[r, tt, 1] = it["speaker"].to_numpy(), it["hearer"].to_numpy()
            answers[r, tt, 0], answers[r, tt, 1] = it["answer_speaker"].to_numpy(), it["answer_hearer"].to_numpy()
            interactions = (pairs, answers, lens)
        hits = t["interaction_success"]["successes"].to_numpy() if "interaction_success" in t else None
        return cls(
            model=meta["model"], n_agents=int(meta["n_agents"]), n_names=int(meta["n_names"]),
            names=tuple(meta["names"]), memory=int(meta["memory"]), committed=mask,
            committed_name=int(meta["committed_name"]), stop=meta["stop"],
            max_interactions=int(meta["max_interactions"]),
            **{k: runs[k].to_numpy() for k in _RUN_FIELDS if k != "stop_reason"},
            stop_reason=runs["stop_reason"].to_numpy().astype(object),
            round_offsets=offsets, **{k: rounds[k].to_numpy() for k in _ROUND_FIELDS},
            round_production=prod, round_production_uncommitted=produ, seed=seed, params=params,
            interactions=interactions, interaction_success=hits,
        )

    @classmethod
    def _contract_example(cls) -> "GameResult":
        """Two runs of a four-agent game on two names (one reaches a consensus on ``A`` in two
        rounds, one stops at the cap), from literal numbers (``tests/umbrella/test_contracts.py``)."""
        nan = float("nan")
        i8, i4 = np.int64, np.int32
        prod = np.array([[5, 3], [8, 0], [4, 4], [5, 3], [3, 5]], i4)
        return cls(model="minimal", n_agents=4, n_names=2, names=("A", "B"), memory=0, committed=np.zeros(4, bool),
                   committed_name=-1, stop="consensus", max_interactions=12, n_interactions=np.array([8, 12], i8),
                   consensus_time=np.array([8.0, nan]), winner=np.array([0, -1], i8), t_max=np.array([2, 3], i8),
                   n_words_max=np.array([6, 7], i8), n_distinct_max=np.array([2, 2], i8),
                   success95_time=np.array([nan, nan]), streak_time=np.array([nan, nan]), flip_time=np.array([nan, nan]),
                   stop_reason=np.array(["consensus", "max"]), absorbing=np.array([True, False]),
                   round_offsets=np.array([0, 2, 5], i8), round_count=np.full(5, 4, i4),
                   round_success=np.array([2, 4, 1, 2, 3], i4), round_n_words=np.array([6, 4, 7, 6, 6], i8),
                   round_n_distinct=np.array([2, 1, 2, 2, 2], i4), round_production=prod,
                   round_production_uncommitted=prod.copy(), seed=np.random.SeedSequence(0))


_RUN_FIELDS = ("n_interactions", "consensus_time", "winner", "t_max", "n_words_max", "n_distinct_max",
               "success95_time", "streak_time", "flip_time", "stop_reason", "absorbing")
_ROUND_FIELDS = ("round_count", "round_success", "round_n_words", "round_n_distinct")


def stop_reason_labels(codes: np.ndarray) -> np.ndarray:
    codes = np.asarray(codes, np.int64)
    table = np.array([STOP_NAMES.get(c) for c in range(max(STOP_NAMES) + 1)], dtype=object)
    return table[codes] if codes.size else np.array([], dtype=object)
