"""Probes (individual bias, neutral names, strategy table, meta-prompting) against the stub (fast)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon
from scipy.stats import binomtest

from normlab.llm_runs import EndpointConfig, StubServer, run_game
from normlab.llm_runs.probes import (
    _meta_questions,
    clopper_pearson,
    enumerate_states,
    find_neutral_names,
    individual_bias,
    meta_prompting,
    strategy_table,
)
from normlab.llm_runs.prompts import load_template
from normlab.llm_runs.testing import history, memory_policy
from normlab.schema import GameLog, parse_memory_state


def _ep(stub):
    return EndpointConfig(base_url=stub.base_url, backoff=0.01)


def biased(bias):
    return lambda system, names: memory_policy(system, names, bias=bias)


def _sharpen(p: dict, T=0.5):
    w = {k: v ** (1 / T) for k, v in p.items()}
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


# ----------------------------------------------------------------------------- helpers
def test_enumerate_states_counts_and_format():
    assert len(enumerate_states("Q,M", 5)) == sum(4**k for k in range(6)) == 1365
    st = enumerate_states(["Q", "M"], 1)
    assert st == ["", "Q,Q", "Q,M", "M,Q", "M,M"]
    assert all(len(parse_memory_state(s)) <= 2 for s in enumerate_states("A,B,C", 2))
    assert len(enumerate_states("A,B,C", 2)) == 1 + 9 + 81


def test_clopper_pearson_matches_scipy():
    lo, hi = clopper_pearson([0, 3, 10], [10, 10, 10])
    for k, (a, b) in enumerate(zip(lo, hi)):
        ci = binomtest([0, 3, 10][k], 10).proportion_ci(method="exact")
        assert (a, b) == pytest.approx((ci.low, ci.high))
    lo, hi = clopper_pearson([0], [0])
    assert np.isnan(lo[0]) and np.isnan(hi[0])


# ----------------------------------------------------------------------------- individual bias
def test_individual_bias_exact_mode_binomial():
    with StubServer(["Q", "M"], policy=biased({"Q": 0.8, "M": 0.2})) as stub:
        r = individual_bias("Q,M", trials=300, endpoint=_ep(stub), rng=1, progress=False)
    expect = _sharpen({"Q": 0.8, "M": 0.2})
    assert r.exact_p == pytest.approx((expect["Q"], expect["M"]))
    assert r.llm_calls == 2  # one request per name order (W! = 2), whatever the number of trials
    assert sum(r.counts) + r.invalid == 300 and r.invalid == 0
    assert r.counts[0] > 250 and r.test == "none"  # simulated counts: no test (issue 33)
    assert np.isnan(r.p_value) and np.isnan(r.bootstrap_p)
    assert r.jsd == pytest.approx(jensenshannon([expect["Q"], expect["M"]], [0.5, 0.5], base=2))
    f = r.to_frame()
    assert list(f["name"]) == ["Q", "M"] and f["n"].iloc[0] == 300
    assert (f["ci_low"] <= f["share"]).all() and (f["share"] <= f["ci_high"]).all()
    log = r.to_log()
    assert isinstance(log, GameLog) and log.runs["kind"].iloc[0] == "probe" and len(log.decisions) == 300
    assert set(log.decisions["names_shown"]) == {"Q,M", "M,Q"}


def test_individual_bias_sample_mode_chi2_for_three_names():
    with StubServer(["A", "B", "C"], policy=biased({"A": 3.0})) as stub:
        r = individual_bias("A,B,C", trials=120, mode="sample", endpoint=_ep(stub), rng=2, progress=False)
    assert r.test == "chi2" and r.exact_p is None and np.isnan(r.covered_mass)
    assert sum(r.counts) + r.invalid == 120 and r.llm_calls >= 120
    assert r.counts[0] > max(r.counts[1:]) and r.p_value < 1e-3
    share = np.asarray(r.counts) / sum(r.counts)
    assert r.jsd == pytest.approx(jensenshannon(share, np.full(3, 1 / 3), base=2))


def test_individual_bias_is_resumable(tmp_path):
    with StubServer(["Q", "M"]) as stub:
        a = individual_bias("Q,M", trials=40, mode="sample", endpoint=_ep(stub), rng=3, progress=False,
                            out=tmp_path / "b")
        n = stub.n_chat
        b = individual_bias("Q,M", trials=40, mode="sample", endpoint=_ep(stub), rng=3, progress=False,
                            out=tmp_path / "b")
        assert stub.n_chat == n
        with pytest.raises(ValueError, match="different settings"):
            individual_bias("Q,M", trials=41, mode="sample", endpoint=_ep(stub), out=tmp_path / "b", progress=False)
    assert a.counts == b.counts
    # a kill inside the first settings write leaves settings.json.tmp alone: a torn write, the probe starts afresh
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "settings.json.tmp").write_text('{"format"')
    with StubServer(["Q", "M"]) as stub:
        c = individual_bias("Q,M", trials=40, mode="sample", endpoint=_ep(stub), rng=3, progress=False, out=torn)
    assert c.counts == a.counts and not (torn / "settings.json.tmp").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty and holds no normlab probe"):
        individual_bias("Q,M", trials=4, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"),
                        out=tmp_path / "mine", progress=False)


# ----------------------------------------------------------------------------- neutral names
def test_find_neutral_names_accepts_only_neutral_pools():
    # the simulated model prefers names that start with a lower-case letter
    def policy(system, names):
        return memory_policy(system, names, bias={n: 1.5 if n[0].islower() else 1.0 for n in names})

    with StubServer(policy=policy) as stub:
        r = find_neutral_names(endpoint=_ep(stub), rng=1, max_pools=40, progress=False)
    c = r.to_frame()
    assert r.names is not None and c["accepted"].iloc[-1] and not c["accepted"].iloc[:-1].any()
    for pool, ok, jsd in zip(c["pool"], c["accepted"], c["jsd"]):
        a, b = pool.split(",")
        assert len(a) == len(b) == 6
        assert ok == (a[0].islower() == b[0].islower())
        assert (jsd < 0.005) == ok
    assert len(c) > 1  # some biased pools were tried and rejected first
    # stub tokens are 3 characters: per name order, one request at the answer position and one
    # continuation for each name's first piece
    assert r.llm_calls == 2 * 3 * len(c)


# ----------------------------------------------------------------------------- strategy table
def test_strategy_table_exact_matches_the_model_and_relabels():
    pol = biased({"M": 1.5})
    with StubServer(["Q", "M"], policy=pol) as stub:
        st = strategy_table("Q,M", 2, endpoint=_ep(stub), rng=1, progress=False)
    t = st.to_frame()
    assert len(t) == 21 * 2 and st.llm_calls == 21 * 2
    assert set(t.columns) >= {"memory_state", "memory_len", "name", "p", "covered_mass", "n_orders", "count", "n",
                              "ci_low", "ci_high", "mirror_state", "mirror_name", "mode", "model"}
    assert t.groupby("memory_state")["p"].sum().to_numpy() == pytest.approx(np.ones(21))
    tpl = load_template("main")
    for row in t[t["name"] == "M"].itertuples():
        mem = parse_memory_state(row.memory_state)
        # the stub's policy ignores the order, so both orders give the same p
        prompt = tpl.render(mem, ("Q", "M"))
        p = _sharpen({k: 0.9 * v for k, v in pol(prompt.system, ["Q", "M"]).items()})
        assert row.p == pytest.approx(p["M"], abs=1e-9)
        assert len(history(prompt.system, ["Q", "M"])) == row.memory_len
    bo = st.by_order()
    assert len(bo) == 21 * 2 * 2 and set(bo["order"]) == {"Q,M", "M,Q"}
    sym = st.symmetry()
    row = sym[(sym["memory_state"] == "Q,Q") & (sym["name"] == "Q")].iloc[0]
    assert row["mirror_state"] == "M,M" and row["mirror_name"] == "M"
    assert row["diff"] < 0  # the model favours M: p(Q | Q,Q) < p(M | M,M)
    with StubServer(["Q", "M"]) as stub:
        sym0 = strategy_table("Q,M", 1, endpoint=_ep(stub), rng=1, progress=False).symmetry()
    assert sym0["diff"].abs().max() < 1e-12


def test_strategy_table_sample_mode_counts_and_intervals(tmp_path):
    with StubServer(["Q", "M"]) as stub:
        st = strategy_table("Q,M", 1, mode="sample", samples=25, endpoint=_ep(stub), rng=2, progress=False,
                            out=tmp_path / "s")
        n = stub.n_chat
        again = strategy_table("Q,M", 1, mode="sample", samples=25, endpoint=_ep(stub), rng=2, progress=False,
                               out=tmp_path / "s")
        assert stub.n_chat == n  # resumed from the journal: nothing asked again
    t = st.to_frame()
    pd.testing.assert_frame_equal(t, again.to_frame())
    assert (t["n"] + t["n_invalid"] == 25).all() and t["covered_mass"].isna().all()
    assert ((t["ci_low"] <= t["p"]) & (t["p"] <= t["ci_high"])).all()
    assert t.groupby("memory_state")["count"].sum().equals(t.groupby("memory_state")["n"].first())
    # the stub copies partners: after (Q,M) the agent plays M most of the time
    qm = t[(t["memory_state"] == "Q,M") & (t["name"] == "M")].iloc[0]
    assert qm["p"] > 0.7 and st.by_order().empty


# ----------------------------------------------------------------------------- meta-prompting
_ENTRY = re.compile(r"\{'round': (\d+), 'Player 1': '([^']+)', 'Player 2': '([^']+)', 'payoff': (-?\d+)\}")


def oracle(body, wrong=False):
    """Answer Table S7 questions from the prompt text alone (an independent reading)."""
    system = body["messages"][0]["content"]
    q = body["messages"][1]["content"]
    hist = [(int(r), a, b, int(p)) for r, a, b, p in _ENTRY.findall(system)]
    names = re.search(r"values: \[([^\]]*)\]", system).group(1).replace("'", "").split(", ")
    if q.startswith("What is the lowest"):
        ans = "-50"
    elif q.startswith("What is the highest"):
        ans = "100"
    elif q.startswith("Which actions"):
        ans = " and ".join(names)
    elif q.startswith("Which is Player 1's payoff"):
        m = re.search(r"Player 1 plays (\S+) and Player 2 plays (\S+)\?", q)
        ans = "100" if m.group(1) == m.group(2) else "-50"
    elif q.startswith("Which is the current round"):
        ans = str(len(hist) + 1)
    elif q.startswith("Which action did Player"):
        who, i = map(int, re.search(r"Player (\d) play in round (\d+)", q).groups())
        ans = hist[i - 1][who]
    elif q.startswith("How many points"):
        i = int(re.search(r"round (\d+)", q).group(1))
        ans = str(hist[i - 1][3])
    elif q.startswith("How many times"):
        who, act = re.search(r"Player (\d) choose (\S+)\?", q).groups()
        ans = str(sum(1 for h in hist if h[int(who)] == act))
    elif q.startswith("What is Player 1's current total"):
        ans = str(sum(h[3] for h in hist))
    else:
        raise AssertionError(q)
    if wrong:
        ans = "zzz" if not ans.lstrip("-").isdigit() else str(int(ans) + 7)
    return "{'value': '" + ans + "'; 'reason': 'oracle'}"


def test_meta_prompting_gold_answers_and_accuracy():
    with StubServer(["Q", "M"], responder=oracle) as stub:
        m = meta_prompting("Q,M", 4, n_states=12, endpoint=_ep(stub), rng=1, progress=False, protocol="normlab")
    a = m.to_frame()
    assert set(a["question"]) == {"min", "max", "actions", "payoff", "round", "action_i", "points_i", "n_actions",
                                  "n_points"}
    assert set(a["category"]) == {"rules", "time", "state"}
    assert a["correct"].all(), a[~a["correct"]]
    acc = m.accuracy()
    assert (acc["accuracy"] == 1.0).all() and acc["n"].sum() == len(a) == m.llm_calls
    # empty memories get only the memory-free questions
    empty = a[a["memory_state"] == ""]
    assert set(empty["question"]) <= {"min", "max", "actions", "payoff", "round"}
    with StubServer(["Q", "M"], responder=lambda b: oracle(b, wrong=True)) as stub:
        w = meta_prompting("Q,M", 4, n_states=12, endpoint=_ep(stub), rng=1, progress=False, protocol="normlab")
    wa = w.to_frame()
    assert not wa[wa["question"] != "actions"]["correct"].any()


def test_meta_questions_gold_by_hand():
    rng = np.random.default_rng(0)
    mem = [("Q", "M"), ("M", "M"), ("M", "M")]
    qs = {q: (ph, gold) for q, ph, gold in _meta_questions(mem, ("Q", "M"), rng, (100, -50))}
    assert qs["min"][1] == "-50" and qs["max"][1] == "100" and qs["round"][1] == "4"
    assert qs["n_points"][1] == "150"
    ph, gold = qs["action_i"]
    assert gold == mem[ph["i"] - 1][ph["x"] - 1]
    ph, gold = qs["n_actions"]
    assert gold == str(sum(1 for e in mem if e[ph["x"] - 1] == ph["p"]))


def test_meta_prompting_on_states_from_a_gamelog():
    with StubServer(["Q", "M"]) as stub:
        res = run_game(6, 3, "Q,M", max_interactions=30, stop="max", mode="exact", endpoint=_ep(stub), rng=1,
                       progress=False)
    with StubServer(["Q", "M"], responder=oracle) as stub:
        m = meta_prompting("Q,M", 3, states=res.log, n_states=5, endpoint=_ep(stub), rng=2, progress=False,
                           protocol="normlab")
    states = set(m.to_frame()["memory_state"])
    assert states <= set(res.log.decisions["memory_state"]) and m.to_frame()["correct"].all()
    with pytest.raises(ValueError, match="longer than memory"):
        meta_prompting("Q,M", 1, states=["Q,M;M,M"], endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"))


def test_sample_mode_agrees_with_exact_mode_on_the_stub():
    """The stub samples like llama.cpp (top-k, temperature): sample-mode shares estimate the
    exact-mode probabilities, which apply the same sampler transform to the logprobs."""
    with StubServer(["Q", "M"], policy=biased({"Q": 0.7, "M": 0.3})) as stub:
        ex = individual_bias("Q,M", trials=10, endpoint=_ep(stub), rng=1, progress=False)
        sa = individual_bias("Q,M", trials=400, mode="sample", max_reasks=5, endpoint=_ep(stub), rng=1,
                             progress=False)
    f = sa.to_frame()
    assert f["ci_low"].iloc[0] <= ex.exact_p[0] <= f["ci_high"].iloc[0]
    assert ex.exact_p[0] == pytest.approx(0.49 / 0.58)


def test_strategy_table_grows_from_a_smaller_table(tmp_path):
    with StubServer(["Q", "M"]) as stub:
        small = strategy_table("Q,M", 1, endpoint=_ep(stub), out=tmp_path / "h1", rng=1, progress=False)
        big = strategy_table("Q,M", 2, endpoint=_ep(stub), cache=tmp_path / "h1", rng=1, progress=False)
    assert small.llm_calls == 10 and big.llm_calls == 42 - 10
    t = big.to_frame()
    pd.testing.assert_frame_equal(t[t["memory_len"] <= 1].reset_index(drop=True), small.to_frame())
