"""Two-stage SCENE scenario generation (Sect. 4.1; Appendix B.1, B.2): a norm-blind scaffold from the event
and elicitor, then the norm-aware hidden fields for the frozen scaffold; every answer validated, an answer
that cannot be read after ``max_reasks`` re-asks recorded as such (no scenario is returned)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from ..core.sync import run_sync
from .episode import count_events, event
from .parsing import _ACTION_SYNONYMS, extract_json
from .schemas import SchemaValidationError, validate
from .session import _seeds, _Session
from .settings import SceneSettings, _render, _settings
from .taxonomy import TAXONOMY, SceneTuple, check_tuple


def _cast_text(cast) -> str:
    return "; ".join(f"{c['name']} ({c['bio_oneline']})" for c in cast)


def _normalise_scaffold(obj: dict, subject: tuple[str, str]) -> dict:
    """Coerce a parsed scaffold into ``scaffold_v1`` (field names, turn IDs), never adding content."""
    ch = obj.get("channel") or {}
    cast = [{"name": str(c.get("name", "")).strip(), "bio_oneline": str(c.get("bio_oneline", c.get("bio", ""))).strip()}
            for c in (ch.get("cast") or []) if isinstance(c, dict)]
    tr = obj.get("transcript") or {}
    turns = [t for t in (tr.get("opening_turns") or []) if isinstance(t, dict)]
    el = tr.get("elicitor_turn")
    out_turns = []
    for k, t in enumerate(turns + ([el] if isinstance(el, dict) else [])):
        out_turns.append({"turn_id": k, "actor": str(t.get("actor", "")).strip(),
                          "action": _ACTION_SYNONYMS.get(str(t.get("action", "message")).lower(), "message"),
                          "content": str(t.get("content", ""))})
    if not isinstance(el, dict):
        raise SchemaValidationError("scaffold_v1: transcript.elicitor_turn: missing")
    return {"channel": {"description": str(ch.get("description", "")), "cast": cast,
                        "subject": {"name": subject[0], "bio_oneline": subject[1]}},
            "transcript": {"opening_turns": out_turns[:-1], "elicitor_turn": out_turns[-1]}}


def _normalise_hidden(obj: dict) -> dict:
    personas = []
    for p in obj.get("personas") or []:
        if not isinstance(p, dict):
            continue
        lines = p.get("sanction_lines") or []
        prec = p.get("precedent_lines_or_null")
        personas.append({"name": str(p.get("name", "")).strip(), "outline": str(p.get("outline", "")),
                         "sanction_lines": [str(x) for x in (lines if isinstance(lines, list) else [lines])],
                         "precedent_lines_or_null": None if prec in (None, [], "") else
                         [str(x) for x in (prec if isinstance(prec, list) else [prec])]})
    out = {"personas": personas, "fidelity_criteria": obj.get("fidelity_criteria")}
    if obj.get("orchestrator_outline"):
        out["orchestrator_outline"] = str(obj["orchestrator_outline"])
    return out


async def _generate(sess: _Session, tup: SceneTuple, seeds, log: list) -> tuple[dict | None, str]:
    s = sess.s
    ev, el = TAXONOMY.entry("event", tup.event), TAXONOMY.entry("elicitor", tup.elicitor)
    scaffold, status = None, "ok"
    for attempt in range(s.max_reasks + 1):
        sysm, user, pre = _render("scaffold", event=tup.event, event_setting=ev.description, elicitor=tup.elicitor,
                                  elicitor_description=el.description, subject=s.subject_name)
        text = await sess.ask("scaffold", sysm, user, pre, seed=next(seeds), max_tokens=s.generator_max_tokens,
                              temperature=s.temperature, log=log)
        obj = extract_json(text)
        if obj is None:
            status = "scaffold unparseable"
            log.append(event("unparseable", role="scaffold", attempt=attempt, text=text))
            continue
        try:
            scaffold = validate(_normalise_scaffold(obj, (s.subject_name, s.subject_bio)), "scaffold_v1")
            break
        except SchemaValidationError as exc:
            status = f"scaffold invalid: {exc}"
            log.append(event("invalid", role="scaffold", attempt=attempt, error=str(exc)))
    if scaffold is None:
        return None, status
    no, sa = TAXONOMY.entry("norm", tup.norm), TAXONOMY.entry("sanction", tup.sanction)
    for attempt in range(s.max_reasks + 1):
        sysm, user, pre = _render("hidden", scaffold=json.dumps(scaffold, ensure_ascii=False), norm=tup.norm,
                                  norm_description=no.description, sanction=tup.sanction,
                                  sanction_description=sa.description, precedent=tup.precedent_flag)
        text = await sess.ask("hidden", sysm, user, pre, seed=next(seeds), max_tokens=s.generator_max_tokens,
                              temperature=s.temperature, log=log)
        obj = extract_json(text)
        if obj is None:
            status = "hidden unparseable"
            log.append(event("unparseable", role="hidden", attempt=attempt, text=text))
            continue
        scenario = {"scaffold": copy.deepcopy(scaffold), "tuple": {**tup._asdict(), "precedent": tup.precedent_flag},
                    "hidden": _normalise_hidden(obj)}
        try:
            return validate(scenario, "scenario_v1"), "ok"
        except SchemaValidationError as exc:
            status = f"hidden invalid: {exc}"
            log.append(event("invalid", role="hidden", attempt=attempt, error=str(exc)))
    return None, status


@dataclass(frozen=True)
class GeneratedScenario:
    """Outcome of :func:`generate_scenario`: ``scenario`` (``scenario_v1``) or ``None`` with the
    reason in ``status``; ``log`` holds every prompt and answer."""

    tuple: SceneTuple
    scenario: dict | None
    status: str
    log: tuple

    def __repr__(self) -> str:
        return f"GeneratedScenario({'/'.join(self.tuple)}, status={self.status!r}, calls={count_events(self.log, 'call')})"


def generate_scenario(tup, *, endpoint=None, settings: SceneSettings | None = None, rng=None) -> GeneratedScenario:
    """Two-stage scenario generation for one tuple: norm-blind scaffold, then hidden fields.

    Parameters
    ----------
    tup : SceneTuple or 5-sequence or dict
    endpoint : normlab.llm_runs.EndpointConfig, optional
        Default :meth:`EndpointConfig.from_env` (the embedded SmolLM2 server without a base URL).
    settings : SceneSettings, optional
    rng : None, int, SeedSequence or Generator
        Per-call seeds (reproducible on servers that honour ``seed``).

    Returns
    -------
    GeneratedScenario

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 4.1; Appendix B.1, B.2.
    """
    tup = check_tuple(tup)
    settings = _settings(settings)

    async def go():
        async with _Session(endpoint, None, settings, rng) as sess:
            log: list = []
            sc, status = await _generate(sess, tup, _seeds(sess.ss), log)
            return GeneratedScenario(tup, sc, status, tuple(log))

    return run_sync(go)
