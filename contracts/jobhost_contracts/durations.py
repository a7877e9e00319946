"""Durations as operators write them (``90s``, ``15m``, ``24h``, ``7d``, ``1h30m``), the same in
the host's settings and every module's section. A leading ``-`` gives a negative duration, so a
reader can say "must be positive" instead of "not a duration".
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"-?(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")
_TOO_LONG = "is too long a duration; the longest is 999999999 days"


def parse_duration(value: object) -> timedelta:
    """Read a duration; a bare number counts as seconds. Raises ValueError saying the format."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{value!r} is not a duration; write e.g. '90s', '15m', '24h' or '7d'")
    if not isinstance(value, str):
        return _seconds(value, value)
    text = value.strip().lower().replace(" ", "")
    if not _WHOLE.fullmatch(text):
        raise ValueError(
            f"{value!r} is not a duration; write a number and a unit (ms, s, m, h, d, w), "
            "e.g. '90s', '15m', '24h', '7d' or '1h30m'"
        )
    seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART.findall(text))
    return _seconds(-seconds if text.startswith("-") else seconds, value)


def _seconds(seconds: float, written: object) -> timedelta:
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):  # ValueError: NaN
        raise ValueError(f"{written!r} {_TOO_LONG}") from None


def format_duration(value: timedelta) -> str:
    """The shortest exact spelling: ``timedelta(hours=6)`` gives ``6h``."""
    total = value.total_seconds()
    if total == 0:
        return "0s"
    sign = "-" if total < 0 else ""
    remaining = abs(total)
    parts: list[str] = []
    for unit in ("d", "h", "m", "s"):
        size = _UNITS[unit]
        count = int(remaining // size)
        if count:
            parts.append(f"{count}{unit}")
            remaining -= count * size
    if remaining > 1e-9:
        parts.append(f"{round(remaining * 1000)}ms")
    return sign + "".join(parts)
