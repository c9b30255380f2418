"""Exact decisions: the model's probability of each pool name at the answer position.

The answer is prefilled up to the name (``{'value': '``) and the next-token logprobs are read.
Multi-token names are scored as full token sequences by continuing the prefill with each
candidate prefix (one more request per distinct prefix, cached), so ``p(name)`` is the product
of the conditional token probabilities summed over the tokenisations visible in the top-K lists.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Awaitable, Callable, Sequence

MULTI_TOKEN_MODES = ("expand", "first_token")


def sampler_probs(top: Sequence[tuple[str, float]], temperature: float, top_k: int | None) -> tuple[list, bool]:
    """The sampler's next-token probabilities from a raw top-logprob list.

    Applies what llama.cpp/vLLM samplers do: keep the ``top_k`` most likely tokens, divide
    logits by ``temperature`` and renormalise. With ``top_k=None`` and ``temperature=1`` the raw
    probabilities are returned unnormalised (mass outside the list is simply not covered).

    Parameters
    ----------
    top : sequence of (str, float)
        Raw ``(token, logprob)`` pairs as returned by the endpoint.
    temperature : float
        ``0`` means greedy (all mass on the most likely token).
    top_k : int or None

    Returns
    -------
    (list of (str, float), bool)
        ``(token, probability)`` pairs and whether the result is approximate (the normalising
        constant needs tokens beyond the list: ``top_k`` larger than the list, or no top-k with
        a temperature other than 1).
    """
    items = sorted(((str(t), float(lp)) for t, lp in top), key=lambda x: -x[1])
    if not items:
        return [], False
    if temperature == 0:
        return [(items[0][0], 1.0)], False
    if top_k is None and temperature == 1:
        return [(t, math.exp(lp)) for t, lp in items], False
    approx = (top_k is None) or (top_k > len(items))
    k = len(items) if top_k is None else min(int(top_k), len(items))
    sel = items[:k]
    m = sel[0][1]
    w = [math.exp((lp - m) / temperature) for _, lp in sel]
    z = sum(w)
    return [(t, x / z) for (t, _), x in zip(sel, w)], approx


@dataclass(frozen=True)
class NameDistribution:
    """Probabilities of the pool names at the answer position of one prompt.

    Attributes
    ----------
    probs : tuple of float or None
        Renormalised over the names, in pool order; ``None`` when no name was reachable.
    mass : tuple of float
        Unnormalised probability of each name under the sampler (``probs = mass / sum(mass)``).
    covered_mass : float
        ``sum(mass)``: probability that the sampled answer starts with a pool name.
    queries : int
        Next-token distributions used (cache hits included).
    approx : bool
        True when a normalising constant was approximated (see :func:`sampler_probs`) or the
        expansion budget cut branches.
    """

    probs: tuple | None
    mass: tuple
    covered_mass: float
    queries: int
    approx: bool


def name_normaliser(names: Sequence[str], case_sensitive: bool):
    """How tokens and names are compared: exactly with ``case_sensitive``, or when two names differ
    only in case; else case-insensitively (``str.lower``)."""
    if case_sensitive or len({n.lower() for n in names}) != len(names):
        return lambda s: s
    return str.lower



async def name_distribution(
    names: Sequence[str],
    fetch: Callable[[str], Awaitable[Sequence[tuple[str, float]]]],
    *,
    temperature: float = 0.5,
    top_k: int | None = 10,
    multi_token: str = "expand",
    case_sensitive: bool = False,
    min_branch: float = 1e-4,
    max_queries: int = 64,
) -> NameDistribution:
    """Distribution over the pool names from next-token logprobs.

    Parameters
    ----------
    names : sequence of str
        The pool (any order; results are in this order).
    fetch : async callable
        ``await fetch(partial)`` returns the raw top-logprob list after the prefill continued
        by the text ``partial`` (``""`` first). The caller caches it.
    temperature, top_k : float, int or None
        Sampler settings applied to every token position (see :func:`sampler_probs`).
    multi_token : {"expand", "first_token"}
        ``"expand"`` (default): follow every token that is a proper prefix of a name until the
        name is complete; exact up to the top-K truncation. ``"first_token"``: a token that
        starts exactly one name counts as that name (one request per prompt; assumes the model
        then completes the name); prefixes shared by several names are still expanded.
    case_sensitive : bool
        Match tokens to names exactly; by default case-insensitively when that is unambiguous
        (as :func:`normlab.llm_runs.runner.prompts.parse_answer`).
    min_branch : float
        Prefixes with probability below this are not expanded (their mass counts as uncovered).
    max_queries : int
        Budget of next-token distributions per prompt.

    Returns
    -------
    NameDistribution

    Notes
    -----
    A name is complete when the generated text (leading whitespace ignored) equals it, or
    continues it with a non-alphanumeric character (``Q'``). When a name is a proper prefix of
    another (``A`` and ``AB``) the shorter one is complete only if the next token does not
    continue alphanumerically, which needs one more request.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Effect of Fine-Tuning; Table S6 (probabilities from the next-token distribution over the
    convention tokens); Fig. S8.
    """
    if multi_token not in MULTI_TOKEN_MODES:
        raise ValueError(f"multi_token must be one of {MULTI_TOKEN_MODES}; got {multi_token!r}")
    norm = name_normaliser(names, case_sensitive)
    nn = [norm(n) for n in names]
    extended = [any(m != n and m.startswith(n) for m in nn) for n in nn]
    mass = [0.0] * len(nn)
    approx = False
    queries = 0
    nodes = [("", 1.0)]
    while nodes:
        budget = max_queries - queries
        if budget <= 0:
            approx = True
            break
        if len(nodes) > budget:
            nodes.sort(key=lambda x: -x[1])
            nodes, approx = nodes[:budget], True
        tops = await asyncio.gather(*(fetch(partial) for partial, _ in nodes))
        queries += len(nodes)
        nxt = []
        for (partial, P), top in zip(nodes, tops):
            dist, ap = sampler_probs(top, temperature, top_k)
            approx |= ap
            for tok, p in dist:
                q = P * p
                if q <= 0.0:
                    continue
                if tok == "":
                    # a token that writes nothing (llama.cpp shows end-of-turn, <|im_end|>, as "" with no
                    # bytes): the answer ends here without a name -- uncovered mass. Expanding it would ask
                    # for the same partial again and again (and count its names' mass once more each time)
                    continue
                new = partial + tok
                s = norm(new.lstrip())
                if s == "":
                    if len(new) <= 4 and q >= min_branch:
                        nxt.append((new, q))
                    continue
                done = False
                for w, n in enumerate(nn):
                    if (s == n and not extended[w]) or (
                        len(s) > len(n) and s.startswith(n) and not s[len(n)].isalnum()
                    ):
                        mass[w] += q
                        done = True
                        break
                if done:
                    continue
                prefix_of = [w for w, n in enumerate(nn) if n.startswith(s)]
                if not prefix_of:
                    continue  # the answer leaves the pool: uncovered mass
                if multi_token == "first_token" and len(prefix_of) == 1 and s != nn[prefix_of[0]]:
                    mass[prefix_of[0]] += q
                    continue
                if q >= min_branch:
                    nxt.append((new, q))
                else:
                    approx = True
        nodes = nxt
    total = sum(mass)
    probs = tuple(m / total for m in mass) if total > 0 else None
    return NameDistribution(probs=probs, mass=tuple(mass), covered_mass=float(total), queries=queries, approx=approx)


def choose(probs: Sequence[float], u: float) -> int:
    """Index drawn by inverse CDF from ``probs`` with the uniform number ``u`` in [0, 1)."""
    acc = 0.0
    last = 0
    for k, p in enumerate(probs):
        if p <= 0:
            continue
        last = k
        acc += p
        if u < acc:
            return k
    return last
