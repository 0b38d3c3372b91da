"""Identity and layered dedupe end to end: a loopback server serves changing feed bytes, the
Collector runs every stage, and the vault files and DuckDB rows are checked afterwards."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import feedparser
import pytest

from radar_pipeline.core.collect import commit as commit_module
from radar_pipeline.core.collect import signal_files as signal_files_module
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.identity import keys as identity
from radar_pipeline.core.identity.keys import hamming64, simhash64
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.vault import index
from radar_pipeline.core.vault.signals import link_target, read_signal_frontmatter
from radar_pipeline_tests.conftest import (
    CORPUS_REAL,
    collect_stages,
    env_store,
    new_collection_id,
    store_rows,
)
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_source

RADAR = str(Path(sys.executable).parent / "radar")
AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
# Items dated inside the coverage overlap of a check ten minutes later (lastSuccessAt - 1 h).
ITEM_DATE = "Mon, 30 Nov 2026 11:40:00 GMT"
LATER = AS_OF + timedelta(minutes=10)


def collect(env: dict[str, Path], as_of: datetime = AS_OF) -> dict[str, Any]:
    collector = Collector(Settings.from_env())
    return collect_stages(
        collector, CollectionSpec(new_collection_id(), "all", as_of, ())
    ).json_object()


def snapshot(vault: Path) -> dict[str, bytes]:
    """Every file in the vault (Sources excluded: their health keys change by design; the
    `.base` views too: `radar collect` creates them once)."""
    return {
        p.relative_to(vault).as_posix(): p.read_bytes()
        for p in sorted(vault.rglob("*"))
        if p.is_file()
        and "Sources" not in p.parts
        and ".radar" not in p.parts
        and p.suffix != ".base"
    }


def by_item_id(vault: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    out = {}
    for path in signal_files(vault):
        fm = read_signal_frontmatter(path)
        out[str(fm["sourceItemId"])] = (path, fm)
    return out


def item(guid: str, link: str, title: str, body: str, date: str | None = ITEM_DATE) -> dict:
    fields = {"guid": guid, "link": link, "title": title, "description": body}
    if date is not None:
        fields["pubDate"] = date
    return fields


_SERVED = 0


def serve(env: dict[str, Path], server: FeedServer, source_id: str, body: bytes) -> str:
    """Serve `body` for the Source; a comment makes every serving new bytes, so a later check
    parses it instead of ending early on an unchanged body hash."""
    global _SERVED
    _SERVED += 1
    url = server.add(f"/{source_id}.xml", body + f"<!-- {_SERVED} -->".encode())
    if not (env["vault"] / "Radar" / "Sources" / f"{source_id}.md").exists():
        write_source(env["vault"], source_id, url)
    return url


A = item("a", "https://example.com/a", "Alpha release", "Alpha ships today.")
B = item("b", "https://example.com/b", "Beta release", "Beta ships tomorrow.")
C = item("c", "https://example.com/c", "Gamma release", "Gamma is out.")
D = item("d", "https://example.com/d", "Delta release", "Delta enters preview.")


def test_evolving_feed(radar_env: dict[str, Path], feed_server: FeedServer) -> None:
    vault = radar_env["vault"]
    serve(radar_env, feed_server, "evolving", rss([A, B, C]))
    first = collect(radar_env)
    assert (first["created"], first["reused"], first["duplicates"]) == (3, 0, 0)
    before = by_item_id(vault)
    files_before = snapshot(vault)

    v2 = [
        {**A, "title": "Alpha release (corrected headline)"},
        {**B, "link": "https://example.com/b?utm_source=rss"},
        C,
        D,
        {**C, "guid": "c-republished"},  # same link, new guid
    ]
    serve(radar_env, feed_server, "evolving", rss(v2))
    second = collect(radar_env, LATER)
    counts = {k: second[k] for k in ("created", "reused", "updated", "duplicates", "rejected")}
    assert counts == {"created": 1, "reused": 3, "updated": 0, "duplicates": 1, "rejected": 0}

    after = by_item_id(vault)
    assert set(after) == {"a", "b", "c", "d"}  # no file for the re-publication
    for key in ("a", "b", "c"):
        assert after[key][0] == before[key][0]
    # The three known Signals are byte-identical: nothing rewrote them.
    files_after = snapshot(vault)
    assert {k: v for k, v in files_after.items() if k in files_before} == files_before
    assert after["a"][1]["title"] == "Alpha release"  # people's copy is never rewritten

    c_id = before["c"][1]["id"]
    rows = store_rows(
        "SELECT source_item_id, outcome, signal_id FROM item_observations o "
        "JOIN collections c USING (collection_id) WHERE c.as_of = $1 ORDER BY source_item_id",
        [LATER],
    )
    assert rows == [
        ("a", "reused", before["a"][1]["id"]),
        ("b", "reused", before["b"][1]["id"]),
        ("c", "reused", c_id),
        ("c-republished", "duplicate", c_id),
        ("d", "created", after["d"][1]["id"]),
    ]
    assert store_rows("SELECT count(*) FROM signals") == [(4,)]
    assert store_rows("SELECT count(*) FROM signal_revisions") == [(0,)]

    serve(radar_env, feed_server, "evolving", rss(v2))
    third = collect(radar_env, LATER + timedelta(minutes=10))
    assert (third["created"], third["reused"], third["duplicates"]) == (0, 4, 1)


def test_http_https_flip_and_tracking_in_guid(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    permalink = item("http://example.com/p", "http://example.com/p", "P", "Permalink guid.")
    opaque = item("tag:example.com,2026:q", "http://Example.com:80/q", "Q", "Opaque guid.")
    serve(radar_env, feed_server, "flip", rss([permalink, opaque]))
    assert collect(radar_env)["created"] == 2
    files = snapshot(vault)
    flipped = [
        {
            **permalink,
            "guid": "https://example.com/p?utm_campaign=x",
            "link": "https://example.com/p#top",
        },
        {**opaque, "link": "https://example.com/q?fbclid=abc"},
    ]
    serve(radar_env, feed_server, "flip", rss(flipped))
    again = collect(radar_env, LATER)
    assert (again["created"], again["reused"], again["duplicates"]) == (0, 2, 0)
    assert snapshot(vault) == files


def test_duplicate_guids_in_one_feed_are_two_stable_signals(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    one = item("same-guid", "https://example.com/one", "One", "First item.")
    two = item("same-guid", "https://example.com/two", "Two", "Second item.")
    serve(radar_env, feed_server, "dupguid", rss([one, two]))
    first = collect(radar_env)
    assert first["created"] == 2
    ids = sorted(fm["id"] for _, fm in by_item_id(vault).values())
    assert len(set(ids)) == 2
    serve(radar_env, feed_server, "dupguid", rss([one, two]))
    again = collect(radar_env, LATER)
    assert (again["created"], again["reused"]) == (0, 2)
    assert sorted(p.stem for p in signal_files(vault)) == ids
    # The feed reorders them: still no new Signal (identity or canonical URL catches each).
    serve(radar_env, feed_server, "dupguid", rss([two, one]))
    reordered = collect(radar_env, LATER + timedelta(minutes=10))
    assert reordered["created"] == 0
    assert reordered["reused"] + reordered["duplicates"] == 2
    assert sorted(p.stem for p in signal_files(vault)) == ids


def _redated(body: bytes, when: datetime) -> bytes:
    """Every item re-dated to `when`: a date change alone must not make a new Signal, and the
    next check (whose coverage starts an hour before the last success) still sees them all."""
    stamp = format_datetime(when, usegmt=True).encode()
    return re.sub(rb"<pubDate>[^<]*</pubDate>", b"<pubDate>" + stamp + b"</pubDate>", body)


def _corpus_as_of(body: bytes) -> datetime:
    stamps = [datetime(*e.published_parsed[:6], tzinfo=UTC) for e in feedparser.parse(body).entries]
    return max(stamps) + timedelta(minutes=30)


def test_guid_equal_to_link_openai(radar_env: dict[str, Path], feed_server: FeedServer) -> None:
    vault = radar_env["vault"]
    body = (CORPUS_REAL / "openai-2.xml").read_bytes()
    as_of = _corpus_as_of(body)
    serve(radar_env, feed_server, "openai-news", body)
    first = collect(radar_env, as_of)
    assert first["created"] > 0 and first["rejected"] == 0
    for _, fm in by_item_id(vault).values():
        assert fm["sourceItemId"] == fm["itemUrl"] == fm["canonicalUrl"]
    files = snapshot(vault)
    # The same items with guid and link flipped to http and tagged for a campaign.
    flipped = body.replace(b"https://openai.com/index/", b"http://openai.com/index/")
    flipped = flipped.replace(b"</link>", b"?utm_source=rss</link>")
    flipped = _redated(flipped, as_of - timedelta(minutes=5))
    assert flipped != body
    serve(radar_env, feed_server, "openai-news", flipped)
    again = collect(radar_env, as_of + timedelta(minutes=10))
    assert (again["created"], again["reused"], again["duplicates"]) == (0, first["created"], 0)
    assert snapshot(vault) == files


def test_guid_different_from_link_github(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    body = (CORPUS_REAL / "github-changelog-1.xml").read_bytes()
    guid = "https://github.blog/changelog/2026-09-22-local-sandboxing-in-the-github-copilot-app"
    link = "https://github.blog/changelog/2026-09-23-local-sandboxing-in-the-github-copilot-app"
    assert body.count(guid.encode()) == 1
    as_of = _corpus_as_of(body)
    serve(radar_env, feed_server, "github-changelog", body)
    first = collect(radar_env, as_of)
    assert first["created"] > 0
    _, fm = by_item_id(vault)[guid]
    assert (fm["sourceItemId"], fm["canonicalUrl"]) == (guid, link)
    identities = {p.stem for p in signal_files(vault)}
    files = snapshot(vault)
    # The link gains tracking parameters: the same identity (guid stays, canonical URL stays).
    tagged = body.replace(
        f"<link>{link}</link>".encode(),
        f"<link>{link}?utm_source=rss&amp;ref_src=t</link>".encode(),
    )
    assert tagged != body
    tagged = _redated(tagged, as_of - timedelta(minutes=5))
    serve(radar_env, feed_server, "github-changelog", tagged)
    again = collect(radar_env, as_of + timedelta(minutes=10))
    assert (again["created"], again["reused"]) == (0, first["created"])
    assert {p.stem for p in signal_files(vault)} == identities
    assert snapshot(vault) == files


def test_content_change_is_an_update_with_a_revision(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    serve(radar_env, feed_server, "upd", rss([A]))
    collect(radar_env)
    [path] = signal_files(vault)
    original = path.read_bytes()
    first_hash = read_signal_frontmatter(path)["contentHash"]
    serve(radar_env, feed_server, "upd", rss([{**A, "description": "Alpha ships next week."}]))
    second = collect(radar_env, LATER)
    assert (second["created"], second["updated"], second["reused"]) == (0, 1, 0)
    assert signal_files(vault) == [path]
    assert path.read_bytes() == original
    [(sig, content_hash, title)] = store_rows(
        "SELECT signal_id, content_hash, title FROM signal_revisions"
    )
    assert sig == path.stem and content_hash != first_hash and title == "Alpha release"
    assert store_rows("SELECT content_hash FROM signals") == [(content_hash,)]
    # The same content again is no new revision.
    serve(radar_env, feed_server, "upd", rss([{**A, "description": "Alpha ships next week."}]))
    third = collect(radar_env, LATER + timedelta(minutes=10))
    assert (third["updated"], third["reused"]) == (0, 1)
    assert store_rows("SELECT count(*) FROM signal_revisions") == [(1,)]


def test_weekly_release_notes_same_day_are_two_signals_flagged(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    week1 = item("w1", "https://example.com/w1", "Weekly release notes", "Fixes for the CLI.")
    week2 = item("w2", "https://example.com/w2", "Weekly Release Notes!", "New API endpoints.")
    serve(radar_env, feed_server, "weekly", rss([week1, week2]))
    report = collect(radar_env)
    assert (report["created"], report["duplicates"]) == (2, 0)
    signals = by_item_id(vault)
    first_id = signals["w1"][1]["id"]
    assert signals["w1"][1]["duplicateCandidateOf"] is None
    assert signals["w2"][1]["duplicateCandidateOf"] == f"[[{first_id}]]"  # a link, not text
    assert store_rows("SELECT duplicate_candidate_of FROM signals WHERE source_item_id = 'w2'") == [
        (first_id,)
    ]
    # A third one on the same day in a later check: flagged against the first, not merged.
    week3 = item("w3", "https://example.com/w3", "Weekly release notes", "Docs updates.")
    serve(radar_env, feed_server, "weekly", rss([week1, week2, week3]))
    later = collect(radar_env, LATER)
    assert (later["created"], later["reused"], later["duplicates"]) == (1, 2, 0)
    assert by_item_id(vault)["w3"][1]["duplicateCandidateOf"] == f"[[{first_id}]]"


def test_title_only_items_with_equal_titles_are_not_merged(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Without a summary the content hash is the title's; equal titles prove nothing."""
    vault = radar_env["vault"]
    bare = [
        {
            "guid": f"n{i}",
            "link": f"https://example.com/n{i}",
            "title": "Release notes",
            "pubDate": ITEM_DATE,
        }
        for i in (1, 2)
    ]
    serve(radar_env, feed_server, "bare", rss(bare))
    report = collect(radar_env)
    assert (report["created"], report["duplicates"]) == (2, 0)
    signals = {k: fm for k, (_, fm) in by_item_id(vault).items()}
    assert signals["n2"]["duplicateCandidateOf"] == f"[[{signals['n1']['id']}]]"
    # A later third one with the same bare title: created too, flagged against the first.
    bare.append({**bare[0], "guid": "n3", "link": "https://example.com/n3"})
    serve(radar_env, feed_server, "bare", rss(bare))
    later = collect(radar_env, LATER)
    assert (later["created"], later["reused"], later["duplicates"]) == (1, 2, 0)
    assert by_item_id(vault)["n3"][1]["duplicateCandidateOf"] == f"[[{signals['n1']['id']}]]"


