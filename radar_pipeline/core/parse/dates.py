"""A date as a page or JSON answer writes it, or None: never a guessed one.

Only absolute dates are read: ISO 8601 / RFC 3339 (an HTML `datetime` attribute, a JSON API
field), RFC 2822 (e-mail style) and a few written-out forms ("November 28, 2026",
"28 Nov 2026"). Nothing relative ("today", "3 days ago") and no partial date (no year) is
read, and no date is filled in from the clock. Two readings are documented in
docs/operations.md: a day without a time is that day at 00:00 UTC, and a date-time without an
offset is UTC (WordPress's `date_gmt`); point a path at a UTC field, not a local one.
"""

from __future__ import annotations

import email.utils
import re
from datetime import UTC, datetime

MAX_DATE_TEXT = 80  # a date is short; longer text is prose, not a date
_ORDINAL = re.compile(r"(\d)(st|nd|rd|th)\b", re.IGNORECASE)
_WRITTEN_FORMATS = (
    "%B %d, %Y",
    "%b %d, %Y",
    "%b. %d, %Y",
    "%B %d %Y",
    "%b %d %Y",
    "%d %B %Y",
    "%d %b %Y",
    "%d %b. %Y",
    "%A, %B %d, %Y",
    "%a, %b %d, %Y",
    "%Y/%m/%d",
)


def parse_date(text: str) -> datetime | None:
    """The UTC moment `text` states, or None when it states none this module can read."""
    value = " ".join(text.split())
    if not value or len(value) > MAX_DATE_TEXT:
        return None
    return _iso(value) or _rfc2822(value) or _written(value)


def _iso(value: str) -> datetime | None:
    candidate = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        return None
    return _utc(parsed)


def _rfc2822(value: str) -> datetime | None:
    if not re.search(r"\d{1,2}:\d{2}", value):  # RFC 2822 always has a time
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return _utc(parsed)


def _written(value: str) -> datetime | None:
    cleaned = _ORDINAL.sub(r"\1", value)
    for pattern in _WRITTEN_FORMATS:
        try:
            return datetime.strptime(cleaned, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _utc(parsed: datetime) -> datetime:
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
