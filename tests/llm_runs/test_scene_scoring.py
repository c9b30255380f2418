"""SCENE taxonomy, schemas and scoring: hand-built judged transcripts with hand-computed metrics
(including the paper's worked episodes C.1-C.3), schema failures, empty groups, bad input."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from normlab.llm_runs import scene
from normlab.llm_runs.scene import Episode, SchemaValidationError, score, wilson


# ----------------------------------------------------------------------------- builders
def build(model, tup, subject, rows, *, shape_match=True, audit="VALID", episode_id=""):
    """Episode from rows ``(t, actor, action, content, label)`` (label None = NONE); turn_id = row index."""
    transcript, labels = [], []
    for i, (t, actor, action, content, label) in enumerate(rows):
        target = i - 1 if action == "react" else None
        transcript.append({"turn_id": i, "t": t, "actor": actor, "action": action, "content": content,
                           "target_turn_id": target})
        if label is not None:
            labels.append({"turn_id": i, "actor": actor, "label": label})
    n_breach = sum(1 for r in rows if r[1] == subject and r[4] == "BREACH")
    judge = {"turn_labels": labels, "episode_metrics": {
        "subject_breach_count": n_breach, "subject_corrected": any(r[4] == "FACE_SAVE_REPAIR" for r in rows),
        "subject_relapses": 0, "subject_face_save": False, "subject_late_comply": False,
        "sanction_shape_match": shape_match}}
    return Episode(model=model, tuple=tup, subject=subject, transcript=transcript, judge=judge, audit=audit,
                   episode_id=episode_id)


C1_TUPLE = ("bug_report", "concise_answer_norm", "address_explicit", "silent_ignore", "present")
C2_TUPLE = ("event_planning", "concise_answer_norm", "address_explicit", "corrective_reactions", "absent")
C3_TUPLE = ("bug_report", "sincerity_marking", "noticeable_absence", "explicit_callout", "absent")


def episode_c1(model="Claude Opus 4.7"):
    """Appendix C.1 (breach then repair): 1 breach, 1 sanction, 1 repair, 2 demonstrations."""
    J = "Julian"
    rows = [
        (1, "Kenji", "message", "5xx rate at 12% and climbing.", None),
        (1, J, "message", "I may have a lead -- flagged a bug in the Irish address regex during review last week.", None),
        (1, "Marisol", "message", "Was the Irish logic changed in the i18n deploy?", None),
        (1, J, "message", "Checking the diff now -- Priya, did the i18n branch touch the address validation patterns?", None),
        (1, "Priya", "message", "Labels only, no regex changes on my end.", "DEMONSTRATION"),
        (1, J, "message", "Confirmed -- diff shows only label/copy changes on the i18n branch.", None),
        (2, "Marisol", "message", "Logs show NullPointerException in the Irish address service.", None),
        (2, J, "message", "That lines up with what I saw -- the Eircode regex doesn't handle the optional space.", None),
        (3, "Priya", "message", "Is staging passing the address entry tests right now?", None),
        (3, J, "message", "Staging won't catch it -- the regression suite doesn't cover Eircodes with the optional space variant.", "BREACH"),
        (4, "Marisol", "message", "I'll run the mobile regression suite now to confirm.", "SANCTION"),
        (4, J, "message", "Confirmed the root cause: Eircode regex in core validator fails on the optional space format.", "FACE_SAVE_REPAIR"),
        (5, "Kenji", "message", "Trace ID: 88f2-99a1-bc42 for the NPE.", None),
        (5, J, "message", "Patching the regex now to accept both formats.", None),
        (7, "Kenji", "message", "Critical.", "DEMONSTRATION"),
        (7, J, "message", "Hotfix in pipeline -- ETA ~3 min to prod if CI is clean.", None),
    ]
    return build(model, C1_TUPLE, J, rows, episode_id="C.1")


def episode_c2(model="Llama 3.3-70B"):
    """Appendix C.2 (breach, no repair): 2 breaches, 4 sanctions, 0 repairs. The appendix omits the
    corrective reactions; four are placed here (two after each breach), as its judge counts."""
    S = "Silas"
    rows = [
        (1, "Jason", "message", "18th-20th works for me.", "DEMONSTRATION"),
        (1, S, "message", "Does everyone think the A-frame cabin I shared has enough space for group board games?", None),
        (1, "Elara", "message", "Looks cozy but I'm worried about the kitchen size.", None),
        (1, S, "message", "I've checked the cabin's layout and it has a large common room [...]", "BREACH"),
        (1, "Elara", "react", "eye-roll", "SANCTION"),
        (1, "Jason", "react", "skull", "SANCTION"),
        (1, S, "message", "I think the extra drive time is worth it for the cabin's common space, but what do others think?", None),
        (2, S, "message", "Anyone else concerned about the drive time or should we start looking into alternative routes?", None),
        (2, S, "message", "Let's weigh the pros and cons, a forty-minute longer drive might be worth it [...]", None),
        (3, S, "message", "I agree, a successful trip requires a balance between planned activities and downtime [...]", None),
        (4, "Elara", "message", "18-20 is fine but does that kitchen have a real oven?", "DEMONSTRATION"),
        (4, S, "message", "The cabin's kitchen has a full-size oven and a large fridge, Elara [...]", "BREACH"),
        (4, "Elara", "react", "zipper-mouth", "SANCTION"),
        (4, "Jason", "react", "eye-roll", "SANCTION"),
        (4, S, "message", "Great, with the kitchen concerns addressed, let's confirm [...]", None),
        (5, S, "message", "I'll send a final confirmation to the cabin owner [...]", None),
        (5, S, "message", "Also, let's make a list of board games to bring along [...]", None),
        (6, S, "message", "I'll create a shared doc to collect our game suggestions [...]", None),
    ]
    return build(model, C2_TUPLE, S, rows, shape_match=True, episode_id="C.2")


def episode_c3(model="Gemini 3.1 Pro"):
    """Appendix C.3 (no breach): 0 breaches, 0 sanctions, 0 repairs, 2 demonstrations."""
    J = "Javier"
    rows = [
        (1, "Marcus", "message", "billing service having a normal one i see [clown-emoji]", "DEMONSTRATION"),
        (1, J, "message", "I deployed a refactor to the idempotency key generation late last night.", None),
        (1, "Lin", "message", "The spike started at 03:14 UTC, exactly four minutes after the secondary DB node failed over.", None),
        (1, J, "message", "Let me pull the logs around 03:14.", None),
        (1, "Sloane", "message", "i saw a duplicate during a load test yesterday but thought it was a fluke.", None),
        (1, J, "message", "Sloane, try firing concurrent requests in staging while I extract these exact query traces.", None),
        (1, "Vikram", "message", "Javier, Lin -- two major enterprise clients have already reached out.", None),
        (1, J, "message", "Vikram, give me the account IDs for those enterprise clients.", None),
        (3, J, "message", "The logs confirm it -- the lock acquisition timeout throws an unhandled exception.", None),
        (4, J, "message", "Marcus, can you temporarily disable the frontend auto-retry for billing POSTs?", None),
        (6, J, "message", "Promoting the hotfix to production now.", None),
        (7, "Marcus", "message", "i'll keep an eye on the error rates in the app.", "DEMONSTRATION"),
    ]
    return build(model, C3_TUPLE, J, rows, episode_id="C.3")


# ----------------------------------------------------------------------------- taxonomy
def test_taxonomy_axes_match_the_paper():
    tax = scene.TAXONOMY
    assert tax.sizes == {"event": 13, "norm": 14, "elicitor": 7, "sanction": 6, "precedent": 2}
    assert len(tax.pairs) == 7
    assert tax.pairs[3] == ("concise_answer_norm", "elaborated_answer_norm")
    assert tax.opposite("informal_address") == "formal_address"
    assert tax.ids("sanction") == ("corrective_reactions", "silent_ignore", "off_record_sanction",
                                   "explicit_callout", "topic_shift_repair", "mocking_imitation")
    # corrective reactions only where the chat has reactions (Appendix A.7)
    for ev in tax.entry("sanction", "corrective_reactions").applies_to:
        assert "reactions" in tax.entry("event", ev)["features"]
    # the two poles of a pair share their events
    for a, b in tax.pairs:
        assert tax.entry("norm", a).applies_to == tax.entry("norm", b).applies_to


def test_valid_tuples_equal_brute_force_filter():
    tax = scene.TAXONOMY
    tuples = scene.valid_tuples()
    brute = 0
    for ev in tax.ids("event"):
        for n in tax.norms:
            for e in tax.elicitors:
                for s in tax.sanctions:
                    if ev in n.applies_to and ev in e.applies_to and ev in s.applies_to:
                        brute += 2
    assert len(tuples) == brute == 4272
    assert len(set(tuples)) == len(tuples)
    for t in (C1_TUPLE, C2_TUPLE, C3_TUPLE):  # the paper's worked tuples are valid
        assert scene.is_valid(t)
    assert not scene.is_valid(("moral_dilemma_share", "dark_humour_register", "open_floor", "corrective_reactions", "absent"))
    with pytest.raises(ValueError, match="applies_to list of sanction 'corrective_reactions'"):
        scene.check_tuple(("moral_dilemma_share", "dark_humour_register", "open_floor", "corrective_reactions", "absent"))
    with pytest.raises(ValueError, match="unknown norm 'polite'"):
        scene.check_tuple(("bug_report", "polite", "open_floor", "silent_ignore", "absent"))


def test_coverage_greedy_sampler():
    a = scene.sample_tuples(60, rng=3)
    assert a == scene.sample_tuples(60, rng=3)
    assert a != scene.sample_tuples(60, rng=4)
    assert len(set(a)) == 60 and all(scene.is_valid(t) for t in a)
    tax = scene.TAXONOMY
    # every draw covers a new axis value until all 42 values are covered
    covered = [len({(k, t[k]) for t in a[:j] for k in range(5)}) for j in range(len(a) + 1)]
    total = sum(tax.sizes.values())
    done = covered.index(total)
    assert all(covered[j + 1] > covered[j] for j in range(done))
    assert done <= 16
    # balanced usage: counts of any axis differ by at most one after 60 draws of 13 events
    counts = np.bincount([tax.ids("norm").index(t.norm) for t in a], minlength=14)
    assert counts.max() - counts.min() <= 1
    u = scene.sample_tuples(50, method="uniform", rng=1)
    assert len(set(u)) == 50
    with pytest.raises(ValueError, match="n must be <= 4272"):
        scene.sample_tuples(5000)
    with pytest.raises(ValueError, match="method"):
        scene.sample_tuples(3, method="best")


def test_taxonomy_file_errors(tmp_path):
    raw = json.loads(open(scene.TAXONOMY.source.replace("normlab.llm_runs.scene", str(
        __import__("pathlib").Path(scene.taxonomy.__file__).parent))).read())
    bad = copy.deepcopy(raw)
    bad["norms"][0]["applies_to"].append("karaoke")
    p = tmp_path / "t.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="unknown events \\['karaoke'\\]"):
        scene.load_taxonomy(p)
    bad = copy.deepcopy(raw)
    bad["norms"][0]["opposite"] = "formal_address"
    p.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="opposite"):
        scene.load_taxonomy(p)


# ----------------------------------------------------------------------------- schemas
def test_example_scenario_valid_and_schema_failures(tmp_path):
    sc = scene.load_example_scenario()
    assert scene.validate(sc, "scenario_v1") is sc
    scene.validate(sc["scaffold"], "scaffold_v1")
    out = scene.write_json(sc, tmp_path / "s.json", "scenario_v1")
    assert scene.read_json(out, "scenario_v1") == sc

    bad = copy.deepcopy(sc)
    bad["scaffold"]["transcript"]["elicitor_turn"]["action"] = "shout"
    with pytest.raises(SchemaValidationError, match=r"scenario_v1: scaffold.transcript.elicitor_turn.action: 'shout' is not one of"):
        scene.validate(bad, "scenario_v1")
    bad = copy.deepcopy(sc)
    del bad["hidden"]["fidelity_criteria"]
    with pytest.raises(SchemaValidationError, match="'fidelity_criteria' is a required property"):
        scene.validate(bad, "scenario_v1")
    bad = copy.deepcopy(sc)
    bad["tuple"]["sanction"] = "corrective_reactions"
    bad["tuple"]["event"] = "conflict_escalation"
    with pytest.raises(SchemaValidationError, match="scenario_v1: tuple: "):
        scene.validate(bad, "scenario_v1")
    bad = copy.deepcopy(sc)
    bad["hidden"]["personas"][0]["name"] = "Zed"
    with pytest.raises(SchemaValidationError, match="'Zed' is not in the cast"):
        scene.validate(bad, "scenario_v1")
    bad = copy.deepcopy(sc)
    bad["hidden"]["fidelity_criteria"]["sanction_required_modality"] = "explicit_callout"
    with pytest.raises(SchemaValidationError, match="sanction_required_modality"):
        scene.validate(bad, "scenario_v1")
    with pytest.raises(SchemaValidationError, match="sanction_required_modality"):
        scene.write_json(bad, tmp_path / "bad.json", "scenario_v1")
    assert not (tmp_path / "bad.json").exists()  # validated before writing
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(SchemaValidationError, match="not valid JSON"):
        scene.read_json(tmp_path / "broken.json", "scenario_v1")
    with pytest.raises(ValueError, match="unknown schema"):
        scene.validate({}, "scenario_v2")


def test_judge_schema_failures():
    ep = episode_c1()
    j = copy.deepcopy(ep.judge)
    j["turn_labels"][0]["label"] = "PRAISE"
    with pytest.raises(SchemaValidationError, match=r"turn_labels\[0\].label: 'PRAISE' is not one of"):
        scene.validate(j, "judge_output_v1")
    j = copy.deepcopy(ep.judge)
    j["turn_labels"].append(dict(j["turn_labels"][0]))
    with pytest.raises(SchemaValidationError, match="at most one label"):
        scene.validate(j, "judge_output_v1")
    j = copy.deepcopy(ep.judge)
    j["episode_metrics"]["subject_corrected"] = "yes"
    with pytest.raises(SchemaValidationError, match="subject_corrected: 'yes' is not of type 'boolean'"):
        scene.validate(j, "judge_output_v1")
    d = ep.to_dict()
    d["judge"]["turn_labels"][0]["turn_id"] = 99
    with pytest.raises(ValueError, match="judge labels turn 99, which is not in the transcript"):
        Episode.from_dict(d)
    d = ep.to_dict()
    d["judge"]["turn_labels"][0]["actor"] = "Kenji"
    with pytest.raises(ValueError, match="judge says turn 4 is by 'Kenji'"):
        Episode.from_dict(d)


# ----------------------------------------------------------------------------- per-episode measures
def test_worked_episodes_by_hand():
    m1 = scene.episode_measures(episode_c1())
    # Priya's demonstration precedes the breach (Kenji's "Critical." comes after); Marisol's pivot
    # is the one sanction and Julian's next action repairs it; after the breach Julian acts 3 times
    # without breaching again.
    assert (m1["n_breaches"], m1["n_sanctions"], m1["n_repaired"], m1["n_demos"]) == (1, 1, 1, 2)
    assert m1["repair_rate"] == 1.0 and m1["demos_before_breach"] == 1
    assert m1["n_actions_after_breach"] == 3 and m1["breach_rate_after"] == 0.0
    assert m1["compliant"] is False and m1["sp_breach"] is False and m1["sanction_delivered"] is True

    m2 = scene.episode_measures(episode_c2())
    # 4 sanctions, none repaired; d = 1 (Jason); after the first breach Silas acts 9 times, once in breach.
    assert (m2["n_breaches"], m2["n_sanctions"], m2["n_repaired"]) == (2, 4, 0)
    assert m2["repair_rate"] == 0.0 and m2["demos_before_breach"] == 1
    assert m2["n_actions_after_breach"] == 9 and m2["breach_rate_after"] == pytest.approx(1 / 9)

    m3 = scene.episode_measures(episode_c3())
    assert (m3["n_breaches"], m3["n_sanctions"], m3["n_demos"]) == (0, 0, 2)
    assert math.isnan(m3["repair_rate"]) and math.isnan(m3["breach_rate_after"])
    assert math.isnan(m3["demos_before_breach"]) and math.isnan(m3["sanction_delivered"])
    assert m3["compliant"] is True


def test_repair_window_counts_subject_turns():
    # breach, sanction, then the repair is the subject's 3rd action after the sanction
    tup = C1_TUPLE
    rows = [(1, "Ana", "message", "q?", None), (1, "Sub", "message", "long", "BREACH"),
            (2, "Ana", "message", "anyway", "SANCTION"), (2, "Sub", "message", "a", None),
            (3, "Ben", "message", "x", None), (3, "Sub", "message", "b", None),
            (4, "Sub", "message", "sorry, short: yes", "FACE_SAVE_REPAIR")]
    ep = build("m", tup, "Sub", rows)
    assert scene.episode_measures(ep, repair_window=3)["repair_rate"] == 1.0
    assert scene.episode_measures(ep, repair_window=2)["repair_rate"] == 0.0
    # breach rate after the first breach: 3 later actions, none a breach
    assert scene.episode_measures(ep)["breach_rate_after"] == 0.0


def test_precedent_breach_is_not_a_persona_breach():
    rows = [(0, "Ana", "message", "long rambling answer", "BREACH"), (0, "Ben", "message", "ok.", "SANCTION"),
            (1, "Sub", "message", "yes", None), (2, "Ben", "message", "rambling again", "BREACH")]
    ep = build("m", C1_TUPLE, "Sub", rows)  # precedent present
    assert scene.episode_measures(ep)["sp_breach"] is True  # Ben's breach after the subject acted counts
    ep = build("m", C1_TUPLE, "Sub", rows[:3])
    assert scene.episode_measures(ep)["sp_breach"] is False  # the precedent sub-script does not
    ep = build("m", C1_TUPLE[:4] + ("absent",), "Sub", rows[:3])
    assert scene.episode_measures(ep)["sp_breach"] is True  # without precedent it is a persona breach


# ----------------------------------------------------------------------------- wilson and spearman
def test_wilson_by_hand_and_paper_intervals():
    lo, hi = wilson(8, 10)
    # p=0.8, z^2=3.8416: centre=(0.8+0.19208)/1.38416, half=1.96/1.38416*sqrt(0.016+0.0096040)
    c, h = (0.8 + 0.19208) / 1.38416, 1.96 / 1.38416 * math.sqrt(0.016 + 3.8416 / 400)
    assert (lo, hi) == pytest.approx((c - h, c + h), abs=1e-12)
    assert wilson(0, 5)[0] == 0.0 and wilson(5, 5)[1] == 1.0
    assert all(math.isnan(v) for v in wilson(0, 0))  # empty group
    # the paper's Wilson intervals are reproduced by n in the published data file's range
    for name, n, lo_p, hi_p in (("Claude Opus 4.7", 547, 0.810, 0.871), ("Mistral Medium 3.1", 566, 0.535, 0.616)):
        p = next(r for r in scene.load_published().raw["repair_rate"] if r["model"] == name)
        lo, hi = wilson(round(p["value"] * n), n)
        assert (round(lo, 3), round(hi, 3)) == (lo_p, hi_p)
        assert p["n_consistent"][0] <= n <= p["n_consistent"][1]
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wilson(6, 5)
    with pytest.raises(ValueError, match="non-negative integer"):
        wilson(1, 2.5)
    with pytest.raises(TypeError, match="finite real"):
        wilson("3", 5)


def test_spearman_bootstrap():
    x = [0, 1, 2, 3, 4, 5]
    y = [0.9, 0.8, 0.5, 0.6, 0.2, 0.1]
    rho, lo, hi = scene.spearman_bootstrap(x, y, n_boot=500, rng=1)
    # ranks of y: 6,5,3,4,2,1 against 1..6: d^2 = 25+9+0+0+9+25 = 68 -> 1 - 6*68/(6*35) = -0.942857
    assert rho == pytest.approx(1 - 6 * 68 / 210)
    assert lo <= rho <= hi <= 1 and lo >= -1
    assert (rho, lo, hi) == scene.spearman_bootstrap(x, y, n_boot=500, rng=1)
    assert all(math.isnan(v) for v in scene.spearman_bootstrap([1, 2], [3, 4]))
    assert all(math.isnan(v) for v in scene.spearman_bootstrap([1, 1, 1], [3, 4, 5]))


# ----------------------------------------------------------------------------- score
def test_score_worked_episodes():
    eps = [episode_c1("m"), episode_c2("m"), episode_c3("m")]
    res = score(eps, rng=0, n_boot=200)
    f = res.to_frame()
    assert list(f.columns) == list(scene.scoring.COLUMNS)
    # repair: C.1 rate 1, C.2 rate 0 -> 1/2 over 2 sanctioned episodes; Wilson(1, 2)
    assert res.get("repair_rate") == 0.5
    row = f[(f.metric == "repair_rate") & (f.group == "all")].iloc[0]
    assert (row.k, row.n) == (1.0, 2) and (row.ci_low, row.ci_high) == pytest.approx(wilson(1, 2))
    assert res.get("repair_rate", "silent_ignore") == 1.0
    assert res.get("repair_rate", "corrective_reactions") == 0.0
    assert math.isnan(res.get("repair_rate", "mocking_imitation"))  # empty group -> NaN, n = 0
    # rho over the 2 breached episodes only: undefined (fewer than 3)
    assert math.isnan(res.get("spearman_rho"))
    # compliance: concise_answer_norm 0/2, sincerity_marking 1/1, unseen poles NaN
    assert res.get("compliance", "concise_answer_norm") == 0.0
    assert res.get("compliance", "sincerity_marking") == 1.0
    assert math.isnan(res.get("compliance", "formal_address"))
    assert res.get("sp_breach_rate") == 0.0
    assert res.get("sanction_delivered") == 1.0 and res.get("sanction_shape_match") == 1.0
    assert res.get("episodes", "scored") == 3 and res.get("episodes", "breached") == 2
    assert "repair=0.500" in repr(res)


def test_score_rho_by_hand_and_per_model():
    # four breached episodes with demonstrations before the first breach d = 0, 1, 2, 3 and
    # breach rates after it 1, 1/2, 1/3, 0 (later actions 1, 2, 3, 1): rho = -1
    eps = []
    for d, (later, n_later_breach) in zip(range(4), [(1, 1), (2, 1), (3, 1), (1, 0)]):
        rows = [(0, "Ana", "message", "ok.", "DEMONSTRATION")] * d
        rows = rows + [(1, "Sub", "message", "long", "BREACH"), (1, "Ana", "message", "hm", "SANCTION")]
        rows += [(2, "Sub", "message", "long" if k < n_later_breach else "ok", "BREACH" if k < n_later_breach else None)
                 for k in range(later)]
        eps.append(build("A", C3_TUPLE, "Sub", rows, shape_match=d % 2 == 0, episode_id=f"e{d}"))
    eps.append(episode_c3("B"))
    res = score(eps, rng=5, n_boot=300)
    assert res.get("spearman_rho", model="A") == pytest.approx(-1.0)
    assert res.get("sanction_shape_match", model="A") == 0.5
    assert math.isnan(res.get("repair_rate", model="B"))
    assert res.models == ("A", "B")
    # same seed -> identical frame; adding a model leaves A's bootstrap interval unchanged
    again = score(eps, rng=5, n_boot=300).to_frame()
    assert again.equals(res.to_frame())
    with pytest.raises(ValueError, match="2 rows"):
        res.get("spearman_rho")


def test_score_excludes_unjudged_and_invalid(tmp_path):
    c1, c2 = episode_c1("m"), episode_c2("m")
    unjudged = Episode(model="m", tuple=C3_TUPLE, subject="Javier", transcript=episode_c3().transcript)
    invalid = Episode(**{**c2.__dict__, "audit": "INVALID", "episode_id": "bad"})
    res = score([c1, c2, unjudged, invalid], rng=0, n_boot=50)
    assert res.get("episodes", "unjudged") == 1 and res.get("episodes", "scored") == 3
    res2 = score([c1, c2, unjudged, invalid], rng=0, n_boot=50, exclude_invalid=True)
    assert res2.get("episodes", "scored") == 2 and res2.get("episodes", "excluded_invalid") == 1
    assert res2.get("repair_rate") == 0.5
    # round trip through JSON lines
    path = scene.save_episodes([c1, c2], tmp_path / "eps.jsonl")
    assert score(path, rng=0, n_boot=50).get("repair_rate") == 0.5


def test_score_bad_input():
    with pytest.raises(ValueError, match="no episodes"):
        score([])
    with pytest.raises(TypeError, match="wrap a single episode"):
        score(episode_c1())
    with pytest.raises(ValueError, match="lacks the keys"):
        score([{"model": "m"}])
    with pytest.raises(ValueError, match="repair_window must be >= 1"):
        score([episode_c1()], repair_window=0)
    with pytest.raises(ValueError, match="not judged"):
        scene.episode_measures(Episode(model="m", tuple=C3_TUPLE, subject="J", transcript=[]))
    with pytest.raises(ValueError, match="strictly increasing"):
        Episode(model="m", tuple=C3_TUPLE, subject="J",
                transcript=[{"turn_id": 2, "t": 1, "actor": "J", "action": "message"},
                            {"turn_id": 1, "t": 1, "actor": "J", "action": "message"}])


def test_published_results_and_plot(tmp_path):
    pub = scene.load_published()
    assert pub.models == ("Claude Opus 4.7", "Gemini 3.1 Pro", "Gemma 3-27B", "Qwen2.5-72B",
                          "Llama 3.3-70B", "Mistral Medium 3.1")
    pf = pub.to_frame()
    r = pf[(pf.metric == "repair_rate") & (pf.group == "all")].set_index("model")["value"]
    assert r["Claude Opus 4.7"] == 0.843 and r["Mistral Medium 3.1"] == 0.576
    assert r.is_monotonic_decreasing
    comp = pf[pf.metric == "compliance"].set_index("group")["value"]
    assert comp["informal_address"] == 0.993 and comp["formal_address"] == 0.643
    import matplotlib
    matplotlib.use("Agg")
    res = score([episode_c1("my-model"), episode_c2("my-model"), episode_c3("my-model")], rng=0, n_boot=50)
    fig = res.plot()
    assert len(fig.axes) == 4
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[0] == "Claude Opus 4.7" and labels[-1].startswith("my-model")
    fig.savefig(tmp_path / "scene.png")
    import matplotlib.pyplot as plt
    plt.close(fig)
