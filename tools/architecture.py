"""ARCHITECTURE.md's module table, generated from the module docstrings (one home for the map).

    python tools/architecture.py            print the table
    python tools/architecture.py --check    exit 1 when ARCHITECTURE.md's generated block is stale
    python tools/architecture.py --write    rewrite the block between its markers

One row per folder (its ``__init__`` docstring's first paragraph) and per module (its docstring's
first paragraph, or first sentence when the paragraph is long; whitespace collapsed, ``|``
escaped). The plug-in modules a registry names (fit families, probes, figure modules) are left to
their registry, so adding one by ARCHITECTURE's recipe leaves this table as it is; their folder's
row says which registry lists them. ``tests/umbrella/test_architecture.py`` runs ``--check``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = (("src/normlab", "normlab"), ("theory", "normlab.theory"), ("llm_runs", "normlab.llm_runs"),
         ("calibration", "normlab.calibration"))
BEGIN = "<!-- BEGIN generated module table: python tools/architecture.py --write (from module docstrings) -->"
END = "<!-- END generated module table -->"
#: Longest summary taken whole; a longer first paragraph is cut to its first sentence.
MAX_SUMMARY = 400


def _module_name(path: Path) -> str:
    for folder, root in ROOTS:
        base = REPO / folder
        if base in path.parents:
            parts = [root, *path.relative_to(base).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def plugins() -> dict[Path, str]:
    """Files of the plug-in modules, each with the registry that names it."""
    try:  # the installed normlab (CI installs it non-editable; src/ alone lacks the mapped packages)
        import normlab.calibration  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO / "src"))
    from normlab.calibration.fit.registry import FIT_KINDS
    from normlab.figures.registry import FIGURE_MODULES
    from normlab.llm_runs.probes.registry import PROBES

    names = {(k.family.partition(":")[0] if isinstance(k.family, str) else type(k.family).__module__):
             "`calibration/fit/registry.py` (`FIT_KINDS`)" for k in FIT_KINDS.values()}
    names.update({f"normlab.llm_runs.probes.{s.module}": "`llm_runs/probes/registry.py` (`PROBES`)"
                  for s in PROBES.values()})
    names.update({f"normlab.figures.{m}": "`src/normlab/figures/registry.py` (`FIGURE_MODULES`)"
                  for m in FIGURE_MODULES})
    out = {}
    for folder, _ in ROOTS:
        for p in (REPO / folder).rglob("*.py"):
            reg = names.get(_module_name(p))
            if reg is not None:
                out[p] = reg
    return out


def summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    text = re.sub(r"\s+", " ", doc.split("\n\n")[0]).strip()
    if len(text) > MAX_SUMMARY:
        m = re.search(r"(?<=[a-z0-9)`'\"])\.(?=\s+[A-Z(`])", text)
        if m:
            text = text[: m.end()]
    return text.replace("|", "\\|")


def rows() -> list[str]:
    plug = plugins()
    out = ["| folder | module | what |", "|---|---|---|"]
    for folder, _ in ROOTS:
        base = REPO / folder
        dirs = sorted({p.parent for p in base.rglob("*.py")}, key=lambda d: d.relative_to(base).parts)
        for d in dirs:
            rel = d.relative_to(REPO).as_posix() + "/"
            init = d / "__init__.py"
            what = summary(init) if init.exists() else ""
            regs = sorted({r for p, r in plug.items() if p.parent == d})
            if regs:
                what += f" Its plug-in modules are listed by {', '.join(regs)}."
            out.append(f"| `{rel}` | | {what} |")
            for p in sorted(d.glob("*.py")):
                if p.name != "__init__.py" and p not in plug:
                    out.append(f"| | `{p.name}` | {summary(p)} |")
    return out


def main(argv) -> int:
    table = "\n".join(rows())
    if "--check" not in argv and "--write" not in argv:
        print(table)
        return 0
    arch = REPO / "ARCHITECTURE.md"
    text = arch.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print("ARCHITECTURE.md has no generated block (its two markers)", file=sys.stderr)
        return 2
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{BEGIN}\n{table}\n{END}{tail}"
    if "--write" in argv:
        arch.write_text(new, encoding="utf-8")
        return 0
    if new != text:
        print("ARCHITECTURE.md's module table is stale: run python tools/architecture.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
