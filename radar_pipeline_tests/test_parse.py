"""Parse stage on real feeds, feedparser's own test corpus and hostile input."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from radar_pipeline.core.errors import ParseError
from radar_pipeline.core.models import ParsedFeed
from radar_pipeline.core.parse.feed import FUTURE_TOLERANCE, parse_feed
from radar_pipeline.core.text import inert_markdown
from radar_pipeline_tests.conftest import CORPUS_FEEDPARSER, CORPUS_REAL

NOW = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)
REAL_FEEDS = sorted(CORPUS_REAL.glob("*.xml"))
REAL_URLS = {
    "openai": "https://openai.com/news/rss.xml",
    "github": "https://github.blog/changelog/feed/",
    "cloudflare": "https://blog.cloudflare.com/rss/",
    "go": "https://go.dev/blog/feed.atom",
    "rust": "https://blog.rust-lang.org/feed.xml",
    "google": "https://cloudblog.withgoogle.com/rss/",
    "research": "https://research.swtch.com/feed.atom",
    "aws": "https://aws.amazon.com/blogs/aws/feed/",
}


def parse(body: bytes, **kwargs: object) -> ParsedFeed:
    options: dict[str, object] = {
        "base_url": "https://ex.com/feed.xml",
        "content_type": "application/rss+xml",
        "now": NOW,
        "window_from": None,
    }
    options.update(kwargs)
    return parse_feed("src", body, **options)  # type: ignore[arg-type]


def identities(feed: ParsedFeed) -> list[tuple[int, str, str]]:
    return [(c.position, c.source_item_id, c.identity) for c in feed.candidates]


def assert_accounted(feed: ParsedFeed, total: int | None = None) -> None:
    positions = [c.position for c in (*feed.candidates, *feed.outside_window)]
    positions += [r.position for r in feed.rejections]
    assert all(r.reason and r.detail for r in feed.rejections)
    assert len(set(positions)) == len(positions)
    if total is not None:
        assert sorted(positions) == list(range(total))
    for c in feed.candidates:
        assert re.fullmatch(r"[0-9a-f]{16}", c.identity)
        assert c.canonical_url.startswith("https://") and c.link.startswith(("http://", "https://"))
        assert c.source_item_id and c.title and len(c.title) <= 300 and len(c.summary) <= 2000


def rss(items: str, extra_head: str = "") -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?>{extra_head}<rss version="2.0"><channel>'
        f"<title>T</title><link>https://ex.com/</link>{items}</channel></rss>"
    ).encode()


def item(guid: str | None = None, link: str | None = None, date: str | None = None) -> str:
    parts = ["<title>An item</title>", "<description>Some text</description>"]
    if guid is not None:  # RSS guids default to isPermaLink="true": feedparser resolves them
        permalink = "true" if guid.startswith("http") else "false"
        parts.append(f'<guid isPermaLink="{permalink}">{guid}</guid>')
    if link is not None:
        parts.append(f"<link>{link}</link>")
    if date is not None:
        parts.append(f"<pubDate>{date}</pubDate>")
    return f"<item>{''.join(parts)}</item>"


def rfc822(moment: datetime) -> str:
    return moment.strftime("%a, %d %b %Y %H:%M:%S +0000")


# --- real feeds


@pytest.mark.parametrize("path", REAL_FEEDS, ids=lambda p: p.stem)
def test_real_feed_parses_completely_and_deterministically(path: Path) -> None:
    body = path.read_bytes()
    base = REAL_URLS[path.stem.split("-")[0]]
    first = parse(body, base_url=base, content_type="application/xml")
    second = parse(body, base_url=base, content_type="application/xml")
    assert first.candidates, "every real feed has usable items"
    assert_accounted(first)
    assert identities(first) == identities(second)
    assert len({c.identity for c in first.candidates}) == len(first.candidates)


def test_openai_guid_equals_link() -> None:
    feed = parse((CORPUS_REAL / "openai-2.xml").read_bytes(), base_url=REAL_URLS["openai"])
    assert len(feed.candidates) == 8 and not feed.rejections
    first = feed.candidates[0]
    url = "https://openai.com/index/openai-extends-cyber-access-to-ukraine-for-civilian-defense"
    assert first.source_item_id == first.link == first.canonical_url == url
    assert first.observed_at == datetime(2026, 9, 23, 13, 0, tzinfo=UTC)
    assert first.observed_field == "published" and first.content is None
    assert first.title == "OpenAI extends cyber access to Ukraine for civilian defense"


def test_github_changelog_guid_differs_from_link_for_one_item() -> None:
    body = (CORPUS_REAL / "github-changelog-1.xml").read_bytes()
    feed = parse(body, base_url=REAL_URLS["github"])
    differing = [c for c in feed.candidates if c.source_item_id != c.link]
    assert len(feed.candidates) == 10 and len(differing) == 1
    moved = differing[0]
    assert moved.source_item_id.endswith("2026-09-22-local-sandboxing-in-the-github-copilot-app")
    assert moved.canonical_url.endswith("2026-09-23-local-sandboxing-in-the-github-copilot-app")
    # The guid is part of the identity: the same link under the guid-less rule differs.
    assert moved.content is not None and "<" not in moved.content and "DOCTYPE" not in moved.content
    assert "appeared first on" in feed.candidates[0].summary


def test_go_blog_root_relative_links_and_tag_ids() -> None:
    feed = parse((CORPUS_REAL / "go-blog-1.xml").read_bytes(), base_url=REAL_URLS["go"])
    first = feed.candidates[0]
    assert first.source_item_id == "tag:blog.golang.org,2013:blog.golang.org/chacha8rand"
    assert first.canonical_url == "https://go.dev/blog/chacha8rand"
    assert first.content is not None and "<script" not in first.content


def test_aws_not_well_formed_is_recovered_with_bozo() -> None:
    feed = parse((CORPUS_REAL / "aws-blog-1.xml").read_bytes(), base_url=REAL_URLS["aws"])
    assert len(feed.candidates) == 10
    assert feed.bozo is not None and "\n" not in feed.bozo


# --- feedparser's own test corpus -------------------------------------------------------------

_HEADER = re.compile(rb"^Header:\s*Content-type:\s*(.+?)\s*$", re.MULTILINE | re.IGNORECASE)


def _corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS_FEEDPARSER.rglob("*") if p.is_file())


def _run_corpus() -> dict[str, object]:
    outcomes: dict[str, object] = {}
    for path in _corpus_files():
        body = path.read_bytes()
        header = _HEADER.search(body)
        content_type = header.group(1).decode("latin-1") if header else None
        rel = path.relative_to(CORPUS_FEEDPARSER).as_posix()
        try:
            feed = parse(body, base_url=f"http://127.0.0.1:8097/{rel}", content_type=content_type)
        except ParseError as exc:
            assert exc.error_class in ("not-a-feed", "invalid-xml")
            outcomes[rel] = exc.error_class
            continue
        assert_accounted(feed)
        outcomes[rel] = identities(feed)
    return outcomes


def test_feedparser_corpus_never_crashes_and_is_deterministic() -> None:
    started = time.monotonic()
    first = _run_corpus()
    elapsed = time.monotonic() - started
    assert len(first) > 600
    assert _run_corpus() == first
    parsed = [v for v in first.values() if isinstance(v, list)]
    assert len(parsed) > 590 and sum(len(v) for v in parsed) >= 90
    assert elapsed < 10, f"corpus took {elapsed:.1f}s"


def test_escaped_html_then_real_elements_keeps_its_leading_text() -> None:
    """Atom `type="html"` content with escaped markup followed by real XML elements (feedparser
    then treats it as XHTML and may unwrap an outer div). How expat splits the text decides
    what feedparser unwraps: with expat's character data buffered (tried for speed), the text
    before the first real element was dropped. Stock splitting keeps every word."""
    body = (
        b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>'
        b'<entry><id>a</id><title>a</title><link href="https://ex.com/a"/>'
        b'<content type="html">&lt;div &gt;Important words<p>x</p><div>y</div></content>'
        b'<summary type="html">&lt;div class="a"&gt;Lead paragraph\nsecond line<br/>'
        b"<div>z</div></summary></entry></feed>"
    )
    feed = parse(body, content_type="application/atom+xml")
    [item] = feed.candidates
    assert item.content == "Important words\nx\n\ny"
    assert item.summary.startswith("Lead paragraph\nsecond line")


# --- hostile XML --------------------------------------------------------------------------------

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE rss [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<rss version="2.0"><channel><title>&lol9;</title>
<item><title>&lol9;</title><link>https://ex.com/a</link></item></channel></rss>"""


