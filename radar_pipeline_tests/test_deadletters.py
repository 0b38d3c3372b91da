"""Dead letters: opened by a failed check, replayed or dismissed by a person, never deleted.

The core API runs its replays through the real Collector; the `radar dlq` commands run as real
processes through the Dagster launch, as a user runs them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.dead_letters import (
    DeadLetterError,
    dismiss,
    get_dead_letter,
    list_dead_letters,
    replay,
)
from radar_pipeline_tests.conftest import collect_stages, new_collection_id
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.test_cli import radar
from radar_pipeline_tests.vaultkit import rss, signal_files, write_source

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BROKEN = {"Content-Type": "text/html"}
FEED = rss([{"title": "Back", "guid": "b-1", "link": "https://example.com/back"}])


def run_check(env: dict[str, Path], now: datetime) -> Any:
    """What `radar dlq replay` does, without Dagster: one explicit collection of a Source."""
    collector = Collector(Settings.from_env())

    def check(source_id: str) -> dict[str, Any]:
        return collect_stages(
            collector, CollectionSpec(new_collection_id(), "explicit", now, (source_id,))
        )

    return check


def failing_collection(env: dict[str, Path], server: FeedServer) -> dict[str, Any]:
    write_source(env["vault"], "flaky", server.add("/flaky", b"oops", 500, BROKEN))
    write_source(env["vault"], "moved", server.add("/moved", b"no", 404, BROKEN))
    spec = CollectionSpec(new_collection_id(), "all", AS_OF)
    return collect_stages(Collector(Settings.from_env()), spec).json_object()


def letter_for(store: Store, source_id: str) -> str:
    [letter] = [d for d in list_dead_letters(store, "open") if d.source_id == source_id]
    return letter.id


def test_failed_check_opens_a_dead_letter_with_its_class(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    report = failing_collection(radar_env, feed_server)
    letters = {d.source_id: d for d in list_dead_letters(Store.of(Settings.from_env().paths))}
    assert {k: (d.status, d.stage, d.error_class) for k, d in letters.items()} == {
        "flaky": ("open", "fetch", "http-5xx"),
        "moved": ("open", "fetch", "gone"),
    }
    flaky = letters["flaky"].json_object()
    assert flaky["createdAt"] == "2026-11-30T12:00:00Z" and flaky["attempt"] == 1
    assert flaky["collectionId"] == report["collectionId"]
    assert flaky["message"].startswith("fetch: http-5xx (500")


def test_replay_after_fix_creates_the_signal_and_keeps_the_letter(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    failing_collection(radar_env, feed_server)
    store = Store.of(Settings.from_env().paths)
    letter_id = letter_for(store, "flaky")
    feed_server.add("/flaky", FEED)
    later = AS_OF + timedelta(minutes=5)
    done = replay(store, letter_id, later, run_check(radar_env, later))
    assert (done.source.outcome, done.source.created) == ("passed", 1)
    assert done.new_dead_letter is None
    letter = get_dead_letter(store, letter_id)
    assert (letter.status, letter.decision, letter.decided_at) == (
        "replayed",
        "replayed: passed",
        later,
    )
    assert letter.replay_collection_id and letter.replay_collection_id != letter.collection_id
    assert len(signal_files(radar_env["vault"])) == 1
    with pytest.raises(DeadLetterError, match="already replayed"):
        replay(store, letter_id, later, run_check(radar_env, later))
    with pytest.raises(DeadLetterError, match="already replayed"):
        dismiss(store, letter_id, later)


def test_replay_that_fails_again_opens_a_new_letter(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    failing_collection(radar_env, feed_server)
    store = Store.of(Settings.from_env().paths)
    letter_id = letter_for(store, "flaky")
    later = AS_OF + timedelta(minutes=5)
    done = replay(store, letter_id, later, run_check(radar_env, later))
    assert done.dead_letter.status == "replayed"
    assert done.dead_letter.decision == "replayed: failed (http-5xx)"
    assert done.new_dead_letter is not None
    assert (done.new_dead_letter.status, done.new_dead_letter.attempt) == ("open", 2)
    assert done.new_dead_letter.collection_id == done.dead_letter.replay_collection_id


def test_replay_that_cannot_run_leaves_the_letter_open(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    write_source(
        radar_env["vault"],
        "polite",
        feed_server.add("/p", b"oops", 500, BROKEN),
        minIntervalSeconds=3600,
    )
    collect_stages(
        Collector(Settings.from_env()), CollectionSpec(new_collection_id(), "all", AS_OF)
    )
    store = Store.of(Settings.from_env().paths)
    letter_id = letter_for(store, "polite")
    later = AS_OF + timedelta(minutes=5)
    with pytest.raises(DeadLetterError, match=r"minIntervalSeconds.*stays open"):
        replay(store, letter_id, later, run_check(radar_env, later))
    assert get_dead_letter(store, letter_id).status == "open"
    assert len(feed_server.requests_for("/p")) == 1


def test_dismiss_records_decision_and_time(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    failing_collection(radar_env, feed_server)
    store = Store.of(Settings.from_env().paths)
    letter_id = letter_for(store, "moved")
    when = AS_OF + timedelta(hours=1)
    letter = dismiss(store, letter_id, when)
    assert (letter.status, letter.decision, letter.decided_at) == ("dismissed", "dismissed", when)
    assert {d.status for d in list_dead_letters(store)} == {"open", "dismissed"}
    with pytest.raises(DeadLetterError, match="no dead letter with id 'nope'"):
        dismiss(store, "nope", when)


@pytest.mark.slow
def test_dlq_commands(radar_env: dict[str, Path], feed_server: FeedServer) -> None:
    failing_collection(radar_env, feed_server)
    listed = radar("dlq", "list", "--json", env=radar_env)
    assert listed.returncode == 0, listed.stderr
    letters = {d["sourceId"]: d for d in json.loads(listed.stdout)["deadLetters"]}
    contract = {"id", "sourceId", "stage", "errorClass", "message", "status", "createdAt"}
    assert all(contract <= d.keys() for d in letters.values())
    assert {d["status"] for d in letters.values()} == {"open"}

    feed_server.add("/flaky", FEED)
    replayed = radar("dlq", "replay", letters["flaky"]["id"], "--json", env=radar_env)
    assert replayed.returncode == 0, replayed.stderr
    payload = json.loads(replayed.stdout)
    assert payload["deadLetter"]["status"] == "replayed"
    assert payload["source"]["outcome"] == "passed" and payload["source"]["created"] == 1
    assert payload["deadLetter"]["replayCollectionId"]
    assert len(signal_files(radar_env["vault"])) == 1

    dismissed = radar("dlq", "dismiss", letters["moved"]["id"], "--json", env=radar_env)
    assert dismissed.returncode == 0, dismissed.stderr
    assert json.loads(dismissed.stdout)["deadLetter"]["status"] == "dismissed"

    after = json.loads(radar("dlq", "list", "--json", env=radar_env).stdout)["deadLetters"]
    assert sorted((d["sourceId"], d["status"]) for d in after) == [
        ("flaky", "replayed"),
        ("moved", "dismissed"),
    ]
    for args in (("replay", "0123456789ab"), ("dismiss", letters["moved"]["id"])):
        bad = radar("dlq", *args, env=radar_env)
        assert bad.returncode == 1
        assert bad.stderr.startswith("radar: dlq: ") and bad.stderr.count("\n") == 1, bad.stderr
