"""Cron expressions as Debian's cron reads them, and the schedule they make in a time zone.

Five fields (minute hour day-of-month month day-of-week), or six with a leading seconds field.
Each field is ``*``, a number, a range ``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n`` (from ``a``
to the end of the field), or a comma-separated list of those. Months and weekdays also take
names (``jan``, ``mon``); day of week 0 and 7 are Sunday. ``?`` stands for ``*`` in the two day
fields. When both day fields are restricted a day matches if either does; when either starts
with ``*`` (or is ``?``) a day must match both.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple
from zoneinfo import ZoneInfo

from jobhost_contracts import DstGap, DstRepeat

from jobhost.triggers._apscheduler import ALL_DAYS, ALL_WEEKDAYS, CronFields, WallCalendar
from jobhost.triggers._daylight import load_zone, next_instant, skipped_wall_times

__all__ = ["CronNeverFiresError", "CronSchedule", "CronSyntaxError", "cron_schedule"]


class CronSyntaxError(ValueError):
    """A cron expression that does not parse; ``field`` is ``expression`` (and ``text`` None)
    when the number of fields is wrong."""

    def __init__(self, expression: str, field: str, reason: str, text: str | None = None) -> None:
        self.expression = expression
        self.field = field
        self.reason = reason
        self.text = text
        where = "" if text is None else f" {field} field {text!r}:"
        super().__init__(f"cron expression {expression!r}:{where} {reason}")

    def __reduce__(self) -> tuple[type[CronSyntaxError], tuple[str, str, str, str | None]]:
        return (type(self), (self.expression, self.field, self.reason, self.text))


class CronNeverFiresError(ValueError):
    """A cron expression that parses but matches no date at all (``0 0 30 2 *``)."""

    def __init__(self, expression: str, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(f"cron expression {expression!r} can never fire: {reason}")

    def __reduce__(self) -> tuple[type[CronNeverFiresError], tuple[str, str]]:
        return (type(self), (self.expression, self.reason))


def cron_schedule(
    expression: str,
    timezone: str = "UTC",
    *,
    dst_gap: DstGap = DstGap.SHIFT,
    dst_repeat: DstRepeat = DstRepeat.ONCE,
) -> CronSchedule:
    """``expression`` in an IANA ``timezone`` with a daylight-saving policy, kept per argument
    set; raises :class:`CronSyntaxError`, :class:`CronNeverFiresError` or ``UnknownTimezoneError``.
    """
    # An Enum call costs several calls, and a report of 10,000 jobs asks here for each.
    gap = dst_gap if type(dst_gap) is DstGap else DstGap(dst_gap)
    repeat = dst_repeat if type(dst_repeat) is DstRepeat else DstRepeat(dst_repeat)
    return _kept_schedule(expression, timezone, gap, repeat)


_PARSED_KEPT = 20_000


@dataclass(frozen=True)
class CronSchedule:
    """A cron expression in a time zone; occurrences are UTC instants at whole seconds.

    ``fixed_time`` (neither the minute nor the hour field starts with ``*``) is Debian cron's
    split for daylight saving: only such a job follows ``dst_gap`` and ``dst_repeat``.
    """

    expression: str
    timezone: str = "UTC"
    dst_gap: DstGap = DstGap.SHIFT
    dst_repeat: DstRepeat = DstRepeat.ONCE
    fixed_time: bool = field(init=False)
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)
    _calendar: WallCalendar = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        fields, fixed_time = _parse(self.expression)
        zone = load_zone(self.timezone)
        object.__setattr__(self, "fixed_time", fixed_time)
        object.__setattr__(self, "_zone", zone)
        object.__setattr__(self, "_calendar", _calendar(self.expression, fields))

    def next_after(self, after: datetime) -> datetime | None:
        found = self._next(_seconds(after))
        return None if found is None else datetime.fromtimestamp(found, UTC)

    def iter_after(self, after: datetime, limit: int) -> list[datetime]:
        if limit < 0:
            raise ValueError(f"limit must be 0 or more, got {limit}")
        found: list[datetime] = []
        current = _seconds(after)
        while len(found) < limit:
            following = self._next(current)
            if following is None:
                break
            found.append(datetime.fromtimestamp(following, UTC))
            current = following
        return found

    def skipped_between(self, after: datetime, until: datetime) -> list[datetime]:
        """Each at the instant Python's ``fold=0`` reading gives it: just after the gap."""
        if not self.fixed_time or self.dst_gap is not DstGap.SKIP:
            return []
        found = skipped_wall_times(
            self._zone,
            self._calendar.next_at_or_after,
            after=_seconds(after),
            until=_seconds(until),
        )
        return [datetime.fromtimestamp(instant, UTC) for instant in found]

    def describe(self) -> str:
        parts = [f"cron {self.expression!r} in {self.timezone}"]
        if self.dst_gap is not DstGap.SHIFT:
            parts.append(f"dst_gap={self.dst_gap.value}")
        if self.dst_repeat is not DstRepeat.ONCE:
            parts.append(f"dst_repeat={self.dst_repeat.value}")
        return ", ".join(parts)

    def _next(self, after: int) -> int | None:
        return next_instant(
            self._zone,
            self._calendar.next_at_or_after,
            fixed_time=self.fixed_time,
            after=after,
            gap=self.dst_gap,
            repeat=self.dst_repeat,
        )


