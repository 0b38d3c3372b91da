"""The incremental state of the Signals folder (core/vault/folder_state.py) on real parts.

The promise (docs/operations.md): a Signal file added, removed or renamed outside the pipeline
is found by the next collection and by the next check run (the directory's mtime moved); a file
rewritten in place is found by the next full read (the daily `signal_audit`, `radar report`, a
check run by hand). The fast path is asserted on what the code reports (the dedupe's verdict,
the checks' `folder_scan` / `files_stat` metadata), never on time.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.audit.run import run_audits
from radar_pipeline.core.collect import collector as collector_module
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.vault import folder_state
from radar_pipeline.definitions import defs
from radar_pipeline.defs.collection.checks import SIGNAL_CHECK_SPECS
from radar_pipeline.defs.collection.jobs import SIGNAL_AUDIT_JOB_NAME, SIGNAL_CHECKS_JOB_NAME
from radar_pipeline.defs.collection.launch import launch_collection
from radar_pipeline.defs.collection.schedules import SIGNAL_AUDIT_CRON, signal_audit_schedule
from radar_pipeline_tests.conftest import collect_stages, env_store, new_collection_id
from radar_pipeline_tests.evidencekit import content_rss
from radar_pipeline_tests.vaultkit import signal_files, write_fixture_source

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
FOLDER_CHECKS = ("idempotency", "provenance", "agreement")
# Past the fine settle margin: a state verified after this is settled (folder_state.py).
SETTLE_S = folder_state.FINE_MARGIN_NS / 1e9 + 0.05


def items(prefix: str, count: int) -> list[tuple[str, str, str]]:
    return [(f"{prefix}{i}", f"Item {prefix}{i}", f"Text of {prefix}{i}.") for i in range(count)]


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


class FolderScans(logging.Handler):
    """The dedupe's verdicts on the Signals folder, as the collector logs them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.verdicts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        verdict = getattr(record, "radar_folder_scan", None)
        if verdict is not None:
            self.verdicts.append(verdict)


def collect_core(env: dict[str, Path], as_of: datetime = AS_OF) -> tuple[dict[str, Any], str]:
    """One collection with the real Collector; its report and how its dedupe found the folder."""
    logger, scans = logging.getLogger(collector_module.__name__), FolderScans()
    level = logger.level
    logger.addHandler(scans)
    logger.setLevel(logging.INFO)
    try:
        with Collector(Settings.from_env()) as collector:
            spec = CollectionSpec(new_collection_id(), "all", as_of, ())
            report = collect_stages(collector, spec).json_object()
    finally:
        logger.removeHandler(scans)
        logger.setLevel(level)
    [verdict] = scans.verdicts
    return report, verdict


def collect_dagster(instance: dg.DagsterInstance) -> dict[str, Any]:
    return launch_collection(
        defs, instance, Settings.from_env(), "all", (), datetime.now(UTC), "test"
    ).json_object()


def latest_check_metadata(
    instance: dg.DagsterInstance, job_name: str = SIGNAL_CHECKS_JOB_NAME
) -> dict[str, dg.AssetCheckEvaluation]:
    """The check evaluations of the newest run of `job_name`, by check name."""
    run = instance.get_runs(filters=dg.RunsFilter(job_name=job_name), limit=1)[0]
    found: dict[str, dg.AssetCheckEvaluation] = {}
    for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        data = record.dagster_event.event_specific_data if record.dagster_event else None
        if isinstance(data, dg.AssetCheckEvaluation):
            found[data.check_name] = data
    return found


def meta(evaluation: dg.AssetCheckEvaluation, key: str) -> Any:
    return evaluation.metadata[key].value


def incremental(env: dict[str, Path]) -> dict[str, Any]:
    return run_audits(Settings.from_env().paths, datetime.now(UTC), FOLDER_CHECKS, full=False)


def stored_state(env: dict[str, Path]) -> folder_state.FolderState | None:
    with env_store().transaction() as con:
        return folder_state.load_state(con)


def seeded(env: dict[str, Path], count: int = 4) -> list[Path]:
    """A vault with `count` Signals, collected and audited once in full, settled."""
    write_fixture_source(env["vault"], "fixture", content_rss(items("a", count)))
    report, _ = collect_core(env)
    assert report["created"] == count
    time.sleep(SETTLE_S)
    audits = run_audits(Settings.from_env().paths, datetime.now(UTC), FOLDER_CHECKS)
    assert all(a.passed for a in audits.values())
    state = stored_state(env)
    assert state is not None and state.settled and state.entries == count
    return signal_files(env["vault"])


# ---- the fast path is taken when nothing changed ---------------------------------------------


