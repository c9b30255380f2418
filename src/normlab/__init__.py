"""normlab: conventions and norms in populations of LLM agents.

Sub-packages (imported lazily, so ``import normlab`` stays fast):

- :mod:`normlab.theory` -- Numba naming games, strategy-table game, mean-field models, ITCMA-S.
- :mod:`normlab.llm_runs` -- LLM population runners, probes and the AI-norms data loader.
- :mod:`normlab.calibration` -- fit LLM strategy tables and predict collective behaviour.
- :mod:`normlab.figures` -- every figure and table of Flint Ashery et al. (2025), regenerated.

``normlab.load(path)`` reads back any result saved with ``result.save(path)``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["__version__", "theory", "llm_runs", "calibration", "figures", "load"]

_SUBPACKAGES = {"theory", "llm_runs", "calibration", "figures"}


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"normlab.{name}")
    if name == "load":  # read back any result saved with result.save(path)
        return importlib.import_module("normlab._display").load
    raise AttributeError(f"module 'normlab' has no attribute {name!r}")
