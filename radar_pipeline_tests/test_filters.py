"""A Source's `include` / `exclude` rules (docs/architecture.md, invariants 14 and 16): what
the registry accepts, that a `/regex/` cannot hang a check on hostile text, and a dropped item
counted `filtered` with its rule in the report, DuckDB and the partition page, through the
real `radar` command and a real Dagster instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.collect.filtering import filter_parsed
from radar_pipeline.core.config import Settings
from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.parse.json_feed import parse_json_feed
from radar_pipeline.core.registry.filters import ItemFilter, compile_rule
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline_tests.conftest import env_store
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import write_source

RADAR = str(Path(sys.executable).parent / "radar")
AS_OF = "2026-11-30T12:00:00Z"
T = parse_utc(AS_OF)


def _feed(items: list[tuple[str, str, list[str]]]) -> bytes:
    """RSS with (title, description, categories) items, dated inside the window."""
    parts = []
    for n, (title, summary, categories) in enumerate(items):
        cats = "".join(f"<category>{c}</category>" for c in categories)
        parts.append(
            f"<item><title>{title}</title><link>https://example.com/p/{n}</link>"
            f"<guid>https://example.com/p/{n}</guid><description>{summary}</description>{cats}"
            "<pubDate>Mon, 30 Nov 2026 08:00:00 GMT</pubDate></item>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>t</title>'
        "<link>https://example.com/</link><description>t</description>"
        + "".join(parts)
        + "</channel></rss>"
    ).encode()


def _radar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RADAR, *args], capture_output=True, text=True, env=dict(os.environ), timeout=240
    )


# ---- the registry ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ("'/(a)\\1/'", "RE2"),  # a backreference: needs backtracking
        ("'/(?=a)b/'", "RE2"),  # lookahead
        ("''", "empty"),
        ("'//'", "empty"),
        ("'" + "x" * 300 + "'", "longer than"),
        ("{a: 1}", "list"),
    ],
)
def test_an_invalid_rule_is_a_registry_issue_naming_the_file(
    tmp_path: Path, rule: str, reason: str
) -> None:
    write_source(tmp_path, "bad-rules", "https://example.com/feed.xml", exclude=f"[{rule}]")
    if rule.startswith("{"):
        write_source(tmp_path, "bad-rules", "https://example.com/feed.xml", include=rule)
    snapshot = load_registry(tmp_path)
    assert snapshot.sources == ()
    [issue] = snapshot.issues
    assert issue.path == (SOURCES_DIR / "bad-rules.md").as_posix()
    assert issue.code == "invalid-filter" and reason in issue.message


def test_valid_rules_load_and_match_words_phrases_and_regexes(tmp_path: Path) -> None:
    write_source(
        tmp_path,
        "ok-rules",
        "https://example.com/feed.xml",
        include="[AI, 'release notes', 'C++', '/v[0-9]+\\.[0-9]+/']",
        exclude="[sponsored]",
    )
    [record] = load_registry(tmp_path).sources
    rules = record.source.item_filter
    assert rules.verdict(["New AI model"]) is None
    assert rules.verdict(["We maintain things"]) == "include: no rule matched"  # word bounds
    assert rules.verdict(["Release   Notes for May"]) is None  # case and spaces
    assert rules.verdict(["Modern c++ tips"]) is None
    assert rules.verdict(["Ships V2.13 today"]) is None
    assert rules.verdict(["AI, sponsored post"]) == "exclude: sponsored"
    assert rules.verdict(["nothing", "", "tag: ai"]) is None  # any field may match


# A backtracking engine needs about 2^n steps for `(a+)+$` on n a's followed by a mismatch: on
# 100,000 characters it never ends. RE2 runs it in one linear pass, so this test finishes well
# inside its bound (pytest-timeout) on any machine; it asserts no timing of its own.
@pytest.mark.timeout(60)
@pytest.mark.parametrize("pattern", ["/(a+)+$/", "/(a|aa)+$/", "/(x+x+)+y/", "/(.*a){20}/"])
def test_a_catastrophic_regex_runs_in_linear_time_on_hostile_text(pattern: str) -> None:
    rule = compile_rule(pattern)  # the registry's own compile (it runs the hostile probe too)
    hostile = "a" * 100_000 + "!" + "x" * 100_000
    for _ in range(20):
        assert rule.matches(hostile) is (pattern == "/(.*a){20}/")


def test_exclude_wins_over_include() -> None:
    rules = ItemFilter.of(["release"], ["beta"])
    assert rules.verdict(["release 2 beta"]) == "exclude: beta"
    assert rules.verdict(["release 2"]) is None
    assert not ItemFilter.of([], []).active


# ---- a collection, end to end -------------------------------------------------------------


def test_filtered_items_are_counted_with_their_rule_everywhere(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url = feed_server.add(
        "/feed.xml",
        _feed(
            [
                ("Release 1.0", "the first release", []),
                ("Sponsored: buy things", "a release of ads", []),
                ("Team offsite", "photos", []),
                ("Quiet post", "nothing to see", ["Releases"]),
                ("Another", "release candidate", ["sponsored"]),
            ]
        ),
    )
    write_source(
        vault, "filtered-feed", url, include="[release, releases]", exclude="['/^sponsor/']"
    )

    proc = _radar("collect", "--all", "--json", "--as-of", AS_OF)

    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    [src] = report["sources"]
    # Kept: "Release 1.0", "Quiet post" (its category). Dropped: "Team offsite" (no include
    # rule), "Sponsored: ..." (title) and "Another" (category), both by the exclude rule.
    assert (src["itemsParsed"], src["created"], src["filtered"]) == (5, 2, 3)
    assert report["filtered"] == 3
    outcomes = ("created", "reused", "updated", "duplicates", "rejected", "deferred")
    accounted = sum(src[k] for k in (*outcomes, "outsideWindow", "filtered"))
    assert src["itemsParsed"] == accounted
    # The same body again is not parsed (unchanged): the plain report still names the count.
    again = _radar("collect", "--all", "--as-of", AS_OF).stdout
    assert "items 0:" in again and "filtered 0" in again

    with env_store().transaction() as con:
        rows = con.execute(
            "SELECT source_item_id, reason FROM item_observations "
            "WHERE outcome = 'filtered' AND collection_id = $1 ORDER BY source_item_id",
            [report["collectionId"]],
        ).fetchall()
        [(filtered,)] = con.execute(
            "SELECT filtered FROM check_accounting WHERE collection_id = $1",
            [report["collectionId"]],
        ).fetchall()
    assert rows == [
        ("https://example.com/p/1", "exclude: /^sponsor/"),
        ("https://example.com/p/2", "include: no rule matched"),
        ("https://example.com/p/4", "exclude: /^sponsor/"),
    ]
    assert filtered == 3
    audit = run_audit("accounting", Settings.from_env().paths, parse_utc(AS_OF))
    assert audit.findings == () and audit.figures["checks"] == 2

    with dg.DagsterInstance.from_config(str(radar_env["home"])) as instance:
        records = instance.fetch_materializations(dg.AssetKey("signals"), limit=5).records
    first = records[-1].asset_materialization
    assert first is not None and first.partition == "filtered-feed"
    meta: dict[str, Any] = {k: v.value for k, v in first.metadata.items()}
    assert (meta["filtered"], meta["items_parsed"], meta["created"]) == (3, 5, 2)


def test_json_feed_tags_are_categories_the_rules_read() -> None:
    body = json.dumps(
        {
            "version": "https://jsonfeed.org/version/1.1",
            "title": "t",
            "items": [
                {"id": "1", "url": "https://example.com/1", "title": "One", "tags": ["Security"]},
                {"id": "2", "url": "https://example.com/2", "title": "Two", "tags": "Security"},
            ],
        }
    ).encode()
    parsed = parse_json_feed("jf", body, base_url="https://example.com/", now=T, window_from=None)
    kept = filter_parsed(parsed, ItemFilter.of(["security"], []))
    assert [c.title for c in kept.candidates] == ["One"]
    # A `tags` that is not a list is no category (and no string split into letters).
    assert [(f.candidate.title, f.rule) for f in kept.filtered] == [
        ("Two", "include: no rule matched")
    ]
