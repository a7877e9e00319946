"""Damaged values in rows of every table, as a hand edit or a broken restore leaves them.

The commands that read (`report`, `history`, `health`) go on: they show what they can, name the
damaged value and never print a traceback, and change nothing. The store's own file damaged is
refused with what to do.
"""

from __future__ import annotations

from tests.badinput.corpus_rows import JOB, OTHER, set_value
from tests.badinput.corpus_support import Case

_JOB = f"job_name = '{JOB}'"


def _rows(case_id: str, sql: str, *, column: str, live: bool = True) -> list[Case]:
    """The same damage seen by each command that reads it.

    ``report`` and ``history`` go on and show the jobs. ``jobhost db check --full`` names the
    damaged ``column`` and exits 1. Where a host reads the row (``live``: schedules, live runs,
    hosts, open requests, signals), ``health`` must fail a ``store-integrity`` check naming it;
    damage in finished runs and other tables is the full audit's alone.
    """
    cases = [
        Case(f"row-{case_id}-report", ("report",), 0, (JOB,), corrupt=sql),
        Case(f"row-{case_id}-history", ("history", JOB), 0, (JOB,), corrupt=sql),
        Case(f"row-{case_id}-audit", ("db", "check", "--full"), 1, (column,), corrupt=sql),
    ]
    if live:
        cases.append(
            Case(
                f"row-{case_id}-health",
                ("health", "--no-hosts"),
                1,
                ("store-integrity", column),
                corrupt=sql,
            )
        )
    return cases


ROW_CASES = [
    *_rows(
        "schedule-fencing-token",
        set_value("schedules", "fencing_token", "'abc'", _JOB),
        column="fencing_token",
    ),
    *_rows(
        "schedule-next-occurrence",
        set_value("schedules", "next_occurrence", "'soon'", _JOB),
        column="next_occurrence",
    ),
    *_rows(
        "schedule-created-at",
        set_value("schedules", "created_at", "'garbage'", _JOB),
        column="created_at",
    ),
    *_rows(
        "schedule-enabled", set_value("schedules", "enabled", "'maybe'", _JOB), column="enabled"
    ),
    *_rows(
        "schedule-trigger-kind",
        set_value("schedules", "trigger_kind", "'weird'", _JOB),
        column="trigger_kind",
    ),
    *_rows(
        "schedule-timezone",
        set_value("schedules", "timezone", "'Mars/Base'", _JOB),
        column="timezone",
    ),
    *_rows(
        "schedule-interval-anchor",
        set_value("schedules", "interval_anchor", "'x'", _JOB),
        column="interval_anchor",
    ),
    *_rows(
        "schedule-lease-far-future",
        set_value("schedules", "lease_owner", "'ghost'", _JOB)
        + set_value("schedules", "lease_expires_at", "'9999-12-31 00:00:00.000000'", _JOB),
        column="lease_expires_at",
    ),
    *_rows(
        "run-outcome",
        set_value("runs", "outcome", "'exploded'", "id = 'run-ok'"),
        column="outcome",
        live=False,
    ),
    *_rows(
        "run-started-at",
        set_value("runs", "started_at", "'garbage'", "id = 'run-ok'"),
        column="started_at",
        live=False,
    ),
    *_rows(
        "run-attempt",
        set_value("runs", "attempt", "'many'", "id = 'run-ok'"),
        column="attempt",
        live=False,
    ),
    *_rows(
        "run-queued-at",
        set_value("runs", "queued_at", "'garbage'", "id = 'run-failed'"),
        column="queued_at",
        live=False,
    ),
    *_rows(
        "run-running-garbage-lease",
        set_value("runs", "outcome", "'running'", "id = 'run-ok'")
        + set_value("runs", "finished_at", "NULL", "id = 'run-ok'")
        + set_value("runs", "lease_expires_at", "'garbage'", "id = 'run-ok'"),
        column="lease_expires_at",
    ),
    *_rows(
        "host-last-seen", set_value("hosts", "last_seen_at", "'garbage'"), column="last_seen_at"
    ),
    *_rows(
        "host-heartbeat",
        set_value("hosts", "heartbeat_seconds", "'abc'"),
        column="heartbeat_seconds",
    ),
    *_rows("host-pid", set_value("hosts", "pid", "'abc'"), column="pid"),
    *_rows(
        "state-fencing-token",
        set_value("job_state", "fencing_token", "'abc'"),
        column="fencing_token",
        live=False,
    ),
    *_rows(
        "idempotency-recorded-at",
        set_value("job_idempotency", "recorded_at", "'x'"),
        column="recorded_at",
        live=False,
    ),
    *_rows("signals-version", set_value("signals", "version", "'abc'"), column="version"),
    *_rows(
        "orphan-of-another-module",
        set_value("schedules", "module", "'gone'", f"job_name = '{OTHER}'"),
        column="module",
    ),
    Case(
        "row-schema-unknown-revision",
        ("report",),
        3,
        ("store schema zzz is newer than this jobhost", "upgrade jobhost"),
        corrupt="UPDATE alembic_version SET version_num = 'zzz';",
    ),
    Case(
        "store-file-not-a-database",
        ("report",),
        1,
        ("cannot reach the store", "file is not a database"),
        corrupt="FILE:" + "this is not a database\n" * 200,
    ),
    Case(
        "store-file-empty",
        ("history", JOB),
        1,
        ("is not at schema revision", "jobhost db upgrade"),
        corrupt="FILE:",
    ),
    Case(
        "row-schema-revision-missing",
        ("report",),
        1,
        ("is not at schema revision", "jobhost db upgrade"),
        corrupt="DELETE FROM alembic_version;",
    ),
]

# A schedule row naming another module is not damage: health and the audit have nothing to say.
ROW_CASES = [
    case
    for case in ROW_CASES
    if case.id not in {"row-orphan-of-another-module-health", "row-orphan-of-another-module-audit"}
]
