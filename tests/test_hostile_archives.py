"""The published-data loader under hostile input: memory bombs, deep nesting, zip bombs, path
tricks, symbolic links, pipes and corrupt archives are refused quickly with one clear message."""

from __future__ import annotations

import io
import os
import pickle
import resource
import struct
import threading
import time
import zipfile

import pytest

from normlab.llm_runs import load_ainorms
from normlab.llm_runs.published._unpickle import MAX_NODES, restricted_loads


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _memo_bomb(inner: int = 1000, refs: int = 100_000) -> bytes:
    """A small pickle whose outer list holds ``refs`` memo references to one ``inner``-long list."""
    out = io.BytesIO()
    out.write(b"\x80\x04](")  # PROTO 4, EMPTY_LIST (outer), MARK
    out.write(b"](" + b"K\x01" * inner + b"e")  # inner list of `inner` ones (EMPTY_LIST MARK BININT1.. APPENDS)
    out.write(b"\x94")  # MEMOIZE inner as memo 0
    out.write(b"h\x00" * refs)  # BINGET 0, `refs` times
    out.write(b"e.")  # APPENDS all into outer, STOP
    return out.getvalue()


def test_memo_amplification_is_refused_fast_and_small():
    data = _memo_bomb()
    assert len(data) < 300_000
    before = _peak_mb()
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="memory bomb"):
        restricted_loads(data, source="bomb.pkl")
    assert time.perf_counter() - t0 < 10
    assert _peak_mb() - before < 200


def test_deep_nesting_is_refused():
    depth = 100_000  # EMPTY_LIST x depth, then APPEND x (depth - 1): each list inside the previous
    data = b"\x80\x04" + b"]" * depth + b"a" * (depth - 1) + b"."
    with pytest.raises(ValueError, match="nesting deeper"):
        restricted_loads(data, source="deep.pkl")


def test_huge_length_field_is_refused():
    data = b"\x80\x04\x8d" + struct.pack("<Q", 2**40) + b"abc."  # BINUNICODE8 claiming 1 TB
    with pytest.raises(ValueError, match="not a valid pickle"):
        restricted_loads(data, source="len.pkl")


def test_node_limit_leaves_published_sizes_alone():
    obj = {"a": [[1, 2, 3]] * 10}  # shared inner list: counted per reference, small
    assert restricted_loads(pickle.dumps(obj)) == obj
    assert MAX_NODES >= 10**7


def _zip(path, members: dict, *, method=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_zip_bomb_is_refused_before_inflating(tmp_path):
    bomb = pickle.dumps("a" * (20 * 2**20), protocol=4)  # 20 MB that deflate to ~20 KB
    z = _zip(tmp_path / "bomb.zip", {"llama31_baseline.pkl": bomb})
    assert z.stat().st_size < 200_000
    with pytest.raises(ValueError, match="zip bomb"):
        load_ainorms(z)


@pytest.mark.parametrize("name", ["../evil.pkl", "/abs/evil.pkl", "a/../../evil.pkl", "C:evil.pkl"])
def test_zip_paths_outside_are_refused(tmp_path, name):
    z = _zip(tmp_path / "p.zip", {name: pickle.dumps({})})
    with pytest.raises(ValueError, match="absolute or parent-directory path"):
        load_ainorms(z)


def test_zip_symlink_member_is_refused(tmp_path):
    path = tmp_path / "s.zip"
    with zipfile.ZipFile(path, "w") as z:
        info = zipfile.ZipInfo("link.pkl")
        info.external_attr = (0o120777 << 16)  # S_IFLNK
        z.writestr(info, "/etc/passwd")
    with pytest.raises(ValueError, match="symbolic link"):
        load_ainorms(path)


def test_encrypted_member_is_refused(tmp_path):
    path = _zip(tmp_path / "e.zip", {"x.pkl": pickle.dumps({})}, method=zipfile.ZIP_STORED)
    raw = bytearray(path.read_bytes())
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # set the encryption bit in both headers
        i = raw.find(sig)
        off = i + (6 if sig == b"PK\x03\x04" else 8)
        raw[off] |= 0x1
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="encrypted"):
        load_ainorms(path)


def test_crc_broken_member_gives_one_clear_error(tmp_path):
    data = pickle.dumps({"rules": "x" * 200}, protocol=4)
    name = "llama31_70b_converged_baseline_Q_M_-50_100_3mem_complete_6ps_0.5tmp.pkl"
    path = _zip(tmp_path / "c.zip", {name: data}, method=zipfile.ZIP_STORED)
    raw = bytearray(path.read_bytes())
    i = raw.find(b"xxxx")
    raw[i] = ord("y")  # same size, wrong CRC
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="corrupt"):
        load_ainorms(path)


def test_truncated_zip_is_not_a_zip(tmp_path):
    path = _zip(tmp_path / "t.zip", {"x.pkl": pickle.dumps({})})
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(ValueError, match="not a valid zip"):
        load_ainorms(path)


def test_fifo_named_pkl_does_not_hang(tmp_path):
    fifo = tmp_path / "llama31_baseline.pkl"
    os.mkfifo(fifo)
    box = {}

    def call():
        try:
            load_ainorms(fifo)
        except Exception as exc:  # noqa: BLE001 - the outcome is inspected below
            box["exc"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the reader before failing
        with open(fifo, "wb"):
            pass
        pytest.fail("load_ainorms hung on a FIFO")
    assert isinstance(box.get("exc"), ValueError) and "not a regular file" in str(box["exc"])


def test_symlink_to_dev_zero_is_refused(tmp_path):
    link = tmp_path / "zero.pkl"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="not a regular file"):
        load_ainorms(link)
    zlink = tmp_path / "zero.zip"
    zlink.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="not a valid zip"):
        load_ainorms(zlink)
