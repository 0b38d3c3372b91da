"""Frontmatter: reading, and updates that change only the values asked for."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.frontmatter import (
    FrontmatterUpdate,
    apply_updates,
    format_scalar,
    split_frontmatter,
    update_frontmatter_keys,
)
from radar_pipeline.core.registry.sources import load_registry

# A Source as a person writes it: comments, blank lines, odd spacing, both quote styles,
# an unknown key, an empty value and a Markdown body that itself contains `---` and `key: x`.
PERSONAL = """---
# Source: OpenAI news (owner: platform team)
entityType: source
schemaVersion: 1
id: openai-news
name: "OpenAI News"   # display name
url: 'https://openai.com/news/rss.xml'

role: primary
sourceType: official
authorityScore: 0.9
legalAssessment: approved
priority: critical
collectionMethod: rss
enabled: true
cadence: PT6H
reviewer: Ana   # not part of the contract
lastAttemptAt:
lastSuccessAt: '2026-01-01T00:00:00Z'
errorState: timeout  # set by the pipeline
etag: "W/\\"old\\""
---
# Usage policy

Headlines only. key: value lines here are body text.
---
lastAttemptAt: not frontmatter
"""

UPDATED = """---
# Source: OpenAI news (owner: platform team)
entityType: source
schemaVersion: 1
id: openai-news
name: "OpenAI News"   # display name
url: 'https://openai.com/news/rss.xml'

role: primary
sourceType: official
authorityScore: 0.9
legalAssessment: approved
priority: critical
collectionMethod: rss
enabled: true
cadence: PT6H
reviewer: Ana   # not part of the contract
lastAttemptAt: '2026-02-03T04:05:06Z'
lastSuccessAt: '2026-02-03T04:05:07Z'
errorState:  # set by the pipeline
etag: "W/\\"new: #1\\""
httpStatus: 200
---
# Usage policy

