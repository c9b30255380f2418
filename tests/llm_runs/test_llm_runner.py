"""The LLM naming-game runner against the real local HTTP stub server (fast tier)."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from normlab.llm_runs import EndpointConfig, EndpointError, StubServer, run_game
from normlab.llm_runs.prompts import load_template
from normlab.llm_runs.testing import JUNK_TOKENS, memory_policy
from normlab.schema import DECISION_COLUMNS, RUN_COLUMNS, GameLog, parse_memory_state, rebuild_decisions

TIMING_COLS = ["latency_s"]
# what the game is made of (bookkeeping such as cache hits and per-decision call counts may differ
# after a resumption: a request answered before a crash is reused from the journal)
GAME_COLS = list(DECISION_COLUMNS) + ["names_shown", "prompt_hash", "p_name", "covered_mass", "probs",
                                      "invalid_reason", "raw_text"]


def _ep(stub, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("backoff_max", 0.05)
    return EndpointConfig(base_url=stub.base_url, **kw)


def _comparable(d: pd.DataFrame) -> pd.DataFrame:
    return d.drop(columns=TIMING_COLS).reset_index(drop=True)


def _expected_exact(system: str, names, junk=0.1, T=0.5):
    """The stub's name distribution at the answer position after the sampler transform."""
    p = memory_policy(system, names)
    first = {n: (1 - junk) * p[n] for n in names}
    junk_each = junk / len(JUNK_TOKENS)
    w = {n: v ** (1 / T) for n, v in first.items()}
    wj = len(JUNK_TOKENS) * junk_each ** (1 / T)
    z = sum(w.values())
    return {n: v / z for n, v in w.items()}, z / (z + wj)


# ----------------------------------------------------------------------------- exact mode
def test_exact_run_is_a_valid_gamelog_with_prompt_consistent_memory_states(tmp_path):
    with StubServer(["Q", "M"]) as stub:
        res = run_game(8, 3, "Q,M", max_interactions=300, mode="exact", endpoint=_ep(stub), rng=1,
                       progress=False, out=tmp_path / "run")
    log = res.log
    assert isinstance(log, GameLog)
    assert list(log.decisions.columns[: len(DECISION_COLUMNS)]) == list(DECISION_COLUMNS)
    assert list(log.runs.columns[: len(RUN_COLUMNS)]) == list(RUN_COLUMNS)
    r = log.runs.iloc[0]
    assert r["kind"] == "baseline" and r["model"] == "stub-model" and r["names"] == "Q,M"
    assert r["stop_reason"] == "streak" and r["finished"]
    # Parquet round trip (the GameLog directory layout)
    back = GameLog.read_parquet(tmp_path / "run")
    assert len(back.decisions) == len(log.decisions)
    assert (tmp_path / "run" / "calls.parquet").exists() and (tmp_path / "run" / "journal.jsonl").exists()
    d = log.decisions
    tpl = load_template("main")
    for row in d.sample(60, random_state=0).itertuples():
        mem = parse_memory_state(row.memory_state)
        shown = tuple(row.names_shown.split(","))
        prompt = tpl.render(mem, shown)
        # the memory state of the tidy table is the memory the agent was prompted with
        assert prompt.hash == row.prompt_hash
        probs, covered = _expected_exact(prompt.system, ["Q", "M"])
        assert row.probs == pytest.approx([probs["Q"], probs["M"]], abs=1e-9)
        assert row.covered_mass == pytest.approx(covered, abs=1e-9)
        assert row.p_name == pytest.approx(probs[row.name], abs=1e-9)
    # rebuild_decisions on the played pairs/answers gives the same memory states
    inter = d.iloc[::2]
    players = np.c_[inter["agent"], inter["partner"]]
    rebuilt = rebuild_decisions(players, list(zip(inter["name"], inter["partner_name"])), run=0, n_agents=8, memory=3)
    assert rebuilt["memory_state"].tolist() == d["memory_state"].tolist()


def test_exact_mode_makes_one_call_per_distinct_prompt_and_accounts_for_hits():
    with StubServer(["Q", "M"]) as stub:
        res = run_game(10, 3, "Q,M", max_interactions=400, mode="exact", endpoint=_ep(stub), rng=2, progress=False)
        n_chat = stub.n_chat
    d = res.log.decisions
    distinct = d["prompt_hash"].nunique()
    s = res.summary()
    assert s["llm_calls"] == distinct == n_chat - 0  # single-token names: one request per distinct prompt
    assert s["decisions"] == len(d)
    assert s["cache_hits"] == len(d) - distinct
    assert (d["llm_calls"].sum()) == s["llm_calls"]
    assert s["calls_per_decision"] < 0.6
    # every decision shows the pool in one of its two orders, both of which occur
    assert set(d["names_shown"]) == {"Q,M", "M,Q"}


