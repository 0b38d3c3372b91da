"""Third-party text is data: plain text is clean and bounded, Markdown bodies are inert."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
