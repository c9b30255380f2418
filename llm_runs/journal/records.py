"""The journal's record format: one JSON object per line, ``ev`` saying what it records.

The kinds of record and the keys of each are declared once, in the tables below (:data:`KINDS`, the
fields of each view); the views' properties (:class:`Call`, :class:`Decision`, ...), the writers of
the simple kinds (:func:`interaction_record`, :func:`call_record`, ...), the bulk column readers
(:func:`call_columns`, :func:`decision_columns`), the list readers (:func:`calls`, ...) and the
byte patterns the fast index recognises lines by (:data:`_INT_HEAD`, :data:`_SIDE_FILLED`, ...) are
generated from them when the module is imported, as Python source compiled here (how
:func:`collections.namedtuple` and :mod:`dataclasses` build their methods): the same code, and the
same bytes on disk, as written out by hand. Only this module reads or writes the keys.
"""

from __future__ import annotations

import __future__
import json
import linecache
import re
from typing import Any, NamedTuple

#: The keys every record written to a file ends with: its place in the journal (0, 1, ...) and
#: the fingerprint of the settings of the run that wrote it (:func:`fingerprint_of`).
SEQ, FP = "seq", "fp"
_TAIL = re.compile(rb',"seq":(\d+)(?:,"fp":"([0-9a-f]*)")?\}\s*$')


def fingerprint_of(digest: str) -> str:
    """The short settings fingerprint a record carries (the first 16 hex digits of the digest)."""
    return str(digest)[:16]


_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode
_ENCODE_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=True).encode


