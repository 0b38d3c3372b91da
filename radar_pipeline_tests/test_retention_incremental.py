"""The `retention` check after a collection reads what the collection changed, not the vault.

Whether a Signal file is marked as temporary content is one of its facts (core/vault/facts.py),
read again only for new or changed files; the walk for stray text opens only the files the
facts do not hold. Asserted on what the code reports (`stray_scan_files_opened`, the facts'
`files_stat`), never on time; and the incremental verdict is the full read's.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from radar_pipeline.core.audit.findings import AuditResult
from radar_pipeline.core.audit.retention import audit_retention, list_temporary
from radar_pipeline.core.audit.run import run_audits
from radar_pipeline.core.config import Settings
from radar_pipeline.core.models import CleanupResult
from radar_pipeline.core.store.closes import last_close, record_close
from radar_pipeline.defs.collection.jobs import SIGNAL_CHECKS_JOB_NAME, checks_run_config
from radar_pipeline_tests.conftest import env_store
from radar_pipeline_tests.evidencekit import content_rss
from radar_pipeline_tests.test_vault_incremental import (
    SETTLE_S,
    collect_core,
    collect_dagster,
    items,
    latest_check_metadata,
    meta,
)
from radar_pipeline_tests.vaultkit import signal_files, write_fixture_source

MARKED = "---\nentityType: temporary-content\nsignal: x\n---\n\nfull text\n"


def retention(full: bool) -> AuditResult:
    return run_audits(Settings.from_env().paths, datetime.now(UTC), ("retention",), full)[
        "retention"
    ]


def md_files_outside_signals(vault: Path) -> int:
    """What the walk for stray text must open: every Markdown file outside the Signals folder's
    top level and Temporary Content."""
    signals, temporary = vault / "Radar" / "Signals", vault / "Radar" / "Temporary Content"
    return sum(
        1
        for p in vault.rglob("*.md")
        if p.parent != signals and temporary not in p.parents and not p.is_symlink()
    )


def test_the_check_after_a_collection_opens_no_unchanged_signal(
    radar_env: dict[str, Path],
) -> None:
    vault = radar_env["vault"]
    write_fixture_source(vault, "fixture", content_rss(items("a", 12)))
    assert collect_core(radar_env)[0]["created"] == 12
    first = retention(full=True)
    assert first.passed
    # Every Signal file was written by the collection, which recorded its facts: none opened.
    assert first.figures["stray_scan_files_opened"] == md_files_outside_signals(vault)
    time.sleep(SETTLE_S)
    write_fixture_source(vault, "fixture", content_rss(items("a", 12) + items("b", 2)))
    assert collect_core(radar_env, datetime(2026, 11, 30, 13, 0, tzinfo=UTC))[0]["created"] == 2
    time.sleep(SETTLE_S)
    after = retention(full=False)
    assert after.passed
    assert after.scan["files_stat"] == 0
    assert after.figures["stray_scan_files_opened"] == md_files_outside_signals(vault)
    assert after.figures["stray_scan_signals_listed"] == 0  # the facts speak for the folder
    # The opened count does not follow the Signals: 14 files, a handful of others opened.
    assert md_files_outside_signals(vault) < 14


def test_a_marked_file_put_into_the_signals_folder_is_found_and_read_once(
    radar_env: dict[str, Path],
) -> None:
    vault = radar_env["vault"]
    write_fixture_source(vault, "fixture", content_rss(items("a", 5)))
    collect_core(radar_env)
    name = f"20200101T000000Z-{'a' * 16}.md"
    (vault / "Radar" / "Signals" / name).write_text(MARKED, "utf-8")
    time.sleep(SETTLE_S)
    first = retention(full=False)  # the folder changed: rescanned, the new file's facts read
    assert f"Radar/Signals/{name}" in {f.cells[0] for f in first.findings}
    assert first.scan["folder_scan"] == "rescanned"
    time.sleep(SETTLE_S)
    again = retention(full=False)  # the facts speak for it now: found, not opened
    assert [f.cells for f in again.findings] == [f.cells for f in first.findings]
    assert again.scan["folder_scan"] == "trusted"
    assert again.figures["stray_scan_files_opened"] == md_files_outside_signals(vault)
    assert again.figures["stray_scan_signals_listed"] == 0


def test_incremental_verdict_is_the_full_reads(radar_env: dict[str, Path]) -> None:
    """A vault with full text retained (after the close), expired (before it), oversized in a
    Signal body and stray in every kind of place: the check after a collection, the full read
    and a walk that opens every file give one verdict."""
    vault = radar_env["vault"]
    write_fixture_source(vault, "fixture", content_rss(items("a", 6)))
    collect_core(radar_env)
    closed = datetime.now(UTC) - timedelta(days=1)
    record_close(env_store(), CleanupResult(deleted=3, bytes=300, retained=0), closed, "2026-W48")
    temporary = vault / "Radar" / "Temporary Content"
    temporary.mkdir(parents=True, exist_ok=True)
    expired = temporary / f"{(closed - timedelta(days=2)).strftime('%Y%m%dT%H%M%SZ')}-{'1' * 16}.md"
    retained = temporary / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{'2' * 16}.md"
    for path in (expired, retained):
        path.write_text("---\nentityType: temporary-content\n---\n\nfull text\n", "utf-8")
    signals = vault / "Radar" / "Signals"
    (signals / f"20200101T000000Z-{'b' * 16}.md").write_text(MARKED, "utf-8")
    (signals / f".tmp-signal-1-{'c' * 8}.md").write_text(MARKED, "utf-8")  # a writer's temp name
    (signals / "drafts").mkdir()
    (signals / "drafts" / "copied.md").write_text(MARKED, "utf-8")
    (vault / "Radar" / "Sources" / "notes.md").write_text(MARKED, "utf-8")
    (vault / "pasted.md").write_text(MARKED, "utf-8")
    os.symlink(vault / "pasted.md", signals / f"20200101T000000Z-{'d' * 16}.md")
    oversized = signal_files(vault)[0]
    oversized.write_text(
        oversized.read_text("utf-8").replace(
            "\n\n*Collected by Radar", "\n\n" + "Pasted article. " * 300 + "\n\n*Collected by Radar"
        ),
        "utf-8",
    )
    time.sleep(SETTLE_S)
    full = retention(full=True)
    time.sleep(SETTLE_S)
    incremental = retention(full=False)
    every_file = audit_retention(
        vault,
        [(f.cells[0], 0) for f in full.findings if "body of" in f.cells[1]],
        last_close(env_store()),
        list_temporary(vault),
    )

    def verdict(result: AuditResult) -> list[tuple[str, ...]]:
        return [(f.severity, *f.cells) for f in result.findings if "body of" not in f.cells[1]]

    assert verdict(incremental) == verdict(full) == verdict(every_file)
    assert [f.cells for f in incremental.findings] == [f.cells for f in full.findings]
    stray = {f.cells[0] for f in full.findings if "outside Temporary Content" in f.cells[1]}
    assert stray == {
        f"Radar/Signals/20200101T000000Z-{'b' * 16}.md",
        f"Radar/Signals/.tmp-signal-1-{'c' * 8}.md",
        "Radar/Signals/drafts/copied.md",
        "Radar/Sources/notes.md",
        "pasted.md",
    }
    survived = {f.cells[0] for f in full.findings if "survived the close" in f.cells[1]}
    assert survived == {expired.relative_to(vault).as_posix()}
    for key in ("temporary_files", "pending_next_close", "stray_temporary_files"):
        assert incremental.figures[key] == full.figures[key] == every_file.figures[key]
    assert incremental.figures["pending_next_close"] == 1
    # The walk that opens every file opened the Signals too; the facts' reads did not.
    assert (
        every_file.figures["stray_scan_files_opened"]
        > incremental.figures["stray_scan_files_opened"]
    )


def test_the_checks_run_after_a_dagster_collection_reads_incrementally(
    radar_env: dict[str, Path],
) -> None:
    write_fixture_source(radar_env["vault"], "fixture", content_rss(items("a", 4)))
    ops = checks_run_config("2026-11-30T12:00:00Z")["ops"]
    assert isinstance(ops, dict) and ops["weekly_cleanup_retention"] == {"config": {"full": False}}
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        assert collect_dagster(instance)["created"] == 4
        time.sleep(SETTLE_S)
        assert collect_dagster(instance)["created"] == 0
        evaluation = latest_check_metadata(instance, SIGNAL_CHECKS_JOB_NAME)["retention"]
    assert evaluation.passed
    assert meta(evaluation, "folder_scan") == "trusted"
    assert meta(evaluation, "files_stat") == 0
    assert meta(evaluation, "stray_scan_files_opened") == md_files_outside_signals(
        radar_env["vault"]
    )
    assert meta(evaluation, "stray_scan_signals_listed") == 0