def test_same_seed_same_run_whatever_the_concurrency_and_replicates():
    with StubServer(["Q", "M"]) as stub:
        a = run_game(8, 3, "Q,M", max_interactions=150, mode="exact", endpoint=_ep(stub, concurrency=1), rng=7,
                     runs=2, progress=False)
        b = run_game(8, 3, "Q,M", max_interactions=150, mode="exact", endpoint=_ep(stub, concurrency=16), rng=7,
                     runs=2, progress=False)
        c = run_game(8, 3, "Q,M", max_interactions=150, mode="exact", endpoint=_ep(stub), rng=8, runs=1,
                     progress=False)
    # the game is identical; which of two concurrent runs made a shared request may differ
    pd.testing.assert_frame_equal(a.log.decisions[GAME_COLS], b.log.decisions[GAME_COLS])
    assert a.summary()["llm_calls"] == b.summary()["llm_calls"]
    assert not a.log.decisions.iloc[:40]["agent"].equals(c.log.decisions.iloc[:40]["agent"])
    # the two replicates are different runs (child seeds), not copies
    d0 = a.log.decisions[a.log.decisions.run == 0].reset_index(drop=True)
    d1 = a.log.decisions[a.log.decisions.run == 1].reset_index(drop=True)
    assert not d0[["agent", "partner"]].head(20).equals(d1[["agent", "partner"]].head(20))


def test_exact_and_sample_modes_share_pairs_and_name_orders():
    with StubServer(["Q", "M"]) as stub:
        kw = dict(max_interactions=30, stop="max", endpoint=_ep(stub), rng=3, progress=False)
        a = run_game(6, 2, "Q,M", mode="exact", **kw)
        b = run_game(6, 2, "Q,M", mode="sample", **kw)
    cols = ["t", "agent", "partner", "names_shown"]
    pd.testing.assert_frame_equal(a.log.decisions[cols], b.log.decisions[cols])


# ----------------------------------------------------------------------------- sample mode
def test_sample_mode_reasks_then_records_invalid_never_substitutes():
    # junk answers 60% of the time: some re-asks succeed, some decisions end invalid
    with StubServer(["Q", "M"], junk_mass=0.6) as stub:
        res = run_game(6, 2, "Q,M", max_interactions=60, stop="max", mode="sample", max_reasks=1,
                       endpoint=_ep(stub), rng=4, progress=False)
    d = res.log.decisions
    inv = d[~d["valid"]]
    assert len(inv) > 0 and inv["name"].isna().all()
    assert inv["invalid_reason"].str.contains("after 2 attempts").all()
    assert (inv["llm_calls"] == 2).all()
    assert (d.loc[d["valid"], "llm_calls"] >= 1).all() and (d["llm_calls"] == 2).sum() > len(inv)
    assert res.summary()["invalid"] == len(inv)
    assert res.summary()["llm_calls"] == d["llm_calls"].sum() == len(res.calls)
    # an interaction with an invalid answer is a failure and enters neither memory
    checked = 0
    for t in inv["t"].unique():
        rows = d[d["t"] == t]
        assert not rows["success"].any()
        for row in rows.itertuples():
            nxt = d[(d["agent"] == row.agent) & (d["t"] > t)].head(1)
            if len(nxt):
                assert nxt.iloc[0]["memory_state"] == row.memory_state
                checked += 1
    assert checked > 0
    assert set(d.loc[d["valid"], "name"]) <= {"Q", "M"}


def test_sample_mode_all_malformed_answers_are_invalid():
    with StubServer(["Q", "M"], faults=["malformed"] * 100) as stub:
        res = run_game(4, 2, "Q,M", max_interactions=3, stop="max", mode="sample", max_reasks=2,
                       endpoint=_ep(stub), rng=5, progress=False)
    d = res.log.decisions
    assert (~d["valid"]).all() and d["name"].isna().all() and (d["llm_calls"] == 3).all()
    assert (d["memory_len"] == 0).all()


