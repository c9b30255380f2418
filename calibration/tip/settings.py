"""The settings of an adaptive critical-mass search (:func:`normlab.calibration.tip`) in one value
object: when to stop, what to fit, how to choose the next batch, the budget; checked when it is made
with the messages of the hand-written checks they replace."""

from __future__ import annotations

from dataclasses import dataclass

from normlab._validate import Check, Int, NoneOr, validated

from ..fit.registry import fit_family
from ..prediction.experiment import PAPER_RUNS

__all__ = ["TipSettings", "STRATEGIES"]

#: How the next batch is chosen (see :mod:`normlab.calibration.tip.search`).
STRATEGIES = ("eig", "half")


def _open_unit(value, name):
    if not 0 < float(value) < 1:
        raise ValueError(f"{name} must be in (0, 1); got {value}")
    return value


def _strategy(value, name):
    if value not in STRATEGIES:
        raise ValueError(f"{name} must be one of {list(STRATEGIES)}; got {value!r}")
    return value


def _fit_model(value, name):
    fit_family(value, name)
    return value


@validated
@dataclass(frozen=True)
class TipSettings:
    """What :func:`~normlab.calibration.tip` is asked to do (see it for each field; the defaults are
    its defaults): made by :func:`tip` from its keywords, or directly and passed to the engine
    :func:`~normlab.calibration.tip.search.run_tip`.

    Every field but ``confirm`` is checked when the object is made, in the order :func:`tip` always
    checked them; ``confirm`` is checked by the engine after the prior and the log (that order too).
    """

    target: float = 0.9
    level: float = 0.95
    batch: int = 2
    n_draws: int = 200
    strategy: str = "eig"
    fit_model: str = "empirical"
    run_effects: bool = True
    max_runs: int | None = None
    max_steps: int = 60
    confirm: int = PAPER_RUNS
    tolerance: int = 1

    #: Checked in this order when the object is made (the order :func:`tip` reports them in).
    _parameter_constraints = {
        "target": Check(_open_unit),
        "level": Check(_open_unit),
        "batch": Int(1),
        "n_draws": Int(20),
        "strategy": Check(_strategy),
        "fit_model": Check(_fit_model),
        "max_runs": NoneOr(Int(0)),
        "max_steps": Int(1),
        "tolerance": Int(0),
    }