def test_entity_bomb_is_refused_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(ParseError) as info:
        parse(BILLION_LAUGHS)
    assert info.value.error_class == "invalid-xml"
    assert time.monotonic() - started < 1


def _xxe_feed(secret_path: Path, encoding: str = "utf-8") -> bytes:
    doc = f"""<?xml version="1.0" encoding="{encoding}"?>
<!DOCTYPE rss [<!ENTITY xxe SYSTEM "file://{secret_path}">]>
<rss version="2.0"><channel><title>&xxe;</title>
<item><title>&xxe;</title><description>&xxe;</description><link>https://ex.com/a</link>
</item></channel></rss>"""
    return doc.encode(encoding)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_xxe_local_file_is_refused_and_never_read(tmp_path: Path, encoding: str) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-7f3a9c")
    with pytest.raises(ParseError) as info:
        parse(_xxe_feed(secret, encoding))
    assert info.value.error_class == "invalid-xml"
    assert "TOP-SECRET" not in str(info.value)


def test_external_dtd_without_entities_reads_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "secret.dtd"
    secret.write_text("TOP-SECRET-dtd")
    body = rss(item("g1", "https://ex.com/a"), f'<!DOCTYPE rss SYSTEM "file://{secret}">')
    feed = parse(body)
    assert len(feed.candidates) == 1
    assert "TOP-SECRET" not in repr(feed)


