"""Where the Radar keeps things: vault, DuckDB file and Dagster home, from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

_temp_owner: int | None = None


def temp_owner_pid() -> int:
    """The process id a vault temp file names as its writer (signals.remove_stale_temp_files).

    It is the command's own id, also in the worker processes it forked (core/parallel.py): a
    killed command's leftovers are then stale the moment the command is gone, even while one
    of its workers is still dying in its last fsync (a worker's own id would still be alive).
    """
    return _temp_owner if _temp_owner is not None else os.getpid()


def set_temp_owner(pid: int) -> None:
    """In a worker process: name `pid` (the command) as the writer of its temp files."""
    global _temp_owner
    _temp_owner = pid


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
