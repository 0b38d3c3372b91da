"""`radar collect` plans and fetches while Dagster loads (core/headstart.py); its run takes that
over. Real `radar` processes, a real Dagster instance and DuckDB file, fixture feeds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from radar_pipeline.core.collect import headstart
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.launch import CollectionFailed, launch_collection
from radar_pipeline_tests.vaultkit import rss, write_fixture_source

RADAR = str(Path(sys.executable).parent / "radar")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SOURCES = [f"src-{i}" for i in range(5)]
HEAD_START_LOG = "planned and fetched by `radar collect` while it was starting this run"


def _write_sources(vault: Path, **overrides: object) -> None:
    for i, source_id in enumerate(SOURCES):
        items = [
            {"title": f"Item {i}-{j}", "guid": f"g{i}-{j}", "link": f"https://e.com/{i}/{j}"}
            for j in range(3)
        ]
        write_fixture_source(vault, source_id, rss(items), **overrides)


def _attempts(db: Path) -> list[tuple[str, str, str | None, int | None]]:
    with Store(db).transaction() as con:
        return con.execute(
            "SELECT collection_id, source_id, check_outcome, items_new FROM fetch_attempts "
            "ORDER BY source_id"
        ).fetchall()


def _head_start(vault: Path) -> tuple[RadarPaths, headstart.HeadStart]:
    """The fixture Sources, and a head start over all of them at NOW."""
    _write_sources(vault)
    paths = RadarPaths.from_env()
    head = headstart.begin(paths, "all", (), NOW)
    assert head is not None
    return paths, head


def _instance(home: Path) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(home))


def test_the_command_fetches_while_starting_and_its_run_takes_it_over(
    radar_env: dict[str, Path],
) -> None:
    _write_sources(radar_env["vault"])
    done = subprocess.run(
        [RADAR, "collect", "--all", "--json", "--as-of", "2026-11-30T12:00:00Z"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    run_id = report["dagsterRunId"]
    assert (report["created"], report["passed"]) == (15, 5)
    # Each attempt is recorded under the run's id, completed by the commit (one statement each).
    assert _attempts(radar_env["db"]) == [(run_id, s, "passed", 3) for s in SOURCES]
    with _instance(radar_env["home"]) as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        messages = [e.message or "" for e in instance.all_logs(run_id)]
        assert any(HEAD_START_LOG in m for m in messages), messages
        # One planned event for the whole range, one materialization per Source.
        planned = instance.all_logs(
            run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
        )
        assert len(planned) == 1
        data = planned[0].dagster_event.event_specific_data  # type: ignore[union-attr]
        subset = data.partitions_subset  # type: ignore[union-attr]
        assert sorted(subset.get_partition_keys()) == SOURCES
        assert instance.get_materialized_partitions(dg.AssetKey("signals")) == set(SOURCES)
        assert len(instance.get_runs()) == 1
    # Each Source file's health mirror was written (on the worker processes) before the exit.
    snapshot = load_registry(radar_env["vault"])
    assert {r.source.id: r.source.last_success_at for r in snapshot.sources} == dict.fromkeys(
        SOURCES, NOW
    )


def test_a_head_start_no_run_takes_over_is_abandoned_and_frees_its_sources(
    radar_env: dict[str, Path],
) -> None:
    paths, head = _head_start(radar_env["vault"])
    headstart.abandon(head)  # as when Dagster cannot start
    assert headstart.take(head.run_id) is None
    assert not [k for k in LockBook._held if k[0] == head.run_id]
    # What it fetched stays recorded as attempts of a collection that never committed.
    assert {(r[0], r[2]) for r in _attempts(radar_env["db"])} == {(head.run_id, None)}
    with Store(radar_env["db"]).transaction() as con:
        assert con.execute("SELECT count(*) FROM collections").fetchone() == (0,)
    # The next collection checks every Source (none is left locked) and creates everything.
    with _instance(radar_env["home"]) as instance:
        report = launch_collection(instance, paths, "all", (), NOW, trigger="cli")
    assert (report["passed"], report["skipped"], report["created"]) == (5, 0, 15)


def test_fetches_no_run_committed_still_count_for_min_interval(
    radar_env: dict[str, Path],
) -> None:
    """The publisher saw the abandoned head start's requests: minIntervalSeconds holds."""
    _write_sources(radar_env["vault"], minIntervalSeconds=900)
    paths = RadarPaths.from_env()
    head = headstart.begin(paths, "all", (), NOW)
    assert head is not None
    headstart.abandon(head)
    assert {r[1] for r in _attempts(radar_env["db"])} == set(SOURCES)  # each one fetched
    with _instance(radar_env["home"]) as instance:
        soon = launch_collection(instance, paths, "all", (), NOW + timedelta(minutes=1), "cli")
        assert (soon["passed"], soon["skipped"]) == (0, 5)
        reasons = {s["error"] for s in soon["sources"]}
        assert len(reasons) == 1 and reasons.pop().startswith("rate-limit: minIntervalSeconds")
        later = launch_collection(instance, paths, "all", (), NOW + timedelta(minutes=16), "cli")
    assert (later["passed"], later["created"]) == (5, 15)


def test_a_head_start_its_run_does_not_match_fails_the_run_and_frees_its_sources(
    radar_env: dict[str, Path],
) -> None:
    paths, head = _head_start(radar_env["vault"])
    with _instance(radar_env["home"]) as instance:
        # The run asks for another instant than the one planned and fetched.
        with pytest.raises(CollectionFailed, match="head start"):
            launch_collection(instance, paths, "all", (), NOW + timedelta(hours=1), "cli", head)
        assert not [k for k in LockBook._held if k[0] == head.run_id]
        assert "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS" not in os.environ
        report = launch_collection(instance, paths, "all", (), NOW, trigger="cli")
    assert (report["passed"], report["created"]) == (5, 15)


def test_no_head_start_when_the_launch_would_not_run(radar_env: dict[str, Path]) -> None:
    paths = RadarPaths.from_env()
    assert headstart.begin(paths, "due", (), NOW) is None  # no Source at all
    _write_sources(radar_env["vault"])
    assert headstart.begin(paths, "explicit", ("src-0", "nope"), NOW) is None
    assert headstart._pending == {}


def test_a_command_whose_dagster_fails_to_start_frees_what_its_head_start_took(
    radar_env: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from radar_pipeline import cli
    from radar_pipeline.core.errors import RadarError

    def broken_instance() -> dg.DagsterInstance:
        raise RadarError("the Dagster instance is broken (test)")

    _write_sources(radar_env["vault"])
    monkeypatch.setattr(cli, "dagster_instance", broken_instance)
    assert cli.main(["collect", "--all"]) == cli.EXIT_ERROR
    assert "the Dagster instance is broken (test)" in capsys.readouterr().err
    assert headstart._pending == {}
    assert LockBook._held == {}
    assert headstart.SUBSET_PLANNED_EVENTS not in os.environ
    # It fetched every Source before Dagster failed; the attempts say so, uncommitted.
    assert {(r[1], r[2]) for r in _attempts(radar_env["db"])} == {(s, None) for s in SOURCES}
