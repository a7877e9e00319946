"""Which environment variables a runtime job may read as secrets: only those the operator made
available to runtime jobs (``runtime_secret_env_prefix``, ``runtime_secrets_allowed``).

A job created through the API names the variables its kind reads (an ``http`` job's
``secret_headers``); every other variable (``HOME``, ``JOBHOST_DATABASE_URL``) is refused, so a
token that may write jobs cannot send the host's own secrets to a URL of its choosing. Declared
jobs are the operator's own and are not held to this rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from jobhost_contracts import JobKind
from returns.result import Failure, Result

from jobhost.config import Settings
from jobhost.runtime.definition import FieldProblem

__all__ = ["RefusedSecrets", "SecretRule", "refused_executor"]


@dataclass(frozen=True)
class SecretRule:
    """The variables runtime jobs may read: by ``prefix``, or named in ``allowed``."""

    prefix: str
    allowed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, settings: Settings) -> SecretRule:
        return cls(settings.runtime_secret_env_prefix, frozenset(settings.runtime_secrets_allowed))

    def permits(self, variable: str) -> bool:
        return (variable.startswith(self.prefix) and variable != self.prefix) or (
            variable in self.allowed
        )

    def check(self, kind: JobKind, validated: object) -> list[FieldProblem]:
        """A problem for each variable the job's settings name that this rule refuses."""
        if kind.secret_variables is None:
            return []
        named: Mapping[str, str] = kind.secret_variables(validated)
        return [
            FieldProblem(f"settings.{field}", self.refusal(variable))
            for field, variable in named.items()
            if not self.permits(variable)
        ]

    def refusal(self, variable: str) -> str:
        allowed = f" or one of runtime_secrets_allowed ({', '.join(sorted(self.allowed))})"
        return (
            f"environment variable {variable} is not available to runtime jobs: they may read "
            f"only variables named {self.prefix}* (runtime_secret_env_prefix)"
            f"{allowed if self.allowed else ''}; ask the operator to provide the secret as "
            f"{self.prefix}{_suffix(variable)}"
        )


class RefusedSecrets(Exception):
    """A stored runtime job names a variable it may not read; the run fails without reading."""


def refused_executor(problems: list[FieldProblem]) -> _Refused:
    """An executor whose every run fails with ``problems``, reading nothing."""
    return _Refused("; ".join(problem.line() for problem in problems))


class _Refused:
    def __init__(self, message: str) -> None:
        self._message = message

    def execute(self, context: object) -> Result[None, RefusedSecrets]:
        return Failure(RefusedSecrets(self._message))


def _suffix(variable: str) -> str:
    return variable.removeprefix("JOBHOST_") or "NAME"
