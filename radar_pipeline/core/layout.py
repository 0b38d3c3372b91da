"""The vault's layout: every folder and file name the pipeline uses under `RADAR_VAULT`,
spelled once (docs/architecture.md, "Vault layout"). Paths are relative to the vault root."""

from __future__ import annotations

from pathlib import Path

RADAR_DIR = Path("Radar")
SIGNALS_DIR = RADAR_DIR / "Signals"
SOURCES_DIR = RADAR_DIR / "Sources"
TEMPORARY_DIR = RADAR_DIR / "Temporary Content"
# The shipped Obsidian Bases views (core/vault/bases.py writes them).
SIGNALS_VIEW = RADAR_DIR / "Signals.base"
SOURCES_VIEW = RADAR_DIR / "Sources.base"
# Dot folders are hidden in Obsidian; the locks guard this vault, so they live in it.
LOCKS_DIR = Path(".radar") / "locks"
# The folders whose writers leave temp files (the stale-temp cleanup lists exactly these).
WRITTEN_DIRS = (SIGNALS_DIR, TEMPORARY_DIR, SOURCES_DIR, RADAR_DIR)
