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
  one :class:`FitFamily` module, one registration line; see :mod:`.fit_kinds`)
- asymmetry: :func:`strategy_asymmetry` (Flint Ashery et al. 2025, Table 1)
- prediction: :func:`predict` -> :class:`Prediction`; :func:`calibrate` (the whole pipeline,
  also ``normlab calibrate``)
- observed: :func:`empirical_critical_mass` (published, per_run and end_of_run critical masses),
  :func:`run_flips`, :func:`challenger_shares`
- scores: :func:`score` (Brier and log scores of flips and consensus winners beside the rivals
  of :mod:`.rivals` on the same runs -- direction rule, committed-fraction logistic, base rate,
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

from normlab._lazy import lazy_exports

_EXPORTS = {
    "StateCounts": "inputs",
    "counts_from_log": "inputs",
    "counts_from_probes": "inputs",
    "select_runs": "inputs",
    "state_labels": "inputs",
    "StrategyFit": "posterior",
    "load_fit": "posterior",
    "shipped_fits": "shipped",
    "FitFamily": "posterior",
    "posterior_predictive_check": "posterior",
    "FitKind": "fit_kinds",
    "FIT_KINDS": "fit_kinds",
    "MODELS": "fit_kinds",
    "fit_strategy": "fit_kinds",
    "fit_kind_names": "fit_kinds",
    "register_fit_kind": "fit_kinds",
    "unregister_fit_kind": "fit_kinds",
    "fit_empirical": "empirical",
    "fit_logit": "logit",
    "select_decay": "logit",
    "fit_hierarchical": "hierarchical",
    "compare_models": "bayes",
    "ModelComparison": "bayes",
    "log_predictive_density": "bayes",
    "design_matrix": "features",
    "to_logit_strategy": "features",
    "strategy_asymmetry": "asymmetry",
    "AsymmetryResult": "asymmetry",
    "predict": "prediction",
    "Prediction": "prediction",
    "ExperimentDesign": "experiment",
    "experiment_designs": "experiment",
    "RunEffects": "run_effects",
    "fit_run_effects": "run_effects",
    "StateSensitivity": "sensitivity",
    "state_sensitivity": "sensitivity",
    "CriticalMassCheck": "critical_mass_check",
    "check_critical_masses": "critical_mass_check",
    "Adequacy": "adequacy",
    "check_adequacy": "adequacy",
    "PairAgreement": "adequacy",
    "pair_agreement": "adequacy",
    "TipResult": "tip",
    "RunSource": "tip_sources",
    "ArchiveReplay": "tip_sources",
    "LLMSource": "tip_sources",
    "table_draws": "prediction",
    "run_flips": "observed_critical_mass",
    "challenger_shares": "observed_critical_mass",
    "empirical_critical_mass": "observed_critical_mass",
    "EmpiricalCriticalMass": "observed_critical_mass",
    "firth_logistic": "observed_critical_mass",
    "llm_trajectories": "compare",
    "theory_trajectories": "compare",
    "compare_trajectories": "compare",
    "TrajectoryComparison": "compare",
    "plot_strategy_heatmap": "compare",
    "plot_asymmetry": "compare",
    "plot_flip_curves": "compare",
    "plot_trajectories": "compare",
    "plot_success_prediction": "compare",
    "calibrate": "pipeline",
    "Calibration": "pipeline",
    "observed_summary": "pipeline",
    "find_ainorms": "pipeline",
    "fit_adoption": "adoption",
    "score": "scoring",
    "group_size_curve": "group_size",
    "transfer_scores": "transfer",
    "TransferScores": "transfer",
    "tables_at_memory": "transfer",
    "GroupSizeCurve": "group_size",
    "Scores": "scoring",
    "AdoptionFit": "adoption",
    "ProbeFit": "probe_prediction",
    "ProbeCost": "probe_prediction",
    "ProbePrediction": "probe_prediction",
    "probe_cost": "probe_prediction",
    "probe_fit": "probe_prediction",
    "probe_predict": "probe_prediction",
    "measure_jitter": "probe_prediction",
    "ProbeCheck": "probe_comparison",
    "probe_check": "probe_comparison",
    "read_attempts": "probe_comparison",
    "read_population": "probe_comparison",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
