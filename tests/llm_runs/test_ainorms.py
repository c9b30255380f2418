"""Tests of the safe AI-norms loader (normlab.llm_runs.published.ainorms).

Malicious pickles and a small synthetic archive in the published structure are built inside the
tests; the published facts are checked on the real archives when ``<repo>/../shared/data/ai-norms``
exists (skipped otherwise).
"""

from __future__ import annotations

import builtins
import os
import pickle
import random
import subprocess
import time
import warnings
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from normlab.llm_runs.published import ainorms
from normlab.llm_runs.published._unpickle import UnsafePickleError, restricted_loads
from normlab.llm_runs.published.ainorms import (
    AINormsLog,
    first_round_reaching,
    load_ainorms,
    load_ainorms_meta,
    load_ainorms_probes,
    mean_success_by_round,
)
from normlab.schema import DECISION_COLUMNS, RUN_COLUMNS, GameLog, memory_state_string, rebuild_decisions
import _paths  # the repository's and tests/' folders (tests/_paths.py)

REPO = _paths.REPO
DATA = (Path(os.environ["NORMLAB_AINORMS"]) if os.environ.get("NORMLAB_AINORMS")
        else REPO / ".." / "shared" / "data" / "ai-norms").resolve()


# ------------------------------------------------------------------------------------------------
# restricted unpickler: malicious pickles are refused and nothing runs
# ------------------------------------------------------------------------------------------------
class _Reduce:
    """Pickles as ``func(*args)``."""

    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def _malicious_payloads(marker: Path) -> dict[str, bytes]:
    m = str(marker)
    touch = f"touch {m}"
    return {
        "os.system": pickle.dumps(_Reduce(os.system, (touch,))),
        "os.system-protocol0": pickle.dumps(_Reduce(os.system, (touch,)), protocol=0),
        "builtins.eval": pickle.dumps(_Reduce(builtins.eval, (f"open({m!r}, 'w').close()",))),
        "builtins.exec": pickle.dumps(_Reduce(builtins.exec, (f"open({m!r}, 'w').close()",))),
        "subprocess.Popen": pickle.dumps(_Reduce(subprocess.Popen, (["touch", m],))),
        "numpy": pickle.dumps(np.arange(3)),
        "raw GLOBAL opcode": f"cos\nsystem\n(S'{touch}'\ntR.".encode(),
        "raw INST opcode": f"(S'{touch}'\nios\nsystem\n.".encode(),
        "nested in a run dict": pickle.dumps({"rules": "x", 0: {"simulation": {1: _Reduce(os.system, (touch,))}}}),
        "persistent id": b"Pfoo\n.",
    }


@pytest.mark.parametrize("label", list(_malicious_payloads(Path("/nonexistent")).keys()))
def test_restricted_unpickler_refuses_and_runs_nothing(tmp_path, label):
    marker = tmp_path / "pwned"
    data = _malicious_payloads(marker)[label]
    with pytest.raises(UnsafePickleError) as info:
        restricted_loads(data, source=f"evil[{label}]")
    assert isinstance(info.value, ValueError)  # bad input
    msg = str(info.value)
    assert f"evil[{label}]" in msg and ("refused" in msg)
    if label != "persistent id":
        assert "global" in msg
    assert not marker.exists(), "a refused pickle must not execute anything"


def test_refusal_names_the_global(tmp_path):
    with pytest.raises(UnsafePickleError, match=r"(posix|os|nt)\.system"):
        restricted_loads(pickle.dumps(_Reduce(os.system, ("true",))))
    with pytest.raises(UnsafePickleError, match=r"builtins\.eval"):
        restricted_loads(pickle.dumps(_Reduce(builtins.eval, ("1",))))
    with pytest.raises(UnsafePickleError, match=r"subprocess\.Popen"):
        restricted_loads(pickle.dumps(_Reduce(subprocess.Popen, (["true"],))))
    with pytest.raises(UnsafePickleError, match=r"numpy"):
        restricted_loads(pickle.dumps(np.float64(1.5)))


