"""One job's runs by outcome in the slices of a range, in one statement over the job's index
``ix_runs_job_name_outcome_finished_at``: a range scan per outcome, each entry placed in its
slice by the database, so the cost follows the job's runs in the range, not the ledger.

- PostgreSQL: ``width_bucket`` over the slices' lower bounds (exact for timestamps, a binary
  search per entry), one text for every number of slices, so it is planned once.
- SQLite: a count of each slice's index range per outcome, all in one compound statement (7
  outcomes by at most 30 slices stays under SQLite's 500 parts); counting an index range steps
  through entries without reading or sorting rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import pairwise
from typing import Any

from sqlalchemy import CompoundSelect, bindparam, func, literal, select, text, union_all
from sqlalchemy.engine import Connection

from jobhost.records import TERMINAL_OUTCOMES
from jobhost.store.schema import runs

__all__ = ["job_counts"]

_OUTCOMES = tuple(sorted(TERMINAL_OUTCOMES))


def job_counts(connection: Connection, edges: Sequence[Any], job: str) -> list[dict[str, int]]:
    """Runs of ``job`` finished in each slice [edges[i], edges[i + 1]), by outcome."""
    slices = len(edges) - 1
    counts: list[dict[str, int]] = [{} for _ in range(slices)]
    if connection.dialect.name == "postgresql":
        values: dict[str, object] = {
            "job": job,
            "outcomes": list(_OUTCOMES),
            "lows": list(edges[:-1]),
            "lo": edges[0],
            "hi": edges[-1],
        }
        found = connection.execute(_BUCKETED, values)
        placed = [(outcome, int(bucket) - 1, n) for outcome, bucket, n in found]
    else:
        values = {"job": job}
        for index, (lo, hi) in enumerate(pairwise(edges)):
            values[f"lo_{index}"], values[f"hi_{index}"] = lo, hi
        placed = [tuple(row) for row in connection.execute(_ranged(slices), values)]
    for outcome, index, n in placed:
        if n:
            counts[int(index)][str(outcome)] = int(n)
    return counts


# ``width_bucket`` answers i + 1 for an entry in [lows[i], lows[i + 1]); the range's own bounds
# stay in the WHERE clause so the index scan reads only the range.
_BUCKETED = text(
    """
SELECT outcome, width_bucket(finished_at, CAST(:lows AS timestamptz[])), count(*)
FROM runs
WHERE job_name = :job AND outcome = ANY(CAST(:outcomes AS text[]))
    AND finished_at >= :lo AND finished_at < :hi
GROUP BY 1, 2
"""
)


@cache
def _ranged(slices: int) -> CompoundSelect[Any]:
    finished = runs.c.finished_at
    return union_all(
        *[
            select(runs.c.outcome, literal(index).label("part"), func.count())
            .where(
                runs.c.job_name == bindparam("job"),
                runs.c.outcome.in_(_OUTCOMES),
                finished >= bindparam(f"lo_{index}", type_=finished.type),
                finished < bindparam(f"hi_{index}", type_=finished.type),
            )
            .group_by(runs.c.outcome)
            for index in range(slices)
        ]
    )
