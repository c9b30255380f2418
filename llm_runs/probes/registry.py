"""The registry of probes: what ``normlab llm-probe`` offers, and where each probe lives.

Each entry of :data:`PROBES` names the module of :mod:`normlab.llm_runs.probes` that holds the
probe and describes its command (help, examples, its own flags). The module holds the probe
itself and, at its end, its command hooks: the functions of :class:`ProbeCommand` (the pool and
memory its prompts show, running it, the columns printed, ``--dry-run``'s design), and where it
needs them the optional ones of :data:`OPTIONAL_HOOKS` (its own sampling protocol, notes printed
under the summary).

Adding a probe is one new module plus one entry here: the command line, its help and
``--dry-run`` read this registry, and ``tests/umbrella/test_contracts.py`` checks every entry against
:class:`ProbeCommand`. Light: argparse-level only (the probe modules are imported when a probe
runs).
"""

from __future__ import annotations

import importlib
from collections import namedtuple
from typing import Protocol, runtime_checkable

__all__ = ["ProbeSpec", "PROBES", "ProbeCommand", "OPTIONAL_HOOKS", "arg", "probe_keys"]


@runtime_checkable
class ProbeCommand(Protocol):
    """The command hooks of a probe module (module-level functions; ``self`` is not part of them).

    ``normlab llm-probe KEY`` imports the entry's module (:meth:`ProbeSpec.command`) and calls
    these with the parsed flags ``args`` (the entry's own :attr:`ProbeSpec.arguments`, ``--out``,
    ``--cache`` for journaling probes, and the endpoint and sampling flags).
    """

    def command_design(self, args) -> tuple:
        """``(names, memory)``: the pool and the longest memory the probe's prompts show
        (``--dry-run``, the embedded server's KV cache)."""

    def command_run(self, args, sampling: dict, endpoint, mode: str) -> tuple:
        """Run the probe: ``(result, full table, summary)`` (``summary``: what ``normlab
        llm-probe`` prints, or ``--json``)."""

    def command_table(self, result, frame):
        """The few columns printed (a DataFrame; the full table is saved)."""

    def command_estimate(self, args, settings, template, requests_per_decision) -> tuple:
        """``--dry-run``'s design: ``(requests (typical, at most), prompt tokens per request,
        what, notes)`` (``requests_per_decision``: 1 + the re-asks, None when unbounded)."""


#: Hooks a probe module may add, with their parameters: ``command_protocol(args, sampling, mode)
#: -> (sampling, mode)``, the sampling the probe really sends where its own protocol sets
#: defaults (meta-prompting); ``command_notes(result) -> list of str``, lines printed under the
#: summary (``notes`` in ``--json``): what its numbers are and which question each test answers.
OPTIONAL_HOOKS = {"command_protocol": ("args", "sampling", "mode"), "command_notes": ("result",)}


def arg(*flags: str, **options) -> tuple:
    """One flag of a probe's command: ``argparse.add_argument(*flags, **options)``."""
    return flags, options


_FIELDS = ("key", "module", "label", "summary", "help", "description", "examples", "example", "arguments", "journal",
           "own_sampling")


class ProbeSpec(namedtuple("ProbeSpec", _FIELDS, defaults=((), True, False))):
    """One probe (a named tuple: immutable, and light to import at start-up).

    Attributes
    ----------
    key : str
        ``normlab llm-probe KEY``; the table is saved as ``<key>.parquet``.
    module : str
        Module of :mod:`normlab.llm_runs.probes` holding the probe and its command hooks.
    label : str
        Short name (``llm-probe``'s one-line help).
    summary : str
        What it measures and where in the paper (``llm-probe``'s description).
    help, description, examples : str
        The probe's own help line, description and ``--help`` examples.
    example : str
        Its line among ``llm-probe``'s examples.
    arguments : tuple
        Its own flags (:func:`arg`), before ``--out``, ``--cache`` and the endpoint flags.
    journal : bool
        It journals its decisions in ``--out`` (resumable; ``--cache`` reuses distributions; the
        embedded server's KV cache is sized to its prompts); else ``--out`` receives the table only.
    own_sampling : bool
        Its protocol sets its own ``--max-tokens`` and ``--reask`` defaults (left ``None`` here).
    """

    __slots__ = ()

    def command(self) -> ProbeCommand:
        """The probe's module (its command hooks, :class:`ProbeCommand`); imported on first use."""
        return importlib.import_module(f"normlab.llm_runs.probes.{self.module}")


