"""Which addresses the fetch stage may reach, and how secrets are kept out of text.

The address policy: only ``http``/``https``; no userinfo in a URL; the host is resolved with
``socket.getaddrinfo`` and EVERY address it resolves to must be public. Private, loopback,
link-local, multicast, reserved, unspecified (and any other non-global) addresses are refused
with error class ``policy`` before a socket is opened, unless the host name or the address is in
``allowed_private_hosts`` (tests, local mirrors).

Where the check runs: :class:`PolicyTransport` gives httpx a network backend whose
``connect_tcp`` resolves the host, checks every address and then connects to one of the
*checked* addresses (not to the name). So the classic DNS-rebinding trick (answer a public
address to the check, a private one to the connect) does not work against the real transport.

The window that remains, honestly:
- A pooled keep-alive connection is reused without a new lookup: the address was checked when
  the connection was opened, and a later re-resolution of the name is not looked at.
- With an injected transport (tests, ``Fetcher(transport=...)``) the fetcher checks the name
  with its own lookup before the request, and the transport resolves again when connecting:
  between the two lookups a rebinding DNS server can swap the answer (classic TOCTOU).
- ``getaddrinfo`` itself cannot be interrupted, so a slow resolver can exceed the deadline.
- Only the destination is checked, not the path: a public address that routes or proxies to an
  internal service (a publisher-side open proxy) is outside what an address check can see.

Secrets: :func:`redact` removes given secret values (plain and percent-encoded),
``Authorization``/``Bearer``/``Basic`` credentials and URL userinfo from any text.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

import httpcore
import httpx

from radar_pipeline.core.errors import FetchError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
ALLOWED_SCHEMES = frozenset({"http", "https"})
REDACTED = "***"


def normalise_host(host: str) -> str:
    """Lower-case a host, drop IPv6 brackets and a trailing root dot, for allow-list matching."""
    return host.strip().strip("[]").rstrip(".").lower()


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(normalise_host(host))
    except ValueError:
        return None


def forbidden_reason(address: IPAddress) -> str | None:
    """Why `address` may not be fetched by default (e.g. "loopback"), or None if it is public."""
    # An IPv4-mapped IPv6 address (::ffff:10.0.0.1) reaches the IPv4 host: judge that one.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    checks = (
        # Most specific first: Python's is_private also covers loopback, link-local, etc.
        ("loopback", address.is_loopback),
        ("unspecified", address.is_unspecified),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("reserved", address.is_reserved),
        ("private", address.is_private),
        ("non-global", not address.is_global),
    )
    return next((name for name, hit in checks if hit), None)


def check_addresses(host: str, addresses: Iterable[IPAddress], allowed: Iterable[str]) -> None:
    """Raise FetchError("policy") unless every address is public or explicitly allowed."""
    allowed_names = {normalise_host(h) for h in allowed}
    if normalise_host(host) in allowed_names:
        return
    allowed_ips = {ip for ip in map(_ip_literal, allowed_names) if ip is not None}
    for address in addresses:
        reason = forbidden_reason(address)
        if reason is not None and address not in allowed_ips:
            shown = host if normalise_host(host) == str(address) else f"{host} -> {address}"
            raise FetchError(
                "policy",
                f"{reason} address refused: {shown}; to allow it, add "
                f"{normalise_host(host)} to RADAR_ALLOWED_PRIVATE_HOSTS",
            )


def check_url(url: str | httpx.URL, allowed: Iterable[str]) -> httpx.URL:
    """Check scheme, userinfo and (for IP literals) the address, without any DNS lookup."""
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise FetchError("policy", f"invalid URL ({exc})") from exc
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise FetchError("policy", f"scheme {parsed.scheme or '(none)'!r} is not http/https")
    if parsed.userinfo:
        raise FetchError("policy", "URL with userinfo (credentials in the URL) refused")
    if not parsed.host:
        raise FetchError("policy", "URL has no host")
    literal = _ip_literal(parsed.host)
    if literal is not None:
        check_addresses(parsed.host, [literal], allowed)
    return parsed


def resolve_checked(host: str, port: int, allowed: Iterable[str]) -> list[str]:
    """Resolve `host` and return its addresses, all checked against the policy."""
    literal = _ip_literal(host)
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        try:
            infos = socket.getaddrinfo(normalise_host(host), port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise FetchError("network", f"DNS lookup failed for {host}") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))
        if not addresses:
            raise FetchError("network", f"DNS lookup returned no address for {host}")
    check_addresses(host, addresses, allowed)
    return [str(a) for a in addresses]


# The per-check deadline, read by the network streams of the thread doing the check.
# Thread-local because the sync httpx client does all I/O of a request on the calling thread.
_deadline = threading.local()


@contextmanager
def deadline_at(monotonic_deadline: float) -> Iterator[None]:
    """Bound every connect/read/write in this thread by an absolute time.monotonic() deadline."""
    previous = getattr(_deadline, "at", None)
    _deadline.at = monotonic_deadline
    try:
        yield
    finally:
        _deadline.at = previous


def _bounded(timeout: float | None, exc_type: type[Exception]) -> float | None:
    at: float | None = getattr(_deadline, "at", None)
    if at is None:
        return timeout
    remaining = at - time.monotonic()
    if remaining <= 0:
        raise exc_type("deadline exceeded")
    return remaining if timeout is None else min(timeout, remaining)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation also respects the thread's deadline.

    This is what stops a server that drips one byte per second (headers or body): each read
    is short, so the per-read timeout alone would never fire.
    """

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class PolicyBackend(httpcore.NetworkBackend):
    """Resolves, checks every address, then connects only to a checked address."""

    def __init__(self, allowed_private_hosts: Iterable[str]) -> None:
        self._allowed = frozenset(allowed_private_hosts)
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = resolve_checked(host, port, self._allowed)
        failure: httpcore.ConnectError | None = None
        for address in addresses:
            bounded = _bounded(timeout, httpcore.ConnectTimeout)
            try:
                stream = self._inner.connect_tcp(
                    address, port, bounded, local_address, socket_options
                )
            except httpcore.ConnectError as exc:  # try the next checked address
                failure = exc
                continue
            return _DeadlineStream(stream)
        assert failure is not None  # resolve_checked never returns an empty list
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise FetchError("policy", "unix sockets are never fetched")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The TLS settings of every fetch in this process: httpx's defaults (certifi's CAs,
    verification on), made once. Loading the CAs costs ~50 ms of CPU, and a collection opens
    a transport per slice (20 at 2,000 Sources); a context is read-only once made and safe to
    share between clients and threads (each connection makes its own TLS session from it)."""
    return httpx.create_ssl_context(trust_env=False)


class PolicyTransport(httpx.HTTPTransport):
    """httpx's own transport with its connection pool built on :class:`PolicyBackend`."""

    def __init__(self, allowed_private_hosts: Iterable[str]) -> None:
        ssl_context = _ssl_context()
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx 0.28 builds the httpcore pool itself and offers no network_backend argument,
        # so the pool is rebuilt with the same defaults plus our backend (httpx is pinned).
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=httpx.Limits().max_connections,
            max_keepalive_connections=httpx.Limits().max_keepalive_connections,
            keepalive_expiry=httpx.Limits().keepalive_expiry,
            network_backend=PolicyBackend(allowed_private_hosts),
        )


_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization\s*[:=]\s*)(?:(bearer|basic|token|digest)\s+)?[^\s,;\"'<>]+"
)
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+(?!\*\*\*)[A-Za-z0-9._~+/=-]{4,}")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]+@")


def _auth_replacement(match: re.Match[str]) -> str:
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{REDACTED}"


def redact(text: str, secrets: Iterable[str]) -> str:
    """Remove secret values, Authorization credentials and URL userinfo from `text`."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        for form in dict.fromkeys((secret, quote(secret, safe=""))):
            text = text.replace(form, REDACTED)
    text = _AUTH_HEADER.sub(_auth_replacement, text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
