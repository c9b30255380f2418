"""ITCMA-S closed forms: PAD emotions and the driver (Eqs. 10-15), topic and action rate (Eqs. 17-18).

P = tanh(desire) - tanh(pain), A = tanh(recency-weighted change against retention),
D = tanh(change against last protention); they drive d_t = d_{t-1} + Ne d^bias_t. A locale's
topic is the mean of P (A + 1) / 2; an agent acts with probability (0.5 + sigmoid(S_i)) / 2.

References
----------
X. Zhang, X. Yin, N. Jiang, S. Su (Zhang et al.), "Can Agents Spontaneously Form a Society?
Introducing a Novel Architecture for Generative Multi-Agents to Elicit Social Emergence"
(ITCMA-S), arXiv:2409.06750 (2024): Sect. 3.3 (Eqs. 10-15), Sect. 4.2.1 (Eqs. 17-18).
"""

from __future__ import annotations

import numpy as np

from ._checks import _broadcast, _in_unit, _int, _out, _real, _sigmoid


# ================================================================== Eqs. 10-15: emotion and driver
def pleasure(desire, pain):
    """Pleasure ``P_t = tanh(desire) - tanh(pain)``.

    Parameters
    ----------
    desire : float or array_like of float
        Degree to which the agent's desires are satisfied, ``>= 0`` (e.g. a reward).
    pain : float or array_like of float
        Degree of pain not avoided, ``>= 0`` (e.g. a punishment). Broadcast against ``desire``.

    Returns
    -------
    float or numpy.ndarray
        ``P`` in ``(-1, 1)``; the broadcast shape of the inputs. In float64 ``tanh`` rounds to
        1 for arguments above about 19, so ``|P|`` can equal 1 exactly there.

    Raises
    ------
    ValueError
        If ``desire`` or ``pain`` is negative or not finite, or the shapes do not broadcast.

    References
    ----------
    Implements Eq. 10 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 3.3), where
    ``desire, pain`` are in ``[0, inf)`` and "defined according to specific situations".

    Examples
    --------
    >>> float(pleasure(1.0, 0.0))  # doctest: +ELLIPSIS
    0.7615...
    """
    de = _real(desire, "desire")
    pa = _real(pain, "pain")
    if de.size and de.min() < 0:
        raise ValueError(f"desire must be >= 0 (Eq. 10 takes desire in [0, inf)); got min {de.min():.6g}")
    if pa.size and pa.min() < 0:
        raise ValueError(f"pain must be >= 0 (Eq. 10 takes pain in [0, inf)); got min {pa.min():.6g}")
    de, pa = _broadcast((de, "desire"), (pa, "pain"))
    return _out(np.tanh(de) - np.tanh(pa))


def _recency_weights(m: int) -> np.ndarray:
    """Weights ``2 n / (t (t - 1))`` of Eq. 11 for ``n = 1 .. m`` with ``m = t - 1`` (sum to 1)."""
    n = np.arange(1, m + 1, dtype=np.float64)
    return 2.0 * n / (m * (m + 1.0))


def arousal(diffs, *, axis: int = -1):
    """Arousal ``A_t = tanh(sum_{n=1}^{t-1} 2n / (t (t-1)) diff(PI_t, ret_n))``.

    The ``t - 1`` retained frames lie along ``axis``, **oldest first**: frame ``n`` gets weight
    ``2 n / (t (t - 1))``, so the weights grow linearly towards the most recent frame and sum to
    1 (a recency-weighted mean change). The paper does not say which end of retention ``n = 1``
    is; reading ``n`` as time, as here, is what makes the weighting favour recent frames.

    Parameters
    ----------
    diffs : array_like of float
        ``diff(PI_t, ret_n)``: precomputed change between the primal impression and each retained
        frame, frames along ``axis`` (oldest first). The paper leaves ``diff`` open; for embedding
        vectors :func:`cosine_diff` is a documented default. A non-negative ``diff`` (a distance)
        gives ``A`` in ``[0, 1)``; a signed one gives ``(-1, 1)``, the paper's stated range.
    axis : int, optional
        Axis of the retained frames (default: last).

    Returns
    -------
    float or numpy.ndarray
        ``A`` with ``axis`` removed. With no retained frame (``t = 1``: empty axis) the sum is
        empty and ``A = tanh(0) = 0`` (a convention; Eq. 11 is then 0/0 times an empty sum).

    Raises
    ------
    ValueError
        If ``diffs`` is not finite, is 0-d, or ``axis`` is out of range.

    References
    ----------
    Implements Eq. 11 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 3.3).

    Examples
    --------
    Two retained frames (``t = 3``) get weights 1/3 and 2/3:

    >>> round(float(arousal([0.3, 0.6])), 6)  # tanh(0.1 + 0.4)
    0.462117

    From embeddings, with ``pi`` of shape ``(k,)`` and ``retained`` of shape ``(t - 1, k)``:
    ``arousal(cosine_diff(pi, retained))``.
    """
    x = _real(diffs, "diffs")
    if x.ndim == 0:
        raise ValueError("diffs must have at least one axis (the retained frames); got a scalar")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for diffs with {x.ndim} dimension(s)")
    x = np.moveaxis(x, axis, -1)
    m = x.shape[-1]
    if m == 0:
        return _out(np.zeros(x.shape[:-1]))
    return _out(np.tanh(x @ _recency_weights(m)))


