"""The Radar resource: where the vault and the DuckDB file are, and the pipeline over them."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.store.connection import Store


class RadarResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Vault and DuckDB paths; empty means the environment (`RADAR_VAULT`, `RADAR_DB`)."""

    vault: str = ""
    db: str = ""

    def paths(self) -> RadarPaths:
        env = RadarPaths.from_env()
        return RadarPaths(
            vault=Path(self.vault).absolute() if self.vault else env.vault,
            db=Path(self.db).absolute() if self.db else env.db,
        )

    def store(self) -> Store:
        return Store(self.paths().db)

    def collector(self) -> Collector:
        return Collector(self.paths())
