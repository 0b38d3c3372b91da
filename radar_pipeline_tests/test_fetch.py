"""The fetch stage against a real loopback server: outcomes, error classes and time bounds."""

from __future__ import annotations

import gzip
import ipaddress
import ssl
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings, fetch_many, looks_like_feed
from radar_pipeline.core.config import Settings
from radar_pipeline.core.models import FetchRequest, FetchResult
from radar_pipeline_tests.conftest import CORPUS_REAL
from radar_pipeline_tests.feedserver import (
    FeedServer,
    conditional,
    drip,
    echo_headers,
    redirect_to,
    streamed,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DEADLINE_S = 2.0
BOUND_S = DEADLINE_S + 2.0  # every fetch in this file must end within this
RSS = (CORPUS_REAL / "openai-2.xml").read_bytes()
ATOM = (CORPUS_REAL / "go-blog-1.xml").read_bytes()
BIG_FEED = (CORPUS_REAL / "research-rsc-1.xml").read_bytes()
RSS_TYPE = {"Content-Type": "application/rss+xml; charset=utf-8"}
TOKEN = "s3cr3t-T0ken-value-42"


@pytest.fixture
def settings(allow_loopback: None) -> FetchSettings:
    return replace(
        FetchSettings.of(Settings.from_env()),
        connect_timeout_s=1.0,
        read_timeout_s=2.0,
        deadline_s=DEADLINE_S,
    )


@pytest.fixture
def fetcher(settings: FetchSettings, tmp_path: Path) -> Iterator[Fetcher]:
    with Fetcher(settings, tmp_path / "vault") as f:
        yield f


def run(fetcher: Fetcher, url: str, **kwargs: object) -> FetchResult:
    """Fetch once and assert the time bound every test shares."""
    request = FetchRequest(source_id="src", url=url, collection_method="rss", **kwargs)  # type: ignore[arg-type]
    started = time.monotonic()
    result = fetcher.fetch(request, NOW)
    assert time.monotonic() - started < BOUND_S
    assert result.fetched_at == NOW
    return result


def assert_failed(result: FetchResult, error_class: str) -> None:
    assert (result.outcome, result.error_class) == ("failed", error_class), result.error_message
    assert result.body is None
    assert result.error_message is not None and "\n" not in result.error_message
    assert result.error_message.startswith(f"fetch: {error_class} (")


# -- success and conditional GET --------------------------------------------------------------


def test_plain_feed_ok_with_user_agent_and_hash(feed_server: FeedServer, fetcher: Fetcher) -> None:
    result = run(fetcher, feed_server.add("/feed", RSS))
    assert (result.outcome, result.status, result.body) == ("ok", 200, RSS)
    assert result.bytes_received == len(RSS)
    assert result.body_sha256 is not None and len(result.body_sha256) == 64
    sent = feed_server.requests_for("/feed")[0].headers
    assert sent["user-agent"].startswith("RadarPipeline/0.1")
    assert "gzip" in sent["accept-encoding"]
    assert "if-none-match" not in sent and result.conditional is False


def test_304_round_trip_sends_validators(feed_server: FeedServer, fetcher: Fetcher) -> None:
    etag, modified = '"v1-abc"', "Sun, 01 Mar 2026 10:00:00 GMT"
    url = feed_server.add("/cond", handler=conditional(RSS, etag, modified))
    first = run(fetcher, url)
    assert (first.outcome, first.etag, first.last_modified) == ("ok", etag, modified)

    second = run(fetcher, url, etag=first.etag, last_modified=first.last_modified)
    assert (second.outcome, second.status, second.body) == ("not-modified", 304, None)
    assert second.conditional is True and second.unchanged_body is False
    assert (second.etag, second.last_modified) == (etag, modified)
    received = feed_server.requests_for("/cond")[1].headers
    assert received["if-none-match"] == etag
    assert received["if-modified-since"] == modified


def test_unconditional_request_sends_no_validators(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    url = feed_server.add("/cond", handler=conditional(RSS, '"e"', "x"))
    result = run(fetcher, url, etag='"e"', last_modified="x", conditional=False)
    assert (result.outcome, result.status, result.conditional) == ("ok", 200, False)
    assert "if-none-match" not in feed_server.requests_for("/cond")[0].headers


def test_server_ignoring_validators_same_body_is_unchanged(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    url = feed_server.add("/same", RSS)
    first = run(fetcher, url)
    second = run(fetcher, url, etag='"ignored"', previous_body_sha256=first.body_sha256)
    assert (second.outcome, second.status, second.unchanged_body) == ("not-modified", 200, True)
    assert second.body is None and second.body_sha256 == first.body_sha256
    assert feed_server.requests_for("/same")[1].headers["if-none-match"] == '"ignored"'


def test_gzip_encoded_feed_is_inflated(feed_server: FeedServer, fetcher: Fetcher) -> None:
    headers = {**RSS_TYPE, "Content-Encoding": "gzip"}
    result = run(fetcher, feed_server.add("/gz", gzip.compress(BIG_FEED), headers=headers))
    assert (result.outcome, result.body) == ("ok", BIG_FEED)


# -- status classes ---------------------------------------------------------------------------


def test_429_retry_after_seconds(feed_server: FeedServer, fetcher: Fetcher) -> None:
    url = feed_server.add("/rl", b"slow down", 429, {"Retry-After": "120"})
    result = run(fetcher, url)
    assert_failed(result, "rate-limited")
    assert (result.status, result.retry_after_s) == (429, 120.0)
    assert result.error_message == "fetch: rate-limited (429), retry after 120 s"


def test_429_retry_after_http_date(feed_server: FeedServer, fetcher: Fetcher) -> None:
    when = format_datetime(NOW + timedelta(seconds=90), usegmt=True)
    result = run(fetcher, feed_server.add("/rl", b"", 429, {"Retry-After": when}))
    assert_failed(result, "rate-limited")
    assert result.retry_after_s == 90.0


def test_503_retry_after_is_rate_limited_and_capped(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    result = run(fetcher, feed_server.add("/busy", b"", 503, {"Retry-After": "999999"}))
    assert_failed(result, "rate-limited")
    assert result.retry_after_s == fetcher.settings.max_retry_after_s


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({"cf-mitigated": "challenge", "Content-Type": "text/html"}, b"<html></html>"),
        ({"Content-Type": "text/html"}, b"<title>Just a moment...</title><div id=cf-chl-widget>"),
    ],
    ids=["header", "body"],
)
def test_403_challenge(
    feed_server: FeedServer, fetcher: Fetcher, headers: dict[str, str], body: bytes
) -> None:
    result = run(fetcher, feed_server.add("/ch", body, 403, headers))
    assert_failed(result, "challenge")
    assert result.status == 403


def test_403_plain_is_http_4xx(feed_server: FeedServer, fetcher: Fetcher) -> None:
    url = feed_server.add("/no", b"<h1>Forbidden</h1>", 403, {"Content-Type": "text/html"})
    result = run(fetcher, url)
    assert_failed(result, "http-4xx")
    assert result.error_message == "fetch: http-4xx (403: Forbidden)"


@pytest.mark.parametrize("status", [404, 410])
def test_gone(feed_server: FeedServer, fetcher: Fetcher, status: int) -> None:
    result = run(fetcher, feed_server.add("/gone", b"gone", status))
    assert_failed(result, "gone")
    assert result.status == status


def test_500_is_http_5xx(feed_server: FeedServer, fetcher: Fetcher) -> None:
    result = run(fetcher, feed_server.add("/err", b"boom", 500))
    assert_failed(result, "http-5xx")
    assert result.status == 500


def test_connection_refused_is_network(fetcher: Fetcher) -> None:
    server = FeedServer().start()
    url = server.url("/feed")
    server.stop()  # the port is now closed
    assert_failed(run(fetcher, url), "network")


# -- content validation -----------------------------------------------------------------------


def test_html_page_is_not_a_feed(feed_server: FeedServer, fetcher: Fetcher) -> None:
    page = b"<!DOCTYPE html><html><head><title>Blog</title></head><body>hi</body></html>"
    result = run(fetcher, feed_server.add("/page", page, headers={"Content-Type": "text/html"}))
    assert_failed(result, "not-a-feed")
    assert result.status == 200


@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain", None])
def test_real_feed_with_wrong_or_missing_type_is_ok(
    feed_server: FeedServer, fetcher: Fetcher, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    result = run(fetcher, feed_server.add("/feed", ATOM, headers=headers))
    assert (result.outcome, result.body) == ("ok", ATOM)


def test_feed_sniffing_rules() -> None:
    assert looks_like_feed(b'\xef\xbb\xbf <?xml version="1.0"?>\n<!-- c --><!DOCTYPE rss>\n<rss>')
    assert looks_like_feed(b'<rdf:RDF xmlns:rdf="x">')
    assert looks_like_feed(b'{"version": "https://jsonfeed.org/version/1.1", "items": []}')
    assert looks_like_feed("<feed xmlns='a'/>".encode("utf-16"))
    assert not looks_like_feed(b"<html><body><rss>")
    assert not looks_like_feed(b'{"version": "1"}')
    assert not looks_like_feed(b"")


# -- size and time bounds ---------------------------------------------------------------------


def three_mb_feed() -> bytes:
    return RSS + b"<!--" + b"x" * 3_000_000 + b"-->"


def test_3mb_with_content_length_rejected_early(feed_server: FeedServer, fetcher: Fetcher) -> None:
    result = run(fetcher, feed_server.add("/big", three_mb_feed()))
    assert_failed(result, "too-large")
    assert result.bytes_received == 0  # refused on the header, nothing read


def test_3mb_without_content_length(feed_server: FeedServer, fetcher: Fetcher) -> None:
    body = three_mb_feed()
    chunks = lambda: (body[i : i + 65536] for i in range(0, len(body), 65536))  # noqa: E731
    result = run(fetcher, feed_server.add("/big", handler=streamed(chunks, RSS_TYPE)))
    assert_failed(result, "too-large")
    assert fetcher.settings.max_bytes < result.bytes_received <= fetcher.settings.max_bytes + 1


def test_gzip_bomb_stops_at_cap(feed_server: FeedServer, fetcher: Fetcher) -> None:
    bomb = gzip.compress(b"\0" * 10_000_000, compresslevel=9)
    assert len(bomb) < 20_000
    url = feed_server.add("/bomb", bomb, headers={**RSS_TYPE, "Content-Encoding": "gzip"})
    started = time.monotonic()
    result = run(fetcher, url)
    assert time.monotonic() - started < 1.0
    assert_failed(result, "too-large")
    assert result.bytes_received <= fetcher.settings.max_bytes + 1  # never inflated past the cap


@pytest.mark.parametrize("in_headers", [False, True], ids=["body", "headers"])
def test_drip_feed_hits_deadline(
    feed_server: FeedServer, fetcher: Fetcher, in_headers: bool
) -> None:
    url = feed_server.add("/drip", handler=drip(RSS[:60], 0.5, in_headers=in_headers))
    started = time.monotonic()
    result = run(fetcher, url)
    elapsed = time.monotonic() - started
    assert_failed(result, "timeout")
    assert DEADLINE_S - 0.2 < elapsed < DEADLINE_S + 1.0


# -- redirects and address policy -------------------------------------------------------------


def test_redirect_followed(feed_server: FeedServer, fetcher: Fetcher) -> None:
    feed_server.add("/real", RSS)
    result = run(fetcher, feed_server.add("/old", handler=redirect_to("/real", 301)))
    assert (result.outcome, result.redirects) == ("ok", 1)
    assert result.final_url == feed_server.url("/real")
    assert result.requested_url == feed_server.url("/old")


def test_redirect_to_private_address_refused_before_connecting(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    url = feed_server.add("/r", handler=redirect_to("http://10.0.0.1/feed.xml"))
    started = time.monotonic()
    result = run(fetcher, url)
    # A connect attempt to 10.0.0.1 would take the connect timeout (1 s) or fail as network.
    assert time.monotonic() - started < 0.5
    assert_failed(result, "policy")
    assert "10.0.0.1" in (result.error_message or "")
    assert result.final_url == "http://10.0.0.1/feed.xml"


def test_allowed_name_does_not_allow_redirect_to_unlisted_loopback_ip(
    feed_server: FeedServer, tmp_path: Path
) -> None:
    only_name = FetchSettings(deadline_s=DEADLINE_S, allowed_private_hosts=frozenset({"localhost"}))
    port = feed_server.server_address[1]
    feed_server.add("/feed", RSS)
    feed_server.add("/r", handler=redirect_to(f"http://127.0.0.1:{port}/feed"))
    with Fetcher(only_name, tmp_path) as fetcher:
        result = run(fetcher, f"http://LocalHost:{port}/r")
    assert_failed(result, "policy")
    assert len(feed_server.requests_for("/r")) == 1
    assert feed_server.requests_for("/feed") == []


def test_allowed_host_name_connects_to_checked_address(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    port = feed_server.server_address[1]
    feed_server.add("/feed", RSS)
    result = run(fetcher, f"http://localhost:{port}/feed")  # may resolve to ::1 first
    assert (result.outcome, result.body) == ("ok", RSS)


@pytest.mark.parametrize("target", ["ftp://example.com/feed.xml", "file:///etc/passwd"])
def test_redirect_to_non_http_scheme_refused(
    feed_server: FeedServer, fetcher: Fetcher, target: str
) -> None:
    result = run(fetcher, feed_server.add("/r", handler=redirect_to(target)))
    assert_failed(result, "policy")
    assert "not http/https" in (result.error_message or "")


def test_redirect_loop_stops(feed_server: FeedServer, fetcher: Fetcher) -> None:
    feed_server.add("/a", handler=redirect_to("/b"))
    feed_server.add("/b", handler=redirect_to("/a"))
    result = run(fetcher, feed_server.url("/a"))
    assert_failed(result, "policy")
    assert "too many redirects" in (result.error_message or "")
    hits = len(feed_server.requests_for("/a")) + len(feed_server.requests_for("/b"))
    assert hits == fetcher.settings.max_redirects + 1


def test_userinfo_url_refused_without_request(feed_server: FeedServer, fetcher: Fetcher) -> None:
    port = feed_server.server_address[1]
    feed_server.add("/feed", RSS)
    result = run(fetcher, f"http://user:pa55word@127.0.0.1:{port}/feed")
    assert_failed(result, "policy")
    assert "pa55word" not in (result.error_message or "")
    assert feed_server.requests_for("/feed") == []


def test_loopback_refused_when_allow_list_empty(feed_server: FeedServer, tmp_path: Path) -> None:
    settings = FetchSettings.of(Settings.from_env({"RADAR_ALLOWED_PRIVATE_HOSTS": ""}))
    assert settings.allowed_private_hosts == frozenset()
    with Fetcher(settings, tmp_path) as fetcher:
        result = run(fetcher, feed_server.add("/feed", RSS))
    assert_failed(result, "policy")
    assert "loopback" in (result.error_message or "")
    assert feed_server.requests_for("/feed") == []


def test_host_name_resolving_to_loopback_refused(feed_server: FeedServer, tmp_path: Path) -> None:
    port = feed_server.server_address[1]
    feed_server.add("/feed", RSS)
    with Fetcher(FetchSettings(deadline_s=DEADLINE_S), tmp_path) as fetcher:
        result = run(fetcher, f"http://localhost:{port}/feed")
    assert_failed(result, "policy")
    assert "localhost -> 127.0.0.1" in (result.error_message or "")
    assert feed_server.requests_for("/feed") == []


def self_signed_tls(server: FeedServer, tmp_path: Path) -> None:
    """Serve `server` over TLS with a certificate for 127.0.0.1 that no CA signed."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    pem = tmp_path / "server.pem"
    pem.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.handle_error = lambda request, address: None  # type: ignore[method-assign]


def test_every_fetcher_verifies_the_certificate(settings: FetchSettings, tmp_path: Path) -> None:
    """The TLS settings are made once a process and shared by the fetchers of its slices:
    each of them still refuses a certificate no CA signed, and sends no request."""
    server = FeedServer()
    self_signed_tls(server, tmp_path)
    server.add("/feed", RSS)
    server.start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}/feed"
        for _ in range(2):  # two slices, two fetchers
            with Fetcher(settings, tmp_path / "vault") as fetcher:
                result = run(fetcher, url)
            # A Source's check names the refusal in its message (its class is the request's).
            assert_failed(result, "network")
            assert "CERTIFICATE_VERIFY_FAILED" in (result.error_message or "")
        assert server.requests_for("/feed") == []
    finally:
        server.stop()


# -- secrets ----------------------------------------------------------------------------------


def test_bearer_token_sent_and_redacted_from_error(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    result = run(fetcher, feed_server.add("/leak", handler=echo_headers(500)), auth_token=TOKEN)
    assert feed_server.requests_for("/leak")[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert_failed(result, "http-5xx")
    assert "Authorization: Bearer ***" in (result.error_message or "")
    assert TOKEN not in str(result)


def test_bearer_token_not_sent_to_other_host(feed_server: FeedServer, fetcher: Fetcher) -> None:
    port = feed_server.server_address[1]
    feed_server.add("/there", RSS)
    url = feed_server.add("/here", handler=redirect_to(f"http://localhost:{port}/there"))
    result = run(fetcher, url, auth_token=TOKEN)
    assert result.outcome == "ok"
    assert feed_server.requests_for("/here")[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert "authorization" not in feed_server.requests_for("/there")[0].headers


# -- fixtures ---------------------------------------------------------------------------------


def test_fixture_read_without_network(tmp_path: Path, settings: FetchSettings) -> None:
    vault = tmp_path / "vault"
    (vault / "Radar" / "Fixtures").mkdir(parents=True)
    (vault / "Radar" / "Fixtures" / "feed.xml").write_bytes(ATOM)
    request = FetchRequest("fx", "Radar/Fixtures/feed.xml", "fixture", from_vault=True)
    with Fetcher(settings, vault) as fetcher:
        result = fetcher.fetch(request, NOW)
    assert (result.outcome, result.status, result.body) == ("ok", 200, ATOM)
    assert result.body_sha256 is not None


def test_fixture_same_hash_is_unchanged(tmp_path: Path, settings: FetchSettings) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "feed.xml").write_bytes(RSS)
    with Fetcher(settings, vault) as fetcher:
        first = fetcher.fetch(FetchRequest("fx", "feed.xml", "fixture", from_vault=True), NOW)
        request = FetchRequest(
            "fx", "feed.xml", "fixture", previous_body_sha256=first.body_sha256, from_vault=True
        )
        second = fetcher.fetch(request, NOW)
    assert (second.outcome, second.unchanged_body, second.body) == ("not-modified", True, None)


def test_fixture_symlink_out_of_vault_refused(tmp_path: Path, settings: FetchSettings) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "outside.xml").write_bytes(ATOM)
    (vault / "inside.xml").symlink_to(tmp_path / "outside.xml")
    with Fetcher(settings, vault) as fetcher:
        result = fetcher.fetch(FetchRequest("fx", "inside.xml", "fixture", from_vault=True), NOW)
    assert_failed(result, "policy")


@pytest.mark.parametrize(
    "path", ["../outside.xml", "Radar/../../outside.xml", "/etc/hosts", "a\x00b.xml", ""]
)
def test_fixture_path_traversal_refused(tmp_path: Path, settings: FetchSettings, path: str) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (tmp_path / "outside.xml").write_bytes(ATOM)
    with Fetcher(settings, vault) as fetcher:
        result = fetcher.fetch(FetchRequest("fx", path, "fixture", from_vault=True), NOW)
    assert_failed(result, "policy")


# -- many Sources -----------------------------------------------------------------------------


def test_fetch_many_keeps_order_and_slow_source_does_not_delay_fast(
    feed_server: FeedServer, fetcher: Fetcher
) -> None:
    slow = feed_server.add("/slow", RSS, headers=RSS_TYPE, latency_s=1.5)
    fast = feed_server.add("/fast", ATOM)
    gone = feed_server.add("/gone", b"", 404)
    requests = [
        FetchRequest("slow", slow, "rss"),
        FetchRequest("fast", fast, "rss"),
        FetchRequest("gone", gone, "rss"),
    ]
    started = time.monotonic()
    results = fetch_many(fetcher, requests, NOW, max_workers=4)
    assert time.monotonic() - started < 1.5 + 1.0
    assert [r.source_id for r in results] == ["slow", "fast", "gone"]
    assert [r.outcome for r in results] == ["ok", "ok", "failed"]
    assert results[1].duration_s < 0.5  # not queued behind the slow one
    assert results[0].duration_s >= 1.4


def test_fetch_many_turns_worker_exception_into_failed_result(
    feed_server: FeedServer, settings: FetchSettings, tmp_path: Path
) -> None:
    fetcher = Fetcher(settings, tmp_path)
    fetcher.close()  # httpx now raises RuntimeError inside the worker
    requests = [FetchRequest("a", feed_server.add("/a", RSS), "rss")]
    (result,) = fetch_many(fetcher, requests, NOW)
    assert_failed(result, "network")
    assert "internal error RuntimeError" in (result.error_message or "")