def dominance(diff):
    """Dominance ``D_t = tanh(diff(PI_t, Prot_{t-1}))``.

    Parameters
    ----------
    diff : float or array_like of float
        Precomputed change between this step's primal impression ``PI_t`` and the protention
        (predicted perception) ``Prot_{t-1}`` of the previous step.

    Returns
    -------
    float or numpy.ndarray
        ``D`` in ``(-1, 1)``, same shape as ``diff``.

    Raises
    ------
    ValueError
        If ``diff`` is not finite.

    Notes
    -----
    The paper states ``D in (-1, 1)`` and reports (Fig. 6b) that dominance "rarely dropped below
    zero", which needs a *signed* ``diff``; an unsigned distance (e.g. :func:`cosine_diff`) makes
    ``D >= 0`` always and reads as surprise rather than control. The sign convention is the
    caller's; :func:`simulate_ltrha` uses ``PI_t - Prot_{t-1}`` (better than expected > 0).

    References
    ----------
    Implements Eq. 12 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 3.3).
    """
    return _out(np.tanh(_real(diff, "diff")))


def cosine_diff(x, y, *, axis: int = -1):
    """Cosine distance ``1 - cos(x, y)``: a default ``diff`` for embedding vectors.

    This is an **interpretation**: ITCMA-S leaves ``diff`` in Eqs. 11-12 unspecified. Cosine
    distance is chosen because ITCMA-S already compares phenomenal fields by cosine similarity
    (Eq. 3, ``FieldSim``) and because it is scale-free for sentence embeddings.

    Parameters
    ----------
    x, y : array_like of float
        Vectors along ``axis``; the other axes broadcast (e.g. ``x`` of shape ``(k,)`` against
        retained frames ``y`` of shape ``(t - 1, k)``).
    axis : int, optional
        Axis holding the vector components (default: last).

    Returns
    -------
    float or numpy.ndarray
        Distance in ``[0, 2]`` (0: same direction, 2: opposite), the broadcast shape without
        ``axis``.

    Raises
    ------
    ValueError
        If a vector has zero norm (cosine undefined), the vector lengths differ, or an entry is
        not finite.

    References
    ----------
    Default for ``diff`` in Eqs. 11-12 of Zhang et al., ITCMA-S, arXiv:2409.06750; the cosine
    similarity is the one used in its Eq. 3.
    """
    a = _real(x, "x")
    b = _real(y, "y")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("x and y must be vectors (at least one axis)")
    a = np.moveaxis(a, axis, -1)
    b = np.moveaxis(b, axis, -1)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"x and y must have the same vector length along axis; got {a.shape[-1]} and {b.shape[-1]}")
    na = np.linalg.norm(a, axis=-1)
    nb = np.linalg.norm(b, axis=-1)
    if np.any(na == 0) or np.any(nb == 0):
        raise ValueError("cosine distance is undefined for zero vectors; x and y must have non-zero norm")
    a, b = _broadcast((a, "x"), (b, "y"))
    cos = np.sum(a * b, axis=-1) / (np.broadcast_to(na, a.shape[:-1]) * np.broadcast_to(nb, b.shape[:-1]))
    return _out(1.0 - np.clip(cos, -1.0, 1.0))


