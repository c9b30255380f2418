"""The Evaluation module of CRSEC: the four-step sanity check and the long-term synthesis.

Both are pure logic over a :class:`~normlab.llm_runs.crsec.records.NormDatabase` and a set of
*operations* (:class:`~normlab.llm_runs.crsec.operations.NormOperations`): the deterministic
:class:`~normlab.llm_runs.crsec.operations.RuleOperations` for tests and theory-like runs, or
:class:`~normlab.llm_runs.crsec.llm_operations.LLMOperations` (one prompt per step, embedded
model by default). Operations may be plain or ``async`` functions.

Sanity check (§2.3, "Immediate Evaluation"): consistency with the source chat or thought,
duplication against the qualified norms, type check, conflict check -- in that order; the first
failing step leaves the norm a candidate and is recorded as its rejection reason. Steps are
pluggable: pass names (:data:`CHECK_STEPS`, plus ``"names_agent"``, the published code -4) or
``(reason, callable)`` pairs.

Long-term synthesis (§2.3): when the utilities of the qualified norms sum to more than a threshold
(350 in Appendix A), the agent categorises its qualified norms (ClassifySpecificNorms), abstracts
every category of at least two norms into one norm (GenerateAbstractNorm) whose utility is the
weighted mean of the members' utilities (weights from the operation), runs the sanity check on it
and, if it passes, qualifies it and deactivates the members (state ``synthesised``).

References
----------
S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
Architecture", IJCAI 2024: §2.3, Appendix A (threshold 350), Figs. B5-B10.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field

import numpy as np

from ..core.sync import run_sync
from .records import REJECTIONS, NormDatabase, NormRecord

#: The four steps of the paper's sanity check, in order.
CHECK_STEPS = ("consistency", "duplication", "type", "conflict")
#: Rejection reason recorded when a named step fails.
STEP_REASONS = {"consistency": "inconsistent", "duplication": "duplicate", "type": "wrong_type",
                "conflict": "conflict", "names_agent": "names_agent"}
SYNTHESIS_THRESHOLD = 350.0


async def maybe_await(value):
    """``await value`` when it is awaitable, else ``value`` (operations may be sync or async)."""
    if inspect.isawaitable(value):
        return await value
    return value


def _resolve_steps(steps, ops):
    if steps is None:
        steps = CHECK_STEPS
    if isinstance(steps, str):
        raise TypeError("steps must be a sequence of step names or (reason, callable) pairs, not a str")
    out = []
    for s in steps:
        if isinstance(s, str):
            if s not in STEP_REASONS:
                raise ValueError(f"unknown sanity-check step {s!r}; allowed: {sorted(STEP_REASONS)} "
                                 "or (reason, callable) pairs")
            out.append((s, STEP_REASONS[s], None))
        elif isinstance(s, tuple) and len(s) == 2 and callable(s[1]):
            if s[0] not in REJECTIONS:
                raise ValueError(f"a custom step's reason must be one of {REJECTIONS}; got {s[0]!r}")
            out.append((getattr(s[1], "__name__", "custom"), s[0], s[1]))
        else:
            raise TypeError(f"a step is a name or a (reason, callable) pair; got {s!r}")
    return out


@dataclass(frozen=True)
class CheckOutcome:
    """Result of one sanity check.

    Attributes
    ----------
    passed : bool
    failed_step : str or None
        Name of the first failing step.
    reason : str or None
        The rejection reason recorded on the candidate (:data:`STEP_REASONS`).
    steps_run : tuple of str
    """

    passed: bool
    failed_step: str | None
    reason: str | None
    steps_run: tuple


async def arun_check(norm: NormRecord, qualified: list, ops, *, source_text: str | None = None,
                     steps=None) -> CheckOutcome:
    """Run the sanity-check steps on ``norm`` against ``qualified`` (no database change).

    Parameters
    ----------
    norm : NormRecord
    qualified : list of NormRecord
        The agent's qualified norms (for duplication and conflict).
    ops : NormOperations
    source_text : str, optional
        The chat or thought ``q`` of CheckConsistency (default ``norm.source_text``).
    steps : sequence, optional
        Default :data:`CHECK_STEPS`.

    Returns
    -------
    CheckOutcome

    References
    ----------
    Ren et al., IJCAI 2024, §2.3 (Immediate Evaluation), Figs. B5-B8.
    """
    source = norm.source_text if source_text is None else source_text
    ran = []
    for name, reason, fn in _resolve_steps(steps, ops):
        ran.append(name)
        if fn is not None:
            ok = await maybe_await(fn(norm, qualified))
        elif name == "consistency":
            ok = await maybe_await(ops.check_consistency(norm, source))
        elif name == "duplication":
            ok = await maybe_await(ops.check_duplication(norm, qualified))
        elif name == "type":
            ok = await maybe_await(ops.check_type(norm))
        elif name == "conflict":
            ok = await maybe_await(ops.check_conflict(norm, qualified))
        else:  # names_agent
            ok = await maybe_await(ops.check_names(norm))
        if not ok:
            return CheckOutcome(False, name, reason, tuple(ran))
    return CheckOutcome(True, None, None, tuple(ran))


async def aevaluate(db: NormDatabase, norm_id: int, ops, *, t: float, steps=None) -> CheckOutcome:
    """Sanity-check candidate ``norm_id`` of ``db`` and qualify it or record the failed step."""
    norm = db[norm_id]
    if norm.state != "candidate" or norm.rejection is not None:
        raise ValueError(f"norm {norm_id} of {db.agent!r} is not an unchecked candidate ({norm.state}, "
                         f"rejection={norm.rejection})")
    out = await arun_check(norm, db.qualified(), ops, steps=steps)
    if out.passed:
        db.qualify(norm_id, t=t)
    else:
        db.reject(norm_id, out.reason)
    return out


def evaluate(db: NormDatabase, norm_id: int, ops, *, t: float, steps=None) -> CheckOutcome:
    """Synchronous :func:`aevaluate`."""
    return run_sync(lambda: aevaluate(db, norm_id, ops, t=t, steps=steps))


def weighted_utility(utilities, weights=None) -> float:
    """Weighted mean of member utilities (equal weights by default; weights must be >= 0, not all 0).

    References
    ----------
    Ren et al., IJCAI 2024, §2.3 (Long-term Synthesis): the abstract norm's utility.
    """
    u = np.asarray(utilities, float)
    if u.ndim != 1 or len(u) == 0:
        raise ValueError("utilities must be a non-empty 1-d sequence")
    w = np.ones_like(u) if weights is None else np.asarray(weights, float)
    if w.shape != u.shape:
        raise ValueError(f"need one weight per norm: {len(u)} utilities, {w.size} weights")
    if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be finite, >= 0 and not all zero")
    return float(np.dot(u, w) / w.sum())


@dataclass(frozen=True)
class SynthesisOutcome:
    """Result of one long-term synthesis attempt.

    Attributes
    ----------
    triggered : bool
        Whether the utility sum exceeded the threshold.
    utility_sum : float
        Sum of qualified utilities before the synthesis.
    categories : tuple of (str, tuple of int)
        Themes and member ids from ClassifySpecificNorms.
    created : tuple of int
        Abstract norms that passed the sanity check (now qualified).
    rejected : tuple of int
        Abstract norms that failed it (left as candidates; members stay qualified).
    deactivated : tuple of int
        Members synthesised away.
    """

    triggered: bool
    utility_sum: float
    categories: tuple = ()
    created: tuple = ()
    rejected: tuple = ()
    deactivated: tuple = field(default=())


async def asynthesise(db: NormDatabase, ops, *, t: float, threshold: float = SYNTHESIS_THRESHOLD,
                      steps=None) -> SynthesisOutcome:
    """Long-term synthesis of one agent's qualified norms, when their utility sum exceeds ``threshold``.

    Parameters
    ----------
    db : NormDatabase
    ops : NormOperations
        Needs ``classify(qualified) -> [(theme, [NormRecord, ...]), ...]`` and
        ``abstract(theme, norms) -> (content, type, weights or None)`` plus the check steps.
    t : float
        Simulated time (minutes).
    threshold : float
        350 in the paper.
    steps : sequence, optional
        Sanity-check steps for the abstract norms. Duplication and conflict are checked against
        the qualified norms *outside* the category (the members would otherwise always match).

    Returns
    -------
    SynthesisOutcome

    References
    ----------
    Ren et al., IJCAI 2024, §2.3 (Long-term Synthesis), Appendix A, Figs. B9-B10.
    """
    if not (isinstance(threshold, (int, float)) and threshold > 0):
        raise ValueError(f"threshold must be a positive number; got {threshold!r}")
    total = db.utility_sum()
    if total <= threshold:
        return SynthesisOutcome(False, total)
    qualified = db.qualified()
    groups = await maybe_await(ops.classify(qualified))
    qual_ids = {n.id for n in qualified}
    cats, created, rejected, deactivated, used = [], [], [], [], set()
    for theme, members in groups:
        ids = tuple(dict.fromkeys(m.id for m in members if m.id in qual_ids and m.id not in used))
        cats.append((str(theme), ids))
        if len(ids) < 2:
            continue
        used.update(ids)
        norms = [db[i] for i in ids]
        content, ntype, weights = await maybe_await(ops.abstract(str(theme), norms))
        utility = weighted_utility([n.utility for n in norms], weights)
        source = "\n".join(f"{k}. {n.content}" for k, n in enumerate(norms, 1))
        cand = db.add_candidate(content, utility, ntype, source="synthesis", source_text=source, t=t, parents=ids)
        others = [n for n in db.qualified() if n.id not in ids]
        out = await arun_check(cand, others, ops, steps=steps)
        if out.passed:
            db.qualify(cand.id, t=t)
            for i in ids:
                db.deactivate(i, t=t)
            created.append(cand.id)
            deactivated.extend(ids)
        else:
            db.reject(cand.id, out.reason)
            rejected.append(cand.id)
    return SynthesisOutcome(True, total, tuple(cats), tuple(created), tuple(rejected), tuple(deactivated))


def synthesise(db: NormDatabase, ops, *, t: float, threshold: float = SYNTHESIS_THRESHOLD,
               steps=None) -> SynthesisOutcome:
    """Synchronous :func:`asynthesise`."""
    return run_sync(lambda: asynthesise(db, ops, t=t, threshold=threshold, steps=steps))


def sanity_check(norm: NormRecord, qualified: list, ops, *, source_text: str | None = None,
                 steps=None) -> CheckOutcome:
    """Synchronous :func:`arun_check`."""
    return run_sync(lambda: arun_check(norm, qualified, ops, source_text=source_text, steps=steps))
