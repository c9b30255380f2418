"""Small helpers shared by the demo's steps and its report (a leaf: imports no other demo module)."""

from __future__ import annotations

import math

import numpy as np

from normlab.theory import clopper_pearson

__all__ = ["fmt_seconds", "cp_interval", "finite"]


def fmt_seconds(sec: float | None) -> str:
    """Seconds as a person reads them: ``"42 s"``, ``"3.5 min"``; ``"unknown"`` for None or not finite."""
    if sec is None or not np.isfinite(sec):
        return "unknown"
    return f"{sec:.0f} s" if sec < 90 else f"{sec / 60:.1f} min"


def cp_interval(k: int, n: int) -> tuple[float, float]:
    """Clopper-Pearson 95% interval of ``k`` successes in ``n`` trials (``n >= 1``)."""
    lo, hi = clopper_pearson([k], [n])
    return float(lo[0]), float(hi[0])


def finite(v):
    """``v``, or None where it is None or a float that is not finite (JSON-safe)."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v
