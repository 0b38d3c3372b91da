"""The resources carry the settings into the Dagster definitions: every variable a run needs
is a described field (what the resource page and the Launchpad show), a field set on the
resource wins over the environment, and the clock is one of them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from radar_pipeline.cli import main
from radar_pipeline.cli.shell import dagster_instance
from radar_pipeline.core import config
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import AS_OF_ENV, Settings, clock_from_env
from radar_pipeline.core.errors import ConfigError
from radar_pipeline.definitions import defs
from radar_pipeline.defs.resources import ClockResource, CollectionResource, RadarResource

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# Read by the command or the definitions' loading, not by a run: no field stands for them.
NOT_A_FIELD = {"DAGSTER_HOME", "RADAR_AUTOMATION", "RADAR_AS_OF"}


def test_every_variable_a_run_reads_is_a_described_field() -> None:
    resources = defs.get_repository_def().get_top_level_resources()
    described = ""
    for key in ("radar", "clock", "collection"):
        resource = resources[key]
        assert resource.description, f"resource {key} has no description"
        fields = resource.config_schema.config_type.fields  # type: ignore[union-attr]
        for name, field in fields.items():
            assert field.description, f"{key}.{name} has no description"
            described += field.description
    variables = {v for k, v in vars(config).items() if k.endswith("_ENV") and isinstance(v, str)}
    missing = sorted(v for v in variables - NOT_A_FIELD if v not in described)
    assert not missing, f"no resource field describes {missing}"


def test_a_field_set_on_the_resource_wins_over_the_environment(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other-vault"
    assert RadarResource().paths().vault == radar_env["vault"]  # empty: the environment
    assert RadarResource(vault=str(other)).paths().vault == other
    settings = RadarResource(run_retention_days=7, allowed_private_hosts="mirror.lan").settings()
    assert (settings.run_retention_days, settings.allowed_private_hosts) == (7, ("mirror.lan",))
    assert settings.db == radar_env["db"]  # the fields not set still come from the environment


def test_a_bad_field_is_refused_by_its_variable(radar_env: dict[str, Path]) -> None:
    with pytest.raises(ConfigError, match="RADAR_RUN_RETENTION_DAYS"):
        RadarResource(run_retention_days=-1).settings()
    with pytest.raises(ConfigError, match="yesterday-ish"):
        ClockResource(as_of="yesterday-ish").now()
    with pytest.raises(ConfigError, match=AS_OF_ENV):
        clock_from_env({AS_OF_ENV: "yesterday-ish"})


def test_the_clock_is_its_field_else_the_real_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resource reads no environment: RADAR_AS_OF reaches it only where the definitions
    are assembled (`clock_from_env`), or through a run's config."""
    monkeypatch.setenv(AS_OF_ENV, format_utc(T))
    assert ClockResource().given() == "" and ClockResource().fixed() is None
    before = datetime.now(UTC)
    assert before <= ClockResource().now() <= datetime.now(UTC)
    later = format_utc(T.replace(hour=13))
    assert ClockResource(as_of=later).fixed() == ClockResource(as_of=later).now()
    assert ClockResource(as_of=later).now() == T.replace(hour=13)
    assert clock_from_env({AS_OF_ENV: f" {later} "}) == later
    assert clock_from_env({}) is None


def test_the_collection_resource_uses_the_settings_it_is_given(
    radar_env: dict[str, Path],
) -> None:
    """The run's Collector works on the settings it is handed (the `radar` resource's), with
    the resource's own parse workers; the end of the run closes it."""
    settings = Settings.from_env()
    resource = CollectionResource(parse_workers=1)
    collector = resource.collector(settings)
    try:
        assert (collector.paths, collector.workers.count) == (settings.paths, 1)
    finally:
        resource.teardown_after_execution(dg.build_init_resource_context())


def test_a_run_the_command_launches_gets_the_settings_it_read(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`radar cleanup` hands its run the settings it read, as the `radar` resource's config
    (what the run's page and the Launchpad show), and its clock as the run's time."""
    assert main(["cleanup", "--as-of", format_utc(T), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["dagsterRunId"]
    run = dagster_instance(Settings.from_env()).get_run_by_id(run_id)
    assert run is not None
    radar = run.run_config["resources"]["radar"]["config"]
    assert (radar["vault"], radar["db"]) == (str(radar_env["vault"]), str(radar_env["db"]))
    assert radar["run_retention_days"] == 30
    assert radar.get("store_url") == (Settings.from_env().store_url or None)
    assert run.run_config["ops"]["weekly_cleanup"]["config"]["as_of"] == format_utc(T)
