"""`radar report`, the `evidence_snapshot` asset and `radar index rebuild` on real vaults."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.audit.evidence import evidence_snapshot
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import Settings
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.evidence.assets import evidence_snapshot as evidence_asset
from radar_pipeline.defs.resources import ClockResource, RadarResource
from radar_pipeline_tests.conftest import empty_postgres_store, store_url_under_test
from radar_pipeline_tests.evidencekit import content_rss, radar_json, radar_process
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.sensorkit import outcome_for, tick_after
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

CONTRACT_KEYS = {
    "productionSources",
    "fixtureSources",
    "signals",
    "recoveryCapDays",
    "overdue",
    "retainedTemporary",
    "lastCollection",
    "openDeadLetters",
}


def _feed(prefix: str, n: int) -> bytes:
    return rss(
        [
            {
                "title": f"{prefix} {i}",
                "guid": f"{prefix}-{i}",
                "link": f"https://e.com/{prefix}{i}",
            }
            for i in range(n)
        ]
    )


def six_source_files(vault: Path, server: FeedServer) -> None:
    """Six Source files, two production Sources: inventory is not production scope."""
    write_source(vault, "web-a", server.add("/a.xml", _feed("a", 2)))
    write_source(vault, "web-b", server.add("/b.xml", _feed("b", 1)))
    write_source(vault, "web-off", server.add("/off.xml", _feed("off", 1)), enabled="false")
    write_source(
        vault, "web-pending", server.add("/p.xml", _feed("p", 1)), legalAssessment="pending"
    )
    write_source(vault, "broken", "not a url")
    write_fixture_source(
        vault, "fixture", content_rss([("f1", "F", "full " * 50)]), fullText="feed-content"
    )


def test_report_keeps_inventory_and_production_apart(
    radar_env: dict[str, Path], feed_server: FeedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    six_source_files(vault, feed_server)
    code, collect, err = radar_json(capsys, "collect")  # due Sources: the recovery policy
    assert code == 0, err
    assert (collect["created"], collect["due"]) == (3, 2)

    code, report, err = radar_json(capsys, "report")

    assert code == 0, err
    assert set(report) >= CONTRACT_KEYS
    assert (report["productionSources"], report["fixtureSources"]) == (2, 1)
    assert report["inventory"]["sourceFiles"] == 6
    assert report["inventory"]["validSources"] == 5
    assert report["registryIssues"] == 1
    assert report["inventory"]["inactiveSources"] == ["web-off", "web-pending"]
    assert report["production"]["sources"] == ["web-a", "web-b"]
    assert report["production"]["signals"] == 3
    assert report["signals"] == report["inventory"]["signalFiles"] == 3
    assert report["inventory"]["indexedBySource"] == {"web-a": 2, "web-b": 1}
    assert report["recoveryCapDays"] == 7
    assert report["overdue"] == 0 and report["openDeadLetters"] == 0
    assert report["lastCollection"]["collectionId"] == collect["collectionId"]
    recovery = report["recovery"]
    assert (recovery["overdueBefore"], recovery["passed"], recovery["failed"]) == (2, 2, 0)
    assert recovery["postRecoveryOverdue"] == 0
    assert report["retainedTemporary"] == 0  # the manual fixture was not due
    assert report["temporary"]["lastClose"] is None
    assert report["checks"]["registry_validity"]["passed"] is False
    assert report["checks"]["registry_validity"]["severity"] == "WARN"
    assert all(report["checks"][n]["passed"] for n in ("idempotency", "agreement", "provenance"))


def test_report_shows_retained_text_and_the_close(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "fixture", content_rss([("f1", "F", "full " * 50)]), fullText="feed-content"
    )
    assert radar_json(capsys, "collect", "--all")[0] == 0
    before = radar_json(capsys, "report")[1]
    assert before["retainedTemporary"] == 1
    assert before["temporary"]["retainedBytes"] > 0
    assert before["checks"]["retention"]["severity"] == "WARN"  # no close recorded yet

    assert radar_json(capsys, "cleanup")[0] == 0
    after = radar_json(capsys, "report")[1]
    assert after["retainedTemporary"] == 0
    close = after["temporary"]["lastClose"]
    assert (close["deleted"], close["retained"]) == (1, 0)
    assert after["checks"]["retention"]["passed"] is True


def test_post_recovery_overdue_counts_what_stayed_overdue(
    radar_env: dict[str, Path], feed_server: FeedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    write_source(vault, "up", feed_server.add("/up.xml", _feed("u", 1)))
    write_source(vault, "down", feed_server.add("/down.xml", b"no", status=503, headers={}))
    t0 = datetime.now(UTC).replace(microsecond=0)
    code, collect, _ = radar_json(capsys, "collect", "--as-of", format_utc(t0))
    assert code == 2 and collect["failed"] == 1

    snapshot = evidence_snapshot(Settings.from_env().paths, t0 + timedelta(minutes=5)).json_object()

    recovery = snapshot["recovery"]
    assert (recovery["overdueBefore"], recovery["passed"], recovery["failed"]) == (2, 1, 1)
    assert recovery["postRecoveryOverdue"] == 1
    assert recovery["postRecoveryOverdueSources"] == ["down"]
    assert snapshot["overdue"] == 1


def test_report_text_is_readable(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from radar_pipeline.cli import main

    write_fixture_source(radar_env["vault"], "fixture", _feed("f", 1))
    assert main(["report"]) == 0
    text = capsys.readouterr().out
    assert "inventory: 1 Source files" in text
    assert "last collection: none" in text
    assert "check idempotency" in text and "{" not in text


def test_evidence_snapshot_asset_materializes_the_report(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    write_fixture_source(radar_env["vault"], "fixture", _feed("f", 2))
    assert radar_json(capsys, "collect", "--all")[0] == 0
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        result = dg.materialize(
            [evidence_asset],
            instance=instance,
            resources={"radar": RadarResource(), "clock": ClockResource()},
        )
    [mat] = result.asset_materializations_for_node("evidence_snapshot")
    meta = mat.metadata
    assert meta["signals"].value == 2 and meta["fixture_sources"].value == 1
    assert meta["failed_checks"].value == 0
    report: Any = meta["report"].value
    assert set(report) >= CONTRACT_KEYS
    assert "inventory:" in str(meta["summary"].value)


def test_evidence_follows_every_run_that_evaluated_checks(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The natural trigger of `evidence_snapshot`: a run that evaluated checks gets one
    evidence run after it; a run that evaluated none is skipped with the reason."""
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.evidence.sensors import evidence_after_checks

    write_fixture_source(radar_env["vault"], "fixture", _feed("f", 1))
    assert radar_json(capsys, "collect", "--all")[0] == 0
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        checks = defs.resolve_job_def("signal_checks").execute_in_process(instance=instance)
        prune = defs.resolve_job_def("prune_run_history").execute_in_process(instance=instance)

        def evaluate(run_id: str) -> dg.RunRequest | str:
            return outcome_for(tick_after(evidence_after_checks, instance, run_id), run_id)

        after_checks = evaluate(checks.run_id)
        assert isinstance(after_checks, dg.RunRequest)
        assert after_checks.run_key == f"evidence-after:{checks.run_id}"
        skipped = evaluate(prune.run_id)
        assert isinstance(skipped, str)
        assert "evaluated no check" in skipped
        # The requested job materializes the snapshot.
        run = defs.resolve_job_def("evidence_snapshot_job").execute_in_process(
            instance=instance, resources={"radar": RadarResource(), "clock": ClockResource()}
        )
        [mat] = run.asset_materializations_for_node("evidence_snapshot")
        assert mat.metadata["signals"].value == 1


