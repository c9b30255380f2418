"""The published-data loader under hostile input: memory bombs, deep nesting, zip bombs, path
tricks, symbolic links, pipes and corrupt archives are refused quickly with one clear message."""

from __future__ import annotations

import io
import os
import pickle
import random
import resource
import struct
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)

from normlab.llm_runs import load_ainorms
from normlab.llm_runs.published._unpickle import (_ARGS, _REFUSED, MAX_BUILT, MAX_NODES, UnsafePickleError, _scan_ops,
                                                   restricted_loads, scan_pickle)


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


# ------------------------------------------------------------------------------------------------
# the unpickler counts what it would build before building it (issue 23, finding 5)
# ------------------------------------------------------------------------------------------------
_PUBLISHED_NAME = "llama31_70b_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl"


def _fresh_containers_zip(path, size: int = 32 * 2**20):
    """The issue's bomb: a 32 MB pickle of fresh empty lists and dicts (some memoized), in runs of
    random length so that it deflates about 125x -- under the ratio cap -- into a ~270 KB zip."""
    rng = random.Random(0)
    pats = [b"]", b"}", b"]\x94", b"}\x94"]
    parts, n = [], 0
    while n < size:
        parts.append(pats[rng.randrange(4)] * rng.randrange(40, 400))
        n += len(parts[-1])
    data = b"\x80\x04](" + b"".join(parts)[:size - 6] + b"e."
    _zip(path, {_PUBLISHED_NAME: data})
    return path, len(data)


_PEAK = """
import resource, sys, time
t = time.perf_counter()
try:
    {call}
    print("loaded")
except ValueError as exc:
    print("refused:", exc)
print("peak_mb", next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM:')) / 1024, "seconds", time.perf_counter() - t)  # VmHWM: ru_maxrss would carry the parent's
"""


def _peak_of(call: str, arg: str) -> tuple[str, float, float]:
    """Run ``call`` in a fresh Python (``sys.argv[1]`` = ``arg``): its output, the whole process's
    peak RSS in MB (imports included) and the seconds of the call. The child's address space is
    capped at 6 GB so that a regression fails the test instead of the machine."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))

    r = subprocess.run([sys.executable, "-c", _PEAK.format(call=call), arg], capture_output=True, text=True,
                       timeout=300, preexec_fn=limit)
    assert r.returncode == 0, r.stderr[-2000:]
    words = r.stdout.split()
    return r.stdout, float(words[words.index("peak_mb") + 1]), float(words[words.index("seconds") + 1])


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_fresh_containers_bomb_is_refused_before_building(tmp_path):
    """229 KB of zip that cost 3.1 GB (every node built, then counted): now refused after counting
    MAX_BUILT opcodes, the whole process staying far below 1 GB."""
    from normlab.llm_runs.published.ainorms import MAX_COMPRESSION_RATIO, MAX_FILE_BYTES

    z, size = _fresh_containers_zip(tmp_path / "bomb.zip")
    assert z.stat().st_size < 400_000 and size <= MAX_FILE_BYTES
    assert size < MAX_COMPRESSION_RATIO * z.stat().st_size  # passes the zip checks: only the unpickler can stop it
    out, peak, seconds = _peak_of("from normlab.llm_runs import load_ainorms; load_ainorms(sys.argv[1])", str(z))
    assert "refused:" in out and "memory bomb before building any" in out, out
    assert peak <= 1024 and seconds < 30, (peak, seconds)


def test_memo_index_jump_is_refused_in_ten_bytes():
    """``LONG_BINPUT 2**28`` after one list: CPython's unpickler would allocate and clear a 4 GB memo."""
    data = b"\x80\x02]r" + (2**28).to_bytes(4, "little") + b"."
    before = _peak_mb()
    with pytest.raises(ValueError, match="memo index jumps ahead"):
        restricted_loads(data, source="memo.pkl")
    assert _peak_mb() - before < 50
    assert restricted_loads(b"\x80\x02]r\x00\x00\x00\x00h\x00\x86.") == ([], [])  # the next index is fine


@pytest.mark.parametrize("op, kind", [(b"\x8f", "set"), (b"C\x00", "bytes"), (b"(\x91", "frozenset")])
def test_non_plain_opcodes_are_refused_before_building(op, kind):
    data = b"\x80\x05" + op * 1_000_000 + b"."
    t0 = time.perf_counter()
    with pytest.raises(UnsafePickleError, match=rf"refused object of type builtins\.{kind} \(opcode at byte [23]\)"):
        restricted_loads(data, source="sets.pkl")
    assert time.perf_counter() - t0 < 2


