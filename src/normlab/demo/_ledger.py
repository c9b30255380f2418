"""The demo's ledger and budget: wall/CPU time and LLM requests per step, what the journals under
``OUT/llm`` hold, and one ``--budget`` over every step (each step's cap is the budget less what
the other steps journaled)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

from normlab.llm_runs import BudgetExhausted
from normlab.llm_runs import journal
from normlab.llm_runs.journal import JOURNAL_FILE, read_journal

__all__ = ["Clock", "journal_calls", "ledger", "journal_dirs", "spent", "budget_text", "stage_endpoint",
           "stopped_at_budget", "demo_budget", "free_generation_dir", "free_generation_done"]


class Clock:
    """Wall and CPU time (all threads of this process, the embedded server included) per step."""

    def __init__(self):
        self.steps: list[dict] = []
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    @contextlib.contextmanager
    def step(self, name: str, journals=()):
        t, c = time.perf_counter(), time.process_time()
        before = ledger(journals)
        row = {"step": name}
        try:
            yield row
        finally:
            after = ledger(journals)
            row.update(wall_s=round(time.perf_counter() - t, 3), cpu_s=round(time.process_time() - c, 3),
                       llm_calls=after["calls"] - before["calls"],
                       prompt_tokens=after["prompt_tokens"] - before["prompt_tokens"],
                       completion_tokens=after["completion_tokens"] - before["completion_tokens"])
            self.steps.append(row)

    def total(self) -> dict:
        return {"wall_s": round(time.perf_counter() - self.t0, 3), "cpu_s": round(time.process_time() - self.c0, 3)}


def journal_calls(directory) -> list:
    """The LLM requests journaled in a run or probe directory (:class:`~normlab.llm_runs.journal.Call`;
    none if it does not exist yet)."""
    f = Path(directory) / JOURNAL_FILE
    if not f.exists():
        return []
    return journal.calls(read_journal(f))


def ledger(directories) -> dict:
    """Requests and tokens journaled in ``directories`` and below them (a step whose runs journal in
    sub-directories, the tip search's, is counted whole; a directory that does not exist yet adds none)."""
    dirs = sorted({j.parent for d in directories if Path(d).is_dir() for j in Path(d).rglob(JOURNAL_FILE)})
    calls = [c for d in dirs for c in journal_calls(d)]
    return {"calls": len(calls), "prompt_tokens": int(sum(c.prompt_tokens for c in calls)),
            "completion_tokens": int(sum(c.completion_tokens for c in calls)),
            "cached_tokens": int(sum(c.cached_tokens for c in calls))}


def journal_dirs(root) -> list[Path]:
    """Every run or probe directory with a journal under ``root`` (``OUT/llm``)."""
    return sorted({j.parent for j in Path(root).rglob(JOURNAL_FILE)})


def spent(directories, ep) -> tuple[float, float]:
    """Tokens (prompt + completion) and USD that the journals in ``directories`` and below them
    count against a budget, at ``ep``'s prices (:func:`~normlab.llm_runs.journal.journal_spent`,
    every runner's: requests cut off by a kill count at their write-ahead reservation, in full)."""
    return journal.spent_under(directories, (ep.price_input, ep.price_output))


def budget_text(ep) -> str:
    return (f"{ep.budget_tokens:,.0f} tokens" if ep.budget_tokens is not None else "") + \
        (" / " if ep.budget_tokens is not None and ep.budget_usd is not None else "") + \
        (f"${ep.budget_usd:,.4f}" if ep.budget_usd is not None else "")


def stage_endpoint(ep, llm_root: Path, own: Path):
    """``ep`` with what is left of the demo's budget for one step.

    The demo's ``budget_tokens`` / ``budget_usd`` cap everything journaled under ``OUT/llm``
    (earlier runs of the demo included). Each step's own client already counts its own journal
    (so a rerun with a larger budget continues it), so the step gets the budget less what the
    *other* steps spent; a step journaling in sub-directories of ``own`` (the tip search) accounts
    for its own sub-steps.
    """
    if ep.budget_tokens is None and ep.budget_usd is None:
        return ep
    own = Path(own)
    others = [d for d in journal_dirs(llm_root) if d != own and own not in d.parents]
    tok, usd = spent(others, ep)
    kw = {}
    for key, used in (("budget_tokens", tok), ("budget_usd", usd)):
        cap = getattr(ep, key)
        if cap is not None:
            if cap - used <= 0:
                raise BudgetExhausted(f"the demo's budget of {budget_text(ep)} is spent")
            kw[key] = cap - used
    return dataclasses.replace(ep, **kw)


def stopped_at_budget(res) -> None:
    """A run the cap stopped returns (its completed runs kept); the demo stops there too."""
    if getattr(res, "stopped", None) == "budget":
        raise BudgetExhausted("a step reached the budget")


@contextlib.contextmanager
def demo_budget(ep, llm_root: Path):
    """Turn a step's :class:`BudgetExhausted` into one message about the demo's whole budget."""
    try:
        yield
    except BudgetExhausted:
        if ep.budget_tokens is None and ep.budget_usd is None:
            raise
        dirs = journal_dirs(llm_root)
        tok, usd = spent(dirs, ep)
        raise BudgetExhausted(
            f"the demo's budget of {budget_text(ep)} is reached: {tok:,.0f} tokens"
            + (f" (${usd:,.4f})" if ep.price_input or ep.price_output else "")
            + f" in {ledger(dirs)['calls']:,} requests are journaled under {llm_root}") from None


def free_generation_dir(llm_dir: Path, cfg, seed) -> Path:
    """The journal directory of the free-generation check."""
    return llm_dir / f"free-generation-T{cfg.sample_check}-seed{seed}"


def free_generation_done(llm_dir: Path, cfg, seed) -> int:
    """Free-generation answers already journaled (for the plan printed before the rest of the probe)."""
    f = free_generation_dir(llm_dir, cfg, seed) / JOURNAL_FILE
    return journal.count(read_journal(f), journal.PROBE) if f.exists() else 0
