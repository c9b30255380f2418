"""Protocol fidelity of the LLM runner to the AI-norms authors' code (issue 9), against the real local
HTTP stub server: raw wraps on /completions, re-ask policies, neutral sampler, name orders, committed
placement and injection, random initial memories."""

from __future__ import annotations

import json

import numpy as np

import pytest

from normlab.llm_runs import EndpointConfig, StubServer, run_game
from normlab.llm_runs.runner import game as runner_mod  # the game loop reads REASK_SAFETY_LIMIT
from normlab.llm_runs.backend import open_endpoint
from normlab.llm_runs.prompts import load_template
from normlab.llm_runs.runner import ReaskLimitError
from normlab.schema import parse_memory_state


def _ep(stub, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("backoff_max", 0.05)
    return EndpointConfig(base_url=stub.base_url, **kw)


def _run(stub, **kw):
    args = dict(max_interactions=12, stop="max", rng=3, progress=False)
    args.update(kw)
    n = args.pop("n", 4)
    return run_game(n, 2, "Q,M", endpoint=_ep(stub), **args)


# ----------------------------------------------------------------------------- raw wraps
def test_complete_posts_the_exact_text_and_reads_legacy_logprobs():
    import asyncio

    prompt = load_template("main").render([("Q", "M")], ("M", "Q"))
    text = prompt.text("raw-llama3")

    async def go(stub):
        async with open_endpoint(_ep(stub)) as client:
            r = await client.complete(text, max_tokens=6, temperature=0.5, top_k=10, top_p=1.0, min_p=0.0,
                                      seed=1, logprobs=True, top_logprobs=5)
            return r, client.n_requests

    with StubServer(["Q", "M"]) as stub:
        res, n = asyncio.run(go(stub))
        body = stub.requests[-1]
    assert body["prompt"] == text and "messages" not in body
    assert body["top_p"] == 1.0 and body["min_p"] == 0.0 and body["top_k"] == 10 and body["logprobs"] == 5
    assert n == 1 and res.text.startswith("{'value': '") and res.top and len(res.top) <= 5
    assert res.top == sorted(res.top, key=lambda kv: -kv[1])


@pytest.mark.parametrize("wrap", ["raw-llama3", "raw-llama2"])
def test_raw_wrap_sample_run_sends_prompt_text_to_completions(wrap, tmp_path):
    with StubServer(["Q", "M"], junk_mass=0.0) as stub:
        res = _run(stub, wrap=wrap, mode="sample", out=tmp_path / "r")
        bodies = list(stub.requests)
    assert all("prompt" in b and "messages" not in b for b in bodies)
    d = res.log.decisions
    assert d["valid"].all() and len(d) == 24
    tpl = load_template("main")
    # each request is the exact text of the decision's memory and name order
    first = d.iloc[0]
    want = tpl.render(parse_memory_state(first["memory_state"]), tuple(first["names_shown"].split(","))).text(wrap)
    assert bodies[0]["prompt"] == want or any(b["prompt"] == want for b in bodies[:2])
    s = json.loads((tmp_path / "r" / "settings.json").read_text())["settings"]
    assert s["wrap"] == wrap and s["top_p"] == 1.0 and s["min_p"] == 0.0
    assert res.log.runs.iloc[0]["wrap"] == wrap


def test_raw_wrap_exact_mode_reads_completion_logprobs():
    with StubServer(["Q", "M"]) as stub:
        raw = _run(stub, wrap="raw-llama3", mode="exact")
        bodies = list(stub.requests)
        chat = _run(stub, wrap="chat", mode="exact")
    assert all(b.get("prompt", "").endswith("<|end_header_id|>{'value': '") for b in bodies)
    d = raw.log.decisions
    assert d["valid"].all()
    # the stub's distribution depends on the history only: both wraps give the same game on the same seed
    for c in ("name", "memory_state", "p_name", "covered_mass"):
        assert list(d[c]) == list(chat.log.decisions[c])


# ----------------------------------------------------------------------------- sampler
def test_sample_mode_sends_neutral_top_p_min_p_unless_overridden():
    with StubServer(["Q", "M"]) as stub:
        res = _run(stub, mode="sample", max_interactions=2)
        assert all(b["top_p"] == 1.0 and b["min_p"] == 0.0 for b in stub.requests)
        stub.requests.clear()
        over = _run(stub, mode="sample", max_interactions=2, top_p=0.9, min_p=None)
        assert all(b["top_p"] == 0.9 and "min_p" not in b for b in stub.requests)
    sampler = json.loads(res.log.runs.iloc[0]["sampler"])
    assert sampler == {"temperature": 0.5, "top_k": 10, "top_p": 1.0, "min_p": 0.0, "max_tokens": 6}
    assert json.loads(over.log.runs.iloc[0]["sampler"])["min_p"] is None
    assert res.summary()["sampler"]["top_p"] == 1.0


# ----------------------------------------------------------------------------- re-asks
def test_integer_reask_cap_counts_reasks_and_records_invalid():
    # every answer is junk: 1 + 2 requests per decision, then invalid
    with StubServer(["Q", "M"], faults=["malformed"] * 200) as stub:
        res = _run(stub, mode="sample", max_interactions=3, max_reasks=2)
    d = res.log.decisions
    assert (~d["valid"]).all() and (d["llm_calls"] == 3).all() and (d["reasks"] == 2).all()
    assert d["invalid_reason"].str.endswith("(after 3 attempts)").all()
    assert res.log.runs.iloc[0]["reasks"] == 12 and res.summary()["reasks"] == 12


def test_unbounded_reasks_until_a_pool_name_and_stops_at_the_safety_limit(monkeypatch):
    # the first 5 answers are junk, then valid: unbounded re-asks give every decision a name
    with StubServer(["Q", "M"], junk_mass=0.0, faults=["malformed"] * 5) as stub:
        res = _run(stub, mode="sample", max_interactions=4, max_reasks="unbounded")
    d = res.log.decisions
    assert d["valid"].all() and int(d["reasks"].sum()) == 5 and res.summary()["max_reasks"] == "unbounded"
    monkeypatch.setattr(runner_mod, "REASK_SAFETY_LIMIT", 4)
    with StubServer(["Q", "M"], faults=["malformed"] * 50) as stub:
        with pytest.raises(ReaskLimitError, match="no pool name in 4 answers.*safety limit"):
            _run(stub, mode="sample", max_interactions=2, max_reasks="unbounded")


# ----------------------------------------------------------------------------- orders, placement, initial states
def _sides(res):
    """(order of the first player, order of the second) per interaction; committed players see no prompt."""
    d = res.log.decisions
    return [(a, b if b is not None else a) if a is not None else (b, b)
            for a, b in d.groupby("t")["names_shown"].agg(list)]


def test_name_order_shared_in_prepared_runs_per_agent_from_empty():
    with StubServer(["Q", "M", "X", "Y"]) as stub:
        kw = dict(mode="exact", max_interactions=30)
        shared = run_game(6, 2, "Q,M,X,Y", initial="consensus:Q", committed=1, endpoint=_ep(stub), stop="max",
                          rng=5, progress=False, **kw)
        empty = run_game(6, 2, "Q,M,X,Y", endpoint=_ep(stub), stop="max", rng=5, progress=False, **kw)
        forced = run_game(6, 2, "Q,M,X,Y", name_order="shared", endpoint=_ep(stub), stop="max", rng=5,
                          progress=False, **kw)
    assert shared.settings["name_order"] == "shared" and empty.settings["name_order"] == "per_agent"
    assert all(a == b for a, b in _sides(shared))
    assert any(a != b for a, b in _sides(empty))
    assert all(a == b for a, b in _sides(forced))
    # one shuffle per interaction: the shared order is the first player's order of the per-agent run
    assert [a for a, _ in _sides(forced)] == [a for a, _ in _sides(empty)][: len(_sides(forced))]


def test_random_committed_placement_is_seeded_and_inject_adds_agents():
    with StubServer(["Q", "M"]) as stub:
        kw = dict(mode="exact", committed=3, initial="consensus:Q", max_interactions=40, runs=3)
        a = run_game(10, 2, "Q,M", committed_placement="random", endpoint=_ep(stub), stop="max", rng=9,
                     progress=False, **kw)
        b = run_game(10, 2, "Q,M", committed_placement="random", endpoint=_ep(stub), stop="max", rng=9,
                     progress=False, **kw)
        inj = run_game(10, 2, "Q,M", committed_mode="inject", endpoint=_ep(stub), stop="max", rng=9,
                       progress=False, **kw)
    ids = list(a.log.runs["committed_ids"])
    assert ids == list(b.log.runs["committed_ids"]) and len(set(ids)) > 1
    for k, row in a.log.runs.iterrows():
        cids = {int(x) for x in row["committed_ids"].split(",")}
        d = a.log.decisions[a.log.decisions["run"] == row["run"]]
        assert len(cids) == 3 and set(d.loc[d["committed"], "agent"]) <= cids
        assert (d.loc[d["committed"], "name"] == "M").all()
        assert not (set(d.loc[~d["committed"], "agent"]) & cids)
    assert inj.settings["n_agents"] == 13 and (inj.log.runs["committed_ids"] == "10,11,12").all()
    assert (inj.log.runs["committed_mode"] == "inject").all()


def test_random_initial_memories_use_the_first_two_names_and_are_reproducible():
    with StubServer(["Q", "M", "X"]) as stub:
        kw = dict(mode="exact", initial="random", max_interactions=30, stop="max", progress=False)
        a = run_game(8, 3, "Q,M,X", endpoint=_ep(stub), rng=2, **kw)
        b = run_game(8, 3, "Q,M,X", endpoint=_ep(stub), rng=2, **kw)
    d = a.log.decisions
    first = d.groupby("agent").head(1)
    states = [parse_memory_state(s) for s in first["memory_state"]]
    assert all(len(m) == 3 for m in states)
    assert {x for m in states for pair in m for x in pair} <= {"Q", "M"}
    assert len(set(first["memory_state"])) > 1
    assert list(a.log.decisions["memory_state"]) == list(b.log.decisions["memory_state"])
    assert a.settings["name_order"] == "shared" and a.log.runs.iloc[0]["kind"] == "evolved"


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kw, msg", [
    (dict(wrap="llama3"), "wrap must be one of"),
    (dict(max_reasks="forever"), "must be 'unbounded' or an int"),
    (dict(max_reasks=-1), "must be 'unbounded' or an int"),
    (dict(top_p=1.5), "top_p must be in"),
    (dict(min_p=-0.1), "min_p must be >= 0"),
    (dict(mode="exact", top_p=0.9), "needs neutral top_p"),
    (dict(name_order="mixed"), "name_order must be one of"),
    (dict(committed_placement="first"), "committed_placement must be one of"),
    (dict(committed_mode="add"), "committed_mode must be one of"),
    (dict(initial="uniform"), "'empty', 'random' or 'consensus:<name>'"),
])
def test_bad_protocol_options_get_one_line_errors(kw, msg):
    with pytest.raises((ValueError, TypeError), match=msg) as e:
        run_game(4, 2, "Q,M", max_interactions=2, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"),
                 progress=False, **kw)
    assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------- Table S5 bootstrap p
