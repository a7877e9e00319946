"""Reading settings: the file named by ``--config`` or ``JOBHOST_CONFIG``, then the environment."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jobhost.config.redaction import redact_url
from jobhost.config.settings import Settings
from jobhost.errors import ConfigError

__all__ = ["CONFIG_ENV", "load_settings"]

CONFIG_ENV = "JOBHOST_CONFIG"


def load_settings(path: str | os.PathLike[str] | None = None) -> Settings:
    """Load and validate the settings; raise :class:`ConfigError` listing every bad field.

    No file (neither ``path`` nor ``JOBHOST_CONFIG``) means defaults plus the environment; a file
    that was named but does not exist is an error, since a typo must not silently run defaults.
    """
    named = path if path is not None else os.environ.get(CONFIG_ENV) or None
    data: dict[str, Any] = {}
    source = "defaults and environment"
    if named is not None:
        file = Path(named)
        source = str(file)
        try:
            with file.open("rb") as handle:
                data = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigError([f"configuration file {file} does not exist"], source) from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError([f"{file} is not valid TOML: {error}"], source) from None
    try:
        return Settings(**data)
    except ValidationError as error:
        raise ConfigError(_describe(error), source) from None


def _describe(error: ValidationError) -> list[str]:
    problems: list[str] = []
    for item in error.errors():
        location = ".".join(_key(part) for part in item["loc"])
        field = str(item["loc"][0]) if item["loc"] else ""
        value = item.get("input")
        if field == "database_url" and isinstance(value, str):
            value = redact_url(value)
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "is not a known setting; see docs/operations/settings.md"
            problems.append(f"{location}: {message}")
            continue
        env = f" (environment JOBHOST_{field.upper()})" if field and "." not in location else ""
        problems.append(f"{location}{env} = {value!r}: {message}")
    return problems


def _key(part: object) -> str:
    """A TOML key as it is written: quoted when it holds a dot (``jobs."files.cleanup"``)."""
    text = str(part)
    return f'"{text}"' if "." in text else text
