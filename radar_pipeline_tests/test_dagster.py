"""The Dagster shell on a real temp instance: definitions load, materialize, range runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from radar_pipeline.core.config import REPO_ROOT, Settings
from radar_pipeline.defs.collection.assets import signals
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.registry.assets import source_registry
from radar_pipeline.defs.resources import CollectionResource, RadarResource
from radar_pipeline_tests.daemonkit import DAGSTER, free_port, wait_for
from radar_pipeline_tests.sensorkit import partition_events
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source


def test_definitions_load() -> None:
    from radar_pipeline.definitions import defs

    assert defs.resolve_job_def("Collect_signals") is not None
    assert {str(k.to_user_string()) for k in defs.resolve_asset_graph().get_all_asset_keys()} >= {
        "signals",
        "source_registry",
    }


def test_loading_the_code_location_imports_no_collect_only_library() -> None:
    """Every run, the daemon's code server and each `radar` command load the definitions;
    the fetcher (httpx), its parsers and the page extractor are imported only by a run that
    collects."""
    probe = (
        "import sys, radar_pipeline.definitions; "
        "print(','.join(m for m in ('feedparser', 'trafilatura', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == ""


def test_the_page_interval_default_is_the_extractors() -> None:
    from radar_pipeline.core.extract.pages import DEFAULT_INTERVAL_S
    from radar_pipeline.defs.resources import PAGE_INTERVAL_S

    assert PAGE_INTERVAL_S == DEFAULT_INTERVAL_S
    assert CollectionResource().page_interval_s == DEFAULT_INTERVAL_S


def test_dagster_definitions_validate_cli(tmp_path: Path) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-w",
            "workspace.yaml",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_materialize_fixture_created_then_reused(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "fixture", rss([{"title": "t", "guid": "1", "link": "https://example.com/1"}])
    )
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, ["fixture"])
        resources = {
            "radar": RadarResource(),
            "collection": CollectionResource(),
            "radar_mem_io": dg.mem_io_manager,
        }
        for expected in ({"created": 1, "reused": 0}, {"created": 0, "reused": 1}):
            result = dg.materialize(
                [signals], partition_key="fixture", instance=instance, resources=resources
            )
            assert result.success
            [mat] = result.asset_materializations_for_node("signals")
            assert mat.partition == "fixture"
            assert {k: mat.metadata[k].value for k in expected} == expected
        assert len(signal_files(vault)) == 1
        assert instance.get_materialized_partitions(dg.AssetKey("signals")) == {"fixture"}


def test_range_run_marks_only_selected_and_passing_sources(radar_env: dict[str, Path]) -> None:
    """A collection's runs cover only the partitions they check: a Source between the
    selected ones keeps its own status (here materialized by an earlier run) although a
    Source of the collection fails; a failing Source gets an observation and FAILED."""
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    vault = radar_env["vault"]
    for name in ("a-fix", "b-fix", "c-fix"):
        write_fixture_source(
            vault, name, rss([{"title": name, "guid": name, "link": f"https://example.com/{name}"}])
        )
    write_source(vault, "d-down", "http://127.0.0.1:9/feed.xml")
    from datetime import UTC, datetime

    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:

        def launch(*ids: str) -> dict[str, Any]:
            return launch_collection(
                defs,
                instance,
                Settings.from_env(),
                "explicit",
                ids,
                datetime.now(UTC),
                "test",
            ).json_object()

        assert launch("b-fix")["passed"] == 1
        report = launch("a-fix", "c-fix", "d-down")
        assert {s["id"]: s["outcome"] for s in report["sources"]} == {
            "a-fix": "passed",
            "c-fix": "passed",
            "d-down": "failed",
        }
        assert (report["passed"], report["failed"], report["created"]) == (2, 1, 2)
        # One run checks the three and plans no partition; d-down newly failed, so a follow-up
        # run plans its partition alone, checks nothing and fails naming it (restate.py).
        [failed_run] = report["dagsterRunIds"]
        run = instance.get_run_by_id(failed_run)
        assert run is not None and "dagster/asset_partition_range_start" not in run.tags
        assert run.status == dg.DagsterRunStatus.FAILURE
        [follow_up] = instance.get_runs(dg.RunsFilter(tags={"radar/restates": failed_run}))
        assert (
            follow_up.tags["dagster/asset_partition_range_start"],
            follow_up.tags["dagster/asset_partition_range_end"],
            follow_up.status,
        ) == ("d-down", "d-down", dg.DagsterRunStatus.FAILURE)
        assert report["dagsterRunStatus"] == "FAILURE"
        # A run that checked a failing Source is a failed run naming it; the report is back.
        [failure] = instance.all_logs(failed_run, of_type=dg.DagsterEventType.STEP_FAILURE)
        assert failure.dagster_event is not None
        error = failure.dagster_event.step_failure_data.error
        # The run's message leads with each failed Source's root cause and its next attempt.
        assert error is not None and "1 Source failed\nd-down: fetch: network (" in error.message
        assert "Connection refused); no HTTP answer; next attempt 20" in error.message
        status = instance.get_status_by_partition(
            dg.AssetKey("signals"), ["a-fix", "b-fix", "c-fix", "d-down"], signals.partitions_def
        )
        assert {k: v.value for k, v in status.items()} == {
            "a-fix": "MATERIALIZED",
            "b-fix": "MATERIALIZED",
            "c-fix": "MATERIALIZED",
            "d-down": "FAILED",
        }
        # Each Source at a glance on its partition page.
        [observed] = [
            e.asset_observation
            for e in instance.all_logs(failed_run, of_type=dg.DagsterEventType.ASSET_OBSERVATION)
            if e.asset_observation is not None and e.asset_observation.partition == "d-down"
        ]
        glance = {k: getattr(v, "value", v) for k, v in observed.metadata.items()}
        # No answer, no status entry (a -1 would plot as a status); the description is the line.
        assert (glance["outcome"], glance["error_class"]) == ("failed", "network")
        assert "http_status" not in glance
        assert observed.description is not None
        assert observed.description.startswith("FAILED · fetch: network (")
        assert observed.description.endswith(
            f"no HTTP answer; next attempt {glance['next_due_at']}"
        )
        assert glance["backoff_until"] and glance["next_due_at"] == glance["backoff_until"]
        [passed] = [
            e.asset_materialization
            for e in instance.all_logs(
                report["dagsterRunIds"][0], of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
            )
            if e.asset_materialization is not None and e.asset_materialization.partition == "a-fix"
        ]
        assert {k: passed.metadata[k].value for k in ("created", "deferred", "next_due_at")} == {
            "created": 1,
            "deferred": 0,
            "next_due_at": "manual",
        }


def test_skipped_and_ineligible_sources_stay_out_of_a_failed_runs_range(
    radar_env: dict[str, Path],
) -> None:
    """`radar collect --all` with a failing Source: an ineligible Source (pending legal
    review) and one in backoff lie between the checked ones in partition order; neither becomes
    FAILED, the one in backoff is still reported as skipped, and `radar report` shows the
    collection's runs as one `lastCollection`."""
    from datetime import UTC, datetime, timedelta

    from radar_pipeline.core.audit.evidence import evidence_snapshot
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    vault = radar_env["vault"]
    item = [{"title": "t", "guid": "g", "link": "https://example.com/t"}]
    write_fixture_source(vault, "a-fix", rss(item))
    write_fixture_source(vault, "b-pending", rss(item), legalAssessment="pending")
    write_source(vault, "c-down", "http://127.0.0.1:9/feed.xml")
    write_fixture_source(vault, "d-fix", rss(item))
    write_source(vault, "e-down", "http://127.0.0.1:9/feed.xml")
    settings = Settings.from_env()
    now = datetime.now(UTC)
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        first = launch_collection(defs, instance, settings, "all", (), now, "test").json_object()
        assert {s["id"]: s["outcome"] for s in first["sources"]} == {
            "a-fix": "passed",
            "c-down": "failed",
            "d-fix": "passed",
            "e-down": "failed",
        }
        # Every run the command launched (the collection, the follow-up that re-states the
        # failed Sources, the checks) got the settings the command read, as its `radar`
        # resource's config: what the run's page shows is what it used.
        launched = instance.get_runs()
        assert len(launched) == 3
        for run in launched:
            config = run.run_config["resources"]["radar"]["config"]
            assert (config["vault"], config["db"]) == (str(settings.vault), str(settings.db))
        # c-down and e-down are in backoff now: the second collection checks a-fix and d-fix
        # (two runs: b-pending and c-down lie between them) and reports the two in backoff as
        # skipped, without a partition, so they stay FAILED, not MATERIALIZED.
        later = now + timedelta(seconds=30)  # inside the least backoff (1 minute)
        second = launch_collection(defs, instance, settings, "all", (), later, "test").json_object()
        outcomes = {s["id"]: s["outcome"] for s in second["sources"]}
        assert outcomes["c-down"] == outcomes["e-down"] == "skipped"
        assert outcomes["a-fix"] == outcomes["d-fix"] == "passed"
        assert "b-pending" not in outcomes
        status = instance.get_status_by_partition(
            dg.AssetKey("signals"),
            ["a-fix", "b-pending", "c-down", "d-fix", "e-down"],
            signals.partitions_def,
        )
        assert {k: v.value if v else None for k, v in status.items()} == {
            "a-fix": "MATERIALIZED",
            "b-pending": None,  # never run: neither materialized nor failed
            "c-down": "FAILED",
            "d-fix": "MATERIALIZED",
            "e-down": "FAILED",
        }
        last = evidence_snapshot(settings.paths, later).json_object()["lastCollection"]
        assert last.get("collectionIds", [last["collectionId"]]) == second["dagsterRunIds"]
        assert {s["id"] for s in last["sources"]} == set(outcomes)


