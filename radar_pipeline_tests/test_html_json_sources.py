"""HTML, JSON and JSON Feed Sources: a loopback publisher serves a changelog page, a
WordPress REST answer and a JSON Feed (hand-written to look like real ones:
corpus/README.md), the Collector or the real `radar` command checks them, and the reports,
Signal files and DuckDB rows are compared. One pipeline: identity, accounting, conditional
requests, failure classes and dead letters are the feeds' own, only the parsers are new."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.collect.workers import ParseJob, ParseWorkers, parse_job
from radar_pipeline.core.config import REPO_ROOT, Settings
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.parse.spec import HtmlSpec, JsonSpec
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline_tests.conftest import CORPUS, collect_stages, new_collection_id, store_rows
from radar_pipeline_tests.evidencekit import radar_json
from radar_pipeline_tests.feedserver import FeedServer, conditional
from radar_pipeline_tests.vaultkit import rss, signal_files, write_source

T = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
PAGES = CORPUS / "pages"
HTML_TYPE = {"Content-Type": "text/html; charset=utf-8"}
JSON_TYPE = {"Content-Type": "application/json; charset=UTF-8"}
FEED_JSON_TYPE = {"Content-Type": "application/feed+json"}
CHANGELOG_KEYS = {
    "collectionMethod": "html",
    "itemSelector": "article.changelog-entry",
    "titleSelector": "h2.entry-title",
    "linkSelector": "h2.entry-title",
    "dateSelector": ".entry-date",
    "summarySelector": ".entry-body",
}
# The documented WordPress REST example (docs/operations.md).
WORDPRESS_KEYS = {
    "collectionMethod": "json",
    "itemsPath": '"@"',
    "titlePath": "title.rendered",
    "linkPath": "link",
    "idPath": "guid.rendered",
    "datePath": "date_gmt",
    "summaryPath": "excerpt.rendered",
}


def page(name: str) -> bytes:
    return (PAGES / name).read_bytes()


def regenerated(body: bytes) -> bytes:
    """The same items in new bytes, as a page or API regenerated later is (a build stamp, other
    whitespace): a body hash equal to the last one would end the check as not-modified."""
    return (
        body + b"\n<!-- build 2026-11-30T18:00 -->\n"
        if body.lstrip()[:1] == b"<"
        else body + b" \n"
    )


def collect(env: dict[str, Path], as_of: datetime = T) -> dict[str, Any]:
    with Collector(Settings.from_env()) as collector:
        return collect_stages(
            collector, CollectionSpec(new_collection_id(), "all", as_of, ())
        ).json_object()


def source(report: dict[str, Any], source_id: str) -> dict[str, Any]:
    [found] = [s for s in report["sources"] if s["id"] == source_id]
    return found


def balanced(src: dict[str, Any]) -> bool:
    outcomes = ("created", "reused", "updated", "duplicates", "rejected", "deferred")
    return bool(src["itemsParsed"] == sum(src[k] for k in outcomes) + src["outsideWindow"])


def signals_by_url(vault: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for path in signal_files(vault):
        fm, _body = split_frontmatter(path.read_text("utf-8"))
        out[fm["canonicalUrl"]] = fm
    return out


# -- HTML -----------------------------------------------------------------------------------------


def test_html_changelog_page_becomes_signals_created_then_reused(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Nested markup, relative links (`/x`, `../x`), `<time datetime>`, a date written as text,
    one entry without a date and one older than the recovery cap."""
    vault = radar_env["vault"]
    url = feed_server.add("/changelog/", page("changelog.html"), headers=HTML_TYPE)
    write_source(vault, "acme-changelog", url, **CHANGELOG_KEYS)

    first = source(collect(radar_env), "acme-changelog")
    assert (first["outcome"], first["httpStatus"], first["error"]) == ("passed", 200, None)
    assert (first["itemsParsed"], first["created"], first["outsideWindow"]) == (5, 4, 1)
    assert balanced(first)

    # Canonical URLs are https (an http/https flip is the same item: invariant 2).
    base = feed_server.url("/changelog").replace("http://", "https://")
    signals = signals_by_url(vault)
    assert sorted(signals) == sorted(
        [
            f"{base}/2026-11-29-workflow-artifacts/",
            f"{base}/2026-11-27-faster-search/",  # `../changelog/x/?utm_source=`: resolved, clean
            f"{base}/cli-login-fix/",
            "https://acme.example/changelog/2026-11-25-audit-log-export/",  # absolute as given
        ]
    )
    artifacts = signals[f"{base}/2026-11-29-workflow-artifacts/"]
    assert artifacts["title"] == "Workflow artifacts are kept for 90 days"  # <em> is text
    assert artifacts["observedAt"] == "2026-11-29T16:30:00Z"  # the datetime attribute
    assert (artifacts["observationKind"], artifacts["collectionMethod"]) == (
        "html-observation",
        "html",
    )
    assert artifacts["publishedAt"] is None
    assert artifacts["requestedUrl"] == url and artifacts["sourceId"] == "acme-changelog"
    search = signals[f"{base}/2026-11-27-faster-search/"]
    assert search["title"] == "Code search is faster & finds renamed files"
    assert search["observedAt"] == "2026-11-27T00:00:00Z"  # a day: that day, 00:00 UTC
    assert search["itemUrl"].endswith("?utm_source=changelog")
    undated = signals[f"{base}/cli-login-fix/"]
    assert undated["observedAt"] is None and undated["observedField"] is None  # never guessed
    written = signals["https://acme.example/changelog/2026-11-25-audit-log-export/"]
    assert written["observedAt"] == "2026-11-25T00:00:00Z"  # "November 25, 2026" as text
    body = (vault / "Radar" / "Signals" / f"{artifacts['id']}.md").read_text("utf-8")
    assert "retained for 90 days" in body and "alert(" not in body  # script never content

    feed_server.add("/changelog/", regenerated(page("changelog.html")), headers=HTML_TYPE)
    second = source(collect(radar_env, T + timedelta(hours=6)), "acme-changelog")
    assert (second["created"], second["reused"], second["outsideWindow"]) == (0, 4, 1)
    assert balanced(second) and len(signal_files(vault)) == 4
    assert feed_server.requests_for("/changelog/")[0].headers["accept"].startswith("text/html")


