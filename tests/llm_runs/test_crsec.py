"""CRSEC norm lifecycle: published format, state machine, sanity check, synthesis, runner, theory."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from normlab.llm_runs import load_crsec_norms, load_crsec_run, save_crsec_norms
from normlab.llm_runs.crsec import (
    CHECK_STEPS,
    NormDatabase,
    RuleOperations,
    run_population,
    sanity_check,
    synthesise,
    weighted_utility,
)
from normlab.llm_runs.crsec.llm_operations import (
    LLMOperations,
    parse_abstract,
    parse_categories,
    parse_norms,
    parse_yesno,
)

DB = {
    "norm_1": {"ID": 1, "type": "injunctive", "content": "No smoking indoors.", "subject": "everyone",
               "predicate": "not smoke", "object": "indoors", "related_desc": "chat with Abigail", "utility": 90,
               "poi_reason": "health", "activation_state": True, "validity_state": True},
    "norm_2": {"ID": 2, "type": "descriptive", "content": "People tip after meals.", "subject": None,
               "predicate": None, "object": None, "related_desc": None, "utility": -3, "poi_reason": None,
               "activation_state": False, "validity_state": False},
    "norm_3": {"ID": 3, "type": "injunctive", "content": "Keep your voice down indoors.", "subject": None,
               "predicate": None, "object": None, "related_desc": None, "utility": 70, "poi_reason": None,
               "activation_state": False, "validity_state": True},
    "norm_4": {"ID": 4, "type": "injunctive", "content": "Carlos must smoke outside.", "subject": None,
               "predicate": None, "object": None, "related_desc": None, "utility": -4, "poi_reason": None,
               "activation_state": False, "validity_state": False},
}


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# ------------------------------------------------------------------ published format
def test_load_norms_states_and_rejections(tmp_path):
    f = load_crsec_norms(_write(tmp_path / "Carlos" / "norms" / "personal_norm_database.json", DB))
    assert list(f["state"]) == ["qualified", "candidate", "synthesised", "candidate"]
    assert list(f["rejection"].fillna("-")) == ["-", "duplicate", "-", "names_agent"]
    assert f["utility"].iloc[0] == 90 and math.isnan(f["utility"].iloc[1])
    assert set(f["agent"]) == {"Carlos"}


def test_json_round_trip_is_exact(tmp_path):
    src = _write(tmp_path / "a.json", DB)
    out = save_crsec_norms(load_crsec_norms(src), tmp_path / "b.json")
    assert json.loads(out.read_text()) == DB
    pd.testing.assert_frame_equal(load_crsec_norms(out, agent="x"), load_crsec_norms(src, agent="x"))


@pytest.mark.parametrize("change, match", [
    ({"utility": 150}, r"utility must be in \[1, 100\]"),
    ({"utility": 0}, r"utility must be in \[1, 100\]"),
    ({"utility": -9}, "not a rejection code"),
    ({"type": "prescriptive"}, "unknown norm type"),
    ({"activation_state": "maybe"}, "must be true or false"),
])
def test_bad_norms_raise(tmp_path, change, match):
    bad = {"norm_1": {**DB["norm_1"], **change}}
    with pytest.raises(ValueError, match=match):
        load_crsec_norms(_write(tmp_path / "bad.json", bad))


def test_malformed_json_and_missing_file(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"norm_1": {', encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_crsec_norms(p)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_crsec_norms(tmp_path / "nope.json")


def _run_folder(tmp_path, drop_norms_of=None):
    root = tmp_path / "run" / "personas"
    nodes = {"node_2": {"node_count": 2, "type": "chat", "created": "2023-02-13 09:12:00", "description": "conversing",
                        "filling": [["Abigail Chen", "Smoking inside the cafe is prohibited."], ["Carlos Gomez", "Sorry."]]},
             "node_1": {"type": "thought", "created": "2023-02-13 09:00:00",
                        "description": "People should not smoke indoors."},
             "node_3": {"type": "event", "description": "Carlos is idle"}}
    for name in ("Carlos Gomez", "Abigail Chen"):
        if name != drop_norms_of:
            _write(root / name / "norms" / "personal_norm_database.json", DB)
        _write(root / name / "bootstrap_memory" / "associative_memory" / "nodes.json", nodes)
    _write(root / "Carlos Gomez" / "norms" / "personal_norm_database_validity.json", {"norm_1": DB["norm_1"]})
    return tmp_path / "run"


def test_load_run(tmp_path):
    run = load_crsec_run(_run_folder(tmp_path))
    assert run.agents == ("Abigail Chen", "Carlos Gomez")
    assert len(run.norms) == 8 and len(run.validity) == 1
    carlos = run.nodes[run.nodes["agent"] == "Carlos Gomez"]
    assert list(carlos["kind"]) == ["thought", "chat", "event"]  # sorted by time, untimed last
    assert "prohibited" in carlos["text"].iloc[1]
    from normlab.llm_runs.crsec import event_counts, events_from_nodes, norm_funnel

    ev = events_from_nodes(run.nodes)
    assert sorted(ev["t"].unique()) == [0.0, 12.0]
    counts = event_counts(ev, bin_minutes=10)
    assert counts[(counts.kind == "chat")]["count"].tolist() == [0, 2]
    fun = norm_funnel(run.norms).set_index("agent")
    assert fun.loc["Carlos Gomez", "qualified"] == 1 and fun.loc["Carlos Gomez", "rejected_duplicate"] == 1


def test_published_behaviour_and_snapshot_beliefs(tmp_path):
    from normlab.llm_runs.crsec import behaviour_from_nodes, beliefs_from_snapshots

    nodes = {"node_1": {"type": "event", "created": "2023-02-13 08:00:00", "subject": "Carlos Gomez",
                        "description": "Carlos Gomez is smoking a cigarette inside Hobbs Cafe"},
             "node_2": {"type": "event", "created": "2023-02-13 09:00:00", "subject": "Carlos Gomez",
                        "description": "Carlos Gomez is smoking outside in the designated area"},
             "node_3": {"type": "event", "created": "2023-02-13 08:30:00", "subject": "Sam Moore",
                        "description": "Carlos Gomez is smoking inside"}}  # Sam's observation, not his action
    root = tmp_path / "run"
    for name in ("Carlos Gomez", "Sam Moore"):
        _write(root / name / "norms" / "personal_norm_database.json", DB if name == "Carlos Gomez" else {})
        _write(root / name / "bootstrap_memory" / "associative_memory" / "nodes.json", nodes if name == "Carlos Gomez" else
               {"node_1": nodes["node_3"]})
    run = load_crsec_run(root)
    beh = behaviour_from_nodes(run.nodes, [0, 30, 60, 90])
    smoke = beh[beh.topic == "smoking"]["proportion"].tolist()
    assert smoke == [0.0, 0.0, 0.5, 0.5]
    bel = beliefs_from_snapshots({0: run, 60: root})
    assert bel[(bel.topic == "smoking")]["proportion"].tolist() == [0.5, 0.5]


def test_run_missing_persona_file(tmp_path):
    folder = _run_folder(tmp_path, drop_norms_of="Abigail Chen")
    with pytest.raises(FileNotFoundError, match="Abigail Chen"):
        load_crsec_run(folder)
    assert load_crsec_run(folder, missing="skip").norms["agent"].unique().tolist() == ["Carlos Gomez"]


# ------------------------------------------------------------------ state machine
def test_state_machine_transitions():
    db = NormDatabase("Carlos")
    c = db.add_candidate("No smoking indoors.", 90, "inj", t=12.0)
    assert c.state == "candidate" and c.type == "injunctive"
    q = db.qualify(c.id, t=17.0)
    assert q.state == "qualified" and q.t_qualified == 17.0
    with pytest.raises(ValueError, match="only an unchecked candidate"):
        db.qualify(c.id, t=18.0)
    assert db.deactivate(c.id, t=20.0).state == "synthesised"
    with pytest.raises(ValueError, match="only a qualified norm"):
        db.deactivate(c.id, t=21.0)
    r = db.add_candidate("People tip after meals.", 75, "descriptive")
    db.reject(r.id, "duplicate")
    with pytest.raises(ValueError, match="rejected"):
        db.qualify(r.id, t=1.0)
    with pytest.raises(ValueError, match=r"\[1, 100\]"):
        db.add_candidate("x", 101, "injunctive")
    with pytest.raises(ValueError, match="unknown norm type"):
        db.add_candidate("x", 50, "moral")


def test_database_to_published_dict():
    db = NormDatabase("A")
    db.add_created("No smoking indoors.", 90, "injunctive")
    r = db.add_candidate("Do not tip after meals.", 70, "injunctive")
    db.reject(r.id, "conflict")
    d = db.to_crsec_dict()
    assert d["norm_1"]["utility"] == 90 and d["norm_1"]["activation_state"] is True
    assert d["norm_2"]["utility"] == -6 and d["norm_2"]["validity_state"] is False


# ------------------------------------------------------------------ sanity check (deterministic)
def test_sanity_check_each_step_fails_as_recorded():
    ops = RuleOperations(names=["Carlos Gomez"], rng=0)
    db = NormDatabase("Tom")
    q = db.add_created("Do not tip after meals.", 70, "injunctive")
    qual = db.qualified()
    cases = [
        (("People tip after meals.", "descriptive"), "Let us talk about the weather.", "consistency"),
        (("Never tip, ever.", "injunctive"), "We should never tip here.", "duplication"),
        (("No smoking indoors.", "descriptive"), "Please do not smoke indoors.", "type"),
        (("People tip after meals.", "descriptive"), "Abigail: people tip after meals here.", "conflict"),
    ]
    for (content, ntype), text, step in cases:
        cand = db.add_candidate(content, 60, ntype, source_text=text)
        out = sanity_check(cand, qual, ops)
        assert (out.passed, out.failed_step) == (False, step), (content, out)
    ok = db.add_candidate("No smoking indoors.", 90, "injunctive", source_text="Please do not smoke indoors.")
    assert sanity_check(ok, qual, ops).steps_run == CHECK_STEPS
    named = db.add_candidate("Carlos must smoke outside.", 60, "injunctive", source_text="smoke outside")
    out = sanity_check(named, qual, ops, steps=["names_agent", *CHECK_STEPS])
    assert out.reason == "names_agent"
    custom = sanity_check(ok, qual, ops, steps=[("conflict", lambda n, p: False)])
    assert custom.reason == "conflict"
    with pytest.raises(ValueError, match="unknown sanity-check step"):
        sanity_check(ok, qual, ops, steps=["vibes"])
    assert q.state == "qualified"


# ------------------------------------------------------------------ synthesis
def test_synthesis_threshold_and_weighted_utility():
    ops = RuleOperations(rng=0)
    db = NormDatabase("Bob")
    for content, u in (("No smoking indoors.", 90), ("Smoke only outside in designated areas.", 75),
                       ("Be quiet in public places.", 85), ("Do not tip after meals.", 70)):
        db.add_created(content, u, "injunctive")
    assert db.utility_sum() == 320
    assert not synthesise(db, ops, t=5.0).triggered  # 320 <= 350
    out = synthesise(db, ops, t=5.0, threshold=300)
    assert out.triggered and out.utility_sum == 320
    assert out.deactivated == (1, 2) and len(out.created) == 1
    new = db[out.created[0]]
    assert new.utility == pytest.approx(82.5) and new.parents == (1, 2) and new.state == "qualified"
    assert [db[i].state for i in (1, 2, 3, 4)] == ["synthesised", "synthesised", "qualified", "qualified"]
    assert db.utility_sum() == pytest.approx(82.5 + 85 + 70)
    assert weighted_utility([90, 60], [2, 1]) == pytest.approx(80.0)
    with pytest.raises(ValueError, match="one weight per norm"):
        weighted_utility([90, 60], [1])


# ------------------------------------------------------------------ runner
def test_rule_runner_same_seed_same_run_and_belief_leads():
    a = run_population(minutes=240, rng=7)
    b = run_population(minutes=240, rng=7)
    pd.testing.assert_frame_equal(a.states, b.states)
    pd.testing.assert_frame_equal(a.events, b.events)
    ad = a.adoption()
    assert ad["proportion"].between(0, 1).all()
    first = ad[ad.t == 0].set_index(["topic", "measure"])["proportion"]
    assert first[("smoking", "belief")] == pytest.approx(0.3)  # the three entrepreneurs
    ent = a.states[a.states.entrepreneur]
    assert ent["belief"].groupby(ent["topic"]).mean()["smoking"] == 1.0
    # belief is at least compliance on average (agents comply after adopting)
    w = ad.pivot_table(index=["t", "topic"], columns="measure", values="proportion")
    assert (w["belief"] - w["action"]).mean() > 0
    assert {"conflict", "chat"} <= set(a.events["kind"])


def test_runner_round_trip_through_published_layout(tmp_path):
    run = run_population(["Bob Johnson", "Carlos Gomez", "Tamara Taylor"], minutes=120, rng=3)
    back = load_crsec_run(run.save_crsec(tmp_path / "out"))
    assert back.agents == tuple(sorted(run.agents))
    n_own = sum(len(db) for db in run.databases.values())
    assert len(back.norms) == n_own
    assert (back.norms["state"] == "qualified").sum() == sum(len(db.qualified()) for db in run.databases.values())


def test_runner_bad_input():
    with pytest.raises(ValueError, match="unknown agent names"):
        run_population(["Nobody"], minutes=10)
    with pytest.raises(ValueError, match="p_present"):
        run_population(minutes=10, p_present=2)
    with pytest.raises(ValueError, match="ops must be"):
        run_population(minutes=10, ops="gpt")


# ------------------------------------------------------------------ LLM operations against the stub
def test_parsers():
    assert parse_yesno("Answer: YES. The norms clash") is True and parse_yesno("nothing", True) is True
    assert parse_norms('ok {"content": "No smoking indoors.", "type": "injunctive", "utility": 90} '
                       '{"content": "x", "type": "odd", "utility": 5}') == [("No smoking indoors.", "injunctive", 90.0)]
    assert parse_categories("[Smoking Related] 1. No smoking. 3. Smoke outside. [Noise] 2. Quiet.", 3) == \
        [("[Smoking Related]", [0, 2]), ("[Noise]", [1])]
    assert parse_abstract("ABSTRACT: Keep air clean. TYPE: injunctive WEIGHTS: 2, 1", 2, "descriptive") == \
        ("Keep air clean.", "injunctive", [2.0, 1.0])


def _responder(body):
    user = body["messages"][-1]["content"]
    if "[Fact Consistency Check]" in user:
        return "YES"
    if "[Duplicate Check]" in user:
        return "NO"
    if "[Type Accuracy Check]" in user:
        return "correct"
    if "Check for conflicts" in user:
        return "Answer: YES. They are opposite." if "tip" in user.split("NORMATIVE INFO:")[-1].splitlines()[0] else "Answer: NO."
    return "No"


def test_llm_operations_against_stub_server():
    from normlab.llm_runs import EndpointConfig, StubServer, open_endpoint
    from normlab.llm_runs.sync import run_sync
    from normlab.llm_runs.crsec import arun_check

    db = NormDatabase("Tom")
    db.add_created("Do not tip after meals.", 70, "injunctive")
    good = db.add_candidate("No smoking indoors.", 90, "injunctive", source_text="Please do not smoke.")
    bad = db.add_candidate("People tip after meals.", 60, "descriptive", source_text="tip")

    async def main(url):
        async with open_endpoint(EndpointConfig(base_url=url, max_retries=0)) as client:
            ops = LLMOperations(client, rng=0)
            a = await arun_check(good, db.qualified(), ops)
            b = await arun_check(bad, db.qualified(), ops)
            return a, b, ops.n_calls

    with StubServer(["x"], responder=_responder) as stub:
        a, b, n_calls = run_sync(lambda: main(stub.base_url))
    assert a.passed and a.steps_run == CHECK_STEPS
    assert (b.passed, b.failed_step) == (False, "conflict")
    assert n_calls == 8


def _line(user, key):
    return user.split(key)[-1].splitlines()[0] if key in user else ""


def _population_responder(body):
    user = body["messages"][-1]["content"]
    norm = '{"content": "No smoking indoors.", "type": "injunctive", "utility": 90}'
    if user.startswith("TASK: generate"):
        return '{"norm_1": ' + norm + "}"
    if "generate a plan today" in user:
        holds = "smoking" in _line(user, "QUALIFIED PERSONAL NORMS:")
        return "1) keep the cafe smoke-free, smoking only outside" if holds else "1) smoke a cigarette inside Hobbs Cafe"
    if "describe actions in 5 min increments" in user:
        return "1. " + _line(user, "CURRENT PLAN:").strip()
    if "detect whether there is a conflict" in user:
        return "yes" if "inside" in _line(user, "OBSERVATION:") else "no"
    if "decide whether to have a conversation" in user or "Decide whether" in user:
        return "yes"
    if "Write a short conversation" in user:
        return "Bob Johnson: Please, no smoking indoors.\nCarlos Gomez: Sorry, I will smoke outside."
    if "Write one sentence" in user:
        return "People should not smoke indoors."
    if "Step 1: Based on the INPUT" in user:
        return norm
    if "[Duplicate Check]" in user:
        return "YES" if _line(user, "NORMATIVE INFO:").strip() in _line(user, "QUALIFIED PERSONAL NORMS:") else "NO"
    return _responder(body)


def test_llm_population_against_stub_is_reproducible():
    from normlab.llm_runs import EndpointConfig, StubServer

    runs = []
    for _ in range(2):
        with StubServer(["x"], responder=_population_responder) as stub:
            cfg = EndpointConfig(base_url=stub.base_url, max_retries=0)
            runs.append(run_population(["Bob Johnson", "Carlos Gomez"], ops="llm", endpoint=cfg, minutes=60,
                                       plan_every=30, p_present=1.0, p_thought=0.0, rng=5))
    a, b = runs
    pd.testing.assert_frame_equal(a.states, b.states)
    carlos = a.databases["Carlos Gomez"]
    assert [n.content for n in carlos.qualified()] == ["No smoking indoors."]
    assert any(n.rejection == "duplicate" for n in carlos) or len(carlos) == 1
    last = a.states[(a.states.t == 60) & (a.states.topic == "smoking")].set_index("agent")
    assert last.loc["Carlos Gomez", "belief"] and last.loc["Carlos Gomez", "action"]
    first = a.states[(a.states.t == 0) & (a.states.topic == "smoking")].set_index("agent")
    assert not first.loc["Carlos Gomez", "belief"] and not first.loc["Carlos Gomez", "action"]
    assert (a.events["kind"] == "conflict").sum() >= 1 and (a.events["kind"] == "chat").sum() >= 1


@pytest.mark.llm
def test_embedded_model_sanity_check():
    """The whole LLM path (prompt files, embedded server, parsing, pipeline) on one candidate."""
    from normlab.llm_runs import EndpointConfig, embedded_available, open_endpoint
    from normlab.llm_runs.sync import run_sync
    from normlab.llm_runs.crsec import arun_check

    if not embedded_available():
        pytest.skip("embedded model not installed")
    db = NormDatabase("Carlos")
    db.add_created("Be quiet in public places.", 85, "injunctive")
    cand = db.add_candidate("No smoking indoors.", 90, "injunctive",
                            source_text="Abigail: Carlos, smoking inside the cafe is not allowed.")

    async def main():
        cfg = EndpointConfig(embedded_threads=1, concurrency=1, embedded_parallel=1, embedded_ctx=1024)
        async with open_endpoint(cfg) as client:
            ops = LLMOperations(client, rng=0, max_tokens={"check_conflict": 8})
            out = await arun_check(cand, db.qualified(), ops)
            return out, ops

    out, ops = run_sync(main)
    assert 1 <= ops.n_calls <= 4 and len(out.steps_run) == ops.n_calls
    assert all(isinstance(text, str) for _, _, text in ops.transcript)
    assert out.passed or out.failed_step in CHECK_STEPS


# ------------------------------------------------------------------ theory and fit
def test_contagion_kernel_equals_python_twin():
    from normlab.theory import norm_contagion_agents
    from normlab.theory.norm_contagion import contagion_run_reference

    from normlab._rng import run_seeds

    _, seeds = run_seeds(5, 1)
    r = norm_contagion_agents(30, 2, 1.0, 0.5, t_max=5, dt=0.1, rng=5)
    b, c = contagion_run_reference(seeds[0], 30, 2, 1 - math.exp(-0.1), 1 - math.exp(-0.05), 50)
    assert np.array_equal(np.array(b) / 30, r.belief[0]) and np.array_equal(np.array(c) / 30, r.compliance[0])
    assert np.all(r.compliance <= r.belief)
    r = norm_contagion_agents(30, 2, 1.0, 0.5, n_immune=5, t_max=5, dt=0.1, rng=5)
    b, c = contagion_run_reference(seeds[0], 30, 2, 1 - math.exp(-0.1), 1 - math.exp(-0.05), 50, n_immune=5)
    assert np.array_equal(np.array(b) / 30, r.belief[0]) and r.belief.max() <= 25 / 30


def test_contagion_ode_agrees_with_simulation_and_logistic():
    from normlab.theory import norm_contagion_agents, norm_contagion_ode
    from normlab.theory.norm_contagion import logistic_belief

    r = norm_contagion_agents(1000, 50, 1.5, 0.5, t_max=8, dt=0.01, n_runs=8, rng=11)
    m = r.ode(n_points=len(r.t))
    assert np.abs(r.belief.mean(0) - m.belief).max() < 0.03
    assert np.abs(r.compliance.mean(0) - m.compliance).max() < 0.03
    ode = norm_contagion_ode(2.0, 0.5, y0=0.1, t_max=5, n_agents=11)
    assert np.allclose(ode.belief, logistic_belief(ode.t, 2.0, 0.1, 1.1), atol=1e-7)
    r = norm_contagion_agents(1000, 50, 1.5, 0.5, n_immune=300, t_max=8, dt=0.01, n_runs=8, rng=12)
    m = r.ode(n_points=len(r.t))
    assert np.abs(r.belief.mean(0) - m.belief).max() < 0.03 and 0.69 < m.belief[-1] <= 0.7
    ode = norm_contagion_ode(2.0, 0.5, y0=0.1, ceiling=0.6, t_max=5)
    assert np.allclose(ode.belief, logistic_belief(ode.t, 2.0, 0.1, 1.0, 0.6), atol=1e-7)
    assert ode.time_to(0.4, "compliance") > ode.time_to(0.4, "belief") > 0
    with pytest.raises(ValueError, match="n_seeds"):
        norm_contagion_agents(10, 11, 1.0, 1.0)


def test_fit_adoption_recovers_rates():
    from normlab.calibration import fit_adoption
    from normlab.theory import norm_contagion_agents

    r = norm_contagion_agents(400, 20, 2.0, 0.5, t_max=8, dt=0.02, n_runs=1, rng=1)
    f = r.to_frame()
    f = f[np.isclose((f.t * 2) % 1, 0) | np.isclose((f.t * 2) % 1, 1)]
    fit = fit_adoption(f, n_agents=400, behaviour="compliance", ceiling=1.0, n_boot=10, rng=2)
    assert fit.beta == pytest.approx(2.0, rel=0.15) and fit.gamma == pytest.approx(0.5, rel=0.15)
    lo, hi = fit.ci["ratio"]
    assert lo < fit.ratio < hi and lo > 1
    r = norm_contagion_agents(400, 20, 2.0, 0.5, n_immune=80, t_max=8, dt=0.02, n_runs=1, rng=1)
    g = r.to_frame()
    g = g[np.isclose((g.t * 2) % 1, 0) | np.isclose((g.t * 2) % 1, 1)]
    fit = fit_adoption(g, n_agents=400, behaviour="compliance", n_boot=0)
    assert fit.ceiling == pytest.approx(0.8, abs=0.02) and fit.ratio == pytest.approx(4.0, rel=0.2)
    assert math.isnan(fit.ci["ratio"][0])
    with pytest.raises(ValueError, match="measures"):
        fit_adoption(f, n_agents=400, n_boot=0)