def _line(record: dict) -> bytes:
    """The record's line as written: compact JSON in UTF-8, ending with a newline."""
    try:
        return (_ENCODE(record) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in an answer: escape it (valid JSON, round-trips)
        return (_ENCODE_ASCII(record) + "\n").encode("ascii")


def _parse(line: bytes):
    """The record on one journal line, or None when it is not a complete JSON object."""
    try:
        rec = json.loads(line.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return rec if isinstance(rec, dict) else None


# ----------------------------------------------------------------------------- the tables
#: Record kinds (the ``ev`` of a line): an LLM request; an exact-mode distribution reused from
#: another directory (copied here); an interaction of two agents; the end of a run; an endpoint
#: error that stopped a run; a probe's decision.
CALL, IMPORTED, INTERACTION, RUN_END, RUN_ERROR, PROBE = "call", "cached", "int", "end", "error", "probe"
#: A budget reservation written before a request is sent (write-ahead): what the request may cost
#: at most; the request's call record settles it (``res``), and one left unsettled (a kill while
#: the request was in flight) counts at its full amount.
RESERVE = "reserve"
# CRSEC populations and SCENE sweeps (llm_runs/core/journaled.py): their LLM calls are CALL records
# (``key``: the request's hash, under which a resumed run finds the answer); these three kinds record
# their progress: a population step done, one event of a SCENE episode as it happens, a SCENE episode
# finished.
STEP, EPISODE_EVENT, EPISODE = "step", "episode_event", "episode"


class Field(NamedTuple):
    """One key of a record as its view names it: the view's property ``attr`` reads ``key``.

    ``read`` says how, with ``default``: ``"get"`` (``None`` when absent), ``"default"`` (``default``
    when absent), ``"or"`` (``default`` when absent or empty), ``"required"`` (the key must be there),
    ``"bool"`` (``bool`` of the value, ``default`` when absent), ``"count"`` (a token count or an
    amount, checked: :func:`count_of`). ``type`` is the property's annotation
    (``"str | None"``, ``"list[str]"``, ...); ``filled``: the fast index notes whether any record
    holds a value for it, from the line's bytes (a string's or a list's opening after the key).
    """

    attr: str
    key: str
    read: str = "get"
    default: Any = None
    type: str = ""
    doc: str = ""
    filled: bool = False


F = Field

#: :class:`Decision`: one agent's decision (a side of an interaction, a probe's answer).
DECISION_VIEW = (
    F("name", "name", type="str | None", filled=True),
    F("committed", "committed", "bool", False, "bool"),
    F("names_shown", "shown", type="str | None", doc="The pool in the order shown, comma-joined.", filled=True),
    F("prompt_hash", "ph", type="str | None", filled=True),
    F("probs", "p", type="list | None", filled=True),
    F("covered_mass", "cov", type="float | None"),
    F("p_approx", "approx", type="bool | None"),
    F("invalid_reason", "inv", type="str | None", filled=True),
    F("p_name", "pn", type="float | None"),
    F("text", "text", type="str | None", filled=True),
    F("reasks", "reasks", "default", 0, "int"),
    F("llm_calls", "calls", "default", 0, "int"),
    F("cache_hit", "hit", type="bool | None"),
    F("latency", "lat", "default", 0.0, "float"),
    F("prompt_tokens", "ptok", "count", 0, "int"),
    F("completion_tokens", "ctok", "count", 0, "int"),
    F("order", "order", type="list | None", doc="A probe's name order (indices into the pool)."),
)
#: :class:`Call` and :class:`Imported`: what an LLM request and a reused distribution have in common.
DISTRIBUTION_VIEW = (
    F("run", "run"),
    F("t", "t"),
    F("purpose", "purpose", type="str | None", filled=True,
      doc='``"exact"`` (a next-token distribution) or ``"sample"`` (a generation).'),
    F("key", "key", type="str | None",
      doc="Exact mode: the hash of (model, prompt, top_logprobs) under which the distribution is reused."),
    F("prompt_hash", "ph", type="str | None", filled=True),
    F("partial", "partial", type="str | None", filled=True,
      doc='Exact mode: the part of a name after the prefill (``""`` at the first token).'),
    F("top", "top", type="list | None", filled=True,
      doc="The top logprobs at the first generated position, ``[[token, logprob], ...]``."),
)
#: :class:`Call`: one LLM request (besides :data:`DISTRIBUTION_VIEW`).
CALL_VIEW = (
    F("id", "id", type="int | None"),
    F("agent", "agent"),
    F("text", "text", type="str | None", filled=True),
    F("tokens", "tokens", type="list | None"),
    F("finish_reason", "finish", type="str | None", filled=True),
    F("prompt_tokens", "ptok", "count", 0, "int"),
    F("completion_tokens", "ctok", "count", 0, "int"),
    F("cached_tokens", "cached", "count", 0, "int", "Prompt tokens the server reported as served from its cache."),
    F("latency", "lat", type="float | None"),
    F("attempts", "attempts", "default", 1, "int"),
    F("errors", "errors", "or", [], "list[str]", filled=True),
    F("reservation", "res", type="int | None",
      doc="The id of the budget reservation (:class:`Reservation`) this request settles."),
    F("usage_counted", "counted", "bool", False, "bool",
      doc="The answer carried no ``usage``: ``prompt_tokens`` and ``completion_tokens`` were counted from the "
          "prompt and the answer (:func:`~normlab.llm_runs.backend.spending.answer_tokens_counted`)."),
)
RESERVATION_VIEW = (
    F("id", "id", "required", type="int"),
    F("tokens", "tok", "count", 0, "float"),
    F("usd", "usd", "count", 0.0, "float"),
)
INTERACTION_VIEW = (
    F("run", "run"),
    F("t", "t"),
    F("i", "i", "required", type="int"),
    F("j", "j", "required", type="int"),
)
RUN_END_VIEW = (
    F("run", "run"),
    F("n", "n"),
    F("reason", "reason", type="str | None"),
)
PROBE_ANSWER_VIEW = (F("key", "key", "required", type="str"),)
STEP_VIEW = (
    F("t", "t", "required", type="float"),
    F("digest", "digest", type="str | None"),
    F("counts", "counts", "or", {}, "dict"),
)
EPISODE_EVENT_VIEW = (
    F("episode", "episode", "required", type="str"),
    F("index", "i", "required", type="int"),
    F("event", "e", "required", type="dict"),
)
EPISODE_DONE_VIEW = (
    F("episode", "episode", "required", type="str"),
    F("data", "data", "required", type="dict"),
)


class Kind(NamedTuple):
    """A kind of record: ``const``, the name of its code's constant (:data:`CALL`, ...); its view
    class; its writer ``writer`` (the signature: ``name(parameters)``, ``None``: written by hand) with
    an optional first statement ``prelude``; ``keys``, the keys after ``"ev"`` in the order they are
    written (``"key"``: the parameter of that name; ``"key=expression"``; ``"key?=expression"``: only
    when the expression is not ``None``); ``reader``: the name of the function listing the records of
    the kind as views (``None``: none)."""

    const: str
    view: str
    writer: str | None
    keys: tuple
    doc: str = ""
    prelude: str = ""
    reader: str | None = None
    reader_doc: str = ""


#: Every kind of record, by code (the ``ev`` of its lines).
KINDS = {globals()[k.const]: k for k in (
    Kind("CALL", "Call",
         "call_record(*, id: int, run, t, agent, purpose: str, key, prompt_hash: str, partial: str, result)",
         ("id", "run", "t", "agent", "purpose", "key", "ph=prompt_hash", "partial", "text=result.text",
          "top=result.top", "tokens=result.tokens", "finish=result.finish_reason", "ptok=result.prompt_tokens",
          "ctok=result.completion_tokens", "cached=result.cached_tokens", "lat=round(result.latency, 6)",
          "attempts=result.attempts", "errors=result.errors", "res?=getattr(result, 'reservation', None)",
          "counted?=getattr(result, 'usage_missing', False) or None"),
         "The record of one LLM request (``result``: its :class:`~normlab.llm_runs.backend.CallResult`).",
         reader="calls", reader_doc="The LLM requests (:class:`Call`), in journal order."),
    Kind("IMPORTED", "Imported", "imported_record(*, key: str, top, prompt_hash: str, partial: str, run, t)",
         ('purpose="exact"', "key", "top", "ph=prompt_hash", "partial", "run", "t"),
         "The record of an exact-mode distribution reused from another directory."),
    Kind("INTERACTION", "Interaction", "interaction_record(run: int, t: int, i: int, j: int, sides)",
         ("run", "t", "i", "j", "s=[si.record, sj.record]"),
         "The record of interaction ``t`` of ``run`` (``sides``: the two :class:`Decision`).",
         prelude="si, sj = sides"),
    Kind("RUN_END", "RunEnd", "run_end_record(run: int, n: int, reason: str | None)", ("run", "n", "reason"),
         "The end of run ``run`` after ``n`` interactions, by its stop rule ``reason``."),
    Kind("RUN_ERROR", None, "run_error_record(run: int, t: int, message: str)", ("run", "t", "message"),
         "An endpoint error that stopped run ``run`` at interaction ``t``."),
    Kind("PROBE", "ProbeAnswer", "probe_record(key: str, decision: Decision)", ("key", "side=decision.record"),
         "A probe's decision, cached under ``key``.",
         reader="probe_answers", reader_doc="A probe's decisions (:class:`ProbeAnswer`), in journal order."),
    Kind("RESERVE", "Reservation", "reserve_record(*, id: int, tokens: float, usd: float)", ("id", "tok=tokens", "usd"),
         "The write-ahead record of a budget reservation (:class:`Reservation`)."),
    Kind("STEP", "Step", "step_record(t: float, digest: str, counts: dict)", ("t", "digest", "counts"),
         "A CRSEC population step done (:class:`Step`).",
         reader="steps", reader_doc="The population steps done (:class:`Step`), in journal order."),
    Kind("EPISODE_EVENT", "EpisodeEvent", "episode_event_record(episode: str, index: int, event: dict)",
         ("episode", "i=index", "e=event"), "Event number ``index`` of SCENE episode ``episode``."),
    Kind("EPISODE", "EpisodeDone", "episode_record(episode: str, data: dict)", ("episode", "data"),
         "A finished SCENE episode (:class:`EpisodeDone`)."),
)}

#: The :class:`Call` fields :func:`call_columns` reads, in order.
CALL_FIELDS = ("id", "run", "t", "agent", "purpose", "prompt_hash", "partial", "text", "top", "finish_reason",
               "prompt_tokens", "completion_tokens", "cached_tokens", "latency", "attempts", "errors")
#: The :class:`Decision` fields :func:`decision_columns` reads, in order.
DECISION_FIELDS = ("names_shown", "prompt_hash", "p_name", "covered_mass", "probs", "p_approx", "cache_hit",
                   "llm_calls", "reasks", "invalid_reason", "text", "latency", "prompt_tokens", "completion_tokens")


# ----------------------------------------------------------------------------- the generator
_READS = {
    "get": 'self.record.get("{key}")',
    "default": 'self.record.get("{key}", {default!r})',
    "or": 'self.record.get("{key}") or {default!r}',
    "required": 'self.record["{key}"]',
    "bool": 'bool(self.record.get("{key}", {default!r}))',
    "count": 'count_of(self.record, "{key}")',
}
_COLUMN_READS = {"get": 'g("{key}")', "default": 'g("{key}", {default!r})', "or": 'g("{key}") or {default!r}',
                 "count": 'count_of(r, "{key}")'}

#: The largest token count or USD amount a record may hold (more is not a count: a damaged record).
MAX_COUNT = 10**12


def count_of(record: dict, key: str):
    """A token count or USD amount of a record (``0`` when absent or empty), checked wherever it is
    read -- hence wherever it is summed (a budget on resume, the ledger, the run tables): a finite
    number from 0 to :data:`MAX_COUNT`; anything else (negative, ``1e400``, text) is a damaged
    record, ``ValueError`` in one line naming it."""
    v = record.get(key)
    if not v:
        return 0
    if type(v) is int or type(v) is float:
        if 0 <= v <= MAX_COUNT:  # NaN fails both comparisons
            return v
    raise ValueError(f"journal record {str(record)[:120]}: {key} = {str(v)[:40]} is not a token count or amount "
                     f"(a number from 0 to {MAX_COUNT:.0e}); the journal is damaged or was edited")
_GENERATED: list[str] = []  # the source compiled so far (``generated_source()``)


def _compile(source: str, namespace: dict, what: str) -> None:
    """Compile ``source`` (with ``from __future__ import annotations``) into ``namespace``, its
    functions' globals being this module's; tracebacks and ``inspect.getsource`` show the text."""
    filename = f"<normlab.llm_runs.journal.records: {what}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, globals(), namespace)
    _GENERATED.append(source)


def _views(fields: tuple):
    """Class decorator: the properties of ``fields`` (:class:`Field`) added to a view class."""
    def attach(cls):
        src = []
        for f in fields:
            ann = f" -> {f.type}" if f.type else ""
            doc = f"\n    {f.doc!r}" if f.doc else ""
            body = _READS[f.read].format(key=f.key, default=f.default)
            src.append(f"def {f.attr}(self){ann}:{doc}\n    return {body}\n")
        ns: dict = {}
        _compile("\n\n".join(src), ns, f"{cls.__name__} properties")
        for f in fields:
            fn = ns[f.attr]
            fn.__qualname__ = f"{cls.__name__}.{f.attr}"
            setattr(cls, f.attr, property(fn))
        return cls
    return attach


def _writer_source(kind: Kind) -> str:
    name = kind.writer.split("(", 1)[0]
    items, tail = [], ""
    for spec in kind.keys:
        key, _, expr = spec.partition("=")
        if key.endswith("?"):  # only when the value is there (not None)
            tail += f', **({{"{key[:-1]}": _v}} if (_v := {expr}) is not None else {{}})'
            continue
        items.append(f'"{key}": {expr or key}')
    prelude = f"    {kind.prelude}\n" if kind.prelude else ""
    return (f"def {kind.writer} -> dict:\n    {kind.doc!r}\n{prelude}"
            f'    return {{"ev": {kind.const}, {", ".join(items)}{tail}}}\n')


def _column_source(name: str, param: str, fields: tuple, names: str, doc: str) -> str:
    by_attr = {f.attr: f for f in fields}
    cols = [by_attr[a] for a in globals()[names]]
    lines = [f"def {name}({param}) -> dict:", f"    {doc!r}", f"    cols = [[] for _ in {names}]",
             f"    ({', '.join('_' + f.attr for f in cols)},) = cols", f"    for r in {param}:", "        g = r.get"]
    lines += [f"        _{f.attr}.append({_COLUMN_READS[f.read].format(key=f.key, default=f.default)})" for f in cols]
    lines.append(f"    return dict(zip({names}, cols))")
    return "\n".join(lines) + "\n"


def _filled(fields: tuple) -> dict:
    """``{attr: the bytes that open the value of a filled key}`` (``"key":"`` for a string, ``"key":[``
    for a list, ``"key":["`` for a list of strings): inside strings every quote is escaped, so such a
    byte pattern is always structural."""
    opening = {"str | None": '"', "list | None": "[", "list[str]": '["'}
    return {f.attr: f'"{f.key}":{opening[f.type]}'.encode() for f in fields if f.filled}


def _head(kind: Kind) -> bytes:
    """The regular expression of the opening of a kind's lines as written: the integer parameters
    (``(\\d+)``) up to the first list display."""
    params = kind.writer.split("(", 1)[1].rsplit(")", 1)[0]
    ints = {p.split(":")[0].strip() for p in params.split(",") if p.split(":")[-1].strip() == "int"}
    out = re.escape(f'{{"ev":"{globals()[kind.const]}",'.encode())
    for spec in kind.keys:
        key, _, expr = spec.partition("=")
        if (expr or key) in ints:
            out += re.escape(f'"{key}":'.encode()) + rb"(\d+),"
        elif expr.startswith("["):
            return out + re.escape(f'"{key}":'.encode()) + rb"\["
        else:
            break
    raise ValueError(f"the lines of {kind.const} have no opening an index can read")


def generated_source() -> str:
    """The Python source this module compiled from its tables (for reading and review)."""
    return "\n\n".join(_GENERATED)


# ----------------------------------------------------------------------------- kinds and views
def record_kind(record: dict) -> str | None:
    """The kind of a record (:data:`CALL`, :data:`INTERACTION`, ...; ``None`` for none)."""
    return record.get("ev")


def count(records, kind: str) -> int:
    """How many records are of ``kind``."""
    return sum(1 for r in records if r.get("ev") == kind)


class _View:
    """Named, read-only access to one record (the dict stays as written: :attr:`record`)."""

    __slots__ = ("record",)

    def __init__(self, record: dict):
        self.record = record

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.record!r})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and other.record == self.record

    __hash__ = None


