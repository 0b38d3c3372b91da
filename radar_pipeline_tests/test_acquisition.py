"""Acquisition through the real pipeline: a misbehaving publisher or a hostile feed against the
Collector (plan -> fetch -> parse -> dedupe -> commit) and the `radar` command, on a loopback
server, a temp vault and a real store (the DuckDB file; PostgreSQL under `make test-postgres`).

Table-driven like miniflux's reader tests: each hostile route runs in one collection next to a
healthy Source, and every row checks the outcome and class in the report, the files in the
vault, the other Source's Signal and the time the collection took.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.cli import dagster_instance
from radar_pipeline.core.acquire.fetch import FetchSettings
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.feed_state import load_states
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.conftest import (
    assert_not_stored,
    collect_stages,
    env_store,
    new_collection_id,
    store_dicts,
)
from radar_pipeline_tests.feedserver import (
    FeedServer,
    RequestHandler,
    drip,
    echo_headers,
    redirect_to,
    streamed,
)
from radar_pipeline_tests.vaultkit import rss, signal_files, write_source

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DEADLINE_S = 2.0
RSS_TYPE = {"Content-Type": "application/rss+xml; charset=utf-8"}
HTML_TYPE = {"Content-Type": "text/html; charset=utf-8"}
RADAR = str(Path(sys.executable).parent / "radar")
# How long a held answer waits for the other process at most: the holder's check must still
# end inside its 20 s deadline on a busy machine (held 15 s, it did not).
HOLD_S = 8.0
SECRET = "TOP-SECRET-c0ffee-91d2"
TOKEN = "tok-5f2b9e7c-Bearer-value-77"
HEALTH_KEYS = (
    "lastAttemptAt",
    "lastSuccessAt",
    "errorState",
    "httpStatus",
    "etag",
    "lastModified",
    "nextAttemptAt",
    "lastResponseAt",
)


def item(n: int) -> dict[str, str]:
    return {"title": f"Item {n}", "guid": f"g-{n}", "link": f"https://example.com/{n}"}


HEALTHY = rss([{"title": "Healthy", "guid": "h-1", "link": "https://example.com/healthy"}])


def make_collector(env: dict[str, Path], deadline_s: float = DEADLINE_S) -> Collector:
    settings = replace(
        FetchSettings.of(Settings.from_env()),
        connect_timeout_s=1.0,
        read_timeout_s=2.0,
        deadline_s=deadline_s,
    )
    return Collector(Settings.from_env(), fetch_settings=settings)  # the store of `env`


def collect(
    env: dict[str, Path],
    as_of: datetime = AS_OF,
    mode: str = "all",
    sources: tuple[str, ...] = (),
) -> dict[str, Any]:
    spec = CollectionSpec(new_collection_id(), mode, as_of, sources)  # type: ignore[arg-type]
    return collect_stages(make_collector(env), spec).json_object()


def health(vault: Path, source_id: str) -> dict[str, Any]:
    """The Source file's frontmatter as the pipeline left it."""
    text = (vault / "Radar" / "Sources" / f"{source_id}.md").read_text(encoding="utf-8")
    return split_frontmatter(text)[0]


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["id"]: s for s in report["sources"]}


def vault_files(vault: Path) -> set[str]:
    """Every file in the vault except the lock files, as vault-relative paths."""
    return {
        p.relative_to(vault).as_posix()
        for p in vault.rglob("*")
        if p.is_file() and ".radar" not in p.relative_to(vault).parts
    }


def assert_nowhere(env: dict[str, Path], needle: str) -> None:
    """`needle` is in no vault file and nowhere in the store (`assert_not_stored`)."""
    raw = needle.encode()
    for path in env["vault"].rglob("*"):
        if path.is_file():
            assert raw not in path.read_bytes(), path
    assert_not_stored(needle)


# -- the hostile table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One misbehaving route; `serve` installs it and returns the Source URL."""

    name: str
    serve: Callable[[FeedServer, Path], str]
    outcome: str
    error_class: str | None
    stage: str | None = "fetch"
    bound_s: float = 5.0
    signals: int = 0  # Signals the route's Source may create


