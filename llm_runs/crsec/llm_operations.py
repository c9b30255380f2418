"""The CRSEC operations as LLM prompts (Appendix B), through any OpenAI-compatible endpoint.

Every operation of :class:`~normlab.llm_runs.crsec.operations.NormOperations` has a prompt file
``prompts/<operation>.json`` -- ``system`` and ``user`` templates (``$name``-style fields, the
structure of Figs. B1-B12 of [1]_), ``max_tokens`` and the parser of the answer (``yesno``,
``type``, ``json_norm``, ``json_norms``, ``categories``, ``abstract``, ``lines``, ``text``). Unparseable
answers fall back to the safe side (no conflict detected, no talk, no normative information, a
failed check), so a weak model slows emergence down rather than inventing norms.

Use it with a client from :func:`normlab.llm_runs.backend.open_endpoint` (the embedded SmolLM2
server by default); every call sends a seed drawn from ``rng`` (reproducible where the server
honours seeds).

References
----------
.. [1] S. Ren et al., "Emergence of Social Norms in Generative Agent Societies: Principles and
   Architecture", IJCAI 2024, Appendix B, Figs. B1-B12.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from string import Template

from normlab._rng import as_generator

from ..core.journaled import call_context, call_seed, current_context
from .operations import NormOperations
from .records import NormRecord
from .topics import classify_type

PROMPTS = ("create_norms", "detect_conflict", "decide_to_talk", "converse", "generate_thought", "identify",
           "check_consistency", "check_duplication", "check_type", "check_conflict", "classify", "abstract",
           "plan", "act")
PARSERS = ("yesno", "type", "json_norm", "json_norms", "categories", "abstract", "lines", "text")


@lru_cache(maxsize=None)
def load_prompt(name: str) -> dict:
    """The prompt file ``prompts/<name>.json`` (one of :data:`PROMPTS`)."""
    if name not in PROMPTS:
        raise ValueError(f"unknown CRSEC prompt {name!r}; allowed: {PROMPTS}")
    with resources.files("normlab.llm_runs.crsec.prompts").joinpath(f"{name}.json").open(encoding="utf-8") as fh:
        data = json.load(fh)
    for key in ("system", "user", "parse", "max_tokens"):
        if key not in data:
            raise ValueError(f"prompt {name!r} lacks {key!r}")
    if data["parse"] not in PARSERS:
        raise ValueError(f"prompt {name!r}: unknown parser {data['parse']!r}; allowed: {PARSERS}")
    return data


def render(_prompt: str, **fields) -> list[dict]:
    """Chat messages of prompt ``_prompt`` with its ``$fields`` filled in (missing field: KeyError)."""
    p = load_prompt(_prompt)
    return [{"role": "system", "content": Template(p["system"]).substitute(fields)},
            {"role": "user", "content": Template(p["user"]).substitute(fields)}]


# ---------------------------------------------------------------------------- parsers
def parse_yesno(text: str | None, default: bool = False) -> bool:
    """First ``yes``/``no`` word of an answer (``default`` when there is none)."""
    m = re.search(r"\b(yes|no)\b", text or "", re.I)
    return default if m is None else m.group(1).lower() == "yes"


def parse_type_check(text: str | None, current: str) -> bool:
    """CheckType: ``correct`` (or the current type named) -> True; the other type -> False."""
    low = (text or "").lower()
    if "incorrect" in low or "not correct" in low:
        return False
    if "correct" in low:
        return True
    other = "descriptive" if current == "injunctive" else "injunctive"
    if other in low and current not in low:
        return False
    return current in low


_OBJ = re.compile(r"\{[^{}]*\}", re.S)


def _norm_from_obj(obj) -> tuple | None:
    if not isinstance(obj, dict):
        return None
    content = obj.get("content")
    if not isinstance(content, str) or not content.strip():
        return None
    ntype = str(obj.get("type", "")).strip().lower()
    ntype = {"des": "descriptive", "inj": "injunctive"}.get(ntype, ntype)
    if ntype not in ("descriptive", "injunctive"):
        ntype = classify_type(content)  # small models echo "descriptive or injunctive": infer it
        if ntype is None:
            return None
    try:
        u = float(obj.get("utility"))
    except (TypeError, ValueError):
        return None
    if not 1 <= u <= 100:
        return None
    return content.strip(), ntype, u


def parse_norms(text: str | None) -> list[tuple]:
    """Every well-formed ``{"content", "type", "utility"}`` object in an answer, in order; invalid
    ones (utility missing or outside 1-100) are dropped; a type that is neither descriptive nor
    injunctive is inferred from the content's cue words
    (:func:`~normlab.llm_runs.crsec.topics.classify_type`), or the object dropped."""
    out = []
    for m in _OBJ.finditer(text or ""):
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        n = _norm_from_obj(obj)
        if n is not None:
            out.append(n)
    return out


def parse_categories(text: str | None, n: int) -> list[tuple[str, list[int]]]:
    """``[Theme] 1. ... 3. ...`` -> ``[(theme, [0, 2]), ...]`` (0-based indices below ``n``; a norm
    is kept in its first category only)."""
    out, seen = [], set()
    parts = re.split(r"(\[[^\]]+\])", text or "")
    for k in range(1, len(parts) - 1, 2):
        idx = []
        for m in re.finditer(r"(?<![\d.])(\d+)\.", parts[k + 1]):
            i = int(m.group(1)) - 1
            if 0 <= i < n and i not in seen:
                idx.append(i)
                seen.add(i)
        if idx:
            out.append((parts[k], idx))
    return out


def parse_abstract(text: str | None, n: int, default_type: str) -> tuple | None:
    """``ABSTRACT: ... TYPE: ... WEIGHTS: w1, w2`` -> ``(content, type, weights or None)``."""
    m = re.search(r"ABSTRACT:\s*(.+?)(?=\s*(?:TYPE:|WEIGHTS:|$))", text or "", re.S | re.I)
    if not m or not m.group(1).strip():
        return None
    content = m.group(1).strip().splitlines()[0].strip()
    t = re.search(r"TYPE:\s*(descriptive|injunctive)", text, re.I)
    ntype = t.group(1).lower() if t else default_type
    w = re.search(r"WEIGHTS:\s*([0-9.,\s]+)", text, re.I)
    weights = None
    if w:
        vals = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", w.group(1))]
        if len(vals) == n and sum(vals) > 0:
            weights = vals
    return content, ntype, weights


def parse_lines(text: str | None, max_items: int = 8) -> list[str]:
    """Numbered or plain lines of an answer (prefixes such as ``1)``, ``2.`` removed)."""
    out = []
    for line in (text or "").splitlines():
        line = re.sub(r"^\s*(?:\d+[).]|[-*])\s*", "", line).strip()
        if line:
            out.append(line)
    return out[:max_items]


def _echo(line: str) -> bool:
    """A line that repeats a prompt field (``TASK: ...``, ``QUALIFIED PERSONAL NORMS: ...``)
    rather than answering it."""
    return re.match(r"\s*[A-Z][A-Z_ ]{2,}:", line) is not None


def _norm_list(norms) -> str:
    return " ".join(f"{k}. {n.content}" for k, n in enumerate(norms, 1)) or "NONE"


class LLMOperations(NormOperations):
    """CRSEC operations answered by an LLM (prompts of Appendix B as JSON files).

    Parameters
    ----------
    client : LLMClient
        From :func:`normlab.llm_runs.backend.open_endpoint` (inside its ``async with``).
    names : sequence of str
        Agent names for the ``names_agent`` step.
    temperature : float
    max_tokens : dict, optional
        Per-prompt overrides of the files' ``max_tokens`` (e.g. shorter answers on a slow CPU).
    rng : None, int, SeedSequence or Generator
        Source of the per-call seeds.

    Attributes
    ----------
    n_calls : int
        Calls made through ``client`` (inside :func:`run_population` some are answered from the
        run's journal: see :attr:`PopulationRun.calls`).
    transcript : list of (prompt name, user message, answer)
    formats : dict
        Per prompt, ``(answers in the format it asked for, answers)``: a norm that parses, a
        yes/no, lines that are not the prompt's own fields echoed, ... -- what a model that cannot
        do the task fails at.

    References
    ----------
    Ren et al., IJCAI 2024, §2 and Appendix B.
    """

    def __init__(self, client, *, names=(), temperature: float = 0.2, max_tokens: dict | None = None, rng=None):
        if not hasattr(client, "chat"):
            raise TypeError("client must be an LLMClient (from normlab.llm_runs.backend.open_endpoint)")
        if not (isinstance(temperature, (int, float)) and temperature >= 0):
            raise ValueError(f"temperature must be >= 0; got {temperature!r}")
        self.client = client
        self.names = tuple(names)
        self.temperature = float(temperature)
        self.max_tokens = dict(max_tokens or {})
        unknown = set(self.max_tokens) - set(PROMPTS)
        if unknown:
            raise ValueError(f"max_tokens names unknown prompts {sorted(unknown)}; allowed: {PROMPTS}")
        self.rng = as_generator(rng)
        self._base = None
        self._scope_calls: dict = {}
        self.formats: dict = {}
        self.n_calls = 0
        self.transcript: list = []

    def _seed(self) -> int:
        """The call's sampling seed: drawn from ``rng`` in call order, or -- inside a population
        step, where the runner names a scope per agent and phase (:func:`~normlab.llm_runs.core.journaled.call_context`)
        -- from the scope and the call's number within it, whatever order concurrent scopes run in."""
        scope = current_context().get("scope")
        if scope is None:
            return int(self.rng.integers(0, 2**31 - 1))
        if self._base is None:
            self._base = int(self.rng.integers(0, 2**63 - 1))
        k = self._scope_calls.get(scope, 0)
        self._scope_calls[scope] = k + 1
        return call_seed(self._base, scope, k)

    async def _ask(self, _prompt: str, **fields) -> str:
        name = _prompt
        p = load_prompt(name)
        msgs = render(name, **fields)
        seed = self._seed()
        with call_context(purpose=f"crsec:{name}"):
            res = await self.client.chat(msgs, max_tokens=int(self.max_tokens.get(name, p["max_tokens"])),
                                         temperature=self.temperature, seed=seed)
        self.n_calls += 1
        text = res.text or ""
        self.transcript.append((name, msgs[-1]["content"], text))
        return text

    def _format(self, name: str, ok: bool) -> None:
        """Count whether an answer came in the format its prompt asked for (:attr:`formats`)."""
        k, n = self.formats.get(name, (0, 0))
        self.formats[name] = (k + bool(ok), n + 1)

    async def _yesno(self, _prompt, **fields) -> bool:
        p = load_prompt(_prompt)
        text = await self._ask(_prompt, **fields)
        self._format(_prompt, re.search(r"\b(yes|no)\b", text or "", re.I) is not None)
        ans = parse_yesno(text, bool(p.get("default", False)))
        return (not ans) if p.get("invert") else ans

    # ------------------------------------------------------------ creation & spreading
    async def create_norms(self, agent, n):
        text = await self._ask("create_norms", name=agent["name"], description=agent.get("description", ""), n=n)
        out = parse_norms(text)[:n]
        self._format("create_norms", bool(out))
        return out

    async def detect_conflict(self, agent, observation, qualified):
        if not qualified:
            return False  # no personal norms, nothing to conflict with (§2.2)
        return await self._yesno("detect_conflict", name=agent["name"], observation=observation,
                                 norms=_norm_list(qualified))

    async def decide_to_talk(self, agent):
        if agent.get("entrepreneur"):
            return True  # "If you are an entrepreneur, then you SHOULD start a conversation" (Fig. B2)
        return await self._yesno("decide_to_talk", name=agent["name"], identity="ordinary agent",
                                 description=agent.get("description", ""))

    async def converse(self, sender, receiver, observation, qualified):
        text = await self._ask("converse", name=sender["name"], receiver=receiver, observation=observation,
                               norms=_norm_list(qualified))
        self._format("converse", any(": " in x and not _echo(x) for x in text.splitlines()))
        return text.strip()

    async def generate_thought(self, agent, observation):
        text = (await self._ask("generate_thought", name=agent["name"], description=agent.get("description", ""),
                                observation=observation)).strip()
        self._format("generate_thought", bool(text) and not _echo(text))
        return text or None

    async def identify(self, agent, text, kind):
        if not text:
            return []
        ans = await self._ask("identify", kind="conversation" if kind == "chat" else "thought", text=text)
        out = parse_norms(ans)[:1]
        self._format("identify", bool(out) or re.match(r"\s*no\b", ans or "", re.I) is not None)
        return out

    # ------------------------------------------------------------ evaluation
    async def check_consistency(self, norm, text):
        return await self._yesno("check_consistency", norm=norm.content, text=text or "")

    async def check_duplication(self, norm, qualified):
        if not qualified:
            return True
        return await self._yesno("check_duplication", norm=norm.content, norms=_norm_list(qualified))

    async def check_type(self, norm):
        text = await self._ask("check_type", type=norm.type, norm=norm.content)
        self._format("check_type", re.search(r"correct|descriptive|injunctive", text or "", re.I) is not None)
        return parse_type_check(text, norm.type)

    async def check_conflict(self, norm, qualified):
        if not qualified:
            return True
        return await self._yesno("check_conflict", norm=norm.content, norms=_norm_list(qualified))

    async def classify(self, qualified):
        text = await self._ask("classify", norms=_norm_list(qualified))
        cats = parse_categories(text, len(qualified))
        self._format("classify", bool(cats))
        return [(theme, [qualified[i] for i in idx]) for theme, idx in cats]

    async def abstract(self, theme, norms: list[NormRecord]):
        text = await self._ask("abstract", theme=theme, norms=_norm_list(norms))
        out = parse_abstract(text, len(norms), norms[0].type)
        self._format("abstract", out is not None)
        if out is None:  # no usable abstraction: a norm that the consistency check will judge
            return norms[0].content, norms[0].type, None
        return out

    # ------------------------------------------------------------ compliance
    async def plan(self, agent, qualified):
        text = await self._ask("plan", name=agent["name"], description=agent.get("description", ""),
                               norms=_norm_list(qualified))
        lines = parse_lines(text)
        self._format("plan", bool(lines) and not any(_echo(x) for x in lines))
        return lines

    async def act(self, agent, plan, qualified):
        if not plan:
            return []
        text = await self._ask("act", name=agent["name"], description=agent.get("description", ""),
                               norms=_norm_list(qualified), plan="; ".join(plan))
        lines = parse_lines(text)
        self._format("act", bool(lines) and not any(_echo(x) for x in lines))
        return lines or list(plan)