@_views(DECISION_VIEW)
class Decision(_View):
    """One agent's decision: a side of an interaction, or a probe's answer.

    ``name`` is the name played (``None``: invalid); exact mode adds ``probs`` (over the pool, in
    pool order), ``covered_mass``, ``p_approx`` and ``p_name``; sample mode ``text`` and
    ``reasks``; a committed agent's decision holds only ``name`` and ``committed``.
    """

    __slots__ = ()

    def with_order(self, order) -> "Decision":
        """This decision with the name order a probe showed (``[int, ...]``)."""
        return Decision({**self.record, "order": [int(x) for x in order]})


def committed_decision(name: str | None) -> Decision:
    """The decision of a committed agent (no prompt, no call)."""
    return Decision({"name": name, "committed": True, "calls": 0})


def exact_decision(*, shown: str, prompt_hash: str, probs, covered_mass, approx, name, invalid_reason, p_name,
                   calls: int, latency: float, prompt_tokens: int, completion_tokens: int) -> Decision:
    """An exact-mode decision (``p_name`` is recorded with the name it belongs to)."""
    d = {"shown": shown, "ph": prompt_hash, "p": probs, "cov": covered_mass, "approx": approx, "name": name,
         "inv": invalid_reason}
    if name is not None:
        d["pn"] = p_name
    d.update(calls=calls, hit=calls == 0, lat=round(latency, 6), ptok=prompt_tokens, ctok=completion_tokens)
    return Decision(d)


