"""Write-ahead budgets, the one home of every runner's (``llm-run`` and the probes, ``crsec run``,
``scene run``, and the live runs of ``tip``): what a journal counts against a budget, and the
reservation a session journals before each request.

A session with a budget (requests, tokens or USD: :class:`~normlab.llm_runs.backend.SpendingCap`)
writes a ``reserve`` record before each request is sent -- one request and the most it may be
billed -- and the request's ``call`` record settles it (``res``). Read back (:class:`BudgetBook`),
a journal counts every request record (its tokens at its prices) and every reservation no request
record settles (a kill while the request was in flight, or a request that failed) as one request
with its tokens and USD in full. So a run killed any number of times counts at least what the
server received and billed, and a resumed session starts its cap from there (:func:`arm_budget`).
"""

from __future__ import annotations

import math
from pathlib import Path

from .records import Call, OpenReservations, Reservation, reserve_record

__all__ = ["BudgetBook", "arm_budget", "journal_spent", "spent_under"]


class BudgetBook:
    """What a journal's records count against a budget, fed in journal order (:meth:`see`: views
    from :func:`~normlab.llm_runs.journal.replayed`; :meth:`read`: record dicts). Holds the open
    reservations only, so memory stays flat however long the journal.

    Parameters
    ----------
    prices : callable or (float, float), optional
        ``prices(call) -> (input, output)`` (USD per million tokens) of a request record, or one
        pair for all; default free.
    """

    def __init__(self, prices=(0.0, 0.0)):
        self._price = prices if callable(prices) else (lambda call, p=tuple(prices): p)
        self._open = OpenReservations()
        self.calls = 0
        self.tokens = 0.0
        self.usd = 0.0

    def see(self, v) -> None:
        """Count one view (:class:`Call`, :class:`Reservation`; any other is ignored)."""
        if isinstance(v, Call):
            pt, ct = v.prompt_tokens, v.completion_tokens  # checked counts (records.count_of)
            pi, po = self._price(v)
            self.calls += 1
            self.tokens += pt + ct
            self.usd += (pt * pi + ct * po) / 1e6
            self._open.see(v)
        elif isinstance(v, Reservation):
            self._open.see(v)

    def read(self, records) -> "BudgetBook":
        """Count record dicts (a journal held in memory); returns itself."""
        for r in records:
            ev = r.get("ev")
            if ev == "call":
                self.see(Call(r))
            elif ev == "reserve":
                self.see(Reservation(r))
        return self

    @property
    def next_id(self) -> int:
        """The next free reservation id."""
        return self._open.next_id

    def total(self) -> dict:
        """``{"requests", "tokens", "usd"}`` counted against a budget: the request records' and
        every open reservation's in full."""
        tok, usd = self._open.total()
        return {"requests": self.calls + len(self._open.open), "tokens": self.tokens + tok, "usd": self.usd + usd}


class _WriteAhead:
    """``on_reserve`` of a :class:`~normlab.llm_runs.backend.SpendingCap`: journals a reservation
    (its tokens rounded up, its USD rounded up to 1e-9) before the request is sent; its id."""

    def __init__(self, journal, next_id: int):
        self.journal, self.next_id = journal, int(next_id)

    def __call__(self, tokens: float, usd: float) -> int:
        rid = self.next_id
        self.next_id += 1
        self.journal.write(reserve_record(id=rid, tokens=math.ceil(tokens), usd=math.ceil(usd * 1e9) / 1e9))
        return rid


def arm_budget(caps, journal, book: BudgetBook, *, budget_requests: int | None = None) -> None:
    """Start each spending cap of ``caps`` (one, or several: they are counted once each) from what
    ``book`` counts of ``journal``'s earlier sessions, and, when the cap has a budget and the
    journal a file, journal a reservation before each of its requests (write-ahead).
    ``budget_requests``: a cap on requests to set first (``--budget 300req``)."""
    caps = [caps] if hasattr(caps, "on_reserve") else list(caps)
    seen: dict = {}
    for c in caps:
        seen.setdefault(id(c), c)
    writer = _WriteAhead(journal, book.next_id) if getattr(journal, "path", None) is not None else None
    spent = book.total()
    for c in seen.values():
        if budget_requests is not None:
            c.budget_requests = budget_requests
        c.requests, c.tokens, c.usd = spent["requests"], spent["tokens"], spent["usd"]
        c.on_reserve = writer if c.active else None


def journal_spent(directory, prices=(0.0, 0.0)) -> dict:
    """``{"requests", "tokens", "usd"}`` that a run directory's journal counts against a budget
    (:class:`BudgetBook`; its request records priced at ``prices``, USD per million prompt /
    completion tokens, its open reservations at what they hold). An absent journal counts nothing."""
    from .files import JOURNAL_FILE, iter_journal

    path = Path(directory) / JOURNAL_FILE
    book = BudgetBook(prices)
    if path.is_file():
        book.read(rec for _, rec in iter_journal(path))
    return book.total()


def spent_under(directories, prices=(0.0, 0.0)) -> tuple[float, float]:
    """Tokens (prompt + completion) and USD that every journal in ``directories`` and below them
    counts against a budget (:func:`journal_spent` of each: a request cut off by a kill counts at its
    write-ahead reservation, in full); a directory that does not exist adds none. The pipelines'
    one budget over their steps (the demo's, the study's) reads it."""
    from pathlib import Path

    from .files import JOURNAL_FILE

    dirs = sorted({j.parent for d in directories if Path(d).is_dir() for j in Path(d).rglob(JOURNAL_FILE)})
    counted = [journal_spent(d, prices) for d in dirs]
    return float(sum(c["tokens"] for c in counted)), float(sum(c["usd"] for c in counted))
