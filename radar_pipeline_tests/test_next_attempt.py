""" "Next attempt" is the real next attempt where no check moved a Source's backoff or its last
success: after a collection that failed as a whole (the Source note's `nextAttemptAt` names
when the schedule asks for the Source again, and the schedule then does), and for a `manual`
Source under a wait that holds back a run by hand ("when run by hand, not before <time>" in
its partition's line, `radar report` and the report's `notBefore`). On a real temp Dagster
instance, the loopback feed server, real vault files and store; the schedule is evaluated as
the daemon evaluates it (`due_tick`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.errors import CollectionError
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.defs.registry.sensors import source_registry_sensor
from radar_pipeline_tests.conftest import store_rows
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.sensorkit import partition_events
from radar_pipeline_tests.test_schedule_blocks import backoff_of
from radar_pipeline_tests.test_sensors import (
    SIX_HOURS,
    T0,
    apply_partitions,
    block_of,
    due_tick,
    launch,
    tick,
    wave_slot,
    write_feed_source,
)
from radar_pipeline_tests.vaultkit import rss, write_source

FEED = rss([{"title": "new", "guid": "new", "link": "https://example.com/new"}])


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


def note_key(vault: Path, source_id: str, key: str = "nextAttemptAt") -> object:
    path = vault / "Radar" / "Sources" / f"{source_id}.md"
    frontmatter, _ = split_frontmatter(path.read_text(encoding="utf-8"))
    return frontmatter.get(key)


def break_signals_folder(vault: Path) -> Path:
    """A fault of the vault that fails a collection as a whole: its Signals folder is a file,
    so the run cannot list it nor write a Signal there (nothing of the store is touched)."""
    folder = vault / SIGNALS_DIR
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("not a folder\n")
    return folder


def repair_signals_folder(folder: Path) -> None:
    folder.unlink()
    folder.mkdir()


def feed_state(source_id: str) -> tuple[Any, ...]:
    [row] = store_rows(
        "SELECT backoff_until, consecutive_failures, error_state, last_attempt_at "
        "FROM feed_state WHERE source_id = $1",
        [source_id],
    )
    return tuple(row)


def test_after_a_scheduled_run_failed_as_a_whole_the_next_attempt_is_its_next_slot(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The schedule's retry of a failed Source fails as a whole (the vault's fault, not the
    publisher's): its backoff and failure count stay, the run covered the Source's slot, so
    the schedule asks for it again when its next slot starts, not before. Its note's
    `nextAttemptAt` says that time (before: the old backoff's end, in the past), and the
    schedule asks for it exactly then."""
    from radar_pipeline.core.audit.evidence import evidence_snapshot, evidence_text
    from radar_pipeline.core.config import Settings

    vault = radar_env["vault"]
    sid = "w-full"
    write_feed_source(vault, feed_server, sid, status=503, cadence="PT6H")
    apply_partitions(instance, tick(source_registry_sensor, instance))
    start = wave_slot(instance, sid, T0) + timedelta(minutes=1)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(start))
    assert launch(instance, due_tick(instance)) == {sid: False}
    until = backoff_of(sid)
    assert isinstance(until, datetime)
    until = until.astimezone(UTC)
    assert str(note_key(vault, sid)) == format_utc(until)
    before = feed_state(sid)

    # The publisher is back; the retry at the backoff's end fails as a whole.
    feed_server.add(f"/{sid}.xml", FEED)
    retry_at = until + timedelta(seconds=1)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(retry_at))
    retry = due_tick(instance)
    assert [block_of(r) for r in retry] == [[sid]]
    folder = break_signals_folder(vault)
    assert launch(instance, retry) == {sid: False}
    backoff, failures, error_state, attempt = feed_state(sid)
    assert (backoff, failures) == before[:2]  # the publisher did nothing wrong
    assert error_state != before[2] and attempt.astimezone(UTC) == retry_at
    assert note_key(vault, sid, "errorState") == error_state

    # Its slot is spent: the next attempt is its next slot's start, in its note and in
    # `radar report` (whose last collection is the one before: the failed run recorded none).
    next_slot = wave_slot(instance, sid, retry_at) + SIX_HOURS
    assert str(note_key(vault, sid)) == format_utc(next_slot)
    snapshot = evidence_snapshot(Settings.from_env().paths, retry_at)
    [entry] = snapshot.json_object()["lastCollection"]["sources"]
    assert entry["nextAttemptAt"] == format_utc(next_slot)
    assert f"failed Source {sid}: " in (text := evidence_text(snapshot))
    assert f"; next attempt {format_utc(next_slot)}" in text
    # And that is when the schedule asks for it (the vault repaired): not a tick before.
    repair_signals_folder(folder)
    for not_yet in (retry_at + timedelta(minutes=1), next_slot - timedelta(seconds=1)):
        monkeypatch.setenv("RADAR_AS_OF", format_utc(not_yet))
        assert due_tick(instance) == [], not_yet
    monkeypatch.setenv("RADAR_AS_OF", format_utc(next_slot))
    assert [block_of(r) for r in due_tick(instance)] == [[sid]]


