"""Meta-prompting: the prompt-comprehension questions of Table S7 (Fig. S1), in the AI-norms
authors' protocol and scoring or normlab's."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from string import Template

import numpy as np
import pandas as pd

from normlab import theory
from normlab._display import fmt, html_card, legend_outside, new_axes, plain, plotting, short_repr, error_bars
from normlab._rng import as_seed_sequence
from normlab._validate import Options, Relation, validated
from normlab.schema import GameLog, memory_state_string, parse_memory_state
from normlab.cli_output import show_progress

from ..backend import EndpointConfig, ReaskLimitError, open_endpoint
from ..core.sync import run_sync
from ..runner.estimate import prompt_tokens
from ..runner.game import REASK_SAFETY_LIMIT
from ..runner.prompts import _fmt, answer_value, load_meta_template
from ..runner.mode import SAMPLE
from ..runner.settings import UNBOUNDED, check_reasks, make_settings
from .common import resolve_endpoint

#: Meta-prompting protocols: the AI-norms authors' code (default) or normlab's Table S7 wording.
META_PROTOCOLS = ("authors", "normlab")
#: Meta-prompting scorings: the authors' substring test, or normlab's stricter exact reading.
META_SCORINGS = ("substring", "strict")


def _scoring(value, name, values):
    """The protocol's own scoring when none is given (the authors': substring; normlab's: strict)."""
    if value is None:
        value = "substring" if values["protocol"] == "authors" else "strict"
    return Options(*META_SCORINGS).check(value, name)


@validated
@dataclass(frozen=True)
class MetaSettings:
    """What a meta-prompting probe asks and how it scores the answers (:func:`meta_prompting`).

    Parameters
    ----------
    protocol : {"authors", "normlab"}
        The AI-norms authors' observer prompt, questions, 15 tokens and re-asks, or Table S7's
        wording with 12 tokens and no re-ask (the defaults of :meth:`sampling_defaults`).
    scoring : {"substring", "strict"}, optional
        Default: the protocol's (``substring`` for the authors', ``strict`` for normlab's).
    states : None, sequence of str or GameLog
        Memory states asked about (checked against the game's pool and memory when asked);
        ``None``: ``n_states`` random states.
    n_states : int
        Random states, or states sampled from a GameLog (checked when they are drawn).
    """

    protocol: str = "authors"
    scoring: str | None = None
    states: object = None
    n_states: int = 20

    _parameter_constraints = {"protocol": Options(*META_PROTOCOLS), "scoring": Relation(_scoring)}

    def sampling_defaults(self, max_tokens, max_reasks) -> tuple:
        """``(max_tokens, max_reasks)`` with the protocol's defaults for those left ``None``: the
        authors' 15 tokens and unbounded re-asks, normlab's 12 tokens and none."""
        if max_tokens is None:
            max_tokens = int(load_meta_template()["authors"]["max_tokens"]) if self.protocol == "authors" else 12
        if max_reasks is None:
            max_reasks = UNBOUNDED if self.protocol == "authors" else 0
        return max_tokens, max_reasks


