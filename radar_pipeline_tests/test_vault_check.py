"""The two notes of a vault as models: a new Signal note is written through `SignalNote` and
is what its published schema says; notes of every earlier layout the code reads still validate
and are indexed; `radar vault check` lists the keys a person edited into an invalid shape and
rewrites nothing. Real `radar` commands on a temp vault, DuckDB file and Dagster instance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from radar_pipeline.cli import main
from radar_pipeline.core.contract.notes import SignalNote
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.contract_schema import schema_path
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source

AS_OF = "2026-11-30T12:00:00Z"
ITEMS = [
    {
        "title": "C# 12: 50% faster, *preview* &amp; more",
        "guid": "item-1",
        "link": "https://example.com/posts/one?utm_source=x",
        "pubDate": "Mon, 30 Nov 2026 09:30:00 GMT",
        "description": "Up to 50% faster. See #perf and ==notes==.",
    },
    {"title": "Undated", "guid": "item-2", "link": "https://example.com/posts/two"},
]

# The first layout (the project's first commit): no `identityVersion`, `simhash` or `itemUrl`
# (the index has always read a note without them), none of the Obsidian keys (`aliases`,
# `source`, `collectedOn`, `observedOn`), `duplicateCandidateOf` a plain Signal id.
OLDEST = """---
entityType: signal
schemaVersion: 1
id: 20261101T080000Z-0123456789abcdef
title: An item of the first release
sourceId: radar-fixture
sourceItemId: https://example.com/first
sourceRecord: Radar/Sources/radar-fixture.md
requestedUrl: https://example.com/feed.xml
canonicalUrl: https://example.com/first
collectionMethod: rss
fetchedAt: '2026-11-01T08:00:00Z'
httpStatus: 200
validationState: valid-with-warnings
validationNotes:
- feed-ill-formed
observedAt: '2026-11-01T07:00:00Z'
observedField: published
observationKind: rss-observation
publishedAt: null
contentHash: {hash}
duplicateCandidateOf: 20261031T080000Z-fedcba9876543210
analysisState: pending
tags:
- radar/signal
- radar/source/radar-fixture
---

# An item of the first release

A summary.

*Collected by Radar from `radar-fixture`; the text above is the feed's summary, kept as data.*
"""
# The layout before the Obsidian keys: the identity keys, no `aliases`/`source`/dates.
BEFORE_OBSIDIAN = """---
entityType: signal
schemaVersion: 1
id: 20261102T080000Z-00000000000000aa
title: Before the links
sourceId: radar-fixture
sourceItemId: '42'
sourceRecord: Radar/Sources/radar-fixture.md
requestedUrl: https://example.com/feed.xml
itemUrl: http://example.com/42
canonicalUrl: https://example.com/42
collectionMethod: rss
fetchedAt: '2026-11-02T08:00:00Z'
httpStatus: null
validationState: valid
validationNotes: []
observedAt: null
observedField: null
observationKind: rss-observation
publishedAt: null
contentHash: {hash}
simhash: 00ff00ff00ff00ff
identityVersion: 1
duplicateCandidateOf: null
analysisState: pending
tags:
- radar/signal
---

# Before the links

_No summary in the feed._

