"""Embedded server threads (issue 10): no spinning on a shared machine; ``--embedded-threads``."""

import argparse
import os

import pytest

from normlab.llm_runs import backend
from normlab.llm_runs.cli_kit import add_endpoint_args as _add_endpoint_args, endpoint_config as _endpoint
from normlab.llm_runs.backend import EmbeddedServer, EndpointConfig


@pytest.mark.parametrize("cores, expected", [(1, 1), (2, 1), (3, 2), (4, 3), (16, 8)])
def test_default_threads_is_one_on_two_cores(monkeypatch, cores, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert backend.default_threads() == expected


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="n_threads"):
        EmbeddedServer(n_threads=bad)
    with pytest.raises(ValueError, match="embedded_threads"):
        EndpointConfig(embedded_threads=bad)


def test_cli_flag_reaches_the_config(monkeypatch):
    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    p = argparse.ArgumentParser()
    _add_endpoint_args(p)
    assert _endpoint(p.parse_args(["--embedded-threads", "3"])).embedded_threads == 3
    assert _endpoint(p.parse_args([])).embedded_threads is None


@pytest.mark.llm
def test_server_starts_without_polling():
    if not backend.embedded_available():
        pytest.skip("embedded model not installed")
    import json
    import urllib.request

    with EmbeddedServer(n_threads=1, n_parallel=1, n_ctx=512) as srv:
        body = {"model": srv.model, "messages": [{"role": "user", "content": "Say Q"}], "max_tokens": 2}
        req = urllib.request.Request(srv.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200 and json.load(r)["choices"]


def _cgroup(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("files, cores", [
    ({"cpu.max": "200000 100000\n"}, 2),                      # v2: docker --cpus 2
    ({"cpu.max": "150000 100000\n"}, 2),                      # 1.5 cores: rounded up
    ({"cpu.max": "max 100000\n"}, 16),                        # v2, no quota: the CPU set
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),  # v1
    ({"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}, 16),  # v1, none
    ({"cpu.max": "garbage\n"}, 16),                           # unreadable: the CPU set
    ({}, 16),                                                 # no cgroup files
])
def test_available_cores_is_the_cpu_set_capped_by_a_cgroup_quota(monkeypatch, tmp_path, files, cores):
    from normlab._cores import available_cores

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert available_cores(cgroup_root=_cgroup(tmp_path, files)) == cores


def test_default_threads_under_a_quota_of_two_cores(monkeypatch, tmp_path):
    """16 cores in the CPU set but a quota of 2 (a container's --cpus 2): one thread, not eight."""
    import normlab._cores as c

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setattr(c, "_CGROUP", _cgroup(tmp_path, {"cpu.max": "200000 100000\n"}))
    assert backend.default_threads() == 1


@pytest.mark.parametrize("env, expected", [({}, "1"), ({"NUMBA_NUM_THREADS": "2"}, "2")])
def test_numba_threads_follow_the_cores_this_process_may_use(env, expected):
    """Numba would start os.cpu_count() threads for a prange kernel; normlab caps them at the cores
    this process may use (here a CPU set of one core), unless the user set NUMBA_NUM_THREADS."""
    import subprocess
    import sys

    code = ("import os; os.sched_getaffinity = lambda pid: {0}\n"
            "import normlab._jit, numba; print(numba.config.NUMBA_NUM_THREADS)")
    base = {k: v for k, v in os.environ.items() if k != "NUMBA_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == expected


def test_a_server_that_never_became_ready_is_not_destroyed(monkeypatch, tmp_path):
    """xllamacpp's destructor waits for ever on a server still loading its model: when /health never
    answers, start() raises and keeps the server alive instead of dropping it (a stand-in module here:
    the real one cannot be made to hang on purpose)."""
    import sys
    import types

    from normlab.llm_runs.backend import embedded
    from normlab.llm_runs.backend.config import EndpointError

    destroyed = []

    class Params(types.SimpleNamespace):
        def __init__(self):
            super().__init__(model=types.SimpleNamespace(), cpuparams=types.SimpleNamespace(),
                             cpuparams_batch=types.SimpleNamespace())

    class Server:
        listening_address = "http://127.0.0.1:9"

        def __init__(self, params):
            self.params = params

        def __del__(self):
            destroyed.append(self)

    monkeypatch.setitem(sys.modules, "xllamacpp", types.SimpleNamespace(CommonParams=Params, Server=Server))

    def never(self, timeout=600.0):
        raise EndpointError("the embedded server did not become ready within 600 s")

    monkeypatch.setattr(embedded.EmbeddedServer, "_wait_ready", never)
    before = len(embedded._NOT_CLOSED)
    srv = EmbeddedServer(tmp_path / "model.gguf")
    with pytest.raises(EndpointError, match="did not become ready"):
        srv.start()
    import gc

    gc.collect()
    assert srv._server is None and srv.base_url is None and not destroyed
    assert len(embedded._NOT_CLOSED) == before + 1 and isinstance(embedded._NOT_CLOSED[-1], Server)
    embedded._NOT_CLOSED.pop()  # a stand-in: safe to drop