@pytest.mark.parametrize("obj", [{1, 2}, frozenset({1}), b"abc", bytearray(b"x"), [1, {"a": b"x"}]])
def test_non_plain_builtins_are_refused(obj):
    with pytest.raises(UnsafePickleError, match="refused object of type"):
        restricted_loads(pickle.dumps(obj, protocol=5))


def test_plain_builtins_round_trip():
    obj = {"rules": "r", 0: {"a": [1, 2.5, True, None, ("x", -3)], "b": {"c": []}}, -1: "z"}
    assert restricted_loads(pickle.dumps(obj)) == obj
    rec = [1, 2]
    rec.append(rec)  # recursive structures are fine (no code involved)
    out = restricted_loads(pickle.dumps(rec))
    assert out[2] is out


def test_corrupt_and_wrong_type_input():
    good = pickle.dumps({"a": [1, 2, 3]})
    with pytest.raises(ValueError, match="not a valid pickle") as info:
        restricted_loads(good[:-3])
    assert not isinstance(info.value, UnsafePickleError)
    with pytest.raises(TypeError, match="bytes"):
        restricted_loads("not bytes")


# ------------------------------------------------------------------------------------------------
# a tiny synthetic archive in the published structure
# ------------------------------------------------------------------------------------------------
def _rules(names, fail=-50, succ=100):
    return (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n"
        "  Context: Player 1 is playing a multi-round partnership game with Player 2 for 100 rounds.\n"
        f"  At each round, Player 1 and Player 2 simultaneously pick an action from the following values: {list(names)}.\n"
        "  The payoff that both players get is determined by the following rule:\n"
        f"  1. If Players play the SAME action as each other, they will both be REWARDED with payoff {succ} points.\n"
        f"  2. If Players play DIFFERENT actions to each other, they will both be PUNISHED with payoff {fail} points. \n"
        "  The objective of each Player is to maximize their own accumulated point tally, conditional on the behavior of the other player.\n  "
    )


def _simulate(rng, names, n, memory, *, kind, cm=0, x=None, stop=72, max_t=2000):
    """One run in the published dict structure (agents follow their recent partners' majority)."""
    succ, fail = 100, -50
    sim = {a: {"my_history": [], "partner_history": [], "interactions": [], "score": 0, "score_history": [],
               "outcome": [], "committed_tag": False, "neighbours": [b for b in range(1, n + 1) if b != a]}
           for a in range(1, n + 1)}

    def update(ag, mine, other, pay):
        ag["score"] += pay
        ag["my_history"].append(mine)
        ag["partner_history"].append(other)
        ag["score_history"].append(ag["score"])
        ag["outcome"].append(pay)

    y = None
    if kind != "baseline":
        y = names[1]
        for _ in range(memory):
            for a in sim:
                update(sim[a], x, x, succ)
        for a in rng.sample(sorted(sim), cm):
            sim[a]["committed_tag"] = True
    tracker = {"players": [], "answers": [], "outcome": []}
    streak = 0
    while len(tracker["outcome"]) < max_t and streak < stop:
        p1 = rng.choice(sorted(sim))
        p2 = rng.choice(sim[p1]["neighbours"])
        sim[p1]["interactions"].append(p2)
        sim[p2]["interactions"].append(p1)
        answers = []
        for p in (p1, p2):
            ag = sim[p]
            if ag["committed_tag"]:
                answers.append(y)
            elif ag["partner_history"] and rng.random() < 0.99:  # majority of the partners' last 3 names
                counts = Counter(ag["partner_history"][-3:]).most_common()
                tie = len(counts) > 1 and counts[0][1] == counts[1][1]
                answers.append(ag["partner_history"][-1] if tie else counts[0][0])
            else:
                answers.append(rng.choice(names))
        a1, a2 = answers
        pay = succ if a1 == a2 else fail
        update(sim[p1], a1, a2, pay)
        update(sim[p2], a2, a1, pay)
        tracker["players"].append([p1, p2])
        tracker["answers"].append([a1, a2])
        tracker["outcome"].append(1 if pay > 5 else 0)
        streak = streak + 1 if a1 == a2 else 0
    conv = ({"converged_index": len(tracker["outcome"]), "committed_to": None} if kind == "baseline"
            else {"converged_index": 0, "committed_to": y})
    return {"simulation": sim, "tracker": tracker, "convergence": conv}


