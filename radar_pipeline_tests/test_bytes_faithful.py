"""What a Signal says is what the bytes said (docs/architecture.md, "Faithful to the bytes").

One minimal feed per case (radar_pipeline_tests/corpus/bytes/), served by the loopback server
from a deep directory and collected by the Collector's stages in this process (the path every
collection step runs; what a `radar collect` adds around it is tested elsewhere). Each case is
run twice: on a fresh vault (what the Signal says now), and on a vault collected first by the
code before this rule (the commit `OLD_CODE`, taken from git and run as a real `radar collect`
process on the same server), to prove that the new code creates no Signal for an item that
vault already holds.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.identity.keys import distinguishing_fragment
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.conftest import (
    CORPUS,
    REPO_ROOT,
    collect_stages,
    new_collection_id,
    store_rows,
)
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import signal_files, write_source

CORPUS_BYTES = CORPUS / "bytes"
# main before ids, links, fragments and dates were read as the bytes wrote them: the code that
# collected the vaults this rule must not split.
OLD_CODE = "384f6781acfb827713cb07f61ce6f07e2aef027e"
OLD_CODE_PATHS = ("radar_pipeline", "dagster.yaml", "workspace.yaml")  # what `radar` reads
RSS = "application/rss+xml; charset=utf-8"
ATOM = "application/atom+xml; charset=utf-8"
NOV = "2026-11-30T12:00:00Z"
DEC = "2023-12-16T15:00:00Z"


@dataclass(frozen=True)
class Case:
    file: str
    content_type: str
    as_of: str
    path: str  # served from a deep directory: no id may come out depending on it


CASES = {
    "opaque-id": Case("opaque-id.xml", ATOM, NOV, "/feeds/r/programming/deep/.rss"),
    "permalink-not-url": Case("permalink-not-url.xml", RSS, NOV, "/blog/feeds/2026/rss.xml"),
    "guid-no-link": Case("guid-no-link.xml", RSS, NOV, "/blog/feeds/items/rss.xml"),
    "fragment-guids": Case("fragment-guids.xml", RSS, NOV, "/scripting/rss.xml"),
    "dates": Case("dates.xml", RSS, DEC, "/dates/feed/"),
    "link-uri-attribute": Case("link-uri-attribute.xml", RSS, NOV, "/profile/rss"),
    "jsonfeed-at-rss-url": Case(
        "jsonfeed-at-rss-url.json", "application/feed+json", NOV, "/feed.xml"
    ),
}


def serve(server: FeedServer, name: str, revision: int = 0) -> str:
    """Serve the case's feed; each `revision` adds a trailing newline (valid XML and JSON), so
    a later check parses the same items again instead of ending on an unchanged body."""
    case = CASES[name]
    body = (CORPUS_BYTES / case.file).read_bytes() + b"\n" * revision
    return server.add(case.path, body, headers={"Content-Type": case.content_type})


def radar(
    env: dict[str, Path], *args: str, code: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`radar ARGS` in its own process; `code`: a source tree to run instead of this one."""
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
        "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1,localhost",
    }
    if code is not None:
        environ["PYTHONPATH"] = str(code)
    return subprocess.run(
        [sys.executable, "-m", "radar_pipeline.cli", *args],
        capture_output=True,
        text=True,
        env=environ,
        cwd=str(code or REPO_ROOT),
        timeout=240,
    )


def collect(
    env: dict[str, Path], name: str, code: Path | None = None, hours_later: int = 0
) -> dict[str, Any]:
    """One explicit check of Source `name`, `hours_later` after its case's clock: by this
    code's stages in this process, or by `radar collect` of the source tree `code`."""
    as_of = parse_utc(CASES[name].as_of) + timedelta(hours=hours_later)
    if code is None:
        spec = CollectionSpec(new_collection_id(), "explicit", as_of, (name,))
        with Collector(Settings.from_env()) as collector:
            report = collect_stages(collector, spec).json_object()
    else:
        args = ("collect", "--source", name, "--as-of", format_utc(as_of), "--json")
        proc = radar(env, *args, code=code)
        assert proc.returncode in (0, 2), proc.stdout + proc.stderr
        report = json.loads(proc.stdout)
    [source] = report["sources"]
    return source  # type: ignore[no-any-return]


