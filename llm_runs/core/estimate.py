"""What a run is expected to cost (``--dry-run``): :class:`RunEstimate` and the bytes-per-token rule
every estimate of normlab's LLM tasks counts prompts with."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

#: UTF-8 bytes per token assumed by :class:`RunEstimate`. SmolLM2's tokenizer makes 3.37 bytes
#: per token of README's main job's prompts (23 203 tokens reported for 66 requests, chat
#: template included); 3.0 errs on the high side for other byte-level BPE tokenizers.
BYTES_PER_TOKEN = 3.0


@dataclass(frozen=True)
class RunEstimate:
    """What a run or probe is expected to cost, computed before anything is sent (``--dry-run``).

    Two columns: ``typical`` (runs that stop after
    :func:`~normlab.llm_runs.runner.expected_interactions`, valid answers without re-asks) and ``at_most`` (every run to its cap, every re-ask used; in exact mode at
    most one request per distinct prompt). Tokens are estimated from the prompts themselves:
    each prompt is rendered from the template at the memory lengths the design visits, and its
    UTF-8 bytes are divided by :data:`BYTES_PER_TOKEN`; completion tokens are ``max_tokens``
    per request (1 in exact mode). An estimate, not a measurement: tokenizers differ by about
    20 %, and exact-mode populations that converge visit far fewer memory states than the
    bound (README's main job: 66 requests of at most 170).
    """

    what: str
    rows: dict
    prices: dict
    notes: tuple = ()
    done: dict | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per quantity: ``quantity``, ``typical``, ``at_most``."""
        return pd.DataFrame([{"quantity": k, "typical": v[0], "at_most": v[1]} for k, v in self.rows.items()])

    def to_dict(self) -> dict:
        return {"estimate": self.what, "nothing_sent": True,
                **{k: {"typical": v[0], "at_most": v[1]} for k, v in self.rows.items()},
                "prices_usd_per_million": self.prices, "already_done": self.done, "how": list(self.notes)}

    def __str__(self) -> str:
        def fmt(k, v):
            if v is None:
                return "no bound"
            return f"{v:,.4f}" if k == "cost_usd" else f"{v:,.0f}"

        lines = [f"estimate (nothing was sent): {self.what}", f"  {'':<20}{'typical':>14}{'at most':>14}"]
        for k, (a, b) in self.rows.items():
            lines.append(f"  {k.replace('_', ' '):<20}{fmt(k, a):>14}{fmt(k, b):>14}")
        lines.append("  prices (USD per million prompt / completion tokens): "
                     + "; ".join(f"{g}: {p[0]:g} / {p[1]:g}" for g, p in self.prices.items()))
        if self.done:
            lines.append("  already done in this directory: " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else
                                                                       f"{k} {v}" for k, v in self.done.items()))
        lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        (rt, rm), (ct, cm) = self.rows["requests"], self.rows["cost_usd"]
        most = "no bound" if rm is None else f"{rm:,.0f}"
        cost = "no bound" if cm is None else f"${cm:,.4f}"
        return f"RunEstimate(requests ~{rt:,.0f} (at most {most}), cost ~${ct:,.4f} (at most {cost}))"

    def _repr_html_(self) -> str:
        return f"<pre>{self.__str__()}</pre>"

    @classmethod
    def _contract_example(cls) -> "RunEstimate":
        """A ten-request estimate at no cost, literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(what="a toy probe", rows={"requests": (8.0, 10.0), "prompt_tokens": (800.0, 1000.0),
                                             "completion_tokens": (8.0, 10.0), "cost_usd": (0.0, 0.0)},
                   prices={"all": (0.0, 0.0)}, notes=("literal numbers",))
