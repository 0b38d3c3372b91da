"""Third-party text is data: turn feed HTML into bounded plain text, and plain text into inert
Obsidian Markdown that cannot run code or queries (dataview, templater, HTML) or add links/tags.
"""

from __future__ import annotations

import re
import unicodedata
from html import unescape
from html.parser import HTMLParser

TRUNCATION_MARKER = " […truncated]"

# Elements whose text is never content (code, styling, embedded documents).
_SKIP_CONTENT = frozenset({"script", "style", "noscript", "template", "iframe", "object", "svg"})
_BLOCK = frozenset(
    {"p", "div", "br", "li", "ul", "ol", "tr", "table", "blockquote", "pre", "hr", "section"}
    | {"article", "header", "footer", "h1", "h2", "h3", "h4", "h5", "h6", "dd", "dt", "figure"}
)
_NEWLINES = frozenset("\n\r\x0b\x0c\x85\u2028\u2029")
_KEEP_FORMAT = frozenset("\u200c\u200d")  # ZWNJ/ZWJ shape scripts and emoji; not directional
_NOT_PRINTABLE_ASCII = re.compile(r"[^\x20-\x7e]+")
# What `_strip_invisible` looks at: `\n` stays `\n`, so runs of it need no look-up either.
_TO_CLEAN = re.compile(r"[^\x20-\x7e\n]+")
_SPACE_RUNS = re.compile(r" {2,}")
_BLANK_RUNS = re.compile(r"\n{3,}")
# Markup html.parser reads one way only: start tags whose attributes are all quoted (or bare
# names), end tags without attributes, names of letters and digits, whitespace as it counts
# it; comments without `--` inside, a DOCTYPE without `<`, script and style whose text holds
# no `<` and ends in a plain end tag. A fragment holding nothing else (no bare `<`, no other
# declaration) gives the same data and tags as `_TextExtractor` (test_text: the two agree).
_WS = "[ \t\n\r\f]"
_SIMPLE_START = re.compile(
    rf"<([a-zA-Z][a-zA-Z0-9]*)(?:{_WS}+[a-zA-Z_:][-a-zA-Z0-9_:.]*"
    rf"(?:{_WS}*={_WS}*(?:\"[^\"]*\"|'[^']*'))?)*{_WS}*(/?)>"
)
_SIMPLE_END = re.compile(rf"</([a-zA-Z][a-zA-Z0-9]*){_WS}*>")
_SIMPLE_COMMENT = re.compile(r"<!--(?:[^->][^-]*(?:-[^-]+)*)?-->")
_SIMPLE_DOCTYPE = re.compile(r"<![dD][oO][cC][tT][yY][pP][eE][^<>]*>")
# html.parser's CDATA content elements: their text runs to the end tag, unread.
_RAW_TEXT_END = {
    "script": re.compile(r"[^<]*</[sS][cC][rR][iI][pP][tT]>"),
    "style": re.compile(r"[^<]*</[sS][tT][yY][lL][eE]>"),
}


