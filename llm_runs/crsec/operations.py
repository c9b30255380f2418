"""The LLM-based operations of CRSEC as an interface, and a deterministic rule-based implementation.

:class:`NormOperations` names every operation of §2 of [1]_ (Creation, Spreading, Evaluation,
Compliance). Two implementations share it: :class:`RuleOperations` (this module: keyword rules of
:mod:`~normlab.llm_runs.crsec.topics` and the agents' coded preferences, no model, reproducible
from a seed) and :class:`~normlab.llm_runs.crsec.llm_operations.LLMOperations` (the prompts of
Appendix B, any OpenAI-compatible endpoint). Methods may be plain or ``async``.

Agents are dicts ``{"name", "entrepreneur", "description", "preferences": {topic: -1|0|1}}``
(:func:`~normlab.llm_runs.crsec.topics.load_agents`); norm texts are ``(content, type, utility)``.

References
----------
.. [1] S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
   Architecture", IJCAI 2024, §2.1-§2.4 and Appendix B (Figs. B1-B12).
"""

from __future__ import annotations

import re

from normlab._rng import as_generator

from .records import NormRecord
from .topics import classify_text, classify_type, load_topics


class NormOperations:
    """Interface of the CRSEC operations (override all; see :class:`RuleOperations`).

    Creation: ``create_norms(agent, n)`` (CreateNorm, Fig. B1). Spreading: ``detect_conflict(agent,
    observation, qualified)`` and ``decide_to_talk(agent)`` (Fig. B2), ``converse(sender, receiver,
    observation, qualified)`` (the chat), ``generate_thought(agent, observation)`` and
    ``identify(agent, text, kind)`` (IdentifyNormativeInformation, Figs. B3-B4). Evaluation:
    ``check_consistency(norm, text)``, ``check_duplication(norm, qualified)``,
    ``check_type(norm)``, ``check_conflict(norm, qualified)`` (Figs. B5-B8; True = the step is
    passed), ``check_names(norm)`` (published code -4), ``classify(qualified)`` and
    ``abstract(theme, norms)`` (Figs. B9-B10). Compliance: ``plan(agent, qualified)`` and
    ``act(agent, plan, qualified)`` (Figs. B11-B12), returning lists of behaviour texts.
    """

    names: tuple = ()

    def _abstract(self, name):  # pragma: no cover - documentation helper
        raise NotImplementedError(f"{type(self).__name__} does not implement {name}")

    def create_norms(self, agent, n):
        self._abstract("create_norms")

    def detect_conflict(self, agent, observation, qualified):
        self._abstract("detect_conflict")

    def decide_to_talk(self, agent):
        self._abstract("decide_to_talk")

    def converse(self, sender, receiver, observation, qualified):
        self._abstract("converse")

    def generate_thought(self, agent, observation):
        self._abstract("generate_thought")

    def identify(self, agent, text, kind):
        self._abstract("identify")

    def check_consistency(self, norm, text):
        self._abstract("check_consistency")

    def check_duplication(self, norm, qualified):
        self._abstract("check_duplication")

    def check_type(self, norm):
        self._abstract("check_type")

    def check_conflict(self, norm, qualified):
        self._abstract("check_conflict")

    def check_names(self, norm):
        """Published code -4: the norm names a known agent (True = it does not)."""
        low = norm.content.lower()
        for full in self.names:
            for part in str(full).lower().split():
                if len(part) > 2 and re.search(r"(?<![a-z])" + re.escape(part) + r"(?![a-z])", low):
                    return False
        return True

    def classify(self, qualified):
        self._abstract("classify")

    def abstract(self, theme, norms):
        self._abstract("abstract")

    def plan(self, agent, qualified):
        self._abstract("plan")

    def act(self, agent, plan, qualified):
        self._abstract("act")


def _norm_key(norm, topics) -> tuple:
    return classify_text(norm.content if isinstance(norm, NormRecord) else norm, topics)