def test_opcode_count_cap():
    data = pickle.dumps([[] for _ in range(1000)], protocol=4)
    n = scan_pickle(data)
    assert n == scan_pickle(data, max_built=n) > 2000  # each list: EMPTY_LIST and MEMOIZE
    with pytest.raises(ValueError, match=f"builds more than {n - 1:,} values"):
        scan_pickle(data, max_built=n - 1)
    assert MAX_BUILT >= 4 * 795_372  # the largest published file (llama3 archive), with room to spare
    readme = docs_page("validation/reliability.md")
    assert f"stops at {MAX_BUILT // 10**6} million" in " ".join(readme.split())


def _scan_cases():
    rng = random.Random(7)
    objs = [{"rules": "r" * 300, 0: {"a": [1, 2.5, True, None, ("x", -3), 10**30, -7, 70000], "b": {"c": []}}, -1: "z"},
            [[]] * 5, list(range(300)), "é" * 70_000, {i: str(i) for i in range(500)}, (1.5, (2, (3,))), {1, 2}, b"xy"]
    out = [pickle.dumps(o, protocol=p) for o in objs for p in range(6)]
    out += [b"\x80\x02]r" + (2**28).to_bytes(4, "little") + b".", b"cos\nsystem\n.", b"\x80\x04\x8d" + b"\xff" * 8]
    for d in list(out[:24]):
        for _ in range(4):  # truncations and single-byte corruptions
            k = rng.randrange(len(d))
            out += [d[:k], d[:k] + bytes([rng.randrange(256)]) + d[k + 1:]]
    return out


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_scan_kernel_agrees_with_its_python_twin():
    import numpy as np

    cases = _scan_cases()
    root = os.environ.get("NORMLAB_AINORMS")
    if root and os.path.isdir(root):
        with zipfile.ZipFile(os.path.join(root, "llama31_data.zip")) as z:
            small = sorted((i.file_size, i.filename) for i in z.infolist() if i.filename.endswith(".pkl")
                           and "/._" not in i.filename)[:2]  # the twin is slow: the two smallest files
            cases += [z.read(n) for _, n in small]
    for d in cases:
        buf = np.frombuffer(d, np.uint8)
        for cap in (MAX_BUILT, 50):
            fast = tuple(int(x) for x in _scan_ops(buf, _ARGS, _REFUSED, np.int64(cap)))
            slow = tuple(int(x) for x in _scan_ops.py_func(buf, _ARGS, _REFUSED, np.int64(cap)))
            assert fast == slow, (d[:40], fast, slow)


@pytest.mark.slow
def test_the_most_costly_admitted_pickle_stays_bounded(tmp_path):
    """Just under MAX_BUILT opcodes of fresh empty dicts in one list (the costliest thing the scan
    admits per opcode): built and walked, the whole process stays under 1 GB."""
    p = tmp_path / "big.pkl"
    p.write_bytes(b"\x80\x04](" + b"}" * (MAX_BUILT - 10) + b"e.")
    out, peak, _ = _peak_of("from normlab.llm_runs.published._unpickle import restricted_loads\n"
                            "    import pathlib; restricted_loads(pathlib.Path(sys.argv[1]).read_bytes())", str(p))
    assert "loaded" in out and peak <= 1024, (out, peak)


@pytest.mark.slow
@pytest.mark.data
def test_published_archives_load_as_an_independent_unpickler_reads_them():
    """Every published pickle gives what Python's pure-Python unpickler (globals refused) builds."""
    root = os.environ.get("NORMLAB_AINORMS")
    if not root or not os.path.isdir(root):
        pytest.skip("published AI-norms data not found (set NORMLAB_AINORMS)")

    class Plain(pickle._Unpickler):
        def find_class(self, module, name):
            raise AssertionError(f"a global in published data: {module}.{name}")

    n = 0
    for zname in ("llama31_data.zip", "llama3_data.zip"):
        with zipfile.ZipFile(os.path.join(root, zname)) as z:
            for name in z.namelist():
                if name.endswith(".pkl") and "/._" not in name:
                    data = z.read(name)
                    assert restricted_loads(data, source=name) == Plain(io.BytesIO(data)).load(), name
                    n += 1
    assert n == 102
