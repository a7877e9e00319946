"""Times on the dashboard's pages: ``<time>`` elements holding the instant in UTC, a readable
text the page shows without script, and nothing a job's zone could smuggle into the markup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobhost.web.console.pages import ago_tag, fixed_tag, local_tag, stamp_tag, utc_tag

AT = datetime(2026, 12, 1, 17, 0, 5, tzinfo=UTC)


def test_an_instant_is_written_in_utc_with_its_iso_form() -> None:
    assert utc_tag(AT) == '<time datetime="2026-12-01T17:00:05Z">2026-12-01 17:00:05Z</time>'
    assert utc_tag(None) == "-"


def test_a_local_time_carries_its_zone_for_the_script_and_says_it_in_its_text() -> None:
    shown = local_tag(AT, "Europe/Berlin")
    assert shown == (
        '<time datetime="2026-12-01T17:00:05Z" data-zone="Europe/Berlin">'
        "2026-12-01 18:00:05 CET</time>"
    )
    assert 'class="fixed"' in fixed_tag(AT, "Europe/Berlin")
    assert local_tag(None, "UTC") == "-"


def test_a_relative_time_has_its_absolute_time_on_hover() -> None:
    shown = ago_tag(AT, AT + timedelta(minutes=4, seconds=5))
    assert shown == (
        '<time datetime="2026-12-01T17:00:05Z" class="ago" title="2026-12-01 17:00:05Z">'
        "4m05s</time>"
    )


def test_a_run_started_just_after_the_page_read_the_store_has_run_for_no_time() -> None:
    # The overview's "running for": the page's instant may be a few ms before the start.
    shown = ago_tag(AT, AT - timedelta(milliseconds=14))
    assert ">0ms</time>" in shown and "-" not in shown.split(">")[1]


def test_a_zone_is_escaped_in_the_markup() -> None:
    shown = local_tag(AT, '"><script>x</script>')
    assert "<script>" not in shown and "&#34;&gt;&lt;script&gt;" in shown


def test_a_log_lines_time_keeps_its_milliseconds() -> None:
    at = AT.replace(microsecond=961_500)
    assert stamp_tag(at) == (
        '<time datetime="2026-12-01T17:00:05.961Z" class="ms">2026-12-01T17:00:05.961Z</time>'
    )