def sample_decision(*, shown: str, prompt_hash: str, name, invalid_reason, text, reasks: int, calls: int,
                    latency: float, prompt_tokens: int, completion_tokens: int) -> Decision:
    """A sample-mode decision: the last answer's text and the re-asks it took."""
    return Decision({"shown": shown, "ph": prompt_hash, "name": name, "inv": invalid_reason, "text": text,
                     "reasks": reasks, "calls": calls, "hit": calls == 0, "lat": round(latency, 6),
                     "ptok": prompt_tokens, "ctok": completion_tokens})


@_views(DISTRIBUTION_VIEW)
class _Distribution(_View):
    """What an LLM request and a reused distribution have in common."""

    __slots__ = ()

    @property
    def imported(self) -> bool:
        """Reused from another directory (no request was made for it here)."""
        return self.record.get("ev") == IMPORTED


@_views(CALL_VIEW)
class Call(_Distribution):
    """One LLM request (after its retries), as journaled before its answer was used."""

    __slots__ = ()


@_views(RESERVATION_VIEW)
class Reservation(_View):
    """A budget reservation journaled before its request was sent (write-ahead): ``tokens`` and
    ``usd`` bound what the request may be billed; the request's :class:`Call` settles it
    (:attr:`Call.reservation`). One never settled (a kill while the request was in flight, or a
    request that failed) counts as spent at its full amount (:class:`OpenReservations`)."""

    __slots__ = ()


