"""`radar sources try` (docs/operations.md, "Trying a Source"): one fetch and every decision a
check would take, with its evidence, and nothing written anywhere: every vault file and the
DuckDB file hash the same before and after, and the Dagster instance holds the same runs."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg

from radar_pipeline_tests.conftest import CORPUS
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import signal_files, source_text, write_source

RADAR = str(Path(sys.executable).parent / "radar")
AS_OF = "2026-11-30T12:00:00Z"
LATER = "2026-11-30T18:00:00Z"
# Dated inside the period the second check covers (coverageFrom: the first check - 1 h), so a
# content change of it is an update, not only a reuse.
LATE = "Mon, 30 Nov 2026 11:30:00 GMT"
HTML_TYPE = {"Content-Type": "text/html; charset=utf-8"}


def _item(n: int, title: str, summary: str, date: str = "Mon, 30 Nov 2026 08:00:00 GMT") -> str:
    return (
        f"<item><title>{title}</title><link>https://example.com/p/{n}</link>"
        f"<guid>https://example.com/p/{n}</guid><description>{summary}</description>"
        f"<pubDate>{date}</pubDate></item>"
    )


def _rss(*items: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>t</title>'
        "<link>https://example.com/</link><description>t</description>"
        + "".join(items)
        + "</channel></rss>"
    ).encode()


def _radar(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RADAR, *args], capture_output=True, text=True, env=dict(os.environ), timeout=240
    )


def _hashes(*roots: Path) -> dict[str, str]:
    """sha256 of every file under the roots (and of each root that is a file), by path; every
    folder too, so a folder created empty (a lock folder, a Signals folder) shows."""
    found: dict[str, str] = {}
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in paths:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
            found[str(path)] = digest
    return found


def _runs(home: Path) -> list[str]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return sorted(r.run_id for r in instance.get_runs())


def _by_decision(payload: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for item in payload["items"]:
        found.setdefault(item["decision"], []).append(item)
    return found


def test_try_shows_every_decision_of_a_check_and_writes_nothing(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault, db, home = radar_env["vault"], radar_env["db"], radar_env["home"]
    feed_server.add(
        "/feed.xml",
        _rss(_item(0, "Release 1", "first words"), _item(1, "Release 2", "second words", LATE)),
    )
    write_source(
        vault, "tried", feed_server.url("/feed.xml"), exclude="[sponsored]", minIntervalSeconds=0
    )
    first = _radar("collect", "--all", "--json", "--as-of", AS_OF)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["created"] == 2
    # The feed moves on: one item changed, a new one, a sponsored one, an old one, a broken one.
    feed_server.add(
        "/feed.xml",
        _rss(
            _item(0, "Release 1", "first words"),
            _item(1, "Release 2", "second words, corrected later", LATE),
            _item(2, "Release 3", "third words"),
            _item(3, "Sponsored: a deal", "ads"),
            _item(4, "Old news", "old", date="Mon, 02 Nov 2026 08:00:00 GMT"),
            "<item><title>No link at all</title><description>x</description></item>",
        ),
    )
    before = _hashes(vault, db)
    runs = _runs(home)
    requests = len(feed_server.requests_for("/feed.xml"))

    proc = _radar("sources", "try", "tried", "--json", "--as-of", LATER)

    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert (payload["id"], payload["outcome"], payload["httpStatus"]) == ("tried", "passed", 200)
    assert payload["itemsParsed"] == 6 == len(payload["items"])
    decided = _by_decision(payload)
    assert {k: len(v) for k, v in decided.items()} == {
        "reuse": 1,
        "update": 1,
        "create": 1,
        "filtered": 1,
        "outsideWindow": 1,
        "reject": 1,
    }
    assert decided["create"][0]["title"] == "Release 3"
    assert decided["create"][0]["canonicalUrl"] == "https://example.com/p/2"
    assert decided["create"][0]["observedAt"] == "2026-11-30T08:00:00Z"
    assert decided["filtered"][0]["reason"] == "exclude: sponsored"
    assert decided["update"][0]["reason"].startswith("known, content changed")
    assert decided["reject"][0]["reason"].startswith("unidentifiable")
    evidence = {e["field"]: e["expression"] for e in decided["create"][0]["evidence"]}
    assert evidence["date"] == "published" and evidence["title"] == "title"
    accounting = payload["accounting"]
    assert (
        accounting["itemsParsed"]
        == sum(
            accounting[k]
            for k in ("created", "reused", "updated", "duplicates", "rejected", "deferred")
        )
        + accounting["outsideWindow"]
        + accounting["filtered"]
    )

    assert len(feed_server.requests_for("/feed.xml")) == requests + 1  # one fetch
    assert _hashes(vault, db) == before  # no Signal, no Temporary Content, no health keys, no row
    assert _runs(home) == runs  # no Dagster run
    text = _radar("sources", "try", "tried", "--as-of", LATER)
    assert text.returncode == 0 and "dry run: nothing was written" in text.stdout
    assert _hashes(vault, db) == before


def test_try_a_file_not_yet_registered_shows_which_selector_produced_each_field(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault, db = radar_env["vault"], radar_env["db"]
    url = feed_server.add(
        "/changelog", (CORPUS / "pages" / "changelog.html").read_bytes(), headers=HTML_TYPE
    )
    draft = radar_env["root"] / "draft.md"
    draft.write_text(
        source_text(
            "acme-changelog",
            url,
            legalAssessment="pending",
            collectionMethod="html",
            itemSelector="article.changelog-entry",
            titleSelector="h2.entry-title",
            linkSelector="h2.entry-title",
            dateSelector=".entry-date",
        ),
        encoding="utf-8",
    )
    before = _hashes(vault)

    proc = _radar("sources", "try", str(draft), "--json", "--as-of", AS_OF)

    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    assert payload["id"] == "acme-changelog" and payload["itemsParsed"] >= 1
    item = payload["items"][0]
    assert item["decision"] in ("create", "outsideWindow")
    by_field = {e["field"]: e for e in item["evidence"]}
    assert by_field["title"]["expression"] == "h2.entry-title"
    assert by_field["link"]["expression"] == "h2.entry-title"
    assert by_field["link"]["origin"] == "a[href]"  # the first `a` inside the heading
    assert not db.exists()  # no DuckDB file was created
    assert _hashes(vault) == before and signal_files(vault) == []
    assert _runs(radar_env["home"]) == []


def test_try_an_unknown_id_or_a_broken_file_is_one_line_and_exit_1(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    proc = _radar("sources", "try", "no-such-source")
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.strip().splitlines()
    assert "no valid Source with id 'no-such-source'" in line

    broken = radar_env["root"] / "broken.md"
    broken.write_text(source_text("broken", "ftp://example.com/feed"), encoding="utf-8")
    proc = _radar("sources", "try", str(broken))
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert "is not a valid Source" in line and "invalid-url" in line

    rejected = radar_env["root"] / "rejected.md"
    url = feed_server.add("/feed.xml", _rss(_item(0, "x", "y")))
    rejected.write_text(source_text("nope", url, legalAssessment="rejected"), encoding="utf-8")
    proc = _radar("sources", "try", str(rejected))
    assert proc.returncode == 1 and "legalAssessment: rejected" in proc.stderr
    assert feed_server.requests == []


def test_try_a_failing_fetch_is_exit_1_with_its_error(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url = feed_server.add("/gone.xml", b"", status=404)
    write_source(radar_env["vault"], "gone", url)
    proc = _radar("sources", "try", "gone", "--json")
    assert proc.returncode == 1
    payload = json.loads(proc.stdout)
    assert (payload["outcome"], payload["httpStatus"], payload["items"]) == ("failed", 404, [])
    assert "gone" in payload["error"]
    assert not radar_env["db"].exists()
