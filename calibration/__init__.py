"""Fit LLM strategy tables and predict collective bias and critical mass.

From LLM naming-game logs (normlab's own runs, or the published AI-norms data of Flint Ashery et al. 2025) this
sub-package fits the agents' strategy -- ``p(name | memory state)`` -- with its uncertainty, and
plays posterior draws of it in :func:`normlab.theory.strategy_game` to predict what a population
will do: which convention wins (collective bias), how fast, and how large a committed minority
must be to overturn it (critical mass).

Main entry points (imported lazily; PyMC is only imported by the Bayesian fitters):

- inputs: :func:`counts_from_log`, :func:`counts_from_probes`, :func:`select_runs`,
  :class:`StateCounts`
- fits: :func:`fit_empirical` (Dirichlet per state), :func:`fit_logit`,
  :func:`fit_hierarchical` (PyMC), :func:`fit_strategy` (any registered fit kind by name),
  :func:`compare_models`, :func:`posterior_predictive_check`, :class:`StrategyFit`,
  :func:`load_fit` (shipped tables fitted on the Llama-3 / Llama-3.1 runs; :func:`shipped_fits`)
- fit kinds: :data:`FIT_KINDS`, :func:`register_fit_kind` (a new family of strategy models:
  one :class:`FitFamily` module, one registration line; see :mod:`.fit.registry`)
- asymmetry: :func:`strategy_asymmetry` (Flint Ashery et al. 2025, Table 1)
- prediction: :func:`predict` -> :class:`Prediction` (its settings: :class:`PredictSettings`);
  :func:`calibrate` (the whole pipeline, also ``normlab calibrate``)
- observed: :func:`empirical_critical_mass` (published, per_run and end_of_run critical masses),
  :func:`run_flips`, :func:`challenger_shares`
- scores: :func:`score` (Brier and log scores of flips and consensus winners beside the rivals
  of :mod:`.evaluate.rivals` on the same runs -- direction rule, committed-fraction logistic, base rate,
  coin -- per direction; coverage of the underlying and experiment-size intervals with the share
  of zero-width ones, reliability diagram) -> :class:`Scores`
- transfer: :func:`transfer_scores` (fit at one LLM, N, H; predict and score the others) ->
  :class:`TransferScores`; :func:`tables_at_memory`
- group size: :func:`group_size_curve` (P(consensus on each name) for N = 4 .. 1 000 and the
  mean-field limit N -> infinity) -> :class:`GroupSizeCurve`
- norm adoption: :func:`fit_adoption` (belief / compliance rates of the two-stage contagion and
  their ratio, CRSEC seed 000) -> :class:`AdoptionFit`
- probe-only prediction: :func:`probe_predict` (exact probes of every memory state -> table with
  its uncertainty, :class:`ProbeFit` -> :class:`ProbePrediction`; also ``normlab predict --probe``),
  :func:`probe_check` (exact probes vs sampled probes vs populations) -> :class:`ProbeCheck`
- LLM vs theory: :func:`llm_trajectories`, :func:`theory_trajectories`,
  :func:`compare_trajectories` and the ``plot_*`` figures.
- model adequacy: :func:`check_adequacy` (the fit played under the exact design of the committed
  runs, tested against them count by count) -> :class:`Adequacy`; :func:`pair_agreement`
  (partners' agreement beyond the table, the first-listed bias of a shared name order) ->
  :class:`PairAgreement`

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective bias
in LLM populations", Sci. Adv. 11, eadu9368 (2025): Table 1, Figs. 1-3, S8-S10, Tables S2, S3, S5.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports, moved_modules

_EXPORTS = {
    "StateCounts": "fit.inputs",
    "counts_from_log": "fit.inputs",
    "counts_from_probes": "fit.inputs",
    "select_runs": "fit.inputs",
    "state_labels": "fit.inputs",
    "StrategyFit": "fit.posterior",
    "load_fit": "fit.posterior",
    "shipped_fits": "fit.shipped",
    "FitFamily": "fit.posterior",
    "posterior_predictive_check": "fit.posterior",
    "FitKind": "fit.registry",
    "FIT_KINDS": "fit.registry",
    "MODELS": "fit.registry",
    "fit_strategy": "fit.registry",
    "fit_kind_names": "fit.registry",
    "register_fit_kind": "fit.registry",
    "unregister_fit_kind": "fit.registry",
    "fit_empirical": "fit.empirical",
    "fit_logit": "fit.logit",
    "select_decay": "fit.logit",
    "fit_hierarchical": "fit.hierarchical",
    "compare_models": "fit.model_choice",
    "ModelComparison": "fit.model_choice",
    "log_predictive_density": "fit.model_choice",
    "design_matrix": "fit.features",
    "to_logit_strategy": "fit.features",
    "strategy_asymmetry": "evaluate.asymmetry",
    "AsymmetryResult": "evaluate.asymmetry",
    "predict": "prediction.api",
    "PredictSettings": "prediction.settings",
    "Prediction": "prediction.result",
    "ExperimentDesign": "prediction.experiment",
    "experiment_designs": "prediction.experiment",
    "RunEffects": "fit.run_effects",
    "fit_run_effects": "fit.run_effects",
    "StateSensitivity": "prediction.sensitivity",
    "state_sensitivity": "prediction.sensitivity",
    "CriticalMassCheck": "critical_mass_check",
    "check_critical_masses": "critical_mass_check",
    "Adequacy": "evaluate.adequacy",
    "check_adequacy": "evaluate.adequacy",
    "PairAgreement": "evaluate.adequacy",
    "pair_agreement": "evaluate.adequacy",
    "TipResult": "tip.result",
    "TipSettings": "tip.settings",
    "RunSource": "tip.sources",
    "ArchiveReplay": "tip.sources",
    "LLMSource": "tip.sources",
    "table_draws": "prediction.readings",
    "run_flips": "evaluate.observed_critical_mass",
    "challenger_shares": "evaluate.observed_critical_mass",
    "empirical_critical_mass": "evaluate.observed_critical_mass",
    "EmpiricalCriticalMass": "evaluate.observed_critical_mass",
    "firth_logistic": "evaluate.observed_critical_mass",
    "llm_trajectories": "evaluate.trajectories",
    "theory_trajectories": "evaluate.trajectories",
    "compare_trajectories": "evaluate.trajectories",
    "TrajectoryComparison": "evaluate.trajectories",
    "plot_strategy_heatmap": "evaluate.trajectories",
    "plot_asymmetry": "evaluate.trajectories",
    "plot_flip_curves": "evaluate.trajectories",
    "plot_trajectories": "evaluate.trajectories",
    "plot_success_prediction": "evaluate.trajectories",
    "calibrate": "pipeline",
    "Calibration": "pipeline",
    "observed_summary": "pipeline",
    "find_ainorms": "pipeline",
    "fit_adoption": "fit.adoption",
    "score": "evaluate.scores",
    "group_size_curve": "prediction.group_size",
    "transfer_scores": "evaluate.transfer",
    "TransferScores": "evaluate.transfer",
    "tables_at_memory": "evaluate.transfer",
    "GroupSizeCurve": "prediction.group_size",
    "Scores": "evaluate.scores",
    "AdoptionFit": "fit.adoption",
    "ProbeFit": "prediction.from_probes",
    "ProbeCost": "prediction.from_probes",
    "ProbePrediction": "prediction.from_probes",
    "probe_cost": "prediction.from_probes",
    "probe_fit": "prediction.from_probes",
    "probe_predict": "prediction.from_probes",
    "ProbeSettings": "prediction.settings",
    "measure_jitter": "prediction.from_probes",
    "ProbeCheck": "evaluate.probe_comparison",
    "probe_check": "evaluate.probe_comparison",
    "read_attempts": "evaluate.probe_comparison",
    "read_population": "evaluate.probe_comparison",
}

#: Old paths of the modules the regroup into sub-packages moved (issue 30): ``normlab.calibration.scoring``
#: is the very module ``normlab.calibration.evaluate.scores``. ``prediction`` and ``tip`` need no entry: their
#: paths are packages now, exporting the names of the former modules.
_MOVED = {
    "inputs": "fit.inputs",
    "features": "fit.features",
    "empirical": "fit.empirical",
    "logit": "fit.logit",
    "hierarchical": "fit.hierarchical",
    "fit_kinds": "fit.registry",
    "bayes": "fit.model_choice",
    "posterior": "fit.posterior",
    "shipped": "fit.shipped",
    "run_effects": "fit.run_effects",
    "adoption": "fit.adoption",
    "prediction_design": "prediction.engine_kernel",
    "prediction_reference": "prediction.engine_reference",
    "prediction_result": "prediction.result",
    "prediction_common": "prediction.readings",
    "experiment": "prediction.experiment",
    "sensitivity": "prediction.sensitivity",
    "group_size": "prediction.group_size",
    "probe_prediction": "prediction.from_probes",
    "observed_critical_mass": "evaluate.observed_critical_mass",
    "scoring": "evaluate.scores",
    "rivals": "evaluate.rivals",
    "transfer": "evaluate.transfer",
    "adequacy": "evaluate.adequacy",
    "asymmetry": "evaluate.asymmetry",
    "compare": "evaluate.trajectories",
    "probe_comparison": "evaluate.probe_comparison",
    "tip_sources": "tip.sources",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
moved_modules(__name__, _MOVED)
