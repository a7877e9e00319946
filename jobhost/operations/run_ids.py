"""Run ids as people type them: the whole id, or a unique start of it of at least
:data:`MIN_PREFIX` hex characters."""

from __future__ import annotations

import string

from jobhost.records import RunIdMatch
from jobhost.store import Store

__all__ = ["MIN_PREFIX", "SHOWN_CANDIDATES", "AmbiguousRunId", "resolve_run_id"]

MIN_PREFIX = 8
"""Hex characters a prefix needs: fewer would match too many runs of a large ledger."""
SHOWN_CANDIDATES = 10
"""Runs an ambiguous prefix lists (it says when there are more)."""


class AmbiguousRunId(LookupError):
    """A prefix that starts several runs' ids."""

    def __init__(self, prefix: str, candidates: list[RunIdMatch], more: bool) -> None:
        self.prefix = prefix
        self.candidates = candidates
        self.more = more
        count = f"more than {len(candidates)}" if more else str(len(candidates))
        super().__init__(f"run id {prefix!r} is ambiguous: it starts {count} run ids")


def resolve_run_id(store: Store, typed: str) -> str:
    """The run id ``typed`` stands for: itself when it names a run or cannot be a prefix (so the
    caller's own "no run" answer follows), else the one run whose id starts with it.

    Raises :class:`AmbiguousRunId` when it starts several."""
    prefix = typed.strip().lower()
    if len(prefix) < MIN_PREFIX or not set(prefix) <= set(string.hexdigits.lower()):
        return typed
    found = store.runs_by_prefix(prefix, limit=SHOWN_CANDIDATES + 1)
    if any(match.id == prefix for match in found):
        return prefix
    if len(found) == 1:
        return found[0].id
    if not found:
        return typed
    raise AmbiguousRunId(prefix, list(found[:SHOWN_CANDIDATES]), len(found) > SHOWN_CANDIDATES)
