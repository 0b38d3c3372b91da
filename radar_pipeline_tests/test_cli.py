"""The `radar` command as a user runs it: a real process, env vars, a temp Dagster home."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

RADAR = str(Path(sys.executable).parent / "radar")


def radar(*args: str, env: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
    }
    return subprocess.run([RADAR, *args], capture_output=True, text=True, env=environ, timeout=180)


def test_collect_all_twice_created_then_reused(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "fixture", rss([{"title": "t", "guid": "1", "link": "https://example.com/1"}])
    )
    write_source(vault, "offline", "https://nonexistent.invalid/rss.xml")
    first = radar("collect", "--all", "--json", env=radar_env)
    assert first.returncode == 2, first.stderr  # the offline Source failed, cleanly
    report = json.loads(first.stdout)
    assert (report["created"], report["reused"], report["failed"], report["passed"]) == (1, 0, 1, 1)
    # The failure is in the report and the Dagster event log, not a stack trace on stderr.
    assert first.stderr.strip() == "", first.stderr
    second = json.loads(radar("collect", "--all", "--json", env=radar_env).stdout)
    assert (second["created"], second["reused"]) == (0, 1)
    assert len(signal_files(vault)) == 1
    assert (radar_env["home"] / "dagster.yaml").exists()
    # The instance made from the repository's dagster.yaml stores a run's INFO lines and every
    # Dagster event, and none of Dagster's DEBUG lines (the IO manager's "Loading file from").
    with dg.DagsterInstance.from_config(str(radar_env["home"])) as instance:
        records = instance.all_logs(second["dagsterRunId"])
    events = {r.dagster_event.event_type_value for r in records if r.dagster_event}
    lines = [r for r in records if r.dagster_event is None]
    assert {"LOADED_INPUT", "HANDLED_OUTPUT", "STEP_SUCCESS"} <= events, events
    assert any(r.user_message.startswith("slice 0: ") for r in lines), lines
    assert {r.level for r in lines} <= {logging.INFO, logging.WARNING, logging.ERROR}, lines

    rep = radar("report", "--json", env=radar_env)
    assert rep.returncode == 0, rep.stderr
    evidence = json.loads(rep.stdout)
    assert (evidence["productionSources"], evidence["fixtureSources"]) == (1, 1)
    assert evidence["signals"] == 1
    assert evidence["lastCollection"]["reused"] == 1


def test_collect_on_a_vault_without_sources_reports_nothing_to_do(
    radar_env: dict[str, Path],
) -> None:
    for args in (("collect",), ("collect", "--json")):
        proc = radar(*args, env=radar_env)
        assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr
    report = json.loads(proc.stdout)
    assert (report["due"], report["deferred"], report["outsideWindow"], report["sources"]) == (
        0,
        0,
        0,
        [],
    )


def test_bad_input_is_one_clear_line(radar_env: dict[str, Path]) -> None:
    bad = radar("collect", "--as-of", "yesterday-ish", env=radar_env)
    assert bad.returncode == 1
    assert bad.stderr.startswith("radar: ") and "Traceback" not in bad.stderr
    unknown = radar("collect", "--source", "nope", env=radar_env)
    assert unknown.returncode == 1 and "nope" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_sources_validate_json(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_source(vault, "good", "https://example.com/feed.xml")
    write_source(vault, "copy", "https://example.com/feed.xml", id="good")
    proc = radar("sources", "validate", "--json", env=radar_env)
    assert proc.returncode == 1
    payload = json.loads(proc.stdout)
    codes = {i["code"] for i in payload["issues"]}
    assert codes == {"duplicate-id"}
    # copy.md sorts first, so it is the first declaration every issue names.
    assert any(
        i["path"] == "Radar/Sources/good.md" and "Radar/Sources/copy.md" in i["message"]
        for i in payload["issues"]
    )
    assert payload["sources"] == []


def test_version_help_and_usage_errors(radar_env: dict[str, Path]) -> None:
    from radar_pipeline import __version__

    version = radar("--version", env=radar_env)
    assert (version.returncode, version.stdout.strip()) == (0, f"radar {__version__}")
    for args in (
        ("collect", "--bad-flag"),
        ("collect", "--as-of"),
        ("sources", "import"),
        ("dlq", "replay"),
        ("nonsense",),
        (),
    ):
        proc = radar(*args, env=radar_env)
        assert proc.returncode == 1, (
            args,
            proc.returncode,
        )  # never 2: that means "a Source failed"
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("radar"), (args, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == ""
    for command in (
        (),
        ("collect",),
        ("sources", "import"),
        ("sources", "export"),
        ("index", "rebuild"),
        ("dlq", "replay"),
        ("cleanup",),
        ("report",),
    ):
        proc = radar(*command, "--help", env=radar_env)
        assert proc.returncode == 0, command
        assert "examples:\n  radar " in proc.stdout, command
        options = [line for line in proc.stdout.splitlines() if line.startswith("  --")]
        # Every option has its line of help (argparse wraps a bare flag with no text).
        assert all(len(line.split(None, 2)) >= 2 for line in options), (command, options)