def test_bootstrap_p_matches_the_exact_tail_of_a_70_percent_subsample():
    from scipy.stats import binom

    from normlab.llm_runs import bootstrap_p

    # 40 Q, 60 M: observed share of the second name 0.6 >= 0.5 -> right tail of Binomial(70, 0.6) / 70
    want = binom.sf(41, 70, 0.6)  # P(X >= 42) = P(mean >= 0.6)
    got = bootstrap_p((40, 60), rng=1)
    assert abs(got - want) < 0.02  # Monte-Carlo error of 10 000 samples is ~0.005
    # 70 Q, 30 M: left tail, P(X <= 21)
    assert abs(bootstrap_p((70, 30), rng=2) - binom.cdf(21, 70, 0.3)) < 0.02
    # labels do not matter (both tails are the same event up to relabelling)
    assert abs(bootstrap_p((60, 40), rng=3) - want) < 0.02
    # degenerate: every subsample mean equals the observed share
    assert bootstrap_p((0, 50), rng=4) == 1.0 and bootstrap_p((50, 0), rng=4) == 1.0
    assert bootstrap_p((40, 60), rng=7) == bootstrap_p((40, 60), rng=7)
    for bad in [(1, 2, 3), (-1, 3), (0, 0), (1.5, 2)]:
        with pytest.raises(ValueError, match="counts"):
            bootstrap_p(bad)
    with pytest.raises(ValueError, match="fraction"):
        bootstrap_p((3, 4), fraction=0)


