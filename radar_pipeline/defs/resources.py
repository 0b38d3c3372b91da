"""The resources: the settings of every run, sensor and schedule, the clock, and how a
collection's steps check their Sources.

They are the Dagster face of `core.config.Settings`: each field is one documented variable
(README, "Environment"), shown with its description on the resource's page and the Launchpad,
where a run may set it. A field left empty means the variable, read when the resource is set
up for a run or an evaluation (`environment_settings`: the one read of the environment on this
side), else its documented default. Why the fields are not `dg.EnvVar`s: every variable here is
optional with a default, and Dagster 1.13's `EnvVar` has no default (an unset one fails the
run: dagster-io/dagster#3947, #16232); docs/deployment.md says more.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from radar_pipeline.core.clock import as_of_or_now
from radar_pipeline.core.config import (
    ALLOWED_PRIVATE_HOSTS_ENV,
    AS_OF_ENV,
    DB_ENV,
    HOST_MAX_IN_FLIGHT_ENV,
    RUN_RETENTION_DAYS_ENV,
    STORE_URL_ENV,
    USER_AGENT_CONTACT_ENV,
    VAULT_ENV,
    RadarPaths,
    Settings,
)
from radar_pipeline.core.store.connection import Store

if TYPE_CHECKING:
    from radar_pipeline.core.collect.collector import Collector
    from radar_pipeline.core.extract.pages import PageSettings

# Seconds between two page requests to one host, by default (core/extract/pages'
# DEFAULT_INTERVAL_S; a test holds the two equal): spelled here so that loading the code
# location does not
# import the collector, the fetcher and the parsers (httpx, feedparser, trafilatura, lxml).
# Every process that loads the definitions pays for what it imports, and most of them (the
# daemon's code server, the checks runs, sensor and schedule evaluations) never collect.
PAGE_INTERVAL_S = 1.0
EMPTY_MEANS = "; empty: the environment variable, else its default (README, Environment)"


def environment_settings(overrides: Mapping[str, str] | None = None) -> Settings:
    """The settings of this process's environment, with `overrides` (variable -> value: the
    fields a resource sets) on top. The one place the Dagster side reads the environment."""
    return Settings.from_env(overrides=overrides)


def _set(fields: Mapping[str, str]) -> dict[str, str]:
    """The fields given a value, by the variable each stands for."""
    return {name: value for name, value in fields.items() if value.strip()}


class RadarResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where the pipeline reads and writes (the vault, the provenance store) and the limits of
    its fetches: the documented environment, one field per variable."""

    vault: str = Field(default="", description=f"{VAULT_ENV}: the vault root{EMPTY_MEANS}")
    db: str = Field(default="", description=f"{DB_ENV}: the DuckDB file{EMPTY_MEANS}")
    store_url: str = Field(
        default="",
        description=f"{STORE_URL_ENV}: a postgresql:// provenance store (the team profile)"
        f"{EMPTY_MEANS}",
    )
    allowed_private_hosts: str = Field(
        default="",
        description=f"{ALLOWED_PRIVATE_HOSTS_ENV}: comma list of private hosts that may be "
        f"fetched{EMPTY_MEANS}",
    )
    user_agent_contact: str = Field(
        default="",
        description=f"{USER_AGENT_CONTACT_ENV}: an e-mail address or URL sent in the "
        f"User-Agent{EMPTY_MEANS}",
    )
    host_max_in_flight: str = Field(
        default="",
        description=f"{HOST_MAX_IN_FLIGHT_ENV}: requests in flight per host, e.g. "
        f"8,github.com=4{EMPTY_MEANS}",
    )
    run_retention_days: str = Field(
        default="",
        description=f"{RUN_RETENTION_DAYS_ENV}: days of run history kept by the prune{EMPTY_MEANS}",
    )

    def settings(self) -> Settings:
        """The settings this resource stands for: its fields over the environment."""
        return environment_settings(
            _set(
                {
                    VAULT_ENV: self.vault,
                    DB_ENV: self.db,
                    STORE_URL_ENV: self.store_url,
                    ALLOWED_PRIVATE_HOSTS_ENV: self.allowed_private_hosts,
                    USER_AGENT_CONTACT_ENV: self.user_agent_contact,
                    HOST_MAX_IN_FLIGHT_ENV: self.host_max_in_flight,
                    RUN_RETENTION_DAYS_ENV: self.run_retention_days,
                }
            )
        )

    def paths(self) -> RadarPaths:
        """The vault and the store of these settings."""
        return self.settings().paths

    def store(self) -> Store:
        """The provenance store of these settings."""
        return Store.of(self.paths())


class ClockResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The clock of the schedules, the sensors and the runs they request: `as_of` replaces
    now (simulations and tests); empty: RADAR_AS_OF, else the system clock (a schedule: the
    tick's scheduled time)."""

    as_of: str = Field(
        default="",
        description=f"ISO-8601 time replacing the clock; empty: {AS_OF_ENV}, else now",
    )

    def given(self) -> str:
        """The clock as given (`as_of`, else RADAR_AS_OF); "" when it is the system clock. A
        tick passes it on to the runs it requests, so they decide with the same clock."""
        overrides = _set({AS_OF_ENV: self.as_of})
        return environment_settings(overrides).as_of_text

    def fixed(self) -> datetime | None:
        """The clock when it is set, else None (the system clock)."""
        text = self.given()
        return as_of_or_now(text) if text else None

    def now(self) -> datetime:
        """The clock: the set time, else now (UTC)."""
        return as_of_or_now(self.given())


class CollectionResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """How a collection's steps check their Sources: each slice step opens a Collector of its
    own (its Source locks and parse workers) and closes it before the step ends, so nothing
    of a collection lives between its steps (defs/collection/assets.py)."""

    parse_workers: int = Field(
        default=0,
        description="parse processes per slice of a collection; 0: RADAR_PARSE_WORKERS, else "
        "one per core (at most 4)",
    )
    slice_sources: int = Field(
        default=0,
        description="Sources per slice of a collection (one step each); 0: the default, 100 "
        "(docs/architecture.md, 'A collection in slices')",
    )
    page_interval_s: float = Field(
        default=PAGE_INTERVAL_S,
        description="seconds between two page-extraction requests to one host (robots.txt "
        "included)",
    )

    def page_settings(self) -> PageSettings:
        """The pacing of page extraction (imported here: only a collection run needs it)."""
        from radar_pipeline.core.extract.pages import PageSettings

        return PageSettings(interval_s=self.page_interval_s)

    def collector(self, settings: Settings) -> Collector:
        """A new Collector over `settings`, for one step: the caller closes it (a `with`
        block), which releases its Source locks and joins its parse workers."""
        from radar_pipeline.core.collect.collector import Collector

        return Collector(
            settings,
            parse_workers=self.parse_workers or None,
            page_settings=self.page_settings(),
        )
