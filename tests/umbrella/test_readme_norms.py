"""The CRSEC and SCENE examples of the docs (docs/guide/crsec.md, docs/guide/scene.md; README's
until issue 33) run as printed (the scripted local endpoint started in-process on a free port
instead of the port written) and print the lines the pages show beside them."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

from normlab.cli import main
from normlab.llm_runs import StubServer

from _docs import docs_page  # noqa: E402


def _section() -> str:
    return docs_page("guide/crsec.md", "guide/scene.md")


def _blocks(section: str) -> list[tuple[str, str]]:
    """``(bash block, the text block after it or "")`` pairs, in order."""
    parts = re.findall(r"```(bash|text)\n(.*?)```", section, re.S)
    out = []
    for k, (kind, body) in enumerate(parts):
        if kind == "bash":
            nxt = parts[k + 1] if k + 1 < len(parts) and parts[k + 1][0] == "text" else ("text", "")
            out.append((body, nxt[1]))
    return out


def _norm(line: str) -> str:
    return " ".join(line.split())


@pytest.mark.slow
def test_docs_crsec_and_scene_examples(tmp_path):
    section = _section()
    blocks = _blocks(section)
    assert len(blocks) == 3
    cwd = os.getcwd()
    os.chdir(tmp_path)
    stubs = contextlib.ExitStack()
    urls = {}
    try:
        outputs = []
        for bash, claimed in blocks:
            printed = io.StringIO()
            for line in bash.splitlines():
                cmd = line.split("  #", 1)[0].strip()
                if not cmd:
                    continue
                m = re.match(r"python -m normlab\.llm_runs\.testing --scripted (\w+) --port (\d+) &$", cmd)
                if m:
                    stub = stubs.enter_context(StubServer(scripted=m.group(1)))
                    urls[f"http://127.0.0.1:{m.group(2)}/v1"] = stub.base_url
                    continue
                args = shlex.split(cmd)
                assert args[0] == "normlab", cmd
                args = [urls.get(a, a) for a in args[1:]] + ["--no-progress"] * (args[2] == "run")
                with contextlib.redirect_stdout(printed):
                    assert main(args) == 0, cmd
            outputs.append(printed.getvalue())
            got = {_norm(x) for x in printed.getvalue().splitlines()}
            assert claimed.strip(), "every docs example shows what it printed"
            for line in claimed.splitlines():
                if line.strip():
                    assert _norm(line) in got, f"the docs show {line!r}; the commands printed:\n{printed.getvalue()}"
        # the dry run's count quoted in the text
        scripted = [a for a in shlex.split(blocks[1][0].splitlines()[1].split("  #")[0])][1:]
        dry = io.StringIO()
        with contextlib.redirect_stdout(dry):
            assert main([urls.get(a, a) for a in scripted] + ["--dry-run", "--json"]) == 0
        import json

        n = json.loads(dry.getvalue())["requests"]["typical"]
        assert f"offline against the scripted stand-in: {n:,} requests".replace(",", " ") in " ".join(section.split())
    finally:
        stubs.close()
        os.chdir(cwd)
