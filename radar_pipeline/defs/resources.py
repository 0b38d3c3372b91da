"""The resources: the settings of every run, sensor and schedule, the clock, and how a
collection's steps check their Sources.

They are the Dagster face of `core.config.Settings`: each field is one documented variable
(README, "Environment"), shown with its description on the resource's page and the Launchpad,
where a run may set it. A field left unset (None, never an empty string) means the variable,
read when the resource is first asked for its settings in a run or an evaluation
(`environment_settings`: the one read of the environment on this side, once per resource),
else its documented default. Why the fields are not `dg.EnvVar`s: every variable here is
optional with a default, and Dagster 1.13's `EnvVar` has no default (an unset one fails the
run: dagster-io/dagster#3947, #16232); docs/deployment.md says more.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field, PrivateAttr

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.config import (
    ALLOWED_PRIVATE_HOSTS_ENV,
    DB_ENV,
    HOST_MAX_IN_FLIGHT_ENV,
    RUN_RETENTION_DAYS_ENV,
    STORE_URL_ENV,
    USER_AGENT_CONTACT_ENV,
    VAULT_ENV,
    RadarPaths,
    Settings,
)
from radar_pipeline.core.errors import ConfigError
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
UNSET_MEANS = "; unset: the environment variable, else its default (README, Environment)"


def environment_settings(overrides: Mapping[str, str] | None = None) -> Settings:
    """The settings of this process's environment, with `overrides` (variable -> value: the
    fields a resource sets) on top. The one place the Dagster side reads the environment."""
    return Settings.from_env(overrides=overrides)


class RadarResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where the pipeline reads and writes (the vault, the provenance store) and the limits of
    its fetches: the documented environment, one field per variable. A field left unset is the
    variable, else its default; the settings are read once per resource (`settings`)."""

    vault: str | None = Field(default=None, description=f"{VAULT_ENV}: the vault root{UNSET_MEANS}")
    db: str | None = Field(default=None, description=f"{DB_ENV}: the DuckDB file{UNSET_MEANS}")
    store_url: str | None = Field(
        default=None,
        description=f"{STORE_URL_ENV}: a postgresql:// provenance store (the team profile)"
        f"{UNSET_MEANS}",
    )
    allowed_private_hosts: str | None = Field(
        default=None,
        description=f"{ALLOWED_PRIVATE_HOSTS_ENV}: comma list of private hosts that may be "
        f"fetched{UNSET_MEANS}",
    )
    user_agent_contact: str | None = Field(
        default=None,
        description=f"{USER_AGENT_CONTACT_ENV}: an e-mail address or URL sent in the "
        f"User-Agent{UNSET_MEANS}",
    )
    host_max_in_flight: str | None = Field(
        default=None,
        description=f"{HOST_MAX_IN_FLIGHT_ENV}: requests in flight per host, e.g. "
        f"8,github.com=4{UNSET_MEANS}",
    )
    run_retention_days: int | None = Field(
        default=None,
        description=f"{RUN_RETENTION_DAYS_ENV}: days of run history kept by the prune{UNSET_MEANS}",
    )

    # The settings of this resource, read on first use: a run's ops, checks and sensors ask
    # for them many times; the environment is read once per resource (a run, an evaluation).
    _settings: Settings | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        """The settings this resource stands for: its fields over the environment."""
        if self._settings is None:
            fields = {
                VAULT_ENV: self.vault,
                DB_ENV: self.db,
                STORE_URL_ENV: self.store_url,
                ALLOWED_PRIVATE_HOSTS_ENV: self.allowed_private_hosts,
                USER_AGENT_CONTACT_ENV: self.user_agent_contact,
                HOST_MAX_IN_FLIGHT_ENV: self.host_max_in_flight,
                RUN_RETENTION_DAYS_ENV: None
                if self.run_retention_days is None
                else str(self.run_retention_days),
            }
            self._settings = environment_settings(
                {name: value for name, value in fields.items() if value is not None}
            )
        return self._settings

    def paths(self) -> RadarPaths:
        """The vault and the store of these settings."""
        return self.settings().paths

    def store(self) -> Store:
        """The provenance store of these settings."""
        return Store.of(self.paths())


class ClockResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The one clock of a run, a check, a schedule or a sensor: `as_of` when it is set (the
    run's config, shown on the Launchpad: a simulation, a test, the `--as-of` of the command
    that launched the run), else the real time (a schedule: its tick's scheduled time). It
    reads no environment: `definitions.py` sets it where the code location is loaded."""

    as_of: str | None = Field(
        default=None,
        description="ISO-8601 time replacing the clock for every decision and timestamp of "
        "the run (simulations, tests); unset: the real time",
    )

    def given(self) -> str:
        """The set time as its text, "" when the clock is the real time: a tick passes it on
        to the runs it requests (their `as_of`), so they decide with the same clock."""
        return (self.as_of or "").strip()

    def fixed(self) -> datetime | None:
        """The clock when it is set, else None (the real time)."""
        text = self.given()
        if not text:
            return None
        try:
            return parse_utc(text)
        except ValueError:
            raise ConfigError(f"the clock's as_of {text!r} is not an ISO-8601 time") from None

    def now(self) -> datetime:
        """The clock: the set time, else the real time (UTC)."""
        return self.fixed() or datetime.now(UTC)


def settings_run_config(settings: Settings) -> dict[str, object]:
    """The part of a run's config that hands it the settings its launcher read (the `radar`
    command reads the environment once): the run then reads no environment for them, and the
    Launchpad and the run's page show the values in force."""
    limit, hosts = settings.host_max_in_flight
    fields: dict[str, object] = {
        "vault": str(settings.vault),
        "db": str(settings.db),
        "store_url": settings.store_url or None,
        "allowed_private_hosts": ",".join(settings.allowed_private_hosts) or None,
        "user_agent_contact": settings.user_agent_contact or None,
        "host_max_in_flight": ",".join([str(limit), *(f"{h}={n}" for h, n in hosts)]),
        "run_retention_days": settings.run_retention_days,
    }
    config = {name: value for name, value in fields.items() if value is not None}
    return {"resources": {"radar": {"config": config}}}


def with_resources(run_config: Mapping[str, Any], *parts: Mapping[str, Any]) -> dict[str, Any]:
    """`run_config` with the resource configs of `parts` (`settings_run_config`,
    `clock_run_config`) merged into its `resources`."""
    merged = dict(run_config)
    resources = dict(merged.get("resources", {}))
    for part in parts:
        resources.update(part.get("resources", {}))
    if resources:
        merged["resources"] = resources
    return merged


def clock_run_config(as_of: str) -> dict[str, object]:
    """The part of a run's config that sets its `clock` resource to `as_of` (nothing for ""):
    every op and check of the run then reads that one time, and the Launchpad shows it."""
    if not as_of.strip():
        return {}
    return {"resources": {"clock": {"config": {"as_of": as_of.strip()}}}}


class CollectionResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """How a collection's steps check their Sources: each step opens a Collector of its own
    (its Source locks and parse workers) for its slices and closes it before the step ends, so
    nothing of a collection lives between its steps (defs/collection/assets.py)."""

    parse_workers: int | None = Field(
        default=None,
        ge=0,
        description="parse processes per step of a collection (0: parse in the step's own "
        "process); unset: RADAR_PARSE_WORKERS, else one per core (at most 4)",
    )
    slice_sources: int | None = Field(
        default=None,
        ge=1,
        description="Sources per slice of a collection (one step each); unset: 100 "
        "(docs/architecture.md, 'A collection in slices')",
    )
    step_slices: int | None = Field(
        default=None,
        ge=1,
        description="slices a collection step checks in turn, with one set of parse workers; "
        "unset: 5 (docs/architecture.md, 'A collection in slices')",
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
            parse_workers=self.parse_workers,
            page_settings=self.page_settings(),
        )
