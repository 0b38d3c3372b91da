"""Where the Radar keeps things: vault, DuckDB file and Dagster home, from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class RadarPaths:
    """The two places the pipeline writes: the Obsidian vault and the DuckDB file."""

    vault: Path
    db: Path

    @property
    def signals_dir(self) -> Path:
        return self.vault / "Radar" / "Signals"

    @property
    def sources_dir(self) -> Path:
        return self.vault / "Radar" / "Sources"

    @property
    def temporary_dir(self) -> Path:
        return self.vault / "Radar" / "Temporary Content"

    @property
    def locks_dir(self) -> Path:
        # Dot folders are hidden in Obsidian; the locks guard this vault, so they live in it.
        return self.vault / ".radar" / "locks"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RadarPaths:
        env = os.environ if environ is None else environ
        vault = Path(env.get("RADAR_VAULT") or REPO_ROOT / "data" / "vault")
        db = Path(env.get("RADAR_DB") or REPO_ROOT / "data" / "radar.duckdb")
        return cls(vault=vault.absolute(), db=db.absolute())


def default_dagster_home() -> Path:
    return REPO_ROOT / "data" / "dagster_home"
