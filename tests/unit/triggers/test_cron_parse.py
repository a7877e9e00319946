"""Parsing cron expressions: what is accepted, and errors that name the field and the reason."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest

from jobhost.triggers import CronNeverFiresError, CronSyntaxError, cron_schedule


@pytest.mark.parametrize(
    ("expression", "field", "reason"),
    [
        # wrong field count
        ("", "expression", "expected 5 fields"),
        ("* * * *", "expression", "got 4"),
        ("* * * * * * *", "expression", "got 7"),
        ("@daily", "expression", "'0 0 * * *' for @daily"),
        # out of range, with the allowed range, in every field
        ("60 * * * * *", "second", "60 is out of range 0-59"),
        ("60 * * * *", "minute", "60 is out of range 0-59"),
        ("0 24 * * *", "hour", "24 is out of range 0-23"),
        ("0 0 0 * *", "day of month", "0 is out of range 1-31"),
        ("0 0 32 * *", "day of month", "32 is out of range 1-31"),
        ("0 0 * 13 *", "month", "13 is out of range 1-12"),
        ("0 0 * 0 *", "month", "0 is out of range 1-12"),
        ("0 0 * * 8", "day of week", "8 is out of range 0-7"),
        ("0 0-99 * * *", "hour", "99 is out of range 0-23"),
        # empty list items
        ("1,,2 * * * *", "minute", "empty item"),
        ("0 1, * * *", "hour", "empty item"),
        ("0 0 ,1 * *", "day of month", "empty item"),
        # steps
        ("*/0 * * * *", "minute", "must be at least 1"),
        ("0 0-23/0 * * *", "hour", "must be at least 1"),
        ("*/ * * * *", "minute", "no step after '/'"),
        ("*/x * * * *", "minute", "step 'x' is not a number"),
        ("*/-1 * * * *", "minute", "step '-1' is not a number"),
        # ranges that run backwards are rejected, as Debian's cron does, with the fix
        ("50-10 * * * *", "minute", "write '50-59,0-10'"),
        ("0 0 * * fri-mon", "day of week", "write 'fri-sat,sun-mon'"),
        ("0 0 * * 5-1", "day of week", "write '5-6,0-1'"),
        ("0 0 * * 7-2", "day of week", "write '0-2'"),
        ("0 0 * dec-jan *", "month", "runs backwards"),
        ("0 0 * 12-1 *", "month", "do not wrap around"),
        ("-5 * * * *", "minute", "value on both sides of '-'"),
        ("5- * * * *", "minute", "value on both sides of '-'"),
        # names: unknown, or in a field without names
        ("0 0 * foo *", "month", "'foo' is neither a number nor a month name (jan-dec)"),
        ("0 0 * * funday", "day of week", "neither a number nor a day name (sun-sat)"),
        ("0 0 * mon *", "month", "'mon' is neither a number nor a month name"),
        ("0 0 jan * *", "day of month", "'jan' is not a number"),
        ("x * * * *", "minute", "'x' is not a number"),
        ("1.5 * * * *", "minute", "'1.5' is not a number"),
        ("\u0661 * * * *", "minute", "is not a number"),  # a non-ASCII digit
        # '?' only in the day fields, and alone
        ("? * * * *", "minute", "only allowed in the day of month and day of week"),
        ("0 ? * * *", "hour", "only allowed"),
        ("0 0 * ? *", "month", "only allowed"),
        ("0 0 ?/2 * *", "day of month", "must stand alone"),
        ("0 0 * * 1,?", "day of week", "must stand alone"),
        # Quartz extensions are not cron
        ("0 0 L * *", "day of month", "Quartz extension"),
        ("0 0 15W * *", "day of month", "Quartz extension"),
        ("0 0 * * 5L", "day of week", "Quartz extension"),
        ("0 0 * * mon#2", "day of week", "Quartz extension"),
    ],
)
def test_syntax_errors_name_the_field_and_the_reason(
    expression: str, field: str, reason: str
) -> None:
    with pytest.raises(CronSyntaxError) as caught:
        cron_schedule(expression)
    error = caught.value
    assert (error.field, error.expression) == (field, expression)
    assert reason in error.reason
    assert str(error).startswith(f"cron expression {expression!r}: ")
    assert reason in str(error)
    assert isinstance(error, ValueError)


def test_the_message_quotes_the_field_text() -> None:
    with pytest.raises(CronSyntaxError) as caught:
        cron_schedule("0 0 0 61 * *")
    assert str(caught.value) == (
        "cron expression '0 0 0 61 * *': day of month field '61': 61 is out of range 1-31"
    )


def test_a_wrong_field_count_says_what_is_expected() -> None:
    with pytest.raises(CronSyntaxError) as caught:
        cron_schedule("0 3 * *")
    assert str(caught.value) == (
        "cron expression '0 3 * *': expected 5 fields (minute hour day-of-month month "
        "day-of-week) or 6 with a leading seconds field, got 4"
    )


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("0 0 30 2 *", "day 30 does not exist in February"),
        ("0 0 31 2 *", "day 31 does not exist in February"),
        ("0 0 31 4,6 *", "day 31 does not exist in April or June"),
        ("0 0 31 apr,jun,sep,nov *", "day 31 does not exist in April, June, September or November"),
        ("0 0 30,31 feb *", "days 30 and 31 do not exist in February"),
        ("0 0 30-31 2 ?", "days 30 and 31 do not exist in February"),
        # A day-of-week field starting with '*' only filters: the impossible date still decides.
        ("0 0 30 2 */2", "day 30 does not exist in February"),
        ("0 0 0 31 4 *", "day 31 does not exist in April"),
    ],
)
def test_expressions_that_can_never_fire(expression: str, reason: str) -> None:
    with pytest.raises(CronNeverFiresError) as caught:
        cron_schedule(expression)
    assert caught.value.expression == expression
    assert caught.value.reason == reason
    assert str(caught.value) == f"cron expression {expression!r} can never fire: {reason}"


@pytest.mark.parametrize(
    ("expression", "first"),
    [
        ("0 0 29 2 *", datetime(2028, 2, 29, tzinfo=UTC)),  # the next leap year
        # Mondays in February: the days are ORed, so the weekdays fire.
        ("0 0 30 2 1", datetime(2027, 2, 1, tzinfo=UTC)),
        ("0 0 31 * *", datetime(2027, 1, 31, tzinfo=UTC)),
        ("0 0 30,31 2,3 *", datetime(2027, 3, 30, tzinfo=UTC)),
    ],
)
def test_rare_but_possible_dates_are_accepted(expression: str, first: datetime) -> None:
    schedule = cron_schedule(expression)

    assert schedule.next_after(datetime(2027, 1, 1, tzinfo=UTC)) == first


@pytest.mark.parametrize(
    ("expression", "fixed_time"),
    [
        ("30 2 * * *", True),
        ("0,30 1-3 * * *", True),
        ("0-59 0-23 * * *", True),  # Debian looks at the first character only
        ("*/5 * * * *", False),
        ("0 * * * *", False),
        ("* 2 * * *", False),
        ("*/30 2 * * *", False),
        ("0 */2 * * *", False),
        ("* 30 2 * * *", True),  # a seconds field does not count
        ("0 30 2 ? * ?", True),
    ],
)
def test_fixed_time_is_decided_by_the_minute_and_hour_fields(
    expression: str, fixed_time: bool
) -> None:
    assert cron_schedule(expression).fixed_time is fixed_time


def test_whitespace_between_fields_is_free() -> None:
    after = datetime(2026, 1, 1, tzinfo=UTC)
    assert cron_schedule(" 0\t3  * * *\n").next_after(after) == datetime(2026, 1, 1, 3, tzinfo=UTC)


def test_schedules_compare_by_expression_and_zone() -> None:
    berlin = cron_schedule("0 3 * * *", "Europe/Berlin")
    assert berlin == cron_schedule("0 3 * * *", "Europe/Berlin")
    assert hash(berlin) == hash(cron_schedule("0 3 * * *", "Europe/Berlin"))
    assert berlin != cron_schedule("0 3 * * *", "UTC")
    assert (berlin.expression, berlin.timezone) == ("0 3 * * *", "Europe/Berlin")


def test_describe() -> None:
    schedule = cron_schedule("30 2 * * *", "Europe/Berlin")
    assert schedule.describe() == "cron '30 2 * * *' in Europe/Berlin"


def test_errors_survive_pickling() -> None:
    # Errors cross process boundaries (a validation run in a subprocess, a worker pool).
    for expression, kind in (("0 61 * * *", CronSyntaxError), ("0 0 30 2 *", CronNeverFiresError)):
        with pytest.raises(kind) as caught:
            cron_schedule(expression)
        copy = pickle.loads(pickle.dumps(caught.value))
        assert str(copy) == str(caught.value)
        assert copy.expression == expression
