"""The asset checks as evidence reports: each passes on a healthy vault and fails, with a table a
person can read, on a vault broken on purpose. Checks run on a real temp Dagster instance, both
in the checks run after a collection and alone (as from the UI)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.audit.run import DECLARED_SEVERITY, run_audits
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import Settings
from radar_pipeline.core.store.connection import Store
from radar_pipeline.definitions import defs
from radar_pipeline.defs.cleanup.assets import weekly_cleanup
from radar_pipeline.defs.cleanup.checks import retention_check
from radar_pipeline.defs.cleanup.launch import launch_cleanup
from radar_pipeline.defs.collection.assets import signals
from radar_pipeline.defs.collection.checks import (
    AGREEMENT,
    AUDIT_OF,
    FOLDER_CHECKS,
    IDEMPOTENCY,
    ON_CADENCE_CHECK,
    OVERDUE,
    PROVENANCE,
    SIGNAL_EVIDENCE_CHECKS,
    signal_evidence,
)
from radar_pipeline.defs.collection.jobs import (
    CADENCE_CHECK_JOB_NAME,
    EVIDENCE_KEYS_AFTER_COLLECTION,
    SIGNAL_AUDIT_JOB_NAME,
    SIGNAL_CHECKS_JOB_NAME,
)
from radar_pipeline.defs.collection.launch import launch_collection
from radar_pipeline.defs.collection.sensors import signal_checks_after_collection
from radar_pipeline.defs.registry.assets import source_registry
from radar_pipeline.defs.registry.checks import registry_check
from radar_pipeline.defs.resources import ClockResource, CollectionResource, RadarResource
from radar_pipeline_tests.evidencekit import content_rss
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.sensorkit import outcome_for, tick_after
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

ITEMS = [("a1", "First", "Full text one. " * 30), ("a2", "Second", "Full text two. " * 30)]
RESOURCES = {
    "radar": RadarResource(),
    "clock": ClockResource(),
    "collection": CollectionResource(),
    "radar_mem_io": dg.mem_io_manager,
}
EVIDENCE_CHECKS = [*SIGNAL_EVIDENCE_CHECKS, *registry_check.check_keys, *retention_check.check_keys]
# The definitions that evaluate them (the checks on `signals` are one multi-asset check).
CHECK_DEFS = [signal_evidence, registry_check, retention_check]


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


def collect(
    instance: dg.DagsterInstance, as_of: datetime | None = None, mode: str = "all"
) -> dict[str, Any]:
    return launch_collection(
        defs, instance, Settings.from_env(), mode, (), as_of or datetime.now(UTC), "test"
    ).json_object()


def healthy_vault(vault: Path, feed_server: FeedServer, instance: dg.DagsterInstance) -> None:
    """A fixture Source with full text, an HTTP Source, one collection and one weekly close."""
    write_fixture_source(vault, "fixture", content_rss(ITEMS), fullText="feed-content")
    url = feed_server.add(
        "/feed.xml",
        rss([{"title": "Web", "guid": "w1", "link": "https://example.com/w1"}]),
    )
    write_source(vault, "web", url)
    report = collect(instance)
    assert (report["created"], report["failed"]) == (3, 0)


def run_checks(
    instance: dg.DagsterInstance, *checks: dg.AssetCheckKey | dg.AssetChecksDefinition
) -> dict[str, dg.AssetCheckEvaluation]:
    """The checks alone, as the UI's "execute check" does: no asset is materialized."""
    result = dg.materialize(
        [signals, source_registry, weekly_cleanup, *CHECK_DEFS],
        instance=instance,
        resources=RESOURCES,
        selection=dg.AssetSelection.checks(*checks),
    )
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def run_evaluations(
    instance: dg.DagsterInstance, run_id: str
) -> dict[str, dg.AssetCheckEvaluation]:
    """The check evaluations recorded in one run, by check name."""
    found: dict[str, dg.AssetCheckEvaluation] = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        data = record.dagster_event.event_specific_data if record.dagster_event else None
        if isinstance(data, dg.AssetCheckEvaluation):
            found[data.check_name] = data
    return found


