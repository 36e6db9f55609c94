"""Experiment tooling for convoy: traces, runs of the convoy command, analysis."""

__version__ = "0.1.0"
