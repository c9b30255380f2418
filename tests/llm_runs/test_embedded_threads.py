"""Embedded server threads (issue 10): no spinning on a shared machine; ``--embedded-threads``."""

import argparse
import os

import pytest

from normlab.llm_runs import backend
from normlab.llm_runs.cli_kit import add_endpoint_args as _add_endpoint_args, endpoint_config as _endpoint
from normlab.llm_runs.backend import EmbeddedServer, EndpointConfig


@pytest.mark.parametrize("cores, expected", [(1, 1), (2, 1), (3, 2), (4, 3), (16, 8)])
def test_default_threads_is_one_on_two_cores(monkeypatch, cores, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert backend.default_threads() == expected


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="n_threads"):
        EmbeddedServer(n_threads=bad)
    with pytest.raises(ValueError, match="embedded_threads"):
        EndpointConfig(embedded_threads=bad)


def test_cli_flag_reaches_the_config(monkeypatch):
    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    p = argparse.ArgumentParser()
    _add_endpoint_args(p)
    assert _endpoint(p.parse_args(["--embedded-threads", "3"])).embedded_threads == 3
    assert _endpoint(p.parse_args([])).embedded_threads is None


@pytest.mark.llm
def test_server_starts_without_polling():
    if not backend.embedded_available():
        pytest.skip("embedded model not installed")
    import json
    import urllib.request

    with EmbeddedServer(n_threads=1, n_parallel=1, n_ctx=512) as srv:
        body = {"model": srv.model, "messages": [{"role": "user", "content": "Say Q"}], "max_tokens": 2}
        req = urllib.request.Request(srv.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200 and json.load(r)["choices"]
