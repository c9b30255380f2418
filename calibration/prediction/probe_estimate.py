"""What ``normlab predict --probe`` will send, before anything is sent (``--dry-run``): the
exact probe of every memory state in every name order plus the endpoint-jitter re-asks, as a
:class:`~normlab.llm_runs.RunEstimate` (the mode, the requests, the tokens, the cost)."""

from __future__ import annotations

from normlab.llm_runs import EndpointConfig, enumerate_states, load_template
from normlab.llm_runs.core.estimate import RunEstimate
from normlab.schema import parse_memory_state, validate_names

from .from_probes import CHARS_PER_TOKEN, probe_cost

__all__ = ["probe_estimate"]


def probe_estimate(names, memory: int, *, endpoint=None, template="main", jitter_states: int = 16, out=None,
                   cache=None, payoffs=(100, -50), wrap: str = "chat"):
    """What ``normlab predict --probe`` will send (``--dry-run``): the exact probe of every memory
    state in every name order (:func:`probe_cost`; prompts already journaled in ``out`` or ``cache``
    not counted) plus the ``jitter_states`` prompts re-asked without the cache, priced at the
    endpoint's prices. Nothing is sent.

    Returns
    -------
    normlab.llm_runs.RunEstimate
    """
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    c = probe_cost(names, memory, template=template, payoffs=payoffs, out=out, cache=cache)
    per = c.prompt_tokens / max(c.to_make, 1) if c.to_make else _prompt_tokens_of(names, memory, template, payoffs)
    js = min(int(jitter_states), c.calls)
    reqs = c.to_make + js
    ptok = c.prompt_tokens + js * per
    pi, po = endpoint.price_input, endpoint.price_output
    usd = (ptok * pi + reqs * po) / 1e6
    rows = {"requests": (float(reqs), float(reqs)), "prompt_tokens": (ptok, ptok),
            "completion_tokens": (float(reqs), float(reqs)), "cost_usd": (usd, usd)}
    where = ("the embedded model " + endpoint.embedded_model if endpoint.embedded else
             f"{endpoint.base_url} ({endpoint.model or 'its first model'})")
    notes = (f"mode: exact (always: the probe reads next-token logprobs; the endpoint must return them), on "
             f"{where}, wrap {wrap}",
             c.line(),
             f"endpoint jitter: {js} of those prompts asked again without the cache (--jitter-states)",
             "names of several tokens need one more request per distinct prefix: a lower bound then",
             f"tokens: characters / {CHARS_PER_TOKEN} (about +-10 %); completion: 1 token a request")
    done = {"prompts already answered": c.cached} if c.cached else None
    return RunEstimate(what=f"exact probe of {c.states} memory states x {c.orders} name orders up to H = {memory}", rows=rows, prices={"all": (pi, po)}, notes=notes, done=done)


def _prompt_tokens_of(names, memory, template, payoffs) -> float:
    """Mean prompt tokens of the probe's prompts (all cached: for the jitter requests' estimate)."""
    tpl = load_template(template)
    names = validate_names(names)
    st = enumerate_states(names, memory)[-1]
    pr = tpl.render(parse_memory_state(st), tuple(names), payoffs=payoffs)
    return sum(len(m["content"]) for m in pr.messages(pr.prefill)) / CHARS_PER_TOKEN