def signals(env: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """File name -> frontmatter of every Signal in the vault."""
    return {p.name: read_signal_frontmatter(p) for p in signal_files(env["vault"])}


def by_item_id(env: dict[str, Path]) -> dict[str, dict[str, Any]]:
    return {str(fm["sourceItemId"]): fm for fm in signals(env).values()}


@pytest.fixture(scope="module")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The package as it was at OLD_CODE, from this repository's history (no worktree is
    added: `git archive` only reads the object store)."""
    known = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{OLD_CODE}^{{commit}}"],
        capture_output=True,
    )
    if known.returncode != 0:
        pytest.skip(f"this checkout's history lacks {OLD_CODE[:12]} (a shallow clone)")
    tree = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", OLD_CODE, *OLD_CODE_PATHS],
        capture_output=True,
        check=True,
    ).stdout
    target = tmp_path_factory.mktemp("old-code")
    with tarfile.open(fileobj=io.BytesIO(tree)) as archive:
        archive.extractall(target, filter="data")
    yield target


# What each case's Signals say now: one check on a fresh vault.
Expect = Callable[[dict[str, Any], dict[str, Path], str], None]


def _opaque_id(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    [fm] = signals(env).values()
    assert fm["sourceItemId"] == "t3_glvkc5"  # before: http://127.0.0.1:<port>/feeds/.../t3_glvkc5
    assert fm["canonicalUrl"] == "https://www.reddit.example/r/programming/comments/glvkc5/opaque/"


def _permalink_not_url(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    [fm] = signals(env).values()
    assert fm["sourceItemId"] == "7bd204c6-1655-4c27-aeee-53f933c5395f"
    assert fm["canonicalUrl"] == "https://blog.example/posts/uuid-guid"


def _guid_no_link(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    assert (report["created"], report["rejected"]) == (1, 1), report
    [fm] = signals(env).values()
    assert fm["sourceItemId"] == "def456"
    rows = store_rows(
        "SELECT source_item_id, reason FROM item_observations WHERE outcome = $1", ["rejected"]
    )
    assert rows == [("abc123", "no-link: no http(s) link and no absolute http(s) id")]


def _fragment_guids(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    assert (report["created"], report["duplicates"]) == (2, 0), report
    found = by_item_id(env)
    assert set(found) == {
        "http://archive.scripting.example/2026/11/29#When:12:59:01PM",
        "http://archive.scripting.example/2026/11/29#When:6:52:02PM",
    }
    assert {fm["canonicalUrl"] for fm in found.values()} == {
        "https://archive.scripting.example/2026/11/29"
    }


def _dates(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    assert report["created"] == 3, report
    found = by_item_id(env)
    assert found["dates-1"]["observedAt"] == "2023-12-12T23:38:15Z"  # before: empty
    assert found["dates-2"]["observedAt"] == "2023-12-16T14:02:33Z"  # before: 02:02:33Z
    assert found["dates-3"]["observedAt"] is None
    evidence = store_rows(
        "SELECT field, origin, raw_text FROM field_evidence WHERE origin = $1", ["unreadable"]
    )
    assert evidence == [
        ("date", "unreadable", "the third Tuesday after the release (feedparser: none)")
    ]
    assert store_rows("SELECT undated FROM check_accounting WHERE source_id = $1", ["dates"]) == [
        (1,)
    ]


def _link_uri_attribute(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    [fm] = signals(env).values()  # before: rejected, no-link
    assert fm["canonicalUrl"] == "https://example.com/item"
    assert fm["sourceItemId"] == "at://did:plc:4xn2yaz7/app.bsky.feed.post/3kf5gfwuewk2b"


def _jsonfeed(report: dict[str, Any], env: dict[str, Path], url: str) -> None:
    assert (report["outcome"], report["created"]) == ("passed", 2), report  # before: not-a-feed
    assert set(by_item_id(env)) == {"json-1", "json-2"}


EXPECT: dict[str, Expect] = {
    "opaque-id": _opaque_id,
    "permalink-not-url": _permalink_not_url,
    "guid-no-link": _guid_no_link,
    "fragment-guids": _fragment_guids,
    "dates": _dates,
    "link-uri-attribute": _link_uri_attribute,
    "jsonfeed-at-rss-url": _jsonfeed,
}


def item_key(fm: dict[str, Any]) -> tuple[str, str, str]:
    """What makes a Signal's item that item, whichever rule gave its id: its Source, its page
    and the fragment that tells it apart on that page."""
    fragment = distinguishing_fragment(str(fm.get("itemUrl") or ""), str(fm["sourceItemId"]))
    return str(fm["sourceId"]), str(fm["canonicalUrl"]), fragment


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_signal_says_what_the_bytes_said(
    radar_env: dict[str, Path], feed_server: FeedServer, name: str
) -> None:
    url = serve(feed_server, name)
    write_source(radar_env["vault"], name, url, cadence="manual")
    report = collect(radar_env, name)
    assert report["outcome"] == "passed", report
    EXPECT[name](report, radar_env, url)
    serve(feed_server, name, revision=1)
    again = collect(radar_env, name, hours_later=1)
    assert again["created"] == 0 and again["reused"] == report["created"], again


@pytest.mark.slow
def test_identity_does_not_depend_on_the_feed_path(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    body = (CORPUS_BYTES / "opaque-id.xml").read_bytes()
    first = feed_server.add("/a/feed.xml", body, headers={"Content-Type": ATOM})
    write_source(radar_env["vault"], "opaque-id", first, cadence="manual")
    assert collect(radar_env, "opaque-id")["created"] == 1
    moved = feed_server.add(
        "/somewhere/else/entirely/feed.xml", body + b"\n", headers={"Content-Type": ATOM}
    )
    write_source(radar_env["vault"], "opaque-id", moved, cadence="manual")
    report = collect(radar_env, "opaque-id", hours_later=1)
    assert (report["created"], report["reused"]) == (0, 1), report
    assert len(signal_files(radar_env["vault"])) == 1


# A vault collected by the code before, then by this code: what the second check does.
# (created, reused, rejected, duplicates) of the new code's first check, and which of the old
# vault's Signals it keeps (all of them, always: no file is ever rewritten or removed).
AFTER_OLD = {
    "opaque-id": (0, 1, 0, 0),
    "permalink-not-url": (0, 1, 0, 0),
    # The old code made a Signal of the guid-only item (an invented link); the new code
    # rejects the item and leaves that Signal as it is.
    "guid-no-link": (0, 1, 1, 0),
    # The old code merged the second item into the first (a duplicate): it was never in the
    # vault, and now gets its own Signal; the first keeps its own.
    "fragment-guids": (1, 1, 0, 0),
    "dates": (0, 3, 0, 0),
    # The old code rejected the item (its link was the at:// attribute): a new Signal.
    "link-uri-attribute": (1, 0, 0, 0),
    # The old code failed the check (not-a-feed): nothing was held.
    "jsonfeed-at-rss-url": (2, 0, 0, 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_vault_collected_before_keeps_its_signals(
    radar_env: dict[str, Path], feed_server: FeedServer, old_code: Path, name: str
) -> None:
    url = serve(feed_server, name)
    write_source(radar_env["vault"], name, url, cadence="manual")
    collect(radar_env, name, code=old_code)
    before = signals(radar_env)
    serve(feed_server, name, revision=1)
    report = collect(radar_env, name, hours_later=1)
    counts = (report["created"], report["reused"], report["rejected"], report["duplicates"])
    assert counts == AFTER_OLD[name], report
    assert report["possibleGap"] is False, report  # its items are the check before's
    after = signals(radar_env)
    assert {k: after[k] for k in before} == before  # every old Signal kept, unchanged
    held = {item_key(fm) for fm in before.values()}
    for created in set(after) - set(before):
        assert item_key(after[created]) not in held, after[created]
    # The index can be rebuilt from that vault and the next check still finds every Signal.
    rebuilt = radar(radar_env, "index", "rebuild", "--json")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    serve(feed_server, name, revision=2)
    third = collect(radar_env, name, hours_later=2)
    assert third["created"] == 0, third
    assert set(signals(radar_env)) == set(after)
