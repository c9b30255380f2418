"""Opening an endpoint: a ready :class:`~normlab.llm_runs.backend.client.LLMClient` for a config,
starting the embedded server (or sharing one) when the config names no base URL."""

from __future__ import annotations

import asyncio

from .client import LLMClient
from .config import EndpointConfig
from .embedded import DEFAULT_EMBEDDED_CTX, EmbeddedServer, ctx_for_prompt, server_for, shared_server


class open_endpoint:
    """Async context manager yielding a ready :class:`LLMClient` (starting the embedded server
    when the config has no base URL, and stopping it on exit; inside
    :func:`shared_embedded_server` the server is shared and outlives the session).

    Parameters
    ----------
    config : EndpointConfig, optional
        Default: :meth:`EndpointConfig.from_env`.
    prompt_bytes : int, optional
        UTF-8 bytes of the longest prompt the caller will send; sizes the embedded server's KV
        cache (:func:`ctx_for_prompt`) unless ``config.embedded_ctx`` is set.
    max_new_tokens : int
        Tokens generated per request (for the same sizing).
    """

    def __init__(self, config: EndpointConfig | None = None, *, prompt_bytes: int | None = None,
                 max_new_tokens: int = 16):
        self.config = config if config is not None else EndpointConfig.from_env()
        self.prompt_bytes = prompt_bytes
        self.max_new_tokens = max_new_tokens
        self.server: EmbeddedServer | None = None  # started here, stopped on exit
        self._shared: EmbeddedServer | None = None  # from shared_embedded_server(), left running
        self.client: LLMClient | None = None

    def embedded_ctx(self) -> int:
        """KV tokens per slot of the embedded server: the config's, else sized to the prompts."""
        if self.config.embedded_ctx is not None:
            return self.config.embedded_ctx
        if self.prompt_bytes is not None:
            return ctx_for_prompt(self.prompt_bytes, self.max_new_tokens)
        return DEFAULT_EMBEDDED_CTX

    async def __aenter__(self) -> LLMClient:
        cfg = self.config
        if cfg.embedded:
            shared = await asyncio.to_thread(shared_server, cfg, self.embedded_ctx())
            if shared is not None:
                self._shared = shared  # not ours to stop
                base_url, model = shared.base_url, shared.model
            else:
                self.server = await asyncio.to_thread(server_for, cfg, self.embedded_ctx())
                await asyncio.to_thread(self.server.start)
                base_url, model = self.server.base_url, self.server.model
        else:
            base_url, model = cfg.base_url, cfg.model
        self.client = LLMClient(base_url, model, cfg)
        try:
            await self.client.__aenter__()
            await self.client.check()
            self.client.info = await self.client.fingerprint(self.server or self._shared)
        except BaseException:
            await self._close()
            raise
        return self.client

    async def _close(self):
        if self.client is not None:
            await self.client.aclose()
        if self.server is not None:
            await asyncio.to_thread(self.server.close)
            self.server = None

    async def __aexit__(self, *exc) -> None:
        await self._close()
