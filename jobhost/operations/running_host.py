"""What the operator surfaces read from a running host (``jobhost.firing.host.Host``).

The gauges and the HTTP endpoints both look at a host through this view, so neither imports
the firing loop and both agree on what a host exposes.
"""

from __future__ import annotations

from typing import Protocol

from jobhost.catalog import Catalog
from jobhost.clock import Clock
from jobhost.config import Settings
from jobhost.store import Store

__all__ = ["HostState", "RunningHost"]


class HostState(Protocol):
    """The host's live status, updated by its loop and read by probes and gauges."""

    started: float
    last_tick: float | None
    catalog_ok: bool
    synced: bool
    store_ok: bool
    stuck: int
    stuck_limit: int
    stall_after: float
    hung_after: float

    @property
    def too_many_stuck(self) -> bool: ...
    def turn_age(self, now: float) -> float: ...


class RunningHost(Protocol):
    """A host as its surfaces see it: identity, settings, catalog, store handle and status."""

    @property
    def host_id(self) -> str: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def store(self) -> Store: ...
    @property
    def clock(self) -> Clock | None: ...
    @property
    def status(self) -> HostState: ...
