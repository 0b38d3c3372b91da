"""Feed manners against the loopback server: a User-Agent naming a contact, the
publisher's Cache-Control max-age and RSS <ttl> as a lower bound on the next check, permanent
redirects recorded for a person, 410 as a state that needs a person, no JSON Feed in Accept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.acquire.fetch import (
    POLITE_DELAY_CAP_S,
    Fetcher,
    FetchSettings,
    cache_max_age,
    polite_delay_s,
    user_agent,
)
from radar_pipeline.core.config import Settings
from radar_pipeline.core.models import FetchRequest, FetchResult
from radar_pipeline.core.vault.health import GONE_REASON, manners_fields
from radar_pipeline_tests.conftest import collect_stages
from radar_pipeline_tests.evidencekit import radar_process
from radar_pipeline_tests.feedserver import FeedServer, redirect_to
from radar_pipeline_tests.vaultkit import rss, write_source

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RSS = {"Content-Type": "application/rss+xml"}
FEED = rss([{"title": "t", "guid": "1", "link": "https://example.com/1"}])


@pytest.fixture
def fetcher(allow_loopback: None, tmp_path: Path) -> Iterator[Fetcher]:
    with Fetcher(FetchSettings.of(Settings.from_env()), tmp_path / "vault") as f:
        yield f


def fetch(fetcher: Fetcher, url: str) -> FetchResult:
    return fetcher.fetch(FetchRequest("src", url, "rss"), NOW)


def test_user_agent_names_the_contact_from_the_environment(
    radar_env: dict[str, Path], feed_server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = feed_server.add("/feed.xml", FEED, headers=RSS)
    write_source(radar_env["vault"], "manners", url)
    monkeypatch.setenv("RADAR_USER_AGENT_CONTACT", "radar-ops@example.com")
    proc = radar_process("collect", "--source", "manners", "--json", env=radar_env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["created"] == 1
    (request,) = feed_server.requests_for("/feed.xml")
    agent = request.headers["user-agent"]
    assert agent.startswith("RadarPipeline/") and "contact: radar-ops@example.com)" in agent
    assert "feed+json" not in request.headers["accept"]  # JSON Feed is not parsed: not asked for


def test_user_agent_contact_cannot_break_the_header() -> None:
    assert user_agent("") == user_agent("  \r\n")
    assert "contact" not in user_agent("")
    agent = user_agent("me@example.com)\r\nX-Evil: 1; (x)")
    assert "\r" not in agent and "\n" not in agent
    assert agent.endswith("; contact: me@example.com X-Evil: 1 x)")


def test_max_age_and_ttl_are_a_lower_bound_on_the_next_check(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    ttl_feed = FEED.replace(
        b"<description>t</description>", b"<ttl>90</ttl><description>t</description>"
    )
    cases = {
        "/plain": (FEED, {}, None, None, None),
        "/max-age": (FEED, {"Cache-Control": "public, max-age=1800"}, 1800, None, 1800),
        "/ttl": (ttl_feed, {}, None, 5400, 5400),
        "/both": (ttl_feed, {"Cache-Control": "max-age=600"}, 600, 5400, 5400),
        "/year": (FEED, {"Cache-Control": "max-age=31536000"}, 31536000, None, POLITE_DELAY_CAP_S),
        "/no-cache": (FEED, {"Cache-Control": "no-cache"}, 0, None, 0),
    }
    for path, (body, headers, max_age, ttl, delay) in cases.items():
        result = fetch(fetcher, feed_server.add(path, body, headers={**RSS, **headers}))
        assert result.outcome == "ok", (path, result.error_message)
        assert (result.cache_max_age_s, result.feed_ttl_s, polite_delay_s(result)) == (
            max_age,
            ttl,
            delay,
        ), path
    assert cache_max_age(["max-age=abc"]) is None
    assert cache_max_age(["private", 'max-age="60"']) == 60


def test_permanent_redirects_are_recorded_for_a_person(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    final = feed_server.add("/new.xml", FEED, headers=RSS)
    for status in (301, 308):
        url = feed_server.add(f"/old-{status}", handler=redirect_to(final, status))
        result = fetch(fetcher, url)
        assert (result.outcome, result.permanent_redirect) == ("ok", final), status
        assert manners_fields(result) == {"permanentRedirect": final}
    # A temporary hop first: the Source's URL is still the one to use.
    hop = feed_server.add("/moved", handler=redirect_to(final, 301))
    temporary = fetch(fetcher, feed_server.add("/temp", handler=redirect_to(hop, 302)))
    assert (temporary.outcome, temporary.permanent_redirect) == ("ok", None)
    # Permanent then temporary: the permanent hop's target is what a person should use.
    again = feed_server.add("/perm", handler=redirect_to(feed_server.url("/temp2"), 301))
    feed_server.add("/temp2", handler=redirect_to(final, 307))
    assert fetch(fetcher, again).permanent_redirect == feed_server.url("/temp2")
    direct = fetch(fetcher, final)
    assert manners_fields(direct) == {"permanentRedirect": None}  # cleared once fixed


def test_410_is_gone_for_good_and_needs_a_person(feed_server: FeedServer, fetcher: Fetcher) -> None:
    gone = fetch(fetcher, feed_server.add("/gone", b"gone", 410))
    assert (gone.outcome, gone.error_class, gone.permanently_gone) == ("failed", "gone", True)
    assert manners_fields(gone) == {"permanentRedirect": None, "blockedReason": GONE_REASON}
    missing = fetch(fetcher, feed_server.add("/missing", b"missing", 404))
    assert (missing.error_class, missing.permanently_gone) == ("gone", False)
    assert "blockedReason" not in manners_fields(missing)  # a 404 may be a publisher's slip
    unreachable = replace(missing, status=None)
    assert manners_fields(unreachable) == {}


def test_the_publishers_delay_holds_the_next_check_back() -> None:
    from datetime import timedelta

    from radar_pipeline.core.plan.schedule import is_due

    cadence, last = timedelta(hours=6), NOW - timedelta(hours=7)  # overdue by cadence
    assert is_due("src", cadence, last, NOW)
    assert not is_due("src", cadence, last, NOW, polite_until=NOW + timedelta(minutes=1))
    assert is_due("src", cadence, last, NOW, polite_until=NOW)
    assert not is_due("src", None, last, NOW, polite_until=None)  # manual stays manual


def _collect(env: dict[str, Path], as_of: datetime, *sources: str) -> dict[str, Any]:
    from radar_pipeline.core.collect.collector import Collector
    from radar_pipeline.core.plan.collection import CollectionSpec
    from radar_pipeline_tests.conftest import new_collection_id

    mode = "explicit" if sources else "all"
    spec = CollectionSpec(new_collection_id(), mode, as_of, sources)  # type: ignore[arg-type]
    with Collector(Settings.from_env()) as collector:
        return collect_stages(collector, spec).json_object()


def _health(source_file: Path) -> dict[str, Any]:
    import yaml

    header = source_file.read_text("utf-8").split("---\n")[1]
    return dict(yaml.safe_load(header))


def _outcomes(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {s["id"]: (s["outcome"], s["error"]) for s in report["sources"]}


def test_the_commit_keeps_what_the_publisher_asked_for(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Through the whole collection: max-age holds the next check back (an explicit one too),
    a 301 lands in the Source file for a person, and a 410 blocks the Source until a person
    clears `blockedReason`, instead of a retry every day."""
    vault = radar_env["vault"]
    polite = feed_server.add("/polite.xml", FEED, headers={**RSS, "Cache-Control": "max-age=3600"})
    new_home = feed_server.add("/new.xml", FEED, headers=RSS)
    moved = feed_server.add("/old.xml", handler=redirect_to(new_home, 301))
    gone = feed_server.add("/gone.xml", b"", status=410)
    for source_id, url in (("polite", polite), ("moved", moved), ("gone", gone)):
        write_source(vault, source_id, url)

    first = _outcomes(_collect(radar_env, NOW))
    assert first["polite"][0] == first["moved"][0] == "passed"
    assert first["gone"][0] == "failed"
    sources = vault / "Radar" / "Sources"
    assert _health(sources / "moved.md")["permanentRedirect"] == new_home
    assert _health(sources / "gone.md")["blockedReason"] == GONE_REASON

    soon = _outcomes(_collect(radar_env, NOW + timedelta(minutes=10), "polite", "gone"))
    assert soon["polite"][0] == "skipped" and "polite" in (soon["polite"][1] or "")
    assert soon["gone"][0] == "skipped" and "gone" in (soon["gone"][1] or "")
    later = _outcomes(_collect(radar_env, NOW + timedelta(hours=2)))
    assert later["polite"][0] in ("passed", "not-modified")
    assert "gone" not in later  # blocked: not even planned until a person acts
    assert len(feed_server.requests_for("/gone.xml")) == 1
