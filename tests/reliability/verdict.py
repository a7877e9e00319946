"""What a fault run left behind, judged: duplicates, unexplained misses, lost outcomes, audit lies.

The inputs are the ledger, the executors' side-effect file (see ``reliability_jobs.py``) and the
replicas' logs (for the ``run.finished`` audit lines); nothing here trusts the host's own account
of what it did.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from jobhost.records import RunRecord

__all__ = ["Effect", "Verdict", "audit_mismatches", "judge", "log_kinds", "read_effects"]

RAN = frozenset({"succeeded", "failed", "timed_out", "cancelled"})
NOT_RUN = frozenset({"missed", "skipped", "abandoned"})
UNRESOLVED = frozenset({"running", "pending"})
KILL_EXCUSE = 10.0
_AUDIT = re.compile(r"jobhost\.audit: (\{.*\})$", re.MULTILINE)
_VARIABLE = re.compile(r"\b[0-9a-f]{16,}\b|\d{4}-\d\d-\d\d[T ][\d:.]+Z?|\d+(\.\d+)?")


@dataclass(frozen=True)
class Effect:
    """One line of the side-effect file: an executor began or ended one execution."""

    event: str
    job: str
    occurrence: datetime | None
    run_id: str
    attempt: int
    pid: int
    at: float


@dataclass
class Verdict:
    executions: int = 0
    occurrences: int = 0
    duplicates: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    misses_by_reason: Counter[str] = field(default_factory=Counter)
    outcomes_lost: list[str] = field(default_factory=list)
    audit_mismatches: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"occurrences judged: {self.occurrences}; executions: {self.executions}",
            f"duplicates: {len(self.duplicates)}",
            *(f"  {d}" for d in self.duplicates[:10]),
            f"unexplained misses: {len(self.unexplained)}",
            *(f"  {u}" for u in self.unexplained[:10]),
            f"explained misses: {sum(self.misses_by_reason.values())}",
            *(f"  {n:5d}  {reason}" for reason, n in self.misses_by_reason.most_common(12)),
            f"outcomes lost: {len(self.outcomes_lost)}",
            *(f"  {o}" for o in self.outcomes_lost[:10]),
            f"audit outcome != ledger outcome: {len(self.audit_mismatches)}",
            *(f"  {a}" for a in self.audit_mismatches[:10]),
        ]
        return out


def read_effects(path: Path) -> list[Effect]:
    if not path.exists():
        return []
    effects: list[Effect] = []
    for line in path.read_text().splitlines():
        event, job, occurrence, run_id, attempt, pid, at = line.split()
        effects.append(
            Effect(
                event,
                job,
                None if occurrence == "-" else datetime.fromisoformat(occurrence),
                run_id,
                int(attempt),
                int(pid),
                float(at),
            )
        )
    return effects


def judge(
    rows: list[RunRecord],
    effects: list[Effect],
    *,
    jobs: Iterable[str],
    first: datetime,
    last: datetime,
    killed: Mapping[int, float],
    logs: str = "",
) -> Verdict:
    """Judge every every-second occurrence of ``jobs`` from ``first`` to ``last`` inclusive.

    ``killed`` maps each pid killed with SIGKILL to when it was (Unix time).
    """
    verdict = Verdict(executions=sum(1 for e in effects if e.event == "begin"))
    _duplicates(verdict, rows, effects)
    by_occurrence: dict[tuple[str, datetime], list[RunRecord]] = defaultdict(list)
    for row in rows:
        if row.occurrence is not None:
            by_occurrence[(row.job_name, row.occurrence)].append(row)
    seconds = int((last - first).total_seconds())
    for job in jobs:
        for step in range(seconds + 1):
            occurrence = first + timedelta(seconds=step)
            verdict.occurrences += 1
            _judge_occurrence(verdict, job, occurrence, by_occurrence.get((job, occurrence), []))
    verdict.outcomes_lost = _outcomes_lost(rows, effects, killed)
    verdict.audit_mismatches = audit_mismatches(rows, logs)
    return verdict


def recorded(rows: list[RunRecord], effects: list[Effect]) -> list[RunRecord]:
    """``rows`` once every run whose executor completed in ``effects`` has its outcome in them
    (the host records a moment after the executor ends), else an empty list to wait on."""
    completed = {e.run_id for e in effects if e.event == "end"}
    return [] if any(r.id in completed and r.outcome == "running" for r in rows) else rows


def audit_mismatches(rows: list[RunRecord], logs: str) -> list[str]:
    """Every ``run.finished`` audit line whose outcome is not the ledger's for that run."""
    outcome_of = {row.id: row.outcome for row in rows}
    found: list[str] = []
    for match in _AUDIT.finditer(logs):
        entry = json.loads(match.group(1))
        if entry.get("event") != "run.finished":
            continue
        ledger_outcome = outcome_of.get(entry["run_id"])
        if ledger_outcome != entry["outcome"]:
            found.append(
                f"{entry['job_name']} run {entry['run_id']}: audit says {entry['outcome']}, "
                f"ledger says {ledger_outcome}"
            )
    return found


