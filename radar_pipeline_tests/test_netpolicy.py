"""Address policy and redaction, table-driven, no network beyond loopback name lookups."""

from __future__ import annotations

import ipaddress

import pytest

from radar_pipeline.core.acquire.address_policy import (
    check_url,
    forbidden_reason,
    redact,
    resolve_checked,
)
from radar_pipeline.core.acquire.fetch import FetchSettings
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import FetchError


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("192.168.1.10", "private"),
        ("172.16.5.4", "private"),
        ("169.254.169.254", "link-local"),  # cloud metadata endpoint
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-global"),  # carrier-grade NAT
        ("::ffff:10.0.0.1", "private"),  # IPv4-mapped
        ("8.8.8.8", None),
        ("2606:4700::6810:85e5", None),
    ],
)
def test_forbidden_reason(address: str, reason: str | None) -> None:
    assert forbidden_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://example.com/feed", "not http/https"),
        ("javascript:alert(1)", "not http/https"),
        ("https://user:pw@example.com/feed", "userinfo"),
        ("http://10.0.0.1/feed", "private address refused"),
        ("http://[::1]:8080/feed", "loopback address refused"),
        ("http:///nohost", "no host"),
    ],
)
def test_check_url_refuses(url: str, fragment: str) -> None:
    with pytest.raises(FetchError) as caught:
        check_url(url, frozenset())
    assert caught.value.error_class == "policy"
    assert fragment in caught.value.message
    assert "pw" not in caught.value.message


def test_check_url_allows_listed_literal_and_public_names() -> None:
    assert check_url("http://127.0.0.1:9/x", {"127.0.0.1"}).host == "127.0.0.1"
    assert check_url("http://[::1]/x", {"::1"}).port is None
    assert check_url("https://example.com/feed", frozenset()).host == "example.com"


def test_resolve_checked_every_address_must_pass() -> None:
    with pytest.raises(FetchError, match="loopback address refused: localhost"):
        resolve_checked("localhost", 80, frozenset())
    assert "127.0.0.1" in resolve_checked("LOCALHOST.", 80, {"localhost"})


def test_allowed_hosts_from_env_are_trimmed_and_lowered() -> None:
    settings = FetchSettings.of(
        Settings.from_env({"RADAR_ALLOWED_PRIVATE_HOSTS": " Mirror.LAN , 10.0.0.5,,"})
    )
    assert settings.allowed_private_hosts == frozenset({"mirror.lan", "10.0.0.5"})
    assert FetchSettings.of(Settings.from_env({})).allowed_private_hosts == frozenset()


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ("token abc123XYZ leaked", ["abc123XYZ"], "token *** leaked"),
        ("q=abc%2F1", ["abc/1"], "q=***"),
        ("Authorization: Bearer eyJhbGciOi.x.y", [], "Authorization: Bearer ***"),
        ("authorization=Basic dXNlcjpwYXNz", [], "authorization=Basic ***"),
        ("sent bearer sk-live-000111 to x", [], "sent bearer *** to x"),
        ("see https://bob:hunter2@host/x", [], "see https://***@host/x"),
        ("nothing here", ["", "zz"], "nothing here"),
    ],
)
def test_redact(text: str, secrets: list[str], expected: str) -> None:
    assert redact(text, secrets) == expected
