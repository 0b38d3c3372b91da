"""The Source Registry: valid files become Sources, every bad file becomes a coded issue."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.registry import sources
from radar_pipeline.core.registry.sources import (
    RegistrySnapshot,
    Source,
    load_registry,
)
from radar_pipeline.core.vault.health import HealthUpdate, write_health

VALID = {
    "entityType": "source",
    "schemaVersion": "1",
    "id": "openai-news",
    "name": "OpenAI News",
    "url": "https://openai.com/news/rss.xml",
    "role": "primary",
    "sourceType": "official",
    "authorityScore": "0.9",
    "legalAssessment": "approved",
    "priority": "critical",
    "collectionMethod": "rss",
    "enabled": "true",
    "cadence": "PT6H",
}


def _source_text(**changes: str | None) -> str:
    """A Source file; a change of None drops the key, a string is written verbatim."""
    keys = {**VALID, **changes}
    lines = [f"{key}: {value}" for key, value in keys.items() if value is not None]
    return "---\n" + "\n".join(lines) + "\n---\nUsage policy: headlines only.\n"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    (tmp_path / SOURCES_DIR).mkdir(parents=True)
    return tmp_path


def _put(vault: Path, name: str, text: str) -> Path:
    path = vault / SOURCES_DIR / name
    path.write_text(text, encoding="utf-8")
    return path


def _codes(snapshot: RegistrySnapshot, name: str) -> list[str]:
    return [i.code for i in snapshot.issues if i.path == f"Radar/Sources/{name}"]


def test_valid_source_loads_with_defaults_and_typed_values(vault: Path) -> None:
    _put(vault, "openai.md", _source_text(lastSuccessAt="'2026-01-01T02:00:00+02:00'"))
    snapshot = load_registry(vault)
    assert snapshot.issues == ()
    record = snapshot.sources[0]
    assert record.record_path == "Radar/Sources/openai.md"
    assert record.path == (vault / SOURCES_DIR / "openai.md").resolve()
    source = record.source
    assert (source.id, source.authority_score, source.enabled) == ("openai-news", 0.9, True)
    assert (source.min_interval_seconds, source.full_text, source.etag) == (0, "none", None)
    assert source.last_success_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert source.is_eligible
    assert source.scope == "production"


def test_valid_file_beside_invalid_ones_is_still_active(vault: Path) -> None:
    _put(vault, "a-broken.md", "---\nid: [\n---\n")
    _put(vault, "b-good.md", _source_text(id="good-one"))
    _put(vault, "c-bad.md", _source_text(id="bad-one", role="blogger"))
    snapshot = load_registry(vault)
    assert [r.source.id for r in snapshot.sources] == ["good-one"]
    assert snapshot.validation().json_object()["sources"] == [
        {"id": "good-one", "path": "Radar/Sources/b-good.md", "active": True}
    ]
    assert [i.path for i in snapshot.issues] == [
        "Radar/Sources/a-broken.md",
        "Radar/Sources/c-bad.md",
    ]


def test_validation_shape_and_inactive_source(vault: Path) -> None:
    _put(vault, "a.md", _source_text(id="aa", legalAssessment="pending"))
    _put(vault, "b.md", _source_text(id="bb", enabled="false"))
    _put(vault, "z.md", _source_text(id="zz", url="ftp://x"))
    assert load_registry(vault).validation().json_object() == {
        "sources": [
            {"id": "aa", "path": "Radar/Sources/a.md", "active": False},
            {"id": "bb", "path": "Radar/Sources/b.md", "active": False},
        ],
        "issues": [
            {
                "path": "Radar/Sources/z.md",
                "code": "invalid-url",
                "message": "`url` 'ftp://x' must start with http:// or https://: set it to an "
                "absolute http(s) URL (for sourceType: fixture, a vault-relative path)",
            }
        ],
    }


def test_sources_are_sorted_by_id_and_found_by_id(vault: Path) -> None:
    _put(vault, "a.md", _source_text(id="zeta"))
    _put(vault, "b.md", _source_text(id="alpha"))
    snapshot = load_registry(vault)
    assert [r.source.id for r in snapshot.sources] == ["alpha", "zeta"]
    found = snapshot.by_id("zeta")
    assert found is not None
    assert found.record_path == "Radar/Sources/a.md"
    assert snapshot.by_id("missing") is None


def test_unreadable_invalid_utf8(vault: Path) -> None:
    (vault / SOURCES_DIR / "bad.md").write_bytes(b"---\nname: caf\xe9\n---\n")
    snapshot = load_registry(vault)
    assert _codes(snapshot, "bad.md") == ["unreadable"]
    assert "UTF-8" in snapshot.issues[0].message


def test_unreadable_directory_named_md(vault: Path) -> None:
    (vault / SOURCES_DIR / "folder.md").mkdir()
    assert _codes(load_registry(vault), "folder.md") == ["unreadable"]


def test_unreadable_symlink_outside_the_vault_is_not_followed(vault: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.md"
    outside.write_text(_source_text(id="outside"), encoding="utf-8")
    try:
        (vault / SOURCES_DIR / "link.md").symlink_to(outside)
        snapshot = load_registry(vault)
    finally:
        outside.unlink()
    assert snapshot.sources == ()
    assert _codes(snapshot, "link.md") == ["unreadable"]
    assert "outside the vault" in snapshot.issues[0].message


def test_symlink_inside_the_vault_is_read(vault: Path) -> None:
    real = vault / "Shared" / "feed.md"
    real.parent.mkdir()
    real.write_text(_source_text(), encoding="utf-8")
    (vault / SOURCES_DIR / "link.md").symlink_to(real)
    record = load_registry(vault).sources[0]
    assert (record.record_path, record.path) == ("Radar/Sources/link.md", real.resolve())


def test_no_frontmatter(vault: Path) -> None:
    _put(vault, "plain.md", "# Just a note\n")
    assert _codes(load_registry(vault), "plain.md") == ["no-frontmatter"]


def test_broken_frontmatter_names_the_line(vault: Path) -> None:
    _put(vault, "broken.md", "---\nid: ok\nname: a: b\n---\n")
    snapshot = load_registry(vault)
    assert _codes(snapshot, "broken.md") == ["broken-frontmatter"]
    assert "(line 3, column 8)" in snapshot.issues[0].message


def test_missing_key(vault: Path) -> None:
    _put(vault, "s.md", _source_text(cadence=None))
    snapshot = load_registry(vault)
    assert _codes(snapshot, "s.md") == ["missing-key"]
    assert snapshot.issues[0].message.startswith("`cadence` is missing: add `cadence:` with")


def test_unknown_value(vault: Path) -> None:
    _put(vault, "s.md", _source_text(priority="urgent"))
    snapshot = load_registry(vault)
    assert _codes(snapshot, "s.md") == ["unknown-value"]
    assert snapshot.issues[0].message == (
        "`priority` is 'urgent': use one of 'critical', 'high', 'normal' or 'low'"
    )


@pytest.mark.parametrize(
    ("url", "method"),
    [
        ("openai.com/news", "rss"),
        ("https:///no-host", "rss"),
        ("https://user:secret@example.com/feed", "rss"),
        ("https://example.com:99999/feed", "atom"),
        ("https://example.com/a feed", "rss"),
        ("/etc/passwd", "fixture"),
        ("Radar/../../outside.xml", "fixture"),
        ("https://example.com/feed.xml", "fixture"),
    ],
)
def test_invalid_url(vault: Path, url: str, method: str) -> None:
    _put(vault, "s.md", _source_text(url=f"'{url}'", collectionMethod=method))
    snapshot = load_registry(vault)
    assert _codes(snapshot, "s.md") == ["invalid-url"]
    assert "secret" not in snapshot.issues[0].message  # credentials are never echoed


def test_fixture_url_is_a_vault_path(vault: Path) -> None:
    _put(vault, "f.md", _source_text(url="Radar/Fixtures/feed.xml", collectionMethod="fixture"))
    source = load_registry(vault).sources[0].source
    assert source.scope == "fixture"
    assert source.url == "Radar/Fixtures/feed.xml"


@pytest.mark.parametrize(
    "bad_id", ["OpenAI", "a", "-lead", "has space", "123", "'" + "x" * 64 + "'"]
)
def test_invalid_id(vault: Path, bad_id: str) -> None:
    _put(vault, "s.md", _source_text(id=bad_id))
    assert _codes(load_registry(vault), "s.md") == ["invalid-id"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("authorityScore", "3"),
        ("authorityScore", "'0.5'"),
        ("enabled", "yes"),
        ("enabled", "1"),
        ("cadence", "6h"),
        ("cadence", "P1M"),
        ("cadence", "PT0S"),
        ("minIntervalSeconds", "-5"),
        ("lastAttemptAt", "2026-01-01T00:00:00"),
        ("lastAttemptAt", "yesterday"),
        ("httpStatus", "'200'"),
        ("authTokenEnv", "'not a name'"),
        ("name", "''"),
        ("schemaVersion", "true"),
    ],
)
def test_invalid_value(vault: Path, key: str, value: str) -> None:
    _put(vault, "s.md", _source_text(**{key: value}))
    snapshot = load_registry(vault)
    assert _codes(snapshot, "s.md") == ["invalid-value"]
    message = snapshot.issues[0].message
    assert message.startswith(f"`{key}` is ") and ": set it to " in message
    assert "\n" not in message


def test_one_file_lists_every_problem(vault: Path) -> None:
    _put(vault, "s.md", _source_text(id="X", url="nope", role="boss", enabled="maybe", name=None))
    codes = _codes(load_registry(vault), "s.md")
    assert sorted(codes) == [
        "invalid-id",
        "invalid-url",
        "invalid-value",
        "missing-key",
        "unknown-value",
    ]


def test_wrong_entity_type(vault: Path) -> None:
    _put(vault, "s.md", "---\nentityType: signal\nid: 20260101T000000Z-0123456789abcdef\n---\n")
    snapshot = load_registry(vault)
    assert _codes(snapshot, "s.md") == ["wrong-entity-type"]
    assert "entityType: source" in snapshot.issues[0].message


def test_duplicate_id_names_the_first_and_neither_is_active(vault: Path) -> None:
    _put(vault, "b-first.md", _source_text(id="dup"))
    _put(vault, "c-second.md", _source_text(id="dup", name="Copy"))
    _put(vault, "d-third.md", _source_text(id="dup", name="Another copy"))
    _put(vault, "a-other.md", _source_text(id="other"))
    snapshot = load_registry(vault)
    assert [r.source.id for r in snapshot.sources] == ["other"]
    issues = {i.path: i for i in snapshot.issues}
    assert {i.code for i in issues.values()} == {"duplicate-id"}
    assert (
        "already declared in Radar/Sources/b-first.md"
        in issues["Radar/Sources/c-second.md"].message
    )
    assert (
        "already declared in Radar/Sources/b-first.md" in issues["Radar/Sources/d-third.md"].message
    )
    assert "Radar/Sources/c-second.md, Radar/Sources/d-third.md" in (
        issues["Radar/Sources/b-first.md"].message
    )


def test_duplicate_of_an_invalid_declaration_still_counts(vault: Path) -> None:
    # Fixing an unrelated key in one file must not silently switch the other one off or on.
    _put(vault, "a.md", _source_text(id="dup", role="boss"))
    _put(vault, "b.md", _source_text(id="dup"))
    snapshot = load_registry(vault)
    assert snapshot.sources == ()
    assert _codes(snapshot, "b.md") == ["duplicate-id"]
    assert sorted(_codes(snapshot, "a.md")) == ["duplicate-id", "unknown-value"]


def test_only_md_files_directly_in_sources_are_read(vault: Path) -> None:
    _put(vault, "notes.txt", "not a source")
    _put(vault, ".s.md.abc.tmp", _source_text(id="temp"))
    _put(vault, "UPPER.MD", _source_text(id="upper"))
    (vault / SOURCES_DIR / "sub").mkdir()
    _put(vault, "sub/nested.md", _source_text(id="nested"))
    _put(vault, "only.md", _source_text(id="only"))
    snapshot = load_registry(vault)
    assert ([r.source.id for r in snapshot.sources], snapshot.issues) == (["only"], ())


def test_missing_sources_folder_is_an_issue_not_an_exception(tmp_path: Path) -> None:
    snapshot = load_registry(tmp_path)
    assert [(i.path, i.code) for i in snapshot.issues] == [("Radar/Sources", "unreadable")]


def test_unknown_keys_are_ignored_and_model_is_frozen(vault: Path) -> None:
    _put(vault, "s.md", _source_text(reviewer="Ana", tags="[a, b]"))
    source = load_registry(vault).sources[0].source
    with pytest.raises(ValueError, match="frozen"):
        source.name = "changed"  # type: ignore[misc]
    assert Source.model_validate(source.model_dump(by_alias=True)) == source


def test_source_aliases_are_the_contract_keys() -> None:
    assert {f.alias for f in Source.model_fields.values()} == {
        *VALID,
        "minIntervalSeconds", "fullText", "authTokenEnv", "lastAttemptAt", "lastSuccessAt",
        "lastResponseAt", "errorState", "blockedReason", "httpStatus", "etag", "lastModified",
        "permanentRedirect",  # where a 301/308 led, for a person to update `url`
        "nextAttemptAt",  # when the schedule checks it next (empty for manual)
        # html selectors and json paths
        "itemSelector", "titleSelector", "linkSelector", "dateSelector", "summarySelector",
        "itemsPath", "titlePath", "linkPath", "idPath", "datePath", "summaryPath",
        "pageBudget",  # pages per check under `fullText: page-extraction`
        "include", "exclude",  # the rules a person keeps or drops items by
    }  # fmt: skip


def test_five_hundred_sources_load_quickly(vault: Path) -> None:
    for n in range(500):
        _put(vault, f"s{n:03}.md", _source_text(id=f"source-{n:03}"))
    started = datetime.now(UTC)
    snapshot = load_registry(vault)
    assert len(snapshot.sources) == 500
    assert datetime.now(UTC) - started < timedelta(seconds=5)


def test_a_process_reading_the_registry_again_sees_every_edit(vault: Path) -> None:
    """Readings are kept per text, never per file stats: an edit that keeps the file's size
    and mtime (PT6H -> PT2H) is read at once, and going back reads the first text again."""
    path = _put(vault, "openai.md", _source_text(cadence="PT6H"))
    assert load_registry(vault).sources[0].source.cadence == "PT6H"
    stats = path.stat()
    path.write_text(_source_text(cadence="PT2H"), encoding="utf-8")
    os.utime(path, ns=(stats.st_atime_ns, stats.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stats.st_size, stats.st_mtime_ns)
    assert load_registry(vault).sources[0].source.cadence == "PT2H"
    path.write_text(_source_text(cadence="PT6H", enabled="maybe"), encoding="utf-8")
    broken = load_registry(vault)
    assert broken.sources == () and _codes(broken, "openai.md")
    path.write_text(_source_text(cadence="PT6H"), encoding="utf-8")
    again = load_registry(vault)
    assert again.sources[0].source.cadence == "PT6H" and not again.issues
    # Two files of the same text are two records, each with its own path.
    _put(vault, "copy.md", _source_text(cadence="PT6H"))
    twice = load_registry(vault)
    assert twice.sources == ()
    assert {i.path for i in twice.issues} == {"Radar/Sources/openai.md", "Radar/Sources/copy.md"}


def test_a_source_file_the_health_mirror_wrote_is_read_without_parsing_its_yaml_again(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mirror proves each edit by parsing the new frontmatter; the registry's next read of
    that text validates the mapping instead of parsing it again, and reads the same snapshot
    a fresh process reads from the files."""
    for n in range(3):
        _put(vault, f"s{n}.md", _source_text(id=f"source-{n}", etag="'\"v0\"'"))
    health = {
        "lastAttemptAt": "2026-12-05T05:00:00Z",
        "httpStatus": 304,
        "etag": '"v1"',
        "errorState": None,
        "nextAttemptAt": "2026-12-05T11:00:00Z",  # a key the file did not have
    }
    updates = [
        HealthUpdate(r.source.id, r.path, r.record_path, health)
        for r in load_registry(vault).sources
    ]
    assert write_health(updates) == []
    parsed: list[str] = []
    parse = sources.split_frontmatter
    monkeypatch.setattr(
        sources, "split_frontmatter", lambda text: parsed.append(text) or parse(text)
    )
    after = load_registry(vault)
    assert parsed == []
    assert {(r.source.http_status, r.source.etag) for r in after.sources} == {(304, '"v1"')}
    monkeypatch.setattr(sources, "_READINGS", sources._Readings(sources.READINGS_KEPT))
    fresh = load_registry(vault)
    assert len(parsed) == 3 and fresh == after
