"""Predicting populations from strategy tables: the two engines, the :class:`Prediction` result and
its readings, experiment designs, state sensitivity, group size and prediction from probes alone.

``normlab.calibration.prediction`` was one module before the regroup: its names are exported here
(lazily), so ``from normlab.calibration.prediction import predict`` keeps working. Imports ``fit/``
only."""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "predict": "api",
    "run_prediction": "api",
    "PredictSettings": "settings",
    "check_predicted_agents": "settings",
    "MAX_PREDICTED_AGENTS": "settings",
    "Prediction": "result",
    "ProbeSettings": "settings",
    "table_draws": "readings",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
