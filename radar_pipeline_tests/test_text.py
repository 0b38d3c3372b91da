"""Third-party text is data: plain text is clean and bounded, Markdown bodies are inert."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radar_pipeline.core import text as text_module
from radar_pipeline.core.text import TRUNCATION_MARKER, inert_markdown, one_line, plain_text

BIDI_AND_INVISIBLE = (
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\ufeff\u200b"
)

HOSTILE = [
    "---\ntitle: pwned\n---",
    "key: value \"quoted\" 'single' # comment",
    "line one\nline two\r\nline three\u2028four\x85five",
    "```dataviewjs\ndv.paragraph(app.vault.adapter.basePath)\n```",
    '~~~dataview\nTABLE file.name FROM ""\n~~~',
    "<% tp.system.prompt('x') %> and <%* await tp.file.delete() %>",
    "<script>alert(document.cookie)</script>visible",
    "<img src=x onerror=alert(1)>",
    "evil\u202egnp.exe and \u2066isolate\u2069",
    "see [[Private Note]] and ![[secret.png]] and [x](javascript:alert(1))",
    "inline `= this.file.name` and `$= dv.current()` queries",
    "status:: done and #injected-tag and ==highlight== and %%hidden%%",
    "A" * 10_000,
]


@pytest.mark.parametrize("value", HOSTILE)
def test_one_line_is_single_clean_bounded(value: str) -> None:
    out = one_line(value, 300)
    assert len(out) <= 300
    assert "\n" not in out and "\r" not in out
    assert not set(out) & set(BIDI_AND_INVISIBLE)
    assert "<script" not in out and "alert(document" not in out
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", out)


def test_plain_text_strips_html_and_unescapes() -> None:
    html = (
        "<p>Hello&nbsp;<b>world</b> &amp; friends &#8230;</p>"
        "<script>var secret = 1;</script><style>p {color: red}</style>"
        "<p>Second   paragraph</p><!-- hidden comment -->"
    )
    assert plain_text(html, 500) == "Hello world & friends \u2026\n\nSecond paragraph"


def test_plain_text_keeps_markup_like_plain_text_when_not_html() -> None:
    assert plain_text("Use <video> & <audio>", 100, html=False) == "Use <video> & <audio>"
    assert plain_text("Use &lt;video&gt;", 100) == "Use <video>"


def test_plain_text_removes_controls_and_bidi_keeps_emoji_joiners() -> None:
    text = "a\x00b\x07c" + BIDI_AND_INVISIBLE + "d \U0001f468\u200d\U0001f4bb"
    assert plain_text(text, 100) == "abcd \U0001f468\u200d\U0001f4bb"


def test_truncation_marker_and_bound() -> None:
    out = plain_text("word " * 1000, 100)
    assert len(out) <= 100
    assert out.endswith(TRUNCATION_MARKER)
    assert plain_text("short", 100) == "short"
    assert one_line("x" * 10_000, 300).endswith(TRUNCATION_MARKER)


@pytest.mark.parametrize("value", HOSTILE)
def test_inert_markdown_has_nothing_live(value: str) -> None:
    out = inert_markdown(plain_text(value, 20_000, html=False))
    for live in ("```", "~~~", "<%", "%>", "[[", "<script", "<img", "`", "::", "](", "==", "%%"):
        assert live not in out, live
    assert not re.search(r"(^|\s)#[\w-]", out)  # no Obsidian tag
    assert not re.search(r"^(---|[-+*] |\d+[.)])", out, re.MULTILINE)  # no rule, list, heading


def test_inert_markdown_still_reads_as_text() -> None:
    # Only what Obsidian would act on is escaped: `#` after a letter is no tag, one `%` no
    # comment, `*emphasis*` only formatting (`C\\# 12: 50\\% faster` read badly).
    text = "GitHub's new feature (beta): 50% faster"
    assert inert_markdown(text) == text
    assert inert_markdown("C# 12: *preview*, 3 = 3") == "C# 12: *preview*, 3 = 3"
    assert inert_markdown("#tag and %%c%% ==h==") == "\\#tag and \\%\\%c\\%\\% \\=\\=h\\=\\="
    assert inert_markdown("$5 or $6") == "\\$5 or \\$6"  # a pair could open math
    assert inert_markdown("AT&T &amp;") == "AT&T \\&amp;"  # an entity name reads as written
    assert inert_markdown("a < b > c") == "a &lt; b &gt; c"
    assert inert_markdown("1. first\n- item") == "1\\. first\n\\- item"
    assert inert_markdown("C:\\path") == "C:\\\\path"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("`~<%>[]!=:#$*_-\\ \nab1.|^&")), max_size=80))
def test_inert_markdown_property(value: str) -> None:
    out = inert_markdown(value)
    for live in ("```", "~~~", "<%", "[[", "`", "::", "==", "%%"):
        assert live not in out
    assert "<" not in out and ">" not in out


def _parsed_by_html_parser(value: str) -> str:
    extractor = text_module._TextExtractor()
    extractor.feed(value)
    extractor.close()
    return "".join(extractor.parts)


def _collapsed_line_by_line(value: str) -> str:
    """`_collapse` as the rule reads: each line's space runs as one space, stripped."""
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in value.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# Pieces of markup, well-formed and not, that html.parser reads in different ways.
_MARKUP = st.sampled_from(
    [
        "<p>",
        "</p>",
        "<P CLASS='x'>",
        "<br/>",
        "<br />",
        "<hr/ >",
        '<div\tid="a b">',
        "</div >",
        "</ div>",
        '<p class="a"/>',
        "<a href=x>",
        '<a href="x"title="y">',
        '<img alt="a > b">',
        '<img alt="<b>">',
        '<p\xa0class="x">',
        "<p\x0bx>",
        "<h1>",
        "</H1>",
        "<li>",
        "<span>",
        "</span>",
        "<svg>",
        "</svg>",
        "<iframe/>",
        "<noscript>",
        "</noscript>",
        "<template>",
        "</template>",
        "<object>",
        "</object>",
        "<script>",
        "</script>",
        "<script>x = 1 < 2</script>",
        "<script>a</script >",
        "<style>p {}</style>",
        '<STYLE type="text/css">b{}</Style>',
        "<style/>",
        "<style>a</ſtyle>",
        "<script>a</script>",
        "<!-- c -->",
        "<!---->",
        "<!-->",
        "<!--->",
        "<!-- a -- b -->",
        "<!-- a --!>",
        "<!--a- -->",
        "<!-- <p> -->",
        "<!--kg-card-begin: html-->",
        "<!DOCTYPE html>",
        '<!doctype html PUBLIC "-//W3C">',
        "<!DOCTYPE x <y>",
        "<![CDATA[x]]>",
        "<!x>",
        "<?php x ?>",
        "<",
        "<<p>",
        "< p>",
        "</>",
        "</",
        "<p",
        '<a href="x',
        "&amp;",
        "&",
        "&#",
        "&#38;",
        "&#x26",
        "&lt;p&gt;",
        "&nbsp;",
        "&notit;",
        "&am",
        "&#1234567890;",
    ]
)
_TEXT = st.text(st.sampled_from(list("ab \n\t\r\x0b\xa0\u2028-;>=\"'/é\u202e")), max_size=6)


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.one_of(_MARKUP, _TEXT), max_size=12))
def test_simple_markup_reads_as_html_parser_reads_it(pieces: list[str]) -> None:
    value = "".join(pieces)
    simple = text_module._simple_markup_text(value)
    if simple is not None:
        assert simple == _parsed_by_html_parser(value)
    assert text_module.html_to_text(value) == _parsed_by_html_parser(value)


def test_feed_markup_takes_the_simple_reading() -> None:
    value = (
        '<!DOCTYPE html><p class="lead">Hello&nbsp;<b>world</b><br/><img src="x.png" /></p>'
        "<!--kg-card-begin: markdown--><style>p {}</style><ul><li>one</li></ul>"
    )
    assert text_module._simple_markup_text(value) == _parsed_by_html_parser(value)
    assert text_module._simple_markup_text(value) == "\nHello\xa0world\n\n\n\none\n\n"
    assert text_module._simple_markup_text("a <b") is None  # html.parser reads it


@settings(max_examples=3000, deadline=None)
@given(st.text(st.sampled_from(list("ab \n\t\r\x0b\x1c\x85\xa0\u2028\u200b\u202e\U0001f468"))))
def test_collapse_and_invisible_characters_as_line_by_line(value: str) -> None:
    stripped = text_module._strip_invisible(value)
    assert stripped == "".join(text_module._strip_invisible(ch) for ch in value)  # runs cut anyhow
    assert text_module._collapse(stripped) == _collapsed_line_by_line(stripped)