SYN_FILES = {
    "baseline": "llama31_70b_converged_baseline_Q_M_-50_100_3mem_complete_6ps_0.5tmp.pkl",
    "swap": "llama31_70b_swap_0_2cmtd_Q_M_-50_100_3mem_complete_6ps_0.5tmp.pkl",
    "evolved": "llama3_70b_evolved_from_0_F_J_-50_100_2mem_complete_6ps_100ints_0.5tmp.pkl",
    "bias": "llama31_bias_test_MQ_QM.pkl",
    "nomem": "llama3_no_memory_bias_test_QM_0mem.pkl",
    "meta": "llama31_meta_test_final.pkl",
    "meta_summary": "llama3_meta_prompting.pkl",
}


def _synthetic_objects():
    rng = random.Random(3)
    base = {"rules": _rules(["Q", "M"])}
    for k in range(3):
        base[k] = _simulate(rng, ["Q", "M"], 6, 3, kind="baseline")
    swap = {k: _simulate(rng, ["Q", "M"], 6, 3, kind="swap", cm=2, x="Q", stop=10**9, max_t=60) for k in range(2)}
    evolved = {"rules": _rules(["F", "J"]), 0: _simulate(rng, ["F", "J"], 6, 2, kind="evolved", x="F", stop=10**9, max_t=40)}
    bias = {"simulation": {"my_history": ["M", "Q"], "partner_history": ["Q", "M"], "interactions": [], "score": -100,
                           "score_history": [-50, -100], "outcome": [-50, -50]},
            "tracker": {"answers": ["M", "M", "Q", "M", "Q"]}}
    nomem = {"simulation": {"my_history": [], "partner_history": [], "interactions": [], "score": 0,
                            "score_history": [], "outcome": []},
             "tracker": {"answers": ["Q", "M", "M", "Q", "M", "M"]}}
    meta = {1: {"min": [1, 1, 0], "max": [1, 1, 1], "action_i": [1, 0]}, 2: {"min": [1], "no_actions": []}}
    meta_summary = {"min": {"mean": 1.0, "std": 0}, "#_actions": {"mean": 0.85, "std": 0.0324}}
    return {"baseline": base, "swap": swap, "evolved": evolved, "bias": bias, "nomem": nomem, "meta": meta,
            "meta_summary": meta_summary}


def _write_zip(path: Path, objs: dict, folder="synthetic_data"):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key, obj in objs.items():
            zf.writestr(f"{folder}/{SYN_FILES[key]}", pickle.dumps(obj))
    return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    objs = _synthetic_objects()
    zpath = _write_zip(tmp_path_factory.mktemp("syn") / "synthetic_data.zip", objs)
    return zpath, objs


def _agent_windows(ag, prefix, memory):
    """Memory state before each of the agent's decisions, straight from its histories."""
    mh, ph = ag["my_history"], ag["partner_history"]
    return [memory_state_string(zip(mh[max(0, k - memory):k], ph[max(0, k - memory):k]))
            for k in range(prefix, len(mh))]


def _assert_round_trip(log, raw_by_file):
    """Each decision's memory state equals the window of the agent's own published history."""
    dec = log.decisions
    for row in log.runs.itertuples():
        run = raw_by_file[row.source_file][int(row.source_run)]
        d = dec[dec["run"] == row.run]
        for a, ag in run["simulation"].items():
            got = d.loc[d["agent"] == a, "memory_state"].tolist()
            assert got == _agent_windows(ag, int(row.prepared_memory), int(row.memory)), (row.source_file, a)
            own = d.loc[d["agent"] == a, "name"].tolist()
            assert own == ag["my_history"][int(row.prepared_memory):]


