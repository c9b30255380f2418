"""Pieces the probes share: the probe's settings and endpoint from its arguments, Clopper-Pearson
intervals, and the neutrality statistics of a first-move distribution."""

from __future__ import annotations

import math

import numpy as np

from normlab.theory.stats import clopper_pearson  # noqa: F401 (the probes' intervals; one home)

from ..backend import EndpointConfig
from ..runner.settings import make_settings


def probe_settings(names, memory, mode, template, kw, embedded):
    return make_settings(
        2, memory, names, max_interactions=1, runs=1, mode=mode, template=template,
        payoffs=kw.pop("payoffs", (100, -50)), temperature=kw.pop("temperature", 0.5),
        top_k=kw.pop("top_k", 10), max_tokens=kw.pop("max_tokens", 6), top_logprobs=kw.pop("top_logprobs", 20),
        max_reasks=kw.pop("max_reasks", 2), prefill=kw.pop("prefill", None),
        multi_token=kw.pop("multi_token", "expand"), case_sensitive=kw.pop("case_sensitive", False),
        embedded=embedded, wrap=kw.pop("wrap", "chat"), top_p=kw.pop("top_p", 1.0), min_p=kw.pop("min_p", 0.0),
        parse=kw.pop("parse", "normlab"),
    )


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