@dataclass(frozen=True)
class MetaResult:
    """Answers to the prompt-comprehension questions of Table S7.

    Attributes
    ----------
    answers : pandas.DataFrame
        One row per question asked: ``item`` (memory state index), ``memory_state``,
        ``question`` (type: ``min``, ``max``, ``actions``, ``payoff``, ``round``, ``action_i``,
        ``points_i``, ``n_actions``, ``n_points``), ``table_s7`` (the table's row name),
        ``category`` (``rules`` / ``time`` / ``state``), ``text``, ``gold`` (the string the
        scoring looks for), ``answer`` (raw generated text), ``value`` (the answer as the
        scoring reads it), ``correct``, ``reasks``, ``protocol``, ``scoring``.
    model : str
    llm_calls : int
    protocol, scoring : str

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Prompting; Supplementary
    Text, Meta-Prompting; Table S7; Fig. S1.
    """

    answers: pd.DataFrame
    model: str
    llm_calls: int
    protocol: str = "authors"
    scoring: str = "substring"

    def to_frame(self) -> pd.DataFrame:
        return self.answers.copy()

    def accuracy(self) -> pd.DataFrame:
        """Accuracy per question type: ``category``, ``table_s7``, ``question``, ``n``,
        ``correct``, ``accuracy`` (the bars of Fig. S1)."""
        a = self.answers
        g = a.groupby(["category", "table_s7", "question"], sort=False)["correct"]
        out = g.agg(n="size", correct="sum").reset_index()
        out["accuracy"] = out["correct"] / out["n"]
        return out

    def summary(self) -> dict:
        """Overall accuracy and accuracy per question type (plain Python)."""
        a = self.accuracy()
        return plain({"model": self.model, "protocol": self.protocol, "scoring": self.scoring,
                      "questions": int(len(self.answers)), "llm_calls": self.llm_calls,
                      "accuracy": float(self.answers["correct"].mean()) if len(self.answers) else None,
                      "by_question": {str(r["table_s7"]): float(r["accuracy"]) for _, r in a.iterrows()}})

    def __repr__(self) -> str:
        s = self.summary()
        a = self.accuracy()
        worst = a.sort_values("accuracy").head(2)
        low = ", ".join(f"{r['table_s7']} {r['accuracy']:.0%}" for _, r in worst.iterrows())
        return short_repr("MetaResult", self.model, f"{s['questions']} questions",
                          f"accuracy {fmt(s['accuracy'])}", f"lowest: {low}" if low else None,
                          f"protocol={self.protocol}", f"scoring={self.scoring}")

    def _repr_html_(self) -> str:
        a = self.accuracy()
        lo, hi = theory.clopper_pearson(a["correct"].to_numpy(), a["n"].to_numpy())
        rows = [(f"{r['table_s7']} ({r['category']})", r["accuracy"], (l, h), f"{int(r['correct'])}/{int(r['n'])}")
                for (_, r), l, h in zip(a.iterrows(), lo, hi)]
        return html_card("MetaResult", rows, subtitle=f"prompt comprehension (Table S7), {self.model}",
                         settings={"protocol": self.protocol, "scoring": self.scoring, "LLM calls": self.llm_calls},
                         note="Clopper-Pearson intervals; .plot() draws the bars of Fig. S1.")

    @plotting
    def plot(self, *, ax=None):
        """Accuracy per question type with Clopper-Pearson 95% intervals, coloured by category.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. S1, Table S7.
        """
        a = self.accuracy()
        lo, hi = theory.clopper_pearson(a["correct"].to_numpy(), a["n"].to_numpy())
        ax = new_axes(ax, (7.2, 0.32 * len(a) + 1.4))
        y = np.arange(len(a))[::-1]
        cats = list(dict.fromkeys(a["category"]))
        colors = [f"C{cats.index(c)}" for c in a["category"]]
        ax.barh(y, a["accuracy"], color=colors, alpha=0.8)
        ax.errorbar(a["accuracy"], y, xerr=error_bars(a["accuracy"], lo, hi), fmt="none", ecolor="0.2",
                    capsize=3, lw=1)
        dup = a["table_s7"].duplicated(keep=False)
        ax.set_yticks(y, [f"{t} ({q})" if d else t for t, q, d in zip(a["table_s7"], a["question"], dup)])
        for k, c in enumerate(cats):
            ax.barh([np.nan], [np.nan], color=f"C{k}", label=c)
        ax.set(xlim=(0, 1.02), xlabel="accuracy (95% CI)", title=f"{self.model}: prompt comprehension")
        ax.title.set_fontsize(9)
        legend_outside(ax, title="category")
        return ax

    @classmethod
    def _contract_example(cls) -> "MetaResult":
        """Six answers (two states, three question types), literal (``tests/umbrella/test_contracts.py``)."""
        q = [("min", "minimum payoff", "rules", "-50"), ("round", "round", "time", "2"), ("action_i", "action at i", "state", "A")]
        rows = [{"item": k, "memory_state": st, "question": t, "table_s7": s7, "category": cat, "text": f"question {t}",
                 "gold": g, "answer": g if ok else "?", "value": g if ok else None, "correct": ok, "reasks": 0,
                 "protocol": "authors", "scoring": "substring"}
                for k, (st, ok) in enumerate((("A,A", True), ("A,B", False))) for t, s7, cat, g in q]
        return cls(answers=pd.DataFrame(rows), model="stub-model", llm_calls=6)