*Collected by Radar from `radar-fixture`; the text above is the feed's summary, kept as data.*
"""


def _radar(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main([*args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_path(name).read_text("utf-8")))


def _collected(vault: Path, capsys: pytest.CaptureFixture[str]) -> list[Path]:
    write_fixture_source(vault, "dotnet-blog", rss(ITEMS))
    code, report = _radar(capsys, "collect", "--all", "--as-of", AS_OF)
    assert (code, report["created"]) == (0, 2), report
    return signal_files(vault)


def test_a_new_note_is_its_model_and_its_published_schema(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    signal_schema, source_schema = _schema("signal-note"), _schema("source-note")
    for path in _collected(vault, capsys):
        fm = read_signal_frontmatter(path)
        # Written through the model: reading it back and writing it again gives the same keys,
        # in the same order, with the same values.
        assert list(SignalNote.model_validate(fm).frontmatter().items()) == list(fm.items())
        assert [e.message for e in signal_schema.iter_errors(fm)] == []
        assert SignalNote.model_validate(fm).id == path.stem
    source, _body = split_frontmatter((vault / "Radar/Sources/dotnet-blog.md").read_text())
    assert source["lastSuccessAt"] == AS_OF  # the health keys the collection wrote
    assert [e.message for e in source_schema.iter_errors(source)] == []
    code, checked = _radar(capsys, "vault", "check")
    assert (code, checked) == (0, {"sources": 1, "signals": 2, "invalid": []})


def test_notes_of_every_earlier_layout_validate_and_are_indexed(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    folder = vault / "Radar/Signals"
    folder.mkdir(parents=True)
    oldest = folder / "20261101T080000Z-0123456789abcdef.md"
    oldest.write_text(OLDEST.replace("{hash}", "a" * 64), encoding="utf-8")
    before = folder / "20261102T080000Z-00000000000000aa.md"
    before.write_text(BEFORE_OBSIDIAN.replace("{hash}", "b" * 64), encoding="utf-8")
    files = {p: p.read_bytes() for p in (oldest, before)}

    note = SignalNote.model_validate(read_signal_frontmatter(oldest))
    assert (note.identity_version, note.simhash, note.item_url, note.aliases) == (None,) * 4
    assert note.duplicate_candidate_of == "20261031T080000Z-fedcba9876543210"
    signal_schema = _schema("signal-note")
    for path in files:
        assert [e.message for e in signal_schema.iter_errors(read_signal_frontmatter(path))] == []
    code, checked = _radar(capsys, "vault", "check")
    assert (code, checked["signals"], checked["invalid"]) == (0, 2, [])
    code, rebuilt = _radar(capsys, "index", "rebuild")
    assert (code, rebuilt["indexed"], rebuilt["unreadable"]) == (0, 2, [])
    assert {p: p.read_bytes() for p in files} == files


def test_vault_check_lists_each_invalid_key_and_rewrites_nothing(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    first, second = _collected(vault, capsys)
    text = first.read_text(encoding="utf-8")
    edited = text.replace("httpStatus: 200", "httpStatus: two hundred")
    edited = "\n".join(line for line in edited.split("\n") if not line.startswith("contentHash:"))
    first.write_text(edited, encoding="utf-8")
    second.write_text("A person replaced the whole note.\n", encoding="utf-8")
    source = vault / "Radar/Sources/dotnet-blog.md"
    source.write_text(source.read_text().replace("priority: normal", "priority: urgent"))
    files = {p: p.read_bytes() for p in vault.rglob("*") if p.is_file()}

    code, checked = _radar(capsys, "vault", "check")

    assert code == 1
    found = {(n["path"], n["kind"], n["key"]): n["reason"] for n in checked["invalid"]}
    rel = {p: p.relative_to(vault).as_posix() for p in (first, second, source)}
    assert set(found) == {
        (rel[first], "signal", "httpStatus"),
        (rel[first], "signal", "contentHash"),
        (rel[second], "signal", "(frontmatter)"),
        (rel[source], "source", "priority"),
    }
    assert found[(rel[first], "signal", "contentHash")] == "is missing"
    assert "'two hundred'" in found[(rel[first], "signal", "httpStatus")]
    assert "'urgent'" in found[(rel[source], "source", "priority")]
    assert "no frontmatter" in found[(rel[second], "signal", "(frontmatter)")]
    assert {p: p.read_bytes() for p in vault.rglob("*") if p.is_file()} == files
    # The plain output names each one too, and the same exit code.
    assert main(["vault", "check"]) == 1
    printed = capsys.readouterr().out
    assert f"INVALID {rel[source]}: `priority`" in printed
    assert "1 Source notes, 2 Signal notes, 3 invalid" in printed