def test_an_unchanged_folder_is_trusted_without_a_listing(radar_env: dict[str, Path]) -> None:
    seeded(radar_env)
    report, verdict = collect_core(radar_env)
    assert (report["created"], verdict) == (0, "trusted")
    audits = incremental(radar_env)
    for name in FOLDER_CHECKS:
        assert audits[name].passed
        assert audits[name].scan == {"folder_scan": "trusted", "files_stat": 0, "names_listed": 0}
    # The full read stats every file, and says so.
    full = run_audits(Settings.from_env().paths, datetime.now(UTC), ("provenance",))["provenance"]
    assert full.scan == {"folder_scan": "full", "files_stat": 4, "names_listed": 0}


def test_own_writes_are_journaled_and_verified_by_one_names_listing(
    radar_env: dict[str, Path],
) -> None:
    files = seeded(radar_env)
    write_fixture_source(radar_env["vault"], "fixture", content_rss(items("a", 4) + items("b", 3)))
    report, verdict = collect_core(radar_env, AS_OF + timedelta(hours=1))
    assert (report["created"], verdict) == (3, "trusted")
    state = stored_state(radar_env)
    assert state is not None and state.entries == len(files) + 3 and not state.settled
    time.sleep(SETTLE_S)
    first = incremental(radar_env)
    assert first["provenance"].scan == {
        "folder_scan": "verified",
        "files_stat": 0,
        "names_listed": 7,
    }
    assert all(a.passed for a in first.values())
    # Verified past the margin: settled, so the next check lists nothing.
    assert incremental(radar_env)["agreement"].scan["folder_scan"] == "trusted"


def test_checks_after_a_dagster_collection_read_the_folder_incrementally(
    radar_env: dict[str, Path], instance: dg.DagsterInstance
) -> None:
    write_fixture_source(radar_env["vault"], "fixture", content_rss(items("a", 3)))
    assert collect_dagster(instance)["created"] == 3
    first = latest_check_metadata(instance)
    # No recorded state before: the checks after the first collection scan in full and record
    # the state; the three share that one read (one step), and each says so.
    scans = {(meta(first[n], "folder_scan"), meta(first[n], "files_stat")) for n in FOLDER_CHECKS}
    assert scans == {("rescanned", 3)}
    time.sleep(SETTLE_S)
    assert collect_dagster(instance)["created"] == 0
    again = latest_check_metadata(instance)
    for name in FOLDER_CHECKS:
        assert again[name].passed
        assert meta(again[name], "folder_scan") == "trusted"
        assert meta(again[name], "files_stat") == 0
        # The narrowed read is written in the check's description too.
        assert "incrementally" in _description(name)


def _description(check: str) -> str:
    [spec] = [s for s in SIGNAL_CHECK_SPECS if s.name == check]
    return spec.description or ""


# ---- changes made outside the pipeline --------------------------------------------------------


def test_a_file_added_outside_is_found_by_the_next_collection_and_check(
    radar_env: dict[str, Path],
) -> None:
    files = seeded(radar_env)
    shutil.copyfile(files[0], files[0].with_name("a copy.md"))
    audits = incremental(radar_env)
    assert audits["idempotency"].scan["folder_scan"] == "rescanned"
    assert not audits["idempotency"].passed
    assert "a copy.md" in audits["idempotency"].markdown()


def test_a_file_removed_outside_is_found_by_the_next_collection_and_check(
    radar_env: dict[str, Path],
) -> None:
    files = seeded(radar_env)
    files[1].unlink()
    _, verdict = collect_core(radar_env)
    assert verdict == "changed"
    audits = incremental(radar_env)
    assert audits["agreement"].scan["folder_scan"] == "rescanned"
    assert not audits["agreement"].passed
    assert files[1].stem in audits["agreement"].markdown()


def test_a_file_renamed_outside_is_found_by_the_next_check(radar_env: dict[str, Path]) -> None:
    files = seeded(radar_env)
    files[2].rename(files[2].with_name("renamed in Obsidian.md"))
    audits = incremental(radar_env)
    assert audits["agreement"].scan["folder_scan"] == "rescanned"
    # The renamed file still claims its id; the id named by the index has no file of its name.
    assert not audits["provenance"].passed
    assert "renamed in Obsidian.md" in audits["provenance"].markdown()


def test_a_file_added_outside_between_collections_is_not_taken_for_new(
    radar_env: dict[str, Path],
) -> None:
    """A Signal file restored from a backup (no index row) is indexed by the next collection,
    and its item is `reused`, not written twice."""
    files = seeded(radar_env)
    kept = files[0].read_bytes()
    with env_store().transaction() as con:
        con.execute("DELETE FROM signals WHERE signal_id = $1", [files[0].stem])
    files[0].unlink()
    files[0].write_bytes(kept)  # as a sync tool restores it
    report, verdict = collect_core(radar_env)
    assert verdict == "changed"
    assert (report["created"], report["reused"]) == (0, 4)


