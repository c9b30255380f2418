"""Issue 29, item 9 (names): look-alike names across scripts refused with the Unicode confusables
skeleton (UTS #39), a named script mix allowed on purpose, and duplicate CRSEC agents refused before
any request. Each test names the finding it guards; each failed on the code before the fix."""

from __future__ import annotations

import pytest

from normlab.cli import main
import normlab.schema
from normlab.schema import unique_names, validate_names

from _hostile_server import HostileServer, http  # the tests' own local servers (tests/: conftest.py)


@pytest.mark.parametrize("pool", ["A,А", "o,ο", "Q,Ｍ,М", "Paris,Pаris", "B,Β"])
def test_look_alike_names_across_scripts_are_refused(pool):
    """Item 9: cross-script look-alike names (Latin A and Cyrillic А, Latin o and Greek ο) were
    accepted as different names; a name mixing scripts (``Pаris`` with a Cyrillic ``а``) too."""
    with pytest.raises(ValueError, match="look alike|mixes scripts") as info:
        validate_names(pool)
    assert "UTS #39" in str(info.value) or "mixes scripts" in str(info.value)
    assert "\n" not in str(info.value) and "NORMLAB_ALLOW_SCRIPTS" in str(info.value)


def test_a_named_script_mix_is_allowed_on_purpose(monkeypatch):
    """Item 9: the option to allow a named script mix (argument, or $NORMLAB_ALLOW_SCRIPTS)."""
    assert validate_names("A,А", allow_scripts=("Latin", "Cyrillic")) == ("A", "А")
    assert validate_names("o,ο", allow_scripts="latin+greek") == ("o", "ο")
    with pytest.raises(ValueError, match="look alike"):
        validate_names("o,ο", allow_scripts="Latin,Cyrillic")  # Greek is not allowed
    monkeypatch.setenv("NORMLAB_ALLOW_SCRIPTS", "Latin,Greek")
    assert validate_names("o,ο") == ("o", "ο")


def test_names_of_one_script_or_other_scripts_stay_accepted():
    """No false alarm: pools in one script, several scripts that do not look alike, Japanese names
    (Han with kana is one script, UTS #39's augmented sets), digits beside letters."""
    for pool in ("Q,M", "α,β,γ", "Москва,Київ", "日本,ひらがな,カタカナ", "A1,B2", "l,1", "Zürich,Genève"):
        assert len(validate_names(pool)) == len(pool.split(","))


def test_the_skeleton_is_unicodes():
    """The skeleton of UTS #39 from Unicode's confusables data (pinned confusable-homoglyphs)."""
    skeleton = normlab.schema.skeleton
    assert skeleton("А") == skeleton("A") and skeleton("ο") == skeleton("o") and skeleton("Β") == skeleton("B")
    assert skeleton("rn") == skeleton("m") and skeleton("paypal") == skeleton("раураl")
    assert skeleton("Q") != skeleton("M")


def test_look_alike_names_are_refused_by_every_command():
    """Item 9, as a person meets it: ``--names`` of a command."""
    assert main(["simulate", "strategy", "--n-agents", "4", "--memory", "1", "--names", "A,А", "--runs", "1"]) == 2


def test_crsec_agents_look_alike_are_refused():
    """Item 9: CRSEC agents whose names look alike across scripts."""
    with pytest.raises(ValueError, match="look alike|mixes scripts"):
        unique_names(["Tom Gomez", "Tоm Gomez"], "agent names")  # a Cyrillic о
    with pytest.raises(ValueError, match="agent names 'Bapa' and 'Вара' look alike"):
        unique_names(["Bapa", "Вара"], "agent names", allow_scripts="")  # all Latin, all Cyrillic


@pytest.mark.parametrize("ops", ["rule", "llm"])
def test_duplicate_crsec_agents_are_refused_before_any_request(ops, tmp_path, capsys):
    """Item 9: duplicate CRSEC agents were not refused (docs/validation/reliability.md says they are): rule-based runs
    merged them, ``--ops llm`` spent 16 requests, then an internal error. Now one line, exit 2,
    nothing sent and no directory made."""
    with HostileServer(lambda m, p, b, n: http({"data": [{"id": "m"}]})) as srv:
        argv = ["crsec", "run", "--agents", "Tom Gomez,Tom Gomez,Isabella Rodriguez", "--minutes", "20", "--seed", "1",
                "--ops", ops, "--out", str(tmp_path / "run"), "--no-progress"]
        if ops == "llm":
            argv += ["--base-url", srv.url, "--model", "m"]
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and "agent names must be unique" in err and "\n" not in err.strip(), err
        assert not [r for r in srv.requests if r[0] == "POST"]
    assert not (tmp_path / "run").exists()
