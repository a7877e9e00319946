"""The stuck job of the reliability tests, and the SQLite store a host with it starts on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from jobhost.store import create_store_engine, upgrade
from tests.reliability.harness import Cluster
from tests.reliability.verdict import Effect, read_effects

STUCK = "rel.stuck"
FAST = {"heartbeat_interval": "1s", "lease_duration": "3s", "shutdown_grace": "1s"}
"""Host settings short enough that a lease lost or a run stuck shows within seconds."""


def stuck_job(seconds: int) -> dict[str, Any]:
    """:data:`STUCK`, every second, whose code ignores its 1 s timeout for ``seconds``."""
    return {
        "name": STUCK,
        "cron": "* * * * * *",
        "behaviour": "stuck",
        "seconds": seconds,
        "timeout": "1s",
    }


def stuck_effects(cluster: Cluster) -> list[Effect]:
    """What the stuck job's runs have done so far, in order."""
    return [effect for effect in read_effects(cluster.effects) if effect.job == STUCK]


def migrated(path: Path) -> Engine:
    """An engine on the SQLite store at ``path``, migrated before a host starts on it."""
    engine = create_store_engine(f"sqlite:///{path}")
    upgrade(engine)
    return engine
