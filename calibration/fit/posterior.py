"""A fitted strategy with its uncertainty: posterior draws of the whole table p(name | state).

:class:`StrategyFit` is what every fitter returns (:func:`normlab.calibration.fit_empirical`,
:func:`normlab.calibration.fit_logit`, :func:`normlab.calibration.fit_hierarchical`, or any fit
kind by name: :func:`normlab.calibration.fit_strategy`) and what the predictions consume. It
keeps the data (the counts per memory state) and *sufficient* parameters to draw complete
tables, in a frozen dataclass its family owns (``fit.params``) -- ``prior`` (the Dirichlet table,
``EmpiricalParams``), ``decay``, ``coef_names`` and ``coef_draws`` (the feature models,
``LogitParams``), ``tau_draws`` (the state-effect scale of the hierarchical model,
``HierarchicalParams``) -- and asks the *family* of its ``kind`` (:class:`FitFamily`, registered in
:mod:`normlab.calibration.fit.registry`) for everything that depends on the model: draws of the
table, its mean, the description of the parameters, their validation and their save/load. The
families and how they draw:

- ``empirical`` (:mod:`~normlab.calibration.fit.empirical`): an independent Dirichlet per state
  (``Dirichlet(counts + prior)``; an unseen state gets the flat prior, i.e. "anything goes").
- ``logit`` / ``logit_symmetric`` (:mod:`~normlab.calibration.fit.logit`): posterior draws of the
  feature coefficients (:mod:`normlab.calibration.fit.features`); a draw is ``sigmoid(X @ beta)``.
- ``hierarchical`` (:mod:`~normlab.calibration.fit.hierarchical`): posterior draws of ``beta`` and of
  the state-effect scale ``tau``, plus the counts; a draw samples every state effect from its
  exact one-dimensional conditional -- what makes a fit small enough to ship (:func:`load_fit`).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8.
"""

from __future__ import annotations

import json
import math
import os
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, legend_outside, load_result, new_axes, plain, plotting, save_result, short_repr, error_bars
from normlab._rng import as_generator, as_seed_sequence
from normlab._validate import Check, check_int, validated
from normlab.llm_runs.probes import check_table_size
from normlab.schema import validate_names
from normlab.theory import StrategyTable
from normlab.theory.strategies import n_states
from normlab.user_files import read_user_json, write_user_text

from .features import design_matrix
from .inputs import StateCounts, _state_tables, state_labels
from .registry import MODELS, fit_family
from .shipped import shipped_document, shipped_fits

__all__ = ["StrategyFit", "FitFamily", "FitParams", "GenericParams", "KINDS", "load_fit", "shipped_fits",
           "posterior_predictive_check"]

#: The built-in fit kinds (:data:`normlab.calibration.fit.registry.MODELS`).
KINDS = MODELS
FORMAT_VERSION = 1
_COEF_COLUMNS = ["parameter", "kind", "mean", "sd", "low", "high"]


# ----------------------------------------------------------------------------- a family's parameters
def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


#: The parameter entries of a fit document (format 1), in their order, and the value a family without
#: that parameter reads and writes (every document holds all five, whatever its kind).
PARAMETER_DEFAULTS = {"prior": 1.0, "decay": float("nan"), "coef_names": (),
                      "coef_draws": _read_only(np.zeros((0, 0))), "tau_draws": _read_only(np.zeros(0))}


def _default(name: str):
    return PARAMETER_DEFAULTS[name]


def _is_default(name: str, value) -> bool:
    """``value`` is what a fit without the parameter ``name`` holds (so passing it says nothing)."""
    if name.endswith("_draws") or name == "coef_names":
        return np.size(value) == 0
    if name == "decay":
        return isinstance(value, float) and math.isnan(value)
    return value == PARAMETER_DEFAULTS[name]


def _positive_prior(value, name):
    if not value > 0:
        raise ValueError(f"{name} must be > 0; got {value}")
    return value


