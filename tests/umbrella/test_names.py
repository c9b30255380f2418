"""Look-alike names (issue 23, finding 10): ``Q`` and ``Q`` + a zero-width space, or a name behind a
right-to-left override, were accepted as two different names by every command.

Names now pass one home, :func:`normlab.schema.validate_names` (each name through
:func:`normlab.schema.normalise_name`): NFKC-normalised, refused in one line when they carry an
invisible or bidirectional control character, refused when two of them are one name after
normalisation. Every command that takes ``--names`` is checked below; each case fails before any
endpoint is contacted (nothing listens at ``DEAD``), so before the fix these commands went on and
ended in a connection error (exit 3) or played the look-alike pool. The CRSEC experiment's agents
(dicts or an experiment file) pass the same check (:func:`normlab.schema.unique_names`).
"""

from __future__ import annotations

import unicodedata

import pytest

from normlab.cli import main
from normlab.schema import normalise_name, validate_names

DEAD = "http://127.0.0.1:9/v1"

#: one of each kind of character a name may not carry
HIDDEN = {
    "zero-width space": "\u200b", "zero-width joiner": "\u200d", "zero-width non-joiner": "\u200c",
    "right-to-left override": "\u202e", "left-to-right embedding": "\u202a", "right-to-left isolate": "\u2067",
    "pop directional isolate": "\u2069", "right-to-left mark": "\u200f", "arabic letter mark": "\u061c",
    "byte-order mark": "\ufeff", "soft hyphen": "\u00ad", "word joiner": "\u2060", "tag": "\U000e0041",
    "bell (Cc)": "\x07", "delete (Cc)": "\x7f", "next line (C1)": "\x85", "line separator": "\u2028",
    "hangul filler": "\u3164", "variation selector": "\ufe0f", "combining grapheme joiner": "\u034f",
    "private use": "\ue000",
}


def _visible(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text)


@pytest.mark.parametrize("char", HIDDEN.values(), ids=HIDDEN.keys())
@pytest.mark.parametrize("where", ["end", "start", "middle"])
def test_a_hidden_character_is_refused_and_shown_escaped(char, where):
    name = {"end": "Q" + char, "start": char + "Q", "middle": "Q" + char + "Q"}[where]
    with pytest.raises(ValueError, match=r"invisible or bidirectional control character \(U\+") as e:
        validate_names(["M", name])
    msg = str(e.value)
    assert "\n" not in msg and _visible(msg) and char not in msg, msg  # an override in the message would turn the line
    assert f"U+{ord(char):04X}" in msg and ascii(name) in msg, msg


@pytest.mark.parametrize("pool, same", [
    (["Q", "\uff31"], "'Q'"),            # fullwidth Q
    (["fi", "\ufb01"], "'fi'"),          # the fi ligature
    (["Q2", "Q\u00b2"], "'Q2'"),         # superscript two
    (["A B", "A\u00a0B"], "'A B'"),      # a no-break space
    (["Kelvin", "\u212aelvin"], "'Kelvin'"),  # the Kelvin sign
])
def test_names_that_collide_after_nfkc_are_refused(pool, same):
    with pytest.raises(ValueError, match="one name after NFKC normalisation") as e:
        validate_names(pool)
    assert same in str(e.value)


def test_names_are_normalised_and_plain_names_unchanged():
    assert validate_names("\uff31,\uff2d") == ("Q", "M")
    assert validate_names(["\ufb01sh", "M"]) == ("fish", "M")
    assert validate_names(" Q , M ") == ("Q", "M")
    assert validate_names("Q,M") == ("Q", "M")
    # letters of any script, accents composed or not, are names
    assert validate_names(["\u05d0", "\u0645", "e\u0301", "\u00fc"]) == ("\u05d0", "\u0645", "\u00e9", "\u00fc")
    with pytest.raises(ValueError, match="names must be unique"):
        validate_names("Q,Q")
    with pytest.raises(ValueError, match=r"NFKC: 'Q,M'.*no ',' or ';'"):  # a fullwidth comma becomes a comma
        validate_names(["Q\uff0cM", "X"])
    assert normalise_name("\uff2d") == "M"


