"""Claim ahead: runs claimed beyond the free workers, waiting in a short local queue for one.

At hundreds of runs a second a claim limited to the free workers takes a handful of runs per
transaction, and the host spends its time in claim turns. So a turn may claim more of what is
due *now* (never a future occurrence) than it has free workers, and the runs beyond them wait
here; a worker that finishes a run takes the next one at once, without a turn.

A queued run is a claimed run: its row is ``running`` with this host's lease (renewed by the
heartbeat like any other), so the claim has already decided its overlap and concurrency group.
The queue is therefore kept short, in time rather than in runs: it holds at most what the
workers are expected to start within :data:`HORIZON` seconds, judged by how long this host's
recent runs took, and nothing until a run has been timed. Jobs that take seconds leave no room
ahead; sub-millisecond jobs fill it up to :data:`MOST_PER_WORKER` a worker. Not thread-safe:
the host calls it under its lock.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Generic, TypeVar

__all__ = ["HORIZON", "MOST_PER_WORKER", "AheadQueue"]

HORIZON = 0.2
"""Seconds of work, at the recent pace, that may wait for a worker."""

MOST_PER_WORKER = 16
"""Runs that may wait per worker, however short the runs. At 1,000 sub-millisecond runs a
second, 8 made claims of about 33 runs, each paying a transaction's fixed cost; 16 takes about
twice as many a claim (32 did no better)."""

_WEIGHT = 0.1
"""Weight of the newest duration in the running mean: it follows a change within tens of runs."""

T = TypeVar("T")


class AheadQueue(Generic[T]):
    """The queue, and how much room it has for the next claim."""

    def __init__(self, workers: int, *, horizon: float = HORIZON) -> None:
        self._workers = workers
        self._horizon = horizon
        self._most = MOST_PER_WORKER * workers
        self._mean: float | None = None
        self._queue: deque[T] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def bound(self) -> int:
        """Runs that may wait now: what the workers start within the horizon, at most
        :data:`MOST_PER_WORKER` a worker; none before a run was timed."""
        if self._mean is None or self._horizon <= 0:
            return 0
        if self._mean <= 0:
            return self._most
        return min(self._most, math.floor(self._horizon * self._workers / self._mean))

    def room(self) -> int:
        """How many more runs a claim may take beyond the free workers."""
        return max(self.bound - len(self._queue), 0)

    def low(self) -> bool:
        """Half the room or more is free: worth a claim turn (one claim for many runs rather
        than one for each run that ends)."""
        return len(self._queue) <= self.bound // 2

    def timed(self, seconds: float) -> None:
        """A run took ``seconds`` from its start to its end."""
        mean = self._mean
        self._mean = seconds if mean is None else mean + _WEIGHT * (seconds - mean)

    def put(self, item: T) -> None:
        self._queue.append(item)

    def take(self) -> T | None:
        return self._queue.popleft() if self._queue else None

    def drain(self) -> list[T]:
        """Everything still waiting, oldest first; the queue is left empty."""
        items = list(self._queue)
        self._queue.clear()
        return items