def test_entity_text_inside_cdata_is_not_a_declaration() -> None:
    body = rss(
        "<item><title>XXE explained</title><link>https://ex.com/xxe</link>"
        '<description><![CDATA[Never allow <!ENTITY x SYSTEM "file:///etc/passwd">]]>'
        "</description></item>"
    )
    feed = parse(body)
    assert feed.candidates[0].summary.startswith("Never allow")


def test_html_page_is_not_a_feed() -> None:
    page = b"<!doctype html><html><head><title>Hi</title></head><body><p>x</p></body></html>"
    with pytest.raises(ParseError) as info:
        parse(page, content_type="text/html")
    assert info.value.error_class == "not-a-feed"


def test_bare_path_bytes_are_data_not_a_file_name(tmp_path: Path) -> None:
    secret = tmp_path / "feed.xml"
    secret.write_bytes(rss(item("g1", "https://ex.com/secret")))
    with pytest.raises(ParseError):
        parse(str(secret).encode())


# --- identity rules


def test_duplicate_guids_get_distinct_deterministic_identities() -> None:
    items = (
        item("dup", "https://ex.com/a")
        + item("dup", "https://ex.com/b")
        + item("dup", "https://ex.com/b")
        + item("dup", "https://ex.com/a")
    )
    first = parse(rss(items))
    ids = [c.source_item_id for c in first.candidates]
    assert ids == ["dup", "dup#https://ex.com/b", "dup#https://ex.com/b#3", "dup#https://ex.com/a"]
    assert len({c.identity for c in first.candidates}) == 4
    assert identities(parse(rss(items))) == identities(first)


def test_duplicate_url_guids_stay_distinct() -> None:
    items = item("https://ex.com/a", "https://ex.com/a") * 2
    feed = parse(rss(items))
    assert len({c.identity for c in feed.candidates}) == 2


def test_missing_guid_falls_back_to_canonical_link() -> None:
    feed = parse(rss(item(None, "http://EX.com/a?utm_source=rss#top")))
    only = feed.candidates[0]
    assert only.source_item_id == only.canonical_url == "https://ex.com/a"
    assert only.link == "http://EX.com/a?utm_source=rss#top"


def test_title_tracking_params_and_scheme_do_not_change_identity() -> None:
    plain = parse(rss(item("g1", "https://ex.com/a"))).candidates[0]
    body = rss(item("g1", "http://ex.com/a?utm_source=x&amp;fbclid=y")).replace(
        b"An item", b"Fixed"
    )
    changed = parse(body).candidates[0]
    assert changed.title == "Fixed" and changed.identity == plain.identity


def test_unidentifiable_and_no_link_are_rejected_with_reason() -> None:
    items = item(None, None) + item("opaque-123", None) + item("g", "javascript:alert(1)")
    items += item("https://ex.com/permalink", None)
    feed = parse(rss(items))
    reasons = [(r.position, r.reason) for r in feed.rejections]
    assert reasons == [(0, "unidentifiable"), (1, "no-link"), (2, "no-link")]
    assert [c.link for c in feed.candidates] == ["https://ex.com/permalink"]
    assert_accounted(feed, total=4)


def test_relative_link_resolves_against_base_and_xml_base() -> None:
    feed = parse(rss(item("g", "/posts/1")), base_url="https://blog.ex.com/feed.xml")
    assert feed.candidates[0].canonical_url == "https://blog.ex.com/posts/1"
    atom = b"""<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"
      xml:base="https://other.ex.org/blog/"><title>A</title><id>urn:f</id>
      <entry><id>urn:e1</id><title>E</title><link rel="alternate" href="post-1"/>
      <updated>2026-09-01T00:00:00Z</updated></entry></feed>"""
    entry = parse(atom, content_type="application/atom+xml").candidates[0]
    assert entry.canonical_url == "https://other.ex.org/blog/post-1"
    assert entry.observed_field == "updated"


