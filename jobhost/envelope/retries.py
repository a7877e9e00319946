"""When the next attempt at a failed occurrence may start."""

from __future__ import annotations

import random
from datetime import timedelta

from jobhost_contracts import RetryPolicy

__all__ = ["retry_delay", "should_retry"]


def should_retry(policy: RetryPolicy, outcome: str, attempt: int) -> bool:
    return outcome in policy.retry_on and attempt < policy.max_attempts


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> timedelta:
    """Backoff before attempt ``attempt + 1``: doubled each time, capped, spread by jitter."""
    base = policy.backoff.total_seconds() * (2 ** max(attempt - 1, 0))
    capped = min(base, policy.backoff_max.total_seconds())
    spread = capped * max(policy.jitter, 0.0)
    draw = (rng or random).uniform(-spread, spread)
    return timedelta(seconds=max(capped + draw, 0.0))
