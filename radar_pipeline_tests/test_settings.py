"""The settings module: the documented environment read from any mapping, typed, with each bad
value refused by name."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from radar_pipeline.core.config import REPO_ROOT, Settings
from radar_pipeline.core.errors import ConfigError


def test_defaults_of_an_empty_environment() -> None:
    settings = Settings.from_env({})
    assert (settings.vault, settings.db, settings.dagster_home) == (
        REPO_ROOT / "data" / "vault",
        REPO_ROOT / "data" / "radar.duckdb",
        REPO_ROOT / "data" / "dagster_home",
    )
    assert settings.allowed_private_hosts == ()
    assert (settings.user_agent_contact, settings.as_of, settings.as_of_text) == ("", None, "")
    assert (settings.parse_workers, settings.run_retention_days, settings.store_url) == (
        None,
        30,
        "",
    )


def test_every_variable_is_read_and_typed(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "RADAR_VAULT": str(tmp_path / "v"),
            "RADAR_DB": str(tmp_path / "r.duckdb"),
            "DAGSTER_HOME": str(tmp_path / "h"),
            "RADAR_ALLOWED_PRIVATE_HOSTS": " 127.0.0.1 ,, mirror.lan",
            "RADAR_USER_AGENT_CONTACT": "ops@example.com",
            "RADAR_AS_OF": " 2026-11-30T01:02:03Z ",
            "RADAR_PARSE_WORKERS": "0",
            "RADAR_RUN_RETENTION_DAYS": "7",
            "RADAR_STORE_URL": "postgresql://radar@127.0.0.1/radar",
            "RADAR_AUTOMATION": "Stopped",
        }
    )
    assert (settings.vault, settings.db, settings.dagster_home) == (
        tmp_path / "v",
        tmp_path / "r.duckdb",
        tmp_path / "h",
    )
    assert settings.allowed_private_hosts == ("127.0.0.1", "mirror.lan")
    assert settings.user_agent_contact == "ops@example.com"
    assert settings.as_of == datetime(2026, 11, 30, 1, 2, 3, tzinfo=UTC)
    assert settings.as_of_text == "2026-11-30T01:02:03Z"
    assert (settings.parse_workers, settings.run_retention_days) == (1, 7)
    assert settings.store_url == "postgresql://radar@127.0.0.1/radar"
    assert settings.paths.vault == tmp_path / "v"
    assert not settings.automation_running
    assert Settings.from_env({}).automation_running


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RADAR_AS_OF", "yesterday-ish"),
        ("RADAR_PARSE_WORKERS", "many"),
        ("RADAR_RUN_RETENTION_DAYS", "-1"),
        ("RADAR_RUN_RETENTION_DAYS", "a month"),
        ("RADAR_STORE_URL", "mysql://db"),
        ("RADAR_AUTOMATION", "paused"),
    ],
)
def test_a_bad_value_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: value})
