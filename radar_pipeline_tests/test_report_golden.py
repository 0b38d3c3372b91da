"""The collection report's JSON, byte for byte, on a fixed scenario over the real corpus.

`radar collect --json` (twice), `radar report --json`'s `lastCollection` and the report each
collection stored in DuckDB are compared with `golden/collect_report.txt`, recorded from the
command before the report became typed: whatever builds the report, its contract JSON (keys,
their order, values, the indentation the CLI prints) stays as it is. Set
`RADAR_UPDATE_GOLDEN=1` to record it again, and read the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from radar_pipeline_tests.conftest import CORPUS_REAL, store_rows
from radar_pipeline_tests.feedserver import FeedServer, conditional
from radar_pipeline_tests.vaultkit import rss, write_fixture_source, write_source

RADAR = str(Path(sys.executable).parent / "radar")
GOLDEN = Path(__file__).resolve().parent / "golden" / "collect_report.txt"
FIRST_AS_OF = "2024-07-31T12:00:00Z"
SECOND_AS_OF = "2024-07-31T12:00:30Z"  # inside the least backoff (1 minute)


def radar(*args: str, env: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
    }
    return subprocess.run([RADAR, *args], capture_output=True, text=True, env=environ, timeout=180)


def normalised(text: str, run_ids: dict[str, str]) -> str:
    """What varies between runs of the same scenario, replaced by stable stand-ins: the loopback
    server's port, fetch durations (wall-clock), the Dagster run ids and launch ids (random
    uuids, numbered in order of first appearance across the whole golden document)."""
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    text = re.sub(r'"durationMs": [0-9.]+', '"durationMs": 0.0', text)

    def run_id(match: re.Match[str]) -> str:
        return run_ids.setdefault(match.group(0), f"<id-{len(run_ids) + 1}>")

    return re.sub(
        r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b", run_id, text
    )


def build_scenario(vault: Path, server: FeedServer) -> None:
    """Sources that between them reach every outcome the report counts."""
    rust = (CORPUS_REAL / "rust-blog-1.xml").read_bytes()
    # Passed, then not-modified: the second check sends the validators back and gets a 304.
    server.add("/rust.xml", handler=conditional(rust, '"rust-1"', "Mon, 29 Jul 2024 15:38:27 GMT"))
    write_source(vault, "rust-blog", server.url("/rust.xml"))
    # Passed, every item older than the recovery cap (outsideWindow).
    server.add("/go.xml", (CORPUS_REAL / "go-blog-1.xml").read_bytes())
    write_source(vault, "go-blog", server.url("/go.xml"))
    # The same feed under another Source (its items are Signals of their own Source).
    server.add("/rust-mirror.xml", rust)
    write_source(vault, "rust-mirror", server.url("/rust-mirror.xml"))
    # Failed, then skipped (in backoff) on the second collection; its id sorts between
    # others, so that collection runs as two blocks of partitions and its report is a merge.
    server.add("/broken.xml", b"upstream down", status=500, headers={"Content-Type": "text/plain"})
    write_source(vault, "down", server.url("/broken.xml"))
    # More eligible items than one check takes (deferred), one item without a link or id
    # (rejected), one seen twice (duplicates); the deferred ones are taken by the next check,
    # dated before its coverage (late).
    items = [
        {
            "title": f"Item {n}",
            "guid": f"bulk-{n}",
            "link": f"https://bulk.example/{n}",
            "pubDate": f"Tue, 30 Jul 2024 {n // 60:02d}:{n % 60:02d}:00 GMT",
        }
        for n in range(55)
    ]
    items.append({"description": "no title, no link, no guid"})
    # The same link as the first item under another guid: a duplicate.
    items.append(
        {
            "title": "Item 0",
            "guid": "bulk-0-again",
            "link": "https://bulk.example/0",
            "pubDate": "Tue, 30 Jul 2024 00:00:00 GMT",
        }
    )
    server.add("/bulk.xml", rss(items, title="Bulk"))
    write_source(vault, "bulk", server.url("/bulk.xml"))
    # A fixture Source (the fixture scope).
    write_fixture_source(
        vault,
        "fixture",
        rss(
            [
                {
                    "title": "f",
                    "guid": "f1",
                    "link": "https://fixture.example/1",
                    "pubDate": "Tue, 30 Jul 2024 10:00:00 GMT",
                }
            ]
        ),
    )


def stored_reports() -> list[str]:
    rows = store_rows("SELECT report_json FROM collections ORDER BY finished_at")
    return [str(row[0]) for row in rows]


@pytest.mark.slow
def test_collect_report_json_matches_the_golden_file(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    build_scenario(radar_env["vault"], feed_server)
    first = radar("collect", "--all", "--as-of", FIRST_AS_OF, "--json", env=radar_env)
    assert first.returncode == 2, first.stderr  # down failed
    second = radar("collect", "--all", "--as-of", SECOND_AS_OF, "--json", env=radar_env)
    assert second.returncode == 0, second.stderr  # down is skipped (backoff), not failed
    report = radar("report", "--json", env=radar_env)
    assert report.returncode == 0, report.stderr
    last = json.dumps(json.loads(report.stdout)["lastCollection"], indent=2)

    run_ids: dict[str, str] = {}
    parts = [
        ("collect 1", first.stdout.rstrip("\n")),
        ("collect 2", second.stdout.rstrip("\n")),
        ("report lastCollection", last),
        *((f"stored report {n}", text) for n, text in enumerate(stored_reports(), 1)),
    ]
    document = "".join(f"== {name}\n{normalised(text, run_ids)}\n" for name, text in parts)
    if os.environ.get("RADAR_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(document, encoding="utf-8")
    assert document == GOLDEN.read_text(encoding="utf-8")
