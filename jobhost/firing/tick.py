"""One turn of the firing loop: everything it does with the store; and the upkeep a host does
beside its turns (:class:`Maintenance`).

A turn costs what is due, not what is declared: one claim transaction takes up to the free
slots and reads when the store next needs this host. A batch that fails for a reason other than
the store being away is retried one job at a time, so one bad row costs only its own job.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobhost.catalog import JobSpec
from jobhost.envelope.lifecycle import retrying_abandoned
from jobhost.envelope.reporting import Telemetry
from jobhost.records import Claim, ClaimBatch, Quiet, SyncPlan
from jobhost.rules import FiringRules, catalog_version, desired_schedules
from jobhost.store import Store
from jobhost.store.claims import Wakeups
from jobhost.store.engine import is_store_down

__all__ = [
    "CAP",
    "FLOOR",
    "ClaimLead",
    "Duty",
    "Maintenance",
    "Ticker",
]

_log = logging.getLogger("jobhost.firing")
_SET_ASIDE_SECONDS = 60.0
_BACKFILL_RECHECK_SECONDS = 1.0
"""How long a host that found a backfill with no room leaves it alone (unless one of its runs
ends or a signal comes): another replica's runs may have ended meanwhile."""


@dataclass
class TickResult:
    claims: list[tuple[Claim, JobSpec]] = field(default_factory=list)
    next_wake: datetime | None = None
    saturated: bool = False
    lag: float = 0.0
    """Seconds the oldest due, unclaimed schedule is behind ``now`` after this turn."""
    waiting: set[str] = field(default_factory=set)
    """Jobs whose due work waits for one of their live runs to be recorded."""
    now: datetime | None = None
    """The instant this turn worked at (read inside its claim transaction when not given)."""
    read_at: float | None = None
    """When (monotonic) ``now`` was read, for a sleep until ``next_wake``; None: unknown."""


