"""LLM population runners, probes and the AI-norms data loader.

Runs the naming game of Flint Ashery et al. (2025) with LLM agents through any OpenAI-compatible endpoint (or an
embedded llama.cpp server with SmolLM2-135M-Instruct), in the paper's ``sample`` mode or the
logprob-based ``exact`` mode, and measures individual bias, strategy tables and prompt
comprehension; ``normlab.llm_runs.scene`` holds the SCENE implicit-norm benchmark (seed 002).
Heavy modules (openai, xllamacpp, the runner) are imported on first use.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports, moved_modules

_EXPORTS = {
    # runner
    "run_game": "runner",
    "arun_game": "runner",
    "LLMRunResult": "runner",
    "GameSettings": "runner",
    "MODES": "runner",
    "STOP_RULES": "runner",
    "ReaskLimitError": "backend",
    "REASK_SAFETY_LIMIT": "runner",
    "estimate_game": "runner",
    "RunEstimate": "core.estimate",
    "ledger_for_directory": "runner",
    # endpoints
    "EndpointConfig": "backend",
    "EndpointError": "backend",
    "EmbeddedServer": "backend",
    "LLMClient": "backend",
    "open_endpoint": "backend",
    "embedded_available": "backend",
    "SpendingCap": "backend",
    "BudgetExhausted": "backend",
    # prompts
    "PromptTemplate": "runner.prompts",
    "Prompt": "runner.prompts",
    "load_template": "runner.prompts",
    "parse_answer": "runner.prompts",
    "WRAPS": "runner.prompts",
    "parse_answer_authors": "runner.prompts",
    # exact mode
    "name_distribution": "runner.exact",
    "NameDistribution": "runner.exact",
    # probes
    "individual_bias": "probes",
    "BiasResult": "probes",
    "find_neutral_names": "probes",
    "NeutralSearch": "probes",
    "strategy_table": "probes",
    "StrategyProbe": "probes",
    "enumerate_states": "probes",
    "meta_prompting": "probes",
    "MetaResult": "probes",
    "bootstrap_p": "probes",
    # ITCMA-S matrix played by an LLM
    "LLMRanker": "rankers",
    "parse_ranking": "rankers",
    "render_matrix_prompt": "rankers",
    "matrix_template": "rankers",
    # testing
    "StubServer": "testing",
    "EMBEDDED_MODELS": "backend.models",
    "embedded_model_path": "backend.model_files",
    "serve_embedded": "backend.embedded",
    # published data (llm_runs/published/)
    "load_ainorms": "published.ainorms",
    "load_ainorms_probes": "published.ainorms",
    "load_ainorms_meta": "published.ainorms",
    # published CRSEC norm databases and run folders (seed 000)
    "load_crsec_norms": "published.crsec",
    "save_crsec_norms": "published.crsec",
    "load_crsec_run": "published.crsec",
}
# sub-packages: CRSEC (seed 000), SCENE (seed 002), published-data readers
_SUBMODULES = {"crsec", "scene", "published"}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, _SUBMODULES)

#: Modules that moved in the regroup (issue 30): their old paths import the very modules of the new ones.
_MOVED = {
    "journaled": "core.journaled",
    "cli_kit": "core.cli_kit",
    "sync": "core.sync",
    "embedded_models": "backend.embedded",
    "exact": "runner.exact",
    "prompts": "runner.prompts",
}
moved_modules(__name__, _MOVED)