def test_synthetic_load_schema_and_counts(synthetic):
    zpath, objs = synthetic
    log = load_ainorms(zpath)
    assert isinstance(log, AINormsLog) and isinstance(log, GameLog)
    assert list(log.decisions.columns[: len(DECISION_COLUMNS)]) == list(DECISION_COLUMNS)
    assert list(log.runs.columns[: len(RUN_COLUMNS)]) == list(RUN_COLUMNS)
    assert log.runs["run"].tolist() == list(range(len(log.runs)))
    assert log.runs.groupby("kind").size().to_dict() == {"baseline": 3, "swap": 2, "evolved": 1}
    n_inter = sum(len(r["tracker"]["players"]) for key in ("baseline", "swap", "evolved")
                  for k, r in objs[key].items() if k != "rules")
    assert len(log.decisions) == 2 * n_inter  # prepared memory entries are not decisions
    assert (log.runs["source_archive"] == "synthetic_data.zip").all()
    assert set(log.runs["model"]) == {"Llama-3.1-70B-Instruct", "Llama-3-70B-Instruct"}
    assert (log.issues["severity"] != "error").all()


def test_synthetic_baseline(synthetic):
    zpath, objs = synthetic
    log = load_ainorms(zpath, kinds="baseline")
    r = log.runs
    assert (r["names"] == "Q,M").all() and (r["memory"] == 3).all() and (r["n_agents"] == 6).all()
    assert (r["initial"] == "empty").all() and r["committed_name"].isna().all()
    assert (r["converged_index"] == r["n_interactions"]).all()
    assert (r["stop_streak"] == 72).all() and r["converged"].all()
    for row in r.itertuples():
        last = objs["baseline"][row.source_run]["tracker"]["answers"][-1][0]
        assert row.consensus == last
    first = log.decisions.groupby(["run", "agent"]).head(1)
    assert (first["memory_state"] == "").all() and (first["memory_len"] == 0).all()
    assert r["flipped"].isna().all()


def test_synthetic_swap_prepared_memory_and_committed(synthetic):
    zpath, objs = synthetic
    log = load_ainorms(zpath, kinds=["swap"])
    r = log.runs
    assert (r["kind"] == "swap").all() and (r["initial"] == "consensus:Q").all()
    assert (r["committed_count"] == 2).all() and (r["committed_name"] == "M").all()
    assert (r["committed_to"] == "M").all() and (r["prepared_memory"] == 3).all()
    d = log.decisions
    first = d.groupby(["run", "agent"]).head(1)
    assert (first["memory_state"] == "Q,Q;Q,Q;Q,Q").all() and (first["memory_len"] == 3).all()
    for row in r.itertuples():
        sim = objs["swap"][row.source_run]["simulation"]
        committed = {a for a, ag in sim.items() if ag["committed_tag"]}
        dr = d[d["run"] == row.run]
        assert set(dr.loc[dr["committed"], "agent"]) <= committed
        assert dr.loc[dr["agent"].isin(committed), "committed"].all()
        assert (dr.loc[dr["committed"], "name"] == "M").all()
        assert not np.isnan(row.committed_share_last3)
        assert row.flipped is pd.NA or isinstance(row.flipped, (bool, np.bool_))
        assert pd.isna(row.flip_interaction) or 3 * row.n_agents <= row.flip_interaction <= row.n_interactions


def test_synthetic_evolved(synthetic):
    zpath, _ = synthetic
    log = load_ainorms(zpath, kinds="evolved", models="llama3")
    (row,) = log.runs.itertuples()
    assert row.names == "F,J" and row.initial == "consensus:F" and row.committed_count == 0
    assert row.committed_name is None and row.committed_to == "J" and row.planned_interactions == 100
    first = log.decisions.groupby("agent").head(1)
    assert (first["memory_state"] == "F,F;F,F").all()


def test_synthetic_round_trip_and_schema_rebuild(synthetic):
    zpath, objs = synthetic
    log = load_ainorms(zpath)
    raw = {SYN_FILES[k]: objs[k] for k in ("baseline", "swap", "evolved")}
    _assert_round_trip(log, raw)
    # the loader's row builder gives exactly normlab.schema.rebuild_decisions' rows
    for row in log.runs.itertuples():
        run = raw[row.source_file][row.source_run]
        sim = run["simulation"]
        init = None
        if row.prepared_memory:
            init = {a: list(zip(ag["my_history"][: row.prepared_memory], ag["partner_history"][: row.prepared_memory]))
                    for a, ag in sim.items()}
        ref = rebuild_decisions(np.asarray(run["tracker"]["players"]), [tuple(p) for p in run["tracker"]["answers"]],
                                run=row.run, n_agents=row.n_agents, memory=row.memory,
                                committed=[a for a, ag in sim.items() if ag["committed_tag"]], initial_memory=init)
        got = log.decisions[log.decisions["run"] == row.run].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, ref, check_dtype=False)