class OpenReservations:
    """The reservations not (yet) settled, fed journal records in order (:meth:`see`): their
    tokens and USD (:meth:`total`) and the next free id (:attr:`next_id`). Holds only the open
    ones (a settled reservation is dropped), so memory stays flat however long the journal."""

    def __init__(self):
        self.open: dict = {}
        self.next_id = 1

    def see(self, v) -> None:
        if isinstance(v, Reservation):
            rid = v.id
            if not isinstance(rid, int) or isinstance(rid, bool):
                raise ValueError(f"journal record {str(v.record)[:160]} is malformed; the journal is corrupt")
            self.open[rid] = (float(v.tokens), float(v.usd))
            self.next_id = max(self.next_id, rid + 1)
        elif isinstance(v, Call) and v.reservation is not None:
            self.open.pop(v.reservation, None)

    def total(self) -> tuple[float, float]:
        return (sum(t for t, _ in self.open.values()), sum(u for _, u in self.open.values()))


class Imported(_Distribution):
    """An exact-mode distribution reused from another directory (``cache=``), copied here."""

    __slots__ = ()


@_views(INTERACTION_VIEW)
class Interaction(_View):
    """Interaction ``t`` of run ``run``: agents ``i`` and ``j`` and their two decisions."""

    __slots__ = ()

    @property
    def sides(self) -> tuple:
        """``(Decision of i, Decision of j)``."""
        a, b = self.record["s"]
        return Decision(a), Decision(b)

    @property
    def names(self) -> tuple:
        """``(name of i, name of j)`` (``None``: invalid)."""
        a, b = self.record["s"]
        return a["name"], b["name"]


