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

    def release(self, reserved, prices) -> None:
        self._res_tokens -= reserved[0] + reserved[1]
        self._res_usd -= self._usd(reserved[0], reserved[1], prices)
        self._in_flight -= 1
        ev, self._released = self._released, None
        if ev is not None:
            ev.set()

