"""Times on the dashboard's pages: ``<time>`` elements the page script can show in any zone.

Every instant is written as ``<time datetime="2026-05-04T10:00:00Z">`` with a readable text the
page shows as it is without script (UTC, or the job's zone where the page says so). The script
(``static/console.js``) rewrites the text in the zone the person picked (UTC, the browser's, or
each job's own, read from ``data-zone`` on the element or an ancestor) and puts the absolute
time on a relative one's ``title``; a log line's (``class="ms"``) keeps its milliseconds.
``class="fixed"`` keeps a text the page labels with its zone (the job's local fires).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from markupsafe import Markup, escape

from jobhost.operations.runs import line_time
from jobhost.operations.timefmt import duration_text, iso_utc, short_local, short_utc

__all__ = ["ago_tag", "fixed_tag", "local_tag", "stamp_tag", "utc_tag"]


def utc_tag(at: datetime | None) -> Markup:
    """The instant, in UTC until the script shows it in the zone picked; ``-`` for nothing."""
    if at is None:
        return Markup("-")
    return _tag(at, short_utc(at))


def local_tag(at: datetime | None, zone: str) -> Markup:
    """The instant in the job's ``zone`` (its abbreviation says which) until the script shows it
    in the zone picked; the job's own zone when "each job's" is picked."""
    if at is None:
        return Markup("-")
    return _tag(at, short_local(at, zone), zone=zone)


def fixed_tag(at: datetime | None, zone: str) -> Markup:
    """The instant in ``zone`` whatever zone is picked (a column labelled with that zone)."""
    if at is None:
        return Markup("-")
    return _tag(at, short_local(at, zone), zone=zone, kind="fixed")


def ago_tag(at: datetime | None, now: datetime) -> Markup:
    """How long ago (``4m05s``), with the absolute time on hover; ``-`` for nothing. An
    instant after ``now`` is 0ms ago: a run a host started a moment after the page's reading
    of the store (or on a clock slightly ahead) has not run for a negative time."""
    if at is None:
        return Markup("-")
    elapsed = max(now - at, timedelta(0))
    return _tag(at, duration_text(elapsed), kind="ago", title=short_utc(at))


def stamp_tag(at: datetime) -> Markup:
    """A log line's time to the millisecond (``2026-05-04T10:00:00.123Z``): lines of one
    second stay apart, in whatever zone is picked."""
    text = line_time(at)
    return Markup(f'<time datetime="{escape(text)}" class="ms">{escape(text)}</time>')


def _tag(
    at: datetime, text: str, *, zone: str | None = None, kind: str = "", title: str = ""
) -> Markup:
    attributes = f' datetime="{escape(iso_utc(at))}"'
    if kind:
        attributes += f' class="{kind}"'
    if zone is not None:
        attributes += f' data-zone="{escape(zone)}"'
    if title:
        attributes += f' title="{escape(title)}"'
    return Markup(f"<time{attributes}>{escape(text)}</time>")