def _normalise(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).strip()


class RuleOperations(NormOperations):
    """Deterministic CRSEC operations from keyword rules (no model), reproducible from ``rng``.

    The judgements are functions of the texts (:func:`~normlab.llm_runs.crsec.topics.classify_text`
    gives a text's topic and stance); the three behavioural choices that the paper leaves to the
    agent's autonomy are Bernoulli draws from ``rng``: whether an ordinary agent talks about a
    conflict (``p_talk``), whether a receiver's reflection recognises the normative information
    (``p_identify``), and whether an action re-checks the plan against newly qualified norms
    (``p_recheck``; otherwise the action follows the plan made earlier -- the lag between belief
    and behaviour of Appendix D). Thoughts arise only when an agent whose description opposes a
    behaviour sees it (IdentifyNormativeInformation looks for norms that prevent conflicts, Fig. B4).

    Parameters
    ----------
    topics : dict or path, optional
        Topic table (default: the Hobbs Cafe table).
    names : sequence of str
        Agent names for the ``names_agent`` step.
    p_talk, p_identify, p_recheck : float
        Probabilities in [0, 1].
    rng : None, int, SeedSequence or Generator

    Rules
    -----
    - consistency: the norm's topic keywords occur in the source text (no topic: two shared words
      of four letters or more);
    - duplication: a qualified norm has the same topic and stance, or the same normalised text;
    - type: the type agrees with :func:`~normlab.llm_runs.crsec.topics.classify_type` (undecided
      texts pass);
    - conflict: a qualified norm has the same topic and the opposite stance;
    - plan: the compliant behaviour of each topic with a qualified norm (the counter-behaviour for
      a counter-norm), and the habits of the description against the standard where no norm is
      held (agents plan nothing about standards they neither hold nor breach);
    - classify: one category per topic (unlabelled norms each alone); abstract: the topic's
      abstract norm for the members' majority stance, equal weights.

    References
    ----------
    Ren et al., IJCAI 2024, §2.1-§2.4.
    """

    def __init__(self, topics=None, *, names=(), p_talk: float = 0.5, p_identify: float = 0.6,
                 p_recheck: float = 0.2, rng=None):
        for nm, p in (("p_talk", p_talk), ("p_identify", p_identify), ("p_recheck", p_recheck)):
            if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
                raise ValueError(f"{nm} must be a probability in [0, 1]; got {p!r}")
        self.table = load_topics(topics)
        self.topics = self.table["topics"]
        self.names = tuple(names)
        self.p_talk, self.p_identify, self.p_recheck = float(p_talk), float(p_identify), float(p_recheck)
        self.rng = as_generator(rng)

    # ------------------------------------------------------------ helpers
    def _stance_norm(self, topic, stance, k=0):
        side = "pro" if stance > 0 else "anti"
        items = self.topics[topic]["norms"][side]
        content, ntype, utility = items[k % len(items)]
        return content, ntype, float(utility)

    def _held(self, qualified, topic):
        """Stance of the agent's qualified norms on ``topic`` (0: none or mixed)."""
        s = {classify_text(n.content, self.table)[1] for n in qualified
             if classify_text(n.content, self.table)[0] == topic}
        s.discard(0)
        return s.pop() if len(s) == 1 else 0

    # ------------------------------------------------------------ creation
    def create_norms(self, agent, n):
        prefs = agent.get("preferences", {})
        out = []
        k = 0
        while len(out) < n and k < 4:
            for topic in self.topics:
                s = prefs.get(topic, 0)
                if s and len(out) < n:
                    items = self.topics[topic]["norms"]["pro" if s > 0 else "anti"]
                    if k < len(items):
                        out.append(self._stance_norm(topic, s, k))
            k += 1
        return out

    # ------------------------------------------------------------ spreading
    def detect_conflict(self, agent, observation, qualified):
        topic, stance = classify_text(observation, self.table)
        if topic is None or stance == 0:
            return False
        held = self._held(qualified, topic)
        return held != 0 and held != stance

    def decide_to_talk(self, agent):
        return bool(agent.get("entrepreneur")) or bool(self.rng.random() < self.p_talk)

    def converse(self, sender, receiver, observation, qualified):
        topic, stance = classify_text(observation, self.table)
        norm = next((n for n in qualified if classify_text(n.content, self.table) == (topic, -stance)), None)
        if norm is None:
            return ""
        return (f"{sender['name']}: Excuse me, {receiver}. {norm.content}\n"
                f"{receiver}: I see, thank you for telling me.")

    def generate_thought(self, agent, observation):
        topic, stance = classify_text(observation, self.table)
        if topic is None or stance == 0:
            return None
        pref = agent.get("preferences", {}).get(topic, 0)
        if stance > 0 or pref <= 0:
            return None  # only a breach of the standard seen by an agent who dislikes it is thought about
        return f"{agent['name']} notices: {self.topics[topic]['thoughts']['pro']}"

    def identify(self, agent, text, kind):
        if not text:
            return []
        topic, stance = classify_text(text, self.table)
        if topic is None or stance == 0:
            return []
        if kind == "chat" and self.rng.random() >= self.p_identify:
            return []
        return [self._stance_norm(topic, stance)]

    # ------------------------------------------------------------ evaluation
    def check_consistency(self, norm, text):
        text = text or ""
        topic, _ = _norm_key(norm, self.table)
        low = text.lower()
        if topic is not None:
            return any(k in low for k in self.topics[topic]["keywords"])
        words = {w for w in re.findall(r"[a-z]{4,}", norm.content.lower())}
        return len(words & set(re.findall(r"[a-z]{4,}", low))) >= 2

    def check_duplication(self, norm, qualified):
        key = _norm_key(norm, self.table)
        text = _normalise(norm.content)
        for q in qualified:
            if _normalise(q.content) == text:
                return False
            if key[0] is not None and key[1] != 0 and _norm_key(q, self.table) == key:
                return False
        return True

    def check_type(self, norm):
        expected = classify_type(norm.content, self.table)
        return expected is None or expected == norm.type

    def check_conflict(self, norm, qualified):
        topic, stance = _norm_key(norm, self.table)
        if topic is None or stance == 0:
            return True
        return not any(_norm_key(q, self.table) == (topic, -stance) for q in qualified)

    def classify(self, qualified):
        groups: dict = {}
        for n in qualified:
            topic, _ = _norm_key(n, self.table)
            groups.setdefault(topic if topic is not None else f"norm {n.id}", []).append(n)
        return [(f"[{k} related]" if k in self.topics else f"[{k}]", v) for k, v in groups.items()]

    def abstract(self, theme, norms):
        topic = theme.strip("[]").replace(" related", "")
        stances = [classify_text(n.content, self.table)[1] for n in norms]
        side = "pro" if sum(stances) >= 0 else "anti"
        if topic in self.topics:
            content, ntype = self.topics[topic]["abstract"][side]
        else:
            content, ntype = norms[0].content, norms[0].type
        return content, ntype, None

    # ------------------------------------------------------------ compliance
    def plan(self, agent, qualified):
        prefs = agent.get("preferences", {})
        out = []
        for topic, t in self.topics.items():
            held = self._held(qualified, topic)
            if held:  # a plan that takes a personal norm into account
                out.append(t["actions"]["pro" if held > 0 else "anti"])
            elif prefs.get(topic, 0) < 0:  # habits against the standard, no norm in mind
                out.append(t["actions"]["anti"])
        return out

    def act(self, agent, plan, qualified):
        out = []
        for item in plan:
            topic, stance = classify_text(item, self.table)
            held = self._held(qualified, topic) if topic else 0
            if held and held != stance and self.rng.random() < self.p_recheck:
                item = self.topics[topic]["actions"]["pro" if held > 0 else "anti"]
            out.append(item)
        return out