class _TextExtractor(HTMLParser):
    """Collect character data, skipping non-content elements; entities are unescaped."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_CONTENT:
            self._skip_depth += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_CONTENT:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def html_to_text(value: str) -> str:
    """Return the character data of an HTML fragment (tags stripped, entities unescaped)."""
    if "<" not in value:
        return unescape(value)  # no tag: the parser hands it back as one run of data
    simple = _simple_markup_text(value)
    if simple is not None:
        return simple
    extractor = _TextExtractor()
    extractor.feed(value)
    extractor.close()
    return "".join(extractor.parts)


def _simple_markup_text(value: str) -> str | None:
    """What `_TextExtractor` makes of `value` when all its markup is simple (`_SIMPLE_START`,
    `_SIMPLE_END`), read without html.parser's per-tag work; None for any other markup.

    As html.parser does: the data between two tags is unescaped as one run, a start tag
    ending in `/>` is a start-end tag, tag names are lower-cased."""
    parts: list[str] = []
    skip_depth = 0
    pos = 0
    while True:
        j = value.find("<", pos)
        end = len(value) if j < 0 else j
        if pos < end and not skip_depth:
            parts.append(unescape(value[pos:end]))
        if j < 0:
            return "".join(parts)
        if value.startswith("<!", j):
            match = (_SIMPLE_COMMENT if value.startswith("<!--", j) else _SIMPLE_DOCTYPE).match(
                value, j
            )
            if match is None:
                return None  # comments and declarations say nothing: only where they end counts
        elif value.startswith("</", j):
            match = _SIMPLE_END.match(value, j)
            if match is None:
                return None
            tag = match.group(1).lower()
            if tag in _SKIP_CONTENT:
                skip_depth = max(0, skip_depth - 1)
            elif tag in _BLOCK:
                parts.append("\n")
        else:
            match = _SIMPLE_START.match(value, j)
            if match is None:
                return None
            tag = match.group(1).lower()
            raw_text_end = _RAW_TEXT_END.get(tag)
            if raw_text_end is not None:
                # Skipped content (both are in _SKIP_CONTENT): its text and end tag say nothing.
                match = None if match.group(2) else raw_text_end.match(value, match.end())
                if match is None:
                    return None
            elif match.group(2):  # a start-end tag: `_TextExtractor.handle_startendtag`
                if tag in _BLOCK:
                    parts.append("\n")
            elif tag in _SKIP_CONTENT:
                skip_depth += 1
            elif tag in _BLOCK:
                parts.append("\n")
        pos = match.end()


def plain_text(value: str, max_len: int, *, html: bool = True) -> str:
    """Return `value` as clean, bounded plain text.

    HTML (unless `html=False`) loses its tags and script/style content and has its entities
    unescaped; control, format and bidi-override characters are removed; whitespace is collapsed
    (paragraph breaks kept as one blank line); longer text ends in " […truncated]" and the
    result is never longer than `max_len`.
    """
    text = html_to_text(value) if html else value
    return _truncate(_collapse(_strip_invisible(text)), max_len)


def one_line(value: str, max_len: int, *, html: bool = True) -> str:
    """Return `plain_text` on a single line (for titles)."""
    text = html_to_text(value) if html else value
    flat = " ".join(_strip_invisible(text).split())
    return _truncate(flat, max_len)


def _strip_invisible(text: str) -> str:
    # Printable ASCII and `\n` need no look-up; only runs of other characters go through the
    # slow path (each character is replaced on its own, so how the runs are cut changes
    # nothing).
    return _TO_CLEAN.sub(_clean_run, text)


def _clean_run(match: re.Match[str]) -> str:
    out: list[str] = []
    for ch in match.group():
        if ch in _NEWLINES:
            out.append("\n")
        elif ch.isspace():
            out.append(" ")
        elif not _is_invisible(ch):
            out.append(ch)
    return "".join(out)


def _is_invisible(ch: str) -> bool:
    # Cc: controls; Cf: bidi overrides/isolates/marks, zero-width and tag chars; Cs: surrogates.
    category = unicodedata.category(ch)
    if category == "Cf":
        return ch not in _KEEP_FORMAT
    return category in ("Cc", "Cs") or (ord(ch) & 0xFFFE) == 0xFFFE


def _collapse(text: str) -> str:
    """Each line's spaces collapsed and stripped, blank runs as one blank line, the whole
    stripped; `text` is `_strip_invisible`'s, so its only whitespace is " " and "\n"."""
    spaced = _SPACE_RUNS.sub(" ", text).replace(" \n", "\n").replace("\n ", "\n")
    return _BLANK_RUNS.sub("\n\n", spaced).strip()


def _truncate(text: str, max_len: int) -> str:
    if len(text) <= max_len:
        return text
    if max_len <= len(TRUNCATION_MARKER):
        return text[:max_len]
    return text[: max_len - len(TRUNCATION_MARKER)].rstrip() + TRUNCATION_MARKER


# Characters a raw-text scanner (Obsidian links/embeds, Templater, Dataview) or HTML would act
# on become entities: they render as the same character but the raw note never contains them.
_ENTITY = {"<": "&lt;", ">": "&gt;", "[": "&#91;", "]": "&#93;", "`": "&#96;"}
# Everything else is escaped only where Obsidian would act on it, so `C# 12: 50% faster` and
# `*preview*` stay as written: a backslash is always doubled (it would escape what follows); a
# run of two or more `=`, `%` or `~` (highlight, comment, strike or fence) has each character
# backslash-escaped; `#` only where it would open a tag or a heading; `$` only when the text
# holds two (math needs a pair); `&` only before an entity name; `^` only as a block id; `|`
# only in a table's delimiter row; `:` only in a Dataview `key:: value` field; a line's first
# character when it would start a list, a rule or a heading.
_ESCAPES = str.maketrans(_ENTITY)
_RUNS = re.compile(r"([=%~])\1+")
# A tag is `#` then a letter, digit, `_`, `-` or `/` after a space or punctuation (`C#`, `#[cfg]`
# are none); a heading is `#` at the line's start before a space. `&#91;` is one of ours.
_TAG_OR_HEADING = re.compile(r"(?:^|(?<=[^\w\\&]))#(?=[\w/-])|^#(?=[\s#]|$)")
_ENTITY_LIKE = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
_BLOCK_ID = re.compile(r"(?:^|(?<=\s))\^(?=[0-9A-Za-z-]+\s*$)")
_DELIMITER_ROW = re.compile(r"^[|:\-\s]*\|[|:\-\s]*$")
_DOUBLE_COLON = re.compile(r":(?=:)")
_LINE_START = re.compile(r"^(?:[-+*](?=\s|$)|[-_*=]{3,}|=+\s*$)")
_ORDERED_MARKER = re.compile(r"^(\d+)([.)])")