@_views(RUN_END_VIEW)
class RunEnd(_View):
    """The end of run ``run`` after ``n`` interactions, by its stop rule ``reason``."""

    __slots__ = ()


@_views(PROBE_ANSWER_VIEW)
class ProbeAnswer(_View):
    """A probe's decision, cached in the journal under ``key``."""

    __slots__ = ()

    @property
    def decision(self) -> Decision:
        return Decision(self.record["side"])


@_views(STEP_VIEW)
class Step(_View):
    """A CRSEC population step done: time ``t`` (simulated minutes), the ``digest`` of the
    population's state after it, and ``counts`` (qualified norms, events so far)."""

    __slots__ = ()


@_views(EPISODE_EVENT_VIEW)
class EpisodeEvent(_View):
    """Event number ``index`` of SCENE episode ``episode`` (the event dict of its log)."""

    __slots__ = ()


@_views(EPISODE_DONE_VIEW)
class EpisodeDone(_View):
    """A finished SCENE episode: ``data`` is its ``Episode.to_dict()`` without the event log
    (its events are the :class:`EpisodeEvent` records of the same ``episode``)."""

    __slots__ = ()


# --- writers, list readers and bulk column readers, generated from the tables
_compile("\n\n".join(_writer_source(k) for k in KINDS.values() if k.writer), globals(), "writers")
_compile("\n\n".join(
    f"def {k.reader}(records) -> list:\n    {k.reader_doc!r}\n    return [{k.view}(r) for r in records if "
    f'r.get("ev") == {k.const}]\n' for k in KINDS.values() if k.reader), globals(), "readers")
