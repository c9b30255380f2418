"""A scripted stand-in for a capable model on CRSEC's Appendix-B prompts (not a language model).

:func:`scripted_answer` reads one request of :class:`~normlab.llm_runs.crsec.LLMOperations`
(which prompt it is, and its fields: the agent, the observation, the qualified norms, ...) and
answers in the format the prompt asks for, deciding as
:class:`~normlab.llm_runs.crsec.RuleOperations` does (keyword rules of the topic table and the
agents' coded preferences; its Bernoulli choices drawn from the request's seed). It lets the whole
LLM path -- prompts, endpoint, journal, parsing, sanity checks, synthesis, plans and actions --
run end to end offline: served by :class:`~normlab.llm_runs.testing.StubServer` (``scripted=
"crsec"``, or ``python -m normlab.llm_runs.testing --scripted crsec``) it is a local endpoint, and
``--dry-run`` counts the requests a run makes of a model that answers like it. Its numbers say
that the machinery works, nothing about any language model: the embedded SmolLM2-135M cannot do
these tasks (it echoes the prompts instead of writing norms).

References
----------
S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
Architecture", IJCAI 2024, Appendix B, Figs. B1-B12 (the prompts answered here).
"""

from __future__ import annotations

import json
import random
import re

from ..core.stub import register_scripted
from .operations import RuleOperations
from .records import NormRecord
from .topics import classify_type, load_agents, load_topics

__all__ = ["scripted_answer", "responder", "PROMPT_MARKERS"]

#: How each prompt of ``prompts/`` is recognised in a request (first match wins).
PROMPT_MARKERS = (
    ("create_norms", "TASK: generate"),
    ("abstract", "TASK: [Synthesis]"),
    ("classify", "TASK: Categorize QUALIFIED PERSONAL NORMS"),
    ("check_consistency", "[Fact Consistency Check]"),
    ("check_duplication", "[Duplicate Check]"),
    ("check_type", "[Type Accuracy Check]"),
    ("check_conflict", "Check for conflicts between the NORMATIVE INFO"),
    ("detect_conflict", "detect whether there is a conflict"),
    ("decide_to_talk", "Decide whether to have a conversation"),
    ("identify", "Step 1: Based on the INPUT"),
    ("act", "describe actions in 5 min increments"),
    ("plan", "generate a plan today"),
    ("converse", "Write a short conversation"),
    ("generate_thought", "Write one sentence"),
)


def _line(text: str, key: str) -> str:
    """The rest of the line after the last ``key`` ("" when absent; the prompts' examples come first)."""
    return text.rsplit(key, 1)[1].split("\n", 1)[0].strip() if key in text else ""


def _norms(listing: str) -> list[NormRecord]:
    """``1. text 2. text`` (the prompts' norm lists; ``NONE``: empty) as norm records."""
    listing = listing.strip()
    if not listing or listing == "NONE":
        return []
    parts = [p.strip() for p in re.split(r"(?:^|\s)\d+\.\s", listing) if p.strip()]
    out = []
    for k, c in enumerate(parts, 1):
        out.append(NormRecord(id=k, content=c, utility=50.0, type=classify_type(c) or "injunctive",
                              activated=True, valid=True))
    return out


