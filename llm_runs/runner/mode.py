"""How an agent decides: :class:`DecisionMode` (``EXACT``: read the next-token distribution over the
names and sample locally; ``SAMPLE``: generate an answer and parse it) and everything that follows
from the choice -- tokens per request (group settings included), the embedded server's context,
whether journaled distributions are reused, the default prefill, exact mode's sampler requirements
and the requests a design costs.

The mode is stored as its name (``"exact"``, ``"sample"``) in ``settings.json`` and every result
(:func:`mode_of` reads it back); code asks the mode (``s.decision.tokens_per_request(s)``,
``mode is EXACT``) instead of comparing strings.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from .sampling import UNBOUNDED

__all__ = ["DecisionMode", "EXACT", "SAMPLE", "MODES", "mode_of"]


class DecisionMode(enum.Enum):
    """A decision rule of the LLM naming game (``EXACT`` or ``SAMPLE``); its ``value`` is the name
    stored in ``settings.json``."""

    EXACT = "exact"
    SAMPLE = "sample"

    def __str__(self) -> str:
        return self.value

    # ------------------------------------------------------------------ requests and context
    def tokens_per_request(self, sampling, groups=None) -> int:
        """Tokens generated per request: 1 in exact mode (the answer position's logprobs); in
        sample mode the largest ``max_tokens`` of the run's sampler (``sampling``: a
        :class:`~normlab.llm_runs.runner.sampling.Sampling` or the run's settings) and of its
        groups (``groups``: their settings or :class:`GroupSpec`; default ``sampling.groups``)."""
        if self is DecisionMode.EXACT:
            return 1
        if groups is None:
            groups = getattr(sampling, "groups", ())
        return max([sampling.max_tokens] + [g["max_tokens"] if isinstance(g, Mapping) else g.max_tokens
                                            for g in groups])

    def context_tokens(self, prompt_bytes: int, sampling, groups=None) -> int:
        """KV-cache tokens per slot of the embedded server for prompts of at most ``prompt_bytes``
        UTF-8 bytes and this mode's answers (:func:`~normlab.llm_runs.backend.ctx_for_prompt`)."""
        from ..backend.embedded import ctx_for_prompt

        return ctx_for_prompt(prompt_bytes, self.tokens_per_request(sampling, groups))

    @property
    def uses_cache(self) -> bool:
        """Exact mode reuses next-token distributions (per session, from the journal and from the
        directories given as ``cache=``): a run or probe that saw a prompt asks nothing again."""
        return self is DecisionMode.EXACT

    def default_prefill(self, embedded: bool) -> bool:
        """``prefill=None``: on in exact mode (it reads the answer position) and for the embedded
        server (SmolLM2 ignores the format otherwise), off for remote endpoints in sample mode."""
        return True if self is DecisionMode.EXACT else bool(embedded)

    def requests(self, decisions: tuple, distinct_prompts: int, max_reasks) -> tuple:
        """``(typical, at_most)`` requests of ``decisions`` (``(typical, at_most)``) LLM decisions:
        exact mode at most one per distinct prompt; sample mode one per decision, at most
        ``1 + max_reasks`` (``None``: no bound, re-asks until a name appears)."""
        if self is DecisionMode.EXACT:
            return min(decisions[0], distinct_prompts), min(decisions[1], distinct_prompts)
        extra = _attempts(max_reasks)
        return decisions[0], None if extra is None else decisions[1] * extra

    def requests_note(self, distinct_prompts: int, max_reasks, *, groups: bool = False) -> str:
        """What :meth:`requests` counts, in one line of an estimate."""
        if self is DecisionMode.EXACT:
            return (f"exact mode: at most one request per distinct prompt ({distinct_prompts:,} = memory states x name "
                    f"orders{' x group templates/models' if groups else ''}); converging populations need far fewer")
        extra = _attempts(max_reasks)
        return "sample mode: one request per decision; at most " + (f"{extra} (re-asks)" if extra else
                                                                     "no bound (re-asks until a name appears)")

    # ------------------------------------------------------------------ exact mode's sampler requirements
    def check(self, sampling, *, group: str | None = None) -> None:
        """Exact mode applies temperature and top-k locally from the logprobs at the answer
        position: neutral ``top_p`` (1 or None) and ``min_p`` (0 or None), ``top_k <= top_logprobs``
        and (the run's sampler) a prefill. ``group``: a group's label (its messages name it; the
        prefill is the run's). One-line ``ValueError``; sample mode accepts any sampler."""
        self.check_neutral(sampling.top_p, sampling.min_p, group=group)
        if group is None:
            self.check_logprobs(sampling.prefill, sampling.top_k, sampling.top_logprobs)
        else:
            self.check_logprobs(True, sampling.top_k, sampling.top_logprobs, group=group)

    def check_neutral(self, top_p, min_p, *, group: str | None = None) -> None:
        """The first of :meth:`check`'s requirements: neutral ``top_p`` and ``min_p``."""
        if self is not DecisionMode.EXACT or (top_p in (None, 1.0) and min_p in (None, 0.0)):
            return
        if group is not None:
            raise ValueError(f"group {group}: exact mode needs neutral top_p (1) and min_p (0)")
        raise ValueError("exact mode applies temperature and top-k locally and needs neutral top_p (1 or None) "
                         f"and min_p (0 or None); got top_p={top_p}, min_p={min_p}")

    def check_logprobs(self, prefill, top_k, top_logprobs, *, group: str | None = None) -> None:
        """The rest of :meth:`check`: a prefill (``None``: the default, on in exact mode) and
        ``top_k <= top_logprobs``."""
        if self is not DecisionMode.EXACT:
            return
        if prefill is False:
            raise ValueError("exact mode reads the next-token logprobs at the answer position and needs prefill=True")
        if top_k is not None and top_k > top_logprobs:
            if group is not None:
                raise ValueError(f"group {group}: exact mode needs top_k <= top_logprobs = {top_logprobs}; got {top_k}")
            raise ValueError(f"exact mode needs top_logprobs >= top_k to apply the top-k sampler exactly; got "
                             f"top_logprobs={top_logprobs}, top_k={top_k}")


EXACT, SAMPLE = DecisionMode.EXACT, DecisionMode.SAMPLE
#: The modes' names, as ``--mode`` and ``settings.json`` spell them.
MODES = tuple(m.value for m in DecisionMode)
_BY_NAME = {m.value: m for m in DecisionMode}


def mode_of(mode) -> DecisionMode:
    """The :class:`DecisionMode` of ``mode`` (a name, ``"exact"`` or ``"sample"``, or a mode);
    a one-line ``ValueError`` otherwise."""
    if isinstance(mode, DecisionMode):
        return mode
    found = _BY_NAME.get(mode) if isinstance(mode, str) else None
    if found is None:
        raise ValueError(f"mode must be one of {MODES}; got {mode!r}")
    return found


def _attempts(max_reasks) -> int | None:
    """Requests a sample-mode decision may make: ``1 + max_reasks`` (``None``: unbounded)."""
    return None if max_reasks == UNBOUNDED else 1 + int(max_reasks)
