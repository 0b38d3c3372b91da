"""OPML in and out of the registry through real `radar` processes: a feed reader's
export becomes pending Source notes that are never fetched, and export lists every Source."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline_tests.evidencekit import radar_process
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

# Miniflux/FreshRSS-style: folders as parent outlines (text only), feeds with type, text, title,
# xmlUrl and htmlUrl; NetNewsWire-style: a feed at the top level and a `category` attribute.
OPML = """<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0">
  <head><title>Miniflux</title><dateCreated>Mon, 30 Nov 2026 10:00:00 GMT</dateCreated></head>
  <body>
    <outline text="Engineering">
      <outline title="Rust Blog" text="Rust Blog" xmlUrl="{rust}"
               htmlUrl="https://blog.rust-lang.org/" type="rss"/>
      <outline text="Web Platform">
        <outline text="Chrome Developers" xmlUrl="{chrome}" type="atom"/>
      </outline>
      <outline title="Already here" text="Already here" xmlUrl="{known}" type="rss"/>
    </outline>
    <outline text="News">
      <outline title="Rust Blog again" text="Rust Blog again" xmlUrl="{rust_again}" type="rss"/>
      <outline title="Broken" text="Broken" xmlUrl="not a url" type="rss"/>
      <outline title="FTP" text="FTP" xmlUrl="ftp://example.com/feed" type="rss"/>
      <outline title="No URL" text="No URL" xmlUrl="" type="rss"/>
    </outline>
    <outline text="Hacker News: Front Page" title="Hacker News: Front Page" type="rss"
             xmlUrl="{hn}" category="/Tech/News"/>
  </body>
