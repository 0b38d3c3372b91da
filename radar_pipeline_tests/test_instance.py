"""The Dagster instance survives a kill at its birth.

The broken state is built the way a SIGKILL during the first start leaves it: the event log
index `history/runs/index.db` with the tables created before the kill (event_logs,
secondary_indexes, asset_keys, asset_event_tags) and no schema stamp (alembic_version). The
fault suite (faults/test_kill.py) reproduces it with real kills; this test pins the repair.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import dagster as dg
import pytest

from radar_pipeline.defs.instance import open_instance
from radar_pipeline_tests.test_cli import radar
from radar_pipeline_tests.vaultkit import rss, write_fixture_source

# What create_all had made of the index when the kill came; the rest never got created.
LOGGER = "radar_pipeline.defs.instance"
MADE_BEFORE_THE_KILL = {"event_logs", "secondary_indexes", "asset_keys", "asset_event_tags"}


def half_create(home: Path) -> None:
    """A DAGSTER_HOME whose first start was killed while it created the event log index."""
    with open_instance(home):
        pass
    index = home / "history" / "runs" / "index.db"
    con = sqlite3.connect(index)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            if table not in MADE_BEFORE_THE_KILL:
                con.execute(f'DROP TABLE "{table}"')
        con.commit()
    finally:
        con.close()


def stamped(home: Path) -> bool:
    con = sqlite3.connect(home / "history" / "runs" / "index.db")
    try:
        return bool(con.execute("SELECT count(*) FROM alembic_version").fetchone()[0])
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def test_the_half_created_state_breaks_a_plain_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    half_create(home)
    broken = pytest.raises(dg.DagsterInvalidInvocationError, match="dagster instance migrate")
    with dg.DagsterInstance.from_config(str(home)) as instance, broken:
        instance.get_dynamic_partitions("sources")


def test_open_instance_repairs_only_a_half_created_storage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    with caplog.at_level(logging.INFO, LOGGER), open_instance(home) as instance:
        assert instance.get_dynamic_partitions("sources") == []
    assert not caplog.records  # a healthy storage is never "repaired" (upgrade is slow)
    half_create(home)
    assert not stamped(home)
    with caplog.at_level(logging.INFO, LOGGER), open_instance(home) as instance:
        assert instance.get_dynamic_partitions("sources") == []
    assert [r.message for r in caplog.records if "half-created" in r.message]
    assert stamped(home)


def test_the_next_radar_start_after_a_kill_at_birth_collects(radar_env: dict[str, Path]) -> None:
    item = {"title": "t", "guid": "1", "link": "https://example.com/1"}
    write_fixture_source(radar_env["vault"], "fixture", rss([item]))
    half_create(radar_env["home"])
    proc = radar("collect", "--all", "--json", env=radar_env)
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
    report = json.loads(proc.stdout)  # the repair printed nothing into the JSON
    assert (report["created"], report["failed"]) == (1, 0)
    assert stamped(radar_env["home"])
