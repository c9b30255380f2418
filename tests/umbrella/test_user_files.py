"""Every loader of a user's file refuses what is not a regular file, caps sizes and JSON depth
before reading, and ``normlab.load`` stays inside its folder, builds only normlab's results and
checks their fields (issue 23, finding 6).

Before: ``--template`` and SCENE ``load_episodes`` hung on a FIFO; a 49 KB Parquet table (a game
log's, a saved result's) expanded into 4.9 GiB of strings; SCENE episodes and CRSEC
``load_topics`` read ``/dev/zero`` until memory ran out; ``normlab.load`` read Parquet from any
absolute path named in ``result.json``, let it pick the module whose ``.load`` it called, and
accepted ``memory = -3`` and ``n_agents = 1e18``. Each hostile file below is refused quickly, in
one line, with a ``ValueError`` (exit code 2 on the command line).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

import normlab
from normlab.user_files import MAX_JSON_DEPTH, UserFileError, check_json_depth, loads_json, read_user_json
import _paths  # the repository's and tests/' folders (tests/_paths.py)

DEEP = "[" * 100_000 + "]" * 100_000


def _no_hang(call, seconds: float = 10.0):
    """Run ``call`` in a thread; fail (after unblocking any FIFO reader) if it does not finish."""
    box = {}

    def run():
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - inspected by the caller
            box["exc"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail("the loader blocked")
    return box.get("exc"), box.get("value")


def _hostile(tmp_path: Path, suffix: str) -> dict[str, Path]:
    """A FIFO, a link to /dev/zero, a directory, a 100 000-deep JSON and a (sparse) 3 GB file,
    each named like the file a loader expects."""
    d = tmp_path / suffix.strip(".")
    d.mkdir()
    fifo = d / f"fifo{suffix}"
    os.mkfifo(fifo)
    zero = d / f"zero{suffix}"
    zero.symlink_to("/dev/zero")
    folder = d / f"folder{suffix}"
    folder.mkdir()
    deep = d / f"deep{suffix}"
    deep.write_text(DEEP)
    huge = d / f"huge{suffix}"
    with open(huge, "wb") as f:
        f.truncate(3 * 2**30)  # sparse: no disk used
    return {"fifo": fifo, "zero": zero, "folder": folder, "deep": deep, "huge": huge}


def _template(p):
    from normlab.llm_runs import load_template

    return load_template(str(p))


def _topics(p):
    from normlab.llm_runs.crsec.topics import load_topics

    return load_topics(p)


def _agents(p):
    from normlab.llm_runs.crsec.topics import load_agents

    return load_agents(p)


def _crsec_norms(p):
    from normlab.llm_runs.published.crsec import load_crsec_norms

    return load_crsec_norms(p)


def _episodes(p):
    from normlab.llm_runs.scene.episode import load_episodes

    return load_episodes(p)


def _scene_json(p):
    from normlab.llm_runs.scene.schemas import read_json

    return read_json(p, "scenario_v1")


def _taxonomy(p):
    from normlab.llm_runs.scene.taxonomy import load_taxonomy

    return load_taxonomy(p)


def _published(p):
    from normlab.llm_runs.scene.scoring import load_published

    return load_published(p)


def _fit(p):
    return normlab.calibration.load_fit(p)


def _probe_fit(p):
    from normlab.calibration.probe_prediction import ProbeFit

    return ProbeFit.from_json(p)


def _ranker(p):
    from normlab.llm_runs import EndpointConfig
    from normlab.llm_runs.rankers import LLMRanker

    return LLMRanker(EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m"), template=p)


#: (loader, what it reads): each gets every hostile file named with that suffix. One more loader
#: is one more row.
LOADERS = {
    "--template (load_template)": (_template, ".json"),
    "CRSEC load_topics": (_topics, ".json"),
    "CRSEC load_agents (experiment file)": (_agents, ".json"),
    "CRSEC load_crsec_norms": (_crsec_norms, ".json"),
    "SCENE load_episodes": (_episodes, ".jsonl"),
    "SCENE read_json": (_scene_json, ".json"),
    "SCENE load_taxonomy": (_taxonomy, ".json"),
    "SCENE load_published": (_published, ".json"),
    "--table / load_fit (strategy fit)": (_fit, ".json"),
    "ProbeFit.from_json (probe table)": (_probe_fit, ".json"),
    "ITCMA-S ranker template": (_ranker, ".json"),
}
WORDS = {"fifo": "pipe (FIFO), not a regular file", "zero": "a device, not a regular file",
         "folder": "directory", "deep": f"nests deeper than {MAX_JSON_DEPTH} levels", "huge": "allowed; refused"}


@pytest.mark.parametrize("name", list(LOADERS))
def test_every_loader_refuses_hostile_files(name, tmp_path):
    loader, suffix = LOADERS[name]
    for kind, path in _hostile(tmp_path, suffix).items():
        exc, _ = _no_hang(lambda: loader(path))
        if kind == "folder" and name.startswith("SCENE load_episodes"):
            assert exc is None  # a directory of episode files is a valid input (empty here)
            continue
        assert isinstance(exc, ValueError), (name, kind, repr(exc))
        msg = str(exc)
        assert "\n" not in msg and WORDS[kind] in msg, (name, kind, msg)


def test_episode_directory_files_are_checked_too(tmp_path):
    from normlab.llm_runs.scene.episode import load_episodes

    os.mkfifo(tmp_path / "a.json")
    exc, _ = _no_hang(lambda: load_episodes(tmp_path))
    assert isinstance(exc, ValueError) and "pipe (FIFO)" in str(exc)


def test_deep_json_anywhere_is_one_line_not_recursion():
    with pytest.raises(UserFileError, match="nests deeper than 64 levels"):
        loads_json(DEEP, "--extra-body")
    with pytest.raises(UserFileError, match="nests deeper"):
        loads_json('{"a": ' * 70 + "1" + "}" * 70)
    check_json_depth('["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]')  # in a string
    assert loads_json('{"a": [[1], {"b": "]]]"}]}') == {"a": [[1], {"b": "]]]"}]}
    with pytest.raises(UserFileError, match="not valid JSON"):
        loads_json("{nope")


def test_growing_file_and_size_cap(tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"a": "x" * 100}))
    assert read_user_json(p)["a"] == "x" * 100
    with pytest.raises(UserFileError, match="more than the 50 allowed"):
        read_user_json(p, max_bytes=50)


# ----------------------------------------------------------------------------- Parquet bombs
def _string_bomb(path: Path, rows: int = 5000, length: int = 2**20) -> Path:
    """``rows`` copies of one ``length``-character string through a dictionary: a 49 KB file that
    pandas expands into ``rows * length`` bytes (4.9 GiB by default)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    col = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, np.int32)), pa.array(["x" * length]))
    pq.write_table(pa.table({"name": col}), path, store_schema=False)  # the schema says: plain strings
    return path


