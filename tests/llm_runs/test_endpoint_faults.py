"""Endpoint faults end in one clear outcome: a trickling server is cut at the whole-request
timeout, an absurd Retry-After is capped and said, HTTP 501 names the cause, keys and URL
credentials never reach messages, NaN logprobs are malformed (retried, never used), lone
surrogates are cleaned, protocol fields cannot be smuggled in extra_body, and a model the endpoint
does not list is refused."""

from __future__ import annotations

import asyncio
import time

import pytest

from normlab.llm_runs.backend import RETRY_AFTER_CAP, EndpointConfig, EndpointError, LLMClient, _retry_after
from normlab.llm_runs.testing import StubServer

MSG = [{"role": "system", "content": "values: ['Q', 'M']"}, {"role": "assistant", "content": "{'value': '"}]


def _call(stub, *, faults=(), key=None, base_url=None, model=None, **cfg):
    stub.inject(*faults)
    config = EndpointConfig(base_url=base_url or stub.base_url, api_key=key, **{"max_retries": 1, "backoff": 0.01, **cfg})

    async def go():
        async with LLMClient(config.base_url, model or stub.model, config) as c:
            if model is not None:
                await c.check()
            return await c.chat(MSG, max_tokens=2, temperature=1.0, logprobs=True, top_logprobs=5)

    return asyncio.run(go())


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_trickling_server_is_cut_at_the_whole_request_timeout():
    with StubServer(["Q", "M"]) as stub:
        t0 = time.perf_counter()
        with pytest.raises(EndpointError, match="timeout after 1s"):
            _call(stub, faults=["trickle", "trickle"], timeout=1.0)
        assert time.perf_counter() - t0 < 8


def test_absurd_retry_after_is_capped_and_said():
    assert _retry_after({"retry-after": "86400"}) == RETRY_AFTER_CAP
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after": "soon"}) is None


def test_http_501_names_the_cause():
    with StubServer(["Q", "M"]) as stub:
        with pytest.raises(EndpointError, match="HTTP 501.*not OpenAI-compatible"):
            _call(stub, faults=["501"])


def test_api_key_echoed_by_the_server_is_redacted():
    secret = "sk-test-0123456789abcdef"
    with StubServer(["Q", "M"]) as stub:
        with pytest.raises(EndpointError) as info:
            _call(stub, faults=["echo_auth"], key=secret)
    assert secret not in str(info.value) and "***" in str(info.value)


def test_credentials_in_base_url_are_not_shown():
    with StubServer(["Q", "M"]) as stub:
        url = stub.base_url.replace("http://", "http://alice:hunter2@")
        with pytest.raises(EndpointError) as info:
            _call(stub, faults=["501"], base_url=url)
    assert "hunter2" not in str(info.value) and "***@" in str(info.value)


def test_nan_logprobs_are_malformed_and_retried():
    with StubServer(["Q", "M"]) as stub:
        r = _call(stub, faults=["nanlogprobs"])
        assert r.attempts == 2 and any("malformed" in e for e in r.errors)
        assert all(v == v for _, v in r.top)  # no NaN used
        with pytest.raises(EndpointError, match="malformed"):
            _call(stub, faults=["nanlogprobs", "nanlogprobs"])


def test_lone_surrogate_is_cleaned():
    with StubServer(["Q", "M"]) as stub:
        r = _call(stub, faults=["surrogate"])
    r.text.encode("utf-8")  # writable as UTF-8
    assert r.text.startswith("\ufffd")


def test_extra_body_cannot_override_the_protocol():
    with pytest.raises(ValueError, match="extra_body may not set temperature"):
        EndpointConfig(base_url="http://127.0.0.1:1/v1", extra_body={"temperature": 2.0})
    EndpointConfig(base_url="http://127.0.0.1:1/v1", extra_body={"continue_final_message": True})


def test_model_not_listed_is_refused():
    with StubServer(["Q", "M"]) as stub:
        with pytest.raises(EndpointError, match="does not serve model 'gpt-x'"):
            _call(stub, model="gpt-x")
        _call(stub, model=stub.model)  # the listed one is fine


def test_embedded_threads_validated():
    with pytest.raises(ValueError, match="embedded_threads"):
        EndpointConfig(embedded_threads=0)
