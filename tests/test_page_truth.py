"""Issue 33, "pages that say more than their numbers": each page defect found on a default run, with the
test that fails while the page says more (or other) than its numbers."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest


@pytest.mark.parametrize("extra", [(), ("--scripted", "crsec")])
def test_stub_server_port_taken_is_one_line(extra):
    """The stub (or scripted) server on a port already taken: one line naming the port, exit 2, no traceback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "normlab.llm_runs.testing", "--port", str(port), *extra],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"127.0.0.1:{port}" in r.stderr and "--port" in r.stderr