def test_individual_bias_reports_the_bootstrap_p():
    from normlab.llm_runs import individual_bias

    # sample mode: the answers were drawn by the model, so a test on them means something (in exact
    # mode the counts are drawn locally from the probed probabilities: no test, bootstrap_p NaN)
    with StubServer(["Q", "M"]) as stub:
        r = individual_bias("Q,M", trials=40, mode="sample", endpoint=_ep(stub), rng=1, progress=False)
        r2 = individual_bias("Q,M", trials=40, mode="sample", endpoint=_ep(stub), rng=1, progress=False)
        e = individual_bias("Q,M", trials=40, mode="exact", endpoint=_ep(stub), rng=1, progress=False)
    assert 0 <= r.bootstrap_p <= 1 and r.bootstrap_p == r2.bootstrap_p
    assert (r.to_frame()["bootstrap_p"] == r.bootstrap_p).all()
    assert np.isnan(e.bootstrap_p)


# ----------------------------------------------------------------------------- meta-prompting, authors' protocol
def _authors_meta_rules(rewards, options):  # prompting.py get_rules (AI-norms code, MIT), used by their meta code
    incorrect, correct = rewards
    return f"""<|begin_of_text|><|start_header_id|>system<|end_header_id|>
  Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds.
  At each round, Player 1 and Player 2 simultaneously pick an action from the following values: {options}.
  The payoff that both players get is determined by the following rule:
  1. If Players play the SAME action as each other, they will both be REWARDED with payoff +{correct} points.
  2. If Players play DIFFERENT actions to each other, they will both be PUNISHED with payoff {incorrect} points.
  The objective of each Player is to maximize their own accumulated point tally, conditional on the behavior of the other player.
  """  # noqa: E501