def test_the_partition_the_source_note_and_the_report_name_the_same_next_attempt(
    radar_env: dict[str, Path],
) -> None:
    """After one collection, each Source's next attempt is one time in three places: its
    partition's line and metadata, its Source note's `nextAttemptAt` and `radar report`
    (`lastCollection.sources[].nextAttemptAt` and the plain report's line). A failed Source's
    is its backoff's end, a passing one's its next slot; a `manual` Source's is "when run by
    hand" (an empty key, a null in the JSON)."""
    from datetime import UTC, datetime

    from radar_pipeline.core.audit.evidence import evidence_snapshot, evidence_text
    from radar_pipeline.core.clock import parse_utc
    from radar_pipeline.core.frontmatter import split_frontmatter
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    vault = radar_env["vault"]
    item = [{"title": "t", "guid": "g", "link": "https://example.com/t"}]
    (vault / "Radar/Fixtures").mkdir(parents=True, exist_ok=True)
    (vault / "Radar/Fixtures/a-fix.xml").write_bytes(rss(item))
    notes = {
        "a-fix": write_source(
            vault,
            "a-fix",
            "Radar/Fixtures/a-fix.xml",
            sourceType="fixture",
            collectionMethod="fixture",
            cadence="PT6H",
        ),
        "c-down": write_source(vault, "c-down", "http://127.0.0.1:9/feed.xml"),
        "m-down": write_source(vault, "m-down", "http://127.0.0.1:9/feed.xml", cadence="manual"),
    }
    settings = Settings.from_env()
    now = datetime.now(UTC).replace(microsecond=0)
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        report = launch_collection(defs, instance, settings, "all", (), now, "test").json_object()
        assert {s["id"]: s["outcome"] for s in report["sources"]} == {
            "a-fix": "passed",
            "c-down": "failed",
            "m-down": "failed",
        }
        events = partition_events(instance, report["dagsterRunIds"])

        snapshot = evidence_snapshot(settings.paths, now)
        last = {s["id"]: s for s in snapshot.json_object()["lastCollection"]["sources"]}
        text = evidence_text(snapshot)

    def note_key(sid: str) -> object:
        frontmatter, _ = split_frontmatter(notes[sid].read_text(encoding="utf-8"))
        return frontmatter.get("nextAttemptAt")

    # The failed cadence Source: its backoff's end, to the second, in all three places.
    down = last["c-down"]["nextAttemptAt"]
    assert down is not None and down == last["c-down"]["backoffUntil"]
    assert now < parse_utc(down)
    description, meta = events["c-down"]
    assert description is not None and description.endswith(f"; next attempt {down}")
    assert meta["next_due_at"] == down
    assert str(note_key("c-down")) == down
    assert "failed Source c-down: " in text and f"; next attempt {down}" in text
    # The passing cadence Source: its next slot, later than now, in its metadata and note.
    passed = last["a-fix"]["nextAttemptAt"]
    assert passed is not None and now < parse_utc(passed)
    assert events["a-fix"][1]["next_due_at"] == passed
    assert str(note_key("a-fix")) == passed
    # The manual Source: when run by hand, no time in any of the three.
    assert last["m-down"]["nextAttemptAt"] is None
    description, meta = events["m-down"]
    assert description is not None and description.endswith("; next attempt when run by hand")
    assert meta["next_due_at"] == "manual"
    assert note_key("m-down") in (None, "")
    assert "failed Source m-down: " in text
    assert (
        text.split("failed Source m-down: ")[1]
        .split("\n")[0]
        .endswith("; next attempt when run by hand")
    )


