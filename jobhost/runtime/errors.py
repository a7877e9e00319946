"""Why a change to a job was refused, with the HTTP status and the exit code it maps to."""

from __future__ import annotations

from collections.abc import Sequence

from jobhost.errors import JobhostError, shown_name
from jobhost.runtime.definition import FieldProblem

__all__ = ["ChangeRefused", "conflict", "invalid", "not_found", "precondition", "stale"]


class ChangeRefused(JobhostError):
    """``status`` is the API's answer (404, 409, 412, 422); ``problems`` name the fields."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        problems: Sequence[FieldProblem] = (),
        exit_code: int = 1,
        headline: str | None = None,
    ) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.problems = list(problems)
        self.exit_code = exit_code
        lines = "".join(f"\n  {p.line()}" for p in self.problems)
        super().__init__(f"{headline or detail}{lines}")


def invalid(name: str, problems: Sequence[FieldProblem]) -> ChangeRefused:
    first = problems[0].line() if problems else "the definition is invalid"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return ChangeRefused(
        422,
        "Invalid job definition",
        f"job {name}: {first}{more}",
        problems=problems,
        exit_code=3,
        headline=f"job {name}: the definition is refused:",
    )


def not_found(name: str, what: str = "job") -> ChangeRefused:
    return ChangeRefused(
        404,
        "No such job",
        f"no {what} {shown_name(name)}; list them with GET /api/v1/jobs or `jobhost jobs list`",
        exit_code=2,
    )


def conflict(detail: str) -> ChangeRefused:
    return ChangeRefused(409, "Conflict", detail)


def precondition(detail: str) -> ChangeRefused:
    return ChangeRefused(412, "Precondition failed", detail)


def stale(name: str, given: str, current: str | None) -> ChangeRefused:
    now = f"it is now {current}" if current else "it no longer exists"
    return ChangeRefused(
        412,
        "Precondition failed",
        f"job {name} changed since you read it (If-Match {given}; {now}); read it again "
        "(GET its ETag) and repeat the change",
    )
