"""A strategy table's choice thresholds, as the prediction design's lean runs read them.

:func:`_choice_thresholds` lays out a table's partial sums so that a uniform picks the same name as
the full kernel (:func:`normlab.theory.memory_game._choose`); :func:`_table_logits` and
:func:`_effect_thresholds` give a two-name table's thresholds under a run effect (shift, sharpness;
:mod:`normlab.calibration.fit.run_effects`), the eager reference of the lazy thresholds of
:mod:`normlab.theory.design`. Each kernel is the compiled twin of its ``_py`` function.
"""

from __future__ import annotations

import math

import numpy as np

from normlab._jit import njit


def _choice_thresholds_py(params, S, W, thr):
    """Per state ``s`` the thresholds ``thr[s * W + q]`` of a table's choice: the name picked by a
    uniform ``u`` is the number of ``q`` with ``u >= thr[s * W + q]`` -- the same name as the
    kernel's table branch and :func:`normlab.theory.memory_game._choose` (same partial sums:
    ``thr`` holds them, with 2.0 from the last positive entry on). An invalid row (an entry
    negative, NaN or above 1, or a sum off 1 by more than 1e-6) gets thresholds -1, so its pick is
    ``W``: the run's error."""
    for s in range(S):
        b = s * W
        tot = 0.0
        bad = False
        last = -1
        for q in range(W):
            pq = params[b + q]
            if not (pq >= 0.0) or pq > 1.0 + 1e-9:
                bad = True
                break
            tot += pq
            thr[b + q] = tot
            if pq > 0.0:
                last = q
        if bad or abs(tot - 1.0) > 1e-6:
            for q in range(W):
                thr[b + q] = -1.0
        else:
            for q in range(last, W):
                thr[b + q] = 2.0


def _table_logits_py(params, S, W, lg):
    """Per state ``s`` of a two-name table the logit ``log p(1 | s) - log p(0 | s)`` (``+-inf`` where
    a probability is 0; NaN for an invalid row, as :func:`_choice_thresholds` judges it) -- what
    run effects act on."""
    for s in range(S):
        p0 = params[s * W]
        p1 = params[s * W + 1]
        if not (p0 >= 0.0) or not (p1 >= 0.0) or p0 > 1.0 + 1e-9 or p1 > 1.0 + 1e-9 or abs(p0 + p1 - 1.0) > 1e-6:
            lg[s] = np.nan
        elif p1 == 0.0:
            lg[s] = -np.inf
        elif p0 == 0.0:
            lg[s] = np.inf
        else:
            lg[s] = math.log(p1) - math.log(p0)


def _effect_thresholds_py(lg, b, k, thr):
    """The choice thresholds (as :func:`_choice_thresholds` lays them out, ``W = 2``) of the table
    whose logits are ``k * lg + b``: one run's table under its run effect (shift ``b``, sharpness
    ``k``; :mod:`normlab.calibration.run_effects`)."""
    for s in range(lg.shape[0]):
        x = lg[s]
        if np.isnan(x):
            thr[2 * s] = -1.0
            thr[2 * s + 1] = -1.0
            continue
        eta = k * x + b
        p0 = 0.0 if eta > 709.0 else 1.0 / (1.0 + math.exp(eta))  # 709: exp overflows past it
        thr[2 * s] = 2.0 if p0 >= 1.0 else p0
        thr[2 * s + 1] = 2.0


_choice_thresholds = njit(cache=True)(_choice_thresholds_py)
_table_logits = njit(cache=True)(_table_logits_py)
_effect_thresholds = njit(cache=True)(_effect_thresholds_py)