def _index_rows(db: Path) -> list[tuple[Any, ...]]:
    with Store.of(Settings.from_env().paths).transaction() as con:
        return con.execute("SELECT * FROM signals ORDER BY signal_id").fetchall()


@pytest.mark.slow
def test_index_rebuild_after_the_db_is_lost_equals_the_original(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault, db = radar_env["vault"], radar_env["db"]
    write_source(vault, "web", feed_server.add("/feed.xml", _feed("w", 3)))
    write_fixture_source(vault, "fixture", content_rss([("f1", "F", "full " * 20)]))
    first = radar_process("collect", "--all", "--json", env=radar_env)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["created"] == 4
    original = _index_rows(db)
    files = sorted(p.name for p in signal_files(vault))
    assert len(original) == 4

    if store_url_under_test():  # the team profile's store is lost: its schema is gone
        empty_postgres_store(store_url_under_test())
    else:
        db.unlink()
    Store.forget_migrations()
    rebuilt = radar_process("index", "rebuild", "--json", env=radar_env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["indexed"] == 4
    assert _index_rows(db) == original

    again = radar_process("collect", "--all", "--json", env=radar_env)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert (report["created"], report["reused"]) == (0, 4)
    assert sorted(p.name for p in signal_files(vault)) == files
    assert _index_rows(db) == original
    assert all(report["checks"].values()), report["checks"]


def test_index_rebuild_sets_a_corrupted_db_aside_and_rebuilds(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    if store_url_under_test():
        pytest.skip("a corrupted DuckDB file: the embedded store only")
    db = radar_env["db"]
    write_fixture_source(radar_env["vault"], "fixture", _feed("f", 2))
    assert radar_json(capsys, "collect", "--all")[0] == 0
    original = _index_rows(db)
    garbage = b"this is not a DuckDB file" * 100
    db.write_bytes(garbage)
    Store.forget_migrations()

    code, payload, err = radar_json(capsys, "index", "rebuild")

    assert code == 0, err
    assert payload["indexed"] == 2
    moved = Path(payload["movedAside"])
    assert moved.parent == db.parent and moved.name.startswith("radar.duckdb.unusable-")
    assert moved.read_bytes() == garbage  # kept as it was, never deleted
    assert _index_rows(db) == original
