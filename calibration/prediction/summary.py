"""The JSON summary of a calibration -- what ``normlab calibrate --json`` and ``normlab predict
--probe --json`` print -- built from a fit, its prediction and the settings of the run."""

from __future__ import annotations

from normlab._display import plain

from ..fit.run_effects import RunEffects

__all__ = ["calibration_summary"]


def calibration_summary(fit, prediction, settings: dict, *, observed: dict | None = None,
                        sensitivity: dict | None = None, scores=None) -> dict:
    """The JSON object of :meth:`normlab.calibration.Calibration.summary` (and the base of
    :meth:`normlab.calibration.ProbePrediction.summary`).

    Parameters
    ----------
    fit : StrategyFit
    prediction : Prediction
    settings : dict
        ``llm``, ``source``, ``fit_on``, ``asymmetry`` and ``seconds`` (missing keys print null).
    observed : dict, optional
        See :func:`normlab.calibration.observed_summary` (default: empty).
    sensitivity : dict, optional
        ``name -> StateSensitivity`` (default: none).
    scores : Scores, optional

    Returns
    -------
    dict
        Plain Python values.
    """
    s = prediction.summary()
    fs = fit.summary()
    out = {
        "llm": settings.get("llm"),
        "source": settings.get("source"),
        "names": s["names"],
        "memory": s["memory"],
        "n_agents": s["n_agents"],
        "fit_on": settings.get("fit_on"),
        "model": fit.kind,
        "p_consensus": s["p_consensus"],
        "p_no_consensus": s["p_no_consensus"],
        "p_consensus_interval": s["p_consensus_interval"],
        "rounds_to_95": s["rounds_to_95"],
        "consensus_rounds": s["consensus_rounds"],
        "critical_mass": s["critical_mass"],
        "relative_strength": s["relative_strength"],
        "within_rounds": s["within_rounds"],
        "draws": s["draws"],
        "level": s["level"],
        "fit": {"runs": fs["meta"].get("source", {}).get("n_runs"), "decisions": fs["decisions"],
                "states_observed": fs["states_observed"], "states_total": fs["states_total"],
                "decay": fs["decay"], "diagnostics": fs["diagnostics"]},
        "run_effects": RunEffects.from_dict(fit.meta.get("run_effects")).summary(),
        "designs": {f"overturn_{d['majority']}": d for d in prediction.settings.get("designs") or ()},
        "asymmetry": settings.get("asymmetry"),
        "decisive_states": {k: v.summary(k=8) for k, v in (sensitivity or {}).items()},
        "observed": {} if observed is None else observed,
        "scores": None if scores is None else scores.summary(),
        "seconds": settings.get("seconds"),
    }
    return plain(out)