_NAMES = arg("--names", default="Q,M", help="name pool (default %(default)s)")
_MEMORY = arg("--memory", type=int, default=3, help="memory length H (default %(default)s)")

_SPECS = [
    ProbeSpec(
        "bias", "bias", "individual bias", "individual bias (Fig. 2B, S4, S5)",
        "individual bias: which name an agent with empty memory picks",
        "Individual bias (Fig. 2B, S4, S5): the names a fresh agent (empty memory) picks, with a binomial or "
        "chi-square test against uniform and, in exact mode, the next-token probability of each name.",
        "examples:\n  normlab llm-probe bias --names Q,M --trials 100\n"
        "  normlab llm-probe bias --names Q,M --mode sample --trials 200 --out probes/bias\n",
        "normlab llm-probe bias --names Q,M --trials 100",
        (_NAMES, arg("--trials", type=int, default=100, help="decisions with empty memory (default %(default)s; exact mode: drawn "
                                                   "locally from the exact probabilities, so more trials make any bias "
                                                   "significant at no cost; sample mode: one generation each)"))),
    ProbeSpec(
        "strategy", "strategy", "strategy table", "strategy table (Table 1, Fig. S8)",
        "strategy table: p(name | memory state) for every memory state",
        "Strategy table (Table 1, Fig. S8): the probability of each name in every memory state of length up to "
        "H, exact (next-token probabilities) or sampled.",
        "examples:\n  normlab llm-probe strategy --names Q,M --memory 3\n"
        "  normlab llm-probe strategy --names Q,M --memory 5 --dry-run   # requests and tokens first\n"
        "  normlab llm-probe strategy --names Q,M --memory 3 --mode sample --samples 20 --out probes/h3\n"
        "  normlab llm-probe strategy --names Q,M --memory 5 --cache runs/qm   # reuse a run's journaled calls\n",
        "normlab llm-probe strategy --names Q,M --memory 3 --out probes/h3",
        (_NAMES, _MEMORY,
         arg("--samples", type=int, default=20, help="sample mode: answers per state (default %(default)s)"))),
    ProbeSpec(
        "meta", "meta", "meta-prompting", "meta-prompting comprehension (Table S7, Fig. S1)",
        "meta-prompting: does the model understand the game's rules and its memory?",
        "Meta-prompting comprehension (Table S7, Fig. S1): questions about the rules, the round and the memory "
        "shown, asked in random memory states and scored against the true answers.",
        "examples:\n  normlab llm-probe meta --names Q,M --memory 3 --states 10\n"
        "  normlab llm-probe meta --memory 3 --meta-protocol normlab --meta-scoring strict\n",
        "normlab llm-probe meta --memory 3 --states 10",
        (_NAMES, _MEMORY,
         arg("--states", type=int, default=10, help="random memory states (default %(default)s)"),
         arg("--meta-protocol", default="authors",
             help="authors (their observer line, 'Answer saying ...' questions, 15 tokens, re-asks; "
                  "default) | normlab (Table S7 wording)"),
         arg("--meta-scoring", default=None,
             help="substring (the authors', default with their protocol) | strict (normlab's)")),
        journal=False, own_sampling=True),
    ProbeSpec(
        "neutral", "neutral", "neutral-name search", "the search for neutral random name pools (Figs. S11, S12)",
        "search random name pools the model treats as neutral",
        "Neutral names (Figs. S11, S12): draw random pools of names until one has no individual bias (JSD of "
        "the first-choice distribution from uniform below --threshold).",
        "examples:\n  normlab llm-probe neutral --n-names 2 --length 6 --max-pools 20\n"
        "  normlab llm-probe neutral --n-names 10 --threshold 0.01 --out probes/neutral\n",
        "normlab llm-probe neutral --n-names 2 --length 6",
        (arg("--n-names", type=int, default=2, help="pool size (default %(default)s)"),
         arg("--length", type=int, default=6, help="characters per name (default %(default)s)"),
         arg("--threshold", type=float, default=0.005, help="JSD from uniform (default %(default)s)"),
         arg("--max-pools", type=int, default=20, help="pools tried at most (default %(default)s)")),
        journal=False),
]
#: Every probe, by key, in the order ``normlab llm-probe --help`` lists them.
PROBES: dict[str, ProbeSpec] = {s.key: s for s in _SPECS}


def probe_keys() -> list[str]:
    """The probes' keys, in registry order."""
    return list(PROBES)
