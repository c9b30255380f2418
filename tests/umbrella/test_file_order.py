"""The test files are handed to pytest-xdist heaviest first (tests/conftest.py, tests/file_costs.json
written by tools/test_costs.py from CI's durations): the order is the only thing it changes."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import _paths  # the repository's and tests/' folders (tests/_paths.py)

_spec = importlib.util.spec_from_file_location("_test_costs", _paths.REPO / "tools" / "test_costs.py")
tc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tc)

LOG = """============================== slowest durations ===============================
513.91s call     tests/umbrella/test_benchmarks.py::test_bench_coverage_tiny
12.50s setup    tests/umbrella/test_benchmarks.py::test_bench_theory_tiny
325.01s call     tests/umbrella/test_capable.py::test_figure_s11_on_qwen_small
2.00s teardown tests/llm_runs/test_crsec_runs.py::test_budget_stop_and_resume_pays_no_call_twice[a-b]

(6508 durations < 2s hidden.)
"""


def test_costs_sum_each_files_listed_seconds():
    assert tc.costs(LOG) == {"tests/umbrella/test_benchmarks.py": 526, "tests/umbrella/test_capable.py": 325,
                             "tests/llm_runs/test_crsec_runs.py": 2}
    assert tc.costs("no durations here") == {}


def test_the_stored_costs_name_files_that_exist():
    stored = json.loads((_paths.REPO / "tests" / "file_costs.json").read_text(encoding="utf-8"))["seconds"]
    assert stored and all((_paths.REPO / f).is_file() for f in stored), [f for f in stored
                                                                         if not (_paths.REPO / f).is_file()]


def test_collection_puts_the_heaviest_files_first_and_keeps_each_files_order():
    stored = json.loads((_paths.REPO / "tests" / "file_costs.json").read_text(encoding="utf-8"))["seconds"]
    files = ["tests/umbrella/test_docs.py", "tests/theory/test_kernel_cache.py", "tests/umbrella/test_file_order.py"]

    def collect(*paths):
        r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "", "-n", "0", "-p",
                            "no:cacheprovider", *paths], capture_output=True, text=True, cwd=_paths.REPO, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        return [line for line in r.stdout.splitlines() if "::" in line]

    ids = collect(*files)
    order = list(dict.fromkeys(i.split("::", 1)[0] for i in ids))
    assert sorted(order) == sorted(files)
    seconds = [stored.get(f, 0.0) for f in order]
    assert seconds == sorted(seconds, reverse=True) and seconds[0] > seconds[-1], list(zip(order, seconds))
    # a file's tests stay together, in the order the file alone is collected in
    for f in files:
        assert [i for i in ids if i.startswith(f + "::")] == collect(f)
    assert [i.split("::", 1)[0] for i in ids] == sorted((i.split("::", 1)[0] for i in ids), key=order.index)