def log_kinds(logs: str, levels: tuple[str, ...] = ("WARNING", "ERROR")) -> Counter[str]:
    """Warning and error lines counted by kind: ids, times and numbers folded away."""
    kinds: Counter[str] = Counter()
    for line in logs.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in levels:
            kinds[f"{parts[2]} {_VARIABLE.sub('N', parts[3])[:110]}"] += 1
    return kinds


def _duplicates(verdict: Verdict, rows: list[RunRecord], effects: list[Effect]) -> None:
    begun = Counter((e.job, e.occurrence, e.attempt) for e in effects if e.event == "begin")
    for (job, occurrence, attempt), count in sorted(begun.items(), key=str):
        if occurrence is not None and count > 1:
            verdict.duplicates.append(
                f"{job} {occurrence:%H:%M:%S} attempt {attempt} executed {count} times"
            )
    verdicts: dict[tuple[str, datetime], set[str]] = defaultdict(set)
    for row in rows:
        if row.occurrence is not None and row.source != "retry":
            verdicts[(row.job_name, row.occurrence)].add(row.outcome)
    for (job, occurrence), outcomes in sorted(verdicts.items(), key=str):
        not_run = outcomes & {"missed", "skipped"}
        if not_run and outcomes - not_run:
            verdict.duplicates.append(
                f"{job} {occurrence:%H:%M:%S} recorded both {' and '.join(sorted(outcomes))}"
            )


def _judge_occurrence(
    verdict: Verdict, job: str, occurrence: datetime, found: list[RunRecord]
) -> None:
    where = f"{job} {occurrence:%H:%M:%S}"
    if not found:
        verdict.unexplained.append(f"{where}: no ledger row")
        return
    final = max(found, key=lambda r: r.attempt)
    if final.outcome in RAN:
        return
    if final.outcome in UNRESOLVED:
        verdict.unexplained.append(f"{where}: still {final.outcome} at the end")
        return
    reason = (final.reason or final.error_message or "").strip()
    if final.outcome not in NOT_RUN or not reason:
        verdict.unexplained.append(f"{where}: {final.outcome} with no reason")
        return
    verdict.misses_by_reason[f"{final.outcome}: {_VARIABLE.sub('N', reason)[:90]}"] += 1


def _outcomes_lost(
    rows: list[RunRecord], effects: list[Effect], killed: Mapping[int, float]
) -> list[str]:
    """Executions whose executor completed in a host that lived on, without their outcome.

    A host killed within ``KILL_EXCUSE`` seconds of its executor completing is excused: it may
    have died before it could write the outcome. Later than that, it had its chance.
    """
    outcome_of = {row.id: row.outcome for row in rows}
    lost: list[str] = []
    for effect in effects:
        if effect.event != "end":
            continue
        if effect.pid in killed and killed[effect.pid] - effect.at < KILL_EXCUSE:
            continue
        outcome = outcome_of.get(effect.run_id)
        if outcome is None or outcome in UNRESOLVED or outcome == "abandoned":
            lost.append(f"{effect.job} run {effect.run_id}: executor completed, ledger: {outcome}")
    return lost