def test_after_a_run_by_hand_failed_as_a_whole_the_schedule_tries_the_source_at_once(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run the schedule did not launch covers no slot: after it failed as a whole, a Source
    whose backoff ended long ago (the daemon was down) is due at the schedule's next tick.
    Its note and `radar report` say so (its collection's clock), not the old backoff's end in
    the past."""
    from radar_pipeline.core.audit.evidence import evidence_snapshot
    from radar_pipeline.core.config import Settings
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    vault = radar_env["vault"]
    sid = "w-hand"
    write_feed_source(vault, feed_server, sid, status=503, cadence="PT6H")
    apply_partitions(instance, tick(source_registry_sensor, instance))
    settings = Settings.from_env()
    launch_collection(defs, instance, settings, "all", (), T0, "cli")
    until = backoff_of(sid)
    assert isinstance(until, datetime)
    assert str(note_key(vault, sid)) == format_utc(until.astimezone(UTC))
    feed_server.add(f"/{sid}.xml", FEED)
    later = T0 + timedelta(hours=2)  # its backoff ended an hour and more ago
    folder = break_signals_folder(vault)
    with pytest.raises(CollectionError):
        launch_collection(defs, instance, settings, "due", (), later, "cli")
    assert str(note_key(vault, sid)) == format_utc(later)
    [entry] = evidence_snapshot(settings.paths, later).json_object()["lastCollection"]["sources"]
    assert entry["nextAttemptAt"] == format_utc(later)
    repair_signals_folder(folder)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(later + timedelta(minutes=1)))
    assert [block_of(r) for r in due_tick(instance)] == [[sid]]


def test_a_manual_source_under_a_wait_is_next_run_by_hand_not_before_it_ends(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A `manual` Source has no scheduled attempt, but a run by hand is refused until a
    publisher's wait (a 429's Retry-After) or its `minIntervalSeconds` ends: the report's
    `notBefore` names that end (its `nextAttemptAt` stays null), and its partition's line and
    `radar report` read "when run by hand, not before <time>". A run by hand a second before
    it is skipped with the wait's reason, and at it the Source is checked."""
    from radar_pipeline.core.audit.evidence import evidence_snapshot, evidence_text
    from radar_pipeline.core.config import Settings
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    vault = radar_env["vault"]
    feed_server.add("/m-wait.xml", b"slow down", 429, {"Retry-After": "3600"})
    write_source(vault, "m-wait", feed_server.url("/m-wait.xml"), cadence="manual")
    feed_server.add("/m-slow.xml", FEED)
    write_source(
        vault,
        "m-slow",
        feed_server.url("/m-slow.xml"),
        cadence="manual",
        minIntervalSeconds=86400,
    )
    write_source(vault, "m-down", "http://127.0.0.1:9/feed.xml", cadence="manual")
    settings = Settings.from_env()
    now = datetime.now(UTC).replace(microsecond=0)
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        report = launch_collection(defs, inst, settings, "all", (), now, "test").json_object()
        by_id = {s["id"]: s for s in report["sources"]}
        assert {sid: s["outcome"] for sid, s in by_id.items()} == {
            "m-down": "failed",
            "m-slow": "passed",
            "m-wait": "failed",
        }
        events = partition_events(inst, report["dagsterRunIds"])
        snapshot = evidence_snapshot(settings.paths, now)
        last = {s["id"]: s for s in snapshot.json_object()["lastCollection"]["sources"]}
        text = evidence_text(snapshot)

        # The publisher's wait: its Retry-After, the report's `notBefore`, in every place.
        wait = by_id["m-wait"]
        assert wait["nextAttemptAt"] is None
        assert wait["notBefore"] == wait["backoffUntil"] == format_utc(now + timedelta(hours=1))
        assert last["m-wait"]["notBefore"] == wait["notBefore"]
        words = f"next attempt when run by hand, not before {wait['notBefore']}"
        description, meta = events["m-wait"]
        assert description.endswith(f"; HTTP 429; {words}"), description
        assert meta["not_before"] == wait["notBefore"] and meta["next_due_at"] == "manual"
        [line] = [x for x in text.splitlines() if x.startswith("failed Source m-wait: ")]
        assert line.endswith(f"; {words}"), line
        assert note_key(vault, "m-wait") in (None, "")  # the schedule never checks it
        # Its minimum interval, after a check that passed (no line: only the report says it).
        slow = by_id["m-slow"]
        assert slow["nextAttemptAt"] is None and slow["notBefore"] is not None
        assert now + timedelta(hours=23) < parse_utc(slow["notBefore"])
        assert events["m-slow"][1]["not_before"] == slow["notBefore"]
        # Our own backoff holds no run by hand back: no time at all.
        assert "notBefore" not in by_id["m-down"] and "notBefore" not in last["m-down"]
        assert events["m-down"][0].endswith("; next attempt when run by hand")

        # What it promises: a run by hand a second before is skipped, at the time it runs.
        feed_server.add("/m-wait.xml", FEED)
        until = parse_utc(wait["notBefore"])
        early = launch_collection(
            defs, inst, settings, "explicit", ("m-wait",), until - timedelta(seconds=1), "cli"
        ).json_object()
        [skipped] = early["sources"]
        assert skipped["outcome"] == "skipped" and "rate-limited" in skipped["error"], skipped
        on_time = launch_collection(
            defs, inst, settings, "explicit", ("m-wait",), until, "cli"
        ).json_object()
        assert [s["outcome"] for s in on_time["sources"]] == ["passed"]
        assert "notBefore" not in on_time["sources"][0]