def _big(n: int = 3_000_000) -> bytes:
    return b'<?xml version="1.0"?><rss version="2.0"><channel><title>' + b"x" * n


def _gzip_bomb() -> bytes:
    return gzip.compress(b"\0" * 20_000_000, compresslevel=9)


ENTITY_BOMB = (
    b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + b"".join(
        f' <!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">\n'.encode()
        for i in range(1, 10)
    )
    + b']>\n<rss version="2.0"><channel><title>&lol9;</title><item><title>&lol9;</title>'
    b"<link>https://example.com/bomb</link></item></channel></rss>"
)


def _xxe(server: FeedServer, tmp: Path) -> str:
    secret = tmp / "secret.txt"
    secret.write_text(SECRET)
    body = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<!DOCTYPE rss [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        '<rss version="2.0"><channel><title>&xxe;</title><item><title>&xxe;</title>'
        "<description>&xxe;</description><link>https://example.com/xxe</link>"
        "<guid>xxe-1</guid></item></channel></rss>"
    ).encode()
    return server.add("/bad", body)


def _broken_encoding(server: FeedServer, tmp: Path) -> str:
    # Declared UTF-8, written in Latin-1: usable, decoded as windows-1252, flagged.
    body = (
        '<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>t</title>'
        "<item><title>Caf\xe9 na\xefve</title><link>https://example.com/enc</link>"
        "<guid>enc-1</guid></item></channel></rss>"
    ).encode("latin-1")
    return server.add("/bad", body)


def _outside(server: FeedServer, tmp: Path) -> str:
    # 127.0.0.2 is loopback but not on the allow-list (127.0.0.1, localhost): refused before
    # connecting, and even a broken policy could reach nothing beyond this machine.
    port = server.server_address[1]
    return server.add("/bad", handler=redirect_to(f"http://127.0.0.2:{port}/healthy"))


def _loop(server: FeedServer, tmp: Path) -> str:
    server.add("/bad2", handler=redirect_to("/bad"))
    return server.add("/bad", handler=redirect_to("/bad2"))


