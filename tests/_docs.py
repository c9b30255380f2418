"""The docs pages a test reads: the text a claim moved to from README (issue 33)."""

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def docs_page(*pages: str) -> str:
    """The MyST source of ``docs/<page>`` (several pages joined by a blank line)."""
    return "\n\n".join((DOCS / p).read_text(encoding="utf-8") for p in pages)
