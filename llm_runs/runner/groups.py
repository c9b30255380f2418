"""Mixed populations: groups of agents with their own model, endpoint, template or sampler."""

from __future__ import annotations

import bisect
import math
from dataclasses import asdict, dataclass

from ..backend import EMBEDDED_MODEL, EndpointConfig
from .prompts import PromptTemplate, load_template
from .sampling import _check_unit
from .settings import GameSettings

#: Keys a group may set (``--group 12:model=A,temperature=0.7``); the rest come from the run.
GROUP_KEYS = ("name", "model", "base_url", "template", "temperature", "top_k", "top_p", "min_p", "max_tokens",
              "price_input", "price_output")


@dataclass(frozen=True)
class GroupSpec:
    """One group of a mixed population as run: its label, agents and effective settings.

    ``model`` / ``base_url`` are ``None`` when the group uses the run's endpoint. The endpoint's
    address and the prices are kept out of the settings hash (as the run's own ``--base-url``
    and ``--price-input``); the manifest records them per session.
    """

    name: str
    size: int
    first_agent: int
    template: str
    template_digest: str
    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None
    max_tokens: int
    model: str | None = None
    base_url: str | None = None
    price_input: float | None = None
    price_output: float | None = None

    def settings(self) -> dict:
        """The group as stored in the run's settings (hashed): where the endpoint lives and what
        it costs may change between sessions (they are in the manifest), the protocol may not."""
        d = asdict(self)
        for k in ("price_input", "price_output", "base_url"):
            d.pop(k)
        return d


def _parse_group_text(text: str) -> dict:
    """``"12:model=A,temperature=0.7"`` -> ``{"size": "12", "model": "A", "temperature": "0.7"}``."""
    size, sep, rest = str(text).partition(":")
    out = {"size": size.strip()}
    for item in filter(None, (x.strip() for x in rest.split(","))) if sep else ():
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--group {text!r}: {item!r} is not KEY=VALUE (keys: {', '.join(GROUP_KEYS)})")
        out[key.strip()] = value.strip()
    return out


