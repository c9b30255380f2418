"""Spending caps: requests, tokens and USD spent by a run against optional caps (``--budget``), and
the token counts a budget falls back to when a server reports no ``usage``."""

from __future__ import annotations

import asyncio
import math

from .config import BudgetExhausted


def prompt_tokens_bound(text: str) -> int:
    """The most prompt tokens a request of ``text`` is taken to cost: half its characters, rounded
    up, + 16 (the chat template's tokens) -- more than any tokenizer makes of English (about four
    characters a token). A write-ahead reservation holds at least this (with ``max_tokens`` of
    completion); a request whose answer carries no ``usage`` counts it as its prompt tokens."""
    return math.ceil(len(text) / 2) + 16


def answer_tokens_counted(text: str | None) -> int:
    """The completion tokens counted for an answer whose server reported no ``usage``: half its
    characters, rounded up, + 1 (the end of the answer)."""
    return math.ceil(len(text or "") / 2) + 1


class SpendingCap:
    """Requests, tokens and USD spent by a run, against optional caps; shared by every client of a run.

    No request is sent that could pass a cap: each request holds, while it is in flight, one
    request and the most tokens it may be billed -- prompt: the larger of the largest prompt
    answered so far and :func:`prompt_tokens_bound` of its text; completion: ``max_tokens`` --
    so concurrent requests cannot pass the cap together; a request that does not fit waits for
    those in flight (they may use less than they hold). When a request does not fit and none is
    in flight it is refused, and so is every later one (:class:`BudgetExhausted`): the run stops
    at one clean point with nothing in flight. Tokens are the prompt + completion tokens the
    server reports (an answer without ``usage``: its prompt's :func:`prompt_tokens_bound` and
    :func:`answer_tokens_counted`); USD are priced per request at its client's prices; a request
    counts once sent, answered or not.

    Write-ahead (:attr:`on_reserve`, set by a run with a journal:
    :func:`normlab.llm_runs.journal.arm_budget`, the one home of every runner's): before each
    request is sent, a reservation of what it holds is written to the journal, and the
    request's record settles it. On resume a reservation never settled (the process was killed
    while the request was in flight, or the request failed) counts as one request and its tokens
    and USD in full. Hence the bound: after any number of kills, the requests counted against
    the cap are at least those the server received, and the tokens at least those it billed,
    provided it bills no request more than its reservation (no more than ``max_tokens``
    completion tokens, no more prompt tokens than the bound) and bills no failed attempt; it
    may count more than was billed, never less.

    Parameters
    ----------
    budget_tokens, budget_usd : float, optional
        Caps (``None``: none).
    budget_requests : int, optional
        A cap on requests (``--budget 300req``; ``None``: none).
    """

    def __init__(self, budget_tokens: float | None = None, budget_usd: float | None = None,
                 budget_requests: int | None = None):
        self.budget_tokens = budget_tokens
        self.budget_usd = budget_usd
        self.budget_requests = budget_requests
        self.requests = 0  # sent, earlier sessions included (see :meth:`add`)
        self.tokens = 0.0
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
        return self.budget_tokens is not None or self.budget_usd is not None or self.budget_requests is not None

    @staticmethod
    def _usd(pt: float, ct: float, prices) -> float:
        return (pt * prices[0] + ct * prices[1]) / 1e6

    def add(self, prompt_tokens: float, completion_tokens: float, prices=(0.0, 0.0), *, requests: int = 0) -> None:
        """Count tokens spent (by a request now, or by earlier sessions read from a journal) and,
        for earlier sessions, their ``requests``."""
        self.tokens += prompt_tokens + completion_tokens
        self.usd += self._usd(prompt_tokens, completion_tokens, prices)
        self.requests += requests

    def spent(self) -> dict:
        """What is counted against the caps: ``{"requests", "tokens", "usd"}``."""
        return {"requests": self.requests, "tokens": self.tokens, "usd": self.usd}

    async def acquire(self, est_prompt: float, est_completion: float, prices) -> tuple[float, float]:
        """Hold a request and its most tokens (``est_prompt`` + ``est_completion``) about to be
        sent; wait while requests in flight might leave room; refuse it (:class:`BudgetExhausted`)
        when none are and it does not fit."""
        while True:
            if self.exhausted is not None:
                raise BudgetExhausted(self.exhausted)
            tok, usd = est_prompt + est_completion, self._usd(est_prompt, est_completion, prices)
            why = next_one = None
            if self.budget_requests is not None and self.requests + self._in_flight + 1 > self.budget_requests:
                why = f"{self.requests:,} of the budget of {self.budget_requests:,} requests are spent"
            elif self.budget_tokens is not None and self.tokens + self._res_tokens + tok > self.budget_tokens:
                why = f"{self.tokens:,.0f} of the budget of {self.budget_tokens:,.0f} tokens are spent"
                next_one = f"; the next request (at most {tok:,.0f} tokens) could pass it"
            elif self.budget_usd is not None and self.usd + self._res_usd + usd > self.budget_usd:
                why = f"${self.usd:.4f} of the budget of ${self.budget_usd:g} is spent"
                next_one = f"; the next request (at most ${usd:.4g}) could pass it"
            if why is None:
                self._res_tokens += tok
                self._res_usd += usd
                self._in_flight += 1
                return (est_prompt, est_completion)
            if self._in_flight == 0:
                self.exhausted = f"budget reached: {why}{next_one or ''}"
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
        """The request holding ``reserved`` is over (answered, failed or cut off): it counts as sent."""
        self._res_tokens -= reserved[0] + reserved[1]
        self._res_usd -= self._usd(reserved[0], reserved[1], prices)
        self._in_flight -= 1
        self.requests += 1
        ev, self._released = self._released, None
        if ev is not None:
            ev.set()