_kept_schedule = functools.lru_cache(maxsize=_PARSED_KEPT)(CronSchedule)


class _Field(NamedTuple):
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()  # for the values from `low` on
    question: bool = False  # whether `?` may stand for the whole field


_SECOND = _Field("second", 0, 59)
_MINUTE = _Field("minute", 0, 59)
_HOUR = _Field("hour", 0, 23)
_DAY = _Field("day of month", 1, 31, question=True)
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH = _Field("month", 1, 12, tuple(name[:3].lower() for name in _MONTH_NAMES))
_WEEKDAY = _Field("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat"), True)
_FIELDS = (_SECOND, _MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)

_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # February as in a leap year
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_QUARTZ = re.compile(r"\d*[lw]|lw|\w+#\d*", re.IGNORECASE)


def _parse(expression: str) -> tuple[CronFields, bool]:
    """The fields, and whether the job runs at a fixed time of day (see :class:`CronSchedule`)."""
    texts = expression.split()
    if len(texts) == 5:
        texts.insert(0, "0")
    elif len(texts) != 6:
        raise CronSyntaxError(expression, "expression", _count_reason(texts))
    values = [
        _field_values(expression, spec, text) for spec, text in zip(_FIELDS, texts, strict=True)
    ]
    _, minute_text, hour_text, day_text, _, weekday_text = texts
    # Debian cron: a day field starting with '*' takes no part in the OR; it filters.
    either_day = not _unrestricted(day_text) and not _unrestricted(weekday_text)
    fixed_time = not minute_text.startswith("*") and not hour_text.startswith("*")
    return CronFields._make([*values, either_day]), fixed_time


def _unrestricted(text: str) -> bool:
    return text.startswith("*") or text == "?"


def _calendar(expression: str, fields: CronFields) -> WallCalendar:
    day, weekday, either = fields.day_of_month, fields.day_of_week, fields.either_day
    impossible = _impossible_days(day, fields.month)
    if impossible and not either:
        raise CronNeverFiresError(expression, impossible)
    if either and (day == ALL_DAYS or weekday == ALL_WEEKDAYS):
        day, weekday, either = ALL_DAYS, ALL_WEEKDAYS, False
    elif either and impossible:
        # Only the weekdays can match (a trigger that never fires searches up to year 9999).
        day, either = ALL_DAYS, False
    return WallCalendar(fields._replace(day_of_month=day, day_of_week=weekday, either_day=either))


def _impossible_days(days: frozenset[int], months: frozenset[int]) -> str | None:
    if min(days) <= max(_DAYS_IN_MONTH[m - 1] for m in months):
        return None
    day_list = sorted(days)
    subject = (
        f"day {day_list[0]} does" if len(day_list) == 1 else f"days {_join(day_list, 'and')} do"
    )
    return f"{subject} not exist in {_join([_MONTH_NAMES[m - 1] for m in sorted(months)], 'or')}"


def _join(items: list[int] | list[str], word: str) -> str:
    texts = [str(item) for item in items]
    return texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} {word} {texts[-1]}"