def _authors_get_meta_prompt(player, rules, question):  # prompting.py get_meta_prompt (AI-norms code, MIT)
    new_query = "It is now round 1." + " The current score of Player 1 is 0. You are an observer who answers questions about the game using a single value. Please think step by step before making a decision. Remember, examining history explicitly is important. You write your response using the following format: {'value': <YOUR_ANSWER>; 'reason': <YOUR_REASON>}. <|eot_id|><|start_header_id|>user<|end_header_id|>" + f" {question} <|eot_id|><|start_header_id|>assistant<|end_header_id|>"  # noqa: E501
    n = len(player['my_history'])
    if n == 0:
        return """\n """.join([rules, new_query])
    current_score = 0
    histories = []
    for idx in range(n):
        outcome = player['outcome'][idx]
        current_score += outcome
        histories.append({'round': idx + 1, 'Player 1': player['my_history'][idx],
                          'Player 2': player['partner_history'][idx], 'payoff': outcome})
    new_query = f"It is now round {idx+2}. The current score of Player 1 is {current_score}." + " You are an observer who answers questions about the game using a single value. Please think step by step before making a decision. Remember, examining history explicitly is important. You write your response using the following format: {'value': <YOUR_ANSWER>; 'reason': <YOUR_REASON>}. <|eot_id|><|start_header_id|>user<|end_header_id|>" + f" {question} <|eot_id|><|start_header_id|>assistant<|end_header_id|>"  # noqa: E501
    histories = "\n ".join([f"{hist}" for hist in histories])
    return """\n """.join([rules, "This is the history of choices in past rounds:", histories, new_query])