def make_groups(groups, s: GameSettings, run_tpl: PromptTemplate, *, embedded: bool,
                n_agents: int) -> tuple[tuple, list]:
    """Validate a mixed population (before any work).

    Parameters
    ----------
    groups : sequence of str or dict, optional
        One entry per group, in agent order: ``"SIZE:key=value,..."`` or
        ``{"size": SIZE, key: value, ...}`` with keys :data:`GROUP_KEYS`. Sizes must add up to
        ``n_agents``; group ``g`` holds the next ``size`` agent ids.
    s : GameSettings
        The run's settings (defaults for every key a group leaves out).
    run_tpl : PromptTemplate
        The run's template (the default of ``template``).
    embedded : bool
        The run's endpoint is the embedded server (a group naming another model then needs
        its own ``base_url``).
    n_agents : int
        Population size as requested (injected committed agents come after and belong to no group).

    Returns
    -------
    (tuple of dict, list of GroupSpec)
        The groups as stored in the settings (hashed) and as run.
    """
    if groups is None or len(groups) == 0:
        return (), []
    if isinstance(groups, (str, dict)):
        groups = [groups]
    specs, first, labels = [], 0, set()
    for k, g in enumerate(groups):
        d = _parse_group_text(g) if isinstance(g, str) else dict(g) if isinstance(g, dict) else None
        if d is None:
            raise TypeError(f"a group must be 'SIZE:key=value,...' or a dict; got {g!r}")
        unknown = sorted(set(d) - set(GROUP_KEYS) - {"size"})
        if unknown:
            raise ValueError(f"group {k}: unknown key(s) {unknown}; allowed: size, {', '.join(GROUP_KEYS)}")
        try:
            size = int(str(d.get("size")).strip())
        except ValueError:
            raise ValueError(f"group {k}: size must be a whole number of agents; got {d.get('size')!r}") from None
        if size < 1:
            raise ValueError(f"group {k}: size must be >= 1; got {size}")
        name = str(d.get("name") or f"g{k}")
        if name in labels:
            raise ValueError(f"group name {name!r} is used twice")
        labels.add(name)

        def num(key, default, cast=float, low=None, none_words=()):
            v = d.get(key, default)
            if v is None or (isinstance(v, str) and v.strip().lower() in none_words):
                return None
            try:
                v = cast(v) if not isinstance(v, bool) else v
            except (TypeError, ValueError):
                raise ValueError(f"group {name}: {key} must be a number; got {d.get(key)!r}") from None
            if isinstance(v, bool) or (cast is float and not math.isfinite(v)):
                raise ValueError(f"group {name}: {key} must be a finite number; got {d.get(key)!r}")
            if low is not None and v < low:
                raise ValueError(f"group {name}: {key} must be >= {low}; got {v}")
            return v

        try:
            tpl = load_template(d["template"]) if d.get("template") is not None else run_tpl
        except ValueError as exc:  # a file that is not a template: say which group named it
            raise ValueError(f"group {name}: template {d['template']!r}: {exc}") from None
        top_k = num("top_k", s.top_k, int, 1, none_words=("none", "0"))
        top_p = _check_unit(num("top_p", s.top_p, none_words=("none",)), f"group {name}: top_p")
        min_p = _check_unit(num("min_p", s.min_p, none_words=("none",)), f"group {name}: min_p")
        mode = s.decision
        mode.check_neutral(top_p, min_p, group=name)
        mode.check_logprobs(s.prefill, top_k, s.top_logprobs, group=name)
        base_url = d.get("base_url") or None
        if base_url is not None and not str(base_url).startswith(("http://", "https://")):
            raise ValueError(f"group {name}: base_url must start with http:// or https://; got {base_url!r}")
        model = d.get("model") or None
        if embedded and model is not None and base_url is None:
            if model != EMBEDDED_MODEL:
                raise ValueError(f"group {name}: model {model!r} needs base_url= (the run has no --base-url, and the "
                                 f"embedded server serves only {EMBEDDED_MODEL})")
        specs.append(GroupSpec(
            name=name, size=size, first_agent=first, template=tpl.name, template_digest=tpl.digest,
            temperature=num("temperature", s.temperature, float, 0.0), top_k=top_k, top_p=top_p, min_p=min_p,
            max_tokens=num("max_tokens", s.max_tokens, int, 1), model=model, base_url=base_url,
            price_input=num("price_input", None, float, 0.0), price_output=num("price_output", None, float, 0.0),
        ))
        first += size
    if first != n_agents:
        raise ValueError(f"the groups hold {first} agents ({' + '.join(str(g.size) for g in specs)}) but the "
                         f"population has {n_agents}; sizes must add up to --n-agents")
    return tuple(g.settings() for g in specs), specs


class AgentLabels:
    """The group label of every agent, looked up from the groups' ranges (``labels[a]``; no list
    of ``N`` labels is made): ``"all"`` in a homogeneous population, ``None`` for injected
    committed agents of a mixed one."""

    def __init__(self, n_agents: int, groups=()):
        self.n_agents = n_agents
        self._firsts = [g["first_agent"] for g in groups]
        self._groups = [(g["first_agent"], g["first_agent"] + g["size"], g["name"]) for g in groups]

    def __len__(self) -> int:
        return self.n_agents

    def __getitem__(self, a) -> str | None:
        a = int(a)
        if not 0 <= a < self.n_agents:
            raise IndexError(a)
        if not self._groups:
            return "all"
        k = bisect.bisect_right(self._firsts, a) - 1
        if k >= 0:
            lo, hi, name = self._groups[k]
            if lo <= a < hi:
                return name
        return None


def agent_groups(s: GameSettings) -> tuple[AgentLabels, dict]:
    """Group label of every agent (:class:`AgentLabels`: ``"all"`` for a homogeneous population;
    ``None`` for injected committed agents of a mixed one) and the model each group asked for
    (``None``: the run's)."""
    if not s.groups:
        return AgentLabels(s.n_agents), {"all": None}
    return AgentLabels(s.n_agents, s.groups), {g["name"]: g.get("model") for g in s.groups}


def group_prices(s: GameSettings, endpoint: EndpointConfig, groups) -> dict:
    """``{group label: (price_input, price_output)}`` (``"all"`` for a homogeneous population)."""
    base = (endpoint.price_input, endpoint.price_output)
    if not groups:
        return {"all": base}
    return {g.name: (base[0] if g.price_input is None else g.price_input,
                     base[1] if g.price_output is None else g.price_output) for g in groups}
