"""README's "Ten lines of Python" runs as printed and prints the numbers in its comments."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)

README = _paths.REPO / "README.md"


@pytest.mark.slow
def test_readme_ten_lines_print_what_they_say():
    text = README.read_text(encoding="utf-8")
    block = text.split("## Ten lines of Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {})
    printed = out.getvalue()
    claimed = []
    for line in block.splitlines():
        if line.startswith("print(") and "#" in line:
            comment = line.split("#", 1)[1]
            claimed += re.findall(r"\d+\.\d+", comment.split("(")[0])
    assert len(claimed) >= 5
    for number in claimed:
        assert number in printed, f"README claims {number}; the example printed:\n{printed}"
