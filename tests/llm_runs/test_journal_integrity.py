"""Journals prove they are whole and theirs (issue 29, item 2): a record deleted from a finished
journal, a journal copied from a run with another seed, or tables rebuilt from a shorter journal
were resumed as complete (exit 0, 170 decisions written over 240); now each is refused in one
line that names the choice, and ``normlab journal repair`` keeps what is whole."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from normlab.llm_runs import EndpointConfig, StubServer, run_game
from normlab.llm_runs import journal as jr
from normlab.llm_runs.crsec import run_population
from normlab.llm_runs.probes import individual_bias

KW = dict(max_interactions=60, runs=2, stop="max", mode="exact", progress=False)


def _ep(stub):
    return EndpointConfig(base_url=stub.base_url, backoff=0.01, backoff_max=0.05)


def _lines(path):
    return path.read_bytes().splitlines(keepends=True)


def _interaction_lines(path, run):
    return [k for k, ln in enumerate(_lines(path)) if ln.startswith(b'{"ev":"int","run":%d,' % run)]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "normlab.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def stub():
    with StubServer(["Q", "M"]) as s:
        yield s


@pytest.fixture(scope="module")
def finished(stub, tmp_path_factory):
    """A finished 2-run exact journal (seed 1), and a run with seed 2."""
    base = tmp_path_factory.mktemp("finished")
    a = run_game(6, 2, "Q,M", endpoint=_ep(stub), out=base / "seed1", rng=1, **KW)
    b = run_game(6, 2, "Q,M", endpoint=_ep(stub), out=base / "seed2", rng=2, **KW)
    return base, a, b


def test_every_record_carries_its_place_and_its_run(finished):
    base, a, _ = finished
    recs = jr.read_journal(base / "seed1" / "journal.jsonl")
    fp = jr.read_settings(base / "seed1")["hash"][:16]
    assert [r["seq"] for r in recs] == list(range(len(recs)))
    assert {r["fp"] for r in recs} == {fp}
    assert len(a.log.decisions) == 240


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_a_deleted_record_is_refused_in_one_line_and_repair_keeps_what_is_whole(finished, stub, tmp_path):
    base, a, _ = finished
    d = tmp_path / "gap"
    shutil.copytree(base / "seed1", d)
    lines = _lines(d / "journal.jsonl")
    k = _interaction_lines(d / "journal.jsonl", 0)[25]
    (d / "journal.jsonl").write_bytes(b"".join(lines[:k] + lines[k + 1:]))
    n = stub.n_chat
    with pytest.raises(jr.JournalDamaged, match="missing.*normlab journal repair") as info:
        run_game(6, 2, "Q,M", endpoint=_ep(stub), out=d, rng=1, **KW)
    assert "\n" not in str(info.value) and stub.n_chat == n
    # the tables in place are not overwritten
    assert len(pd.read_parquet(d / "decisions.parquet")) == 240
    # the command line: one line, exit 2; `journal check` says where, exit 4
    r = _cli("llm-run", "--n-agents", "6", "--memory", "2", "--names", "Q,M", "--max-interactions", "60",
             "--runs", "2", "--stop", "max", "--mode", "exact", "--seed", "1", "--base-url", stub.base_url,
             "--out", str(d))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "journal repair" in r.stderr
    c = _cli("journal", "check", str(d), "--json")
    assert c.returncode == 4 and json.loads(c.stdout)["records"] == k
    # repair: the records before the gap stay, the rest is set aside; a rerun plays on from the gap
    rep = _cli("journal", "repair", str(d), "--json")
    assert rep.returncode == 0, rep.stderr
    out = json.loads(rep.stdout)
    assert out["kept"] == k and out["moved"] == len(lines) - 1 - k
    assert len(_lines(d / out["aside"].split("/")[-1])) == out["moved"]
    res = run_game(6, 2, "Q,M", endpoint=_ep(stub), out=d, rng=1, **KW)
    assert len(res.log.decisions) == 240
    cols = ["run", "t", "agent", "name", "partner", "partner_name", "memory_state"]
    pd.testing.assert_frame_equal(res.log.decisions[cols].reset_index(drop=True),
                                  a.log.decisions[cols].reset_index(drop=True))
    assert _cli("journal", "check", str(d)).returncode == 0


def test_a_journal_from_another_seed_is_refused(finished, stub, tmp_path):
    base, _, _ = finished
    d = tmp_path / "foreign"
    shutil.copytree(base / "seed1", d)
    shutil.copy(base / "seed2" / "journal.jsonl", d / "journal.jsonl")
    n = stub.n_chat
    with pytest.raises(jr.JournalDamaged, match="other settings"):
        run_game(6, 2, "Q,M", endpoint=_ep(stub), out=d, rng=1, **KW)
    with pytest.raises(jr.JournalDamaged, match="other settings"):  # never cut by repair
        jr.repair_journal(d)
    assert stub.n_chat == n
    # a journal spliced from two runs is refused even without the settings (its fingerprints differ)
    mixed = _lines(base / "seed1" / "journal.jsonl")[:10] + _lines(base / "seed2" / "journal.jsonl")[10:]
    (tmp_path / "mixed.jsonl").write_bytes(b"".join(mixed))
    with pytest.raises(jr.JournalDamaged, match="other settings"):
        jr.read_journal(tmp_path / "mixed.jsonl")


def test_a_repeated_record_and_a_run_end_before_its_interactions_are_refused(finished, stub, tmp_path):
    base, _, _ = finished
    d = tmp_path / "dup"
    shutil.copytree(base / "seed1", d)
    lines = _lines(d / "journal.jsonl")
    k = _interaction_lines(d / "journal.jsonl", 1)[3]
    (d / "journal.jsonl").write_bytes(b"".join(lines[:k + 1] + [lines[k]] + lines[k + 1:]))
    with pytest.raises(jr.JournalDamaged, match="repeated or out of place"):
        run_game(6, 2, "Q,M", endpoint=_ep(stub), out=d, rng=1, **KW)
    # a journal of an earlier version (no places): a run end that does not follow its interactions
    legacy = tmp_path / "legacy"
    shutil.copytree(base / "seed1", legacy)
    recs = [{k: v for k, v in r.items() if k not in ("seq", "fp")} for r in jr.read_journal(base / "seed1" / "journal.jsonl")]
    recs = [r for r in recs if not (r["ev"] == "int" and r["run"] == 0 and r["t"] == 25)]
    with open(legacy / "journal.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in recs)
    with pytest.raises(jr.JournalDamaged, match="run 0 ended after 60 interactions but the journal holds 25"):
        run_game(6, 2, "Q,M", endpoint=_ep(stub), out=legacy, rng=1, **KW)


def test_tables_are_never_replaced_by_fewer_rows(finished, stub, tmp_path):
    base, _, _ = finished
    d = tmp_path / "short"
    shutil.copytree(base / "seed1", d)
    # a journal cut short at a record boundary (no gap, no run end for run 1): resumable, but the
    # tables in place hold more than it does until the run is played again
    lines = _lines(d / "journal.jsonl")
    ends = [k for k, ln in enumerate(lines) if ln.startswith(b'{"ev":"end"')]
    (d / "journal.jsonl").write_bytes(b"".join(lines[:ends[-1]]))
    from normlab.llm_runs.runner.log import _never_fewer_rows

    new = {f: d / f for f in ("decisions.parquet", "calls.parquet")}
    shutil.copy(d / "decisions.parquet", tmp_path / "x.parquet")
    small = pd.read_parquet(d / "decisions.parquet").iloc[:10]
    small.to_parquet(tmp_path / "small.parquet")
    with pytest.raises(ValueError, match="holds 240 rows and the journal now gives only 10"):
        _never_fewer_rows(d, {**new, "decisions.parquet": tmp_path / "small.parquet"})
    assert len(pd.read_parquet(d / "decisions.parquet")) == 240
    res = run_game(6, 2, "Q,M", endpoint=_ep(stub), out=d, rng=1, **KW)  # plays the rest: 240 again
    assert len(res.log.decisions) == 240


def test_probes_and_crsec_journals_are_guarded_too(stub, tmp_path):
    kw = dict(trials=6, rng=3, progress=False)
    individual_bias(["Q", "M"], endpoint=_ep(stub), out=tmp_path / "probe", **kw)
    p = tmp_path / "probe" / "journal.jsonl"
    lines = _lines(p)
    p.write_bytes(b"".join(lines[:2] + lines[3:]))
    with pytest.raises(jr.JournalDamaged, match="missing"):
        individual_bias(["Q", "M"], endpoint=_ep(stub), out=tmp_path / "probe", **kw)
    run_population(out=tmp_path / "crsec", minutes=30, rng=1)
    c = tmp_path / "crsec" / "journal.jsonl"
    lines = _lines(c)
    assert len(lines) > 3
    c.write_bytes(b"".join(lines[:1] + lines[2:]))
    with pytest.raises(jr.JournalDamaged, match="missing"):
        run_population(out=tmp_path / "crsec", minutes=30, rng=1)
