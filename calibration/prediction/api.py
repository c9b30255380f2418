"""From posterior draws of a strategy table to population-level predictions with uncertainty.

Every posterior draw of the table is played in :func:`normlab.theory.strategy_game`, so each
prediction below is a distribution over draws (parameter uncertainty, including the prior
uncertainty of memory states the training runs never visited) mixed with the finite-run Monte
Carlo noise of the simulations -- the same noise the LLM experiments have.

What is predicted per draw
--------------------------
Collective bias and speed (runs from empty memories, Flint Ashery et al. 2025, Fig. 2B and Fig. 1)
    ``n_runs_consensus`` runs with ``stop="streak"`` -- the published convergence runs stop after
    ``3N`` consecutive successes -- capped at ``max_rounds`` population rounds. A run that stops
    has converged; its **winner** is the name produced most often in its last three recorded
    rounds (all of them successes, so in practice the only name played). A run that hits the cap
    has no winner (``"none"``). ``p_consensus[name]`` is the fraction of runs won by ``name``.
    The **success curve** is the mean success rate per population round (round ``r`` covers
    interactions ``(r - 1) N .. r N - 1``; a stopped run counts as success 1 afterwards, as in the
    published figures), and **rounds to 0.95** the first round where it reaches 0.95.
    **Time to consensus** is the mean stop time in rounds.
Critical mass (Flint Ashery et al. 2025, Methods "Committed Minorities", Fig. 3, Table S3)
    For each direction -- a consensus on ``X`` (every uncommitted memory holds ``H`` successful
    plays of ``X``) attacked by ``c`` agents committed to ``Y`` -- ``max(n_runs_flip,
    design_runs)`` runs of at most ``max(within_rounds, max_round)`` population rounds for every
    ``c`` in ``0 .. N - 1`` (with ``c = 0`` the challenger is tracked without committed agents, so
    a consensus that collapses on its own has critical mass 0). Two readings per draw (see
    :mod:`normlab.theory.criteria`): **published** -- the first ``design_runs`` (10) runs, cut at
    ``max_round`` (the authors' window), go through the paper's ensemble rule, and the draw's
    critical mass is the smallest count that succeeds, so the interval over draws carries both
    parameter uncertainty and the noise of a 10-run experiment, like Table S3 itself; **per_run**
    -- the smallest ``c`` where at least ``flip_level`` (0.5) of ``n_runs_flip`` runs flip
    (first passage within ``within_rounds``). ``inf``: not reached. Every count is simulated;
    ``assume_monotone=True`` (off by default) stops a sweep after two consecutive counts where
    every run flipped and the published rule was met and counts larger minorities as flipping
    every run -- faster, and wrong for the flip frequencies wherever runs differ (run effects: a
    count whose 16 runs all flipped says little about P(flip) = 0.95 above it).
Relative strength (Supplementary Text "Characterizing Relative Strength", Fig. S9)
    **Width** of ``X``'s basin: the population starts from a mixture -- a fraction ``f`` of the
    uncommitted agents hold a full memory of ``X``, the others of ``Y`` -- for ``f`` = 1/8 .. 7/8;
    ``boundary`` is the ``f`` where ``P(consensus on X)`` crosses 1/2 (linear interpolation; 0 or 1
    if it never does) and ``width = 1 - boundary`` is the share of mixtures from which ``X``
    wins. **Pull**: ``1 -`` the mean share of ``Y`` in the uncommitted productions over
    ``within_rounds`` rounds when one agent committed to ``Y`` perturbs a consensus on ``X`` (the
    setting of Fig. S9 C-D; 1 = the perturbation is absorbed). **Exploration**: the same share
    with nobody committed (Fig. S9 A-B). Runs are shared where the experiment is the same
    (exactly, not approximately): pull and exploration read the first ``n_runs_flip`` runs of the
    sweep's counts 1 and 0 (played to their cap; the flip readings see them only up to their
    flip, :func:`~normlab.theory.design_plan.sweep_shares`), and the reverse direction's mixtures
    are the same mixtures read for the other name (``f`` of ``(Y, X)`` is ``1 - f`` of ``(X, Y)``,
    :func:`~normlab.theory.design_plan.mixture_sources`); every other reading is what separate
    runs would give to the bit (same seeds), and the saving is measured in ``docs/validation/benchmarks.md``.

Engines
-------
``engine="kernel"`` (default, :mod:`~normlab.calibration.prediction.engine_kernel`) runs every
simulation of every draw in one compiled call (:func:`normlab.theory.memory_game.strategy_design`),
with the reductions above inside it and the seed words of all runs derived at once;
``engine="reference"`` (:mod:`~normlab.calibration.prediction.engine_reference`) makes one
:func:`~normlab.theory.strategy_game` call per draw and setting and reduces in Python. Run ``k``
of seed group ``g`` (consensus; each committed count; each strength setting, in that order) of
draw ``d`` uses the same child seed in both, so they simulate the same runs and return the same
prediction (tested; float means may differ in the last bits). Both return the per-draw tables of a
:class:`~normlab.calibration.Prediction` (:mod:`~normlab.calibration.prediction.result`), which
reads them over draws; what they share is in :mod:`~normlab.calibration.prediction.readings`.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 1, Fig. 2B,
Fig. 3, Table S2, Table S3, Methods "Committed Minorities", Supplementary Text "Characterizing
Relative Strength", Figs. S7, S9, S10.
"""


