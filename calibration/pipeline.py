"""One call from game logs to predictions: select runs, fit, predict, compare with what was observed.

:func:`calibrate` is what ``normlab calibrate`` runs. The protocol is the one of the validation
in the issue: fit on the runs of one kind (default: the baseline/convergence runs), then predict
the collective bias, the convergence speed and the critical masses, and -- when the same log also
holds them -- put the observed values of the *other* experiments next to the predictions
(never used for fitting unless ``fit_on`` says so).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1, Fig. 2B,
Fig. 3, Tables S2-S3, Methods.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import (elapsed_bar, fmt, fmt_interval, html_card, load_result, new_figure, plotting,
                              save_result, short_repr)
from normlab._rng import seeded, spawn
from normlab._validate import check_int
from normlab.llm_runs.probes import check_table_size
from normlab.llm_runs.published.ainorms import ainorms_archives_log, first_round_reaching, mean_success_by_round  # noqa: F401
from normlab.llm_runs.published.ainorms_archive import ainorms_file_patterns, find_ainorms
from normlab.schema import GameLog
from normlab.theory.criteria import published_max_round

from .evaluate.asymmetry import strategy_asymmetry
from .evaluate.observed_critical_mass import EmpiricalCriticalMass, empirical_critical_mass
from .evaluate.scores import score
from .fit.inputs import FIT_ON, _check_names, counts_from_log, select_runs
from .fit.posterior import StrategyFit
from .fit.registry import DEFAULT, fit_family, fit_strategy
from .fit.run_effects import fit_run_effects
from .prediction.api import Prediction, check_predicted_agents, predict_settings, run_prediction
from .prediction.experiment import experiment_designs
from .prediction.sensitivity import StateSensitivity, state_sensitivity
from .prediction.summary import calibration_summary

#: ``elapsed_bar`` (:mod:`normlab._display`) and the archive locators ``find_ainorms``, ``ainorms_file_patterns``,
#: ``ainorms_archives_log`` (:mod:`normlab.llm_runs.published`) are re-exported here, where they used to live.
__all__ = ["Calibration", "calibrate", "observed_summary", "ainorms_file_patterns", "find_ainorms", "streak_rounds"]


def streak_rounds(log: GameLog, streak_factor: int = 3) -> float:
    """Mean over runs of the time (rounds) at which ``streak_factor * N`` consecutive successes
    were first completed (runs that never complete one are left out; NaN if none does).

    Parameters
    ----------
    log : normlab.schema.GameLog
    streak_factor : int, optional

    Returns
    -------
    float
    """
    inter = log.decisions.drop_duplicates(["run", "t"]).sort_values(["run", "t"])
    N = dict(zip(log.runs["run"], log.runs["n_agents"]))
    out = []
    for r, g in inter.groupby("run"):
        L = streak_factor * int(N[r])
        s = g["success"].to_numpy()
        run = 0
        for i, ok in enumerate(s):
            run = run + 1 if ok else 0
            if run >= L:
                out.append((i + 1) / N[r])
                break
    return float(np.mean(out)) if out else float("nan")


def observed_summary(log: GameLog, *, names, memory: int, n_agents: int, within_rounds: int = 30,
                     max_round: int | None = None, model=None, rng=None) -> dict:
    """What the log shows at (names, H, N): consensus counts and rounds to 0.95 of the baseline
    runs, and the empirical critical masses of the committed runs (None where absent).

    Returns
    -------
    dict
        ``baseline`` (``runs``, ``consensus`` name -> runs, ``p_consensus``, ``rounds_to_95``,
        ``consensus_rounds`` (mean run length in rounds: the published runs stop at their
        convergence streak), ``streak_rounds`` (mean time, in rounds, at which ``3N`` consecutive
        successes were first completed -- the theory's stop rule, comparable even where the
        published runs used a longer streak), ``n_agents`` -- the predicted N when such baselines exist, else
        the most common N) and ``critical_mass`` (``overturn_<X>`` -> ``published`` and
        ``per_run``, each ``{estimate, low, high, p_not_reached}`` as in the predictions --
        ``published`` is the smallest tested count meeting the ensemble rule behind Table S3 of
        Flint Ashery et al. (2025) -- and ``first_count``, ``first_all``, ``c50``, ``c50_low``, ``c50_high``,
        ``end_of_run``, ``counts``, ``n_runs``; see
        :func:`~normlab.calibration.empirical_critical_mass`).
    """
    names = _check_names(names)
    out = {"baseline": None, "critical_mass": None}
    try:
        b = select_runs(log, names=names, memory=memory, model=model, fit_on="baseline")
    except ValueError:
        b = None
    if b is not None:
        # at the predicted N if such baselines exist, else at the most common N (stated in the output)
        nb = n_agents if (b.runs["n_agents"] == n_agents).any() else int(b.runs["n_agents"].value_counts().index[0])
        b = select_runs(b, n_agents=nb, fit_on="baseline")
        cons = b.runs["consensus"].astype(object).where(b.runs["consensus"].notna(), "none").value_counts()
        curve = mean_success_by_round(b)
        out["baseline"] = {
            "n_agents": nb,
            "runs": int(len(b.runs)),
            "consensus": {str(k): int(v) for k, v in cons.items()},
            "p_consensus": {nm: float(cons.get(nm, 0) / len(b.runs)) for nm in names},
            "rounds_to_95": first_round_reaching(curve, 0.95),
            "consensus_rounds": float((b.runs["n_interactions"] / nb).mean()),
            "streak_rounds": streak_rounds(b),
        }
    try:
        sw = select_runs(log, names=names, memory=memory, n_agents=n_agents, model=model, fit_on=["swap", "evolved"])
    except ValueError:
        sw = None
    if sw is not None:
        e = empirical_critical_mass(sw, within_rounds=within_rounds, max_round=max_round, n_boot=500, rng=rng)
        cm = {}

        def fin(v):
            return None if isinstance(v, float) and not np.isfinite(v) else v

        for _, r in e.estimates.iterrows():
            key = f"overturn_{r['majority']}" if len(names) == 2 else f"overturn_{r['majority']}_by_{r['challenger']}"
            cm[key] = {
                # the same readings as the predictions: one observed experiment, so no interval
                # for the published rule; per_run: the logistic 50% point with its bootstrap
                # interval (the first count with >= 50% flips where the curve is separated)
                "published": {"estimate": fin(r["published"]), "low": None, "high": None,
                              "p_not_reached": float(np.isinf(r["published"])), "max_round": int(r["max_round"])},
                "per_run": {"estimate": fin(r["c50"]) if np.isfinite(r["c50"]) else fin(r["first_count"]),
                            "low": fin(r["c50_low"]), "high": fin(r["c50_high"]),
                            "p_not_reached": float(np.isinf(r["first_count"])), "first_count": fin(r["first_count"]),
                            "within_rounds": int(within_rounds)},
                **{k: fin(r[k]) for k in ("first_count", "first_all", "c50", "c50_low", "c50_high", "end_of_run",
                                          "counts", "n_runs")},
            }
            cm[key]["censored_runs"] = int(e.curves[(e.curves["majority"] == r["majority"])]["n_censored"].sum())
        out["critical_mass"] = cm
        out["empirical"] = e
    return out


@dataclass(frozen=True)
class Calibration:
    """Fit, prediction and observed values of one calibration.

    Attributes
    ----------
    fit : StrategyFit
    prediction : Prediction
    observed : dict
        See :func:`observed_summary` (without the ``empirical`` object).
    empirical : EmpiricalCriticalMass or None
        Empirical flip curves of the committed runs in the log at (names, H, N).
    settings : dict
    scores : Scores or None
        Scores of the prediction on the runs at (names, H, N) that the fit did not use
        (:func:`normlab.calibration.score`); None when there are none.
    sensitivity : dict
        ``overturn_<X>`` (at the predicted critical mass) and ``consensus`` (P(a run ends on the
        predicted winner)) -> :class:`~normlab.calibration.StateSensitivity`: the memory states
        that decide each prediction and how often the data saw them.
    """

    fit: StrategyFit
    prediction: object
    observed: dict = field(default_factory=dict)
    empirical: object = None
    settings: dict = field(default_factory=dict)
    scores: object = None
    sensitivity: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """The JSON object printed by ``normlab calibrate --json``."""
        return calibration_summary(self.fit, self.prediction, self.settings, observed=self.observed,
                                   sensitivity=self.sensitivity, scores=self.scores)

    def to_frame(self) -> pd.DataFrame:
        """Predicted vs observed, long format: ``quantity``, ``key``, ``predicted``, ``low``,
        ``high``, ``observed``."""
        pf = self.prediction.to_frame()
        obs = {}
        b = self.observed.get("baseline") or {}
        if b and b.get("n_agents") != self.prediction.n_agents:
            b = {}  # observed at another population size: not comparable
        for nm, p in (b.get("p_consensus") or {}).items():
            obs[("p_consensus", nm)] = p
        if b:
            obs[("rounds_to_95", "")] = b.get("rounds_to_95")
            obs[("consensus_rounds", "")] = b.get("streak_rounds")
        for k, v in (self.observed.get("critical_mass") or {}).items():
            obs[("critical_mass", k)] = (v.get("published") or {}).get("estimate")
            obs[("critical_mass_per_run", k)] = (v.get("per_run") or {}).get("first_count")
        pf["observed"] = [obs.get((q, k)) for q, k in zip(pf["quantity"], pf["key"])]
        return pf.rename(columns={"estimate": "predicted"})

    # ------------------------------------------------------------------ display, save / load
    def __repr__(self) -> str:
        p = self.prediction
        parts = [str(self.settings.get("llm") or "?"), f"names {','.join(p.names)}", f"H={p.memory}",
                 f"N={p.n_agents}", f"{self.fit.kind} fit on {self.settings.get('fit_on')} runs"]
        tf = self.to_frame()
        for _, r in tf[tf["quantity"].isin(["p_consensus", "critical_mass"])].iterrows():
            if r["quantity"] == "p_consensus" and r["key"] == "none":
                continue
            lab = f"P({r['key']})" if r["quantity"] == "p_consensus" else f"critical mass {r['key']}"
            obs = "" if r["observed"] is None or (isinstance(r["observed"], float) and np.isnan(r["observed"])) \
                else f" (observed {fmt(r['observed'])})"
            parts.append(f"{lab} {fmt(r['predicted'])} {fmt_interval(r['low'], r['high'])}{obs}")
        return short_repr("Calibration", *parts)

    def _repr_html_(self) -> str:
        tf = self.to_frame()
        rows = []
        for _, r in tf.iterrows():
            obs = r["observed"]
            has = obs is not None and not (isinstance(obs, float) and np.isnan(obs))
            rows.append((f"{r['quantity']} {r['key']}".strip(), r["predicted"], (r["low"], r["high"]),
                         f"observed {fmt(obs)}" if has else ""))
        fs = self.fit.summary()
        d = fs["diagnostics"]
        p = self.prediction
        return html_card("Calibration", rows, level=p.level,
                         subtitle=f"{self.settings.get('llm')}: {self.fit.kind} fit on {self.settings.get('fit_on')} "
                                  f"runs, names {','.join(p.names)}, H = {p.memory}, predicted at N = {p.n_agents}",
                         settings={"decisions fitted": fs["decisions"],
                                   "states seen": f"{fs['states_observed']} of {fs['states_total']}",
                                   "R-hat max": d.get("r_hat_max"), "divergences": d.get("divergences"),
                                   "posterior draws": p.n_draws, "seconds": self.settings.get("seconds")},
                         note="predicted: median and credible interval over posterior draws; observed: the same "
                              "quantity in the log. .plot() draws predicted vs observed; .fit, .prediction hold "
                              "the parts; .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "overview", *, axes=None):
        """Predicted against observed.

        Parameters
        ----------
        kind : {"overview", "states", "strategy", "ppc"}, optional
            ``overview``: a figure with the predicted success curve (observed rounds to 95%
            success marked) and the predicted flip curves with the observed committed-minority
            runs; ``states``: one panel per prediction, the memory states that decide it
            (:meth:`StateSensitivity.plot`); ``strategy``: the fitted heat map; ``ppc``: the
            posterior predictive check of the fit (:meth:`StrategyFit.plot`).
        axes : sequence of two matplotlib Axes, optional
            Where to draw the overview.

        Returns
        -------
        matplotlib.figure.Figure or matplotlib.axes.Axes
            The overview figure; the Axes of ``strategy`` and ``ppc``.

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. 1A and 3B, Table S3.
        """
        if kind in ("strategy", "ppc"):
            return self.fit.plot("heatmap" if kind == "strategy" else "ppc")
        if kind == "states":
            if not self.sensitivity:
                raise ValueError("this calibration has no state sensitivities (calibrate(..., sensitivity=True))")
            fig, axs = new_figure(len(self.sensitivity), 1, figsize=(8.6, 4.2 * len(self.sensitivity)), axes=axes)
            for ax, (k, v) in zip(np.ravel(axs), self.sensitivity.items()):
                v.plot(k=12, ax=ax)
            return fig
        if kind != "overview":
            raise ValueError(f"kind must be 'overview', 'states', 'strategy' or 'ppc'; got {kind!r}")
        p = self.prediction
        panels = (["success"] if not p.success.empty else []) + ["flip"]
        fig, axs = new_figure(1, len(panels), figsize=(5.0 * len(panels) + 2.6, 4.4), axes=axes,
                              width_ratios=[1, 1.5][-len(panels):] if axes is None else None)
        axs = list(np.ravel(axs))
        for ax, kind_ in zip(axs, panels):
            p.plot(kind_, ax=ax, observed=self.empirical if kind_ == "flip" else None)
        if "success" in panels:
            b = (self.observed or {}).get("baseline") or {}
            r95 = b.get("rounds_to_95")
            if r95 is not None and b.get("n_agents") == p.n_agents and np.isfinite(r95):
                axs[0].axvline(r95, color="C3", lw=1.2, ls="--", label=f"observed: {fmt(r95)} rounds to 95%")
                axs[0].legend(fontsize=8, loc="lower right")
        fig.suptitle(f"{self.settings.get('llm')}: predicted from {self.settings.get('fit_on')} runs "
                     f"vs observed (N = {p.n_agents}, H = {p.memory})", fontsize=10)
        return fig

    def save(self, path) -> "Path":
        """Write the calibration to the folder ``path``: ``fit/``, ``prediction/`` and
        ``empirical/`` sub-folders and the observed values in ``result.json``; read it back with
        :meth:`load` or ``normlab.load``."""
        children = {"fit": self.fit, "prediction": self.prediction}
        if self.empirical is not None:
            children["empirical"] = self.empirical
        for k, v in self.sensitivity.items():
            children[f"states_{k}"] = v
        return save_result(path, type(self), {"observed": self.observed, "settings": self.settings}, children=children)

    @classmethod
    def load(cls, path) -> "Calibration":
        """Read a calibration written by :meth:`save`."""
        meta, _ = load_result(path, cls)
        path = Path(path)
        emp = EmpiricalCriticalMass.load(path / "empirical") if "empirical" in meta["children"] else None
        sens = {c[len("states_"):]: StateSensitivity.load(path / c) for c in meta["children"] if c.startswith("states_")}
        return cls(fit=StrategyFit.load(path / "fit"), prediction=Prediction.load(path / "prediction"),
                   observed=meta["observed"], empirical=emp, settings=meta["settings"], sensitivity=sens)

    @classmethod
    def _contract_example(cls) -> "Calibration":
        """:meth:`StrategyFit._contract_example` and :meth:`Prediction._contract_example` with the observed
        values of four-agent baselines and :meth:`EmpiricalCriticalMass._contract_example`'s runs (literal;
        ``tests/umbrella/test_contracts.py``)."""
        observed = {"baseline": {"n_agents": 4, "p_consensus": {"A": 0.6, "B": 0.4}, "rounds_to_95": 5.0,
                                 "streak_rounds": 7.0}}
        return cls(fit=StrategyFit._contract_example(), prediction=Prediction._contract_example(), observed=observed,
                   empirical=EmpiricalCriticalMass._contract_example(),
                   settings={"llm": "toy", "source": "toy runs", "fit_on": "baseline", "seconds": 1.0})


def _size_from_log(value, column: str, what: str, flag: str) -> int:
    """A size read from a log's runs table (the most common value of ``column``): a whole number
    >= 1, else one line naming the column (a damaged or hand-made ``runs.parquet``)."""
    try:
        ok = float(value) == int(value) and int(value) >= 1
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"the log's runs table gives {column} = {value!r}, not a {what}; check runs.parquet or give "
                         f"{flag}")
    return int(value)


def calibrate(log: GameLog, *, names, memory: int | None = None, n_agents: int | None = None,
              fit_on="baseline", model: str = DEFAULT, llm=None, n_draws: int = 200,
              within_rounds: int = 30, max_round: int | None = None, fit_kwargs: dict | None = None, predict_kwargs: dict | None = None,
              compare_observed: bool = True, source: str | None = None, run_effects: bool = True,
              design: str = "data", sensitivity: bool = True, fit: StrategyFit | None = None, rng=None,
              progress: bool = False) -> Calibration:
    """Fit a strategy on some runs of a log and predict the population's behaviour.

    Parameters
    ----------
    log : normlab.schema.GameLog
        E.g. :func:`normlab.llm_runs.published.ainorms.load_ainorms` output or normlab LLM runs.
    names : sequence of str
        The name pool (runs with the same names in any order).
    memory : int, optional
        Memory length ``H``; default: the memory length with the most ``fit_on`` runs of the pool.
    n_agents : int, optional
        Population size of the predictions (default: the most common N of the fitted runs), at
        most :data:`~normlab.calibration.prediction.MAX_PREDICTED_AGENTS` (checked before any work,
        like a memory length or a size read from the log). The strategy is fitted on the runs of
        every N.
    fit_on : {"baseline", "evolved", "swap", "all"}, optional
    model : str, optional
        A registered fit kind (:func:`normlab.calibration.fit.registry.fit_kind_names`; default
        ``"hierarchical"``, :data:`normlab.calibration.fit.registry.DEFAULT`).
    llm : str, optional
        Value of the ``model`` run column to keep (required when the log holds several LLMs
        with runs of this pool).
    n_draws : int, optional
        Posterior draws used by the prediction.
    within_rounds : int, optional
        Window of the ``per_run`` flip reading (30 rounds, Flint Ashery et al. 2025, Methods).
    max_round : int, optional
        Window of the ``published`` rule (default the authors': 30, 21 for Llama-3 at N = 48).
    fit_kwargs, predict_kwargs : dict, optional
        Passed to the fitter and to :func:`normlab.calibration.predict`.
    compare_observed : bool, optional
        Add the observed values of the log (baseline outcomes, empirical critical masses) and,
        when the log holds runs at (names, H, N) that the fit did not use (for the published
        archives fitted on baselines: the committed-minority runs), their scores
        (:func:`normlab.calibration.score`: Brier and log scores, interval coverage).
    source : str, optional
        Label of the data source (stored in the settings).
    run_effects : bool, optional
        Estimate how much the strategy varies between the fitted runs (two names, at least three
        runs), store it in the fit's ``meta["run_effects"]`` and let every simulated run play its
        own effect (default True; False: identical runs, the behaviour before run effects). The
        NUTS fit kinds sample the effects with the table (a joint fit,
        :class:`~normlab.calibration.RunEffects` kind ``"joint"``); the others estimate them beside
        it (:func:`~normlab.calibration.fit_run_effects`, kind ``"marginal"``).
    fit : StrategyFit, optional
        A fit of these runs made before (e.g. a shipped table, or ``calibrate(...).fit``): used
        instead of fitting again (it must have the pool and memory asked for).
    sensitivity : bool, optional
        Find the memory states that decide each critical mass (at its predicted count) and the
        convergence outcome, with how often the data saw them
        (:func:`~normlab.calibration.state_sensitivity`; two names; about 10-30 s each).
    design : {"data", "paper"}, optional
        ``"data"`` (default): where the log holds committed-minority runs at (names, H, N), each
        direction's critical mass is also predicted on *their* design (tested counts, runs per
        count, run lengths, window: :class:`~normlab.calibration.ExperimentDesign`) and that is
        the headline the observed value is compared with; ``"paper"``: the paper's design only.
    rng : optional
    progress : bool, optional
        Show the sampler's progress bar and an elapsed-time bar while the prediction runs.

    Returns
    -------
    Calibration

    Raises
    ------
    ValueError
        Several LLMs without ``llm``, no matching run, a memory length mismatch, or bad settings.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables S2-S3.
    """
    t0 = time.perf_counter()
    names = _check_names(names)
    family = fit_family(model, "model")
    if isinstance(fit_on, str) and fit_on not in FIT_ON:
        raise ValueError(f"fit_on must be one of {sorted(FIT_ON)}; got {fit_on!r}")
    if family.two_names_only and len(names) != 2:
        raise ValueError(f"model {model!r} supports two names only; use model='empirical' for {len(names)} names")
    if n_agents is not None:
        n_agents = check_predicted_agents(n_agents)
    if memory is not None:
        check_table_size(len(names), check_int(memory, "memory", low=1))
    sel = select_runs(log, names=names, memory=memory, model=llm, fit_on=fit_on)
    llms = sorted(map(str, sel.runs["model"].unique()))
    if len(llms) > 1:
        raise ValueError(f"the log holds runs of several LLMs for names {names}: {llms}; choose one with llm= (--llm)")
    if memory is None:
        mem_counts = sel.runs["memory"].value_counts()
        memory = _size_from_log(mem_counts.index[0], "memory", "memory length H", "--memory")
        check_table_size(len(names), memory)
        sel = select_runs(sel, memory=memory, fit_on=fit_on)
    if n_agents is None:
        n_agents = _size_from_log(sel.runs["n_agents"].value_counts().index[0], "n_agents", "population size N",
                                  "--n-agents")
        try:
            n_agents = check_predicted_agents(n_agents, "the population size of the log's runs")
        except ValueError as exc:
            raise ValueError(f"{exc}; give n_agents= (--n-agents) to predict another size") from None
    counts = counts_from_log(sel, names=names, memory=memory)
    ss, rng_record = seeded(rng)
    seeds = ss.spawn(5)
    meta = {"llm": llms[0], "fit_on": fit_on if isinstance(fit_on, str) else list(fit_on), "data_source": source}
    fk = dict(fit_kwargs or {})
    if progress and family.uses_nuts:
        fk.setdefault("progress", True)
    if family.uses_nuts:  # the run effects in the model (a joint fit), or the pooled model without them
        fk.setdefault("run_effects", bool(run_effects) and len(names) == 2)
    if design not in ("data", "paper"):
        raise ValueError(f"design must be 'data' or 'paper'; got {design!r}")
    if fit is None:
        fit = fit_strategy(counts, model, rng=seeds[0], meta=meta, **fk)
    elif not isinstance(fit, StrategyFit) or set(fit.names) != set(names) or fit.memory != memory:
        raise ValueError(f"fit must be a StrategyFit of names {names} at memory {memory}")
    if run_effects and len(names) == 2 and not fit.meta.get("run_effects"):
        fit = replace(fit, meta={**fit.meta, "run_effects": fit_run_effects(counts, fit).to_dict()})
    mxr = published_max_round(llms[0], int(n_agents)) if max_round is None else max_round
    designs = experiment_designs(log, names=names, memory=memory, n_agents=int(n_agents), llm=llms[0], window=mxr) \
        if design == "data" and len(names) == 2 else []
    pk = dict(n_draws=n_draws, within_rounds=within_rounds, max_round=mxr, design=designs or None)
    pk.update(predict_kwargs or {})
    with elapsed_bar(f"predicting ({pk['n_draws']} posterior draws)", enabled=progress):
        settings, run = predict_settings(n_agents=int(n_agents), rng=seeds[1], **pk)
        pred = run_prediction(fit, settings, **run)
    observed, emp, scores = {}, None, None
    if compare_observed:
        observed = observed_summary(log, names=names, memory=memory, n_agents=int(n_agents),
                                    within_rounds=within_rounds, max_round=max_round, model=llms[0],
                                    rng=seeds[2])
        emp = observed.pop("empirical", None)
        try:  # score on the runs the fit did not use, if the log holds any at (names, H, N)
            scores = score(pred, log, exclude=sel.runs["run"], llm=llms[0], rng=seeds[3])
        except ValueError:
            scores = None
    sens = _sensitivities(fit, pred, n_agents=int(n_agents), window=mxr, rng=seeds[4]) \
        if sensitivity and len(names) == 2 else {}
    asym = None
    if len(names) == 2:
        a = strategy_asymmetry(fit, n_draws=200, rng=0).summary
        asym = {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in a.items()}
    settings = {"llm": llms[0], "source": source, "fit_on": meta["fit_on"], "asymmetry": asym, "rng": rng_record,
                "seconds": round(time.perf_counter() - t0, 2)}
    return Calibration(fit=fit, prediction=pred, observed=observed, empirical=emp, settings=settings, scores=scores,
                       sensitivity=sens)


def _sensitivities(fit, pred, *, n_agents: int, window: int, rng) -> dict:
    """The states deciding each critical mass (at its predicted count, the experiment's reading
    where there is one) and the convergence outcome (P(a run ends on the predicted winner))."""
    out = {}
    cm = pred.critical_mass()
    seeds = spawn(rng, len(cm) + 1)
    for (key, v), ss in zip(cm.items(), seeds):
        c = v.get("estimate")
        if c is None or not np.isfinite(c):
            continue
        out[key] = state_sensitivity(fit, n_agents=n_agents, majority=v["majority"], committed=int(c), window=window,
                                     rng=ss)
    pc = pred.p_consensus()
    if pc:
        win = max(pc, key=pc.get)
        out["consensus"] = state_sensitivity(fit, n_agents=n_agents, majority=None, target=win, window=window,
                                             n_runs=1000, rng=seeds[-1])
    return out