def test_html_field_evidence_is_recorded_with_the_observations(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Which selector produced each field, and what of it was read, per observed item."""
    vault = radar_env["vault"]
    url = feed_server.add("/changelog/", page("changelog.html"), headers=HTML_TYPE)
    write_source(vault, "acme-changelog", url, **CHANGELOG_KEYS)
    collect(radar_env)
    rows = store_rows(
        "SELECT s.canonical_url, e.field, e.method, e.expression, e.origin FROM field_evidence e "
        "JOIN signals s USING (identity) ORDER BY 1, 2",
    )
    artifacts = [r[1:] for r in rows if r[0].endswith("/2026-11-29-workflow-artifacts/")]
    assert artifacts == [
        ("date", "html", ".entry-date", "attr:datetime"),
        ("link", "html", "h2.entry-title", "a[href]"),
        ("summary", "html", ".entry-body", "text"),
        ("title", "html", "h2.entry-title", "text"),
    ]
    undated = {r[1] for r in rows if r[0].endswith("/cli-login-fix/")}
    assert undated == {"link", "summary", "title"}  # no date evidence: there is no date
    text_date = [r[4] for r in rows if r[0].endswith("audit-log-export/") and r[1] == "date"]
    assert text_date == ["text"]
    # The item outside the window has its evidence too; every observed item has some.
    assert store_rows(
        "SELECT count(DISTINCT identity) FROM field_evidence WHERE source_id = 'acme-changelog'",
    ) == [(5,)]


def test_changed_markup_is_an_extraction_failure_then_recovers(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A redesigned page on which the selectors match nothing fails with class `extraction`
    (a dead letter, errorState, no Signal touched); the old markup back: reused, not created."""
    vault = radar_env["vault"]
    url = feed_server.add("/changelog/", page("changelog.html"), headers=HTML_TYPE)
    path = write_source(vault, "acme-changelog", url, **CHANGELOG_KEYS)
    assert source(collect(radar_env), "acme-changelog")["created"] == 4
    before = sorted(p.name for p in signal_files(vault))

    feed_server.add("/changelog/", page("changelog-redesigned.html"), headers=HTML_TYPE)
    report = collect(radar_env, T + timedelta(hours=6))
    failed = source(report, "acme-changelog")
    assert (failed["outcome"], failed["itemsParsed"], report["failed"]) == ("failed", 0, 1)
    assert failed["error"].startswith("parse: extraction: itemSelector 'article.changelog-entry'")
    assert sorted(p.name for p in signal_files(vault)) == before
    assert split_frontmatter(path.read_text("utf-8"))[0]["errorState"] == "extraction"
    assert store_rows(
        "SELECT stage, error_class, status FROM dead_letters WHERE source_id = $1",
        ["acme-changelog"],
    ) == [("parse", "extraction", "open")]  # fmt: skip

    feed_server.add("/changelog/", regenerated(page("changelog.html")), headers=HTML_TYPE)
    back = source(collect(radar_env, T + timedelta(hours=12)), "acme-changelog")
    assert (back["outcome"], back["created"], back["reused"]) == ("passed", 0, 4)


def test_title_selector_matching_no_item_is_an_extraction_failure(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Items found but their required title selector matches on none of them: `extraction`."""
    vault = radar_env["vault"]
    url = feed_server.add("/changelog/", page("changelog.html"), headers=HTML_TYPE)
    write_source(vault, "acme", url, **{**CHANGELOG_KEYS, "titleSelector": "h3.entry-title"})
    failed = source(collect(radar_env), "acme")
    assert failed["outcome"] == "failed"
    assert failed["error"].startswith("parse: extraction: titleSelector 'h3.entry-title'")


def test_extraction_failure_reaches_the_collect_json_and_the_dead_letters(
    radar_env: dict[str, Path], feed_server: FeedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the real `radar collect --json` (a Dagster run): exit 2, the Source failed with
    error class `extraction`; `radar dlq list` names the class."""
    vault = radar_env["vault"]
    url = feed_server.add("/changelog/", page("changelog-redesigned.html"), headers=HTML_TYPE)
    write_source(vault, "acme-changelog", url, **CHANGELOG_KEYS)
    code, report, _err = radar_json(capsys, "collect", "--all", "--as-of", "2026-11-30T12:00:00Z")
    assert code == 2
    failed = source(report, "acme-changelog")
    assert (failed["outcome"], report["failed"]) == ("failed", 1)
    assert "extraction" in failed["error"]
    code, letters, _err = radar_json(capsys, "dlq", "list")
    assert code == 0
    assert [(d["sourceId"], d["stage"], d["errorClass"]) for d in letters["deadLetters"]] == [
        ("acme-changelog", "parse", "extraction")
    ]


def test_html_source_answers_conditional_requests_like_a_feed(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """Validators from the page's response are sent next time; a 304 ends the check."""
    vault = radar_env["vault"]
    handler = conditional(
        page("changelog.html"), '"v1"', "Mon, 30 Nov 2026 10:00:00 GMT", "text/html"
    )
    url = feed_server.add("/changelog/", handler=handler)
    write_source(vault, "acme-changelog", url, **CHANGELOG_KEYS)
    assert source(collect(radar_env), "acme-changelog")["created"] == 4
    again = source(collect(radar_env, T + timedelta(hours=6)), "acme-changelog")
    assert (again["outcome"], again["httpStatus"], again["itemsParsed"]) == ("not-modified", 304, 0)
    assert feed_server.requests_for("/changelog/")[-1].headers["if-none-match"] == '"v1"'


def test_a_json_answer_for_an_html_source_is_refused_by_class(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """A body that is not the method's format at all: `not-html` / `not-json`, not a crash."""
    vault = radar_env["vault"]
    url = feed_server.add("/changelog/", page("wp-posts.json"), headers=JSON_TYPE)
    write_source(vault, "acme-changelog", url, **CHANGELOG_KEYS)
    api = feed_server.add("/wp-json/wp/v2/posts", page("changelog.html"), headers=HTML_TYPE)
    write_source(vault, "acme-blog", api, **WORDPRESS_KEYS)
    broken = feed_server.add("/broken.json", b'[{"title": ', headers=JSON_TYPE)
    write_source(vault, "acme-broken", broken, **WORDPRESS_KEYS)
    report = collect(radar_env)
    assert source(report, "acme-changelog")["error"].startswith("fetch: not-html")
    assert source(report, "acme-blog")["error"].startswith("fetch: not-json")
    assert source(report, "acme-broken")["error"].startswith("parse: not-json")
    assert report["failed"] == 3 and not signal_files(vault)


# -- JSON -----------------------------------------------------------------------------------------


def test_wordpress_rest_answer_becomes_signals_created_then_reused(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """The documented WordPress REST example Source on a `/wp-json/wp/v2/posts` answer."""
    vault = radar_env["vault"]
    url = feed_server.add("/wp-json/wp/v2/posts", page("wp-posts.json"), headers=JSON_TYPE)
    write_source(vault, "acme-blog", url, **WORDPRESS_KEYS)

    first = source(collect(radar_env), "acme-blog")
    assert (first["itemsParsed"], first["created"], first["outsideWindow"]) == (3, 2, 1)
    assert balanced(first)
    signals = signals_by_url(vault)
    cache = signals["https://blog.acme.example/2026/11/how-we-cut-build-times-in-half/"]
    assert cache["sourceItemId"] == "https://blog.acme.example/?p=4211"  # guid.rendered
    assert cache["observedAt"] == "2026-11-28T15:04:11Z"  # date_gmt, not the local date
    assert (cache["observationKind"], cache["collectionMethod"]) == ("json-observation", "json")
    pg = signals["https://blog.acme.example/2026/11/postgres-17-upgrade-notes/"]
    assert pg["title"] == "Upgrading 40 Postgres clusters to 17 \u2013 what broke"  # &#8211;
    body = (vault / "Radar" / "Signals" / f"{pg['id']}.md").read_text("utf-8")
    assert "replication slots" in body and "<p>" not in body
    assert store_rows(
        "SELECT field, expression FROM field_evidence e JOIN signals s USING (identity) "
        "WHERE s.signal_id = $1 ORDER BY field",
        [cache["id"]],
    ) == [
        ("date", "date_gmt"),
        ("id", "guid.rendered"),
        ("link", "link"),
        ("summary", "excerpt.rendered"),
        ("title", "title.rendered"),
    ]
    assert (
        feed_server.requests_for("/wp-json/wp/v2/posts")[0]
        .headers["accept"]
        .startswith("application/json")
    )

    regenerated_answer = regenerated(page("wp-posts.json"))
    feed_server.add("/wp-json/wp/v2/posts", regenerated_answer, headers=JSON_TYPE)
    second = source(collect(radar_env, T + timedelta(hours=6)), "acme-blog")
    assert (second["created"], second["reused"], second["outsideWindow"]) == (0, 2, 1)
    assert balanced(second) and len(signal_files(vault)) == 2


def test_json_answer_whose_structure_changed_is_an_extraction_failure(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """The API now wraps its posts (`{"data": [...]}`): itemsPath `@` yields no list."""
    vault = radar_env["vault"]
    url = feed_server.add("/wp-json/wp/v2/posts", page("wp-posts.json"), headers=JSON_TYPE)
    write_source(vault, "acme-blog", url, **WORDPRESS_KEYS)
    assert source(collect(radar_env), "acme-blog")["created"] == 2
    wrapped = b'{"data": ' + page("wp-posts.json") + b"}"
    feed_server.add("/wp-json/wp/v2/posts", wrapped, headers=JSON_TYPE)
    failed = source(collect(radar_env, T + timedelta(hours=6)), "acme-blog")
    assert failed["outcome"] == "failed"
    assert failed["error"].startswith("parse: extraction: itemsPath '@' yields a dict")
    renamed = page("wp-posts.json").replace(b'"link"', b'"permalink"')
    feed_server.add("/wp-json/wp/v2/posts", renamed, headers=JSON_TYPE)
    failed = source(collect(radar_env, T + timedelta(hours=12)), "acme-blog")
    assert failed["error"].startswith("parse: extraction: linkPath 'link' yields nothing")
    assert len(signal_files(radar_env["vault"])) == 2


def test_items_path_failing_on_the_answer_is_an_extraction_failure() -> None:
    """A path that compiles but cannot run on this answer (a function given the wrong type)."""
    spec = JsonSpec("sort(@)", "title.rendered", "link")
    job = ParseJob("api", page("wp-posts.json"), "https://blog.acme.example/", None, T, None,
                   method="json", spec=spec)  # fmt: skip
    outcome = parse_job(job)
    assert (outcome.error_class, outcome.crashed) == ("extraction", False)
    assert "sort(@)" in outcome.message


# -- JSON Feed ------------------------------------------------------------------------------------


def test_json_feed_1_1_becomes_signals_created_then_reused(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault = radar_env["vault"]
    url = feed_server.add("/feed.json", page("jsonfeed.json"), headers=FEED_JSON_TYPE)
    write_source(vault, "acme-eng", url, collectionMethod="jsonfeed", fullText="feed-content")
    first = source(collect(radar_env), "acme-eng")
    assert (first["itemsParsed"], first["created"], first["error"]) == (3, 3, None)
    signals = signals_by_url(vault)
    rust = signals["https://eng.acme.example/posts/queue-rewrite"]
    assert (rust["observedAt"], rust["observedField"]) == ("2026-11-29T13:00:00Z", "published")
    assert rust["observationKind"] == "rss-observation"  # a feed, as RSS and Atom are
    relative = feed_server.url("/posts/on-call-handbook").replace("http://", "https://")
    handbook = signals[relative]  # a relative url, resolved against the feed's
    assert (handbook["observedAt"], handbook["observedField"]) == (
        "2026-11-27T12:00:00Z",
        "updated",
    )
    assert signals["https://eng.acme.example/posts/undated-note"]["observedAt"] is None
    temporary = list((vault / "Radar" / "Temporary Content").rglob("*.md"))
    assert len(temporary) == 3  # content_html / content_text: full text, only there
    accept = feed_server.requests_for("/feed.json")[0].headers["accept"]
    assert accept.startswith("application/feed+json")
    feed_server.add("/feed.json", regenerated(page("jsonfeed.json")), headers=FEED_JSON_TYPE)
    second = source(collect(radar_env, T + timedelta(hours=6)), "acme-eng")
    assert (second["created"], second["reused"]) == (0, 3) and balanced(second)


def test_a_json_feed_fixture_is_read_from_the_vault(radar_env: dict[str, Path]) -> None:
    """`sourceType: fixture` + `collectionMethod: jsonfeed`: the file is read offline."""
    vault = radar_env["vault"]
    (vault / "Radar" / "Fixtures").mkdir(parents=True)
    (vault / "Radar" / "Fixtures" / "eng.json").write_bytes(page("jsonfeed.json"))
    fixture = {"sourceType": "fixture", "collectionMethod": "jsonfeed", "cadence": "manual"}
    write_source(vault, "local", "Radar/Fixtures/eng.json", **fixture)
    local = source(collect(radar_env), "local")
    # A file has no URL to resolve the feed's one relative link against: rejected, not lost.
    assert (local["created"], local["rejected"], local["error"]) == (2, 1, None)
    assert balanced(local)


def test_a_json_document_that_is_no_json_feed_is_not_a_feed(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    url = feed_server.add("/feed.json", page("wp-posts.json"), headers=JSON_TYPE)
    write_source(radar_env["vault"], "acme-eng", url, collectionMethod="jsonfeed")
    failed = source(collect(radar_env), "acme-eng")
    assert failed["outcome"] == "failed" and "not-a-feed" in failed["error"]


# -- one pipeline ---------------------------------------------------------------------------------


def test_parse_workers_read_every_method_as_in_process() -> None:
    """The method and the selectors/paths travel with the job to a spawned worker: the same
    ParsedFeed (candidates with their evidence, outside the window, rejections) either way."""
    window = T - timedelta(days=7, hours=1)
    html = HtmlSpec("article.changelog-entry", "h2.entry-title", "h2.entry-title", "time")
    wordpress = JsonSpec("@", "title.rendered", "link", "guid.rendered", "date_gmt")
    feed = rss([{"title": "t", "guid": "1", "link": "https://example.com/1"}])
    jobs = [
        ParseJob("page", page("changelog.html"), "https://acme.example/changelog/", "text/html",
                 T, window, method="html", spec=html),
        ParseJob("api", page("wp-posts.json"), "https://blog.acme.example/wp-json/wp/v2/posts",
                 "application/json", T, window, method="json", spec=wordpress),
        ParseJob("jf", page("jsonfeed.json"), "https://eng.acme.example/feed.json",
                 "application/feed+json", T, window, method="jsonfeed"),
        ParseJob("redesign", page("changelog-redesigned.html"), "https://acme.example/changelog/",
                 "text/html", T, window, method="html", spec=html),
        ParseJob("feed", feed, "https://example.com/feed.xml", "application/rss+xml", T, window),
    ]  # fmt: skip
    with ParseWorkers(2) as workers:
        on_workers = workers.parse_all(jobs)
    in_process = [parse_job(job) for job in jobs]
    assert on_workers == in_process
    counts = [len(o.parsed.candidates) if o.parsed else o.error_class for o in on_workers]
    assert counts == [4, 2, 3, "extraction", 1]
    assert on_workers[0].parsed is not None and on_workers[0].parsed.candidates[0].evidence


# -- registry -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "code", "names"),
    [
        ({"itemSelector": None}, "missing-selector", "itemSelector"),
        ({"linkSelector": ""}, "missing-selector", "linkSelector"),
        ({"titleSelector": '"h2["'}, "invalid-selector", "titleSelector"),
        ({"dateSelector": '"time::before"'}, "invalid-selector", "dateSelector"),
        ({"summarySelector": "[p, div]"}, "invalid-selector", "summarySelector"),
        ({"itemsPath": '"@"'}, "misplaced-key", "itemsPath"),
    ],
)
def test_registry_refuses_bad_html_keys(
    radar_env: dict[str, Path], overrides: dict[str, Any], code: str, names: str
) -> None:
    vault = radar_env["vault"]
    write_source(
        vault, "acme", "https://acme.example/changelog/", **{**CHANGELOG_KEYS, **overrides}
    )
    snapshot = load_registry(vault)
    assert snapshot.sources == ()  # never active
    assert [(i.code, names in i.message) for i in snapshot.issues] == [(code, True)]


@pytest.mark.parametrize(
    ("overrides", "code", "names"),
    [
        ({"itemsPath": None}, "missing-path", "itemsPath"),
        ({"titlePath": None, "linkPath": None}, "missing-path", "Path"),
        ({"titlePath": '"title.["'}, "invalid-path", "titlePath"),
        ({"datePath": "no_such_function(date)"}, "invalid-path", "no_such_function"),
        ({"idPath": "[1, 2]"}, "invalid-path", "idPath"),
        ({"itemSelector": "article"}, "misplaced-key", "itemSelector"),
    ],
)
def test_registry_refuses_bad_json_keys(
    radar_env: dict[str, Path], overrides: dict[str, Any], code: str, names: str
) -> None:
    vault = radar_env["vault"]
    write_source(
        vault, "acme", "https://acme.example/wp-json/wp/v2/posts", **{**WORDPRESS_KEYS, **overrides}
    )
    snapshot = load_registry(vault)
    assert snapshot.sources == ()
    assert {i.code for i in snapshot.issues} == {code}
    assert all(names in i.message for i in snapshot.issues)


def test_selector_on_a_feed_source_is_misplaced_and_valid_sources_stay_active(
    radar_env: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Through `radar sources validate --json`: one issue per problem, exit 1; the valid html,
    json and jsonfeed Sources are active."""
    vault = radar_env["vault"]
    write_source(vault, "feed", "https://acme.example/feed.xml", itemSelector="article")
    write_source(vault, "page", "https://acme.example/changelog/", **CHANGELOG_KEYS)
    write_source(vault, "api", "https://acme.example/wp-json/wp/v2/posts", **WORDPRESS_KEYS)
    write_source(vault, "jf", "https://acme.example/feed.json", collectionMethod="jsonfeed")
    bad = {**CHANGELOG_KEYS, "itemSelector": '"article["', "titleSelector": None}
    write_source(vault, "broken", "https://acme.example/news/", **bad)
    code, payload, _err = radar_json(capsys, "sources", "validate")
    assert code == 1
    assert sorted(s["id"] for s in payload["sources"] if s["active"]) == ["api", "jf", "page"]
    assert sorted((i["path"], i["code"]) for i in payload["issues"]) == [
        ("Radar/Sources/broken.md", "invalid-selector"),
        ("Radar/Sources/broken.md", "missing-selector"),
        ("Radar/Sources/feed.md", "misplaced-key"),
    ]


# -- fixtures in the shipped vault ----------------------------------------------------------------


def test_shipped_fixture_sources_collect_offline(radar_env: dict[str, Path]) -> None:
    """The shipped vault's fixture Sources (a feed, a page, a JSON answer) are read from
    `Radar/Fixtures/` with no network, what `make run` does, on a copy of data/vault-template (its
    production Sources removed: offline they only fail, as test_cli shows)."""
    vault = radar_env["vault"]
    shutil.rmtree(vault)
    shutil.copytree(REPO_ROOT / "data" / "vault-template", vault)
    snapshot = load_registry(vault)
    assert snapshot.issues == ()
    for record in snapshot.sources:
        if record.source.scope != "fixture":
            record.path.unlink()
    fixtures = {
        r.source.id: r.source.collection_method
        for r in snapshot.sources
        if r.source.scope == "fixture"
    }
    assert fixtures == {
        "radar-fixture": "fixture",
        "radar-fixture-changelog": "html",
        "radar-fixture-wordpress": "json",
    }
    # Each yields one undated item (always inside the window); the page and the answer also
    # hold one item dated January 2026, counted outside the window.
    expected = {"radar-fixture": (1, 0), "radar-fixture-changelog": (1, 1)}
    expected["radar-fixture-wordpress"] = (1, 1)
    report = collect(radar_env)
    assert (report["passed"], report["failed"]) == (3, 0)
    for source_id, (created, outside) in expected.items():
        first = source(report, source_id)
        assert (first["created"], first["outsideWindow"], first["error"]) == (
            created,
            outside,
            None,
        )
        assert balanced(first)
    again = collect(radar_env, T + timedelta(hours=1))
    for source_id, (created, outside) in expected.items():
        second = source(again, source_id)
        assert (second["created"], second["reused"], second["outsideWindow"]) == (
            0,
            created,
            outside,
        )
    kinds = {fm["sourceId"]: fm["observationKind"] for fm in signals_by_url(vault).values()}
    assert kinds == {
        "radar-fixture": "rss-observation",
        "radar-fixture-changelog": "html-observation",
        "radar-fixture-wordpress": "json-observation",
    }