def test_loads_folder_single_pkl_and_sequence(synthetic, tmp_path):
    zpath, objs = synthetic
    folder = tmp_path / "loose"
    folder.mkdir()
    for key in ("baseline", "swap"):
        (folder / SYN_FILES[key]).write_bytes(pickle.dumps(objs[key]))
    (folder / "README.md").write_text("not data")
    assert len(load_ainorms(folder).runs) == 5
    single = load_ainorms(folder / SYN_FILES["swap"])
    assert len(single.runs) == 2 and single.runs["source_archive"].isna().all()
    both = load_ainorms([folder, zpath], kinds="baseline")
    assert len(both.runs) == 6 and both.runs["run"].is_unique


def test_filters(synthetic):
    zpath, _ = synthetic
    assert set(load_ainorms(zpath, models="Llama-3-70B-Instruct").runs["kind"]) == {"evolved"}
    assert len(load_ainorms(zpath, files="*_swap_*").runs) == 2
    with pytest.raises(ValueError, match="unknown kinds"):
        load_ainorms(zpath, kinds="simulation")
    with pytest.raises(ValueError, match="unknown model"):
        load_ainorms(zpath, models="gpt-4")
    with pytest.raises(ValueError, match="no AI-norms file"):
        load_ainorms(zpath, files="*nothing*")
    with pytest.raises(TypeError):
        load_ainorms(zpath, kinds=3)
    with pytest.raises(ValueError, match="on_inconsistency"):
        load_ainorms(zpath, on_inconsistency="shrug")


def test_probe_runs_in_gamelog(synthetic):
    zpath, _ = synthetic
    log = load_ainorms(zpath, kinds="probe")
    assert set(log.runs["kind"]) == {"probe"} and (log.runs["n_agents"] == 1).all()
    by_file = log.runs.set_index("source_file")
    assert by_file.loc[SYN_FILES["bias"], "initial"] == "memory:M,Q;Q,M"
    assert by_file.loc[SYN_FILES["nomem"], "initial"] == "empty"
    assert (log.decisions["partner"] == -1).all() and log.decisions["partner_name"].isna().all()


def test_errors_on_bad_paths(tmp_path, synthetic):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_ainorms(tmp_path / "missing.zip")
    txt = tmp_path / "notes.txt"
    txt.write_text("x")
    with pytest.raises(ValueError, match=r"neither a \.zip archive nor a \.pkl"):
        load_ainorms(txt)
    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a valid zip"):
        load_ainorms(fake)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no"):
        load_ainorms(empty)
    with pytest.raises(TypeError, match="path must be"):
        load_ainorms(42)
    zpath, _ = synthetic
    with pytest.raises(ValueError, match="allowed"):
        load_ainorms(zpath, max_file_bytes=10)


def test_malicious_member_in_archive_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    objs = _synthetic_objects()
    zpath = tmp_path / "evil.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr(f"d/{SYN_FILES['baseline']}", pickle.dumps(objs["baseline"]))
        evil = {"rules": "x", 0: _Reduce(os.system, (f"touch {marker}",))}
        zf.writestr("d/llama31_70b_swap_0_1cmtd_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl", pickle.dumps(evil))
    with pytest.raises(UnsafePickleError, match=r"evil\.zip:d/llama31_70b_swap.*refused to load global"):
        load_ainorms(zpath)
    assert not marker.exists()
    # the safe member alone still loads
    assert len(load_ainorms(zpath, kinds="baseline").runs) == 3


def test_inconsistencies_raise_or_are_reported(tmp_path):
    objs = _synthetic_objects()
    bad = objs["swap"]
    ag = bad[0]["simulation"][1]
    k = len(ag["my_history"]) - 1
    ag["my_history"][k] = "M" if ag["my_history"][k] == "Q" else "Q"  # contradicts the tracker
    zpath = tmp_path / "bad.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        zf.writestr(SYN_FILES["swap"], pickle.dumps(bad))
    with pytest.raises(ValueError, match=r"inconsistent AI-norms data.*run 0.*\[my_history\]"):
        load_ainorms(zpath)
    with pytest.warns(UserWarning, match="inconsistencies"):
        log = load_ainorms(zpath, on_inconsistency="warn")
    errs = log.issues[log.issues["severity"] == "error"]
    assert {"my_history", "payoffs"} <= set(errs["check"]) and (errs["source_run"] == 0).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_ainorms(zpath, on_inconsistency="ignore").runs) == 2


