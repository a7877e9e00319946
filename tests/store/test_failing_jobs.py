"""Which jobs are failing, on both stores: a job stays failing, however many attempts it had,
until an attempt of its newest occurrence or of a later one succeeds; its streak counts
occurrences in a row; the metrics carry both per job, with the dashboard's address."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobhost.store import reading
from jobhost.store.failures import failing_jobs
from tests.cli.operator_support import Operator, now

NIGHTLY = {"name": "billing.nightly", "cron": "0 3 * * *", "critical": True}
PING = {"name": "http.ping", "cron": "* * * * *"}


def _nights(back: int) -> datetime:
    today = now().replace(hour=3, minute=0, second=0, microsecond=0)
    return today - timedelta(days=back)


def _failing(operator: Operator) -> dict[str, tuple[int, bool]]:
    with reading(operator.engine) as connection:
        return {name: (f.streak, f.critical) for name, f in failing_jobs(connection).items()}


def _night(operator: Operator, back: int, outcome: str, **values: object) -> str:
    occurrence = _nights(back)
    started = values.pop("started", occurrence)
    assert isinstance(started, datetime)
    return operator.add_run(
        "billing.nightly",
        outcome,
        occurrence=occurrence,
        started=started,
        error="connection refused" if outcome != "succeeded" else None,
        **values,  # type: ignore[arg-type]
    )


def test_one_failed_night_stays_failing_until_its_retry_succeeds(operator: Operator) -> None:
    operator.configure([NIGHTLY, PING]).sync()
    _night(operator, 2, "succeeded")
    _night(operator, 1, "failed")
    operator.add_run("http.ping", "succeeded", occurrence=now() - timedelta(minutes=1))
    assert _failing(operator) == {"billing.nightly": (1, True)}
    # A second failed attempt, a manual run that succeeds: still failing.
    _night(operator, 1, "timed_out", attempt=2, source="retry", started=now())
    operator.add_run("billing.nightly", "succeeded", source="manual")
    assert _failing(operator) == {"billing.nightly": (1, True)}
    _night(operator, 1, "succeeded", attempt=3, source="retry", started=now())
    assert _failing(operator) == {}


def test_three_failed_nights_are_a_streak_of_three_until_a_later_one_succeeds(
    operator: Operator,
) -> None:
    operator.configure([NIGHTLY]).sync()
    _night(operator, 4, "succeeded")
    for back in (3, 2, 1):
        _night(operator, back, "failed")
        _night(operator, back, "abandoned", attempt=2, source="retry")
    assert _failing(operator) == {"billing.nightly": (3, True)}
    # A backfill of an older night succeeding does not end it; the newest night's does.
    _night(operator, 3, "succeeded", attempt=3, source="backfill", started=now())
    assert _failing(operator) == {"billing.nightly": (2, True)}
    _night(operator, 1, "succeeded", attempt=3, source="backfill", started=now())
    assert _failing(operator) == {}


def test_a_later_night_succeeding_ends_the_failing(operator: Operator) -> None:
    operator.configure([NIGHTLY]).sync()
    _night(operator, 2, "failed")
    _night(operator, 1, "succeeded")
    assert _failing(operator) == {}
