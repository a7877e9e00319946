"""The ``[modules.files]`` section of ``jobhost.toml``, checked at start-up through
:func:`jobhost_contracts.module_settings`, so a typo never reaches a run that deletes files."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from jobhost_contracts import (
    flag,
    non_empty_text,
    non_negative_duration,
    redact_text,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["SECTION", "CleanupMode", "FilesSettings"]

SECTION = "files"


class CleanupMode(StrEnum):
    QUARANTINE = "quarantine"
    """Moved under ``root/.jobhost-quarantine/YYYY-MM-DD/``, purged after ``quarantine_days``."""
    DELETE = "delete"
    """Removed at once."""


def _root(value: object) -> Path:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            "required, the path of an existing directory whose files the application references"
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        raise ValueError(
            "is not an existing directory; give the directory whose files the application "
            "references"
        )
    # Resolved once, so that "inside root" is decided against the real directory.
    return path.resolve()


def _required_text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("required, a non-empty string (without it every file would look orphaned)")
    return value


def _references_url(value: object) -> str:
    url = _required_text(value)
    try:
        make_url(url)
    except ArgumentError:
        raise ValueError(
            "is not an SQLAlchemy URL; write e.g. 'sqlite:////srv/app/app.db' or "
            "'postgresql+psycopg://user@host/app'"
        ) from None
    return url


def _positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError("must be a whole number greater than 0")
    return value


def _mode(value: object) -> CleanupMode:
    if isinstance(value, str) and value in CleanupMode.__members__.values():
        return CleanupMode(value)
    raise ValueError(f"must be {' or '.join(repr(mode.value) for mode in CleanupMode)}")


_Flag = Annotated[bool, BeforeValidator(flag)]
_Count = Annotated[int, BeforeValidator(_positive_int)]
_Text = Annotated[str, BeforeValidator(non_empty_text)]


class FilesSettings(BaseModel):
    """The checked section. ``repr`` hides the password of ``references_url``."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    # Required fields default to None and validate it, so a missing one gets the same refusal
    # (naming what to write) as an empty one.
    root: Annotated[Path, BeforeValidator(_root)] = Field(None, validate_default=True)
    references_url: Annotated[str, BeforeValidator(_references_url)] = Field(
        None, validate_default=True
    )
    references_query: Annotated[str, BeforeValidator(_required_text)] = Field(
        None, validate_default=True
    )
    min_age: Annotated[timedelta, BeforeValidator(non_negative_duration)] = timedelta(hours=24)
    batch_size: _Count = 200
    mode: Annotated[CleanupMode, BeforeValidator(_mode)] = CleanupMode.QUARANTINE
    quarantine_days: _Count = 7
    dry_run: _Flag = False
    cron: _Text = "17 3 * * *"
    timezone: _Text = "UTC"
    enabled: _Flag = True
    allow_empty_references: _Flag = False
    """An empty reference list usually means a wrong query or database, not "nothing is used"."""

    def __repr__(self) -> str:
        shown = dict(self) | {
            "root": str(self.root),
            "references_url": redact_text(self.references_url),
            "mode": self.mode.value,
        }
        return f"FilesSettings({', '.join(f'{key}={value!r}' for key, value in shown.items())})"

    __str__ = __repr__
