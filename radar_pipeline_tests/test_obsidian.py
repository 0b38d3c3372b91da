"""Signals as Obsidian notes and the views Radar ships, through real `radar` processes
on a temp vault; and the feedparser sanitize corpus rendered as Signals that are inert yet read
as written."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from radar_pipeline.core.collect.results import CheckResult
from radar_pipeline.core.collect.signal_files import build_document
from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.identity.keys import make_signal_id
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.parse.feed import parse_feed
from radar_pipeline.core.plan.collection import SourcePlan
from radar_pipeline.core.registry.sources import SourceRecord, validate_source
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.conftest import CORPUS_FEEDPARSER
from radar_pipeline_tests.evidencekit import radar_process
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source

AS_OF = "2026-11-30T12:00:00Z"
ITEM = {
    "title": "C# 12: 50% faster, *preview* &amp; more",
    "guid": "item-1",
    "link": "https://example.com/posts/c-sharp-12?utm_source=x",
    "pubDate": "Mon, 30 Nov 2026 09:30:00 GMT",
    "description": "Up to 50% faster. See #perf and ==notes==.",
}


def _collect(env: dict[str, Path], as_of: str = AS_OF) -> dict[str, Any]:
    proc = radar_process("collect", "--all", "--as-of", as_of, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def test_new_signal_is_an_obsidian_note(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_fixture_source(vault, "dotnet-blog", rss([ITEM]))
    assert _collect(radar_env)["created"] == 1
    (path,) = signal_files(vault)
    fm = read_signal_frontmatter(path)
    text = path.read_text(encoding="utf-8")

    title = "C# 12: 50% faster, *preview* & more"
    assert fm["title"] == title
    assert fm["aliases"] == [title]  # the quick switcher finds it by its title
    assert fm["source"] == "[[dotnet-blog]]"  # the Source note's backlinks list it
    assert fm["sourceRecord"] == "Radar/Sources/dotnet-blog.md"
    assert fm["duplicateCandidateOf"] is None
    # Date properties Obsidian shows as dates; the exact provenance strings stay beside them.
    assert (fm["collectedOn"], fm["fetchedAt"]) == ("2026-11-30", AS_OF)
    assert (fm["observedOn"], fm["observedAt"]) == ("2026-11-30", "2026-11-30T09:30:00Z")
    assert "collectedOn: '2026-11-30'" in text  # a string to every YAML reader, a date to Obsidian

    body = text[text.index("\n---\n", 4) + 5 :]
    lines = body.strip().splitlines()
    assert lines[0] == f"# {title}"  # the body opens with the title, as written
    assert lines[2] == "[Read the original at example.com][original]"
    # The link to click is the item's URL as the publisher wrote it; identity keeps the
    # canonical form (tracking parameters dropped, http folded into https).
    assert lines[-1] == f"[original]: {fm['itemUrl']}" == f"[original]: {ITEM['link']}"
    assert fm["canonicalUrl"].startswith("https://example.com/posts/c-sharp-12")
    # Only what Obsidian acts on is escaped: a tag and a highlight, not `50%` or `C#`.
    assert "Up to 50% faster. See \\#perf and \\=\\=notes\\=\\=." in body


def test_an_http_only_site_is_linked_as_the_publisher_wrote_it(
    radar_env: dict[str, Path],
) -> None:
    vault = radar_env["vault"]
    item = {**ITEM, "link": "http://old.example.net/post/1"}
    write_fixture_source(vault, "old-site", rss([item]))
    assert _collect(radar_env)["created"] == 1
    (path,) = signal_files(vault)
    fm = read_signal_frontmatter(path)
    lines = path.read_text(encoding="utf-8").strip().splitlines()
    assert lines[-1] == "[original]: http://old.example.net/post/1"  # no https page invented
    assert "[Read the original at old.example.net][original]" in lines
    assert fm["itemUrl"] == "http://old.example.net/post/1"
    assert fm["canonicalUrl"] == "https://old.example.net/post/1"  # identity's form


def test_old_signals_are_never_rewritten(radar_env: dict[str, Path]) -> None:
    """A Signal written before the Obsidian keys existed stays byte for byte as it is."""
    vault = radar_env["vault"]
    write_fixture_source(vault, "dotnet-blog", rss([ITEM]))
    assert _collect(radar_env)["created"] == 1
    (path,) = signal_files(vault)
    # Make it look like a Signal of the previous release: no link, aliases or date keys, the
    # old body (escaped title, no link to the original).
    text = path.read_text(encoding="utf-8")
    header = text[4 : text.index("\n---\n", 4) + 1]
    old_keys = ("aliases", "source", "collectedOn", "observedOn")
    fm = {k: v for k, v in yaml.safe_load(header).items() if k not in old_keys}
    old_body = "\n# C\\# 12: 50\\% faster, \\*preview\\* \\& more\n\nUp to 50\\% faster.\n"
    old = "---\n" + yaml.safe_dump(fm, sort_keys=False) + "---\n" + old_body
    path.write_text(old, encoding="utf-8")
    before = (path.read_bytes(), path.stat().st_mtime_ns)

    # The feed now holds the old item and a new one: the new one is created, the old file kept.
    second = {
        **ITEM,
        "guid": "item-2",
        "link": "https://example.com/posts/two",
        "title": "Two",
        "pubDate": "Mon, 30 Nov 2026 17:00:00 GMT",
        "description": "Another post.",
    }
    (vault / "Radar/Fixtures/dotnet-blog.xml").write_bytes(rss([second, ITEM]))
    again = _collect(radar_env, "2026-11-30T18:00:00Z")
    assert (again["created"], again["failed"]) == (1, 0), json.dumps(again)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    (new,) = set(signal_files(vault)) - {path}
    assert read_signal_frontmatter(new)["aliases"] == ["Two"]  # new Signals get the new keys


VIEWS = {
    "Radar/Signals.base": {"New Signals to review", "Duplicate candidates", "By Source"},
    "Radar/Sources.base": {"Source health"},
}


def test_bases_are_created_once_and_a_persons_edit_is_kept(radar_env: dict[str, Path]) -> None:
    vault = radar_env["vault"]
    write_fixture_source(vault, "dotnet-blog", rss([ITEM]))
    _collect(radar_env)
    for name, views in VIEWS.items():
        data = yaml.safe_load((vault / name).read_text(encoding="utf-8"))
        assert set(data) >= {"filters", "views"}, name
        assert views <= {v["name"] for v in data["views"]}, name
        assert all(v["type"] == "table" and v["order"] for v in data["views"])
        for key in data.get("formulas", {}):
            assert isinstance(data["formulas"][key], str)

    edited = vault / "Radar/Signals.base"
    mine = edited.read_text(encoding="utf-8").replace("New Signals to review", "My inbox")
    edited.write_text(mine, encoding="utf-8")
    (vault / "Radar/Sources.base").unlink()
    _collect(radar_env)
    assert edited.read_text(encoding="utf-8") == mine  # never overwritten
    assert (vault / "Radar/Sources.base").exists()  # a missing view comes back


def test_views_put_the_newest_item_first_and_count_only_signals(
    radar_env: dict[str, Path],
) -> None:
    """The review view sorts by the item's own time, then collection time: an item collected
    later but dated earlier (so with the greater file name) comes second. The formulas give
    nothing for an absent day, and the Sources view counts Signal files only."""
    vault = radar_env["vault"]
    newer = {**ITEM, "title": "Newer item", "pubDate": "Mon, 30 Nov 2026 10:00:00 GMT"}
    write_fixture_source(vault, "dotnet-blog", rss([newer]))
    assert _collect(radar_env, "2026-11-30T12:00:00Z")["created"] == 1
    older = {
        **ITEM,
        "title": "Older item, collected later",
        "guid": "item-2",
        "link": "https://example.com/posts/older",
        "pubDate": "Sat, 28 Nov 2026 10:00:00 GMT",
    }
    (vault / "Radar/Fixtures/dotnet-blog.xml").write_bytes(rss([newer, older]))
    assert _collect(radar_env, "2026-11-30T18:00:00Z")["created"] == 1

    signals = yaml.safe_load((vault / "Radar/Signals.base").read_text(encoding="utf-8"))
    review = next(v for v in signals["views"] if v["name"] == "New Signals to review")
    order = [(s["property"], s["direction"]) for s in review["sort"]]
    assert order == [("note.observedAt", "DESC"), ("note.fetchedAt", "DESC")]
    notes = [read_signal_frontmatter(p) | {"file.name": p.stem} for p in signal_files(vault)]
    # Obsidian compares these as text: ISO-8601 UTC of one width, so text order is time order.
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", n["observedAt"]) for n in notes)
    by_view = sorted(notes, key=lambda n: [n[p.removeprefix("note.")] for p, _ in order])
    assert [n["title"] for n in reversed(by_view)] == ["Newer item", "Older item, collected later"]
    by_file_name = sorted(notes, key=lambda n: n["file.name"], reverse=True)
    assert by_file_name[0]["title"] == "Older item, collected later"  # what the old sort showed

    for formula in signals["formulas"].values():
        assert '""' not in formula  # no empty text beside the dates
        assert re.fullmatch(r"if\((\w+), date\(\1\)\)", formula), formula
    sources = yaml.safe_load((vault / "Radar/Sources.base").read_text(encoding="utf-8"))
    count = sources["formulas"]["signals"]
    assert count == 'file.backlinks.filter(file(value).inFolder("Radar/Signals")).length'
    # ... and the Signals folder is where every Signal is, and only Signals.
    folder = vault / "Radar/Signals"
    assert {p.parent for p in signal_files(vault)} == {folder}
    assert all(read_signal_frontmatter(p)["entityType"] == "signal" for p in folder.glob("*.md"))


# ---- the sanitize corpus -----------------------------------------------------------------------

SANITIZE = sorted((CORPUS_FEEDPARSER / "wellformed" / "sanitize").glob("*.xml"))
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
LIVE = {
    "fence": re.compile(r"^\s*(```|~~~)", re.MULTILINE),
    "code": re.compile(r"`"),
    "html": re.compile(r"<\s*[a-z!/?%]", re.IGNORECASE),
    "wikilink": re.compile(r"\[\["),
    "markdown-link": re.compile(r"\]\("),
    "templater": re.compile(r"<%"),
    "tag": re.compile(r"(^|\s)#[^\s#]"),
    "comment": re.compile(r"%%"),
    "field": re.compile(r"::"),
}


def _record() -> SourceRecord:
    fm = {
        "entityType": "source",
        "schemaVersion": 1,
        "id": "sanitize",
        "name": "Sanitize corpus",
        "url": "https://example.com/feed.xml",
        "role": "primary",
        "sourceType": "official",
        "authorityScore": 0.5,
        "legalAssessment": "approved",
        "priority": "normal",
        "collectionMethod": "rss",
        "enabled": True,
        "cadence": "P1D",
    }
    source, problems = validate_source(fm)
    assert source is not None, problems
    return SourceRecord(
        source, Path("/vault/Radar/Sources/sanitize.md"), "Radar/Sources/sanitize.md"
    )


def _as_read(markdown: str) -> str:
    """What Obsidian shows for an inert body: backslash escapes and entities resolved."""
    return html.unescape(re.sub(r"\\(.)", r"\1", markdown))


@pytest.mark.parametrize("feed", SANITIZE, ids=lambda p: p.stem)
def test_sanitize_corpus_signals_are_inert_and_read_as_written(feed: Path) -> None:
    record = _record()
    try:
        parsed = parse_feed(
            "sanitize",
            feed.read_bytes(),
            base_url="https://example.com/feed.xml",
            content_type="application/xml",
            now=NOW,
            window_from=None,
        )
    except ParseError:
        pytest.skip("not a feed this parser takes")
    fetch = FetchResult(
        "sanitize", "https://example.com/feed.xml", "https://example.com/feed.xml", "ok", NOW, 200
    )
    result = CheckResult(SourcePlan("sanitize", record, None), fetch, parsed)
    for cand in parsed.candidates:
        doc = build_document(
            make_signal_id(NOW, cand.identity), cand, result, record.record_path, None
        )
        text = doc.render()
        body = text[text.index("\n---\n", 4) + 5 :]
        third_party = body.split("\n*Collected by Radar from ")[0]
        for name, pattern in LIVE.items():
            assert not pattern.search(third_party), (feed.name, name, third_party)
        # Rendered, the summary reads exactly as the feed's text.
        summary_md = third_party.split("[Read the original at example.com][original]\n\n", 1)[-1]
        if cand.summary:
            assert _as_read(summary_md.strip()) == "\n".join(
                line.strip() for line in cand.summary.split("\n")
            ), feed.name