def test_probes_and_meta_frames(synthetic):
    zpath, _ = synthetic
    pr = load_ainorms_probes(zpath)
    assert list(pr.columns[: len(ainorms.PROBE_COLUMNS)]) == list(ainorms.PROBE_COLUMNS)
    s = pr[pr["probe"] == "strategy"]
    assert len(s) == 5 and (s["memory_state"] == "M,Q;Q,M").all() and (s["memory_len"] == 2).all()
    assert (s["names"] == "Q,M").all() and s["name"].tolist() == ["M", "M", "Q", "M", "Q"]
    n = pr[pr["probe"] == "no_memory"]
    assert len(n) == 6 and (n["memory_state"] == "").all() and n["valid"].all()
    assert len(load_ainorms_probes(zpath, probes="strategy", models="llama31")) == 5
    with pytest.raises(ValueError, match="unknown probes"):
        load_ainorms_probes(zpath, probes="meta")
    meta = load_ainorms_meta(zpath)
    assert list(meta.columns) == list(ainorms.META_COLUMNS)
    items = meta[meta["player"].notna()]
    assert len(items) == 3 + 3 + 2 + 1
    assert items.loc[items["question"] == "action_i", "step"].tolist() == [1, 2]  # not asked at t = 0
    summ = meta[meta["player"].isna()].set_index("question")
    assert summ.loc["no_actions", "mean"] == pytest.approx(0.85)


def test_meta_layouts_of_plotter(tmp_path):
    """The published meta-prompting layouts read by the authors' plotter.ipynb (cells 26-28): a per-player file
    named ``claude_meta_prompting_final.pkl``, per-player ``{question: {'outcome': [...]}}`` (llama2), and the
    player-less ``{question: {'outcome': [...]}}`` / ``{question: [...]}`` trackers."""
    files = {
        "claude_meta_prompting_final.pkl": {1: {"min": [1, 0], "action_i": [1]}, 2: {"max": [1]}},
        "llama2_meta_test.pkl": {1: {"min": {"outcome": [0, 1, 1]}, "no_points": {"outcome": [1]}}},
        "llama31_meta_test.pkl": {"min": {"outcome": [1, 1, 0]}, "round": {"outcome": [0]}},
        "llama3_meta_test_random.pkl": {"max": [1, 0, 1, 1]},
    }
    zpath = tmp_path / "meta.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        for name, obj in files.items():
            zf.writestr(f"d/{name}", pickle.dumps(obj))
    meta = load_ainorms_meta(zpath)
    by = {f: g for f, g in meta.groupby("source_file")}
    c = by["claude_meta_prompting_final.pkl"]
    assert (c["model"] == "Claude-3.5-Sonnet").all() and len(c) == 4
    assert c.loc[c["question"] == "action_i", "step"].tolist() == [1]
    assert c.loc[c["question"] == "min", "correct"].tolist() == [1, 0]
    l2 = by["llama2_meta_test.pkl"]
    assert l2["player"].tolist() == [1, 1, 1, 1] and l2.loc[l2["question"] == "min", "correct"].tolist() == [0, 1, 1]
    assert l2.loc[l2["question"] == "no_points", "step"].tolist() == [1]
    flat = by["llama31_meta_test.pkl"]
    assert flat["player"].isna().all() and flat["step"].tolist() == [0, 1, 2, 0]
    assert flat.loc[flat["question"] == "min", "correct"].tolist() == [1, 1, 0]
    assert by["llama3_meta_test_random.pkl"]["correct"].tolist() == [1, 0, 1, 1]
    acc = meta.groupby("source_file")["correct"].mean()
    assert acc["llama2_meta_test.pkl"] == pytest.approx(0.75)
    bad = tmp_path / "bad.zip"
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("d/llama2_meta_test.pkl", pickle.dumps({1: {"min": {"outcome": [2]}}}))
    with pytest.raises(ValueError, match="scores must be 0 or 1"):
        load_ainorms_meta(bad)


