"""A SCENE episode played (Sect. 4.2-4.3; Appendix B.3-B.5), judged (B.6) and audited (B.7).

The opening (scaffold turns, the precedent sub-script when present, the elicitor), then up to
``max_turns`` ticks: the orchestrator orders the scripted personas, each returns message / react /
no-op, and the subject is prompted after every non-silent persona action (once with "the floor is
open" when all stay silent); the judge labels every turn and the audit grades the episode's fidelity.
"""

from __future__ import annotations

import copy
import re
from dataclasses import asdict, replace
from string import Template

import numpy as np

from ..core.sync import run_sync
from .episode import Episode, Turn, count_events, event, render_transcript
from .generation import _cast_text
from .parsing import _derive_metrics, _parse_labels, extract_json, parse_action
from .schemas import validate
from .session import _seeds, _Session
from .settings import SceneSettings, _render, _settings, load_prompt
from .taxonomy import TAXONOMY, check_tuple


class _Chat:
    def __init__(self):
        self.turns: list[Turn] = []

    def add(self, t: int, actor: str, action: str, content: str, target=None) -> Turn:
        turn = Turn(turn_id=len(self.turns), t=t, actor=actor, action=action, content=content, target_turn_id=target)
        self.turns.append(turn)
        return turn

    def text(self) -> str:
        return render_transcript(self.turns) or "(no messages yet)"

    @property
    def ids(self):
        return [x.turn_id for x in self.turns]


async def _act(sess: _Session, chat: _Chat, role: str, actor: str, system: str, user_fn, prefill: str, t: int,
               seeds, log: list, *, subject: bool) -> str:
    """One persona or subject action; returns the action name (``"unparseable"`` when unread)."""
    user = user_fn()
    text = await sess.ask(role, system, user, prefill, seed=next(seeds), max_tokens=sess.s.max_tokens,
                          temperature=sess.s.temperature, subject=subject, log=log)
    act = parse_action(text, chat.ids)
    if act is None:
        log.append(event("unparseable", role=role, actor=actor, t=t, text=text))
        return "unparseable"
    if act["action"] == "no-op":
        log.append(event("no-op", role=role, actor=actor, t=t))
        return "no-op"
    target = act["target_turn_id"]
    if act["action"] == "react":
        if not chat.turns:
            log.append(event("unparseable", role=role, actor=actor, t=t, text=text,
                             reason="reaction with nothing to react to"))
            return "unparseable"
        if target is None:
            target = chat.turns[-1].turn_id
            log.append(event("target_defaulted", actor=actor, t=t, target_turn_id=target))
    turn = chat.add(t, actor, act["action"], act["content"] or sess.s.reaction_emoji, target)
    log.append(event("turn", role=role, **turn.to_dict(), **({"truncated": True} if act.get("truncated") else {})))
    return act["action"]


def _precedent(scenario: dict, chat: _Chat, log: list) -> None:
    """Play the precedent sub-script (persona order; ``react: <emoji>`` lines are reactions to the
    previous precedent turn)."""
    last = None
    for p in scenario["hidden"]["personas"]:
        for line in p["precedent_lines_or_null"] or []:
            m = re.match(r"\s*react\s*:\s*(.*)$", line, re.I)
            if m and last is not None:
                turn = chat.add(0, p["name"], "react", m.group(1).strip() or "(reaction)", last.turn_id)
            else:
                turn = chat.add(0, p["name"], "message", line)
            last = turn
            log.append(event("turn", role="precedent", **turn.to_dict()))


