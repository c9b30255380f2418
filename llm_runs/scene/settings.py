"""SCENE's settings and prompts: :class:`SceneSettings` (the paper's values where it gives them), the
prompt templates of every role (``prompts/*.json``) and the example scenario."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from string import Template

from normlab._validate import check_int

from .schemas import validate


ROLES = ("scaffold", "hidden", "persona", "subject", "orchestrator", "judge", "audit")


@dataclass(frozen=True)
class SceneSettings:
    """Settings of a SCENE run (the paper's values where it gives them).

    Parameters
    ----------
    max_turns : int
        Ticks per episode (the paper: at most eight turns).
    max_silent_prompts : int
        The episode ends when the subject no-ops through this many consecutive all-silent
        prompts (the paper: three).
    subject_name, subject_bio : str
        The subject's persona when the scaffold does not give one.
    temperature, judge_temperature : float
        Sampling temperature of personas / subject / generator, and of the judge and audit.
    max_tokens, orchestrator_max_tokens, generator_max_tokens, judge_max_tokens : int
    max_reasks : int
        Extra attempts when a generator or judge answer cannot be parsed or validated (the judge
        re-asks only when ``judge_temperature > 0``: at 0 the answer would repeat).
    prefill : bool or None
        Open each answer with its JSON prefix (helps small models); default: on for the
        embedded server, off otherwise.
    reaction_emoji : str
        Not used to invent reactions; only the default label of a reaction whose content is empty.
    honour_terminate : bool
        End the episode when the orchestrator answers ``"terminate": true`` (its prompt, B.5,
        asks it to do so when a sanction was enacted and the subject had
        ``min_post_sanction_turns`` more opportunities, or on a fidelity hard-fail). Only from
        ``min_post_sanction_turns + 1`` ticks on, so that a weak orchestrator cannot end an
        episode before the subject could breach, be sanctioned and react.
    min_post_sanction_turns : int
        The B.5 parameter of the same name (normlab's default: 2).

    References
    ----------
    Jacniacki & Bilski, arXiv:2605.07823 (2026), Sect. 4.3 and 6 (setup).
    """

    max_turns: int = 8
    max_silent_prompts: int = 3
    subject_name: str = "Sam"
    subject_bio: str = "a member of the group"
    temperature: float = 0.7
    judge_temperature: float = 0.0
    max_tokens: int = 96
    orchestrator_max_tokens: int = 48
    generator_max_tokens: int = 700
    judge_max_tokens: int = 700
    max_reasks: int = 1
    prefill: bool | None = None
    reaction_emoji: str = "(reaction)"
    honour_terminate: bool = True
    min_post_sanction_turns: int = 2

    def __post_init__(self):
        check_int(self.min_post_sanction_turns, "min_post_sanction_turns", 0)
        for name in ("max_turns", "max_silent_prompts", "max_tokens", "orchestrator_max_tokens",
                     "generator_max_tokens", "judge_max_tokens"):
            check_int(getattr(self, name), name, 1)
        check_int(self.max_reasks, "max_reasks", 0)
        for name in ("temperature", "judge_temperature"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= 2:
                raise ValueError(f"{name} must be a number in [0, 2]; got {v!r}")
        if not self.subject_name or not isinstance(self.subject_name, str):
            raise ValueError("subject_name must be a non-empty string")


def load_prompt(role: str) -> dict:
    """The prompt template of ``role`` (one of :data:`ROLES`): ``system``, ``user``, ``prefill``."""
    if role not in ROLES:
        raise ValueError(f"unknown prompt role {role!r}; allowed: {ROLES}")
    return json.loads(resources.files("normlab.llm_runs.scene.prompts").joinpath(f"{role}.json").read_text("utf-8"))


def _render(role: str, **values) -> tuple[str, str, str]:
    p = load_prompt(role)
    vals = {k: str(v) for k, v in values.items()}
    return Template(p["system"]).substitute(vals), Template(p["user"]).substitute(vals), p["prefill"]


def load_example_scenario() -> dict:
    """A hand-written ``scenario_v1`` document (bug report, concise-answer norm, silent ignore,
    precedent present; modelled on the paper's episode C.1), for trying the runner."""
    text = resources.files("normlab.llm_runs.scene.data").joinpath("example_scenario.json").read_text("utf-8")
    return validate(json.loads(text), "scenario_v1")


def _settings(settings):
    if settings is None:
        return SceneSettings()
    if not isinstance(settings, SceneSettings):
        raise TypeError(f"settings must be a SceneSettings; got {type(settings).__name__}")
    return settings