def _weights(weights):
    if isinstance(weights, (str, bytes)) or not hasattr(weights, "__len__") or len(weights) != 3:
        raise TypeError("weights must be a sequence of three values (w_P, w_A, w_D)")
    w = [_real(wi, name) for wi, name in zip(weights, ("w_P", "w_A", "w_D"))]
    for wi, name in zip(w, ("w_P", "w_A", "w_D")):
        if wi.size and wi.min() < 0:
            raise ValueError(f"{name} must be >= 0 (ITCMA-S weights are a convex combination); got {wi.min():.6g}")
    total = w[0] + w[1] + w[2]
    if not np.allclose(total, 1.0, rtol=0.0, atol=1e-9):
        raise ValueError(f"weights must sum to 1 (w_P + w_A + w_D = 1, Eq. 13); they sum to {np.asarray(total).ravel()[:3]}")
    return w


def driver_bias(pleasure, arousal, dominance, arousal_prev, *, weights=(1 / 3, 1 / 3, 1 / 3)):
    """Driver bias ``d^bias_t = w_P P_t + w_D D_t + w_A (1 - |A_t - A_{t-1}|)``.

    Pleasure and dominance are rewarded; arousal is rewarded for being *stable* (agents keep
    arousal at a stable value, ITCMA-S Sect. 3.3).

    Parameters
    ----------
    pleasure, arousal, dominance : float or array_like of float
        ``P_t``, ``A_t``, ``D_t`` in ``[-1, 1]``. Broadcast together.
    arousal_prev : float or array_like of float
        ``A_{t-1}`` in ``[-1, 1]``.
    weights : sequence of three float or array_like, optional
        ``(w_P, w_A, w_D)``, non-negative and summing to 1 (elementwise if arrays: the paper
        calls them "dynamic weights"). Default equal weights; the paper gives no values.

    Returns
    -------
    float or numpy.ndarray
        ``d^bias`` in ``(-1, 1]``. The paper states ``(-1, 1)``; the upper end is reached
        exactly when all weight is on arousal (``w_A = 1``) and ``A_t = A_{t-1}``.

    Raises
    ------
    ValueError
        If an emotion is outside ``[-1, 1]``, a weight is negative, the weights do not sum to 1,
        or the shapes do not broadcast.
    TypeError
        If ``weights`` is not a sequence of three values.

    References
    ----------
    Implements Eq. 13 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 3.3).
    """
    P = _in_unit(_real(pleasure, "pleasure"), "pleasure")
    A = _in_unit(_real(arousal, "arousal"), "arousal")
    D = _in_unit(_real(dominance, "dominance"), "dominance")
    A0 = _in_unit(_real(arousal_prev, "arousal_prev"), "arousal_prev")
    wp, wa, wd = _weights(weights)
    _broadcast((P, "pleasure"), (A, "arousal"), (D, "dominance"), (A0, "arousal_prev"), (wp, "w_P"), (wa, "w_A"),
               (wd, "w_D"))
    return _out(wp * P + wd * D + wa * (1.0 - np.abs(A - A0)))


def _check_bias(x, name):
    a = _real(x, name)
    if a.size and (a.min() < -1.0 or a.max() > 1.0):
        raise ValueError(f"{name} must lie in [-1, 1] (a driver bias, Eq. 13); got values in [{a.min():.6g}, {a.max():.6g}]")
    return a


def demand(d_bias, d_bias_prev):
    """Demand ``Ne = |d^bias_t - d^bias_{t-1}| / 2``.

    Parameters
    ----------
    d_bias, d_bias_prev : float or array_like of float
        ``d^bias_t`` and ``d^bias_{t-1}`` in ``[-1, 1]`` (see :func:`driver_bias`).

    Returns
    -------
    float or numpy.ndarray
        ``Ne`` in ``[0, 1]`` (``[0, 1)`` for biases in the open interval).

    Raises
    ------
    ValueError
        If a bias is outside ``[-1, 1]`` or the shapes do not broadcast.

    References
    ----------
    Implements Eq. 14 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 3.3).
    """
    b = _check_bias(d_bias, "d_bias")
    b0 = _check_bias(d_bias_prev, "d_bias_prev")
    b, b0 = _broadcast((b, "d_bias"), (b0, "d_bias_prev"))
    return _out(0.5 * np.abs(b - b0))


