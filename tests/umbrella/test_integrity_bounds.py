"""Issue 29, items 5 and 9 (the file side): every byte from a file bounded before it is held, and a
saved result read only from inside its folder. Each test names the finding it guards; each failed
on the code before the fix. Memory is the whole child process's peak (VmHWM), in a child capped at
3 GB of address space so that a regression fails the test, not the machine."""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import normlab
import _paths  # the repository's and tests/' folders (tests/_paths.py)

_PEAK = """
import sys
what = sys.argv[1]
try:
    if what == "load":
        import normlab
        normlab.load(sys.argv[2])
        out = "loaded"
    else:
        from normlab.cli import main
        out = f"rc {main(sys.argv[2:])}"
except Exception as exc:
    out = f"{type(exc).__name__}: {exc}"
hwm = next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024
print(out.replace(chr(10), ' | '))
print(f"peak_mb {hwm:.0f}")
"""


def _child(*args) -> tuple[str, float, str]:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    r = subprocess.run([sys.executable, "-c", _PEAK, *map(str, args)], capture_output=True, text=True, timeout=300,
                       preexec_fn=limit)
    lines = r.stdout.strip().splitlines()
    assert len(lines) >= 2, r.stderr[-3000:]
    return lines[-2], float(lines[-1].split()[1]), r.stderr


def _list_bomb(path: Path, groups: int = 48) -> Path:
    """A Parquet file of a few kilobytes whose ``list<int64>`` column decodes to ``groups`` x 32 MiB
    (one row per row group holding 2^22 null integers: the file says so in its column chunks'
    ``num_values``, not in its row count). 48 groups: 1.5 GiB from about 9 KB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 2**22
    table = pa.table({"run": pa.array([0], pa.int64()),
                      "x": pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), pa.nulls(n, pa.int64()))})
    with pq.ParquetWriter(path, table.schema, compression="zstd") as w:
        for _ in range(groups):
            w.write_table(table)
    return path


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_a_nested_parquet_column_cannot_hide_its_size_from_load(tmp_path):
    """Item 5: a Parquet ``list<int64>`` column hid its size from the decoded-size cap (a 4.2 KB
    file -> 3.16 GB in ``normlab.load``): the cap counted rows, not the list items. The size is now
    computed from the column chunks (nested values included) and a file expanding more than 1000x
    is refused before decoding."""
    r = normlab.theory.strategy_game("best_response", n_agents=6, memory=2, n_runs=2, names=["Q", "M"], rng=1,
                                     stop="max", max_interactions=30)
    saved = r.save(tmp_path / "r")
    bomb = _list_bomb(saved / "runs.parquet")
    assert bomb.stat().st_size < 20_000
    out, peak, err = _child("load", saved)
    assert "runs.parquet is" in out and "a Parquet bomb; refused" in out, (out, err[-2000:])
    assert peak < 400, f"peak {peak:.0f} MB"


@pytest.mark.slow  # 7 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_a_nested_parquet_column_cannot_hide_its_size_from_calibrate_log(tmp_path):
    """Item 5: the same hidden ``list<int64>`` column in a game log (a 94 KB log -> 3.58 GB in
    ``calibrate --log``): refused in one line from the column chunks, the whole process small."""
    from normlab.schema import GameLog

    r = normlab.theory.strategy_game("best_response", n_agents=6, memory=2, n_runs=2, names=["Q", "M"], rng=1,
                                     stop="max", max_interactions=30, record_decisions=True)
    log = tmp_path / "log"
    r.to_log().to_parquet(log)
    assert GameLog.read_parquet(log).decisions.shape[0] > 0
    _list_bomb(log / "decisions.parquet")
    out, peak, err = _child("cli", "calibrate", "--log", log, "--names", "Q,M")
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert out == "rc 2" and len(lines) == 1 and "a Parquet bomb; refused" in lines[0], (out, err[-2000:])
    assert peak < 800, f"peak {peak:.0f} MB"  # the command's own imports (PyMC) take about 450 MB


def test_a_parquet_table_that_decodes_as_it_says_is_still_read(tmp_path):
    """The bound refuses no ordinary table: a nested column of modest size reads back whole."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from normlab.user_files import parquet_decoded_bytes, read_user_parquet

    t = pa.table({"a": list(range(1000)), "l": [[i, i + 1] for i in range(1000)], "s": [["x" * 10]] * 1000})
    p = tmp_path / "t.parquet"
    pq.write_table(t, p)
    assert parquet_decoded_bytes(pq.ParquetFile(p).metadata) == 1000 * 8 + 2000 * 8 + 1000 * 8
    back = read_user_parquet(p)
    pd.testing.assert_frame_equal(back, t.to_pandas())


@pytest.fixture
def calibration(tmp_path):
    from normlab.calibration import load_fit, predict
    from normlab.calibration.pipeline import Calibration

    fit = load_fit("llama3_70b_QM_H3")
    pred = predict(fit, n_agents=10, n_draws=4, committed=[0, 2], n_runs_consensus=2, n_runs_flip=2, strength=False,
                   rng=1)
    return Calibration(fit=fit, prediction=pred, observed={}, settings={}).save(tmp_path / "cal")


@pytest.mark.parametrize("child", ["fit", "prediction"])
def test_load_refuses_a_sub_folder_linked_outside(child, calibration, tmp_path):
    """Item 9: ``normlab.load`` followed a symlinked ``fit/`` or ``prediction/`` folder outside the
    saved folder (the class reads its children by name, whatever result.json lists). Every file and
    sub-folder is now checked, links resolved, before any class reads it."""
    assert isinstance(normlab.load(calibration), type(normlab.load(calibration)))  # as saved: read
    outside = tmp_path / "elsewhere"
    shutil.move(calibration / child, outside)
    (calibration / child).symlink_to(outside, target_is_directory=True)
    meta = json.loads((calibration / "result.json").read_text())
    meta["children"] = [c for c in meta["children"] if c != child]  # not listed, still read by name
    (calibration / "result.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=f"{child}' leads outside the saved result's folder"):
        normlab.load(calibration)


def test_load_refuses_a_file_inside_a_sub_folder_linked_outside(calibration, tmp_path):
    """Item 9: a file inside ``fit/`` (its result.json) linked outside was read too."""
    outside = tmp_path / "elsewhere.json"
    shutil.move(calibration / "fit" / "result.json", outside)
    (calibration / "fit" / "result.json").symlink_to(outside)
    with pytest.raises(ValueError, match="leads outside the saved result's folder"):
        normlab.load(calibration)


@pytest.mark.slow
def test_bench_integrity_prints_every_number_readme_quotes():
    """``benchmarks/bench_integrity.py`` (docs/validation/reliability.md's issue-29 numbers): every hostile case refused
    (the 2 000-member archive read), each within a bounded peak."""
    bench = _paths.REPO / "benchmarks" / "bench_integrity.py"
    r = subprocess.run([sys.executable, str(bench)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    for name, case in res.items():
        for c in (case.values() if name == "answer_64mb_of_empty_arrays" else [case]):
            assert "error" not in c, (name, c)
            if name == "zip_2000_members":
                assert c["refused"] is False
            elif name == "sweep_of_1e6_steps":
                assert c["exit_code"] == 2
            else:
                assert c["refused"] is True and c["peak_mb"] < 600, (name, c)