def test_the_registry_sensor_observes_the_registry_when_it_changes(
    radar_env: dict[str, Path],
) -> None:
    """`source_registry` is an external asset: the sensor records an observation (counts and
    issues) on a tick in which what the registry decides changed, and says so; `signals`
    shows an edge from it."""
    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.registry.sensors import source_registry_sensor

    assert defs.resolve_asset_graph().get(SIGNALS_KEY).parent_keys == {source_registry.key}
    vault = radar_env["vault"]
    write_source(vault, "good", "https://example.com/feed.xml")
    (vault / "Radar/Sources/bad.md").write_text("no frontmatter here\n")
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:

        def tick(cursor: str | None) -> dg.SensorExecutionData:
            context = dg.build_sensor_context(
                instance=instance,
                cursor=cursor,
                definitions=defs,
                resources={"radar": RadarResource()},
            )
            return source_registry_sensor.evaluate_tick(context)

        first = tick(None)
        [observation] = first.asset_events
        assert isinstance(observation, dg.AssetObservation)
        assert observation.asset_key == source_registry.key
        assert observation.metadata["sources"].value == 1
        assert observation.metadata["issues"].value == 1
        assert "bad.md" in str(observation.metadata["issue_table"].value)
        assert "registry observed (1 valid Sources, 1 issues)" in str(first.skip_message)
        # Nothing the registry decides changed (a health key written is not a change).
        again = tick(first.cursor)
        assert not again.asset_events and "observed" not in str(again.skip_message)
        (vault / "Radar/Sources/bad.md").unlink()
        assert tick(first.cursor).asset_events