def driver_update(driver_prev, d_bias, d_bias_prev):
    """Driver ``d_t = d_{t-1} + Ne d^bias_t`` with ``Ne`` from Eq. 14.

    The driver only moves when the bias changes (``Ne = 0`` for a constant bias: an agent in a
    local optimum stops being driven) and then in the direction of the current bias.

    Parameters
    ----------
    driver_prev : float or array_like of float
        ``d_{t-1}`` (any real; the driver is not bounded).
    d_bias, d_bias_prev : float or array_like of float
        ``d^bias_t`` and ``d^bias_{t-1}`` in ``[-1, 1]``.

    Returns
    -------
    float or numpy.ndarray
        ``d_t``; each increment ``Ne d^bias_t`` lies in ``[-1, 1]``.

    Raises
    ------
    ValueError
        If a bias is outside ``[-1, 1]``, an input is not finite, or shapes do not broadcast.

    References
    ----------
    Implements Eqs. 14-15 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 3.3).
    """
    d0 = _real(driver_prev, "driver_prev")
    b = _check_bias(d_bias, "d_bias")
    b0 = _check_bias(d_bias_prev, "d_bias_prev")
    d0, b, b0 = _broadcast((d0, "driver_prev"), (b, "d_bias"), (b0, "d_bias_prev"))
    return _out(d0 + 0.5 * np.abs(b - b0) * b)


def driver_path(d_bias, *, driver0=0.0, d_bias0=0.0, axis: int = -1):
    """Driver trajectory ``d_1`` to ``d_T`` from a series of biases (Eqs. 14-15 iterated).

    ``d_t = d_0 + sum_{s <= t} |d^bias_s - d^bias_{s-1}| / 2 * d^bias_s``, vectorised.

    Parameters
    ----------
    d_bias : array_like of float
        ``d^bias_1 .. d^bias_T`` in ``[-1, 1]``, time along ``axis``.
    driver0 : float or array_like of float, optional
        ``d_0`` (default 0), broadcast against ``d_bias`` without ``axis``.
    d_bias0 : float or array_like of float, optional
        ``d^bias_0`` used for the first demand (default 0, so ``Ne_1 = |d^bias_1| / 2``).

    Returns
    -------
    numpy.ndarray
        ``d_1 .. d_T``, same shape as ``d_bias``.

    Raises
    ------
    ValueError
        If a bias is outside ``[-1, 1]``, ``d_bias`` is 0-d or shapes do not broadcast.

    References
    ----------
    Implements Eqs. 14-15 of Zhang et al., ITCMA-S, arXiv:2409.06750, over a time series.
    """
    b = _check_bias(d_bias, "d_bias")
    if b.ndim == 0:
        raise ValueError("d_bias must have a time axis; use driver_update for one step")
    b = np.moveaxis(b, axis, -1)
    b0 = _check_bias(d_bias0, "d_bias0")
    d0 = _real(driver0, "driver0")
    head = b.shape[:-1]
    try:
        b0 = np.broadcast_to(b0, head)
        d0 = np.broadcast_to(d0, head)
    except ValueError:
        raise ValueError(f"driver0 and d_bias0 must broadcast to d_bias without its time axis, shape {head}") from None
    prev = np.concatenate([b0[..., None], b[..., :-1]], axis=-1)
    out = d0[..., None] + np.cumsum(0.5 * np.abs(b - prev) * b, axis=-1)
    return np.moveaxis(out, -1, axis)


# ================================================================== Eqs. 17-18: topic and action rate
def topic(pleasure, arousal, *, axis: int = -1):
    """Topic of one sub-environment ``tpc_env = (1/n) sum_i P_i (A_i + 1) / 2``.

    Each agent's pleasure is weighted by its arousal mapped to ``[0, 1]``: aroused agents set
    the atmosphere, calm ones barely count.

    Parameters
    ----------
    pleasure, arousal : array_like of float
        ``P_i`` and ``A_i`` in ``[-1, 1]`` of the ``n`` agents in the sub-environment, along
        ``axis``. Broadcast together.
    axis : int, optional
        Axis of the agents (default: last).

    Returns
    -------
    float or numpy.ndarray
        Topic in ``[-1, 1]`` (< 0: negative atmosphere, > 0: positive).

    Raises
    ------
    ValueError
        If an emotion is outside ``[-1, 1]``, there are no agents along ``axis``, or shapes do
        not broadcast.

    See Also
    --------
    topic_by_env : topics of all sub-environments from one population.

    References
    ----------
    Implements Eq. 17 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 4.1).
    """
    P = _in_unit(_real(pleasure, "pleasure"), "pleasure")
    A = _in_unit(_real(arousal, "arousal"), "arousal")
    P, A = _broadcast((P, "pleasure"), (A, "arousal"))
    if P.ndim == 0:
        P, A = P[None], A[None]
        axis = -1
    if P.shape[axis] == 0:
        raise ValueError("a sub-environment needs at least one agent (Eq. 17 divides by n)")
    return _out(np.mean(P * (A + 1.0) / 2.0, axis=axis))