_compile(_column_source("call_columns", "records", DISTRIBUTION_VIEW + CALL_VIEW, "CALL_FIELDS",
                        "The :class:`Call` fields (:data:`CALL_FIELDS`) of request records as lists, one per field "
                        "(what :class:`Call` gives, read in bulk for tables of millions of rows).")
         + "\n\n" + _column_source("decision_columns", "sides", DECISION_VIEW, "DECISION_FIELDS",
                                   "The :class:`Decision` fields (:data:`DECISION_FIELDS`) of decision records (an "
                                   "interaction's sides) as lists, one per field (what :class:`Decision` gives, read "
                                   "in bulk)."), globals(), "columns")

# The opening of every interaction line and of every request line as :func:`_line` writes them
# (``interaction_record``, ``call_record``): an index reads run, t and the players from it
# without decoding the line (any other line is decoded).
_INT_HEAD = re.compile(_head(KINDS[INTERACTION]))
_CALL_HEAD = f'{{"ev":"{CALL}",'.encode()
_RESERVE_HEAD = f'{{"ev":"{RESERVE}",'.encode()
# Fields whose value, when not null, starts right after the key in a written line (a quote or a
# bracket); inside strings every quote is escaped, so such a byte pattern is always structural.
_SIDE_FILLED = _filled(DECISION_VIEW)
_CALL_FILLED = _filled(DISTRIBUTION_VIEW + CALL_VIEW)


def exact_distributions(records) -> list:
    """Exact-mode distributions, requested here (:class:`Call`) or reused (:class:`Imported`)."""
    return [Call(r) if r.get("ev") == CALL else Imported(r) for r in records
            if r.get("ev") in (CALL, IMPORTED) and r.get("purpose") == "exact"]


def first_token_tops(records) -> dict:
    """The top logprobs at the first generated position of every exact-mode prompt, by prompt
    hash: ``{prompt_hash: [[token, logprob], ...]}`` from the distributions requested here or
    reused (:func:`exact_distributions`; the continuations of multi-token names, with a
    ``partial``, left out; the last record of a prompt wins)."""
    return {d.prompt_hash: d.top for d in exact_distributions(records) if d.top and not d.partial and d.prompt_hash}


def episode_events(records) -> dict:
    """``{episode: [event dict, ...]}``: each episode's events by index (the first record of an
    index wins: a resumed episode writes only the events after those already journaled)."""
    out: dict = {}
    for r in records:
        if r.get("ev") == EPISODE_EVENT:
            v = EpisodeEvent(r)
            evs = out.setdefault(v.episode, [])
            if v.index == len(evs):
                evs.append(v.event)
    return out


def episodes_done(records) -> dict:
    """``{episode: EpisodeDone}`` of the finished SCENE episodes (the first record wins)."""
    out: dict = {}
    for r in records:
        if r.get("ev") == EPISODE and r.get("episode") not in out:
            out[r["episode"]] = EpisodeDone(r)
    return out


def interaction_sides(records) -> list:
    """The decision records of interaction records, two each, in order (for :func:`decision_columns`)."""
    return [side for r in records for side in r["s"]]