def test_prefill_off_sends_no_assistant_message_and_on_continues_it():
    with StubServer(["Q", "M"]) as stub:
        run_game(4, 2, "Q,M", max_interactions=2, stop="max", mode="sample", prefill=False,
                 endpoint=_ep(stub), rng=1, progress=False)
        assert all(b["messages"][-1]["role"] == "user" for b in stub.requests)
        stub.requests.clear()
        res = run_game(4, 2, "Q,M", max_interactions=2, stop="max", mode="sample", prefill=True,
                       endpoint=_ep(stub), rng=1, progress=False)
        assert all(b["messages"][-1] == {"role": "assistant", "content": "{'value': '"} for b in stub.requests)
        assert all(b["temperature"] == 0.5 and b["top_k"] == 10 and b["max_tokens"] == 6 for b in stub.requests)
        assert len({b["seed"] for b in stub.requests}) == len(stub.requests)
    assert res.log.decisions["valid"].all()


# ----------------------------------------------------------------------------- committed / initial / stop rules
def test_committed_agents_never_call_and_consensus_start():
    with StubServer(["Q", "M"]) as stub:
        res = run_game(8, 3, "Q,M", max_interactions=80, stop="max", mode="exact", committed=2,
                       initial="consensus:Q", endpoint=_ep(stub), rng=6, progress=False)
    d = res.log.decisions
    com = d[d["committed"]]
    assert set(com["agent"]) == {6, 7} and (com["name"] == "M").all() and (com["llm_calls"] == 0).all()
    assert set(res.calls["agent"]) <= set(range(6))
    r = res.log.runs.iloc[0]
    assert r["kind"] == "swap" and r["committed_name"] == "M" and r["initial"] == "consensus:Q"
    first = d[~d["committed"]].groupby("agent").head(1)
    assert (first["memory_state"] == "Q,Q;Q,Q;Q,Q").all()
    with StubServer(["Q", "M"]) as stub:
        res = run_game(6, 2, "Q,M", max_interactions=10, stop="max", mode="exact", committed=1,
                       committed_name="Q", initial="consensus:M", endpoint=_ep(stub), rng=6, progress=False)
        ev = run_game(6, 2, "Q,M", max_interactions=10, stop="max", mode="exact", initial="consensus:M",
                      endpoint=_ep(stub), rng=6, progress=False)
    assert res.log.runs.iloc[0]["committed_name"] == "Q" and ev.log.runs.iloc[0]["kind"] == "evolved"


def _interactions(res):
    d = res.log.decisions
    return d.drop_duplicates("t")["success"].to_numpy()


def test_stop_streak_stops_at_the_first_3n_consecutive_successes():
    with StubServer(["Q", "M"]) as stub:
        res = run_game(6, 3, "Q,M", max_interactions=2000, stop="streak", mode="exact", endpoint=_ep(stub),
                       rng=9, progress=False)
    s = _interactions(res)
    L = 18
    assert s[-L:].all() and len(s) < 2000
    run = 0
    for k, x in enumerate(s):
        run = run + 1 if x else 0
        if run >= L:
            assert k == len(s) - 1
    assert res.log.runs.iloc[0]["consensus"] in ("Q", "M")


def test_stop_success95_consensus_flip_and_max():
    with StubServer(["Q", "M"]) as stub:
        ep = _ep(stub)
        a = run_game(6, 2, "Q,M", max_interactions=2000, stop="success95", mode="exact", endpoint=ep, rng=9,
                     progress=False)
        s = _interactions(a)
        assert s[-18:].mean() >= 0.95 and all(s[k - 18:k].mean() < 0.95 for k in range(18, len(s)))
        b = run_game(6, 2, "Q,M", max_interactions=2000, stop="consensus", mode="exact", endpoint=ep, rng=9,
                     progress=False)
        rb = b.log.runs.iloc[0]
        assert rb["stop_reason"] == "consensus" and rb["memory_consensus"]
        c = run_game(6, 2, "Q,M", max_interactions=37, stop="max", mode="exact", endpoint=ep, rng=9,
                     progress=False)
        assert c.log.runs.iloc[0]["n_interactions"] == 37 and c.log.runs.iloc[0]["stop_reason"] == "max"
        f = run_game(10, 2, "Q,M", max_interactions=3000, stop="flip", mode="exact", committed=4,
                     initial="consensus:Q", endpoint=ep, rng=9, progress=False)
    rf = f.log.runs.iloc[0]
    assert rf["stop_reason"] == "flip" and rf["flipped"] and rf["n_interactions"] % 10 == 0
    d = f.log.decisions
    last = d[(d["round"] >= d["round"].max() - 2) & ~d["committed"] & d["valid"]]
    assert (last["name"] == "M").mean() >= 2.849 / 3
    assert rf["flip_time"] == rf["n_interactions"] - 1


