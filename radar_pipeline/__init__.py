"""Radar Pipeline: official engineering news into an Obsidian vault as Signals."""

__version__ = "0.1.0"
