"""When the next attempt at a failed occurrence may start."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from jobhost_contracts import RetryPolicy

from jobhost.records import RetryRequest, new_run_id

__all__ = ["next_attempt", "retry_delay", "should_retry"]


def should_retry(policy: RetryPolicy, outcome: str, attempt: int) -> bool:
    return outcome in policy.retry_on and attempt < policy.max_attempts


def next_attempt(
    policy: RetryPolicy,
    outcome: str,
    *,
    job_name: str,
    occurrence: datetime | None,
    attempt: int,
    idempotency_key: str | None,
    requested_by: str | None,
    reason: str | None,
    at: datetime,
    backfill_id: str | None = None,
    attempt_base: int = 0,
) -> RetryRequest | None:
    """The attempt after one that ended ``outcome`` at ``at``, if the policy asks for one.

    It keeps the occurrence, the idempotency key and the backfill, so the retry is the same
    piece of work. The budget counts the attempts after ``attempt_base``: a backfill's runs of
    an occurrence have ``max_attempts`` of their own, whatever the schedule's attempts were.
    """
    tried = attempt - attempt_base
    if not should_retry(policy, outcome, tried):
        return None
    return RetryRequest(
        run_id=new_run_id(),
        job_name=job_name,
        occurrence=occurrence,
        attempt=attempt + 1,
        source="retry",
        idempotency_key=idempotency_key,
        requested_by=requested_by,
        reason=reason,
        not_before=at + retry_delay(policy, tried),
        backfill_id=backfill_id,
        attempt_base=attempt_base,
    )


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> timedelta:
    """Backoff before attempt ``attempt + 1``: doubled each time, capped, spread by jitter."""
    base = policy.backoff.total_seconds() * (2 ** max(attempt - 1, 0))
    capped = min(base, policy.backoff_max.total_seconds())
    spread = capped * max(policy.jitter, 0.0)
    draw = (rng or random).uniform(-spread, spread)
    return timedelta(seconds=max(capped + draw, 0.0))