def test_graph_restricts_partners():
    g = nx.cycle_graph(8)
    with StubServer(["Q", "M"]) as stub:
        res = run_game(8, 2, "Q,M", max_interactions=60, stop="max", mode="exact", graph=g, endpoint=_ep(stub),
                       rng=1, progress=False)
    d = res.log.decisions
    assert all(abs(a - p) in (1, 7) for a, p in zip(d["agent"], d["partner"]))


@pytest.mark.parametrize("template", ["bullet", "narrative"])
@pytest.mark.parametrize("mode", ["exact", "sample"])
def test_alternative_templates(template, mode):
    with StubServer(["Q", "M"]) as stub:
        res = run_game(6, 2, "Q,M", max_interactions=40, stop="max", mode=mode, template=template,
                       endpoint=_ep(stub), rng=2, progress=False)
        prompt = stub.requests[-1]["messages"][0]["content"]
    assert res.log.decisions["valid"].mean() > 0.8
    assert res.log.runs.iloc[0]["template"] == template
    assert ("**Payoff Matrix:**" in prompt) == (template == "bullet")
    assert ("'action'" in prompt)


def test_multi_token_names_exact_mode():
    names = ["Alice", "Bob"]  # stub tokens: "Ali"+"ce", "Bob"
    with StubServer(names) as stub:
        res = run_game(6, 2, "Alice,Bob", max_interactions=40, stop="max", mode="exact", endpoint=_ep(stub),
                       rng=3, progress=False)
        calls = res.calls
    d = res.log.decisions
    assert d["valid"].all()
    tpl = load_template("main")
    for row in d.head(20).itertuples():
        prompt = tpl.render(parse_memory_state(row.memory_state), tuple(row.names_shown.split(",")))
        probs, covered = _expected_exact(prompt.system, names)
        assert row.probs == pytest.approx([probs["Alice"], probs["Bob"]], abs=1e-9)
        assert row.covered_mass == pytest.approx(covered, abs=1e-9)
    # two requests per distinct prompt: the answer position and the continuation after "Ali"
    assert set(calls["partial"]) == {"", "Ali"}
    assert len(calls) == 2 * d["prompt_hash"].nunique()


# ----------------------------------------------------------------------------- faults and errors
def test_retries_on_429_5xx_timeouts_drops_and_bad_bodies(tmp_path):
    faults = ["429", "ok", "500", "503", "ok", "drop", "slow", "ok", "badjson", "429", "ok", "drop"]
    n_bad = sum(f != "ok" for f in faults)
    with StubServer(["Q", "M"], faults=faults, slow_seconds=1.0, retry_after=0.05, junk_mass=0.0) as stub:
        t0 = time.perf_counter()
        res = run_game(6, 2, "Q,M", max_interactions=20, stop="max", mode="sample",
                       endpoint=_ep(stub, timeout=0.3, max_retries=4, concurrency=1), rng=1, progress=False,
                       out=tmp_path / "r")
        assert stub.n_faults == n_bad
    assert time.perf_counter() - t0 < 20
    calls = res.calls
    assert calls["attempts"].sum() == len(calls) + n_bad
    errs = "; ".join(calls["errors"].dropna())
    for frag in ("HTTP 429", "HTTP 500", "HTTP 503", "timeout", "connection error", "malformed response"):
        assert frag in errs
    assert res.log.decisions["valid"].all()


def test_exact_mode_asks_again_when_logprobs_are_missing():
    with StubServer(["Q", "M"], faults=["nologprobs"]) as stub:
        res = run_game(4, 2, "Q,M", max_interactions=3, stop="max", mode="exact", endpoint=_ep(stub),
                       rng=1, progress=False)
    assert res.log.decisions["valid"].all()
    assert len(res.calls) == res.log.decisions["prompt_hash"].nunique() + 1


def test_endpoint_down_is_one_clear_error_fast(tmp_path):
    t0 = time.perf_counter()
    with pytest.raises(EndpointError, match="cannot reach the OpenAI-compatible endpoint"):
        run_game(4, 2, "Q,M", max_interactions=5, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"),
                 progress=False, out=tmp_path / "down")
    assert time.perf_counter() - t0 < 10
    assert not (tmp_path / "down").exists()


