"""Which model the study asks, how it is reached, and its identity (what ``predictions.json`` records).

An embedded model (``--embedded-model NAME``: a registered name, :data:`normlab.llm_runs.EMBEDDED_MODELS`,
or the path of a GGUF file) is served by one :class:`~normlab.llm_runs.EmbeddedServer` for the whole
study -- one process, one prompt cache, so every stage reuses the prefixes the others evaluated --
started only when a stage first needs it, with one slot and one request at a time (two sequences in
one batch change llama.cpp's logits). Its identity is the GGUF file's SHA-256 (hashed once; the hash
is kept in ``OUT/model.json`` with the file's size and modification time). An endpoint
(``--base-url``) is identified by its URL (credentials masked) and model name, and by the SHA-256 of
``--model-file`` where the user names the file the server loaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from normlab.llm_runs import EMBEDDED_MODELS, EmbeddedServer, EndpointConfig, embedded_model_path
from normlab.llm_runs.backend import redact_url
from normlab.llm_runs.journal import write_json_atomic
from normlab.llm_runs.runner import make_settings

from ._settings import StudySettings
from ._stages import sha256_file

__all__ = ["ModelChoice", "resolve_model", "ModelHandle", "file_identity", "prepare"]

MODEL_FILE = "model.json"


@dataclass(frozen=True)
class ModelChoice:
    """The model of a study: ``embedded`` (a registered name or a GGUF path; None for an endpoint),
    ``path`` (the GGUF file served, or ``--model-file`` of an endpoint), ``alias`` (the name the
    server reports)."""

    embedded: str | None
    path: Path | None
    alias: str | None

    @property
    def label(self) -> str:
        if self.embedded is None:
            return self.alias or "the endpoint's first model"
        return f"{self.alias} (embedded" + ("" if self.embedded in EMBEDDED_MODELS else f", {self.path.name}") + ")"


def resolve_model(embedded_model: str | None, endpoint: EndpointConfig, model_file=None) -> ModelChoice:
    """The study's model from ``--embedded-model`` / ``--base-url`` / ``--model-file`` (checked
    before any work; the GGUF of a registered model is located, not hashed, here)."""
    if embedded_model is None and not endpoint.embedded:
        path = None
        if model_file is not None:
            path = Path(model_file)
            if not path.is_file():
                raise ValueError(f"--model-file {model_file} is not a file")
        return ModelChoice(embedded=None, path=path, alias=endpoint.model)
    name = embedded_model or "smollm2"
    if name in EMBEDDED_MODELS:
        return ModelChoice(embedded=name, path=Path(embedded_model_path(name)), alias=EMBEDDED_MODELS[name].alias)
    p = Path(name)
    if p.suffix.lower() == ".gguf":
        if not p.is_file():
            raise ValueError(f"--embedded-model {name}: no such GGUF file")
        return ModelChoice(embedded=str(p), path=p, alias=endpoint.model or p.stem)
    raise ValueError(f"--embedded-model must be one of {sorted(EMBEDDED_MODELS)} or the path of a .gguf file; "
                     f"got {name!r}")


def file_identity(path: Path, out: Path) -> dict:
    """Name, size and SHA-256 of a model file; the hash is reused from ``OUT/model.json`` while the
    file's size and modification time are unchanged (a 1.1 GB GGUF takes seconds to hash)."""
    path = Path(path).resolve()
    st = path.stat()
    key = {"path": str(path), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    cache = Path(out) / MODEL_FILE
    if cache.exists():
        with contextlib.suppress(OSError, ValueError, KeyError):
            old = json.loads(cache.read_text(encoding="utf-8"))
            if all(old.get(k) == v for k, v in key.items()) and old.get("sha256"):
                return {"file": path.name, "bytes": st.st_size, "sha256": old["sha256"]}
    sha = sha256_file(path)
    Path(out).mkdir(parents=True, exist_ok=True)
    write_json_atomic(cache, {**key, "sha256": sha})
    return {"file": path.name, "bytes": st.st_size, "sha256": sha}


class ModelHandle:
    """The study's way to its model: :meth:`endpoint` (the server started on first use) and
    :meth:`identity`. Use as a context manager (the server stops at the end)."""

    def __init__(self, choice: ModelChoice, endpoint: EndpointConfig, *, ctx: int, out: Path):
        self.choice = choice
        self.base = endpoint
        self.ctx = int(ctx)
        self.out = Path(out)
        self._server = None
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> "ModelHandle":
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()
        self._server = None

    @property
    def embedded(self) -> bool:
        return self.choice.embedded is not None

    def endpoint(self) -> EndpointConfig:
        """The endpoint every stage asks (an embedded model's server started now if needed)."""
        if not self.embedded:
            return self.base
        if self._server is None:
            ep = self.base
            srv = EmbeddedServer(self.choice.path, n_threads=ep.embedded_threads, n_parallel=1,
                                 n_ctx=ep.embedded_ctx or self.ctx, alias=self.choice.alias,
                                 cache_mib=ep.embedded_cache_mib, slot_similarity=ep.embedded_slot_similarity)
            self._server = self._stack.enter_context(srv)
        return dataclasses.replace(self.base, base_url=self._server.base_url, model=self.choice.alias, concurrency=1,
                                   transport="lean", api_key=None)

    def server(self) -> dict | None:
        """The embedded server's settings (threads, context, prompt cache), None for an endpoint."""
        return None if self._server is None else self._server.describe()

    def identity(self, reported_model: str | None = None) -> dict:
        """What ``predictions.json`` records about the model."""
        c = self.choice
        if self.embedded:
            out = {"kind": "embedded", "name": c.embedded, "alias": c.alias, **file_identity(c.path, self.out)}
            srv = self.server()
            if srv is not None:
                out["server"] = {k: v for k, v in srv.items() if k not in ("gguf", "gguf_bytes", "gguf_mtime")}
            return out
        out = {"kind": "endpoint", "base_url": redact_url(self.base.base_url), "model": reported_model or c.alias}
        if c.path is not None:
            out.update(file_identity(c.path, self.out))
        else:
            out["sha256"] = None
        return out


def prepare(settings: StudySettings | None, embedded_model, endpoint, model_file):
    """The settings (prefill resolved for the model: on for an embedded model, off for an endpoint
    unless set), the endpoint and the model choice, every check done before any work."""
    st = settings if settings is not None else StudySettings()
    if not isinstance(st, StudySettings):
        raise TypeError(f"settings must be a StudySettings; got {type(st).__name__}")
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    choice = resolve_model(embedded_model, endpoint, model_file)
    if st.sampling.get("prefill") is None:
        st = dataclasses.replace(st, sampling={**st.sampling, "prefill": choice.embedded is not None})
    for mode in ("exact", "sample"):  # the runner's own checks
        kw = st.sampling if mode == "sample" else {**st.exact_sampling(), "prefill": True}
        make_settings(st.n_agents, st.memory, st.names, max_interactions=1, mode=mode, embedded=True, **kw)
    return st, endpoint, choice