def test_success_curve_helpers():
    # two runs of N = 2: run 0 lasts 2 rounds, run 1 three rounds
    dec = pd.DataFrame({"run": [0, 0, 0, 0, 1, 1, 1, 1, 1, 1], "t": [0, 1, 2, 3, 0, 1, 2, 3, 4, 5],
                        "success": [0, 1, 1, 1, 0, 0, 1, 0, 1, 1]})
    dec = dec.loc[dec.index.repeat(2)].reset_index(drop=True)
    n = len(dec)
    full = pd.DataFrame({"run": dec["run"], "t": dec["t"], "round": dec["t"] // 2, "agent": 0, "partner": 1,
                         "name": "A", "partner_name": "A", "valid": True, "success": dec["success"].astype(bool),
                         "committed": False, "memory_state": "", "memory_len": 0})
    runs = pd.DataFrame({"run": [0, 1], "model": "m", "kind": "baseline", "names": "A,B", "n_agents": 2, "memory": 1,
                         "committed_count": 0, "committed_name": None, "initial": "empty", "n_interactions": [4, 6],
                         "consensus": None, "source_file": "f"})
    log = GameLog(full, runs)
    curve = mean_success_by_round(log)
    assert curve.index.tolist() == [1, 2, 3] and n == 20
    assert curve.tolist() == pytest.approx([0.25, 0.75, 1.0])  # run 0 padded with 1 in round 3
    assert mean_success_by_round(log, pad_finished=False).tolist() == pytest.approx([0.25, 0.75, 1.0])
    assert first_round_reaching(curve, 0.7) == 2 and first_round_reaching(curve, 1.01) is None


# ------------------------------------------------------------------------------------------------
# published data (skipped when the shared data folder is absent)
# ------------------------------------------------------------------------------------------------
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"published AI-norms data not found at {DATA}")


@pytest.fixture(scope="module")
def published():
    if not DATA.is_dir():
        pytest.skip(f"published AI-norms data not found at {DATA}")
    t0 = time.perf_counter()
    log = load_ainorms(DATA)
    return log, time.perf_counter() - t0


def _raw(name: str):
    for z in sorted(DATA.glob("*.zip")):
        with zipfile.ZipFile(z) as zf:
            for member in zf.namelist():
                if member.rsplit("/", 1)[-1] == name:
                    return restricted_loads(zf.read(member), source=member)
    raise FileNotFoundError(name)


@needs_data
@pytest.mark.data
def test_published_counts_and_load_time(published):
    log, seconds = published
    assert seconds < 20.0, f"loading both archives took {seconds:.1f} s"
    counts = log.runs.groupby(["model", "kind"]).size().to_dict()
    assert counts == {
        ("Llama-3-70B-Instruct", "baseline"): 464, ("Llama-3-70B-Instruct", "evolved"): 14,
        ("Llama-3-70B-Instruct", "swap"): 69, ("Llama-3.1-70B-Instruct", "baseline"): 98,
        ("Llama-3.1-70B-Instruct", "evolved"): 24, ("Llama-3.1-70B-Instruct", "swap"): 185,
    }
    assert len(log.decisions) == 2 * int(log.runs["n_interactions"].sum()) == 850060
    assert log.runs["run"].tolist() == list(range(854))
    assert not (log.issues["severity"] == "error").any()
    assert log.decisions["valid"].all()
    base = log.runs[log.runs["kind"] == "baseline"]
    assert (base["converged_index"] == base["n_interactions"]).all()
    other = log.runs[log.runs["kind"] != "baseline"]
    assert (other["converged_index"].dropna() == 0).all()
    assert (other["initial"] == "consensus:" + other["names"].str.split(",").str[0]).all()
    flips = log.runs[log.runs["kind"] != "baseline"]
    assert ((flips["flip_interaction"] >= 3 * flips["n_agents"]) | flips["flip_interaction"].isna()).all()
    assert (flips.loc[flips["flipped"].fillna(False), "flip_interaction"].notna()).all()
    big = log.runs[log.runs["n_agents"] == 200]
    assert len(big) == 22 and set(big["stop_streak"]) == {72}