class _Scripted:
    def __init__(self, topics=None, agents=None, p_talk=0.5, p_identify=0.6, p_recheck=0.2):
        self.table = load_topics(topics)
        self.agents = {a["name"]: a for a in (load_agents() if agents is None else agents)}
        self.p = (p_talk, p_identify, p_recheck)

    def ops(self, seed) -> RuleOperations:
        return RuleOperations(self.table, names=tuple(self.agents), p_talk=self.p[0], p_identify=self.p[1],
                              p_recheck=self.p[2], rng=random.Random(seed).getrandbits(63))

    def agent(self, system: str) -> dict:
        m = re.match(r"You are (.+?)\.(?:\s|$)", system)
        name = m.group(1) if m else ""
        return self.agents.get(name, {"name": name, "description": system, "preferences": {}})

    def answer(self, body: dict) -> str:
        msgs = body.get("messages") or []
        system = next((m.get("content") or "" for m in msgs if m.get("role") == "system"), "")
        user = next((m.get("content") or "" for m in reversed(msgs) if m.get("role") == "user"), "")
        kind = next((k for k, marker in PROMPT_MARKERS if marker in user), None)
        ops = self.ops(body.get("seed"))
        if kind == "create_norms":
            n = int(re.search(r"generate (\d+) norms", user).group(1))
            norms = ops.create_norms(self.agent(system), n)
            return json.dumps({f"norm_{k}": {"ID": k, "type": t, "content": c, "utility": u, "activation_state": True,
                                             "validity_state": True} for k, (c, t, u) in enumerate(norms, 1)})
        if kind == "detect_conflict":
            ok = ops.detect_conflict(self.agent(system), _line(user, "OBSERVATION:"),
                                     _norms(_line(user, "QUALIFIED PERSONAL NORMS:")))
            return "yes" if ok else "no"
        if kind == "decide_to_talk":
            if "entrepreneur" in _line(user, "IDENTITY:") and "ordinary" not in _line(user, "IDENTITY:"):
                return "yes"
            return "yes" if ops.rng.random() < ops.p_talk else "no"
        if kind == "converse":
            m = re.match(r"(.+?) noticed: (.+?)\. This conflicts with .+?'s personal norms: (.+?)\.\nWrite", user, re.S)
            if not m:
                return ""
            sender, observation, listing = m.groups()
            receiver = _line(user, "talks to ").rsplit(" about it", 1)[0]
            return ops.converse({"name": sender}, receiver, observation, _norms(listing)) or \
                f"{sender}: Hello, {receiver}.\n{receiver}: Hello."
        if kind == "generate_thought":
            thought = ops.generate_thought(self.agent(system), _line(user, "OBSERVATION:"))
            name = self.agent(system)["name"] or "I"
            return thought or f"{name} notices nothing unusual."
        if kind == "identify":
            kind_text = re.search(r"INPUT \((conversation|thought)\): (.*?)\nNORM DEFINITION:", user, re.S)
            if not kind_text:
                return "No"
            found = ops.identify({}, kind_text.group(2), "chat" if kind_text.group(1) == "conversation" else "thought")
            if not found:
                return "No"
            c, t, u = found[0]
            return json.dumps({"content": c, "type": t, "utility": u})
        if kind in ("check_consistency", "check_duplication", "check_conflict", "check_type"):
            m = re.search(r'INPUT: "type": "(\w+)", "content": "(.*)"', user) if kind == "check_type" else None
            content = m.group(2) if m else _line(user, "NORMATIVE INFO:")
            ntype = m.group(1) if m else (classify_type(content) or "injunctive")
            norm = NormRecord(id=0, content=content, utility=50.0, type=ntype)
            if kind == "check_consistency":
                return "YES" if ops.check_consistency(norm, _line(user, "RELATED_CHAT_THOUGHT:")) else "NO"
            if kind == "check_type":
                if ops.check_type(norm):
                    return "correct"
                return "descriptive" if ntype == "injunctive" else "injunctive"
            qual = _norms(_line(user, "QUALIFIED PERSONAL NORMS:"))
            if kind == "check_duplication":
                return "NO" if ops.check_duplication(norm, qual) else "YES"
            return "Answer: NO. No entry is opposite." if ops.check_conflict(norm, qual) else \
                "Answer: YES. An entry is the opposite."
        if kind == "classify":
            qual = _norms(_line(user, "QUALIFIED PERSONAL NORMS:"))
            out = []
            for theme, members in ops.classify(qual):
                out.append(theme + " " + " ".join(f"{n.id}." for n in members))
            return " ".join(out)
        if kind == "abstract":
            subset = user.rsplit("QUALIFIED NORM SUBSET:", 1)[-1].split("\nOUTPUT:", 1)[0].strip()
            m = re.match(r"(\[[^\]]+\])\s*(.*)$", subset, re.S)
            theme, listing = (m.group(1), m.group(2)) if m else ("[norms]", subset)
            members = _norms(listing)
            if not members:
                return "ABSTRACT:"
            content, ntype, _ = ops.abstract(theme, members)
            return f"ABSTRACT: {content}\nTYPE: {ntype}\nWEIGHTS: " + ", ".join("1" for _ in members)
        if kind == "plan":
            items = ops.plan(self.agent(system), _norms(_line(user, "QUALIFIED PERSONAL NORMS:")))
            items = items or ["spend the afternoon reading at Hobbs Cafe"]  # nothing the norms bear on
            return "\n".join(f"{k}) {x}" for k, x in enumerate(items, 1))
        if kind == "act":
            plan = [x.strip() for x in _line(user, "CURRENT PLAN:").split(";") if x.strip()]
            items = ops.act(self.agent(system), plan, _norms(_line(user, "QUALIFIED PERSONAL NORMS:")))
            return "\n".join(f"{k}. {x}" for k, x in enumerate(items, 1))
        return "No"


def responder(*, topics=None, agents=None, p_talk: float = 0.5, p_identify: float = 0.6, p_recheck: float = 0.2):
    """``responder(body) -> str`` answering every CRSEC prompt (see the module docstring); the
    probabilities are those of :class:`~normlab.llm_runs.crsec.RuleOperations`."""
    s = _Scripted(topics, agents, p_talk, p_identify, p_recheck)
    return s.answer


def scripted_answer(body: dict) -> str:
    """The scripted answer to one request body (built-in Hobbs Cafe agents and topics)."""
    return _default()(body)


_DEFAULT = []


def _default():
    if not _DEFAULT:
        _DEFAULT.append(responder())
    return _DEFAULT[0]


register_scripted("crsec", responder)  # StubServer(scripted="crsec"), --scripted crsec
