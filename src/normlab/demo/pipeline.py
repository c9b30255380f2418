"""The demo pipeline: probe -> predict -> play -> check -> calibrate -> report.

A thin orchestration of public APIs, one step after the other, each journaled in its own
directory under ``DIR/llm/<key>/`` (``key`` hashes the endpoint, the pool and the sampling
settings, so changing any of them starts fresh directories and never mixes runs):

1. **strategy table** (:func:`normlab.llm_runs.strategy_table`, exact mode): ``p(name | memory)``
   for every memory state up to ``H``, in two stages -- memories of length <= 1 first, whose
   measured speed (prompt tokens per second) gives the time estimate printed before the rest.
2. **free-generation check** (:func:`normlab.llm_runs.individual_bias`, sample mode, no re-ask):
   how often the model, asked to write its answer, names no pool name at all.
3. **theory prediction** from the probed table (:func:`normlab.calibration.predict`): collective
   bias, time to consensus and critical masses, with intervals for an experiment of the size
   the demo then runs (so the intervals include that experiment's noise).
4. **LLM populations** (:func:`normlab.llm_runs.run_game`, from empty memories, the paper's
   ``3N`` success streak). In exact mode every prompt is one the probe already asked, so they are
   answered from its cache.
5. **committed-minority check**: runs starting from a consensus attacked by committed agents
   (``stop="flip"``), compared with the predicted flip probability.
5b. **tip** (:func:`normlab.calibration.tip`): the adaptive search for the published-rule critical
   mass that overturns the convention the populations reached, starting from their runs as known
   data and playing at most ``tip_runs`` committed runs (0: skipped) through the runner, journaled
   under ``DIR/llm/<key>/tip-.../`` (exact mode: answered from the probe's cache).
6. **calibration from the population's log** (:func:`normlab.calibration.calibrate`): what the
   game logs alone say, with the parameter uncertainty of the states they never visited.
7. **report** (:mod:`normlab.demo.report`).

This module holds the result and the orchestration; the steps are in ``_steps.py``, the settings,
the estimates and the printed plan in ``_plan.py``, the per-step ledger and the budget in
``_ledger.py``, the progress display in ``_progress.py``.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Experimental
setup, Methods "Committed Minorities", Figs. 1-3, Table 1, Fig. S8, Table S3.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from normlab import __version__
from normlab._rng import spawn
from normlab.llm_runs.runner.mode import mode_of
from normlab.llm_runs.backend import redact_url, shared_embedded_server
from normlab.llm_runs.journal import write_json_atomic
from normlab.user_files import read_user_json

from ._common import fmt_seconds
from ._ledger import Clock, ledger
from ._plan import DEMO_DEFAULTS, MARKER, DemoSettings, demo_ctx, directory_key, estimate_demo, seed_int
from ._progress import echo_to_stderr, spinner
from ._steps import (DemoRun, calibration_step, checks_step, committed_step, free_generation_step,
                     population_step, prediction_step, probe_step, tip_step)
from .report import ReportContext, checks_html, write_figures, write_report

__all__ = ["run_demo", "estimate_demo", "DemoResult", "DemoSettings", "DEMO_DEFAULTS"]


# ----------------------------------------------------------------------------- result
@dataclass(frozen=True)
class DemoResult:
    """What ``normlab demo`` produced.

    Attributes
    ----------
    directory : pathlib.Path
        ``DIR``: ``report.html``, ``summary.json``, the figures, ``tables/`` and ``llm/`` (the
        journaled LLM runs and probes, reused by a rerun).
    summary : dict
        The content of ``summary.json`` (schema :data:`normlab.demo.report.SUMMARY_SCHEMA`).
    checks : pandas.DataFrame
        Predicted vs observed, one row per comparison (see :meth:`to_frame`).
    probe, population, committed, prediction, calibration, tip :
        The objects behind the report: :class:`~normlab.llm_runs.StrategyProbe`,
        :class:`~normlab.llm_runs.LLMRunResult`, a list of them (one per committed-minority
        setting), :class:`~normlab.calibration.Prediction` (from the probed table),
        :class:`~normlab.calibration.Calibration` (from the population's log) and
        :class:`~normlab.calibration.TipResult` (the tip search; None with ``tip_runs=0``).
    """

    directory: Path
    summary: dict
    checks: pd.DataFrame
    probe: object = None
    population: object = None
    committed: tuple = ()
    prediction: object = None
    calibration: object = None
    tip: object = None

    @property
    def report(self) -> Path:
        return self.directory / "report.html"

    def to_frame(self) -> pd.DataFrame:
        """Predicted vs observed in long format: ``quantity``, ``key``, ``source``
        (``probe`` / ``log`` prediction), ``predicted``, ``low``, ``high`` (interval for an
        experiment of the size run), ``observed``, ``observed_low``, ``observed_high``
        (Clopper-Pearson 95% where the observation is a count), ``consistent``."""
        return self.checks.copy()

    def __repr__(self) -> str:
        s = self.summary
        t = s["timing"]
        return (f"DemoResult({s['endpoint']['model']}, N={s['settings']['n_agents']}, H={s['settings']['memory']}, "
                f"{len(self.checks)} checks ({int(self.checks['consistent'].fillna(True).sum())} consistent), "
                f"{s['cost']['llm_calls']} LLM calls, {t['wall_s']:.0f} s; report: {self.report})")

    def _repr_html_(self) -> str:
        return (f"<p><b>normlab demo</b> -- {self.summary['endpoint']['model']}; report: "
                f"<code>{self.report}</code></p>" + checks_html(self.checks))

    @classmethod
    def _contract_example(cls) -> "DemoResult":
        """Two checks of a demo on a stub model, the few ``summary.json`` fields the display reads
        (literal; ``tests/umbrella/test_contracts.py``)."""
        checks = pd.DataFrame([("P(consensus)", "A", "probe", 0.7, 0.4, 1.0, 0.75, 0.19, 0.99, True),
                               ("rounds to consensus", "", "log", 6.0, 4.0, 9.0, 12.0, None, None, False)],
                              columns=["quantity", "key", "source", "predicted", "low", "high", "observed", "observed_low",
                                       "observed_high", "consistent"])
        summary = {"endpoint": {"model": "stub-model", "embedded": False}, "settings": {"n_agents": 4, "memory": 1},
                   "cost": {"llm_calls": 13}, "timing": {"wall_s": 20.0}}
        return cls(directory=Path("demo-example"), summary=summary, checks=checks)


# ----------------------------------------------------------------------------- entry point
def run_demo(out, *, names=DEMO_DEFAULTS["names"], n_agents: int = DEMO_DEFAULTS["n_agents"],
             memory: int = DEMO_DEFAULTS["memory"], runs: int = DEMO_DEFAULTS["runs"],
             max_rounds: int = DEMO_DEFAULTS["max_rounds"], committed=DEMO_DEFAULTS["committed"],
             committed_runs: int = DEMO_DEFAULTS["committed_runs"], sample_check: int = DEMO_DEFAULTS["sample_check"],
             fit: str = DEMO_DEFAULTS["fit"], n_draws: int = DEMO_DEFAULTS["n_draws"],
             mode: str = DEMO_DEFAULTS["mode"], within_rounds: int = DEMO_DEFAULTS["within_rounds"],
             tip_runs: int = DEMO_DEFAULTS["tip_runs"], probe_samples: int = DEMO_DEFAULTS["probe_samples"],
             endpoint=None, sampling: dict | None = None,
             rng=DEMO_DEFAULTS["rng"], progress: bool = True, verbose: bool = True,
             command: str | None = None) -> DemoResult:
    """Probe an LLM, predict its populations with the theory, check with LLM runs, write a report.

    The setting keywords (``names`` to ``sampling``) build one :class:`DemoSettings`, checked
    before any work; the steps, :func:`estimate_demo` and the report read that object.

    Parameters
    ----------
    out : str or pathlib.Path
        Demo directory (created). Rerunning into it reuses every journaled LLM call.
    names : str or sequence of str, optional
        The two-name pool (default ``X,Y``: SmolLM2 has almost no individual bias between them).
    n_agents, memory : int, optional
        Population size ``N`` (>= 3) and memory length ``H`` (1..5; the probe asks
        ``2 * sum_k 4^k`` prompts: 42 for H = 2, 170 for H = 3, 2730 for H = 5).
    runs : int, optional
        LLM populations played from empty memories.
    max_rounds : int, optional
        Cap of those runs in population rounds (a run without a ``3N`` success streak by then
        counts as "no consensus", in the LLM runs and in the prediction alike).
    committed : "auto", int or sequence of int, optional
        Committed counts of the committed-minority check, tried against both conventions.
        ``"auto"``: per direction, the predicted critical mass (pooled ``per_run`` reading),
        at least 1; where none is reached, ``N // 2``.
    committed_runs : int, optional
        LLM runs per direction and count (0 skips the check); also the runs per count of the
        predicted ``per_run`` reading, so its interval is that of an experiment of this size.
    sample_check : int, optional
        Free-generation answers asked at an empty memory (sample mode, no re-ask; 0 skips).
    fit : str, optional
        Strategy model fitted on the population's log (:func:`normlab.calibration.calibrate`): a
        registered fit kind (:func:`normlab.calibration.fit_kind_names`: ``"empirical"``,
        ``"logit_symmetric"``, ``"logit"``, ``"hierarchical"``).
    n_draws : int, optional
        Draws of every prediction (posterior draws for the log fit; repeated simulated
        experiments for the probed table, which has no parameter uncertainty).
    mode : {"exact", "sample"}, optional
        How the strategy table is measured and how the LLM populations and committed runs decide:
        ``"exact"`` (next-token probabilities: the endpoint must return logprobs; the runs are
        answered from the probe's cache, no new request) or ``"sample"`` (the paper's generation
        and parsing, one request per decision and re-ask; the table estimated from
        ``probe_samples`` sampled answers per memory state, with a Dirichlet posterior per state:
        any endpoint, no logprobs needed).
    within_rounds : int, optional
        Window of the flip criterion (30 rounds, Flint Ashery et al. 2025, Methods) and length of committed runs.
    tip_runs : int, optional
        Budget of the tip step in committed-minority runs (:func:`normlab.calibration.tip`: the
        published-rule critical mass that overturns the populations' convention, on an experiment of
        ``max(committed_runs, 2)`` runs per count, from the populations' runs as known data; 0 skips).
    probe_samples : int, optional
        Sample mode: answers sampled per memory state in each of the probe's two stages (memories
        of length <= 1, then every memory up to ``memory``; pooled per state).
    endpoint : normlab.llm_runs.EndpointConfig, optional
        Default: ``NORMLAB_LLM_BASE_URL`` if set, else the embedded SmolLM2 server.
    sampling : dict, optional
        Run settings passed to every probe and run (``template``, ``temperature``, ``top_k``,
        ``max_tokens``, ``top_logprobs``, ``max_reasks``, ``prefill``, ``multi_token``,
        ``wrap``, ``top_p``, ``min_p``, ``parse``; see :func:`normlab.llm_runs.run_game`).
    rng : int or None, optional
        Seed of every run and simulation (stored; ``None``: fresh).
    progress : bool, optional
        Progress bars.
    verbose : bool, optional
        Print the plan, the step results and the time estimate (to stderr).
    command : str, optional
        The command line, recorded in the report.

    Returns
    -------
    DemoResult

    Raises
    ------
    ValueError, TypeError
        Bad settings (before any work), or ``out`` holding something that is not a demo.
    normlab.llm_runs.EndpointError
        The endpoint is down or keeps failing (completed calls stay journaled in ``out``).

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Table 1,
    Fig. S8, Table S3, Methods "Committed Minorities".
    """
    settings = DemoSettings(out, names=names, n_agents=n_agents, memory=memory, runs=runs, max_rounds=max_rounds,
                            committed=committed, committed_runs=committed_runs, sample_check=sample_check, fit=fit,
                            n_draws=n_draws, mode=mode, within_rounds=within_rounds, tip_runs=tip_runs,
                            probe_samples=probe_samples, endpoint=endpoint, sampling=sampling)
    with shared_embedded_server():  # one embedded server (and prompt cache) for every step
        return _run_demo(settings, rng=rng, progress=progress, verbose=verbose, command=command)


def _run_demo(settings: DemoSettings, *, rng, progress: bool, verbose: bool, command: str | None) -> DemoResult:
    """The steps, one after the other (module docstring), then the report."""
    run = _start(settings, rng=rng, progress=progress, verbose=verbose)
    cfg, out = run.cfg, run.cfg.out
    pr = probe_step(run)                                                          # 1. strategy table
    bias = free_generation_step(run)                                              # 2. free generation
    pred, traj_th, pfacts, pcrit = prediction_step(run, pr.source)                # 3. theory prediction
    cache = list(pr.dirs) if mode_of(cfg.mode).uses_cache else None
    pop, obs = population_step(run, pred, pr.ptab, pr.speed, cache)               # 4. LLM populations
    committed_res, cm_rows, cm_curves = committed_step(run, pr.table, pred, pcrit, cache)  # 5. committed minority
    tp = tip_step(run, pop, obs, pfacts, cache)                                   # 5b. the tip search
    cal, lfacts, lcrit = calibration_step(run, pop)                              # 6. calibration from the log
    checks, llm_curve = checks_step(run, pfacts, lfacts, obs, cm_rows, bias, pr.ptab, pop)

    # --- 7. report
    ctx = ReportContext(settings=cfg, seed=run.seed, command=command, version=__version__, clock=run.clock,
                        estimate=pr.estimate, speed=pr.speed, probe=pr.probe, bias=bias, pred=pred, pfacts=pfacts,
                        pcrit=pcrit, traj_th=traj_th, llm_curve=llm_curve, pop=pop, obs=obs, cm_rows=cm_rows,
                        cm_curves=cm_curves, cal=cal, lfacts=lfacts, lcrit=lcrit, checks=checks, llm_dir=run.llm_dir,
                        tip=tp, ledger=ledger([p for p in run.llm_dir.iterdir() if p.is_dir()]))
    with run.clock.step("figures and tables"):
        with spinner("drawing the figures", progress):
            figs = write_figures(out, ctx)
    summary = write_report(out, ctx, figs)
    t = run.clock.total()
    run.echo(f"  done in {fmt_seconds(t['wall_s'])} ({t['cpu_s']:.0f} s CPU); {summary['cost']['llm_calls']} LLM "
             f"requests this run ({summary['cost']['llm_calls_total']} journaled); report: {out / 'report.html'}")
    return DemoResult(directory=out, summary=summary, checks=checks, probe=pr.probe, population=pop,
                      committed=tuple(committed_res), prediction=pred, calibration=cal,
                      tip=None if tp is None else tp.result)


def _start(cfg: DemoSettings, *, rng, progress: bool, verbose: bool) -> DemoRun:
    """The seed fixed (or the stored one reused), ``OUT/demo.json`` written and the journal
    directory ``OUT/llm/<key>/`` made."""
    seed = seed_int(rng)
    out, names, N, H = cfg.out, cfg.names, cfg.n_agents, cfg.memory
    ep = cfg.endpoint
    if ep.embedded:
        # one server for every step (shared_embedded_server), its KV sized for the longest prompt of
        # any step; one slot and one request at a time: llama.cpp's logits change when two
        # sequences share a batch (measured: p(X) 0.945 alone, 1.0 beside another prompt), so
        # concurrent requests would make the probed table depend on timing. One CPU thread gains
        # nothing from concurrency (same CPU time measured).
        ep = dataclasses.replace(ep, embedded_ctx=ep.embedded_ctx or demo_ctx(cfg), embedded_parallel=1,
                                 concurrency=1)
    echo = echo_to_stderr(verbose)
    clock = Clock()
    out.mkdir(parents=True, exist_ok=True)
    stored = read_user_json(out / MARKER) if (out / MARKER).exists() else None  # a regular file, capped
    if rng is None and stored is not None:
        seed = int(stored["seed"])
    # whole or not at all: a kill mid-write must not leave a marker the next run cannot read
    write_json_atomic(out / MARKER, {"normlab_version": __version__, "seed": seed, "settings": cfg.stored()})
    llm_dir = out / "llm" / directory_key(cfg)
    llm_dir.mkdir(parents=True, exist_ok=True)
    seeds = spawn(seed, 8)
    where = (f"the {ep.model_label} server (--embedded-model {ep.embedded_model})" if ep.embedded
             else f"{redact_url(ep.base_url)} ({ep.model or 'its first model'})")
    echo(f"normlab demo: {N} agents, memory {H}, names {','.join(names)}, {where}; report in {out}")
    return DemoRun(cfg=cfg, seed=seed, ep=ep, llm_dir=llm_dir, seeds=seeds, clock=clock, echo=echo, progress=progress)
