"""What an agent is shown and how its answer is drawn: :class:`Sampling` (the prompt template and its
payoffs, the wrap, the answer parser, the sampler sent, re-asks, the prefill, exact mode's
logprobs), a frozen value checked field by field with the runner's own messages.

:func:`~normlab.llm_runs.runner.make_settings`, :func:`~normlab.llm_runs.run_game` and the probes keep
these as keywords (``template=``, ``temperature=``, ...) and check them in the same order;
``normlab.llm_runs.core.cli_kit.sampling(args)`` gives them as a keyword dict
(:meth:`Sampling.from_kwargs` makes the object).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

import numpy as np

from normlab._validate import Check, Int, NoneOr, Options, Real, validated

from .exact import MULTI_TOKEN_MODES
from .prompts import PARSERS, load_template, check_wrap

__all__ = ["Sampling", "SAMPLING_KEYS", "UNBOUNDED", "check_reasks"]

#: Re-ask policy value of the paper (re-ask until a pool name appears).
UNBOUNDED = "unbounded"


def _check_float(v, name, low=None) -> float:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise TypeError(f"{name} must be a finite number; got {v!r}")
    v = float(v)
    if low is not None and v < low:
        raise ValueError(f"{name} must be >= {low}; got {v}")
    return v


def _check_unit(v, name) -> float | None:
    if v is None:
        return None
    v = _check_float(v, name, 0.0)
    if v > 1:
        raise ValueError(f"{name} must be in [0, 1] (or None to omit it); got {v}")
    return v


def check_reasks(max_reasks) -> int | str:
    """``"unbounded"`` (the paper: re-ask until a pool name appears) or an int cap in 0..100.

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` / ``data-era/simulation_module.ipynb`` (``get_response``
    loops until a pool name appears).
    """
    if isinstance(max_reasks, str):
        if max_reasks.strip().lower() == UNBOUNDED:
            return UNBOUNDED
        try:
            max_reasks = int(max_reasks)
        except ValueError:
            raise ValueError(f"max_reasks (--reask) must be 'unbounded' or an int in 0..100; got {max_reasks!r}") from None
    if isinstance(max_reasks, bool) or not isinstance(max_reasks, (int, np.integer)):
        raise TypeError(f"max_reasks (--reask) must be 'unbounded' or an int in 0..100; got {max_reasks!r}")
    if not 0 <= int(max_reasks) <= 100:
        raise ValueError(f"max_reasks (--reask) must be 'unbounded' or an int in 0..100; got {max_reasks!r}")
    return int(max_reasks)


def _template(value, name):
    return load_template(value)


def _payoffs(value, name):
    if not (isinstance(value, (tuple, list)) and len(value) == 2):
        raise TypeError(f"payoffs must be (success, failure); got {value!r}")
    return _check_float(value[0], "payoffs[0]"), _check_float(value[1], "payoffs[1]")


def _reasks(value, name):
    return check_reasks(value)


def _prefill(value, name):
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"prefill must be True, False or None; got {value!r}")
    return value


def _flag(value, name):
    return bool(value)


@validated
@dataclass(frozen=True)
class Sampling:
    """The prompt and the sampler of an LLM naming game (see :func:`~normlab.llm_runs.run_game`
    for each field).

    Parameters
    ----------
    template : str, path, dict or PromptTemplate
        Loaded when the object is made (kept as the :class:`PromptTemplate`).
    payoffs : (float, float)
        Success / failure payoffs shown in the prompt.
    wrap : {"chat", "raw-llama3", "raw-llama2"}
    parse : {"normlab", "authors"}
    temperature : float
    top_k : int, optional
    top_p, min_p : float or None
    max_tokens : int
    top_logprobs : int
        Exact mode: alternatives per position (1..100).
    max_reasks : int or "unbounded"
    prefill : bool, optional
        ``None``: the mode's default (:meth:`DecisionMode.default_prefill`).
    multi_token : {"expand", "first_token"}
    case_sensitive : bool
    """

    template: object = "main"
    payoffs: tuple = (100, -50)
    wrap: str = "chat"
    parse: str = "normlab"
    temperature: float = 0.5
    top_k: int | None = 10
    top_p: float | None = 1.0
    min_p: float | None = 0.0
    max_tokens: int = 6
    top_logprobs: int = 20
    max_reasks: int | str = 2
    prefill: bool | None = None
    multi_token: str = "expand"
    case_sensitive: bool = False

    # the order of the runner's checks (make_settings: the first bad setting is the one reported)
    _parameter_constraints = {
        "wrap": Check(lambda v, n: check_wrap(v)),
        "parse": Options(*PARSERS),
        "template": Check(_template),
        "payoffs": Check(_payoffs),
        "temperature": Real(0.0),
        "top_k": NoneOr(Int(1)),
        "max_tokens": Int(1),
        "top_logprobs": Int(1, 100),
        "max_reasks": Check(_reasks),
        "top_p": Check(_check_unit),
        "min_p": Check(_check_unit),
        "multi_token": Options(*MULTI_TOKEN_MODES),
        "prefill": Check(_prefill),
        "case_sensitive": Check(_flag),
    }

    @classmethod
    def from_kwargs(cls, kwargs: dict) -> "Sampling":
        """A :class:`Sampling` from keyword arguments (``cli_kit.sampling(args)``, a notebook's
        dict); a key that names no field is a ``TypeError``."""
        unknown = sorted(set(kwargs) - set(SAMPLING_KEYS))
        if unknown:
            raise TypeError(f"unexpected sampling setting(s) {unknown}; allowed: {list(SAMPLING_KEYS)}")
        return cls(**kwargs)

    def to_kwargs(self) -> dict:
        """The keyword arguments of :func:`~normlab.llm_runs.run_game` this object stands for."""
        return {k: getattr(self, k) for k in SAMPLING_KEYS}


#: The fields of :class:`Sampling` (the sampling keywords of ``run_game``, ``make_settings`` and the probes).
SAMPLING_KEYS = tuple(f.name for f in fields(Sampling))
