"""Hedged answers name several pool names in the answer field: they are invalid, never the first
name (a 20% hedge rate otherwise turns an M consensus into Q)."""

from __future__ import annotations

import pytest

from normlab.llm_runs import parse_answer

PREFILL = "{'value': '"


@pytest.mark.parametrize("text", ["{'value': 'Q' or 'M'}", "{'value': 'Q, M'}", "{'value': 'Q' (or maybe 'M')}",
                                  "{'value': 'Q' or 'M'; 'reason': 'either'}"])
def test_hedges_are_invalid(text):
    for got in (parse_answer(text, ["Q", "M"]), parse_answer(text[len(PREFILL):], ["Q", "M"], prefill=PREFILL)):
        assert got.name is None and "hedged" in got.reason


@pytest.mark.parametrize("text, name", [
    ("{'value': 'Q'; 'reason': 'M is worse'}", "Q"),   # the other name only in the reason
    ("{'value': 'M', 'reason': 'Q lost'}", "M"),
    ("{'value': 'M'} I'm sure", "M"),                  # after the field closes
    ("{'value': 'Q'}\nM was played last round", "Q"),
    ("{'value': 'MQ'}", None),                          # not a pool name at all
    ("{'value': 'Q/M'}", None),
])
def test_single_answers_still_parse(text, name):
    assert parse_answer(text, ["Q", "M"]).name == name


def test_multi_character_names_and_substrings():
    assert parse_answer("{'value': 'kqwe'}", ["kqwe", "qwe"]).name == "kqwe"  # 'qwe' is inside, not a token
    assert parse_answer("{'value': 'kqwe' or 'qwe'}", ["kqwe", "qwe"]).name is None


def test_template_with_unknown_placeholder_is_one_clear_error(tmp_path):
    import json
    from importlib.resources import files

    from normlab.llm_runs import load_template

    t = json.loads(files("normlab.llm_runs.templates").joinpath("main.json").read_text())
    t["query"] += " $bogus"
    (tmp_path / "bad.json").write_text(json.dumps(t))
    with pytest.raises(ValueError, match=r"unknown placeholder \$bogus"):
        load_template(tmp_path / "bad.json")
    t["query"] += " costs $"
    (tmp_path / "bad2.json").write_text(json.dumps(t).replace("$bogus", ""))
    with pytest.raises(ValueError, match="invalid placeholder"):
        load_template(tmp_path / "bad2.json")