def test_non_retryable_http_error_and_exhausted_retries():
    with StubServer(["Q", "M"], faults=["500"] * 10) as stub:
        with pytest.raises(EndpointError, match="failed after 3 attempts; last errors: HTTP 500"):
            run_game(4, 2, "Q,M", max_interactions=5, mode="sample", endpoint=_ep(stub, max_retries=2,
                     concurrency=1), progress=False, rng=1)


def test_api_key_is_sent_but_never_written(tmp_path, monkeypatch):
    secret = "sk-normlab-test-SECRET-4242"
    monkeypatch.setenv("NORMLAB_LLM_API_KEY", secret)
    with StubServer(["Q", "M"]) as stub:
        res = run_game(4, 2, "Q,M", max_interactions=5, mode="sample", endpoint=_ep(stub), rng=1, progress=False,
                       out=tmp_path / "k")
        assert stub.auth_headers == {f"Bearer {secret}"}
        assert secret not in repr(_ep(stub, api_key=secret))
    for f in (tmp_path / "k").iterdir():
        assert secret.encode() not in f.read_bytes(), f
    assert secret not in repr(res.settings)


# ----------------------------------------------------------------------------- resumption
@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_resume_after_a_crash_equals_an_uninterrupted_run(tmp_path):
    kw = dict(max_interactions=120, stop="max", rng=11, progress=False)
    for mode in ("exact", "sample"):
        with StubServer(["Q", "M"]) as stub:
            full = run_game(8, 3, "Q,M", mode=mode, endpoint=_ep(stub), out=tmp_path / f"full-{mode}", **kw)
        with StubServer(["Q", "M"]) as stub:
            stub.inject_at(25, "500")  # the 25th request fails and retries are off: the run crashes
            with pytest.raises(EndpointError):
                run_game(8, 3, "Q,M", mode=mode, endpoint=_ep(stub, max_retries=0), out=tmp_path / f"cut-{mode}", **kw)
            part = [json.loads(x) for x in (tmp_path / f"cut-{mode}" / "journal.jsonl").read_text().splitlines()]
            n_before = sum(1 for r in part if r["ev"] == "int")
            # the crash is journaled; requests already in flight may still journal their answers
            # after it (nothing is asked twice), but no interaction is recorded after the crash
            evs = [r["ev"] for r in part]
            assert 0 < n_before < 120 and "error" in evs
            assert set(evs[evs.index("error") + 1:]) <= {"call", "error"}
            res = run_game(8, 3, "Q,M", mode=mode, endpoint=_ep(stub), out=tmp_path / f"cut-{mode}", **kw)
        assert res.replayed == n_before
        pd.testing.assert_frame_equal(res.log.decisions[GAME_COLS], full.log.decisions[GAME_COLS])
        assert res.log.runs["finished"].all()
        if mode == "exact":  # nothing asked twice: answers received before the crash were journaled
            assert len(res.calls) == len(full.calls)


def test_torn_last_line_is_ignored_on_resume(tmp_path):
    kw = dict(max_interactions=50, stop="max", mode="exact", rng=12, progress=False)
    with StubServer(["Q", "M"]) as stub:
        full = run_game(6, 2, "Q,M", endpoint=_ep(stub), **kw)
        stub.inject_at(stub.n_chat + 10, "500")
        with pytest.raises(EndpointError):
            run_game(6, 2, "Q,M", endpoint=_ep(stub, max_retries=0), out=tmp_path / "r", **kw)
        with open(tmp_path / "r" / "journal.jsonl", "a") as f:
            f.write('{"ev": "int", "run": 0, "t": 99, "i": 1, "j"')  # a kill mid-write
        res = run_game(6, 2, "Q,M", endpoint=_ep(stub), out=tmp_path / "r", **kw)
    pd.testing.assert_frame_equal(res.log.decisions[GAME_COLS], full.log.decisions[GAME_COLS])