@needs_data
@pytest.mark.data
def test_published_qm_baselines_reach_consensus_on_m(published):
    log, _ = published
    qm = log.select(kind="baseline", names="Q,M", memory=5, n_agents=24)
    for model in ("Llama-3-70B-Instruct", "Llama-3.1-70B-Instruct"):
        r = qm.runs[qm.runs["model"] == model]
        assert len(r) == 40 and (r["consensus"] == "M").sum() == 40


@needs_data
@pytest.mark.data
def test_published_rounds_to_095_with_ten_names(published):
    log, _ = published
    w10 = log.select(kind="baseline", names="Q,M,X,Y,F,J,P,R,C,D", memory=5, n_agents=24)
    rounds = {}
    for model in ("Llama-3-70B-Instruct", "Llama-3.1-70B-Instruct"):
        sub = w10.select(model=model)
        assert len(sub.runs) == 40
        rounds[model] = first_round_reaching(mean_success_by_round(sub), 0.95)
    # round label r = schema round r - 1 = interactions (r-1)N .. rN-1; finished runs count as successes
    assert rounds == {"Llama-3-70B-Instruct": 10, "Llama-3.1-70B-Instruct": 13}


@needs_data
@pytest.mark.data
def test_published_memory_round_trip(published):
    log, _ = published
    files = [
        "llama3_70b_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl",
        "llama31_70b_swap_0_8cmtd_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl",
        "llama3_70b_swap_0_3cmtd_M_Q_-50_100_3mem_complete_48ps_0.5tmp.pkl",
        "llama3_70b_evolved_from_0_F_J_-50_100_1mem_complete_48ps_1000ints_0.5tmp.pkl",
    ]
    sub = log.select(source_file=files)
    raw = {f: _raw(f) for f in files}
    _assert_round_trip(sub, raw)
    swap = sub.runs[sub.runs["kind"] != "baseline"]
    first = sub.decisions[sub.decisions["run"].isin(swap["run"])].groupby(["run", "agent"]).head(1)
    x = first["run"].map(swap.set_index("run")["initial"].str.split(":").str[1])
    h = first["run"].map(swap.set_index("run")["memory"])
    assert (first["memory_state"] == [";".join([f"{a},{a}"] * k) for a, k in zip(x, h)]).all()


@needs_data
@pytest.mark.data
def test_published_probes_and_meta(published):
    log, _ = published
    pr = load_ainorms_probes(DATA)
    assert len(pr) == 12 * 1000 + 5000 + 15000 + 10000 + 10000
    s = pr[(pr["probe"] == "strategy") & (pr["memory_state"] == "M,Q;Q,M")]
    assert s["name"].value_counts().to_dict() == {"M": 848, "Q": 152}
    assert set(pr.loc[pr["probe"] == "strategy", "model"]) == {"Llama-3.1-70B-Instruct"}
    meta = load_ainorms_meta(DATA)
    items = meta[meta["player"].notna() & (meta["question"] == "min")]
    run0 = log.runs[(log.runs["source_file"] == "llama31_70b_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl")
                    & (log.runs["source_run"] == 0)]["run"].item()
    per_agent = log.decisions[log.decisions["run"] == run0].groupby("agent").size()
    assert items.groupby("player").size().to_dict() == {a: int(per_agent[a]) for a in range(1, 9)}


def test_committed_share_windows():
    players = np.array([[1, 2], [3, 1], [2, 3], [1, 3]])
    answers = np.array([["Y", "Y"], ["X", "Y"], ["Y", "Y"], ["Y", "X"]], dtype=object)
    # N = 1: blocks are single interactions; agent 1 is committed and ignored
    got = ainorms._committed_share_windows(players, answers, {1}, "Y", 1)
    assert got.tolist() == pytest.approx([2.0, 1.0])
    assert ainorms._committed_share_windows(players, answers, {1}, "Y", 2).size == 0  # shorter than 3N
    assert ainorms._committed_share_windows(players, answers, set(), "Y", 1).tolist() == pytest.approx([2.5, 2.0])
