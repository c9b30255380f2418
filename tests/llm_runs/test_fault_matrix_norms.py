"""The fault matrix for CRSEC populations and SCENE sweeps (loopback only, bounded in time), as
tests/llm_runs/test_fault_matrix.py for the naming game: kill -9 at random points (inside journal writes
too), each resumed and compared with an uninterrupted run; an endpoint dying mid-run and a damaged
journal end in one line with a resumable directory. The endpoint is the stub server's scripted
mode (a scripted stand-in of a capable model, not a language model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from normlab.cli import main
from normlab.llm_runs import StubServer
from normlab.llm_runs import journal as jr
from normlab.llm_runs.testing import StubProcess

CRSEC = ["crsec", "run", "--ops", "llm", "--agents", "Bob Johnson,Carlos Gomez,Tamara Taylor,Isabella Rodriguez",
         "--minutes", "90", "--p-present", "1", "--seed", "5", "--no-progress"]
SCENE = ["scene", "run", "--tuples", "4", "--seed", "2", "--max-turns", "3", "--no-progress", "--n-boot", "100"]


def _crsec_tables(out: Path):
    return {t: pd.read_parquet(out / t) for t in ("states.parquet", "events.parquet", "norms.parquet",
                                                   "actions.parquet")}


def _scene_tables(out: Path):
    rows = []
    for line in (out / "episodes.jsonl").read_text().splitlines():
        d = json.loads(line)
        for ev in d["meta"].get("events", []):
            ev.pop("latency", None)  # measured, not replayed, in the uninterrupted reference
        rows.append(json.dumps(d, sort_keys=True))
    return rows


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(a[k].equals(b[k]) for k in a)
    return a == b


def _kill_resume(task, args, tables, trials, tmp_path, seed):
    gen = np.random.default_rng(seed)
    env = {**os.environ, "NORMLAB_TEST_SPLIT_WRITES": "0.003"}
    res = dict(survived=0, duplicated_calls=0, inside_write=0, failures=[])  # duplicated: journaled twice
    with StubProcess("--scripted", task) as stub:
        def cmd(out):
            return [sys.executable, "-m", "normlab.cli", *args, "--base-url", stub.base_url, "--out", str(out)]

        ref = tmp_path / "reference"
        t0 = time.perf_counter()
        subprocess.run(cmd(ref), env=env, check=True, capture_output=True, timeout=300)
        wall = time.perf_counter() - t0
        n_ref = len(jr.calls(jr.read_journal(ref / "journal.jsonl")))
        want = tables(ref)
        for k in range(trials):
            d = tmp_path / f"trial{k}"
            proc = subprocess.Popen(cmd(d), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(float(gen.uniform(0.35, 0.9)) * wall)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            j = d / "journal.jsonl"
            if j.exists() and j.stat().st_size and not j.read_bytes().endswith(b"\n"):
                res["inside_write"] += 1
            r = subprocess.run(cmd(d), env=env, capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                res["failures"].append(f"trial {k}: exit {r.returncode}: {r.stderr.strip()[-300:]}")
                continue
            calls = jr.calls(jr.read_journal(d / "journal.jsonl"))
            res["duplicated_calls"] += len(calls) - n_ref  # every request of the run journaled once
            if _same(tables(d), want):
                res["survived"] += 1
            else:
                res["failures"].append(f"trial {k}: tables differ from the uninterrupted run")
    return res


@pytest.mark.slow
@pytest.mark.parametrize("task, args, tables", [("crsec", CRSEC, _crsec_tables), ("scene", SCENE, _scene_tables)],
                         ids=["crsec", "scene"])
def test_kill_and_resume(task, args, tables, tmp_path):
    res = _kill_resume(task, args, tables, 5, tmp_path, 20261124)
    assert res["failures"] == [] and res["survived"] == 5 and res["duplicated_calls"] == 0, res


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("task, args, tables", [("crsec", CRSEC, _crsec_tables), ("scene", SCENE, _scene_tables)],
                         ids=["crsec", "scene"])
def test_endpoint_dying_mid_run_is_one_line_and_resumable(task, args, tables, tmp_path, capsys):
    with StubServer(scripted=task) as stub:
        ref = tmp_path / "ref"
        assert main([*args, "--base-url", stub.base_url, "--out", str(ref)]) == 0
        out = tmp_path / "run"
        stub.inject(*(["ok"] * 30 + ["500"] * 40))  # the endpoint dies after 30 requests
        capsys.readouterr()
        assert main([*args, "--base-url", stub.base_url, "--out", str(out), "--max-retries", "1"]) == 3
        lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(lines) == 1 and "HTTP 500" in lines[0] and "rerun the same command to resume" in lines[0]
        assert 0 < len(jr.calls(jr.read_journal(out / "journal.jsonl"))) <= 30
        stub._faults.clear()
        assert main([*args, "--base-url", stub.base_url, "--out", str(out)]) == 0
    assert _same(tables(out), tables(ref))


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("task, args, tables", [("crsec", CRSEC, _crsec_tables), ("scene", SCENE, _scene_tables)],
                         ids=["crsec", "scene"])
def test_damaged_journals(task, args, tables, tmp_path, capsys):
    with StubServer(scripted=task) as stub:
        ref = tmp_path / "ref"
        assert main([*args, "--base-url", stub.base_url, "--out", str(ref)]) == 0
        out = tmp_path / "run"
        assert main([*args, "--base-url", stub.base_url, "--out", str(out), "--budget", "40req"]) == 5
        j = out / "journal.jsonl"
        data = j.read_bytes()
        j.write_bytes(data + data.splitlines(keepends=True)[5][:37])  # a torn last line (a kill mid-write)
        capsys.readouterr()
        assert main([*args, "--base-url", stub.base_url, "--out", str(out)]) == 0
        assert _same(tables(out), tables(ref))
        lines = j.read_bytes().splitlines(keepends=True)
        lines[3] = b'{"ev": "call", "id": 4, "text": "cut in the mid\n'  # a damaged line inside the journal
        j.write_bytes(b"".join(lines))
        assert main([*args, "--base-url", stub.base_url, "--out", str(out)]) == 2
        err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(err) == 1 and "line 4 is not a journal record" in err[0]
