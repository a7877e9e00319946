"""Host and configuration errors: one base class, each message naming what and how to fix.

Job outcomes are values (``returns.Result``) and never pass through here.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "HostIdInUseError",
    "JobhostError",
    "SchemaTooNewError",
    "StoreMissingError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "UnknownJobError",
    "shown_name",
]

_LONGEST_SHOWN_NAME = 200


def shown_name(name: str) -> str:
    """``name`` quoted for a message, or ``of N characters`` when it is too long to repeat: an
    answer stays small, whatever a caller sent."""
    return repr(name) if len(name) <= _LONGEST_SHOWN_NAME else f"of {len(name)} characters"


class JobhostError(Exception):
    """Base of every error the host raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code = 1


class ConfigError(JobhostError):
    """Settings that cannot be used; the message names the field, the value and what is allowed."""

    exit_code = 3

    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid configuration ({source}):\n{lines}")


class UnknownJobError(JobhostError, LookupError):
    """A command named a job nobody declares; the message suggests the closest names."""

    exit_code = 2

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown job {shown_name(name)}{hint}")


class StoreUnavailableError(JobhostError):
    """The database cannot be reached or its schema is not current."""


class StoreMissingError(JobhostError):
    """A command other than ``run`` or ``db upgrade`` was pointed at an SQLite file that does not
    exist: it refuses to create a new, empty store beside the real one."""

    exit_code = 3


class StoreReadOnlyError(JobhostError):
    """A command that writes was given a store file this process may only read."""

    exit_code = 3


class SchemaTooNewError(JobhostError):
    """The store was migrated by a newer jobhost: this one must not read or change it."""

    exit_code = 3

    def __init__(self, current: str, head: str) -> None:
        super().__init__(
            f"store schema {current} is newer than this jobhost ({head}): upgrade jobhost "
            "(every replica and every command must run the newer version; a schema is never "
            "downgraded)"
        )


class HostIdInUseError(JobhostError):
    """Another live host already runs under this ``host_id``."""

    exit_code = 3
