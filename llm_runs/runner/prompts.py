"""Prompt templates of the LLM naming game (data in ``templates/*.json``), rendering and parsing.

A template turns an agent's memory (its last ``H`` interactions) and a shuffled name list into
the system and user messages of Flint Ashery et al. (2025); :func:`parse_answer` reads the chosen name back from a
generated answer in the answer-first format ``{'value': <NAME>; 'reason': ...}``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from string import Template
from typing import Sequence

from normlab.user_files import TEMPLATE_MAX_BYTES, read_user_json

_TEMPLATE_KEYS = (
    "name", "version", "answer_key", "prefill", "rules", "history_block", "history_entry",
    "history_separator", "query", "user", "payoff_matrix_same", "payoff_matrix_different",
    "payoff_matrix_separator",
)

BUILTIN_TEMPLATES = ("main", "bullet", "narrative")

#: How a prompt is sent: chat messages, or one raw text with the authors' Llama-3 / Llama-2 header
#: tokens (``templates/wraps.json``) to the completions endpoint.
WRAPS = ("chat", "raw-llama3", "raw-llama2")
#: Answer readings: normlab's (the answer field must hold exactly one pool name) or the authors'
#: (a pool name between single quotes anywhere in the generation: :func:`parse_answer_authors`).
PARSERS = ("normlab", "authors")


def _fmt_signed(v: float) -> str:
    v = float(v)
    return f"{int(v):+d}" if v.is_integer() and abs(v) < 1e15 else f"{v:+g}"


def _fmt(v: float) -> str:
    """A number as the authors' Python ints print (``100``, ``-250``; ``:g`` for non-integers)."""
    v = float(v)
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else f"{v:g}"


def check_wrap(wrap) -> str:
    """Validate a wrap name (one of :data:`WRAPS`)."""
    if not isinstance(wrap, str) or wrap not in WRAPS:
        raise ValueError(f"wrap must be one of {WRAPS}; got {wrap!r}")
    return wrap


_WRAPS_CACHE: dict = {}


def load_wraps() -> dict:
    """The raw-text layouts of ``templates/wraps.json``: ``{wrap: {system_open, user_open, assistant_open}}``."""
    if not _WRAPS_CACHE:
        text = resources.files("normlab.llm_runs").joinpath("templates", "wraps.json").read_text("utf-8")
        _WRAPS_CACHE.update(json.loads(text)["wraps"])
    return _WRAPS_CACHE


