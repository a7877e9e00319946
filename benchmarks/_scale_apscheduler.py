"""APScheduler 3 as ``benchmarks/scale.py`` runs it: a process of its own, stopped by SIGTERM.

``python benchmarks/_scale_apscheduler.py STORE JOBS LOG_DIR``: a BackgroundScheduler with its
default thread pool and the job store ``STORE`` (``memory`` or an SQLAlchemy URL, for
SQLAlchemyJobStore), ``JOBS`` no-op jobs on a 1 s IntervalTrigger, misfire grace unlimited (so
a late run is run, not dropped, as jobhost's ``run_once`` does). Each event is appended to
``LOG_DIR/fires-PID.log`` in the plugin's format: ``run JOB SCHEDULED OBSERVED`` when a job has
executed (the no-op's end is its start, to the microsecond), ``missed``/``skipped`` for
EVENT_JOB_MISSED and EVENT_JOB_MAX_INSTANCES.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
)
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

_KINDS = {
    EVENT_JOB_EXECUTED: "run",
    EVENT_JOB_ERROR: "run",
    EVENT_JOB_MISSED: "missed",
    EVENT_JOB_MAX_INSTANCES: "skipped",
}


def noop() -> None:
    """The job: nothing, like the jobhost benchmark's executor minus its log line."""


def main() -> None:
    store_url, jobs, log_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    log = open(os.path.join(log_dir, f"fires-{os.getpid()}.log"), "a", encoding="utf-8")  # noqa: SIM115
    lock = threading.Lock()

    def listener(event: Any) -> None:
        observed = time.time()
        times = getattr(event, "scheduled_run_times", None) or [event.scheduled_run_time]
        with lock:
            for scheduled in times:
                kind = _KINDS[event.code]
                log.write(f"{kind} {event.job_id} {scheduled.timestamp():.6f} {observed:.6f}\n")
            log.flush()

    store = MemoryJobStore() if store_url == "memory" else SQLAlchemyJobStore(url=store_url)
    scheduler = BackgroundScheduler(
        jobstores={"default": store},
        job_defaults={"misfire_grace_time": None, "coalesce": False, "max_instances": 1},
        timezone="UTC",
    )
    scheduler.add_listener(listener, sum(_KINDS))
    for index in range(jobs):
        scheduler.add_job(
            noop, IntervalTrigger(seconds=1), id=f"j{index:05d}", replace_existing=True
        )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    scheduler.start()
    stop.wait()
    scheduler.shutdown(wait=True)
    log.close()


if __name__ == "__main__":
    main()
