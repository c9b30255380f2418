"""Readers of published data sets."""
