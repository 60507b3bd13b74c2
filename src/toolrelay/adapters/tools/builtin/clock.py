"""The built-in `get_time` tool: the current date and time, in UTC or an IANA time zone.

Owns reading a time zone the way a small model writes one: the IANA name
(`Asia/Tokyo`), in any case, or only its city (`Tokyo`, `new york`). Zones come
from `zoneinfo` (the system's tz database, or the `tzdata` package); a name it
does not know is an error the model reads, with the form to use.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from toolrelay.adapters.tools.python import tool
from toolrelay.errors import ToolError

__all__ = ["get_time", "now_in", "zone_named"]

_UTC_NAMES = frozenset({"", "utc", "gmt", "z", "zulu", "etc/utc"})


@functools.cache
def _zone_names() -> dict[str, str]:
    """Lower-cased IANA names and their last parts (`tokyo`, `new york`) -> the name."""
    names: dict[str, str] = {}
    cities: dict[str, str] = {}
    for name in sorted(available_timezones()):
        names[name.lower()] = name
        city = name.rsplit("/", 1)[-1].replace("_", " ").lower()
        if "/" in name and not name.startswith("Etc/"):
            cities.setdefault(city, name)
    return cities | names


def zone_named(name: str) -> tzinfo:
    """The time zone a model named; `ToolError` when there is none by that name."""
    key = " ".join(name.strip().replace("_", " ").split()).lower()
    if key in _UTC_NAMES:
        return UTC
    found = _zone_names().get(key.replace(" ", "_")) or _zone_names().get(key)
    try:
        return ZoneInfo(found or name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ToolError(
            f"get_time: unknown time zone {name!r}: use an IANA name such as "
            '"Asia/Tokyo", "Europe/Paris" or "America/New_York"'
        ) from None


def now_in(zone: tzinfo, now: datetime | None = None) -> str:
    """`Sunday 6 December 2026, 11:30:05 in Asia/Tokyo (2026-12-06T11:30:05+09:00)`: in
    words first (a small model copies them; it misreads the month of an ISO date), then
    ISO 8601 for anything that parses it."""
    moment = (now or datetime.now(UTC)).astimezone(zone)
    label = getattr(zone, "key", None) or moment.tzname() or "UTC"
    words = f"{moment:%A} {moment.day} {moment:%B %Y, %H:%M:%S}"
    return f"{words} in {label} ({moment.isoformat(timespec='seconds')})"


@tool(inline=True, idempotent=True)
def get_time(timezone: str = "UTC") -> str:
    """Get the current date and time (with the weekday) in a time zone.

    Args:
        timezone: An IANA time zone such as "Asia/Tokyo" or "Europe/Paris"; a city
            name such as "Tokyo" also works. Default: UTC.
    """
    return now_in(zone_named(timezone))
