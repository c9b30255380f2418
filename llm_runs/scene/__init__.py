"""SCENE: implicit-norm scenarios, sanction metrics and a thin episode runner.

A subject model joins a group chat whose scripted personas follow a hidden norm and sanction
breaches; the judged transcripts are scored for repair after sanctioning (Wilson intervals),
evidence-dependent adaptation (Spearman's rho with bootstrap intervals), compliance under
opposing norm pairs, and fidelity. The taxonomy IDs are the paper's; the ``applies_to``
lists are normlab's (``data/taxonomy.json``). Heavy modules load on first use.

Examples
--------
>>> from normlab.llm_runs import EndpointConfig, scene                      # doctest: +SKIP
>>> tuples = scene.sample_tuples(20, rng=0)                                 # coverage-greedy
>>> eps = scene.run_scene(tuples, endpoint=EndpointConfig(base_url=JUDGE_URL, model="..."),
...                       subject=EndpointConfig(base_url=MY_URL, model="my-model"), rng=0,
...                       out="runs/scene")                     # resumable sweep directory
>>> res = scene.score("runs/scene", rng=0)       # res.to_frame(): tidy metrics; res.plot(): beside the paper

References
----------
M. Jacniacki, M. Bilski, "SCENE: Recognizing Social Norms and Sanctioning in Group Chats",
arXiv:2605.07823 (2026).
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    # taxonomy
    "TAXONOMY": "taxonomy",
    "AXES": "taxonomy",
    "Taxonomy": "taxonomy",
    "AxisEntry": "taxonomy",
    "SceneTuple": "taxonomy",
    "load_taxonomy": "taxonomy",
    "valid_tuples": "taxonomy",
    "sample_tuples": "taxonomy",
    "check_tuple": "taxonomy",
    "is_valid": "taxonomy",
    # schemas
    "SCHEMAS": "schemas",
    "SchemaValidationError": "schemas",
    "load_schema": "schemas",
    "validate": "schemas",
    "read_json": "schemas",
    "write_json": "schemas",
    # episodes
    "Turn": "episode",
    "Episode": "episode",
    "LABELS": "episode",
    "episode_measures": "episode",
    "load_episodes": "episode",
    "save_episodes": "episode",
    "render_transcript": "episode",
    # scoring
    "wilson": "scoring",
    "spearman_bootstrap": "scoring",
    "score": "scoring",
    "SceneScore": "scoring",
    "PublishedResults": "scoring",
    "load_published": "scoring",
    # settings, generation, episodes (play, judge, audit), parsing, the sweep
    "SceneSettings": "settings",
    "load_example_scenario": "settings",
    "generate_scenario": "generation",
    "run_episode": "play",
    "judge_episode": "play",
    "audit_episode": "play",
    "parse_action": "parsing",
    "extract_json": "parsing",
    "run_scene": "runner",
    "sweep_summary": "runner",
    "zero_turn_warning": "runner",
    "estimate_scene": "runner",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
