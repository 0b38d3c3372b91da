"""Page extraction on real parts: a loopback server with a feed of one-line excerpts, article
pages built from real articles (corpus/articles/) and a robots.txt; a real vault and store."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.acquire.challenge import is_challenge
from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.extract.pages import PageSettings
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.closes import record_close
from radar_pipeline.core.vault.cleanup import CleanupResult, close_temporary_content
from radar_pipeline_tests.conftest import (
    CORPUS,
    assert_not_stored,
    collect_stages,
    env_store,
    new_collection_id,
    store_rows,
)
from radar_pipeline_tests.evidencekit import radar_json
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PAGES = CORPUS / "articles"
ARTICLES = sorted(p.stem for p in PAGES.glob("*.html"))
HTML = {"Content-Type": "text/html; charset=utf-8"}
TEXT = {"Content-Type": "text/plain"}
TEMPORARY = Path("Radar") / "Temporary Content"
FAST = PageSettings(interval_s=0.0)


def _article(n: int) -> tuple[bytes, str]:
    """Page n's HTML and a sentence of its article (to find in the extracted text)."""
    stem = ARTICLES[n % len(ARTICLES)]
    expected = (PAGES / f"{stem}.txt").read_text(encoding="utf-8")
    sentence = max((s.strip() for s in expected.split(".")), key=len)[:80]
    return (PAGES / f"{stem}.html").read_bytes(), sentence


def _serve(
    server: FeedServer, count: int, robots: str | None = "User-agent: *\nAllow: /\n"
) -> tuple[str, list[str]]:
    """A feed of `count` items, each with a one-line excerpt and a page at /articles/<n>."""
    items = []
    sentences = []
    for n in range(count):
        page, sentence = _article(n)
        server.add(f"/articles/{n}", page, headers=HTML)
        sentences.append(sentence)
        day = AS_OF - timedelta(hours=count - n)
        items.append(
            {
                "title": f"Article {n}",
                "guid": f"a-{n}",
                "link": server.url(f"/articles/{n}"),
                "pubDate": day.strftime("%a, %d %b %Y %H:%M:%S +0000"),
                "description": "A one-line excerpt.",
            }
        )
    if robots is not None:
        server.add("/robots.txt", robots.encode(), headers=TEXT)
    return server.add("/feed.xml", rss(items)), sentences


def _collect(
    env: dict[str, Path], as_of: datetime = AS_OF, mode: str = "all", sources: tuple[str, ...] = ()
) -> dict[str, Any]:
    collector = Collector(Settings.from_env(), page_settings=FAST)
    spec = CollectionSpec(new_collection_id(), mode, as_of, sources)  # type: ignore[arg-type]
    with collector:
        return collect_stages(collector, spec).json_object()


def _source(report: dict[str, Any], source_id: str = "pages") -> dict[str, Any]:
    return next(s for s in report["sources"] if s["id"] == source_id)


def _page_states() -> dict[str, tuple[str, int]]:
    rows = store_rows("SELECT page_url, status, attempts FROM page_state")
    return {url.rsplit("/", 1)[-1]: (status, attempts) for url, status, attempts in rows}


def _page_requests(server: FeedServer) -> list[str]:
    return [r.path for r in server.requests if r.path.startswith("/articles/")]