_CLI_PEAK = """
import resource, sys
from normlab.cli import main
rc = main(sys.argv[1:])
print("rc", rc, "peak_mb", next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024)  # VmHWM: ru_maxrss would carry the parent's high-water mark
"""


@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_a_parquet_that_expands_is_refused_before_expanding(tmp_path):
    """A game log whose 49 KB decisions.parquet holds 4.9 GiB of strings: ``calibrate --log``
    read it whole (a MemoryError, or gigabytes on a large machine); now one line from the lengths
    of its strings, the whole process staying small. Run in a child capped at 3 GB of address
    space so that a regression fails the test, not the machine."""
    import resource
    import subprocess
    import sys

    log = tmp_path / "log"
    log.mkdir()
    _string_bomb(log / "decisions.parquet")
    _string_bomb(log / "runs.parquet", rows=2, length=2)
    assert (log / "decisions.parquet").stat().st_size < 100_000

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    r = subprocess.run([sys.executable, "-c", _CLI_PEAK, "calibrate", "--log", str(log), "--names", "Q,M"],
                       capture_output=True, text=True, timeout=300, preexec_fn=limit)
    lines = r.stderr.strip().splitlines()
    words = r.stdout.split()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "decisions.parquet would take 4.9 GiB with its strings once read, more than the 4.0 GiB allowed" in lines[0]
    assert words[1] == "2" and float(words[3]) < 1024, r.stdout


def test_parquet_rows_and_strings_are_counted_before_reading(tmp_path):
    import pandas as pd

    from normlab.user_files import read_user_parquet

    p = tmp_path / "t.parquet"
    pd.DataFrame({"a": range(100_000), "b": 1.5}).to_parquet(p)
    with pytest.raises(UserFileError, match="100,000 rows, at least 1.5 MiB once read, more than the 1.0 MiB allowed"):
        read_user_parquet(p, max_decoded=2**20)  # 16 bytes a row: refused from the metadata alone
    assert len(read_user_parquet(p, max_decoded=2_000_000)) == 100_000
    q = _string_bomb(tmp_path / "s.parquet", rows=100, length=1000)
    with pytest.raises(UserFileError, match="with its strings once read"):
        read_user_parquet(q, max_decoded=99_000)
    back = read_user_parquet(q, max_decoded=110_000)
    assert back["name"].str.len().sum() == 100_000
    pd.testing.assert_frame_equal(back, pd.read_parquet(q))
    for bad, words in ((tmp_path / "x.parquet", "not a readable Parquet table"),):
        bad.write_bytes(b"PAR1 not parquet")
        with pytest.raises(UserFileError, match=words):
            read_user_parquet(bad)