async def _episode(sess: _Session, scenario: dict, model_label: str | None, episode_id: str, seeds,
                   log: list | None = None) -> Episode:
    s = sess.s
    validate(scenario, "scenario_v1")
    tup = check_tuple(scenario["tuple"])
    sc = scenario["scaffold"]
    cast = sc["channel"]["cast"]
    subj = (sc["channel"].get("subject") or {}).get("name") or s.subject_name
    subj_bio = (sc["channel"].get("subject") or {}).get("bio_oneline") or s.subject_bio
    if subj in [c["name"] for c in cast]:
        raise ValueError(f"the subject name {subj!r} is also a cast member; choose another subject_name")
    hidden = {p["name"]: p for p in scenario["hidden"]["personas"]}
    roster = [c["name"] for c in cast if c["name"] in hidden]
    norm, sanc = TAXONOMY.entry("norm", tup.norm), TAXONOMY.entry("sanction", tup.sanction)
    log = sess.new_log(episode_id) if log is None else log
    log.append(event("start", episode_id=episode_id, tuple=tup._asdict(), subject=subj))
    chat = _Chat()
    for t0 in sc["transcript"]["opening_turns"]:
        if t0["action"] != "no-op":
            turn = chat.add(0, t0["actor"], t0["action"], t0["content"])
            log.append(event("turn", role="opening", **turn.to_dict()))
    if tup.precedent == "present":
        _precedent(scenario, chat, log)
    el = sc["transcript"]["elicitor_turn"]
    turn = chat.add(0, el["actor"], el["action"], el["content"])
    log.append(event("turn", role="elicitor", **turn.to_dict()))

    channel, cast_text = sc["channel"]["description"], _cast_text(cast)
    subj_sys, _, subj_pre = _render("subject", subject=subj, subject_bio=subj_bio, channel=channel, cast=cast_text,
                                    transcript="", floor="")
    subj_prompt = load_prompt("subject")

    def subject_user(floor: str):
        return lambda: Template(subj_prompt["user"]).substitute(transcript=chat.text(), floor=floor)

    persona_sys = {}
    for name in roster:
        p, bio = hidden[name], next(c["bio_oneline"] for c in cast if c["name"] == name)
        persona_sys[name] = _render("persona", name=name, bio=bio, outline=p["outline"], norm_description=norm.description,
                                    sanction=tup.sanction, sanction_description=sanc.description,
                                    sanction_lines="\n".join(p["sanction_lines"]) or "(none)", channel=channel,
                                    cast=cast_text + f"; {subj} ({subj_bio})", transcript="")[0]
    persona_prompt = load_prompt("persona")

    def persona_user():
        return Template(persona_prompt["user"]).substitute(transcript=chat.text())

    async def subject_turn(t, floor=""):
        log.append(event("subject_view", t=t, n_turns_visible=len(chat.turns), floor_open=bool(floor)))
        return await _act(sess, chat, "subject", subj, subj_sys, subject_user(floor), subj_pre, t, seeds, log, subject=True)

    end_reason, silent_run = "max_turns", 0
    g = np.random.default_rng(next(seeds))
    await subject_turn(1)  # the elicitor lands: the subject's first opportunity
    for t in range(1, s.max_turns + 1):
        # orchestrator: routing only
        osys, ouser, opre = _render("orchestrator", roster=", ".join(roster),
                                    outline=scenario["hidden"].get("orchestrator_outline", ""),
                                    t=t, max_turns=s.max_turns, transcript=chat.text(),
                                    min_post_sanction_turns=s.min_post_sanction_turns)
        text = await sess.ask("orchestrator", osys, ouser, opre, seed=next(seeds), max_tokens=s.orchestrator_max_tokens,
                              temperature=s.temperature, log=log)
        named, terminate = [], False
        if text:
            obj = extract_json(text)
            terminate = isinstance(obj, dict) and obj.get("terminate") is True
            source = " ".join(map(str, obj.get("order", []))) if isinstance(obj, dict) and isinstance(obj.get("order"), list) else text
            for m in re.finditer("|".join(re.escape(r) for r in sorted(roster, key=len, reverse=True)), source):
                if m.group(0) not in named:
                    named.append(m.group(0))
        if named:
            order = named + [r for r in roster if r not in named]
            log.append(event("orchestrator", t=t, order=order, parsed=True, named=len(named)))
        else:
            order = [roster[i] for i in g.permutation(len(roster))]
            log.append(event("orchestrator", t=t, order=order, parsed=False, text=text))
        if terminate and s.honour_terminate and t > s.min_post_sanction_turns:
            end_reason = "orchestrator"  # B.5 (b) or (c), as judged by the orchestrator
            break
        any_action = False
        for name in order:
            act = await _act(sess, chat, "persona", name, persona_sys[name], persona_user,
                             persona_prompt["prefill"], t, seeds, log, subject=False)
            if act in ("message", "react"):
                any_action = True
                await subject_turn(t)
        if not any_action:
            act = await subject_turn(t, floor="(Nobody else has said anything this turn; the floor is open.)")
            silent_run = silent_run + 1 if act == "no-op" else 0
            if silent_run >= s.max_silent_prompts:
                end_reason = "silent"
                break
        else:
            silent_run = 0
    log.append(event("end", reason=end_reason, turns=len(chat.turns)))
    n_unp = count_events(log, "unparseable", role="subject")
    n_subj_calls = count_events(log, "call", role="subject")
    meta = {"end_reason": end_reason, "subject_calls": n_subj_calls, "subject_unparseable": n_unp,
            "persona_unparseable": count_events(log, "unparseable", role="persona"),
            "settings": asdict(s), "events": log}
    model = model_label or sess.subject_client.model or "unknown"
    return Episode(model=model, tuple=tup, subject=subj, transcript=tuple(chat.turns), episode_id=episode_id, meta=meta)