# --- dates, coverage, limits


def test_missing_or_bad_date_is_none_never_now() -> None:
    feed = parse(rss(item("a", "https://ex.com/a") + item("b", "https://ex.com/b", "not a date")))
    assert [c.observed_at for c in feed.candidates] == [None, None]
    assert [c.observed_field for c in feed.candidates] == [None, None]


def test_future_dated_is_kept_and_flagged() -> None:
    far = rfc822(NOW + timedelta(days=365))
    near = rfc822(NOW + FUTURE_TOLERANCE - timedelta(hours=1))
    feed = parse(rss(item("a", "https://ex.com/a", far) + item("b", "https://ex.com/b", near)))
    assert [c.future_dated for c in feed.candidates] == [True, False]
    assert feed.candidates[0].observed_at == (NOW + timedelta(days=365)).replace(microsecond=0)


def test_recovery_cap_sets_old_items_aside_and_keeps_undated() -> None:
    # Issue 17: items older than the cap are counted outside the window (not rejected), with
    # their identity and date; undated items stay eligible.
    old = rfc822(NOW - timedelta(days=30))
    new = rfc822(NOW - timedelta(days=1))
    items = item("old", "https://ex.com/o", old) + item("new", "https://ex.com/n", new)
    items += item("undated", "https://ex.com/u")
    feed = parse(rss(items), window_from=NOW - timedelta(days=7))
    assert [c.source_item_id for c in feed.candidates] == ["new", "undated"]
    assert [c.source_item_id for c in feed.outside_window] == ["old"]
    assert feed.outside_window[0].observed_at == (NOW - timedelta(days=30)).replace(microsecond=0)
    assert feed.rejections == ()
    assert_accounted(feed, total=3)


def test_no_count_limit_in_parse() -> None:
    # Issue 17: the 50-item cap bounds one check's decisions (dedupe), not what parse keeps.
    old = rfc822(NOW - timedelta(days=30))
    items = item("old", "https://ex.com/old", old)
    items += "".join(item(f"g{i}", f"https://ex.com/{i}") for i in range(55))
    feed = parse(rss(items), window_from=NOW - timedelta(days=7))
    assert len(feed.candidates) == 55 and len(feed.outside_window) == 1
    assert feed.rejections == ()
    assert_accounted(feed, total=56)


# --- hostile text in items


def test_hostile_item_text_is_plain_and_bounded() -> None:
    title = "&lt;script&gt;alert(1)&lt;/script&gt;---\ntitle: x\n\u202eevil ```dataviewjs "
    body = rss(
        "<item><guid>https://ex.com/h</guid><link>https://ex.com/h</link>"
        f"<title>{title}{'T' * 10_000}</title>"
        "<description><![CDATA[<p>ok</p><script>steal()</script><iframe src=x>in</iframe>"
        "<b>bold</b> [[Note]]]]></description>"
        "<content:encoded xmlns:content='http://purl.org/rss/1.0/modules/content/'>"
        "<![CDATA[<style>x{}</style><b>full</b> text]]></content:encoded></item>"
    )
    cand = parse(body).candidates[0]
    assert len(cand.title) <= 300 and "\n" not in cand.title and "\u202e" not in cand.title
    # feedparser calls this title text/plain (script is no acceptable HTML): it stays text, and
    # the Markdown writer's escaping leaves nothing live.
    assert cand.title.startswith("<script>alert(1)</script>--- title: x evil ```dataviewjs TTT")
    for live in ("<script", "```", "\n---"):
        assert live not in inert_markdown(cand.title)
    assert cand.summary == "ok\nbold [[Note]]"  # script and iframe content dropped
    assert cand.content == "full text"
    assert cand.title_key.startswith("script alert 1 script title x evil dataviewjs ttt")


def test_plain_text_title_keeps_markup_as_text() -> None:
    # A CDATA title with a <script> is text/plain to feedparser: it stays text (data, not markup);
    # making it inert is the Markdown writer's job (text.inert_markdown).
    body = rss(
        '<item><guid isPermaLink="false">p</guid><link>https://ex.com/p</link>'
        "<title><![CDATA[The <script> element\nexplained]]></title></item>"
    )
    assert parse(body).candidates[0].title == "The <script> element explained"