def parse_line(line: bytes, kinds=None) -> dict | None:
    """The record on one complete line of a journal (``None``: not a record, or not of one of
    ``kinds``), for readers that follow a journal while a run writes it (a progress bar); with
    ``kinds`` the lines of other kinds are skipped before they are parsed."""
    if kinds is not None and not any(json.dumps(k).encode() in line for k in kinds):
        return None
    rec = _parse(line)
    if rec is None or (kinds is not None and rec.get("ev") not in kinds):
        return None
    return rec


def as_interaction(record: dict) -> Interaction | None:
    """The record as an :class:`Interaction` (``None`` for any other kind)."""
    return Interaction(record) if record.get("ev") == INTERACTION else None


def as_run_end(record: dict) -> RunEnd | None:
    """The record as a :class:`RunEnd` (``None`` for any other kind)."""
    return RunEnd(record) if record.get("ev") == RUN_END else None


def check_interaction(record: dict, n_agents: int, names) -> None:
    """A replayed interaction must be well formed and name only pool names (or no name)."""
    r = record
    try:
        i, j, sides = r["i"], r["j"], r["s"]
        ok = (isinstance(r["run"], int) and isinstance(r["t"], int) and isinstance(i, int) and isinstance(j, int)
              and 0 <= i < n_agents and 0 <= j < n_agents and isinstance(sides, list) and len(sides) == 2
              and all(isinstance(x, dict) and (x.get("name") is None or x.get("name") in names) for x in sides))
    except (KeyError, TypeError):
        ok = False
    if not ok:
        raise ValueError(
            f"journal record {str(r)[:160]} is malformed or names something outside the pool {list(names)}; "
            "the journal is corrupt or was edited -- move the directory aside and start the run again"
        )


def replay(records, n_runs: int, *, n_agents: int | None = None, names=None) -> tuple[dict, dict]:
    """What resumption replays: ``({run: [Interaction, ...]}, {run: RunEnd})`` (in memory; long
    runs walk :func:`replayed` instead).

    Interactions of a run count when contiguous from ``t = 0`` (the first occurrence wins);
    with ``n_agents`` and ``names`` every interaction is checked first (:func:`check_interaction`).
    """
    inter = {k: [] for k in range(n_runs)}
    ended = {}
    for _, v in replayed(enumerate(records), n_runs, n_agents=n_agents, names=names):
        if isinstance(v, Interaction):
            inter[v.run].append(v)
        elif isinstance(v, RunEnd):
            ended[v.run] = v
    return inter, ended


def replayed(items, n_runs: int, *, n_agents: int | None = None, names=None):
    """The records a journal's readers use, one at a time (bounded memory): ``(key, view)`` for
    every interaction that counts (:func:`replay`'s rule: contiguous from ``t = 0``, the first
    occurrence wins; checked with ``n_agents`` and ``names``), every run end (:class:`RunEnd`),
    request (:class:`Call`), reused distribution (:class:`Imported`) and budget reservation
    (:class:`Reservation`), in journal order.

    Parameters
    ----------
    items : iterable of (key, dict)
        :meth:`JournalReader.scan`, or ``enumerate(records)``.
    n_runs : int
    """
    counts = {k: 0 for k in range(n_runs)}
    for key, r in items:
        ev = r.get("ev")
        if ev == INTERACTION:
            if n_agents is not None:
                check_interaction(r, n_agents, names)
            k = r["run"]
            if k in counts and r["t"] == counts[k]:  # contiguous, first occurrence wins
                counts[k] += 1
                yield key, Interaction(r)
        elif ev == RUN_END:
            if not isinstance(r.get("run"), int):
                raise ValueError(f"journal record {str(r)[:160]} is malformed; the journal is corrupt")
            yield key, RunEnd(r)
        elif ev == CALL:
            yield key, Call(r)
        elif ev == IMPORTED:
            yield key, Imported(r)
        elif ev == RESERVE:
            yield key, Reservation(r)