# ----------------------------------------------------------------------------- normlab.load
@pytest.fixture
def saved(tmp_path):
    r = normlab.theory.strategy_game("best_response", n_agents=6, memory=2, n_runs=2, names=["Q", "M"], rng=1,
                                     stop="max", max_interactions=30)
    return r.save(tmp_path / "r")


def _edit(folder: Path, **changes) -> None:
    f = folder / "result.json"
    meta = json.loads(f.read_text())
    meta.update(changes)
    f.write_text(json.dumps(meta))


@pytest.mark.parametrize("changes, words", [
    ({"memory": -3}, "memory must be an integer in [0, 1,000]; got -3"),
    ({"n_agents": 1e18}, "n_agents must be an integer in [1, 100,000,000]; got 1e+18"),
    ({"n_agents": "6"}, "n_agents must be an integer"),
    ({"names": "Q,M"}, "names must be a list of strings"),
    ({"tables": ["/etc/passwd"]}, "plain names inside its folder"),
    ({"tables": ["../../secret"]}, "plain names inside its folder"),
    ({"children": ["../x"]}, "plain names inside its folder"),
    ({"format": "normlab.user_files:UserFileError"}, "not a saved normlab result"),
    ({"format": "normlab.cli:main"}, "not a saved normlab result"),
    ({"committed": [99]}, "committed must list agent indices"),
    ({"version": "1"}, "version must be an integer"),
])
def test_load_stays_in_its_folder_and_checks_fields(saved, changes, words):
    _edit(saved, **changes)
    with pytest.raises(ValueError) as info:
        normlab.load(saved)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_load_refuses_a_table_linked_outside_or_to_a_device(saved, tmp_path):
    outside = tmp_path / "elsewhere.parquet"
    (saved / "runs.parquet").rename(outside)
    (saved / "runs.parquet").symlink_to(outside)
    with pytest.raises(ValueError, match="leads outside the saved result's folder"):
        normlab.load(saved)
    (saved / "runs.parquet").unlink()
    os.mkfifo(saved / "runs.parquet")
    exc, _ = _no_hang(lambda: normlab.load(saved))
    assert isinstance(exc, ValueError) and "pipe (FIFO)" in str(exc)


def test_load_refuses_a_table_that_expands(saved):
    _string_bomb(saved / "runs.parquet")
    with pytest.raises(UserFileError, match="runs.parquet would take 4.9 GiB with its strings once read"):
        normlab.load(saved)


def test_load_still_reads_what_save_wrote(saved):
    back = normlab.load(saved)
    assert back.n_agents == 6 and back.n_runs == 2


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_every_saved_class_is_loadable():
    """Each class whose save() writes a result folder has its type tag in LOADABLE."""
    import ast

    from normlab._display import LOADABLE, _type_tag

    repo = _paths.REPO
    savers = set()
    for folder in ("theory", "llm_runs", "calibration", "src/normlab"):
        for path in (repo / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
                if "save_result(path, type(self)" in ast.get_source_segment(path.read_text(encoding="utf-8"), cls):
                    savers.add(cls.name)
    import normlab.calibration.adequacy as adq
    import normlab.calibration.observed_critical_mass as ocm
    import normlab.calibration.pipeline as pl
    import normlab.calibration.sensitivity as sen
    import normlab.calibration.tip as tip
    import normlab.calibration.posterior as po
    import normlab.calibration.prediction as pr
    import normlab.llm_runs.probes.strategy as st
    import normlab.theory.results as re_

    classes = {c.__name__: c for c in (re_.GameResult, st.StrategyProbe, po.StrategyFit, pr.Prediction,
                                       ocm.EmpiricalCriticalMass, pl.Calibration, adq.Adequacy,
                                       sen.StateSensitivity, tip.TipResult)}
    assert savers == set(classes), savers
    assert {_type_tag(c) for c in classes.values()} == set(LOADABLE)


@pytest.mark.parametrize("doc_change, words", [
    ({"memory": -3}, "memory must be >= 1; got -3"),
    ({"memory": 30}, "more than 200,000 memory states"),
    ({"names": ["Q"]}, "two or more names"),
    ({"counts": None}, "needs 'counts'"),
])
def test_fit_documents_are_checked_before_allocating(tmp_path, doc_change, words):
    fit = normlab.calibration.load_fit("llama31_70b_QM_H5")
    doc = {**fit.to_dict(), **doc_change}
    p = tmp_path / "fit.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as info:
        normlab.calibration.load_fit(p)
    assert words in str(info.value), str(info.value)