def _temporary_files(vault: Path) -> list[Path]:
    folder = vault / TEMPORARY
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def test_page_text_lands_in_temporary_content_only(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url, sentences = _serve(feed_server, 2)
    write_source(vault, "pages", url, fullText="page-extraction")

    report = _collect(radar_env)

    src = _source(report)
    assert src["outcome"] == "passed" and src["created"] == 2
    assert src["pages"]["fetched"] == 2 and src["pages"]["pending"] == 0
    assert src["pages"]["robotsFetched"] == 1
    files = _temporary_files(vault)
    assert [f.stem for f in files] == sorted(p.stem for p in signal_files(vault))
    texts = [f.read_text(encoding="utf-8") for f in files]
    for sentence in sentences:
        assert sum(sentence in text for text in texts) == 1, sentence
        for signal in signal_files(vault):  # never in the Signal
            assert sentence not in signal.read_text(encoding="utf-8")
    header = texts[0].split("---", 2)[1]
    assert "pageUrl:" in header and 'fetchedAt: "2026-11-30T12:00:00Z"' in header
    assert 'extractor: "trafilatura' in header
    # The store holds the page's state, never its text.
    with env_store().transaction() as con:
        rows = con.execute(
            "SELECT status, attempts, final_url, extractor, text_bytes FROM page_state"
        ).fetchall()
        stored = con.execute("SELECT report_json FROM collections").fetchone()
    assert {r[0] for r in rows} == {"fetched"} and all(r[1] == 1 for r in rows)
    assert all(r[2].startswith(feed_server.base_url) and r[4] > 0 for r in rows)
    assert stored is not None and '"fetched": 2' in stored[0]
    for sentence in sentences:
        assert_not_stored(sentence)

    # The next check fetches nothing again: the pages are settled.
    again = _collect(radar_env, AS_OF + timedelta(hours=7))
    assert _source(again)["pages"]["requests"] == 0
    assert len(_page_requests(feed_server)) == 2


def test_robots_disallowed_path_is_never_requested(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url, _ = _serve(feed_server, 3, robots="User-agent: *\nDisallow: /articles/1\n")
    write_source(vault, "pages", url, fullText="page-extraction")

    report = _collect(radar_env)

    pages = _source(report)["pages"]
    assert (pages["fetched"], pages["disallowed"], pages["pending"]) == (2, 1, 0)
    assert sorted(_page_requests(feed_server)) == ["/articles/0", "/articles/2"]
    assert _page_states()["1"] == ("disallowed", 0)
    assert len(_temporary_files(vault)) == 2
    # robots.txt is cached in DuckDB: the next check of the host does not ask again.
    write_source(vault, "pages", url, fullText="page-extraction")
    _collect(radar_env, AS_OF + timedelta(hours=7))
    assert len(feed_server.requests_for("/robots.txt")) == 1


def test_challenge_page_stops_the_source_and_sets_its_backoff(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url, _ = _serve(feed_server, 4)
    challenge = b"<html><head><title>Just a moment...</title></head><body>cf-chl</body></html>"
    feed_server.add("/articles/1", challenge, status=403, headers=HTML)
    write_source(vault, "pages", url, fullText="page-extraction")

    report = _collect(radar_env)

    src = _source(report)
    assert src["outcome"] == "passed"
    assert src["pages"]["fetched"] == 1 and src["pages"]["stopped"] == 3
    assert "challenge" in src["pages"]["blocked"]
    assert _page_requests(feed_server) == ["/articles/0", "/articles/1"]  # 2 and 3 never
    states = _page_states()
    assert states["1"] == ("stopped", 1)
    assert states["2"] == ("pending", 0) and states["3"] == ("pending", 0)
    with env_store().transaction() as con:
        row = con.execute(
            "SELECT error_state, backoff_until FROM feed_state WHERE source_id = 'pages'"
        ).fetchone()
    assert row is not None and row[0] == "page-blocked"
    assert row[1] >= AS_OF + timedelta(hours=6)
    assert "errorState: page-blocked" in (vault / "Radar/Sources/pages.md").read_text()

    # The Source waits: even a person naming it does not override the publisher's refusal.
    later = _collect(radar_env, AS_OF + timedelta(hours=1), mode="explicit", sources=("pages",))
    assert _source(later)["outcome"] == "skipped" and "page-blocked" in _source(later)["error"]
    assert _page_requests(feed_server) == ["/articles/0", "/articles/1"]

    # After the backoff the pass resumes, oldest first, with the stopped page.
    feed_server.add("/articles/1", _article(1)[0], headers=HTML)
    resumed = _collect(radar_env, AS_OF + timedelta(hours=25))
    assert _source(resumed)["pages"]["fetched"] == 3
    assert _page_requests(feed_server)[2:] == ["/articles/1", "/articles/2", "/articles/3"]


def test_429_stops_the_pass_too(radar_env: dict[str, Path], feed_server: FeedServer) -> None:
    url, _ = _serve(feed_server, 3)
    feed_server.add("/articles/0", b"slow down", status=429, headers={"Retry-After": "7200"})
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")

    pages = _source(_collect(radar_env))["pages"]

    assert (pages["fetched"], pages["stopped"], pages["pending"]) == (0, 3, 3)
    assert _page_requests(feed_server) == ["/articles/0"]
    with env_store().transaction() as con:
        row = con.execute("SELECT backoff_until FROM feed_state").fetchone()
    assert row is not None and row[0] >= AS_OF + timedelta(seconds=7200)


def test_budget_bounds_each_check_and_the_next_check_takes_the_rest(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url, _ = _serve(feed_server, 5)
    write_source(vault, "pages", url, fullText="page-extraction", pageBudget=2)

    first = _source(_collect(radar_env))["pages"]

    assert (first["fetched"], first["requests"], first["pending"]) == (2, 2, 3)
    # Oldest Signal first; all five Signals came in one check, so their order is stable.
    assert len(_page_requests(feed_server)) == 2
    assert len(_temporary_files(vault)) == 2

    second = _source(_collect(radar_env, AS_OF + timedelta(hours=7)))["pages"]
    assert (second["fetched"], second["pending"]) == (2, 1)
    third = _source(_collect(radar_env, AS_OF + timedelta(hours=14)))["pages"]
    assert (third["fetched"], third["pending"]) == (1, 0)
    assert sorted(_page_requests(feed_server)) == [f"/articles/{n}" for n in range(5)]
    assert len(_temporary_files(vault)) == 5


def test_pending_pages_beyond_the_recovery_cap_are_never_fetched(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url, _ = _serve(feed_server, 3)
    write_source(vault, "pages", url, fullText="page-extraction", pageBudget=0)
    assert _source(_collect(radar_env))["pages"]["pending"] == 3
    # Budget 0 pauses the pages: not even robots.txt is asked for.
    assert feed_server.requests_for("/robots.txt") == [] and _page_requests(feed_server) == []

    write_source(vault, "pages", url, fullText="page-extraction", pageBudget=10)
    late = _source(_collect(radar_env, AS_OF + timedelta(days=8)))["pages"]

    assert (late["expired"], late["fetched"], late["pending"]) == (3, 0, 0)
    assert _page_requests(feed_server) == []
    assert {s for s, _ in _page_states().values()} == {"expired"}


@pytest.mark.parametrize("policy", ["none", "feed-content"])
def test_sources_without_page_policy_never_fetch_a_page(
    radar_env: dict[str, Path], feed_server: FeedServer, policy: str
) -> None:
    url, _ = _serve(feed_server, 3)
    write_source(radar_env["vault"], "pages", url, fullText=policy)

    report = _collect(radar_env)

    assert _source(report)["created"] == 3 and _source(report)["pages"] is None
    assert _page_requests(feed_server) == [] and feed_server.requests_for("/robots.txt") == []
    assert _page_states() == {}


def test_per_host_interval_spaces_requests(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url, _ = _serve(feed_server, 3)
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")
    collector = Collector(Settings.from_env(), page_settings=PageSettings(0.3))
    with collector:
        collect_stages(collector, CollectionSpec(new_collection_id(), "all", AS_OF))

    times = [r.at for r in feed_server.requests if r.path.startswith(("/articles/", "/robots.txt"))]
    assert len(times) == 4  # robots.txt and three pages, one host
    assert all(b - a >= 0.29 for a, b in itertools.pairwise(times))


def test_robots_crawl_delay_spaces_page_requests(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """An origin's Crawl-delay longer than our own interval governs its page requests."""
    url, _ = _serve(feed_server, 3, robots="User-agent: *\nCrawl-delay: 0.4\nAllow: /\n")
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")
    pages = _source(_collect(radar_env))["pages"]

    assert (pages["fetched"], pages["pending"]) == (3, 0)
    times = [r.at for r in feed_server.requests if r.path.startswith("/articles/")]
    assert all(b - a >= 0.39 for a, b in itertools.pairwise(times)), times


def test_a_crawl_delay_longer_than_a_collection_waits_leaves_pages_for_later(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A Crawl-delay of an hour: one page a collection, the others stay pending, not sent."""
    url, _ = _serve(feed_server, 3, robots="User-agent: *\nCrawl-delay: 3600\nAllow: /\n")
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")
    first = _source(_collect(radar_env))["pages"]

    assert (first["fetched"], first["requests"], first["pending"]) == (1, 1, 2)
    assert len(_page_requests(feed_server)) == 1
    later = _source(_collect(radar_env, AS_OF + timedelta(hours=1)))["pages"]
    assert (later["fetched"], later["pending"]) == (1, 1)
    assert len(_page_requests(feed_server)) == 2


def test_page_without_main_text_fails_with_a_reason_and_the_pass_goes_on(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url, _ = _serve(feed_server, 3)
    feed_server.add("/articles/0", b"<html><body></body></html>", headers=HTML)
    feed_server.add("/articles/1", b'{"not": "html"}', headers={"Content-Type": "application/json"})
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")

    pages = _source(_collect(radar_env))["pages"]

    assert (pages["fetched"], pages["failed"]) == (1, 2)
    with env_store().transaction() as con:
        reasons = dict(con.execute("SELECT page_url, reason FROM page_state").fetchall())
    assert reasons[feed_server.url("/articles/0")] == "no main text found"
    assert "not-a-page" in reasons[feed_server.url("/articles/1")]


@pytest.mark.slow
def test_weekly_close_empties_extracted_pages(
    radar_env: dict[str, Path], feed_server: FeedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = radar_env["vault"]
    url, _ = _serve(feed_server, 2)
    write_source(vault, "pages", url, fullText="page-extraction")
    code, report, err = radar_json(capsys, "collect", "--all")  # through Dagster
    assert code == 0, err
    assert _source(report)["pages"]["fetched"] == 2
    assert len(_temporary_files(vault)) == 2
    with dg.DagsterInstance.from_config(str(radar_env["home"])) as instance:
        [record] = instance.fetch_materializations(dg.AssetKey("signals"), limit=5).records
    assert record.asset_materialization is not None
    meta = {k: v.value for k, v in record.asset_materialization.metadata.items()}
    assert (meta["pages_fetched"], meta["pages_pending"], meta["pages_blocked"]) == (2, 0, "")

    code, close, err = radar_json(capsys, "cleanup")

    assert code == 0, err
    assert close["deleted"] == 2 and close["retained"] == 0
    assert _temporary_files(vault) == [] and len(signal_files(vault)) == 2
    assert close_temporary_content(vault).deleted == 0


CHALLENGES = [
    # (status, cf-mitigated, body head, challenge?)
    (403, None, b"<title>Just a moment...</title>", True),
    (503, None, b"<script src='/cdn-cgi/challenge-platform/h/b'>", True),
    (403, None, b"<div class='g-recaptcha'>captcha</div>", True),
    (429, None, b"cf-chl-opt", True),
    (200, "challenge", b"<html>ok</html>", True),
    (200, None, b"<html><title>Just a moment...</title>", True),
    (200, None, b"<script>window._cf_chl_opt={cType: 'managed'}</script>", True),
    (200, None, b"<script src='/cdn-cgi/challenge-platform/h/g/orchestrate'>", True),
    (200, None, b"<p>Why captcha walls fail users</p>", False),  # an article about them
    (200, None, b"<p>The cf-chl cookie and the challenge-platform</p>", False),
    (403, None, b"<h1>Forbidden</h1>", False),  # a 403, but no challenge (still stops pages)
    (404, None, b"just a moment...", False),
    (500, None, b"cf-chl", False),
]


@pytest.mark.parametrize(("status", "cf_mitigated", "head", "expected"), CHALLENGES)
def test_challenge_detection(
    status: int, cf_mitigated: str | None, head: bytes, expected: bool
) -> None:
    assert is_challenge(status, cf_mitigated, head) is expected


def _write_registry(vault: Path, **overrides: Any) -> list[tuple[str, str]]:
    write_source(vault, "src", "https://example.com/feed.xml", **overrides)
    snapshot = load_registry(vault)
    return [(i.code, i.message) for i in snapshot.issues]


@pytest.mark.parametrize("value", ["-1", "ten", "2.5", "true"])
def test_registry_rejects_a_bad_page_budget(tmp_path: Path, value: str) -> None:
    issues = _write_registry(tmp_path, fullText="page-extraction", pageBudget=value)
    assert [code for code, _ in issues] == ["invalid-page-budget"]
    assert "`pageBudget`" in issues[0][1] and "0 or more" in issues[0][1]
    assert load_registry(tmp_path).sources == ()


def test_registry_flags_a_page_budget_without_page_policy(tmp_path: Path) -> None:
    issues = _write_registry(tmp_path, fullText="feed-content", pageBudget=3)
    assert [code for code, _ in issues] == ["page-budget-unused"]
    # The Source itself stays valid: the key has no effect, nothing is fetched.
    (record,) = load_registry(tmp_path).sources
    assert record.source.page_budget == 3 and record.source.full_text == "feed-content"


def test_page_budget_defaults_to_ten(tmp_path: Path) -> None:
    assert _write_registry(tmp_path, fullText="page-extraction") == []
    (record,) = load_registry(tmp_path).sources
    assert record.source.pages_per_check == 10


@pytest.mark.parametrize(
    ("status", "fetched", "pending", "blocked"),
    [
        (404, 2, 0, False),  # no robots.txt: every path allowed (RFC 9309)
        (500, 0, 2, False),  # unreachable: nothing fetched from the origin, pages wait
        (403, 0, 2, True),  # a refusal: the stop rule
    ],
)
def test_robots_answers_decide_the_origin(
    radar_env: dict[str, Path],
    feed_server: FeedServer,
    status: int,
    fetched: int,
    pending: int,
    blocked: bool,
) -> None:
    url, _ = _serve(feed_server, 2, robots=None)
    feed_server.add("/robots.txt", b"no", status=status, headers=TEXT)
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")

    pages = _source(_collect(radar_env))["pages"]

    assert (pages["fetched"], pages["pending"], pages["robotsFetched"]) == (fetched, pending, 1)
    assert len(_page_requests(feed_server)) == fetched
    assert (pages["blocked"] is not None) is blocked
    with env_store().transaction() as con:
        cached = con.execute("SELECT verdict FROM robots_cache").fetchall()
    assert cached == ([("allow-all",)] if status == 404 else [])


def test_page_redirects_are_checked_against_the_address_policy(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url, _ = _serve(feed_server, 2)
    feed_server.add("/articles/0", status=302, headers={"Location": "http://10.0.0.1/internal"})
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")

    pages = _source(_collect(radar_env))["pages"]

    assert (pages["fetched"], pages["failed"]) == (1, 1)
    with env_store().transaction() as con:
        (reason,) = con.execute(
            "SELECT reason FROM page_state WHERE page_url LIKE '%/articles/0'"
        ).fetchone() or ("",)
    assert "policy" in reason and "refused" in reason
    assert len(_temporary_files(radar_env["vault"])) == 1


def test_page_larger_than_the_cap_fails_and_writes_nothing(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url, _ = _serve(feed_server, 1)
    feed_server.add(
        "/articles/0", b"<html><body>" + b"<p>word</p>" * 300_000 + b"</body></html>", headers=HTML
    )
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")

    pages = _source(_collect(radar_env))["pages"]

    assert (pages["fetched"], pages["failed"]) == (0, 1)
    assert _temporary_files(radar_env["vault"]) == []


def test_a_page_fetched_after_a_close_waits_for_the_next_one(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A Signal from before a weekly close whose page comes later is not a survivor of that
    close: the retention audit dates the file by its `fetchedAt`, not by its Signal id."""
    vault = radar_env["vault"]
    paths = Settings.from_env().paths
    url, _ = _serve(feed_server, 1)
    write_source(vault, "pages", url, fullText="page-extraction", pageBudget=0)
    _collect(radar_env)
    record_close(env_store(), CleanupResult(0, 0, 0), AS_OF + timedelta(hours=1), None)
    write_source(vault, "pages", url, fullText="page-extraction")

    assert _source(_collect(radar_env, AS_OF + timedelta(hours=7)))["pages"]["fetched"] == 1

    audit = run_audit("retention", paths, AS_OF + timedelta(hours=8))
    assert audit.passed, audit.findings
    assert audit.figures["pending_next_close"] == 1


def test_a_fixture_source_never_fetches_pages(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    _serve(feed_server, 2)
    feed = feed_server.routes["/feed.xml"].body
    write_fixture_source(radar_env["vault"], "pages", feed, fullText="page-extraction")

    report = _collect(radar_env)

    assert _source(report)["created"] == 2 and _source(report)["pages"] is None
    assert feed_server.requests == []  # not the feed (a file), not a page, not robots.txt
    assert _page_states() == {}


def test_robots_txt_is_asked_once_per_host_in_a_collection(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Two Sources on one host: one robots.txt request, even for an answer DuckDB does not
    keep (a 5xx), and the second Source counts none."""
    url, _ = _serve(feed_server, 2, robots=None)
    feed_server.add("/robots.txt", b"down", status=503, headers=TEXT)
    write_source(radar_env["vault"], "pages", url, fullText="page-extraction")
    write_source(radar_env["vault"], "pages-too", url, fullText="page-extraction")

    report = _collect(radar_env)

    fetched = [_source(report, sid)["pages"]["robotsFetched"] for sid in ("pages", "pages-too")]
    assert sorted(fetched) == [0, 1]
    assert len(feed_server.requests_for("/robots.txt")) == 1
    assert _page_requests(feed_server) == []
