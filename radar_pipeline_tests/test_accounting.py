"""Every item accounted for, and the stream's health visible (docs/architecture.md,
invariant 14): the accounting identity over the whole corpus, the `accounting` check on a row
altered on purpose, possible gaps and silent Sources, each through the real Collector, the
`radar` command and the Dagster checks."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import dagster as dg
import feedparser
import pytest

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.parse.dispatch import is_json_body
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs.collection.assets import signals
from radar_pipeline.defs.collection.checks import (
    ACCOUNTING,
    POSSIBLE_GAPS,
    SILENT_SOURCES,
    STREAM_EVIDENCE_CHECKS,
    signal_evidence,
)
from radar_pipeline.defs.resources import ClockResource, CollectionResource, RadarResource
from radar_pipeline_tests.conftest import CORPUS_REAL, collect_stages, new_collection_id
from radar_pipeline_tests.faults.test_hostile_corpus import corpus_files, declared_headers
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

RADAR = str(Path(sys.executable).parent / "radar")
T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
OUTCOMES = ("created", "reused", "updated", "duplicates", "rejected", "deferred", "outsideWindow")
RESOURCES = {
    "radar": RadarResource(),
    "clock": ClockResource(),
    "collection": CollectionResource(),
    "radar_mem_io": dg.mem_io_manager,
}


def collect(env: dict[str, Path], as_of: datetime, *sources: str) -> dict[str, Any]:
    mode = "explicit" if sources else "all"
    with Collector(Settings.from_env()) as collector:
        return collect_stages(
            collector, CollectionSpec(new_collection_id(), mode, as_of, sources)
        ).json_object()


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in report["sources"]}


def radar_report() -> dict[str, Any]:
    proc = subprocess.run(
        [RADAR, "report", "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def radar_report_text() -> str:
    proc = subprocess.run(
        [RADAR, "report"], capture_output=True, text=True, env=dict(os.environ), timeout=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def item(source_id: str, n: int, at: datetime) -> dict[str, str]:
    return {
        "title": f"{source_id} post {n}",
        "guid": f"{source_id}-{n}",
        "link": f"https://example.com/{source_id}/{n}",
        "pubDate": format_datetime(at, usegmt=True),
    }


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


def run_checks(
    instance: dg.DagsterInstance, *checks: dg.AssetCheckKey
) -> dict[str, dg.AssetCheckEvaluation]:
    """The checks alone, as the UI's "execute check" does."""
    result = dg.materialize(
        [signals, signal_evidence],
        instance=instance,
        resources=RESOURCES,
        selection=dg.AssetSelection.checks(*checks),
    )
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def table(evaluation: dg.AssetCheckEvaluation) -> str:
    return str(evaluation.metadata["report"].value)


# -- the identity over the whole corpus ----------------------------------------------------------