@pytest.mark.parametrize("memory", [[], [("Q", "M")], [("M", "M"), ("Q", "M"), ("Q", "Q")]])
def test_authors_meta_prompt_text_byte_for_byte(memory):
    from normlab.llm_runs.prompts import load_meta_template

    spec = load_meta_template()["authors"]
    q = "Answer saying what is the lowest payoff Player 1 can get in a single round."
    assert spec["questions"]["min"] == q
    player = {"my_history": [a for a, _ in memory], "partner_history": [b for _, b in memory],
              "outcome": [100 if a == b else -50 for a, b in memory]}
    want = _authors_get_meta_prompt(player, _authors_meta_rules([-50, 100], ["M", "Q"]), q)
    got = load_template("main").render(memory, ("M", "Q"), query=spec["query"], user=q,
                                       rules=spec["rules_main"]).text("raw-llama3")
    assert got == want


def test_authors_substring_scoring_versus_strict():
    from normlab.llm_runs.probes import _meta_correct, authors_meta_correct, authors_meta_value

    text = "{'value': '10'; 'reason': 'I count'"
    assert authors_meta_value(text) == "'10'"
    assert authors_meta_value("Sure, value") is None and authors_meta_value(None) is None
    assert authors_meta_correct("round", "1", "'10'", ["Q", "M"])  # the authors' substring test accepts it
    assert not _meta_correct("round", "1", text, "10", ["Q", "M"])  # normlab's strict reading does not
    assert authors_meta_correct("action_i", "Q", "'Q'", ["Q", "M"]) and not authors_meta_correct("action_i", "Q", "Q", ["Q", "M"])
    assert authors_meta_correct("actions", "Q,M", "['M', 'Q']", ["Q", "M"])


_ENTRY = __import__("re").compile(r"\{'round': (\d+), 'Player 1': '([^']+)', 'Player 2': '([^']+)', 'payoff': (-?\d+)\}")


def _authors_oracle(body, state={"n": 0}):  # noqa: B006 - a counter shared across calls
    """Answers the authors' questions from the raw prompt text; every 4th request first answers without a
    'value' field (the authors re-ask)."""
    import re

    state["n"] += 1
    if state["n"] % 4 == 0:
        return "I think the answer"
    text = body["prompt"]
    q = text.split("user<|end_header_id|> ", 1)[1].split(" <|eot_id|>", 1)[0]
    hist = [(int(r), a, b, int(p)) for r, a, b, p in _ENTRY.findall(text)]
    names = re.search(r"values: \[([^\]]*)\]", text).group(1).replace("'", "").split(", ")
    if "lowest payoff" in q:
        ans = "-50"
    elif "highest payoff" in q:
        ans = "100"
    elif "all the action values" in q:
        ans = str(names)
    elif "payoff in a single round if" in q:
        m = re.search(r"Player 1 plays (\S+) and Player 2 plays (\S+)\.", q)
        ans = "100" if m.group(1) == m.group(2) else "-50"
    elif "current round" in q:
        ans = str(len(hist) + 1)
    elif "which action Player" in q:
        who, i = map(int, re.search(r"Player (\d) played in round (\d+)", q).groups())
        ans = hist[i - 1][who]
    elif "how many points" in q:
        ans = str(hist[int(re.search(r"round (\d+)", q).group(1)) - 1][3])
    elif "how many times" in q:
        who, act = re.search(r"Player (\d) played action (\S+) overall", q).groups()
        ans = str(sum(1 for h in hist if h[int(who)] == act))
    elif "current total payoff" in q:
        ans = str(sum(h[3] for h in hist))
    else:
        raise AssertionError(q)
    return "{'value': '" + ans + "'; 'reason': 'oracle'}"