from __future__ import annotations

import numpy as np

from normlab._rng import seeded, spawn
from normlab.theory.criteria import published_max_round
from normlab.theory.name_order import check_order

from ..fit.posterior import StrategyFit
from ..fit.run_effects import RunEffects
from .engine_kernel import _predict_kernel
from .engine_reference import _predict_reference
from .experiment import ExperimentDesign
from .readings import DESIGN_RUNS, FLIP_LEVEL, _directions, _fit_llm, table_draws
from .result import Prediction
from .settings import MAX_PREDICTED_AGENTS, PredictSettings, check_predicted_agents

__all__ = ["Prediction", "predict", "run_prediction", "PredictSettings", "table_draws", "MAX_PREDICTED_AGENTS",
           "check_predicted_agents"]

# ----------------------------------------------------------------------------- entry point
def predict(fit, *, n_agents: int, n_draws: int = 200, within_rounds: int = 30, n_runs_consensus: int = 40,
            n_runs_flip: int = 16, max_rounds: int = 200, committed=None, directions=None, consensus: bool = True,
            strength: bool = True, assume_monotone: bool = False, level: float = 0.95, flip_level: float = FLIP_LEVEL,
            design_runs: int = DESIGN_RUNS, max_round: int | None = None, threads: int | None = 1, executor=None,
            engine: str = "kernel", design=None, run_effects="fit", order_bias: float = 0.0,
            name_order=("independent", "shared"), rng=None) -> Prediction:
    """Predict collective bias, convergence speed, critical masses and relative strength.

    Parameters
    ----------
    fit : StrategyFit, StrategyTable or list of StrategyTable
        Posterior to draw from (see :func:`table_draws`).
    n_agents : int
        Population size ``N`` of the predicted experiment, 2 .. :data:`MAX_PREDICTED_AGENTS`.
    n_draws : int, optional
        Posterior draws of the table.
    within_rounds : int, optional
        Window (population rounds) of the flip criterion and of pull/exploration (30 in Flint Ashery et al.
        2025, Methods).
    n_runs_consensus : int, optional
        Convergence runs per draw (40 per published experiment).
    n_runs_flip : int, optional
        Runs per draw and committed count of the ``per_run`` reading (and per mixture for the
        basin width).
    max_rounds : int, optional
        Cap of the convergence runs.
    committed : sequence of int, optional
        Committed counts swept (default ``0 .. N - 1``; Flint Ashery et al. (2025) report critical masses up to
        two thirds of N).
    directions : sequence, optional
        Majority names (two-name pools) or ``(majority, challenger)`` pairs; default: every
        ordered pair.
    consensus, strength : bool, optional
        Skip the convergence runs / the relative-strength runs.
    assume_monotone : bool, optional
        Stop a sweep after two consecutive counts where every run flipped and the published
        rule was met (saturation; larger counts are counted as flipping every run). Off by
        default: with run effects it pins the flip frequencies above the saturation to 1 where
        a cell of larger minorities need not flip every run (``docs/validation/calibration.md``,
        "What the first default-fit truths found"); it saves 15-20 % of ``predict``'s time.
    level : float, optional
        Credible level of the reported intervals.
    flip_level : float, optional
        Flip frequency defining a draw's ``per_run`` critical mass (0.5).
    design_runs : int, optional
        Runs per committed count of the simulated replication of the paper's experiment, to which
        the ``published`` rule is applied (10, Flint Ashery et al. 2025, Methods); the first ``design_runs`` of the
        ``max(n_runs_flip, design_runs)`` runs simulated per count.
    max_round : int, optional
        Window of the published rule; default the authors' window for the fitted LLM at this N
        (:func:`normlab.theory.criteria.published_max_round`: 30, 21 for Llama-3 at N = 48; the
        LLM is read from the fit's ``meta``: ``llm``, or the single model of its source runs).
    threads : int or None, optional
        Numba threads per simulation call of the ``"reference"`` engine (default 1: the many
        small simulations are faster without a parallel region each; None keeps the current
        setting). The kernel engine runs on one thread; use ``executor`` to spread draws.
    executor : concurrent.futures.Executor, optional
        Runs chunks of draws in parallel (a ``ProcessPoolExecutor`` with the ``spawn`` context,
        or a dask client's executor); results do not depend on it.
    engine : {"kernel", "reference"}, optional
        ``"kernel"`` (default): every simulation of every draw in one compiled call
        (:func:`normlab.theory.memory_game.strategy_design`) with the reductions inside it and
        one vectorised seed derivation; ``"reference"``: one
        :func:`~normlab.theory.strategy_game` call per draw and setting, reduced in Python (the
        original implementation, kept as the reference). Both simulate the same runs from the
        same seeds and return the same prediction (up to the last bits of float means).
    design : ExperimentDesign or sequence of them, optional
        The committed-minority experiment(s) a critical mass is compared with
        (:class:`~normlab.calibration.ExperimentDesign`, one per direction): its tested counts,
        runs per count, run lengths and window. Every run of the design is simulated per draw
        (without stopping at a flip) and read by the published rule as the data are, giving
        :meth:`Prediction.critical_mass`'s ``experiment`` entry: the critical mass *this*
        experiment would report, with its interval. Default: none (the paper's design only).
    run_effects : "fit", RunEffects or None, optional
        Between-run heterogeneity of the strategy (:mod:`normlab.calibration.fit.run_effects`): every
        simulated run plays the draw's table under its own run effect. ``"fit"`` (default): the
        effects stored with the fit (``fit.meta["run_effects"]``, written by
        :func:`~normlab.calibration.calibrate`; a joint fit's posterior draws of the effects, each
        played with the table draw it was sampled with), none if it has none -- and none for
        explicit table draws (a list of tables: ``settings["run_effects_note"]`` says so; pass a
        :class:`~normlab.calibration.RunEffects`: a joint fit's is played row ``i`` with table ``i``,
        so line it up with the tables by :meth:`~normlab.calibration.RunEffects.aligned`); None:
        identical runs. Kernel engine, two names.
    order_bias : float, optional
        First-listed bias ``gamma`` of the prompts (:mod:`normlab.theory.name_order`): each table
        is played as per-order tables averaging to it. 0 (default): the tables as they are
        (bit-identical). Kernel engine.
    name_order : (str, str), optional
        How the order is drawn in the convergence runs and in every committed-minority run:
        default the authors' protocols, ``("independent", "shared")`` (``population()`` shuffles
        per player, ``committed()`` once per interaction).
    rng : optional

    Returns
    -------
    Prediction

    Raises
    ------
    ValueError, TypeError
        Invalid settings (checked before any simulation).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables S2-S3,
    Methods "Committed Minorities", Supplementary Text "Characterizing Relative Strength".
    """
    settings = PredictSettings(
        n_agents=n_agents, n_draws=n_draws, within_rounds=within_rounds, n_runs_consensus=n_runs_consensus,
        n_runs_flip=n_runs_flip, max_rounds=max_rounds, committed=committed, directions=directions, consensus=consensus,
        strength=strength, assume_monotone=assume_monotone, level=level, flip_level=flip_level, design_runs=design_runs,
        max_round=max_round, engine=engine, design=design, run_effects=run_effects, order_bias=order_bias,
        name_order=name_order)
    return run_prediction(fit, settings, threads=threads, executor=executor, rng=rng)