_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _meta_questions(mem, names, rng, payoffs) -> list[tuple[str, dict, str]]:
    """``(type, placeholders, gold)`` for every question applicable to memory ``mem``.

    The draws follow the authors' ``get_meta_prompt_list``: one round ``i`` per state shared by
    ``action_i`` and ``points_i`` (Player 1), a random player for ``action_i`` and ``n_actions``.
    """
    reward, penalty = payoffs
    x, y = (1, 2)
    p, q = (names[int(rng.integers(len(names)))] for _ in range(2))
    out = [
        ("min", {}, _fmt(min(reward, penalty))),
        ("max", {}, _fmt(max(reward, penalty))),
        ("actions", {}, ",".join(names)),
        ("payoff", {"x": x, "y": y, "p": p, "q": q}, _fmt(reward if p == q else penalty)),
        ("round", {}, str(len(mem) + 1)),
    ]
    if mem:
        i = int(rng.integers(len(mem))) + 1
        who = int(rng.integers(1, 3))
        own, partner = mem[i - 1]
        out.append(("action_i", {"x": who, "i": i}, own if who == 1 else partner))
        out.append(("points_i", {"x": 1, "i": i}, _fmt(reward if own == partner else penalty)))
        who2 = int(rng.integers(1, 3))
        act = names[int(rng.integers(len(names)))]
        cnt = sum(1 for o, pp in mem if (o if who2 == 1 else pp) == act)
        out.append(("n_actions", {"x": who2, "p": act}, str(cnt)))
        score = sum(reward if o == pp else penalty for o, pp in mem)
        out.append(("n_points", {"x": 1}, _fmt(score)))
    return out


def _meta_correct(qtype: str, gold: str, text: str | None, value: str | None, names) -> bool:
    """normlab's strict scoring: the answer field holds the gold name, or a number equal to the gold."""
    if text is None:
        return False
    if qtype == "actions":
        return all(re.search(r"(?<![A-Za-z0-9])" + re.escape(n) + r"(?![A-Za-z0-9])", text) for n in names)
    v = value if value is not None else text
    if qtype == "action_i":
        return v.strip().strip("'\"").lower() == gold.lower()
    m = _NUM.search(v)
    return bool(m) and float(m.group()) == float(gold)


def authors_meta_value(text: str | None) -> str | None:
    """The answer as the authors' ``get_meta_response`` reads it: the generation must contain
    ``value``; its text up to the first ``;`` is split on ``": "`` and the second piece is the
    answer (``None``: no answer, the authors re-ask).

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` (``get_meta_response``), ``meta_prompting.py`` (``gold_sim``),
    ``data-era/meta_prompting.ipynb`` (``run``).
    """
    if text is None or "value" not in text:
        return None
    parts = text.split(";")[0].split(": ")
    return parts[1] if len(parts) >= 2 else None


def authors_meta_gold(qtype: str, gold: str) -> str:
    """The authors' gold string (``gold_sim``) from normlab's gold: names of ``action_i`` in quotes.

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` (``get_meta_response``), ``meta_prompting.py`` (``gold_sim``),
    ``data-era/meta_prompting.ipynb`` (``run``).
    """
    return f"'{gold}'" if qtype == "action_i" else gold


def authors_meta_correct(qtype: str, gold: str, value: str | None, names) -> bool:
    """The authors' substring scoring: ``actions`` is right when every pool name occurs in the
    answer, any other question when the gold string (:func:`authors_meta_gold`) occurs in it.

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` (``get_meta_response``), ``meta_prompting.py`` (``gold_sim``),
    ``data-era/meta_prompting.ipynb`` (``run``).
    """
    if value is None:
        return False
    if qtype == "actions":
        return all(n in value for n in names)
    return authors_meta_gold(qtype, gold) in value


