"""The full-text lifecycle end to end: a collection writes Temporary Content, `radar cleanup`
(through the Dagster definitions) empties it, and nothing else in the vault moves.

Site Content and the Signals are checksummed before and after every close.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.defs.cleanup.jobs import WEEKLY_CLEANUP_JOB_NAME
from radar_pipeline.defs.cleanup.partitions import WEEKS_PARTITIONS_NAME, week_of
from radar_pipeline.defs.cleanup.schedules import weekly_cleanup_schedule
from radar_pipeline_tests.conftest import store_rows
from radar_pipeline_tests.evidencekit import (
    content_rss,
    file_digests,
    radar_json,
    radar_process,
    tree_digest,
)
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source

TEMPORARY = Path("Radar") / "Temporary Content"
FULL_TEXT = "Full third-party text, paragraph after paragraph. " * 40


def _site_content(vault: Path) -> Path:
    site = vault / "Site Content"
    (site / "blog").mkdir(parents=True, exist_ok=True)
    (site / "blog" / "index.mdx").write_text("# Blog\n")
    (site / "note.md").write_text("published, never touched\n")
    return site


def _cleanup_rows() -> list[tuple[object, ...]]:
    return store_rows("SELECT week, deleted, bytes, retained FROM cleanup_runs ORDER BY closed_at")


@pytest.mark.slow
def test_feed_content_lifecycle_through_radar_cleanup(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    site = _site_content(vault)
    items = [("a1", "First", FULL_TEXT), ("a2", "Second", FULL_TEXT + " two")]
    write_fixture_source(vault, "full", content_rss(items), fullText="feed-content")
    write_fixture_source(vault, "plain", content_rss([("b1", "Plain", FULL_TEXT)]))
    write_fixture_source(
        vault,
        "extract",
        rss([{"title": "x", "guid": "x1", "link": "https://example.com/x1"}]),
        fullText="page-extraction",
    )

    collect = radar_process("collect", "--all", "--json", env=radar_env)
    assert collect.returncode == 0, collect.stderr
    report = json.loads(collect.stdout)
    assert report["created"] == 4
    by_id = {s["id"]: s for s in report["sources"]}
    assert by_id["full"]["temporaryBytes"] > 0
    assert by_id["plain"]["temporaryBytes"] == 0  # fullText: none writes no full text
    assert by_id["extract"]["temporaryBytes"] == 0
    # A fixture Source never uses the network: its policy queues no page and fetches none.
    assert by_id["extract"]["pages"] is None

    temporary = sorted((vault / TEMPORARY).iterdir())
    full_ids = {
        p.stem for p in signal_files(vault) if "sourceId: full\n" in p.read_text(encoding="utf-8")
    }
    assert {p.stem for p in temporary} == full_ids and len(full_ids) == 2
    assert all("paragraph after paragraph" in p.read_text() for p in temporary)
    # The full text is nowhere else: not in any Signal, not in Site Content.
    assert not any("paragraph after paragraph" in p.read_text() for p in signal_files(vault))
    temp_bytes = sum(p.stat().st_size for p in temporary)
    signals_before = file_digests(vault / SIGNALS_DIR)
    site_before = tree_digest(site)

    close = radar_process("cleanup", "--json", env=radar_env)
    assert close.returncode == 0, close.stderr
    first = json.loads(close.stdout)
    assert {k: first[k] for k in ("deleted", "bytes", "retained")} == {
        "deleted": 2,
        "bytes": temp_bytes,
        "retained": 0,
    }
    assert list((vault / TEMPORARY).iterdir()) == []
    assert file_digests(vault / SIGNALS_DIR) == signals_before
    assert tree_digest(site) == site_before

    again = radar_process("cleanup", "--json", env=radar_env)
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert (second["deleted"], second["bytes"], second["retained"]) == (0, 0, 0)
    assert file_digests(vault / SIGNALS_DIR) == signals_before
    assert tree_digest(site) == site_before

    week = week_of(datetime.now(UTC))
    assert _cleanup_rows() == [(week, 2, temp_bytes, 0), (week, 0, 0, 0)]
    with dg.DagsterInstance.from_config(str(radar_env["home"])) as instance:
        runs = instance.get_runs()
        closes = [r for r in runs if r.job_name == WEEKLY_CLEANUP_JOB_NAME]
        assert len(closes) == 2 and all(r.tags["dagster/partition"] == week for r in closes)


def _collect_with_text(vault: Path, capsys: pytest.CaptureFixture[str]) -> list[Path]:
    write_fixture_source(
        vault, "full", content_rss([("a1", "First", FULL_TEXT)]), fullText="feed-content"
    )
    code, report, err = radar_json(capsys, "collect", "--all")
    assert code == 0, err
    assert report["created"] == 1
    files = sorted((vault / TEMPORARY).iterdir())
    assert len(files) == 1
    return files


@pytest.mark.slow
def test_link_inside_temporary_content_is_removed_not_followed(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    site = _site_content(vault)
    _collect_with_text(vault, capsys)
    folder = vault / TEMPORARY
    (folder / "to-site").symlink_to(site, target_is_directory=True)
    (folder / "to-note.md").symlink_to(site / "note.md")
    (folder / "relative").symlink_to(Path("..") / ".." / "Site Content")
    before = tree_digest(site)

    code, close, err = radar_json(capsys, "cleanup")

    assert code == 0, err
    assert (close["deleted"], close["retained"]) == (4, 0)  # the text file and three links
    assert list(folder.iterdir()) == []
    assert tree_digest(site) == before
    assert (site / "note.md").read_text() == "published, never touched\n"


def test_temporary_content_itself_a_link_to_site_content_is_refused(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    site = _site_content(vault)
    folder = vault / TEMPORARY
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(site, target_is_directory=True)
    before, signals_before = tree_digest(site), tree_digest(vault / "Radar")

    code, close, err = radar_json(capsys, "cleanup")

    assert code == 1 and close is None
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("radar: cleanup: ")
    assert "symlink" in lines[0] and "deleted nothing" in lines[0]
    assert "Traceback" not in err
    assert tree_digest(site) == before
    assert tree_digest(vault / "Radar") == signals_before
    assert folder.is_symlink()
    assert _cleanup_rows() == []  # a refused close records nothing


@pytest.mark.slow
def test_site_content_file_named_like_a_temporary_one_stays(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    site = _site_content(vault)
    [temporary] = _collect_with_text(vault, capsys)
    twin = site / temporary.name
    twin.write_text("a published page that happens to share the name\n")
    (site / "Radar" / "Temporary Content").mkdir(parents=True)
    (site / "Radar" / "Temporary Content" / temporary.name).write_text("also published\n")
    before = tree_digest(site)

    code, close, err = radar_json(capsys, "cleanup")

    assert code == 0, err
    assert (close["deleted"], close["retained"]) == (1, 0)
    assert not temporary.exists()
    assert twin.read_text() == "a published page that happens to share the name\n"
    assert tree_digest(site) == before


def test_cleanup_as_of_a_week_not_started_yet_is_one_clear_line(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, close, err = radar_json(capsys, "cleanup", "--as-of", "2099-06-01T00:00:00Z")
    assert code == 1 and close is None
    assert err.startswith("radar: cleanup: ") and "after the running week" in err
    with dg.DagsterInstance.from_config(str(radar_env["home"])) as instance:
        assert instance.get_dynamic_partitions(WEEKS_PARTITIONS_NAME) == []
    code, _, err = radar_json(capsys, "cleanup", "--as-of", "someday")
    assert code == 1 and "--as-of" in err and "Traceback" not in err


def test_cleanup_as_of_records_that_week(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, close, err = radar_json(capsys, "cleanup", "--as-of", "2026-03-04T10:00:00Z")
    assert code == 0, err
    assert (close["week"], close["closedAt"]) == ("2026-03-01", "2026-03-04T10:00:00Z")
    assert _cleanup_rows() == [("2026-03-01", 0, 0, 0)]


def test_schedule_closes_the_week_of_its_tick() -> None:
    from radar_pipeline.definitions import defs

    tick = datetime(2026, 11, 29, 0, 0, tzinfo=UTC)  # a Sunday, the schedule's slot
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=tick,
            repository_def=defs.get_repository_def(),
        )
        data = weekly_cleanup_schedule.evaluate_tick(context)
        # The partitions are the weeks a close was launched for: none before the first.
        assert instance.get_dynamic_partitions(WEEKS_PARTITIONS_NAME) == ["2026-11-29"]
    [request] = data.run_requests or []
    assert request.partition_key == "2026-11-29" == week_of(tick)
    assert weekly_cleanup_schedule.cron_schedule == "0 0 * * 0"
    assert weekly_cleanup_schedule.default_status == dg.DefaultScheduleStatus.RUNNING


def test_week_of_starts_on_sunday_utc() -> None:
    assert week_of(datetime(2026, 12, 5, 23, 59, tzinfo=UTC)) == "2026-11-29"
    assert week_of(datetime(2026, 12, 6, 0, 0, tzinfo=UTC)) == "2026-12-06"