def test_finished_directory_is_not_replayed_and_different_settings_are_refused(tmp_path):
    out = tmp_path / "done"
    with StubServer(["Q", "M"]) as stub:
        a = run_game(6, 2, "Q,M", max_interactions=40, mode="exact", endpoint=_ep(stub), out=out, progress=False)
        n = stub.n_chat
        b = run_game(6, 2, "Q,M", max_interactions=40, mode="exact", endpoint=_ep(stub), out=out, progress=False)
        assert stub.n_chat == n  # nothing left to do: no request at all
        pd.testing.assert_frame_equal(_comparable(a.log.decisions), _comparable(b.log.decisions))
        for bad in (dict(max_interactions=41), dict(mode="sample"), dict(template="bullet"), dict(rng=99)):
            args = dict(max_interactions=40, mode="exact")
            args.update(bad)
            with pytest.raises(ValueError, match="holds a run with different settings"):
                run_game(6, 2, "Q,M", endpoint=_ep(stub), out=out, progress=False, **args)
        assert stub.n_chat == n
    # a kill inside the first settings write (found by the fault matrix, trial 17 of CI's run):
    # settings.json.tmp alone is a torn write, not somebody else's file; the run starts afresh
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "settings.json.tmp").write_text('{"format": "normlab.llm-run/')
    with StubServer(["Q", "M"]) as stub:
        kw = dict(max_interactions=40, mode="exact", endpoint=_ep(stub), progress=False, rng=3)
        c = run_game(6, 2, "Q,M", out=torn, **kw)
        fresh = run_game(6, 2, "Q,M", out=tmp_path / "fresh", **kw)
    pd.testing.assert_frame_equal(_comparable(fresh.log.decisions), _comparable(c.log.decisions))
    assert not (torn / "settings.json.tmp").exists()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty and holds no normlab LLM run"):
        run_game(6, 2, "Q,M", max_interactions=4, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"),
                 out=junk, progress=False)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("kwargs, match", [
    (dict(n_agents=1), "n_agents must be >= 2"),
    (dict(memory=0), "memory must be >= 1"),
    (dict(committed=6), "committed must be < n_agents"),
    (dict(initial="consensus:X"), "initial must be"),
    (dict(initial="full"), "initial must be"),
    (dict(names="Q,M;"), "contain no ','"),
    (dict(names=["Q", "M,"]), "contain no ','"),
    (dict(names="Q"), "at least 2 names"),
    (dict(names=["Q", "M'"]), "may not contain quotes"),
    (dict(mode="greedy"), "mode must be one of"),
    (dict(stop="forever"), "stop must be one of"),
    (dict(stop="flip"), "needs committed agents"),
    (dict(mode="exact", prefill=False), "needs prefill=True"),
    (dict(mode="exact", top_k=30), "top_logprobs >= top_k"),
    (dict(max_interactions=0), "max_interactions must be >= 1"),
    (dict(template="fancy"), "unknown template"),
    (dict(committed=1, committed_name="Z"), "not in the pool"),
])
def test_bad_input_is_refused_before_any_work(tmp_path, kwargs, match):
    args = dict(n_agents=6, memory=2, names="Q,M", max_interactions=10)
    args.update(kwargs)
    with StubServer(["Q", "M"]) as stub:
        with pytest.raises((ValueError, TypeError), match=match):
            run_game(args.pop("n_agents"), args.pop("memory"), args.pop("names"), endpoint=_ep(stub),
                     out=tmp_path / "x", progress=False, **args)
        assert stub.n_chat == 0
    assert not (tmp_path / "x").exists()


def test_type_errors():
    with pytest.raises(TypeError):
        run_game(6.0, 2, "Q,M", max_interactions=10)
    with pytest.raises(TypeError):
        run_game(6, 2, "Q,M", max_interactions=10, endpoint="http://x")


# ----------------------------------------------------------------------------- environment
def test_run_game_works_inside_a_running_event_loop():
    async def notebook_cell(url):
        return run_game(4, 2, "Q,M", max_interactions=5, stop="max", mode="exact",
                        endpoint=EndpointConfig(base_url=url), rng=1, progress=False)

    with StubServer(["Q", "M"]) as stub:
        res = asyncio.run(notebook_cell(stub.base_url))
    assert len(res.log.decisions) == 10


