"""The resources: where the vault and the DuckDB file are, and the collection of a run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.store.connection import Store

if TYPE_CHECKING:
    from radar_pipeline.core.collect.collector import Collector

# Seconds between two page requests to one host, by default (core/extract/pages'
# DEFAULT_INTERVAL_S; a test holds the two equal): spelled here so that loading the code
# location does not
# import the collector, the fetcher and the parsers (httpx, feedparser, trafilatura, lxml).
# Every process that loads the definitions pays for what it imports, and most of them (the
# daemon's code server, the checks runs, sensor and schedule evaluations) never collect.
PAGE_INTERVAL_S = 1.0


class RadarResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Vault and DuckDB paths; empty means the environment (`RADAR_VAULT`, `RADAR_DB`)."""

    vault: str = ""
    db: str = ""

    def paths(self) -> RadarPaths:
        env = RadarPaths.from_env()
        return RadarPaths(
            vault=Path(self.vault).absolute() if self.vault else env.vault,
            db=Path(self.db).absolute() if self.db else env.db,
            store_url=env.store_url,
        )

    def store(self) -> Store:
        return Store.of(self.paths())


class CollectionResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The Collector of one run: the ops of a collection share its Source locks and parse
    workers, and the end of the run closes it (locks released, workers joined), however the
    run ends."""

    # Parse processes per collection; 0 means RADAR_PARSE_WORKERS or one per core (at most 4).
    parse_workers: int = 0
    # Seconds between two page-extraction requests to one host (robots.txt included).
    page_interval_s: float = PAGE_INTERVAL_S

    _collector: Any = PrivateAttr(default=None)  # a Collector, created on first use

    def collector(self, paths: RadarPaths) -> Collector:
        """This run's Collector over `paths`, created on first use (imported here: only a
        collection run needs it)."""
        from radar_pipeline.core.collect.collector import Collector
        from radar_pipeline.core.extract.pages import PageSettings

        if self._collector is None:
            self._collector = Collector(
                paths,
                parse_workers=self.parse_workers or None,
                page_settings=PageSettings(interval_s=self.page_interval_s),
            )
        collector: Collector = self._collector
        return collector

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        collector, self._collector = self._collector, None
        if collector is not None:
            collector.close()