def table(evaluation: dg.AssetCheckEvaluation) -> str:
    return str(evaluation.metadata["report"].value)


def checks_after(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun:
    """The one `signal_checks` run that followed a collection run."""
    [run] = instance.get_runs(
        filters=dg.RunsFilter(job_name=SIGNAL_CHECKS_JOB_NAME, tags={"radar/after_run": run_id})
    )
    return run


def test_checks_run_after_each_collection_and_pass(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    healthy_vault(radar_env["vault"], feed_server, instance)
    [collection] = instance.get_runs(filters=dg.RunsFilter(job_name="Collect_signals"))
    # The collection run records no verdicts itself; the checks run that followed it does.
    assert run_evaluations(instance, collection.run_id) == {}
    evaluations = run_evaluations(instance, checks_after(instance, collection.run_id).run_id)
    assert set(evaluations) == {
        "idempotency",
        "provenance",
        "overdue",
        "agreement",
        "accounting",
        "possible_gaps",
        "silent_sources",
        "on_cadence",
        "registry_validity",
        "retention",
    }
    # Before any weekly close, full text in Temporary Content is a WARN of `retention` (its
    # table says why); every other check passes.
    retention = evaluations.pop("retention")
    assert retention.passed or (
        retention.severity == dg.AssetCheckSeverity.WARN
        and "no weekly close recorded yet" in table(retention)
    )
    assert all(e.passed for e in evaluations.values()), {
        k: table(e) for k, e in evaluations.items() if not e.passed
    }
    registry = {n for n, e in evaluations.items() if e.asset_key != dg.AssetKey("signals")}
    assert registry == {"registry_validity"}


def test_checks_after_a_collection_fail_on_a_broken_vault(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    healthy_vault(radar_env["vault"], feed_server, instance)
    vault = radar_env["vault"]
    first = sorted(signal_files(vault))[0]
    shutil.copyfile(first, first.with_name("copy of a signal.md"))
    report = collect(instance)
    assert report["checks"]["idempotency"] is False
    [latest, _] = instance.get_runs(filters=dg.RunsFilter(job_name="Collect_signals"))
    evaluations = run_evaluations(instance, checks_after(instance, latest.run_id).run_id)
    assert not evaluations["idempotency"].passed
    assert "copy of a signal.md" in table(evaluations["idempotency"])


def test_sensor_runs_the_checks_after_runs_whose_launcher_did_not(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    healthy_vault(radar_env["vault"], feed_server, instance)
    [cli_run] = instance.get_runs(filters=dg.RunsFilter(job_name="Collect_signals"))

    def evaluate(run_id: str) -> dg.RunRequest | str:
        return outcome_for(tick_after(signal_checks_after_collection, instance, run_id), run_id)

    # `radar collect` ran the checks itself: the sensor leaves its run alone.
    assert "its launcher ran the checks" in str(evaluate(cli_run.run_id))
    # A run the daemon or the UI launched (one partition): the sensor requests its checks.
    result = dg.materialize(
        [signals], partition_key="fixture", instance=instance, resources=RESOURCES
    )
    request = evaluate(result.run_id)
    assert isinstance(request, dg.RunRequest)
    assert request.run_key == f"checks-after:{result.run_id}"
    assert request.tags["radar/after_run"] == result.run_id


def test_every_check_passes_on_a_healthy_vault(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    healthy_vault(radar_env["vault"], feed_server, instance)
    close = launch_cleanup(defs, instance, datetime.now(UTC))
    assert (close.deleted, close.retained) == (2, 0)
    found = run_checks(instance, *EVIDENCE_CHECKS)
    assert set(found) == {
        "idempotency",
        "provenance",
        "overdue",
        "agreement",
        "registry_validity",
        "retention",
    }
    for name, evaluation in found.items():
        assert evaluation.passed, f"{name}\n{table(evaluation)}"
        assert "no findings" in table(evaluation)
        # The headline states the finding (the claim holds), with no verdict word beside it.
        assert evaluation.description and "FAILED" not in evaluation.description


def test_duplicate_identity_file_fails_idempotency(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    healthy_vault(vault, feed_server, instance)
    original = signal_files(vault)[0]
    identity = original.stem.split("-")[1]
    copy = original.with_name(f"20990101T000000Z-{identity}.md")  # same identity, later name
    shutil.copyfile(original, copy)
    person_copy = original.with_name(f"{original.stem} 1.md")  # Obsidian's "duplicate file"
    shutil.copyfile(original, person_copy)

    evaluation = run_checks(instance, IDEMPOTENCY.key)["idempotency"]

    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    text = table(evaluation)
    assert "**idempotency**: 1 identity not held once: " in text
    row = next(line for line in text.splitlines() if identity in line and "|" in line)
    assert "| 3 | 1 |" in row and "several files share this identity" in row
    for path in (original, copy, person_copy):
        assert path.name in row


def test_signal_missing_canonical_url_fails_provenance(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    healthy_vault(vault, feed_server, instance)
    first, second = signal_files(vault)[:2]
    lines = first.read_text(encoding="utf-8").splitlines(keepends=True)
    first.write_text("".join(x for x in lines if not x.startswith("canonicalUrl:")))
    text = second.read_text(encoding="utf-8").replace(
        "publishedAt: null", "publishedAt: '2026-01-01T00:00:00Z'"
    )
    second.write_text(text)

    evaluation = run_checks(instance, PROVENANCE.key)["provenance"]

    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    report = table(evaluation)
    assert f"| ERROR | Radar/Signals/{first.name} | canonicalUrl | missing or empty |" in report
    assert f"Radar/Signals/{second.name} | publishedAt | set without" in report
    assert evaluation.metadata["findings"].value == 2


def test_leftover_temporary_text_and_full_text_elsewhere_fail_retention(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    healthy_vault(vault, feed_server, instance)
    launch_cleanup(defs, instance, datetime.now(UTC))
    folder = vault / "Radar" / "Temporary Content"
    # Written before the close, still there: it survived the close.
    leftover = folder / f"20200101T000000Z-{'0' * 16}.md"
    leftover.write_text("---\nentityType: temporary-content\n---\n\nold full text\n")
    # Written after the close: waits for the next one, not a finding.
    later = datetime.now(UTC) + timedelta(hours=1)
    (folder / f"{later.strftime('%Y%m%dT%H%M%SZ')}-{'1' * 16}.md").write_text("fresh\n")
    # Full text inside a Signal's pipeline-written body, and a temporary file outside the folder.
    signal = signal_files(vault)[0]
    body = signal.read_text(encoding="utf-8").replace(
        "\n\n*Collected by Radar",
        "\n\n" + "Pasted full article. " * 300 + "\n\n*Collected by Radar",
    )
    signal.write_text(body)
    stray = vault / "Radar" / "Sources" / "notes.md"
    stray.write_text("---\nentityType: temporary-content\nsignal: x\n---\n\ntext\n")

    evaluation = run_checks(instance, retention_check)["retention"]

    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    report = table(evaluation)
    assert f"Radar/Temporary Content/{leftover.name} | survived the close" in report
    assert f"Radar/Signals/{signal.name} | body of" in report
    assert "Radar/Sources/notes.md | temporary text outside Temporary Content" in report
    figures = {k: evaluation.metadata[k].value for k in ("temporary_files", "pending_next_close")}
    assert figures == {"temporary_files": 2, "pending_next_close": 1}


def test_people_may_annotate_below_the_trailer(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    healthy_vault(vault, feed_server, instance)
    launch_cleanup(defs, instance, datetime.now(UTC))
    signal = signal_files(vault)[0]
    with signal.open("a", encoding="utf-8") as handle:
        handle.write("\n## My notes\n\n" + "A long human annotation. " * 400)
    assert run_checks(instance, retention_check)["retention"].passed


def test_index_row_without_a_file_fails_agreement_and_idempotency(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    healthy_vault(vault, feed_server, instance)
    gone, unindexed = signal_files(vault)[:2]
    gone.unlink()
    with Store.of(Settings.from_env().paths).transaction() as con:
        con.execute("DELETE FROM signals WHERE signal_id = $1", [unindexed.stem])

    found = run_checks(instance, AGREEMENT.key, IDEMPOTENCY.key)

    agreement = found["agreement"]
    assert not agreement.passed and agreement.severity == dg.AssetCheckSeverity.ERROR
    report = table(agreement)
    assert f"| ERROR | {gone.stem} | no | yes | index row without a Signal file |" in report
    assert f"| WARN | {unindexed.stem} | yes | no |" in report
    assert not found["idempotency"].passed
    assert "index row without a Signal file" in table(found["idempotency"])


def test_only_a_file_without_index_row_is_a_warning(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    healthy_vault(vault, feed_server, instance)
    unindexed = signal_files(vault)[0]
    with Store.of(Settings.from_env().paths).transaction() as con:
        con.execute("DELETE FROM signals WHERE signal_id = $1", [unindexed.stem])
    found = run_checks(instance, AGREEMENT.key, IDEMPOTENCY.key)
    for evaluation in found.values():
        assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN


def test_registry_issues_fail_registry_validity_with_first_declaration(
    radar_env: dict[str, Path], instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    write_source(vault, "alpha", "https://example.com/a.xml")
    write_source(vault, "beta", "https://example.com/b.xml", id="alpha")
    write_source(vault, "gamma", "https://example.com/c.xml", priority="urgent")

    evaluation = run_checks(instance, registry_check)["registry_validity"]

    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    report = table(evaluation)
    assert "| ERROR | Radar/Sources/beta.md | duplicate-id | Radar/Sources/alpha.md |" in report
    assert "| ERROR | Radar/Sources/alpha.md | duplicate-id | Radar/Sources/alpha.md |" in report
    assert "| WARN | Radar/Sources/gamma.md |" in report
    # Only the invalid file left: a soft failure.
    (vault / "Radar" / "Sources" / "beta.md").unlink()
    evaluation = run_checks(instance, registry_check)["registry_validity"]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN


def test_overdue_counts_sources_past_cadence_and_is_zero_after_recovery(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    feed = rss([{"title": "Web", "guid": "w1", "link": "https://example.com/w1"}])
    url = feed_server.add("/feed.xml", b"down", status=503, headers={})
    write_source(vault, "web", url, cadence="PT6H")
    t0 = datetime.now(UTC).replace(microsecond=0)
    down = collect(instance, t0, mode="due")
    assert down["failed"] == 1

    evaluation = run_checks(instance, OVERDUE.key)["overdue"]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert "| WARN | web | normal | PT6H | never | first check |" in table(evaluation)

    feed_server.add("/feed.xml", feed)
    recovered = collect(instance, t0 + timedelta(days=2), mode="due")
    assert (recovered["passed"], recovered["overdue"]) == (1, 1)
    # The overdue check run after the recovery used the recovery's clock.
    recovery_run = instance.get_runs(filters=dg.RunsFilter(job_name="Collect_signals"))[0]
    after = run_evaluations(instance, checks_after(instance, recovery_run.run_id).run_id)["overdue"]
    assert after.passed, table(after)
    assert after.metadata["overdue"].value == 0
    assert f"at {format_utc(t0 + timedelta(days=2))}" in table(after)


def test_checks_are_unpartitioned_and_documented() -> None:
    specs = [spec for check in CHECK_DEFS for spec in check.check_specs]
    assert {spec.key for spec in specs} >= set(EVIDENCE_CHECKS)
    for check in CHECK_DEFS:
        assert check.partitions_def is None, check.check_keys
    for spec in specs:
        assert spec.description and len(spec.description) > 40, spec.name
    assert "whole vault" in (IDEMPOTENCY.description or "")


# ---- the shape of a checks run --------------------------------------------------------------

# The audit of core/audit/run.py behind each check (core/audit/run.py, CHECK_NAMES).
AUDIT_BEHIND = {
    **{key.name: audit for key, audit in AUDIT_OF.items()},
    "registry_validity": "registry",
    "retention": "retention",
}


def evaluated_keys(instance: dg.DagsterInstance, run_id: str) -> list[dg.AssetCheckKey]:
    """Every check evaluation a run recorded, repeats included."""
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return [
        r.dagster_event.asset_check_evaluation_data.asset_check_key
        for r in records
        if r.dagster_event is not None
    ]


def test_a_collections_checks_run_is_three_steps_with_each_check_evaluated_once(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    """The checks run after a collection: the eight checks on `signals` in one step, the
    registry's and `retention` in their own; each of the ten evaluated exactly once, with the
    verdict, severity and headline the audits give now (a vault broken on purpose, so the
    verdicts differ), and `radar collect`'s report agreeing."""
    healthy_vault(radar_env["vault"], feed_server, instance)
    first = sorted(signal_files(radar_env["vault"]))[0]
    shutil.copyfile(first, first.with_name("copy of a signal.md"))
    now = datetime.now(UTC).replace(microsecond=0)
    report = collect(instance, now)
    [latest, _] = instance.get_runs(filters=dg.RunsFilter(job_name="Collect_signals"))
    run = checks_after(instance, latest.run_id)

    steps = instance.get_run_step_stats(run.run_id)
    assert sorted(s.step_key for s in steps) == [
        "signal_evidence",
        "source_registry_registry_validity",
        "weekly_cleanup_retention",
    ]
    assert {s.status.value for s in steps if s.status} == {"SUCCESS"} and len(steps) == 3
    keys = evaluated_keys(instance, run.run_id)
    assert sorted(keys) == sorted(EVIDENCE_KEYS_AFTER_COLLECTION) and len(keys) == 10

    audits = run_audits(Settings.from_env().paths, now)
    evaluations = run_evaluations(instance, run.run_id)
    for name, audit in AUDIT_BEHIND.items():
        evaluation = evaluations[name]
        assert evaluation.passed == audits[audit].passed, name
        assert evaluation.description == audits[audit].headline, name
        # Failing: the worst finding's severity; passing: the check's declared one.
        assert evaluation.severity.value == audits[audit].severity, name
        if evaluation.passed:
            assert evaluation.severity.value == DECLARED_SEVERITY[audit], name
    assert not evaluations["idempotency"].passed and evaluations["overdue"].passed
    assert evaluations["on_cadence"].metadata["overdue"].value == 0
    assert report["checks"] == {name: e.passed for name, e in evaluations.items()}


def test_the_daily_audit_and_the_cadence_job_evaluate_only_their_checks(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    """The one op of the checks on `signals` evaluates the checks a run selects, no more: the
    daily `signal_audit` the three folder checks (a full read), `source_cadence_check` only
    `on_cadence`, each in one step."""
    healthy_vault(radar_env["vault"], feed_server, instance)
    for job, wanted in (
        (SIGNAL_AUDIT_JOB_NAME, set(FOLDER_CHECKS)),
        (CADENCE_CHECK_JOB_NAME, {ON_CADENCE_CHECK}),
    ):
        result = defs.resolve_job_def(job).execute_in_process(instance=instance)
        assert result.success
        [step] = instance.get_run_step_stats(result.run_id)
        assert step.step_key == "signal_evidence"
        keys = evaluated_keys(instance, result.run_id)
        assert sorted(keys) == sorted(wanted)
    evaluations = run_evaluations(instance, result.run_id)
    assert evaluations["on_cadence"].passed
    folder = run_evaluations(
        instance,
        instance.get_runs(filters=dg.RunsFilter(job_name=SIGNAL_AUDIT_JOB_NAME))[0].run_id,
    )
    assert {e.metadata["folder_scan"].value for e in folder.values()} == {"full"}
