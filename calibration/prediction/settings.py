"""The settings of a prediction as value objects, checked when they are made with the messages of the
hand-written checks they replace: :class:`PredictSettings`, what :func:`normlab.calibration.predict` is
asked to simulate and read (population size, draws, runs, windows, committed counts, directions,
levels, the engine, experiment designs, run effects, name order); :class:`ProbeSettings`, those of a
prediction from probes alone (:func:`normlab.calibration.probe_predict`)."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from normlab._validate import Check, Int, NoneOr, check_int, validated

from ..fit.run_effects import RunEffects
from .readings import DESIGN_RUNS, FLIP_LEVEL

__all__ = ["PredictSettings", "ProbeSettings", "MAX_PREDICTED_AGENTS", "check_predicted_agents", "ORDER_MIXING"]

#: Largest population a prediction simulates: every committed count up to ``N - 1`` is played for
#: every posterior draw (the paper's populations hold at most 200 agents; beyond this the
#: simulations would run for days and their arrays outgrow a laptop's memory -- ``calibrate
#: --n-agents 10000000`` ended in a 5.7 GB allocation). Larger populations: the mean-field limit
#: (:func:`normlab.theory.strategy_mean_field`, :func:`normlab.calibration.group_size_curve`).
MAX_PREDICTED_AGENTS = 10_000


def check_predicted_agents(value, what: str = "n_agents") -> int:
    """``value`` as the ``N`` of a prediction: an integer in ``[2, MAX_PREDICTED_AGENTS]`` (a float
    read from a table must be a whole number), else one ``ValueError`` naming ``what``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
            or value != int(value):
        raise ValueError(f"{what} must be a whole number of agents; got {value!r}")
    n = int(value)
    if not 2 <= n <= MAX_PREDICTED_AGENTS:
        raise ValueError(f"{what} must be in [2, {MAX_PREDICTED_AGENTS:,}] for a prediction (every committed count up "
                         f"to N - 1 is simulated for every posterior draw; larger populations: the mean-field limit, "
                         f"group_size_curve); got {n:,}")
    return n


def _engine(value, name):
    if value not in ("kernel", "reference"):
        raise ValueError(f"{name} must be 'kernel' or 'reference'; got {value!r}")
    return value


def _run_effects(value, name):
    if value is None or value is False or isinstance(value, RunEffects) or (isinstance(value, str) and value == "fit"):
        return value
    raise TypeError(f"{name} must be 'fit', a RunEffects or None; got {value!r}")


def _n_agents(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int; got {type(value).__name__} {value!r}")
    return check_predicted_agents(value)


def _level(value, name):
    if not 0 < float(value) < 1:
        raise ValueError(f"{name} must be in (0, 1); got {value}")
    return float(value)


def _flip_level(value, name):
    if not 0 < float(value) <= 1:
        raise ValueError(f"{name} must be in (0, 1]; got {value}")
    return float(value)


@validated
@dataclass(frozen=True)
class PredictSettings:
    """What a prediction simulates and how it is read (see :func:`normlab.calibration.predict` for
    each field; the defaults are its defaults).

    Made by :func:`~normlab.calibration.predict` from its keywords, or directly and passed to the
    engine :func:`~normlab.calibration.prediction.api.run_prediction` (e.g. one object reused for
    several fits). The fields that need neither the fit nor each other are checked when the object is
    made, in the order :func:`predict` always checked them; the committed counts, directions,
    designs and name order are checked against the fit's pool and ``n_agents`` by the engine.
    """

    n_agents: int
    n_draws: int = 200
    within_rounds: int = 30
    n_runs_consensus: int = 40
    n_runs_flip: int = 16
    max_rounds: int = 200
    committed: object = None
    directions: object = None
    consensus: bool = True
    strength: bool = True
    assume_monotone: bool = False
    level: float = 0.95
    flip_level: float = FLIP_LEVEL
    design_runs: int = DESIGN_RUNS
    max_round: int | None = None
    engine: str = "kernel"
    design: object = None
    run_effects: object = "fit"
    order_bias: float = 0.0
    name_order: object = ("independent", "shared")

    #: Checked in this order when the object is made (the order :func:`predict` reports them in).
    _parameter_constraints = {
        "engine": Check(_engine),
        "run_effects": Check(_run_effects),
        "n_agents": Check(_n_agents),
        "n_draws": Int(1),
        "within_rounds": Int(3),
        "n_runs_consensus": Int(1),
        "n_runs_flip": Int(1),
        "max_rounds": Int(3),
        "level": Check(_level),
        "flip_level": Check(_flip_level),
        "design_runs": Int(1),
        "max_round": NoneOr(Int(3)),
    }


# ----------------------------------------------------------------------------- prediction from probes
#: How the two name orders of an exact probe are mixed into table draws (:class:`~normlab.calibration.ProbeFit`).
ORDER_MIXING = ("average", "dirichlet")


def _probe_agents(value, name):
    return check_predicted_agents(check_int(value, name, 2))


def _order_mixing(value, name):
    if value not in ORDER_MIXING:
        raise ValueError(f"{name} must be one of {ORDER_MIXING}; got {value!r}")
    return value


@validated
@dataclass(frozen=True)
class ProbeSettings:
    """What :func:`~normlab.calibration.probe_predict` probes and predicts (see it for each field; the
    defaults are its defaults): made by it from its keywords, or directly and passed to the engine
    :func:`~normlab.calibration.prediction.from_probes.run_probe_prediction`.

    ``n_agents``, ``memory``, ``n_draws``, ``jitter_states`` and ``order_mixing`` are checked when the
    object is made, before any request (in the order :func:`probe_predict` always checked them); the
    prediction's sizes (``n_runs_consensus`` ... ``strength``) by the prediction, after the probe, as
    always.
    """

    n_agents: int
    memory: int
    n_draws: int = 200
    jitter_states: int = 16
    order_mixing: str = "average"
    underlying: bool = True
    template: object = "main"
    n_runs_consensus: int = 40
    n_runs_flip: int = 16
    within_rounds: int = 30
    max_rounds: int = 200
    max_round: int | None = None
    strength: bool = True

    #: Checked in this order when the object is made (the order :func:`probe_predict` reports them in).
    _parameter_constraints = {
        "n_agents": Check(_probe_agents),
        "memory": Int(1),
        "n_draws": Int(1),
        "jitter_states": Int(0),
        "order_mixing": Check(_order_mixing),
    }
