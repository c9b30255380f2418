"""A thin SCENE episode runner on an OpenAI-compatible endpoint (the embedded SmolLM2 by default).

Stages (prompts are data: ``prompts/*.json``):

1. :func:`generate_scenario` -- two-stage generation: a norm-blind scaffold from the event and
   elicitor (``scaffold_v1``), then the norm-aware hidden fields for the frozen scaffold
   (``scenario_v1``). Every answer is validated; an answer that cannot be parsed or validated
   after ``max_reasks`` re-asks is recorded as such and no scenario is returned.
2. :func:`run_episode` -- the opening (scaffold turns, the precedent sub-script when present,
   the elicitor), then up to ``max_turns`` ticks: the orchestrator orders the scripted personas,
   each returns message / react / no-op, and the subject is prompted after every non-silent
   persona action (once with "the floor is open" when all stay silent). The episode ends at
   ``max_turns`` or when the subject no-ops through ``max_silent_prompts`` consecutive
   all-silent prompts. Every prompt, answer, action, no-op and unparseable output is logged.
3. :func:`judge_episode` (per-turn labels, ``judge_output_v1``) and :func:`audit_episode`
   (VALID / PARTIAL / INVALID).

Weak models: answers are parsed leniently (first JSON object, Python-style quotes, key/value
fragments, action synonyms). What cannot be read is never guessed: an unparseable persona or
subject answer is logged as ``unparseable`` and nothing is added to the chat (a message cut
off by ``max_tokens`` keeps the words written, flagged ``truncated``); an unparseable
judge answer leaves the episode unjudged; an unparseable audit is ``"UNPARSEABLE"``. The two
documented defaults are routing ones: an unreadable orchestrator answer falls back to a seeded
shuffle of the roster, and a reaction without a valid target points at the latest turn.

References
----------
Jacniacki & Bilski, "SCENE: Recognizing Social Norms and Sanctioning in Group Chats",
arXiv:2605.07823 (2026), Sect. 4 (generation and runtime), Sect. 5.1, Appendix B.1-B.7.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import itertools
import json
import re
import warnings
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from string import Template

import numpy as np

from normlab._rng import as_seed_sequence, seed_list
from normlab._validate import check_int

from .. import journal as jr
from ..backend import EndpointConfig, open_endpoint, redact_url
from ..core.journaled import (JournaledClient, RequestCap, RunDirectory, ScriptedClient, call_context,
                              charge_earlier, gather_all, make_estimate, replay_index, spent)
from ..core.sync import run_sync
from .episode import LABELS, Episode, Turn, as_episode, count_events, event, render_transcript, save_episodes
from .scripted import responder as scripted_responder
from .schemas import SchemaValidationError, validate
from .taxonomy import TAXONOMY, SceneTuple, check_tuple

ROLES = ("scaffold", "hidden", "persona", "subject", "orchestrator", "judge", "audit")
_ACTION_SYNONYMS = {
    "message": "message", "msg": "message", "say": "message", "reply": "message", "send": "message",
    "send_message": "message", "text": "message", "respond": "message",
    "react": "react", "reaction": "react", "emoji": "react", "add_reaction": "react",
    "no-op": "no-op", "noop": "no-op", "no_op": "no-op", "none": "no-op", "silent": "no-op",
    "pass": "no-op", "nothing": "no-op", "skip": "no-op", "wait": "no-op", "do nothing": "no-op",
}
_LABEL_SYNONYMS = {**{lab: lab for lab in LABELS}, "REPAIR": "FACE_SAVE_REPAIR", "FACE_SAVE": "FACE_SAVE_REPAIR",
                   "FACE-SAVE-REPAIR": "FACE_SAVE_REPAIR", "DEMO": "DEMONSTRATION"}


# ----------------------------------------------------------------------------- settings and prompts
@dataclass(frozen=True)
class SceneSettings:
    """Settings of a SCENE run (the paper's values where it gives them).

    Parameters
    ----------
    max_turns : int
        Ticks per episode (the paper: at most eight turns).
    max_silent_prompts : int
        The episode ends when the subject no-ops through this many consecutive all-silent
        prompts (the paper: three).
    subject_name, subject_bio : str
        The subject's persona when the scaffold does not give one.
    temperature, judge_temperature : float
        Sampling temperature of personas / subject / generator, and of the judge and audit.
    max_tokens, orchestrator_max_tokens, generator_max_tokens, judge_max_tokens : int
    max_reasks : int
        Extra attempts when a generator or judge answer cannot be parsed or validated (the judge
        re-asks only when ``judge_temperature > 0``: at 0 the answer would repeat).
    prefill : bool or None
        Open each answer with its JSON prefix (helps small models); default: on for the
        embedded server, off otherwise.
    reaction_emoji : str
        Not used to invent reactions; only the default label of a reaction whose content is empty.
    honour_terminate : bool
        End the episode when the orchestrator answers ``"terminate": true`` (its prompt, B.5,
        asks it to do so when a sanction was enacted and the subject had
        ``min_post_sanction_turns`` more opportunities, or on a fidelity hard-fail). Only from
        ``min_post_sanction_turns + 1`` ticks on, so that a weak orchestrator cannot end an
        episode before the subject could breach, be sanctioned and react.
    min_post_sanction_turns : int
        The B.5 parameter of the same name (normlab's default: 2).

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 4.3 and 6 (setup).
    """

    max_turns: int = 8
    max_silent_prompts: int = 3
    subject_name: str = "Sam"
    subject_bio: str = "a member of the group"
    temperature: float = 0.7
    judge_temperature: float = 0.0
    max_tokens: int = 96
    orchestrator_max_tokens: int = 48
    generator_max_tokens: int = 700
    judge_max_tokens: int = 700
    max_reasks: int = 1
    prefill: bool | None = None
    reaction_emoji: str = "(reaction)"
    honour_terminate: bool = True
    min_post_sanction_turns: int = 2

    def __post_init__(self):
        check_int(self.min_post_sanction_turns, "min_post_sanction_turns", 0)
        for name in ("max_turns", "max_silent_prompts", "max_tokens", "orchestrator_max_tokens",
                     "generator_max_tokens", "judge_max_tokens"):
            check_int(getattr(self, name), name, 1)
        check_int(self.max_reasks, "max_reasks", 0)
        for name in ("temperature", "judge_temperature"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 2:
                raise ValueError(f"{name} must be a number in [0, 2]; got {v!r}")
        if not self.subject_name or not isinstance(self.subject_name, str):
            raise ValueError("subject_name must be a non-empty string")


def load_prompt(role: str) -> dict:
    """The prompt template of ``role`` (one of :data:`ROLES`): ``system``, ``user``, ``prefill``."""
    if role not in ROLES:
        raise ValueError(f"unknown prompt role {role!r}; allowed: {ROLES}")
    return json.loads(resources.files("normlab.llm_runs.scene.prompts").joinpath(f"{role}.json").read_text("utf-8"))


def _render(role: str, **values) -> tuple[str, str, str]:
    p = load_prompt(role)
    vals = {k: str(v) for k, v in values.items()}
    return Template(p["system"]).substitute(vals), Template(p["user"]).substitute(vals), p["prefill"]


def load_example_scenario() -> dict:
    """A hand-written ``scenario_v1`` document (bug report, concise-answer norm, silent ignore,
    precedent present; modelled on the paper's episode C.1), for trying the runner."""
    text = resources.files("normlab.llm_runs.scene.data").joinpath("example_scenario.json").read_text("utf-8")
    return validate(json.loads(text), "scenario_v1")


# ----------------------------------------------------------------------------- lenient parsing
def _balanced(text: str, start: int) -> str | None:
    depth, quote, esc = 0, None, False
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def extract_json(text: str | None):
    """The first JSON object in ``text`` (as a dict), or ``None``.

    Tries strict JSON, then without trailing commas, then a Python literal (single quotes,
    ``True``/``None``); a truncated object is not repaired.
    """
    if not text:
        return None
    for m in re.finditer(r"\{", text):
        chunk = _balanced(text, m.start())
        if chunk is None:
            continue
        for attempt in (chunk, re.sub(r",\s*([}\]])", r"\1", chunk)):
            try:
                obj = json.loads(attempt)
            except json.JSONDecodeError:
                try:
                    obj = ast.literal_eval(attempt.replace("null", "None").replace("true", "True").replace("false", "False"))
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
            if isinstance(obj, dict):
                return obj
    return None


def _field(text: str, key: str):
    m = re.search(r"['\"]?" + key + r"['\"]?\s*:\s*(?:\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'|(-?\d+|null|None))", text)
    if not m:
        return None
    return next(g for g in m.groups() if g is not None)


def parse_action(text: str | None, turn_ids=()) -> dict | None:
    """Read ``{"action", "content", "target_turn_id"}`` from a persona or subject answer.

    Accepts a JSON (or Python-literal) object anywhere in the text, or ``key: value`` fragments
    of one; action synonyms (``reply``, ``reaction``, ``noop``, ``silent`` ...) are normalised.
    A message needs non-empty string content; an answer cut off inside its content string
    keeps the words written (flag ``truncated``). ``target_turn_id`` is kept only when it is
    one of ``turn_ids``. Returns ``None`` when no action can be read (the caller logs it as
    unparseable).

    Parameters
    ----------
    text : str or None
    turn_ids : collection of int

    Returns
    -------
    dict or None
    """
    if not text:
        return None
    obj = extract_json(text)
    truncated = False
    if obj is None:
        act = _field(text, "action")
        if act is None:
            return None
        content = _field(text, "content")
        if content is None:  # an answer cut off inside its content string: keep the words written
            m = re.search(r"['\"]content['\"]\s*:\s*(['\"])(.+)$", text, re.S)
            if m and m.group(1) not in m.group(2):
                content, truncated = m.group(2).strip(), True
        obj = {"action": act, "content": content, "target_turn_id": _field(text, "target_turn_id")}
    act = _ACTION_SYNONYMS.get(str(obj.get("action", "")).strip().lower())
    if act is None:
        return None
    content = obj.get("content")
    if isinstance(content, bool) or not isinstance(content, (str, int, float, type(None))):
        return None  # e.g. {"content": {}}: no message was written
    content = "" if content is None else str(content).strip()
    target = obj.get("target_turn_id")
    try:
        target = int(target) if target is not None and str(target).strip() not in ("", "null", "None") else None
    except (TypeError, ValueError):
        target = None
    if target is not None and target not in set(turn_ids):
        target = None
    if act == "message" and not content:
        return None
    if act == "no-op":
        content, target, truncated = "", None, False
    out = {"action": act, "content": content, "target_turn_id": target}
    if truncated:
        out["truncated"] = True
    return out


# ----------------------------------------------------------------------------- LLM session
class _Session:
    """Endpoints (personas/judge and subject), seeds and the event log of one run."""

    def __init__(self, endpoint, subject, settings: SceneSettings, rng, *, clients=None):
        self.endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
        if not isinstance(self.endpoint, EndpointConfig):
            raise TypeError(f"endpoint must be an EndpointConfig; got {type(self.endpoint).__name__}")
        if subject is not None and not isinstance(subject, EndpointConfig):
            raise TypeError(f"subject must be an EndpointConfig or None; got {type(subject).__name__}")
        self.subject_cfg = subject
        self.s = settings
        self.ss = as_seed_sequence(rng)
        self.events: list[dict] = []
        self._given = clients  # (client, subject client): prepared clients (dry runs), no endpoint opened
        self.journal = None
        self.requests = RequestCap()
        self._ev_next: dict = {}
        self._ev_skip: dict = {}

    async def __aenter__(self):
        self._ep = self._sep = None
        if self._given is not None:
            self.client, self.subject_client = self._given
            return self
        self._ep = open_endpoint(self.endpoint)
        self.client = await self._ep.__aenter__()
        self.subject_client = self.client
        if self.subject_cfg is not None:
            try:
                self._sep = open_endpoint(self.subject_cfg)
                self.subject_client = await self._sep.__aenter__()
                self.subject_client.cap = self.client.cap  # one budget for the whole sweep
            except BaseException:
                await self._ep.__aexit__(None, None, None)
                raise
        return self

    async def __aexit__(self, *exc):
        if self._sep is not None:
            await self._sep.__aexit__(*exc)
        if self._ep is not None:
            await self._ep.__aexit__(*exc)

    def journaled(self, journal, *, max_requests=None) -> None:
        """Route every call through the run's journal (:class:`~normlab.llm_runs.core.journaled.JournaledClient`),
        earlier sessions' calls answered from it and counted against the caps."""
        self.journal = journal
        replay, ids = replay_index(journal.records), itertools.count(jr.count(journal.records, jr.CALL) + 1)
        requests = self.requests = RequestCap(max_requests, jr.count(journal.records, jr.CALL))
        charge_earlier(self.client, journal.records)
        same = self.subject_client is self.client
        self.client = JournaledClient(self.client, journal, replay=replay, ids=ids, requests=requests)
        self.subject_client = self.client if same else JournaledClient(self.subject_client, journal, replay=replay,
                                                                       ids=ids, requests=requests)
        self._ev_skip = {k: len(v) for k, v in jr.episode_events(journal.records).items()}

    def new_log(self, episode_id: str) -> list:
        """The event log of an episode: a list whose entries are also journaled as they are
        appended (those a resumed episode replays are journaled already and not written again)."""
        return _EventLog(self, episode_id) if self.journal is not None else []

    def _journal_event(self, episode_id: str, ev: dict) -> None:
        i = self._ev_next.get(episode_id, 0)
        self._ev_next[episode_id] = i + 1
        if i >= self._ev_skip.get(episode_id, 0):
            self.journal.write(jr.episode_event_record(episode_id, i, ev), sync=True)

    def prefill_on(self, cfg) -> bool:
        return cfg.embedded if self.s.prefill is None else bool(self.s.prefill)

    async def ask(self, role: str, system: str, user: str, prefill: str, *, seed: int, max_tokens: int,
                  temperature: float, subject: bool = False, log: list) -> str | None:
        client = self.subject_client if subject else self.client
        cfg = self.subject_cfg if (subject and self.subject_cfg is not None) else self.endpoint
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        pre = prefill if self.prefill_on(cfg) else None
        if pre:
            msgs.append({"role": "assistant", "content": pre})
        with call_context(purpose=f"scene:{role}"):
            res = await client.chat(msgs, max_tokens=max_tokens, temperature=temperature, seed=seed)
        text = res.text
        if pre and text is not None and not text.lstrip().startswith("{"):
            text = pre + text  # servers that return only the continuation (llama.cpp echoes nothing)
        log.append(event("call", role=role, model=client.model, seed=seed, system=system,
                         user=user, prefill=pre, text=text, finish_reason=res.finish_reason,
                         prompt_tokens=res.prompt_tokens, completion_tokens=res.completion_tokens,
                         latency=round(res.latency, 3)))
        return text


class _EventLog(list):
    """An episode's event log whose appends are journaled (see :meth:`_Session.new_log`)."""

    def __init__(self, sess: _Session, episode_id: str):
        super().__init__()
        self._sess, self._id = sess, episode_id

    def append(self, ev) -> None:
        super().append(ev)
        self._sess._journal_event(self._id, ev)

    def __deepcopy__(self, memo):
        return copy.deepcopy(list(self), memo)


def _seeds(ss: np.random.SeedSequence):
    g = np.random.default_rng(ss)
    while True:
        yield int(g.integers(0, 2**31 - 1))


# ----------------------------------------------------------------------------- scenario generation
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


def _settings(settings):
    if settings is None:
        return SceneSettings()
    if not isinstance(settings, SceneSettings):
        raise TypeError(f"settings must be a SceneSettings; got {type(settings).__name__}")
    return settings


# ----------------------------------------------------------------------------- episode runtime
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


def _item_doc(it) -> dict:
    """An item as stored in a run's settings: a scenario dict, or a tuple's five IDs."""
    if isinstance(it, dict) and "scaffold" in it:
        return {"scenario": it}
    return {"tuple": list(check_tuple(it))}


def _check_items(items) -> list:
    if isinstance(items, (str, dict, SceneTuple)):
        raise TypeError("items must be a list of tuples or scenario dicts (wrap a single one in a list)")
    items = list(items)
    if not items:
        raise ValueError("items is empty; give tuples or scenario dicts")
    for it in items:
        if isinstance(it, dict) and "scaffold" in it:
            validate(it, "scenario_v1")
        else:
            check_tuple(it)
    return items


async def _run_item(sess, k, it, child, model_label, judge, audit) -> Episode:
    """Item ``k``: generate its scenario (a tuple) and play, judge and audit it; every event
    journaled as it happens (a session with a journal)."""
    eid = f"ep{k}"
    seeds = _seeds(child)
    log = sess.new_log(eid)
    with call_context(run=k, agent=eid):
        if isinstance(it, dict) and "scaffold" in it:
            scenario = it
        else:
            tup = check_tuple(it)
            scenario, status = await _generate(sess, tup, seeds, log)
            if scenario is None:
                return Episode(model=model_label or sess.subject_client.model or "unknown", tuple=tup,
                               subject=sess.s.subject_name, transcript=(), episode_id=eid,
                               meta={"generation": status, "end_reason": "generation failed", "events": list(log)})
        ep = await _play(sess, scenario, model_label, eid, judge, audit, seeds, log)
    return replace(ep, meta={**ep.meta, "events": list(log)})


async def _sweep(sess, items, children, model_label, judge, audit, concurrency, journal, progress) -> list:
    """Every item's episode, ``concurrency`` at a time, in item order; finished episodes of earlier
    sessions are read from the journal, unfinished ones replayed from it."""
    done = jr.episodes_done(journal.records) if journal is not None else {}
    events = jr.episode_events(journal.records) if journal is not None else {}
    out: list = [None] * len(items)
    todo = []
    for k in range(len(items)):
        d = done.get(f"ep{k}")
        if d is not None:
            data = dict(d.data)
            out[k] = Episode.from_dict({**data, "meta": {**(data.get("meta") or {}), "events": events.get(f"ep{k}", [])}})
        else:
            todo.append(k)
    sem = asyncio.Semaphore(concurrency)
    n_done = [len(items) - len(todo)]

    async def one(k):
        async with sem:
            ep = await _run_item(sess, k, items[k], children[k], model_label, judge, audit)
        if journal is not None:
            data = ep.to_dict()
            data["meta"] = {key: v for key, v in data["meta"].items() if key != "events"}
            journal.write(jr.episode_record(ep.episode_id, data), sync=True)
        out[k] = ep
        n_done[0] += 1
        if progress:
            print(f"episode {k}: {len(ep.transcript)} turns, {_end_reason(ep)} ({n_done[0]}/{len(items)} done)",
                  flush=True)

    await gather_all([one(k) for k in todo], sess.requests)
    return out


def _end_reason(ep: Episode) -> str:
    if not ep.transcript and ep.meta.get("generation"):
        return f"no turns: scenario generation failed ({ep.meta['generation']})"
    return str(ep.meta.get("end_reason", "unknown"))


def sweep_summary(episodes) -> dict:
    """What a sweep produced, in plain Python: episodes, those with no turn and why (scenario
    generation that failed: the reason, e.g. ``scaffold unparseable``), how episodes ended, how
    many were judged, the audit labels."""
    eps = [as_episode(e) for e in episodes]
    zero: dict = {}
    for e in eps:
        if not e.transcript:
            why = e.meta.get("generation") or e.meta.get("end_reason") or "unknown"
            zero[why] = zero.get(why, 0) + 1
    ends: dict = {}
    for e in eps:
        if e.transcript:
            r = str(e.meta.get("end_reason", "unknown"))
            ends[r] = ends.get(r, 0) + 1
    audits: dict = {}
    for e in eps:
        if e.audit is not None:
            audits[e.audit] = audits.get(e.audit, 0) + 1
    return {"episodes": len(eps), "played": sum(1 for e in eps if e.transcript),
            "zero_turns": sum(zero.values()), "zero_turn_reasons": zero, "end_reasons": ends,
            "judged": sum(1 for e in eps if e.judge is not None),
            "subject_unparseable": int(sum(e.meta.get("subject_unparseable", 0) for e in eps)),
            "audits": audits, "models": sorted({e.model for e in eps})}


def zero_turn_warning(episodes) -> str | None:
    """One line naming why episodes ended with no turn (``None`` when every episode was played)."""
    s = sweep_summary(episodes)
    if not s["zero_turns"]:
        return None
    why = "; ".join(f"{n} x {r}" for r, n in sorted(s["zero_turn_reasons"].items(), key=lambda kv: -kv[1]))
    return (f"{s['zero_turns']} of {s['episodes']} episodes ended with 0 turns: scenario generation failed ({why}); "
            "the generator model could not write a valid scenario (the embedded SmolLM2 cannot) -- give a capable "
            "endpoint for the personas and judge, or scenario dicts")


def run_scene(items, *, endpoint=None, subject=None, model_label: str | None = None,
              settings: SceneSettings | None = None, judge: bool = True, audit: bool = True, out=None,
              concurrency: int | None = None, max_requests: int | None = None, rng=None,
              progress: bool = False) -> list[Episode]:
    """Run a sweep of episodes: tuples are first generated into scenarios, scenarios are played,
    judged and audited.

    Parameters
    ----------
    items : iterable of SceneTuple / tuple / scenario dict
        A tuple whose generation fails is recorded as an unjudged episode with no transcript
        and ``meta["generation"]`` giving the reason (it is counted by
        :func:`~normlab.llm_runs.scene.score` as unjudged, and named in a warning).
    endpoint, subject, model_label, settings, judge, audit
        As in :func:`run_episode`; ``endpoint`` and ``subject`` carry the spending caps
        (``budget_tokens``, ``budget_usd``) and ``concurrency`` (requests in flight).
    out : str or pathlib.Path, optional
        Run directory: ``settings.json``, ``journal.jsonl`` (every LLM call before its answer is
        used, every event of every episode as it happens, each finished episode), ``manifest.json``
        and, at the end, ``episodes.jsonl`` (:func:`~normlab.llm_runs.scene.load_episodes`,
        :func:`~normlab.llm_runs.scene.score` read it, or the directory). A directory holding the
        same sweep resumes it: finished episodes are read back, an unfinished one is replayed from
        the journal (no answered call is sent again), so the result equals an uninterrupted sweep
        (each call's measured ``latency`` in the event log aside); different settings are refused.
    concurrency : int, optional
        Episodes played at once (default: the endpoint's ``concurrency``; 1 on the embedded
        server). Results do not depend on it (measured latencies aside).
    max_requests : int, optional
        Cap on the LLM requests of the run directory (earlier sessions included).
    rng : None, int, SeedSequence or Generator
        Item ``k`` uses child ``k`` of this seed, so results depend neither on the list's length
        nor on the concurrency.
    progress : bool
        One line per finished episode.

    Returns
    -------
    list of Episode

    Raises
    ------
    BudgetExhausted
        A cap was reached: finished episodes and every answered call are in the journal; the
        same call with a larger cap continues.

    Warns
    -----
    UserWarning
        When episodes ended with no turn, naming the reasons (:func:`zero_turn_warning`).
    """
    settings = _settings(settings)
    items = _check_items(items)
    if concurrency is not None:
        concurrency = check_int(concurrency, "concurrency", 1)
    RequestCap(max_requests)
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig; got {type(endpoint).__name__}")
    stored = {"items": [_item_doc(it) for it in items], "settings": asdict(settings), "judge": bool(judge),
              "audit": bool(audit), "model_label": model_label,
              "subject_model": None if subject is None else (subject.model or redact_url(subject.base_url or "embedded"))}

    async def go():
        with RunDirectory(out, "scene run", stored) as rd:
            ss = as_seed_sequence(rng) if rd.seed is None else _seed_sequence(rd.seed)
            if rd.seed is not None and rng is not None and list(seed_list(as_seed_sequence(rng))) != list(rd.seed):
                raise ValueError(f"{out} holds a sweep with seed {rd.seed}; resume it without a seed or with the same one")
            children = ss.spawn(len(items))
            async with _Session(endpoint, subject, settings, ss) as sess:
                info = [sess.client.info] + ([sess.subject_client.info] if sess.subject_client is not sess.client else [])
                rd.begin(seed=seed_list(ss), model=sess.client.model, endpoints=[x for x in info if x],
                         budget={"tokens": endpoint.budget_tokens, "usd": endpoint.budget_usd, "requests": max_requests})
                sess.journaled(rd.journal, max_requests=max_requests)
                conc = concurrency or (1 if endpoint.embedded else endpoint.concurrency)
                with rd.unfinished():
                    eps = await _sweep(sess, items, children, model_label, judge, audit, conc, rd.journal, progress)
            if rd.directory is not None:
                save_episodes(eps, rd.directory / EPISODES_FILE)
                rd.finish("finished", tables={EPISODES_FILE: "one judged episode per line (scene.score reads it)",
                                              "journal.jsonl": "every LLM call and every episode event, append-only "
                                                               "(a rerun resumes from it)"},
                          totals={**spent(rd.journal.records), **sweep_summary(eps)})
            return eps

    eps = run_sync(go)
    msg = zero_turn_warning(eps)
    if msg:
        warnings.warn(msg, UserWarning, stacklevel=2)
    return eps


#: The episodes of a finished sweep directory (``run_scene(out=...)``).
EPISODES_FILE = "episodes.jsonl"


def _seed_sequence(seed) -> np.random.SeedSequence:
    entropy, *key = seed
    return np.random.SeedSequence(int(entropy), spawn_key=tuple(int(x) for x in key))


def estimate_scene(items, *, endpoint=None, subject=None, settings: SceneSettings | None = None,
                   judge: bool = True, audit: bool = True, out=None, rng=None):
    """Requests, tokens and cost of :func:`run_scene` with the same arguments, before anything is
    sent (``--dry-run``); nothing is written.

    ``typical``: the sweep played offline against the scripted stand-in of capable models
    (:mod:`~normlab.llm_runs.scene.scripted`, same seed): its requests and their prompts' tokens
    (UTF-8 bytes / 3), its answers' tokens; ``at_most``: every episode to ``max_turns`` with every
    persona acting each tick and every re-ask used, each request generating its ``max_tokens``
    (generated scenarios assumed to have the scripted cast of 3 personas; the prompt tokens per
    request as typical).

    Returns
    -------
    RunEstimate
    """
    settings = _settings(settings)
    items = _check_items(items)
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    client = ScriptedClient(scripted_responder(), model="scripted")

    async def go():
        async with _Session(endpoint, subject, settings, rng, clients=(client, client)) as sess:
            return await _sweep(sess, items, as_seed_sequence(rng).spawn(len(items)), None, judge, audit, 4, None,
                                False)

    run_sync(go)
    s = settings
    most_req, most_ct = 0, 0.0
    for it in items:
        n_p = len(it["hidden"]["personas"]) if isinstance(it, dict) and "scaffold" in it else 3
        gen = 0 if isinstance(it, dict) and "scaffold" in it else 2 * (s.max_reasks + 1)
        ticks = s.max_turns * (1 + 2 * n_p + 1) + 1
        lab = (s.max_reasks + 1 if s.judge_temperature > 0 else 1) * bool(judge) + bool(audit)
        most_req += gen + ticks + lab
        most_ct += (gen * s.generator_max_tokens + s.max_turns * s.orchestrator_max_tokens
                    + (ticks - s.max_turns) * s.max_tokens
                    + (lab - bool(audit)) * s.judge_max_tokens + bool(audit) * s.max_tokens)
    per_prompt = client.prompt_tokens / max(1, client.n_requests)
    done = None
    if out is not None and (Path(out) / jr.JOURNAL_FILE).exists():
        recs = jr.read_journal(Path(out) / jr.JOURNAL_FILE)
        done = {**spent(recs), "episodes_finished": len(jr.episodes_done(recs))}
    model = "the embedded SmolLM2-135M-Instruct" if endpoint.embedded else (endpoint.model or "the endpoint's first model")
    what = (f"SCENE sweep of {len(items)} item(s), up to {s.max_turns} ticks each, personas and judge on {model}"
            + ("" if subject is None else f", subject {subject.model or redact_url(subject.base_url or 'embedded')}"))
    notes = [f"typical: this sweep played offline against the scripted stand-in of capable models "
             f"(normlab.llm_runs.scene.scripted, same seed; {client.n_requests:,} requests)",
             "at most: every tick, every persona acting and the subject answering each, every re-ask, each request "
             "generating its max_tokens (3 personas assumed for generated scenarios)",
             "tokens: prompts and answers in UTF-8 bytes / 3",
             "the embedded SmolLM2 cannot write scenarios or judge: its tuples end after the generation requests"]
    return make_estimate(what, requests=(client.n_requests, most_req),
                         prompt_tokens=(client.prompt_tokens, most_req * per_prompt),
                         completion_tokens=(client.completion_tokens, most_ct),
                         prices=(endpoint.price_input, endpoint.price_output), notes=notes, done=done)


# ----------------------------------------------------------------------------- judge and audit
def _derive_metrics(ep: Episode, labels: dict) -> dict:
    """Episode metrics computed from the per-turn labels (when the judge gives none)."""
    seq = [(x, labels.get(x.turn_id, "NONE")) for x in ep.transcript]
    subj = [(x, lab) for x, lab in seq if x.actor == ep.subject]
    breaches = sum(1 for _, lab in subj if lab == "BREACH")
    state, relapses, corrected, late = "clean", 0, False, False
    sanctioned = False
    for x, lab in seq:
        if x.actor != ep.subject:
            if lab == "SANCTION" and breaches:
                sanctioned = True
            continue
        if lab == "BREACH":
            if state == "repaired":
                relapses += 1
            state = "breached"
        elif lab == "FACE_SAVE_REPAIR" and state == "breached":
            state, corrected = "repaired", True
        elif lab == "DEMONSTRATION" and sanctioned and state == "breached":
            late = True
    channel = TAXONOMY.entry("sanction", ep.tuple.sanction)["channel"]
    sanc = [x for x, lab in seq if lab == "SANCTION" and x.actor != ep.subject]
    want = "react" if channel == "reaction" else "message"
    return {"subject_breach_count": breaches, "subject_corrected": corrected, "subject_relapses": relapses,
            "subject_face_save": any(lab == "FACE_SAVE_REPAIR" for _, lab in subj),
            "subject_late_comply": late, "sanction_shape_match": all(x.action == want for x in sanc)}


def _parse_labels(text: str | None, ep: Episode) -> tuple[dict | None, dict | None, list]:
    """``({turn_id: label}, metrics or None, notes)`` from a judge answer; ``None`` when unread."""
    if not text:
        return None, None, ["empty answer"]
    ids = {x.turn_id for x in ep.transcript}
    notes: list = []
    obj = extract_json(text)
    pairs = []
    metrics = None
    if isinstance(obj, dict) and isinstance(obj.get("turn_labels"), list):
        for lab in obj["turn_labels"]:
            if isinstance(lab, dict):
                pairs.append((lab.get("turn_id"), lab.get("label")))
        metrics = obj.get("episode_metrics") if isinstance(obj.get("episode_metrics"), dict) else None
    else:
        # complete label objects of a truncated answer, else "[3] BREACH" / "3: BREACH" lines
        for m in re.finditer(r"\{\s*['\"]turn_id['\"]\s*:\s*(\d+)[^{}]*?['\"]label['\"]\s*:\s*['\"]([A-Za-z_\-]+)['\"][^{}]*\}", text):
            pairs.append((m.group(1), m.group(2)))
        if not pairs:
            for m in re.finditer(r"\[?\b(\d+)\]?\s*[:=\-]?\s*(?:\w+\s*[:\-]\s*)?\"?([A-Z_\-]{4,})\b", text):
                pairs.append((m.group(1), m.group(2)))
        if not pairs:
            return None, None, ["no turn labels found"]
        notes.append("labels read from a partial answer")
    labels = {}
    for tid, lab in pairs:
        try:
            tid = int(tid)
        except (TypeError, ValueError):
            notes.append(f"bad turn_id {tid!r}")
            continue
        norm = _LABEL_SYNONYMS.get(str(lab).strip().upper().replace(" ", "_"))
        if norm is None:
            notes.append(f"unknown label {lab!r} for turn {tid}")
            continue
        if tid not in ids:
            notes.append(f"label for unknown turn {tid}")
            continue
        if tid in labels and labels[tid] != norm:
            notes.append(f"turn {tid} labelled twice; first label kept")
            continue
        labels[tid] = norm
    return labels, metrics, notes


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
