"""The ``[modules.files]`` section of ``jobhost.toml``, read and checked once at start-up.

Every refusal is a ``ValueError`` naming the field, the value and what is allowed: the host reports
it as a plugin problem before it starts, so a typo never reaches a run that deletes files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

from jobhost_contracts import parse_duration, redact_text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["SECTION", "CleanupMode", "FilesSettings", "parse_settings"]

SECTION = "files"
"""The module's section name: ``[modules.files]``."""

_DEFAULT_CRON = "17 3 * * *"
_KNOWN = frozenset(
    {
        "root",
        "references_url",
        "references_query",
        "min_age",
        "batch_size",
        "mode",
        "quarantine_days",
        "dry_run",
        "cron",
        "timezone",
        "enabled",
        "allow_empty_references",
    }
)


class CleanupMode(StrEnum):
    """What happens to an orphaned file."""

    QUARANTINE = "quarantine"
    """Moved under ``root/.jobhost-quarantine/YYYY-MM-DD/``, purged after ``quarantine_days``."""
    DELETE = "delete"
    """Removed at once."""


@dataclass(frozen=True, kw_only=True)
class FilesSettings:
    """The checked section. ``repr`` hides the password of ``references_url``."""

    root: Path
    references_url: str
    references_query: str
    min_age: timedelta = timedelta(hours=24)
    batch_size: int = 200
    mode: CleanupMode = CleanupMode.QUARANTINE
    quarantine_days: int = 7
    dry_run: bool = False
    cron: str = _DEFAULT_CRON
    timezone: str = "UTC"
    enabled: bool = True
    allow_empty_references: bool = False
    """An empty reference list usually means a wrong query or database, not "nothing is used"."""

    def __repr__(self) -> str:
        return (
            f"FilesSettings(root={str(self.root)!r}, "
            f"references_url={redact_text(self.references_url)!r}, "
            f"references_query={self.references_query!r}, min_age={self.min_age!r}, "
            f"batch_size={self.batch_size}, mode={self.mode.value!r}, "
            f"quarantine_days={self.quarantine_days}, dry_run={self.dry_run}, "
            f"cron={self.cron!r}, timezone={self.timezone!r}, enabled={self.enabled}, "
            f"allow_empty_references={self.allow_empty_references})"
        )


def parse_settings(section: Mapping[str, Any]) -> FilesSettings:
    """Check ``section`` and return it typed; raise ``ValueError`` naming the first bad field."""
    unknown = sorted(str(key) for key in section if key not in _KNOWN)
    if unknown:
        raise ValueError(
            f"[modules.files] {unknown[0]!r} is not a known setting; allowed: "
            f"{', '.join(sorted(_KNOWN))}"
        )
    root = _root(section)
    return FilesSettings(
        root=root,
        references_url=_references_url(section),
        references_query=_required_text(section, "references_query"),
        min_age=_duration(section, "min_age", timedelta(hours=24)),
        batch_size=_positive_int(section, "batch_size", 200),
        mode=_mode(section),
        quarantine_days=_positive_int(section, "quarantine_days", 7),
        dry_run=_flag(section, "dry_run", default=False),
        cron=_text(section, "cron", _DEFAULT_CRON),
        timezone=_text(section, "timezone", "UTC"),
        enabled=_flag(section, "enabled", default=True),
        allow_empty_references=_flag(section, "allow_empty_references", default=False),
    )


def _root(section: Mapping[str, Any]) -> Path:
    value = section.get("root")
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"[modules.files] root = {value!r}: required, the path of an existing directory "
            "whose files the application references"
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        raise ValueError(
            f"[modules.files] root = {value!r}: is not an existing directory; "
            "give the directory whose files the application references"
        )
    # Resolved once, so that "inside root" is decided against the real directory.
    return path.resolve()


def _references_url(section: Mapping[str, Any]) -> str:
    value = _required_text(section, "references_url")
    try:
        make_url(value)
    except ArgumentError:
        raise ValueError(
            f"[modules.files] references_url = {redact_text(value)!r}: is not an SQLAlchemy URL; "
            "write e.g. 'sqlite:////srv/app/app.db' or 'postgresql+psycopg://user@host/app'"
        ) from None
    return value


def _required_text(section: Mapping[str, Any], name: str) -> str:
    value = section.get(name)
    if not isinstance(value, str) or not value.strip():
        shown = redact_text(value) if isinstance(value, str) else value
        raise ValueError(
            f"[modules.files] {name} = {shown!r}: required, a non-empty string (without it "
            "every file would look orphaned)"
        )
    return value


def _text(section: Mapping[str, Any], name: str, default: str) -> str:
    value = section.get(name, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"[modules.files] {name} = {value!r}: must be a non-empty string")
    return value


def _duration(section: Mapping[str, Any], name: str, default: timedelta) -> timedelta:
    value = section.get(name, default)
    try:
        duration = parse_duration(value)
    except ValueError as error:
        raise ValueError(f"[modules.files] {name} = {value!r}: {error}") from None
    if duration < timedelta(0):
        raise ValueError(f"[modules.files] {name} = {value!r}: must not be negative, e.g. '24h'")
    return duration


def _positive_int(section: Mapping[str, Any], name: str, default: int) -> int:
    value = section.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"[modules.files] {name} = {value!r}: must be a whole number greater than 0"
        )
    return value


def _flag(section: Mapping[str, Any], name: str, *, default: bool) -> bool:
    value = section.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"[modules.files] {name} = {value!r}: must be true or false")
    return value


def _mode(section: Mapping[str, Any]) -> CleanupMode:
    value = section.get("mode", CleanupMode.QUARANTINE.value)
    try:
        return CleanupMode(value)
    except ValueError:
        allowed = " or ".join(repr(mode.value) for mode in CleanupMode)
        raise ValueError(f"[modules.files] mode = {value!r}: must be {allowed}") from None