def inert_markdown(value: str) -> str:
    """Return plain text escaped so that, as an Obsidian note body, it only ever shows as text.

    No code fences or spans (so no dataview/dataviewjs block or inline query), no Templater
    `<%`, no HTML, no wikilinks/embeds or Markdown links, no tags, inline fields (`::`),
    highlights, comments, math, lists or headings; rendered, it reads as the original text,
    and the raw note escapes only what Obsidian would act on.
    """
    math = value.count("$") >= 2
    return "\n".join(_escape_line(line.strip(), math) for line in value.split("\n"))


def _escape_line(line: str, math: bool) -> str:
    escaped = line.replace("\\", "\\\\")
    if "&" in escaped:
        escaped = _ENTITY_LIKE.sub(r"\\&", escaped)  # `&amp;` in the text reads as `&amp;`
    escaped = escaped.translate(_ESCAPES)
    escaped = _RUNS.sub(lambda m: "".join("\\" + ch for ch in m.group()), escaped)
    if "#" in escaped:
        escaped = _TAG_OR_HEADING.sub(r"\\#", escaped)
    if math:
        escaped = escaped.replace("$", "\\$")
    if "^" in escaped:
        escaped = _BLOCK_ID.sub(r"\\^", escaped)
    if "|" in escaped and _DELIMITER_ROW.match(escaped):
        escaped = escaped.replace("|", "\\|")
    if "::" in escaped:
        escaped = _DOUBLE_COLON.sub(":\\\\", escaped)  # breaks Dataview `key:: value` fields
    if _LINE_START.match(escaped):
        escaped = "\\" + escaped  # would start a list, a rule or a setext heading
    match = _ORDERED_MARKER.match(escaped)
    if match:  # an ordered-list marker
        escaped = f"{match.group(1)}\\{match.group(2)}{escaped[match.end() :]}"
    return escaped


# Sequences that act even inside a property value: Obsidian links/embeds in properties,
# Templater commands (it scans whole new files), HTML a raw-text consumer might render.
_LIVE_IN_PROPERTY = re.compile(
    r"\[\[|\]\]|<(?=\s*(?:%|/?\s*(?:script|iframe|object|embed|style|img|svg)\b))",
    re.IGNORECASE,
)
_PROPERTY_LOOKALIKE = {"[[": "\uff3b\uff3b", "]]": "\uff3d\uff3d", "<": "\uff1c"}


def inert_property(value: str) -> str:
    """Return a frontmatter string value that no Obsidian feature or plugin acts on.

    Plain values come back unchanged. Otherwise control, format and bidi characters go,
    line breaks become spaces (a multi-line YAML scalar could start a fence line), and `[[`,
    `]]`, `<%` and `<script`-like tags get full-width brackets: shown almost alike, never a
    link, embed, Templater command or tag.
    """
    if _NOT_PRINTABLE_ASCII.search(value) is None and _LIVE_IN_PROPERTY.search(value) is None:
        return value
    flat = " ".join(_strip_invisible(value).split())
    return _LIVE_IN_PROPERTY.sub(lambda m: _PROPERTY_LOOKALIKE[m.group()], flat)


# Obsidian cannot link to a note whose name holds these (nor would a link survive them).
_NOT_IN_LINK = re.compile(r"[\[\]|#^<>%`\\:\x00-\x1f\x7f]")


def wikilink(note_name: str) -> str | None:
    """`[[note_name]]` for a property that Obsidian shows as a link, or None when the name
    (a file name in the vault, never feed text) holds anything a link cannot carry."""
    if not note_name.strip() or _NOT_IN_LINK.search(note_name) or note_name != note_name.strip():
        return None
    return f"[[{note_name}]]"


# Kept in a link destination: RFC 3986's unreserved and reserved characters minus those a raw
# note scanner or Markdown acts on (`[`, `]`, `(`, `)`, `$`, `*`); a `%` only as an escape.
_URL_KEEP = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#@!&'+,;="
)
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def link_destination(url: str) -> str | None:
    """`url` percent-encoded for a Markdown link destination (the same address, nothing in it
    that Obsidian, Templater or Dataview act on), or None unless it is an http(s) URL."""
    if not re.match(r"(?i)https?://[^/\s]", url):
        return None
    out: list[str] = []
    i = 0
    while i < len(url):
        ch = url[i]
        if ch == "%" and _PERCENT_ESCAPE.match(url, i):
            out.append(url[i : i + 3].upper())
            i += 3
            continue
        out.append(ch if ch in _URL_KEEP else "".join(f"%{b:02X}" for b in ch.encode()))
        i += 1
    return "".join(out)
