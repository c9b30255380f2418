"""Fitting LLM strategy tables: decision counts per memory state, the registered fit families
(empirical, logit, hierarchical) and their registry, model choice, the fit with its posterior, the
shipped tables, run effects and the contagion model of norm adoption.

The lowest folder of :mod:`normlab.calibration`: it imports none of the others
(``prediction/``, ``evaluate/``, ``tip/``, the root modules)."""
