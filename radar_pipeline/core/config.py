"""The settings: every environment variable the package reads, read here and nowhere else.

README's environment table lists exactly the variables of `Settings` (a test holds them to
it). `Settings.from_env` takes any mapping, so a test passes its own; a bad value is a
ConfigError naming the variable. Paths default to `data/` in this repository.

`Settings` is built at the edge and handed down: once by the `radar` command (cli/__init__.py)
and once per run, sensor or schedule evaluation by the Dagster resources (defs/resources.py),
whose fields, shown on the Launchpad, override the environment. Core functions take the
settings, or the part of them they need, as parameters (radar_pipeline_tests/test_layout.py
counts the call sites of `from_env`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.errors import ConfigError
from radar_pipeline.core.layout import LOCKS_DIR, SOURCES_DIR

REPO_ROOT = Path(__file__).resolve().parents[2]

VAULT_ENV = "RADAR_VAULT"
DB_ENV = "RADAR_DB"
DAGSTER_HOME_ENV = "DAGSTER_HOME"
ALLOWED_PRIVATE_HOSTS_ENV = "RADAR_ALLOWED_PRIVATE_HOSTS"
USER_AGENT_CONTACT_ENV = "RADAR_USER_AGENT_CONTACT"
AS_OF_ENV = "RADAR_AS_OF"
PARSE_WORKERS_ENV = "RADAR_PARSE_WORKERS"
RUN_RETENTION_DAYS_ENV = "RADAR_RUN_RETENTION_DAYS"
STORE_URL_ENV = "RADAR_STORE_URL"
AUTOMATION_ENV = "RADAR_AUTOMATION"
HOST_MAX_IN_FLIGHT_ENV = "RADAR_HOST_MAX_IN_FLIGHT"
DEFAULT_HOST_MAX_IN_FLIGHT = 8  # core/acquire/pacing.py says why
DEFAULT_RUN_RETENTION_DAYS = 30
_STORE_SCHEMES = ("postgresql://", "postgres://", "postgresql+")


@dataclass(frozen=True)
class Settings:
    """The documented environment, typed (README, "Environment")."""

    vault: Path  # RADAR_VAULT, absolute
    db: Path  # RADAR_DB, absolute
    dagster_home: Path  # DAGSTER_HOME, absolute
    allowed_private_hosts: tuple[str, ...]  # RADAR_ALLOWED_PRIVATE_HOSTS, as written, trimmed
    user_agent_contact: str  # RADAR_USER_AGENT_CONTACT, "" when unset
    as_of: datetime | None  # RADAR_AS_OF, None: the system clock
    as_of_text: str  # RADAR_AS_OF as given (trimmed), passed on to the runs a tick requests
    parse_workers: int | None  # RADAR_PARSE_WORKERS (at least 1), None: one per core
    run_retention_days: int  # RADAR_RUN_RETENTION_DAYS, a whole number, 0 or more
    store_url: str  # RADAR_STORE_URL, "": the DuckDB file at RADAR_DB
    automation_running: bool  # RADAR_AUTOMATION: `running` (default) or `stopped`
    # RADAR_HOST_MAX_IN_FLIGHT: the ceiling for every host, and hosts' own, e.g. "8,a.org=2"
    host_max_in_flight: tuple[int, tuple[tuple[str, int], ...]] = (DEFAULT_HOST_MAX_IN_FLIGHT, ())
    # The environment the settings were read from: where the variable a Source's
    # `authTokenEnv` names is looked up (the user's own variables, not settings; never shown).
    tokens: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, overrides: Mapping[str, str] | None = None
    ) -> Settings:
        """The settings of `environ` (default: the process environment), with `overrides`
        (variable name -> value: what a Dagster resource's fields set) on top."""
        env: Mapping[str, str] = os.environ if environ is None else environ
        if overrides:
            env = {**env, **overrides}

        def text(name: str) -> str:
            return env.get(name, "").strip()

        as_of_text = text(AS_OF_ENV)
        return cls(
            vault=Path(env.get(VAULT_ENV) or REPO_ROOT / "data" / "vault").absolute(),
            db=Path(env.get(DB_ENV) or REPO_ROOT / "data" / "radar.duckdb").absolute(),
            dagster_home=Path(env.get(DAGSTER_HOME_ENV) or default_dagster_home()).absolute(),
            allowed_private_hosts=tuple(
                h.strip() for h in env.get(ALLOWED_PRIVATE_HOSTS_ENV, "").split(",") if h.strip()
            ),
            user_agent_contact=env.get(USER_AGENT_CONTACT_ENV, ""),
            as_of=_as_of(as_of_text),
            as_of_text=as_of_text,
            parse_workers=_parse_workers(text(PARSE_WORKERS_ENV)),
            run_retention_days=_retention_days(text(RUN_RETENTION_DAYS_ENV)),
            store_url=_store_url(text(STORE_URL_ENV)),
            automation_running=_automation_running(text(AUTOMATION_ENV)),
            host_max_in_flight=_host_max_in_flight(text(HOST_MAX_IN_FLIGHT_ENV)),
            tokens=env,
        )

    @property
    def paths(self) -> RadarPaths:
        return RadarPaths(vault=self.vault, db=self.db, store_url=self.store_url)

    def with_store_url(self, url: str) -> Settings:
        """These settings with the store at `url` (validated as RADAR_STORE_URL is)."""
        return replace(self, store_url=_store_url(url.strip()))

    def token(self, name: str | None) -> str | None:
        """The value of the variable a Source's `authTokenEnv` names, or None."""
        return (self.tokens.get(name) or None) if name else None


def clock_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """RADAR_AS_OF of `environ` (default: the process environment), checked, or None: the
    clock of a code location loaded under a simulated time (`dg dev` in a test or a
    benchmark), read once where the definitions are assembled (definitions.py)."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    text = env.get(AS_OF_ENV, "").strip()
    _as_of(text)
    return text or None


def _as_of(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return parse_utc(value)
    except ValueError:
        raise ConfigError(f"{AS_OF_ENV}={value!r} is not an ISO-8601 time") from None


def _parse_workers(value: str) -> int | None:
    if not value:
        return None
    try:
        return max(1, int(value))
    except ValueError:
        raise ConfigError(f"{PARSE_WORKERS_ENV}={value!r} is not a whole number") from None


def _host_max_in_flight(value: str) -> tuple[int, tuple[tuple[str, int], ...]]:
    """`8`, `github.com=4` or `8,github.com=4,slow.example.org=1`: a bare number is every
    host's ceiling, `host=n` one host's own (each at least 1)."""
    default, hosts = DEFAULT_HOST_MAX_IN_FLIGHT, []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        host, sep, number = part.rpartition("=")
        try:
            n = int(number)
        except ValueError:
            n = 0
        if n < 1 or (sep and not host.strip()):
            raise ConfigError(
                f"{HOST_MAX_IN_FLIGHT_ENV}: {part!r} is not a whole number of at least 1 "
                "or host=number (e.g. 8,github.com=4)"
            )
        if host:
            hosts.append((host.strip().lower(), n))
        else:
            default = n
    return default, tuple(hosts)


def _retention_days(value: str) -> int:
    return days_to_keep(value, RUN_RETENTION_DAYS_ENV) if value else DEFAULT_RUN_RETENTION_DAYS


def days_to_keep(raw: str, name: str) -> int:
    """A number of days of run history to keep, for `RADAR_RUN_RETENTION_DAYS` and `radar
    history prune --keep-days` alike: a whole number, 0 or more (0 keeps only the runs that a
    partition, a check or an open dead letter still needs)."""
    try:
        days = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number of days (e.g. 30)") from None
    if days < 0:
        raise ConfigError(f"{name}={raw!r} must be 0 or more days")
    return days


def _automation_running(value: str) -> bool:
    if value.lower() in ("", "running"):
        return True
    if value.lower() == "stopped":
        return False
    raise ConfigError(f"{AUTOMATION_ENV}={value!r} must be `running` or `stopped`")


def _store_url(value: str) -> str:
    if value and not value.startswith(_STORE_SCHEMES):
        raise ConfigError(f"{STORE_URL_ENV} must be a postgresql:// URL or empty")
    return value


def export_dagster_home(settings: Settings) -> Path:
    """DAGSTER_HOME made absolute in the process environment, where Dagster reads it itself
    (written only when it changes: the environment is shared by every thread)."""
    home = str(settings.dagster_home)
    if os.environ.get(DAGSTER_HOME_ENV) != home:
        os.environ[DAGSTER_HOME_ENV] = home
    return settings.dagster_home


@dataclass(frozen=True)
class RadarPaths:
    """The two places the pipeline writes: the Obsidian vault and the store (the DuckDB file,
    or the PostgreSQL store at `store_url` when that is set)."""

    vault: Path
    db: Path
    store_url: str = ""  # RADAR_STORE_URL, "": the DuckDB file at `db`

    @property
    def sources_dir(self) -> Path:
        return self.vault / SOURCES_DIR

    @property
    def locks_dir(self) -> Path:
        return self.vault / LOCKS_DIR


def default_dagster_home() -> Path:
    return REPO_ROOT / "data" / "dagster_home"
