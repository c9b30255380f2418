"""Every figure and table of Flint Ashery, Aiello & Baronchelli (2025), regenerated.

Each figure has a data function (a tidy DataFrame, with ``attrs["notes"]`` saying what was left
out and the key numbers) and a drawing function (a matplotlib Figure); tables have a data function
only. Figures drawn from LLM runs read the published AI-norms archives (any of the four:
``llama3_data.zip``, ``llama31_data.zip``, ``claude_data.zip``, ``llama2_data.zip``) from ``data``
(a folder), ``$NORMLAB_AINORMS`` or ``shared/data/ai-norms`` beside the working directory, and
draw the models present; without them a figure raises :class:`FigureSkipped` with the reason.
Theory figures (Fig. S3, the inset of Fig. 1A, the memory-state figures' fitted tables, the
ITCMA-S analogues) need no data. Figs. S11, S12 and Table S6, whose runs were not published, run
the paper's procedure on an LLM (:mod:`normlab.figures.robustness`: the embedded SmolLM2 unless
``NORMLAB_LLM_BASE_URL`` names an endpoint), journaling every request under ``OUT/llm/``.

>>> from normlab import figures
>>> df = figures.fig1a_data(small=True)          # doctest: +SKIP
>>> figures.fig1a_draw(df).savefig("fig1a.png")  # doctest: +SKIP
>>> figures.make(["fig2a", "table1"], out="figs")  # doctest: +SKIP  (also: ``normlab figures``)

:data:`FIGURES` lists them all; :func:`make` writes PNG and CSV files.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, "Emergent social conventions and collective bias
in LLM populations", Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, S1-S12, Tables 1, S1-S3, S5, S6;
the authors' code Ariel-Flint-Ashery/AI-norms at commit e57aeef (MIT); Zhang et al., ITCMA-S,
arXiv:2409.06750, Figs. 6-7.
"""

from __future__ import annotations

from normlab._lazy import lazy_exports

_EXPORTS = {
    "FIGURES": "registry", "FigureSpec": "registry", "FigureOutcome": "registry", "make": "registry",
    "figure_keys": "registry",
    "Archives": "_common", "FigureSkipped": "_common", "archives": "_common", "find_data": "_common",
    "MODELS": "_common",
    "fig1a_data": "fig1", "fig1a_draw": "fig1", "fig1b_data": "fig1", "fig1b_draw": "fig1",
    "fig2a_data": "fig2", "fig2a_draw": "fig2", "fig2b_data": "fig2", "fig2b_draw": "fig2",
    "consensus_counts": "fig2", "first_move_counts": "fig2",
    "fig3a_data": "fig3", "fig3a_draw": "fig3", "fig3b_data": "fig3", "fig3b_draw": "fig3",
    "fig3_prediction_data": "fig3", "fig3_prediction_draw": "fig3", "critical_masses": "fig3",
    "figS1_data": "meta", "figS1_draw": "meta",
    "figS2_data": "emergence", "figS2_draw": "emergence", "figS6_data": "emergence", "figS6_draw": "emergence",
    "figS7_data": "emergence", "figS7_draw": "emergence",
    "figS3_data": "bias", "figS3_draw": "bias", "figS4_data": "bias", "figS4_draw": "bias",
    "figS5_data": "bias", "figS5_draw": "bias",
    "figS8_data": "memory_states", "figS8_draw": "memory_states", "figS9_data": "memory_states",
    "figS9_draw": "memory_states", "figS10_data": "memory_states", "figS10_draw": "memory_states",
    "table1_data": "tables", "tableS1_data": "tables", "tableS2_data": "tables", "tableS3_data": "tables",
    "tableS5_data": "tables",
    "figS11_data": "robustness", "figS11_draw": "robustness", "figS12_data": "robustness",
    "figS12_draw": "robustness", "tableS6_data": "robustness",
    "itcmas_fig6_data": "itcmas", "itcmas_fig6_draw": "itcmas", "itcmas_fig7_data": "itcmas",
    "itcmas_fig7_draw": "itcmas", "itcmas_gini_data": "itcmas", "itcmas_gini_draw": "itcmas",
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
