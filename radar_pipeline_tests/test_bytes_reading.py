"""The readings behind "Faithful to the bytes" (docs/architecture.md), one rule at a time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from radar_pipeline.core.parse.dates import parse_date
from radar_pipeline.core.parse.dispatch import is_json_body, parse_body
from radar_pipeline.core.parse.feed import parse_feed
from radar_pipeline.core.parse.feed_bytes import read_feed_bytes

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BASE = "http://127.0.0.1:8000/feeds/deep/feed.xml"


def parse(body: bytes) -> tuple[list[tuple[str, str]], list[tuple[str, str | None]]]:
    feed = parse_feed("s", body, base_url=BASE, content_type=None, now=NOW, window_from=None)
    return (
        [(c.source_item_id, c.link) for c in feed.candidates],
        [(r.reason, r.source_item_id) for r in feed.rejections],
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # RFC 5322's day-of-week is optional and redundant: ignored in any language.
        ("mer, 16 nov 2022 00:38:15 +0100", datetime(2022, 11, 15, 23, 38, 15, tzinfo=UTC)),
        ("Sat, Dec 16 2023 02:02:33 PM", datetime(2023, 12, 16, 14, 2, 33, tzinfo=UTC)),
        ("Sat, Dec 16 2023 12:02:33 AM", datetime(2023, 12, 16, 0, 2, 33, tzinfo=UTC)),
        ("Dec 16, 2023 2:02 p.m. -0500", datetime(2023, 12, 16, 19, 2, tzinfo=UTC)),
        ("Sat, Dec 16 2023 13:02:33 PM", None),  # no such hour on a 12-hour clock
        ("the third Tuesday after the release", None),
    ],
)
def test_dates_are_read_as_their_text_says(text: str, expected: datetime | None) -> None:
    assert parse_date(text) == expected


def test_a_feedparser_reading_alone_is_taken_only_for_a_whole_date_time() -> None:
    def observed(date: str) -> tuple[datetime | None, list[str]]:
        item = f"<item><guid>g</guid><link>https://e.com/a</link><pubDate>{date}</pubDate></item>"
        body = f'<rss version="2.0"><channel><title>t</title>{item}</channel></rss>'.encode()
        feed = parse_feed("s", body, base_url=BASE, content_type=None, now=NOW, window_from=None)
        [cand] = feed.candidates
        return cand.observed_at, [e.origin for e in cand.evidence]

    # feedparser reads Greek month names; dates.py does not. Its reading agrees with the
    # text's numbers (year, day, minutes, seconds): it counts, marked as feedparser's.
    assert observed("Κυρ, 11 Ιούλ 2004 12:00:00 EST") == (
        datetime(2004, 7, 11, 17, 0, tzinfo=UTC),
        ["feedparser"],
    )
    # It reads this Korean date as midnight (the time dropped), and this Hungarian one as
    # 1 December: guesses, so no date.
    assert observed("2004-05-25 오후 11:23:17") == (None, ["unreadable"])
    assert observed("2004-július-13T9:15-05:00") == (None, ["unreadable"])
    # A partial date feedparser completes (W3DTF "2003-12" is read as December 1st): none.
    assert observed("2003-12") == (None, ["unreadable"])


def test_ids_are_the_feeds_and_only_absolute_http_ids_stand_in_for_links() -> None:
    body = b"""<rss version="2.0"><channel><title>t</title>
      <item><guid>t3_glvkc5</guid><link>/r/x/1</link></item>
      <item><guid isPermaLink="true">7bd2-uuid</guid></item>
      <item><guid>https://e.com/permalink#part</guid></item>
      <item><title>no id, no link</title></item>
    </channel></rss>"""
    candidates, rejections = parse(body)
    assert candidates == [
        ("t3_glvkc5", "http://127.0.0.1:8000/r/x/1"),  # a relative link still resolves
        ("https://e.com/permalink#part", "https://e.com/permalink#part"),
    ]
    assert rejections == [("no-link", "7bd2-uuid"), ("unidentifiable", None)]


def test_xml_base_resolves_links_not_ids() -> None:
    body = b"""<feed xmlns="http://www.w3.org/2005/Atom" xml:base="http://base.example/dir/">
      <title>t</title><entry><id>t3_b</id><title>a</title><link href="rel/1"/></entry></feed>"""
    assert parse(body)[0] == [("t3_b", "http://base.example/dir/rel/1")]


def test_ill_formed_feeds_keep_their_ids_as_written() -> None:
    # `&nbsp;` is no XML entity: decoded first, the strict reading still holds.
    nbsp = b"""<rss version="2.0"><channel><title>a&nbsp;b</title>
      <item><guid>t3_&amp;x</guid><title>a&nbsp;b</title><link>https://e.com/1</link></item>
    </channel></rss>"""
    assert parse(nbsp)[0] == [("t3_&x", "https://e.com/1")]
    # A stray `&` breaks XML for good: libxml2's recovery reads it, and an id counts only if
    # it occurs in the text as written.
    broken = b"""<rss version="2.0"><channel><title>Q & A</title>
      <item><guid>opaque-1</guid><title>Q & A</title><link>https://e.com/2</link></item>
    </channel></rss>"""
    written = read_feed_bytes(broken, 1)
    assert not written.strict
    assert parse(broken)[0] == [("opaque-1", "https://e.com/2")]


def test_a_link_elements_text_wins_over_a_non_http_attribute() -> None:
    body = b"""<rss version="2.0"><channel><title>t</title><item><guid>g</guid>
      <link uri="at://did:plc:x/app.bsky.feed.post/3k">http://example.com/item</link>
    </item></channel></rss>"""
    assert parse(body)[0] == [("g", "http://example.com/item")]


def test_an_rss_source_answering_a_json_feed_is_parsed_as_one() -> None:
    body = (
        b'\xef\xbb\xbf  {"version": "https://jsonfeed.org/version/1.1", "title": "j", "items": '
        b'[{"id": "j1", "url": "https://j.example/1", "title": "one"}]}'
    )
    assert is_json_body(body) and not is_json_body(b"<?xml version='1.0'?><rss/>")
    feed = parse_body(
        "s",
        body,
        method="rss",
        spec=None,
        base_url=BASE,
        content_type=None,
        now=NOW,
        window_from=None,
    )
    assert [(c.source_item_id, c.link) for c in feed.candidates] == [("j1", "https://j.example/1")]