def test_import_is_light():
    code = ("import sys, normlab.llm_runs as m; m.EndpointConfig; "
            "print(any(k.split('.')[0] in ('openai', 'xllamacpp', 'tqdm') for k in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_warning_when_the_endpoint_does_not_continue_the_prefill():
    # an endpoint that ignores the prefill answers with prose: no name among the top tokens
    with StubServer(["Q", "M"], faults=["malformed"] * 50) as stub:
        with pytest.warns(RuntimeWarning, match="continue a final assistant message"):
            res = run_game(4, 2, "Q,M", max_interactions=4, stop="max", mode="exact", endpoint=_ep(stub), rng=1,
                           progress=False)
    d = res.log.decisions
    assert (~d["valid"]).all() and (d["covered_mass"] == 0).all()
    assert d["invalid_reason"].str.contains("no pool name").all()


def test_exact_cache_shared_from_a_strategy_table(tmp_path):
    from normlab.llm_runs import strategy_table

    with StubServer(["Q", "M"]) as stub:
        st = strategy_table("Q,M", 2, endpoint=_ep(stub), out=tmp_path / "table", rng=1, progress=False)
        assert st.llm_calls == 2 * 21
        n = stub.n_chat
        res = run_game(6, 2, "Q,M", max_interactions=60, stop="max", mode="exact", endpoint=_ep(stub), rng=4,
                       progress=False, out=tmp_path / "run", cache=tmp_path / "table")
        assert stub.n_chat == n  # every prompt of the game was in the table: no request at all
        plain = run_game(6, 2, "Q,M", max_interactions=60, stop="max", mode="exact", endpoint=_ep(stub), rng=4,
                         progress=False)
    assert res.summary()["llm_calls"] == 0 and res.summary()["cache_hit_rate"] == 1.0
    pd.testing.assert_frame_equal(res.log.decisions[GAME_COLS], plain.log.decisions[GAME_COLS])
    # the reused distributions were copied: the run directory alone reproduces the run
    recs = [json.loads(x) for x in (tmp_path / "run" / "journal.jsonl").read_text().splitlines()]
    assert sum(r["ev"] == "cached" for r in recs) == res.log.decisions["prompt_hash"].nunique()
    with pytest.raises(FileNotFoundError):
        run_game(6, 2, "Q,M", max_interactions=6, mode="exact", cache=tmp_path / "nope",
                 endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"), progress=False)


def test_same_schema_as_the_theory_strategy_game():
    from normlab.theory import strategy_game

    theory = strategy_game("best_response", n_agents=6, memory=2, names=["Q", "M"], record_decisions=True, rng=1,
                           max_interactions=60, initial="consensus:Q", committed=2).to_log()
    with StubServer(["Q", "M"]) as stub:
        llm = run_game(6, 2, "Q,M", max_interactions=60, stop="max", mode="exact", committed=2,
                       initial="consensus:Q", endpoint=_ep(stub), rng=1, progress=False).log
    for a, b in ((llm.decisions, theory.decisions), (llm.runs, theory.runs)):
        cols = list(DECISION_COLUMNS) if a is llm.decisions else list(RUN_COLUMNS)
        assert list(a.columns[: len(cols)]) == list(b.columns[: len(cols)]) == cols
        assert a[cols].dtypes.equals(b[cols].dtypes)
    # same conventions: committed agents (the last K) play the last name and start with empty memory
    for lg in (llm, theory):
        d = lg.decisions
        first = d.groupby("agent").head(1).set_index("agent")
        assert (first.loc[[4, 5], "memory_state"] == "").all()
        assert (first.loc[[0, 1, 2, 3], "memory_state"] == "Q,Q;Q,Q").all()
        assert (d.loc[d["committed"], "name"] == "M").all()
    both = GameLog.concat([llm, theory])
    assert set(both.runs["kind"]) == {"swap", "simulation"} and len(both.per_round()) > 0


def test_one_writer_per_directory(tmp_path):
    from normlab.llm_runs.journal import Journal

    a = Journal(tmp_path / "journal.jsonl").open()
    try:
        with pytest.raises(ValueError, match="in use by another normlab process"):
            Journal(tmp_path / "journal.jsonl").open()
    finally:
        a.close()
    Journal(tmp_path / "journal.jsonl").open().close()


@pytest.mark.parametrize(
    "graph, match",
    [(nx.empty_graph(6), "isolated"), (nx.DiGraph(nx.cycle_graph(6)), "directed"), (nx.cycle_graph(5), "nodes")],
)
def test_bad_graphs_are_refused_before_any_call(graph, match):
    # the runner validates graphs exactly as the theory simulators do
    with pytest.raises(ValueError, match=match):
        run_game(6, 2, "Q,M", max_interactions=10, graph=graph, endpoint=EndpointConfig(base_url="http://127.0.0.1:9"),
                 progress=False)