def names_and(names: Sequence[str]) -> str:
    """``"Q and M"``, ``"A, B and C"``: a name list in running text."""
    names = list(names)
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def sha256_hex(text: str, n: int = 16) -> str:
    """First ``n`` hex digits of the SHA-256 of ``text`` (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


@dataclass(frozen=True)
class Prompt:
    """One rendered prompt.

    Attributes
    ----------
    system, user : str
        System and user messages.
    prefill : str
        Start of the answer in the answer-first format (e.g. ``"{'value': '"``), sent as a final
        assistant message when the endpoint is asked to continue it.
    names_shown : tuple of str
        The name list in the order shown in this prompt.
    """

    system: str
    user: str
    prefill: str
    names_shown: tuple

    @property
    def hash(self) -> str:
        """Hash of the prompt content (system and user messages), 16 hex digits."""
        return sha256_hex(self.system + "\x00" + self.user)

    def messages(self, assistant: str | None = None) -> list[dict]:
        """Chat messages; with ``assistant`` (e.g. the prefill) a final assistant message to continue."""
        msgs = [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]
        if assistant is not None:
            msgs.append({"role": "assistant", "content": assistant})
        return msgs

    def text(self, wrap: str = "raw-llama3", assistant: str | None = None) -> str:
        """The exact text sent to a completions endpoint with a raw ``wrap``.

        ``raw-llama3``: ``<|begin_of_text|><|start_header_id|>system<|end_header_id|>`` + newline +
        system + `` <|eot_id|><|start_header_id|>user<|end_header_id|> `` + user +
        `` <|eot_id|><|start_header_id|>assistant<|end_header_id|>``, byte for byte the authors'
        ``get_prompt`` (for the main template); ``raw-llama2`` the same with the substitutions
        of their README (``[INST] <<SYS>>``, ``<<SYS>>``, ``[/INST]``). ``assistant`` (e.g. the
        prefill, a normlab option) is appended after the assistant header.

        Parameters
        ----------
        wrap : {"raw-llama3", "raw-llama2"}
            ``"chat"`` sends :meth:`messages`, not a text, and is refused here.
        assistant : str, optional

        Returns
        -------
        str

        References
        ----------
        AI-norms code (MIT): ``prompting.py`` (``get_rules``, ``get_prompt``), README Note 3;
        ``data-era/simulation_module.ipynb``.
        """
        check_wrap(wrap)
        if wrap == "chat":
            raise ValueError("wrap 'chat' sends chat messages (Prompt.messages()), not one text; "
                             "use 'raw-llama3' or 'raw-llama2' for the text sent to /completions")
        w = load_wraps()[wrap]
        return w["system_open"] + self.system + w["user_open"] + self.user + w["assistant_open"] + (assistant or "")


@dataclass(frozen=True)
class PromptTemplate:
    """A naming-game prompt template (one JSON file; see ``normlab/llm_runs/templates``).

    Placeholders use :class:`string.Template` syntax (``$name``). ``rules`` may use
    ``$names_list`` (Python repr of the shuffled list), ``$names_and`` (``"Q and M"``),
    ``$payoff_matrix``, ``$reward`` and ``$penalty`` (signed, e.g. ``+100`` / ``-50``),
    ``$reward_value`` and ``$penalty_value`` (as Python prints them: ``100`` / ``-50``);
    ``history_entry`` uses ``$round``, ``$own``, ``$partner``, ``$payoff``; ``query`` uses
    ``$round`` (``len(memory) + 1``) and ``$score`` (sum of payoffs in memory).

    Attributes
    ----------
    name, version : str, int
    answer_key : str
        Key of the answer field (``"value"`` or ``"action"``).
    prefill : str
        Opening of the answer, up to the name (``"{'value': '"``).
    digest : str
        SHA-256 (16 hex) of the template's content; part of a run's settings hash.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Materials and Methods
    (Prompt); Supplementary Text (Example Prompt; Alternative Prompts).
    """

    name: str
    version: int
    answer_key: str
    prefill: str
    rules: str
    history_block: str
    history_entry: str
    history_separator: str
    query: str
    user: str
    payoff_matrix_same: str = ""
    payoff_matrix_different: str = ""
    payoff_matrix_separator: str = ""
    description: str = ""
    reference: str = ""
    digest: str = field(default="", compare=False)

    @classmethod
    def from_dict(cls, d: dict) -> "PromptTemplate":
        """Build and validate a template from its JSON mapping."""
        if not isinstance(d, dict):
            raise TypeError(f"a template must be a JSON object; got {type(d).__name__}")
        missing = [k for k in _TEMPLATE_KEYS if k not in d]
        if missing:
            raise ValueError(f"template is missing keys {missing}; required: {list(_TEMPLATE_KEYS)}")
        kw = {k: d[k] for k in _TEMPLATE_KEYS}
        kw["description"] = d.get("description", "")
        kw["reference"] = d.get("reference", "")
        canonical = json.dumps({k: d[k] for k in _TEMPLATE_KEYS}, sort_keys=True, ensure_ascii=False)
        tpl = cls(**kw, digest=sha256_hex(canonical))
        # render a probe to catch unknown placeholders now rather than mid-run
        try:
            tpl.render([("A", "B"), ("B", "B")], ("A", "B"))
        except KeyError as exc:
            raise ValueError(f"template has an unknown placeholder ${exc.args[0]}; see templates/main.json for the "
                             "placeholders each field may use") from None
        except ValueError as exc:  # string.Template: a stray "$"
            raise ValueError(f"template has an invalid placeholder ({exc}); write a literal $ as $$") from None
        return tpl

    def _rules(self, names_shown, payoffs, rules: str | None = None) -> str:
        reward, penalty = payoffs
        matrix = []
        for x in names_shown:
            for y in names_shown:
                src = self.payoff_matrix_same if x == y else self.payoff_matrix_different
                if src:
                    matrix.append(Template(src).substitute(
                        x=x, y=y, reward=_fmt_signed(reward), penalty=_fmt_signed(penalty)))
        return Template(self.rules if rules is None else rules).substitute(
            names_list=repr(list(names_shown)), names_and=names_and(names_shown),
            payoff_matrix=self.payoff_matrix_separator.join(matrix),
            reward=_fmt_signed(reward), penalty=_fmt_signed(penalty),
            reward_value=_fmt(reward), penalty_value=_fmt(penalty),
        )

    def history(self, memory: Sequence[tuple[str, str]], payoffs=(100, -50)) -> tuple[str, float]:
        """The rendered history block (``""`` for an empty memory) and the score in memory."""
        reward, penalty = payoffs
        entries, score = [], 0.0
        for k, (own, partner) in enumerate(memory):
            pay = reward if own == partner else penalty
            score += pay
            entries.append(Template(self.history_entry).substitute(
                round=k + 1, own=own, partner=partner, payoff=_fmt(pay)))
        if not entries:
            return "", 0.0
        block = Template(self.history_block).substitute(entries=self.history_separator.join(entries))
        return block, score

    def render(
        self,
        memory: Sequence[tuple[str, str]],
        names_shown: Sequence[str],
        *,
        payoffs: tuple[float, float] = (100, -50),
        query: str | None = None,
        user: str | None = None,
        rules: str | None = None,
    ) -> Prompt:
        """Render the prompt of an agent with ``memory`` (oldest first) seeing ``names_shown``.

        Parameters
        ----------
        memory : sequence of (str, str)
            ``(own name, partner's name)`` of the agent's last ``H`` interactions, oldest first.
        names_shown : sequence of str
            The name pool in the (shuffled) order shown to the agent.
        payoffs : (float, float), optional
            Payoff of a success and of a failure (100 / -50 in Flint Ashery et al. 2025).
        query, user, rules : str, optional
            Replace the template's final instruction, user message or rules (meta-prompting).

        Returns
        -------
        Prompt
        """
        block, score = self.history(memory, payoffs)
        q = Template(self.query if query is None else query).substitute(
            round=len(memory) + 1, score=_fmt(score))
        system = self._rules(names_shown, payoffs, rules) + block + q
        return Prompt(system=system, user=self.user if user is None else user, prefill=self.prefill,
                      names_shown=tuple(names_shown))

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in _TEMPLATE_KEYS}
        d["description"], d["reference"] = self.description, self.reference
        return d


def load_template(template: "str | Path | dict | PromptTemplate" = "main") -> PromptTemplate:
    """Load a prompt template: a built-in name (``"main"``, ``"bullet"``, ``"narrative"``), a JSON
    file path, a mapping, or a :class:`PromptTemplate` (returned unchanged).

    Parameters
    ----------
    template : str, pathlib.Path, dict or PromptTemplate

    Returns
    -------
    PromptTemplate

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Example Prompt and Alternative Prompts (Fig. S12).
    """
    if isinstance(template, PromptTemplate):
        return template
    if isinstance(template, dict):
        return PromptTemplate.from_dict(template)
    if isinstance(template, (str, Path)):
        s = str(template)
        if s in BUILTIN_TEMPLATES:
            text = resources.files("normlab.llm_runs").joinpath("templates", f"{s}.json").read_text("utf-8")
            return PromptTemplate.from_dict(json.loads(text))
        p = Path(s)
        if p.suffix == ".json" and (p.exists() or p.is_symlink()):  # a regular file, capped (normlab.user_files)
            return PromptTemplate.from_dict(read_user_json(p, f"template {s}", max_bytes=TEMPLATE_MAX_BYTES))
        raise ValueError(f"unknown template {s!r}: use one of {BUILTIN_TEMPLATES} or the path of a JSON template file")
    raise TypeError(f"template must be a name, a path, a dict or a PromptTemplate; got {type(template).__name__}")


def load_meta_template() -> dict:
    """The meta-prompting data (``templates/meta.json``): observer query and Table S7 questions."""
    text = resources.files("normlab.llm_runs").joinpath("templates", "meta.json").read_text("utf-8")
    return json.loads(text)


@dataclass(frozen=True)
class ParsedAnswer:
    """A parsed answer: ``name`` is ``None`` when the answer is invalid (``reason`` says why)."""

    name: str | None
    value: str | None
    reason: str | None


_DELIM = "'\";,}>\n"


def _answer_field(text: str, answer_key: str):
    keys = "|".join(sorted({re.escape(answer_key), "value", "action"}))
    pattern = re.compile(r"['\"]?(?:" + keys + r")['\"]?\s*:\s*(.*)", re.IGNORECASE | re.DOTALL)
    return pattern.search(text)


# The answer field ends at the next field separator, closing brace, line end or "reason" key.
_FIELD_END = re.compile(r"[;}\n]|['\"]?reason['\"]?\s*:", re.IGNORECASE)


def _names_in_field(text: str, names: Sequence[str], answer_key: str) -> list[str]:
    """Pool names written as separate tokens inside the answer field (to catch hedges such as
    ``'Q' or 'M'``, ``'Q, M'``, ``'Q' (or maybe 'M')``)."""
    m = _answer_field(text, answer_key)
    if m is None:
        return []
    rest = m.group(1)
    end = _FIELD_END.search(rest)
    field = rest[: end.start()] if end else rest
    return [n for n in names if re.search(r"(?<![0-9A-Za-z_])" + re.escape(n) + r"(?![0-9A-Za-z_])", field)]


def answer_value(text: str, answer_key: str = "value") -> str | None:
    """The raw text of the first answer field (``None`` when there is none).

    Looks for ``'value': X`` (also ``"value"``, ``'action'``, ``<<<X>>>``, unquoted keys).
    """
    if text is None:
        return None
    m = _answer_field(text, answer_key)
    if m is None:
        return None
    rest = m.group(1).lstrip()
    rest = rest.lstrip("<").lstrip()
    rest = rest.lstrip("'\"").lstrip()
    out = []
    for ch in rest:
        if ch in _DELIM:
            break
        out.append(ch)
    return "".join(out).strip().strip("[]()").strip() or None


def parse_answer(
    text: str | None,
    names: Sequence[str],
    *,
    answer_key: str = "value",
    prefill: str | None = None,
    case_sensitive: bool = False,
) -> ParsedAnswer:
    """Read the chosen name from a generated answer.

    The answer field (``'value': X``) must hold exactly one pool name; a bare answer consisting
    only of a pool name (up to quotes and braces) is also accepted. Matching is exact, then
    case-insensitive if that identifies a unique name (unless ``case_sensitive``). A hedge that
    names another pool name inside the answer field (``'Q' or 'M'``, ``'Q, M'``,
    ``'Q' (or maybe 'M')``) is invalid, not the first name. Anything else is invalid -- no name
    is ever guessed.

    Parameters
    ----------
    text : str or None
        Generated text (``None`` = no answer).
    names : sequence of str
        The name pool.
    answer_key : str, optional
        ``"value"`` (main template) or ``"action"`` (alternative templates); both are accepted.
    prefill : str, optional
        The prefill the text continues, if any.
    case_sensitive : bool, optional

    Returns
    -------
    ParsedAnswer

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Output Structure (answer first, reason later).
    """
    names = list(names)
    if text is None or not text.strip():
        return ParsedAnswer(None, None, "empty answer")
    if prefill and not text.lstrip().startswith(prefill.strip()):
        # a continuation of the prefill; fall back to the text alone if that yields no name
        first = parse_answer(prefill + text, names, answer_key=answer_key, case_sensitive=case_sensitive)
        if first.name is not None:
            return first
        alone = parse_answer(text, names, answer_key=answer_key, case_sensitive=case_sensitive)
        return alone if alone.name is not None else first
    value = answer_value(text, answer_key)
    if value is None:
        bare = text.strip().strip("{}[]()<>'\" .")
        if bare in names:
            return ParsedAnswer(bare, bare, None)
        return ParsedAnswer(None, None, f"no '{answer_key}' field in the answer")
    chosen = None
    if value in names:
        chosen = value
    elif not case_sensitive:
        hits = [n for n in names if n.lower() == value.lower()]
        if len(hits) == 1:
            chosen = hits[0]
    if chosen is None:
        return ParsedAnswer(None, value, f"value {value[:40]!r} is not a pool name")
    others = [n for n in _names_in_field(text, names, answer_key) if n != chosen]
    if others:
        return ParsedAnswer(None, value, f"hedged answer: the answer field also names {', '.join(others)}")
    return ParsedAnswer(chosen, value, None)


def parse_answer_authors(text: str | None, names_shown: Sequence[str]) -> ParsedAnswer:
    """Read the chosen name as the authors' ``get_response`` does.

    The generation is split on single quotes; it is valid when a piece equals a pool name, and the
    answer is the piece of the *last* name, in the order shown in the prompt, that occurs (their
    loop over ``options`` keeps the last index found). Matching is exact (case-sensitive).

    Parameters
    ----------
    text : str or None
        Generated text (with the prefill in front when one was continued).
    names_shown : sequence of str
        The pool in the order shown in the prompt.

    Returns
    -------
    ParsedAnswer

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` / ``run_local.py`` / ``data-era/simulation_module.ipynb``
    (``get_response``).
    """
    if text is None or not text.strip():
        return ParsedAnswer(None, None, "empty answer")
    pieces = text.split("'")
    found = None
    for opt in names_shown:
        if opt in pieces:
            found = opt
    if found is None:
        return ParsedAnswer(None, None, "no pool name between single quotes")
    return ParsedAnswer(found, found, None)
