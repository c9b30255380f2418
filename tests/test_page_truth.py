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


def _outside(rows, **cfg):
    import pandas as pd

    from normlab.demo.report import _outside_html
    return _outside_html(pd.DataFrame(rows), {"runs": 20, "committed_runs": 4, "n_agents": 10, **cfg}, None)


_ROUNDS = {"quantity": "rounds to consensus", "key": "", "source": "probe", "predicted": 12.0, "low": 10.0,
           "high": 14.0, "observed": 17.5, "consistent": False}
_CROSS = {"quantity": "rounds to 95% success", "key": "", "source": "probe", "predicted": 8.0, "low": 7.0,
          "high": 9.0, "observed": 13.0, "consistent": False}


def test_exact_mode_miss_is_chance_not_a_table_too_sure():
    """In exact mode the populations play the probed table itself: a miss against it cannot be "a table
    slightly too sure" -- the report says it is chance (unless it persists with more runs); in sample mode
    the table's sureness stays the explanation."""
    exact = _outside([_ROUNDS, _CROSS], mode="exact")
    assert "too sure" not in exact and exact.count("a miss is chance") == 2 and "--runs" in exact
    sample = _outside([_ROUNDS], mode="sample")
    assert "too sure" in sample and "chance" not in sample
    log = _outside([{**_ROUNDS, "source": "log"}], mode="exact")  # the log fit is no replay of the table
    assert "chance" not in log and "in-sample" in log


def test_rounds_to_95_gap_is_said_with_its_size():
    """A crossing 4 rounds after the predicted interval is not "one round earlier or later"."""
    html_ = _outside([_CROSS], mode="sample")
    assert "one round" not in html_ and "earlier or later" not in html_
    assert "crosses 0.95 4 rounds later" in html_
    assert "1.0 round earlier" in _outside([{**_CROSS, "observed": 6.0}], mode="sample")


def test_every_command_builds_its_parser():
    """``normlab --help`` builds every sub-command's parser (after the merge of issue 31's shared
    --embedded-model, ``study``'s own flag of the same name broke all of them); ``study`` still takes a GGUF file."""
    from normlab.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    study = sub.choices["study"]
    assert study.parse_args(["--out", "x", "--embedded-model", "/m/q.gguf"]).embedded_model == "/m/q.gguf"
