"""Each test file's seconds in a pytest log with ``--durations`` (CI's ``bash .ci/run`` prints every
test over 2 s), written to ``tests/file_costs.json``: tests/conftest.py hands the files to pytest-xdist
heaviest first, so a long file does not start last while the other worker idles.

    python tools/test_costs.py ci.log --source "bash .ci/run on COMMIT, DATE"   # write tests/file_costs.json
    python tools/test_costs.py ci.log --print                                   # only print them, heaviest first

A file the log does not name costs 0 (it runs after the named ones); stale costs only make the order
less good, never a test's result different.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "file_costs.json"
LINE = re.compile(r"^\s*([0-9.]+)s (call|setup|teardown)\s+(tests/[^:\s]+\.py)::")


def costs(text: str) -> dict[str, float]:
    """Seconds per test file (call, setup and teardown of its tests over pytest's threshold)."""
    out: dict[str, float] = defaultdict(float)
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            out[m.group(3)] += float(m.group(1))
    return {k: round(v) for k, v in sorted(out.items(), key=lambda kv: (-kv[1], kv[0]))}


def main(argv: list[str]) -> int:
    if not argv or not Path(argv[0]).is_file():
        print("usage: python tools/test_costs.py PYTEST_LOG [--print | --source TEXT]", file=sys.stderr)
        return 2
    files = costs(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    if not files:
        print(f"{argv[0]}: no --durations lines (run pytest with --durations=0)", file=sys.stderr)
        return 1
    if "--print" in argv:
        print("\n".join(f"{v:7.0f}  {k}" for k, v in files.items()))
        return 0
    source = argv[argv.index("--source") + 1] if "--source" in argv[:-1] else Path(argv[0]).name
    OUT.write_text(json.dumps({"source": source, "seconds": files}, indent=1) + "\n", encoding="utf-8")
    print(f"{len(files)} files, {sum(files.values())} s, into {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
