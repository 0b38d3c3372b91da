"""The collection job under Dagster's multiprocess executor: a process per step, the steps of
one run in parallel, each checking its slices in turn. Its ops hand each other plain values
through the IO manager (no live object crosses a step), so the run leaves the same vault files,
store rows and partition states as the same run in process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.config import Settings
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.collection.assets import signals
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, SIGNALS_KEY, collect_run_config
from radar_pipeline.defs.collection.jobs import collect_job
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
from radar_pipeline.defs.registry import definitions as registry
from radar_pipeline.defs.resources import ClockResource, CollectionResource, RadarResource
from radar_pipeline.defs.tags import partition_range
from radar_pipeline_tests.vaultkit import rss, write_fixture_source

AS_OF = "2026-03-02T06:00:00Z"
SOURCES = [f"fix-{n}" for n in range(7)]
# Small slices and steps, so that seven Sources are four slices in two steps (3 slices of two
# Sources and one of one; the steps run at once).
SLICE = 2
STEP_SLICES = 2


def _job(executor: dg.ExecutorDefinition) -> dg.JobDefinition:
    defs = dg.Definitions.merge(
        registry.defs,
        dg.Definitions(
            assets=[signals],
            jobs=[collect_job],
            resources={
                "radar": RadarResource(),
                "clock": ClockResource(),
                "collection": CollectionResource(
                    slice_sources=SLICE, step_slices=STEP_SLICES, parse_workers=1
                ),
            },
            executor=executor,
        ),
    )
    return defs.resolve_job_def(COLLECT_JOB_NAME)


def multiprocess_collect_job() -> dg.JobDefinition:
    """`Collect_signals` under the multiprocess executor (a reconstructable target)."""
    return _job(dg.multiprocess_executor)


def in_process_collect_job() -> dg.JobDefinition:
    """`Collect_signals` in process, as the project's Definitions run it."""
    return _job(dg.in_process_executor)


def _collect(home: Path, target: Any) -> tuple[bool, list[str], set[Any]]:
    """One run of `target`'s job over every Source; its success, its collection steps and the
    partitions' states. The instance is entered (`with`): Dagster reads the definitions'
    state storage from the instance in context while it loads them."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, SOURCES)
        run_config = collect_run_config("explicit", SOURCES, None, "test")
        run_config["ops"]["signals"]["ops"]["plan"]["config"]["as_of"] = AS_OF
        with dg.execute_job(
            dg.reconstructable(target),
            instance=instance,
            run_config=run_config,
            tags=partition_range(SOURCES[0], SOURCES[-1]),
        ) as result:
            success = result.success
            steps = {e.step_key for e in result.all_events if e.step_key}
            slices = [
                r.user_message
                for r in instance.all_logs(result.run_id)
                if r.step_key and "check_sources" in r.step_key
            ]
        status = instance.get_status_by_partition(SIGNALS_KEY, SOURCES, sources_partitions)
    checks = sorted(s for s in steps if "check_sources" in s)
    # Each slice says what it checked, in the step that checked it.
    assert sum(m.startswith("slice ") for m in slices) == 4, slices
    return success, checks, set(status.values())


def _state(vault: Path, db: Path) -> dict[str, Any]:
    """What a collection leaves: the Signal files (name and bytes), and the store's rows that
    do not name the run."""
    files = {
        p.name: p.read_text(encoding="utf-8")
        for p in sorted((vault / "Radar/Signals").glob("*.md"))
    }
    store = Store.of(Settings.from_env(overrides={"RADAR_DB": str(db)}).paths)
    with store.transaction() as con:
        index = con.execute(
            "SELECT signal_id, identity, source_id, source_item_id, canonical_url, "
            "content_hash, first_seen_at, duplicate_candidate_of FROM signals ORDER BY 1"
        ).fetchall()
        states = con.execute(
            "SELECT source_id, last_success_at, etag, consecutive_failures FROM feed_state "
            "ORDER BY 1"
        ).fetchall()
        attempts = con.execute(
            "SELECT source_id, outcome, check_outcome, items_parsed, items_new FROM "
            "fetch_attempts ORDER BY 1"
        ).fetchall()
        [report] = con.execute("SELECT report_json FROM collections").fetchall()
    recorded = json.loads(report[0])
    recorded.pop("collectionId")
    recorded.pop("launchId", None)
    for source in recorded["sources"]:
        source.pop("durationMs")  # the time each read took: the one figure two runs differ in
    return {
        "files": files,
        "index": index,
        "states": states,
        "attempts": attempts,
        "report": recorded,
    }


@pytest.mark.slow
def test_collection_runs_under_the_multiprocess_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    states = []
    for name, target in (("inproc", in_process_collect_job), ("multi", multiprocess_collect_job)):
        vault, db, home = (
            tmp_path / name / "vault",
            tmp_path / name / "radar.duckdb",
            tmp_path / name / "home",
        )
        home.mkdir(parents=True)
        (vault / "Radar" / "Sources").mkdir(parents=True)
        monkeypatch.delenv("RADAR_STORE_URL", raising=False)
        monkeypatch.setenv("RADAR_VAULT", str(vault))
        monkeypatch.setenv("RADAR_DB", str(db))
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        for n, sid in enumerate(SOURCES):
            items = [
                {
                    "title": f"{sid} {i}",
                    "guid": f"{sid}-{i}",
                    "link": f"https://example.com/{sid}/{i}",
                }
                for i in range(n + 1)
            ]
            write_fixture_source(vault, sid, rss(items))
        success, steps, states_seen = _collect(home, target)
        assert success
        # A step per two slices, named by the plan positions of its Sources.
        assert steps == [
            "signals.check_sources[sources_1_4]",
            "signals.check_sources[sources_5_7]",
        ], steps
        assert states_seen == {dg.AssetPartitionStatus.MATERIALIZED}
        states.append(_state(vault, db))
    in_process, multiprocess = states
    assert len(in_process["files"]) == sum(range(1, len(SOURCES) + 1))
    for key in ("files", "index", "states", "attempts", "report"):
        assert multiprocess[key] == in_process[key], key