def _count_reason(texts: list[str]) -> str:
    if len(texts) == 1 and texts[0].lower() in _MACROS:
        return (
            f"{texts[0]!r} is not supported; write the fields, "
            f"{_MACROS[texts[0].lower()]!r} for {texts[0].lower()}"
        )
    return (
        "expected 5 fields (minute hour day-of-month month day-of-week) or 6 with a leading "
        f"seconds field, got {len(texts)}"
    )


def _field_values(expression: str, spec: _Field, text: str) -> frozenset[int]:
    # Parsed once per text: thousands of expressions repeat a few field texts (*, 0, */5).
    key = (spec.name, text)
    found = _FIELD_VALUES.get(key)
    if found is None:
        if len(_FIELD_VALUES) >= _PARSED_KEPT:
            _FIELD_VALUES.clear()
        found = _FIELD_VALUES[key] = _parse_field(expression, spec, text)
    return found


_FIELD_VALUES: dict[tuple[str, str], frozenset[int]] = {}


def _parse_field(expression: str, spec: _Field, text: str) -> frozenset[int]:
    site = _Site(expression, spec, text)
    if text == "?":
        if not spec.question:
            raise site.error("'?' is only allowed in the day of month and day of week fields")
        text = "*"
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise site.error("the list has an empty item")
        values.update(_parse_item(site, item))
    if spec is _WEEKDAY and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


class _Site(NamedTuple):
    """Where a parse error is, to name the field and its text."""

    expression: str
    spec: _Field
    text: str

    def error(self, reason: str) -> CronSyntaxError:
        return CronSyntaxError(self.expression, self.spec.name, reason, self.text)


def _parse_item(site: _Site, item: str) -> range:
    spec = site.spec
    base, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text:
            raise site.error(f"{item!r} has no step after '/'")
        if not _is_number(step_text):
            raise site.error(f"step {step_text!r} is not a number")
        step = int(step_text)
        if step == 0:
            raise site.error(f"step in {item!r} must be at least 1")
    if base == "*":
        return range(spec.low, spec.high + 1, step)
    if base == "?":
        raise site.error("'?' must stand alone as the whole field")
    first_text, dash, last_text = base.partition("-")
    first = _value(site, first_text)
    if not dash:
        # `a/n` runs from a to the end of the field, as `*/n` runs from its start.
        return range(first, (spec.high if slash else first) + 1, step)
    last = _value(site, last_text)
    if first > last:
        raise site.error(
            f"range {base!r} runs backwards ({first} is after {last}); cron ranges do not "
            f"wrap around, write {_wrapped(spec, first_text, last_text)!r}"
        )
    return range(first, last + 1, step)


def _value(site: _Site, text: str) -> int:
    spec = site.spec
    if not text:
        raise site.error("a range needs a value on both sides of '-'")
    if _is_number(text):
        number = int(text)
        if not spec.low <= number <= spec.high:
            raise site.error(f"{number} is out of range {spec.low}-{spec.high}")
        return number
    lowered = text.lower()
    if lowered in spec.names:
        return spec.low + spec.names.index(lowered)
    if _QUARTZ.fullmatch(text):
        raise site.error(f"{text!r} is a Quartz extension (L, W, #) that cron does not have")
    if spec.names:
        kind = "month" if spec is _MONTH else "day"
        names = f"{spec.names[0]}-{spec.names[-1]}"
        raise site.error(f"{text!r} is neither a number nor a {kind} name ({names})")
    raise site.error(f"{text!r} is not a number")


def _wrapped(spec: _Field, first_text: str, last_text: str) -> str:
    # Day of week: 7 is Sunday, so a range from 7 is a range from 0 and needs no wrapping.
    top = spec.high - 1 if spec is _WEEKDAY else spec.high
    if _is_number(first_text) and int(first_text) > top:
        return f"{spec.low}-{last_text}"
    if not _is_number(first_text) and not _is_number(last_text):
        return f"{first_text}-{spec.names[top - spec.low]},{spec.names[0]}-{last_text}"
    return f"{first_text}-{top},{spec.low}-{last_text}"


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _seconds(moment: datetime) -> int:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"expected an aware datetime, got naive {moment.isoformat()}")
    seconds: int = (moment - _EPOCH) // _ONE_SECOND
    return seconds


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_SECOND = timedelta(seconds=1)