def run_prediction(fit, settings: PredictSettings, *, threads: int | None = 1, executor=None, rng=None) -> Prediction:
    """The prediction engine: :func:`predict` with its settings in one :class:`PredictSettings`.

    Parameters
    ----------
    fit : StrategyFit, StrategyTable or list of StrategyTable
    settings : PredictSettings
        What to simulate and how to read it (checked when it was made; the committed counts,
        directions, designs and name order are checked here, against the fit's pool and ``n_agents``).
    threads, executor, rng : optional
        As for :func:`predict`.

    Returns
    -------
    Prediction
    """
    if not isinstance(settings, PredictSettings):
        raise TypeError(f"settings must be a PredictSettings; got {type(settings).__name__}")
    s = settings
    effects = _run_effects(fit, s.run_effects)
    N, D, wr, nrc, nrf, mr = s.n_agents, s.n_draws, s.within_rounds, s.n_runs_consensus, s.n_runs_flip, s.max_rounds
    nd, level, flip_level, engine = s.design_runs, s.level, s.flip_level, s.engine
    committed, directions, design = s.committed, s.directions, s.design
    order_bias, name_order = s.order_bias, s.name_order
    consensus, strength, assume_monotone = s.consensus, s.strength, s.assume_monotone
    mxr = published_max_round(_fit_llm(fit), N) if s.max_round is None else s.max_round
    if committed is None:
        counts = list(range(0, N))
    else:
        counts = sorted(set(int(c) for c in np.atleast_1d(committed)))
        if not counts or counts[0] < 0 or counts[-1] >= N:
            raise ValueError(f"committed counts must lie in [0, {N - 1}]")
    if isinstance(fit, StrategyFit):
        names, H = fit.names, fit.memory
    else:
        first = fit if not isinstance(fit, (list, tuple)) else (fit[0] if fit else None)
        if first is None or not hasattr(first, "names"):
            raise TypeError(f"fit must be a StrategyFit, a StrategyTable or a list of them; got {type(fit).__name__}")
        names, H = tuple(first.names), first.memory
    dirs = _directions(tuple(names), directions)
    designs = _designs(design, tuple(names), N)
    if effects.active and len(names) != 2:
        raise ValueError(f"run effects act on two-name tables; this fit has {len(names)} names (use run_effects=None)")
    if not isinstance(name_order, (tuple, list)) or len(name_order) != 2:
        raise ValueError(f"name_order must be a pair (convergence runs, committed runs); got {name_order!r}")
    gamma = float(check_order(order_bias, name_order[0])[0])
    check_order(order_bias, name_order[1])
    if engine == "reference" and (designs or effects.active or gamma):
        raise ValueError("the reference engine plays the paper's design without run effects; use engine='kernel' "
                         "with design=, run_effects= or order_bias=")
    ss, rng_record = seeded(rng)
    seeds = ss.spawn(3)
    tables, index = table_draws(fit, D, rng=seeds[0], return_index=True)
    # a joint fit's run effects are posterior draws paired with its table draws (explicit tables: row i with
    # table i, see RunEffects.aligned); other effects are drawn apart
    pair = None
    if effects.kind == "joint":
        pair = index if index is not None else (np.arange(D) if not isinstance(fit, StrategyFit) else None)
    draw_seeds = spawn(seeds[1], D) if engine == "reference" else None
    cfg = dict(n_agents=N, within_rounds=wr, n_runs_consensus=nrc, n_runs_flip=nrf, max_rounds=mr,
               committed=counts, directions=dirs, consensus=bool(consensus), strength=bool(strength),
               assume_monotone=bool(assume_monotone), level=float(flip_level), design_runs=nd, max_round=mxr)
    ids = list(range(D))
    if engine == "kernel":
        kcfg = dict(cfg, designs=designs,
                    effect_draws=effects.draws(D, rng=seeds[2], index=pair) if effects.active else None,
                    effect_seed=seeds[2], order_bias=gamma, name_order=tuple(str(o) for o in name_order))
        cons, success, stats, flips, cmd, strg, exp = _predict_kernel(tables, ids, seeds[1], kcfg, names, H, executor)
    else:
        cons, success, stats, flips, cmd, strg = _predict_reference(tables, ids, draw_seeds, cfg, threads, executor)
        exp = {}
    record = dict(cfg, committed=list(counts), directions=[list(d) for d in dirs], flip_level=float(flip_level),
                  n_draws=D, stop="streak (3N consecutive successes)", winner_rule="majority of the last 3 rounds",
                  criteria={"published": f"ensemble rule of Flint Ashery et al. 2025, Table S3 (plotter.ipynb cells 9-10) on "
                                         f"{nd} runs per count, window {mxr} rounds",
                            "per_run": f"first passage within {wr} rounds, {nrf} runs per count, "
                                       f"flip frequency >= {float(flip_level)}"},
                  designs=[d.to_dict() for d in designs], run_effects=effects.to_dict() if effects.active else None,
                  rng=rng_record,
                  **({"run_effects_note": "explicit table draws carry no run effects; pass run_effects="}
                     if not isinstance(fit, StrategyFit) and isinstance(s.run_effects, str) and s.run_effects == "fit"
                     else {}),
                  **({"run_effects_paired": True} if pair is not None and effects.active else {}),
                  **({"order_bias": gamma, "name_order": [str(o) for o in name_order]} if gamma else {}))
    fs = fit.summary() if isinstance(fit, StrategyFit) else {"kind": "fixed table"}
    return Prediction(names=tuple(names), memory=H, n_agents=N, n_draws=D, within_rounds=wr, level=float(level),
                      consensus=cons, success=success, draw_stats=stats, flips=flips, critical_mass_draws=cmd,
                      strength=strg, settings=record, fit_summary=fs, **exp)


