"""What a running host shows its probes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from jobhost.config import Settings
from jobhost.store.engine import DEADLINE_MARGIN, DEFAULT_STATEMENT_TIMEOUT

__all__ = ["HostStatus", "turn_limits"]

_MIN_STALL = 10.0


@dataclass
class HostStatus:
    """What the HTTP probes read: is the loop turning, is the store reachable."""

    started: float = field(default_factory=time.monotonic)
    last_tick: float | None = None
    store_ok: bool = False
    catalog_ok: bool = True
    ticks: int = 0
    synced: bool = False
    """Registered and the catalog written to the store: ready to fire."""
    lag: float = 0.0
    """Seconds the oldest due, unclaimed occurrence waited at the last turn."""
    stuck: int = 0
    """Runs whose executor ignored cancellation and whose thread still runs."""
    stuck_limit: int = 1
    turn_started: float | None = None
    """When the loop's turn under way began (monotonic); None between turns."""
    stall_after: float = 15.0
    """Seconds one turn may take before the host says it is not ready."""
    hung_after: float = 145.0
    """Seconds one turn may take before the host says it is not alive: past every deadline its
    store calls have, so the thread waits on something nothing will end."""

    @property
    def too_many_stuck(self) -> bool:
        """Half the pool or more held by stuck code: the host cannot do its work."""
        return self.stuck >= self.stuck_limit

    def turn_age(self, now: float) -> float:
        """Seconds the turn under way has taken so far; 0 between turns."""
        started = self.turn_started
        return 0.0 if started is None else now - started


def turn_limits(settings: Settings) -> tuple[float, float]:
    """How long one turn may take before the probes say the host is stalled, then hung.

    Every store call of a turn ends within its deadline (the statement timeout plus a margin);
    a turn past two of them and three heartbeats waits on something no deadline ends.
    """
    beat = settings.heartbeat_interval.total_seconds()
    statement = settings.store_statement_timeout.total_seconds() or DEFAULT_STATEMENT_TIMEOUT
    stall = max(3 * beat, _MIN_STALL)
    return stall, 2 * (statement + DEADLINE_MARGIN) + stall
