"""Checking predictions against what LLM populations did: observed critical masses, scores beside
the rival forecasts, transfer across settings, model adequacy, strategy asymmetry, LLM against
theory trajectories and the probe-versus-population comparison.

Imports ``fit/`` and ``prediction/``; nothing in those imports it."""
