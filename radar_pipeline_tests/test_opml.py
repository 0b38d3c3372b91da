"""OPML in and out of the registry through real `radar` processes: a feed reader's
export becomes pending Source notes that are never fetched, and export lists every Source."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

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


# ---- each reader's quirks, from radar_pipeline_tests/corpus/opml/ ------------------------------

OPML_CORPUS = Path(__file__).resolve().parent / "corpus" / "opml"


def _import(name: str, env: dict[str, Path], tmp_path: Path, **urls: str) -> dict[str, Any]:
    """`radar sources import` of a corpus file (with `http://feeds.test` made the loopback
    server's address when `base` is given); exit 0 and the JSON object."""
    text = (OPML_CORPUS / name).read_text(encoding="utf-8")
    if "base" in urls:
        text = text.replace("http://feeds.test", urls["base"])
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    proc = radar_process("sources", "import", str(path), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _source(env: dict[str, Path], source_id: str) -> dict[str, Any]:
    fm, _ = split_frontmatter((env["vault"] / f"Radar/Sources/{source_id}.md").read_text())
    return fm


def _folder_tags(fm: dict[str, Any]) -> list[str]:
    return [t for t in fm["tags"] if t.startswith("radar/folder/")]


def test_livejournal_attribute_names_in_other_case(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    result = _import("livejournal.opml", radar_env, tmp_path)
    assert [i["url"] for i in result["imported"]] == [
        "https://kernelnotes.livejournal.com/data/rss",
        "https://compilerdiary.livejournal.com/data/atom",
    ]
    assert result["skipped"] == []
    kernel, diary = (_source(radar_env, i["id"]) for i in result["imported"])
    assert (kernel["collectionMethod"], kernel["siteUrl"]) == (
        "rss",
        "https://kernelnotes.livejournal.com/",
    )
    assert diary["collectionMethod"] == "atom"


def test_feedly_folders_in_any_script_and_a_feed_in_several_folders(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    result = _import("feedly.opml", radar_env, tmp_path)
    ids = {i["url"]: i["id"] for i in result["imported"]}
    assert len(ids) == 5  # Smashing Magazine, listed in three folders, is one Source
    smashing = _source(radar_env, ids["https://www.smashingmagazine.com/feed/"])
    assert _folder_tags(smashing) == [
        "radar/folder/设计",
        "radar/folder/frontend",
        "radar/folder/デザイン",
    ]
    assert smashing["folders"] == ["设计", "Frontend", "デザイン"]
    assert _folder_tags(_source(radar_env, ids["https://habr.com/ru/rss/all/"])) == [
        "radar/folder/разработка"
    ]
    arabic = _source(radar_env, ids["https://dev.example.org/ar/feed.xml"])
    assert _folder_tags(arabic) == ["radar/folder/برمجة"]
    repeats = [s for s in result["skipped"] if s["url"] == "https://www.smashingmagazine.com/feed/"]
    assert len(repeats) == 2 and len(result["skipped"]) == 2
    assert all(
        "already imported from this file as smashing-magazine" in s["reason"] for s in repeats
    )
    # Obsidian reads every one of these as a tag: no space, no `#`, not only digits.
    for tag in {t for i in ids.values() for t in _source(radar_env, i)["tags"]}:
        assert tag.strip() == tag and " " not in tag and "#" not in tag and not tag.isdigit()


def test_a_broken_outline_is_skipped_with_its_reason_and_the_rest_imported(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    result = _import("broken-outlines.opml", radar_env, tmp_path)
    assert {i["url"] for i in result["imported"]} == {
        "https://go.dev/blog/feed.atom",
        "https://blog.rust-lang.org/feed.xml",
        "https://blog.cloudflare.com/rss/",
    }
    skipped = {s["url"]: s["reason"] for s in result["skipped"]}
    assert skipped == {
        "https://rnd.example.com/feed.xml": (
            "broken outline (line 8: not well-formed (invalid token)): fix it in the OPML"
        ),
        "https://search.example.com/rss?q=radar&sort=date": (
            "broken outline (line 10: not well-formed (invalid token)): fix it in the OPML"
        ),
        "": (
            "broken folder outline (line 12: not well-formed (invalid token)): the feeds "
            "inside it are imported without its tag"
        ),
        "https://ab.example.com/weekly.xml": (
            "broken outline (line 15: not well-formed (invalid token)): fix it in the OPML"
        ),
    }
    go = _source(radar_env, "go-blog")
    assert _folder_tags(go) == ["radar/folder/engineering"]  # the folder after a cut outline
    assert _folder_tags(_source(radar_env, "rust-blog")) == []  # its folder's name was broken
    # A broken head (its title) is emptied and reported; the outlines are read.
    head = tmp_path / "head.opml"
    head.write_text(
        '<?xml version="1.0"?>\n<opml version="2.0"><head><title>Tom & Jerry</title></head>\n'
        '<body><outline text="Zig" xmlUrl="https://ziglang.org/news/index.xml"/></body></opml>',
        encoding="utf-8",
    )
    proc = radar_process("sources", "import", str(head), "--json", env=radar_env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert [i["url"] for i in result["imported"]] == ["https://ziglang.org/news/index.xml"]
    assert result["skipped"] == [
        {
            "url": "",
            "reason": "broken head (line 2: not well-formed (invalid token)): the head is "
            "ignored, the outlines are read",
        }
    ]
    # Still no DOCTYPE: a broken file that declares one is refused as a whole.
    doctype = tmp_path / "doctype.opml"
    broken = (OPML_CORPUS / "broken-outlines.opml").read_text(encoding="utf-8")
    doctype.write_text(broken.replace("<opml", '<!DOCTYPE opml SYSTEM "x.dtd">\n<opml', 1))
    proc = radar_process("sources", "import", str(doctype), env=radar_env)
    assert proc.returncode == 1 and "DOCTYPE" in proc.stderr


def test_netnewswire_json_feed_listed_as_rss_is_collected(
    radar_env: dict[str, Path], feed_server: FeedServer, tmp_path: Path
) -> None:
    """NetNewsWire writes `type="rss"` for a JSON Feed. Import does not fetch (nothing is, until
    a person approves), so the Source is `rss`; its JSON Feed answer is read as a JSON Feed."""
    feed = {
        "version": "https://jsonfeed.org/version/1.1",
        "title": "JSON Feed Blog",
        "items": [
            {
                "id": "1",
                "url": "https://www.jsonfeed.org/2020/08/07/json-feed-version.html",
                "title": "JSON Feed version 1.1",
                "date_published": "2026-11-30T08:00:00Z",
            },
        ],
    }
    feed_server.add(
        "/jsonfeed.json", json.dumps(feed).encode(), headers={"Content-Type": "application/json"}
    )
    feed_server.add(
        "/daringfireball.xml", rss([{"title": "t", "guid": "g", "link": "https://x/1"}])
    )
    result = _import("netnewswire.opml", radar_env, tmp_path, base=feed_server.url(""))
    ids = {i["url"].rsplit("/", 1)[1]: i["id"] for i in result["imported"]}
    assert set(ids) == {"jsonfeed.json", "daringfireball.xml"}
    path = radar_env["vault"] / f"Radar/Sources/{ids['jsonfeed.json']}.md"
    fm = _source(radar_env, ids["jsonfeed.json"])
    assert (fm["collectionMethod"], fm["siteUrl"]) == ("rss", "https://www.jsonfeed.org/")
    path.write_text(
        path.read_text().replace("legalAssessment: pending", "legalAssessment: approved")
    )
    collect = radar_process(
        "collect",
        "--source",
        ids["jsonfeed.json"],
        "--as-of",
        "2026-11-30T12:00:00Z",
        "--json",
        env=radar_env,
    )
    assert collect.returncode == 0, collect.stdout + collect.stderr
    (checked,) = json.loads(collect.stdout)["sources"]
    assert (checked["outcome"], checked["itemsParsed"], checked["created"]) == ("passed", 1, 1)
    assert feed_server.requests_for("/daringfireball.xml") == []  # still pending: never fetched


def test_private_addresses_are_skipped_unless_allowed(
    radar_env: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RADAR_ALLOWED_PRIVATE_HOSTS")
    result = _import("self-hosted.opml", radar_env, tmp_path)
    assert [i["url"] for i in result["imported"]] == ["https://dagster.io/rss.xml"]
    reasons = {s["url"]: s["reason"] for s in result["skipped"]}
    assert set(reasons) == {
        "http://localhost:1200/github/repos/dagster-io",
        "http://127.0.0.1:8080/feed.xml",
        "http://[::1]:8080/feed.xml",
        "http://192.168.1.20/feed.xml",
        "https://10.0.0.5/rss",
        "http://169.254.169.254/latest/meta-data/",
    }
    assert reasons["http://192.168.1.20/feed.xml"].startswith(
        "refused by the address policy: private address refused: 192.168.1.20"
    )
    assert "loopback" in reasons["http://localhost:1200/github/repos/dagster-io"]
    assert "link-local" in reasons["http://169.254.169.254/latest/meta-data/"]
    assert all("RADAR_ALLOWED_PRIVATE_HOSTS" in r for r in reasons.values())

    # The fetch stage's allow-list lets the same hosts in at import.
    monkeypatch.setenv("RADAR_ALLOWED_PRIVATE_HOSTS", "localhost, 192.168.1.20")
    again = _import("self-hosted.opml", radar_env, tmp_path)
    assert {i["url"] for i in again["imported"]} == {
        "http://localhost:1200/github/repos/dagster-io",
        "http://192.168.1.20/feed.xml",
    }


def test_export_then_import_gives_the_same_sources_with_the_same_tags(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    vault = radar_env["vault"]
    for name in ("feedly.opml", "livejournal.opml", "broken-outlines.opml"):
        _import(name, radar_env, tmp_path)
    write_source(
        vault, "json-news", "https://news.example.com/feed.json", collectionMethod="jsonfeed"
    )

    def sources() -> dict[str, tuple[Any, ...]]:
        out = {}
        for path in (vault / "Radar/Sources").glob("*.md"):
            fm, _ = split_frontmatter(path.read_text(encoding="utf-8"))
            tags = _folder_tags(fm) if "tags" in fm else []
            out[fm["url"]] = (fm["name"], fm["collectionMethod"], fm.get("siteUrl"), tags)
        return out

    before = sources()
    export = radar_process("sources", "export", env=radar_env)
    assert export.returncode == 0, export.stderr
    root = ET.fromstring(export.stdout)
    # Folders are nested outlines; each feed keeps its site and its kind.
    design = next(o for o in root.iter("outline") if o.get("text") == "设计")
    assert {o.get("xmlUrl") for o in design} == {
        "https://www.smashingmagazine.com/feed/",
        "https://alistapart.com/main/feed/",
    }
    diary = next(o for o in root.iter("outline") if o.get("text") == "Compiler Diary")
    assert (diary.get("type"), diary.get("htmlUrl")) == (
        "atom",
        "https://compilerdiary.livejournal.com/",
    )
    (json_news,) = [o for o in root.iter("outline") if o.get("text") == "Test json-news"]
    assert json_news.get("type") == "jsonfeed"

    (tmp_path / "export.opml").write_text(export.stdout, encoding="utf-8")
    for path in (vault / "Radar/Sources").glob("*.md"):
        path.unlink()
    again = json.loads(
        radar_process(
            "sources", "import", str(tmp_path / "export.opml"), "--json", env=radar_env
        ).stdout
    )
    assert len(again["imported"]) == len(before)
    after = sources()
    # The hand-written Source had no folder tags and no site: it comes back as an import.
    assert after == before


def test_a_readers_export_with_an_unescaped_quote_is_read_outline_by_outline() -> None:
    """A real reader's export: a `description` holding an unescaped `"` breaks one outline,
    not the file. The broken one is skipped with its line and reason; the rest are read with
    their URLs exactly as written (a recovering parser such as lxml's `recover=True` would
    read `?x=1&y=2` as `?x=1=2`: a wrong address, silently)."""
    from radar_pipeline.core.registry.opml_read import feed_outlines, parse_opml

    data = (
        b'<?xml version="1.0"?>\n<opml version="2.0"><head><title>t</title></head><body>\n'
        b'<outline text="A" type="rss" xmlUrl="https://a.example/feed" '
        b'description="He said "hi" to me"/>\n'
        b'<outline text="B" type="rss" xmlUrl="https://b.example/feed?x=1&amp;y=2"/>\n'
        b"</body></opml>"
    )
    root, broken = parse_opml(data)
    assert [o.url for o in feed_outlines(root)] == ["https://b.example/feed?x=1&y=2"]
    assert [(b.url, b.line) for b in broken] == [("https://a.example/feed", 3)]
    assert broken[0].reason.startswith("broken outline (line 3: not well-formed")


def test_html_markup_inside_an_attribute_breaks_one_outline_not_the_file(
    radar_env: dict[str, Path], tmp_path: Path
) -> None:
    """A reader's export whose `description` holds HTML markup with unescaped quotes and angle
    brackets (the `>` of `<a ...>` is not the end of the outline's tag): that outline is
    skipped with its line and reason, every other outline is imported, and a DOCTYPE is still
    refused."""
    markup = (
        'description="Project management. By the makers of <a href="https://www.basecamp.com" '
        'target="_blank" rel="noopener">Basecamp</a>. Since 1999."'
    )
    opml = tmp_path / "reader.opml"
    opml.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<opml version="2.0">\n'
        "<head><title>Reader export</title></head>\n<body>\n"
        '  <outline text="Dev" title="Dev">\n'
        '    <outline type="rss" text="Go" xmlUrl="https://go.dev/blog/feed.atom"/>\n'
        f'    <outline type="rss" text="37signals" xmlUrl="https://37signals.com/feed" {markup}/>\n'
        '    <outline type="rss" text="Rust" xmlUrl="https://blog.rust-lang.org/feed.xml" '
        'description="a > b, and x < y"/>\n'
        "  </outline>\n"
        f'  <outline type="rss" text="HEY" xmlUrl="https://hey.com/feed" {markup}></outline>\n'
        '  <outline type="rss" text="Zig" xmlUrl="https://ziglang.org/news/index.xml"/>\n'
        "</body>\n</opml>\n",
        encoding="utf-8",
    )
    proc = radar_process("sources", "import", str(opml), "--json", env=radar_env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert sorted(i["url"] for i in result["imported"]) == [
        "https://go.dev/blog/feed.atom",
        "https://ziglang.org/news/index.xml",
    ]
    skipped = {s["url"]: s["reason"] for s in result["skipped"]}
    assert skipped == {
        "https://37signals.com/feed": (
            "broken outline (line 7: not well-formed (invalid token)): fix it in the OPML"
        ),
        "https://blog.rust-lang.org/feed.xml": (
            "broken outline (line 8: not well-formed (invalid token)): fix it in the OPML"
        ),
        "https://hey.com/feed": (
            "broken outline (line 10: not well-formed (invalid token)): fix it in the OPML"
        ),
    }
    # The folder after the broken outlines still tags the feeds inside it.
    assert _folder_tags(_source(radar_env, "go")) == ["radar/folder/dev"]
    doctype = tmp_path / "doctype.opml"
    doctype.write_text(
        opml.read_text(encoding="utf-8").replace("<opml", '<!DOCTYPE opml SYSTEM "x.dtd">\n<opml')
    )
    proc = radar_process("sources", "import", str(doctype), env=radar_env)
    assert proc.returncode == 1 and "DOCTYPE" in proc.stderr