@pytest.mark.slow
def test_the_deployment_workspace_reads_a_long_lived_code_server(tmp_path: Path) -> None:
    """docs/deployment.md's processes: `dagster api grpc` as the code server and
    `deploy/workspace.grpc.yaml` for the webserver and the daemon. The location is named as
    workspace.yaml's, so a schedule turned on under one file is on under the other."""
    workspace = yaml.safe_load(
        (REPO_ROOT / "radar_pipeline/deploy/workspace.grpc.yaml").read_text()
    )
    [entry] = workspace["load_from"]
    local = yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())
    assert (
        entry["grpc_server"]["location_name"]
        == local["load_from"][0]["python_module"]["module_name"]
    )
    port = free_port()  # the file's 4000, moved to a free port for the test
    entry["grpc_server"]["port"] = port
    moved = tmp_path / "workspace.yaml"
    moved.write_text(yaml.safe_dump(workspace))
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home")}
    # The home made first, as `make ui` does: a code server and a CLI creating one SQLite
    # storage at the same instant can leave it with two schema heads.
    subprocess.run([sys.executable, "-m", "radar_pipeline.defs.instance"], env=env, check=True)
    location = entry["grpc_server"]["location_name"]
    serve = ["api", "grpc", "-m", location, "-h", "127.0.0.1", "-p", str(port)]
    log = tmp_path / "code-server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [DAGSTER, *serve, "--location-name", location],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    answers: list[str] = []
    try:
        listed = wait_for(
            "the code server's schedules", lambda: _schedules_listed(moved, env, answers), 120
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{log.read_text()[-3000:]}\n{answers[-1:]}") from None
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a loaded machine: the server ignored SIGTERM
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=60)
    assert {"due_sources_schedule", "run_history_schedule"} <= set(listed)


def _schedules_listed(workspace: Path, env: dict[str, str], answers: list[str]) -> list[str] | None:
    done = subprocess.run(
        [DAGSTER, "schedule", "list", "--name", "-w", str(workspace)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    answers.append(done.stdout + done.stderr)
    return done.stdout.split() if done.returncode == 0 else None
