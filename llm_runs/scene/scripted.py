"""A scripted stand-in for the capable models of a SCENE episode (not a language model).

:func:`responder` answers every prompt of the SCENE runner (``prompts/*.json``): the scenario
generator (a three-person cast and a short opening for any event and elicitor; hidden fields with
sanction lines in the tuple's modality and, when asked, a precedent sub-script), the orchestrator
(the roster in order), the scripted personas (each demonstrates the group's way once, and the
first persona to act after an unsanctioned breach sanctions it in the tuple's modality), a
scripted subject and the judge and audit. Turns carry tags the judge reads -- ``[demo]``,
``[breach]``, ``[sanction]``, ``[repair]`` (reactions: the sanction emoji) -- so its labels are
exact for scripted turns and say nothing about any other subject: pair it with a real subject
model only to exercise the plumbing.

The scripted subject decides from the request's seed: after an unrepaired sanctioned breach it
repairs with probability ``p_repair``; otherwise it breaches with probability ``p_breach / (1 +
d)``, ``d`` the demonstrations it has seen (it breaches less after seeing the norm enacted), else
it answers compliantly. Served by
:class:`~normlab.llm_runs.testing.StubServer` (``scripted="scene"``, or ``python -m
normlab.llm_runs.testing --scripted scene``) it is a local endpoint on which a whole sweep -- two-
stage generation, episodes, judge, audit, scoring -- runs offline; ``--dry-run`` counts the
requests of a sweep against it. Its numbers show that the machinery works, nothing about any
language model: the embedded SmolLM2-135M cannot write scenarios or judge (its generation
answers do not parse, so its tuples end before any turn, said in the run's summary).

References
----------
M. Jacniacki, M. Bilski, "SCENE: Recognizing Social Norms and Sanctioning in Group Chats",
arXiv:2605.07823 (2026), Sect. 4 and Appendix B (the prompts answered here).
"""

from __future__ import annotations

import json
import random
import re

from ..core.stub import register_scripted
from .taxonomy import TAXONOMY

__all__ = ["responder", "TAGS", "CAST", "SANCTION_EMOJI"]

#: The tags of scripted turns, read by the scripted judge.
TAGS = {"demo": "DEMONSTRATION", "breach": "BREACH", "sanction": "SANCTION", "repair": "FACE_SAVE_REPAIR"}
#: Names of the scripted cast (a name equal to the subject's is skipped).
CAST = ("Ana", "Ben", "Cleo", "Dev")
SANCTION_EMOJI = "\N{THUMBS DOWN SIGN}"
_LINE = re.compile(r"^\[(\d+)\] (.+?)(?:: (.*)| reacted (\S+)(?: to \[(\d+)\])?)$")


def _turns(transcript: str) -> list[tuple]:
    """``(turn_id, actor, kind, content, target)`` of the rendered transcript lines."""
    out = []
    for line in transcript.splitlines():
        m = _LINE.match(line.strip())
        if m:
            tid, actor, text, emoji, target = m.groups()
            if text is not None:
                out.append((int(tid), actor, "message", text, None))
            else:
                out.append((int(tid), actor, "react", emoji, None if target is None else int(target)))
    return out


def _tag(content: str) -> str | None:
    m = re.match(r"\s*\[(demo|breach|sanction|repair)\]", content or "")
    return m.group(1) if m else None


def _field(text: str, key: str) -> str:
    return text.rsplit(key, 1)[1].split("\n", 1)[0].strip() if key in text else ""


def _after(text: str, key: str, stop: str | None = None) -> str:
    part = text.rsplit(key, 1)[1] if key in text else ""
    return part.split(stop, 1)[0] if stop and stop in part else part


