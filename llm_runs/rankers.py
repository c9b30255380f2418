"""An LLM plays the ITCMA-S "matrix": it ranks the agents after each LTRHA step (Eq. 19 input).

:class:`LLMRanker` satisfies :class:`normlab.theory.itcmas.Ranker`, so it swaps in for the
closed-form rankers of :func:`normlab.theory.itcmas.simulate_ltrha`. The prompt is data
(``templates/itcmas_matrix.json``, or a JSON file with the same keys, rendered by
:func:`render_matrix_prompt`); the endpoint is
any OpenAI-compatible server, or the embedded SmolLM2 server by default.

References
----------
Y. Zhang et al., "Can Agents Spontaneously Form a Society? ..." (ITCMA-S), arXiv:2409.06750,
Sect. 4.2.2 (the matrix ranks agents; Eq. 19 moves resources by rank).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from normlab import theory

from normlab.user_files import read_user_json

from .backend import EmbeddedServer, EndpointConfig, LLMClient
from .core.sync import run_sync

if TYPE_CHECKING:
    from normlab.theory.itcmas import MatrixInput


#: Keys a matrix prompt template must have (``templates/itcmas_matrix.json``).
MATRIX_KEYS = ("system", "user", "place_line", "agent_line", "acted", "idle", "empty_topic")


def matrix_template() -> dict:
    """The matrix prompt as data (a fresh dict read from ``templates/itcmas_matrix.json``).

    References
    ----------
    Zhang et al., ITCMA-S, arXiv:2409.06750, Sect. 4.2.2 (the paper does not publish its prompt;
    this one is normlab's).
    """
    from importlib.resources import files

    return json.loads(files("normlab.llm_runs.templates").joinpath("itcmas_matrix.json").read_text(encoding="utf-8"))


def render_matrix_prompt(obs: MatrixInput, template: dict | None = None) -> tuple[str, str]:
    """Fill the matrix prompt with one step's observation.

    Parameters
    ----------
    obs : normlab.theory.itcmas.MatrixInput
        The step to describe.
    template : dict, optional
        A prompt with the keys :data:`MATRIX_KEYS` (default: :func:`matrix_template`).

    Returns
    -------
    tuple of str
        ``(system, user)`` messages.

    References
    ----------
    Prompt for the LLM matrix of Sect. 4.2.2 of Zhang et al., ITCMA-S, arXiv:2409.06750, whose
    ranking feeds Eq. 19.
    """
    t = matrix_template() if template is None else template
    missing = set(MATRIX_KEYS) - set(t)
    if missing:
        raise ValueError(f"template lacks keys {sorted(missing)}; it needs the keys {sorted(MATRIX_KEYS)}")
    counts = np.bincount(obs.env, minlength=len(obs.env_names))
    places = "\n".join(
        t["place_line"].format(
            place=name,
            topic=t["empty_topic"] if np.isnan(obs.topic[e]) else f"{obs.topic[e]:+.2f}",
            n_present=int(counts[e]),
        )
        for e, name in enumerate(obs.env_names)
    )
    lines = "\n".join(
        t["agent_line"].format(
            agent=a,
            place=obs.env_names[obs.env[i]],
            action=t["acted"].format(valence=obs.valence[i]) if obs.acted[i] else t["idle"],
            resources=obs.resources[i],
        )
        for i, a in enumerate(obs.agents)
    )
    example = t.get("example", matrix_template()["example"])
    user = t["user"].format(step=obs.step, places=places, agent_lines=lines, n_agents=obs.n_agents, example=example)
    return t["system"], user


@dataclass(frozen=True)
class RankerCall:
    """One ranking request: what was asked, answered and understood."""

    step: int
    text: str | None
    order: tuple
    n_ranked: int
    latency: float
    prompt_tokens: int
    completion_tokens: int
    error: str | None


def parse_ranking(text: str | None, agents) -> list[str]:
    """Agent names in the order an answer ranks them (best first).

    A JSON list is read first; otherwise the agents are taken in the order they are first
    mentioned. Unknown names and repetitions are dropped, so a partial or chatty answer still
    gives a usable (possibly partial) order; missing agents tie last (see
    :func:`normlab.theory.itcmas.ranks_from_order`).

    Parameters
    ----------
    text : str or None
    agents : sequence of str

    Returns
    -------
    list of str
    """
    if not text:
        return []
    agents = list(agents)
    known = set(agents)
    order: list[str] = []
    m = re.search(r"\[[^\[\]]*\]", text)
    if m:
        try:
            items = json.loads(m.group(0))
            if isinstance(items, list):
                order = [str(x).strip() for x in items if str(x).strip() in known]
        except json.JSONDecodeError:
            order = []
    if not order:
        pattern = re.compile(r"\b(" + "|".join(re.escape(a) for a in sorted(agents, key=len, reverse=True)) + r")\b")
        order = pattern.findall(text)
    seen, out = set(), []
    for a in order:
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out


class LLMRanker:
    """The LTRHA matrix played by an LLM (embedded SmolLM2 unless an endpoint is given).

    Use as a context manager, or call :meth:`close`, so that the embedded server is started
    once and stopped at the end::

        with LLMRanker() as ranker:
            res = itcmas.simulate_ltrha(6, 20, ranker=ranker, rng=1)
        ranker.calls_frame()

    Parameters
    ----------
    endpoint : normlab.llm_runs.EndpointConfig, optional
        Default :meth:`EndpointConfig.from_env` (embedded server when no base URL is set).
    template : dict or str or pathlib.Path, optional
        Prompt with the keys :data:`MATRIX_KEYS` (a dict or a JSON file); default
        ``templates/itcmas_matrix.json``.
    temperature : float, optional
    max_tokens : int, optional
        Room for the list of names.
    prefill : bool or None, optional
        Open the assistant answer with ``["`` so that a small model answers with the list
        (default: on for the embedded server, off otherwise).

    References
    ----------
    Implements the LLM matrix of Zhang et al., ITCMA-S, arXiv:2409.06750, Sect. 4.2.2.
    """

    def __init__(self, endpoint=None, *, template=None, temperature: float = 0.5, max_tokens: int = 96,
                 prefill: bool | None = None):
        self.endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
        if not isinstance(self.endpoint, EndpointConfig):
            raise TypeError(f"endpoint must be an EndpointConfig; got {type(self.endpoint).__name__}")
        if template is None:
            template = matrix_template()
        elif isinstance(template, (str, Path)):
            template = read_user_json(template, f"template {template}", max_bytes=2**20)
        if not isinstance(template, dict) or set(MATRIX_KEYS) - set(template):
            raise ValueError(f"template must be a dict with the keys {sorted(MATRIX_KEYS)}")
        if not 0 <= float(temperature) <= 2:
            raise ValueError(f"temperature must be in [0, 2]; got {temperature}")
        if int(max_tokens) < 8:
            raise ValueError(f"max_tokens must be >= 8; got {max_tokens}")
        self.template = template
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.prefill = self.endpoint.embedded if prefill is None else bool(prefill)
        self._server = None
        self._base_url = self.endpoint.base_url
        self._model = self.endpoint.model
        self._calls: list[RankerCall] = []

    # ------------------------------------------------------------------ lifecycle
    def _ensure_endpoint(self):
        if self._base_url is None:
            cfg = self.endpoint
            self._server = EmbeddedServer(n_threads=cfg.embedded_threads, n_parallel=1, n_ctx=cfg.embedded_ctx).start()
            self._base_url, self._model = self._server.base_url, self._server.model

    def close(self) -> None:
        """Stop the embedded server (if this ranker started one)."""
        if self._server is not None:
            self._server.close()
            self._server = None
            self._base_url = self.endpoint.base_url

    def __enter__(self) -> "LLMRanker":
        self._ensure_endpoint()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ ranking
    async def _ask(self, messages, seed):
        async with LLMClient(self._base_url, self._model, self.endpoint) as client:
            return await client.chat(messages, max_tokens=self.max_tokens, temperature=self.temperature, seed=seed)

    def __call__(self, obs, *, rng) -> np.ndarray:
        """Rank the agents of one step (lower = better); the Ranker protocol of ``itcmas``."""
        self._ensure_endpoint()
        system, user = render_matrix_prompt(obs, self.template)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        opening = '["' if self.prefill else ""
        if opening:
            messages.append({"role": "assistant", "content": opening})
        seed = int(rng.integers(0, 2**31 - 1))
        t0 = time.perf_counter()
        res, err = None, None
        try:
            res = run_sync(lambda: self._ask(messages, seed))
        except Exception as exc:  # an unreachable endpoint must not lose the simulation silently
            raise RuntimeError(f"LLM ranker: the endpoint failed at step {obs.step}: {exc}") from exc
        text = None if res.text is None else opening + res.text
        order = parse_ranking(text, obs.agents)
        if not order:
            err = "no agent name in the answer (all agents tie: no reallocation this step)"
        self._calls.append(RankerCall(int(obs.step), text, tuple(order), len(order), time.perf_counter() - t0,
                                      int(res.prompt_tokens), int(res.completion_tokens), err))
        return theory.itcmas.ranks_from_order(order, obs.agents)

    def calls_frame(self):
        """One row per ranking request (``step``, ``text``, ``order``, ``n_ranked``, ``latency``, tokens, ``error``)."""
        import pandas as pd

        cols = RankerCall.__dataclass_fields__
        return pd.DataFrame({c: [getattr(r, c) for r in self._calls] for c in cols})