class FitParams:
    """The parameters of a fit, as its family declares them: the base of each family's frozen
    dataclass (:class:`~normlab.calibration.fit.empirical.EmpiricalParams`,
    :class:`~normlab.calibration.fit.logit.LogitParams`,
    :class:`~normlab.calibration.fit.hierarchical.HierarchicalParams`; :class:`GenericParams` for a
    family that declares none). Draw arrays are stored as read-only float arrays (``tau_draws`` flat).

    A fit document (format 1) holds the five entries of :data:`PARAMETER_DEFAULTS` for every kind: a
    family's parameters write theirs and the defaults for the others (:meth:`to_dict`), and read
    their own back (:meth:`from_dict`), so documents keep their keys and bytes.
    """

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if f.name == "coef_draws":
                a = np.asarray(self.coef_draws, dtype=float)
            elif f.name == "tau_draws":
                a = np.asarray(self.tau_draws, dtype=float).reshape(-1)
            else:
                continue
            a.setflags(write=False)
            object.__setattr__(self, f.name, a)

    @classmethod
    def names(cls) -> tuple:
        """The parameters this family has."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def get(self, name: str):
        """The parameter ``name``, or the value of a fit without it (:data:`PARAMETER_DEFAULTS`)."""
        return getattr(self, name) if name in self.names() else _default(name)

    def to_dict(self) -> dict:
        """The entries of a fit document (format 1) between ``memory`` and ``counts``."""
        decay = self.get("decay")
        return {
            "prior": self.get("prior"),
            "decay": None if np.isnan(decay) else decay,
            "coef_names": list(self.get("coef_names")),
            "coef_draws": np.round(self.get("coef_draws"), 5).tolist(),
            "tau_draws": np.round(self.get("tau_draws"), 5).tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "FitParams":
        """Inverse of :meth:`to_dict` (the entries of parameters this family does not have are ignored)."""
        ncoef = len(d.get("coef_names", []))
        every = dict(
            prior=float(d.get("prior", 1.0)),
            decay=float("nan") if d.get("decay") is None else float(d["decay"]),
            coef_names=tuple(d.get("coef_names", [])),
            coef_draws=np.asarray(d.get("coef_draws", []), dtype=float).reshape(-1, ncoef) if ncoef else np.zeros((0, 0)),
            tau_draws=np.asarray(d.get("tau_draws", []), dtype=float),
        )
        return cls(**{k: v for k, v in every.items() if k in cls.names()})


@validated
@dataclass(frozen=True)
class GenericParams(FitParams):
    """The parameters of a family that declares none of its own (``FitFamily.Params``): the five
    entries of a fit document, as every fit held them before each family owned its parameters."""

    prior: float = 1.0
    decay: float = float("nan")
    coef_names: tuple = ()
    coef_draws: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    tau_draws: np.ndarray = field(default_factory=lambda: np.zeros(0))

    _parameter_constraints = {"prior": Check(_positive_prior)}


def _fit_params(family, kind: str, params, given: dict) -> FitParams:
    """The parameters of a new fit: ``params`` (the family's dataclass, or None) with the parameters
    given by name (``prior=``, ``coef_draws=`` ...: the keywords of :class:`StrategyFit` before each family
    owned its parameters) put in; a name the family does not have must hold its default."""
    P = family.Params
    if params is None:
        values = {}
    elif isinstance(params, P):
        values = {n: getattr(params, n) for n in P.names()}
    else:
        raise TypeError(f"params of a {kind} fit must be a {P.__name__}; got {type(params).__name__}")
    for name, v in given.items():
        if name in values or name in P.names():
            values[name] = v
        elif not _is_default(name, v):
            raise TypeError(f"a fit of kind {kind!r} has no parameter {name!r} "
                            f"(its parameters: {', '.join(P.names()) or 'none'})")
    if params is not None and not given:
        return params
    return P(**values)


class FitFamily:
    """The interface of a fit kind: one family of strategy models, one module, one registration
    line in :mod:`normlab.calibration.fit.registry`.

    :class:`StrategyFit` holds the data and the family's parameters (:attr:`Params`, a frozen
    dataclass the family owns: ``fit.params``; :class:`GenericParams` unless the family declares its
    own) and calls its family for everything the model decides. A family implements :meth:`fit` and
    :meth:`sample_tables`; every other method has a default (a Monte Carlo mean, no coefficients, the
    parameters saved by :meth:`FitParams.to_dict`). ``fit`` is the ``fit`` argument of the other
    methods.
    """

    #: A conjugate posterior: no stored draws (``n_draws`` is inf), and held-out scores use the
    #: exact posterior mean.
    conjugate = False
    #: :meth:`mean_table` is exact (otherwise a Monte Carlo mean: ``to_frame`` uses its draws').
    exact_mean = False
    #: Coefficients on the memory features of :mod:`normlab.calibration.fit.features` (``to_logit_strategy``,
    #: feature-based memory transfer).
    features = False
    #: State effects with a scale ``tau`` (memory transfer ``"prior"``).
    state_effects = False
    #: Two names only (the feature basis is that of ``W = 2``).
    two_names_only = False
    #: Fitted by PyMC's NUTS: :meth:`fit` takes ``draws``, ``tune``, ``chains``, ``cores``,
    #: ``target_accept``, ``progress`` (``normlab calibrate`` passes its sampler flags).
    uses_nuts = False
    #: The family's parameters: a frozen dataclass derived from :class:`FitParams` (``StrategyFit.params``).
    Params = GenericParams

    def fit(self, counts, *, rng=None, **kwargs):
        """Fit the family to a :class:`~normlab.calibration.StateCounts` (``meta=`` is stored in
        the fit); returns a :class:`StrategyFit` of this kind."""
        raise NotImplementedError

    def check(self, fit) -> None:
        """Validate the parameters of ``fit`` (one-line ``ValueError``; called on construction)."""

    def n_draws(self, fit):
        """Stored posterior draws (``inf`` for a conjugate family)."""
        return math.inf if self.conjugate else int(fit.coef_draws.shape[0])

    def sample_tables(self, fit, n_draws: int, g) -> np.ndarray:
        """``n_draws`` posterior draws of the whole table, shape ``(n_draws, n_states, W)``, from
        the generator ``g``."""
        raise NotImplementedError

    def sample_tables_indexed(self, fit, n_draws: int, g):
        """``(tables, index)``: :meth:`sample_tables` and, per table, the stored posterior draw it is
        (None for a family whose draws are not stored ones; default)."""
        return self.sample_tables(fit, n_draws, g), None

    def mean_table(self, fit, n_draws: int, rng) -> np.ndarray:
        """The posterior-mean table, shape ``(n_states, W)`` (default: the mean of ``n_draws``
        draws seeded by ``rng``)."""
        return fit.sample_tables(n_draws, rng=rng).mean(axis=0)

    def empty_memory(self, fit):
        """Posterior mean of ``p(name | empty memory)`` (the short ``repr``)."""
        return fit.mean_table().table[0]

    def coef_frame(self, fit, level: float) -> pd.DataFrame:
        """Posterior summary of the parameters: ``parameter``, ``kind``, ``mean``, ``sd``, ``low``,
        ``high`` (default: none)."""
        return pd.DataFrame(columns=_COEF_COLUMNS)

    def to_logit_strategy(self, fit):
        """The posterior-mean feature model (families with :attr:`features`)."""
        raise ValueError(f"an {fit.kind} fit has no feature coefficients")

    def thin(self, fit, n: int):
        """A copy keeping at most ``n`` evenly spaced stored draws (what is shipped; default: ``fit``)."""
        return fit

    def to_dict(self, fit) -> dict:
        """The parameters as JSON (the entries of :meth:`StrategyFit.to_dict` between ``memory``
        and ``counts``; default: :meth:`FitParams.to_dict`)."""
        return fit.params.to_dict()

    def from_dict(self, d: dict) -> dict:
        """Inverse of :meth:`to_dict`: :class:`StrategyFit` keyword arguments (default: ``params``,
        read by :meth:`FitParams.from_dict` of :attr:`Params`)."""
        return {"params": self.Params.from_dict(d)}



def table_shape(names, memory, what: str = "a fitted table") -> tuple[tuple[str, ...], int]:
    """The name pool and memory length of a table read from a file (a fit's JSON, a saved result),
    checked before anything is allocated: two or more distinct names, ``memory`` an int >= 1, and
    at most :data:`~normlab.llm_runs.probes.MAX_TABLE_STATES` memory states (``memory = -3`` or
    ``30`` is one line, not a crash or an exponential allocation)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or len(names) < 2:
        raise ValueError(f"{what} needs 'names': a list of two or more names; got {names!r}"[:200])
    names = validate_names([str(n) if isinstance(n, str) else n for n in names])
    if isinstance(memory, float) and memory.is_integer():
        memory = int(memory)
    try:
        H = check_int(memory, "memory", low=1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {exc}") from None
    check_table_size(len(names), H)
    return names, H

@dataclass(frozen=True, init=False)
class StrategyFit:
    """A fitted strategy table with posterior uncertainty.

    Attributes
    ----------
    kind : str
        A registered fit kind (:func:`normlab.calibration.fit.registry.fit_kind_names`); its
        family (:attr:`family`) draws, describes and saves the fit.
    names : tuple of str
    memory : int
    counts : numpy.ndarray, shape (n_states, W)
        Training counts per state (the data the fit saw).
    params : FitParams
        The parameters, a frozen dataclass of the kind's family (``family.Params``:
        :class:`~normlab.calibration.fit.empirical.EmpiricalParams` ``(prior)``,
        :class:`~normlab.calibration.fit.logit.LogitParams` ``(decay, coef_names, coef_draws)``,
        :class:`~normlab.calibration.fit.hierarchical.HierarchicalParams` ``(+ tau_draws)``). A fit is
        made with ``params=`` or with the parameters by name (``prior=``, ``coef_draws=`` ...), and each
        is read as an attribute (a parameter the family does not have reads as the default below):
    prior : float
        Dirichlet concentration per name (``empirical``; 1.0 otherwise).
    decay : float
        Recency decay of the features (``logit``/``hierarchical``; NaN otherwise).
    coef_names : tuple of str
    coef_draws : numpy.ndarray, shape (D, n_coef)
        Posterior draws of the feature coefficients (empty for ``empirical``).
    tau_draws : numpy.ndarray, shape (D,)
        Posterior draws of the state-effect scale (``hierarchical``; empty otherwise).
    diagnostics : dict
        Sampler diagnostics (max R-hat, min ESS, divergences...); empty for ``empirical``.
    meta : dict
        Provenance: data source, model, runs, settings.
    stored_mean : numpy.ndarray, shape (n_states, W), optional
        The result of ``mean_table()`` with its default arguments, computed once and stored
        (the shipped hierarchical fits carry it: the Monte Carlo mean costs seconds); empty if
        not stored.

    References
    ----------
    A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1,
    Fig. S8 (strategy tables), Methods.
    """

    kind: str
    names: tuple
    memory: int
    counts: np.ndarray
    params: FitParams = None
    diagnostics: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    stored_mean: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def __init__(self, kind: str, names, memory: int, counts, *, params: FitParams | None = None,
                 diagnostics: dict | None = None, meta: dict | None = None, stored_mean=None, **parameters):
        unknown = sorted(set(parameters) - set(PARAMETER_DEFAULTS))
        if unknown:
            raise TypeError(f"StrategyFit.__init__() got an unexpected keyword argument {unknown[0]!r}")
        family = fit_family(kind)
        names = tuple(names)
        W = len(names)
        c = np.asarray(counts, dtype=float)
        if c.shape != (n_states(W, int(memory)), W):
            raise ValueError(f"counts must have shape (n_states, W) = ({n_states(W, int(memory))}, {W}); got {c.shape}")
        for k, v in (("kind", kind), ("names", names), ("memory", int(memory)), ("counts", c),
                     ("params", _fit_params(family, kind, params, parameters)),
                     ("diagnostics", {} if diagnostics is None else diagnostics), ("meta", {} if meta is None else meta)):
            object.__setattr__(self, k, v)
        family.check(self)
        sm = np.asarray(np.zeros((0, 0)) if stored_mean is None else stored_mean, dtype=float)
        if sm.size and sm.shape != c.shape:
            raise ValueError(f"stored_mean must have the shape of counts {c.shape}; got {sm.shape}")
        for a in (c, sm):
            a.setflags(write=False)
        object.__setattr__(self, "stored_mean", sm)

    # ----------------------------------------------------------------- the parameters by name
    @property
    def prior(self) -> float:
        return self.params.get("prior")

    @property
    def decay(self) -> float:
        return self.params.get("decay")

    @property
    def coef_names(self) -> tuple:
        return self.params.get("coef_names")

    @property
    def coef_draws(self) -> np.ndarray:
        return self.params.get("coef_draws")

    @property
    def tau_draws(self) -> np.ndarray:
        return self.params.get("tau_draws")

    # ----------------------------------------------------------------- basic views
    @property
    def family(self) -> FitFamily:
        """The family of :attr:`kind` (:mod:`normlab.calibration.fit.registry`)."""
        return fit_family(self.kind)

    @property
    def n_names(self) -> int:
        return len(self.names)

    @property
    def n_states(self) -> int:
        return self.counts.shape[0]

    @property
    def n_draws(self) -> int:
        """Stored posterior draws (``inf`` for a conjugate model: the empirical table)."""
        return self.family.n_draws(self)

    @property
    def observed(self) -> np.ndarray:
        return self.counts.sum(axis=1) > 0

    def design(self) -> np.ndarray:
        return design_matrix(self.memory, self.decay)

    # ----------------------------------------------------------------- draws
    def sample_tables(self, n_draws: int, *, rng=None, return_index: bool = False):
        """Posterior draws of the whole table.

        Parameters
        ----------
        n_draws : int
            Number of tables. Feature-based fits cycle through their stored coefficient draws
            (in a random order) when more are asked than stored.
        rng : None, int, SeedSequence or Generator, optional
        return_index : bool, optional
            Also return which stored posterior draw each table is (None for a family whose draws are
            not stored ones, e.g. ``empirical``): a joint fit's run effects
            (``meta["run_effects"]``) are paired with its table draws by it.

        Returns
        -------
        numpy.ndarray, shape (n_draws, n_states, W)
            ``p[d, s, n]``: probability of name ``n`` in state ``s`` under draw ``d`` (with
            ``return_index``: ``(tables, index)``).
        """
        if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise ValueError(f"n_draws must be an int >= 1; got {n_draws!r}")
        tabs, index = self.family.sample_tables_indexed(self, int(n_draws), as_generator(rng))
        return (tabs, index) if return_index else tabs

    def tables(self, n_draws: int, *, rng=None, return_index: bool = False):
        """Posterior draws as :class:`normlab.theory.strategies.StrategyTable` objects (with
        ``return_index``: ``(tables, index)`` as :meth:`sample_tables`)."""
        arr, index = self.sample_tables(n_draws, rng=rng, return_index=True)
        tabs = [StrategyTable(t, memory=self.memory, names=self.names) for t in arr]
        return (tabs, index) if return_index else tabs

    def mean_table(self, *, n_draws: int = 400, rng=0):
        """Posterior-mean table (exact for ``empirical``/``logit``; Monte Carlo with ``n_draws``
        conditional draws and a fixed seed for ``hierarchical``, read from :attr:`stored_mean`
        when the fit carries it and the arguments are the defaults).

        Returns
        -------
        normlab.theory.strategies.StrategyTable
        """
        return StrategyTable(self.family.mean_table(self, n_draws, rng), memory=self.memory, names=self.names)

    def with_stored_mean(self) -> "StrategyFit":
        """A copy carrying ``mean_table()`` (default arguments) in :attr:`stored_mean`."""
        import dataclasses

        plain = dataclasses.replace(self, stored_mean=np.zeros((0, 0)))
        return dataclasses.replace(self, stored_mean=plain.mean_table().table)

    def to_logit_strategy(self):
        """The posterior-mean feature model as a :class:`~normlab.theory.strategies.LogitStrategy`
        (feature-based fits only; the hierarchical state effects are dropped)."""
        return self.family.to_logit_strategy(self)

    # ----------------------------------------------------------------- tidy output
    def to_frame(self, *, n_draws: int = 400, level: float = 0.95, rng=0) -> pd.DataFrame:
        """Posterior summary of every (state, name).

        Parameters
        ----------
        n_draws : int, optional
            Draws used for the intervals (fixed seed ``rng`` for reproducibility).
        level : float, optional
            Credible level.

        Returns
        -------
        pandas.DataFrame
            Columns ``state``, ``memory_state``, ``memory_len``, ``name``, ``count``, ``n``
            (training decisions in that state), ``observed``, ``mean``, ``low``, ``high``
            (equal-tailed credible interval), ``sd``.
        """
        draws = self.sample_tables(n_draws, rng=rng)
        a = (1 - level) / 2
        lo, hi = np.quantile(draws, [a, 1 - a], axis=0)
        S, W = self.counts.shape
        _, lengths = _state_tables(W, self.memory)
        n = self.counts.sum(axis=1)
        labels = state_labels(self.names, self.memory)
        mean = self.mean_table().table if self.family.exact_mean else draws.mean(axis=0)
        return pd.DataFrame({
            "state": np.repeat(np.arange(S), W),
            "memory_state": np.repeat(np.asarray(labels, dtype=object), W),
            "memory_len": np.repeat(lengths, W),
            "name": np.tile(np.asarray(self.names, dtype=object), S),
            "count": self.counts.reshape(-1),
            "n": np.repeat(n, W),
            "observed": np.repeat(n > 0, W),
            "mean": mean.reshape(-1),
            "low": lo.reshape(-1),
            "high": hi.reshape(-1),
            "sd": draws.std(axis=0).reshape(-1),
        })

    def coef_frame(self, level: float = 0.95) -> pd.DataFrame:
        """Posterior summary of the feature coefficients (and ``tau``).

        Returns
        -------
        pandas.DataFrame
            Columns ``parameter``, ``kind`` (``symmetric`` / ``bias`` / ``scale``), ``mean``,
            ``sd``, ``low``, ``high`` and ``meaning`` (one line: what a positive value does,
            :data:`normlab.calibration.fit.features.COLUMN_MEANINGS`).
        """
        return self.family.coef_frame(self, level)

    def summary(self) -> dict:
        """Model, data and sampler diagnostics as plain Python values."""
        n = self.counts.sum(axis=1)
        return plain({
            "kind": self.kind,
            "names": list(self.names),
            "memory": self.memory,
            "decisions": float(n.sum()),
            "states_observed": int((n > 0).sum()),
            "states_total": int(self.n_states),
            "draws": None if math.isinf(self.n_draws) else int(self.n_draws),
            "decay": None if np.isnan(self.decay) else self.decay,
            "diagnostics": dict(self.diagnostics),
            "meta": dict(self.meta),
        })

    # ----------------------------------------------------------------- display
    def _source(self) -> str:
        """``LLM, 40 baseline runs`` from the provenance in :attr:`meta` (empty if unknown)."""
        m = self.meta
        src = m.get("source") if isinstance(m.get("source"), dict) else {}
        llm = m.get("llm") or ",".join(map(str, src.get("models", []) or []))
        runs = src.get("n_runs")
        kinds = m.get("fit_on") or ",".join(map(str, src.get("kinds", []) or []))
        return ", ".join(x for x in (str(llm or ""), f"{runs} {kinds} runs".replace("  ", " ") if runs else "") if x)

    def __repr__(self) -> str:
        n = self.counts.sum(axis=1)
        d = self.diagnostics
        diag = None
        if d:
            diag = f"R-hat max {fmt(d.get('r_hat_max'))}, divergences {fmt(d.get('divergences'))}"
        p0 = self.family.empty_memory(self)
        return short_repr("StrategyFit", self.kind, self._source() or None, f"names {','.join(self.names)}",
                          f"H={self.memory}", f"{fmt(float(n.sum()))} decisions",
                          f"{int((n > 0).sum())}/{self.n_states} states seen",
                          "empty memory: " + ", ".join(f"p({a})={v:.3f}" for a, v in zip(self.names, p0)),
                          None if math.isinf(self.n_draws) else f"{self.n_draws} draws", diag)

    def _repr_html_(self) -> str:
        n = self.counts.sum(axis=1)
        f = self.to_frame(n_draws=100)
        rows = []
        first = f[f["state"] == 0]
        for _, r in first.iterrows():
            rows.append((f"p({r['name']} | empty memory)", r["mean"], (r["low"], r["high"])))
        if self.n_names == 2:  # unanimous full memories: how strongly each convention holds
            full = f[f["memory_len"] == self.memory]
            for k, nm in enumerate(self.names):
                lab = ";".join([f"{nm},{nm}"] * self.memory)
                r = full[(full["memory_state"] == lab) & (full["name"] == nm)]
                if len(r):
                    r = r.iloc[0]
                    rows.append((f"p({nm} | all {nm})", r["mean"], (r["low"], r["high"]), f"{fmt(r['n'])} decisions"))
        for _, r in self.coef_frame().iterrows():
            rows.append((f"coefficient {r['parameter']}", r["mean"], (r["low"], r["high"]), r.get("meaning", "")))
        d = self.diagnostics
        settings = {"decisions": float(n.sum()), "states seen": f"{int((n > 0).sum())} of {self.n_states}",
                    "decay": None if np.isnan(self.decay) else self.decay, "source": self._source() or None}
        if d:
            settings.update({"R-hat max": d.get("r_hat_max"), "ESS bulk min": d.get("ess_bulk_min"),
                             "divergences": d.get("divergences")})
        return html_card("StrategyFit", rows, subtitle=f"{self.kind} model of p(name | memory), names "
                         f"{','.join(self.names)}, H = {self.memory}", settings=settings, max_rows=24,
                         note="credible intervals; a coefficient acts on the log-odds of the second name "
                              f"({self.names[-1]}): > 0 as its line says, < 0 the opposite; .plot() draws the heat map "
                              "(kind='ppc': posterior predictive check); .to_frame() gives every state; .save(path) "
                              "keeps it.")

    @plotting
    def plot(self, kind: str = "heatmap", *, name: str | None = None, memory_len: int | None = None, ax=None,
             rng=0):
        """The fitted strategy: posterior-mean heat map (states without training decisions are
        crossed), or the posterior predictive check of the training counts.

        Parameters
        ----------
        kind : {"heatmap", "ppc"}, optional
            ``ppc``: observed frequency of the last name in every state against its posterior
            predictive mean (small points), and per memory length with 95% predictive intervals
            (:func:`normlab.calibration.posterior_predictive_check`).
        name, memory_len : optional
            Heat map: the name coloured and the memory length shown.
        ax : matplotlib Axes, optional
        rng : optional
            Seed of the predictive draws (``ppc``).

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. S8, Table 1;
        Gelman et al., Bayesian Data Analysis (2013), ch. 6 (posterior predictive checks).
        """
        if kind == "heatmap":
            return self.mean_table().plot(name=name, memory_len=memory_len, unseen=~self.observed, ax=ax)
        if kind != "ppc":
            raise ValueError(f"kind must be 'heatmap' or 'ppc'; got {kind!r}")
        ppc = posterior_predictive_check(self, rng=rng)
        st, ln = ppc[ppc["scope"] == "state"], ppc[ppc["scope"] == "memory_len"]
        ax = new_axes(ax, (5.6, 5.6))
        nm = self.names[-1]
        ax.scatter(st["pred_mean"], st["observed_freq"], s=np.clip(np.sqrt(st["n"]) * 3, 4, 60), alpha=0.3,
                   color="C0", lw=0, label="memory states (size: decisions)")
        ax.errorbar(ln["pred_mean"], ln["observed_freq"],
                    xerr=error_bars(ln["pred_mean"], ln["pred_low"], ln["pred_high"]), fmt="o", color="C3",
                    capsize=3, label="per memory length (95% predictive interval)")
        for _, r in ln.iterrows():
            ax.annotate(f"L={int(r['memory_len'])}", (r["pred_mean"], r["observed_freq"]), fontsize=7, color="C3",
                        xytext=(-16, 6), textcoords="offset points")
        ax.plot([0, 1], [0, 1], color="0.4", lw=0.8, ls="--")
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel=f"posterior predictive p({nm})",
               ylabel=f"observed frequency of {nm}",
               title=f"posterior predictive check: {st['covered'].mean():.0%} of states inside 95% intervals")
        ax.title.set_fontsize(9)
        legend_outside(ax, "below", ncol=1)
        return ax

    def save(self, path) -> Path:
        """Write the fit to the folder ``path`` (``result.json`` holds :meth:`to_dict`); read it
        back with :meth:`load`, ``normlab.load`` or :func:`load_fit`."""
        return save_result(path, type(self), {"fit": self.to_dict()})

    @classmethod
    def load(cls, path) -> "StrategyFit":
        """Read a fit written by :meth:`save`."""
        meta, _ = load_result(path, cls)
        return cls.from_dict(meta["fit"])

    # ----------------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        """JSON-friendly dictionary (counts stored sparsely by state label)."""
        labels = state_labels(self.names, self.memory)
        obs = np.flatnonzero(self.counts.sum(axis=1) > 0)
        counts = {labels[s]: [round(float(v), 6) for v in self.counts[s]] for s in obs}
        return {
            "format": "normlab.calibration.StrategyFit",
            "version": FORMAT_VERSION,
            "kind": self.kind,
            "names": list(self.names),
            "memory": self.memory,
            **self.family.to_dict(self),
            "counts": counts,
            "diagnostics": _jsonable(self.diagnostics),
            "meta": _jsonable(self.meta),
            **({"mean_table": self.stored_mean.tolist()} if self.stored_mean.size else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "StrategyFit":
        """Inverse of :meth:`to_dict`."""
        if not isinstance(d, dict) or d.get("format") != "normlab.calibration.StrategyFit":
            raise ValueError("not a normlab StrategyFit document (missing format tag)")
        if int(d.get("version", 0)) > FORMAT_VERSION:
            raise ValueError(f"StrategyFit format version {d.get('version')} is newer than this normlab ({FORMAT_VERSION})")
        names, H = table_shape(d.get("names"), d.get("memory"), "a StrategyFit")
        W = len(names)
        if not isinstance(d.get("counts"), dict):
            raise ValueError("a StrategyFit document needs 'counts': {memory state: [count per name]}")
        idx = {lab: k for k, lab in enumerate(state_labels(names, H))}
        counts = np.zeros((n_states(W, H), W))
        for lab, v in d["counts"].items():
            if lab not in idx:
                raise ValueError(f"state {lab!r} is not a memory state of names {names}, H={H}")
            counts[idx[lab]] = v
        return cls(
            kind=d["kind"], names=names, memory=H, counts=counts, **fit_family(d["kind"]).from_dict(d),
            diagnostics=d.get("diagnostics", {}), meta=d.get("meta", {}),
            stored_mean=np.asarray(d["mean_table"], dtype=float) if d.get("mean_table") else np.zeros((0, 0)),
        )

    def to_json(self, path) -> Path:
        """Write the fit as JSON; returns the path."""
        return write_user_text(path, json.dumps(self.to_dict(), separators=(",", ":")))

    @classmethod
    def from_json(cls, path) -> "StrategyFit":
        """Read a fit written by :meth:`to_json` (a regular file, size and depth capped:
        :func:`normlab.user_files.read_user_json`)."""
        return cls.from_dict(read_user_json(path, str(path)))

    @classmethod
    def _contract_example(cls) -> "StrategyFit":
        """The conjugate (``empirical``) fit of :meth:`StateCounts._contract_example`'s counts: the
        counts and a flat prior are the whole posterior (``tests/umbrella/test_contracts.py``)."""
        counts = StateCounts._contract_example()
        return cls(kind="empirical", names=counts.names, memory=counts.memory, counts=counts.counts, prior=1.0,
                   meta={"source": dict(counts.source, n_runs=len(counts.groups))})


# ----------------------------------------------------------------------------- posterior predictive checks
def posterior_predictive_check(fit: StrategyFit, counts: StateCounts | None = None, *, n_draws: int = 400,
                               level: float = 0.95, run_effects="fit", rng=None) -> pd.DataFrame:
    """Replicate the per-state counts from the posterior and compare with the observed ones.

    For every observed state, ``n_draws`` replicated counts of name 1 are drawn
    (``Binomial(n_s, p_s)`` with ``p_s`` from a posterior draw of the table); the observed count
    is compared with the central ``level`` interval and its posterior predictive p-value. The
    same is aggregated per memory length (the production of name 1 at the k-th move, as in the
    rows of Flint Ashery et al. 2025, Table 1).

    A fit with run effects in the model (a joint fit: its table is a typical run's, every run plays
    its own shift ``b`` and sharpness ``kappa`` of the logit) is checked against its pooled counts
    with the population's probability ``E[sigmoid(kappa * logit p_s + b)]`` over the effects of
    each draw (Gauss-Hermite, 9 x 9 nodes): the table alone would be a typical run's, not the mix
    of runs the counts pool. The replicated counts stay binomial, so the runs' extra spread is
    not in the intervals.

    Parameters
    ----------
    fit : StrategyFit
    counts : StateCounts, optional
        Data to check against (default: the fit's training counts).
    n_draws : int, optional
    level : float, optional
    run_effects : {"fit", None}, optional
        ``"fit"`` (default): the fit's stored run effects (``meta["run_effects"]``, two-name pools)
        enter the predicted probabilities as above; None: the table alone.
    rng : optional

    Returns
    -------
    pandas.DataFrame
        One row per observed state (``scope="state"``) and per memory length
        (``scope="memory_len"``): ``scope``, ``state`` (index or -1), ``memory_state``,
        ``memory_len``, ``n``, ``observed`` (count of name 1), ``observed_freq``, ``pred_mean``
        (expected frequency), ``pred_low``, ``pred_high`` (interval of the replicated
        frequency), ``ppp`` (posterior predictive p-value ``P(rep >= obs)``), ``covered``.
    """
    if not isinstance(fit, StrategyFit):
        raise TypeError(f"fit must be a StrategyFit; got {type(fit).__name__}")
    C = fit.counts if counts is None else counts.counts
    if C.shape != fit.counts.shape:
        raise ValueError("counts must be for the fit's names and memory")
    if run_effects not in ("fit", None):
        raise ValueError(f"run_effects must be 'fit' or None; got {run_effects!r}")
    g = np.random.default_rng(as_seed_sequence(rng))
    tabs, index = fit.sample_tables(n_draws, rng=g, return_index=True)
    draws = tabs[:, :, -1]  # p(last name | s)
    if run_effects == "fit" and fit.n_names == 2 and isinstance(fit.meta.get("run_effects"), dict):
        from .run_effects import RunEffects

        eff = RunEffects.from_dict(fit.meta["run_effects"])
        if eff.active:
            draws = _marginal_over_run_effects(draws, eff.draws(n_draws, rng=g, index=index))
    n = C.sum(axis=1)
    obs = np.flatnonzero(n > 0)
    rep = g.binomial(np.round(n[obs]).astype(np.int64)[None, :], draws[:, obs])
    a = (1 - level) / 2
    labels = fit.to_frame(n_draws=2, rng=0).drop_duplicates("state")["memory_state"].to_numpy()
    _, lengths = _state_tables(fit.n_names, fit.memory)
    k = C[obs, -1]
    nn = np.maximum(np.round(n[obs]), 1)
    lo, hi = np.quantile(rep, [a, 1 - a], axis=0)
    rows = pd.DataFrame({
        "scope": "state", "state": obs, "memory_state": labels[obs], "memory_len": lengths[obs], "n": n[obs],
        "observed": k, "observed_freq": k / n[obs], "pred_mean": draws[:, obs].mean(axis=0),
        "pred_low": lo / nn, "pred_high": hi / nn,
        "ppp": (rep >= np.round(k)[None, :]).mean(axis=0),
    })
    rows["covered"] = (np.round(k) >= lo) & (np.round(k) <= hi)
    agg = []
    for L in np.unique(lengths[obs]):
        m = lengths[obs] == L
        r = rep[:, m].sum(axis=1)
        tot = n[obs][m].sum()
        ob = k[m].sum()
        ql, qh = np.quantile(r, [a, 1 - a])
        agg.append({"scope": "memory_len", "state": -1, "memory_state": None, "memory_len": int(L), "n": tot,
                    "observed": ob, "observed_freq": ob / tot, "pred_mean": r.mean() / tot, "pred_low": ql / tot,
                    "pred_high": qh / tot, "ppp": float((r >= np.round(ob)).mean()),
                    "covered": bool(ql <= np.round(ob) <= qh)})
    return pd.concat([rows, pd.DataFrame(agg)], ignore_index=True)


def _marginal_over_run_effects(p: np.ndarray, eff: np.ndarray, nodes: int = 9) -> np.ndarray:
    """``E[sigmoid(kappa * logit p + b)]`` per draw (rows of ``p``) over ``b ~ N(mu_b, sd_b)``,
    ``log kappa ~ N(mu_k, sd_k)`` with correlation ``rho`` (``eff``: rows of :meth:`RunEffects.draws`),
    by Gauss-Hermite quadrature; probabilities 0 and 1 stay."""
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / w.sum()
    with np.errstate(divide="ignore"):
        lg = np.log(p) - np.log1p(-p)
    out = np.empty_like(p)
    for d in range(p.shape[0]):
        mu_b, mu_k, sd_b, sd_k, rho = eff[d, :5]
        acc = np.zeros(p.shape[1])
        for i in range(nodes):
            zk = x[i]
            k = np.exp(mu_k + sd_k * zk)
            for j in range(nodes):
                zb = rho * zk + np.sqrt(max(1.0 - rho * rho, 0.0)) * x[j]
                eta = k * lg[d] + mu_b + sd_b * zb
                acc += w[i] * w[j] * 0.5 * (1.0 + np.tanh(0.5 * eta))
        out[d] = np.where(np.isfinite(lg[d]), acc, p[d])
    return out


def _jsonable(o):
    if isinstance(o, dict):
        return {str(k): _jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_jsonable(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return None if np.isnan(o) else float(o)
    if isinstance(o, float) and np.isnan(o):
        return None
    if isinstance(o, np.ndarray):
        return _jsonable(o.tolist())
    if isinstance(o, np.bool_):
        return bool(o)
    return o


def load_fit(name_or_path) -> StrategyFit:
    """Load a shipped fitted table by name (e.g. ``"llama31_70b_QM_H5"``), a JSON file path, or a
    folder written by :meth:`StrategyFit.save`.

    The shipped tables were fitted by ``calibration/_build_tables.py`` on the baseline
    (convergence) runs of the AI-norms data of Flint Ashery et al. (2025); see :func:`shipped_fits`.

    Parameters
    ----------
    name_or_path : str or os.PathLike

    Returns
    -------
    StrategyFit
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"load_fit takes a shipped table's name or a path; got {type(name_or_path).__name__}")
    p = Path(name_or_path)
    if p.suffix == ".json" and (p.exists() or p.is_symlink()):
        doc = read_user_json(p, str(p))  # a regular file (not a FIFO or device), size and depth capped
        try:
            return StrategyFit.from_dict(doc)
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{p}: {' '.join(str(exc).split())}") from None
    if p.is_dir():
        return StrategyFit.load(p)
    name = str(name_or_path)
    avail = shipped_fits()
    if name not in avail:
        if p.suffix == ".json" or len(p.parts) > 1:
            raise FileNotFoundError(f"fitted table {name}: no such file (a fit saved by --save-fit or "
                                    f"StrategyFit.to_json, or a shipped table: {', '.join(avail)})")
        raise ValueError(f"unknown fitted table {name!r}; shipped: {avail} (or pass a .json path)")
    return StrategyFit.from_dict(shipped_document(name))


# The type tag of saved results (normlab.load) and pickles name StrategyFit by its path before the regroup into
# sub-packages (issue 30), which still imports it: folders saved before and after load alike.
StrategyFit.__module__ = "normlab.calibration.posterior"