async def ameta_prompting(names, memory: int, *, states=None, n_states: int = 20, template="main",
                          endpoint: EndpointConfig | None = None, temperature: float = 0.5,
                          top_k: int | None = 10, max_tokens: int | None = None, prefill: bool | None = None,
                          payoffs=(100, -50), progress: bool = True, rng=None, protocol: str = "authors",
                          scoring: str | None = None, max_reasks=None, wrap: str = "chat",
                          top_p: float | None = 1.0, min_p: float | None = 0.0) -> MetaResult:
    """Coroutine version of :func:`meta_prompting`.

    The keywords are a convenience: the protocol's settings become a :class:`MetaSettings`, the
    sampler a :class:`~normlab.llm_runs.runner.sampling.Sampling` (with the protocol's own
    ``max_tokens`` and ``max_reasks`` defaults), checked in that order before any work.
    """
    ms = MetaSettings(protocol=protocol, scoring=scoring, states=states, n_states=n_states)
    max_tokens, max_reasks = ms.sampling_defaults(max_tokens, max_reasks)
    max_reasks = check_reasks(max_reasks)
    endpoint = resolve_endpoint(endpoint)
    s, tpl, _ = make_settings(2, memory, names, max_interactions=1, mode=SAMPLE, template=template,
                              payoffs=payoffs, temperature=temperature, top_k=top_k, max_tokens=max_tokens,
                              prefill=prefill, embedded=endpoint.embedded, wrap=wrap, top_p=top_p, min_p=min_p,
                              max_reasks=max_reasks)
    return await _ameta(s, tpl, ms, endpoint=endpoint, progress=progress, rng=rng)


async def _ameta(s, tpl, ms: "MetaSettings", *, endpoint: EndpointConfig, progress: bool, rng) -> MetaResult:
    """Ask the questions of :class:`MetaSettings` ``ms`` about two-agent game settings ``s`` (sample mode)."""
    protocol, scoring, states, n_states = ms.protocol, ms.scoring, ms.states, ms.n_states
    meta = load_meta_template()
    spec = meta["authors"] if protocol == "authors" else meta
    rules = spec.get("rules_main") if (protocol == "authors" and tpl.name == "main") else None
    ss = as_seed_sequence(rng)
    g = np.random.default_rng(ss.spawn(1)[0])
    if states is None:
        if not isinstance(n_states, int) or n_states < 1:
            raise ValueError(f"n_states must be an int >= 1; got {n_states!r}")
        st_list = []
        for _ in range(n_states):
            k = int(g.integers(s.memory + 1))
            st_list.append(memory_state_string(
                (s.names[int(g.integers(len(s.names)))], s.names[int(g.integers(len(s.names)))]) for _ in range(k)))
    elif isinstance(states, GameLog):
        d = states.decisions
        d = d[~d["committed"] & (d["memory_len"] <= s.memory)]
        if d.empty:
            raise ValueError("the GameLog holds no uncommitted decision with memory <= memory")
        idx = g.choice(len(d), size=min(n_states, len(d)), replace=False)
        st_list = [str(x) for x in d["memory_state"].to_numpy()[np.sort(idx)]]
    else:
        st_list = [str(x) for x in states]
    for st in st_list:
        mem = parse_memory_state(st)
        if len(mem) > s.memory or any(a not in s.names or b not in s.names for a, b in mem):
            raise ValueError(f"memory state {st!r} is longer than memory={s.memory} or uses names outside {list(s.names)}")
    items = []
    for si, st in enumerate(st_list):
        mem = parse_memory_state(st)
        order = g.permutation(len(s.names))
        shown = tuple(s.names[k] for k in order)
        for qtype, ph, gold in _meta_questions(mem, s.names, g, s.payoffs):
            text = Template(spec["questions"][qtype]).substitute(**{k: str(v) for k, v in ph.items()})
            prompt = tpl.render(mem, shown, payoffs=s.payoffs, query=spec["query"], user=text, rules=rules)
            items.append((si, st, qtype, text, gold, prompt))
    seeds = g.integers(0, 2**31 - 1, size=len(items))
    unbounded = s.max_reasks == UNBOUNDED
    limit = REASK_SAFETY_LIMIT if unbounded else s.max_reasks + 1
    pre = meta["prefill"] if s.prefill else None

    def _full(raw):
        if raw is not None and pre is not None and not raw.lstrip().startswith(pre.strip()):
            raw = pre + raw
        return raw

    async with open_endpoint(endpoint) as client:
        pbar = None
        if progress:
            from normlab._display import tqdm

            pbar = tqdm(total=len(items), desc="meta-prompting", leave=False, dynamic_ncols=True)

        async def ask(item, seed):
            prompt = item[5]
            sampler = dict(max_tokens=s.max_tokens, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                           min_p=s.min_p)
            raw, attempt = None, 0
            for attempt in range(limit):
                if s.wrap == "chat":
                    res = await client.chat(prompt.messages(pre), seed=int(seed) + attempt, **sampler)
                else:
                    res = await client.complete(prompt.text(s.wrap, pre), seed=int(seed) + attempt, **sampler)
                raw = _full(res.text)
                # the authors re-ask until the generation holds a 'value' field (get_meta_response)
                if protocol != "authors" or authors_meta_value(raw) is not None:
                    break
            else:
                if unbounded:
                    raise ReaskLimitError(
                        f"meta-prompting question {item[2]!r}: no 'value' field in {REASK_SAFETY_LIMIT} answers "
                        f"(last: {str(raw)[:80]!r}); max_reasks='unbounded' stops at this safety limit "
                        "(normlab.llm_runs.runner.REASK_SAFETY_LIMIT); check --wrap and --max-tokens, or use a cap")
            if pbar is not None:
                pbar.update(1)
            return raw, attempt

        try:
            results = await asyncio.gather(*(ask(it, sd) for it, sd in zip(items, seeds)))
        finally:
            if pbar is not None:
                pbar.close()
        model = client.model
        calls = client.n_requests
    rows = []
    for (si, st, qtype, text, gold, _), (raw, reasks) in zip(items, results):
        if scoring == "substring":
            value = authors_meta_value(raw)
            ok = authors_meta_correct(qtype, gold, value, s.names)
            shown_gold = authors_meta_gold(qtype, gold)
        else:
            value = answer_value(raw, meta["answer_key"]) if raw else None
            ok = _meta_correct(qtype, gold, raw, value, s.names)
            shown_gold = gold
        rows.append({"item": si, "memory_state": st, "question": qtype, "table_s7": meta["table_s7_names"][qtype],
                     "category": meta["categories"][qtype], "text": text, "gold": shown_gold, "answer": raw,
                     "value": value, "correct": bool(ok), "reasks": int(reasks), "protocol": protocol,
                     "scoring": scoring})
    return MetaResult(answers=pd.DataFrame(rows), model=model, llm_calls=calls, protocol=protocol, scoring=scoring)


