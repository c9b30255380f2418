"""Run a coroutine from synchronous code, also inside a running event loop (JupyterLab)."""

from __future__ import annotations

import asyncio
import concurrent.futures


def run_sync(factory):
    """Run ``factory()`` (a coroutine factory) to completion and return its result.

    Outside an event loop this is :func:`asyncio.run`; inside one (a Jupyter cell) the coroutine
    runs on a fresh loop in a worker thread, so ``run_game(...)`` works in notebooks without
    ``await``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="normlab-llm") as ex:
        return ex.submit(lambda: asyncio.run(factory())).result()