def _topic_by_env(P, A, env, n_envs):
    counts = np.bincount(env, minlength=n_envs)
    sums = np.bincount(env, weights=P * (A + 1.0) / 2.0, minlength=n_envs)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan), counts


def topic_by_env(pleasure, arousal, env, *, n_envs: int | None = None):
    """Topics of all sub-environments, each by Eq. 17 over the agents it contains.

    A sub-environment (ITCMA-S Sect. 4.1) is a space with the agents occupying it; ``env``
    assigns each agent to one.

    Parameters
    ----------
    pleasure, arousal : array_like of float
        ``P_i`` and ``A_i`` in ``[-1, 1]``, shape ``(n,)``.
    env : array_like of int
        Sub-environment index of each agent, shape ``(n,)``, values in ``[0, n_envs)``.
    n_envs : int, optional
        Number of sub-environments (default ``max(env) + 1``).

    Returns
    -------
    numpy.ndarray
        Shape ``(n_envs,)``; NaN for an empty sub-environment (no agents: Eq. 17 undefined).

    Raises
    ------
    ValueError
        On shape mismatch, emotions outside ``[-1, 1]`` or ``env`` values out of range.
    TypeError
        If ``env`` is not integer.

    References
    ----------
    Implements Eq. 17 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 4.1), per
    sub-environment.
    """
    P = _in_unit(_real(pleasure, "pleasure"), "pleasure")
    A = _in_unit(_real(arousal, "arousal"), "arousal")
    e = np.asarray(env)
    if e.dtype == np.bool_ or not np.issubdtype(e.dtype, np.integer):
        raise TypeError(f"env must be integer sub-environment indices; got dtype {e.dtype}")
    if P.ndim != 1 or P.shape != A.shape or P.shape != e.shape:
        raise ValueError(f"pleasure, arousal and env must be 1-D of equal length; got {P.shape}, {A.shape}, {e.shape}")
    if e.size and e.min() < 0:
        raise ValueError("env indices must be >= 0")
    k = (int(e.max()) + 1 if e.size else 0) if n_envs is None else _int(n_envs, "n_envs", low=1)
    if e.size and e.max() >= k:
        raise ValueError(f"env indices must be < n_envs={k}; got {int(e.max())}")
    return _topic_by_env(P, A, e.astype(np.int64), k)[0]


def action_rate(resources):
    """Probability of acting in one turn, ``rate_i = (0.5 + sigmoid(S_i)) / 2``.

    Parameters
    ----------
    resources : float or array_like of float
        ``S_i``. The paper types ``S_i`` as the agent's resources but also says the rate is "a
        function of the number of resources ... as a percentage of the total"; pass the share
        ``S_i / sum_j S_j`` for that reading. Any real value is allowed (resources go negative
        under Eq. 19, and the sigmoid is defined there).

    Returns
    -------
    float or numpy.ndarray
        ``rate`` in ``(0.25, 0.75)``, increasing in ``S`` (``0.5`` at ``S = 0``; in float64 it
        rounds to the end points for ``|S| >= 37``).

    Raises
    ------
    ValueError
        If ``resources`` is not finite.

    Notes
    -----
    The typeset Eq. 18 (a fraction bar under ``0.5 + Sigmoid(S_i)``) is read as
    ``(0.5 + sigmoid(S_i)) / 2``. The other parenthesisation, ``0.5 + sigmoid(S_i) / 2``, would
    give rates in ``(0.5, 1)``.

    References
    ----------
    Implements Eq. 18 of Zhang et al., ITCMA-S, arXiv:2409.06750 (Sect. 4.2.1).
    """
    return _out(0.5 * (0.5 + _sigmoid(_real(resources, "resources"))))
