"""Time as the pipeline reads and writes it: aware UTC datetimes, ISO-8601 stamps and durations."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Only fixed-length units: years and months have no fixed length, so they are refused.
_DURATION = re.compile(
    r"P(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+)S)?)?"
)


def require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be an aware UTC datetime, got naive {value.isoformat()}")


def parse_cadence(value: str) -> timedelta | None:
    """Parse a Source `cadence`: an ISO-8601 duration (PT6H, P1D, P1W, P1DT12H) or `manual`.

    Returns None for `manual` (never due by cadence). Raises ValueError for anything else,
    including zero durations and calendar units (years, months) that have no fixed length.
    """
    text = value.strip()
    if text == "manual":
        return None
    match = _DURATION.fullmatch(text)
    if match is None or text in ("P", "PT"):
        raise ValueError(
            f"invalid cadence {value!r}: use an ISO-8601 duration such as PT6H, P1D or P1W, "
            "or 'manual'"
        )
    parts = {name: int(number) for name, number in match.groupdict().items() if number}
    try:
        cadence = timedelta(**parts)
    except OverflowError:
        raise ValueError(f"invalid cadence {value!r}: the duration is too long") from None
    if cadence <= timedelta(0):
        raise ValueError(f"invalid cadence {value!r}: the duration must be longer than zero")
    return cadence


def parse_utc(value: str) -> datetime:
    """Parse an ISO-8601 timestamp (with Z or an offset) into an aware UTC datetime.

    A timestamp without an offset is taken as UTC. Raises ValueError naming the bad value.
    """
    text = value.strip()
    if not text:
        raise ValueError("empty timestamp: expected ISO-8601 such as 2026-11-30T01:02:03Z")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"invalid timestamp {value!r}: expected ISO-8601 such as 2026-11-30T01:02:03Z"
        ) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def as_of_or_now(value: str | None) -> datetime:
    """The clock rule of every run, sensor and command: the given ISO-8601 instant (`--as-of`,
    `RADAR_AS_OF`, a run's `as_of`: simulations and tests), else now; blank counts as none."""
    text = (value or "").strip()
    return parse_utc(text) if text else datetime.now(UTC)


def format_utc(value: datetime) -> str:
    """Format an aware datetime as `2026-11-30T01:02:03Z` (UTC, seconds, fraction dropped)."""
    require_aware(value, "value")
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
