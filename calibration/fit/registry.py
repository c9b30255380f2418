"""The registry of fit kinds: every strategy family :func:`normlab.calibration.calibrate` can fit.

A fit kind is a name (``"hierarchical"``), a one-line title and a *family*: an object
implementing :class:`normlab.calibration.fit.posterior.FitFamily` -- fit from decision counts,
posterior draws of the whole table, save/load of its parameters, its description -- that
:class:`~normlab.calibration.StrategyFit` dispatches to by its ``kind``. Everything that names
the models reads this registry: :func:`fit_strategy`, ``calibrate(model=...)``, ``normlab
calibrate --fit-model`` (choices and help), model choice by held-out log-likelihood
(:func:`~normlab.calibration.compare_models`), ``calibration/_build_tables.py`` (which fits
:data:`DEFAULT`) and the docs.

Adding a kind is one module holding the family and one registration line below (or, from
outside normlab, one :func:`register_fit_kind` call). A family given as ``"module:ATTRIBUTE"``
is imported on first use, so this registry stays as light as the command line that reads it
(no NumPy, no PyMC).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8
(the strategy tables these families model).
"""

from __future__ import annotations

import importlib

__all__ = ["FitKind", "FIT_KINDS", "DEFAULT", "MODELS", "register_fit_kind", "unregister_fit_kind",
           "fit_kind_names", "fit_family", "fit_strategy"]


class FitKind:
    """One registered fit kind (read-only; a plain class: the command line reads the registry and
    stays free of the ``dataclasses`` machinery).

    Attributes
    ----------
    key : str
        The kind's name (``StrategyFit.kind``, ``calibrate(model=...)``, ``--fit-model``).
    title : str
        One line: what the family models (``--fit-model`` help, docs).
    family : str or FitFamily
        The family object, or ``"module:ATTRIBUTE"`` naming it (imported on first use).
    """

    __slots__ = ("key", "title", "family")

    def __init__(self, key: str, title: str, family):
        for k, v in (("key", key), ("title", title), ("family", family)):
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError(f"FitKind is read-only (register a new kind instead of changing {name!r})")

    def __repr__(self) -> str:
        return f"FitKind({self.key!r}, {self.title!r}, {self.family!r})"

    def load(self):
        """The family object (importing its module the first time)."""
        fam = self.family
        if isinstance(fam, str):
            mod, _, attr = fam.partition(":")
            fam = getattr(importlib.import_module(mod), attr)
        return fam


#: Every registered fit kind, by name, in registration order.
FIT_KINDS: dict[str, FitKind] = {}
#: The kind ``calibrate`` fits by default: the only one close to the best held-out
#: log-likelihood both across runs and across memory states (see :mod:`normlab.calibration.fit.model_choice`).
DEFAULT = "hierarchical"


def register_fit_kind(key: str, family, title: str) -> FitKind:
    """Register a fit kind.

    Parameters
    ----------
    key : str
        Its name; must not be registered yet.
    family : FitFamily or str
        The family (a :class:`~normlab.calibration.fit.posterior.FitFamily`), or ``"module:ATTRIBUTE"``.
    title : str
        One line describing the model.

    Returns
    -------
    FitKind
    """
    if not isinstance(key, str) or not key.isidentifier():
        raise ValueError(f"a fit kind's name must be an identifier; got {key!r}")
    if key in FIT_KINDS:
        raise ValueError(f"fit kind {key!r} is registered already")
    if isinstance(family, str) and ":" not in family:
        raise ValueError(f"family must be a FitFamily or 'module:ATTRIBUTE'; got {family!r}")
    spec = FitKind(key, str(title), family)
    FIT_KINDS[key] = spec
    return spec


def unregister_fit_kind(key: str) -> None:
    """Remove a registered fit kind (fits of that kind stop working until it is registered again)."""
    if key not in FIT_KINDS:
        raise ValueError(f"fit kind {key!r} is not registered")
    del FIT_KINDS[key]


def fit_kind_names() -> tuple:
    """The names of the registered fit kinds, in registration order."""
    return tuple(FIT_KINDS)


def fit_family(key: str, what: str = "kind"):
    """The family of a registered fit kind; an unknown ``key`` raises a one-line ``ValueError``
    (``"<what> must be one of (...); got ..."``)."""
    spec = FIT_KINDS.get(key) if isinstance(key, str) else None
    if spec is None:
        raise ValueError(f"{what} must be one of {fit_kind_names()}; got {key!r}")
    return spec.load()


def fit_strategy(counts, model: str = DEFAULT, *, rng=None, **kwargs):
    """Fit a registered fit kind by name (``"empirical"`` accepts ``prior=`` and ``meta=`` and
    ignores the sampler settings; the others the keywords of :func:`normlab.calibration.fit_logit`
    / :func:`normlab.calibration.fit_hierarchical`).

    Parameters
    ----------
    counts : StateCounts
    model : str, optional
        A name of :func:`fit_kind_names` (default :data:`DEFAULT`).
    rng : optional
    **kwargs
        Passed to the family's fit.

    Returns
    -------
    StrategyFit
    """
    return fit_family(model, "model").fit(counts, rng=rng, **kwargs)


# ----------------------------------------------------------------------------- the built-in kinds
# One line per kind; the order is that of the model comparison (and of its seeds).
register_fit_kind("empirical", "normlab.calibration.fit.empirical:EMPIRICAL",
                  "a Dirichlet table per memory state (any number of names; unseen states keep the flat prior)")
register_fit_kind("logit_symmetric", "normlab.calibration.fit.logit:LOGIT_SYMMETRIC",
                  "the feature logit without bias columns: invariant under relabelling the names")
register_fit_kind("logit", "normlab.calibration.fit.logit:LOGIT",
                  "a logit on memory features with name-bias columns (two names)")
register_fit_kind("hierarchical", "normlab.calibration.fit.hierarchical:HIERARCHICAL",
                  "the feature logit plus partially pooled state effects (two names)")

#: The built-in kinds (registered at import); :func:`fit_kind_names` is the live list.
MODELS = fit_kind_names()