</opml>
"""


def _opml(server: FeedServer, known: str) -> str:
    urls = {
        name: server.add(
            f"/{name}.xml", rss([{"title": "t", "guid": "1", "link": f"https://x/{name}"}])
        )
        for name in ("rust", "chrome", "hn")
    }
    return OPML.format(
        rust=urls["rust"],
        rust_again=urls["rust"].replace("http://127.0.0.1", "HTTP://127.0.0.1"),
        chrome=urls["chrome"],
        hn=urls["hn"],
        known=known,
    )


def test_import_makes_pending_sources_that_are_not_fetched_and_export_lists_them(
    radar_env: dict[str, Path], feed_server: FeedServer, tmp_path: Path
) -> None:
    vault = radar_env["vault"]
    known = feed_server.add("/known.xml", rss([]))
    write_source(vault, "known-feed", known)
    (vault / "Radar/Sources/rust-blog.md").write_text("a person's note\n", encoding="utf-8")
    opml = tmp_path / "feeds.opml"
    opml.write_text(_opml(feed_server, known), encoding="utf-8")

    proc = radar_process("sources", "import", str(opml), "--json", env=radar_env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    imported = {i["url"]: i for i in result["imported"]}
    assert len(imported) == 3
    by_id = {i["id"]: i for i in result["imported"]}
    # Ids from the titles, unique: rust-blog.md exists (a person's file), so the feed gets -2.
    assert set(by_id) == {"rust-blog-2", "chrome-developers", "hacker-news-front-page"}
    assert (vault / "Radar/Sources/rust-blog.md").read_text() == "a person's note\n"
    skipped = {s["url"]: s["reason"] for s in result["skipped"]}
    assert skipped[known] == "already registered as known-feed"
    assert "already imported from this file as rust-blog-2" in next(
        r for u, r in skipped.items() if u.startswith("HTTP://")
    )
    assert skipped["not a url"].startswith("invalid URL")
    assert skipped["ftp://example.com/feed"].startswith("invalid URL")
    assert skipped[""].startswith("invalid URL")
    assert len(skipped) == 5

    for source_id, item in by_id.items():
        assert item["path"] == f"Radar/Sources/{source_id}.md"
        fm, body = split_frontmatter((vault / item["path"]).read_text(encoding="utf-8"))
        assert (fm["id"], fm["legalAssessment"], fm["url"]) == (source_id, "pending", item["url"])
        assert "legalAssessment: approved" in body  # says what a person must do
    tags = {i: split_frontmatter((vault / by_id[i]["path"]).read_text())[0]["tags"] for i in by_id}
    assert "radar/folder/engineering" in tags["rust-blog-2"]
    assert {"radar/folder/engineering", "radar/folder/web-platform"} <= set(
        tags["chrome-developers"]
    )
    assert {"radar/folder/tech", "radar/folder/news"} <= set(tags["hacker-news-front-page"])
    chrome = split_frontmatter((vault / by_id["chrome-developers"]["path"]).read_text())[0]
    assert chrome["collectionMethod"] == "atom"

    validate = json.loads(radar_process("sources", "validate", "--json", env=radar_env).stdout)
    active = {s["id"]: s["active"] for s in validate["sources"]}
    assert {i: active[i] for i in by_id} == dict.fromkeys(by_id, False)  # valid, not active

    # Pending Sources are never fetched, even by --all.
    collect = radar_process("collect", "--all", "--json", env=radar_env)
    assert collect.returncode == 0, collect.stderr
    assert {s["id"] for s in json.loads(collect.stdout)["sources"]} <= {"known-feed"}
    for path in ("/rust.xml", "/chrome.xml", "/hn.xml"):
        assert feed_server.requests_for(path) == [], path

    # Importing the same file again creates nothing and overwrites nothing.
    again = json.loads(
        radar_process("sources", "import", str(opml), "--json", env=radar_env).stdout
    )
    assert again["imported"] == [] and len(again["skipped"]) == 8

    out = tmp_path / "radar.opml"
    export = radar_process("sources", "export", "--output", str(out), env=radar_env)
    assert export.returncode == 0, export.stderr
    root = ET.fromstring(out.read_bytes())
    assert root.tag == "opml" and root.get("version") == "2.0"
    exported = {o.get("xmlUrl") for o in root.iter("outline") if o.get("xmlUrl")}
    assert exported == set(imported) | {known}


def test_an_export_round_trips_into_an_empty_registry(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    vault = radar_env["vault"]
    for name in ("alpha-blog", "beta-changelog"):
        write_source(vault, name, f"https://{name}.example.com/feed.xml")
    page = "https://gamma.example.com/changelog"
    selectors = {"itemSelector": "article", "titleSelector": "h2", "linkSelector": "a"}
    write_source(vault, "gamma-page", page, collectionMethod="html", **selectors)
    first = radar_process("sources", "export", env=radar_env)
    assert first.returncode == 0, first.stderr
    # A page read with selectors is a link outline, not a feed one: import leaves it alone.
    [link] = [o for o in ET.fromstring(first.stdout).iter("outline") if o.get("type") == "link"]
    assert (link.get("url"), link.get("xmlUrl"), link.get("text")) == (
        page,
        None,
        "Test gamma-page",
    )
    (tmp_path / "out.opml").write_text(first.stdout, encoding="utf-8")
    for path in (vault / "Radar/Sources").glob("*.md"):
        path.unlink()
    proc = radar_process("sources", "import", str(tmp_path / "out.opml"), "--json", env=radar_env)
    assert proc.returncode == 0, proc.stderr
    urls = {i["url"] for i in json.loads(proc.stdout)["imported"]}
    assert urls == {f"https://{n}.example.com/feed.xml" for n in ("alpha-blog", "beta-changelog")}
    second = radar_process("sources", "export", env=radar_env).stdout
    assert {o.get("xmlUrl") for o in ET.fromstring(second).iter("outline")} - {None} == urls


def test_entities_and_broken_files_are_one_line_errors(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    bomb = tmp_path / "bomb.opml"
    bomb.write_text(
        '<?xml version="1.0"?><!DOCTYPE opml [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        '<opml version="2.0"><body><outline text="&b;" xmlUrl="https://e.com/f"/></body></opml>',
        encoding="utf-8",
    )
    for path, needle in (
        (bomb, "DOCTYPE"),
        (tmp_path / "missing.opml", "cannot read"),
    ):
        proc = radar_process("sources", "import", str(path), env=radar_env)
        assert proc.returncode == 1
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    (tmp_path / "broken.opml").write_text("<opml><body><outline", encoding="utf-8")
    proc = radar_process("sources", "import", str(tmp_path / "broken.opml"), env=radar_env)
    assert proc.returncode == 1 and "not well-formed" in proc.stderr
    assert list((radar_env["vault"] / "Radar/Sources").glob("*.md")) == []
