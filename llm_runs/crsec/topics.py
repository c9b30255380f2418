"""Topic and stance of a free-text norm, observation or chat (keyword rules kept as data).

The Hobbs Cafe scenario of CRSEC [1]_ revolves around three standards of behaviour -- no smoking
indoors, being quiet in public, tipping after meals -- on which the agents' descriptions conflict.
:func:`classify_text` maps a text to ``(topic, stance)``: the topic whose keywords occur most, and
the stance ``+1`` (supports the standard), ``-1`` (the opposite) or ``0`` (unclear), from weighted
votes of the topic's ``pro`` (weight 2) and ``anti`` (weight 1) words, each flipped by a negation
within three words. The rules live in ``data/topics.json``; pass your own table for another
scenario. The deterministic operations and the adoption analysis both use it.

References
----------
.. [1] S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
   Architecture", IJCAI 2024, §3.1, §3.2 and Appendix A.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

from normlab.user_files import read_user_json

_WORD = re.compile(r"[a-z][a-z'\-]*")


@lru_cache(maxsize=None)
def _builtin(name: str) -> dict:
    with resources.files("normlab.llm_runs.crsec.data").joinpath(name).open(encoding="utf-8") as fh:
        return json.load(fh)


def load_topics(topics=None) -> dict:
    """The topic table: the built-in Hobbs Cafe table (``None``), a dict, or a JSON file path."""
    if topics is None:
        return _builtin("topics.json")
    if isinstance(topics, dict):
        table = topics
    else:
        table = read_user_json(topics, f"topic table {topics}")  # a regular file, capped in size and depth
    if not isinstance(table, dict) or not isinstance(table.get("topics"), dict) or not table["topics"]:
        raise ValueError("a topic table needs a non-empty 'topics' object (see data/topics.json)")
    for name, t in table["topics"].items():
        for key in ("keywords", "pro", "anti"):
            if not isinstance(t.get(key), list):
                raise ValueError(f"topic {name!r} needs a list {key!r}")
    return table


def load_agents(path=None) -> list[dict]:
    """Agent descriptions of the CRSEC experiment (Appendix A) or of a JSON file of the same layout.

    Each agent is ``{"name", "entrepreneur", "description", "preferences": {topic: -1 | 0 | 1}}``.
    """
    if path is None:
        data = _builtin("agents.json")
    else:
        data = read_user_json(path, f"agents file {path}")
    agents = data.get("agents") if isinstance(data, dict) else data
    if not isinstance(agents, list) or not agents:
        raise ValueError("agents must be a non-empty list of {'name', 'description', ...} objects")
    return [dict(a) for a in agents]


def _tokens(text: str) -> list[str]:
    return [w.strip("'-") for w in _WORD.findall(text.lower())]


def _match(token: str, word: str) -> bool:
    return token == word or (word.endswith("-") is False and token.startswith(word) and len(word) >= 5)


def classify_text(text: str, topics=None) -> tuple[str | None, int]:
    """``(topic, stance)`` of a text under a topic table (:func:`load_topics`).

    Parameters
    ----------
    text : str
    topics : dict or path, optional
        Default: the Hobbs Cafe table (smoking, noise, tipping).

    Returns
    -------
    (str or None, int)
        Topic name (``None`` when no keyword occurs) and stance in {-1, 0, +1}.

    Examples
    --------
    >>> classify_text("No smoking indoors.")
    ('smoking', 1)
    >>> classify_text("Do not tip after meals.")
    ('tipping', -1)
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str; got {type(text).__name__}")
    table = load_topics(topics)
    low = text.lower()
    hits = {}
    for name, t in table["topics"].items():
        n = sum(low.count(k) for k in t["keywords"])
        if n:
            hits[name] = n
    if not hits:
        return None, 0
    topic = max(hits, key=lambda k: hits[k])  # first topic in table order wins ties
    t = table["topics"][topic]
    neg = set(table.get("negations", ()))
    toks = _tokens(text)
    score = 0
    for i, tok in enumerate(toks):
        if any(tok == w for w in t["pro"]):
            w = 2
        elif any(tok == w for w in t["anti"]):
            w = -1
        else:
            continue
        window = toks[max(0, i - 3):i] + toks[i + 1:i + 4]
        if any(x in neg or x.endswith("n't") for x in window):
            w = -w
        score += w
    return topic, (score > 0) - (score < 0)


def classify_type(content: str, topics=None) -> str | None:
    """Expected type of a norm text from the table's cue words: ``injunctive`` when an injunctive
    cue (should, must, not allowed, imperative ``be``/``keep``...) occurs, else ``descriptive``
    when a descriptive cue (usually, people, ...) occurs, else ``None`` (undecided)."""
    table = load_topics(topics)
    low = " " + re.sub(r"\s+", " ", content.lower()) + " "
    for kind in ("injunctive", "descriptive"):
        for cue in table.get(f"{kind}_cues", ()):
            if re.search(r"(?<![a-z])" + re.escape(cue.strip()) + r"(?![a-z])", low):
                return kind
    return None