LONG = "Cloudflare launches a new edge cache for everyone. " + " ".join(
    f"word{i}" for i in range(60)
)


def test_simhash_near_item_from_another_source_is_flagged(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    near = LONG.replace("everyone.", "everyone!") + " today"
    assert 0 < hamming64(simhash64(f"Edge cache {LONG}"), simhash64(f"Edge cache {near}")) <= 3
    original = item("orig", "https://blog.example.com/edge", "Edge cache", LONG)
    serve(radar_env, feed_server, "blog", rss([original]))
    collect(radar_env)
    [(_, orig_fm)] = by_item_id(vault).values()
    mirror = item("mirror", "https://news.example.org/edge-cache", "Edge cache", near, None)
    serve(radar_env, feed_server, "news", rss([original, mirror]))
    serve(radar_env, feed_server, "blog", rss([original]))
    report = collect(radar_env, LATER)
    by_source = {s["id"]: s for s in report["sources"]}
    assert by_source["blog"]["reused"] == 1
    # Another Source: never a duplicate, both are created and the near ones flagged.
    assert (by_source["news"]["created"], by_source["news"]["duplicates"]) == (2, 0)
    news = {
        fm["sourceItemId"]: fm for _, fm in by_item_id(vault).values() if fm["sourceId"] == "news"
    }
    assert news["orig"]["duplicateCandidateOf"] == f"[[{orig_fm['id']}]]"
    assert news["mirror"]["duplicateCandidateOf"] == f"[[{orig_fm['id']}]]"


def test_near_items_of_two_sources_in_one_collection(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    serve(radar_env, feed_server, "one", rss([item("x", "https://one.example/x", "Edge", LONG)]))
    serve(radar_env, feed_server, "two", rss([item("y", "https://two.example/y", "Edge", LONG)]))
    report = collect(radar_env)
    assert report["created"] == 2
    flags = {fm["sourceId"]: fm for _, fm in by_item_id(vault).values()}
    first, second = sorted(flags.values(), key=lambda fm: str(fm["sourceId"]))
    # Exactly one of them points at the other (whichever was decided second).
    pointers = {fm["id"]: link_target(fm["duplicateCandidateOf"]) for fm in flags.values()}
    assert sorted(v is None for v in pointers.values()) == [False, True]
    [(flagged, target)] = [(k, v) for k, v in pointers.items() if v is not None]
    assert target in pointers and target != flagged
    assert {first["id"], second["id"]} == set(pointers)


def test_dates_missing_and_future(radar_env: dict[str, Path], feed_server: FeedServer) -> None:
    vault = radar_env["vault"]
    undated = item("u", "https://example.com/u", "Undated", "No date at all.", None)
    garbled = item("g", "https://example.com/g", "Garbled", "Bad date.", "the 31st of Smarch")
    future = item(
        "f", "https://example.com/f", "Future", "From later.", "Fri, 01 Jan 2027 00:00:00 GMT"
    )
    soon = item(
        "s", "https://example.com/s", "Soon", "Clock skew.", "Mon, 30 Nov 2026 13:00:00 GMT"
    )
    serve(radar_env, feed_server, "dates", rss([undated, garbled, future, soon]))
    report = collect(radar_env)
    assert report["created"] == 4
    signals = {k: fm for k, (_, fm) in by_item_id(vault).items()}
    for key in ("u", "g"):
        fm = signals[key]
        assert fm["observedAt"] is None and fm["observedField"] is None
        assert fm["publishedAt"] is None
        assert fm["fetchedAt"] == "2026-11-30T12:00:00Z"  # first seen, never passed off as observed
        assert fm["id"].startswith("20261130T120000Z-")
    rows = dict(store_rows("SELECT source_item_id, observed_day IS NULL FROM signals").__iter__())
    assert rows == {"u": True, "g": True, "f": False, "s": False}
    first_seen = store_rows("SELECT DISTINCT first_seen_at FROM signals WHERE observed_day IS NULL")
    assert first_seen == [(AS_OF,)]
    assert store_rows(
        "SELECT count(*) FROM item_observations WHERE source_item_id IN ('u', 'g') "
        "AND observed_at IS NULL AND outcome = 'created'",
    ) == [(2,)]
    fut = signals["f"]
    assert fut["observedAt"] == "2027-01-01T00:00:00Z"  # kept as given
    assert fut["validationState"] == "valid-with-warnings"
    assert "future-dated" in fut["validationNotes"]
    # Within the tolerance (one hour ahead): a clock skew, not flagged.
    assert signals["s"]["validationState"] == "valid"
    assert signals["s"]["validationNotes"] == []


def _change_identity_rules(monkeypatch: pytest.MonkeyPatch, version: int) -> None:
    """Simulate a later release whose identity rules differ: a new version (every identity
    hash changes) that also strips `ref` as a tracking parameter (canonical URLs change)."""
    monkeypatch.setattr(identity, "IDENTITY_VERSION", version)
    monkeypatch.setattr(commit_module, "IDENTITY_VERSION", version)
    monkeypatch.setattr(signal_files_module, "IDENTITY_VERSION", version)
    monkeypatch.setattr(identity, "TRACKING_PARAMS", identity.TRACKING_PARAMS | {"ref"})


REKEY_ITEMS = [
    item("k1", "https://example.com/k1?ref=rss", "K1", "First keyed item."),
    item("https://example.com/k2?ref=feed", "https://example.com/k2?ref=feed", "K2", "Second."),
    item("k3", "https://example.com/k3", "K3", "Third keyed item."),
]


def test_identity_rule_change_rekeys_instead_of_duplicating(
    radar_env: dict[str, Path], feed_server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    vault = radar_env["vault"]
    serve(radar_env, feed_server, "keyed", rss(REKEY_ITEMS))
    assert collect(radar_env)["created"] == 3
    files = snapshot(vault)
    old = dict(store_rows("SELECT source_item_id, signal_id FROM signals"))

    _change_identity_rules(monkeypatch, 2)
    changed = [*REKEY_ITEMS[:2], {**REKEY_ITEMS[2], "description": "Third, revised."}]
    serve(radar_env, feed_server, "keyed", rss(changed))
    report = collect(radar_env, LATER)
    # Matched through the aliases the dedupe stage recorded first: same Signals, the content
    # change an update of the old Signal (only possible through its identity), nothing new.
    counts = (report["created"], report["reused"], report["updated"], report["duplicates"])
    assert counts == (0, 2, 1, 0)
    assert snapshot(vault) == files
    aliases = store_rows(
        "SELECT s.source_item_id, a.identity_version, a.identity <> s.identity, a.canonical_url "
        "FROM identity_aliases a JOIN signals s USING (signal_id) ORDER BY 1",
    )
    assert aliases == [
        ("https://example.com/k2?ref=feed", 2, True, "https://example.com/k2"),
        ("k1", 2, True, "https://example.com/k1"),
        ("k3", 2, True, "https://example.com/k3"),
    ]
    assert store_rows("SELECT signal_id FROM signal_revisions") == [(old["k3"],)]

    # A re-publication under a new guid at the re-canonicalised URL: a duplicate of the old one.
    repub = {**REKEY_ITEMS[0], "guid": "k1-again", "link": "https://example.com/k1"}
    serve(radar_env, feed_server, "keyed", rss([*changed, repub]))
    again = collect(radar_env, LATER + timedelta(minutes=10))
    assert (again["created"], again["reused"], again["duplicates"]) == (0, 3, 1)
    assert store_rows(
        "SELECT signal_id FROM item_observations WHERE source_item_id = 'k1-again'"
    ) == [(old["k1"],)]

    # The index is derived data: rebuilt from the vault, it is re-keyed again, same result.
    repair = index.rebuild(env_store(), vault, datetime.now(UTC))
    assert repair.indexed == 3 and repair.rekey is not None
    assert (repair.rekey.identity_version, repair.rekey.rekeyed, repair.rekey.aliased) == (2, 3, 3)
    serve(radar_env, feed_server, "keyed", rss(changed))
    rebuilt = collect(radar_env, LATER + timedelta(minutes=20))
    assert (rebuilt["created"], rebuilt["duplicates"]) == (0, 0)
    assert len(signal_files(vault)) == 3


def test_rekey_conflict_keeps_the_older_signal(
    radar_env: dict[str, Path], feed_server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two old Signals that fold into one identity under the new rules: the older keeps it."""
    vault = radar_env["vault"]
    twins = [
        item(f"https://example.com/t?ref={ref}", f"https://example.com/t?ref={ref}", "T", text)
        for ref, text in (("a", "One."), ("b", "Two."))
    ]
    serve(radar_env, feed_server, "folds", rss(twins))
    assert collect(radar_env)["created"] == 2
    _change_identity_rules(monkeypatch, 2)
    with env_store().transaction() as con:
        result = index.rekey(con)
    assert (result.rekeyed, len(result.conflicts)) == (1, 1)
    assert len(signal_files(vault)) == 2


def test_radar_index_rebuild_rekeys_signals_of_an_older_version(
    radar_env: dict[str, Path], feed_server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Signals written by an older release (version 0 rules, in-process), then the real
    `radar` command of this release: `index rebuild` re-keys them, `collect` reuses them."""
    vault = radar_env["vault"]
    url = serve(radar_env, feed_server, "legacy", rss(REKEY_ITEMS))
    with monkeypatch.context() as old_release:
        old_release.setattr(identity, "IDENTITY_VERSION", 0)
        old_release.setattr(commit_module, "IDENTITY_VERSION", 0)
        old_release.setattr(signal_files_module, "IDENTITY_VERSION", 0)
        assert collect(radar_env)["created"] == 3
    assert {read_signal_frontmatter(p)["identityVersion"] for p in signal_files(vault)} == {0}
    files = snapshot(vault)
    env = {**os.environ, "RADAR_VAULT": str(vault), "RADAR_DB": str(radar_env["db"])}
    env["DAGSTER_HOME"] = str(radar_env["home"])
    done = subprocess.run(
        [RADAR, "index", "rebuild", "--json"], capture_output=True, text=True, env=env, timeout=180
    )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert (payload["indexed"], payload["rekeyed"], payload["aliased"]) == (3, 3, 3)
    assert payload["identityVersion"] == identity.IDENTITY_VERSION == 1
    feed_server.add("/legacy.xml", rss(REKEY_ITEMS) + b"<!-- v1 -->")
    assert url.endswith("/legacy.xml")
    done = subprocess.run(
        [RADAR, "collect", "--source", "legacy", "--as-of", "2026-11-30T12:10:00Z", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["created"], report["reused"], report["duplicates"]) == (0, 3, 0)
    assert snapshot(vault) == files