def test_committed_and_consensus_names_go_through_the_same_check():
    from normlab.llm_runs.runner.settings import make_settings

    s, _, _ = make_settings(6, 2, "\uff31,M", max_interactions=4, committed=1, committed_name="\uff2d",
                      initial="consensus:\uff31")
    assert s.names == ("Q", "M") and s.committed_name == "M" and s.initial == "consensus:Q"
    with pytest.raises(ValueError, match="invalid committed name 'M\\\\u200b'"):
        make_settings(6, 2, "Q,M", max_interactions=4, committed=1, committed_name="M\u200b")
    with pytest.raises(ValueError, match="invalid initial consensus name '\\\\u202eQ'"):
        make_settings(6, 2, "Q,M", max_interactions=4, initial="consensus:\u202eQ")


ZWSP = "Q,Q\u200b"
RLO = "\u202eQ,M"
FULLWIDTH = "Q,\uff31"
CLI = {
    "llm-run": ["llm-run", "--n-agents", "4", "--memory", "1", "--max-interactions", "4", "--base-url", DEAD,
                "--model", "m", "--out", "{t}/run"],
    "llm-run --dry-run": ["llm-run", "--n-agents", "4", "--memory", "1", "--max-interactions", "4", "--dry-run",
                          "--base-url", DEAD, "--model", "m"],
    "llm-probe strategy": ["llm-probe", "strategy", "--memory", "1", "--base-url", DEAD, "--model", "m"],
    "llm-probe bias": ["llm-probe", "bias", "--base-url", DEAD, "--model", "m"],
    "llm-probe meta": ["llm-probe", "meta", "--memory", "1", "--base-url", DEAD, "--model", "m"],
    "demo": ["demo", "--out", "{t}/demo", "--base-url", DEAD, "--model", "m"],
    "calibrate --log": ["calibrate", "--log", "{t}/nolog"],
    "calibrate --table": ["calibrate", "--table", "llama31_70b_QM_H5"],
    "predict --probe": ["predict", "--probe", "--n-agents", "4", "--memory", "1", "--base-url", DEAD, "--model", "m"],
    "simulate strategy": ["simulate", "strategy", "--n-agents", "6", "--memory", "1", "--strategy", "best_response"],
}


@pytest.mark.parametrize("names, message", [
    (ZWSP, "invalid name 'Q\\u200b': it carries an invisible or bidirectional control character (U+200B ZERO WIDTH "
           "SPACE)"),
    (RLO, "invalid name '\\u202eQ': it carries an invisible or bidirectional control character (U+202E RIGHT-TO-LEFT "
          "OVERRIDE)"),
    (FULLWIDTH, "names 'Q' and '\uff31' are one name after NFKC normalisation ('Q')"),
], ids=["zero-width", "rtl-override", "fullwidth"])
@pytest.mark.parametrize("command", CLI, ids=CLI.keys())
def test_every_command_refuses_look_alike_names_in_one_line(command, names, message, tmp_path, capsys):
    argv = [a.replace("{t}", str(tmp_path)) for a in CLI[command]] + ["--names", names]
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (rc, err)
    prog = "normlab " + command.split(" --")[0]
    assert lines[0].startswith(f"{prog}: error: ") and message in lines[0], lines[0]
    assert _visible(lines[0]) and out == ""
    assert not any(tmp_path.iterdir()), "nothing is written before the names are checked"


@pytest.mark.parametrize("second, words", [
    ("Ann\u200b", "invalid agent name 'Ann\\u200b': it carries an invisible or bidirectional control character"),
    ("\u202eAnn", "invalid agent name '\\u202eAnn'"),
    ("\uff21nn", "agent names 'Ann' and '\uff21nn' are one name after NFKC normalisation ('Ann')"),
    ("Ann", "agent names must be unique"),
])
def test_crsec_experiment_agents_are_checked_alike(second, words, tmp_path):
    """The CRSEC experiment's agents (given as dicts or as a JSON experiment file) pass the same
    check: two agents a reader cannot tell apart are refused."""
    import json

    from normlab.llm_runs.crsec.runner import run_population

    agents = [{"name": "Ann", "description": "a"}, {"name": second, "description": "b"}]
    f = tmp_path / "agents.json"
    f.write_text(json.dumps({"agents": agents}))
    for given in (agents, f):
        with pytest.raises(ValueError) as e:
            run_population(given, minutes=10)
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)
    assert not any(p.name != "agents.json" for p in tmp_path.iterdir())


def test_crsec_agent_names_are_normalised():
    from normlab.llm_runs.crsec.runner import _select_agents

    assert [a["name"] for a in _select_agents([{"name": "\uff21nn"}, {"name": "Bob"}])] == ["Ann", "Bob"]
    assert len(_select_agents(None)) >= 2  # the built-in agents pass unchanged
