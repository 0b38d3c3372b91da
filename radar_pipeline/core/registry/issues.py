"""The Source Registry's one-line issue messages (what a bad key holds and how to fix it), and
the URL checks behind the `invalid-url` ones."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from pydantic_core import ErrorDetails

# What each key must hold, for the one-line fix in an issue message.
_HINTS = {
    "entityType": "source",
    "schemaVersion": "1",
    "id": "a slug such as openai-news (a-z, 0-9, '-', 2-63 characters)",
    "name": "the Source's display name",
    "url": "an absolute http(s) URL (for sourceType: fixture, a vault-relative path)",
    "role": "primary, discovery, engineering-blog or research",
    "sourceType": "official, community or fixture",
    "authorityScore": "a number from 0 to 1",
    "legalAssessment": "approved, pending or rejected",
    "priority": "critical, high, normal or low",
    "collectionMethod": "rss, atom, jsonfeed, html, json or fixture",
    "enabled": "true or false",
    "cadence": "an ISO-8601 duration such as PT30M, PT6H, P1D, P7D, or manual",
    "minIntervalSeconds": "a whole number of seconds, 0 or more",
    "authTokenEnv": "the name of an environment variable, such as OPENAI_FEED_TOKEN, or empty",
    "lastAttemptAt": "an ISO-8601 UTC time such as 2026-01-01T00:00:00Z, or empty",
    "lastSuccessAt": "an ISO-8601 UTC time such as 2026-01-01T00:00:00Z, or empty",
    "lastResponseAt": "an ISO-8601 UTC time such as 2026-01-01T00:00:00Z, or empty",
    "nextAttemptAt": "an ISO-8601 UTC time such as 2026-01-01T00:00:00Z, or empty",
    "httpStatus": "an HTTP status code such as 200, or empty",
    "pageBudget": "a whole number of pages per check, 0 or more (default 10), or remove the key",
}
# Keys whose bad value has an issue code of its own.
_KEY_CODES = {"pageBudget": "invalid-page-budget"}
_USERINFO_RE = re.compile(r"(//)[^/@\s]*@")


def one_line(value: Any) -> str:
    # A URL may carry a password by mistake; an issue message must never repeat it.
    text = _USERINFO_RE.sub(r"\1***@", repr(value))
    return text if len(text) <= 60 else text[:57] + "..."


def issue_for(error: ErrorDetails) -> tuple[str, str]:
    """(code, message) for one pydantic error on a Source's frontmatter."""
    key = str(error["loc"][0]) if error["loc"] else "frontmatter"
    hint = _HINTS.get(key, "a value")
    kind = error["type"]
    if kind == "missing":
        return "missing-key", f"`{key}` is missing: add `{key}:` with {hint}"
    value = one_line(error.get("input"))
    if kind == "literal_error":
        allowed = error.get("ctx", {}).get("expected", "")
        return "unknown-value", f"`{key}` is {value}: use one of {allowed}"
    if kind == "invalid_id":
        return "invalid-id", f"`{key}` {value} {error['msg']}: set it to {hint}"
    if kind == "invalid_url":
        return "invalid-url", f"`{key}` {value} {error['msg']}: set it to {hint}"
    reason = error["msg"][:1].lower() + error["msg"][1:]
    code = _KEY_CODES.get(key, "invalid-value")
    return code, f"`{key}` is {value} ({reason}): set it to {hint}"


def http_url_problem(url: str) -> str | None:
    """Why `url` cannot be a Source's feed URL, or None (also for OPML import)."""
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        return "contains spaces or control characters"
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a non-numeric or out-of-range port
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password (use authTokenEnv)"
    return None


def fixture_path_problem(url: str) -> str | None:
    """Why `url` cannot be a fixture Source's vault-relative path, or None."""
    path = PurePosixPath(url)
    if not url or url != url.strip() or "\\" in url or ":" in url or "\x00" in url:
        return "must be a plain vault-relative path such as Radar/Fixtures/feed.xml"
    if path.is_absolute():
        return "must be relative to the vault root, not absolute"
    if ".." in path.parts:
        return "must stay inside the vault (no `..`)"
    return None