def test_meta_prompting_in_the_authors_protocol_end_to_end():
    from normlab.llm_runs import meta_prompting

    with StubServer(["Q", "M"], responder=_authors_oracle) as stub:
        m = meta_prompting("Q,M", 3, n_states=6, endpoint=_ep(stub), rng=4, progress=False, wrap="raw-llama3")
        bodies = list(stub.requests)
    a = m.to_frame()
    assert m.protocol == "authors" and m.scoring == "substring"
    assert all(b["max_tokens"] == 15 and b["prompt"].endswith("assistant<|end_header_id|>") for b in bodies)
    assert all("You are an observer who answers questions about the game using a single value." in b["prompt"]
               for b in bodies)
    assert a["text"].str.startswith("Answer saying").all()
    assert a["correct"].all(), a[~a["correct"]]
    assert int(a["reasks"].sum()) == len(bodies) - len(a) > 0 and m.llm_calls == len(bodies)
    assert (a.loc[a["question"] == "action_i", "gold"].str.startswith("'")).all()
    with pytest.raises(ValueError, match="protocol must be one of"):
        meta_prompting("Q,M", 3, protocol="paper", endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ValueError, match="scoring must be one of"):
        meta_prompting("Q,M", 3, scoring="fuzzy", endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"))


# ----------------------------------------------------------------------------- the authors' answer reading
def test_parse_answer_authors_reads_quoted_names_like_get_response():
    from normlab.llm_runs.prompts import parse_answer, parse_answer_authors

    # a quoted pool name anywhere counts; the last name *in the order shown* that occurs wins
    assert parse_answer_authors("I pick 'M' because", ("Q", "M")).name == "M"
    assert parse_answer_authors("{'value': 'Q'; 'reason': 'M'}", ("Q", "M")).name == "M"
    assert parse_answer_authors("{'value': 'Q'; 'reason': 'M'}", ("M", "Q")).name == "Q"
    assert parse_answer_authors("{'value': 'Q'; 'reason': 'M is bad'}", ("Q", "M")).name == "Q"  # whole pieces only
    assert parse_answer_authors("{'value': 'q'}", ("Q", "M")).name is None  # exact match only
    assert parse_answer_authors("{'value': Q}", ("Q", "M")).name is None  # unquoted
    assert parse_answer("I pick 'M' because", ["Q", "M"]).name is None  # normlab's reading is stricter


def test_authors_parse_in_a_run():
    # answers with a quoted name outside the value field are valid for the authors' reading only
    def resp(body):
        return "Player 1 should pick 'M'"

    with StubServer(["Q", "M"], responder=resp) as stub:
        a = _run(stub, mode="sample", parse="authors", max_interactions=3)
        n = _run(stub, mode="sample", max_interactions=3, max_reasks=0)
    assert a.log.decisions["valid"].all() and (a.log.decisions["name"] == "M").all()
    assert (~n.log.decisions["valid"]).all()
    assert a.summary()["parse"] == "authors" and a.log.runs.iloc[0]["parse"] == "authors"
    with pytest.raises(ValueError, match="parse must be one of"):
        run_game(4, 2, "Q,M", max_interactions=2, parse="loose", progress=False,
                 endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"))


def test_cli_reask_safety_limit_is_one_clear_message(tmp_path, capsys, monkeypatch):
    from normlab.cli import main

    monkeypatch.setattr(runner_mod, "REASK_SAFETY_LIMIT", 3)
    with StubServer(["Q", "M"], faults=["malformed"] * 50) as stub:
        rc = main(["llm-run", "--n-agents", "4", "--memory", "2", "--names", "Q,M", "--max-interactions", "4",
                   "--base-url", stub.base_url, "--out", str(tmp_path / "u"), "--reask", "unbounded", "--no-progress",
                   "--mode", "sample", "--seed", "1"])
    # (the stub's own threads may log a connection reset of the abandoned in-flight request to stderr)
    lines = [x for x in capsys.readouterr().err.splitlines() if x.startswith("normlab llm-run:")]
    assert rc == 3 and len(lines) == 1  # one line, saying what happened and that completed work is kept
    assert "no pool name in 3 answers" in lines[0] and "safety limit" in lines[0] and "endpoint error" not in lines[0]
    assert "completed interactions are kept in" in lines[0]
