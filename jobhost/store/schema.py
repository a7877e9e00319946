"""The store's tables. Migrations create them; this module is what queries are written against."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    literal_column,
)

from jobhost.store.engine import UTCDateTime

__all__ = [
    "IS_PENDING",
    "IS_RUNNING",
    "backfills",
    "concurrency_groups",
    "hosts",
    "job_idempotency",
    "job_state",
    "metadata",
    "run_outcome_minutes",
    "run_outcome_purges",
    "run_outcome_spans",
    "runs",
    "schedules",
    "signals",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


schedules = Table(
    "schedules",
    metadata,
    Column("job_name", String(200), primary_key=True),
    Column("module", String(200), nullable=False),
    Column("trigger_kind", String(16)),
    Column("trigger_expression", String(200)),
    Column("timezone", String(64), nullable=False),
    Column("trigger_source", String(16), nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("orphaned", Boolean, nullable=False, default=False),
    Column("paused", Boolean, nullable=False, default=False),
    Column("paused_by", String(200)),
    Column("paused_at", UTCDateTime()),
    Column("paused_reason", Text),
    Column("next_occurrence", UTCDateTime()),
    # Interval jobs keep their phase here, so a restart does not move "every 6 hours".
    Column("interval_anchor", UTCDateTime()),
    # While paused, occurrences up to here have already been recorded missed.
    Column("missed_through", UTCDateTime()),
    Column("lease_owner", String(200)),
    Column("lease_expires_at", UTCDateTime()),
    Column("lease_run_id", String(64)),
    Column("fencing_token", BigInteger, nullable=False, default=0),
    Column("last_run_id", String(64)),
    Column("last_outcome", String(16)),
    Column("last_started_at", UTCDateTime()),
    Column("last_finished_at", UTCDateTime()),
    Column("last_error", Text),
    Column("last_success_at", UTCDateTime()),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
    # The catalog version whose trigger this row holds; the newest sync wins (semantics.md).
    Column("catalog_version", String(64)),
    # When the row next needs a host: its next occurrence; for a paused job, the next one to
    # record missed; None while disabled or orphaned. A turn of the loop reads only rows due.
    Column("due_at", UTCDateTime()),
    # The job's concurrency group (None: none), and since when its due occurrence has waited
    # for a free slot (None: not waiting). See jobhost/store/claims.py.
    Column("concurrency_group", String(100)),
    Column("group_waiting_since", UTCDateTime()),
    # The job's effective declaration, written at every sync and runtime-job change (0011):
    # what read-only commands show without loading any plugin. ``job_source``: module or runtime.
    Column("description", Text),
    Column("critical", Boolean),
    Column("dst_policy", String(64)),
    Column("job_source", String(16)),
    Column("declaration", Text),
    Index("ix_schedules_due_at", "due_at"),
    # Partial, made by migration 0013 only (see runs below):
    # ix_schedules_concurrency_group (concurrency_group) WHERE concurrency_group IS NOT NULL.
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_name", String(200), nullable=False),
    # None for a manual run, which belongs to no scheduled instant.
    Column("occurrence", UTCDateTime()),
    # 0 for occurrences recorded without an attempt (missed, skipped); 1 for the first attempt.
    Column("attempt", Integer, nullable=False),
    Column("source", String(16), nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("reason", Text),
    Column("host_id", String(200)),
    Column("fencing_token", BigInteger),
    Column("idempotency_key", String(300)),
    Column("requested_by", String(200)),
    Column("queued_at", UTCDateTime(), nullable=False),
    # A pending retry becomes claimable from this instant.
    Column("not_before", UTCDateTime()),
    Column("started_at", UTCDateTime()),
    Column("finished_at", UTCDateTime()),
    Column("lease_expires_at", UTCDateTime()),
    Column("error_type", String(200)),
    Column("error_message", Text),
    Column("trace_id", String(32)),
    # Counts of the run's fan-outs (context.fan_out); None for a run without one.
    Column("units_total", Integer),
    Column("units_succeeded", Integer),
    Column("units_failed", Integer),
    Column("units_skipped_already_done", Integer),
    # A pending retry or manual run waiting for a slot of its job's concurrency group.
    Column("group_waiting_since", UTCDateTime()),
    # The backfill this run (or the retry of one) replays an occurrence for; None otherwise.
    Column("backfill_id", String(64)),
    # Claim order of pending runs, lowest first (PRIORITY_* in records.py), and `trigger --now`'s
    # start beside a full concurrency group (0015).
    # Server defaults, not Python ones: an insert that leaves them out states nothing about them.
    Column("priority", SmallInteger, nullable=False, server_default="1"),
    Column("beside_limit", Boolean, nullable=False, server_default=false()),
    # Attempts of the occurrence before this run's lane began: a backfill's runs count their
    # retry budget from there (0015).
    Column("attempt_base", Integer, nullable=False, server_default="0"),
    # An operator's request to cancel the running run, and afterwards the record of it (0012).
    Column("cancel_requested_by", String(200)),
    Column("cancel_requested_at", UTCDateTime()),
    Column("cancel_reason", Text),
    # The executor's Success value as JSON text of at most 4 kB, None when it returned nothing
    # (0016).
    Column("result", Text),
    # One row per (job, occurrence, attempt): the database's last word on "exactly once".
    UniqueConstraint("job_name", "occurrence", "attempt", name="uq_runs_job_occurrence_attempt"),
    Index("ix_runs_job_name_queued_at", "job_name", "queued_at"),
    # A job's runs of one outcome by finish (0004): reports, failures and outcome counts.
    Index("ix_runs_job_name_outcome_finished_at", "job_name", "outcome", "finished_at"),
    # Partial, made by migrations only (a partial index's PostgreSQL option would load
    # PostgreSQL's dialect into every SQLite command): a finished run is in none of them, so its
    # finishing update writes no entry to them. Queries that use them name the same condition.
    #   ix_runs_outcome_priority_not_before (outcome, priority, not_before)
    #       WHERE outcome = 'pending'  (0015; a host's claim reads priorities below backfills')
    #   ix_runs_outcome_lease_expires_at (outcome, lease_expires_at) WHERE outcome = 'running'
    #   ix_runs_backfill_id_outcome_priority_occurrence (backfill_id, outcome, priority,
    #       occurrence) WHERE backfill_id IS NOT NULL  (0015)
    Index("ix_runs_outcome_finished_at", "outcome", "finished_at", "id"),
)

# The conditions of the two partial run indexes, written into the SQL, not bound: every plan,
# cached or not, can use the index.
IS_PENDING = runs.c.outcome == literal_column("'pending'", String)
IS_RUNNING = runs.c.outcome == literal_column("'running'", String)

hosts = Table(
    "hosts",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("started_at", UTCDateTime(), nullable=False),
    Column("last_seen_at", UTCDateTime(), nullable=False),
    # The host's own clock at its last heartbeat, beside the database's: their difference is skew.
    Column("host_clock_at", UTCDateTime(), nullable=False),
    Column("heartbeat_seconds", Integer, nullable=False),
    Column("stopped_at", UTCDateTime()),
    # The catalog this host runs, when it last wrote it to the store, and how far behind the
    # oldest due, unclaimed occurrence was at its last heartbeat.
    Column("catalog_version", String(64)),
    Column("synced_at", UTCDateTime()),
    Column("schedule_lag_seconds", Float),
)

job_state = Table(
    "job_state",
    metadata,
    Column("job_name", String(200), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),
    Column("fencing_token", BigInteger, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

job_idempotency = Table(
    "job_idempotency",
    metadata,
    Column("job_name", String(200), primary_key=True),
    Column("key", String(300), primary_key=True),
    Column("run_id", String(64)),
    Column("fencing_token", BigInteger, nullable=False),
    Column("recorded_at", UTCDateTime(), nullable=False),
)

# One row per concurrency group: its limit. The claim locks the rows it counts slots under.
concurrency_groups = Table(
    "concurrency_groups",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("slots", Integer, nullable=False),
    Column("updated_at", UTCDateTime(), nullable=False),
)

# A single counter that commands bump to wake hosts at once (SQLite has no LISTEN/NOTIFY).
signals = Table(
    "signals",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("version", BigInteger, nullable=False),
)

# An operator's replay of a past range of one job's occurrences (jobhost/store/claims.py).
backfills = Table(
    "backfills",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("job_name", String(200), nullable=False),
    Column("range_from", UTCDateTime(), nullable=False),
    Column("range_to", UTCDateTime(), nullable=False),
    Column("mode", String(16), nullable=False),
    Column("reason", Text),
    Column("actor", String(200), nullable=False),
    Column("concurrency", Integer, nullable=False),
    # How many occurrences it chose: each waits as a pending run of it (0015).
    Column("selected", Integer, nullable=False, server_default="0"),
    # running → done (no run of it pending or running) or cancelled (its runs never started
    # are deleted; finished_at once none of it runs).
    Column("state", String(16), nullable=False),
    Column("created_at", UTCDateTime(), nullable=False),
    Column("finished_at", UTCDateTime()),
    Index("ix_backfills_state", "state"),
)

# The runs-by-outcome chart's counts of closed minutes (jobhost/store/outcome_counts.py), by
# outcome; job_name '' is every job. Filled by the chart's reader, never by the firing path; the
# retention purge subtracts the runs it deletes.
run_outcome_minutes = Table(
    "run_outcome_minutes",
    metadata,
    Column("job_name", String(200), primary_key=True),
    Column("minute", UTCDateTime(), primary_key=True),
    Column("outcome", String(16), primary_key=True),
    Column("runs", Integer, nullable=False),
)

# The minutes [filled_from, filled_to) of one job ('' for every job) whose counts are in
# run_outcome_minutes: inside it a minute with no row had no runs.
run_outcome_spans = Table(
    "run_outcome_spans",
    metadata,
    Column("job_name", String(200), primary_key=True),
    Column("filled_from", UTCDateTime(), nullable=False),
    Column("filled_to", UTCDateTime(), nullable=False),
)

# One row (id 1): how many purge batches have deleted runs. A reader writes its counts only
# while this is what it was when it counted.
run_outcome_purges = Table(
    "run_outcome_purges",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("purges", BigInteger, nullable=False),
)