#: Keywords of :func:`predict` that are not settings: how the engine runs.
_RUN_OPTIONS = ("threads", "executor", "rng")


def predict_settings(**keywords) -> tuple[PredictSettings, dict]:
    """``(settings, run options)`` from :func:`predict`'s keywords (``threads``, ``executor``, ``rng``
    are the run options): what :func:`~normlab.calibration.calibrate` hands :func:`run_prediction` for
    its ``predict_kwargs``. A keyword :func:`predict` does not take is refused as it refuses it."""
    fields = set(PredictSettings.__dataclass_fields__)
    for k in keywords:
        if k not in fields and k not in _RUN_OPTIONS:
            raise TypeError(f"predict() got an unexpected keyword argument {k!r}")
    run = {k: keywords.pop(k) for k in _RUN_OPTIONS if k in keywords}
    return PredictSettings(**keywords), run


def _run_effects(fit, run_effects) -> RunEffects:
    """The run effects a prediction plays (see :func:`predict`)."""
    if run_effects is None or run_effects is False:
        return RunEffects.none("run_effects=None")
    if isinstance(run_effects, RunEffects):
        return run_effects
    if isinstance(run_effects, str) and run_effects == "fit":
        meta = getattr(fit, "meta", None) or {}
        return RunEffects.from_dict(meta.get("run_effects")) if isinstance(fit, StrategyFit) else RunEffects.none()
    raise TypeError(f"run_effects must be 'fit', a RunEffects or None; got {run_effects!r}")


def _designs(design, names, N) -> tuple:
    """The experiment designs of a prediction, checked against its pool and N (one per direction)."""
    if design is None:
        return ()
    ds = (design,) if isinstance(design, ExperimentDesign) else tuple(design)
    seen = set()
    for d in ds:
        if not isinstance(d, ExperimentDesign):
            raise TypeError(f"design must be an ExperimentDesign or a sequence of them; got {type(d).__name__}")
        if d.n_agents != N:
            raise ValueError(f"the design of {d.direction} is for N = {d.n_agents}, the prediction for N = {N}")
        if d.majority not in names or d.challenger not in names:
            raise ValueError(f"the design of {d.direction} names {d.majority}/{d.challenger}, not in the pool {names}")
        if (d.majority, d.challenger) in seen:
            raise ValueError(f"two designs for {d.direction}")
        seen.add((d.majority, d.challenger))
    return ds
