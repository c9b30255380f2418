"""Spending caps: tokens and USD spent by a run against optional caps (``--budget``)."""

from __future__ import annotations

import asyncio

from .config import BudgetExhausted


class SpendingCap:
    """Tokens and USD spent by a run, against optional caps; shared by every client of a run.

    No request is sent that could pass a cap: each request reserves its estimated tokens
    (prompt: the largest prompt its client has seen answered, else half its characters;
    completion: ``max_tokens``) while it is in flight, so concurrent requests cannot pass the
    cap together; a request that does not fit waits for those in flight (they may use less than
    they hold). A prompt longer than any before it can still overshoot by its excess. When a
    request does not fit and none is in flight it is refused, and so is every later one
    (:class:`BudgetExhausted`): the run stops at one clean point with nothing in flight.
    Tokens are the prompt + completion tokens the server reports; USD are priced per request at
    its client's prices.

    Write-ahead (:attr:`on_reserve`, set by a run with a journal): before each request is
    sent, a reservation of at most what it can be billed -- prompt tokens: the larger of the
    largest prompt answered so far and half its characters + 16; completion tokens:
    ``max_tokens`` -- is written to the journal, and the request's record settles it. On resume
    a reservation never settled (the process was killed while the request was in flight, or the
    request failed) counts as spent in full. Hence the bound: after any number of kills, the
    spend counted against the cap is at least what the server billed for the requests sent,
    provided it bills no request more than its reservation (no more than ``max_tokens``
    completion tokens and no more prompt tokens than the estimate) and bills no failed attempt;
    it may count more than was billed (requests killed before they were sent, or answered
    with fewer tokens), never less.

    Parameters
    ----------
    budget_tokens, budget_usd : float, optional
        Caps (``None``: none).
    """

    def __init__(self, budget_tokens: float | None = None, budget_usd: float | None = None):
        self.budget_tokens = budget_tokens
        self.budget_usd = budget_usd
        self.tokens = 0.0  # spent, earlier sessions included (see :meth:`add`)
        self.usd = 0.0
        self._res_tokens = 0.0
        self._res_usd = 0.0
        self._in_flight = 0
        self._released: asyncio.Event | None = None
        self.exhausted: str | None = None
        #: ``on_reserve(tokens, usd) -> id``: journals a reservation before its request is sent
        #: (write-ahead); ``None``: nothing is journaled.
        self.on_reserve = None

    @property
    def active(self) -> bool:
        return self.budget_tokens is not None or self.budget_usd is not None

    @staticmethod
    def _usd(pt: float, ct: float, prices) -> float:
        return (pt * prices[0] + ct * prices[1]) / 1e6

    def add(self, prompt_tokens: float, completion_tokens: float, prices=(0.0, 0.0)) -> None:
        """Count tokens spent (by a request now, or by earlier sessions read from a journal)."""
        self.tokens += prompt_tokens + completion_tokens
        self.usd += self._usd(prompt_tokens, completion_tokens, prices)

    async def acquire(self, est_prompt: float, est_completion: float, prices) -> tuple[float, float]:
        """Hold an estimate for a request about to be sent; wait while requests in flight might
        leave room; refuse it (:class:`BudgetExhausted`) when none are and it does not fit."""
        while True:
            if self.exhausted is not None:
                raise BudgetExhausted(self.exhausted)
            tok, usd = est_prompt + est_completion, self._usd(est_prompt, est_completion, prices)
            why = None
            if self.budget_tokens is not None and self.tokens + self._res_tokens + tok > self.budget_tokens:
                why = f"{self.tokens:,.0f} of the budget of {self.budget_tokens:,.0f} tokens are spent"
            elif self.budget_usd is not None and self.usd + self._res_usd + usd > self.budget_usd:
                why = f"${self.usd:.4f} of the budget of ${self.budget_usd:g} is spent"
            if why is None:
                self._res_tokens += tok
                self._res_usd += usd
                self._in_flight += 1
                return (est_prompt, est_completion)
            if self._in_flight == 0:
                self.exhausted = f"budget reached: {why}; the next request (about {tok:,.0f} tokens) could pass it"
                raise BudgetExhausted(self.exhausted)
            ev = self._released = self._released or asyncio.Event()
            await ev.wait()  # a request in flight may use less than it holds

    def write_ahead(self, prompt_tokens: float, completion_tokens: float, prices) -> int | None:
        """Journal the reservation of a request about to be sent (:attr:`on_reserve`); its id,
        or ``None`` when nothing is journaled."""
        if self.on_reserve is None:
            return None
        return self.on_reserve(prompt_tokens + completion_tokens, self._usd(prompt_tokens, completion_tokens, prices))

    def release(self, reserved, prices) -> None:
        self._res_tokens -= reserved[0] + reserved[1]
        self._res_usd -= self._usd(reserved[0], reserved[1], prices)
        self._in_flight -= 1
        ev, self._released = self._released, None
        if ev is not None:
            ev.set()

