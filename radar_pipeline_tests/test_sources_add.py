"""`radar sources add URL` (docs/operations.md, "Adding a Source"): discovery through the real
`radar` command against the loopback server: a feed URL, a site page advertising feeds, a
WordPress site, the common paths; a private address refused, nothing found, offline, and a URL
already registered, each exit 1 with one line and no file written."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.registry.discovery import MAX_CANDIDATE_FETCHES, feed_kind
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline_tests.conftest import CORPUS
from radar_pipeline_tests.feedserver import FeedServer, redirect_to
from radar_pipeline_tests.vaultkit import rss, write_source

RADAR = str(Path(sys.executable).parent / "radar")
HTML = {"Content-Type": "text/html; charset=utf-8"}
JSON = {"Content-Type": "application/json; charset=UTF-8"}
ATOM = {"Content-Type": "application/atom+xml"}
FEED = rss(
    [
        {"title": "One", "link": "https://example.com/1", "guid": "1"},
        {"title": "Two", "link": "https://example.com/2", "guid": "2"},
    ],
    title="Example Engineering",
)
ATOM_FEED = (
    b'<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
    b"<title>Example Atom</title><id>urn:x</id><updated>2026-11-30T00:00:00Z</updated>"
    b'<entry><title>A</title><id>urn:a</id><link href="https://example.com/a"/>'
    b"<updated>2026-11-30T00:00:00Z</updated></entry></feed>"
)


def _page(head: str, body: str = "<p>hello</p>") -> bytes:
    head = f"<head><title>Example Site</title>{head}</head>"
    return f"<!doctype html><html>{head}<body>{body}</body></html>".encode()


def _radar(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RADAR, *args],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        timeout=120,
    )


def _added(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr
    payload: dict[str, Any] = json.loads(proc.stdout)
    return payload


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("radar: sources add: ")
    return line


def _source_files(vault: Path) -> list[str]:
    return sorted(p.name for p in (vault / SOURCES_DIR).glob("*.md"))


def test_a_feed_url_becomes_one_pending_source(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url = feed_server.add("/feed.xml", FEED)

    payload = _added(_radar("sources", "add", url, "--json"))

    assert payload["candidates"] == [
        {"url": url, "kind": "rss", "title": "Example Engineering", "items": 2}
    ]
    assert payload["added"] == {
        "id": "example-engineering",
        "path": "Radar/Sources/example-engineering.md",
        "url": url,
        "kind": "rss",
    }
    [record] = load_registry(vault).sources
    assert (record.source.id, record.source.url) == ("example-engineering", url)
    assert record.source.legal_assessment == "pending" and not record.source.is_eligible
    # The same URL again: already registered, exit 1, nothing written.
    again = _radar("sources", "add", url, "--json")
    assert "already registered as example-engineering" in _one_error_line(again)
    assert _source_files(vault) == ["example-engineering.md"]


def test_a_site_page_lists_every_advertised_feed_and_adds_the_first(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    feed_server.add("/blog/rss.xml", FEED)
    feed_server.add("/blog/atom", ATOM_FEED, headers=ATOM)
    feed_server.add(
        "/blog/feed.json",
        (CORPUS / "pages" / "jsonfeed.json").read_bytes(),
        headers={"Content-Type": "application/feed+json"},
    )
    # The page answers after a redirect, as many sites do (followed under the address policy).
    feed_server.add("/", handler=redirect_to("/blog/"))
    feed_server.add(
        "/blog/",
        _page(
            '<link rel="alternate" type="application/rss+xml" href="rss.xml" title="RSS">'
            '<link rel="alternate" type="application/atom+xml" href="/blog/atom">'
            '<link rel="alternate" type="application/feed+json" href="feed.json">'
            '<link rel="stylesheet" href="/style.css">',
            # Links in the body are never read: only the head.
            '<link rel="alternate" type="application/rss+xml" href="/body-feed.xml">',
        ),
        headers=HTML,
    )

    payload = _added(_radar("sources", "add", feed_server.url("/"), "--id", "my-blog", "--json"))

    kinds = [
        (c["url"].removeprefix(feed_server.base_url), c["kind"]) for c in payload["candidates"]
    ]
    assert kinds == [
        ("/blog/rss.xml", "rss"),
        ("/blog/atom", "atom"),
        ("/blog/feed.json", "jsonfeed"),
    ]
    assert [c["title"] for c in payload["candidates"]][:2] == [
        "Example Engineering",
        "Example Atom",
    ]
    assert payload["added"]["id"] == "my-blog" and payload["added"]["kind"] == "rss"
    assert feed_server.requests_for("/body-feed.xml") == []
    assert feed_server.requests_for("/style.css") == []
    assert _source_files(vault) == ["my-blog.md"]
    # --id names an existing file: never overwritten.
    before = (vault / SOURCES_DIR / "my-blog.md").read_bytes()
    feed_server.add("/other.xml", rss([{"title": "x", "link": "https://e.com/x"}], "Other"))
    clash = _radar("sources", "add", feed_server.url("/other.xml"), "--id", "my-blog")
    assert "already exists" in _one_error_line(clash)
    assert (vault / SOURCES_DIR / "my-blog.md").read_bytes() == before


def test_a_wordpress_site_becomes_a_json_source_with_the_wordpress_paths(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    feed_server.add(
        "/wp-json/wp/v2/posts", (CORPUS / "pages" / "wp-posts.json").read_bytes(), headers=JSON
    )
    feed_server.add(
        "/",
        _page(f'<link rel="https://api.w.org/" href="{feed_server.url("/wp-json/")}">'),
        headers=HTML,
    )

    payload = _added(_radar("sources", "add", feed_server.url("/"), "--json"))

    [candidate] = payload["candidates"]
    assert candidate["kind"] == "json" and candidate["title"] == "Example Site"
    assert candidate["url"] == feed_server.url("/wp-json/wp/v2/posts") and candidate["items"] >= 1
    [record] = load_registry(vault).sources
    source = record.source
    assert (source.collection_method, source.items_path, source.title_path) == (
        "json",
        "@",
        "title.rendered",
    )
    # What was written is a Source a dry run can read: its paths find the posts.
    tried = subprocess.run(
        [RADAR, "sources", "try", source.id, "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=120,
    )
    assert tried.returncode == 0, tried.stderr
    assert json.loads(tried.stdout)["itemsParsed"] == candidate["items"]


def test_without_advertised_feeds_the_common_paths_are_probed_a_handful_at_most(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    feed_server.add("/index.xml", FEED)
    feed_server.add("/", _page(""), headers=HTML)

    payload = _added(_radar("sources", "add", feed_server.url("/"), "--json"))

    assert [c["url"] for c in payload["candidates"]] == [feed_server.url("/index.xml")]
    paths = [r.path for r in feed_server.requests]
    assert paths == ["/", "/feed", "/rss.xml", "/atom.xml", "/index.xml"]  # stops at the first


def test_nothing_found_is_one_line_exit_1_and_no_file(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    feed_server.add("/", _page(""), headers=HTML)

    proc = _radar("sources", "add", feed_server.url("/"), "--json")

    assert "no feed found" in _one_error_line(proc)
    assert json.loads(proc.stdout) == {"added": None, "candidates": []}
    assert len(feed_server.requests) <= 1 + MAX_CANDIDATE_FETCHES
    assert _source_files(radar_env["vault"]) == []


def test_a_private_address_is_refused_like_a_fetch(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url = feed_server.add("/feed.xml", FEED)
    env = {k: v for k, v in os.environ.items() if k != "RADAR_ALLOWED_PRIVATE_HOSTS"}

    proc = _radar("sources", "add", url, env=env)

    line = _one_error_line(proc)
    assert "loopback address refused: 127.0.0.1" in line, line
    # ... naming the variable that allows it.
    assert "; to allow it, add 127.0.0.1 to RADAR_ALLOWED_PRIVATE_HOSTS" in line, line
    assert feed_server.requests == []  # refused before any connection
    assert _source_files(radar_env["vault"]) == []


def test_a_page_pointing_discovery_at_a_private_address_gets_nothing_from_it(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    # Only 127.0.0.1 is allowed: the page's link to another loopback name is refused.
    feed_server.add(
        "/",
        _page('<link rel="alternate" type="application/rss+xml" href="http://10.0.0.1/feed">'),
        headers=HTML,
    )
    env = {**os.environ, "RADAR_ALLOWED_PRIVATE_HOSTS": "127.0.0.1"}
    proc = _radar("sources", "add", feed_server.url("/"), env=env)
    assert "no feed found" in _one_error_line(proc)


@pytest.mark.timeout(120)
def test_offline_is_one_line_exit_1(radar_env: dict[str, Path]) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = _radar("sources", "add", f"http://127.0.0.1:{port}/")
    assert "cannot read" in _one_error_line(proc)
    assert _source_files(radar_env["vault"]) == []


def test_an_invalid_url_is_one_line_exit_1(radar_env: dict[str, Path]) -> None:
    assert "not a usable URL" in _one_error_line(_radar("sources", "add", "ftp://example.com/"))


def test_a_feed_already_registered_under_another_url_form_is_exit_1(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url = feed_server.add("/feed.xml", FEED)
    feed_server.add(
        "/",
        _page('<link rel="alternate" type="application/rss+xml" href="/feed.xml">'),
        headers=HTML,
    )
    write_source(radar_env["vault"], "known-feed", url)

    proc = _radar("sources", "add", feed_server.url("/"), "--json")

    assert "already registered as known-feed" in _one_error_line(proc)
    assert json.loads(proc.stdout)["added"] is None
    assert _source_files(radar_env["vault"]) == ["known-feed.md"]


def test_an_id_another_file_declares_is_refused(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """`--id` of a Source declared under another file name: a second declaration would make
    both inactive (a duplicate id), so nothing is written."""
    vault = radar_env["vault"]
    declared = write_source(vault, "team-blog", feed_server.add("/team.xml", FEED))
    declared.rename(declared.with_name("Team blog.md"))
    url = feed_server.add("/new.xml", rss([{"title": "x", "link": "https://e.com/x"}], "New"))

    proc = _radar("sources", "add", url, "--id", "team-blog")

    assert "already exists" in _one_error_line(proc)
    assert _source_files(vault) == ["Team blog.md"]


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        # A namespace prefix that ends in "feed" is no Atom root.
        (
            b'<?xml version="1.0"?><rss version="2.0" '
            b'xmlns:feedburner="http://rssnamespace.org/feedburner/ext/1.0"><channel>'
            b"<title>t</title></channel></rss>",
            "rss",
        ),
        (b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"/>', "atom"),
        (b'<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"/>', "rss"),
        # A JSON Feed behind a UTF-8 byte-order mark.
        (b'\xef\xbb\xbf{"version": "https://jsonfeed.org/version/1.1", "items": []}', "jsonfeed"),
        (b"<html><head></head></html>", None),
    ],
)
def test_a_candidate_kind_is_its_root_element(body: bytes, kind: str | None) -> None:
    assert feed_kind(body) == kind