Headlines only. key: value lines here are body text.
---
lastAttemptAt: not frontmatter
"""

UPDATES: dict[str, str | int | None] = {
    "lastAttemptAt": "2026-02-03T04:05:06Z",
    "lastSuccessAt": "2026-02-03T04:05:07Z",
    "errorState": None,
    "etag": 'W/"new: #1"',
    "httpStatus": 200,
}


def _write(tmp_path: Path, text: str, newline: str = "\n") -> Path:
    path = tmp_path / "source.md"
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


def test_split_keeps_timestamps_as_text_and_yes_as_text() -> None:
    data, body = split_frontmatter(
        "---\nat: 2026-01-01T00:00:00Z\nday: 2026-01-01\nenabled: yes\nok: true\n---\nbody\n"
    )
    assert data == {"at": "2026-01-01T00:00:00Z", "day": "2026-01-01", "enabled": "yes", "ok": True}
    assert body == "body\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no delimiter\n", "no frontmatter"),
        ("---\nid: x\n", "no frontmatter"),
        ("---\nid: [x\n---\n", "broken frontmatter"),
        ("---\n- a\n- b\n---\n", "broken frontmatter"),
        ("---\nid: a\nid: b\n---\n", "broken frontmatter: key 'id' appears twice"),
    ],
)
def test_split_refuses(text: str, message: str) -> None:
    with pytest.raises(RegistryError, match=message):
        split_frontmatter(text)


def test_update_changes_only_the_values(tmp_path: Path) -> None:
    path = _write(tmp_path, PERSONAL)
    update_frontmatter_keys(path, UPDATES)
    assert path.read_text(encoding="utf-8") == UPDATED
    assert not [p for p in tmp_path.iterdir() if p.name != "source.md"]  # no temp file left


def test_update_appends_a_missing_key(tmp_path: Path) -> None:
    path = _write(tmp_path, "---\nid: a-b\n# last comment\n---\nbody\n")
    update_frontmatter_keys(path, {"lastModified": "Tue, 01 Jan 2026 00:00:00 GMT", "x": ""})
    expected = (
        "---\nid: a-b\n# last comment\n"
        "lastModified: 'Tue, 01 Jan 2026 00:00:00 GMT'\nx:\n---\nbody\n"
    )
    assert path.read_text(encoding="utf-8") == expected


def test_update_keeps_crlf(tmp_path: Path) -> None:
    path = _write(tmp_path, PERSONAL, "\r\n")
    update_frontmatter_keys(path, UPDATES)
    assert path.read_bytes() == UPDATED.replace("\n", "\r\n").encode("utf-8")


def test_update_keeps_bom_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.md"
    path.write_bytes(b"\xef\xbb\xbf---\nhttpStatus: 304\n---\n")
    path.chmod(0o640)
    update_frontmatter_keys(path, {"httpStatus": 200})
    assert path.read_bytes() == b"\xef\xbb\xbf---\nhttpStatus: 200\n---\n"
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_concurrent_edit_is_kept_and_the_update_reapplied(tmp_path: Path) -> None:
    path = _write(tmp_path, PERSONAL)
    person = PERSONAL.replace("Headlines only.", "Headlines only, edited by Ana.")
    attempt = FrontmatterUpdate.read(path, UPDATES)
    path.write_text(person, encoding="utf-8")  # the person's save lands between read and write

    assert attempt.apply() is False  # nothing written over the person's save
    assert path.read_text(encoding="utf-8") == person
    update_frontmatter_keys(path, UPDATES)  # the next attempt applies to the new content
    assert path.read_text(encoding="utf-8") == UPDATED.replace(
        "Headlines only.", "Headlines only, edited by Ana."
    )


def test_a_file_that_keeps_changing_is_never_overwritten(tmp_path: Path) -> None:
    path = _write(tmp_path, PERSONAL)
    for edit in range(3):
        attempt = FrontmatterUpdate.read(path, UPDATES)
        path.write_text(PERSONAL + f"edit {edit}\n", encoding="utf-8")
        assert attempt.apply() is False
    assert path.read_text(encoding="utf-8") == PERSONAL + "edit 2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["source.md"]  # no temp file left


def test_hundred_updates_change_only_the_values(tmp_path: Path) -> None:
    path = _write(tmp_path, PERSONAL)
    for n in range(100):
        update_frontmatter_keys(
            path,
            {**UPDATES, "httpStatus": 200 + n % 2, "etag": f'W/"v{n}"', "errorState": "timeout"},
        )
    expected = (
        UPDATED.replace('"W/\\"new: #1\\""', '"W/\\"v99\\""')
        .replace("httpStatus: 200", "httpStatus: 201")
        .replace("errorState:  #", "errorState: timeout  #")
    )
    assert path.read_text(encoding="utf-8") == expected


def test_round_trip_loads_as_valid_source(tmp_path: Path) -> None:
    folder = tmp_path / "Radar" / "Sources"
    folder.mkdir(parents=True)
    path = folder / "openai-news.md"
    path.write_text(PERSONAL, encoding="utf-8")
    update_frontmatter_keys(path, {**UPDATES, "blockedReason": "publisher asked us to stop"})
    snapshot = load_registry(tmp_path)
    assert snapshot.issues == ()
    source = snapshot.sources[0].source
    assert source.etag == 'W/"new: #1"'
    assert source.http_status == 200
    assert source.error_state is None
    assert source.last_attempt_at is not None
    assert source.last_attempt_at.isoformat() == "2026-02-03T04:05:06+00:00"
    assert source.blocked_reason == "publisher asked us to stop"
    assert not source.is_eligible


@pytest.mark.parametrize(
    "text",
    [
        "---\netag:\n  nested: x\n---\n",
        "---\netag: |\n  a\n  b\n---\n",
        "---\netag: 'two\n  lines'\n---\n",
        "---\nold: &a x\netag: *a\n---\n",
        "---\netag: [x\n---\n",
    ],
)
def test_update_refuses_what_it_cannot_rewrite_in_place(tmp_path: Path, text: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(RegistryError):
        update_frontmatter_keys(path, {"etag": "y"})
    assert path.read_text(encoding="utf-8") == text


def test_update_refuses_a_symlink(tmp_path: Path) -> None:
    real = _write(tmp_path, "---\netag: x\n---\n")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    with pytest.raises(RegistryError, match="symlink"):
        update_frontmatter_keys(link, {"etag": "y"})


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("timeout", "timeout"),
        ("2026-01-01T00:00:00Z", "'2026-01-01T00:00:00Z'"),
        ("2026-01-01", "'2026-01-01'"),
        ("yes", "'yes'"),
        ("null", "'null'"),
        ("12", "'12'"),
        ("a: b", "'a: b'"),
        ("#tag", "'#tag'"),
        ("x #y", "'x #y'"),
        ("- item", "'- item'"),
        ('W/"abc"', "'W/\"abc\"'"),
        ("it's", "'it''s'"),
        ("line\nbreak", '"line\\nbreak"'),
        (None, ""),
        ("", ""),
        (304, "304"),
    ],
)
def test_format_scalar(value: str | int | None, text: str) -> None:
    assert format_scalar(value) == text


@settings(max_examples=300, deadline=None)
@given(value=st.text(st.characters(exclude_categories=("Cs",)), max_size=40))
def test_any_text_value_round_trips_and_other_bytes_stay(value: str) -> None:
    updated = apply_updates(PERSONAL, {"etag": value, "errorState": value})
    data, body = split_frontmatter(updated)
    expected = value or None
    assert (data["etag"], data["errorState"]) == (expected, expected)
    assert body == PERSONAL.split("---\n", 2)[2]
    # Outside the two values, every line is the line it was.
    kept = [ln for ln in updated.split("\n") if not ln.startswith(("etag:", "errorState:"))]
    assert kept == [
        ln for ln in PERSONAL.split("\n") if not ln.startswith(("etag:", "errorState:"))
    ]


_MARK_TEXTS = [
    "a: 1\nname: Café ünïcode 日本語 😀\nb: 'x'\nc:\nd: \"é\"\n",
    "k: v\r\nname: é\r\nz: 2\r\n",
    "# comment é\nname: |\n  multi é\n  line\nx: 1\n",
    "anchor: &a 1\nalias: *a\nflow: [1, 2]\nnested:\n  k: v\nlast: 'it''s'\n",
    "a: 1  # note é\nb: ~\nc: 'x' # q\n\"quoted key\": v\n",
]


@pytest.mark.parametrize("text", _MARK_TEXTS)
def test_updates_read_the_marks_the_pure_python_parser_reads(text: str) -> None:
    """Updates edit at the marks of libyaml's parser: the same character offsets and quote
    styles as the pure-Python one's (a plain value's style aside: None there, "" here)."""
    import yaml

    from radar_pipeline.core import frontmatter

    def marks(loader: type[yaml.SafeLoader]) -> list[tuple[object, ...]]:
        root = yaml.compose(text, Loader=loader)
        return [
            (k.value, k.end_mark.index, v.start_mark.index, v.end_mark.index, _style(v))
            for k, v in root.value
        ]

    assert marks(frontmatter._READ_LOADER) == marks(frontmatter._FrontmatterLoader)


def test_an_update_after_a_byte_order_mark_inside_the_frontmatter_edits_the_right_bytes() -> None:
    """libyaml skips a leading BOM and counts from after it; such a text is read with the
    pure-Python parser, whose marks count it."""
    text = "---\n\ufeffid: s1\nlastCheckedAt: old\n---\nbody\n"
    assert apply_updates(text, {"lastCheckedAt": "new"}) == text.replace("old", "new")


def _style(node: object) -> object:
    return getattr(node, "style", None) or getattr(node, "flow_style", None) or None
