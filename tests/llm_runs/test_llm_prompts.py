"""Prompt templates, answer parsing and exact-mode arithmetic (no server, fast)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math

import pytest

from normlab.llm_runs.exact import choose, name_distribution, sampler_probs
from normlab.llm_runs.prompts import BUILTIN_TEMPLATES, WRAPS, load_template, parse_answer

PREFILL = "{'value': '"


# ----------------------------------------------------------------------------- templates
def test_main_template_matches_the_published_prompt():
    tpl = load_template("main")
    p = tpl.render([("F", "J"), ("J", "J")], ("F", "J"))
    # seed 003 Supplementary Text, Example Prompt: rules, action list, payoffs, history, round, score
    assert p.system.startswith("  Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds.\n")
    assert "pick an action from the following values: ['F', 'J']." in p.system
    # the published rules strings say "payoff 100 points." (no sign) and "-50 points. " (trailing space)
    assert "REWARDED with payoff 100 points.\n" in p.system and "PUNISHED with payoff -50 points. \n" in p.system
    assert "+100" not in p.system
    assert "conditional on the behavior of the other player" in p.system
    assert "{'round': 1, 'Player 1': 'F', 'Player 2': 'J', 'payoff': -50}" in p.system
    assert "{'round': 2, 'Player 1': 'J', 'Player 2': 'J', 'payoff': 100}" in p.system
    assert "It is now round 3. The current score of Player 1 is 50." in p.system
    assert "{'value': <VALUE_OF_PLAYER_1>; 'reason': <YOUR_REASON>}" in p.system
    assert p.user == "Answer saying which action Player 1 should play."
    assert p.prefill == PREFILL and tpl.answer_key == "value"
    # rules come before the history, the history before the query
    assert p.system.index("REWARDED") < p.system.index("history of choices") < p.system.index("It is now round")


# The authors' prompt builder (AI-norms code, MIT: get_prompt of prompting.py / data-era/simulation_module.ipynb,
# copied), with get_rules in the exact form of the `rules` string stored in every published run (two-space
# indentation as in prompting.py, no sign before 100 and a space after "-50 points." as in the data-era notebook).
def _authors_get_rules(rewards, options):
    incorrect, correct = rewards
    rule_set = f"""<|begin_of_text|><|start_header_id|>system<|end_header_id|>
  Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds.
  At each round, Player 1 and Player 2 simultaneously pick an action from the following values: {options}.
  The payoff that both players get is determined by the following rule:
  1. If Players play the SAME action as each other, they will both be REWARDED with payoff {correct} points.
  2. If Players play DIFFERENT actions to each other, they will both be PUNISHED with payoff {incorrect} points. \n  The objective of each Player is to maximize their own accumulated point tally, conditional on the behavior of the other player.
  """
    return rule_set


def _authors_get_prompt(player, memory_size, rules):
    new_query = f"It is now round 1." + " The current score of Player 1 is 0. Answer saying which value Player 1 should pick. Please think step by step before making a decision. Remember, examining history explicitly is important. Write your answer using the following format: {'value': <VALUE_OF_PLAYER_1>; 'reason': <YOUR_REASON>}. <|eot_id|><|start_header_id|>user<|end_header_id|> Answer saying which action Player 1 should play. <|eot_id|><|start_header_id|>assistant<|end_header_id|>"  # noqa: E501
    l = len(player['my_history'])  # noqa: E741
    if l == 0:
        return """\n """.join([rules, new_query])
    current_score = 0
    history_intro = "This is the history of choices in past rounds:"
    histories = []
    indices = list(range(l))[-memory_size:]
    for idx, r in enumerate(indices):
        current_score += player['outcome'][r]
        histories.append({'round': idx + 1, 'Player 1': player['my_history'][r], 'Player 2': player['partner_history'][r],
                          'payoff': player['outcome'][r]})
    new_query = f"It is now round {idx+2}. The current score of Player 1 is {current_score}." + " Answer saying which value Player 1 should pick. Please think step by step before making a decision. Remember, examining history explicitly is important. Write your answer using the following format: {'value': <VALUE_OF_PLAYER_1>; 'reason': <YOUR_REASON>}. <|eot_id|><|start_header_id|>user<|end_header_id|> Answer saying which action Player 1 should play. <|eot_id|><|start_header_id|>assistant<|end_header_id|>"  # noqa: E501
    histories = "\n ".join([f"{hist}" for hist in histories])
    return """\n """.join([rules, history_intro, histories, new_query])


@pytest.mark.parametrize("memory", [
    [], [("Q", "M")], [("Q", "M"), ("M", "M")], [("M", "M")] * 5,
    [("Q", "Q"), ("Q", "M"), ("M", "Q"), ("M", "M"), ("Q", "Q")],
])
@pytest.mark.parametrize("order", [("Q", "M"), ("M", "Q")])
def test_raw_llama3_text_is_the_authors_prompt_byte_for_byte(memory, order):
    player = {"my_history": [a for a, _ in memory], "partner_history": [b for _, b in memory],
              "outcome": [100 if a == b else -50 for a, b in memory]}
    want = _authors_get_prompt(player, 5, _authors_get_rules([-50, 100], list(order)))
    got = load_template("main").render(memory, order).text("raw-llama3")
    assert got == want
    # README Note 3 of the authors' code: Llama-2 by three literal substitutions
    want2 = (want.replace("<|begin_of_text|><|start_header_id|>system<|end_header_id|>", "[INST] <<SYS>>")
             .replace("<|eot_id|><|start_header_id|>user<|end_header_id|>", "<<SYS>>")
             .replace("<|eot_id|><|start_header_id|>assistant<|end_header_id|>", "[/INST]"))
    assert load_template("main").render(memory, order).text("raw-llama2") == want2


def test_prompt_text_wraps_and_errors():
    p = load_template("main").render([], ("Q", "M"))
    assert WRAPS == ("chat", "raw-llama3", "raw-llama2")
    assert p.text("raw-llama3", "{'value': '").endswith("<|start_header_id|>assistant<|end_header_id|>{'value': '")
    with pytest.raises(ValueError, match="wrap must be one of"):
        p.text("llama3")
    with pytest.raises(ValueError, match="sends chat messages"):
        p.text("chat")


def test_raw_text_starts_with_a_published_rules_string(ainorms_dir):
    """Acceptance (issue 9): the raw-llama3 text starts, byte for byte, with the `rules` string stored in a
    published Llama-3.1 run file with the same name order."""
    import zipfile

    from normlab.llm_runs.published._unpickle import restricted_loads

    zpath = ainorms_dir / "llama31_data.zip"
    with zipfile.ZipFile(zpath) as zf:
        member = next(n for n in zf.namelist()
                      if n.endswith("llama31_70b_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl"))
        obj = restricted_loads(zf.read(member), source=member)
    rules = obj["rules"]
    names_shown = ("Q", "M")
    assert f"values: {list(names_shown)!r}." in rules
    text = load_template("main").render([], names_shown).text("raw-llama3")
    assert text.startswith(rules)
    assert text[len(rules):].startswith("\n It is now round 1. The current score of Player 1 is 0.")


def test_every_published_rules_string_starts_the_raw_text(ainorms_dir):
    import zipfile

    from normlab.llm_runs.published._unpickle import restricted_loads

    tpl, n = load_template("main"), 0
    for zpath in sorted(ainorms_dir.glob("*.zip")):
        with zipfile.ZipFile(zpath) as zf:
            for member in zf.namelist():
                if not member.endswith(".pkl") or "/._" in member:
                    continue
                obj = restricted_loads(zf.read(member), source=member)
                if not (isinstance(obj, dict) and "rules" in obj):
                    continue
                rules = obj["rules"]
                names = tuple(x.strip().strip("'") for x in rules.split("values: [")[1].split("]")[0].split(","))
                assert tpl.render([], names).text("raw-llama3").startswith(rules), member
                n += 1
    assert n >= 32  # the run files with a stored rules string: 9 in llama31_data.zip, 23 in llama3_data.zip


def test_empty_memory_has_no_history_and_round_one():
    p = load_template("main").render([], ("M", "Q"))
    assert "history" not in p.system.split("Remember")[0]
    assert "It is now round 1. The current score of Player 1 is 0." in p.system
    assert "['M', 'Q']" in p.system


def test_rounds_are_numbered_within_the_memory_window_and_score_sums_the_window():
    tpl = load_template("main")
    mem = [("Q", "M"), ("Q", "M"), ("M", "M"), ("M", "M"), ("M", "Q")]
    p = tpl.render(mem, ("Q", "M"))
    for k in range(1, 6):
        assert f"'round': {k}," in p.system
    assert "'round': 6" not in p.system
    assert f"The current score of Player 1 is {2 * 100 - 3 * 50}." in p.system
    assert "It is now round 6." in p.system


@pytest.mark.parametrize("name", BUILTIN_TEMPLATES)
def test_every_template_shows_all_names_in_the_given_order_and_the_history(name):
    tpl = load_template(name)
    names = ("XtmT2C", "hsa1P6", "Zq")
    for order in itertools.permutations(names):
        p = tpl.render([("XtmT2C", "hsa1P6")], order)
        positions = [p.system.index(n) for n in order]
        assert positions == sorted(positions), "names must appear in the order shown"
        assert p.names_shown == order
    p = tpl.render([("XtmT2C", "hsa1P6"), ("Zq", "Zq")], names)
    assert p.system.count("hsa1P6") >= 2 and "-50" in p.system and "100" in p.system
    assert tpl.answer_key in p.system and p.prefill.startswith("{'" + tpl.answer_key)
    # different orders give different prompts (the order is part of the prompt hash)
    assert tpl.render([], names).hash != tpl.render([], names[::-1]).hash


def test_bullet_template_lists_the_full_payoff_matrix():
    p = load_template("bullet").render([], ("Q", "M"))
    assert p.system.count("• If Player 1 chooses") == 4
    assert "If Player 1 chooses Q and Player 2 chooses Q, then:\n - Player 1 receives +100 points." in p.system
    assert "If Player 1 chooses Q and Player 2 chooses M, then:\n - Player 1 loses -50 points." in p.system


def test_narrative_template_history_sentences():
    p = load_template("narrative").render([("Q", "M")], ("Q", "M"))
    assert ("In round 1, Player 1 chose action Q and Player 2 chose action M; Player 1 received a payoff of "
            "-50 points and Player 2 received a payoff of -50 points.") in p.system
    assert "between the actions Q and M." in p.system


def test_templates_are_versioned_package_data_with_digests():
    digests = set()
    for name in BUILTIN_TEMPLATES:
        t = load_template(name)
        assert t.version >= 1 and len(t.digest) == 16 and t.reference
        digests.add(t.digest)
    assert len(digests) == 3
    # a custom template from a dict, and its digest changes with its content
    d = load_template("main").to_dict()
    t2 = load_template({**d, "user": "Pick one."})
    assert t2.digest != load_template("main").digest and t2.render([], ("Q", "M")).user == "Pick one."


def test_bad_templates_are_refused_up_front(tmp_path):
    d = load_template("main").to_dict()
    with pytest.raises(ValueError, match="missing keys"):
        load_template({k: v for k, v in d.items() if k != "query"})
    with pytest.raises(ValueError, match=r"unknown placeholder \$rond"):  # was a KeyError traceback
        load_template({**d, "query": "round $rond"})
    with pytest.raises(ValueError, match="unknown template"):
        load_template("fancy")
    f = tmp_path / "t.json"
    f.write_text(json.dumps({**d, "name": "mine"}))
    assert load_template(f).name == "mine"


# ----------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("text, expected", [
    ("{'value': 'Q'; 'reason': 'it paid'}", "Q"),
    ("{'value': Q; 'reason'", "Q"),
    ('{"value": "M", "reason": "x"}', "M"),
    ("{'value': <<<M>>>; 'reason': <<<x>>>}", "M"),
    ("{'action': 'Q'; 'reason': 'x'}", "Q"),
    ("  Q  ", "Q"),
    ("{'value': 'q'}", "Q"),  # unambiguous case-insensitive match
    ("{'value': 'QM'}", None),
    ("{'value': '100'; 'reason'", None),
    ("I think Player 1 should pick Q", None),  # a name in prose is not an answer
    ("", None),
])
def test_parse_answer(text, expected):
    assert parse_answer(text, ["Q", "M"]).name == expected


def test_parse_answer_reads_prefill_continuations_and_ignores_names_in_the_reason():
    assert parse_answer("M'; 'reason': 'the value: Q is bad'", ["Q", "M"], prefill=PREFILL).name == "M"
    # llama.cpp echoes the prefill in the returned text
    assert parse_answer(PREFILL + "Q'; 'reason", ["Q", "M"], prefill=PREFILL).name == "Q"
    # a model that ignores the prefill and writes its own answer
    assert parse_answer("Sure! {'value': 'M'}", ["Q", "M"], prefill=PREFILL).name == "M"
    bad = parse_answer("100'; 'reason", ["Q", "M"], prefill=PREFILL)
    assert bad.name is None and "not a pool name" in bad.reason


def test_parse_answer_case_rules():
    assert parse_answer("{'value': 'q'}", ["Q", "M"], case_sensitive=True).name is None
    assert parse_answer("{'value': 'ab'}", ["Ab", "aB"]).name is None  # ambiguous: refused


# ----------------------------------------------------------------------------- sampler arithmetic
def test_sampler_probs_matches_temperature_and_top_k_by_hand():
    logits = [2.0, 1.0, 0.5, -1.0, -3.0]
    z = math.log(sum(math.exp(x) for x in logits))
    top = [(f"t{k}", x - z) for k, x in enumerate(logits)]
    probs, approx = sampler_probs(top, 0.5, 3)
    w = [math.exp(x / 0.5) for x in logits[:3]]
    assert not approx
    assert [p for _, p in probs] == pytest.approx([x / sum(w) for x in w])
    raw, approx = sampler_probs(top, 1.0, None)
    assert not approx and sum(p for _, p in raw) == pytest.approx(1.0)
    _, approx = sampler_probs(top, 0.5, 40)  # top-k larger than the list: normaliser approximate
    assert approx
    greedy, _ = sampler_probs(top, 0.0, 10)
    assert greedy == [("t0", 1.0)]


def _fetcher(tree: dict, log: list):
    async def fetch(partial):
        log.append(partial)
        return [(t, math.log(p)) for t, p in tree.get(partial, {}).items()]

    return fetch


def _dist(names, tree, **kw):
    log = []
    nd = asyncio.run(name_distribution(names, _fetcher(tree, log), temperature=1.0, top_k=None, **kw))
    return nd, log


def test_single_token_names_need_one_query_and_report_covered_mass():
    nd, log = _dist(["Q", "M"], {"": {"Q": 0.3, "M": 0.5, "5": 0.2}})
    assert log == [""]
    assert nd.probs == pytest.approx((0.375, 0.625))
    assert nd.covered_mass == pytest.approx(0.8)


def test_multi_token_names_are_scored_as_full_sequences():
    # "Alice" = "Al"+"ice" or "A"+"lice"; "Bob" one token; "Al" continued by "ex" leaves the pool
    tree = {
        "": {"Al": 0.5, "A": 0.1, "Bob": 0.3, " ": 0.05, "x": 0.05},
        "Al": {"ice": 0.8, "ex": 0.2},
        "A": {"lice": 1.0},
        " ": {"Bob": 1.0},
    }
    nd, log = _dist(["Alice", "Bob"], tree)
    alice = 0.5 * 0.8 + 0.1 * 1.0
    bob = 0.3 + 0.05
    assert nd.mass == pytest.approx((alice, bob))
    assert nd.covered_mass == pytest.approx(alice + bob)
    assert nd.probs[0] == pytest.approx(alice / (alice + bob))
    assert sorted(log) == sorted(["", "Al", "A", " "])


def test_first_token_mode_skips_unambiguous_continuations():
    tree = {"": {"Al": 0.5, "Bob": 0.3}, "Al": {"ice": 0.8, "ex": 0.2}}
    nd, log = _dist(["Alice", "Bob"], tree, multi_token="first_token")
    assert log == [""]
    assert nd.mass == pytest.approx((0.5, 0.3))


def test_shared_prefixes_and_names_that_prefix_other_names():
    # "Alp" starts both names: expanded even in first_token mode
    tree = {"": {"Alp": 1.0}, "Alp": {"ha": 0.7, "s": 0.3}}
    for mode in ("expand", "first_token"):
        nd, _ = _dist(["Alpha", "Alps"], tree, multi_token=mode)
        assert nd.mass == pytest.approx((0.7, 0.3))
    # "A" is complete only if the answer does not go on alphanumerically
    tree = {"": {"A": 0.6, "AB": 0.4}, "A": {"'": 0.5, "B": 0.25, "x": 0.25}}
    nd, _ = _dist(["A", "AB"], tree)
    assert nd.mass == pytest.approx((0.3, 0.4 + 0.15))
    # a token that closes the name with its delimiter
    nd, _ = _dist(["Q", "M"], {"": {"Q'": 0.4, "M": 0.4, "Qu": 0.2}})
    assert nd.mass == pytest.approx((0.4, 0.4))


def test_no_name_reachable_gives_none_and_case_insensitive_matching():
    nd, _ = _dist(["Q", "M"], {"": {"5": 0.6, "The": 0.4}})
    assert nd.probs is None and nd.covered_mass == 0.0
    nd, _ = _dist(["Q", "M"], {"": {"q": 0.5, "M": 0.5}})
    assert nd.probs == pytest.approx((0.5, 0.5))
    nd, _ = _dist(["Q", "M"], {"": {"q": 0.5, "M": 0.5}}, case_sensitive=True)
    assert nd.probs == pytest.approx((0.0, 1.0))


def test_query_budget_is_bounded():
    tree = {"": {"A": 1.0}}
    tree.update({"A" * k: {"A": 1.0} for k in range(1, 50)})
    nd, log = _dist(["A" * 60, "B"], tree, max_queries=10)
    assert len(log) == 10 and nd.approx and nd.probs is None


def test_choose_is_inverse_cdf():
    assert choose([0.25, 0.75], 0.1) == 0
    assert choose([0.25, 0.75], 0.3) == 1
    assert choose([0.0, 1.0], 0.0) == 1
    assert choose([0.5, 0.5], 0.999999999) == 1
