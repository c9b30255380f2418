"""The name :mod:`normlab.llm_runs.sync` had (``from normlab.llm_runs._sync import run_sync``: the
calibration layer and tests import it; the integrator switches them, then this module goes)."""

from __future__ import annotations

from .sync import run_sync

__all__ = ["run_sync"]
