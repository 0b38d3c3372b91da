"""A date as a feed, page or JSON answer writes it, or None: never a guessed one.

Only absolute dates are read: ISO 8601 / RFC 3339 (an HTML `datetime` attribute, a JSON API
field, Atom), RFC 2822 / 5322 (RSS `pubDate`, e-mail style), a 12-hour clock with its AM/PM
marker ("Sat, Dec 16 2023 02:02:33 PM") and a few written-out forms ("November 28, 2026",
"28 Nov 2026"). The day-of-week of an RFC 5322 date is redundant and optional, so it is
ignored whatever its language ("mer, 16 nov 2022 00:38:15 +0100"). Nothing relative ("today",
"3 days ago") and no partial date (no year) is read, and no date is filled in from the clock.
Two readings are documented in docs/operations.md: a day without a time is that day at 00:00 UTC,
and a date-time without an offset is UTC (WordPress's `date_gmt`); point a path at a UTC field, not
a local one.
"""

from __future__ import annotations

import email.utils
import re
from datetime import UTC, datetime, timedelta

MAX_DATE_TEXT = 80  # a date is short; longer text is prose, not a date
_ORDINAL = re.compile(r"(\d)(st|nd|rd|th)\b", re.IGNORECASE)
# A 12-hour clock: the marker changes the hour, so no reader that drops it may see the text.
_MERIDIEM = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?\s*([AaPp]\.?[Mm]\.?)(?=\s|$)")
_LEADING_WEEKDAY = re.compile(r"^[^\W\d_]+\.?,\s*")
_ZONE_SUFFIX = re.compile(r"\s+(?:(?:GMT|UTC|UT|Z)|([+-])(\d{2}):?(\d{2}))$", re.IGNORECASE)
_CLOCK12_FORMATS = (
    "%b %d %Y %I:%M:%S %p",
    "%b %d %Y %I:%M %p",
    "%b %d, %Y %I:%M:%S %p",
    "%b %d, %Y %I:%M %p",
    "%B %d, %Y %I:%M:%S %p",
    "%B %d, %Y %I:%M %p",
    "%d %b %Y %I:%M:%S %p",
    "%d %b %Y %I:%M %p",
    "%Y-%m-%d %I:%M:%S %p",
    "%Y-%m-%d %I:%M %p",
    "%m/%d/%Y %I:%M:%S %p",
    "%m/%d/%Y %I:%M %p",
)
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
    if _MERIDIEM.search(value):
        return _clock12(value)
    return _iso(value) or _rfc2822(value) or _written(value)


def _clock12(value: str) -> datetime | None:
    """A date with a 12-hour clock, its AM/PM marker read (an optional leading weekday is
    ignored; a trailing zone is GMT/UTC/Z or a numeric offset; none: UTC)."""
    text = _LEADING_WEEKDAY.sub("", value)
    offset = timedelta(0)
    zone = _ZONE_SUFFIX.search(text)
    if zone is not None:
        if zone.group(1):
            sign = -1 if zone.group(1) == "-" else 1
            offset = sign * timedelta(hours=int(zone.group(2)), minutes=int(zone.group(3)))
        text = text[: zone.start()]
    text = text.replace(".", "").upper()  # "p.m." -> "PM"
    for pattern in _CLOCK12_FORMATS:
        try:
            parsed = datetime.strptime(text, pattern.replace(".", ""))
        except ValueError:
            continue
        return parsed.replace(tzinfo=UTC) - offset
    return None


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