def meta_prompting(names, memory: int, *, states=None, n_states: int = 20, template="main",
                   endpoint: EndpointConfig | None = None, temperature: float = 0.5, top_k: int | None = 10,
                   max_tokens: int | None = None, prefill: bool | None = None, payoffs=(100, -50),
                   progress: bool = True, rng=None, protocol: str = "authors", scoring: str | None = None,
                   max_reasks=None, wrap: str = "chat", top_p: float | None = 1.0,
                   min_p: float | None = 0.0) -> MetaResult:
    """Ask the prompt-comprehension questions of Table S7 about agents' memories.

    For each memory state (random, given, or sampled from the decisions of a
    :class:`~normlab.schema.GameLog` as in the paper's replay of real agents) the game prompt's
    rules and history are shown with an observer instruction, and every applicable question is
    asked: rules (lowest/highest payoff, allowed actions, payoff of an action pair), time
    (current round, action and points in round ``i``) and state (how often an action was
    chosen, current total). Memory-dependent questions are skipped for empty memories.

    Parameters
    ----------
    names : str or sequence of str
    memory : int
        Memory length ``H`` (states longer than ``H`` are rejected).
    states : None, sequence of str or GameLog
        Memory states (schema strings); ``None``: ``n_states`` random states.
    n_states : int
        Random states, or states sampled from a GameLog.
    template : str or PromptTemplate
        Game template whose rules and history are shown.
    protocol : {"authors", "normlab"}
        ``"authors"`` (default): the AI-norms code -- their observer line ("You are an observer
        who answers questions about the game using a single value. ... You write your response
        using the following format: ..."), their questions ("Answer saying what is the lowest
        payoff Player 1 can get in a single round." ...), the rules text of their
        meta-prompting code (``+100``; main template only), 15 new tokens, re-asks until the
        answer has a ``value`` field. ``"normlab"``: the wording of Table S7 ("What is the
        lowest payoff ...?"), 12 tokens, no re-ask.
    scoring : {"substring", "strict"}, optional
        ``"substring"`` (the authors', default with their protocol): correct when the gold
        string occurs in the answer (:func:`authors_meta_correct`); ``"strict"`` (normlab's,
        default with its protocol): the answer field must hold the gold name, or a number equal
        to the gold (so ``'10'`` is not a right answer to ``1``).
    max_reasks : int or "unbounded", optional
        Default ``"unbounded"`` with the authors' protocol (guarded by
        :data:`normlab.llm_runs.runner.REASK_SAFETY_LIMIT`), 0 with normlab's.
    endpoint, temperature, top_k, top_p, min_p, max_tokens, prefill, payoffs, wrap, progress, rng
        As in :func:`normlab.llm_runs.run_game` (``max_tokens`` default: 15 for the authors'
        protocol, 12 for normlab's).

    Returns
    -------
    MetaResult
        ``accuracy()`` gives the accuracy per question type (Fig. S1).

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Meta-Prompting; Table S7; Fig. S1. AI-norms code (MIT): ``prompting.py``
    (``get_meta_prompt``), ``meta_prompting.py`` (``get_question``, ``gold_sim``), ``run_API.py``
    (``get_meta_response``), ``simulation_module.py`` (``simulate_meta_prompting``),
    ``data-era/meta_prompting.ipynb``.
    """
    return run_sync(lambda: ameta_prompting(names, memory, states=states, n_states=n_states, template=template,
                                            endpoint=endpoint, temperature=temperature, top_k=top_k,
                                            max_tokens=max_tokens, prefill=prefill, payoffs=payoffs,
                                            progress=progress, rng=rng, protocol=protocol, scoring=scoring,
                                            max_reasks=max_reasks, wrap=wrap, top_p=top_p, min_p=min_p))