# ~625 feeds in seven collections: about 20 s
@pytest.mark.timeout(1800)
def test_accounting_identity_over_every_corpus_feed(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Every feed of the corpus (the nine real ones and feedparser's suite): each item the
    parser sees is in exactly one outcome, in the report and in DuckDB."""
    files = [*sorted(CORPUS_REAL.glob("*.xml")), *corpus_files()]
    vault, expected = radar_env["vault"], {}
    for n, path in enumerate(files):
        data = path.read_bytes()
        headers = {k: v for k, v in declared_headers(data).items() if k.lower() != "content-length"}
        if path.parent == CORPUS_REAL:
            headers = {"Content-Type": "application/xml"}
        url = feed_server.add(f"/c/{n:04d}/{path.name}", data, headers=headers)
        lowered = {k.lower(): v for k, v in headers.items()} | {"content-location": url}
        if is_json_body(data):  # a JSON Feed at a feed URL is read as one (dispatch.py)
            expected[f"c-{n:04d}"] = len(json.loads(data)["items"])
        else:
            parsed = feedparser.parse(io.BytesIO(data), response_headers=lowered)
            expected[f"c-{n:04d}"] = len(parsed.get("entries", []))
        write_source(vault, f"c-{n:04d}", url)
    ids = sorted(expected)
    checked = 0
    for start in range(0, len(ids), 100):
        batch = tuple(ids[start : start + 100])
        report = collect(radar_env, T, *batch)
        for src in report["sources"]:
            checked += 1
            outcomes = sum(src[k] for k in OUTCOMES)
            assert src["itemsParsed"] == outcomes, src
            if src["outcome"] == "passed":
                assert src["itemsParsed"] == expected[src["id"]], src
            else:
                assert src["itemsParsed"] == 0, src
        assert report["deferred"] == sum(s["deferred"] for s in report["sources"])
        assert report["outsideWindow"] == sum(s["outsideWindow"] for s in report["sources"])
    assert checked == len(ids)
    audit = run_audit("accounting", Settings.from_env().paths, T)
    assert audit.passed, audit.markdown()
    assert dict(audit.figures) == {"checks": len(ids), "unbalanced": 0}
    with Store.of(Settings.from_env().paths).transaction() as con:
        [(parsed, observed)] = con.execute(
            "SELECT (SELECT sum(items_parsed) FROM check_accounting), "
            "(SELECT count(*) FROM item_observations)"
        ).fetchall()
    assert parsed == observed and parsed > 400  # 431 items in 625 feeds


# -- the accounting check ---------------------------------------------------------------------


def test_accounting_check_fails_on_a_row_altered_on_purpose(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    items = [item("acct", n, T - timedelta(hours=n)) for n in range(4)]
    items.append(item("acct", 99, T - timedelta(days=20)))
    write_source(radar_env["vault"], "acct", feed_server.add("/acct.xml", rss(items)))
    src = by_id(collect(radar_env, T))["acct"]
    assert (src["itemsParsed"], src["created"], src["outsideWindow"]) == (5, 4, 1)
    found = run_checks(instance, *STREAM_EVIDENCE_CHECKS)
    assert found["accounting"].passed, table(found["accounting"])

    with Store.of(Settings.from_env().paths).transaction() as con:
        con.execute("UPDATE check_accounting SET created = created - 1 WHERE source_id = 'acct'")
    evaluation = run_checks(instance, ACCOUNTING.key)["accounting"]
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    text = table(evaluation)
    assert "**accounting**: 1 check whose items do not add up: acct" in text
    row = next(line for line in text.splitlines() if "| acct |" in line)
    assert "| 5 | 4 | 5 |" in row  # parsed 5, outcomes now 4, observations 5

    # A lost observation row is caught too, although the counts add up.
    with Store.of(Settings.from_env().paths).transaction() as con:
        con.execute("UPDATE check_accounting SET created = created + 1 WHERE source_id = 'acct'")
        con.execute("DELETE FROM item_observations WHERE outcome = 'outside-window'")
    audit = run_audit("accounting", Settings.from_env().paths, T)
    assert [f.cells[3:] for f in audit.findings] == [("5", "5", "4")]


# -- possible gaps ---------------------------------------------------------------------------------


def test_scrolled_past_feed_is_a_possible_gap_and_an_overlapping_one_is_not(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]

    def serve(sid: str, numbers: range, now: datetime) -> str:
        posts = [item(sid, n, now - timedelta(minutes=n)) for n in reversed(numbers)]
        return feed_server.add(f"/{sid}.xml", rss(posts))

    write_source(vault, "scroll", serve("scroll", range(1, 11), T))
    write_source(vault, "overlap", serve("overlap", range(1, 11), T))
    first = by_id(collect(radar_env, T))
    assert [first[s]["possibleGap"] for s in ("scroll", "overlap")] == [False, False]

    later = T + timedelta(hours=6)
    serve("scroll", range(11, 21), later)  # ten new items: the ten before scrolled out
    serve("overlap", range(6, 16), later)
    report = collect(radar_env, later)
    second = by_id(report)
    assert (second["scroll"]["possibleGap"], second["scroll"]["created"]) == (True, 10)
    assert (second["overlap"]["possibleGap"], second["overlap"]["created"]) == (False, 5)
    with Store.of(Settings.from_env().paths).transaction() as con:
        rows = con.execute(
            "SELECT source_id, possible_gap FROM check_accounting WHERE as_of = $1 "
            "ORDER BY source_id",
            [later],
        ).fetchall()
    assert rows == [("overlap", False), ("scroll", True)]

    evaluation = run_checks(instance, POSSIBLE_GAPS.key)["possible_gaps"]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    text = table(evaluation)
    assert "| scroll |" in text and "shorten its cadence" in text and "| overlap |" not in text
    evidence = radar_report()
    assert [g["source"] for g in evidence["possibleGaps"]] == ["scroll"]
    assert evidence["checks"]["possible_gaps"]["findings"] == 1
    assert "possible gap: scroll" in radar_report_text()


# -- silent Sources --------------------------------------------------------------------------------


def test_quiet_source_is_silent_only_after_three_times_its_rhythm(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    daily = [item("quiet", n, T - timedelta(days=n)) for n in range(6)]  # 5 intervals of 1 d
    write_source(vault, "quiet", feed_server.add("/quiet.xml", rss(daily)))
    young = [item("young", n, T - timedelta(days=n)) for n in range(4)]  # 3 intervals: unknown
    write_source(vault, "young", feed_server.add("/young.xml", rss(young)))

    collect(radar_env, T + timedelta(hours=1))
    assert radar_report()["silentSources"] == []
    collect(radar_env, T + timedelta(days=2, hours=23))  # quiet 2.96 rhythms: not yet
    assert radar_report()["silentSources"] == []
    assert run_checks(instance, SILENT_SOURCES.key)["silent_sources"].passed

    collect(radar_env, T + timedelta(days=3, hours=1))  # 3.04 rhythms, checks still passing
    evidence = radar_report()
    assert evidence["silentSources"] == ["quiet"]
    assert evidence["checks"]["silent_sources"]["findings"] == 1
    evaluation = run_checks(instance, SILENT_SOURCES.key)["silent_sources"]
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.WARN
    assert "| quiet |" in table(evaluation) and "| young |" not in table(evaluation)

    # It publishes again: no longer silent.
    feed_server.add("/quiet.xml", rss([item("quiet", 9, T + timedelta(days=3)), *daily]))
    collect(radar_env, T + timedelta(days=3, hours=7))
    assert radar_report()["silentSources"] == []
