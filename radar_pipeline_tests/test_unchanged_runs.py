"""An unchanged hour costs seconds: a collection whose Sources answer 304 records nothing on
their partitions, only one observation listing them, and every partition still reads its
Source's last check, through the pass -> fail -> pass flips, asked with the document the
Partitions tab sends to a real `dagster dev`, with Dagster's status cache brought up to date
from new events and rebuilt from scratch (`wipe_asset_cached_status`).

Collections from `radar collect` plan no partition (partition_events.py); a Source that newly
failed is planned and failed by a follow-up run (restate.py)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline_tests.daemonkit import DagsterDev
from radar_pipeline_tests.faults.farm import RADAR, RadarHome
from radar_pipeline_tests.feedserver import FeedServer, conditional
from radar_pipeline_tests.test_ui_truth import partition_health
from radar_pipeline_tests.vaultkit import rss, write_source

SIGNALS = dg.AssetKey("signals")
A = "u-a"  # passes, then answers 304 every time
B = "u-b"  # passes, answers 304, fails (500), then 304 again
T0 = datetime(2026, 11, 2, 9, 17, tzinfo=UTC)
ETAG = '"v1"'
MODIFIED = "Mon, 02 Nov 2026 08:00:00 GMT"


def feed(source_id: str, count: int = 2) -> bytes:
    return rss(
        [
            {"title": f"{source_id} {i}", "guid": f"{source_id}-{i}", "link": f"https://e.x/{i}"}
            for i in range(count)
        ]
    )


def serve(feed_server: FeedServer, source_id: str) -> str:
    """A feed that answers 304 to the validators of its last answer."""
    return feed_server.add(
        f"/{source_id}.xml", handler=conditional(feed(source_id), ETAG, MODIFIED)
    )


def collect(home: RadarHome, at: datetime) -> tuple[int, dict[str, Any]]:
    """`radar collect --all --json` at the clock `at`."""
    proc = subprocess.run(
        [RADAR, "collect", "--all", "--json", "--as-of", format_utc(at)],
        capture_output=True,
        text=True,
        env=home.environ(),
        timeout=300,
    )
    assert proc.stdout.strip(), proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return proc.returncode, report


def outcomes(report: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["outcome"] for s in report["sources"]}


def run_events(instance: dg.DagsterInstance, run_id: str) -> dict[str, list[Any]]:
    """What a run recorded on `signals`: planned partitions, materializations, observations."""
    kinds = {
        "planned": dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
        "materialized": dg.DagsterEventType.ASSET_MATERIALIZATION,
        "observed": dg.DagsterEventType.ASSET_OBSERVATION,
    }
    out: dict[str, list[Any]] = {}
    for name, kind in kinds.items():
        out[name] = [
            e.dagster_event.event_specific_data
            for e in instance.all_logs(run_id, of_type=kind)
            if e.dagster_event is not None and e.dagster_event.asset_key == SIGNALS
        ]
    return out


def planned_partitions(events: dict[str, list[Any]]) -> list[str]:
    """The partitions a run planned (a run without one records one planned event of the
    asset as a whole, with no partition)."""
    return [e.partition for e in events["planned"] if e.partition is not None]


def partitions_of(events: list[Any]) -> list[str | None]:
    """The partition of each materialization or observation event."""
    return sorted(
        (getattr(e, "materialization", None) or e.asset_observation).partition or "-"
        for e in events
    )


def both_orders(dev: DagsterDev) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The Partitions tab read with the status cache brought up to date from the new events,
    then read again after the cache was wiped (rebuilt from every event)."""
    incremental = partition_health(dev)
    with dev.instance() as instance:
        instance.wipe_asset_cached_status([SIGNALS])
    return incremental, partition_health(dev)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_unchanged_checks_record_one_listing_and_flips_read_right_in_the_ui(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    home = RadarHome(tmp_path / "h")
    for sid in (A, B):
        write_source(home.vault, sid, serve(feed_server, sid), cadence="manual")
    with DagsterDev(home.home, home.environ(), tmp_path / "dagster-dev.log") as dev:
        # The first check of each: materialized (a partition never materialized is a flip).
        code, first = collect(home, T0)
        assert code == 0 and outcomes(first) == {A: "passed", B: "passed"}
        dev.wait_partitions([A, B])
        with dev.instance() as instance:
            events = run_events(instance, first["dagsterRunId"])
        assert planned_partitions(events) == []  # the run planned no partition
        assert partitions_of(events["materialized"]) == [A, B]
        assert partition_health(dev) == {"materialized": [A, B], "failed": []}

        # Unchanged: both answer 304. No event on either partition, one observation without
        # a partition listing them, and both still read materialized in both cache orders.
        code, second = collect(home, T0 + timedelta(hours=1))
        assert code == 0 and outcomes(second) == {A: "not-modified", B: "not-modified"}
        with dev.instance() as instance:
            events = run_events(instance, second["dagsterRunId"])
        assert (planned_partitions(events), events["materialized"]) == ([], [])
        [listing] = [e.asset_observation for e in events["observed"]]
        assert listing.partition is None
        assert listing.metadata["checked_unchanged"].value == 2
        assert f"{A}, {B}" in str(listing.metadata["unchanged_sources"].value)
        assert both_orders(dev) == ({"materialized": [A, B], "failed": []},) * 2

        # B fails: the run fails naming it, and its follow-up plans B alone and fails too.
        feed_server.add(f"/{B}.xml", b"down", status=500)
        code, third = collect(home, T0 + timedelta(hours=2))
        assert code == 2 and outcomes(third) == {A: "not-modified", B: "failed"}
        with dev.instance() as instance:
            events = run_events(instance, third["dagsterRunId"])
            [follow_up] = instance.get_runs(
                dg.RunsFilter(tags={"radar/restates": third["dagsterRunId"]})
            )
            restated = run_events(instance, follow_up.run_id)
        assert events["materialized"] == []
        assert partitions_of(events["observed"]) == ["-", B]  # the listing; B's failure line
        assert follow_up.status == dg.DagsterRunStatus.FAILURE
        assert planned_partitions(restated) == [B]
        assert restated["materialized"] == [] and partitions_of(restated["observed"]) == ["-"]
        assert both_orders(dev) == ({"materialized": [A], "failed": [B]},) * 2

        # B answers again after its backoff, the same feed (a day on, both are fetched
        # unconditionally once: every item known): a pass after a failure is materialized
        # although nothing changed; A, unchanged, is not.
        serve(feed_server, B)
        code, fourth = collect(home, T0 + timedelta(days=1))
        assert code == 0 and set(outcomes(fourth).values()) <= {"passed", "not-modified"}
        assert fourth["created"] == 0
        with dev.instance() as instance:
            events = run_events(instance, fourth["dagsterRunId"])
            restates = instance.get_runs(
                dg.RunsFilter(tags={"radar/restates": fourth["dagsterRunId"]})
            )
        assert restates == []
        assert partitions_of(events["materialized"]) == [B]
        assert both_orders(dev) == ({"materialized": [A, B], "failed": []},) * 2

        # B fails twice in a row: the second failure needs no follow-up (already failed).
        feed_server.add(f"/{B}.xml", b"down", status=500)
        code, _ = collect(home, T0 + timedelta(days=2))
        assert code == 2
        code, sixth = collect(home, T0 + timedelta(days=4))
        assert code == 2 and outcomes(sixth)[B] == "failed"
        with dev.instance() as instance:
            restates = instance.get_runs(
                dg.RunsFilter(tags={"radar/restates": sixth["dagsterRunId"]})
            )
        assert restates == []
        assert both_orders(dev) == ({"materialized": [A], "failed": [B]},) * 2


def tree_bytes(*roots: Path) -> int:
    """Bytes on disk under the given files and folders (the project's whole state)."""
    total = 0
    for root in roots:
        paths = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
        total += sum(p.stat().st_size for p in paths if p.exists())
    return total


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_unchanged_collection_of_200_sources_writes_a_handful_of_events(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """The unchanged re-run of 200 Sources: no planned partition, no materialization, one
    observation; the run's events and the state's growth do not scale with the Sources."""
    from radar_pipeline.core.config import Settings
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    ids = [f"u{n:03d}" for n in range(200)]
    for sid in ids:
        write_source(radar_env["vault"], sid, serve(feed_server, sid), cadence="manual")
    settings = Settings.from_env()
    state = (radar_env["home"], radar_env["db"], radar_env["vault"])
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        cold = launch_collection(defs, instance, settings, "all", (), T0, "test")
        assert cold.totals.passed == 200
        cold_events = len(instance.all_logs(str(cold.dagster_run_id)))
        # The first re-run also grows the DuckDB file by its first blocks after the cold run
        # (1.3 MB here, once); what every later unchanged hour adds is the second's.
        launch_collection(defs, instance, settings, "all", (), T0 + timedelta(hours=1), "t")
        before = tree_bytes(*state), tree_bytes(radar_env["home"])
        again = launch_collection(defs, instance, settings, "all", (), T0 + timedelta(hours=2), "t")
        growth = tree_bytes(*state) - before[0]
        instance_growth = tree_bytes(radar_env["home"]) - before[1]
        assert {s.outcome for s in again.sources} == {"not-modified"}
        run_id = str(again.dagster_run_id)
        events = run_events(instance, run_id)
        assert (planned_partitions(events), events["materialized"]) == ([], [])
        [listing] = [e.asset_observation for e in events["observed"]]
        assert listing.metadata["checked_unchanged"].value == 200
        unchanged_events = len(instance.all_logs(run_id))
    # The cold run recorded a materialization per Source; the unchanged one a handful per step
    # (run and step lifecycle, hand-over, logs, the one observation): plan, the one step of two
    # slices of 100, pages and the recording step, about 13 each, none per Source.
    steps = 4
    assert cold_events > 200 and unchanged_events < 16 * steps, (cold_events, unchanged_events)
    # The whole state (instance, store, vault) grows by the runs' own records (the collection's
    # and its checks run's, ~0.2 MB each), not by an event per Source (2,000 Sources planned
    # and materialized were ~31 MB of instance per run).
    assert instance_growth < 800_000 and growth < 1_000_000, (instance_growth, growth)