def test_an_in_place_edit_is_found_by_the_full_audit_not_the_incremental_checks(
    radar_env: dict[str, Path], instance: dg.DagsterInstance
) -> None:
    files = seeded(radar_env)
    folder = files[0].parent
    before = os.stat(folder).st_mtime_ns
    text = files[3].read_text(encoding="utf-8")
    # Obsidian rewrites the file in place: the folder's entries (and mtime) do not change.
    with open(files[3], "r+", encoding="utf-8") as handle:
        handle.seek(0)
        handle.write(text.replace("canonicalUrl:", "canonicalURL:"))
        handle.truncate()
    assert os.stat(folder).st_mtime_ns == before
    # The incremental read cannot see it, and says which read it judged.
    quick = incremental(radar_env)
    assert quick["provenance"].passed
    assert quick["provenance"].scan["folder_scan"] == "trusted"
    # The daily full audit (a real Dagster run of its job) finds it.
    result = defs.resolve_job_def(SIGNAL_AUDIT_JOB_NAME).execute_in_process(instance=instance)
    assert result.success
    found = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not found["provenance"].passed
    assert meta(found["provenance"], "folder_scan") == "full"
    assert meta(found["provenance"], "files_stat") == 4
    assert files[3].name in str(meta(found["provenance"], "report"))


def test_the_full_audit_runs_daily_on_its_own_schedule() -> None:
    schedule = defs.resolve_schedule_def(signal_audit_schedule.name)
    assert schedule.cron_schedule == SIGNAL_AUDIT_CRON
    assert schedule.job_name == SIGNAL_AUDIT_JOB_NAME
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 12, 1, 3, 17))
    [request] = list(schedule.evaluate_tick(context).run_requests or [])
    # No config: every check's default is the full read.
    assert not request.run_config


# ---- the directory mtime's granularity ----------------------------------------------------------


def test_two_changes_within_one_mtime_tick_are_found(radar_env: dict[str, Path]) -> None:
    """A change in the same clock tick as the recorded listing leaves the directory's mtime as
    recorded; the state is then unsettled and verified by its name set, which catches it."""
    files = seeded(radar_env)
    folder = files[0].parent
    shutil.copyfile(files[0], folder / "first change.md")
    run_audits(
        Settings.from_env().paths, datetime.now(UTC), FOLDER_CHECKS
    )  # full: records the state
    state = stored_state(radar_env)
    assert state is not None and not state.settled  # listed within the margin of its mtime
    # The second change lands in the same tick: the directory keeps the recorded mtime.
    shutil.copyfile(files[1], folder / "second change.md")
    os.utime(folder, ns=(state.mtime_ns, state.mtime_ns))
    audits = incremental(radar_env)
    assert audits["idempotency"].scan["folder_scan"] == "rescanned"
    assert "second change.md" in audits["idempotency"].markdown()


def test_the_settle_margin_follows_the_file_systems_granularity() -> None:
    fine = 1_764_000_000_123_456_789
    coarse = 1_764_000_000_000_000_000  # whole seconds: FAT-like
    assert folder_state.settle_margin_ns(fine) == folder_state.FINE_MARGIN_NS
    assert folder_state.settle_margin_ns(coarse) == folder_state.COARSE_MARGIN_NS
    state = folder_state.FolderState(coarse, 1, 0, coarse + folder_state.FINE_MARGIN_NS * 2)
    assert not state.settled


def test_rebuild_forgets_the_state_so_the_next_read_is_a_full_one(
    radar_env: dict[str, Path],
) -> None:
    from radar_pipeline.core.vault.index import rebuild

    seeded(radar_env)
    rebuild(env_store(), radar_env["vault"], datetime.now(UTC))
    assert stored_state(radar_env) is None
    assert incremental(radar_env)["idempotency"].scan["folder_scan"] == "rescanned"


# ---- the planner's clean-up of killed writers' temp files ---------------------------------------


def test_a_killed_writers_temp_file_is_still_removed_when_the_folder_was_trusted(
    radar_env: dict[str, Path],
) -> None:
    """The planner skips listing the Signals folder while it is as a settled state without temp
    files; a temp file left by a writer killed since has moved the directory's mtime."""
    files = seeded(radar_env)
    with env_store().transaction() as con:
        assert folder_state.holds_no_temp_files(con, files[0].parent)
    # A writer that no longer exists (pid 2**22 + 1 is above Linux's pid_max default).
    leftover = files[0].parent / f".tmp-signal-{2**22 + 1}-abc.md"
    leftover.write_text("half a Signal", encoding="utf-8")
    with env_store().transaction() as con:
        assert not folder_state.holds_no_temp_files(con, files[0].parent)
    collect_core(radar_env)
    assert not leftover.exists()