# ----------------------------------------------------------------------------- command line (normlab llm-probe meta; see registry.py)
def command_design(args) -> tuple:
    """The pool and the longest memory the probe's prompts show."""
    return args.names, args.memory


def command_protocol(args, sampling: dict, mode: str) -> tuple:
    """``(sampling, mode)`` as the protocol sends them (its own defaults; sample mode)."""
    authors = args.meta_protocol == "authors"
    sampling["max_tokens"] = sampling["max_tokens"] or (15 if authors else 12)
    sampling["max_reasks"] = (sampling["max_reasks"] if sampling["max_reasks"] is not None
                              else ("unbounded" if authors else 0))
    return sampling, "sample"


def command_run(args, sampling: dict, endpoint, mode: str) -> tuple:
    """Run the probe for ``normlab llm-probe meta``: ``(result, full table, summary)``."""
    kw = sampling
    r = meta_prompting(args.names, args.memory, n_states=args.states, endpoint=endpoint,
                       template=kw["template"], temperature=kw["temperature"], top_k=kw["top_k"],
                       max_tokens=kw["max_tokens"], prefill=kw["prefill"], wrap=kw["wrap"],
                       top_p=kw["top_p"], min_p=kw["min_p"], max_reasks=kw["max_reasks"],
                       protocol=args.meta_protocol, scoring=args.meta_scoring,
                       progress=show_progress(args), rng=args.seed)
    frame = r.to_frame()
    acc = r.accuracy()
    summary = {"probe": "meta", "model": r.model, "protocol": r.protocol, "scoring": r.scoring,
               "questions": int(len(frame)), "llm_calls": r.llm_calls, "reasks": int(frame["reasks"].sum()),
               "accuracy": {q: float(a) for q, a in zip(acc["question"], acc["accuracy"])}}
    return r, frame, summary


def command_table(result, frame) -> pd.DataFrame:
    """Accuracy per question."""
    return result.accuracy()[["question", "n", "correct", "accuracy"]]


def command_estimate(args, s, tpl, per) -> tuple:
    """``--dry-run``: ``(requests (typical, at most), prompt tokens per request, what, notes)``."""
    n = args.states * 9
    ptok = prompt_tokens(s, tpl, args.memory)
    reqs = (n, None if per is None else n * min(per, REASK_SAFETY_LIMIT))
    what = f"meta-prompting: {args.states} memory states x up to 9 questions (sample mode)"
    return reqs, ptok, what, ["meta prompts counted as the main prompt at full memory (the question adds a line)"]