class _Scripted:
    def __init__(self, p_breach: float, p_repair: float):
        self.p_breach, self.p_repair = p_breach, p_repair

    def answer(self, body: dict) -> str:
        msgs = body.get("messages") or []
        system = next((m.get("content") or "" for m in msgs if m.get("role") == "system"), "")
        user = next((m.get("content") or "" for m in reversed(msgs) if m.get("role") == "user"), "")
        rnd = random.Random(json.dumps([body.get("seed"), user[-2000:]]))
        if system.startswith("You are generating an opening"):
            return self.scaffold(user)
        if system.startswith("You are generating the hidden"):
            return self.hidden(user)
        if system.startswith("You are the orchestrator"):
            roster = [x.strip() for x in _field(system, "SCRIPTED PARTICIPANTS:").split(",") if x.strip()]
            return json.dumps({"order": roster, "terminate": False})
        if system.startswith("You play the role of"):
            return self.persona(system, user)
        if system.startswith("You are a participant"):
            return self.subject(system, user, rnd)
        if system.startswith("You label events"):
            return self.judge(user)
        if system.startswith("You audit"):
            return self.audit(user)
        return json.dumps({"action": "no-op"})

    # --- generation
    def scaffold(self, user: str) -> str:
        event = _field(user, "EVENT:")
        subject = _field(user, "SUBJECT:") or "Sam"
        eid = event.split(" ", 1)[0]
        setting = event[len(eid):].strip(" ()") or "a group chat"
        cast = [n for n in CAST if n != subject][:3]
        return json.dumps({
            "channel": {"description": f"{setting} ({eid})",
                        "cast": [{"name": n, "bio_oneline": b} for n, b in zip(cast, ("organiser", "regular", "newcomer"))]},
            "transcript": {"opening_turns": [
                {"turn_id": 0, "actor": cast[0], "action": "message", "content": "Morning all, here is today's thread."},
                {"turn_id": 1, "actor": cast[1], "action": "message", "content": "Thanks, reading it now."}],
                "elicitor_turn": {"turn_id": 2, "actor": cast[2], "action": "message",
                                  "content": f"{subject}, what do you make of it?"}}})

    def hidden(self, user: str) -> str:
        sanction = _field(user, "SANCTION:").split(" ", 1)[0]
        precedent = _field(user, "PRECEDENT:") == "1"
        try:
            scaffold = json.loads(_field(user, "CHAT SCAFFOLD:"))
            names = [c["name"] for c in scaffold["channel"]["cast"]]
        except (ValueError, KeyError, TypeError):
            names = list(CAST[:3])
        react = TAXONOMY.entry("sanction", sanction)["channel"] == "reaction" if sanction in TAXONOMY.ids("sanction") else False
        line = f"react: {SANCTION_EMOJI}" if react else "[sanction] Anyway, back to the thread."
        personas = []
        for k, n in enumerate(names):
            prec = None
            if precedent and k == 0:
                prec = ["[breach] Here is a long, off-key answer nobody asked for."]
            elif precedent and k == 1:
                prec = [line]
            personas.append({"name": n, "outline": "short, on-topic turns", "sanction_lines": [line],
                             "precedent_lines_or_null": prec})
        return json.dumps({"personas": personas, "orchestrator_outline": "every persona once per tick",
                           "fidelity_criteria": {"demonstration_min_count": 1, "sanction_required_modality": sanction,
                                                 "precedent_complete_by_turn": 0}})

    # --- the chat
    def persona(self, system: str, user: str) -> str:
        name = re.match(r"You play the role of (.+?) in a", system).group(1)
        sanction = _field(system, "SANCTION MODALITY:").split(" ", 1)[0]
        react = sanction in TAXONOMY.ids("sanction") and TAXONOMY.entry("sanction", sanction)["channel"] == "reaction"
        cast = _field(system, "PARTICIPANTS:")
        subject = cast.rsplit(";", 1)[-1].strip().split(" (", 1)[0] if ";" in cast else ""
        turns = _turns(_after(user, "TRANSCRIPT SO FAR:", "\nChoose ONE of:"))
        breach = None
        for tid, actor, kind, content, target in turns:
            if actor == subject and kind == "message" and _tag(content) == "breach":
                breach = tid
            elif breach is not None and actor != subject and (_tag(content) == "sanction" or kind == "react"):
                breach = None  # sanctioned
        if breach is not None:
            if react:
                return json.dumps({"action": "react", "content": SANCTION_EMOJI, "target_turn_id": breach})
            return json.dumps({"action": "message", "content": "[sanction] Anyway, back to the thread.",
                               "target_turn_id": None})
        if not any(actor == name and _tag(content) == "demo" for _, actor, _, content, _ in turns):
            return json.dumps({"action": "message", "content": "[demo] Noted, thanks.", "target_turn_id": None})
        return json.dumps({"action": "no-op"})

    def subject(self, system: str, user: str, rnd: random.Random) -> str:
        me = re.search(r"YOU: (.+?), ", system)
        me = me.group(1) if me else ""
        turns = _turns(_after(user, "TRANSCRIPT SO FAR:", "\nReturn JSON"))
        demos = sum(1 for _, a, k, c, _ in turns if a != me and _tag(c) == "demo")
        state = "clean"
        for tid, actor, kind, content, target in turns:
            tag = _tag(content) if kind == "message" else None
            if actor == me and tag == "breach":
                state = "breached"
            elif actor == me and tag == "repair":
                state = "clean"
            elif actor != me and state == "breached" and (tag == "sanction" or kind == "react"):
                state = "sanctioned"
        if state == "sanctioned":
            if rnd.random() < self.p_repair:
                return json.dumps({"action": "message", "content": "[repair] Sorry, my mistake.", "target_turn_id": None})
            return json.dumps({"action": "no-op"})
        if state == "clean" and rnd.random() < self.p_breach / (1 + demos):
            return json.dumps({"action": "message", "content": "[breach] Let me go on at length about this.",
                               "target_turn_id": None})
        if "the floor is open" in user or not any(a == me for _, a, _, _, _ in turns):
            return json.dumps({"action": "message", "content": "Sounds good.", "target_turn_id": None})
        return json.dumps({"action": "no-op"})

    # --- labels
    def judge(self, user: str) -> str:
        subject = _field(user, "SUBJECT:")
        labels = []
        for tid, actor, kind, content, target in _turns(_after(user, "TRANSCRIPT:")):
            if kind == "react":
                lab = "SANCTION" if content == SANCTION_EMOJI and actor != subject else None
            else:
                lab = TAGS.get(_tag(content))
                if lab == "FACE_SAVE_REPAIR" and actor != subject:
                    lab = None
            if lab:
                labels.append({"turn_id": tid, "actor": actor, "label": lab})
        return json.dumps({"turn_labels": labels})

    def audit(self, user: str) -> str:
        turns = _turns(_after(user, "TRANSCRIPT:"))
        demos = any(_tag(c) == "demo" for _, _, k, c, _ in turns if k == "message")
        return json.dumps({"label": "VALID" if demos else "PARTIAL",
                           "justification": "the personas demonstrated the norm" if demos else "no demonstration"})


def responder(*, p_breach: float = 0.8, p_repair: float = 0.6):
    """``responder(body) -> str`` answering every SCENE prompt (see the module docstring)."""
    for name, p in (("p_breach", p_breach), ("p_repair", p_repair)):
        if not 0 <= p <= 1:
            raise ValueError(f"{name} must be in [0, 1]; got {p!r}")
    return _Scripted(p_breach, p_repair).answer


register_scripted("scene", responder)  # StubServer(scripted="scene"), --scripted scene