CASES = [
    Case(
        "rate-limited",
        lambda s, t: s.add("/bad", b"slow down", 429, {"Retry-After": "120"}),
        "failed",
        "rate-limited",
    ),
    Case(
        "challenge-header",
        lambda s, t: s.add(
            "/bad", b"<html>hi</html>", 403, {**HTML_TYPE, "cf-mitigated": "challenge"}
        ),
        "failed",
        "challenge",
    ),
    Case(
        "challenge-page",
        lambda s, t: s.add(
            "/bad", b"<html><title>Just a moment...</title>cf-chl</html>", 403, HTML_TYPE
        ),
        "failed",
        "challenge",
    ),
    Case("404", lambda s, t: s.add("/bad", b"no", 404, HTML_TYPE), "failed", "gone"),
    Case("410", lambda s, t: s.add("/bad", b"gone", 410, HTML_TYPE), "failed", "gone"),
    Case("500", lambda s, t: s.add("/bad", b"oops", 500, HTML_TYPE), "failed", "http-5xx"),
    Case(
        "html-instead-of-feed",
        lambda s, t: s.add(
            "/bad", b"<!doctype html><html><body><p>Hi</p></body></html>", 200, HTML_TYPE
        ),
        "failed",
        "not-a-feed",
    ),
    Case("3mb-content-length", lambda s, t: s.add("/bad", _big()), "failed", "too-large"),
    Case(
        "3mb-streamed",
        lambda s, t: s.add(
            "/bad", handler=streamed(lambda: (b"x" * 65536 for _ in range(48)), RSS_TYPE)
        ),
        "failed",
        "too-large",
    ),
    Case(
        "gzip-bomb",
        lambda s, t: s.add("/bad", _gzip_bomb(), headers={**RSS_TYPE, "Content-Encoding": "gzip"}),
        "failed",
        "too-large",
    ),
    Case(
        "drip-1-byte-per-second",
        lambda s, t: s.add("/bad", handler=drip(HEALTHY, 1.0)),
        "failed",
        "timeout",
        bound_s=DEADLINE_S + 4.0,
    ),
    Case("redirect-outside-allow-list", _outside, "failed", "policy"),
    Case("redirect-loop", _loop, "failed", "policy"),
    Case("entity-bomb", lambda s, t: s.add("/bad", ENTITY_BOMB), "failed", "invalid-xml", "parse"),
    Case("xxe-local-file", _xxe, "failed", "invalid-xml", "parse"),
    Case("broken-encoding", _broken_encoding, "passed", None, None, signals=1),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_route_fails_alone_and_cleanly(
    radar_env: dict[str, Path], feed_server: FeedServer, tmp_path: Path, case: Case
) -> None:
    vault = radar_env["vault"]
    write_source(vault, "healthy", feed_server.add("/healthy", HEALTHY))
    write_source(vault, "hostile", case.serve(feed_server, tmp_path))
    before = vault_files(vault)

    started = time.monotonic()
    report = collect(radar_env)
    elapsed = time.monotonic() - started

    assert elapsed < case.bound_s, f"{case.name} held the collection {elapsed:.1f} s"
    hostile, healthy = by_id(report)["hostile"], by_id(report)["healthy"]
    assert (hostile["outcome"], hostile["errorClass"]) == (case.outcome, case.error_class), hostile
    assert hostile["errorStage"] == case.stage
    assert (healthy["outcome"], healthy["created"], healthy["error"]) == ("passed", 1, None)
    assert (report["failed"], report["passed"]) == (
        int(case.outcome == "failed"),
        2 - int(case.outcome == "failed"),
    )

    # Nothing in the vault but the Signals that should be there.
    signals = {
        p.relative_to(vault).as_posix(): read_signal_frontmatter(p) for p in signal_files(vault)
    }
    assert vault_files(vault) == before | set(signals)
    assert sorted(fm["sourceId"] for fm in signals.values()) == sorted(
        ["healthy"] + ["hostile"] * case.signals
    )
    fm_hostile = health(vault, "hostile")
    if case.outcome == "failed":
        assert fm_hostile["errorState"] == case.error_class
        assert fm_hostile["lastSuccessAt"] is None  # the watermark did not advance
        assert fm_hostile["lastAttemptAt"] == "2026-11-30T12:00:00Z"
        [letter] = store_dicts("SELECT * FROM dead_letters WHERE source_id = 'hostile'")
        assert (letter["status"], letter["error_class"], letter["stage"]) == (
            "open",
            case.error_class,
            case.stage,
        )
        assert hostile["consecutiveFailures"] == 1 and hostile["backoffUntil"] is not None
        assert hostile["error"] and "\n" not in hostile["error"]
    else:
        [fm] = [fm for fm in signals.values() if fm["sourceId"] == "hostile"]
        assert fm["validationState"] == "valid-with-warnings"
        assert "feed-ill-formed" in fm["validationNotes"]
        assert fm["title"] == "Café naïve"
    [attempt] = store_dicts("SELECT * FROM fetch_attempts WHERE source_id = 'hostile'")
    assert attempt["check_outcome"] == case.outcome
    if case.stage == "fetch":
        assert attempt["error_class"] == case.error_class
    assert_nowhere(radar_env, SECRET)


def test_rate_limited_source_waits_out_retry_after(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    feed_server.add("/feed", b"slow down", 429, {"Retry-After": "3600"})
    write_source(vault, "limited", feed_server.url("/feed"))
    first = by_id(collect(radar_env, mode="due"))["limited"]
    assert (first["outcome"], first["errorClass"]) == ("failed", "rate-limited")
    assert first["backoffUntil"] >= "2026-11-30T13:00:00Z"

    # Due 30 min later, and named explicitly: the publisher's wait holds both times.
    due = by_id(collect(radar_env, AS_OF + timedelta(minutes=30), mode="due"))["limited"]
    assert due["outcome"] == "skipped" and due["error"].startswith("backoff until")
    named = collect(radar_env, AS_OF + timedelta(minutes=30), "explicit", ("limited",))
    assert by_id(named)["limited"]["outcome"] == "skipped"
    assert "rate-limited: backoff until" in by_id(named)["limited"]["error"]
    assert len(feed_server.requests_for("/feed")) == 1

    # After the wait (Retry-After 1 h; jitter of a first failure is at most 5 min).
    feed_server.add("/feed", rss([item(1)]))
    later = by_id(collect(radar_env, AS_OF + timedelta(hours=2), mode="due"))["limited"]
    assert (later["outcome"], later["created"], later["consecutiveFailures"]) == ("passed", 1, 0)
    assert later["backoffUntil"] is None
    assert len(feed_server.requests_for("/feed")) == 2


def test_explicit_run_respects_min_interval(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    write_source(
        radar_env["vault"],
        "polite",
        feed_server.add("/feed", rss([item(1)])),
        minIntervalSeconds=3600,
    )
    assert by_id(collect(radar_env, mode="explicit", sources=("polite",)))["polite"]["created"] == 1
    again = by_id(collect(radar_env, AS_OF + timedelta(minutes=10), "explicit", ("polite",)))
    assert again["polite"]["outcome"] == "skipped"
    assert again["polite"]["error"].startswith("rate-limit: minIntervalSeconds")
    assert len(feed_server.requests_for("/feed")) == 1
    after = by_id(collect(radar_env, AS_OF + timedelta(hours=1), "explicit", ("polite",)))
    assert after["polite"]["outcome"] == "not-modified"  # same body hash: nothing re-processed
    assert len(feed_server.requests_for("/feed")) == 2


# -- conditional GET and the commit rule -------------------------------------------------------


class Publisher:
    """A feed whose body can change; answers 304 to matching validators, or (`lying`) to any
    conditional request at all, or (`ignoring`) never."""

    def __init__(self, body: bytes, mode: str = "honest") -> None:
        self.body, self.mode, self.version = body, mode, 1

    def publish(self, body: bytes) -> None:
        self.body, self.version = body, self.version + 1

    @property
    def etag(self) -> str:
        return f'"v{self.version}"'

    @property
    def last_modified(self) -> str:
        return f"Mon, 0{self.version} Nov 2026 10:00:00 GMT"

    def __call__(self, req: RequestHandler) -> None:
        validators = {"ETag": self.etag, "Last-Modified": self.last_modified}
        asked = req.headers.get("If-None-Match"), req.headers.get("If-Modified-Since")
        if self.mode == "lying" and any(asked):
            req.send_simple(304, b"", {})
        elif self.mode == "honest" and (asked[0] == self.etag or asked[1] == self.last_modified):
            req.send_simple(304, b"", validators)
        else:
            req.send_simple(200, self.body, {**RSS_TYPE, **validators})


def test_304_round_trip_sends_validators_and_skips_parse(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    publisher = Publisher(rss([item(1)]))
    write_source(vault, "news", feed_server.add("/feed", handler=publisher))
    first = by_id(collect(radar_env))["news"]
    assert (first["outcome"], first["created"], first["validatorsChanged"]) == ("passed", 1, True)
    fm = health(vault, "news")
    assert (fm["etag"], fm["lastModified"]) == ('"v1"', "Mon, 01 Nov 2026 10:00:00 GMT")

    second = by_id(collect(radar_env, AS_OF + timedelta(hours=7)))["news"]
    request = feed_server.requests_for("/feed")[-1]
    assert request.headers["if-none-match"] == '"v1"'
    assert request.headers["if-modified-since"] == "Mon, 01 Nov 2026 10:00:00 GMT"
    assert "radarpipeline" in request.headers["user-agent"].lower()
    assert (second["outcome"], second["httpStatus"], second["conditional"]) == (
        "not-modified",
        304,
        True,
    )
    assert (second["itemsParsed"], second["created"], second["reused"]) == (0, 0, 0)
    assert second["validatorsChanged"] is False
    assert len(signal_files(vault)) == 1
    [row] = store_dicts(
        "SELECT * FROM fetch_attempts WHERE http_status = 304 AND source_id = 'news'"
    )
    assert (row["check_outcome"], row["items_parsed"], row["conditional"]) == (
        "not-modified",
        0,
        True,
    )


def test_server_ignoring_validators_is_judged_by_body_hash(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    publisher = Publisher(rss([item(1)]), mode="ignoring")
    write_source(vault, "deaf", feed_server.add("/feed", handler=publisher))
    collect(radar_env)
    same = by_id(collect(radar_env, AS_OF + timedelta(hours=7)))["deaf"]
    assert feed_server.requests_for("/feed")[-1].headers["if-none-match"] == '"v1"'
    assert (same["outcome"], same["httpStatus"], same["itemsParsed"]) == ("not-modified", 200, 0)
    assert same["bytes"] == len(publisher.body) and same["bodySha256"]
    publisher.publish(rss([item(1), item(2)]))
    changed = by_id(collect(radar_env, AS_OF + timedelta(hours=14)))["deaf"]
    assert (changed["outcome"], changed["created"], changed["reused"]) == ("passed", 1, 1)
    assert changed["itemsParsed"] == 2 and changed["itemsNew"] == 1
    assert len(signal_files(vault)) == 2


def test_server_lying_with_304_is_caught_by_the_daily_unconditional_fetch(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    publisher = Publisher(rss([item(1)]), mode="lying")
    write_source(vault, "liar", feed_server.add("/feed", handler=publisher))
    collect(radar_env)
    publisher.publish(rss([item(1), item(2)]))
    hint = by_id(collect(radar_env, AS_OF + timedelta(hours=7)))["liar"]
    assert (hint["outcome"], hint["created"]) == ("not-modified", 0)
    assert len(signal_files(vault)) == 1

    daily = by_id(collect(radar_env, AS_OF + timedelta(hours=25)))["liar"]
    unconditional = feed_server.requests_for("/feed")[-1].headers
    assert "if-none-match" not in unconditional and "if-modified-since" not in unconditional
    assert (daily["outcome"], daily["conditional"], daily["created"], daily["reused"]) == (
        "passed",
        False,
        1,
        1,
    )
    assert len(signal_files(vault)) == 2
    # The next check within the day is conditional again.
    collect(radar_env, AS_OF + timedelta(hours=32))
    assert feed_server.requests_for("/feed")[-1].headers["if-none-match"] == '"v2"'


def test_validators_of_an_unprocessed_body_are_not_kept(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A 200 with new validators whose body fails to parse leaves the old validators: the next
    request still asks with them, and the feed's items are not skipped as `not-modified`."""
    vault = radar_env["vault"]
    publisher = Publisher(rss([item(1)]))
    write_source(vault, "news", feed_server.add("/feed", handler=publisher))
    collect(radar_env)
    publisher.publish(b"<html><body>maintenance</body></html>")
    broken = by_id(collect(radar_env, AS_OF + timedelta(hours=7)))["news"]
    assert (broken["outcome"], broken["errorClass"]) == ("failed", "not-a-feed")
    with env_store().transaction() as con:
        state = load_states(con)["news"]
    assert (state.etag, state.last_modified) == ('"v1"', "Mon, 01 Nov 2026 10:00:00 GMT")
    assert health(vault, "news")["etag"] == '"v1"'

    publisher.publish(rss([item(1), item(2)]))
    fixed = by_id(collect(radar_env, AS_OF + timedelta(hours=14)))["news"]
    assert feed_server.requests_for("/feed")[-1].headers["if-none-match"] == '"v1"'
    assert (fixed["outcome"], fixed["created"]) == ("passed", 1)
    with env_store().transaction() as con:
        assert load_states(con)["news"].etag == '"v3"'


# -- the Source file keeps everything but its health keys -----------------------------------------

COMMENTED_SOURCE = """---
# Written by hand in Obsidian; the pipeline must keep this comment.
entityType: source
schemaVersion: 1
id: commented
name: "Commented: a Source"   # trailing comment
url: {url}
role: primary
sourceType: official
authorityScore: 0.9
legalAssessment: approved   # checked 2026-10-01
priority: normal
collectionMethod: rss
enabled: true
cadence: PT6H
minIntervalSeconds: 0
fullText: none

# health, written by the pipeline
lastAttemptAt:
lastSuccessAt:
errorState:
blockedReason:
httpStatus:
etag:
lastModified:
lastResponseAt:
---

# Commented

Usage policy: *internal reading only*.
  Indented line, trailing spaces{trail}
Ünïcödé and a --- that is not a delimiter.
"""


def _without_health(text: str) -> list[str]:
    return [line for line in text.split("\n") if not line.startswith(HEALTH_KEYS)]


def test_source_file_keeps_comments_and_body_byte_for_byte(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    publisher = Publisher(rss([item(1)]))
    url = feed_server.add("/feed", handler=publisher)
    path = radar_env["vault"] / "Radar/Sources/commented.md"
    original = COMMENTED_SOURCE.format(url=url, trail="   ")
    path.write_bytes(original.encode())

    assert by_id(collect(radar_env))["commented"]["outcome"] == "passed"
    passed = path.read_text()
    fm = split_frontmatter(passed)[0]
    assert (fm["etag"], fm["lastSuccessAt"]) == ('"v1"', "2026-11-30T12:00:00Z")
    feed_server.add("/feed", b"oops", 500, HTML_TYPE)
    assert by_id(collect(radar_env, AS_OF + timedelta(hours=7)))["commented"]["outcome"] == "failed"
    failed = path.read_text()
    assert split_frontmatter(failed)[0]["errorState"] == "http-5xx"
    for text in (passed, failed):
        assert _without_health(text) == _without_health(original)
    assert path.read_bytes().endswith(original.split("---\n", 2)[2].encode())


# -- secrets ----------------------------------------------------------------------------------


def radar(
    *args: str, env: dict[str, Path], extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
        **(extra or {}),
    }
    return subprocess.run([RADAR, *args], capture_output=True, text=True, env=environ, timeout=180)


@pytest.mark.slow
def test_auth_token_sent_and_never_stored_or_printed(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url = feed_server.add("/feed", rss([item(1)]))
    write_source(vault, "private", url, authTokenEnv="RADAR_TEST_TOKEN")
    token_env = {"RADAR_TEST_TOKEN": TOKEN}
    first = radar("collect", "--source", "private", "--json", env=radar_env, extra=token_env)
    assert first.returncode == 0, first.stderr
    assert feed_server.requests_for("/feed")[-1].headers["authorization"] == f"Bearer {TOKEN}"

    # The publisher breaks and echoes the credential in its error page.
    feed_server.add("/feed", handler=echo_headers(500))
    as_of = (datetime.now(UTC) + timedelta(hours=7)).isoformat()
    second = radar(
        "collect", "--source", "private", "--as-of", as_of, "--json", env=radar_env, extra=token_env
    )
    assert second.returncode == 2, second.stderr
    report = json.loads(second.stdout)
    private = by_id(report)["private"]
    assert (private["outcome"], private["errorClass"]) == ("failed", "http-5xx")
    assert "authorization" in private["error"].lower()  # the page was quoted, redacted
    for output in (first.stdout, first.stderr, second.stdout, second.stderr):
        assert TOKEN not in output
    assert_nowhere(radar_env, TOKEN)
    for path in radar_env["home"].rglob("*"):  # the Dagster event log holds the metadata
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


# -- two processes, one Source --------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_one_fetch_one_signal(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    body = rss([item(1)])
    # Both processes start at once; the one that takes the Source's lock has its fetch held
    # until the other has exited (at most HOLD_S, inside a check's 20 s deadline), so the
    # other finds the Source locked. Started one after the other, the second's whole start-up
    # had to fit in HOLD_S; on a busy machine it did not, and its own fetch was held too.
    other_done = threading.Event()

    def held(req: RequestHandler) -> None:
        other_done.wait(timeout=HOLD_S)
        req.send_simple(200, body, {"Content-Type": "application/rss+xml"})

    write_source(vault, "slow", feed_server.add("/feed", handler=held))
    environ = {
        **os.environ,
        "RADAR_VAULT": str(radar_env["vault"]),
        "RADAR_DB": str(radar_env["db"]),
        "DAGSTER_HOME": str(radar_env["home"]),
    }
    # Two first-ever processes on an empty DAGSTER_HOME race on creating Dagster's SQLite
    # tables ("table secondary_indexes already exists"): create the instance once first.
    with dagster_instance(Settings.from_env()):
        pass
    command = [RADAR, "collect", "--source", "slow", "--json"]
    procs = [
        subprocess.Popen(
            command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 180
        while all(proc.poll() is None for proc in procs):
            assert time.monotonic() < deadline, "neither process ended in 180 s"
            time.sleep(0.05)
    finally:
        other_done.set()
    outputs = [proc.communicate(timeout=180) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, (out[-2000:], err[-2000:])
    entries = sorted(
        (by_id(json.loads(out))["slow"] for out, _ in outputs), key=lambda s: s["outcome"]
    )
    assert [(s["outcome"], s["error"]) for s in entries] == [
        ("passed", None),
        ("skipped", "locked"),
    ]
    assert entries[0]["created"] == 1
    assert len(feed_server.requests_for("/feed")) == 1
    assert len(signal_files(vault)) == 1
    assert store_dicts("SELECT count(*) AS n FROM signals")[0]["n"] == 1


# -- metrics per attempt ----------------------------------------------------------------------


def test_attempt_metrics_in_duckdb_and_dagster_metadata(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    import dagster as dg

    from radar_pipeline.definitions import defs
    from radar_pipeline.defs.collection.launch import launch_collection

    vault = radar_env["vault"]
    publisher = Publisher(rss([item(1), item(2)]))
    write_source(vault, "news", feed_server.add("/feed", handler=publisher))
    write_source(vault, "down", feed_server.add("/down", b"oops", 503, HTML_TYPE))
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
        report = launch_collection(
            defs, instance, Settings.from_env(), "explicit", ("news", "down"), AS_OF, "test"
        ).json_object()
        [news] = instance.fetch_materializations(dg.AssetKey("signals"), limit=10).records
        # The failed Source's own observation (the run also observes the whole collection).
        [down] = [
            r
            for r in instance.fetch_observations(dg.AssetKey("signals"), limit=10).records
            if r.partition_key == "down"
        ]
    assert news.partition_key == "news" and news.asset_materialization is not None
    meta = {k: v.value for k, v in news.asset_materialization.metadata.items()}
    assert {k: meta[k] for k in ("outcome", "http_status", "items_parsed", "items_new")} == {
        "outcome": "passed",
        "http_status": 200,
        "items_parsed": 2,
        "items_new": 2,
    }
    assert meta["validators_changed"] is True and len(str(meta["body_sha256"])) == 64
    assert meta["bytes"] == len(publisher.body) and float(str(meta["duration_ms"])) > 0
    observed = down.asset_observation
    assert observed is not None and observed.partition == "down"
    down_meta = {k: v.value for k, v in observed.metadata.items()}
    assert (down_meta["error_class"], down_meta["consecutive_failures"]) == ("http-5xx", 1)
    assert str(down_meta["backoff_until"]) > "2026-11-30T12:00:00Z"

    rows = {
        r["source_id"]: r
        for r in store_dicts(
            "SELECT * FROM fetch_attempts WHERE collection_id = $1",
            [report["collectionId"]],
        )
    }
    assert (rows["news"]["check_outcome"], rows["news"]["items_parsed"]) == ("passed", 2)
    assert (rows["news"]["items_new"], rows["news"]["items_duplicate"]) == (2, 0)
    assert rows["news"]["body_sha256"] == by_id(report)["news"]["bodySha256"]
    assert rows["news"]["validators_changed"] is True and rows["news"]["bytes"] > 0
    assert (rows["down"]["check_outcome"], rows["down"]["consecutive_failures"]) == ("failed", 1)
    assert rows["down"]["backoff_until"] > AS_OF
    assert rows["down"]["http_status"] == 503 and rows["down"]["error_class"] == "http-5xx"