def run_episode(scenario: dict, *, endpoint=None, subject=None, model_label: str | None = None,
                settings: SceneSettings | None = None, judge: bool = True, audit: bool = True,
                episode_id: str = "", rng=None) -> Episode:
    """Play one scenario with scripted personas and a subject model; judge and audit it.

    Parameters
    ----------
    scenario : dict
        A ``scenario_v1`` document (from :func:`generate_scenario`, a file read with
        :func:`~normlab.llm_runs.scene.read_json`, or :func:`load_example_scenario`).
    endpoint : EndpointConfig, optional
        Scripted personas, orchestrator, judge and audit (the paper: one fixed model). Default:
        :meth:`EndpointConfig.from_env` (embedded SmolLM2 without a base URL).
    subject : EndpointConfig, optional
        The model under test; default the same endpoint (and server) as ``endpoint``.
    model_label : str, optional
        Name recorded for the subject model (default: the model name the endpoint serves).
    settings : SceneSettings, optional
    judge, audit : bool
        Label the transcript (``judge_output_v1``) and audit its fidelity.
    episode_id : str
    rng : None, int, SeedSequence or Generator

    Returns
    -------
    Episode
        ``meta["events"]`` is the full event log (prompts, answers, actions, no-ops,
        unparseable outputs, orchestrator routing, subject views, termination).

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 4.2-4.3, 5.1; Appendix B.3-B.7.
    """
    settings = _settings(settings)
    validate(scenario, "scenario_v1")

    async def go():
        async with _Session(endpoint, subject, settings, rng) as sess:
            return await _play(sess, scenario, model_label, episode_id, judge, audit, _seeds(sess.ss))

    return run_sync(go)


async def _play(sess, scenario, model_label, episode_id, judge, audit, seeds, log=None) -> Episode:
    ep = await _episode(sess, scenario, model_label, episode_id, seeds, log)
    if judge:
        ep = await _judge(sess, ep, seeds)
    if audit:
        ep = await _audit(sess, ep, seeds)
    return ep


