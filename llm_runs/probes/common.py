"""Pieces the probes share: the probe's settings and endpoint from its arguments, Clopper-Pearson
intervals, and the neutrality statistics of a first-move distribution."""

from __future__ import annotations

import math

import numpy as np

from normlab.theory.stats import clopper_pearson  # noqa: F401 (the probes' intervals; one home)

from ..backend import EndpointConfig
from ..runner.sampling import SAMPLING_KEYS
from ..runner.settings import make_settings


def probe_settings(names, memory, mode, template, kw, embedded):
    """A probe's settings (two agents, one interaction) and template; the sampling settings
    (:data:`~normlab.llm_runs.runner.sampling.SAMPLING_KEYS`, defaults as in
    :class:`~normlab.llm_runs.runner.sampling.Sampling`) are taken out of ``kw``."""
    sampling = {k: kw.pop(k) for k in SAMPLING_KEYS if k in kw}
    return make_settings(2, memory, names, max_interactions=1, runs=1, mode=mode, template=template,
                         embedded=embedded, **sampling)


def resolve_endpoint(endpoint):
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    return endpoint


def reject_unknown(kw):
    if kw:
        raise TypeError(f"unexpected keyword argument(s) {sorted(kw)}")


def bias_stats(names, counts, exact_p):
    from scipy.spatial.distance import jensenshannon
    from scipy.stats import binomtest, chisquare

    n = int(sum(counts))
    W = len(names)
    if n == 0:
        test, stat, p = ("binomial" if W == 2 else "chi2"), np.nan, np.nan
    elif W == 2:
        test, stat, p = "binomial", float(counts[0]), float(binomtest(int(counts[0]), n, 0.5).pvalue)
    else:
        r = chisquare(counts)
        test, stat, p = "chi2", float(r.statistic), float(r.pvalue)
    dist = np.asarray(exact_p, float) if exact_p is not None else (np.asarray(counts, float) / n if n else None)
    jsd = float(jensenshannon(dist, np.full(W, 1.0 / W), base=2)) if dist is not None else np.nan
    return test, stat, p, jsd


def none_nan(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v