class Ticker:
    def __init__(
        self,
        store: Store,
        jobs: Mapping[str, JobSpec],
        *,
        host_id: str,
        lease_duration: timedelta,
        telemetry: Telemetry,
        runtime: frozenset[str] = frozenset(),
        concurrency_limits: Mapping[str, int] | None = None,
        announced: bool = False,
    ) -> None:
        """``announced``: the caller calls :meth:`look_everywhere` whenever a manual request or
        a retry may have been queued, so a claim may leave out reading them."""
        self._store = store
        self._time = store.time()
        # The store's time without asking it: what the recorder stamps outcomes with.
        self.store_time: Callable[[], datetime] = self._time.estimate
        self._telemetry = telemetry
        self._jobs = jobs
        self._host_id = host_id
        self._lease_duration = lease_duration
        # Runtime jobs' rows are written by their change path; a host writes the declared ones.
        self._desired = [d for d in desired_schedules(jobs) if d.job_name not in runtime]
        self._limits = dict(concurrency_limits or {})
        self._groups = {
            name: spec.concurrency_group for name, spec in jobs.items() if name not in runtime
        }
        # The version names the declared catalog (what a deploy changes), not the runtime jobs.
        self.catalog_version = catalog_version(self._desired)
        self._rules = FiringRules(jobs, lease_duration)
        self._unknown: set[str] = set()
        self._set_aside: dict[str, float] = {}
        self._wakeups: Wakeups | None = None
        self.may_abandon = True
        self._backfill_full_at: float | None = None
        """When (monotonic) the last backfill claim found nothing more to take; None: look."""
        self._backfill_yielded: set[str] = set()  # the backfill left room for their own runs
        self._backfill_room_freed = 0
        self._announced = announced
        self._news = True
        """A manual request or retry may have come that the last wake-up read cannot know of."""
        self._last_skip: list[str] | None = None
        """The jobs the last turn left alone: one back in play may have work its read missed."""
        self._lead = ClaimLead()

    def sync(self, now: datetime) -> SyncPlan:
        return self._store.sync_catalog(
            self._desired,
            now,
            catalog_version=self.catalog_version,
            limits=self._limits,
            members=self._groups,
            host_id=self._host_id,
        )

    def look_everywhere(self) -> None:
        """A manual request, retry or backfill may have come: the next claim reads them."""
        self._news = True
        self._backfill_full_at = None

    def run_ended(self, claim: Claim) -> bool:
        """One of this host's runs ended: true if a backfill may start in the room it freed."""
        if claim.backfill_id is None and claim.job_name not in self._backfill_yielded:
            return False
        self._backfill_full_at = None
        self._backfill_room_freed += 1
        return True

    def update_jobs(self, jobs: Mapping[str, JobSpec]) -> None:
        """Fire by a new job mapping from the next turn on (runtime jobs changed; the writer of
        the change wrote its schedule row)."""
        problems = self._rules.problems
        self._rules = FiringRules(jobs, self._lease_duration)
        self._rules.problems.update({n: p for n, p in problems.items() if n in jobs})
        self._jobs = jobs
        self._unknown -= set(jobs)

    def tick(
        self,
        now: datetime | None,
        free_slots: int,
        manual_slots: int = 0,
        *,
        early: bool = False,
        backfill_slots: int | None = None,
    ) -> TickResult:
        """Claim what is due within the free slots; say when to look again. With ``now`` None
        the claim transaction reads the store's time. With ``early``, slots left take the next
        moments' occurrences, :class:`ClaimLead` ahead. Backfills take at most
        ``backfill_slots`` (default: ``free_slots``), never ahead."""
        # A lease past its expiry (or the first turn) is looked at before the claim, which it may
        # let succeed; the pass now and then in any case is a duty of the maintenance thread.
        if self.may_abandon and (
            self._wakeups is None or self._wakeups.lease_expiry_passed(now or self._time.estimate())
        ):
            self.abandon(now or self._time.read())
        backfill = free_slots if backfill_slots is None else backfill_slots
        result = TickResult()
        if free_slots <= 0 and manual_slots <= 0:
            result.saturated = True
            self._wakeups, at = self._read_wakeups(now)
            result.lag = self._wakeups.lag(at)
            result.now = at
            return result
        lead = self._lead.lead if early else timedelta(0)
        room = 0
        try:
            began = time.monotonic()
            room = self._backfill_room(backfill)
            batch, self._wakeups, at, result.read_at = self._claim(
                now, free_slots, manual_slots, lead, room
            )
            self._lead.took(time.monotonic() - began)
            batches = [batch]
        except Exception as error:
            self._news = True
            if is_store_down(error):
                raise
            _log.error(
                "claiming as one batch failed (%s: %s); claiming one job at a time",
                type(error).__name__,
                (str(error).splitlines() or [""])[0][:300],
            )
            at = now or self._time.read()
            batches = self._claim_one_by_one(at, free_slots)
            self._wakeups, at = self._read_wakeups(at)
            lead = timedelta(0)
        for batch in batches:
            self._absorb(batch)
            result.waiting |= batch.waiting
            result.claims.extend((c, self._jobs[c.job_name]) for c in batch.claims)
        taken = len(result.claims)
        result.saturated = taken >= free_slots
        result.next_wake = self._wakeups.next_wake(
            at, more_due=batches[-1].schedules_seen > 0, early=lead
        )
        if not room and self._backfill_room(backfill - taken):
            # The turn's wake-up read saw a backfill its claim did not look for (one queued
            # with no signal heard): claim again at once.
            result.next_wake = at
        result.lag = self._wakeups.lag(at)
        result.now = at
        return result

    def _backfill_room(self, slots: int) -> int:
        """The slots a claim may give backfills: on the first turn and after news, else only
        while the last wake-up read saw a running backfill with room, as far as it knows."""
        if slots <= 0:
            return 0
        if self._wakeups is None or self._news:
            return slots
        if self._wakeups.backfill_at is None:
            return 0
        full_at = self._backfill_full_at
        if self._announced and full_at is not None:
            return 0 if time.monotonic() - full_at < _BACKFILL_RECHECK_SECONDS else slots
        return slots

    def abandon(self, now: datetime) -> bool:
        """Record ``abandoned`` the runs whose host stopped renewing their lease, with their
        retries; true if it changed anything."""
        changed = self._store.abandon_dead_runs(
            now,
            implausible=self._rules.implausible_lease,
            retries_for=retrying_abandoned(
                self._telemetry, self._rules, why="stopped renewing its lease"
            ),
        )
        if changed:
            self._news = True
        return changed

    def _skip(self) -> list[str]:
        now = time.monotonic()
        for name, until in list(self._set_aside.items()):
            if until <= now:
                # Look again: an operator may have fixed the row.
                del self._set_aside[name]
                self._rules.problems.pop(name, None)
        return sorted(self._unknown | set(self._set_aside) | set(self._rules.problems))

    def _claim(
        self,
        given: datetime | None,
        slots: int,
        manual_slots: int,
        early: timedelta,
        backfill_slots: int,
    ) -> tuple[ClaimBatch, Wakeups, datetime, float]:
        skip = self._skip()
        # Cleared before reading: news arriving during this claim is looked at on the next.
        news = self._news or not self._announced or skip != self._last_skip
        self._news, self._last_skip = False, skip
        last = self._wakeups
        freed = self._backfill_room_freed
        turn = self._store.claim(
            host_id=self._host_id,
            now=given,
            clock=self._store.clock,
            slots=slots,
            manual_slots=manual_slots,
            rules=self._rules,
            skip=skip,
            # The last turn's wake-up read saw every run queued before it; whatever came
            # since, a signal or this host's failed run announces.
            quiet=None
            if news or last is None
            else Quiet(manual_pending=last.request_at is not None, first_pending=last.retry_at),
            early=early,
            backfill_slots=backfill_slots,
        )
        if backfill_slots:
            # No room is known only of a backfill still running once the claim looked; a run
            # that ended during the claim (its outcome's write may have held the backfill's row,
            # which the claim skips) leaves room the next turn looks at.
            full = turn.wakeups.backfill_at is not None and not turn.batch.backfill_more
            full &= freed == self._backfill_room_freed
            self._backfill_full_at = time.monotonic() if full else None
            self._backfill_yielded = turn.batch.backfill_yielded
        if given is None:
            self._time.noted(turn.now, turn.read_at)
        return turn.batch, turn.wakeups, turn.now, turn.read_at

    def _claim_one_by_one(self, now: datetime, slots: int) -> list[ClaimBatch]:
        """After a failed batch: each due job in a transaction of its own, failures set aside."""
        names = [n for n in self._store.due_jobs(now, slots) if n not in self._skip()]
        batches: list[ClaimBatch] = []
        for name in names:
            taken = sum(len(b.claims) for b in batches)
            try:
                batches.append(
                    self._store.claim(
                        host_id=self._host_id,
                        rules=self._rules,
                        clock=self._store.clock,
                        slots=max(slots - taken, 1),
                        now=now,
                        skip=self._skip(),
                        job=name,
                    ).batch
                )
            except Exception as error:
                if is_store_down(error):
                    break  # keep what was claimed; the loop backs off on the next turn
                reason = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"
                self._set_aside[name] = time.monotonic() + _SET_ASIDE_SECONDS
                self._rules.problems[name] = f"claiming it failed: {reason}"
                _log.error(
                    "job %s set aside for %ds: claiming it failed: %s",
                    name,
                    _SET_ASIDE_SECONDS,
                    reason,
                )
        return batches or [ClaimBatch()]

    def _absorb(self, batch: ClaimBatch) -> None:
        for name in batch.unknown - self._unknown:
            _log.info("job %s has due work in the store but is not in this host's catalog", name)
        self._unknown |= batch.unknown
        for name, problem in batch.corrupt.items():
            if name not in self._set_aside:
                _log.error("job %s set aside: its schedule row is corrupt: %s", name, problem)
            self._rules.problems[name] = f"corrupt schedule row: {problem}"
            self._set_aside[name] = time.monotonic() + _SET_ASIDE_SECONDS
        for name, occurrence, outcome, reason in batch.not_run:
            self._telemetry.runs.add(1, {"job": name, "outcome": outcome})
            _log.info("job %s: occurrence %s %s (%s)", name, occurrence, outcome, reason)
        for request_id, message in batch.refused:
            _log.info("manual run %s refused: %s", request_id, message)
        for group, count in batch.group_waits.items():
            self._telemetry.group_waits.add(count, {"group": group})

    def _read_wakeups(self, given: datetime | None) -> tuple[Wakeups, datetime]:
        wakeups, now = self._store.look_ahead(given, self._store.clock, skip=self._skip())
        if given is None:
            self._time.noted(now, time.monotonic())
        return wakeups, now