async def _judge(sess: _Session, ep: Episode, seeds) -> Episode:
    s = sess.s
    norm, sanc = TAXONOMY.entry("norm", ep.tuple.norm), TAXONOMY.entry("sanction", ep.tuple.sanction)
    log = ep.meta.setdefault("events", [])
    labels = metrics = None
    # at temperature 0 a re-ask would repeat the same answer
    for attempt in range(s.max_reasks + 1 if s.judge_temperature > 0 else 1):
        sysm, user, pre = _render("judge", norm=ep.tuple.norm, norm_description=norm.description,
                                  compliance_signal=norm["compliance_signal"], breach_signal=norm["breach_signal"],
                                  sanction=ep.tuple.sanction, sanction_description=sanc.description,
                                  subject=ep.subject, transcript=ep.render())
        text = await sess.ask("judge", sysm, user, pre, seed=next(seeds), max_tokens=s.judge_max_tokens,
                              temperature=s.judge_temperature, log=log)
        labels, metrics, notes = _parse_labels(text, ep)
        if labels is not None:
            if notes:
                log.append(event("judge_notes", notes=notes))
            break
        log.append(event("unparseable", role="judge", attempt=attempt, text=text, notes=notes))
    if labels is None:
        return replace(ep, judge=None, meta={**ep.meta, "judge_status": "unparseable"})
    by_id = {x.turn_id: x for x in ep.transcript}
    doc = {"turn_labels": [{"turn_id": t, "actor": by_id[t].actor, "label": lab} for t, lab in sorted(labels.items())]}
    derived = _derive_metrics(ep, labels)
    given, used_derived = {}, []
    for k, v in derived.items():
        mv = (metrics or {}).get(k)
        ok = isinstance(mv, bool) if isinstance(v, bool) else (isinstance(mv, int) and not isinstance(mv, bool) and mv >= 0)
        given[k] = mv if ok else v
        if not ok:
            used_derived.append(k)
    doc["episode_metrics"] = given
    validate(doc, "judge_output_v1")
    return replace(ep, judge=doc, meta={**ep.meta, "judge_status": "ok", "judge_metrics_derived": used_derived})


async def _audit(sess: _Session, ep: Episode, seeds) -> Episode:
    norm, sanc = TAXONOMY.entry("norm", ep.tuple.norm), TAXONOMY.entry("sanction", ep.tuple.sanction)
    log = ep.meta.setdefault("events", [])
    sysm, user, pre = _render("audit", norm=ep.tuple.norm, norm_description=norm.description, sanction=ep.tuple.sanction,
                              sanction_description=sanc.description, precedent=ep.tuple.precedent_flag,
                              subject=ep.subject, transcript=ep.render())
    text = await sess.ask("audit", sysm, user, pre, seed=next(seeds), max_tokens=sess.s.max_tokens,
                          temperature=sess.s.judge_temperature, log=log)
    obj = extract_json(text)
    cand = str(obj.get("label", "")) if isinstance(obj, dict) else (text or "")
    found = set(re.findall(r"\b(INVALID|PARTIAL|VALID)\b", cand.upper()))
    label = found.pop() if len(found) == 1 else "UNPARSEABLE"  # none, or the template echoed
    just = obj.get("justification") if isinstance(obj, dict) else None
    log.append(event("audit", label=label, justification=just if isinstance(just, str) else None))
    return replace(ep, audit=label)


def _label_one(ep, step, endpoint, settings, rng) -> Episode:
    """Run one labelling step (:func:`_judge` or :func:`_audit`) on a copy of ``ep``."""
    settings = _settings(settings)
    if not isinstance(ep, Episode):
        raise TypeError(f"ep must be an Episode; got {type(ep).__name__}")

    async def go():
        async with _Session(endpoint, None, settings, rng) as sess:
            return await step(sess, replace(ep, meta=copy.deepcopy(ep.meta)), _seeds(sess.ss))

    return run_sync(go)


def judge_episode(ep: Episode, *, endpoint=None, settings: SceneSettings | None = None, rng=None) -> Episode:
    """Label an episode's turns with the judge prompt (Appendix B.6); returns a new Episode.

    Labels for unknown turns or unknown label names are dropped (noted in the event log); the
    actor of each label is the transcript's. Episode metrics the judge does not give (or gives
    with a wrong type) are computed from the labels and listed in
    ``meta["judge_metrics_derived"]``. An answer without any readable label leaves ``judge``
    ``None`` with ``meta["judge_status"] == "unparseable"``.
    """
    return _label_one(ep, _judge, endpoint, settings, rng)


def audit_episode(ep: Episode, *, endpoint=None, settings: SceneSettings | None = None, rng=None) -> Episode:
    """Fidelity audit of an episode (Appendix B.7): ``audit`` becomes VALID / PARTIAL / INVALID,
    or UNPARSEABLE when the answer names none of them."""
    return _label_one(ep, _audit, endpoint, settings, rng)
