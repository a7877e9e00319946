"""What a run of ``files.orphan-cleanup`` returns: a report on success, an error on failure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from jobhost_contracts import StaleLeaseError, redact_text

__all__ = [
    "CleanupError",
    "CleanupReport",
    "LeaseLost",
    "NoReferences",
    "NotConfigured",
    "ReferencesUnavailable",
    "RootUnavailable",
]


@dataclass(slots=True)
class CleanupReport:
    """What one run did. ``complete``: False when cancelled mid-walk. ``skipped``: what was
    refused for safety (links, special files, the quarantine, unusable references)."""

    scanned: int = 0
    orphaned: int = 0
    moved: int = 0
    deleted: int = 0
    purged: int = 0
    skipped: int = 0
    errors: int = 0
    complete: bool = False
    dry_run: bool = False

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)

    def __str__(self) -> str:
        return ", ".join(f"{key}={value}" for key, value in self.as_dict().items())


class CleanupError(Exception):
    """A run that could not do its work; returned as a ``Failure``, never raised."""


class NotConfigured(CleanupError):
    def __init__(self) -> None:
        super().__init__(
            "the files module is not configured: add [modules.files] with root, "
            "references_url and references_query to jobhost.toml"
        )


class RootUnavailable(CleanupError):
    def __init__(self, root: Path, reason: str) -> None:
        super().__init__(f"root {str(root)!r} {reason}; no file was touched")


class ReferencesUnavailable(CleanupError):
    def __init__(self, reason: str) -> None:
        self.reason = redact_text(reason)
        super().__init__(f"the references query failed, so no file was touched: {self.reason}")


class NoReferences(CleanupError):
    """No rows, not declared possible: a wrong query or database looks like "nothing is
    referenced", which would orphan every file."""

    def __init__(self) -> None:
        super().__init__(
            "the references query returned no rows, so no file was touched; if the application "
            "really references nothing, set [modules.files] allow_empty_references = true"
        )


class LeaseLost(CleanupError):
    def __init__(self, error: StaleLeaseError, report: CleanupReport) -> None:
        super().__init__(
            f"lease lost to another replica (fencing token {error.token} < {error.current}); "
            f"stopped without moving the cursor, after: {report}"
        )
        self.report = report