# How long before an occurrence a host claims it: a run starts only once its claim has
# committed, so an idle host claims that early and its worker starts the run at the instant.
# The lead is twice the slowest recent claim, within :data:`FLOOR` and :data:`CAP` (seconds).

FLOOR = 0.005
CAP = 0.05

_KEPT = 16
_MARGIN = 2.0


class ClaimLead:
    def __init__(self) -> None:
        self._took: deque[float] = deque(maxlen=_KEPT)

    def took(self, seconds: float) -> None:
        self._took.append(seconds)

    @property
    def lead(self) -> timedelta:
        slowest = max(self._took, default=0.0)
        return timedelta(seconds=min(max(_MARGIN * slowest, FLOOR), CAP))


# -- upkeep beside the turns -------------------------------------------------------------------
# Duties run on one maintenance thread, so a slow duty never makes a due run late. The heartbeat
# keeps a thread of its own, so no duty ever delays a lease's renewal.


@dataclass(frozen=True)
class Duty:
    name: str
    interval: timedelta
    run: Callable[[datetime], object]


class Maintenance:
    """Runs the duties on one thread, each at most every ``interval`` and only after a turn of
    the loop (an idle host is woken by nothing but its heartbeat); a failed duty is said by
    ``on_failure`` and tried again at its next interval."""

    def __init__(
        self,
        duties: Sequence[Duty],
        *,
        now: Callable[[], datetime],
        on_failure: Callable[[str, Exception], None],
    ) -> None:
        # Each duty's first run is an interval after the start: start-up did what they do.
        started = time.monotonic()
        self._due = [(duty, started + duty.interval.total_seconds()) for duty in duties]
        self._next = min((at for _, at in self._due), default=float("inf"))
        self._now = now
        self._on_failure = on_failure
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="jobhost-duties", daemon=True)

    def start(self) -> None:
        if self._due:
            self._thread.start()

    def turned(self) -> None:
        """The loop ended a turn: wake the thread if a duty is due (one comparison a turn)."""
        if time.monotonic() >= self._next:
            self._wake.set()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopped.is_set():
                return
            for index, (duty, at) in enumerate(self._due):
                if at > time.monotonic():
                    continue
                try:
                    duty.run(self._now())
                except Exception as error:
                    self._on_failure(duty.name, error)
                self._due[index] = (duty, time.monotonic() + duty.interval.total_seconds())
            self._next = min(at for _, at in self._due)
