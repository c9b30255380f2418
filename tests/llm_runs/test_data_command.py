"""``normlab data``: the published archives found (a folder, a clone of the authors' repository,
$NORMLAB_AINORMS), checked (SHA-256 where normlab knows it, the loader's structure where not), and
what is missing said with where to get it."""

import json
import os
import pickle
import zipfile
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.llm_runs.published.ainorms_data import ARCHIVES, WHERE_TO_GET, check_data, needs_data, sha256_of

DATA = os.environ.get("NORMLAB_AINORMS")


def _zip(path: Path, prefix: str, names) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for n in names:
            zf.writestr(f"{prefix}/{n}", pickle.dumps({0: {}}))
    return path


CLAUDE = ["claude_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl",
          "claude_swap_0_4cmtd_M_Q_-50_100_5mem_complete_24ps_0.5tmp.pkl"]
LLAMA3 = ["llama3_70b_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl"]


def test_nothing_found_says_what_is_missing_and_where_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NORMLAB_AINORMS", str(tmp_path / "absent"))
    assert main(["data"]) == 2
    out, err = capsys.readouterr()
    assert "no published AI-norms archive found; looked in: $NORMLAB_AINORMS=" in out
    for a in ARCHIVES:
        assert f"{a.file}" in out and "missing" in out
    assert "https://github.com/Ariel-Flint-Ashery/AI-norms" in out
    assert "missing, needed by every check, table and notebook on published runs: llama3_data.zip, llama31_data.zip" in out
    assert err.count("\n") == 1 and err.startswith("normlab data: error:")


def test_a_clone_is_searched_and_unknown_hashes_are_checked_by_structure(tmp_path, capsys):
    clone = tmp_path / "AI-norms"
    _zip(clone / "data" / "claude_data.zip", "claude_data", CLAUDE)
    _zip(clone / "data" / "llama3_data.zip", "llama3_data", LLAMA3)  # not the published bytes
    assert main(["data", "--where", str(clone), "--json"]) == 2
    got = json.loads(capsys.readouterr().out)
    assert got["folder"] == str((clone / "data").resolve())
    by = {a["file"]: a for a in got["archives"]}
    assert by["claude_data.zip"]["status"] == "structure ok"
    assert "hash not known to normlab" in by["claude_data.zip"]["detail"]
    assert "2 pickles (1 baseline, 1 swap)" in by["claude_data.zip"]["detail"]
    assert by["llama3_data.zip"]["status"] == "mismatch"  # another SHA-256 than the pinned one
    assert "is not the published" in by["llama3_data.zip"]["detail"]
    assert by["llama31_data.zip"]["status"] == "missing" and by["llama2_data.zip"]["status"] == "missing"
    assert got["missing"] == ["llama31_data.zip", "llama2_data.zip"] and got["ready"] is False


def test_an_archive_of_another_model_is_not_taken_for_this_one(tmp_path):
    _zip(tmp_path / "llama2_data.zip", "llama2_data", CLAUDE)
    rep = check_data(tmp_path)
    c = next(c for c in rep.checks if c.archive.file == "llama2_data.zip")
    assert c.status == "mismatch" and "published Llama-2-70B-Chat file" in c.detail


def test_a_zip_that_is_not_a_zip_is_one_line(tmp_path):
    (tmp_path / "claude_data.zip").write_bytes(b"not a zip")
    c = next(c for c in check_data(tmp_path).checks if c.archive.file == "claude_data.zip")
    assert c.status == "mismatch" and "not a valid zip archive" in c.detail


def test_where_that_does_not_exist_is_exit_2(tmp_path, capsys):
    assert main(["data", "--where", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("normlab data: error: --where") and err.count("\n") == 1


def test_the_one_line_every_user_of_the_data_prints():
    line = needs_data("Table S3")
    assert line.startswith("Table S3 needs the published AI-norms data, not found here: ")
    for word in ("Ariel-Flint-Ashery/AI-norms", "llama3_data.zip", "llama31_data.zip", "NORMLAB_AINORMS", "normlab data"):
        assert word in WHERE_TO_GET and word in line


@pytest.mark.skipif(not DATA or not Path(DATA).is_dir(), reason="the published AI-norms data are absent (normlab data)")
def test_the_published_archives_match_their_pinned_hashes(capsys):
    for a in ARCHIVES[:2]:
        assert sha256_of(Path(DATA) / a.file) == a.sha256
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    assert out.count("SHA-256 matches the published archive") == 2
