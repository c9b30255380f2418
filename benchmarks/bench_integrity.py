"""The hostile inputs of issue 29 against the bounds that now hold them (README's "Reliability").

Run:  python benchmarks/bench_integrity.py

Each case runs in a child process (its whole-process peak resident memory is its VmHWM) against
a real local server on 127.0.0.1 or a file made here, and prints what happened: refused or not,
the seconds it took, the peak. Prints one JSON object. Not a timed test.
"""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _hostile_server import HostileServer, _answer, http  # noqa: E402  (the tests' local server)

_CLIENT = """
import asyncio, json, sys, time
from normlab.llm_runs.backend import EndpointConfig, EndpointError, LLMClient, open_endpoint
url, transport, what = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = EndpointConfig(base_url=url, model="m", transport=transport, max_retries=0, timeout=60.0)
async def go():
    if what == "open":
        async with open_endpoint(cfg) as c:
            return json.dumps(c.info)
    async with LLMClient(url, "m", cfg) as c:
        return (await c.chat([{"role": "user", "content": "x"}], max_tokens=2, temperature=1.0)).text
t = time.perf_counter()
try:
    out = asyncio.run(go())
except EndpointError as exc:
    out = "EndpointError: " + str(exc)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"refused": out.startswith("EndpointError"), "seconds": round(time.perf_counter() - t, 2),
                  "peak_mb": round(int(hwm) / 1024), "output_bytes": len(out), "said": out[:160]}))
"""

_CODE = """
import json, sys, time
t = time.perf_counter()
try:
    exec(sys.argv[1])
    out = "done"
except (ValueError, SystemExit) as exc:
    out = f"refused: {exc}"
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"refused": out.startswith("refused"), "seconds": round(time.perf_counter() - t, 2),
                  "peak_mb": round(int(hwm) / 1024), "said": out[:160]}))
"""


def _client(url, transport, what="chat") -> dict:
    r = subprocess.run([sys.executable, "-c", _CLIENT, url, transport, what], capture_output=True, text=True,
                       timeout=600)
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr[-500:]}


def _code(code: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _CODE, code], capture_output=True, text=True, timeout=600)
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr[-500:]}


def main() -> int:
    res = {}
    empty_arrays = b"[" + b"[]," * (64 * 2**20 // 3 - 1) + b"[]]"
    with HostileServer(lambda m, p, b, n: http(empty_arrays, raw_body=True)) as srv:
        res["answer_64mb_of_empty_arrays"] = {t: _client(srv.url, t) for t in ("lean", "openai")}

    def chunk(method, path, body, n):
        return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n200000000\r\n" + b"[" * 65536]
    with HostileServer(chunk) as srv:
        res["chunk_declared_8gb"] = _client(srv.url, "lean")

    bomb = gzip.compress(b'{"data": [{"id": "m", "pad": "' + b" " * (300 * 2**20) + b'"}]}', 9)
    big = json.dumps({"data": [{"id": "m", "owned_by": "x" * (300 * 2**20)}]}).encode()

    def side(body, headers=()):
        def reply(method, path, b, n):
            if path.endswith("/models"):
                return http(body, headers=headers, raw_body=True)
            return http(b"{}", raw_body=True) if path.endswith("/props") else http(_answer("Q"))
        return reply
    with HostileServer(side(bomb, [("Content-Encoding", "gzip")])) as srv:
        res["models_gzip_bomb"] = dict(_client(srv.url, "openai", "open"), compressed_bytes=len(bomb))
    with HostileServer(side(big)) as srv:
        res["models_300mb"] = _client(srv.url, "openai", "open")

    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        import pyarrow as pa
        import pyarrow.parquet as pq

        import normlab

        r = normlab.theory.strategy_game("best_response", n_agents=6, memory=2, n_runs=2, names=["Q", "M"], rng=1,
                                         stop="max", max_interactions=30)
        saved = r.save(d / "r")
        n = 2**22
        table = pa.table({"x": pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), pa.nulls(n, pa.int64()))})
        with pq.ParquetWriter(saved / "runs.parquet", table.schema, compression="zstd") as w:
            for _ in range(96):  # 96 x 2^22 int64: 3 GiB decoded
                w.write_table(table)
        res["parquet_list_int64_3gib"] = dict(_code(f"import normlab; normlab.load({str(saved)!r})"),
                                              file_bytes=(saved / "runs.parquet").stat().st_size)

        z = d / "many.zip"
        with zipfile.ZipFile(z, "w") as zf:
            for i in range(2000):
                zf.writestr(f"llama31_bias_test_A{i}_B.pkl", pickle.dumps({"x": i}, protocol=4))
        res["zip_2000_members"] = _code(
            "from normlab.llm_runs.published import ainorms_archive as a\n"
            f"ms = a._collect_members({str(z)!r}, a.MAX_FILE_BYTES)\n"
            "assert len([a._load_member(m) for m in ms]) == 2000")
        z2 = d / "llama31_data.zip"
        with zipfile.ZipFile(z2, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("llama31_70b_converged_baseline_Q_M_-50_100_5mem_complete_24ps_0.5tmp.pkl",
                        pickle.dumps({(2**61 - 1) * k: 0 for k in range(1, 16_001)}, protocol=4))
        res["zip_colliding_int_keys"] = dict(_code(f"from normlab.llm_runs import load_ainorms; load_ainorms({str(z2)!r})"),
                                             zip_bytes=z2.stat().st_size)
        values = ", ".join(str(i) for i in range(100))
        f = d / "s.toml"
        f.write_text(f'[experiment]\ncommand = "crsec run"\n[sweep]\nseed = [{values}]\ndt = [{values}]\n'
                     f'threshold = [{values}]\n')
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "normlab.cli", "run", str(f), "--plan"], capture_output=True,
                           text=True, timeout=600)
        res["sweep_of_1e6_steps"] = {"exit_code": r.returncode, "seconds": round(time.perf_counter() - t0, 2),
                                     "file_bytes": f.stat().st_size, "said": r.stderr.strip()[-160:]}
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
